//! Grants from the agent's side: listing, requesting, patching and running commands, with the
//! human approving and revoking through the CLI while the server runs.

use serde_json::json;

use crate::util::World;

#[tokio::test]
async fn a_request_stays_inert_until_the_human_approves_it() {
    let w = World::new().await;
    std::fs::write(w.p("docs/spec.md"), "the spec").unwrap();
    let asked = w
        .ok("folder_access_request", json!({"alias": "docs", "access": "read_only", "reason": "read the spec", "path": w.p("docs")}))
        .await;
    assert_eq!(asked["status"], "pending");
    let id = asked["request"]["id"].as_str().unwrap().to_owned();
    assert!(
        asked["approve_with"]
            .as_str()
            .unwrap()
            .contains(&format!("grant approve {id}"))
    );
    // Inert: no grant, and the sandbox cannot see the folder.
    let listed = w.ok("folder_grants_list", json!({})).await;
    assert!(listed["grants"].as_array().unwrap().is_empty());
    assert_eq!(listed["requests"][0]["id"], id.as_str());
    assert_eq!(
        w.refused(
            "shell_exec",
            json!({"command": "cat spec.md", "cwd": "docs"})
        )
        .await,
        "unknown_alias"
    );
    let peek = w
        .ok(
            "shell_exec",
            json!({"command": format!("cat {}", w.p("docs/spec.md").display())}),
        )
        .await;
    assert_ne!(peek["exit_code"], 0, "{peek}");
    // The human approves through the CLI, with the line the agent handed over (which spells
    // the change out) and the human's reason; the running server sees it on the next call.
    let line = asked["approve_with"].as_str().unwrap();
    let mut approve: Vec<&str> = line[line.find("grant approve").unwrap()..]
        .split_whitespace()
        .collect();
    approve.extend(["--reason", "looked at it"]);
    assert!(
        line.contains("--alias docs --access read_only --path"),
        "{line}"
    );
    w.cli(&approve);
    let read = w
        .ok(
            "shell_exec",
            json!({"command": "cat spec.md", "cwd": "docs"}),
        )
        .await;
    assert_eq!(read["stdout"], "the spec");
    let listed = w.ok("folder_grants_list", json!({})).await;
    assert_eq!(listed["grants"][0]["alias"], "docs");
    assert_eq!(listed["grants"][0]["env"], "WORKFLOW_FOLDER_DOCS");
    assert_eq!(listed["grants"][0]["available"], true);
    assert!(listed["requests"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn a_grant_revoked_through_the_cli_mid_session_is_refused_next_call() {
    let w = World::new().await;
    let proj = w.p("proj").display().to_string();
    w.cli(&[
        "grant",
        "add",
        "--reason",
        "test",
        "--alias",
        "proj",
        "--path",
        &proj,
        "--access",
        "read_write",
    ]);
    std::fs::write(w.p("proj/a.txt"), "one\ntwo\n").unwrap();
    let diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n";
    let patched = w
        .ok(
            "folder_patch",
            json!({"alias": "proj", "path": "a.txt", "diff": diff}),
        )
        .await;
    assert_eq!(
        (patched["change"].as_str(), patched["hunks"].as_u64()),
        (Some("modified"), Some(1))
    );
    assert_eq!(
        std::fs::read_to_string(w.p("proj/a.txt")).unwrap(),
        "one\nTWO\n"
    );
    let wrote = w
        .ok(
            "shell_exec",
            json!({"command": "echo new > \"$WORKFLOW_FOLDER_PROJ/b.txt\""}),
        )
        .await;
    assert_eq!(wrote["exit_code"], 0);
    w.cli(&["grant", "revoke", "proj", "--reason", "done"]);
    let back = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-TWO\n+two\n";
    assert_eq!(
        w.refused(
            "folder_patch",
            json!({"alias": "proj", "path": "a.txt", "diff": back})
        )
        .await,
        "revoked"
    );
    assert_eq!(
        w.refused("shell_exec", json!({"command": "ls", "cwd": "proj"}))
            .await,
        "revoked"
    );
    let denied = w
        .ok(
            "shell_exec",
            json!({"command": format!("echo x > {proj}/c.txt")}),
        )
        .await;
    assert_ne!(denied["exit_code"], 0);
    assert!(!w.p("proj/c.txt").exists());
}

#[tokio::test]
async fn patch_and_shell_refusals() {
    let w = World::new().await;
    let docs = w.p("docs").display().to_string();
    w.cli(&[
        "grant",
        "add",
        "--reason",
        "test",
        "--alias",
        "docs",
        "--path",
        &docs,
        "--access",
        "read_only",
    ]);
    let proj = w.p("proj").display().to_string();
    w.cli(&[
        "grant",
        "add",
        "--reason",
        "test",
        "--alias",
        "proj",
        "--path",
        &proj,
        "--access",
        "read_write",
    ]);
    std::fs::write(w.p("docs/a.txt"), "one\n").unwrap();
    let diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+ONE\n";
    let cases = [
        (
            json!({"alias": "docs", "path": "a.txt", "diff": diff}),
            "read_only",
        ),
        (
            json!({"alias": "nope", "path": "a.txt", "diff": diff}),
            "unknown_alias",
        ),
        (
            json!({"alias": "proj", "path": "../outside/x", "diff": diff}),
            "traversal",
        ),
        (
            json!({"alias": "proj", "path": "/etc/passwd", "diff": diff}),
            "absolute_path",
        ),
        (
            json!({"alias": "proj", "path": "missing.txt", "diff": diff}),
            "not_found",
        ),
        (
            json!({"alias": "proj", "path": "x", "diff": "not a diff"}),
            "patch_rejected",
        ),
        (
            json!({"alias": "BAD", "path": "a.txt", "diff": diff}),
            "invalid_alias",
        ),
    ];
    for (args, code) in cases {
        assert_eq!(
            w.refused("folder_patch", args.clone()).await,
            code,
            "{args}"
        );
    }
    let timed = w
        .ok("shell_exec", json!({"command": "sleep 30", "timeout_s": 1}))
        .await;
    assert_eq!(timed["timed_out"], true);
    let env = w.ok("shell_exec", json!({"command": "env"})).await;
    assert!(
        env["stdout"]
            .as_str()
            .unwrap()
            .contains(&format!("WORKFLOW_FOLDER_DOCS={docs}"))
    );
}

/// The whole flow of the seeds: the agent asks (MCP), the human looks at the change and
/// approves it (CLI), the agent reads the folder in the sandbox and edits a file in it.
#[tokio::test]
async fn the_agent_asks_the_human_approves_the_agent_reads_and_edits() {
    let w = World::new().await;
    std::fs::write(w.p("proj/notes.txt"), "one\ntwo\n").unwrap();
    let asked = w
        .ok(
            "folder_access_request",
            json!({"alias": "proj", "access": "read_write", "reason": "fix a typo", "path": w.p("proj")}),
        )
        .await;
    let id = asked["request"]["id"].as_str().unwrap();
    // The human reviews: the change is spelled out, then the line the agent handed over
    // approves exactly it.
    let shown = w.cli(&["grant", "show", id]);
    assert_eq!(shown["change"]["kind"], "new");
    // Who asked: the agent's side, with the client's name and version from its `initialize`.
    let by = shown["request"]["requested_by"].as_str().unwrap();
    assert!(by.starts_with("agent (") && !by.contains("unnamed"), "{by}");
    assert_eq!(shown["change"]["access"], "read_write");
    let line = asked["approve_with"].as_str().unwrap();
    assert_eq!(
        line, shown["approve_with"],
        "the agent's line is the human's"
    );
    let mut approve: Vec<&str> = line[line.find("grant approve").unwrap()..]
        .split_whitespace()
        .collect();
    approve.extend(["--reason", "looked at it"]);
    w.cli(&approve);
    let read = w
        .ok(
            "shell_exec",
            json!({"command": "cat notes.txt", "cwd": "proj"}),
        )
        .await;
    assert_eq!(read["stdout"], "one\ntwo\n");
    let diff = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n";
    let patched = w
        .ok(
            "folder_patch",
            json!({"alias": "proj", "path": "notes.txt", "diff": diff}),
        )
        .await;
    assert_eq!(patched["change"], "modified");
    assert_eq!(
        std::fs::read_to_string(w.p("proj/notes.txt")).unwrap(),
        "one\nTWO\n"
    );
}

/// The agent learns what the human decided: a denied request is listed with the human's
/// reason, so the model can tell the user why and not ask again blindly.
#[tokio::test]
async fn a_denied_request_is_told_to_the_agent_with_the_reason() {
    let w = World::new().await;
    let asked = w
        .ok(
            "folder_access_request",
            json!({"alias": "docs", "access": "read_write", "reason": "edit", "path": w.p("docs")}),
        )
        .await;
    let id = asked["request"]["id"].as_str().unwrap();
    let pending = w.ok("folder_grants_list", json!({})).await;
    assert_eq!(pending["outcomes"][0]["status"], "pending");
    w.cli(&["grant", "deny", id, "--reason", "read-only is enough"]);
    let listed = w.ok("folder_grants_list", json!({})).await;
    assert!(listed["requests"].as_array().unwrap().is_empty());
    let outcome = &listed["outcomes"][0];
    assert_eq!(
        (outcome["id"].as_str(), outcome["status"].as_str()),
        (Some(id), Some("denied"))
    );
    assert_eq!(outcome["decision"], "read-only is enough");
}

/// An agent may ask for a tool (a toolchain's folder) like a folder; the human approves it,
/// and then it is listed with its kind and variables, and `shell_exec` commands get its
/// programs on PATH and its variable.
#[tokio::test]
async fn a_tool_asked_for_and_approved_is_on_the_commands_path() {
    let w = World::new().await;
    std::fs::create_dir_all(w.p("share/bin")).unwrap();
    std::fs::write(w.p("share/bin/greet"), "#!/bin/sh\necho hi from greet\n").unwrap();
    std::fs::set_permissions(
        w.p("share/bin/greet"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let asked = w
        .ok(
            "folder_access_request",
            json!({"alias": "greeter", "access": "read_only", "reason": "to greet",
                   "path": w.p("share"), "kind": "tool", "vars": ["GREET_HOME"], "bin": "bin"}),
        )
        .await;
    assert_eq!(asked["request"]["kind"], "tool");
    let id = asked["request"]["id"].as_str().unwrap();
    let shown = w.cli(&["grant", "show", id]);
    assert_eq!(shown["change"]["grant_kind"], "tool");
    let line = asked["approve_with"].as_str().unwrap();
    let mut approve: Vec<&str> = line[line.find("grant approve").unwrap()..]
        .split_whitespace()
        .collect();
    approve.extend(["--reason", "looked at it"]);
    w.cli(&approve);
    let listed = w.ok("folder_grants_list", json!({})).await;
    let tool = &listed["grants"][0];
    assert_eq!(
        (&tool["kind"], &tool["vars"][0]),
        (&json!("tool"), &json!("GREET_HOME"))
    );
    let ran = w
        .ok(
            "shell_exec",
            json!({"command": "greet; echo \"$GREET_HOME\""}),
        )
        .await;
    let expected = format!(
        "hi from greet\n{}\n",
        w.p("share").canonicalize().unwrap().display()
    );
    assert_eq!(ran["stdout"], expected.as_str(), "{ran}");
    // Asking for a writable tool is refused.
    assert_eq!(
        w.refused(
            "folder_access_request",
            json!({"alias": "other", "access": "read_write", "reason": "x", "kind": "tool"}),
        )
        .await,
        "invalid_argument"
    );
}

#[tokio::test]
async fn a_grant_is_addressed_by_its_id_and_named_in_the_instructions() {
    let w = World::new().await;
    let added = w.grant("proj", "proj", "read_write");
    w.grant("docs", "docs", "read_only");
    let listed = w.ok("folder_grants_list", json!({})).await;
    let id_of = |alias: &str| {
        listed["grants"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["alias"] == alias)
            .map(|g| g["id"].as_str().unwrap().to_owned())
            .unwrap()
    };
    let (proj_id, docs_id) = (id_of("proj"), id_of("docs"));
    assert_eq!(added["id"], proj_id.as_str(), "{added}");
    // Every tool that takes an alias takes the id for it.
    let diff = "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+made by id\n";
    let patched = w
        .ok(
            "folder_patch",
            json!({"alias": proj_id, "path": "new.txt", "diff": diff}),
        )
        .await;
    assert_eq!(patched["path"], w.p("proj/new.txt").display().to_string());
    assert_eq!(
        std::fs::read_to_string(w.p("proj/new.txt")).unwrap(),
        "made by id\n"
    );
    let ran = w
        .ok(
            "shell_exec",
            json!({"command": "cat new.txt", "cwd": proj_id}),
        )
        .await;
    assert_eq!(ran["stdout"], "made by id\n", "{ran}");
    // The id means the grant with its access: a read-only grant's id does not write.
    let refused = w
        .refused(
            "folder_patch",
            json!({"alias": docs_id, "path": "new.txt", "diff": diff}),
        )
        .await;
    assert_eq!(refused, "read_only");
    // A request to widen by id is filed under the grant's alias.
    let asked = w
        .ok(
            "folder_access_request",
            json!({"alias": docs_id, "access": "read_write", "reason": "edit the docs"}),
        )
        .await;
    assert_eq!(asked["request"]["alias"], "docs", "{asked}");
    // An id no grant has is an unknown alias, like any other name.
    assert_eq!(
        w.refused(
            "shell_exec",
            json!({"command": "true", "cwd": "folder_0123456789abcdef"})
        )
        .await,
        "unknown_alias"
    );

    // A client that connects now is told both grants, with their ids and access.
    let instructions = w.instructions().await;
    for (alias, id, access) in [
        ("proj", &proj_id, "read_write"),
        ("docs", &docs_id, "read_only"),
    ] {
        assert!(
            instructions.contains(&format!("`{alias}` ({id}, {access})")),
            "{instructions}"
        );
    }
    assert!(
        instructions.contains("folder_grants_list"),
        "{instructions}"
    );
}

#[tokio::test]
async fn the_instructions_say_when_nothing_is_granted_or_available() {
    let w = World::new().await;
    let instructions = w
        .client
        .peer_info()
        .and_then(|info| info.instructions.clone())
        .expect("instructions");
    assert!(
        instructions.contains("No folder is granted to you yet."),
        "{instructions}"
    );
    // A grant whose folder is gone is not offered as available, but counted.
    w.grant("docs", "docs", "read_only");
    std::fs::remove_dir(w.p("docs")).unwrap();
    let instructions = w.instructions().await;
    assert!(
        instructions.contains("No granted folder is available on this host now.")
            && instructions.contains("1 more granted but unavailable here")
            && !instructions.contains("`docs`"),
        "{instructions}"
    );
}

/// Host mapping (docs/embedding.md): a gateway in a container, or on another machine than
/// the one the human approved on, reads a manifest whose grants name another host and
/// machine. Each is refused with `unavailable_on_host` until the human adopts it there, which
/// needs the folder at the very path the grant names (a bind mount at the same path); one not
/// mounted there is refused on adoption with `not_found`, and a grant of this machine whose
/// folder is not (or no longer) mounted answers `not_found`.
#[tokio::test]
async fn grants_from_another_host_are_refused_until_adopted_at_the_same_path() {
    let w = World::new().await;
    std::fs::write(w.p("proj/a.txt"), "one\ntwo\n").unwrap();
    let grant = |id: &str, alias: &str, path: std::path::PathBuf| {
        json!({"id": id, "alias": alias, "path": path, "access": "read_write",
               "created_at": "2026-11-30T16:02:11Z", "host": "the-host",
               "machine": "0".repeat(32)})
    };
    let manifest = json!({"folder_access": [
        grant("folder_aaaaaaaaaaaaaaaa", "mounted", w.p("proj")),
        grant("folder_bbbbbbbbbbbbbbbb", "elsewhere", w.p("not-mounted")),
    ]});
    std::fs::write(w.root().join("workflow.json"), manifest.to_string()).unwrap();
    let diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n";
    let patch = |alias: &str| json!({"alias": alias, "path": "a.txt", "diff": diff});

    let listed = w.ok("folder_grants_list", json!({})).await;
    for g in listed["grants"].as_array().unwrap() {
        assert_eq!(g["available"], false, "{g}");
        assert!(
            g["unavailable"].as_str().unwrap().contains("grant adopt"),
            "{g}"
        );
    }
    for alias in ["mounted", "elsewhere"] {
        let (code, why) = w.refusal("folder_patch", patch(alias)).await;
        assert_eq!(code, "unavailable_on_host", "{alias}: {why}");
        assert!(why.contains(&format!("grant adopt {alias}")), "{why}");
        assert_eq!(
            w.refused("shell_exec", json!({"command": "true", "cwd": alias}))
                .await,
            "unavailable_on_host",
            "{alias}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(w.p("proj/a.txt")).unwrap(),
        "one\ntwo\n"
    );

    // Not mounted at the path it names: adoption is refused, the grant stays unavailable.
    let refused = w.cli_any(&["grant", "adopt", "elsewhere", "--reason", "the container"]);
    assert_eq!(refused["error"]["code"], "not_found", "{refused}");
    assert_eq!(
        w.refused("folder_patch", patch("elsewhere")).await,
        "unavailable_on_host"
    );
    // Mounted at the same path: adopted, the grant works here.
    w.cli(&["grant", "adopt", "mounted", "--reason", "the container"]);
    w.ok("folder_patch", patch("mounted")).await;
    assert_eq!(
        std::fs::read_to_string(w.p("proj/a.txt")).unwrap(),
        "one\nTWO\n"
    );

    // A grant of this machine whose folder is not mounted (any more): `not_found`.
    std::fs::create_dir(w.p("volume")).unwrap();
    let volume = w.p("volume").display().to_string();
    w.cli(&[
        "grant",
        "add",
        "--alias",
        "volume",
        "--path",
        &volume,
        "--access",
        "read_write",
        "--reason",
        "a volume",
    ]);
    std::fs::remove_dir(w.p("volume")).unwrap();
    assert_eq!(
        w.refused("folder_patch", patch("volume")).await,
        "not_found"
    );
    let listed = w.ok("folder_grants_list", json!({})).await;
    let volume = listed["grants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["alias"] == "volume")
        .cloned()
        .unwrap();
    assert_eq!(volume["available"], false, "{volume}");
}

/// Regression: `folder_patch` applied a diff whose header names another file (`+++
/// b/main.rs` given for `a.txt`) when its hunks fit the target. The diff must be for the
/// target; nothing changes otherwise.
#[tokio::test]
async fn a_diff_for_another_file_is_not_applied_to_the_target() {
    let w = World::new().await;
    let proj = w.p("proj").display().to_string();
    w.cli(&[
        "grant",
        "add",
        "--alias",
        "proj",
        "--path",
        &proj,
        "--access",
        "read_write",
        "--reason",
        "the project",
    ]);
    std::fs::write(w.p("proj/a.txt"), "one\ntwo\n").unwrap();
    let hunk = "@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n";
    let other = format!("--- a/main.rs\n+++ b/main.rs\n{hunk}");
    let (code, why) = w
        .refusal(
            "folder_patch",
            json!({"alias": "proj", "path": "a.txt", "diff": other}),
        )
        .await;
    assert_eq!(code, "patch_rejected", "{why}");
    assert!(why.contains("main.rs"), "{why}");
    assert_eq!(
        std::fs::read_to_string(w.p("proj/a.txt")).unwrap(),
        "one\ntwo\n"
    );
    let mine = format!("--- a/a.txt\n+++ b/a.txt\n{hunk}");
    w.ok(
        "folder_patch",
        json!({"alias": "proj", "path": "a.txt", "diff": mine}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(w.p("proj/a.txt")).unwrap(),
        "one\nTWO\n"
    );
}

/// Regression: an agent could file a request that changes nothing (the access the grant has)
/// or names another folder for a granted alias (which approving then put aside). Both are
/// `invalid_argument` to the agent, and nothing is filed.
#[tokio::test]
async fn a_request_that_changes_nothing_or_moves_a_grant_is_refused() {
    let w = World::new().await;
    w.cli(&[
        "grant",
        "add",
        "--alias",
        "docs",
        "--path",
        w.p("docs").to_str().unwrap(),
        "--access",
        "read_only",
        "--reason",
        "the spec",
    ]);
    let same = json!({"alias": "docs", "access": "read_only", "reason": "again"});
    assert_eq!(
        w.refused("folder_access_request", same).await,
        "invalid_argument"
    );
    std::fs::create_dir_all(w.p("other")).unwrap();
    let moved = json!({"alias": "docs", "access": "read_write", "reason": "there",
                       "path": w.p("other")});
    assert_eq!(
        w.refused("folder_access_request", moved).await,
        "invalid_argument"
    );
    let listed = w.ok("folder_grants_list", json!({})).await;
    assert!(
        listed["requests"].as_array().unwrap().is_empty(),
        "{listed}"
    );
    // Raising its access, for its own folder, is a request.
    let raise = json!({"alias": "docs", "access": "read_write", "reason": "edit it",
                       "path": w.p("docs")});
    assert_eq!(
        w.ok("folder_access_request", raise).await["status"],
        "pending"
    );
}
