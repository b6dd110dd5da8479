//! The upload roots page.

use crate::client::{Page, path_str};

/// Regression: the note "contains the state root" stood beside a folder *inside* the state
/// root, and not beside an ancestor of it. It stands beside each root that contains a
/// state root, and only there.
#[test]
fn the_note_stands_beside_the_roots_that_contain_the_state_root() {
    let page = Page::new();
    let inner = page.root().join("inner");
    std::fs::create_dir(&inner).unwrap();
    let share = page.tmp.path().join("share");
    std::fs::create_dir(&share).unwrap();
    // The state root itself contains it (an ancestor would also hold the test's home folder,
    // which is never an upload root; the library's test has the ancestors).
    let state = page.root();
    let lines = format!(
        "{}\n{}\n{}\n",
        state.display(),
        inner.display(),
        share.display()
    );
    std::fs::write(page.root().join(".upload-roots"), lines).unwrap();
    let cookie = page.sign_in();
    let body = page.get("/uploads", &format!("\r\nCookie: {cookie}")).body;
    let row = |path: &str| {
        let cell = format!("><td><code>{path}</code></td>");
        let at = body.find(&cell).unwrap_or_else(|| panic!("{path}: {body}"));
        let end = at + body[at..].find("</tr>").unwrap();
        body[at..end].to_owned()
    };
    let noted = |path: &str| row(path).contains("state root");
    assert!(noted(path_str(&state)), "{}", row(path_str(&state)));
    assert!(!noted(path_str(&inner)), "{}", row(path_str(&inner)));
    assert!(!noted(path_str(&share)), "{}", row(path_str(&share)));
}
