//! Long commands with the rmcp client: cancellation, progress, background jobs past the
//! client's own request timeout; and an invalid manifest that degrades instead of killing the
//! server; and paging.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, ProgressNotificationParam, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions};
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Map, Value, json};

use crate::util::{World, connect, refusal_code};

/// A loop that rewrites `$WORKFLOW_FOLDER_PROJ/beat` every 50 ms, in the background of `sh`.
const HEARTBEAT: &str =
    r#"( while :; do date +%s%N > "$WORKFLOW_FOLDER_PROJ/beat"; sleep 0.05; done ) &"#;

/// A world with the folder `proj` granted read-write.
async fn granted() -> World {
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
    w
}

/// [`granted`], the grant made `--direct`: what a command writes shows in the folder while it
/// runs, which the tests watching a command's heartbeat from outside need (a layered grant's
/// writes show only when the command ends).
async fn granted_direct() -> World {
    let w = granted().await;
    w.cli(&[
        "grant",
        "set-access",
        "proj",
        "read_write",
        "--direct",
        "--reason",
        "watched from outside while it runs",
    ]);
    w
}

/// Whether whatever rewrites `beat` every 50 ms has stopped (same content for half a second,
/// within ten seconds).
async fn stops_writing(beat: &Path) -> bool {
    for _ in 0..20 {
        let before = std::fs::read(beat).unwrap_or_default();
        tokio::time::sleep(Duration::from_millis(500)).await;
        if before == std::fs::read(beat).unwrap_or_default() {
            return true;
        }
    }
    false
}

async fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn call(tool: &str, args: Value) -> ClientRequest {
    let Value::Object(args) = args else {
        panic!("arguments are an object")
    };
    let args: Map<String, Value> = args;
    ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new(tool.to_owned()).with_arguments(args),
    ))
}

#[tokio::test]
async fn a_cancelled_command_is_stopped_with_everything_it_started() {
    let w = granted_direct().await;
    let script = format!("{HEARTBEAT} sleep 30; echo late > \"$WORKFLOW_FOLDER_PROJ/late\"");
    let handle = w
        .client
        .peer()
        .send_cancellable_request(
            call("shell_exec", json!({ "command": script })),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    wait_for(&w.p("proj/beat")).await;
    handle
        .cancel(Some("the user pressed stop".into()))
        .await
        .unwrap();
    assert!(
        stops_writing(&w.p("proj/beat")).await,
        "the whole group was killed"
    );
    assert!(!w.p("proj/late").exists(), "nothing ran after the cancel");
    // The server answers the next call as usual.
    w.ok("downloads_list", json!({})).await;
    // The cancellation is on the record: the command's one end says it was stopped, and why.
    let records = || safe_lanes_testkit::audit::records(&w.root());
    let deadline = Instant::now() + Duration::from_secs(20);
    while !records().iter().any(|r| r["event"] == "exec.end") {
        assert!(Instant::now() < deadline, "the end was recorded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let records = records();
    let start = records.iter().find(|r| r["event"] == "exec.start").unwrap();
    let ends: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "exec.end" && r["id"] == start["id"])
        .collect();
    assert_eq!(ends.len(), 1, "{records:?}");
    assert!(
        ends[0]["stopped"]
            .as_str()
            .unwrap_or("")
            .contains("cancelled"),
        "{}",
        ends[0]
    );
}

/// Counts the progress notifications it receives.
#[derive(Clone, Debug, Default)]
struct Progress(Arc<AtomicUsize>);

impl ClientHandler for Progress {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        assert!(params.progress > 0.0);
        assert!(params.message.is_some_and(|m| m.starts_with("running for")));
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_long_command_reports_progress() {
    let w = granted().await;
    let progress = Progress::default();
    let client = connect(&w.root(), &[], progress.clone()).await;
    let result = client
        .call_tool(
            CallToolRequestParams::new("shell_exec").with_arguments(
                json!({"command": "echo started; sleep 5; echo done"})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await
        .unwrap();
    let out = result.structured_content.unwrap();
    assert_eq!(out["stdout"], "started\ndone\n");
    assert_eq!(out["status"], "finished");
    assert!(
        progress.0.load(Ordering::SeqCst) >= 1,
        "at least one progress notification in 5 s"
    );
}

#[tokio::test]
async fn a_background_job_outlives_the_clients_request_timeout() {
    let w = granted_direct().await;
    let peer = w.client.peer().clone();
    // Every request of this client gives up after 3 s.
    let call3 = |tool: &str, args: Value| {
        let (peer, request) = (peer.clone(), call(tool, args));
        async move {
            let handle = peer
                .send_request_with_option(
                    request,
                    PeerRequestOptions::with_timeout(Duration::from_secs(3)),
                )
                .await
                .unwrap();
            match handle.await_response().await.unwrap() {
                ServerResult::CallToolResult(result) => result,
                other => panic!("{other:?}"),
            }
        }
    };
    let script = "for i in 1 2 3 4; do echo tick $i; sleep 2; done; exit 7";
    let started = call3("shell_exec", json!({"command": script, "background": true})).await;
    let started = started.structured_content.unwrap();
    assert_eq!(started["status"], "running");
    let id = started["job_id"].as_str().unwrap().to_owned();
    let mut output = started["stdout"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(40);
    let last = loop {
        assert!(Instant::now() < deadline, "the job never finished");
        let polled = call3("shell_job_status", json!({"job_id": id, "wait_s": 2})).await;
        let polled = polled.structured_content.unwrap();
        output.push_str(polled["stdout"].as_str().unwrap());
        if polled["status"] == "finished" {
            break polled;
        }
    };
    assert_eq!(output, "tick 1\ntick 2\ntick 3\ntick 4\n", "each line once");
    assert_eq!(last["exit_code"], 7);
    let gone = w
        .call("shell_job_status", json!({ "job_id": id }))
        .await
        .unwrap();
    assert_eq!(refusal_code(&gone), "not_found", "forgotten once reported");

    // A job can be stopped, and the number of jobs is bounded.
    let script = format!("{HEARTBEAT} sleep 60");
    let mut ids = Vec::new();
    for _ in 0..8 {
        let job = w
            .ok("shell_exec", json!({"command": script, "background": true}))
            .await;
        ids.push(job["job_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(
        w.refused("shell_exec", json!({"command": "true", "background": true}))
            .await,
        "too_many_jobs"
    );
    wait_for(&w.p("proj/beat")).await;
    for id in &ids {
        let stopped = w.ok("shell_job_stop", json!({ "job_id": id })).await;
        assert_eq!(stopped["status"], "finished");
        assert_eq!(stopped["stopped"], "stopped by the agent");
    }
    assert!(
        stops_writing(&w.p("proj/beat")).await,
        "every job was stopped"
    );
}

#[tokio::test]
async fn jobs_end_with_the_server() {
    let w = granted_direct().await;
    let script = format!("{HEARTBEAT} sleep 60");
    w.ok("shell_exec", json!({"command": script, "background": true}))
        .await;
    wait_for(&w.p("proj/beat")).await;
    let World { tmp, client } = w;
    client.cancel().await.unwrap();
    assert!(stops_writing(&tmp.path().join("proj/beat")).await);
}

#[tokio::test]
async fn an_invalid_manifest_leaves_the_lanes_serving() {
    let w = World::new().await;
    std::fs::write(w.root().join("workflow.json"), "{ not json").unwrap();
    let client = connect(&w.root(), &[], ()).await;
    let call = |tool: &str, args: Value| {
        let args = args.as_object().unwrap().clone();
        client.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
    };
    let saved = call("download_save", json!({"filename": "a.txt", "text": "x"}))
        .await
        .unwrap();
    assert_eq!(saved.is_error, Some(false), "{saved:?}");
    for (tool, args) in [
        ("folder_grants_list", json!({})),
        ("shell_exec", json!({"command": "true"})),
    ] {
        let refused = call(tool, args).await.unwrap();
        assert_eq!(refusal_code(&refused), "invalid_manifest", "{tool}");
    }
    // Fixed by the human: the grant tools work again without a restart.
    std::fs::write(w.root().join("workflow.json"), "{}").unwrap();
    let listed = call("folder_grants_list", json!({})).await.unwrap();
    assert_eq!(listed.is_error, Some(false), "{listed:?}");
}

#[tokio::test]
async fn downloads_are_listed_a_page_at_a_time() {
    let w = World::new().await;
    for name in ["c.txt", "a.txt", "e.txt", "b.txt", "d.txt"] {
        w.ok("download_save", json!({"filename": name, "text": "x"}))
            .await;
    }
    // Two names put there by hand that differ only in bytes that are not UTF-8: the same
    // lossy name, each listed once all the same, though a page ends between them.
    use std::os::unix::ffi::OsStrExt;
    for raw in [&b"b\xfe.txt"[..], b"b\xff.txt"] {
        let path = w
            .root()
            .join(".downloads")
            .join(std::ffi::OsStr::from_bytes(raw));
        std::fs::write(path, "x").unwrap();
    }
    let mut names = Vec::new();
    let mut cursor = Value::Null;
    loop {
        let args = match &cursor {
            Value::Null => json!({"limit": 3}),
            c => json!({"limit": 3, "cursor": c}),
        };
        let page = w.ok("downloads_list", args).await;
        let files = page["files"].as_array().unwrap();
        assert!(files.len() <= 3);
        names.extend(files.iter().map(|f| f["name"].as_str().unwrap().to_owned()));
        match page.get("next_cursor") {
            Some(next) => cursor = next.clone(),
            None => break,
        }
    }
    let odd = "b\u{FFFD}.txt";
    assert_eq!(
        names,
        ["a.txt", "b.txt", odd, odd, "c.txt", "d.txt", "e.txt"]
    );
}

/// Every tool answers a refusal as a tool result the model reads, with its code.
#[tokio::test]
async fn every_tool_refuses_with_a_code() {
    let w = World::with_args(&["--uploader", "/bin/cat {file}"]).await;
    let big = "x".repeat(100);
    let small = World::with_args(&["--max-bytes", "10", "--uploader", "/bin/cat {file}"]).await;
    let cases = [
        (
            &small,
            "download_save",
            json!({"filename": "a", "text": big}),
            "too_large",
        ),
        (
            &w,
            "downloads_list",
            json!({"cursor": "!"}),
            "invalid_argument",
        ),
        (
            &w,
            "upload_resolve",
            json!({"path": "relative"}),
            "relative_path",
        ),
        (
            &w,
            "upload_file",
            json!({"path": "/etc/passwd"}),
            "outside_allowlist",
        ),
        (
            &small,
            "upload_content",
            json!({"filename": "a", "text": big}),
            "too_large",
        ),
        (
            &w,
            "folder_grants_list",
            json!({"all": true}),
            "invalid_argument",
        ),
        (
            &w,
            "folder_access_request",
            json!({"alias": "Bad!", "access": "read_only", "reason": "r"}),
            "invalid_alias",
        ),
        (
            &w,
            "folder_patch",
            json!({"alias": "nope", "path": "a", "diff": "x"}),
            "unknown_alias",
        ),
        (
            &w,
            "shell_exec",
            json!({"command": "true", "cwd": "nope"}),
            "unknown_alias",
        ),
        (
            &w,
            "shell_job_status",
            json!({"job_id": "job-404"}),
            "not_found",
        ),
        (
            &w,
            "shell_job_stop",
            json!({"job_id": "job-404"}),
            "not_found",
        ),
    ];
    let mut tools: Vec<&str> = cases.iter().map(|c| c.1).collect();
    tools.sort_unstable();
    let mut listed: Vec<String> = w
        .client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    listed.sort_unstable();
    assert_eq!(tools, listed, "one refusal for each tool");
    for (world, tool, args, code) in cases {
        assert_eq!(
            world.refused(tool, args.clone()).await,
            code,
            "{tool} {args}"
        );
    }
}

/// The human's CLI and the agent's server answer the same report for the same work: a
/// command (`safe-lanes exec` and `shell_exec`), a save and a listing of the lane.
#[tokio::test]
async fn the_cli_and_the_server_print_the_same_reports() {
    let w = granted().await;
    let script = "echo out; echo err >&2; exit 3";
    let mut cli = w.cli_any(&["exec", "--cwd", "proj", "--", "/bin/sh", "-c", script]);
    let mut mcp = w
        .ok("shell_exec", json!({ "command": script, "cwd": "proj" }))
        .await;
    for report in [&mut cli, &mut mcp] {
        let elapsed = report.as_object_mut().unwrap().remove("elapsed_s");
        assert!(elapsed.is_some_and(|e| e.as_f64().is_some()), "{report}");
    }
    assert_eq!(cli, mcp);
    assert_eq!(mcp["exit_code"], 3);
    let saved_by_cli = w.cli_in(&["download", "save", "--name", "a.txt", "-"], b"same");
    let saved_by_mcp = w
        .ok(
            "download_save",
            json!({ "filename": "a.txt", "text": "same" }),
        )
        .await;
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&saved_by_cli), keys(&saved_by_mcp));
    assert_eq!(saved_by_mcp["name"], "a (1).txt");
    assert_eq!(saved_by_cli["sha256"], saved_by_mcp["sha256"]);
    let listed_by_cli = w.cli(&["download", "list"]);
    let listed_by_mcp = w.ok("downloads_list", json!({})).await;
    assert_eq!(listed_by_cli, listed_by_mcp);
}
