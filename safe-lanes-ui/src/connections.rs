//! Serving connections so that the human's page is always answered.
//!
//! Any local process can connect to the page's port. One that opens connections and sends
//! nothing, or a byte a second, must not use up the server's descriptors or its attention
//! while the human waits. So:
//!
//! - a request's headers must arrive within [`HEADER_READ`] (a slow client is dropped);
//! - a connection that has not shown the signed-in human's session within [`UNSIGNED`] of
//!   opening is closed, whether or not it sent anything;
//! - at most [`MAX_CONNECTIONS`] are open at once: one more closes the oldest connection that
//!   has not shown the session, else the oldest of all (a flood of update streams, or of
//!   clients holding the session's cookie, cannot keep the human's next page out; a browser's
//!   own update stream reconnects by itself); a new connection is read at once, so the
//!   human's browser, which sends its request as it connects, gets in;
//! - the session holds at most [`crate::live::MAX_STREAMS`] update streams: one more ends the
//!   oldest, so clients holding its cookie cannot pile them up.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response, header};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::task::AbortHandle;

use crate::app::App;

/// The most connections open at once.
pub(crate) const MAX_CONNECTIONS: usize = 128;
/// How long a request's headers may take to arrive.
pub(crate) const HEADER_READ: Duration = Duration::from_secs(10);
/// How long a connection may stay open without showing the signed-in human's session.
pub(crate) const UNSIGNED: Duration = Duration::from_secs(15);

/// One open connection.
#[derive(Debug)]
struct Open {
    opened: Instant,
    /// Whether it has shown the signed-in human's session (or signed in).
    signed: Arc<AtomicBool>,
    task: AbortHandle,
}

/// The open connections.
#[derive(Debug, Default)]
struct Table {
    open: Vec<Open>,
}

impl Table {
    /// Make room for one more: forget the ended, then, at the bound, close the oldest
    /// unsigned one, else the oldest of all (many update streams of the session, or clients
    /// holding its cookie: the newest connection, the human's page, always gets in).
    fn make_room(&mut self) -> bool {
        self.open.retain(|c| !c.task.is_finished());
        if self.open.len() < MAX_CONNECTIONS {
            return true;
        }
        let oldest = |signed: bool| {
            self.open
                .iter()
                .enumerate()
                .filter(|(_, c)| signed || !c.signed.load(Ordering::Relaxed))
                .min_by_key(|(_, c)| c.opened)
                .map(|(at, _)| at)
        };
        match oldest(false).or_else(|| oldest(true)) {
            Some(at) => {
                self.open.swap_remove(at).task.abort();
                true
            }
            None => false,
        }
    }
}

/// Serve `app` on `listener` until the listener fails.
pub(crate) async fn serve(listener: TcpListener, app: Arc<App>) -> std::io::Result<()> {
    let router = crate::app::router(Arc::clone(&app));
    let table = Arc::new(Mutex::new(Table::default()));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // Out of descriptors, or a connection reset before it was taken: make room, go on.
            Err(e) if is_transient(&e) => {
                lock(&table).make_room();
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
            Err(e) => return Err(e),
        };
        let mut open = lock(&table);
        if !open.make_room() {
            continue;
        }
        let signed = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(connection(
            stream,
            router.clone(),
            Arc::clone(&app),
            Arc::clone(&signed),
        ));
        open.open.push(Open {
            opened: Instant::now(),
            signed,
            task: task.abort_handle(),
        });
    }
}

/// Serve one connection: its requests, each through `router`, until it closes, its headers
/// are too slow, or it stays unsigned too long.
async fn connection(
    stream: tokio::net::TcpStream,
    router: Router,
    app: Arc<App>,
    signed: Arc<AtomicBool>,
) {
    let seen = Arc::clone(&signed);
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        if app.signed_in(request.headers()) {
            seen.store(true, Ordering::Relaxed);
        }
        let seen = Arc::clone(&seen);
        let answer = tower_oneshot(router.clone(), request);
        async move {
            let response: Response<Body> = answer.await;
            // The sign-in itself: its answer sets the session cookie.
            if response.headers().contains_key(header::SET_COOKIE) {
                seen.store(true, Ordering::Relaxed);
            }
            Ok::<_, Infallible>(response)
        }
    });
    let served = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ)
        .serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = served => {}
        () = unsigned_for_too_long(&signed) => {}
    }
}

/// Ends once a connection has gone [`UNSIGNED`] without showing the session.
async fn unsigned_for_too_long(signed: &AtomicBool) {
    tokio::time::sleep(UNSIGNED).await;
    if signed.load(Ordering::Relaxed) {
        std::future::pending::<()>().await;
    }
}

/// The router's answer to `request`.
async fn tower_oneshot(router: Router, request: Request<Incoming>) -> Response<Body> {
    use tower_service::Service;
    let mut router = router;
    match router.call(request.map(Body::new)).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

fn is_transient(e: &std::io::Error) -> bool {
    use rustix::io::Errno;
    let transient = [
        Errno::MFILE,
        Errno::NFILE,
        Errno::CONNABORTED,
        Errno::NOBUFS,
        Errno::NOMEM,
    ];
    e.raw_os_error()
        .is_some_and(|n| transient.iter().any(|t| t.raw_os_error() == n))
}

fn lock(table: &Mutex<Table>) -> std::sync::MutexGuard<'_, Table> {
    table.lock().unwrap_or_else(PoisonError::into_inner)
}
