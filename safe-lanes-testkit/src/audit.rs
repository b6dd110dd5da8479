//! The audit log of a state root, read back as the tests look at it.

use std::path::Path;

use serde_json::Value;

/// The records of `<root>/audit.jsonl`, parsed; none when there is no log yet. A line that does
/// not parse (one cut short by a crash) is passed over.
pub fn records(root: &Path) -> Vec<Value> {
    std::fs::read_to_string(root.join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// How many records of `event` the log of `root` holds.
pub fn count(root: &Path, event: &str) -> usize {
    records(root).iter().filter(|r| r["event"] == event).count()
}
