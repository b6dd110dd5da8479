//! `download save | list | prune`.

use std::fmt::Write as _;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use safe_lanes::{DownloadLane, Durability, StateRoot};
use serde_json::json;

use crate::args::DownloadCommand;
use crate::output::{Report, Unrecorded, path};

pub(crate) fn run(flag: Option<&Path>, cmd: DownloadCommand) -> Result<Report> {
    let root = StateRoot::open_default(flag)?;
    let lane = DownloadLane::open(&root)?.with_actor(safe_lanes::Actor::human());
    match cmd {
        DownloadCommand::Save {
            name,
            file,
            max_bytes,
            buffered,
        } => save(lane, name.as_bytes(), file, max_bytes, buffered),
        DownloadCommand::List => list(&lane),
        DownloadCommand::Prune {
            older_than,
            dry_run: false,
        } => prune(&lane, older_than),
        DownloadCommand::Prune {
            older_than,
            dry_run: true,
        } => would_prune(&lane, older_than),
    }
}

fn save(
    mut lane: DownloadLane,
    hint: &[u8],
    file: Option<PathBuf>,
    max_bytes: Option<u64>,
    buffered: bool,
) -> Result<Report> {
    if let Some(max) = max_bytes {
        lane = lane.with_max_bytes(max);
    }
    if buffered {
        lane = lane.with_durability(Durability::Buffered);
    }
    let input: Box<dyn Read> = match file {
        Some(path) if path.as_os_str() != "-" => Box::new(super::open_argument(&path)?),
        _ => Box::new(std::io::stdin().lock()),
    };
    let saved = lane.save(hint, input)?;
    let text = format!(
        "{}\n  {} bytes, sha256 {}{}",
        saved.path.display(),
        saved.bytes,
        saved.sha256,
        Unrecorded::Save.warning(saved.recorded)
    );
    Ok(Report::ok(json!(saved), text))
}

fn list(lane: &DownloadLane) -> Result<Report> {
    let files = lane.list()?;
    let mut text = String::new();
    for f in &files {
        let _ = writeln!(text, "{:>12}  {}  {}", f.bytes, f.modified, f.shown());
    }
    if files.is_empty() {
        let _ = write!(text, "{}: empty", lane.path().display());
    }
    let list = safe_lanes::desk::DownloadList {
        path: path(lane.path()),
        files,
        next_cursor: None,
    };
    Ok(Report::ok(json!(list), text))
}

fn prune(lane: &DownloadLane, older_than: Duration) -> Result<Report> {
    let pruned = lane.prune(older_than)?;
    let mut text = String::new();
    for f in &pruned.removed {
        let _ = writeln!(text, "removed {} ({} bytes)", f.shown(), f.bytes);
    }
    for f in &pruned.skipped {
        let _ = writeln!(text, "left {}: changed since it was judged old", f.shown());
    }
    for f in &pruned.failed {
        let (name, code) = (f.entry.shown(), f.code);
        let _ = writeln!(text, "could not remove {name}: {code}: {}", f.message);
    }
    if text.is_empty() {
        text.push_str("nothing to remove");
    }
    Ok(Report {
        failed: !pruned.failed.is_empty(),
        json_lines: false,
        json: json!({
            "dry_run": false,
            "removed": pruned.removed,
            "skipped": pruned.skipped,
            "failed": pruned.failed,
        }),
        text,
    })
}

fn would_prune(lane: &DownloadLane, older_than: Duration) -> Result<Report> {
    let old = lane.older_than(older_than)?;
    let mut text = String::new();
    for f in &old {
        let _ = writeln!(text, "would remove {} ({} bytes)", f.shown(), f.bytes);
    }
    if old.is_empty() {
        text.push_str("nothing to remove");
    }
    Ok(Report::ok(
        json!({ "dry_run": true, "would_remove": old }),
        text,
    ))
}
