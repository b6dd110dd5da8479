//! The HTTP client's name resolver: the guard, and nothing else.
//!
//! ureq asks its resolver for the addresses of every connection it opens — the URL asked for
//! and each redirect's target, before it looks for a pooled connection — and connects only to
//! the addresses it gets back. [`Pinned`] answers with [`Guard::admit_uri`]: the addresses it
//! checked, from one lookup. So the connection goes to the checked address, a redirect is
//! checked like the first URL, and the client has no other way to turn a name into an
//! address. (No proxy is configured, so no proxy resolves names on the client's behalf.)

use std::sync::{Arc, Mutex};

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

use super::guard::Guard;
use crate::error::{Error, Shown};

/// A fetch's resolver: each connection's target admitted by the guard.
#[derive(Clone, Debug)]
pub(crate) struct Pinned {
    guard: Arc<Guard>,
    hops: Arc<Mutex<Hops>>,
}

/// What the resolver saw of one fetch.
#[derive(Debug, Default)]
struct Hops {
    /// Connections asked for (the first URL, then one per redirect followed).
    count: usize,
    /// The target of the last one.
    last: Option<String>,
    /// Why the guard refused one, or why its name did not resolve: the fetch's error.
    refusal: Option<Error>,
}

impl Pinned {
    pub(crate) fn new(guard: Arc<Guard>) -> Self {
        Self {
            guard,
            hops: Arc::new(Mutex::new(Hops::default())),
        }
    }

    /// The error the guard gave for a connection, if it gave one.
    pub(crate) fn take_refusal(&self) -> Option<Error> {
        crate::sync::lock(&self.hops).refusal.take()
    }

    /// The target of the last connection asked for, if any.
    pub(crate) fn last_target(&self) -> Option<String> {
        crate::sync::lock(&self.hops).last.clone()
    }
}

impl Resolver for Pinned {
    fn resolve(
        &self,
        uri: &Uri,
        _config: &Config,
        _timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let hop = {
            let mut hops = crate::sync::lock(&self.hops);
            hops.count += 1;
            hops.last = Some(uri.to_string());
            hops.count - 1
        };
        match self.guard.admit_uri(uri) {
            Ok(addrs) => {
                let mut pinned = self.empty();
                // Every address was checked; the client gets as many as it holds.
                for addr in addrs {
                    if pinned.try_push(addr).is_err() {
                        break;
                    }
                }
                Ok(pinned)
            }
            Err(e) => {
                crate::sync::lock(&self.hops).refusal = Some(after_redirect(e, hop));
                Err(ureq::Error::HostNotFound)
            }
        }
    }
}

/// An error of the guard's for connection `hop` (0: the URL asked for), saying so when a
/// redirect led there.
fn after_redirect(error: Error, hop: usize) -> Error {
    if hop == 0 {
        return error;
    }
    let led = |why: Shown| Shown::message(&format!("a redirect led here: {why}"));
    match error {
        Error::AddressRefused { url, why } => Error::AddressRefused { url, why: led(why) },
        Error::FetchFailed { url, why } => Error::FetchFailed { url, why: led(why) },
        other => other,
    }
}
