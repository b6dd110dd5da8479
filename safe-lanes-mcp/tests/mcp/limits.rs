//! What one client can make the server hold: one line, and the requests in flight.

use std::path::Path;

use serde_json::{Value, json};

use crate::raw::Raw;

/// `/proc` sizes such as `"10240 kB"`, in bytes.
fn kib(field: &str) -> u64 {
    field
        .strip_suffix(" kB")
        .and_then(|n| n.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("not a size: {field}"))
        * 1024
}

/// Regression: the longest line was a fixed 96 MiB whatever the size cap, and read whole into
/// memory. With `--max-bytes 1000` the line limit is 1 MiB and 2,000 bytes: a 128 MiB line is
/// answered `-32600` with the id its first part shows (so the client's request is answered)
/// while the server's peak memory stays far below the line's size, and the next request is
/// served.
#[test]
fn an_overlong_line_is_answered_without_being_held_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let mut server = Raw::initialized(&tmp.path().join("state"), &["--max-bytes", "1000"]);
    let line_len: usize = 128 << 20;
    let head = br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"download_save","arguments":{"filename":"a","text":""#;
    server.write(head);
    let chunk = vec![b'x'; 1 << 20];
    let mut written = head.len();
    while written + chunk.len() < line_len {
        server.write(&chunk);
        written += chunk.len();
    }
    server.write(b"\"}}}\n");
    server.call(6, "downloads_list", json!({}));
    let error = server.recv();
    assert_eq!(error["id"], 5, "{error}");
    assert_eq!(error["error"]["code"], -32600, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than"),
        "{error}"
    );
    let next = server.recv();
    assert_eq!(
        (next["id"].clone(), next["result"]["isError"].clone()),
        (json!(6), json!(false))
    );
    let peak = kib(&server.status_field("VmHWM"));
    assert!(
        peak < line_len as u64 / 2,
        "peak resident memory {peak} bytes for a {line_len}-byte line"
    );
}

/// A script for the `sh` uploader that waits until `release` exists.
fn waits_for(release: &Path) -> Value {
    json!({
        "filename": "wait.sh",
        "text": format!("until [ -e '{}' ]; do sleep 0.01; done", release.display()),
    })
}

/// Receive `n` answers; their ids, sorted, each checked to be a successful tool result.
fn answers(server: &mut Raw, n: usize) -> Vec<i64> {
    let mut ids: Vec<i64> = (0..n)
        .map(|_| {
            let answer = server.recv();
            assert_eq!(answer["result"]["isError"], false, "{answer}");
            answer["id"].as_i64().unwrap()
        })
        .collect();
    ids.sort_unstable();
    ids
}

/// Fill every place with `upload_content` calls whose uploader waits for `release`, ids
/// `first..first + 32`.
fn fill(server: &mut Raw, first: i64, release: &Path) {
    for id in first..first + 32 {
        server.call(id, "upload_content", waits_for(release));
    }
}

/// The request after the 32 in flight is answered "server busy" at once, with its id; so is a
/// repeated id; once the 32 are answered every place is free again.
#[test]
fn requests_beyond_the_bound_in_flight_are_answered_busy_and_places_come_back() {
    let tmp = tempfile::tempdir().unwrap();
    let mut server = Raw::initialized(&tmp.path().join("state"), &["--uploader", "sh"]);
    let (first, second) = (tmp.path().join("first"), tmp.path().join("second"));
    fill(&mut server, 1, &first);
    // Nothing can be answered before `first` exists, so these are the next lines out.
    assert_busy(&mut server, 100);
    server.send(&json!({"jsonrpc": "2.0", "id": 100, "method": "ping"}));
    assert_eq!(server.recv()["error"]["code"], -32000);
    server.call(5, "downloads_list", json!({}));
    let duplicate = server.recv();
    assert_eq!(
        (duplicate["id"].clone(), duplicate["error"]["code"].clone()),
        (json!(5), json!(-32600)),
        "{duplicate}"
    );
    std::fs::write(&first, "").unwrap();
    assert_eq!(answers(&mut server, 32), (1..=32).collect::<Vec<_>>());
    // All 32 places are free again: 32 more are taken in, the 33rd is not.
    fill(&mut server, 201, &second);
    server.call(300, "downloads_list", json!({}));
    assert_eq!(server.recv()["error"]["code"], -32000);
    std::fs::write(&second, "").unwrap();
    assert_eq!(answers(&mut server, 32), (201..=232).collect::<Vec<_>>());
    server.call(301, "downloads_list", json!({}));
    assert_eq!(server.recv()["id"], 301);
}

/// Send call `id` and assert it is answered at once with the "server busy" error.
fn assert_busy(server: &mut Raw, id: i64) {
    server.call(id, "downloads_list", json!({}));
    let busy = server.recv();
    assert_eq!(
        (busy["id"].clone(), busy["error"]["code"].clone()),
        (json!(id), json!(-32000)),
        "{busy}"
    );
}

/// A cancelled call keeps its place until its work ends (cancelling does not make room for
/// more work), and its answer is never written.
#[test]
fn a_cancelled_request_keeps_its_place_until_it_ends_and_gets_no_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let mut server = Raw::initialized(&tmp.path().join("state"), &["--uploader", "sh"]);
    let release = tmp.path().join("release");
    fill(&mut server, 1, &release);
    server.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 32, "reason": "changed my mind"}}),
    );
    assert_busy(&mut server, 100);
    std::fs::write(&release, "").unwrap();
    assert_eq!(answers(&mut server, 31), (1..=31).collect::<Vec<_>>());
    // At the end of input the server finishes what runs and writes what is left to write.
    let rest = server.finish();
    assert!(
        rest.iter().all(|m| m["id"] != 32),
        "the cancelled call was answered: {rest:?}"
    );
}
