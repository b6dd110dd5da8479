//! `init`, `doctor`, `audit verify`, refusals and usage errors.

use std::os::unix::fs::PermissionsExt;

use crate::util::Env;

#[test]
fn init_creates_a_private_root() {
    let env = Env::new();
    let run = env.run(&["--json", "init"], b"");
    assert_eq!(run.status, 0, "{run:?}");
    let json = run.json();
    assert_eq!(json["root"], env.root().to_str().unwrap());
    for dir in [
        env.root(),
        env.root().join(".downloads"),
        env.root().join(".uploads"),
    ] {
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", dir.display());
    }
}

#[test]
fn doctor_reports_the_kernel_features() {
    let env = Env::new();
    assert_eq!(env.run(&["init"], b"").status, 0);
    let run = env.run(&["--json", "doctor"], b"");
    let json = run.json();
    assert_eq!(json["kernel"]["openat2"], true);
    // This suite runs on kernels with full Landlock; doctor must say so.
    assert!(
        json["kernel"]["landlock"]["abi"].as_u64().unwrap() >= 4,
        "{json}"
    );
    assert_eq!(json["kernel"]["landlock"]["fully_enforced"], true);
    assert_eq!(json["ok"], true, "{json}");
    assert_eq!(run.status, 0);
    assert_eq!(json["dirs"][0]["mode"], "0700");
}

#[test]
fn doctor_reports_a_missing_root_as_a_problem() {
    let env = Env::new();
    let run = env.run(&["--json", "doctor"], b"");
    assert_eq!(run.status, 1);
    assert!(run.json()["problems"][0].as_str().unwrap().contains("init"));
}

#[test]
fn an_insecure_root_is_refused_with_exit_3() {
    let env = Env::new();
    std::fs::create_dir(env.root()).unwrap();
    std::fs::set_permissions(env.root(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let run = env.run(&["--json", "download", "list"], b"");
    assert_eq!(run.status, 3, "{run:?}");
    assert_eq!(run.code(), "insecure_root");
    let text = env.run(&["download", "list"], b"");
    assert_eq!(text.status, 3);
    assert!(text.stderr.contains("insecure_root"), "{}", text.stderr);
    assert!(text.stdout.is_empty());
}

#[test]
fn usage_errors_exit_2() {
    let env = Env::new();
    assert_eq!(env.run(&["download", "save"], b"").status, 2);
    assert_eq!(env.run(&["no-such-command"], b"").status, 2);
}

#[test]
fn audit_verify_follows_the_saves() {
    let env = Env::new();
    for _ in 0..3 {
        assert_eq!(
            env.run(&["download", "save", "--name", "a"], b"x").status,
            0
        );
    }
    let run = env.run(&["--json", "audit", "verify"], b"");
    assert_eq!(run.status, 0);
    assert_eq!(run.json()["lines"], 3);
    assert_eq!(run.json()["intact"], true);
    let log = env.root().join("audit.jsonl");
    let text = std::fs::read_to_string(&log)
        .unwrap()
        .replace("\"a (1)\"", "\"b (1)\"");
    std::fs::write(&log, text).unwrap();
    let run = env.run(&["--json", "audit", "verify"], b"");
    assert_eq!(run.status, 1);
    assert_eq!(run.json()["broken"]["line"], 2);
}
