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

/// Regression: `exec.start`, `exec.end`, `upload.start` and `upload.end` showed as a hex id,
/// `patch.apply` as its alias, and a save as the name it got, losing the agent's `../..` and
/// right-to-left mark. Each is now said in words: the command line (quoted once), its folder,
/// exit and duration; the upload's name, source and uploader; the patched file; the name the
/// agent asked for beside the name it got, flagged.
#[test]
fn show_says_each_effect_in_words() {
    let env = Env::new();
    let site = env.tmp.path().join("site");
    std::fs::create_dir(&site).unwrap();
    std::fs::write(site.join("a.txt"), "hi\n").unwrap();
    let site_arg = site.to_str().unwrap();
    let add = [
        "grant",
        "add",
        "--alias",
        "site",
        "--path",
        site_arg,
        "--access",
        "read_write",
        "--reason",
        "the site",
    ];
    assert_eq!(env.run(&add, b"").status, 0);
    let ran = env.run(
        &[
            "exec",
            "--cwd",
            "site",
            "--",
            "sh",
            "-c",
            "echo 'it''s'; exit 3",
        ],
        b"",
    );
    assert_eq!(ran.status, 1, "exit 3 is the command's: {ran:?}");
    let diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-hi\n+ho\n";
    let patched = env.run(
        &["patch", "--alias", "site", "--file", "a.txt", "-"],
        diff.as_bytes(),
    );
    assert_eq!(patched.status, 0, "{patched:?}");
    let saved = env.run(
        &["download", "save", "--name", "../../.bash\u{202e}rc"],
        b"x",
    );
    assert_eq!(saved.status, 0, "{saved:?}");
    std::fs::write(env.root().join(".upload-roots"), format!("{site_arg}\n")).unwrap();
    let source = site.join("a.txt");
    let sent = env.run(
        &[
            "upload",
            "send",
            source.to_str().unwrap(),
            "--",
            "/bin/true",
            "{file}",
        ],
        b"",
    );
    assert_eq!(sent.status, 0, "{sent:?}");

    let run = env.run(&["audit", "show"], b"");
    assert_eq!(run.status, 0, "{run:?}");
    let line = |event: &str| -> String {
        run.stdout
            .lines()
            .find(|l| l.contains(&format!("  {event}  ")))
            .unwrap_or_else(|| panic!("no {event}: {run:?}"))
            .to_owned()
    };
    let command = r#"`sh -c 'echo '\''it'\'''\''s'\''; exit 3'` in site"#;
    let start = line("exec.start");
    assert!(
        start.ends_with(&format!("ran {command}, timeout 2 min")),
        "{start}"
    );
    let end = line("exec.end");
    assert!(end.contains(&format!("{command}: exit 3 after ")), "{end}");
    assert!(
        end.ends_with(" ms") || end.ends_with(" s"),
        "a duration: {end}"
    );
    let patch = line("patch.apply");
    assert!(
        patch.ends_with("modified a.txt in site (1 hunk)"),
        "{patch}"
    );
    let save = line("download.save");
    assert!(
        save.contains(r"saved bashrc (1 byte); the agent asked for $'../../.bash\xe2\x80\xaerc'"),
        "{save}"
    );
    assert!(
        save.contains("[warning: the name the agent asked for held a path separator, `..` and hidden characters: a sign of an attack]"),
        "{save}"
    );
    let upload = line("upload.start");
    assert!(
        upload.contains(&format!(
            "uploading a.txt (3 bytes) from {site_arg}/a.txt with `/bin/true`"
        )),
        "{upload}"
    );
    let uploaded = line("upload.end");
    assert!(
        uploaded.contains("with `/bin/true`: exit 0 after "),
        "{uploaded}"
    );
    assert!(
        !run.stdout.contains('\u{202e}'),
        "no raw bidi mark: {run:?}"
    );

    // The same words in JSON, with the warning as its own field.
    let json = env.run(&["--json", "audit", "show", "--op", "download."], b"");
    let record: serde_json::Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert!(
        record["words"]
            .as_str()
            .unwrap()
            .starts_with("saved bashrc"),
        "{record}"
    );
    assert!(
        record["warning"]
            .as_str()
            .unwrap()
            .contains("a sign of an attack"),
        "{record}"
    );
}
