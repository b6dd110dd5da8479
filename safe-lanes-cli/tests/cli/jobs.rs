//! `jobs` and `jobs stop`: the human sees the confined commands running now — command line,
//! folder, elapsed time, the last lines of output — from another process, and stops one.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::Env;

/// The running commands, as `jobs --json` lists them.
fn jobs(env: &Env) -> Vec<Value> {
    let run = env.run(&["--json", "jobs"], b"");
    assert_eq!(run.status, 0, "{run:?}");
    run.json()["jobs"].as_array().unwrap().clone()
}

/// Regression: only the agent saw a long command's progress. A command run by another
/// process is listed with its command line, folder, elapsed time and its output's last lines,
/// and the human stops it with a reason: it ends at once, its end record says the human
/// stopped it, and the stop is audited with the reason.
#[test]
fn the_human_sees_a_running_command_and_stops_it() {
    let env = Env::new();
    let site = env.tmp.path().join("site");
    std::fs::create_dir(&site).unwrap();
    let add = [
        "grant",
        "add",
        "--alias",
        "site",
        "--path",
        site.to_str().unwrap(),
        "--access",
        "read_only",
        "--reason",
        "the site",
    ];
    assert_eq!(env.run(&add, b"").status, 0);
    assert!(jobs(&env).is_empty());
    let script = "for i in 1 2 3 4; do echo \"line $i\"; done; echo oops >&2; sleep 300";
    let mut child = Command::new(env!("CARGO_BIN_EXE_safe-lanes"))
        .args([
            "--root",
            env.root().to_str().unwrap(),
            "exec",
            "--cwd",
            "site",
            "--",
        ])
        .args(["sh", "-c", script])
        .env("HOME", env.home())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let job = loop {
        let listed = jobs(&env);
        if let Some(job) = listed
            .iter()
            .find(|j| j["stdout"].as_str().is_some_and(|o| o.ends_with("line 4")))
        {
            break job.clone();
        }
        assert!(
            Instant::now() < deadline,
            "never listed with its output: {listed:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(job["command"], format!("sh -c {}", shell_quoted(script)));
    assert_eq!(job["cwd"], "site");
    assert_eq!(job["stdout"], "line 1\nline 2\nline 3\nline 4");
    assert_eq!(job["stderr"], "oops");
    assert_eq!(job["timeout_s"], 120);
    assert_eq!(job["stopping"], false);
    let id = job["id"].as_str().unwrap();
    let text = env.run(&["jobs"], b"").stdout;
    assert!(
        text.contains("  out | line 4") && text.contains("  err | oops"),
        "{text}"
    );
    assert!(text.contains(&format!("jobs stop {id} --reason")), "{text}");

    // No reason, no stop; an unknown id is not_found.
    let bare = env.run(&["--json", "jobs", "stop", id], b"");
    assert_eq!(bare.code(), "invalid_argument", "{bare:?}");
    let unknown = env.run(
        &["--json", "jobs", "stop", "0123abcd", "--reason", "x"],
        b"",
    );
    assert_eq!(unknown.code(), "not_found", "{unknown:?}");
    assert!(child.try_wait().unwrap().is_none(), "still running");

    let stopped = env.run(&["jobs", "stop", id, "--reason", "it hangs"], b"");
    assert_eq!(stopped.status, 0, "{stopped:?}");
    let out = child.wait_with_output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("[stopped: stopped by the human]"), "{shown}");
    assert!(jobs(&env).is_empty());
    let again = env.run(&["--json", "jobs", "stop", id, "--reason", "x"], b"");
    assert_eq!(again.code(), "not_found", "{again:?}");

    // Read from the log's end (`--limit`): each record names where its command's start is.
    let log = env.run(
        &["--json", "audit", "show", "--op", "exec.", "--limit", "3"],
        b"",
    );
    let records: Vec<Value> = log
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let events: Vec<&str> = records
        .iter()
        .map(|r| r["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        events,
        ["exec.start", "exec.stop", "exec.end"],
        "{records:?}"
    );
    assert_eq!(records[1]["reason"], "it hangs");
    assert!(
        records[1]["words"]
            .as_str()
            .unwrap()
            .starts_with("asked `sh -c"),
        "{records:?}"
    );
    assert!(
        records[2]["words"]
            .as_str()
            .unwrap()
            .contains("stopped (stopped by the human)"),
        "{records:?}"
    );
}

/// `script` in single quotes, as the library quotes a word.
fn shell_quoted(script: &str) -> String {
    format!("'{}'", script.replace('\'', r"'\''"))
}

/// Regression: a stop is asked by the entry's mode, which the umask made at creation: under
/// `umask 0277` every command was stopped at once, "by the human". The entry's mode is set
/// whatever the umask.
#[test]
fn a_strict_umask_stops_nothing() {
    let env = Env::new();
    let command = format!(
        "umask 277; exec {} --root {} --json exec -- sh -c 'sleep 0.4; echo done'",
        env!("CARGO_BIN_EXE_safe-lanes"),
        env.root().display()
    );
    let out = Command::new("sh")
        .args(["-c", &command])
        .env("HOME", env.home())
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["exit_code"], 0, "{json}");
    assert_eq!(json["stdout"], "done\n", "{json}");
    assert!(json["stopped"].is_null(), "{json}");
}
