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
        (vec!["grant", "revoke", "nope"], "unknown_alias"),
        (
            vec![
                "grant",
                "add",
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
            "grant", "add", "--alias", "x", "--path", "/tmp", "--access", "all",
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
    let run = env.run(&["--json", "grant", "approve", &id, "--reason", "ok"], b"");
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
                "'{}' --root '{}' grant add --alias d{i} --path '{}' --access read_only || exit 1",
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
