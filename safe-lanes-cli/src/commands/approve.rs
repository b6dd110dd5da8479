//! `grant requests | show | approve | review`: the human sees exactly the change a request
//! makes before approving it, and an approval binds to that change.
//!
//! On a terminal, `approve` shows the change and asks; without one it must be spelled out
//! (`--alias`, `--access`, `--path`; `--digest` checked when given), and the library refuses it
//! when the request, or the grant it changes, is no longer what it spells out.

use std::fmt::Write as _;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use safe_lanes::grants::{Proposal, Proposed, Seen};
use safe_lanes::{Alias, Grants, Shown};
use serde_json::json;

use crate::args::ApproveArgs;
use crate::output::Report;

/// Where the grants are, for the approve lines shown.
#[derive(Clone, Copy)]
pub(crate) struct Where<'a> {
    pub(crate) root: &'a Path,
    pub(crate) manifest: Option<&'a Path>,
}

/// One request as the human reads it: the change first, the reason quoted on its own lines.
pub(crate) fn block(p: &Proposal, at: Where<'_>) -> String {
    let r = &p.request;
    let mut text = format!("request {}\n", r.id);
    let _ = writeln!(text, "  change:  {}", p.change.describe());
    let by = r.requested_by.as_deref().unwrap_or("(not recorded)");
    let _ = writeln!(
        text,
        "  filed:   {} by {}",
        Shown::text(&r.requested_at),
        Shown::text(by)
    );
    text.push_str("  reason:\n");
    for line in r.reason_lines() {
        let _ = writeln!(text, "    | {line}");
    }
    let _ = writeln!(text, "  digest:  {}", p.digest);
    let _ = writeln!(
        text,
        "  approve: {}",
        p.approve_command(at.root, at.manifest)
    );
    text
}

/// `grant requests`.
pub(crate) fn requests(grants: &Grants, at: Where<'_>) -> Result<Report> {
    let proposals = grants.proposals()?;
    let text = if proposals.is_empty() {
        "no pending requests".to_owned()
    } else {
        proposals
            .iter()
            .map(|p| block(p, at))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let requests: Vec<_> = proposals.iter().map(|p| &p.request).collect();
    Ok(Report::ok(
        json!({ "requests": requests, "proposals": proposals }),
        text,
    ))
}

/// `grant show ID`.
pub(crate) fn show(grants: &Grants, at: Where<'_>, request_id: &str) -> Result<Report> {
    let proposal = grants.proposal(request_id)?;
    let mut json = json!(proposal);
    json["approve_with"] = json!(proposal.approve_command(at.root, at.manifest));
    Ok(Report::ok(json, block(&proposal, at)))
}

/// `grant approve`: asked on a terminal, spelled out without one.
pub(crate) fn approve(
    grants: &Grants,
    at: Where<'_>,
    a: ApproveArgs,
    actor: &str,
) -> Result<Report> {
    let proposal = grants.proposal(&a.request_id)?;
    let terminal = std::io::stdin().is_terminal();
    let seen = match (&a.alias, a.access) {
        (Some(alias), Some(access)) => Seen {
            alias: Alias::new(alias)?,
            access: access.into(),
            path: a.path.clone(),
            digest: a.digest.clone(),
        },
        _ if terminal => shown(&proposal, a.path.clone()),
        _ => bail!(safe_lanes::Error::InvalidArgument {
            what: Shown::text(&a.request_id),
            why: "without a terminal, spell the change out: --alias, --access and --path as \
                  `safe-lanes grant show ID` prints them"
                .into(),
        }),
    };
    if terminal
        && !confirm(&format!(
            "{}Approve this change? [y/N] ",
            block(&proposal, at)
        ))?
    {
        return Ok(Report::ok(json!({ "approved": false }), "not approved"));
    }
    let widens = proposal.change.raises_access();
    let reason = if terminal && widens && a.reason.trim().is_empty() {
        ask("this raises the grant's access; reason (for the changelog): ")?
    } else {
        a.reason.clone()
    };
    let grant = grants.approve_seen(&a.request_id, &seen, a.path.as_deref(), &reason, actor)?;
    let mut text = format!(
        "approved {} {} {} ({})",
        grant.alias,
        grant.access,
        Shown::path(&grant.path),
        grant.id
    );
    text.push_str(&super::grant::unrecorded_warning(grant.recorded()));
    let mut json = json!(grant);
    json["env"] = json!(grant.alias.env_key());
    Ok(Report::ok(json, text))
}

/// The approval of what `proposal` shows, with the folder the human chose.
fn shown(proposal: &Proposal, chosen: Option<PathBuf>) -> Seen {
    let (alias, access, path) = proposal.change.target();
    Seen {
        alias: alias.clone(),
        access,
        path: chosen.or_else(|| path.map(Path::to_path_buf)),
        digest: Some(proposal.digest.clone()),
    }
}

/// `grant review`: each pending request in turn, on a terminal.
pub(crate) fn review(grants: &Grants, at: Where<'_>, actor: &str) -> Result<Report> {
    if !std::io::stdin().is_terminal() {
        bail!(safe_lanes::Error::InvalidArgument {
            what: Shown::text("grant review"),
            why: "needs a terminal; without one, use `grant approve` with the change spelled out"
                .into(),
        });
    }
    let (mut approved, mut denied) = (Vec::new(), Vec::new());
    for proposal in grants.proposals()? {
        let id = proposal.request.id.clone();
        let question = format!(
            "{}[a]pprove, [d]eny, [s]kip, [q]uit? ",
            block(&proposal, at)
        );
        match ask(&question)?.as_str() {
            "a" => {
                let chosen = needs_folder(&proposal.change)
                    .then(|| ask("folder to grant (absolute path): ").map(PathBuf::from))
                    .transpose()?;
                let reason = ask("reason (for the changelog): ")?;
                let seen = shown(&proposal, chosen.clone());
                grants.approve_seen(&id, &seen, chosen.as_deref(), &reason, actor)?;
                approved.push(id);
            }
            "d" => {
                let reason = ask("reason (the agent sees it): ")?;
                grants.deny(&id, &reason, actor)?;
                denied.push(id);
            }
            "q" => break,
            _ => {}
        }
    }
    let text = format!("approved {}, denied {}", approved.len(), denied.len());
    Ok(Report::ok(
        json!({ "approved": approved, "denied": denied }),
        text,
    ))
}

fn needs_folder(change: &Proposed) -> bool {
    matches!(change, Proposed::New { path: None, .. })
}

/// Ask on the terminal; the answer's first line, trimmed.
fn ask(question: &str) -> Result<String> {
    let mut err = std::io::stderr().lock();
    err.write_all(question.as_bytes())?;
    err.flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(line.trim().to_owned())
}

fn confirm(question: &str) -> Result<bool> {
    Ok(matches!(ask(question)?.as_str(), "y" | "yes"))
}
