//! Keeping an open page current, and stopping when nobody uses it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;

use crate::app::App;
use crate::guard::Human;

/// How often the manifest's version is looked at (one `fstatat`).
const POLL: Duration = Duration::from_millis(250);

/// `GET /events`: a `changed` event whenever the manifest changes — by this page, another tab,
/// the command line or an agent's request — so the page can show the new state without a
/// reload.
pub(crate) async fn events(
    State(app): State<Arc<App>>,
    _human: Human,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let first = app.grants.version().ok();
    let changes = futures::stream::unfold((app, first), |(app, mut seen)| async move {
        loop {
            tokio::time::sleep(POLL).await;
            let now = app.grants.version().ok();
            if now != seen {
                seen = now;
                let event = Event::default().event("changed").data("manifest");
                return Some((Ok(event), (app, seen)));
            }
        }
    });
    Sse::new(changes).keep_alive(KeepAlive::default())
}

/// Return once no request has come for `idle`.
pub(crate) async fn until_idle(app: &App, idle: Duration) {
    let tick = (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
    loop {
        tokio::time::sleep(tick).await;
        if app.last_request().elapsed() >= idle {
            return;
        }
    }
}
