//! `download_fetch`: offered only when the human starts the server with `--fetch`, and never a
//! way to reach this machine or its private networks, however the address is spelled. (A
//! fetch that succeeds needs a server the guard admits: the library's own suite runs one on
//! loopback with its test-only allowance, which no flag of the server reaches.)

use serde_json::json;

use crate::util::World;

async fn tool_names(w: &World) -> Vec<String> {
    let tools = w.client.list_all_tools().await.unwrap();
    tools.iter().map(|t| t.name.to_string()).collect()
}

#[tokio::test]
async fn download_fetch_is_offered_only_with_fetch() {
    let without = World::new().await;
    assert!(
        !tool_names(&without)
            .await
            .contains(&"download_fetch".to_owned())
    );
    let unknown = without
        .call(
            "download_fetch",
            json!({"url": "https://example.com/a.pdf"}),
        )
        .await;
    assert!(
        unknown.is_err(),
        "a tool not offered cannot be called: {unknown:?}"
    );
    let with = World::with_args(&["--fetch"]).await;
    let tools = with.client.list_all_tools().await.unwrap();
    let fetch = tools
        .iter()
        .find(|t| t.name == "download_fetch")
        .expect("download_fetch offered with --fetch");
    assert_eq!(fetch.input_schema["required"], json!(["url"]));
    assert_eq!(
        fetch.annotations.as_ref().unwrap().open_world_hint,
        Some(true)
    );
}

#[tokio::test]
async fn addresses_of_this_machine_and_its_networks_are_refused_and_recorded() {
    let w = World::with_args(&["--fetch", "--fetch-http"]).await;
    for url in [
        "https://127.0.0.1/a.pdf",
        "https://localhost/a.pdf",
        "https://[::1]/a.pdf",
        "https://[::ffff:127.0.0.1]/a.pdf",
        "https://2130706433/a.pdf",
        "https://0177.0.0.1/a.pdf",
        "https://0x7f.1/a.pdf",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://[fd00::1]/",
        "file:///etc/passwd",
    ] {
        let (code, message) = w.refusal("download_fetch", json!({"url": url})).await;
        assert_eq!(code, "address_refused", "{url}: {message}");
    }
    assert_eq!(
        w.refused("download_fetch", json!({"url": "not a url"}))
            .await,
        "invalid_argument"
    );
    let listed = w.ok("downloads_list", json!({})).await;
    assert_eq!(listed["files"], json!([]), "nothing reached the lane");
    let refusals = safe_lanes_testkit::audit::records(&w.root())
        .into_iter()
        .filter(|r| r["event"] == "download.fetch.refused")
        .count();
    assert_eq!(refusals, 12, "each refusal recorded once");
}

#[tokio::test]
async fn plain_http_is_refused_unless_the_human_allowed_it() {
    let w = World::with_args(&["--fetch"]).await;
    let (code, message) = w
        .refusal("download_fetch", json!({"url": "http://example.com/a.pdf"}))
        .await;
    assert_eq!(code, "address_refused", "{message}");
    assert!(message.contains("http"), "{message}");
}
