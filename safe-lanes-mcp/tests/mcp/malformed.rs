//! Malformed calls get an error and the server keeps serving.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use rmcp::ServiceError;
use serde_json::{Value, json};

use crate::util::World;

/// A call that must succeed after each malformed one.
async fn still_serving(w: &World) {
    w.ok("downloads_list", json!({})).await;
}

#[tokio::test]
async fn malformed_calls_get_errors_and_the_server_keeps_serving() {
    let w = World::new().await;
    // Unknown tool: a JSON-RPC error.
    match w.call("read_file", json!({"path": "/etc/passwd"})).await {
        Err(ServiceError::McpError(e)) => assert_eq!(e.code.0, -32602),
        other => panic!("{other:?}"),
    }
    still_serving(&w).await;
    // Both forms of content, invalid base64: JSON-RPC "invalid params".
    for args in [
        json!({"filename": "a", "text": "x", "base64": "eA=="}),
        json!({"filename": "a"}),
        json!({"filename": "a", "base64": "not base64!"}),
    ] {
        match w.call("download_save", args.clone()).await {
            Err(ServiceError::McpError(e)) => assert_eq!(e.code.0, -32602, "{args}"),
            other => panic!("{args}: {other:?}"),
        }
        still_serving(&w).await;
    }
    // Wrong types and missing fields: JSON-RPC "invalid params" too.
    for (tool, args) in [
        ("download_save", json!({"filename": 42, "text": "x"})),
        ("upload_resolve", json!({})),
        ("shell_exec", json!({"command": ["ls"]})),
        (
            "folder_access_request",
            json!({"alias": "a", "access": "everything", "reason": "r"}),
        ),
        ("shell_exec", json!({"command": "true", "timeout_s": -5})),
        ("folder_patch", json!({"alias": "a", "path": "x"})),
    ] {
        match w.call(tool, args.clone()).await {
            Err(ServiceError::McpError(e)) => assert_eq!(e.code.0, -32602, "{tool} {args}"),
            other => panic!("{tool} {args}: {other:?}"),
        }
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
