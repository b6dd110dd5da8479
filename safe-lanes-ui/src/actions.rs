//! The actions: each is one library call made for the human, reported on the next page shown
//! (post, then redirect), refused with the library's own words when the library refuses.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Redirect, Response};
use safe_lanes::grants::{Grant, Recorded, Seen};
use safe_lanes::{Access, Alias, Code, Error, Shown};
use serde::Deserialize;

use crate::app::App;
use crate::guard::Posted;
use crate::session::Flash;

/// The approve form: the change as the page showed it, and the folder the human chose for a
/// request that names none.
#[derive(Deserialize)]
pub(crate) struct ApproveForm {
    request: String,
    alias: String,
    access: String,
    digest: String,
    #[serde(default)]
    path: String,
    #[serde(default)]
    reason: String,
}

/// `POST /approve`: approve exactly the change the page showed, or nothing.
pub(crate) async fn approve(
    State(app): State<Arc<App>>,
    Posted(f): Posted<ApproveForm>,
) -> Response {
    let done = app.blocking(move |app| approve_shown(app, &f)).await;
    app.report(done.map(|g| format!("Approved: {}", describe(&g))))
}

fn approve_shown(app: &App, f: &ApproveForm) -> Result<Recorded<Grant>, Refusal> {
    let seen = Seen {
        alias: Alias::new(&f.alias)?,
        access: Access::parse(&f.access)?,
        path: (!f.path.is_empty()).then(|| PathBuf::from(&f.path)),
        digest: Some(f.digest.clone()),
    };
    let proposal = app
        .grants
        .proposal(&f.request)
        .map_err(|e| match e.code() {
            Code::NotFound => Refusal::Stale,
            _ => Refusal::Library(e),
        })?;
    let chosen = crate::review::chosen_folder(&proposal, Some(&f.path));
    Ok(app
        .grants
        .approve_seen(&f.request, &seen, chosen.as_deref(), &f.reason, &app.actor)?)
}

#[derive(Deserialize)]
pub(crate) struct DenyForm {
    request: String,
    #[serde(default)]
    reason: String,
}

/// `POST /deny`: deny a request with a reason the agent will read.
pub(crate) async fn deny(State(app): State<Arc<App>>, Posted(f): Posted<DenyForm>) -> Response {
    let done = app
        .blocking(move |app| app.grants.deny(&f.request, &f.reason, &app.actor))
        .await;
    app.report(
        done.map(|r| format!("Denied request {} for `{}`", r.id, r.alias))
            .map_err(Refusal::from),
    )
}

/// The remove form of a download.
#[derive(Deserialize)]
pub(crate) struct RemoveForm {
    name: String,
    #[serde(default)]
    reason: String,
}

/// `POST /downloads/remove`: remove a file of the download lane, with a reason for the audit
/// log.
pub(crate) async fn remove_download(
    State(app): State<Arc<App>>,
    Posted(f): Posted<RemoveForm>,
) -> Response {
    let done = app
        .blocking(move |app| {
            safe_lanes::DownloadLane::open(&app.root)?
                .with_actor(safe_lanes::Actor::human())
                .remove(&f.name, &f.reason)
        })
        .await;
    app.report_to(
        "/downloads",
        done.map(|r| {
            let unrecorded = if r.recorded {
                ""
            } else {
                " (the audit log could not record it: see the server's log)"
            };
            format!(
                "Removed {} from the download lane{unrecorded}",
                Shown::text(&r.entry.name)
            )
        })
        .map_err(Refusal::from),
    )
}

/// The stop form of a running command.
#[derive(Deserialize)]
pub(crate) struct StopForm {
    id: String,
    #[serde(default)]
    reason: String,
}

/// `POST /running/stop`: stop a running command, with a reason for the audit log.
pub(crate) async fn stop(State(app): State<Arc<App>>, Posted(f): Posted<StopForm>) -> Response {
    let done = app
        .blocking(move |app| {
            safe_lanes::running::stop(&app.root, &f.id, &f.reason, &app.actor).map(|()| f.id)
        })
        .await;
    app.report_to(
        "/running",
        done.map(|id| format!("Stopping {id}: it ends within a tenth of a second"))
            .map_err(Refusal::from),
    )
}

/// The forms that act on one grant.
#[derive(Deserialize)]
pub(crate) struct GrantForm {
    alias: String,
    #[serde(default)]
    reason: String,
}

/// `POST /narrow`: make a read-write grant read-only.
pub(crate) async fn narrow(State(app): State<Arc<App>>, Posted(f): Posted<GrantForm>) -> Response {
    let done = app
        .blocking(move |app| {
            let grants = &app.grants;
            grants.set_access(&f.alias, Access::ReadOnly, &f.reason, &app.actor)
        })
        .await;
    app.report(
        done.map(|g| format!("Narrowed: {}", describe(&g)))
            .map_err(Refusal::from),
    )
}

/// `POST /widen`: make a read-only grant read-write, confirmed on its review with a note.
pub(crate) async fn widen(State(app): State<Arc<App>>, Posted(f): Posted<GrantForm>) -> Response {
    let done = app
        .blocking(move |app| {
            let grants = &app.grants;
            grants.set_access(&f.alias, Access::ReadWrite, &f.reason, &app.actor)
        })
        .await;
    app.report(
        done.map(|g| format!("Widened: {}", describe(&g)))
            .map_err(Refusal::from),
    )
}

/// `POST /revoke`: revoke a grant (the changelog keeps its history).
pub(crate) async fn revoke(State(app): State<Arc<App>>, Posted(f): Posted<GrantForm>) -> Response {
    let done = app
        .blocking(move |app| app.grants.revoke(&f.alias, &f.reason, &app.actor))
        .await;
    app.report(
        done.map(|g| format!("Revoked: {}", describe(&g)))
            .map_err(Refusal::from),
    )
}

#[derive(Deserialize)]
pub(crate) struct AddForm {
    alias: String,
    path: String,
    access: String,
    #[serde(default)]
    reason: String,
}

/// `POST /add`: grant a folder.
pub(crate) async fn add(State(app): State<Arc<App>>, Posted(f): Posted<AddForm>) -> Response {
    let done = app
        .blocking(move |app| -> safe_lanes::Result<Recorded<Grant>> {
            let access = Access::parse(&f.access)?;
            app.grants
                .add(&f.alias, Path::new(&f.path), access, &f.reason, &app.actor)
        })
        .await;
    app.report(
        done.map(|g| format!("Granted: {}", describe(&g)))
            .map_err(Refusal::from),
    )
}

fn describe(g: &Recorded<Grant>) -> String {
    let unrecorded = if g.recorded() {
        ""
    } else {
        " (not in the audit log yet: the record is kept and written with the next change)"
    };
    format!(
        "`{}` {} at {}{unrecorded}",
        g.alias,
        g.access,
        Shown::path(&g.path)
    )
}

/// Why an action did nothing.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The request is no longer pending as the page showed it.
    Stale,
    /// The held change set (named) or its folder changed since the page showed it: its
    /// digest is no longer the one shown.
    SetChanged(String),
    /// "Apply the ticked changes" with no change ticked.
    NothingTicked,
    /// A ticked path the held change set does not hold (as the review listed it).
    NotInSet(String),
    /// The library refused.
    Library(Error),
}

impl From<Error> for Refusal {
    fn from(e: Error) -> Self {
        Refusal::Library(e)
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Stale => f.write_str(
                "Nothing was approved: this request changed since the page was shown (it was \
                 filed again, decided or expired). Review it as it is now.",
            ),
            Refusal::SetChanged(id) => write!(
                f,
                "Nothing was applied or discarded: change set {id} or its folder changed since \
                 it was shown (its digest is no longer the one you reviewed). It is shown again \
                 as it is now: review it, then decide.",
            ),
            Refusal::NothingTicked => f.write_str(
                "Nothing was applied: no change was ticked. Tick the changes to apply, or \
                 choose to apply all of them.",
            ),
            Refusal::NotInSet(path) => write!(
                f,
                "Nothing was applied: the change set holds no change at {}. Review it as it \
                 is now.",
                Shown::text(path)
            ),
            Refusal::Library(e) => write!(f, "Nothing was changed ({}): {}", e.code(), e.message()),
        }
    }
}

/// The forms that change the upload roots.
#[derive(Deserialize)]
pub(crate) struct RootForm {
    path: String,
    #[serde(default)]
    reason: String,
}

/// `POST /uploads/add`: allow a folder as an upload root (a line of `.upload-roots`).
pub(crate) async fn add_root(State(app): State<Arc<App>>, Posted(f): Posted<RootForm>) -> Response {
    let done = app
        .blocking(move |app| {
            app.root
                .add_upload_root(Path::new(&f.path), &f.reason, &app.actor)
        })
        .await;
    app.report_to(
        "/uploads",
        done.map(|c| {
            let mut text = if c.changed {
                format!("Allowed: {}", Shown::path(&c.path))
            } else {
                format!("Allowed already: {}", Shown::path(&c.path))
            };
            for w in &c.warnings {
                text.push_str(&format!(" — warning: {}", w.message));
            }
            text
        })
        .map_err(Refusal::from),
    )
}

/// `POST /uploads/remove`: stop allowing a folder (its lines of `.upload-roots` removed).
pub(crate) async fn remove_root(
    State(app): State<Arc<App>>,
    Posted(f): Posted<RootForm>,
) -> Response {
    let done = app
        .blocking(move |app| {
            app.root
                .remove_upload_root(Path::new(&f.path), &f.reason, &app.actor)
        })
        .await;
    app.report_to(
        "/uploads",
        done.map(|c| format!("No longer allowed: {}", Shown::path(&c.path)))
            .map_err(Refusal::from),
    )
}

impl App {
    /// Say what an action did on the next page, and go back to the overview.
    fn report(&self, done: Result<String, Refusal>) -> Response {
        self.report_to("/", done)
    }

    /// Say what an action did on the next page, and go to `page`.
    pub(crate) fn report_to(&self, page: &str, done: Result<String, Refusal>) -> Response {
        let flash = match done {
            Ok(text) => Flash { done: true, text },
            Err(refusal) => Flash {
                done: false,
                text: refusal.to_string(),
            },
        };
        if let Some(session) = self.sessions().current() {
            session.flash(flash);
        }
        Redirect::to(page).into_response()
    }
}
