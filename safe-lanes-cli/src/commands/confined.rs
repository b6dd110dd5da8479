//! `exec` and `patch`: the two ways of working inside granted folders.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use safe_lanes::{Confined, Grants, Limits, StateRoot, apply_patch};
use serde_json::json;

use crate::output::Report;

fn session(flag: Option<&Path>, manifest: Option<&Path>) -> Result<safe_lanes::Session> {
    let root = StateRoot::open_default(flag)?;
    Ok(Arc::new(Grants::open(&root, manifest)?).session())
}

pub(crate) fn exec(
    flag: Option<&Path>,
    manifest: Option<&Path>,
    cwd: Option<String>,
    timeout: u64,
    network: bool,
    only: Option<&str>,
    command: Vec<OsString>,
) -> Result<Report> {
    let mut session = session(flag, manifest)?;
    if let Some(spec) = only {
        session = session.child(spec.parse()?);
    }
    let (program, args) = command.split_first().context("no command given")?;
    let mut confined = Confined::new(program, args)
        .network(network)
        .limits(Limits {
            timeout: Duration::from_secs(timeout),
            ..Limits::default()
        });
    if let Some(alias) = cwd {
        confined = confined.cwd(session.alias("exec", &alias)?);
    }
    let done = confined.run(&session)?;
    let out = &done.outcome;
    let mut text = out.stdout.clone();
    if !out.stderr.is_empty() {
        let _ = write!(
            text,
            "{}{}",
            if text.is_empty() { "" } else { "\n" },
            out.stderr
        );
    }
    if let Some(why) = &out.stopped {
        let _ = write!(text, "\n[stopped: {why}]");
    }
    if out.timed_out {
        text.push_str("\n[timed out]");
    }
    if out.truncated {
        text.push_str("\n[output truncated]");
    }
    Ok(Report {
        failed: !out.success(),
        json: json!({
            "exit_code": out.exit_code,
            "signal": out.signal,
            "stdout": out.stdout,
            "stderr": out.stderr,
            "timed_out": out.timed_out,
            "truncated": out.truncated,
            "stopped": out.stopped,
            "grants": done.grants,
        }),
        text,
    })
}

pub(crate) fn patch(
    flag: Option<&Path>,
    manifest: Option<&Path>,
    alias: &str,
    file: &Path,
    diff: Option<PathBuf>,
) -> Result<Report> {
    let session = session(flag, manifest)?;
    // The diff is the human's own argument: reading it is not a confinement decision.
    let mut text = String::new();
    match diff {
        Some(path) if path.as_os_str() != "-" => std::fs::File::open(&path)
            .and_then(|mut f| f.read_to_string(&mut text))
            .with_context(|| format!("cannot read {}", path.display()))?,
        _ => std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the diff from standard input")?,
    };
    let alias = session.alias("patch", alias)?;
    let done = apply_patch(&session, &alias, file, &text)?;
    let summary = format!(
        "{} {} ({} hunk{}, {} bytes)",
        done.change.as_str(),
        done.path.display(),
        done.hunks,
        if done.hunks == 1 { "" } else { "s" },
        done.bytes
    );
    Ok(Report::ok(json!(done), summary))
}
