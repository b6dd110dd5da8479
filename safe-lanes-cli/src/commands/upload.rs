//! `upload check | roots | send`.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use safe_lanes::{Limits, StateRoot, UploadDeposit, UploadSource, Uploader};
use serde_json::json;

use crate::args::UploadCommand;
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
        UploadCommand::Roots => Ok(roots(&source)),
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

/// `upload roots`: the allowed roots and the ignored entries.
fn roots(source: &UploadSource) -> Report {
    let mut text = String::new();
    for r in source.roots() {
        let _ = writeln!(text, "{:<9}  {}", r.origin.as_str(), r.path.display());
    }
    for i in source.ignored() {
        let _ = writeln!(
            text,
            "ignored    {} ({} {}): {}",
            i.entry, i.origin, i.at, i.why
        );
    }
    let json = json!({ "roots": source.roots(), "ignored": source.ignored() });
    Report::ok(json, text)
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
        json,
        text,
    })
}
