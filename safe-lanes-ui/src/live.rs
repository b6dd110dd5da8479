//! Keeping an open page current, and stopping when nobody uses it.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;

use crate::app::App;
use crate::guard::Human;

/// How often the manifest's version is looked at (one `fstatat`).
const POLL: Duration = Duration::from_millis(250);

/// The most update streams the session holds at once (a few tabs): one more ends the oldest
/// (its page, if still open, reconnects by itself), so clients holding the session's cookie
/// cannot pile streams up while the human's own requests wait.
pub(crate) const MAX_STREAMS: usize = 8;

/// The session's open update streams, oldest first: each one's number and the flag that ends
/// it.
#[derive(Debug, Default)]
pub(crate) struct Streams {
    next: u64,
    open: VecDeque<(u64, Arc<AtomicBool>)>,
}

impl Streams {
    /// Take a place for a new stream, ending the oldest at the bound: its number and its flag.
    fn open(&mut self) -> (u64, Arc<AtomicBool>) {
        while self.open.len() >= MAX_STREAMS {
            if let Some((_, ended)) = self.open.pop_front() {
                ended.store(true, Ordering::Relaxed);
            }
        }
        self.next += 1;
        let ended = Arc::new(AtomicBool::new(false));
        self.open.push_back((self.next, Arc::clone(&ended)));
        (self.next, ended)
    }

    fn close(&mut self, number: u64) {
        self.open.retain(|(n, _)| *n != number);
    }
}

/// A stream's place among the session's, given back when the stream is dropped (its client
/// went away) or ended.
struct Place {
    app: Arc<App>,
    number: u64,
    ended: Arc<AtomicBool>,
}

impl Drop for Place {
    fn drop(&mut self) {
        lock(&self.app.streams).close(self.number);
    }
}

/// `GET /events`: a `changed` event whenever the manifest changes — by this page, another tab,
/// the command line or an agent's request — so the page can show the new state without a
/// reload. At most [`MAX_STREAMS`] are open at once.
pub(crate) async fn events(
    State(app): State<Arc<App>>,
    _human: Human,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let first = app.grants.version().ok();
    let (number, ended) = lock(&app.streams).open();
    let place = Place { app, number, ended };
    let changes = futures::stream::unfold((place, first), |(place, mut seen)| async move {
        loop {
            tokio::time::sleep(POLL).await;
            if place.ended.load(Ordering::Relaxed) {
                return None;
            }
            let now = place.app.grants.version().ok();
            if now != seen {
                seen = now;
                let event = Event::default().event("changed").data("manifest");
                return Some((Ok(event), (place, seen)));
            }
        }
    });
    Sse::new(changes).keep_alive(KeepAlive::default())
}

fn lock(streams: &Mutex<Streams>) -> std::sync::MutexGuard<'_, Streams> {
    streams.lock().unwrap_or_else(PoisonError::into_inner)
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
