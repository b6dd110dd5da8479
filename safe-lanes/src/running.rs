//! The confined commands running now, as the human sees them from any process — the agent's
//! commands and background jobs run by a gateway, the human's own `exec` — and the human's
//! way to stop one.
//!
//! Each running command has its entry in `<root>/.ongoing` (ADR 0018), held by the
//! process that runs it. [`running`] lists the held `exec` entries: the command as its start
//! record says (command line, folder, timeout, who), how long it has run, and the last lines
//! of its output, which the running process keeps in the entry. [`stop`] records the human's
//! decision (`exec.stop`, with the reason) and takes the write permission off the entry; the
//! running process sees it within its watch period (100 ms) and kills the command's process
//! group, whose end record then says it was stopped by the human. Nothing here signals a
//! process by its id, which another process may have taken.

use std::io::Read;
use std::os::fd::AsFd;

use rustix::fs::{FlockOperation, Mode, OFlags};
use serde::Serialize;
use serde_json::Value;

use crate::audit_view::{local_time, words::command_line};
use crate::beneath::{Anchor, Symlinks};
use crate::error::{Error, Result, Shown};
use crate::fd::ReadAt;
use crate::input::Name;
use crate::ongoing::{MAX_TAIL, STOP_MODE};
use crate::root::{ONGOING_DIR, StateRoot};

/// The most of an entry read: its header and two tails, escaped as JSON at worst.
const MAX_READ: u64 = 256 + 12 * MAX_TAIL as u64;

/// What the end record of a command the human stopped says in `stopped`.
pub const STOPPED_BY_HUMAN: &str = "stopped by the human";

/// A confined command running now.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Running {
    /// Its id: the `id` of its `exec.start` record, and what [`stop`] takes.
    pub id: String,
    /// Who runs it, for a person (`agent`, `alice (uid:1000)`).
    pub actor: String,
    /// Its command line, each word quoted once (as a POSIX shell reads it), escaped.
    pub command: String,
    /// The grant it runs in, if any (else a private scratch folder).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// When it started (UTC, RFC 3339), and in local time with the offset.
    pub started: String,
    /// When it started, in local time with the offset.
    pub local: String,
    /// Whole seconds it has run.
    pub elapsed_s: u64,
    /// Its timeout in seconds, as it started with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<u64>,
    /// The end of its standard output so far (at most 2 KiB, from a line's start), each line
    /// escaped.
    pub stdout: String,
    /// The end of its standard error so far, escaped.
    pub stderr: String,
    /// Whether the human asked it to stop (it ends within a watch period).
    pub stopping: bool,
}

/// The confined commands running now under the state root `root`, oldest first.
///
/// # Errors
///
/// `insecure_root`, `io` when `<root>/.ongoing` cannot be opened.
pub fn running(root: &StateRoot) -> Result<Vec<Running>> {
    let dir = ongoing_dir(root)?;
    let now = chrono::Utc::now();
    let mut found = Vec::new();
    for (name, st) in dir.entries()? {
        let Some(name) = name.to_str().filter(|n| !n.starts_with('.')) else {
            continue;
        };
        let Some(entry) = live_entry(&dir, name) else {
            continue;
        };
        let Some(start) = root.audit().record_at(entry.offset)? else {
            continue;
        };
        if start["event"] != "exec.start" || start["id"] != name {
            continue;
        }
        let text = |key: &str| start[key].as_str().unwrap_or("");
        let started = text("ts").to_owned();
        let elapsed_s = chrono::DateTime::parse_from_rfc3339(&started)
            .map(|t| (now - t.with_timezone(&chrono::Utc)).num_seconds().max(0) as u64)
            .unwrap_or(0);
        found.push(Running {
            id: name.to_owned(),
            actor: crate::Actor::shown(text("actor")),
            command: Shown::message(&command_line(&start)).to_string(),
            cwd: start["cwd"].as_str().map(|c| Shown::text(c).to_string()),
            local: local_time(&started),
            started,
            elapsed_s,
            timeout_s: start["timeout_s"].as_u64(),
            stdout: by_lines(&entry.stdout),
            stderr: by_lines(&entry.stderr),
            stopping: crate::beneath::permissions(&st) == STOP_MODE,
        });
    }
    found.sort_by(|a, b| a.started.cmp(&b.started).then(a.id.cmp(&b.id)));
    Ok(found)
}

/// Stop the running command `id` ([`Running::id`]), the human's decision: recorded as
/// `exec.stop` with `reason` by `actor`, then asked of the process that runs it. Its end
/// record follows, saying it was [`STOPPED_BY_HUMAN`].
///
/// # Errors
///
/// `invalid_argument` without a reason; `not_found` when no command with that id runs;
/// `io`.
pub fn stop(root: &StateRoot, id: &str, reason: &str, actor: &str) -> Result<()> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(Error::InvalidArgument {
            what: Shown::text(id),
            why: "a reason is needed: the audit log keeps why a command was stopped".into(),
        });
    }
    let not_running = || Error::NotFound {
        path: Shown::text(id),
        why: "no confined command with this id is running (`safe-lanes jobs` lists them)".into(),
    };
    let dir = ongoing_dir(root)?;
    let name = Name::new(id).map_err(|_| not_running())?;
    if id.starts_with('.') || live_entry(&dir, id).is_none() {
        return Err(not_running());
    }
    let fd = dir
        .open(
            name.as_rel(),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
            Symlinks::Deny,
        )
        .map_err(|_| not_running())?;
    let start_at = live_entry(&dir, id).map(|entry| entry.offset);
    root.audit().append(
        "exec.stop",
        actor,
        serde_json::json!({ "id": id, "reason": reason, "start_at": start_at }),
    )?;
    rustix::fs::fchmod(&fd, crate::beneath::mode_bits(STOP_MODE))
        .map_err(|e| Error::io("fchmod", ONGOING_DIR, e))
}

/// What a live entry holds.
struct Entry {
    offset: u64,
    stdout: String,
    stderr: String,
}

/// The entry `name` of `dir`, if a live process holds it and it is a command's.
fn live_entry(dir: &Anchor, name: &str) -> Option<Entry> {
    let fd = dir
        .open(
            Name::new(name).ok()?.as_rel(),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
            Symlinks::Deny,
        )
        .ok()?;
    if rustix::fs::flock(&fd, FlockOperation::NonBlockingLockShared).is_ok() {
        // Nobody holds it: its process ended (the next one closes it).
        return None;
    }
    let mut bytes = Vec::new();
    ReadAt::new(fd.as_fd())
        .take(MAX_READ)
        .read_to_end(&mut bytes)
        .ok()?;
    let (op, offset) = crate::ongoing::header(&bytes)?;
    if op != "exec" {
        return None;
    }
    let offset = offset?;
    // The tail, if a whole one is there (one being rewritten is skipped this time).
    let tail: Value = bytes
        .splitn(3, |b| *b == b'\n')
        .nth(2)
        .and_then(|rest| rest.split(|b| *b == b'\n').next())
        .and_then(|line| serde_json::from_slice(line).ok())
        .unwrap_or_default();
    let stream = |key: &str| tail[key].as_str().unwrap_or("").to_owned();
    Some(Entry {
        offset,
        stdout: stream("stdout"),
        stderr: stream("stderr"),
    })
}

/// Output as lines, each escaped (a line holds no control character but its own end).
fn by_lines(output: &str) -> String {
    output
        .lines()
        .map(|line| Shown::message(line).to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn ongoing_dir(root: &StateRoot) -> Result<Anchor> {
    crate::root::private_dir(root.anchor(), root.path(), ONGOING_DIR)
}
