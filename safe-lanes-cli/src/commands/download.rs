//! `download save | list | prune`.

use std::fmt::Write as _;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use safe_lanes::{DownloadLane, Durability, StateRoot};
use serde_json::json;

use crate::args::DownloadCommand;
use crate::output::{Report, path};

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
        DownloadCommand::Prune { older_than } => prune(&lane, older_than),
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
    // The input file is the human's own argument: reading it is not a confinement decision.
    let input: Box<dyn Read> = match file {
        Some(path) if path.as_os_str() != "-" => Box::new(
            std::fs::File::open(&path)
                .with_context(|| format!("cannot read {}", path.display()))?,
        ),
        _ => Box::new(std::io::stdin().lock()),
    };
    let saved = lane.save(hint, input)?;
    let text = format!(
        "{}\n  {} bytes, sha256 {}",
        saved.path.display(),
        saved.bytes,
        saved.sha256
    );
    Ok(Report::ok(json!(saved), text))
}

fn list(lane: &DownloadLane) -> Result<Report> {
    let files = lane.list()?;
    let mut text = String::new();
    for f in &files {
        let _ = writeln!(text, "{:>12}  {}  {}", f.bytes, f.modified, f.name);
    }
    if files.is_empty() {
        let _ = write!(text, "{}: empty", lane.path().display());
    }
    Ok(Report::ok(
        json!({ "path": path(lane.path()), "files": files }),
        text,
    ))
}

fn prune(lane: &DownloadLane, older_than: std::time::Duration) -> Result<Report> {
    let removed = lane.prune(older_than)?;
    let mut text = String::new();
    for f in &removed {
        let _ = writeln!(text, "removed {} ({} bytes)", f.name, f.bytes);
    }
    if removed.is_empty() {
        text.push_str("nothing to remove");
    }
    Ok(Report::ok(json!({ "removed": removed }), text))
}
