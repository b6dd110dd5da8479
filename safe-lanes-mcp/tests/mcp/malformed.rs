//! Malformed calls get an error and the server keeps serving.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use rmcp::ServiceError;
use serde_json::{Value, json};

use crate::util::{World, refusal_code};

/// A call that must succeed after each malformed one.
async fn still_serving(w: &World) {
    w.ok("downloads_list", json!({})).await;
}

#[tokio::test]
async fn bad_arguments_are_tool_errors_naming_the_field_and_the_server_keeps_serving() {
    let w = World::new().await;
    // Unknown tool: not a tool call at all, so a JSON-RPC error.
    match w.call("read_file", json!({"path": "/etc/passwd"})).await {
        Err(ServiceError::McpError(e)) => assert_eq!(e.code.0, -32602),
        other => panic!("{other:?}"),
    }
    still_serving(&w).await;
    // Everything else is a tool result the model reads: `invalid_argument`, naming the field.
    for (tool, args, names) in [
        (
            "download_save",
            json!({"filename": "a", "text": "x", "base64": "eA=="}),
            "exactly one",
        ),
        ("download_save", json!({"filename": "a"}), "exactly one"),
        (
            "download_save",
            json!({"filename": "a", "base64": "not base64!"}),
            "`base64`",
        ),
        (
            "download_save",
            json!({"filename": 42, "text": "x"}),
            "`filename`",
        ),
        ("upload_resolve", json!({}), "`path`"),
        ("shell_exec", json!({"command": ["ls"]}), "`command`"),
        (
            "folder_access_request",
            json!({"alias": "a", "access": "rw", "reason": "r"}),
            "`access`",
        ),
        (
            "shell_exec",
            json!({"command": "true", "timeout_s": -1}),
            "`timeout_s`",
        ),
        (
            "shell_exec",
            json!({"command": "true", "timeout_s": 0}),
            "`timeout_s`",
        ),
        (
            "shell_exec",
            json!({"command": "true", "timeout_s": 601}),
            "`timeout_s`",
        ),
        (
            "shell_exec",
            json!({"command": "sleep 2", "timeout": 1}),
            "`timeout`",
        ),
        ("folder_patch", json!({"alias": "a", "path": "x"}), "`diff`"),
        ("downloads_list", json!({"limit": 0}), "`limit`"),
        ("downloads_list", json!({"limit": 1001}), "`limit`"),
        ("downloads_list", json!({"cursor": "%%%"}), "`cursor`"),
        ("folder_grants_list", json!({"verbose": true}), "`verbose`"),
        (
            "shell_job_status",
            json!({"job_id": "job-1", "wait_s": 31}),
            "`wait_s`",
        ),
    ] {
        let result = w.call(tool, args.clone()).await.unwrap();
        assert_eq!(refusal_code(&result), "invalid_argument", "{tool} {args}");
        let text = &result.content[0].as_text().unwrap().text;
        assert!(text.contains(names), "{tool} {args}: {text}");
        still_serving(&w).await;
    }
    // A NUL in a path: refused with its code.
    assert_eq!(
        w.refused("upload_resolve", json!({"path": "/tmp/a\u{0}b"}))
            .await,
        "nul_byte"
    );
    assert_eq!(
        w.refused(
            "folder_patch",
            json!({"alias": "a", "path": "x\u{0}", "diff": "--- a\n+++ b\n"})
        )
        .await,
        "unknown_alias"
    );
    still_serving(&w).await;
}

/// Raw lines, as a broken client would send them.
#[test]
fn unparseable_lines_get_json_rpc_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_safe-lanes-mcp"))
        .arg("--root")
        .arg(tmp.path().join("state"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |line: &str| {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    let mut recv = || {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap()
    };
    send(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#,
    );
    assert_eq!(recv()["id"], 1);
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    send("this is not json");
    let error = recv();
    assert_eq!(
        (error["id"].clone(), error["error"]["code"].clone()),
        (Value::Null, json!(-32700))
    );
    send(r#"{"id": 7, "hello": "world"}"#);
    let error = recv();
    assert_eq!(
        (error["id"].clone(), error["error"]["code"].clone()),
        (json!(7), json!(-32600))
    );
    send(r#"{"jsonrpc":"2.0","id":8,"method":"no/such/method"}"#);
    assert_eq!(recv()["error"]["code"], -32601);
    // A known method whose params do not parse is not an unknown method.
    for (id, params) in [
        (81, r#"{"name":"downloads_list","arguments":"a string"}"#),
        (82, r#"{"name":"downloads_list","arguments":[1]}"#),
        (83, r#"{"arguments":{}}"#),
        (84, r#"{"name":7}"#),
    ] {
        send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}}}"#
        ));
        let error = recv();
        assert_eq!(
            (error["id"].clone(), error["error"]["code"].clone()),
            (json!(id), json!(-32602)),
            "{params}: {error}"
        );
    }
    send(r#"{"jsonrpc":"2.0","id":86,"method":"tools/call"}"#);
    assert_eq!(recv()["error"]["code"], -32602, "params missing");
    // Params that are not structured make no JSON-RPC request at all.
    send(r#"{"jsonrpc":"2.0","id":87,"method":"tools/call","params":"text"}"#);
    assert_eq!(recv()["error"]["code"], -32600);
    send("");
    send(
        r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"downloads_list","arguments":{}}}"#,
    );
    let ok = recv();
    assert_eq!(ok["id"], 9);
    assert_eq!(ok["result"]["isError"], false);
    drop(stdin);
    assert!(
        child.wait().unwrap().success(),
        "a clean exit when stdin closes"
    );
}

/// Standard input that cannot be polled (a regular file) is read on a thread instead: the same
/// answers, and a clean exit at its end.
#[test]
fn requests_from_a_regular_file_are_served() {
    let tmp = tempfile::tempdir().unwrap();
    let requests = tmp.path().join("requests.jsonl");
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"file","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "not json",
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"download_save","arguments":{"filename":"a.txt","text":"x"}}}"#,
    ];
    std::fs::write(&requests, lines.join("\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_safe-lanes-mcp"))
        .arg("--root")
        .arg(tmp.path().join("state"))
        .stdin(std::fs::File::open(&requests).unwrap())
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
    let answers: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by_id = |id: Value| answers.iter().find(|a| a["id"] == id).cloned();
    assert!(by_id(json!(1)).is_some_and(|a| a["result"].is_object()));
    assert_eq!(by_id(Value::Null).unwrap()["error"]["code"], -32700);
    let saved = by_id(json!(2)).unwrap();
    assert_eq!(
        saved["result"]["structuredContent"]["name"], "a.txt",
        "the last line, with no newline"
    );
}

/// An argument an agent host adds to every tool (Gemini CLI's `wait_for_previous`) is accepted
/// and ignored; any other unknown argument is still refused, naming it.
#[tokio::test]
async fn host_added_arguments_are_ignored_and_no_other_unknown_one_is() {
    let w = World::new().await;
    let listed = w
        .ok(
            "downloads_list",
            json!({"wait_for_previous": true, "limit": 5}),
        )
        .await;
    assert!(listed["files"].is_array(), "{listed}");
    let saved = w
        .ok(
            "download_save",
            json!({"filename": "a.txt", "text": "x", "wait_for_previous": false}),
        )
        .await;
    assert_eq!(saved["name"], "a.txt");
    let (code, message) = w
        .refusal("downloads_list", json!({"wait_for_next": true}))
        .await;
    assert_eq!(code, "invalid_argument");
    assert!(message.contains("wait_for_next"), "{message}");
}
