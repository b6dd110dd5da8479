//! The one-time sign-in token and the session it is traded for.
//!
//! The sign-in link printed on the human's terminal carries a random token. The first request
//! that presents it gets the one session there will ever be (an `HttpOnly`, `SameSite=Strict`
//! cookie) and the token is spent: a link copied from the terminal's scrollback, a shell
//! history or a screen share later opens nothing. Secrets are compared as SHA-256 digests, so
//! the time a comparison takes says nothing about the secret.

use axum::http::HeaderMap;
use axum::http::header::COOKIE;
use base64::Engine as _;
use sha2::{Digest, Sha256};

/// Why a sign-in was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SignIn {
    /// No token, or not the one printed.
    Wrong,
    /// The token was already traded for a session.
    Spent,
}

/// What the page shows once after an action: what happened, or why nothing did.
#[derive(Clone, Debug)]
pub(crate) struct Flash {
    /// Whether the action was done.
    pub(crate) done: bool,
    /// What to say.
    pub(crate) text: String,
}

/// The human's session.
#[derive(Debug)]
pub(crate) struct Session {
    id: [u8; 32],
    /// The token every form carries.
    pub(crate) csrf: String,
    flash: Option<Flash>,
}

impl Session {
    /// Say `flash` on the next page shown.
    pub(crate) fn flash(&mut self, flash: Flash) {
        self.flash = Some(flash);
    }

    /// What to say on this page, once.
    pub(crate) fn take_flash(&mut self) -> Option<Flash> {
        self.flash.take()
    }
}

/// The sign-in token and the session it was traded for.
#[derive(Debug)]
pub(crate) struct Sessions {
    token: String,
    spent: bool,
    session: Option<Session>,
}

impl Sessions {
    pub(crate) fn new() -> safe_lanes::Result<Self> {
        Ok(Self {
            token: random_token()?,
            spent: false,
            session: None,
        })
    }

    /// The token of the sign-in link.
    pub(crate) fn sign_in_token(&self) -> &str {
        &self.token
    }

    /// Trade the sign-in token for the session: its cookie value.
    pub(crate) fn redeem(&mut self, token: &str) -> Result<String, SignIn> {
        if digest(token) != digest(&self.token) {
            return Err(SignIn::Wrong);
        }
        if self.spent {
            return Err(SignIn::Spent);
        }
        let id = random_token().map_err(|_| SignIn::Wrong)?;
        let csrf = random_token().map_err(|_| SignIn::Wrong)?;
        self.spent = true;
        self.session = Some(Session {
            id: digest(&id),
            csrf,
            flash: None,
        });
        Ok(id)
    }

    /// The session, once the sign-in token was traded for it.
    pub(crate) fn current(&mut self) -> Option<&mut Session> {
        self.session.as_mut()
    }

    /// The session whose cookie (named `cookie`) `headers` carry.
    pub(crate) fn find(&mut self, headers: &HeaderMap, cookie: &str) -> Option<&mut Session> {
        let presented = cookie_value(headers, cookie)?;
        self.session
            .as_mut()
            .filter(|session| session.id == digest(presented))
    }
}

/// The value of the cookie `name` in `headers`, if it is there once.
fn cookie_value<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    let mut values = headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|header| header.to_str().ok())
        .flat_map(|header| header.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(key, _)| *key == name)
        .map(|(_, value)| value);
    let value = values.next()?;
    // Two cookies of one name (one set by another page on this host): trust neither.
    values.next().is_none().then_some(value)
}

/// Whether two secrets are the same, compared as digests.
pub(crate) fn same_secret(a: &str, b: &str) -> bool {
    digest(a) == digest(b)
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// 32 bytes from the system's random source, URL-safe base64. There is no fallback: a token
/// that could be guessed would be no token.
fn random_token() -> safe_lanes::Result<String> {
    let mut bytes = [0u8; 32];
    fill_random(&mut bytes)
        .map_err(|e| safe_lanes::Error::io(RANDOM_SOURCE, safe_lanes::Shown::text("token"), e))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// Where [`fill_random`] takes its bytes (for an error message).
#[cfg(target_os = "linux")]
const RANDOM_SOURCE: &str = "getrandom";
/// Where [`fill_random`] takes its bytes (for an error message).
#[cfg(not(target_os = "linux"))]
const RANDOM_SOURCE: &str = "/dev/urandom";

/// Fill `bytes` from `getrandom(2)`.
#[cfg(target_os = "linux")]
fn fill_random(bytes: &mut [u8]) -> std::io::Result<()> {
    let mut filled = 0;
    while filled < bytes.len() {
        filled +=
            rustix::rand::getrandom(&mut bytes[filled..], rustix::rand::GetRandomFlags::empty())?;
    }
    Ok(())
}

/// Fill `bytes` from the system's random device (this system has no `getrandom` call).
#[cfg(not(target_os = "linux"))]
fn fill_random(bytes: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(bytes)
}
