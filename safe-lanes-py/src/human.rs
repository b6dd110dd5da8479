//! `safe_lanes.human`: the human's side of the folder grants. Adding, approving, denying,
//! changing and revoking are here and nowhere in `safe_lanes`, so a gateway imports only what
//! it should hold; each change is recorded in the changelog and the audit log as the OS user
//! running the process (`uid:N`, with the name given as `actor`).

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use safe_lanes::grants::Seen;

use crate::desk::{GrantsList, RequestInfo};
use crate::error::Result;
use crate::report::report;
use crate::root::StateRoot;

/// The grants of one manifest, managed by the human.
#[pyclass(frozen, module = "safe_lanes.human")]
#[derive(Debug)]
pub(crate) struct Grants(Arc<safe_lanes::Grants>);

/// Who a change is recorded as: `uid:N`, and `actor`'s name after it when given.
fn who(actor: Option<&str>) -> String {
    safe_lanes::Actor::human_named(actor)
}

#[pymethods]
impl Grants {
    /// The grants of `manifest` (default `<root>/workflow.json`) of `root`.
    ///
    /// Raises `Refused` (`invalid_manifest`, `not_found` for a missing directory).
    #[new]
    #[pyo3(signature = (root, manifest=None))]
    fn new(py: Python<'_>, root: &StateRoot, manifest: Option<PathBuf>) -> Result<Self> {
        let grants = py.detach(|| safe_lanes::Grants::open(&root.0, manifest.as_deref()))?;
        Ok(Self(Arc::new(grants)))
    }

    /// Every grant with its availability here, the pending requests, and what became of
    /// requests.
    fn list(&self, py: Python<'_>) -> Result<GrantsList> {
        let listing = py.detach(|| self.0.list())?;
        Ok(GrantsList(safe_lanes::desk::GrantsList {
            grants: listing.grants.into_iter().map(Into::into).collect(),
            requests: listing.requests.into_iter().map(Into::into).collect(),
            outcomes: listing.outcomes.into_iter().map(Into::into).collect(),
        }))
    }

    /// Every pending request with the change approving it would make now, and its digest.
    fn proposals(&self, py: Python<'_>) -> Result<Vec<Proposal>> {
        Ok(py
            .detach(|| self.0.proposals())?
            .into_iter()
            .map(Proposal)
            .collect())
    }

    /// The pending request `request_id` with the change approving it would make now.
    ///
    /// Raises `Refused` (`not_found`).
    fn proposal(&self, py: Python<'_>, request_id: &str) -> Result<Proposal> {
        Ok(Proposal(py.detach(|| self.0.proposal(request_id))?))
    }

    /// Add a folder grant: `alias` for the folder `path` with `access` (`"read_only"` or
    /// `"read_write"`).
    ///
    /// Raises `Refused` (`invalid_alias`, `alias_taken`, `relative_path`, `not_found`,
    /// `state_root`, `overlapping_grant`, `invalid_manifest`).
    #[pyo3(signature = (alias, path, access, *, reason, actor=None))]
    fn add(
        &self,
        py: Python<'_>,
        alias: &str,
        path: PathBuf,
        access: &str,
        reason: &str,
        actor: Option<&str>,
    ) -> Result<Grant> {
        let access = safe_lanes::Access::from_argument(access)?;
        let actor = who(actor);
        Ok(Grant(py.detach(|| {
            self.0.add(alias, &path, access, reason, &actor)
        })?))
    }

    /// Approve the pending request `request_id`, bound to the change the human was shown:
    /// `alias`, `access` and (when it names one) `path`, as `proposal()` gives them, and its
    /// `digest` when given. Refused if the request, or the grant it changes, is no longer
    /// that change. `path` is also the folder chosen when the request proposes none.
    ///
    /// Raises `Refused` (`invalid_argument` when the change differs, `not_found`, and every
    /// refusal of `add`).
    #[pyo3(signature = (request_id, *, alias, access, reason, path=None, digest=None, actor=None))]
    #[allow(clippy::too_many_arguments)]
    fn approve(
        &self,
        py: Python<'_>,
        request_id: &str,
        alias: &str,
        access: &str,
        reason: &str,
        path: Option<PathBuf>,
        digest: Option<String>,
        actor: Option<&str>,
    ) -> Result<Grant> {
        let seen = Seen {
            alias: safe_lanes::Alias::new(alias)?,
            access: safe_lanes::Access::from_argument(access)?,
            path: path.clone(),
            digest,
        };
        let actor = who(actor);
        let grant = py.detach(|| {
            self.0
                .approve_seen(request_id, &seen, path.as_deref(), reason, &actor)
        })?;
        Ok(Grant(grant))
    }

    /// Deny the pending request `request_id`; the changelog records why.
    ///
    /// Raises `Refused` (`not_found`).
    #[pyo3(signature = (request_id, *, reason, actor=None))]
    fn deny(
        &self,
        py: Python<'_>,
        request_id: &str,
        reason: &str,
        actor: Option<&str>,
    ) -> Result<Request> {
        let actor = who(actor);
        Ok(Request(
            py.detach(|| self.0.deny(request_id, reason, &actor))?,
        ))
    }

    /// Change the access of the grant `alias`; a running command of a narrowed grant is
    /// stopped. Raising access needs a reason.
    ///
    /// Raises `Refused` (`unknown_alias`, `overlapping_grant`, `invalid_argument`).
    #[pyo3(signature = (alias, access, *, reason, actor=None))]
    fn set_access(
        &self,
        py: Python<'_>,
        alias: &str,
        access: &str,
        reason: &str,
        actor: Option<&str>,
    ) -> Result<Grant> {
        let access = safe_lanes::Access::from_argument(access)?;
        let actor = who(actor);
        Ok(Grant(py.detach(|| {
            self.0.set_access(alias, access, reason, &actor)
        })?))
    }

    /// Revoke the grant `alias`: it leaves the manifest (the changelog keeps its history);
    /// every live session loses it at its next operation and its running commands stop.
    ///
    /// Raises `Refused` (`unknown_alias`).
    #[pyo3(signature = (alias, *, reason, actor=None))]
    fn revoke(
        &self,
        py: Python<'_>,
        alias: &str,
        reason: &str,
        actor: Option<&str>,
    ) -> Result<Grant> {
        let actor = who(actor);
        Ok(Grant(py.detach(|| self.0.revoke(alias, reason, &actor))?))
    }

    fn __repr__(&self) -> String {
        "Grants(…)".to_owned()
    }
}

report! {
    /// A grant as a change left it.
    Grant(safe_lanes::grants::Recorded<safe_lanes::grants::Grant>) in "safe_lanes.human" {
        /// Its stable id (`folder_…`).
        id: String,
        /// Its alias.
        alias: String = |g| g.alias.to_string(),
        /// Its canonical folder (`pathlib.Path`).
        path: PathBuf,
        /// `read_only` or `read_write`.
        access: &'static str = |g| g.access.as_str(),
        /// When it was approved (RFC 3339).
        created_at: Option<String>,
        /// The host it was approved on.
        host: Option<String>,
        /// `folder`, `tool` or `cache`.
        kind: &'static str = |g| g.toolchain.kind.as_str(),
        /// Whether the change's record is in the audit log (when not, the next change writes
        /// it).
        recorded: bool = |g| g.recorded(),
    }
}

report! {
    /// A request as a decision left it.
    Request(safe_lanes::grants::Recorded<safe_lanes::grants::Request>) in "safe_lanes.human" {
        /// Its id (`req_…`).
        id: String,
        /// The alias asked for.
        alias: String = |r| r.alias.to_string(),
        /// The access asked for.
        access: &'static str = |r| r.access.as_str(),
        /// Why, in the requester's words.
        reason: String,
        /// The folder proposed, if any (`pathlib.Path`).
        path: Option<PathBuf>,
        /// Who asked.
        requested_by: Option<String>,
        /// Whether the decision's record is in the audit log.
        recorded: bool = |r| r.recorded(),
    }
}

report! {
    /// A pending request and the change approving it makes now: what to show the human, and
    /// what `Grants.approve` is bound to.
    Proposal(safe_lanes::grants::Proposal) in "safe_lanes.human" {
        /// The request.
        request: RequestInfo = |p| RequestInfo(p.request.clone().into()),
        /// The change, in a sentence (escaped).
        change: String = |p| p.change.describe(),
        /// The alias approving it grants or changes.
        alias: String = |p| p.change.target().0.to_string(),
        /// The access it gets.
        access: &'static str = |p| p.change.target().1.as_str(),
        /// The folder, when the request or the grant names one (`pathlib.Path`).
        path: Option<PathBuf> = |p| p.change.target().2.map(std::path::Path::to_path_buf),
        /// Whether it raises an existing grant's access (a reason is then required).
        raises_access: bool = |p| p.change.raises_access(),
        /// A short digest over the request and the change: give it to `approve`.
        digest: String,
    }
}
