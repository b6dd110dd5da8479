//! `safe_lanes.human`: the human's side of the folder grants and of the changes held for
//! review. Adding, approving, denying, changing and revoking grants, and applying or
//! discarding held changes, are here and nowhere in `safe_lanes`, so a gateway imports only
//! what it should hold; each decision is recorded in the audit log (and a grant's in the
//! changelog) as the OS user running the process (`uid:N`, with the name given as `actor`).

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

    /// Make the read-write folder grant `alias` direct (`direct=True`): confined commands
    /// write it at once, without a layer, and nothing they write waits for review; or layered
    /// again (`direct=False`): each command's changes are judged when it ends.
    ///
    /// Raises `Refused` (`unknown_alias`; `invalid_argument` without a reason, or for a
    /// grant that is not a read-write folder).
    #[pyo3(signature = (alias, direct, *, reason, actor=None))]
    fn set_direct(
        &self,
        py: Python<'_>,
        alias: &str,
        direct: bool,
        reason: &str,
        actor: Option<&str>,
    ) -> Result<Grant> {
        let actor = who(actor);
        Ok(Grant(py.detach(|| {
            self.0.set_direct(alias, direct, reason, &actor)
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
        /// Whether it is a direct read-write grant: commands write it at once, nothing waits
        /// for review.
        direct: bool,
        /// What every listing warns of a direct grant; `None` for any other.
        warning: Option<String> = |g| safe_lanes::risk::direct_warning(g),
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

/// The changes held for the human's review: what confined commands and patches changed that
/// the library's rule held (git state, tools' and agent hosts' configuration, start-up
/// files, links out of a folder, the human's own edits made meanwhile). Applying or
/// discarding is recorded in the audit log as the OS user (`uid:N`, with `actor`).
#[pyclass(frozen, module = "safe_lanes.human")]
#[derive(Debug)]
pub(crate) struct HeldChanges(safe_lanes::changes::HeldChanges);

#[pymethods]
impl HeldChanges {
    /// The held changes of the grants of `manifest` (default `<root>/workflow.json`) of
    /// `root`, after finishing what processes that died left.
    ///
    /// Raises `Refused` (`invalid_manifest`, `insecure_root`), `Failed` (`io`).
    #[new]
    #[pyo3(signature = (root, manifest=None))]
    fn new(py: Python<'_>, root: &StateRoot, manifest: Option<PathBuf>) -> Result<Self> {
        let held = py.detach(|| {
            let grants = safe_lanes::Grants::open(&root.0, manifest.as_deref())?;
            safe_lanes::changes::HeldChanges::open(Arc::new(grants))
        })?;
        Ok(Self(held))
    }

    /// The sets waiting for the human, oldest first.
    ///
    /// Raises `Failed` (`io`).
    fn list(&self, py: Python<'_>) -> Result<Vec<HeldSet>> {
        Ok(py
            .detach(|| self.0.list())?
            .into_iter()
            .map(HeldSet)
            .collect())
    }

    /// The set `id` in full: each change (with a diff for text, and the library's warnings)
    /// and the `digest` that `apply` asks for.
    ///
    /// Raises `Refused` (`not_found`; `invalid_argument` while it is being worked on),
    /// `Failed` (`io`).
    fn show(&self, py: Python<'_>, id: &str) -> Result<SetReview> {
        Ok(SetReview(py.detach(|| self.0.show(id))?))
    }

    /// Apply exactly what `show(id)` showed with `digest`: every change of the set, or those
    /// at `paths` (as listed). A change that meets an edit of the human's made since stays
    /// held (`still_held`).
    ///
    /// Raises `Refused` (`invalid_argument` without a reason, or when the set or the folder
    /// changed since it was shown — show it again; `not_found` for an unknown set or a path
    /// it does not hold; `revoked`, `read_only` when its grant no longer allows it),
    /// `Failed` (`io`).
    #[pyo3(signature = (id, digest, *, reason, paths=None, actor=None))]
    fn apply(
        &self,
        py: Python<'_>,
        id: &str,
        digest: &str,
        reason: &str,
        paths: Option<Vec<String>>,
        actor: Option<&str>,
    ) -> Result<Decided> {
        let paths = paths.unwrap_or_default();
        let actor = who(actor);
        Ok(Decided(py.detach(|| {
            self.0.apply(id, &paths, digest, reason, &actor)
        })?))
    }

    /// Discard the set `id` whole: nothing of it reaches the folder. With `digest` (what
    /// `show(id)` gave), only while the set is still what was shown.
    ///
    /// Raises `Refused` (`invalid_argument` without a reason, or with a digest that no longer
    /// holds; `not_found`), `Failed` (`io`).
    #[pyo3(signature = (id, *, reason, digest=None, actor=None))]
    fn discard(
        &self,
        py: Python<'_>,
        id: &str,
        reason: &str,
        digest: Option<&str>,
        actor: Option<&str>,
    ) -> Result<Decided> {
        let actor = who(actor);
        Ok(Decided(
            py.detach(|| self.0.discard(id, digest, reason, &actor))?,
        ))
    }

    fn __repr__(&self) -> String {
        "HeldChanges(…)".to_owned()
    }
}

report! {
    /// A held change set, as a listing shows it (`safe-lanes changes --json`).
    HeldSet(safe_lanes::changes::HeldSet) in "safe_lanes.human" {
        /// Its id (`set_…`).
        id: String,
        /// The first grant it changed.
        grant: String,
        /// Every grant it changed.
        grants: Vec<String>,
        /// `exec` (a confined command) or `patch`.
        origin: String,
        /// The command, or the patched file (escaped).
        command: String,
        /// When it began (RFC 3339).
        started: String,
        /// Who asked (the agent).
        actor: String,
        /// The held changes.
        held: Vec<HeldView> = |s| s.held.iter().cloned().map(HeldView).collect(),
    }
}

report! {
    /// One held change, as a listing shows it.
    HeldView(safe_lanes::changes::HeldView) in "safe_lanes.human" {
        /// The grant's alias.
        grant: String,
        /// The path, relative to the grant's folder (escaped).
        path: String,
        /// `created`, `modified`, `deleted`, `mode` or `link`.
        change: &'static str = |h| h.change.as_str(),
        /// Why it is held (`git_state`, `agent_config`, …).
        why: &'static str = |h| h.why.as_str(),
        /// What exactly, in words.
        what: String,
    }
}

report! {
    /// A held change set in full (`safe-lanes changes show ID --json`): the set's fields, each
    /// change, and the digest `HeldChanges.apply` is bound to.
    SetReview(safe_lanes::changes::SetReview) in "safe_lanes.human" {
        /// Its id (`set_…`).
        id: String = |r| r.set.id.clone(),
        /// The first grant it changed.
        grant: String = |r| r.set.grant.clone(),
        /// Every grant it changed.
        grants: Vec<String> = |r| r.set.grants.clone(),
        /// `exec` (a confined command) or `patch`.
        origin: String = |r| r.set.origin.clone(),
        /// The command, or the patched file (escaped).
        command: String = |r| r.set.command.clone(),
        /// When it began (RFC 3339).
        started: String = |r| r.set.started.clone(),
        /// Who asked (the agent).
        actor: String = |r| r.set.actor.clone(),
        /// The held changes, as listed.
        held: Vec<HeldView> = |r| r.set.held.iter().cloned().map(HeldView).collect(),
        /// Each held change in full.
        changes: Vec<ChangeReview> = |r| r.changes.iter().cloned().map(ChangeReview).collect(),
        /// The SHA-256 of everything shown: `apply` applies only while it is still the same.
        digest: String,
    }
}

report! {
    /// One held change in full.
    ChangeReview(safe_lanes::changes::ChangeReview) in "safe_lanes.human" {
        /// The grant's alias.
        grant: String = |c| c.held.grant.clone(),
        /// The path, relative to the grant's folder (escaped).
        path: String = |c| c.held.path.clone(),
        /// `created`, `modified`, `deleted`, `mode` or `link`.
        change: &'static str = |c| c.held.change.as_str(),
        /// Why it is held.
        why: &'static str = |c| c.held.why.as_str(),
        /// What exactly, in words.
        what: String = |c| c.held.what.clone(),
        /// What the path would be: `file`, `directory`, `link`, or `absent` (a removal).
        kind: &'static str,
        /// What the folder has there now: `file`, `directory`, `link`, `other` or `absent`.
        current: &'static str,
        /// Its permission bits (octal), for a file or a directory.
        mode: Option<String>,
        /// Its size, for a file.
        bytes: Option<u64>,
        /// Its SHA-256, for a file.
        sha256: Option<String>,
        /// Its target, for a link (escaped).
        target: Option<String>,
        /// What it holds, for a directory (at most 200 paths, escaped).
        entries: Vec<String>,
        /// The unified diff from the folder's file to this one, when both are text.
        diff: Option<String>,
        /// What the library warns of, were it applied now.
        warnings: Vec<String>,
    }
}

report! {
    /// What applying or discarding a held set did.
    Decided(safe_lanes::changes::Decided) in "safe_lanes.human" {
        /// The set.
        id: String,
        /// The changes now in the folder (applied) or gone (discarded).
        paths: Vec<String>,
        /// Changes that met an edit of the human's and stay held.
        still_held: Vec<HeldView> = |d| d.still_held.iter().cloned().map(HeldView).collect(),
        /// Whether the decision is in the audit log.
        recorded: bool,
    }
}
