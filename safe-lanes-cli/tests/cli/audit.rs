//! `audit show` and `audit summary`: the log as a person reads it, filtered, as JSON lines,
//! and every string of a record escaped.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::util::Env;

/// A folder whose name holds a terminal escape and a line break that looks like a record.
const HOSTILE: &str = "x\u{1b}[31mred\n2026-01-01 00:00:00 +00:00  agent  grant.add  done";

/// A log with a download, a grant, and two refusals (one of a hostile name).
fn world() -> Env {
    let env = Env::new();
    assert_eq!(
        env.run(&["download", "save", "--name", "a.txt"], b"a")
            .status,
        0
    );
    let docs = env.tmp.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    let add = [
        "grant",
        "add",
        "--alias",
        "docs",
        "--path",
        docs.to_str().unwrap(),
        "--access",
        "read_only",
        "--reason",
        "the spec",
    ];
    assert_eq!(env.run(&add, b"").status, 0);
    let hostile = env.tmp.path().join(HOSTILE);
    for refused in [hostile.to_str().unwrap(), "/etc/hostname"] {
        assert_eq!(env.run(&["upload", "check", refused], b"").status, 3);
    }
    env
}

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

/// Regression: `audit` had only `verify`; nothing showed the refusals an agent's attempts
/// leave. One line per record, newest last, local time with its offset, the subject escaped:
/// a name holding a line break or an escape stays on its line.
#[test]
fn show_prints_one_escaped_line_per_record() {
    let env = world();
    let run = env.run_env(&["audit", "show"], b"", &[("TZ", "IST-5:30")]);
    assert_eq!(run.status, 0, "{run:?}");
    let shown = lines(&run.stdout);
    let events: Vec<&str> = shown
        .iter()
        .map(|l| l.split("  ").nth(2).unwrap())
        .collect();
    assert_eq!(
        events,
        [
            "download.save",
            "grant.add",
            "upload.refused",
            "upload.refused"
        ],
        "{run:?}"
    );
    assert!(
        shown.iter().all(|l| l.contains("+05:30")),
        "local time with the offset: {run:?}"
    );
    assert!(!run.stdout.contains('\u{1b}'), "{run:?}");
    let hostile = shown[2];
    assert!(
        hostile.contains(r"x\u{1b}[31mred\n2026-01-01"),
        "escaped once: {hostile}"
    );
    assert!(
        hostile.contains("refused") && hostile.contains("[outside_allowlist]"),
        "{hostile}"
    );
    assert!(shown[1].contains("reason: the spec"), "{run:?}");
}

#[test]
fn show_filters_and_prints_json_lines() {
    let env = world();
    let events = |args: &[&str]| -> Vec<String> {
        let mut full = vec!["--json", "audit", "show"];
        full.extend_from_slice(args);
        let run = env.run(&full, b"");
        assert_eq!(run.status, 0, "{run:?}");
        run.stdout
            .lines()
            .map(|l| {
                let record: serde_json::Value = serde_json::from_str(l).expect("one object a line");
                record["event"].as_str().unwrap().to_owned()
            })
            .collect()
    };
    assert_eq!(events(&[]).len(), 4);
    assert_eq!(events(&["--refused"]), ["upload.refused", "upload.refused"]);
    assert_eq!(events(&["--op", "grant."]), ["grant.add"]);
    assert_eq!(events(&["--limit", "1"]), ["upload.refused"]);
    assert_eq!(events(&["--refused", "--limit", "5"]).len(), 2);
    assert!(
        events(&["--actor", "agent"]).is_empty(),
        "every record here is the human's"
    );
    assert_eq!(events(&["--actor", "uid:"]).len(), 4);
    assert_eq!(events(&["--since", "1h"]).len(), 4);
    assert!(events(&["--since", "2999-01-01T00:00:00Z"]).is_empty());
    let run = env.run(
        &["--json", "audit", "show", "--since", "yesterday-ish"],
        b"",
    );
    assert_eq!(
        (run.status, run.code()),
        (2, "invalid_argument".into()),
        "{run:?}"
    );
    // Every JSON line says how it ended and on what, escaped.
    let run = env.run(
        &["--json", "audit", "show", "--refused", "--limit", "2"],
        b"",
    );
    let first: serde_json::Value =
        serde_json::from_str(run.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(first["outcome"], "refused");
    assert_eq!(first["operation"], "upload");
    assert_eq!(first["code"], "outside_allowlist");
    assert!(
        !first["subject"].as_str().unwrap().contains('\n'),
        "{first}"
    );
    let text = env.run(&["audit", "show", "--since", "2999-01-01T00:00:00Z"], b"");
    assert_eq!(text.stdout.trim(), "no records");
}

/// `audit summary`: per operation and outcome, counts, and the refusals listed.
#[test]
fn summary_counts_and_lists_the_refusals() {
    let env = world();
    let run = env.run(&["--json", "audit", "summary"], b"");
    assert_eq!(run.status, 0, "{run:?}");
    let json = run.json();
    assert_eq!(json["records"], 4);
    let counts: Vec<(String, String, u64)> = json["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["operation"].as_str().unwrap().to_owned(),
                c["outcome"].as_str().unwrap().to_owned(),
                c["count"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected = [
        ("download.save", "done", 1),
        ("grant.add", "done", 1),
        ("upload", "refused", 2),
    ]
    .map(|(o, w, n)| (o.to_owned(), w.to_owned(), n));
    assert_eq!(counts, expected);
    assert_eq!(json["refused"].as_array().unwrap().len(), 2);
    let text = env.run(&["audit", "summary"], b"").stdout;
    assert!(text.contains("refused (2): what was tried"), "{text}");
    assert!(!text.contains('\u{1b}'), "{text}");
    let later = env
        .run(
            &["audit", "summary", "--since", "2999-01-01T00:00:00Z"],
            b"",
        )
        .stdout;
    assert!(
        later.contains("0 records") && later.contains("nothing was refused"),
        "{later}"
    );
}

/// `audit show --follow` prints what is there, then each new record as it is written.
#[test]
fn follow_prints_new_records_as_they_come() {
    let env = world();
    let mut child = Command::new(env!("CARGO_BIN_EXE_safe-lanes"))
        .args([
            "--json",
            "--root",
            env.root().to_str().unwrap(),
            "audit",
            "show",
            "--follow",
        ])
        .env("HOME", env.home())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut next = || {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "--follow ended");
        serde_json::from_str::<serde_json::Value>(&line).unwrap()["event"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    for _ in 0..4 {
        next();
    }
    assert_eq!(
        env.run(&["download", "save", "--name", "b.txt"], b"b")
            .status,
        0
    );
    assert_eq!(next(), "download.save");
    child.kill().unwrap();
    child.wait().unwrap();
}
