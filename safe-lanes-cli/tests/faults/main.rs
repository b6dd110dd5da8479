//! Fault injection: the real binary, built with the library's named crash points
//! (`--features crash-points`), dies at each step of a save and of an audit append, and is
//! killed with `SIGKILL` at random instants; the next process must find the invariants hold:
//!
//! - no file in the lane without its record (a `download.save`, or a `download.recovered`
//!   written by the next process), and no mark left on any;
//! - no hidden staging file, no torn audit record after the next append, a chain that verifies.

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// A state root for one test.
struct Lab {
    tmp: tempfile::TempDir,
}

impl Lab {
    fn new() -> Self {
        Self {
            tmp: tempfile::tempdir().unwrap(),
        }
    }

    fn root(&self) -> PathBuf {
        self.tmp.path().join("state")
    }

    /// `safe-lanes --root <root> --json ARGS`, dying at `crash` if given, fed `stdin`.
    fn spawn(&self, args: &[&str], crash: Option<&str>, stdin: &[u8]) -> Child {
        let mut command = Command::new(env!("CARGO_BIN_EXE_safe-lanes"));
        command
            .arg("--root")
            .arg(self.root())
            .arg("--json")
            .args(args)
            .env_clear()
            .env("HOME", self.tmp.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(point) = crash {
            command.env("SAFE_LANES_CRASH_AT", point);
        }
        let mut child = command.spawn().unwrap();
        let mut input = child.stdin.take().unwrap();
        // A process killed early closes its end: a failed write is part of the test.
        let _ = input.write_all(stdin);
        child
    }

    /// Run to the end; the JSON it printed (`Null` when it died).
    fn run(&self, args: &[&str], crash: Option<&str>, stdin: &[u8]) -> (Option<i32>, Value) {
        let out = self.spawn(args, crash, stdin).wait_with_output().unwrap();
        let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let signal = out.status.signal();
        (signal, json)
    }

    /// The audit records, parsed.
    fn records(&self) -> Vec<Value> {
        std::fs::read_to_string(self.root().join("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Every invariant, as the next process finds it: one more save (which recovers what a
    /// dead one left, and repairs a torn record), then the lane and the log are checked.
    fn check_invariants(&self) {
        let (signal, saved) = self.run(
            &["download", "save", "--name", "probe.txt", "-"],
            None,
            b"p",
        );
        assert_eq!(signal, None, "the next process runs");
        assert!(saved["name"].is_string(), "{saved}");
        let (_, verified) = self.run(&["audit", "verify"], None, b"");
        assert_eq!(verified["intact"], true, "the chain verifies: {verified}");
        let records = self.records();
        let recorded = |name: &str| {
            records.iter().any(|r| {
                (r["event"] == "download.save" && r["name"] == name)
                    || (r["event"] == "download.recovered" && r["file"]["name"] == name)
            })
        };
        for (name, mode) in lane(&self.root().join(".downloads")) {
            assert!(
                !name.starts_with('.'),
                "a hidden staging file was left: {name}"
            );
            assert!(recorded(&name), "{name} is in the lane without a record");
            assert_eq!(mode, 0o600, "{name} still carries the unrecorded mark");
        }
    }
}

/// The names in the lane with their permission bits (and the mark).
fn lane(dir: &Path) -> Vec<(String, u32)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| {
                    let e = e.unwrap();
                    let mode = e.metadata().unwrap().mode() & 0o7777;
                    (e.file_name().to_string_lossy().into_owned(), mode)
                })
                .collect()
        })
        .unwrap_or_default()
}

const SIGABRT: i32 = 6;

#[test]
fn a_crash_at_each_step_of_a_save_leaves_the_lane_and_the_log_consistent() {
    for point in [
        "download.staged",
        "download.published",
        "download.recorded",
        "audit.mid_line",
    ] {
        let lab = Lab::new();
        lab.run(&["init"], None, b"");
        let content = vec![b'x'; 100_000];
        let (signal, _) = lab.run(
            &["download", "save", "--name", "a.txt", "-"],
            Some(point),
            &content,
        );
        assert_eq!(signal, Some(SIGABRT), "{point}: the process died there");
        lab.check_invariants();
        let names: Vec<String> = lane(&lab.root().join(".downloads"))
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        let kept = names.contains(&"a.txt".to_owned());
        assert_eq!(kept, point != "download.staged", "{point}: {names:?}");
        let events: Vec<String> = lab
            .records()
            .iter()
            .map(|r| r["event"].as_str().unwrap_or("").to_owned())
            .collect();
        if point == "audit.mid_line" {
            assert!(events.contains(&"audit.repaired".to_owned()), "{events:?}");
        }
        if point == "download.published" || point == "audit.mid_line" {
            assert!(
                events.contains(&"download.recovered".to_owned()),
                "{point}: {events:?}"
            );
        }
    }
}

/// `SIGKILL` at random instants of many saves: whatever each one reached, the next process
/// finds every invariant holding.
#[test]
fn a_kill_storm_leaves_the_lane_and_the_log_consistent() {
    let lab = Lab::new();
    lab.run(&["init"], None, b"");
    let content = vec![b'y'; 256 * 1024];
    let mut killed = 0;
    for i in 0..40u64 {
        let mut child = lab.spawn(
            &["download", "save", "--name", "storm.bin", "-"],
            None,
            &content,
        );
        // A pseudo-random instant within a save's lifetime (a few milliseconds).
        let wait = (i * 7919) % 12;
        std::thread::sleep(Duration::from_millis(wait));
        if child.kill().is_ok() {
            killed += 1;
        }
        let _ = child.wait();
    }
    assert!(killed > 0, "some saves were killed");
    lab.check_invariants();
}

/// A process that dies while content is staged for the uploader leaves its staging
/// directory; the next process that opens the deposit erases it at once (its lock is free).
#[test]
fn a_crash_while_staged_for_upload_leaves_nothing_after_the_next_process() {
    for point in ["deposit.staged", "deposit.sent"] {
        let lab = Lab::new();
        let (_, saved) = lab.run(
            &["download", "save", "--name", "out.txt", "-"],
            None,
            b"to send",
        );
        let path = saved["path"].as_str().unwrap().to_owned();
        let send = ["upload", "send", path.as_str(), "--", "cat", "{file}"];
        let (signal, _) = lab.run(&send, Some(point), b"");
        assert_eq!(signal, Some(SIGABRT), "{point}: the process died there");
        let uploads = lab.root().join(".uploads");
        assert_eq!(
            lane(&uploads).len(),
            1,
            "{point}: the dead process's staging is there"
        );
        let (signal, sent) = lab.run(&send, None, b"");
        assert_eq!(signal, None);
        assert_eq!(sent["stdout"], "to send", "{sent}");
        assert!(
            lane(&uploads).is_empty(),
            "{point}: nothing stays: {:?}",
            lane(&uploads)
        );
    }
}
