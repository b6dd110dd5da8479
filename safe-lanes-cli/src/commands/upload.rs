//! `upload check | roots | send`.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use safe_lanes::{Limits, Shown, StateRoot, UploadDeposit, UploadSource, Uploader};
use serde_json::json;

use super::{ask, grant::who};
use crate::args::{RootsCommand, UploadCommand};
use crate::output::{self, Report};

pub(crate) fn run(flag: Option<&Path>, cmd: UploadCommand) -> Result<Report> {
    let root = StateRoot::open_default(flag)?;
    let source = UploadSource::load(&root)?.with_actor(safe_lanes::Actor::human());
    match cmd {
        UploadCommand::Check { path } => {
            let checked = source.resolve(&path)?;
            let text = format!(
                "{}\n  root {}\n  {} bytes, sha256 {}",
                checked.path.display(),
                checked.root.display(),
                checked.bytes,
                checked.sha256
            );
            Ok(Report::ok(json!(checked), text))
        }
        UploadCommand::Roots { change: None } => Ok(roots(&root, &source)),
        UploadCommand::Roots {
            change: Some(change),
        } => change_roots(&root, change),
        UploadCommand::Send {
            path,
            timeout,
            uploader,
        } => {
            let (program, args) = uploader.split_first().expect("clap requires the uploader");
            let uploader = Uploader::new(program, args)?.with_limits(Limits {
                timeout: Duration::from_secs(timeout),
                ..Limits::default()
            });
            send(&root, &source, &path, &uploader)
        }
    }
}

/// `upload roots`: the allowed roots (each with what to look twice at) and the ignored
/// entries.
fn roots(state: &StateRoot, source: &UploadSource) -> Report {
    let mut text = String::new();
    let mut roots = Vec::new();
    for r in source.roots() {
        let _ = writeln!(text, "{:<9}  {}", r.origin.as_str(), Shown::path(&r.path));
        let warnings = safe_lanes::upload_roots::warnings(&r.path, state);
        for w in &warnings {
            let _ = writeln!(text, "           warning: {}", w.message);
        }
        let mut json = json!(r);
        json["warnings"] = json!(warnings);
        roots.push(json);
    }
    for i in source.ignored() {
        let _ = writeln!(
            text,
            "ignored    {} ({} {}): {}",
            i.entry, i.origin, i.at, i.why
        );
    }
    let json = json!({ "roots": roots, "ignored": source.ignored() });
    Report::ok(json, text)
}

/// `upload roots add | remove`.
fn change_roots(root: &StateRoot, change: RootsCommand) -> Result<Report> {
    let (verb, changed) = match change {
        RootsCommand::Add {
            path,
            reason,
            actor,
        } => {
            let reason = ask::reason(&reason, "reason (for the audit log): ")?;
            (
                "allowed",
                root.add_upload_root(&path, &reason, &who(actor))?,
            )
        }
        RootsCommand::Remove {
            path,
            reason,
            actor,
        } => {
            let reason = ask::reason(&reason, "reason (for the audit log): ")?;
            (
                "no longer allowed",
                root.remove_upload_root(&path, &reason, &who(actor))?,
            )
        }
    };
    let mut text = if changed.changed {
        format!("{verb} {}", Shown::path(&changed.path))
    } else {
        format!("{} is allowed already", Shown::path(&changed.path))
    };
    for w in &changed.warnings {
        let _ = write!(text, "\nwarning: {}", w.message);
    }
    Ok(Report::ok(json!(changed), text))
}

/// `upload send`: stage `path` and hand it to `uploader`; the staged copy is always erased.
fn send(
    root: &StateRoot,
    source: &UploadSource,
    path: &Path,
    uploader: &Uploader,
) -> Result<Report> {
    let opened = source.open(path)?;
    let deposit = UploadDeposit::open(root)?.with_actor(safe_lanes::Actor::human());
    let staged = deposit.stage_source(&opened)?;
    let sent = deposit.send(staged, uploader)?;
    let outcome = &sent.outcome;
    let mut text = format!(
        "{} -> uploader exited with {}",
        opened.path.display(),
        outcome.exit_code.map_or_else(
            || format!("signal {}", outcome.signal.unwrap_or(0)),
            |c| c.to_string()
        )
    );
    if outcome.timed_out {
        text.push_str(" (timed out)");
    }
    for (name, stream) in [("stdout", &outcome.stdout), ("stderr", &outcome.stderr)] {
        if !stream.is_empty() {
            let _ = write!(text, "\n--- {name}\n{}", stream.trim_end());
        }
    }
    text.push_str(&output::Unrecorded::End.warning(outcome.recorded));
    let json = json!({
        "source": {
            "path": output::path(&opened.path),
            "root": output::path(&opened.root),
            "bytes": sent.bytes,
            "sha256": sent.sha256,
        },
        "staged": output::path(&sent.staged),
        "name": sent.name,
        "exit_code": outcome.exit_code,
        "signal": outcome.signal,
        "timed_out": outcome.timed_out,
        "stdout": outcome.stdout,
        "stderr": outcome.stderr,
        "recorded": outcome.recorded,
    });
    Ok(Report {
        failed: !outcome.success(),
        json_lines: false,
        json,
        text,
    })
}
