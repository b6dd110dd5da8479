//! Caps that hold on every read, whatever a hand-edited state file holds.

use std::process::Stdio;

use serde_json::{Value, json};

use crate::Lab;
use crate::server::Server;

/// The bound on pending requests that filing keeps (`MAX_PENDING_REQUESTS`).
const PENDING: usize = 64;

/// Regression (the fault pass): with 10,000 pending requests in a hand-edited manifest,
/// `folder_grants_list` answered 5.9 MB: the 64-request cap held only when a request was
/// filed. Every read shows at most 64 (the last filed), to the agent and to the human.
#[test]
fn a_manifest_holding_ten_thousand_requests_shows_at_most_the_cap() {
    let lab = Lab::new();
    lab.grant("first", "read_only");
    let manifest = lab.root().join("workflow.json");
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let requests: Vec<Value> = (0..10_000)
        .map(|n| {
            json!({"id": format!("req_{n:016x}"), "alias": format!("a{n}"),
                   "access": "read_only", "reason": "more", "requested_at": now,
                   "requested_by": "agent"})
        })
        .collect();
    doc["folder_access_requests"] = Value::Array(requests);
    std::fs::write(&manifest, serde_json::to_vec(&doc).unwrap()).unwrap();

    let mut server = Server::start(&lab, &[], Stdio::null());
    server.call(1, "folder_grants_list", json!({}));
    let answer = server.answer(1);
    let listed = &answer["result"]["structuredContent"];
    let requests = listed["requests"].as_array().expect("requests");
    assert_eq!(requests.len(), PENDING, "{}", requests.len());
    assert_eq!(requests[PENDING - 1]["alias"], "a9999", "the last filed");
    let outcomes = listed["outcomes"].as_array().map_or(0, Vec::len);
    assert!(outcomes <= 2 * PENDING, "{outcomes}");
    let bytes = answer.to_string().len();
    assert!(bytes < 64 << 10, "the answer is {bytes} bytes");

    let (signal, shown) = lab.run(&["grant", "requests"], None, b"");
    assert_eq!(signal, None);
    assert_eq!(
        shown["requests"].as_array().unwrap().len(),
        PENDING,
        "{signal:?}"
    );
}

/// Regression (the fault pass): on a root without `O_TMPFILE`, saves killed mid-way left their
/// hidden partial files (43 files, 7 MB in one storm), which no later save or listing removed
/// within the hour. The next listing after a saver died removes every partial file whose
/// saver is gone (its lock is free), and the dead saver's registry entry; a partial file whose
/// saver lives (it holds the lock) stays.
#[test]
fn a_dead_savers_partial_file_goes_at_the_next_listing() {
    let lab = Lab::new();
    lab.run(
        &["download", "save", "--name", "first.txt", "-"],
        None,
        b"first",
    );
    let lane = lab.root().join(".downloads");
    let minute_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    let plant = |name: &str| {
        let path = lane.join(name);
        std::fs::write(&path, vec![b'p'; 1 << 20]).unwrap();
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(minute_ago).unwrap();
        path
    };
    let dead = plant(".partial-00000000000000000000000000000dea");
    let alive = plant(".partial-000000000000000000000000000a11fe");
    // A saver that died: its registry entry, unlocked.
    let entry = lab.root().join(".savers/0000000000000000000000000000dead");
    std::fs::write(&entry, b"").unwrap();
    // A saver that lives: it holds its partial file's lock.
    let mut holder = std::process::Command::new("flock")
        .arg(&alive)
        .args(["sleep", "30"])
        .spawn()
        .expect("flock (util-linux)");
    std::thread::sleep(std::time::Duration::from_millis(300));

    let (signal, listed) = lab.run(&["download", "list"], None, b"");
    assert_eq!(signal, None, "{listed}");
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(!dead.exists(), "the dead saver's partial file is gone");
    assert!(alive.exists(), "a live saver's partial file stays");
    assert!(!entry.exists(), "the dead saver's registry entry is gone");
    // The stand-in saver was no registered saver: its file is the test's to remove.
    std::fs::remove_file(&alive).unwrap();
    lab.check_invariants();
}

/// Regression (the fault pass): `audit show --limit 20` on a 1,000,000-record log took 31 s and
/// 3.0 GB, `audit summary` 20 s and 3.0 GB: each read the whole log into memory. Under a 64 MiB
/// heap limit, on a 300,000-record log (about 120 MB), both answer: the newest entries read
/// from the end, the summary a line at a time.
#[test]
fn the_audit_views_answer_on_a_large_log_in_bounded_memory() {
    use std::io::Write;
    let lab = Lab::new();
    lab.run(&["init"], None, b"");
    let log = lab.root().join("audit.jsonl");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&log).unwrap());
    let mut offset = 0u64;
    for n in 0..150_000u64 {
        let start = json!({"seq": 2 * n + 1, "ts": "2026-12-01T10:00:00.000Z",
            "event": "exec.start", "actor": "agent", "id": format!("{n:032x}"),
            "program": "/bin/sh", "args": ["-c", "cargo test --offline -p a-crate-of-ours"],
            "cwd": "site", "timeout_s": 60, "prev": "0".repeat(64), "hash": "0".repeat(64)});
        let end = json!({"seq": 2 * n + 2, "ts": "2026-12-01T10:00:01.000Z",
            "event": if n % 2 == 0 { "exec.end" } else { "upload.refused" },
            "actor": "agent", "id": format!("{n:032x}"), "exit_code": 0, "duration_ms": 1200,
            "start_at": offset, "code": "outside_allowlist",
            "prev": "0".repeat(64), "hash": "0".repeat(64)});
        for record in [start, end] {
            let line = format!("{record}\n");
            offset += line.len() as u64;
            out.write_all(line.as_bytes()).unwrap();
        }
    }
    out.flush().unwrap();
    drop(out);
    let limited = |args: &[&str]| {
        let command = lab.command(args);
        let out = std::process::Command::new("prlimit")
            .arg(format!("--data={}", 64 << 20))
            .arg(command.get_program())
            .args(command.get_args())
            .env_clear()
            .env("HOME", lab.tmp.path())
            .stdin(Stdio::null())
            .output()
            .expect("prlimit (util-linux)");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let shown = limited(&["audit", "show", "--limit", "20"]);
    let entries: Vec<Value> = shown
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(entries.len(), 20);
    assert_eq!(entries[19]["seq"], 300_000);
    let ended = entries.iter().find(|e| e["event"] == "exec.end").unwrap();
    assert!(
        ended["words"]
            .as_str()
            .unwrap()
            .contains("cargo test --offline"),
        "an end joined with its start by where the start is: {ended}"
    );
    let summary: Value = serde_json::from_slice(&limited(&["audit", "summary"])).unwrap();
    assert_eq!(summary["records"], 300_000, "{}", summary["counts"]);
    assert_eq!(summary["refused_count"], 75_000);
    assert_eq!(summary["refused"].as_array().unwrap().len(), 1000);
}

/// Regression (the fault pass): a forward clock jump during one call silently dropped the
/// other pending requests as expired, with no record; a request filed with the clock set back
/// was answered "pending" although it had already expired by the time the manifest records.
/// Expiry is recorded (in the record of the change that drops them), and a change is made at
/// the clock's time but never before a time the manifest records.
#[test]
fn expiry_is_recorded_and_a_clock_set_back_files_nothing_already_expired() {
    let lab = Lab::new();
    lab.grant("first", "read_only");
    let manifest = lab.root().join("workflow.json");
    let day = std::time::Duration::from_secs(86_400);
    let stamp = |t: std::time::SystemTime| humantime::format_rfc3339_seconds(t).to_string();
    let now = std::time::SystemTime::now();
    let edit = |requests: Value, changelog_at: Option<String>| {
        let mut doc: Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
        doc["folder_access_requests"] = requests;
        if let Some(at) = changelog_at {
            for entry in doc["folder_access_changelog"].as_array_mut().unwrap() {
                entry["at"] = json!(at);
            }
        }
        std::fs::write(&manifest, serde_json::to_vec(&doc).unwrap()).unwrap();
    };
    // Four requests filed 30 days ago: expired by now.
    let old: Vec<Value> = (0..4)
        .map(|n| {
            json!({"id": format!("req_{n:016x}"), "alias": format!("old{n}"),
                        "access": "read_only", "reason": "long ago",
                        "requested_at": stamp(now - 30 * day), "requested_by": "agent"})
        })
        .collect();
    edit(Value::Array(old), None);
    let (signal, filed) = lab.run(
        &[
            "grant",
            "request",
            "--alias",
            "new",
            "--access",
            "read_only",
            "--reason",
            "now",
        ],
        None,
        b"",
    );
    assert_eq!(signal, None, "{filed}");
    let record = lab
        .records()
        .into_iter()
        .rev()
        .find(|r| r["event"] == "grant.request")
        .expect("the filing's record");
    let expired: Vec<&str> = record["expired"]
        .as_array()
        .map(|e| e.iter().map(|r| r["alias"].as_str().unwrap()).collect())
        .unwrap_or_default();
    assert_eq!(expired, ["old0", "old1", "old2", "old3"], "{record}");
    assert_eq!(record["expired_count"], 4, "{record}");

    // The manifest records a time 400 days ahead of this clock: this clock was set back.
    let ahead = stamp(now + 400 * day);
    edit(json!([]), Some(ahead.clone()));
    let (_, filed) = lab.run(
        &[
            "grant",
            "request",
            "--alias",
            "later",
            "--access",
            "read_only",
            "--reason",
            "x",
        ],
        None,
        b"",
    );
    assert_eq!(filed["requested_at"], ahead.as_str(), "{filed}");
}

/// Regression (the fault pass): a request filed again for the same alias got a new id and a
/// record each time, but the changelog kept only the first (144 records against 64 entries).
/// Every recorded filing has exactly one changelog entry, also when the process dies while the
/// manifest moves its older entries to the archive beside it; the manifest stays small.
#[test]
fn every_recorded_filing_has_one_changelog_entry_across_crashes_while_archiving() {
    let lab = Lab::new();
    assert_eq!(lab.run(&["init"], None, b"").0, None);
    let manifest = lab.root().join("workflow.json");
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let mut seeded = 0;
    // Fill the manifest's changelog by hand up to the point where the next change moves its
    // older entries out.
    let mut fill = || {
        let mut doc: Value = std::fs::read(&manifest)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_else(|| json!({}));
        let mut log = doc["folder_access_changelog"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        while log.len() < 512 {
            log.push(json!({"at": now, "action": "request", "actor": "agent",
                "reason": format!("old {seeded}"), "alias": format!("a{seeded}"),
                "request_id": format!("req_{seeded:016x}"), "access": "read_only"}));
            seeded += 1;
        }
        doc["folder_access_changelog"] = Value::Array(log);
        std::fs::write(&manifest, serde_json::to_vec(&doc).unwrap()).unwrap();
        seeded
    };
    let file = |crash: Option<&str>, reason: &str| {
        let args = [
            "grant",
            "request",
            "--alias",
            "docs",
            "--access",
            "read_only",
            "--reason",
            reason,
        ];
        lab.run(&args, crash, b"")
    };
    for point in [
        "changelog.mid_archive",
        "changelog.archived",
        "manifest.pending",
        "manifest.written",
        "manifest.recorded",
    ] {
        fill();
        let (signal, _) = file(Some(point), &format!("killed at {point}"));
        assert!(signal.is_some(), "{point}: the process died there");
        let (signal, out) = file(None, &format!("after {point}"));
        assert_eq!(signal, None, "{point}: {out}");
        assert!(out["id"].is_string(), "{point}: {out}");
    }
    let seeded = fill();
    for n in 0..20 {
        file(None, &format!("loop {n}"));
    }
    let (_, log) = lab.run(&["grant", "log"], None, b"");
    let history = log["changelog"].as_array().expect("the changelog");
    let mut entries = std::collections::HashMap::<String, usize>::new();
    for entry in history {
        *entries
            .entry(entry["request_id"].as_str().unwrap_or_default().to_owned())
            .or_default() += 1;
    }
    assert!(entries.values().all(|n| *n == 1), "no entry twice");
    for n in 0..seeded {
        assert!(
            entries.contains_key(&format!("req_{n:016x}")),
            "old {n} kept"
        );
    }
    let recorded: std::collections::HashSet<String> = lab
        .records()
        .iter()
        .filter(|r| r["event"] == "grant.request")
        .map(|r| r["request"]["id"].as_str().unwrap().to_owned())
        .collect();
    let filed: std::collections::HashSet<String> = history
        .iter()
        .filter(|e| !e["reason"].as_str().unwrap().starts_with("old "))
        .map(|e| e["request_id"].as_str().unwrap().to_owned())
        .collect();
    let unrecorded: Vec<&Value> = history
        .iter()
        .filter(|e| !recorded.contains(e["request_id"].as_str().unwrap()))
        .filter(|e| !e["reason"].as_str().unwrap().starts_with("old "))
        .collect();
    assert!(unrecorded.is_empty(), "{unrecorded:?}");
    assert_eq!(recorded, filed, "one entry per recorded filing");
    // The five after each crash, the twenty in the loop, and the two filings that died after
    // their manifest was written (their record written by the next change).
    assert_eq!(recorded.len(), 27, "{recorded:?}");
    let kept: Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    let kept = kept["folder_access_changelog"].as_array().unwrap().len();
    assert!(
        kept <= 512,
        "the manifest keeps at most 512 entries: {kept}"
    );
    let archive = lab.root().join("workflow.changelog.jsonl");
    let archived = std::fs::read_to_string(&archive).unwrap().lines().count();
    assert_eq!(archived + kept, history.len());

    // An archive that cannot take the older entries: the agent's next filing is refused (the
    // manifest must not grow without bound), the human's change goes on.
    std::fs::rename(&archive, lab.root().join("archive.aside")).unwrap();
    std::fs::create_dir(&archive).unwrap();
    fill();
    let (signal, out) = file(None, "while the archive is broken");
    assert_eq!(signal, None);
    assert_eq!(out["error"]["code"], "insecure_root", "{out}");
    let path = lab.folder("mine");
    let (signal, out) = lab.run(&crate::grant_add("mine", &path, "read_only"), None, b"");
    assert_eq!(signal, None);
    assert_eq!(out["alias"], "mine", "{out}");
}
