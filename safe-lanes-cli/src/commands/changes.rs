//! `changes [list] | show | apply | discard`: the held changes of confined commands and
//! patches.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use safe_lanes::changes::{HeldChanges, HeldSet, SetReview};
use safe_lanes::{Grants, Shown, StateRoot};
use serde_json::json;

use super::ask;
use super::grant::who;
use crate::args::ChangesCommand;
use crate::output::{Report, Unrecorded};

pub(crate) fn run(
    flag: Option<&Path>,
    manifest: Option<&Path>,
    cmd: Option<ChangesCommand>,
) -> Result<Report> {
    let root = StateRoot::open_default(flag)?;
    let held = HeldChanges::open(Arc::new(Grants::open(&root, manifest)?))?;
    match cmd.unwrap_or(ChangesCommand::List) {
        ChangesCommand::List => {
            let sets = held.list()?;
            Ok(Report::ok(json!({ "sets": sets }), list_text(&sets)))
        }
        ChangesCommand::Show { id } => {
            let review = held.show(&id)?;
            let text = show_text(&review);
            Ok(Report::ok(json!(review), text))
        }
        ChangesCommand::Apply {
            id,
            paths,
            digest,
            reason,
            actor,
        } => {
            let reason = ask::reason(&reason, "reason (for the audit log): ")?;
            let done = held.apply(&id, &paths, &digest, &reason, &who(actor))?;
            let mut text = format!("applied {} change(s) of {id}", done.paths.len());
            for p in &done.paths {
                let _ = write!(text, "\n  {p}");
            }
            for s in &done.still_held {
                let _ = write!(text, "\nstill held: {} ({}: {})", s.path, s.why, s.what);
            }
            text.push_str(&Unrecorded::Change.warning(done.recorded));
            Ok(Report::ok(json!(done), text))
        }
        ChangesCommand::Discard {
            id,
            digest,
            reason,
            actor,
        } => {
            let reason = ask::reason(&reason, "reason (for the audit log): ")?;
            let done = held.discard(&id, digest.as_deref(), &reason, &who(actor))?;
            let text = format!("discarded {id} ({} change(s))", done.paths.len())
                + &Unrecorded::Change.warning(done.recorded);
            Ok(Report::ok(json!(done), text))
        }
    }
}

/// `changes`: one paragraph per held set.
fn list_text(sets: &[HeldSet]) -> String {
    if sets.is_empty() {
        return "no held changes".to_owned();
    }
    let mut text = String::new();
    for s in sets {
        let _ = writeln!(
            text,
            "{}  {}  {} `{}`  {} by {}",
            s.id,
            s.grants.join(","),
            s.origin,
            s.command,
            s.started,
            safe_lanes::Actor::shown(&s.actor)
        );
        for h in &s.held {
            let _ = writeln!(
                text,
                "  {:<9} {}  ({}: {})",
                h.change.as_str(),
                h.path,
                h.why,
                h.what
            );
        }
        let _ = writeln!(text, "  review: safe-lanes changes show {}", s.id);
    }
    text.trim_end().to_owned()
}

/// `changes show`: each change in full, then the digest and the lines that decide.
fn show_text(r: &SetReview) -> String {
    let s = &r.set;
    let mut text = format!(
        "{}  {} `{}`  {} by {}\n",
        s.id,
        s.origin,
        s.command,
        s.started,
        safe_lanes::Actor::shown(&s.actor)
    );
    for c in &r.changes {
        let h = &c.held;
        let _ = writeln!(
            text,
            "\n{} {}:{}  ({}: {})",
            h.change.as_str(),
            h.grant,
            h.path,
            h.why,
            h.what
        );
        let mut what = format!("  now: {}; becomes: {}", c.current, c.kind);
        if let Some(mode) = &c.mode {
            let _ = write!(what, ", mode {mode}");
        }
        if let (Some(bytes), Some(sha)) = (c.bytes, &c.sha256) {
            let _ = write!(what, ", {bytes} bytes, sha256 {sha}");
        }
        if let Some(target) = &c.target {
            let _ = write!(what, ", -> {target}");
        }
        let _ = writeln!(text, "{what}");
        for w in &c.warnings {
            let _ = writeln!(text, "  warning: {w}");
        }
        if !c.entries.is_empty() {
            let _ = writeln!(text, "  holds: {}", c.entries.join(", "));
        }
        if let Some(diff) = &c.diff {
            for line in diff.lines() {
                let _ = writeln!(text, "  {line}");
            }
        }
    }
    let _ = write!(
        text,
        "\ndigest: {}\napply:   safe-lanes changes apply {} --digest {} --reason '…'\ndiscard: safe-lanes changes discard {} --reason '…'",
        r.digest,
        s.id,
        r.digest,
        Shown::text(&s.id)
    );
    text
}
