//! The human screens speak the words of the JSON, escape what was stored exactly once, and
//! the binary's own surfaces: usage errors under `--json`, the stderr log, completions and the
//! manual page.

use crate::util::{Env, run_in};

/// No Rust type or variant name (`{:?}` output) in a human screen.
fn no_debug_names(text: &str) {
    for name in [
        "SafeLanesRoot",
        "Flag",
        "Downloads",
        "File",
        "Env",
        "Add",
        "Request",
        "Approve",
        "Deny",
        "SetAccess",
    ] {
        assert!(
            !text
                .split(|c: char| !c.is_alphanumeric())
                .any(|w| w == name),
            "`{name}` in {text}"
        );
    }
}

#[test]
fn doctor_names_the_root_origin_as_json_does() {
    let env = Env::new();
    let root = env.root();
    let vars = [("SAFE_LANES_ROOT", root.to_str().unwrap())];
    let run = |args: &[&str]| run_in(&env.cwd(), &env.home(), args, b"", &vars);
    assert_eq!(run(&["init"]).status, 0);
    std::fs::write(root.join(".upload-roots"), "not/absolute\n").unwrap();
    let doctor = run(&["doctor"]);
    assert!(
        doctor.stdout.contains("(from safe_lanes_root)"),
        "{doctor:?}"
    );
    assert!(doctor.stdout.contains("(file 1)"), "{doctor:?}");
    no_debug_names(&doctor.stdout);
    let json = run(&["--json", "doctor"]).json();
    assert_eq!(json["root"]["origin"], "safe_lanes_root");
}

#[test]
fn upload_roots_print_their_origin_as_json_does() {
    let env = Env::new();
    assert_eq!(env.run(&["init"], b"").status, 0);
    let share = env.tmp.path().join("share");
    std::fs::create_dir(&share).unwrap();
    let lines = format!("{}\nnot/absolute\n", share.display());
    std::fs::write(env.root().join(".upload-roots"), lines).unwrap();
    let other = env.cwd();
    let vars = [("SAFE_LANES_UPLOAD_ROOTS", other.to_str().unwrap())];
    let run = env.run_env(&["upload", "roots"], b"", &vars);
    assert_eq!(run.status, 0, "{run:?}");
    let starts: Vec<&str> = run
        .stdout
        .lines()
        // Each root's warnings (a temporary folder is a hidden one) follow it.
        .filter(|l| !l.trim_start().starts_with("warning:"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(starts, ["downloads", "file", "env", "ignored"], "{run:?}");
    assert!(run.stdout.contains("(file 2)"), "{run:?}");
    no_debug_names(&run.stdout);
}

#[test]
fn grant_log_says_the_action_and_escapes_the_reason_once() {
    let env = Env::new();
    let proj = env.tmp.path().join("proj");
    std::fs::create_dir(&proj).unwrap();
    let add = [
        "grant",
        "add",
        "--alias",
        "proj",
        "--path",
        proj.to_str().unwrap(),
        "--access",
        "read_only",
        "--reason",
        "line one\nline two",
    ];
    assert_eq!(env.run(&add, b"").status, 0);
    let request = [
        "grant",
        "request",
        "--alias",
        "docs",
        "--access",
        "read_only",
        "--reason",
        "see \x1b[31mred\x1b[0m\nand a \\ backslash",
    ];
    assert_eq!(env.run(&request, b"").status, 0);
    let log = env.run(&["grant", "log"], b"");
    assert_eq!(log.status, 0, "{log:?}");
    assert!(log.stdout.contains(" add proj by "), "{log:?}");
    assert!(log.stdout.contains(": line one\\nline two\n"), "{log:?}");
    assert!(log.stdout.contains(" request docs by "), "{log:?}");
    assert!(
        log.stdout
            .contains(": see \\u{1b}[31mred\\u{1b}[0m\\nand a \\\\ backslash"),
        "{log:?}"
    );
    assert!(!log.stdout.contains('\x1b'), "{log:?}");
    no_debug_names(&log.stdout);
    // The manifest keeps the reason as given; JSON escapes it by its own rules.
    let json = env.run(&["--json", "grant", "log"], b"").json();
    assert_eq!(json["changelog"][0]["action"], "add");
    assert_eq!(json["changelog"][0]["reason"], "line one\nline two");
    assert_eq!(
        json["changelog"][1]["reason"],
        "see \x1b[31mred\x1b[0m\nand a \\ backslash"
    );
    let list = env.run(&["grant", "list"], b"");
    assert!(list.stdout.contains("\\u{1b}[31mred"), "{list:?}");
    assert!(!list.stdout.contains('\x1b'), "{list:?}");
}

/// `grant add --alias ALIAS --path PATH --access ACCESS` under `--json`.
fn add(env: &Env, alias: &str, path: &std::path::Path, access: &str) -> crate::util::Run {
    let path = path.to_str().unwrap();
    let args = [
        "--json", "grant", "add", "--reason", "test", "--alias", alias, "--path", path, "--access",
        access,
    ];
    env.run(&args, b"")
}

#[test]
fn an_overlap_names_the_grant_that_was_there() {
    let env = Env::new();
    let proj = env.tmp.path().join("proj");
    std::fs::create_dir_all(proj.join("inner")).unwrap();
    let proj = std::fs::canonicalize(proj).unwrap();
    let inner = proj.join("inner");
    assert_eq!(add(&env, "first", &proj, "read_only").status, 0);
    let again = add(&env, "second", &proj, "read_only");
    assert_eq!(again.status, 3, "{again:?}");
    assert_eq!(again.code(), "overlapping_grant");
    let message = again.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    let existing = format!("`first` ({})", proj.display());
    assert!(message.contains(&existing), "{message}");
    assert!(!message.contains("second"), "{message}");

    // A read-write grant around an existing read-only one names the read-only one.
    assert_eq!(
        env.run(&["grant", "revoke", "--reason", "test", "first"], b"")
            .status,
        0
    );
    assert_eq!(add(&env, "inner", &inner, "read_only").status, 0);
    let outer = add(&env, "outer", &proj, "read_write");
    assert_eq!(outer.code(), "overlapping_grant", "{outer:?}");
    let message = outer.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    let existing = format!("`inner` ({})", inner.display());
    assert!(message.contains(&existing), "{message}");
    assert!(!message.contains("outer"), "{message}");
}

#[test]
fn usage_errors_under_json_are_one_json_error_with_exit_2() {
    let env = Env::new();
    for args in [
        &["--json", "grant", "list", "--bogus"][..],
        &["grant", "add", "--reason", "test", "--json", "--alias", "a"],
        &["download", "save", "--json"],
        &["--json", "no-such-command"],
        &["--json"],
    ] {
        let run = env.run(args, b"");
        assert_eq!(run.status, 2, "{args:?}: {run:?}");
        assert_eq!(run.code(), "invalid_argument", "{args:?}");
        let message = run.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(!message.is_empty() && !message.contains('\n'), "{message}");
        assert!(!message.starts_with("error:"), "{message}");
    }
    let missing = env.run(&["--json", "download", "save"], b"").json();
    let message = missing["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("--name"),
        "names what is missing: {message}"
    );
    let plain = env.run(&["grant", "list", "--bogus"], b"");
    assert_eq!(plain.status, 2, "{plain:?}");
    assert!(plain.stdout.is_empty(), "{plain:?}");
    assert!(plain.stderr.contains("--bogus"), "{plain:?}");
    let help = env.run(&["--json", "--help"], b"");
    assert_eq!(help.status, 0, "{help:?}");
    assert!(help.stdout.contains("Usage:"), "{help:?}");
}

#[test]
fn library_logs_reach_stderr_at_the_level_of_rust_log() {
    let env = Env::new();
    assert_eq!(env.run(&["init"], b"").status, 0);
    let file = env.root().join(".downloads/x.txt");
    std::fs::write(&file, "x").unwrap();
    let send = ["upload", "send", file.to_str().unwrap(), "--", "true"];
    let stale = |name: &str| {
        let path = env.root().join(".uploads").join(name);
        std::fs::write(&path, "old").unwrap();
        let touched = std::process::Command::new("touch")
            .args(["-d", "@1000000000"])
            .arg(&path)
            .status()
            .unwrap();
        assert!(touched.success());
    };
    stale("left-1");
    let quiet = env.run(&send, b"");
    assert_eq!(quiet.status, 0, "{quiet:?}");
    assert!(
        !quiet.stderr.contains("swept"),
        "default level is warn: {quiet:?}"
    );
    stale("left-2");
    let info = env.run_env(&send, b"", &[("RUST_LOG", "info")]);
    assert_eq!(info.status, 0, "{info:?}");
    assert!(
        info.stderr.contains("swept a stale staged upload"),
        "{info:?}"
    );
    assert!(info.stderr.contains("left-2"), "{info:?}");
    assert!(
        !info.stderr.contains('\x1b'),
        "no colours off a terminal: {info:?}"
    );
    assert!(!info.stdout.contains("swept"), "{info:?}");
}

#[test]
fn completions_and_man_page() {
    let env = Env::new();
    let bash = env.run(&["completions", "bash"], b"");
    assert_eq!(bash.status, 0, "{bash:?}");
    for word in ["safe-lanes", "grant", "download", "--older-than"] {
        assert!(bash.stdout.contains(word), "{word}");
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let run = env.run(&["completions", shell], b"");
        assert_eq!(run.status, 0, "{shell}: {run:?}");
        assert!(run.stdout.contains("grant"), "{shell}");
    }
    assert_eq!(env.run(&["completions", "tcsh"], b"").status, 2);
    let man = env.run(&["man"], b"");
    assert_eq!(man.status, 0, "{man:?}");
    assert!(man.stdout.starts_with(".TH"), "{}", &man.stdout[..80]);
    for sub in [
        "init", "doctor", "download", "upload", "grant", "exec", "patch", "audit",
    ] {
        assert!(man.stdout.contains(sub), "{sub}");
    }
    let json = env.run(&["--json", "completions", "fish"], b"").json();
    assert_eq!(json["shell"], "fish");
    assert!(json["script"].as_str().unwrap().contains("grant"));
}

/// An error's message names the hostile path escaped exactly once, on the screen and in the
/// JSON: an escape character as `\u{1b}`, a backslash as `\\`, never `\\\\`.
#[test]
fn an_error_names_a_hostile_path_escaped_once() {
    let env = Env::new();
    assert_eq!(env.run(&["init"], b"").status, 0);
    let hostile = "/nowhere/a\\b\u{1b}[31mred";
    let once = "/nowhere/a\\\\b\\u{1b}[31mred";
    let run = env.run(&["upload", "check", hostile], b"");
    assert_eq!(run.status, 3, "{run:?}");
    assert!(run.stderr.contains(once), "{run:?}");
    assert!(!run.stderr.contains("\\\\\\\\"), "escaped twice: {run:?}");
    assert!(!run.stderr.contains('\u{1b}'), "{run:?}");
    let json = env.run(&["--json", "upload", "check", hostile], b"").json();
    let message = json["error"]["message"].as_str().unwrap();
    assert!(message.contains(once), "{message}");
}
