//! The first step of every change that gives the agent more: the review. It shows what the
//! library's [`Review`] says — from what to what, the folder, its size and whether it is a
//! repository, what the access allows in words, the protected paths, every warning — and the
//! form that confirms it, whose note is required. Nothing is changed by showing it.

use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use safe_lanes::grants::{Proposal, Review};
use safe_lanes::{Access, Shown};
use serde::Deserialize;

use crate::app::{App, refused};
use crate::guard::Human;
use crate::view::{self, ReviewPage, WarningView};

/// What the review is of: a pending request (with the digest the overview showed, and the
/// folder chosen for one that names none), or raising a grant to read-write.
#[derive(Deserialize)]
pub(crate) struct ReviewQuery {
    request: Option<String>,
    digest: Option<String>,
    path: Option<String>,
    /// Raising this grant to read-write.
    widen: Option<String>,
}

/// `GET /review`: the change, as the human judges it, and the form that confirms it.
pub(crate) async fn review(
    State(app): State<Arc<App>>,
    human: Human,
    Query(q): Query<ReviewQuery>,
) -> Response {
    let looked = app.blocking(move |app| page_of(app, &q)).await;
    let chrome = app.chrome(&human, "Review the change", "overview");
    match looked {
        Ok(mut page) => {
            page.chrome = chrome;
            Html(view::render(&page)).into_response()
        }
        Err(e) => refused(StatusCode::NOT_FOUND, &e.to_string()),
    }
}

fn page_of(app: &App, q: &ReviewQuery) -> safe_lanes::Result<ReviewPage> {
    if let Some(alias) = &q.widen {
        let review = app.grants.review_set_access(alias, Access::ReadWrite)?;
        let mut page = ReviewPage::of(&review, format!("raise {alias} to read_write"));
        page.id = format!("widen-{}", review.alias);
        page.action = "/widen";
        page.hidden = vec![("alias", review.alias.to_string())];
        page.confirm = "Make it read-write";
        return Ok(page);
    }
    let id = q.request.as_deref().unwrap_or_default();
    let proposal = app.grants.proposal(id)?;
    let chosen = chosen_folder(&proposal, q.path.as_deref());
    let review = app.grants.review_proposal(&proposal, chosen.as_deref());
    let mut page = ReviewPage::of(&review, proposal.change.headline());
    let (alias, access, proposed) = proposal.change.target();
    page.id = proposal.request.id.clone();
    page.action = "/approve";
    page.changed = q.digest.as_deref().is_some_and(|d| d != proposal.digest);
    page.reason = proposal.request.reason_lines();
    let path = proposed
        .map(|p| Shown::path(p).to_string())
        .or(q.path.clone())
        .unwrap_or_default();
    page.hidden = vec![
        ("request", proposal.request.id.clone()),
        ("alias", alias.to_string()),
        ("access", access.as_str().to_owned()),
        ("digest", proposal.digest.clone()),
        ("path", path),
    ];
    page.confirm = "Approve this change";
    Ok(page)
}

/// The folder the human chose on the page for `proposal`: only a request that names no
/// folder takes one (the page carries a proposed folder as shown, which it never approves by;
/// the proposal binds it). What the review judges and what the approval grants.
pub(crate) fn chosen_folder(proposal: &Proposal, path: Option<&str>) -> Option<PathBuf> {
    let names_one = proposal.change.target().2.is_some();
    path.filter(|p| !p.is_empty() && !names_one)
        .map(PathBuf::from)
}

impl ReviewPage {
    fn of(r: &Review, change: String) -> Self {
        let folder = r.folder.as_ref();
        Self {
            chrome: Default::default(),
            change,
            id: String::new(),
            from: r.from.map_or("no grant".to_owned(), |a| a.to_string()),
            to: r.to.as_str(),
            widens: r.widens,
            path: r
                .path
                .as_deref()
                .map(|p| Shown::path(p).to_string())
                .unwrap_or_default(),
            kind: r.kind.as_str(),
            size: folder.map(|f| f.size.in_words()),
            repository: folder.is_some_and(|f| f.repository),
            allows: r.allows,
            warnings: r.warnings.iter().map(WarningView::of).collect(),
            refused: r.refused.clone(),
            changed: false,
            reason: Vec::new(),
            action: "",
            hidden: Vec::new(),
            confirm: "",
        }
    }
}
