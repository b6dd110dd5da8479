//! `exec` and `patch`: the two ways of working inside granted folders.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use safe_lanes::audit::Operation;
use safe_lanes::control::Waited;
use safe_lanes::desk::CommandReport;
use safe_lanes::{Confined, ConfinedOutcome, Control, Grants, Limits, StateRoot, apply_patch};
use serde_json::json;

use crate::output::Report;

fn session(flag: Option<&Path>, manifest: Option<&Path>) -> Result<safe_lanes::Session> {
    let root = StateRoot::open_default(flag)?;
    Ok(Arc::new(Grants::open(&root, manifest)?).session())
}

/// How `exec` runs its command.
pub(crate) struct Exec {
    pub(crate) cwd: Option<String>,
    pub(crate) timeout: u64,
    pub(crate) network: bool,
    pub(crate) only: Option<String>,
    /// Print the output as it comes (the human form); with `--json` it is in the one object.
    pub(crate) stream: bool,
}

pub(crate) fn exec(
    flag: Option<&Path>,
    manifest: Option<&Path>,
    exec: Exec,
    command: Vec<OsString>,
) -> Result<Report> {
    let mut session = session(flag, manifest)?;
    if let Some(spec) = &exec.only {
        session = session.child(spec.parse()?);
    }
    let (program, args) = command.split_first().context("no command given")?;
    let mut confined = Confined::new(program, args)
        .network(exec.network)
        .limits(Limits {
            timeout: Duration::from_secs(exec.timeout),
            ..Limits::default()
        });
    if let Some(alias) = &exec.cwd {
        confined = confined.cwd(session.alias(Operation::Exec, alias)?);
    }
    let control = Control::new();
    let done = if exec.stream {
        streamed(&confined, &session, &control)?
    } else {
        confined.run_with(&session, &control)?
    };
    let report = CommandReport::finished(done, control.elapsed());
    let mut text = if exec.stream {
        String::new()
    } else {
        report.stdout.clone()
    };
    ending(&report, &mut text);
    text.push_str(&crate::output::Unrecorded::End.warning(report.recorded));
    Ok(Report {
        failed: !report.success(),
        json_lines: false,
        json: json!(report),
        text: text.trim_end().to_owned(),
    })
}

/// How a command ended, for the human, when that was not a plain success.
fn ending(out: &CommandReport, text: &mut String) {
    if let Some(why) = &out.stopped {
        let _ = writeln!(text, "[stopped: {why}]");
    }
    if out.timed_out {
        text.push_str("[timed out]\n");
    }
    if out.truncated {
        text.push_str("[output truncated]\n");
    }
    match (out.exit_code, out.signal) {
        (Some(0), _) => {}
        (Some(code), _) => {
            let _ = write!(text, "[exit {code}]");
        }
        (None, signal) => {
            let _ = write!(text, "[killed by signal {}]", signal.unwrap_or(0));
        }
    }
    if let Some(hint) = &out.hint {
        let _ = write!(text, "\n[hint: {hint}]");
    }
}

/// Run `confined`, copying its output to this process's stdout and stderr as it comes.
///
/// The command runs on this thread and a second one copies: a stdout that does not drain (a
/// paused pager) holds up only the copy, never the command's timeout or its revocation.
fn streamed(
    confined: &Confined,
    session: &safe_lanes::Session,
    control: &Control,
) -> Result<ConfinedOutcome> {
    /// Set when the run returned, or unwound: the copy stops waiting.
    struct Finished<'a>(&'a AtomicBool);
    impl Drop for Finished<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }
    let finished = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut mark = safe_lanes::control::Mark::default();
            let copy = |mark: &mut safe_lanes::control::Mark| {
                let (new, next) = control.output_since(*mark);
                *mark = next;
                let _ = std::io::stdout().write_all(new.stdout.as_bytes());
                let _ = std::io::stderr().write_all(new.stderr.as_bytes());
                let _ = std::io::stdout().flush();
            };
            // Woken by new output and by the output's end (the command's pipes closed, or the
            // run returned without starting it): nothing waits past the command's end.
            loop {
                copy(&mut mark);
                let waited = control.wait_output(mark, Duration::from_millis(100));
                if waited == Waited::Ended || finished.load(Ordering::Acquire) {
                    break;
                }
            }
            copy(&mut mark);
        });
        let _finished = Finished(&finished);
        Ok(confined.run_with(session, control)?)
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
    let mut text = String::new();
    match diff {
        Some(path) if path.as_os_str() != "-" => super::open_argument(&path)?
            .read_to_string(&mut text)
            .with_context(|| format!("cannot read {}", safe_lanes::Shown::path(&path)))?,
        _ => std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the diff from standard input")?,
    };
    let alias = session.alias(Operation::Patch, alias)?;
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
