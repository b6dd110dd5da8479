//! The agent's side of the grants.

use std::path::Path;
use std::sync::Arc;

use super::model::{Access, Request};
use super::{Asked, Grants, Listing, Proposal, Session};
use crate::actor::Actor;
use crate::error::Result;
use crate::root::StateRoot;

/// What an agent-facing adapter may do with the grants: look at them, file a request, and
/// work in a session. Nothing else — no add, adopt, approve, deny, narrow or revoke, and no
/// access to the manifest — so an adapter that holds only this type cannot widen anyone's
/// authority, even by mistake. Everything it does is recorded as [`Actor::Agent`].
///
/// The human's side is [`Grants`]; [`Grants::agent`] hands this out.
///
/// ```no_run
/// # fn main() -> safe_lanes::Result<()> {
/// use safe_lanes::grants::AgentGrants;
/// use safe_lanes::{Access, StateRoot};
///
/// let root = StateRoot::open_default(None)?;
/// let agent = AgentGrants::open(&root, None)?;
/// let request = agent.request("docs", Access::ReadOnly, "to read the manual", None)?;
/// # let _ = request;
/// # Ok(())
/// # }
/// ```
///
/// The agent side cannot approve that request; this does not compile:
///
/// ```compile_fail
/// # fn main() -> safe_lanes::Result<()> {
/// use safe_lanes::grants::AgentGrants;
/// use safe_lanes::{Access, StateRoot};
///
/// let root = StateRoot::open_default(None)?;
/// let agent = AgentGrants::open(&root, None)?;
/// let request = agent.request("docs", Access::ReadOnly, "to read the manual", None)?;
/// agent.approve(&request.id, None, "approved by myself", "agent")?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct AgentGrants {
    grants: Arc<Grants>,
}

impl AgentGrants {
    pub(super) fn new(grants: Arc<Grants>) -> Self {
        Self { grants }
    }

    /// The agent's side of the grants of `manifest` (default `<root>/workflow.json`).
    ///
    /// # Errors
    ///
    /// As [`Grants::open`].
    pub fn open(root: &StateRoot, manifest: Option<&Path>) -> Result<Self> {
        Ok(Self::new(Arc::new(Grants::open(root, manifest)?)))
    }

    /// The grants with their availability here, and the pending requests.
    ///
    /// # Errors
    ///
    /// `invalid_manifest`, `io`.
    pub fn list(&self) -> Result<Listing> {
        self.grants.list()
    }

    /// File a request for a new or wider grant, as the agent. It grants nothing until the
    /// human approves it.
    ///
    /// # Errors
    ///
    /// As [`Grants::request`].
    ///
    /// # Security
    ///
    /// Every argument is untrusted; see [`Grants::request`].
    pub fn request(
        &self,
        alias: &str,
        access: Access,
        reason: &str,
        path: Option<&Path>,
    ) -> Result<Request> {
        self.grants
            .request(alias, access, reason, path, &Actor::Agent.to_string())
            .map(super::Recorded::into_inner)
    }

    /// [`AgentGrants::request`], saying which client asked (its name and version as it gave
    /// them, escaped): the human sees `agent (name version)` beside the request.
    ///
    /// # Errors
    ///
    /// As [`AgentGrants::request`].
    pub fn request_from(
        &self,
        client: &str,
        alias: &str,
        access: Access,
        reason: &str,
        path: Option<&Path>,
    ) -> Result<Request> {
        self.request_asked_from(client, alias, Asked::folder(access, path), reason)
    }

    /// [`AgentGrants::request_from`] for a grant of any kind: a folder, or a tool or a cache
    /// ([`Grants::request_toolchain`]).
    ///
    /// # Errors
    ///
    /// As [`Grants::request_toolchain`].
    pub fn request_asked_from(
        &self,
        client: &str,
        alias: &str,
        asked: Asked<'_>,
        reason: &str,
    ) -> Result<Request> {
        let who = format!("{} ({})", Actor::Agent, crate::error::Shown::text(client));
        self.grants
            .request_toolchain(alias, asked, reason, &who)
            .map(super::Recorded::into_inner)
    }

    /// The pending request `request_id` with the change approving it would make, and so the
    /// exact line the human runs to approve it ([`Proposal::approve_command`]).
    ///
    /// # Errors
    ///
    /// `not_found`, `invalid_manifest`, `io`.
    pub fn proposal(&self, request_id: &str) -> Result<Proposal> {
        self.grants.proposal(request_id)
    }

    /// A live session whose operations are recorded as the agent's.
    pub fn session(&self) -> Session {
        Session::new(Arc::clone(&self.grants), Actor::Agent)
    }
}
