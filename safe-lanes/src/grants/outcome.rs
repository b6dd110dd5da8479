//! What became of the agent's requests, told back to it; and when a pending request expires.
//!
//! A pending request expires after [`DEFAULT_REQUEST_TTL`] (seven days), or the time the
//! manifest's top-level `folder_access_request_ttl` key gives (`"36h"`, `"14d"`): an expired
//! request can no longer be approved, no longer counts against the bound on pending requests,
//! and is told to the agent as expired, so it can ask again. Approved and denied requests are
//! told with the human's reason, from the changelog.

use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::manifest::Document;
use super::model::{Access, Action, Alias, Request};

/// How long a request stays pending when the manifest says nothing.
pub(crate) const DEFAULT_REQUEST_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// The manifest's top-level key for how long a request stays pending (a `humantime` duration).
pub(crate) const REQUEST_TTL_KEY: &str = "folder_access_request_ttl";
/// How many decided requests are told back (the most recent).
const DECIDED_TOLD: usize = 20;

/// Where a request stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Waiting for the human.
    Pending,
    /// Approved: the grant exists (or was widened).
    Approved,
    /// Denied, with the human's reason.
    Denied,
    /// Not decided in time: it can be asked again.
    Expired,
}

impl Status {
    /// The word for it, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Approved => "approved",
            Status::Denied => "denied",
            Status::Expired => "expired",
        }
    }
}

/// A request as its requester may know it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// The request's id.
    pub id: String,
    /// The alias asked for.
    pub alias: Alias,
    /// The access asked for.
    pub access: Option<Access>,
    /// Where it stands.
    pub status: Status,
    /// The human's reason, for a decided request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// When it was asked for (pending, expired) or decided (RFC 3339).
    pub at: String,
}

impl Document {
    /// How long a request stays pending (the manifest's `folder_access_request_ttl`, else the default).
    pub fn request_ttl(&self) -> Duration {
        self.top_level(REQUEST_TTL_KEY)
            .and_then(|v| v.as_str())
            .and_then(|text| humantime::parse_duration(text).ok())
            .unwrap_or(DEFAULT_REQUEST_TTL)
    }

    /// Whether `request` has been pending longer than [`Document::request_ttl`] at `now`.
    pub fn expired(&self, request: &Request, now: SystemTime) -> bool {
        expired_by(request, self.request_ttl(), now)
    }

    /// Forget the requests that expired by `now` (they no longer count against the bound on
    /// pending requests; the agent is asking again), and say which: the change that drops them
    /// records them.
    pub(crate) fn drop_expired(&mut self, now: SystemTime) -> Vec<Request> {
        let ttl = self.request_ttl();
        let (expired, live) = std::mem::take(&mut self.requests)
            .into_iter()
            .partition(|r| expired_by(r, ttl, now));
        self.requests = live;
        expired
    }

    /// The time a change to this document is made at: the clock's `now`, but never before a
    /// time the document already records (a clock set back would otherwise file a request
    /// that has already expired, and make expired ones pending again).
    pub fn clock(&self, now: SystemTime) -> SystemTime {
        let recorded = self
            .requests
            .iter()
            .map(|r| r.requested_at.as_str())
            .chain(self.changelog.iter().map(|c| c.at.as_str()))
            .filter_map(|at| humantime::parse_rfc3339_weak(at).ok())
            .max();
        recorded.map_or(now, |latest| now.max(latest))
    }

    /// The pending requests a reader is shown: those not expired at `now`, at most
    /// [`MAX_PENDING_REQUESTS`](super::MAX_PENDING_REQUESTS) — the last filed — whatever the
    /// manifest holds (filing never makes more; a hand-edited manifest may hold any number).
    pub fn pending(&self, now: SystemTime) -> Vec<&Request> {
        let ttl = self.request_ttl();
        let mut live: Vec<&Request> = self
            .requests
            .iter()
            .filter(|r| !expired_by(r, ttl, now))
            .collect();
        let over = live.len().saturating_sub(super::MAX_PENDING_REQUESTS);
        live.drain(..over);
        live
    }

    /// The pending requests (at most [`MAX_PENDING_REQUESTS`](super::MAX_PENDING_REQUESTS),
    /// the last filed) and the most recent decided ones, as their requester may know them.
    pub fn outcomes(&self, now: SystemTime) -> Vec<Outcome> {
        let over = self
            .requests
            .len()
            .saturating_sub(super::MAX_PENDING_REQUESTS);
        let pending = self.requests[over..].iter().map(|r| Outcome {
            id: r.id.clone(),
            alias: r.alias.clone(),
            access: Some(r.access),
            status: if self.expired(r, now) {
                Status::Expired
            } else {
                Status::Pending
            },
            decision: None,
            at: r.requested_at.clone(),
        });
        let decided = self
            .changelog
            .iter()
            .rev()
            .filter_map(|c| {
                let status = match c.action {
                    Action::Approve => Status::Approved,
                    Action::Deny => Status::Denied,
                    _ => return None,
                };
                Some(Outcome {
                    id: c.request_id.clone()?,
                    alias: c.alias.clone(),
                    access: c.access,
                    status,
                    decision: Some(c.reason.clone()).filter(|r| !r.is_empty()),
                    at: c.at.clone(),
                })
            })
            .take(DECIDED_TOLD);
        pending.chain(decided).collect()
    }
}

/// Whether `request` was filed more than `ttl` before `now`.
fn expired_by(request: &Request, ttl: Duration, now: SystemTime) -> bool {
    humantime::parse_rfc3339_weak(&request.requested_at)
        .ok()
        .and_then(|at| at.checked_add(ttl))
        .is_some_and(|end| end < now)
}
