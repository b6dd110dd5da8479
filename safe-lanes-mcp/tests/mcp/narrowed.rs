//! A server started with `--only` serves a child session of the human's grants: every grant
//! tool sees only the narrowed grants, with the narrowed access, under the real sandbox.

use std::process::Command;

use serde_json::json;

use crate::util::World;

/// A server narrowed to `proj` and `docs` (read-only), with `proj`, `docs` and `share` all
/// granted read-write by the human.
async fn narrowed() -> World {
    let w = World::with_args(&["--only", "proj, docs:read_only"]).await;
    for alias in ["proj", "docs", "share"] {
        std::fs::write(w.p(alias).join("a.txt"), "one\n").unwrap();
        let path = w.p(alias).display().to_string();
        w.cli(&[
            "grant",
            "add",
            "--reason",
            "test",
            "--alias",
            alias,
            "--path",
            &path,
            "--access",
            "read_write",
        ]);
    }
    w
}

#[tokio::test]
async fn only_lists_the_narrowed_grants_with_their_narrowed_access() {
    let w = narrowed().await;
    let listed = w.ok("folder_grants_list", json!({})).await;
    let grants: Vec<(&str, &str)> = listed["grants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["alias"].as_str().unwrap(), g["access"].as_str().unwrap()))
        .collect();
    assert_eq!(grants, [("proj", "read_write"), ("docs", "read_only")]);
    // The human's own listing is unchanged.
    let human = w.cli(&["grant", "list"]);
    assert_eq!(human["grants"].as_array().unwrap().len(), 3, "{human}");
}

#[tokio::test]
async fn only_confines_shell_exec_and_folder_patch_to_the_narrowed_grants() {
    let w = narrowed().await;
    let write = |var: &str| json!({"command": format!("echo two >> \"${var}/a.txt\"")});
    let denied = w.ok("shell_exec", write("WORKFLOW_FOLDER_DOCS")).await;
    assert_ne!(denied["exit_code"], 0, "{denied}");
    assert_eq!(std::fs::read_to_string(w.p("docs/a.txt")).unwrap(), "one\n");
    let wrote = w.ok("shell_exec", write("WORKFLOW_FOLDER_PROJ")).await;
    assert_eq!(wrote["exit_code"], 0, "{wrote}");
    assert_eq!(
        std::fs::read_to_string(w.p("proj/a.txt")).unwrap(),
        "one\ntwo\n"
    );
    let read = w
        .ok("shell_exec", json!({"command": "cat a.txt", "cwd": "docs"}))
        .await;
    assert_eq!(read["stdout"], "one\n");
    // `share` is not there at all: not as a cwd, not in the environment, not by its path.
    assert_eq!(
        w.refused("shell_exec", json!({"command": "ls", "cwd": "share"}))
            .await,
        "unknown_alias"
    );
    let share = w.p("share").display().to_string();
    let peek = w
        .ok(
            "shell_exec",
            json!({"command": format!("env | grep -c WORKFLOW_FOLDER_SHARE; cat {share}/a.txt")}),
        )
        .await;
    assert_ne!(peek["exit_code"], 0, "{peek}");
    assert_eq!(peek["stdout"], "0\n", "{peek}");
    let diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+ONE\n";
    for (alias, code) in [("docs", "read_only"), ("share", "unknown_alias")] {
        let args = json!({"alias": alias, "path": "a.txt", "diff": diff});
        assert_eq!(w.refused("folder_patch", args).await, code, "{alias}");
        assert_eq!(
            std::fs::read_to_string(w.p(alias).join("a.txt")).unwrap(),
            "one\n"
        );
    }
}

#[test]
fn a_bad_only_spec_stops_the_server_before_it_serves() {
    let tmp = tempfile::tempdir().unwrap();
    for spec in ["", "Docs", "docs:write", "docs,"] {
        let out = Command::new(env!("CARGO_BIN_EXE_safe-lanes-mcp"))
            .arg("--root")
            .arg(tmp.path().join("state"))
            .args(["--only", spec])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{spec:?}");
        assert!(out.stdout.is_empty(), "{spec:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--only"), "{spec:?}: {stderr}");
    }
}
