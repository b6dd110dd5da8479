//! `download_save`, `downloads_list`, and the tool list.

use base64::Engine as _;
use serde_json::json;

use crate::util::{World, sha256_hex};

#[tokio::test]
async fn the_tool_list_is_the_contract() {
    let w = World::new().await;
    let mut names: Vec<String> = w
        .client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "download_save",
            "downloads_list",
            "folder_access_request",
            "folder_grants_list",
            "folder_patch",
            "shell_exec",
            "shell_job_status",
            "shell_job_stop",
            "upload_resolve"
        ]
    );
    let with = World::with_args(&["--uploader", "/bin/cat {file}"]).await;
    let tools = with.client.list_all_tools().await.unwrap();
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert!(
        names.contains(&"upload_file".to_owned()) && names.contains(&"upload_content".to_owned())
    );
    assert_eq!(names.len(), 11);
    for t in &tools {
        assert!(
            t.title.as_ref().is_some_and(|t| !t.is_empty()),
            "{} has a title",
            t.name
        );
        let hints = t.annotations.as_ref().expect("annotations");
        assert!(
            hints.read_only_hint.is_some()
                && hints.destructive_hint.is_some()
                && hints.idempotent_hint.is_some()
                && hints.open_world_hint.is_some(),
            "{} states all four hints",
            t.name
        );
        assert_eq!(
            t.input_schema.get("additionalProperties"),
            Some(&json!(false)),
            "{} refuses unknown arguments",
            t.name
        );
        assert!(
            t.description.as_ref().is_some_and(|d| d.len() > 40),
            "{} is described",
            t.name
        );
        assert!(t.output_schema.is_some(), "{} has an output schema", t.name);
    }
    let save = tools.iter().find(|t| t.name == "download_save").unwrap();
    assert!(save.input_schema["properties"]["base64"]["description"].is_string());
}

#[tokio::test]
async fn a_save_lands_in_the_lane_under_a_sanitized_name() {
    let w = World::new().await;
    let saved = w
        .ok(
            "download_save",
            json!({"filename": "../../.bashrc", "text": "echo hi"}),
        )
        .await;
    assert_eq!(saved["name"], "bashrc");
    assert_eq!(
        saved["path"],
        w.root().join(".downloads/bashrc").to_str().unwrap()
    );
    assert_eq!(saved["sha256"], sha256_hex(b"echo hi"));
    let again = w
        .ok(
            "download_save",
            json!({"filename": "../../.bashrc", "text": "again"}),
        )
        .await;
    assert_eq!(again["name"], "bashrc (1)");
    let listed = w.ok("downloads_list", json!({})).await;
    let names: Vec<&str> = listed["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bashrc", "bashrc (1)"]);
}

#[tokio::test]
async fn a_five_mebibyte_base64_save_arrives_intact() {
    let w = World::new().await;
    let data: Vec<u8> = (0..5u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let encoded = base64::engine::general_purpose::STANDARD.encode(&data);
    let saved = w
        .ok(
            "download_save",
            json!({"filename": "big.bin", "base64": encoded}),
        )
        .await;
    assert_eq!(saved["bytes"], data.len());
    assert_eq!(saved["sha256"], sha256_hex(&data));
    assert_eq!(
        std::fs::read(saved["path"].as_str().unwrap()).unwrap(),
        data
    );
}

/// Long strings are read where the request line holds them (the transport lifts them out
/// before parsing): the text arrives as it was, and base64 that turns out invalid deep inside
/// is still `invalid_argument`, saying where, with nothing kept.
#[tokio::test]
async fn long_content_read_from_the_request_line_is_exact_and_checked() {
    let w = World::new().await;
    let text = "plain words é ".repeat(200_000);
    let saved = w
        .ok(
            "download_save",
            json!({"filename": "long.txt", "text": text}),
        )
        .await;
    assert_eq!(saved["sha256"], sha256_hex(text.as_bytes()));

    let mut encoded = base64::engine::general_purpose::STANDARD.encode(vec![9u8; 3 << 20]);
    encoded.replace_range(3_000_001..3_000_002, "!");
    let (code, message) = w
        .refusal(
            "download_save",
            json!({"filename": "bad.bin", "base64": encoded}),
        )
        .await;
    assert_eq!(code, "invalid_argument");
    assert!(
        message.contains("`base64`") && message.contains("3000001"),
        "{message}"
    );
    let names: Vec<_> = std::fs::read_dir(w.root().join(".downloads"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["long.txt"], "nothing kept of the invalid one");
}

#[tokio::test]
async fn past_the_size_cap_nothing_is_kept() {
    let w = World::with_args(&["--max-bytes", "10"]).await;
    assert_eq!(
        w.refused(
            "download_save",
            json!({"filename": "a", "text": "0123456789A"})
        )
        .await,
        "too_large"
    );
    assert!(
        std::fs::read_dir(w.root().join(".downloads"))
            .unwrap()
            .next()
            .is_none()
    );
    w.ok(
        "download_save",
        json!({"filename": "a", "text": "0123456789"}),
    )
    .await;
}
