//! What each page shows, as the templates read it. Every string that came from a file or an
//! agent is made visible first ([`Shown`]: control and format characters escaped) and then
//! HTML-escaped by the template engine, so no name, path or reason can pass for page text.

use std::path::Path;

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
#[derive(Debug)]
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
    pub(crate) alias: String,
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
}

impl RequestView {
    pub(crate) fn of(p: &Proposal, chosen: Option<&str>) -> Self {
        let (alias, access, path) = p.change.target();
        let r = &p.request;
        Self {
            id: r.id.clone(),
            change: p.change.describe(),
            alias: alias.to_string(),
            access: access.as_str(),
            path: path.map(shown),
            chosen: chosen.unwrap_or_default().to_owned(),
            digest: p.digest.clone(),
            filed_at: Shown::text(&r.requested_at).to_string(),
            filed_by: Shown::text(r.requested_by.as_deref().unwrap_or("(not recorded)"))
                .to_string(),
            reason: r.reason_lines(),
            raises: p.change.raises_access(),
            pick: format!("/pick?{}", query(&[("request", &r.id)])),
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
        }
    }
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
}

/// One changelog entry as shown.
#[derive(Debug)]
pub(crate) struct ChangeRow {
    pub(crate) at: String,
    pub(crate) action: &'static str,
    pub(crate) alias: String,
    pub(crate) actor: String,
    pub(crate) access: String,
    pub(crate) path: String,
    pub(crate) reason: String,
}

impl ChangeRow {
    pub(crate) fn of(c: &Change) -> Self {
        let access = match (c.from, c.access) {
            (Some(from), Some(to)) => format!("{from} → {to}"),
            (None, Some(to)) => to.to_string(),
            _ => String::new(),
        };
        Self {
            at: Shown::text(&c.at).to_string(),
            action: c.action.as_str(),
            alias: c.alias.to_string(),
            actor: Shown::text(&c.actor).to_string(),
            access,
            path: c.path.as_deref().map(shown).unwrap_or_default(),
            reason: Shown::text(&c.reason).to_string(),
        }
    }
}

/// `/changelog`, newest first.
#[derive(Template)]
#[template(path = "changelog.html")]
pub(crate) struct Changelog {
    pub(crate) chrome: Chrome,
    pub(crate) changes: Vec<ChangeRow>,
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
