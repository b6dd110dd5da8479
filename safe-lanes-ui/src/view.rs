//! What each page shows, as the templates read it. Every string that came from a file or an
//! agent is made visible first ([`Shown`]: control and format characters escaped) and then
//! HTML-escaped by the template engine, so no name, path or reason can pass for page text.

use std::path::Path;
use std::time::Duration;

use askama::Template;
use safe_lanes::audit::TailCheck;
use safe_lanes::grants::{Change, GrantView, Proposal};
use safe_lanes::{Access, Shown, Verification};

use crate::session::Flash;

/// Render `page`; a template that fails to render says so instead of panicking.
pub(crate) fn render(page: &impl Template) -> String {
    page.render().unwrap_or_else(|e| {
        tracing::error!("rendering a page failed: {e}");
        "<!doctype html><title>safe-lanes</title><p>This page could not be rendered.".to_owned()
    })
}

/// A path as it is shown.
pub(crate) fn shown(path: &Path) -> String {
    Shown::path(path).to_string()
}

/// `name=value&…`, each part encoded for a query string.
pub(crate) fn query(pairs: &[(&str, &str)]) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        out.append_pair(name, value);
    }
    out.finish()
}

/// What every page has around its content.
#[derive(Debug, Default)]
pub(crate) struct Chrome {
    /// The page's title.
    pub(crate) title: &'static str,
    /// Which page of the navigation it is (`overview`, `changelog`, `audit`, `uploads`).
    pub(crate) page: &'static str,
    /// What the last action did, once.
    pub(crate) flash: Option<Flash>,
    /// The session's CSRF token, for the forms.
    pub(crate) csrf: String,
}

/// A refusal page (wrong host, not signed in, no such page…).
#[derive(Template)]
#[template(path = "refused.html")]
pub(crate) struct Refused<'a> {
    pub(crate) why: &'a str,
}

/// A pending request as the overview shows it.
#[derive(Debug)]
pub(crate) struct RequestView {
    pub(crate) id: String,
    /// The change approving it makes, in words.
    pub(crate) change: String,
    pub(crate) access: &'static str,
    /// The folder approving it grants; `None` when the human chooses it.
    pub(crate) path: Option<String>,
    /// The folder the human picked for a request that names none.
    pub(crate) chosen: String,
    pub(crate) digest: String,
    pub(crate) filed_at: String,
    pub(crate) filed_by: String,
    pub(crate) reason: Vec<String>,
    /// Whether approving raises an existing grant's access (a reason is then required).
    pub(crate) raises: bool,
    /// The link to the folder picker for this request.
    pub(crate) pick: String,
    /// The warnings its folder's path gives.
    pub(crate) warnings: Vec<WarningView>,
    /// Why it cannot be approved as it stands, if it cannot: no approve button then.
    pub(crate) refused: Option<String>,
}

impl RequestView {
    pub(crate) fn of(
        p: &Proposal,
        glance: &safe_lanes::grants::Glance,
        chosen: Option<&str>,
    ) -> Self {
        let (_, access, path) = p.change.target();
        let r = &p.request;
        Self {
            id: r.id.clone(),
            change: p.change.headline(),
            access: access.as_str(),
            path: path.map(shown),
            chosen: chosen.unwrap_or_default().to_owned(),
            digest: p.digest.clone(),
            filed_at: safe_lanes::audit_view::local_time(&r.requested_at),
            filed_by: Shown::text(r.requested_by.as_deref().unwrap_or("(not recorded)"))
                .to_string(),
            reason: r.reason_lines(),
            raises: p.change.raises_access(),
            pick: format!("/pick?{}", query(&[("request", &r.id)])),
            warnings: glance.warnings.iter().map(WarningView::of).collect(),
            refused: match &glance.standing {
                safe_lanes::grants::Standing::Refused(why) => Some(why.clone()),
                _ => None,
            },
        }
    }
}

/// A grant as the overview shows it.
#[derive(Debug)]
pub(crate) struct GrantRow {
    pub(crate) alias: String,
    pub(crate) path: String,
    pub(crate) access: &'static str,
    pub(crate) read_write: bool,
    pub(crate) env: String,
    /// `tool` or `cache` for a toolchain's folder, `None` for a folder.
    pub(crate) kind: Option<&'static str>,
    /// Why it is not usable here, or `None` when it is.
    pub(crate) unavailable: Option<String>,
    /// The protected paths the human lifted for it (escaped), empty when none.
    pub(crate) lifted: Vec<String>,
    /// The library's warning for a direct read-write grant (no layer: nothing is held).
    pub(crate) direct: Option<String>,
    /// The human's own hidden patterns (escaped), empty when none.
    pub(crate) hide: Vec<String>,
    /// The patterns shown although the list of secrets hides them (escaped), empty when none.
    pub(crate) unhide: Vec<String>,
}

impl GrantRow {
    pub(crate) fn of(view: &GrantView) -> Self {
        Self {
            alias: view.grant.alias.to_string(),
            path: shown(&view.grant.path),
            access: view.grant.access.as_str(),
            read_write: view.grant.access == Access::ReadWrite,
            env: view.env.clone(),
            kind: (!view.grant.toolchain.kind.is_folder())
                .then(|| view.grant.toolchain.kind.as_str()),
            unavailable: view.unavailable.clone(),
            lifted: view
                .grant
                .allow_protected
                .iter()
                .map(|l| safe_lanes::Shown::text(l.as_str()).to_string())
                .collect(),
            direct: safe_lanes::risk::direct_warning(&view.grant)
                .map(|w| Shown::message(&w).to_string()),
            hide: escaped(&view.grant.hide),
            unhide: escaped(&view.grant.unhide),
        }
    }
}

/// Each of `patterns`, escaped for display.
fn escaped(patterns: &[String]) -> Vec<String> {
    patterns
        .iter()
        .map(|p| safe_lanes::Shown::text(p).to_string())
        .collect()
}

/// The add form's values, when the picker filled some in.
#[derive(Debug, Default)]
pub(crate) struct AddForm {
    pub(crate) path: String,
    pub(crate) read_write: bool,
}

/// `/`: the pending requests, the grants, and a form to add one.
#[derive(Template)]
#[template(path = "overview.html")]
pub(crate) struct Overview {
    pub(crate) chrome: Chrome,
    pub(crate) requests: Vec<RequestView>,
    pub(crate) grants: Vec<GrantRow>,
    pub(crate) add: AddForm,
    /// How many change sets wait for the human, or why they could not be read.
    pub(crate) held: Result<usize, String>,
}

/// One changelog entry as shown.
#[derive(Debug)]
pub(crate) struct ChangeRow {
    /// Local time with the offset.
    pub(crate) at: String,
    pub(crate) action: &'static str,
    pub(crate) alias: String,
    /// The user's name with the recorded id (`alice (uid:1000)`).
    pub(crate) actor: String,
    pub(crate) access: String,
    /// The folder's path, cut after each `/`, so it wraps at separators only.
    pub(crate) path: Vec<String>,
    /// The reason, by lines.
    pub(crate) reason: Vec<String>,
}

impl ChangeRow {
    pub(crate) fn of(c: &Change) -> Self {
        let access = match (c.from, c.access) {
            (Some(from), Some(to)) => format!("{from} → {to}"),
            (None, Some(to)) => to.to_string(),
            _ => String::new(),
        };
        Self {
            at: safe_lanes::audit_view::local_time(&c.at),
            action: c.action.as_str(),
            alias: c.alias.to_string(),
            actor: safe_lanes::Actor::shown(&c.actor),
            access,
            path: c
                .path
                .as_deref()
                .map(|p| wrapped_at_separators(&shown(p)))
                .unwrap_or_default(),
            reason: c
                .reason
                .lines()
                .map(|l| Shown::text(l).to_string())
                .collect(),
        }
    }
}

/// `path` (escaped) cut after each `/`: the template puts a line-break opportunity there.
pub(crate) fn wrapped_at_separators(path: &str) -> Vec<String> {
    path.split_inclusive('/').map(str::to_owned).collect()
}

/// Where a paged list is, and the links to the pages beside it.
#[derive(Debug, Default)]
pub(crate) struct Pages {
    pub(crate) page: usize,
    pub(crate) pages: usize,
    pub(crate) newer: Option<String>,
    pub(crate) older: Option<String>,
}

/// `/changelog`, newest first.
#[derive(Template)]
#[template(path = "changelog.html")]
pub(crate) struct Changelog {
    pub(crate) chrome: Chrome,
    pub(crate) changes: Vec<ChangeRow>,
    pub(crate) total: usize,
    pub(crate) pages: Pages,
}

/// One audit record as the audit page shows it ([`safe_lanes::audit_view::Entry`]).
#[derive(Debug)]
pub(crate) struct EntryRow {
    pub(crate) seq: u64,
    pub(crate) at: String,
    pub(crate) actor: String,
    pub(crate) event: String,
    pub(crate) outcome: &'static str,
    /// The record in words ([`safe_lanes::audit_view::Entry::words`]).
    pub(crate) words: String,
    pub(crate) detail: String,
    /// The sign of an attack the record shows.
    pub(crate) warning: Option<String>,
}

impl EntryRow {
    pub(crate) fn of(e: &safe_lanes::audit_view::Entry) -> Self {
        let mut detail = String::new();
        if let Some(code) = &e.code {
            detail.push_str(code);
        }
        if let Some(message) = &e.message {
            if !detail.is_empty() {
                detail.push_str(": ");
            }
            detail.push_str(message);
        }
        if let Some(reason) = &e.reason {
            if !detail.is_empty() {
                detail.push_str(" · ");
            }
            detail.push_str("reason: ");
            detail.push_str(reason);
        }
        Self {
            seq: e.seq,
            at: e.local.clone(),
            actor: e.actor_shown.clone(),
            event: e.event.clone(),
            outcome: e.outcome.as_str(),
            words: e.words.clone(),
            detail,
            warning: e.warning.clone(),
        }
    }
}

/// One file of the download lane as shown.
#[derive(Debug)]
pub(crate) struct FileRow {
    pub(crate) name: String,
    pub(crate) size: String,
    pub(crate) at: String,
    pub(crate) sha256: String,
    /// The name the agent asked for, when the file got another.
    pub(crate) hint: Option<String>,
    /// The sign of an attack in that name.
    pub(crate) warning: Option<String>,
    /// The link that shows it in the browser, when a browser can show it safely.
    pub(crate) view: Option<String>,
    /// The name as the remove form sends it back (lossless for the names the lane gives).
    pub(crate) raw: String,
}

impl FileRow {
    pub(crate) fn of(
        f: &safe_lanes::download::Entry,
        recorded: Option<&safe_lanes::audit_view::Recorded>,
    ) -> Self {
        Self {
            name: Shown::text(&f.name).to_string(),
            size: safe_lanes::risk::bytes_in_words(f.bytes),
            at: safe_lanes::audit_view::local_time(&f.modified),
            sha256: recorded
                .map_or("(no record)", |r| r.sha256.as_str())
                .to_owned(),
            hint: recorded.and_then(|r| r.hint.clone()),
            warning: recorded.and_then(|r| r.warning.clone()),
            view: crate::pages::preview_type(&f.name)
                .map(|_| format!("/downloads/view?{}", query(&[("name", &f.name)]))),
            raw: f.name.clone(),
        }
    }
}

/// One running command as the Running page shows it.
#[derive(Debug)]
pub(crate) struct JobRow {
    pub(crate) id: String,
    pub(crate) actor: String,
    pub(crate) command: String,
    pub(crate) cwd: String,
    pub(crate) started: String,
    pub(crate) elapsed: String,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) stopping: bool,
}

impl JobRow {
    pub(crate) fn of(j: &safe_lanes::running::Running) -> Self {
        let words = |s: u64| safe_lanes::audit_view::duration_in_words(Duration::from_secs(s));
        let timeout = j
            .timeout_s
            .map(|t| format!(" of {}", words(t)))
            .unwrap_or_default();
        Self {
            id: j.id.clone(),
            actor: j.actor.clone(),
            command: j.command.clone(),
            cwd: j.cwd.clone().unwrap_or_else(|| "a scratch folder".into()),
            started: j.local.clone(),
            elapsed: format!("{}{timeout}", words(j.elapsed_s)),
            stdout: last_lines(&j.stdout),
            stderr: last_lines(&j.stderr),
            stopping: j.stopping,
        }
    }
}

/// The last lines of a stream, as the Running page shows them.
fn last_lines(stream: &str) -> String {
    let lines: Vec<&str> = stream.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

/// `/running`: the confined commands running now.
#[derive(Template)]
#[template(path = "running.html")]
pub(crate) struct RunningPage {
    pub(crate) chrome: Chrome,
    pub(crate) jobs: Vec<JobRow>,
}

/// `/downloads`: the files of the download lane.
#[derive(Template)]
#[template(path = "downloads.html")]
pub(crate) struct Downloads {
    pub(crate) chrome: Chrome,
    pub(crate) files: Vec<FileRow>,
    pub(crate) total: usize,
    pub(crate) pages: Pages,
}

/// `/audit`: whether the audit log's chain holds.
#[derive(Template)]
#[template(path = "audit.html")]
pub(crate) struct Audit {
    pub(crate) chrome: Chrome,
    pub(crate) path: String,
    pub(crate) lines: u64,
    /// Where the chain breaks, or `None` when it holds.
    pub(crate) broken: Option<String>,
    /// What could be proven of the log's end.
    pub(crate) tail: String,
    pub(crate) tail_ok: bool,
    /// The records shown, newest first.
    pub(crate) entries: Vec<EntryRow>,
    pub(crate) pages: Pages,
    /// The filters in use.
    pub(crate) refused_only: bool,
    pub(crate) op: String,
    /// Per operation and outcome, the counts of the whole log.
    pub(crate) counts: Vec<(String, &'static str, usize)>,
}

impl Audit {
    pub(crate) fn of(chrome: Chrome, path: &Path, v: &Verification) -> Self {
        let (tail, tail_ok) = match &v.tail {
            TailCheck::Witnessed { seq, after } => (
                format!(
                    "nothing was cut from the end (witnessed up to line {seq}, {after} after it)"
                ),
                true,
            ),
            TailCheck::NotWitnessed { why } => (format!("not witnessed: {why}"), false),
        };
        Self {
            chrome,
            path: shown(path),
            lines: v.lines,
            broken: v
                .broken
                .as_ref()
                .map(|b| format!("line {}: {}", b.line, b.why)),
            tail,
            tail_ok,
            entries: Vec::new(),
            pages: Pages::default(),
            refused_only: false,
            op: String::new(),
            counts: Vec::new(),
        }
    }
}

/// One allowed upload root, or one ignored entry, as shown.
#[derive(Debug)]
pub(crate) struct RootRow {
    pub(crate) path: String,
    pub(crate) origin: &'static str,
    pub(crate) entry: String,
    pub(crate) note: String,
    /// Whether it is a line of `.upload-roots` (the page can remove it).
    pub(crate) removable: bool,
}

/// `/uploads`: the folders an upload may read from, and the entries ignored.
#[derive(Template)]
#[template(path = "uploads.html")]
pub(crate) struct Uploads {
    pub(crate) chrome: Chrome,
    pub(crate) roots: Vec<RootRow>,
    pub(crate) ignored: Vec<RootRow>,
    /// Why the roots could not be read, if they could not.
    pub(crate) error: Option<String>,
}

/// One folder in the picker.
#[derive(Debug)]
pub(crate) struct PickRow {
    pub(crate) name: String,
    /// The link that opens it in the picker.
    pub(crate) open: String,
    /// The link that chooses it, or `None` when it cannot be granted.
    pub(crate) choose: Option<String>,
    pub(crate) refused: Option<String>,
}

/// `/pick`: a folder browser that shows directories only and says which can be granted.
#[derive(Template)]
#[template(path = "pick.html")]
pub(crate) struct Pick {
    pub(crate) chrome: Chrome,
    /// What the folder is for, in words.
    pub(crate) purpose: String,
    pub(crate) access: &'static str,
    /// The links that check the other access instead (adding a grant only).
    pub(crate) switch: Option<(String, String)>,
    pub(crate) here: String,
    pub(crate) up: Option<String>,
    pub(crate) choose_here: Option<String>,
    pub(crate) refused_here: Option<String>,
    pub(crate) folders: Vec<PickRow>,
    pub(crate) truncated: bool,
    /// Why the folder could not be listed, if it could not.
    pub(crate) error: Option<String>,
    pub(crate) back: String,
}

/// A warning about a folder, as the library words it ([`safe_lanes::risk::Warning`]).
#[derive(Debug)]
pub(crate) struct WarningView {
    /// Its kind, for the style (`home`, `credentials`, `look_alike` …).
    pub(crate) risk: &'static str,
    /// Its kind in words.
    pub(crate) risk_words: &'static str,
    pub(crate) message: String,
    /// The path with every look-alike character escaped, for a look-alike name.
    pub(crate) spelled: Option<String>,
}

impl WarningView {
    pub(crate) fn of(w: &safe_lanes::risk::Warning) -> Self {
        use safe_lanes::risk::Risk;
        let risk_words = match w.risk {
            Risk::Home => "A home folder",
            Risk::HomeAncestor => "Holds the home folder",
            Risk::Credentials => "Credentials",
            Risk::Hidden => "A hidden folder",
            Risk::Large => "Very large",
            Risk::LookAlike => "A look-alike name",
            _ => "Look twice",
        };
        Self {
            risk: w.risk.as_str(),
            risk_words,
            message: w.message.clone(),
            spelled: w.spelled.clone(),
        }
    }
}

/// `/review`: a change as the human judges it, and the form that confirms it.
#[derive(Template)]
#[template(path = "review.html")]
pub(crate) struct ReviewPage {
    pub(crate) chrome: Chrome,
    /// The change in words.
    pub(crate) change: String,
    /// The request's id, or `widen-ALIAS`: the form's element ids start with it.
    pub(crate) id: String,
    pub(crate) from: String,
    pub(crate) to: &'static str,
    pub(crate) widens: bool,
    pub(crate) path: String,
    pub(crate) kind: &'static str,
    pub(crate) size: Option<String>,
    pub(crate) repository: bool,
    pub(crate) allows: &'static str,
    pub(crate) warnings: Vec<WarningView>,
    pub(crate) refused: Option<String>,
    /// Whether the request changed since the page the human came from.
    pub(crate) changed: bool,
    /// The requester's reason, by lines.
    pub(crate) reason: Vec<String>,
    /// Where the confirmation goes, and what it carries.
    pub(crate) action: &'static str,
    pub(crate) hidden: Vec<(&'static str, String)>,
    pub(crate) confirm: &'static str,
}

/// One held change as a listing shows it ([`safe_lanes::changes::HeldView`]).
#[derive(Debug)]
pub(crate) struct HeldRow {
    pub(crate) grant: String,
    /// The path relative to the grant's folder, escaped (as the library names it).
    pub(crate) path: String,
    /// `created`, `modified`, `deleted`, `mode` or `link`.
    pub(crate) change: &'static str,
    /// Why it is held (`agent_config`, `git_state` …).
    pub(crate) why: &'static str,
    /// What exactly, in words.
    pub(crate) what: String,
}

impl HeldRow {
    pub(crate) fn of(h: &safe_lanes::changes::HeldView) -> Self {
        Self {
            grant: Shown::text(&h.grant).to_string(),
            path: Shown::message(&h.path).to_string(),
            change: h.change.as_str(),
            why: h.why.as_str(),
            what: Shown::message(&h.what).to_string(),
        }
    }
}

/// A held change set as the "Held changes" tab shows it ([`safe_lanes::changes::HeldSet`]).
#[derive(Debug)]
pub(crate) struct HeldSetRow {
    pub(crate) id: String,
    /// The grants it changed, comma-separated.
    pub(crate) grants: String,
    /// `exec` or `patch`.
    pub(crate) origin: String,
    /// The command, or the patched file (escaped).
    pub(crate) command: String,
    /// When it began, local time with the offset.
    pub(crate) when: String,
    /// Who asked (the agent), as the changelog shows an actor.
    pub(crate) who: String,
    pub(crate) held: Vec<HeldRow>,
    /// The link to its review.
    pub(crate) review: String,
}

impl HeldSetRow {
    pub(crate) fn of(s: &safe_lanes::changes::HeldSet) -> Self {
        Self {
            id: Shown::text(&s.id).to_string(),
            grants: s
                .grants
                .iter()
                .map(|g| Shown::text(g).to_string())
                .collect::<Vec<_>>()
                .join(", "),
            origin: Shown::text(&s.origin).to_string(),
            command: Shown::message(&s.command).to_string(),
            when: safe_lanes::audit_view::local_time(&s.started),
            who: safe_lanes::Actor::shown(&s.actor),
            held: s.held.iter().map(HeldRow::of).collect(),
            review: format!("/changes/review?{}", query(&[("set", &s.id)])),
        }
    }
}

/// `/changes`: the change sets waiting for the human.
#[derive(Template)]
#[template(path = "held.html")]
pub(crate) struct Held {
    pub(crate) chrome: Chrome,
    pub(crate) sets: Vec<HeldSetRow>,
    /// Why the sets could not be read, if they could not.
    pub(crate) error: Option<String>,
}

/// One held change in full, as its review shows it ([`safe_lanes::changes::ChangeReview`]).
#[derive(Debug)]
pub(crate) struct ChangeView {
    /// Its place in the set (1-based): the page's element ids use it, a path cannot be one.
    pub(crate) n: usize,
    pub(crate) held: HeldRow,
    /// What the path would be: `file`, `directory`, `link` or `absent`.
    pub(crate) kind: &'static str,
    /// What the folder has there now.
    pub(crate) current: &'static str,
    /// Permission bits, octal.
    pub(crate) mode: Option<String>,
    /// The size in words and in bytes, for a file.
    pub(crate) size: Option<String>,
    pub(crate) sha256: Option<String>,
    /// The link's target (escaped).
    pub(crate) target: Option<String>,
    /// What a directory holds (escaped; at most the library's count).
    pub(crate) entries: Vec<String>,
    /// The unified diff, each line escaped by the library, the lines kept.
    pub(crate) diff: Option<String>,
    /// What the library warns of, were it applied now.
    pub(crate) warnings: Vec<String>,
}

impl ChangeView {
    pub(crate) fn of(n: usize, c: &safe_lanes::changes::ChangeReview) -> Self {
        Self {
            n,
            held: HeldRow::of(&c.held),
            kind: c.kind,
            current: c.current,
            mode: c.mode.as_deref().map(|m| Shown::text(m).to_string()),
            size: c.bytes.map(|b| {
                let words = safe_lanes::risk::bytes_in_words(b);
                if b < 1024 {
                    words
                } else {
                    format!("{words} ({b} bytes)")
                }
            }),
            sha256: c.sha256.as_deref().map(|s| Shown::text(s).to_string()),
            target: c.target.as_deref().map(|t| Shown::message(t).to_string()),
            entries: c
                .entries
                .iter()
                .map(|e| Shown::message(e).to_string())
                .collect(),
            diff: c.diff.clone(),
            warnings: c
                .warnings
                .iter()
                .map(|w| Shown::message(w).to_string())
                .collect(),
        }
    }
}

/// `/changes/review`: a held change set in full, the changes to tick, and the three choices.
#[derive(Template)]
#[template(path = "held_review.html")]
pub(crate) struct HeldReview {
    pub(crate) chrome: Chrome,
    pub(crate) set: HeldSetRow,
    pub(crate) changes: Vec<ChangeView>,
    /// The digest of everything shown: the confirmation carries it.
    pub(crate) digest: String,
}

/// `/changes/confirm`: exactly what will be applied or discarded, and the form that does it.
#[derive(Template)]
#[template(path = "held_confirm.html")]
pub(crate) struct HeldConfirm {
    pub(crate) chrome: Chrome,
    pub(crate) set: HeldSetRow,
    /// `apply` or `discard`.
    pub(crate) verb: &'static str,
    /// The changes the confirmation applies or discards.
    pub(crate) chosen: Vec<ChangeView>,
    /// The changes that stay held (applying some only).
    pub(crate) kept: Vec<ChangeView>,
    pub(crate) digest: String,
    /// Where the confirmation goes, and what it carries.
    pub(crate) action: &'static str,
    pub(crate) hidden: Vec<(&'static str, String)>,
    pub(crate) confirm: String,
    /// The review, to go back to.
    pub(crate) back: String,
}
