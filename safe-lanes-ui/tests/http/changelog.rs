//! The changelog page as a person reads it.

use safe_lanes::Access;

use crate::client::{Page, path_str};

/// Regression: paths broke mid-name and reasons showed `\n` literally. A path may break only
/// after a separator, and each line of a reason is a paragraph of its own.
#[test]
fn paths_break_only_at_separators_and_reasons_keep_their_lines() {
    let page = Page::new();
    let folder = page.folder("a-rather-long-folder-name/with-a-deeper-part");
    page.grants()
        .add(
            "deep",
            &folder,
            Access::ReadOnly,
            "first line\nsecond line",
            "uid:0",
        )
        .unwrap();
    let cookie = page.sign_in();
    let body = page
        .get("/changelog", &format!("\r\nCookie: {cookie}"))
        .body;
    let cells: Vec<&str> = body
        .match_indices("<td class=\"path\"><code>")
        .map(|(at, open)| {
            let rest = &body[at + open.len()..];
            &rest[..rest.find("</code>").unwrap()]
        })
        .collect();
    let cell = cells
        .iter()
        .find(|c| c.replace("<wbr>", "") == path_str(&folder))
        .unwrap_or_else(|| panic!("the grant's path in {cells:?}"));
    let breaks = cell.matches("<wbr>").count();
    assert_eq!(breaks, path_str(&folder).matches('/').count() + 1, "{cell}");
    for (at, _) in cell.match_indices("<wbr>").take(breaks - 1) {
        assert_eq!(
            &cell[at - 1..at],
            "/",
            "a break after a separator only: {cell}"
        );
    }
    assert!(
        body.contains("<p>first line</p><p>second line</p>"),
        "{body}"
    );
    assert!(!body.contains("first line\\nsecond line"), "{body}");
}
