//! The human's approval page: the grants, the pending requests, the held changes and the
//! changelog of one state root in a local web page, with approve, deny, narrow, revoke and add,
//! a folder picker, and the review of what the library held of confined commands' writes
//! (apply all, apply some, or discard).
//!
//! It is the trusted side, like the command line, and makes every change through the same
//! library calls ([`safe_lanes::Grants`]); it holds no rule of its own. What it adds is the
//! guard of a local web server:
//!
//! - it listens on `127.0.0.1` only, on a random port by default;
//! - every request must carry the exact `Host` `127.0.0.1:PORT` (a page from another site that
//!   rebinds its DNS name to `127.0.0.1` is refused);
//! - the printed sign-in link holds a one-time token, traded once for an `HttpOnly`,
//!   `SameSite=Strict` session cookie; the link is useless afterwards;
//! - every state change is a `POST` whose `Origin` is exactly `http://127.0.0.1:PORT` and whose
//!   form carries the session's CSRF token; no CORS header is ever sent;
//! - it stops after an idle time;
//! - it cannot be starved: headers must arrive within seconds, a connection that does not show
//!   the human's session is closed soon, and at most a bounded number stay open, the human's
//!   kept first (`connections.rs`);
//! - a request with two `Host` headers is refused.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use safe_lanes::StateRoot;
//! use safe_lanes_ui::{Options, Ui};
//!
//! let root = StateRoot::open_default(None)?;
//! let ui = Ui::bind(root, Options::default())?;
//! println!("open {}", ui.sign_in_url());
//! ui.run()?; // until it has been idle for Options::idle
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
// The page stands on the library's lanes and grants, which exist on Unix only (on Windows the
// library refuses to open a state root, and the CLI never serves the page).
#![cfg(unix)]

mod actions;
mod app;
mod connections;
pub mod desktop;
mod guard;
mod held;
mod live;
mod pages;
mod review;
mod session;
mod view;

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use safe_lanes::{Grants, StateRoot};

use crate::app::App;

/// How long the page waits for a request before the server stops, by default.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(30 * 60);

/// What [`Ui::bind`] needs besides the state root.
#[derive(Clone, Debug)]
pub struct Options {
    /// The manifest, when it is not the state root's default one.
    pub manifest: Option<PathBuf>,
    /// The port on `127.0.0.1`; 0 picks a free one.
    pub port: u16,
    /// The server stops once no request has come for this long.
    pub idle: Duration,
    /// Who acts, as the changelog and the audit log record it (the human: `uid:N`).
    pub actor: String,
    /// The folder the picker starts in (the human's home folder by default).
    pub start: Option<PathBuf>,
    /// Where "Choose folder…" finds the desktop's own folder dialog (the session's bus by
    /// default); without one it opens the page's picker.
    pub desktop: desktop::DesktopBus,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            manifest: None,
            port: 0,
            idle: DEFAULT_IDLE,
            actor: safe_lanes::Actor::human().to_string(),
            start: std::env::var_os("HOME").map(PathBuf::from),
            desktop: desktop::DesktopBus::Session,
        }
    }
}

/// The approval page, bound to its port and not yet serving.
#[derive(Debug)]
pub struct Ui {
    listener: TcpListener,
    app: Arc<App>,
    idle: Duration,
}

impl Ui {
    /// Open the grants of `root` and bind `127.0.0.1:port` (never another interface).
    ///
    /// # Errors
    ///
    /// The errors of [`Grants::open`]; `io` when the port cannot be bound or no random token
    /// can be drawn.
    pub fn bind(root: StateRoot, options: Options) -> safe_lanes::Result<Self> {
        let grants = Grants::open(&root, options.manifest.as_deref())?;
        let wanted = SocketAddr::from((Ipv4Addr::LOCALHOST, options.port));
        let shown = safe_lanes::Shown::text(&wanted.to_string());
        let io = |call, e| safe_lanes::Error::io(call, shown.clone(), e);
        let listener = TcpListener::bind(wanted).map_err(|e| io("bind", e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| io("set_nonblocking", e))?;
        let address = listener.local_addr().map_err(|e| io("getsockname", e))?;
        let app = App::new(root, grants, &options, address)?;
        Ok(Self {
            listener,
            app: Arc::new(app),
            idle: options.idle,
        })
    }

    /// The address it listens on (`127.0.0.1:PORT`).
    pub fn address(&self) -> SocketAddr {
        self.app.origin.address
    }

    /// The link that signs the human in: the page's address with the one-time token. It works
    /// once; print it only to the human.
    pub fn sign_in_url(&self) -> String {
        self.app.sign_in_url()
    }

    /// Serve until no request has come for the idle time, on a runtime of its own.
    ///
    /// # Errors
    ///
    /// When the runtime cannot be built or the listener fails.
    pub fn run(self) -> std::io::Result<()> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(self.serve())
    }

    /// Serve until no request has come for the idle time.
    ///
    /// # Errors
    ///
    /// When the listener fails.
    pub async fn serve(self) -> std::io::Result<()> {
        let listener = tokio::net::TcpListener::from_std(self.listener)?;
        tokio::select! {
            served = connections::serve(listener, Arc::clone(&self.app)) => served,
            () = live::until_idle(&self.app, self.idle) => Ok(()),
        }
    }
}
