//! Fault injection: the real binary, built with the library's named crash points
//! (`--features crash-points`), dies at each step of a save and of an audit append, and is
//! killed with `SIGKILL` at random instants; the next process must find the invariants hold:
//!
//! - no file in the lane without its record (a `download.save`, or a `download.recovered`
//!   written by the next process), and no mark left on any;
//! - no hidden staging file, no torn audit record after the next append, a chain that verifies;
//! - exactly one record per effect: per saved file, per grant change, and a start and one end
//!   per command and upload, even when the process running it was killed (`effects`,
//!   `records`);
//! - a root whose pieces were broken by hand is repaired by `init` (`heal`), and a server whose
//!   stderr cannot be written still answers (`server`).

mod bounds;
mod changes;
mod effects;
mod heal;
mod records;
mod server;

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A state root for one test.
struct Lab {
    tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Lab {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("state");
        Self { tmp, root }
    }

    /// A lab whose state root is `root` (on a disk of the test's choosing).
    fn with_root(root: PathBuf) -> Self {
        Self {
            tmp: tempfile::tempdir().unwrap(),
            root,
        }
    }

    fn root(&self) -> PathBuf {
        self.root.clone()
    }

    /// `safe-lanes --root <root> --json ARGS`, its environment cleared but for `HOME`.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_safe-lanes"));
        command
            .arg("--root")
            .arg(self.root())
            .arg("--json")
            .args(args)
            .env_clear()
            .env("HOME", self.tmp.path());
        command
    }

    /// `safe-lanes --root <root> --json ARGS`, dying at `crash` if given, fed `stdin`.
    fn spawn(&self, args: &[&str], crash: Option<&str>, stdin: &[u8]) -> Child {
        let mut command = self.command(args);
        command
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

    /// A folder of the test's own, made now; its path.
    fn folder(&self, name: &str) -> String {
        let path = self.tmp.path().join(name);
        std::fs::create_dir_all(&path).unwrap();
        path.display().to_string()
    }

    /// Save `content` as `name` in the lane; the saved file's path.
    fn saved(&self, name: &str, content: &[u8]) -> String {
        let (signal, saved) = self.run(&["download", "save", "--name", name, "-"], None, content);
        assert_eq!(signal, None, "{saved}");
        saved["path"].as_str().expect("a saved path").to_owned()
    }

    /// Grant the folder `alias` (made now) with `access`; its path.
    fn grant(&self, alias: &str, access: &str) -> String {
        let path = self.folder(alias);
        let args = grant_add(alias, &path, access);
        let (signal, added) = self.run(&args, None, b"");
        assert_eq!(added["alias"], alias, "{signal:?} {added}");
        path
    }

    /// The first record of `event`, once it is in the log (a running process writes it).
    fn wait_for(&self, event: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(found) = self.records().into_iter().find(|r| r["event"] == event) {
                return found;
            }
            assert!(Instant::now() < deadline, "no {event} record was written");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// How many records of `event` carry the id `id`.
    fn count(&self, event: &str, id: &Value) -> usize {
        self.records()
            .iter()
            .filter(|r| r["event"] == event && &r["id"] == id)
            .count()
    }

    /// The audit records, parsed.
    fn records(&self) -> Vec<Value> {
        safe_lanes_testkit::audit::records(&self.root())
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
            records
                .iter()
                .filter(|r| {
                    (r["event"] == "download.save" && r["name"] == name)
                        || (r["event"] == "download.recovered" && r["file"]["name"] == name)
                })
                .count()
        };
        for (name, mode) in lane(&self.root().join(".downloads")) {
            assert!(
                !name.starts_with('.'),
                "a hidden staging file was left: {name}"
            );
            assert_eq!(recorded(&name), 1, "{name} has not exactly one record");
            assert_eq!(mode, 0o600, "{name} still carries the unrecorded mark");
        }
    }
}

/// `grant add --alias ALIAS --path PATH --access ACCESS`.
fn grant_add<'a>(alias: &'a str, path: &'a str, access: &'a str) -> [&'a str; 10] {
    [
        "grant", "add", "--reason", "test", "--alias", alias, "--path", path, "--access", access,
    ]
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

/// A process that dies while changing the grants: the next change finds the manifest whole,
/// no temporary file, and every changelog entry with exactly one audit record (written late,
/// marked recovered, when the process died between the manifest and the record; not written
/// again when it died after the record).
#[test]
fn a_crash_at_each_step_of_a_grant_change_leaves_every_entry_recorded() {
    for point in ["manifest.pending", "manifest.written", "manifest.recorded"] {
        let lab = Lab::new();
        for folder in ["one", "two"] {
            std::fs::create_dir(lab.tmp.path().join(folder)).unwrap();
        }
        let folder = |name: &str| lab.tmp.path().join(name).display().to_string();
        let (one, two) = (folder("one"), folder("two"));
        let add = |alias: &str, path: &str, crash| {
            let args = grant_add(alias, path, "read_only");
            lab.run(&args, crash, b"")
        };
        assert_eq!(add("first", &one, None).0, None);
        let (signal, _) = add("second", &two, Some(point));
        assert_eq!(signal, Some(SIGABRT), "{point}: the process died there");
        // The next change, by another process.
        let (_, revoked) = lab.run(&["grant", "revoke", "--reason", "test", "first"], None, b"");
        assert_eq!(revoked["alias"], "first", "{point}: {revoked}");
        let manifest = lab.root().join("workflow.json");
        let doc: Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap())
            .unwrap_or_else(|e| panic!("{point}: the manifest parses: {e}"));
        let leftovers: Vec<String> = lane(&lab.root())
            .into_iter()
            .map(|(n, _)| n)
            .filter(|n| n.starts_with(".workflow.json.") && n.ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{point}: {leftovers:?}");
        let records = lab.records();
        let recorded = |event: String, alias: &str| {
            records
                .iter()
                .filter(|r| r["event"] == event.as_str() && r["grant"]["alias"] == alias)
                .count()
        };
        let changelog = doc["folder_access_changelog"].as_array().unwrap();
        for entry in changelog {
            let (action, alias) = (
                entry["action"].as_str().unwrap(),
                entry["alias"].as_str().unwrap(),
            );
            assert_eq!(
                recorded(format!("grant.{action}"), alias),
                1,
                "{point}: the {action} of {alias} has not exactly one record"
            );
        }
        let second_landed = changelog.iter().any(|e| e["alias"] == "second");
        assert_eq!(second_landed, point != "manifest.pending", "{point}");
        // Written late, and marked so, only when the process died before writing it; one that
        // died after writing it (before clearing the lock file) is not written again.
        let recovered = records.iter().any(|r| r["recovered"].is_string());
        assert_eq!(
            recovered,
            point == "manifest.written",
            "{point}: a late record says so"
        );
        let (_, verified) = lab.run(&["audit", "verify"], None, b"");
        assert_eq!(verified["intact"], true, "{point}: {verified}");
    }
}

/// `SIGKILL` at random instants of many grant changes: the next change finds every
/// changelog entry recorded and the manifest whole.
#[test]
fn a_kill_storm_on_grant_changes_leaves_every_entry_recorded() {
    let lab = Lab::new();
    let mut killed = 0;
    for i in 0..30u64 {
        let folder = lab.tmp.path().join(format!("f{i}"));
        std::fs::create_dir(&folder).unwrap();
        let path = folder.display().to_string();
        let alias = format!("a{i}");
        let args = grant_add(&alias, &path, "read_only");
        let mut child = lab.spawn(&args, None, b"");
        std::thread::sleep(Duration::from_millis((i * 7919) % 9));
        if child.kill().is_ok() {
            killed += 1;
        }
        let _ = child.wait();
    }
    assert!(killed > 0);
    let last = lab.tmp.path().join("last");
    std::fs::create_dir(&last).unwrap();
    let path = last.display().to_string();
    let (signal, added) = lab.run(&grant_add("last", &path, "read_only"), None, b"");
    assert_eq!(signal, None, "{added}");
    let doc: Value =
        serde_json::from_slice(&std::fs::read(lab.root().join("workflow.json")).unwrap()).unwrap();
    let records = lab.records();
    for entry in doc["folder_access_changelog"].as_array().unwrap() {
        let alias = entry["alias"].as_str().unwrap();
        let count = records
            .iter()
            .filter(|r| r["event"] == "grant.add" && r["grant"]["alias"] == alias)
            .count();
        assert_eq!(count, 1, "the add of {alias} has not exactly one record");
    }
    let (_, verified) = lab.run(&["audit", "verify"], None, b"");
    assert_eq!(verified["intact"], true, "{verified}");
}
