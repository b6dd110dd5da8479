//! The "Held changes" tab: sets made by real confined commands, reviewed, then applied (all or
//! some) or discarded in two steps, bound to the digest of what was reviewed; refused, changing
//! nothing, without the form's token, without a reason, or when the set or its folder changed.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use safe_lanes::changes::{HeldChanges, SetReview};
use safe_lanes::confine::landlock_support;
use safe_lanes::{Access, Alias, Confined};
use serde_json::Value;

use crate::client::{Page, Response};

/// What a human's confined command leaves held: a directory and a file of an agent host's
/// configuration (`fine.txt` is published at once).
const AGENT_SETTINGS: &str = "mkdir .claude && echo '{}' > .claude/settings.json \
                              && printf '# notes\\nsecond line\\n' > CLAUDE.md && echo ok > fine.txt";

/// These tests run one at a time. A confined command forks, and until its child execs it
/// holds every descriptor of this process — among them the locks of the sets another test's
/// page is working on, which then read as "being worked on by another process".
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A signed-in page over a state root with the read-write grant `proj`.
struct Desk {
    page: Page,
    cookie: String,
    csrf: String,
    proj: PathBuf,
    _alone: MutexGuard<'static, ()>,
}

impl Desk {
    fn new() -> Self {
        let alone = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
        let support = landlock_support();
        assert!(
            support.fully_enforced,
            "held changes come from confined commands, which need Landlock: {support:?}"
        );
        let page = Page::new();
        let proj = page.folder("proj");
        page.grants()
            .add("proj", &proj, Access::ReadWrite, "the project", "uid:0")
            .unwrap();
        let cookie = page.sign_in();
        let csrf = page.csrf(&cookie);
        Self {
            page,
            cookie,
            csrf,
            proj,
            _alone: alone,
        }
    }

    /// Run `script` confined in `proj`, as an agent's command runs; the id of the set it held.
    fn run(&self, script: &str) -> String {
        let grants = Arc::new(self.page.grants());
        let out = Confined::shell(script)
            .cwd(Alias::new("proj").unwrap())
            .run(&grants.session())
            .unwrap();
        assert_eq!(out.outcome.exit_code, Some(0), "{script}: {out:?}");
        let changes = out.changes;
        changes
            .set
            .clone()
            .unwrap_or_else(|| panic!("{script} held nothing: {changes:?}"))
    }

    fn held(&self) -> HeldChanges {
        HeldChanges::open(Arc::new(self.page.grants())).unwrap()
    }

    /// The set as the library shows it now.
    fn show(&self, id: &str) -> SetReview {
        self.held().show(id).unwrap()
    }

    fn get(&self, target: &str) -> Response {
        let response = self
            .page
            .get(target, &format!("\r\nCookie: {}", self.cookie));
        assert_eq!(response.status, 200, "{target}: {response:?}");
        response
    }

    /// Post `form` with the session's token; where it sends the human, and what the page
    /// there says.
    fn decide(&self, target: &str, form: &[(&str, &str)]) -> (String, String) {
        let mut with_token = vec![("csrf", self.csrf.as_str())];
        with_token.extend_from_slice(form);
        let response = self.page.post(target, &self.cookie, &with_token);
        assert_eq!(response.status, 303, "{target}: {response:?}");
        let next = response.header("location").expect("a redirect").to_owned();
        (next.clone(), self.flash(&next))
    }

    /// What the page at `target` says once, after an action or a refused step.
    fn flash(&self, target: &str) -> String {
        let body = self.get(target).body;
        let at = body
            .find("id=\"flash\"")
            .unwrap_or_else(|| panic!("no flash on {target}: {body}"));
        body[at..].split("</div>").next().unwrap().to_owned()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.proj.join(rel)
    }

    fn records(&self, event: &str) -> Vec<Value> {
        self.page
            .audit()
            .into_iter()
            .filter(|r| r["event"] == event)
            .collect()
    }
}

/// `text` as the page's templates escape it.
fn html(text: &str) -> String {
    text.replace('&', "&#38;")
        .replace('<', "&#60;")
        .replace('>', "&#62;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}

fn review_of(id: &str) -> String {
    format!("/changes/review?set={id}")
}

#[test]
fn the_tab_lists_a_set_a_confined_command_held_and_its_review_shows_each_change() {
    let desk = Desk::new();
    let body = desk.get("/changes").body;
    assert!(body.contains("id=\"no-held\""), "nothing held yet: {body}");
    let id = desk.run(AGENT_SETTINGS);
    assert!(desk.path("fine.txt").exists(), "published at once");
    let set = &desk.held().list().unwrap()[0];

    let body = desk.get("/changes").body;
    assert!(!body.contains("id=\"no-held\""), "{body}");
    assert!(body.contains(&format!("id=\"{id}\"")), "the set: {body}");
    assert!(body.contains("exec: <code class=\"quoted\">"), "{body}");
    assert!(
        body.contains(&html(&set.command)),
        "the command {:?}: {body}",
        set.command
    );
    assert!(
        body.contains(&html(&safe_lanes::audit_view::local_time(&set.started))),
        "when: {body}"
    );
    assert!(
        body.contains(&html(&safe_lanes::Actor::shown(&set.actor))),
        "who: {body}"
    );
    let held: Vec<(&str, &str)> = set
        .held
        .iter()
        .map(|h| (h.path.as_str(), h.why.as_str()))
        .collect();
    assert_eq!(
        held,
        [(".claude", "agent_config"), ("CLAUDE.md", "agent_config")]
    );
    for h in &set.held {
        let row = format!(
            "<code>proj:{}</code></td><td>{}</td><td><code>{}</code></td><td>{}</td>",
            h.path,
            h.change.as_str(),
            h.why,
            html(&h.what)
        );
        assert!(body.contains(&row), "{row}: {body}");
    }
    assert!(
        body.contains(&format!("href=\"{}\"", review_of(&id))),
        "{body}"
    );
    let overview = desk.get("/").body;
    assert!(
        overview.contains("<span class=\"count\" id=\"held-count\">1</span>"),
        "{overview}"
    );
    assert!(overview.contains("href=\"/changes\""), "{overview}");

    let review = desk.show(&id);
    let body = desk.get(&review_of(&id)).body;
    assert!(
        body.contains(&format!("id=\"held-digest\">{}</code>", review.digest)),
        "the digest: {body}"
    );
    assert!(
        body.contains(&format!("name=\"digest\" value=\"{}\"", review.digest)),
        "the choice carries the digest: {body}"
    );
    for (n, c) in review.changes.iter().enumerate() {
        let n = n + 1;
        assert!(
            body.contains(&format!(
                "id=\"tick-{n}\" name=\"path\" value=\"{}\"",
                c.held.path
            )),
            "{}: {body}",
            c.held.path
        );
        assert!(
            body.contains(&format!(
                "<code>{}</code>: {}</dd>",
                c.held.why,
                html(&c.held.what)
            )),
            "why {}: {body}",
            c.held.path
        );
        assert!(!c.warnings.is_empty(), "the library warns of {c:?}");
        for w in &c.warnings {
            assert!(
                body.contains(&format!(
                    "<li class=\"warning\"><strong>{}</strong>",
                    html(w)
                )),
                "warning {w}: {body}"
            );
        }
    }
    let diff = review.changes[1].diff.as_deref().expect("a diff for text");
    assert!(diff.contains("+# notes\n+second line"), "{diff}");
    assert!(
        body.contains(&format!(
            "<pre class=\"diff\" id=\"diff-2\"><code>{}</code></pre>",
            html(diff)
        )),
        "the diff, its lines kept: {body}"
    );
    assert!(
        body.contains("<li><code>settings.json</code></li>"),
        "the directory's entries: {body}"
    );
    assert_eq!(
        desk.held().list().unwrap().len(),
        1,
        "showing changes nothing"
    );
}

#[test]
fn applying_the_ticked_change_with_the_reviewed_digest_applies_only_it() {
    let desk = Desk::new();
    let id = desk.run(AGENT_SETTINGS);
    let digest = desk.show(&id).digest;

    // The confirmation restates what is applied and what stays held.
    let confirm = desk
        .get(&format!(
            "/changes/confirm?set={id}&digest={digest}&do=selected&path=CLAUDE.md"
        ))
        .body;
    let chosen = confirm.split("id=\"held-chosen\"").nth(1).unwrap();
    let (chosen, kept) = chosen.split_once("id=\"held-kept\"").expect("a kept list");
    assert!(chosen.contains("<code>proj:CLAUDE.md</code>"), "{confirm}");
    assert!(!chosen.contains("proj:.claude"), "{confirm}");
    assert!(kept.contains("<code>proj:.claude</code>"), "{confirm}");
    assert!(
        confirm.contains("<input type=\"hidden\" name=\"path\" value=\"CLAUDE.md\">"),
        "{confirm}"
    );
    assert!(confirm.contains("name=\"reason\" required"), "{confirm}");
    assert!(
        !desk.path("CLAUDE.md").exists(),
        "confirming is a step of its own"
    );

    let (next, said) = desk.decide(
        "/changes/apply",
        &[
            ("set", &id),
            ("digest", &digest),
            ("do", "selected"),
            ("path", "CLAUDE.md"),
            ("reason", "the notes are fine"),
        ],
    );
    assert_eq!(next, "/changes");
    assert!(
        said.contains(&format!("Applied 1 change of change set {id}: CLAUDE.md")),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(desk.path("CLAUDE.md")).unwrap(),
        "# notes\nsecond line\n"
    );
    assert!(!desk.path(".claude").exists(), "not ticked, not applied");
    let left = desk.held().list().unwrap();
    assert_eq!(left.len(), 1);
    let paths: Vec<&str> = left[0].held.iter().map(|h| h.path.as_str()).collect();
    assert_eq!(paths, [".claude"]);
    let applied = desk.records("change.applied");
    assert_eq!(applied.len(), 1, "{applied:?}");
    let record = applied[0].to_string();
    assert!(
        record.contains(&desk.page.actor),
        "the human acted: {record}"
    );
    assert!(record.contains("the notes are fine"), "{record}");
    assert!(
        record.contains("CLAUDE.md") && !record.contains(".claude\""),
        "{record}"
    );
}

#[test]
fn a_stale_digest_applies_nothing_and_sends_the_human_back_to_the_review() {
    let desk = Desk::new();
    let id = desk.run(AGENT_SETTINGS);
    let reviewed = desk.show(&id).digest;
    // The human writes the folder where a held change would land, after the review.
    std::fs::write(desk.path("CLAUDE.md"), "mine\n").unwrap();
    let now = desk.show(&id).digest;
    assert_ne!(now, reviewed, "the digest covers the folder's entry");

    let stale = format!("/changes/confirm?set={id}&digest={reviewed}&do=all");
    let response = desk
        .page
        .get(&stale, &format!("\r\nCookie: {}", desk.cookie));
    assert_eq!(response.status, 303, "{response:?}");
    assert_eq!(response.header("location"), Some(review_of(&id).as_str()));
    let said = desk.flash(&review_of(&id));
    assert!(said.contains("changed since it was shown"), "{said}");

    for (target, choice) in [("/changes/apply", "all"), ("/changes/discard", "discard")] {
        let (next, said) = desk.decide(
            target,
            &[
                ("set", &id),
                ("digest", &reviewed),
                ("do", choice),
                ("reason", "looked fine"),
            ],
        );
        assert_eq!(next, review_of(&id), "{target}: back to the review");
        assert!(
            said.contains("Nothing was applied or discarded"),
            "{target}: {said}"
        );
        assert!(
            said.contains("changed since it was shown"),
            "{target}: {said}"
        );
        assert_eq!(
            std::fs::read_to_string(desk.path("CLAUDE.md")).unwrap(),
            "mine\n",
            "{target}: the human's file is kept"
        );
        assert!(!desk.path(".claude").exists(), "{target}: nothing applied");
        assert_eq!(desk.held().list().unwrap().len(), 1, "{target}: still held");
    }
    // The review shown again is the set as it is now, with the digest that applies.
    let body = desk.get(&review_of(&id)).body;
    assert!(
        body.contains(&format!("id=\"held-digest\">{now}</code>")),
        "{body}"
    );
    assert!(desk.records("change.applied").is_empty());
    assert!(desk.records("change.discarded").is_empty());
}

#[test]
fn discarding_removes_the_set_and_nothing_reaches_the_folder() {
    let desk = Desk::new();
    let id = desk.run(AGENT_SETTINGS);
    let digest = desk.show(&id).digest;
    let confirm = desk
        .get(&format!(
            "/changes/confirm?set={id}&digest={digest}&do=discard"
        ))
        .body;
    assert!(
        confirm.contains("These changes will be discarded"),
        "{confirm}"
    );
    assert!(confirm.contains("action=\"/changes/discard\""), "{confirm}");
    let (next, said) = desk.decide(
        "/changes/discard",
        &[
            ("set", &id),
            ("digest", &digest),
            ("do", "discard"),
            ("reason", "not these settings"),
        ],
    );
    assert_eq!(next, "/changes");
    assert!(
        said.contains(&format!("Discarded change set {id}: 2 changes removed")),
        "{said}"
    );
    assert!(desk.held().list().unwrap().is_empty());
    assert!(!desk.path(".claude").exists() && !desk.path("CLAUDE.md").exists());
    assert!(desk.get("/changes").body.contains("id=\"no-held\""));
    let discarded = desk.records("change.discarded");
    assert_eq!(discarded.len(), 1);
    let record = discarded[0].to_string();
    assert!(record.contains(&desk.page.actor), "{record}");
    assert!(record.contains("not these settings"), "{record}");
    // The set is gone: a second decision on it says so.
    let (next, said) = desk.decide(
        "/changes/discard",
        &[("set", &id), ("digest", &digest), ("reason", "again")],
    );
    assert_eq!(next, "/changes");
    assert!(said.contains("(not_found)"), "{said}");
}

#[test]
fn a_decision_without_the_token_or_a_reason_or_a_ticked_change_is_refused() {
    let desk = Desk::new();
    let id = desk.run(AGENT_SETTINGS);
    let digest = desk.show(&id).digest;
    let form = |choice: &'static str, reason: &'static str| {
        vec![
            ("set", id.clone()),
            ("digest", digest.clone()),
            ("do", choice.to_owned()),
            ("path", "CLAUDE.md".to_owned()),
            ("reason", reason.to_owned()),
        ]
    };
    let unchanged = |what: &str| {
        assert!(!desk.path("CLAUDE.md").exists(), "{what}: nothing applied");
        assert!(!desk.path(".claude").exists(), "{what}: nothing applied");
        let listed = desk.held().list().unwrap();
        assert_eq!(listed.len(), 1, "{what}: still held");
        assert_eq!(listed[0].held.len(), 2, "{what}: still held");
    };
    for target in ["/changes/apply", "/changes/discard"] {
        let full = form("selected", "a reason");
        let borrowed: Vec<(&str, &str)> = full.iter().map(|(k, v)| (*k, v.as_str())).collect();
        for token in [None, Some("another page's token"), Some("")] {
            let mut sent = borrowed.clone();
            if let Some(token) = token {
                sent.push(("csrf", token));
            }
            let response = desk.page.post(target, &desk.cookie, &sent);
            assert_eq!(response.status, 403, "{target} {token:?}: {response:?}");
            unchanged(target);
        }
        // The right token twice with another: not the one form the page rendered.
        let mut sent = borrowed.clone();
        sent.extend([("csrf", desk.csrf.as_str()), ("csrf", "forged")]);
        let response = desk.page.post(target, &desk.cookie, &sent);
        assert_eq!(response.status, 403, "{target} two tokens: {response:?}");
        // From another origin, with the token.
        sent = borrowed.clone();
        sent.push(("csrf", desk.csrf.as_str()));
        let extra = format!("\r\nOrigin: http://evil.example\r\nCookie: {}", desk.cookie);
        let response = desk.page.post_with(target, &extra, &sent);
        assert_eq!(response.status, 403, "{target} cross-origin: {response:?}");
        unchanged(target);
    }
    for (target, choice) in [
        ("/changes/apply", "selected"),
        ("/changes/apply", "all"),
        ("/changes/discard", "discard"),
    ] {
        for reason in ["", "  "] {
            let sent = form(choice, reason);
            let sent: Vec<(&str, &str)> = sent.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let (next, said) = desk.decide(target, &sent);
            assert!(
                said.contains("Nothing was changed (invalid_argument)"),
                "{target} {choice} {reason:?}: {said}"
            );
            assert!(
                next.starts_with("/changes/confirm?"),
                "{target}: back to the confirmation: {next}"
            );
            unchanged(target);
        }
    }
    // "Apply the ticked changes" with none ticked is not "apply all".
    let (next, said) = desk.decide(
        "/changes/apply",
        &[
            ("set", &id),
            ("digest", &digest),
            ("do", "selected"),
            ("reason", "a reason"),
        ],
    );
    assert_eq!(next, review_of(&id));
    assert!(said.contains("no change was ticked"), "{said}");
    unchanged("none ticked");
    let response = desk.page.get(
        &format!("/changes/confirm?set={id}&digest={digest}&do=selected"),
        &format!("\r\nCookie: {}", desk.cookie),
    );
    assert_eq!(response.status, 303, "{response:?}");
    // A path the set does not hold.
    let (_, said) = desk.decide(
        "/changes/apply",
        &[
            ("set", &id),
            ("digest", &digest),
            ("do", "selected"),
            ("path", "elsewhere.txt"),
            ("reason", "a reason"),
        ],
    );
    assert!(said.contains("Nothing was changed (not_found)"), "{said}");
    unchanged("a path not held");
    assert!(desk.records("change.applied").is_empty());
    assert!(desk.records("change.discarded").is_empty());
}

#[test]
fn hostile_paths_commands_and_contents_are_shown_as_text() {
    let desk = Desk::new();
    let id = desk.run(
        "d=$(printf 'a\\342\\200\\256b') && mkdir \"$d\" \
         && echo '<script>alert(1)</script>' > \"$d/CLAUDE.md\" \
         && mkdir .claude && echo x > '.claude/<img src=x onerror=alert(2)>' \
         # <script>alert(3)</script> \u{202e}gpj.exe",
    );
    for target in ["/changes".to_owned(), review_of(&id)] {
        let body = desk.get(&target).body;
        for raw in ["<script>alert", "<img src=x", "\u{202e}"] {
            assert!(!body.contains(raw), "{target}: {raw:?} raw in {body}");
        }
        assert!(
            body.contains("proj:a\\u{202e}b/CLAUDE.md</code>"),
            "{target}: the override is shown, not obeyed: {body}"
        );
        assert!(
            body.contains("# &#60;script&#62;alert(3)&#60;/script&#62; \\u{202e}gpj.exe"),
            "{target}: the command as text: {body}"
        );
    }
    let body = desk.get(&review_of(&id)).body;
    assert!(
        body.contains("+&#60;script&#62;alert(1)&#60;/script&#62;"),
        "the diff as text: {body}"
    );
    assert!(
        body.contains("<li><code>&#60;img src=x onerror=alert(2)&#62;</code></li>"),
        "the directory's entries as text: {body}"
    );
}

#[test]
fn the_overview_warns_beside_a_direct_grant() {
    let desk = Desk::new();
    let body = desk.get("/").body;
    assert!(!body.contains("id=\"direct-proj\""), "layered: {body}");
    let grants = desk.page.grants();
    grants
        .set_direct("proj", true, "a network file system", "uid:0")
        .unwrap();
    let grant = grants.list().unwrap().grants[0].grant.clone();
    let warning = safe_lanes::risk::direct_warning(&grant).expect("a direct grant warns");
    let body = desk.get("/").body;
    let row = body
        .split("<tr id=\"grant-proj\">")
        .nth(1)
        .and_then(|r| r.split("</tr>").next())
        .unwrap_or_else(|| panic!("{body}"));
    assert!(
        row.contains(&format!(
            "<span class=\"warning direct\" id=\"direct-proj\"><strong>Warning:</strong> {}</span>",
            html(&warning)
        )),
        "{row}"
    );
    // A direct grant holds nothing, so the held count is zero.
    assert!(body.contains("id=\"held-count\">0</span>"), "{body}");
}
