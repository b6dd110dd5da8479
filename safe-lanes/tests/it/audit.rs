//! The audit log: every line chains to the one before; `verify` names the first broken line.

use safe_lanes::AuditLog;
use serde_json::json;

use crate::util::Fixture;

/// Test fixtures are opened by their paths.
const FIXTURE: safe_lanes::beneath::Ambient =
    safe_lanes::beneath::Ambient::because("a test fixture");

fn log_with(lines: usize) -> (Fixture, std::path::PathBuf) {
    let fx = Fixture::new();
    let audit = fx.root.audit();
    for i in 0..lines {
        audit
            .append("test.event", "tester", json!({ "i": i }))
            .unwrap();
    }
    let path = audit.path().to_path_buf();
    (fx, path)
}

fn rewrite(path: &std::path::Path, edit: impl FnOnce(&mut Vec<String>)) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    edit(&mut lines);
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn broken_line(fx: &Fixture) -> Option<(u64, String)> {
    fx.root
        .audit()
        .verify()
        .unwrap()
        .broken
        .map(|b| (b.line, b.why))
}

#[test]
fn an_untouched_chain_verifies() {
    let (fx, _) = log_with(5);
    let v = fx.root.audit().verify().unwrap();
    assert_eq!(v.lines, 5);
    assert!(v.is_intact());
}

#[test]
fn a_changed_line_is_reported() {
    let (fx, path) = log_with(5);
    rewrite(&path, |lines| {
        lines[1] = lines[1].replace("\"i\":1", "\"i\":7")
    });
    let (line, why) = broken_line(&fx).expect("broken");
    assert_eq!(line, 2);
    assert!(why.contains("changed"), "{why}");
}

#[test]
fn a_changed_and_resealed_line_breaks_the_next_one() {
    let (fx, path) = log_with(5);
    rewrite(&path, |lines| {
        // Change line 2 and recompute its own hash, as a careful forger would.
        let body = lines[1].replace("\"i\":1", "\"i\":7");
        let cut = body.rfind(",\"hash\":").unwrap();
        let unsealed = format!("{}}}", &body[..cut]);
        let hash = {
            use sha2::Digest;
            let d = sha2::Sha256::digest(unsealed.as_bytes());
            d.iter().map(|b| format!("{b:02x}")).collect::<String>()
        };
        lines[1] = format!("{},\"hash\":\"{hash}\"}}", &body[..cut]);
    });
    let (line, _) = broken_line(&fx).expect("broken");
    assert_eq!(line, 3);
}

#[test]
fn a_removed_line_is_reported() {
    let (fx, path) = log_with(5);
    rewrite(&path, |lines| {
        lines.remove(2);
    });
    assert_eq!(broken_line(&fx).expect("broken").0, 3);
}

#[test]
fn reordered_lines_are_reported() {
    let (fx, path) = log_with(5);
    rewrite(&path, |lines| lines.swap(1, 2));
    assert_eq!(broken_line(&fx).expect("broken").0, 2);
}

#[test]
fn a_truncated_tail_line_is_reported() {
    let (fx, path) = log_with(3);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, &text[..text.len() - 10]).unwrap();
    assert_eq!(broken_line(&fx).expect("broken").0, 3);
}

#[test]
fn writers_in_parallel_keep_one_chain() {
    let fx = Fixture::new();
    let root_path = fx.root.path().to_path_buf();
    std::thread::scope(|s| {
        for t in 0..8 {
            let root_path = root_path.clone();
            s.spawn(move || {
                // A separate log handle per thread, as separate processes would have.
                let anchor =
                    safe_lanes::beneath::Anchor::open_ambient(&root_path, FIXTURE).unwrap();
                let log = AuditLog::open(&anchor, &root_path, "audit.jsonl").unwrap();
                for i in 0..50 {
                    log.append("parallel", "t", json!({ "t": t, "i": i }))
                        .unwrap();
                }
            });
        }
    });
    let v = fx.root.audit().verify().unwrap();
    assert_eq!(v.lines, 400);
    assert!(v.is_intact(), "{:?}", v.broken);
}

#[test]
fn a_last_line_longer_than_a_read_chunk_still_chains() {
    let fx = Fixture::new();
    let root_path = fx.root.path().to_path_buf();
    fx.root
        .audit()
        .append("big", "t", json!({ "blob": "x".repeat(300_000) }))
        .unwrap();
    // Another handle (another process) appends next: it must find the start of that line.
    let anchor = safe_lanes::beneath::Anchor::open_ambient(&root_path, FIXTURE).unwrap();
    let other = AuditLog::open(&anchor, &root_path, "audit.jsonl").unwrap();
    other.append("after", "t", json!({})).unwrap();
    let v = fx.root.audit().verify().unwrap();
    assert_eq!(v.lines, 2);
    assert!(v.is_intact(), "{:?}", v.broken);
}

/// The same after shorter lines: the start of the long last line is found in the middle of
/// the log, however many times the read back has to grow.
#[test]
fn a_long_last_line_after_short_ones_still_chains() {
    let fx = Fixture::new();
    let root_path = fx.root.path().to_path_buf();
    for i in 0..20 {
        fx.root
            .audit()
            .append("small", "t", json!({ "i": i }))
            .unwrap();
    }
    for len in [3_000, 5_000, 70_000, 300_000] {
        fx.root
            .audit()
            .append("big", "t", json!({ "blob": "x".repeat(len) }))
            .unwrap();
        let anchor = safe_lanes::beneath::Anchor::open_ambient(&root_path, FIXTURE).unwrap();
        let other = AuditLog::open(&anchor, &root_path, "audit.jsonl").unwrap();
        other.append("after", "t", json!({ "len": len })).unwrap();
    }
    let v = fx.root.audit().verify().unwrap();
    assert_eq!(v.lines, 28);
    assert!(v.is_intact(), "{:?}", v.broken);
}

#[test]
fn refusals_are_recorded_and_system_failures_are_not() {
    let (fx, path) = log_with(1);
    let audit = fx.root.audit();

    let refusal = safe_lanes::Error::Traversal {
        path: safe_lanes::Shown::text("../x"),
        why: "`..` would climb out of the folder it is relative to",
    };
    let back = audit.refused(
        safe_lanes::audit::Operation::Upload,
        "agent",
        "../\u{1b}x",
        refusal,
    );
    assert_eq!(back.code(), safe_lanes::Code::Traversal);
    let failure = safe_lanes::Error::io("read", "x", std::io::Error::other("disk on fire"));
    let back = audit.refused(safe_lanes::audit::Operation::Upload, "agent", "x", failure);
    assert_eq!(back.code(), safe_lanes::Code::Io);

    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "only the refusal is recorded: {text}");
    assert_eq!(lines[1]["event"], "upload.refused");
    assert_eq!(lines[1]["code"], "traversal");
    assert!(!text.contains('\u{1b}'), "the subject is escaped: {text}");
    assert!(audit.verify().unwrap().is_intact());
}

/// Regression: a record cut short (a crash, a full disk) stayed at the end for good; the next
/// record was written onto the same line with `seq` starting again at 1. Now the next append
/// removes it, says so in the chain, and the chain goes on.
#[test]
fn a_line_cut_short_is_repaired_by_the_next_append() {
    let (fx, path) = log_with(3);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut file, br#"{"seq":4,"ts":"2026-12-01T00:00:00"#).unwrap();
    assert_eq!(broken_line(&fx).expect("torn until repaired").0, 4);
    fx.root.audit().append("after", "t", json!({})).unwrap();
    let v = fx.root.audit().verify().unwrap();
    assert!(v.is_intact(), "{:?}", v.broken);
    assert_eq!(v.lines, 5);
    let text = std::fs::read_to_string(&path).unwrap();
    let last_two: Vec<serde_json::Value> = text
        .lines()
        .skip(3)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(last_two[0]["event"], "audit.repaired");
    assert_eq!(last_two[0]["removed_bytes"], 34);
    assert_eq!(
        (last_two[1]["event"].clone(), last_two[1]["seq"].clone()),
        (json!("after"), json!(5))
    );
}

/// Regression: cutting the last records, or emptying the log, still verified as intact.
#[test]
fn lines_cut_from_the_end_are_reported_through_the_witness() {
    for keep in [4usize, 0] {
        let (fx, path) = log_with(5);
        let v = fx.root.audit().verify().unwrap();
        assert!(v.is_intact());
        assert_eq!(
            v.tail,
            safe_lanes::audit::TailCheck::Witnessed { seq: 5, after: 0 }
        );
        rewrite(&path, |lines| lines.truncate(keep));
        if keep == 0 {
            std::fs::write(&path, "").unwrap();
        }
        let (line, why) = broken_line(&fx).expect("a cut end is reported");
        assert_eq!(line, keep as u64 + 1, "{why}");
        assert!(why.contains("cut from the end"), "{why}");
        // The next append keeps the evidence in the chain before the witness moves on.
        let anchor = safe_lanes::beneath::Anchor::open_ambient(fx.root.path(), FIXTURE).unwrap();
        let other = AuditLog::open(&anchor, fx.root.path(), "audit.jsonl").unwrap();
        other.append("after", "t", json!({})).unwrap();
        let (line, why) = broken_line(&fx).expect("still reported after an append");
        assert_eq!(line, keep as u64 + 1, "{why}");
        assert!(why.contains("had been cut"), "{why}");
    }
}

/// A recorded cut is evidence, not where checking stops: a line changed after it is still
/// found, and the cut stays listed among the seams.
#[test]
fn the_chain_is_checked_past_a_recorded_cut() {
    let (fx, path) = log_with(3);
    rewrite(&path, |lines| lines.truncate(2));
    let anchor = safe_lanes::beneath::Anchor::open_ambient(fx.root.path(), FIXTURE).unwrap();
    let other = AuditLog::open(&anchor, fx.root.path(), "audit.jsonl").unwrap();
    for i in 0..3 {
        other.append("after", "t", json!({"i": i})).unwrap();
    }
    let v = fx.root.audit().verify().unwrap();
    assert_eq!(v.lines, 6, "{v:?}");
    assert_eq!(v.seams.len(), 1, "{v:?}");
    assert_eq!(v.seams[0].line, 3, "{v:?}");
    assert_eq!(
        v.broken.as_ref(),
        v.seams.first(),
        "a seam alone is reported"
    );
    rewrite(&path, |lines| {
        lines[4] = lines[4].replace("\"i\":1", "\"i\":7")
    });
    let v = fx.root.audit().verify().unwrap();
    let broken = v.broken.expect("the changed line");
    assert_eq!(broken.line, 5, "{}", broken.why);
    assert!(broken.why.contains("changed"), "{}", broken.why);
    assert_eq!(v.seams.len(), 1);
}

#[test]
fn a_replaced_last_line_is_reported_through_the_witness() {
    let (fx, path) = log_with(3);
    // A correctly chained and sealed replacement for line 3, as a forger would write it.
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let third: serde_json::Value = serde_json::from_str(lines[2]).unwrap();
    let unsealed = format!(
        r#"{{"seq":3,"ts":"2026-12-01T00:00:00.000Z","event":"test.event","actor":"tester","i":99,"prev":{}}}"#,
        third["prev"]
    );
    let hash = sha256_hex(unsealed.as_bytes());
    let forged = format!("{},\"hash\":\"{hash}\"}}", &unsealed[..unsealed.len() - 1]);
    rewrite(&path, |lines| lines[2] = forged);
    let (line, why) = broken_line(&fx).expect("reported");
    assert_eq!(line, 3, "{why}");
    assert!(why.contains("witness"), "{why}");
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A full disk while appending: the failed record leaves nothing behind, and once there is
/// room again the chain goes on where it was. Needs a small tmpfs, so root (which CI is).
#[test]
fn a_full_disk_leaves_no_partial_record() {
    let Some(disk) = crate::util::SmallDisk::mount("256k") else {
        return;
    };
    let root = safe_lanes::StateRoot::open(&disk.path.join("state")).unwrap();
    let audit = root.audit();
    audit.append("before", "t", json!({})).unwrap();
    // Fill the disk, leaving less room than the next record needs.
    let filler = disk.fill();
    let err = audit
        .append("too.big", "t", json!({ "blob": "x".repeat(64 * 1024) }))
        .unwrap_err();
    assert_eq!(err.code(), safe_lanes::Code::Io, "{err}");
    let v = audit.verify().unwrap();
    assert!(v.is_intact(), "no partial record: {:?}", v.broken);
    assert_eq!(v.lines, 1);
    std::fs::remove_file(&filler).unwrap();
    audit.append("after", "t", json!({})).unwrap();
    let v = audit.verify().unwrap();
    assert!(v.is_intact(), "{:?}", v.broken);
    assert_eq!(v.lines, 2, "seq goes on from the last whole record");
}

/// A line is `seq`, `ts`, `event`, `actor`, the fields' own members in their order, `prev`,
/// then the seal; fields that are `{}` or `null` add no member, and fields that are not an
/// object are refused (nothing is written).
#[test]
fn a_line_holds_the_fields_members_between_actor_and_prev() {
    let fx = Fixture::new();
    let audit = fx.root.audit();
    audit
        .append("shape", "uid:7", json!({ "b": 1, "a": "x\"y" }))
        .unwrap();
    audit.append("empty", "t", json!({})).unwrap();
    audit.append("none", "t", ()).unwrap();
    for not_an_object in [json!(1), json!("text"), json!([1])] {
        assert!(audit.append("bad", "t", not_an_object).is_err());
    }
    let text = std::fs::read_to_string(audit.path()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    let genesis = "0".repeat(64);
    let (head, rest) = lines[0].split_once(r#","ts":""#).unwrap();
    assert_eq!(head, r#"{"seq":1"#);
    let (ts, rest) = rest.split_once('"').unwrap();
    assert!(humantime::parse_rfc3339(ts).is_ok(), "{ts}");
    let members =
        format!(r#","event":"shape","actor":"uid:7","b":1,"a":"x\"y","prev":"{genesis}","hash":""#);
    assert!(rest.starts_with(&members), "{rest}");
    let after_actor = |line: &str| line.split_once(r#""actor":"t","#).unwrap().1.to_owned();
    assert!(
        after_actor(lines[1]).starts_with(r#""prev":""#),
        "{}",
        lines[1]
    );
    assert!(
        after_actor(lines[2]).starts_with(r#""prev":""#),
        "{}",
        lines[2]
    );
    assert!(audit.verify().unwrap().is_intact());
}
