//! Exactly one record per effect, and outcomes that say what happened: a sweep beside a live
//! saver, concurrent saves under `SIGKILL`, a replayed approval, an audit log that cannot grow
//! while the manifest can, and a running server whose first recovery met a full disk.

use std::os::fd::AsFd;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use safe_lanes_testkit::disk::SmallDisk;
use serde_json::{Value, json};

use crate::server::Server;
use crate::{Lab, lane};

/// A lane file's permission bits while its save is unrecorded (the sticky bit is the mark).
const MARKED: u32 = 0o1600;

/// Whether process `pid` waits for a `flock` (a `->` line of `/proc/locks`).
fn waits_for_a_lock(pid: u32) -> bool {
    let locks = std::fs::read_to_string("/proc/locks").expect("/proc/locks");
    locks.lines().any(|line| {
        let mut words = line.split_whitespace().skip(1);
        words.next() == Some("->") && words.nth(3) == Some(pid.to_string().as_str())
    })
}

/// Wait until `child` waits for a lock.
fn blocked(child: &Child) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !waits_for_a_lock(child.id()) {
        assert!(
            Instant::now() < deadline,
            "{} never waited for the lock",
            child.id()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A saver is alive from before its file is published until after its record: another
/// process's sweep, running meanwhile, must leave the file to it. The log's lock, held here,
/// stops the saver between publishing and recording; a third saver is killed meanwhile (so
/// the next process sweeps the lane), and the next process sweeps while the first still
/// waits.
#[test]
fn a_sweep_beside_a_live_saver_leaves_its_file_to_it() {
    let lab = Lab::new();
    lab.saved("first.txt", b"first");
    let log = std::fs::File::open(lab.root().join("audit.jsonl")).unwrap();
    rustix::fs::flock(log.as_fd(), rustix::fs::FlockOperation::LockExclusive).unwrap();
    let live = lab.spawn(
        &["download", "save", "--name", "live.txt", "-"],
        None,
        b"live",
    );
    blocked(&live);
    let published = lane(&lab.root().join(".downloads"));
    assert!(
        published.contains(&("live.txt".to_owned(), MARKED)),
        "published, marked, not yet recorded: {published:?}"
    );
    let mut killed = lab.spawn(
        &["download", "save", "--name", "killed.txt", "-"],
        None,
        b"k",
    );
    blocked(&killed);
    killed.kill().unwrap();
    let _ = killed.wait();
    let other = lab.spawn(
        &["download", "save", "--name", "other.txt", "-"],
        None,
        b"o",
    );
    blocked(&other);
    drop(log);
    for child in [live, other] {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    lab.check_invariants();
    let saved_live = lab
        .records()
        .iter()
        .filter(|r| r["event"] == "download.save" && r["name"] == "live.txt")
        .count();
    assert_eq!(saved_live, 1, "the live saver wrote its own record");
}

/// `SIGKILL` at random instants of saves running four at a time: every file has exactly one
/// record, whoever wrote it.
#[test]
fn a_kill_storm_of_concurrent_saves_leaves_one_record_per_file() {
    let lab = Lab::new();
    lab.run(&["init"], None, b"");
    let content = vec![b'z'; 64 * 1024];
    let killed = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for lane_id in 0..4u64 {
            let (lab, content, killed) = (&lab, &content, &killed);
            scope.spawn(move || {
                for i in 0..25u64 {
                    let mut child = lab.spawn(
                        &["download", "save", "--name", "storm.bin", "-"],
                        None,
                        content,
                    );
                    let wait = (i * 7919 + lane_id * 104_729) % 15;
                    std::thread::sleep(Duration::from_millis(wait));
                    // Every third save is left to finish: the others' sweeps meet live savers.
                    if i % 3 != 0 && child.kill().is_ok() {
                        killed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    let _ = child.wait();
                }
            });
        }
    });
    assert!(killed.into_inner() > 0, "some saves were killed");
    lab.check_invariants();
}

/// An approval whose process died after its record but before clearing the lock file is not
/// recorded again by the next change.
#[test]
fn a_replayed_approval_is_recorded_once() {
    for point in ["manifest.written", "manifest.recorded"] {
        let lab = Lab::new();
        let docs = lab.folder("docs");
        let (_, request) = lab.run(
            &[
                "grant",
                "request",
                "--alias",
                "docs",
                "--access",
                "read_only",
                "--reason",
                "to read",
                "--path",
                &docs,
            ],
            None,
            b"",
        );
        let id = request["id"].as_str().expect("a request id");
        let approve = [
            "grant",
            "approve",
            "--reason",
            "test",
            id,
            "--alias",
            "docs",
            "--access",
            "read_only",
        ];
        let (signal, _) = lab.run(&approve, Some(point), b"");
        assert_eq!(signal, Some(crate::SIGABRT), "{point}: died there");
        lab.grant("next", "read_only");
        let approvals = lab
            .records()
            .iter()
            .filter(|r| r["event"] == "grant.approve" && r["grant"]["alias"] == "docs")
            .count();
        assert_eq!(approvals, 1, "{point}: {:?}", lab.records());
        let (_, verified) = lab.run(&["audit", "verify"], None, b"");
        assert_eq!(
            (&verified["intact"], &verified["pending_record"]),
            (&json!(true), &json!(false)),
            "{point}: {verified}"
        );
    }
}

/// The size `prlimit --fsize` allows the change below: room for the manifest and the lock
/// file's pending record, none for the log (grown past it first).
const FILE_SIZE_LIMIT: u64 = 16 * 1024;

/// A grant change whose manifest is written but whose record cannot be (the log may not grow:
/// `RLIMIT_FSIZE`, `SIGXFSZ` ignored, as a full disk that still had room for the manifest):
/// it happened, so the command succeeds and says it is unrecorded; `audit verify` shows the
/// record pending, and the next change writes it, once.
#[test]
fn a_change_whose_record_alone_fails_is_reported_made_and_unrecorded() {
    let lab = Lab::new();
    lab.grant("first", "read_only");
    while std::fs::metadata(lab.root().join("audit.jsonl"))
        .unwrap()
        .len()
        <= FILE_SIZE_LIMIT
    {
        lab.saved("grow.txt", b"a record to grow the log");
    }
    let second = lab.folder("second");
    let add = lab.command(&crate::grant_add("second", &second, "read_only"));
    let mut limited = std::process::Command::new("sh");
    limited
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; exec prlimit --fsize={FILE_SIZE_LIMIT} \"$@\""
        ))
        .arg("sh")
        .arg(add.get_program())
        .args(add.get_args())
        .env_clear()
        .env("HOME", lab.tmp.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    let out = limited.output().expect("sh and prlimit (util-linux)");
    assert_eq!(out.status.code(), Some(0), "the change happened: {out:?}");
    let added: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&added["alias"], &added["recorded"]),
        (&json!("second"), &json!(false)),
        "{added}"
    );
    let warning = String::from_utf8_lossy(&out.stderr);
    assert!(
        warning.contains("could not be recorded"),
        "a warning: {warning}"
    );
    let (_, verified) = lab.run(&["audit", "verify"], None, b"");
    assert_eq!(verified["pending_record"], true, "{verified}");
    assert_eq!(verified["intact"], true, "{verified}");
    let (_, listed) = lab.run(&["grant", "list"], None, b"");
    assert!(listed.to_string().contains("\"second\""), "live: {listed}");
    // The next change writes the pending record first: exactly one for `second`.
    lab.grant("third", "read_only");
    let adds = |alias: &str| {
        lab.records()
            .iter()
            .filter(|r| r["event"] == "grant.add" && r["grant"]["alias"] == alias)
            .count()
    };
    assert_eq!((adds("second"), adds("third")), (1, 1));
    let (_, verified) = lab.run(&["audit", "verify"], None, b"");
    assert_eq!(verified["pending_record"], false, "{verified}");
}

/// A server whose first recovery failed on a full disk tries again on a later save, once the
/// disk has room: the file a dead saver left is recorded without another process starting.
#[test]
fn a_running_server_retries_recovery_after_a_full_disk() {
    let disk = SmallDisk::mount_as_root("4m");
    let lab = Lab::with_root(disk.path.join("state"));
    lab.run(&["init"], None, b"");
    let (signal, _) = lab.run(
        &["download", "save", "--name", "lost.txt", "-"],
        Some("download.published"),
        b"published, never recorded",
    );
    assert_eq!(signal, Some(crate::SIGABRT));
    let filler = disk.fill();
    let mut server = Server::start(&lab, &[], Stdio::null());
    server.call(
        1,
        "download_save",
        json!({"filename": "full.txt", "text": "x"}),
    );
    let refused = server.answer(1);
    assert_eq!(
        refused["result"]["isError"], true,
        "the disk is full: {refused}"
    );
    std::fs::remove_file(&filler).unwrap();
    // A retry is at most once a second.
    std::thread::sleep(Duration::from_millis(1_100));
    server.call(
        2,
        "download_save",
        json!({"filename": "after.txt", "text": "y"}),
    );
    let saved = server.answer(2);
    assert_eq!(saved["result"]["isError"], false, "{saved}");
    let recovered: Vec<Value> = lab
        .records()
        .into_iter()
        .filter(|r| r["event"] == "download.recovered")
        .collect();
    assert_eq!(
        recovered.len(),
        1,
        "recovered by the running server: {recovered:?}"
    );
    assert_eq!(recovered[0]["file"]["name"], "lost.txt");
    let lost = lane(&lab.root().join(".downloads"));
    assert!(
        lost.contains(&("lost.txt".to_owned(), 0o600)),
        "unmarked: {lost:?}"
    );
}
