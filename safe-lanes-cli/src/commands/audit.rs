//! `audit show | summary`: the log as a person reads it ([`safe_lanes::audit_view`]).

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use safe_lanes::StateRoot;
use safe_lanes::audit_view::{self, Entry, Filter};
use serde_json::json;

use crate::output::Report;

/// How often `--follow` looks for new records.
const FOLLOW_EVERY: Duration = Duration::from_millis(500);

/// `audit show`: one line per record (with `--json`, one JSON object per line), newest last;
/// with `follow`, then each new record as it is written, until interrupted.
pub(crate) fn show(
    flag: Option<&Path>,
    filter: &Filter,
    follow: bool,
    json: bool,
) -> Result<Report> {
    let root = StateRoot::open_default(flag)?;
    let log = root.audit();
    let (entries, mut watch) = audit_view::follow(&log, filter)?;
    if !follow {
        let text = if entries.is_empty() {
            "no records".to_owned()
        } else {
            entries
                .iter()
                .map(Entry::line)
                .collect::<Vec<_>>()
                .join("\n")
        };
        return Ok(Report::lines(
            entries.iter().map(|e| json!(e)).collect(),
            text,
        ));
    }
    print(&entries, json)?;
    loop {
        std::thread::sleep(FOLLOW_EVERY);
        print(&watch.newer(&log)?, json)?;
    }
}

/// Print `entries` as they come (`--follow`), flushed.
fn print(entries: &[Entry], json: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    for e in entries {
        if json {
            writeln!(out, "{}", json!(e))?;
        } else {
            writeln!(out, "{}", e.line())?;
        }
    }
    out.flush()?;
    Ok(())
}

/// `audit summary`: per operation and outcome, counts; then the refusals.
pub(crate) fn summary(flag: Option<&Path>, since: Option<SystemTime>) -> Result<Report> {
    let root = StateRoot::open_default(flag)?;
    let summary = audit_view::summary(&root.audit(), since)?;
    let mut text = format!("{} records", summary.records);
    if summary.records > 0 {
        let _ = write!(
            text,
            "\n\n{:<28} {:<8} {:>6}",
            "operation", "outcome", "count"
        );
        for c in &summary.counts {
            let _ = write!(
                text,
                "\n{:<28} {:<8} {:>6}",
                c.operation,
                c.outcome.as_str(),
                c.count
            );
        }
    }
    if summary.refused.is_empty() {
        text.push_str("\n\nnothing was refused");
    } else {
        let _ = write!(
            text,
            "\n\nrefused ({}): what was tried and not let through",
            summary.refused_count
        );
        if summary.refused.len() < summary.refused_count {
            let _ = write!(text, " (the newest {} listed)", summary.refused.len());
        }
        for e in &summary.refused {
            let _ = write!(text, "\n  {}", e.line());
        }
    }
    Ok(Report::ok(json!(summary), text))
}
