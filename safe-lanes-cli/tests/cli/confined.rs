//! `exec` and `patch` through the real binary.

use crate::util::{Env, give_to_nobody, users};

fn world() -> Env {
    let env = Env::new();
    let proj = env.tmp.path().join("proj");
    std::fs::create_dir(&proj).unwrap();
    std::fs::write(proj.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    let docs = env.tmp.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    for (alias, dir, access) in [("proj", &proj, "read_write"), ("docs", &docs, "read_only")] {
        let run = env.run(
            &[
                "grant",
                "add",
                "--reason",
                "test",
                "--alias",
                alias,
                "--path",
                dir.to_str().unwrap(),
                "--access",
                access,
            ],
            b"",
        );
        assert_eq!(run.status, 0, "{run:?}");
    }
    env
}

#[test]
fn exec_prints_the_contract_json() {
    let env = world();
    let run = env.run(
        &[
            "--json",
            "exec",
            "--cwd",
            "proj",
            "--",
            "/bin/sh",
            "-c",
            "cat a.txt; echo oops >&2",
        ],
        b"",
    );
    assert_eq!(run.status, 0, "{run:?}");
    let json = run.json();
    assert_eq!(json["exit_code"], 0);
    assert_eq!(json["stdout"], "one\ntwo\nthree\n");
    assert_eq!(json["stderr"], "oops\n");
    assert_eq!(json["timed_out"], false);
    assert_eq!(json["truncated"], false);
}

#[test]
fn a_failing_or_timed_out_command_exits_1() {
    let env = world();
    let run = env.run(&["--json", "exec", "--", "/bin/sh", "-c", "exit 7"], b"");
    assert_eq!((run.status, run.json()["exit_code"].as_i64()), (1, Some(7)));
    let run = env.run(
        &["--json", "exec", "--timeout", "1", "--", "/bin/sleep", "30"],
        b"",
    );
    assert_eq!(run.status, 1);
    assert_eq!(run.json()["timed_out"], true);
}

#[test]
fn the_parents_secrets_never_reach_the_command() {
    let env = world();
    let run = env.run_env(
        &["--json", "exec", "--", "/usr/bin/env"],
        b"",
        &[
            ("SAFE_LANES_ROOT", "/secret/root"),
            ("GWSA_ROOT", "/secret/gwsa"),
            ("API_TOKEN", "hunter2"),
        ],
    );
    assert_eq!(run.status, 0, "{run:?}");
    let out = run.json()["stdout"].as_str().unwrap().to_owned();
    for secret in [
        "SAFE_LANES_ROOT",
        "GWSA_ROOT",
        "API_TOKEN",
        "hunter2",
        "/secret",
    ] {
        assert!(!out.contains(secret), "{secret} leaked: {out}");
    }
    assert!(out.contains("WORKFLOW_FOLDER_PROJ="));
    assert!(out.contains("WORKFLOW_FOLDER_DOCS="));
}

#[test]
fn exec_refuses_a_write_to_a_read_only_grant() {
    let env = world();
    let run = env.run(
        &[
            "--json",
            "exec",
            "--",
            "/bin/sh",
            "-c",
            "echo x > \"$WORKFLOW_FOLDER_DOCS/new\"",
        ],
        b"",
    );
    assert_eq!(run.status, 1);
    assert!(!env.tmp.path().join("docs/new").exists());
    let run = env.run(&["--json", "exec", "--cwd", "nope", "--", "/bin/true"], b"");
    assert_eq!((run.status, run.code().as_str()), (3, "unknown_alias"));
}

#[test]
fn patch_reads_the_diff_from_stdin() {
    let env = world();
    let diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n";
    let run = env.run(
        &["--json", "patch", "--alias", "proj", "--file", "a.txt"],
        diff.as_bytes(),
    );
    assert_eq!(run.status, 0, "{run:?}");
    let json = run.json();
    assert_eq!(json["change"], "modified");
    assert_eq!(json["hunks"], 1);
    assert_eq!(
        std::fs::read_to_string(env.tmp.path().join("proj/a.txt")).unwrap(),
        "one\nTWO\nthree\n"
    );
    let again = env.run(
        &["--json", "patch", "--alias", "proj", "--file", "a.txt", "-"],
        diff.as_bytes(),
    );
    assert_eq!((again.status, again.code().as_str()), (3, "patch_rejected"));
    let ro = env.run(
        &["--json", "patch", "--alias", "docs", "--file", "x.txt"],
        diff.as_bytes(),
    );
    assert_eq!((ro.status, ro.code().as_str()), (3, "read_only"));
}

#[test]
fn a_timeout_too_large_to_add_is_no_timeout_not_a_panic() {
    let env = world();
    let run = env.run(
        &[
            "--json",
            "exec",
            "--timeout",
            "18446744073709551615",
            "--",
            "/bin/true",
        ],
        b"",
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.json()["exit_code"], 0);
}

#[test]
fn exec_only_runs_the_command_in_a_narrowed_session() {
    let env = world();
    let proj = env.tmp.path().join("proj");
    let write = r#"env | grep -c WORKFLOW_FOLDER_DOCS; echo four >> "$WORKFLOW_FOLDER_PROJ/a.txt""#;
    let run = env.run(
        &[
            "--json",
            "exec",
            "--only",
            "proj:read_only",
            "--",
            "/bin/sh",
            "-c",
            write,
        ],
        b"",
    );
    assert_eq!(run.status, 1, "{run:?}");
    let json = run.json();
    assert_ne!(json["exit_code"], 0, "{json}");
    assert_eq!(
        json["stdout"], "0\n",
        "docs is not in the environment: {json}"
    );
    assert_eq!(json["grants"], serde_json::json!([["proj", "read_only"]]));
    assert_eq!(
        std::fs::read_to_string(proj.join("a.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    // The same command without `--only` writes: the narrowing made the difference.
    let run = env.run(&["--json", "exec", "--", "/bin/sh", "-c", write], b"");
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(
        std::fs::read_to_string(proj.join("a.txt")).unwrap(),
        "one\ntwo\nthree\nfour\n"
    );
    for (spec, code) in [("", "invalid_argument"), ("proj:rw", "invalid_argument")] {
        let run = env.run(&["--json", "exec", "--only", spec, "--", "/bin/true"], b"");
        assert_eq!(
            (run.status, run.code()),
            (3, code.to_owned()),
            "{spec:?}: {run:?}"
        );
    }
    let run = env.run(
        &["--json", "exec", "--only", "../proj", "--", "/bin/true"],
        b"",
    );
    assert_eq!(
        (run.status, run.code()),
        (3, "invalid_alias".to_owned()),
        "{run:?}"
    );
}

/// Regression: `exec` showed the output only at the end, and hid the exit status (`exit 7`
/// printed nothing and exited 1). The output now comes as it is printed, stderr on stderr,
/// and how the command ended is said.
#[test]
fn exec_streams_its_output_and_says_how_the_command_ended() {
    use std::io::BufRead;
    let env = world();
    let run = env.run(
        &[
            "exec",
            "--",
            "/bin/sh",
            "-c",
            "echo out; echo err >&2; exit 7",
        ],
        b"",
    );
    assert_eq!(run.status, 1, "{run:?}");
    assert_eq!(run.stdout, "out\n[exit 7]\n", "{run:?}");
    assert_eq!(run.stderr, "err\n", "{run:?}");
    // The first line arrives while the command still runs.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_safe-lanes"))
        .arg("--root")
        .arg(env.root())
        .args([
            "exec",
            "--",
            "/bin/sh",
            "-c",
            "echo first; sleep 3; echo second",
        ])
        .env_clear()
        .env("HOME", env.home())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "first");
    assert!(
        child.try_wait().unwrap().is_none(),
        "the first line came before the end"
    );
    assert_eq!(lines.next().unwrap().unwrap(), "second");
    assert!(child.wait().unwrap().success());
}

/// Regression: `patch --file a/../a.txt` was refused saying the path "would climb out of the
/// folder", which it does not: it is refused because a patch target takes no `..` at all, and
/// the message says that.
#[test]
fn a_patch_target_with_dot_dot_is_refused_for_what_it_is() {
    let env = world();
    let diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n";
    for (file, says) in [
        ("sub/../a.txt", "not accepted here"),
        ("../a.txt", "would climb out"),
    ] {
        let run = env.run(
            &["--json", "patch", "--alias", "proj", "--file", file],
            diff.as_bytes(),
        );
        assert_eq!(
            (run.status, run.code().as_str()),
            (3, "traversal"),
            "{file}"
        );
        let message = run.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains(says), "{file}: {message}");
        if file.starts_with("sub") {
            assert!(!message.contains("climb out"), "{file}: {message}");
        }
    }
}

/// `(major, minor)` of the running kernel.
fn kernel_version() -> (u32, u32) {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut parts = release.trim().split(['.', '-']);
    let major = parts.next().unwrap().parse().unwrap();
    let minor = parts.next().unwrap().parse().unwrap();
    (major, minor)
}

#[test]
fn a_fork_bomb_stops_at_the_limit_whichever_way_the_processes_are_bounded() {
    use safe_lanes::confine::limits::PROCESS_LIMIT_VARIABLE;
    // As root, from Linux 6.14: the PID namespace's own pid_max; a pids cgroup when asked for
    // (and on older kernels). As an ordinary user: RLIMIT_NPROC in the user namespace.
    let cgroup = format!("{PROCESS_LIMIT_VARIABLE}=cgroup");
    for (who, wrapper) in users() {
        let root = wrapper.is_empty() && rustix::process::geteuid().is_root();
        let default = match (root, kernel_version() >= (6, 14)) {
            (false, _) => "RLIMIT_NPROC in its user namespace",
            (true, true) => "pid_max of its PID namespace",
            (true, false) => "a pids cgroup",
        };
        fork_bomb(who, &wrapper, default);
        let mut asked = vec!["env", cgroup.as_str()];
        asked.extend_from_slice(&wrapper);
        fork_bomb(who, &asked, if root { "a pids cgroup" } else { default });
    }
}

/// A fork bomb run with `safe-lanes exec` under `wrapper`, whose `doctor` names `mechanism`.
fn fork_bomb(who: &str, wrapper: &[&str], mechanism: &str) {
    use safe_lanes::confine::limits::MAX_PROCESSES;
    let env = world();
    if wrapper.contains(&"setpriv") {
        give_to_nobody(env.tmp.path());
    }
    let way = format!("{who} {wrapper:?}");
    let doctor = env.run_as(wrapper, &["--json", "doctor"]).json();
    let layers = doctor["sandbox"]["layers"].to_string();
    assert!(layers.contains(mechanism), "{way}: {layers}");
    let machine_pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap();
    // `dash` gives up at the first fork refused ("Cannot fork"): the outer shell reads how
    // many sleeps the inner one started with builtins only (no fork is left to it).
    let script = r#"sh -c 'i=0; while [ $i -lt 2000 ]; do sleep 5 & i=$((i+1)); echo $i > /tmp/n; done'
        read n < /tmp/n; echo "started $n""#;
    let run = env.run_as(
        wrapper,
        &[
            "--json",
            "exec",
            "--timeout",
            "60",
            "--",
            "/bin/sh",
            "-c",
            script,
        ],
    );
    let json = run.json();
    let started: u64 = json["stdout"]
        .as_str()
        .and_then(|out| out.trim().strip_prefix("started "))
        .unwrap_or_else(|| panic!("{way}: {json}"))
        .parse()
        .unwrap();
    // The two shells and the sleeps share the limit: the bomb stops just short of it.
    assert!(started < MAX_PROCESSES, "{way}: {started}");
    assert!(started > MAX_PROCESSES - 16, "{way}: {started}");
    assert!(
        json["stderr"].as_str().unwrap().contains("Cannot fork"),
        "{way}: {json}"
    );
    assert_eq!(json["timed_out"], false, "{way}: {json}");
    // The machine's own limit is untouched.
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap(),
        machine_pid_max,
        "{way}"
    );
    let next = env.run_as(wrapper, &["--json", "exec", "--", "/bin/echo", "next"]);
    assert_eq!(next.json()["stdout"], "next\n", "{way}: {next:?}");
}
