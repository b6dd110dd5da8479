//! `jobs [list] | stop`: the confined commands running now, and the human's stop
//! ([`safe_lanes::running`]).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use safe_lanes::StateRoot;
use safe_lanes::running::{self, Running};
use serde_json::json;

use super::ask;
use super::grant::who;
use crate::args::JobsCommand;
use crate::output::Report;

/// How many lines of each stream's end `jobs` prints.
const LINES_SHOWN: usize = 5;

pub(crate) fn run(flag: Option<&Path>, cmd: Option<JobsCommand>) -> Result<Report> {
    let root = StateRoot::open_default(flag)?;
    match cmd.unwrap_or(JobsCommand::List) {
        JobsCommand::List => {
            let jobs = running::running(&root)?;
            Ok(Report::ok(json!({ "jobs": jobs }), list_text(&jobs)))
        }
        JobsCommand::Stop { id, reason, actor } => {
            let reason = ask::reason(&reason, "reason (for the audit log): ")?;
            running::stop(&root, &id, &reason, &who(actor))?;
            Ok(Report::ok(
                json!({ "id": id, "stopping": true }),
                format!("stopping {id}: it ends within a tenth of a second"),
            ))
        }
    }
}

/// One paragraph per command: its id, who, how long, the command line and folder, the last
/// lines of its output.
fn list_text(jobs: &[Running]) -> String {
    if jobs.is_empty() {
        return "no confined command is running".to_owned();
    }
    let mut text = String::new();
    for j in jobs {
        let timeout = j
            .timeout_s
            .map(|t| format!(" of {}", duration(t)))
            .unwrap_or_default();
        let _ = writeln!(
            text,
            "{}  {}  running {}{timeout}{}",
            j.id,
            j.actor,
            duration(j.elapsed_s),
            if j.stopping { "  (stopping)" } else { "" }
        );
        let _ = writeln!(
            text,
            "  `{}` in {}",
            j.command,
            j.cwd.as_deref().unwrap_or("a scratch folder")
        );
        for (name, stream) in [("out", &j.stdout), ("err", &j.stderr)] {
            let lines: Vec<&str> = stream.lines().collect();
            for line in &lines[lines.len().saturating_sub(LINES_SHOWN)..] {
                let _ = writeln!(text, "  {name} | {line}");
            }
        }
        let _ = writeln!(text, "  stop: safe-lanes jobs stop {} --reason '…'", j.id);
    }
    text.trim_end().to_owned()
}

fn duration(s: u64) -> String {
    safe_lanes::audit_view::duration_in_words(std::time::Duration::from_secs(s))
}
