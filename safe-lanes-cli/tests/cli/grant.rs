//! `grant …`: the JSON contract, the request flow, and two processes writing at once.

use std::process::{Command, Stdio};

use crate::util::Env;

fn world() -> Env {
    let env = Env::new();
    for d in ["proj", "docs"] {
        std::fs::create_dir(env.tmp.path().join(d)).unwrap();
    }
    env
}

#[test]
fn add_list_set_access_revoke() {
    let env = world();
    let proj = env.tmp.path().join("proj");
    let run = env.run(
        &[
            "--json",
            "grant",
            "add",
            "--alias",
            "rts-source",
            "--path",
            proj.to_str().unwrap(),
            "--access",
            "read_write",
            "--reason",
            "website",
        ],
        b"",
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.json()["env"], "WORKFLOW_FOLDER_RTS_SOURCE");
    let list = env.run(&["--json", "grant", "list"], b"").json();
    let g = &list["grants"][0];
    for key in ["id", "alias", "path", "access", "env", "available"] {
        assert!(!g[key].is_null(), "{key} in {g}");
    }
    assert_eq!(g["path"], proj.to_str().unwrap());
    assert_eq!(g["access"], "read_write");
    assert_eq!(g["available"], true);
    assert!(list["requests"].as_array().unwrap().is_empty());

    let run = env.run(
        &[
            "--json",
            "grant",
            "set-access",
            "rts-source",
            "read_only",
            "--reason",
            "calm",
        ],
        b"",
    );
    assert_eq!(run.json()["access"], "read_only");
    let run = env.run(
        &[
            "--json",
            "grant",
            "revoke",
            "rts-source",
            "--reason",
            "done",
        ],
        b"",
    );
    assert_eq!(run.status, 0);
    assert!(
        env.run(&["--json", "grant", "list"], b"").json()["grants"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let log = env.run(&["--json", "grant", "log"], b"").json();
    let actions: Vec<&str> = log["changelog"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["add", "set_access", "revoke"]);
    assert_eq!(log["changelog"][2]["reason"], "done");
}

#[test]
fn refusals_exit_3_with_their_code() {
    let env = world();
    let proj = env.tmp.path().join("proj");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["grant", "revoke", "--reason", "test", "nope"],
            "unknown_alias",
        ),
        (
            vec![
                "grant",
                "add",
                "--reason",
                "test",
                "--alias",
                "Bad",
                "--path",
                proj.to_str().unwrap(),
                "--access",
                "read_only",
            ],
            "invalid_alias",
        ),
        (
            vec![
                "grant",
                "add",
                "--reason",
                "test",
                "--alias",
                "root",
                "--path",
                "/",
                "--access",
                "read_only",
            ],
            "state_root",
        ),
        (
            vec![
                "grant",
                "add",
                "--reason",
                "test",
                "--alias",
                "rel",
                "--path",
                "proj",
                "--access",
                "read_only",
            ],
            "relative_path",
        ),
        (vec!["grant", "approve", "req_missing"], "not_found"),
    ];
    for (args, code) in cases {
        let mut full = vec!["--json"];
        full.extend(args.iter().copied());
        let run = env.run(&full, b"");
        assert_eq!((run.status, run.code()), (3, code.to_owned()), "{args:?}");
    }
    let usage = env.run(
        &[
            "grant", "add", "--reason", "test", "--alias", "x", "--path", "/tmp", "--access", "all",
        ],
        b"",
    );
    assert_eq!(usage.status, 2);
}

#[test]
fn a_request_is_approved_through_the_cli() {
    let env = world();
    let docs = env.tmp.path().join("docs");
    let run = env.run(
        &[
            "--json",
            "grant",
            "request",
            "--alias",
            "docs",
            "--access",
            "read_only",
            "--reason",
            "read them",
            "--path",
            docs.to_str().unwrap(),
            "--actor",
            "agent",
        ],
        b"",
    );
    assert_eq!(run.status, 0, "{run:?}");
    let id = run.json()["id"].as_str().unwrap().to_owned();
    let pending = env.run(&["--json", "grant", "requests"], b"").json();
    assert_eq!(pending["requests"][0]["id"], id.as_str());
    assert!(
        env.run(&["--json", "grant", "list"], b"").json()["grants"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    // Without a terminal, the change must be spelled out.
    let run = env.run(&["--json", "grant", "approve", &id, "--reason", "ok"], b"");
    assert_eq!(
        (run.status, run.code()),
        (3, "invalid_argument".to_owned()),
        "{run:?}"
    );
    let shown = env.run(&["--json", "grant", "show", &id], b"").json();
    let line = shown["approve_with"].as_str().unwrap().to_owned();
    let mut approve: Vec<&str> = vec!["--json"];
    approve.extend(line[line.find("grant approve").unwrap()..].split_whitespace());
    approve.extend(["--reason", "ok"]);
    let run = env.run(&approve, b"");
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.json()["alias"], "docs");
    let list = env.run(&["--json", "grant", "list"], b"").json();
    assert_eq!(list["grants"][0]["alias"], "docs");
    assert!(list["requests"].as_array().unwrap().is_empty());
}

#[test]
fn two_processes_adding_grants_at_once_both_keep_theirs() {
    let env = world();
    for i in 0..30 {
        std::fs::create_dir(env.tmp.path().join(format!("d{i}"))).unwrap();
    }
    let script = |parity: usize| {
        let mut lines = Vec::new();
        for i in (parity..30).step_by(2) {
            let dir = env.tmp.path().join(format!("d{i}"));
            lines.push(format!(
                "'{}' --root '{}' grant add --alias d{i} --path '{}' --access read_only --reason t || exit 1",
                env!("CARGO_BIN_EXE_safe-lanes"),
                env.root().display(),
                dir.display()
            ));
        }
        lines.join("\n")
    };
    let children: Vec<_> = (0..2)
        .map(|parity| {
            Command::new("/bin/sh")
                .args(["-c", &script(parity)])
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let list = env.run(&["--json", "grant", "list"], b"").json();
    assert_eq!(list["grants"].as_array().unwrap().len(), 30);
    let run = env.run(&["--json", "audit", "verify"], b"");
    assert_eq!(run.json()["intact"], true, "{}", run.stdout);
}

#[test]
fn a_custom_manifest_keeps_its_other_keys() {
    let env = world();
    let manifest = env.tmp.path().join("flows/wf.json");
    std::fs::create_dir(env.tmp.path().join("flows")).unwrap();
    std::fs::write(&manifest, r#"{"name":"wf","steps":[{"run":"x"}]}"#).unwrap();
    let proj = env.tmp.path().join("proj");
    let run = env.run(
        &[
            "--json",
            "--manifest",
            manifest.to_str().unwrap(),
            "grant",
            "add",
            "--reason",
            "test",
            "--alias",
            "proj",
            "--path",
            proj.to_str().unwrap(),
            "--access",
            "read_only",
        ],
        b"",
    );
    assert_eq!(run.status, 0, "{run:?}");
    let stored: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    assert_eq!(stored["name"], "wf");
    assert_eq!(stored["steps"][0]["run"], "x");
    assert_eq!(stored["folder_access"][0]["alias"], "proj");
    assert!(!env.root().join("workflow.json").exists());
}

#[test]
fn deny_by_alias_whatever_the_current_id() {
    let env = world();
    for reason in ["first", "second"] {
        let run = env.run(
            &[
                "--json",
                "grant",
                "request",
                "--alias",
                "docs",
                "--access",
                "read_only",
                "--reason",
                reason,
            ],
            b"",
        );
        assert_eq!(run.status, 0, "{run:?}");
    }
    let run = env.run(
        &[
            "--json", "grant", "deny", "--alias", "docs", "--reason", "no",
        ],
        b"",
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.json()["reason"], "second");
    assert!(
        env.run(&["--json", "grant", "requests"], b"").json()["requests"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        env.run(&["grant", "deny"], b"").status,
        2,
        "an id or --alias is required"
    );
}

/// The state root, initialized, with `manifest` as its `workflow.json`.
fn with_manifest(env: &Env, manifest: &serde_json::Value) {
    assert_eq!(env.run(&["init"], b"").status, 0);
    std::fs::write(
        env.root().join("workflow.json"),
        serde_json::to_vec_pretty(manifest).unwrap(),
    )
    .unwrap();
}

#[test]
fn adopt_a_grant_written_without_a_host() {
    let env = world();
    let proj = env.tmp.path().join("proj");
    let docs = env.tmp.path().join("docs");
    with_manifest(
        &env,
        &serde_json::json!({"folder_access": [
            {"id": "folder_abc123", "alias": "rts-source", "path": proj, "access": "read_write",
             "label": {"by": "another tool"}},
            {"id": "folder_def456", "alias": "docs", "path": docs, "access": "read_only",
             "host": null},
        ]}),
    );
    let list = env.run(&["--json", "grant", "list"], b"").json();
    let g = &list["grants"][0];
    assert_eq!(g["available"], false, "{g}");
    assert!(g.get("host").is_none(), "no empty host: {g}");
    assert!(
        g["unavailable"]
            .as_str()
            .unwrap()
            .contains("safe-lanes grant adopt rts-source"),
        "{g}"
    );
    let text = env.run(&["grant", "list"], b"");
    assert!(
        text.stdout.contains("approved without a host"),
        "{}",
        text.stdout
    );

    let run = env.run(
        &["--json", "grant", "adopt", "rts-source", "--reason", "mine"],
        b"",
    );
    assert_eq!(run.status, 0, "{run:?}");
    let adopted = run.json();
    assert_eq!(adopted["alias"], "rts-source");
    assert_eq!(adopted["env"], "WORKFLOW_FOLDER_RTS_SOURCE");
    assert!(adopted["host"].as_str().is_some_and(|h| !h.is_empty()));
    assert!(adopted["created_at"].as_str().is_some());
    let list = env.run(&["--json", "grant", "list"], b"").json();
    assert_eq!(list["grants"][0]["available"], true, "{list}");
    assert_eq!(list["grants"][1]["available"], false, "{list}");
    let stored: serde_json::Value =
        serde_json::from_slice(&std::fs::read(env.root().join("workflow.json")).unwrap()).unwrap();
    assert_eq!(stored["folder_access"][0]["label"]["by"], "another tool");
    assert!(
        stored["folder_access"][1]["host"].is_null(),
        "the other one is left as it was"
    );
    let log = env.run(&["--json", "grant", "log"], b"").json();
    assert_eq!(log["changelog"][0]["action"], "adopt");
    assert_eq!(log["changelog"][0]["reason"], "mine");
    let text = env.run(&["grant", "adopt", "--reason", "test", "docs"], b"");
    assert_eq!(text.status, 0, "{text:?}");
    assert!(text.stdout.starts_with("adopted docs"), "{}", text.stdout);

    for (alias, code) in [
        ("rts-source", "invalid_argument"),
        ("nope", "unknown_alias"),
        ("Bad", "invalid_alias"),
    ] {
        let run = env.run(
            &["--json", "grant", "adopt", "--reason", "test", alias],
            b"",
        );
        assert_eq!((run.status, run.code()), (3, code.to_owned()), "{alias}");
    }
    assert_eq!(
        env.run(&["grant", "adopt"], b"").status,
        2,
        "an alias is required"
    );
    let run = env.run(&["--json", "audit", "verify"], b"");
    assert_eq!(run.json()["intact"], true, "{}", run.stdout);
}

#[test]
fn a_manifest_that_names_a_key_twice_is_refused_untouched() {
    let env = world();
    assert_eq!(env.run(&["init"], b"").status, 0);
    let manifest = env.root().join("workflow.json");
    let proj = env.tmp.path().join("proj");
    let text = format!(
        r#"{{"folder_access":[{{"id":"folder_1","alias":"proj","path":"{}","access":"read_only","access":"read_write"}}]}}"#,
        proj.display()
    );
    std::fs::write(&manifest, &text).unwrap();
    for args in [
        vec!["--json", "grant", "list"],
        vec!["--json", "grant", "revoke", "--reason", "test", "proj"],
        vec!["--json", "grant", "adopt", "--reason", "test", "proj"],
    ] {
        let run = env.run(&args, b"");
        assert_eq!(
            (run.status, run.code()),
            (3, "invalid_manifest".to_owned()),
            "{args:?}"
        );
        let message = run.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(
            message.contains("the key `access` appears twice in folder_access[0]"),
            "{message}"
        );
    }
    assert_eq!(std::fs::read_to_string(&manifest).unwrap(), text);
}
