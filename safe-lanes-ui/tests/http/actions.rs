//! Every action through the page: made by the library, audited with the human as actor, and
//! refused — changing nothing — when the request is no longer what the page showed.

use std::path::Path;

use safe_lanes::Access;
use safe_lanes::grants::Proposal;

use crate::client::{Page, path_str};

/// The approve form of `p` as the overview renders it, with `path` for a path-less request.
fn approve_form<'a>(p: &'a Proposal, csrf: &'a str, path: &'a str) -> Vec<(&'a str, String)> {
    let (alias, access, shown) = p.change.target();
    vec![
        ("csrf", csrf.to_owned()),
        ("request", p.request.id.clone()),
        ("alias", alias.to_string()),
        ("access", access.as_str().to_owned()),
        ("digest", p.digest.clone()),
        (
            "path",
            shown.map_or(path.to_owned(), |s| s.to_str().unwrap().to_owned()),
        ),
        ("reason", "looked at it".to_owned()),
    ]
}

fn post(page: &Page, target: &str, cookie: &str, form: &[(&str, String)]) -> String {
    let borrowed: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let response = page.post(target, cookie, &borrowed);
    assert_eq!(response.status, 303, "{target}: {response:?}");
    assert_eq!(response.header("location"), Some("/"));
    // What the action did, as the next page says it.
    let next = page.get("/", &format!("\r\nCookie: {cookie}"));
    let at = next
        .body
        .find("id=\"flash\"")
        .expect("a flash after an action");
    next.body[at..].split("</div>").next().unwrap().to_owned()
}

fn agent_request(page: &Page, alias: &str, access: Access, path: Option<&Path>) -> Proposal {
    let grants = page.grants();
    let r = grants
        .request(alias, access, "the agent's <b>reason</b>", path, "agent")
        .unwrap();
    grants.proposal(&r.id).unwrap()
}

#[test]
fn every_action_is_the_libraries_and_audited_as_the_humans() {
    let page = Page::new();
    let cookie = page.sign_in();
    let csrf = page.csrf(&cookie);
    let (docs, notes) = (page.folder("docs"), page.folder("notes"));

    let added = post(
        &page,
        "/add",
        &cookie,
        &[
            ("csrf", csrf.clone()),
            ("alias", "docs".into()),
            ("path", path_str(&docs).into()),
            ("access", "read_write".into()),
            ("reason", "for the report".into()),
        ],
    );
    assert!(added.contains("Granted"), "{added}");
    let narrowed = post(
        &page,
        "/narrow",
        &cookie,
        &[
            ("csrf", csrf.clone()),
            ("alias", "docs".into()),
            ("reason", "reading is enough".into()),
        ],
    );
    assert!(narrowed.contains("Narrowed"), "{narrowed}");
    assert_eq!(
        page.grants().list().unwrap().grants[0].grant.access,
        Access::ReadOnly
    );

    let p = agent_request(&page, "notes", Access::ReadOnly, None);
    let approved = post(
        &page,
        "/approve",
        &cookie,
        &approve_form(&p, &csrf, path_str(&notes)),
    );
    assert!(approved.contains("Approved"), "{approved}");
    let p = agent_request(&page, "more", Access::ReadWrite, None);
    let denied = post(
        &page,
        "/deny",
        &cookie,
        &[
            ("csrf", csrf.clone()),
            ("request", p.request.id.clone()),
            ("reason", "not this week".into()),
        ],
    );
    assert!(denied.contains("Denied"), "{denied}");
    let revoked = post(
        &page,
        "/revoke",
        &cookie,
        &[
            ("csrf", csrf.clone()),
            ("alias", "docs".into()),
            ("reason", "the report is done".into()),
        ],
    );
    assert!(revoked.contains("Revoked"), "{revoked}");

    let listing = page.grants().list().unwrap();
    let aliases: Vec<_> = listing
        .grants
        .iter()
        .map(|g| g.grant.alias.to_string())
        .collect();
    assert_eq!(aliases, ["notes"]);
    assert_eq!(listing.grants[0].grant.path, notes);
    let denial = listing
        .outcomes
        .iter()
        .find(|o| o.alias.as_str() == "more")
        .unwrap();
    assert_eq!(denial.status.as_str(), "denied");

    let audit = page.audit();
    for event in [
        "grant.add",
        "grant.set_access",
        "grant.approve",
        "grant.deny",
        "grant.revoke",
    ] {
        let record = audit
            .iter()
            .find(|r| r["event"] == event)
            .unwrap_or_else(|| panic!("no {event} in {audit:?}"));
        assert_eq!(record["actor"], page.actor.as_str(), "{record}");
    }
}

#[test]
fn an_approval_of_a_request_changed_since_the_page_was_shown_is_refused() {
    let page = Page::new();
    let cookie = page.sign_in();
    let csrf = page.csrf(&cookie);
    let folder = page.folder("shared");

    // Filed again by the agent after the page was rendered: a new id, the old one unknown.
    let shown = agent_request(&page, "shared", Access::ReadOnly, Some(&folder));
    agent_request(&page, "shared", Access::ReadWrite, Some(&folder));
    let said = post(&page, "/approve", &cookie, &approve_form(&shown, &csrf, ""));
    assert!(said.contains("changed since the page was shown"), "{said}");
    assert!(page.grants().list().unwrap().grants.is_empty());

    // The grant it changes was changed since: the digest shown no longer matches.
    let grants = page.grants();
    grants
        .add("shared", &folder, Access::ReadWrite, "a reason", "uid:0")
        .unwrap();
    let raise = {
        grants
            .set_access("shared", Access::ReadOnly, "a reason", "uid:0")
            .unwrap();
        agent_request(&page, "shared", Access::ReadWrite, None)
    };
    grants
        .set_access("shared", Access::ReadWrite, "raised by hand", "uid:0")
        .unwrap();
    let said = post(&page, "/approve", &cookie, &approve_form(&raise, &csrf, ""));
    assert!(said.contains("Nothing was changed"), "{said}");
    assert!(said.contains("invalid_argument"), "{said}");
    assert!(
        page.grants().proposal(&raise.request.id).is_ok(),
        "still pending"
    );
}

#[test]
fn the_overview_shows_hostile_text_as_text() {
    let page = Page::new();
    let cookie = page.sign_in();
    let grants = page.grants();
    let reason = "<script>alert(1)</script>\u{202e}gpj.exe\nline two";
    grants
        .request(
            "notes",
            Access::ReadOnly,
            reason,
            Some(Path::new("/tmp/\"><img src=x>")),
            "agent",
        )
        .unwrap();
    let body = page.get("/", &format!("\r\nCookie: {cookie}")).body;
    assert!(!body.contains("<script>alert"), "{body}");
    assert!(!body.contains("<img src=x>"), "{body}");
    assert!(body.contains("&#60;script&#62;alert(1)"), "{body}");
    assert!(
        body.contains("\\u{202e}gpj.exe"),
        "the override is shown, not obeyed: {body}"
    );
    assert!(
        body.contains("<p>line two</p>"),
        "one line per line: {body}"
    );
}

#[test]
fn the_picker_lists_folders_only_and_refuses_what_a_grant_may_not_be() {
    let page = Page::new();
    let cookie = page.sign_in();
    let home = page.tmp.path().join("home");
    let (granted, free) = (page.folder("granted"), page.folder("free"));
    std::fs::write(home.join("a-file.txt"), "x").unwrap();
    std::os::unix::fs::symlink(&free, home.join("a-link")).unwrap();
    page.grants()
        .add("granted", &granted, Access::ReadWrite, "a reason", "uid:0")
        .unwrap();

    let body = page
        .get("/pick?access=read_only", &format!("\r\nCookie: {cookie}"))
        .body;
    assert!(
        body.contains(&format!("<code id=\"here\">{}</code>", home.display())),
        "starts at home: {body}"
    );
    assert!(body.contains("> free</a>"), "{body}");
    assert!(
        !body.contains("a-file.txt") && !body.contains("a-link"),
        "folders only: {body}"
    );
    let granted_row = body
        .split("<li>")
        .find(|li| li.contains("> granted</a>"))
        .unwrap();
    assert!(granted_row.contains("cannot be granted"), "{granted_row}");
    assert!(!granted_row.contains("class=\"choose\""), "{granted_row}");
    let free_row = body
        .split("<li>")
        .find(|li| li.contains("> free</a>"))
        .unwrap();
    assert!(free_row.contains("class=\"choose\""), "{free_row}");

    // The state root's parent (an ancestor of it) and `/` cannot be chosen.
    for dir in [page.tmp.path().to_str().unwrap(), "/"] {
        let target = format!("/pick?access=read_only&dir={}", dir.replace('/', "%2F"));
        let body = page.get(&target, &format!("\r\nCookie: {cookie}")).body;
        assert!(
            body.contains("This folder cannot be granted"),
            "{dir}: {body}"
        );
        assert!(!body.contains("id=\"choose-here\""), "{dir}: {body}");
    }
}

#[test]
fn the_overview_shows_the_protected_paths_a_grant_lifted() {
    let page = Page::new();
    let cookie = page.sign_in();
    let site = page.folder("site");
    let grants = page.grants();
    grants
        .add("site", &site, Access::ReadWrite, "the website", "uid:0")
        .unwrap();
    let body = page.get("/", &format!("\r\nCookie: {cookie}")).body;
    assert!(!body.contains("protection lifted"), "{body}");
    let lifted = [
        safe_lanes::grants::LiftedPath::new(".vscode").unwrap(),
        safe_lanes::grants::LiftedPath::new(".git/hooks").unwrap(),
    ];
    grants
        .set_protection("site", &lifted, &[], "the agent edits hooks", "uid:0")
        .unwrap();
    let body = page.get("/", &format!("\r\nCookie: {cookie}")).body;
    assert!(
        body.contains("protection lifted: <code>.git/hooks</code>, <code>.vscode</code>"),
        "{body}"
    );
}

/// Regression: the page let the human add, approve, narrow and revoke with no note, and the
/// changelog kept `reason: ""`. Every action without a reason (or only blanks) is refused by
/// the library, whatever the browser sends, and changes nothing.
#[test]
fn every_action_without_a_reason_is_refused_and_changes_nothing() {
    let page = Page::new();
    let cookie = page.sign_in();
    let csrf = page.csrf(&cookie);
    let docs = page.folder("docs");
    let refused = |target: &str, form: &[(&str, String)]| {
        let said = post(&page, target, &cookie, form);
        assert!(
            said.contains("Nothing was changed (invalid_argument)"),
            "{target}: {said}"
        );
    };
    for reason in ["", "   "] {
        refused(
            "/add",
            &[
                ("csrf", csrf.clone()),
                ("alias", "docs".into()),
                ("path", path_str(&docs).into()),
                ("access", "read_only".into()),
                ("reason", reason.into()),
            ],
        );
    }
    assert!(page.grants().list().unwrap().grants.is_empty());
    let grants = page.grants();
    grants
        .add("docs", &docs, Access::ReadOnly, "reading", "uid:0")
        .unwrap();
    for target in ["/widen", "/revoke"] {
        refused(target, &[("csrf", csrf.clone()), ("alias", "docs".into())]);
    }
    let p = agent_request(
        &page,
        "notes",
        Access::ReadOnly,
        Some(&page.folder("notes")),
    );
    let mut form = approve_form(&p, &csrf, "");
    form.retain(|(k, _)| *k != "reason");
    refused("/approve", &form);
    refused(
        "/deny",
        &[("csrf", csrf.clone()), ("request", p.request.id.clone())],
    );
    let listing = grants.list().unwrap();
    assert_eq!(listing.grants.len(), 1);
    assert_eq!(listing.grants[0].grant.access, Access::ReadOnly);
    assert_eq!(
        grants.proposals().unwrap().len(),
        1,
        "the request is still pending"
    );
    let changelog = grants.changelog().unwrap();
    assert_eq!(changelog.len(), 2, "the add and the request only");
}

/// Where the session has a desktop portal, "Choose folder…" opens the desktop's own folder
/// dialog (a stand-in portal on a private bus) and sends the chosen folder back to the
/// overview as the page's picker does.
#[test]
fn choose_folder_opens_the_desktops_dialog_where_there_is_one() {
    let chosen = tempfile::tempdir().unwrap();
    let folder = chosen.path().join("Q3 – Zoë");
    std::fs::create_dir(&folder).unwrap();
    let portal = safe_lanes_testkit::portal::Portal::start(
        safe_lanes_testkit::portal::Answer::Folder(folder.clone()),
    );
    let page = Page::with_desktop(safe_lanes_ui::desktop::DesktopBus::At(
        portal.address().to_owned(),
    ));
    let cookie = page.sign_in();
    let response = page.get("/pick?access=read_write", &format!("\r\nCookie: {cookie}"));
    assert_eq!(response.status, 303, "{response:?}");
    let location = response.header("location").unwrap().to_owned();
    let expected: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("add_path", folder.to_str().unwrap())
        .append_pair("add_access", "read_write")
        .finish();
    assert_eq!(location, format!("/?{expected}#add"));
    let asked = portal.asked();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].directory && !asked[0].multiple, "{asked:?}");
    // The overview shows the chosen folder in the add form.
    let body = page
        .get(
            &location.replace("#add", ""),
            &format!("\r\nCookie: {cookie}"),
        )
        .body;
    assert!(body.contains("Q3 – Zoë"), "{body}");
}

/// Without a portal on the session bus, or when the human closes the desktop's dialog,
/// "Choose folder…" is the page's own picker.
#[test]
fn without_a_desktop_portal_choose_folder_is_the_pages_picker() {
    let bare = safe_lanes_testkit::portal::Portal::without_portal();
    let closed =
        safe_lanes_testkit::portal::Portal::start(safe_lanes_testkit::portal::Answer::Cancelled);
    for (bus, portal) in [(bare.address(), None), (closed.address(), Some(&closed))] {
        let page = Page::with_desktop(safe_lanes_ui::desktop::DesktopBus::At(bus.to_owned()));
        let cookie = page.sign_in();
        let home = page.tmp.path().join("home");
        let response = page.get("/pick?access=read_only", &format!("\r\nCookie: {cookie}"));
        assert_eq!(response.status, 200, "{bus}: {response:?}");
        assert!(
            response
                .body
                .contains(&format!("<code id=\"here\">{}</code>", home.display())),
            "{bus}: the page's picker, at home: {}",
            response.body
        );
        if let Some(portal) = portal {
            assert_eq!(portal.asked().len(), 1, "the desktop was asked first");
        }
    }
}
