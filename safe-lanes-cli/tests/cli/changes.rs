//! `changes`, `changes show | apply | discard` and `--direct`, through the real binary: the
//! contract's JSON, its text, its exit statuses.

use std::path::PathBuf;

use serde_json::Value;

use crate::util::Env;

/// A state root with the read-write grant `proj` on `<tmp>/proj`.
fn world() -> (Env, PathBuf) {
    let env = Env::new();
    let proj = env.tmp.path().join("proj");
    std::fs::create_dir(&proj).unwrap();
    std::fs::write(proj.join("README"), "hello\n").unwrap();
    let run = env.run(
        &[
            "grant",
            "add",
            "--reason",
            "test",
            "--alias",
            "proj",
            "--path",
            proj.to_str().unwrap(),
            "--access",
            "read_write",
        ],
        b"",
    );
    assert_eq!(run.status, 0, "{run:?}");
    (env, proj)
}

/// `exec --json --cwd proj -- sh -c SCRIPT`; its result.
fn exec(env: &Env, script: &str) -> Value {
    let run = env.run(
        &[
            "--json", "exec", "--cwd", "proj", "--", "/bin/sh", "-c", script,
        ],
        b"",
    );
    assert_eq!(run.status, 0, "{run:?}");
    run.json()
}

#[test]
fn a_held_set_is_listed_shown_applied_in_part_and_discarded() {
    let (env, proj) = world();
    let out = exec(
        &env,
        "echo '{}' > .mcp.json && printf 'line\\n' > CLAUDE.md && echo fine > fine.txt",
    );
    let changes = &out["changes"];
    assert_eq!(changes["published"], 1, "{out}");
    let set = changes["set"].as_str().expect("a set").to_owned();
    let held: Vec<(&str, &str)> = changes["held"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["path"].as_str().unwrap(), h["why"].as_str().unwrap()))
        .collect();
    assert_eq!(
        held,
        [(".mcp.json", "agent_config"), ("CLAUDE.md", "agent_config")]
    );
    assert!(
        changes["note"]
            .as_str()
            .unwrap()
            .contains("safe-lanes changes show"),
        "{out}"
    );
    assert!(proj.join("fine.txt").exists() && !proj.join(".mcp.json").exists());

    // The listing, as text and JSON.
    let text = env.run(&["changes"], b"");
    assert_eq!(text.status, 0, "{text:?}");
    assert!(
        text.stdout.contains(&set) && text.stdout.contains("CLAUDE.md"),
        "{text:?}"
    );
    let listed = env.run(&["--json", "changes"], b"").json();
    assert_eq!(listed["sets"][0]["id"], set.as_str(), "{listed}");
    assert_eq!(listed["sets"][0]["grant"], "proj");
    assert_eq!(listed["sets"][0]["origin"], "exec");
    assert_eq!(listed["sets"][0]["held"][1]["change"], "created");

    // The review: a diff, the warnings, the digest, and the lines that decide.
    let shown = env.run(&["changes", "show", &set], b"");
    assert!(shown.stdout.contains("+line"), "{shown:?}");
    assert!(shown.stdout.contains("changes apply"), "{shown:?}");
    let review = env.run(&["--json", "changes", "show", &set], b"").json();
    let digest = review["digest"].as_str().unwrap().to_owned();
    assert_eq!(digest.len(), 64);
    let claude = &review["changes"][1];
    assert_eq!(claude["path"], "CLAUDE.md");
    assert_eq!(claude["kind"], "file");
    assert_eq!(claude["current"], "absent");
    assert!(
        claude["warnings"][0]
            .as_str()
            .unwrap()
            .starts_with("agent_config"),
        "{claude}"
    );

    // Refusals, each exit 3 with its code, and nothing applied.
    for (args, code) in [
        (
            vec![
                "changes", "apply", &set, "--digest", "0000", "--reason", "r",
            ],
            "invalid_argument",
        ),
        (
            vec![
                "changes", "apply", &set, "--digest", &digest, "--reason", "",
            ],
            "invalid_argument",
        ),
        (
            vec![
                "changes", "apply", &set, "--path", "nope", "--digest", &digest, "--reason", "r",
            ],
            "not_found",
        ),
        (vec!["changes", "show", "set_0000000000000000"], "not_found"),
        (vec!["changes", "show", "../../etc"], "not_found"),
        (
            vec!["changes", "discard", &set, "--reason", " "],
            "invalid_argument",
        ),
    ] {
        let mut json = vec!["--json"];
        json.extend(args.iter().copied());
        let run = env.run(&json, b"");
        assert_eq!(
            (run.status, run.code()),
            (3, code.to_owned()),
            "{args:?}: {run:?}"
        );
    }
    assert!(!proj.join("CLAUDE.md").exists());

    // Apply one change, exactly as shown.
    let applied = env.run(
        &[
            "--json",
            "changes",
            "apply",
            &set,
            "--path",
            "CLAUDE.md",
            "--digest",
            &digest,
            "--reason",
            "the notes are mine",
        ],
        b"",
    );
    assert_eq!(applied.status, 0, "{applied:?}");
    assert_eq!(applied.json()["paths"], serde_json::json!(["CLAUDE.md"]));
    assert_eq!(
        std::fs::read_to_string(proj.join("CLAUDE.md")).unwrap(),
        "line\n"
    );
    // The old digest no longer holds; discard the rest.
    let stale = env.run(
        &[
            "--json", "changes", "apply", &set, "--digest", &digest, "--reason", "r",
        ],
        b"",
    );
    assert_eq!(stale.code(), "invalid_argument", "{stale:?}");
    let discarded = env.run(&["changes", "discard", &set, "--reason", "not that"], b"");
    assert_eq!(discarded.status, 0, "{discarded:?}");
    assert!(!proj.join(".mcp.json").exists());
    assert_eq!(
        env.run(&["--json", "changes"], b"").json()["sets"],
        serde_json::json!([])
    );
    let verified = env.run(&["--json", "audit", "verify"], b"").json();
    assert_eq!(verified["intact"], true, "{verified}");
}

#[test]
fn a_patch_to_a_held_path_is_held_and_an_ordinary_one_applied() {
    let (env, proj) = world();
    let held = env.run(
        &[
            "--json", "patch", "--alias", "proj", "--file", ".envrc", "-",
        ],
        b"--- /dev/null\n+++ b/.envrc\n@@ -0,0 +1 @@\n+export X=1\n",
    );
    assert_eq!(held.status, 0, "{held:?}");
    let json = held.json();
    assert_eq!(
        (json["held"].clone(), json["why"].clone()),
        (true.into(), "tool_config".into())
    );
    assert!(json["set"].as_str().unwrap().starts_with("set_"), "{json}");
    assert!(!proj.join(".envrc").exists());
    let applied = env.run(
        &[
            "--json", "patch", "--alias", "proj", "--file", "README", "-",
        ],
        b"--- a/README\n+++ b/README\n@@ -1 +1 @@\n-hello\n+hi\n",
    );
    assert_eq!(applied.json()["held"], false, "{applied:?}");
    assert_eq!(
        std::fs::read_to_string(proj.join("README")).unwrap(),
        "hi\n"
    );
}

#[test]
fn a_direct_grant_is_written_at_once_and_every_listing_warns() {
    let (env, proj) = world();
    let run = env.run(
        &[
            "grant",
            "set-access",
            "proj",
            "read_write",
            "--direct",
            "--reason",
            "an NFS mount",
        ],
        b"",
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert!(run.stdout.contains("warning: direct"), "{run:?}");
    let list = env.run(&["grant", "list"], b"");
    assert!(list.stdout.contains("warning: direct"), "{list:?}");
    assert_eq!(
        env.run(&["--json", "grant", "list"], b"").json()["grants"][0]["direct"],
        true
    );
    let doctor = env.run(&["--json", "doctor"], b"").json();
    let warned = doctor["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap().contains("grant `proj`: direct"));
    assert!(warned, "{doctor}");
    let out = exec(&env, "echo '{}' > .mcp.json");
    assert_eq!(out["changes"]["set"], Value::Null, "{out}");
    assert!(proj.join(".mcp.json").exists(), "written at once");
    let log = env.run(&["--json", "grant", "log"], b"").json();
    assert!(
        log["changelog"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["action"] == "direct"),
        "{log}"
    );
    // A read-only grant cannot be direct.
    let docs = env.tmp.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    let ro = env.run(
        &[
            "--json",
            "grant",
            "add",
            "--alias",
            "docs",
            "--path",
            docs.to_str().unwrap(),
            "--access",
            "read_only",
            "--direct",
            "--reason",
            "r",
        ],
        b"",
    );
    assert_eq!(ro.code(), "invalid_argument", "{ro:?}");
}

#[test]
fn doctor_counts_the_sets_waiting() {
    let (env, _) = world();
    exec(&env, "mkdir .vscode && echo '{}' > .vscode/tasks.json");
    let doctor = env.run(&["--json", "doctor"], b"").json();
    assert_eq!(doctor["held_changes"], 1, "{doctor}");
}
