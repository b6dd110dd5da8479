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

#[test]
fn refusals_are_recorded_and_system_failures_are_not() {
    let (fx, path) = log_with(1);
    let audit = fx.root.audit();

    let refusal = safe_lanes::Error::Traversal {
        path: safe_lanes::Shown::text("../x"),
    };
    let back = audit.refused("upload", "agent", "../\u{1b}x", refusal);
    assert_eq!(back.code(), safe_lanes::Code::Traversal);
    let failure = safe_lanes::Error::io("read", "x", std::io::Error::other("disk on fire"));
    let back = audit.refused("upload", "agent", "x", failure);
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
