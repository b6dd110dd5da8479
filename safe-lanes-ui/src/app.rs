//! The server's state and its routes.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use axum::Router;
use axum::http::StatusCode;
use axum::middleware;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use safe_lanes::{Grants, StateRoot};

use crate::session::Sessions;
use crate::{Options, actions, guard, held, live, pages};

/// Where the page is, as a browser names it.
#[derive(Debug)]
pub(crate) struct Origin {
    /// `127.0.0.1:PORT`.
    pub(crate) address: SocketAddr,
    /// The one `Host` header accepted: `127.0.0.1:PORT`.
    pub(crate) host: String,
    /// The one `Origin` header accepted on a state change: `http://127.0.0.1:PORT`.
    pub(crate) origin: String,
}

/// Everything the handlers share.
#[derive(Debug)]
pub(crate) struct App {
    pub(crate) root: StateRoot,
    pub(crate) grants: Arc<Grants>,
    pub(crate) actor: String,
    pub(crate) start: Option<PathBuf>,
    /// Where the desktop's folder dialog is looked for.
    pub(crate) desktop: crate::desktop::DesktopBus,
    pub(crate) origin: Origin,
    pub(crate) sessions: Mutex<Sessions>,
    /// When the last request came (the live-update stream does not count).
    last_request: Mutex<Instant>,
    /// The session's open update streams, at most [`live::MAX_STREAMS`].
    pub(crate) streams: Mutex<live::Streams>,
}

impl App {
    pub(crate) fn new(
        root: StateRoot,
        grants: Grants,
        options: &Options,
        address: SocketAddr,
    ) -> safe_lanes::Result<Self> {
        Ok(Self {
            root,
            grants: Arc::new(grants),
            actor: options.actor.clone(),
            start: options.start.clone(),
            desktop: options.desktop.clone(),
            origin: Origin {
                address,
                host: address.to_string(),
                origin: format!("http://{address}"),
            },
            sessions: Mutex::new(Sessions::new()?),
            last_request: Mutex::new(Instant::now()),
            streams: Mutex::new(live::Streams::default()),
        })
    }

    pub(crate) fn sign_in_url(&self) -> String {
        let token = self.sessions().sign_in_token().to_owned();
        format!("{}/session?token={token}", self.origin.origin)
    }

    pub(crate) fn sessions(&self) -> std::sync::MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `headers` carry the signed-in human's session cookie.
    pub(crate) fn signed_in(&self, headers: &axum::http::HeaderMap) -> bool {
        let cookie = crate::guard::cookie_name(self);
        self.sessions().find(headers, &cookie).is_some()
    }

    /// Note a request now.
    pub(crate) fn touch(&self) {
        *self
            .last_request
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    /// When the last request came.
    pub(crate) fn last_request(&self) -> Instant {
        *self
            .last_request
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Run a library call off the runtime's thread (it reads files and takes the manifest's
    /// lock, which another process may hold).
    pub(crate) async fn blocking<T: Send + 'static>(
        self: &Arc<Self>,
        call: impl FnOnce(&App) -> T + Send + 'static,
    ) -> T {
        let app = Arc::clone(self);
        match tokio::task::spawn_blocking(move || call(&app)).await {
            Ok(value) => value,
            Err(join) => std::panic::resume_unwind(join.into_panic()),
        }
    }
}

/// Every route, behind the guard.
pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(pages::overview))
        .route("/changelog", get(pages::changelog))
        .route("/audit", get(pages::audit))
        .route("/uploads", get(pages::uploads))
        .route("/pick", get(pages::pick))
        .route("/review", get(crate::review::review))
        .route("/downloads", get(pages::downloads))
        .route("/downloads/view", get(pages::view_download))
        .route("/downloads/remove", post(actions::remove_download))
        .route("/running", get(pages::running))
        .route("/running/stop", post(actions::stop))
        .route("/changes", get(held::list))
        .route("/changes/review", get(held::review))
        .route("/changes/confirm", get(held::confirm))
        .route("/changes/apply", post(held::apply))
        .route("/changes/discard", post(held::discard))
        .route("/session", get(pages::sign_in))
        .route("/events", get(live::events))
        .route("/assets/style.css", get(pages::style))
        .route("/assets/live.js", get(pages::script))
        .route("/approve", post(actions::approve))
        .route("/deny", post(actions::deny))
        .route("/narrow", post(actions::narrow))
        .route("/widen", post(actions::widen))
        .route("/uploads/add", post(actions::add_root))
        .route("/uploads/remove", post(actions::remove_root))
        .route("/revoke", post(actions::revoke))
        .route("/add", post(actions::add))
        .fallback(|| async { refused(StatusCode::NOT_FOUND, "There is no such page.") })
        .layer(middleware::from_fn_with_state(
            Arc::clone(&app),
            guard::guard,
        ))
        .with_state(app)
}

/// A refusal as a small page of its own (no session needed to read it).
pub(crate) fn refused(status: StatusCode, why: &str) -> Response {
    let page = crate::view::Refused { why };
    (status, Html(crate::view::render(&page))).into_response()
}
