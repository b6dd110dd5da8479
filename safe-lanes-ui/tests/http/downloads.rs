//! The downloads tab: a file shown in the browser cannot run script, and only a file the lane
//! lists is shown.

use crate::client::Page;

/// Regression: the Downloads tab had no preview. A file a browser can show safely (an image,
/// text) is served with its own type, in a sandbox of its own (no script, nothing
/// loaded), never sniffed; HTML, SVG, PDF and unknown types are not shown; nothing outside the lane,
/// no link and no half-written save is served.
#[test]
fn a_download_is_shown_in_a_sandbox_with_a_type_that_runs_nothing() {
    let page = Page::new();
    let lane = page.root().join(".downloads");
    let save = |name: &str, content: &[u8]| {
        let root = safe_lanes::StateRoot::open(&page.root()).unwrap();
        safe_lanes::DownloadLane::open(&root)
            .unwrap()
            .save(name, content)
            .unwrap();
    };
    save("notes.txt", b"<script>alert(1)</script>");
    save("page.html", b"<script>alert(1)</script>");
    save("logo.svg", b"<svg onload=alert(1)/>");
    std::os::unix::fs::symlink("/etc/hostname", lane.join("link.txt")).unwrap();
    let cookie = page.sign_in();
    let get = |name: &str| {
        page.get(
            &format!("/downloads/view?name={name}"),
            &format!("\r\nCookie: {cookie}"),
        )
    };
    let shown = get("notes.txt");
    assert_eq!(shown.status, 200, "{shown:?}");
    assert_eq!(
        shown.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    let policy = shown.header("content-security-policy").unwrap();
    assert!(
        policy.starts_with("sandbox; default-src 'none'"),
        "{policy}"
    );
    assert_eq!(shown.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(shown.body, "<script>alert(1)</script>");
    for (name, status) in [
        ("page.html", 415),
        ("logo.svg", 415),
        ("paper.pdf", 415),
        ("link.txt", 404),
        ("..%2F..%2Fetc%2Fhostname.txt", 404),
        ("missing.txt", 404),
    ] {
        let refused = get(name);
        assert_eq!(refused.status, status, "{name}: {refused:?}");
        assert!(
            !refused.body.contains("<script>alert"),
            "{name}: {refused:?}"
        );
    }
    // Not signed in: nothing.
    let anonymous = page.get("/downloads/view?name=notes.txt", "");
    assert_ne!(anonymous.status, 200, "{anonymous:?}");
}
