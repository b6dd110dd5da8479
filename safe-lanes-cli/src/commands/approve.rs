//! `grant requests | show | approve | review`: the human sees exactly the change a request
//! makes before approving it, and an approval binds to that change.
//!
//! On a terminal, `approve` shows the change and asks; without one it must be spelled out
//! (`--alias`, `--access`, `--path`; `--digest` checked when given), and the library refuses it
//! when the request, or the grant it changes, is no longer what it spells out.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use safe_lanes::grants::{Grant, Proposal, Recorded, Review, Seen, Standing};
use safe_lanes::{Access, Alias, Grants, Shown};
use serde_json::json;

use super::ask;
use crate::args::ApproveArgs;
use crate::output::Report;

/// Where the grants are, for the approve lines shown.
#[derive(Clone, Copy)]
pub(crate) struct Where<'a> {
    pub(crate) root: &'a Path,
    pub(crate) manifest: Option<&'a Path>,
}

/// One request as the human reads it: the change first, the reason quoted on its own lines,
/// then what the change would give (the review), and how to approve it.
pub(crate) fn block(p: &Proposal, review: &Review, at: Where<'_>) -> String {
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
    text.push_str(&review_text(review));
    let _ = writeln!(text, "  digest:  {}", p.digest);
    let _ = writeln!(
        text,
        "  approve: {}",
        p.approve_command(at.root, at.manifest)
    );
    text
}

/// What a change would give, as the terminal shows it: the folder and its size, what the
/// access allows, the protected paths, every warning and, when it would be refused, why.
pub(crate) fn review_text(review: &Review) -> String {
    let mut text = String::new();
    if let Some(folder) = &review.folder {
        let size = &folder.size;
        let _ = writeln!(
            text,
            "  folder:  {}: {}{}",
            Shown::path(&folder.path),
            size.in_words(),
            if folder.repository {
                "; a git repository"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(text, "  allows:  {}", review.allows);
    for w in &review.warnings {
        let _ = writeln!(text, "  warning: {}", w.message);
        if let Some(spelled) = &w.spelled {
            let _ = writeln!(text, "           spelled out: {spelled}");
        }
    }
    if let Some(why) = &review.refused {
        let _ = writeln!(text, "  refused as it stands: {why}");
    }
    text
}

/// `grant requests`.
pub(crate) fn requests(grants: &Grants, at: Where<'_>) -> Result<Report> {
    let proposals = grants.proposals()?;
    let text = if proposals.is_empty() {
        NOTHING_PENDING.to_owned()
    } else {
        proposals
            .iter()
            .map(|p| block(p, &grants.review_proposal(p, None), at))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let requests: Vec<_> = proposals.iter().map(|p| &p.request).collect();
    Ok(Report::ok(
        json!({ "requests": requests, "proposals": proposals }),
        text,
    ))
}

/// What `grant requests` and `grant review` say when nothing is pending.
const NOTHING_PENDING: &str = "no pending requests";

/// `grant show ID`.
pub(crate) fn show(grants: &Grants, at: Where<'_>, request_id: &str) -> Result<Report> {
    let proposal = grants.proposal(request_id)?;
    let review = grants.review_proposal(&proposal, None);
    let mut json = json!(proposal);
    json["approve_with"] = json!(proposal.approve_command(at.root, at.manifest));
    json["review"] = json!(review);
    Ok(Report::ok(json, block(&proposal, &review, at)))
}

/// `grant approve`: asked on a terminal, spelled out without one.
pub(crate) fn approve(
    grants: &Grants,
    at: Where<'_>,
    a: ApproveArgs,
    actor: &str,
) -> Result<Report> {
    let proposal = grants.proposal(&a.request_id)?;
    let terminal = ask::terminal();
    let mut chosen = a.path.clone();
    let mut review = None;
    if terminal {
        // The change as it stands, then (for a request that names no folder) the folder;
        // asked only when approving can succeed.
        let mut judged = grants.review_proposal(&proposal, chosen.as_deref());
        ask::say(&block(&proposal, &judged, at));
        if judged.standing == Standing::NeedsFolder {
            let (_, access, _) = proposal.change.target();
            let Some(folder) = choose_folder(grants, &proposal, access)? else {
                return Ok(Report::ok(json!({ "approved": false }), "not approved"));
            };
            judged = grants.review_proposal(&proposal, Some(&folder));
            chosen = Some(folder);
        }
        if !judged.standing.is_approvable() {
            // The refusal approving would give, with its code (unless it can succeed now).
            grants.approvable(&a.request_id, chosen.as_deref())?;
        }
        review = Some(judged);
    }
    let seen = match (&a.alias, a.access) {
        (Some(alias), Some(access)) => Seen {
            alias: Alias::new(alias)?,
            access: access.into(),
            path: chosen.clone(),
            digest: a.digest.clone(),
        },
        _ if terminal => shown(&proposal, chosen.clone()),
        _ => bail!(safe_lanes::Error::InvalidArgument {
            what: Shown::text(&a.request_id),
            why: "without a terminal, spell the change out: --alias, --access and --path as \
                  `safe-lanes grant show ID` prints them"
                .into(),
        }),
    };
    let reason = if review.is_some() {
        if !ask::yes("Approve this change? [y/N] ")? {
            return Ok(Report::ok(json!({ "approved": false }), "not approved"));
        }
        ask::reason(&a.reason, "reason (for the changelog): ")?
    } else {
        a.reason.clone()
    };
    let grant = grants.approve_seen(&a.request_id, &seen, chosen.as_deref(), &reason, actor)?;
    let mut text = approved_line(&grant);
    text.push_str(&super::grant::unrecorded_warning(grant.recorded()));
    let mut json = json!(grant);
    json["env"] = json!(grant.alias.env_key());
    Ok(Report::ok(json, text))
}

fn approved_line(grant: &Recorded<Grant>) -> String {
    format!(
        "approved {} {} {} ({})",
        grant.alias,
        grant.access,
        Shown::path(&grant.path),
        grant.id
    )
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

/// What the human decided for one request in `grant review`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decision {
    Approve,
    Deny,
    Skip,
    Quit,
}

const DECISIONS: &[(&[&str], Decision)] = &[
    (&["a", "approve"], Decision::Approve),
    (&["d", "deny"], Decision::Deny),
    (&["s", "skip"], Decision::Skip),
    (&["q", "quit"], Decision::Quit),
];

/// What `grant review` offers for a request that cannot be approved as it stands.
const DECISIONS_REFUSED: &[(&[&str], Decision)] = &[
    (&["d", "deny"], Decision::Deny),
    (&["s", "skip"], Decision::Skip),
    (&["q", "quit"], Decision::Quit),
];

/// What became of one request in `grant review`.
enum Done {
    Approved(Box<Recorded<Grant>>),
    Denied,
    /// Left pending, and why (skipped, the end of input, a refusal).
    Left(String),
}

/// `grant review`: each pending request in turn, on a terminal. No answer derails it: a
/// question asks again until it gets what it accepts, Ctrl-D leaves the current request
/// pending and goes on, and a refusal is said and the next request shown.
pub(crate) fn review(grants: &Grants, at: Where<'_>, actor: &str) -> Result<Report> {
    if !ask::terminal() {
        bail!(safe_lanes::Error::InvalidArgument {
            what: Shown::text("grant review"),
            why: "needs a terminal; without one, use `grant approve` with the change spelled out"
                .into(),
        });
    }
    let proposals = grants.proposals()?;
    let (mut approved, mut denied, mut left) = (Vec::new(), Vec::new(), Vec::new());
    if proposals.is_empty() {
        let json = json!({ "approved": approved, "denied": denied, "left": left });
        return Ok(Report::ok(json, NOTHING_PENDING));
    }
    let total = proposals.len();
    let mut quit = false;
    for (n, proposal) in proposals.iter().enumerate() {
        let id = proposal.request.id.clone();
        let of = format!("{} of {total}", n + 1);
        if quit {
            left.push(id);
            continue;
        }
        let review = grants.review_proposal(proposal, None);
        ask::say(&format!("\n({of}) {}", block(proposal, &review, at)));
        let decided = if matches!(review.standing, Standing::Refused(_)) {
            ask::say("It cannot be approved as it stands: deny it, with a reason, or skip it.");
            ask::choice(
                "[d]eny, [s]kip, [q]uit? ",
                DECISIONS_REFUSED,
                "please answer d (deny), s (skip) or q (quit); Ctrl-D skips",
            )?
        } else {
            ask::choice(
                "[a]pprove, [d]eny, [s]kip, [q]uit? ",
                DECISIONS,
                "please answer a (approve), d (deny), s (skip) or q (quit); Ctrl-D skips",
            )?
        };
        let done = match decided {
            None => Done::Left("skipped (end of input)".into()),
            Some(Decision::Skip) => Done::Left("skipped".into()),
            Some(Decision::Quit) => {
                quit = true;
                Done::Left("left pending: quit".into())
            }
            Some(Decision::Approve) => approve_one(grants, proposal, actor)?,
            Some(Decision::Deny) => deny_one(grants, &id, actor)?,
        };
        match done {
            Done::Approved(grant) => {
                ask::say(&format!("({of}) {}", approved_line(&grant)));
                approved.push(id);
            }
            Done::Denied => {
                ask::say(&format!("({of}) denied {id} ({})", proposal.request.alias));
                denied.push(id);
            }
            Done::Left(why) => {
                ask::say(&format!("({of}) {why}: {id} stays pending"));
                left.push(id);
            }
        }
    }
    let text = format!(
        "reviewed {total}: approved {}, denied {}, left pending {}",
        approved.len(),
        denied.len(),
        left.len()
    );
    Ok(Report::ok(
        json!({ "approved": approved, "denied": denied, "left": left }),
        text,
    ))
}

/// Approve `proposal` in `grant review`: the folder when the request names none (asked again
/// until one can be granted, its review shown), the reason (asked again until one is given),
/// then the library's approval of exactly the change shown.
fn approve_one(grants: &Grants, proposal: &Proposal, actor: &str) -> Result<Done> {
    let (_, access, proposed) = proposal.change.target();
    let chosen = match proposed {
        Some(_) => None,
        None => match choose_folder(grants, proposal, access)? {
            Some(folder) => Some(folder),
            None => return Ok(Done::Left("skipped (end of input)".into())),
        },
    };
    let Some(reason) = ask::required("reason (for the changelog): ", ask::REASON_NEEDED)? else {
        return Ok(Done::Left("skipped (end of input)".into()));
    };
    let seen = shown(proposal, chosen.clone());
    let id = &proposal.request.id;
    match grants.approve_seen(id, &seen, chosen.as_deref(), &reason, actor) {
        Ok(grant) => Ok(Done::Approved(Box::new(grant))),
        Err(e) => Ok(Done::Left(format!(
            "not approved: {}: {}",
            e.code(),
            e.message()
        ))),
    }
}

/// Ask for the folder of a request that names none, until one that can be granted is typed
/// (`~` is the home folder); its review is shown. `None` at the end of input.
fn choose_folder(grants: &Grants, proposal: &Proposal, access: Access) -> Result<Option<PathBuf>> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    loop {
        let Some(typed) = ask::required(
            "folder to grant (an absolute path, or ~/…; Ctrl-D skips): ",
            "a folder is needed: the request names none",
        )?
        else {
            return Ok(None);
        };
        let folder = safe_lanes::input::typed_folder(&typed, home.as_deref());
        match grants.check_folder(&folder, access) {
            Ok(canonical) => {
                ask::say(&review_text(
                    &grants.review_proposal(proposal, Some(&canonical)),
                ));
                return Ok(Some(canonical));
            }
            Err(e) => ask::say(&format!(
                "that folder cannot be granted: {}: {}; type another",
                e.code(),
                e.message()
            )),
        }
    }
}

/// Deny the request `id` in `grant review`, with a reason (asked again until one is given).
fn deny_one(grants: &Grants, id: &str, actor: &str) -> Result<Done> {
    let Some(reason) = ask::required("reason (the agent sees it): ", ask::REASON_NEEDED)? else {
        return Ok(Done::Left("skipped (end of input)".into()));
    };
    match grants.deny(id, &reason, actor) {
        Ok(_) => Ok(Done::Denied),
        Err(e) => Ok(Done::Left(format!(
            "not denied: {}: {}",
            e.code(),
            e.message()
        ))),
    }
}
