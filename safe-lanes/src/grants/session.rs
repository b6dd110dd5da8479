//! Sessions: what an agent's operations run against.
//!
//! A [`Session`] does not hold grants of its own. Before every operation it compares the
//! manifest's [`Stamp`] with the one its [`Snapshot`] was built from and rebuilds the snapshot
//! when the manifest changed, so a revoke or a narrowing by the human applies to the very next
//! operation of every live session, and a new approval to the next one too. A child session
//! ([`Session::child`]) applies its own [`Narrowing`] on top of its parent's: it can only ever
//! see fewer folders, or the same ones with less access. A human writes a narrowing as a spec
//! (`site,docs:read_only`), read by [`Narrowing::parse`].

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use rustix::fs::Mode;
use serde::Serialize;

use super::manifest::{Document, Stamp};
use super::model::{Access, Action, Alias, Want};
use super::rules::{Unusable, still_at_path};
use super::toolchain::Toolchain;
use super::{Grants, Listing};
use crate::actor::Actor;
use crate::audit::Operation;
use crate::beneath::{self, Anchor, Symlinks};
use crate::error::{Error, Result, Shown};
use crate::input::{AbsPath, RelPath};

/// A restriction a session applies to the grants it sees: only some aliases, and at most some
/// access for some of them. Narrowings only ever combine by intersection, so a session built
/// with one ([`Session::child`]) never sees more than its parent.
///
/// ```
/// use safe_lanes::grants::Narrowing;
/// use safe_lanes::{Access, Alias};
///
/// # fn main() -> safe_lanes::Result<()> {
/// let spec: Narrowing = "site,docs:read_only".parse()?;
/// let site = Alias::new("site")?;
/// let docs = Alias::new("docs")?;
/// let built = Narrowing::none()
///     .only([site, docs.clone()])
///     .at_most(docs, Access::ReadOnly);
/// assert_eq!(spec, built);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Narrowing {
    only: Option<BTreeSet<Alias>>,
    at_most: BTreeMap<Alias, Access>,
}

impl Narrowing {
    /// No restriction.
    pub fn none() -> Self {
        Self::default()
    }

    /// Only these aliases (intersected with any earlier "only").
    pub fn only(mut self, aliases: impl IntoIterator<Item = Alias>) -> Self {
        let set: BTreeSet<Alias> = aliases.into_iter().collect();
        self.only = Some(match self.only {
            Some(prev) => prev.intersection(&set).cloned().collect(),
            None => set,
        });
        self
    }

    /// At most `access` for `alias`.
    pub fn at_most(mut self, alias: Alias, access: Access) -> Self {
        let slot = self.at_most.entry(alias).or_insert(access);
        *slot = (*slot).min(access);
        self
    }

    /// The narrowing a spec names, as a human writes it on a command line: aliases separated
    /// by commas, each optionally followed by `:read_only` or `:read_write`. The session then
    /// sees only the grants named; an alias alone keeps its grant's access, and a `:` access
    /// caps it (`:read_write` caps nothing, as a narrowing never widens). Spaces around an
    /// alias or an access are ignored; an alias named twice gets the lower of its caps.
    ///
    /// # Errors
    ///
    /// `invalid_argument` for an empty spec or an access other than `read_only` and
    /// `read_write`; `invalid_alias` for an alias [`Alias::new`] refuses (an empty one too,
    /// as in `site,,docs` or a trailing comma).
    ///
    /// # Security
    ///
    /// The spec may be any string; it is only split and checked, and each alias passes the
    /// same rules as a grant's. A narrowing can only take authority away.
    pub fn parse(spec: &str) -> Result<Self> {
        if spec.trim().is_empty() {
            return Err(Error::InvalidArgument {
                what: Shown::text(spec),
                why: "a narrowing names at least one grant, as `alias[:read_only],…`".into(),
            });
        }
        let mut aliases = Vec::new();
        let mut narrowing = Narrowing::none();
        for item in spec.split(',') {
            let (alias, cap) = match item.split_once(':') {
                Some((alias, cap)) => (alias, Some(cap.trim())),
                None => (item, None),
            };
            let alias = Alias::new(alias.trim())?;
            if let Some(cap) = cap {
                let access = Access::parse(cap).map_err(|_| Error::InvalidArgument {
                    what: Shown::text(cap),
                    why: format!("the access for `{alias}` is read_only or read_write"),
                })?;
                narrowing = narrowing.at_most(alias.clone(), access);
            }
            aliases.push(alias);
        }
        Ok(narrowing.only(aliases))
    }

    /// Both restrictions at once.
    fn then(&self, inner: &Narrowing) -> Narrowing {
        let mut out = self.clone();
        if let Some(only) = &inner.only {
            out = out.only(only.iter().cloned());
        }
        for (alias, access) in &inner.at_most {
            out = out.at_most(alias.clone(), *access);
        }
        out
    }

    /// The access left for a grant, or `None` when it is not visible at all.
    fn apply(&self, alias: &Alias, access: Access) -> Option<Access> {
        if self.only.as_ref().is_some_and(|only| !only.contains(alias)) {
            return None;
        }
        Some(
            self.at_most
                .get(alias)
                .map_or(access, |cap| access.min(*cap)),
        )
    }
}

impl FromStr for Narrowing {
    type Err = Error;

    /// As [`Narrowing::parse`].
    fn from_str(spec: &str) -> Result<Self> {
        Self::parse(spec)
    }
}

/// A grant as a session sees it.
#[derive(Debug, Serialize)]
pub struct Effective {
    /// The grant's id.
    pub id: String,
    /// Its alias.
    pub alias: Alias,
    /// Its canonical folder.
    #[serde(serialize_with = "crate::lossy::path")]
    pub path: PathBuf,
    /// The access this session has (after narrowing).
    pub access: Access,
    /// Its environment key.
    pub env: String,
    /// Why it cannot be used here, if it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// Its kind, the variables set to its path, and a tool's bin folder.
    #[serde(skip)]
    pub toolchain: Toolchain,
    /// The protected paths the human lifted for it (ADR 0016).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_protected: Vec<super::LiftedPath>,
    /// Patterns the human hides in it beside the default list.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hide: Vec<String>,
    /// Patterns the human shows in it although the default list hides them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unhide: Vec<String>,
    /// Whether confined commands write it directly, without a layer (ADR 0027).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub direct: bool,
    #[serde(skip)]
    folder: std::result::Result<Anchor, Unusable>,
}

impl Effective {
    /// What an agent's operations may not reach in it: the library's default list of secrets
    /// ([`crate::hidden::DEFAULT_HIDDEN`]) and the human's own patterns, less what the human
    /// shows.
    pub fn hidden(&self) -> crate::hidden::Hidden {
        crate::hidden::Hidden::new(&self.hide, &self.unhide)
    }

    /// The folder's descriptor, opened when the snapshot was built and confirmed, now, to
    /// still be at the grant's path.
    ///
    /// # Errors
    ///
    /// `unavailable_on_host` for a grant of another host, `not_found` for a folder that is not
    /// (or no longer) at its path, `invalid_manifest` for a stored grant that breaks a rule.
    pub fn folder(&self) -> Result<&Anchor> {
        let usable = match &self.folder {
            Ok(anchor) => still_at_path(anchor, &self.path).map(|()| anchor),
            Err(why) => Err(why.clone()),
        };
        usable.map_err(|why| why.error(&self.alias, &self.path))
    }

    /// Whether the grant is usable here now ([`Effective::folder`] succeeds).
    pub fn is_available(&self) -> bool {
        self.folder().is_ok()
    }
}

/// The grants of one manifest version, as one session sees them.
#[derive(Debug)]
pub struct Snapshot {
    /// The manifest version it was built from.
    pub stamp: Stamp,
    /// The visible grants.
    pub grants: Vec<Effective>,
    revoked: BTreeSet<Alias>,
}

impl Snapshot {
    /// The alias of the grant `reference` names: itself when a visible grant has that alias,
    /// else the alias of the visible grant whose id it is, else itself (unknown, as
    /// [`Snapshot::folder`] says).
    fn named(&self, reference: Alias) -> Alias {
        if self.grants.iter().any(|g| g.alias == reference) {
            return reference;
        }
        (self.grants.iter())
            .find(|g| g.id == reference.as_str())
            .map_or(reference, |g| g.alias.clone())
    }

    /// The grant `alias` with at least `want`, or the reason it cannot be used.
    ///
    /// # Errors
    ///
    /// `unknown_alias`, `revoked`, `unavailable_on_host`, `not_found`, `read_only`.
    pub fn folder(&self, alias: &Alias, want: Want) -> Result<&Effective> {
        let Some(grant) = self.grants.iter().find(|g| &g.alias == alias) else {
            return Err(if self.revoked.contains(alias) {
                Error::Revoked {
                    alias: Shown::text(alias.as_str()),
                }
            } else {
                Error::UnknownAlias {
                    alias: Shown::text(alias.as_str()),
                }
            });
        };
        grant.folder()?;
        if !grant.access.allows(want) {
            return Err(Error::ReadOnly {
                alias: Shown::text(alias.as_str()),
            });
        }
        Ok(grant)
    }

    /// Whether every folder this snapshot holds is still at its grant's path, and every
    /// folder it found missing still is.
    fn in_place(&self) -> bool {
        self.grants.iter().all(|g| match &g.folder {
            Ok(anchor) => still_at_path(anchor, &g.path).is_ok(),
            Err(Unusable::Missing { .. }) => AbsPath::new(&g.path)
                .and_then(Anchor::open_canonical)
                .is_err(),
            Err(_) => true,
        })
    }

    /// The usable grants.
    pub fn available(&self) -> impl Iterator<Item = &Effective> {
        self.grants.iter().filter(|g| g.is_available())
    }
}

/// A path resolved beneath a grant.
#[derive(Debug)]
pub struct Resolved {
    /// An `O_PATH` descriptor of what the path names (it can neither read nor write by itself).
    pub fd: OwnedFd,
    /// The grant's folder joined with the path, for display.
    pub path: PathBuf,
    /// The access the session has to it.
    pub access: Access,
}

/// A live view of the grants, re-checked before every operation.
#[derive(Debug)]
pub struct Session {
    grants: Arc<Grants>,
    actor: Actor,
    narrowing: Narrowing,
    current: Mutex<Option<Arc<Snapshot>>>,
}

impl Session {
    pub(super) fn new(grants: Arc<Grants>, actor: Actor) -> Self {
        Self {
            grants,
            actor,
            narrowing: Narrowing::none(),
            current: Mutex::new(None),
        }
    }

    /// A child session: this session's grants with `narrowing` on top (for an orchestrator's
    /// sub-agent, or a server started with `--only`). It follows the manifest like its parent,
    /// so a revoke or a narrowing by the human reaches it at its next operation and stops its
    /// running commands, and it can never see more than its parent: its narrowing is the
    /// intersection of its parent's and `narrowing`.
    pub fn child(&self, narrowing: Narrowing) -> Session {
        Session {
            grants: Arc::clone(&self.grants),
            actor: self.actor,
            narrowing: self.narrowing.then(&narrowing),
            current: Mutex::new(None),
        }
    }

    /// The session this one was narrowed from, with every grant (for the library's own work
    /// over all of them, such as finishing what a dead process left in change sets).
    pub(crate) fn unnarrowed(&self) -> Session {
        Session::new(Arc::clone(&self.grants), self.actor)
    }

    /// The grants as of now: rebuilt when the manifest changed since the last call, or when a
    /// folder it holds is no longer at its grant's path (so a session and the listing always
    /// agree on what is available).
    ///
    /// # Errors
    ///
    /// `invalid_manifest`, `io`.
    pub fn snapshot(&self) -> Result<Arc<Snapshot>> {
        let stamp = self.grants.manifest().stamp()?;
        let mut current = crate::sync::lock(&self.current);
        if let Some(snap) = current
            .as_ref()
            .filter(|s| s.stamp == stamp && s.in_place())
        {
            return Ok(Arc::clone(snap));
        }
        let (stamp, doc) = self.grants.manifest().load()?;
        let snap = Arc::new(self.build(stamp, &doc));
        *current = Some(Arc::clone(&snap));
        Ok(snap)
    }

    /// The grants this session can use, each with this session's access to it (after its
    /// narrowing) and whether it is usable here, and the pending requests (which go to the
    /// human whatever the narrowing). For a session without a narrowing this is
    /// [`Grants::list`].
    ///
    /// # Errors
    ///
    /// `invalid_manifest`, `io`.
    pub fn list(&self) -> Result<Listing> {
        let mut listing = self.grants.list()?;
        listing.grants.retain_mut(|view| {
            match self.narrowing.apply(&view.grant.alias, view.grant.access) {
                Some(access) => {
                    view.grant.access = access;
                    true
                }
                None => false,
            }
        });
        Ok(listing)
    }

    /// Resolve `relative` beneath the grant `alias` for `want`, against the current manifest.
    ///
    /// # Errors
    ///
    /// `unknown_alias`, `revoked`, `unavailable_on_host`, `read_only`, `symlink_escape`,
    /// `not_found`, `io`. (The lexical refusals — `invalid_alias`, `traversal`, … — were made
    /// when the agent's strings became an [`Alias`] and a [`RelPath`].)
    ///
    /// # Security
    ///
    /// `alias` and `relative` may come from the agent. The result is beneath the granted
    /// folder (links inside it are followed only while they stay inside), and a write is only
    /// resolved under a read-write grant that is still in the manifest.
    pub fn resolve(&self, alias: &Alias, relative: RelPath<'_>, want: Want) -> Result<Resolved> {
        let snap = self.snapshot()?;
        let grant = snap.folder(alias, want)?;
        let fd = grant
            .folder()?
            .open(relative, beneath::HOLD, Mode::empty(), Symlinks::Beneath)?;
        Ok(Resolved {
            fd,
            path: path_clean::clean(grant.path.join(relative.as_path())),
            access: grant.access,
        })
    }

    /// The grant `raw` names for the operation `op` ([`Operation::Exec`], …): an alias, or the
    /// stable id (`folder_…`) of a grant this session sees, which stands for that grant's
    /// alias. An alias wins over an id (the human chose the one, the other is random), so a
    /// reference always means what the listing shows under that alias. Checked by
    /// [`Alias::new`]; a refusal is recorded in the audit log like every refused operation of
    /// the session, so a hostile alias leaves a trace even though nothing was attempted.
    ///
    /// # Errors
    ///
    /// `invalid_alias`; `invalid_manifest`, `io` when the manifest cannot be read.
    pub fn alias(&self, op: Operation, raw: &str) -> Result<Alias> {
        let alias = Alias::new(raw).map_err(|e| self.refused(op, raw, e))?;
        Ok(self.snapshot()?.named(alias))
    }

    /// The alias a request for more access to `raw` is filed under: as [`Session::alias`]
    /// resolves it when `raw` is a visible grant's id, else `raw` as given (the request's own
    /// checks judge it).
    ///
    /// # Errors
    ///
    /// `invalid_manifest`, `io` when the manifest cannot be read.
    pub(crate) fn requested_alias(&self, raw: &str) -> Result<String> {
        Ok(match Alias::new(raw) {
            Ok(alias) => self.snapshot()?.named(alias).as_str().to_owned(),
            Err(_) => raw.to_owned(),
        })
    }

    /// The human's grants this session views.
    pub(crate) fn grants(&self) -> &Grants {
        &self.grants
    }

    /// Who this session's operations are recorded as.
    pub fn actor(&self) -> Actor {
        self.actor
    }

    /// Append an operation run in this session to the audit log, as its actor.
    pub(crate) fn record(&self, event: &str, fields: impl Serialize) -> Result<()> {
        self.grants.audit().append(event, self.actor, fields)
    }

    /// Record a refused operation in the audit log and hand the error back (an `io`
    /// error is handed back unrecorded: see [`AuditLog::refused`](crate::audit::AuditLog::refused)).
    pub(crate) fn refused(&self, op: Operation, subject: &str, error: Error) -> Error {
        self.grants.audit().refused(op, self.actor, subject, error)
    }

    fn build(&self, stamp: Stamp, doc: &Document) -> Snapshot {
        let rules = self.grants.rules();
        let grants = doc
            .grants
            .iter()
            .filter_map(|g| {
                let access = self.narrowing.apply(&g.alias, g.access)?;
                let folder = rules.usable(g, &doc.grants);
                let unavailable = folder.as_ref().err().map(Unusable::to_string);
                Some(Effective {
                    id: g.id.clone(),
                    alias: g.alias.clone(),
                    path: g.path.clone(),
                    access,
                    env: g.alias.env_key(),
                    unavailable,
                    toolchain: g.toolchain.clone(),
                    allow_protected: g.allow_protected.clone(),
                    hide: g.hide.clone(),
                    unhide: g.unhide.clone(),
                    direct: g.direct && g.access == Access::ReadWrite,
                    folder,
                })
            })
            .collect();
        let mut revoked = BTreeSet::new();
        for change in &doc.changelog {
            match change.action {
                Action::Revoke => {
                    revoked.insert(change.alias.clone());
                }
                Action::Add | Action::Approve => {
                    revoked.remove(&change.alias);
                }
                _ => {}
            }
        }
        Snapshot {
            stamp,
            grants,
            revoked,
        }
    }
}
