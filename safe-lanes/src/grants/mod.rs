//! Folder grants: the human attaches folders, read-only or read-write; an agent addresses them
//! by alias and can only *request* more.
//!
//! - [`Grants`] is the trusted side (the CLI): add, change access, revoke, approve or deny
//!   requests. Every change is validated, written atomically to the manifest under a lock,
//!   recorded in the manifest's changelog with actor and reason, and appended to the audit log.
//!   Every one of the human's changes needs a reason: one whose reason is empty is refused
//!   (`invalid_argument`) and changes nothing, so the changelog never holds a human action
//!   without why.
//! - [`Grants::request`] is the one thing an agent may do: file a pending request. It is inert
//!   until a human approves it, and approval runs the full validation on the path the human
//!   confirms.
//! - [`Session`] is what the agent's operations run against: the grants of the current manifest,
//!   re-checked before every operation, optionally narrowed for a child session.
//!
//! # Rules for a grant
//!
//! - alias `[a-z0-9][a-z0-9_-]{0,47}`, unique, and unique by its environment key
//!   `WORKFLOW_FOLDER_<ALIAS>` (`rts-source` and `rts_source` collide: `alias_taken`);
//! - path absolute, an existing directory, stored canonical; not `/`, not the state root, not
//!   inside it, not an ancestor of it (`state_root`), and not containing the manifest (an agent
//!   with write access could rewrite its own grants);
//! - a read-only grant nested inside a read-write grant is refused (`overlapping_grant`): the
//!   OS sandbox adds rights along a path and could not keep the inner folder read-only; so is
//!   the same folder granted twice;
//! - the host it was approved on is recorded; on another host the grant is unavailable
//!   (`unavailable_on_host`), never silently active. A grant written without a host (by
//!   another tool) is unavailable everywhere until the human adopts it ([`Grants::adopt`]).

mod agent;
mod archive;
pub mod detect;
mod folders;
mod manifest;
mod model;
mod outcome;
pub(crate) mod proposal;
mod review;
mod rules;
mod session;
mod strict;
mod toolchain;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

pub use agent::AgentGrants;
pub use folders::{FolderChoice, Folders, MAX_FOLDER_CHOICES};
pub(crate) use manifest::Manifest;
pub use manifest::{Document, Stamp};
pub(crate) use model::OtherKeys;
pub use model::{
    ALIAS_PATTERN, Access, Action, Alias, Change, Grant, LiftedPath, MAX_ALIAS_LEN,
    MAX_REASON_CHARS, Request, Want,
};
pub use outcome::{Outcome, Status};
pub use proposal::{Proposal, Proposed, Seen};
pub use review::{Glance, Review, Standing, allows};
pub use session::{Effective, Narrowing, Resolved, Session, Snapshot};
pub use toolchain::{HIDDEN_IN_TOOLS, Kind, ToolBin, Toolchain, VarName};

use crate::actor::Actor;
use crate::audit::{AuditLog, Operation};
use crate::beneath::{self, Ambient, Anchor};
use crate::error::{Error, Result, Shown};
use crate::input::{AbsPath, RelPath};
use crate::random::random_hex;
use crate::root::StateRoot;
use manifest::Record;
pub(crate) use model::clean_reason;
use serde_json::json;

/// The most requests pending at once; the human approves or denies before more can be filed.
pub const MAX_PENDING_REQUESTS: usize = 64;

/// Whether a grant of `kind` may hide `hide` and show `unhide` ([`Grants::set_hidden`]): the
/// lists are ones the human may give ([`crate::hidden::check_lists`]), and the grant is a
/// folder (a tool's and a cache's credentials are hidden by their kind). Callers that are
/// about to make a grant ask it first, so a grant is never left without what was asked.
///
/// # Errors
///
/// `invalid_argument`, `too_large`.
pub fn check_hidden(kind: Kind, hide: &[String], unhide: &[String]) -> Result<()> {
    crate::hidden::check_lists(hide, unhide)?;
    let asks = !hide.is_empty() || !unhide.is_empty();
    if asks && !kind.is_folder() {
        return Err(Error::InvalidArgument {
            what: Shown::text(kind.as_str()),
            why: "hidden paths are set on folder grants; a tool's and a cache's credentials \
                  are hidden by their kind"
                .into(),
        });
    }
    Ok(())
}

/// What a request asks for: an access, perhaps an exact folder, and for a tool or a cache
/// what it adds ([`Toolchain`]).
#[derive(Clone, Debug)]
pub struct Asked<'a> {
    /// The access asked for (a tool's or a cache's must be the kind's).
    pub access: Access,
    /// The exact folder proposed, if any.
    pub path: Option<&'a Path>,
    /// The kind, variables and bin folder.
    pub toolchain: Toolchain,
}

impl<'a> Asked<'a> {
    /// A folder with `access`, at `path` if given.
    pub fn folder(access: Access, path: Option<&'a Path>) -> Self {
        Self {
            access,
            path,
            toolchain: Toolchain::folder(),
        }
    }
}

/// The grants of one manifest, managed from the trusted side.
#[derive(Debug)]
pub struct Grants {
    manifest: Manifest,
    state_root: PathBuf,
    /// The state root's directory: where the sandbox keeps what commands need beside the
    /// grants (placeholders' registry, caches' private layers).
    root: Anchor,
    audit: Arc<AuditLog>,
    /// The registry of effects in flight (`<root>/.ongoing`), opened on first use (by the
    /// sandbox, which is Linux only).
    #[cfg(target_os = "linux")]
    ongoing: std::sync::OnceLock<crate::ongoing::Ongoing>,
    /// The store of change sets (`<root>/changes`), opened on first use.
    changes: std::sync::OnceLock<crate::changes::set::Store>,
    host: String,
    /// This machine's identity ([`this_machine`]).
    machine: String,
}

/// A grant as listed: the stored fields, its environment key, and whether it is usable here.
#[derive(Clone, Debug, Serialize)]
pub struct GrantView {
    /// The grant.
    #[serde(flatten)]
    pub grant: Grant,
    /// Its environment key in confined commands.
    pub env: String,
    /// Whether it is usable on this host now.
    pub available: bool,
    /// Why not, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// For a cache: the size of its private layer in the state root, what confined commands
    /// wrote to it (`<root>/caches/<alias>/`, ADR 0016); filled by [`Grants::measure_caches`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub private_layer: Option<crate::caches::LayerSize>,
}

/// A change to the grants that was made, and whether its record is in the audit log yet.
///
/// A change is reported as made once the manifest holds it, whatever happens to its record: a
/// record that could not be written (a full disk, a log that cannot grow) is kept beside the
/// manifest, written by the next change, and reported by `audit verify` meanwhile. It reads as
/// the value it holds (`Deref`); as JSON, the value's fields and `recorded`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Recorded<T> {
    #[serde(flatten)]
    value: T,
    recorded: bool,
}

impl<T> Recorded<T> {
    pub(crate) fn new(value: T, recorded: bool) -> Self {
        Self { value, recorded }
    }

    /// Whether the change's record is in the audit log.
    pub fn recorded(&self) -> bool {
        self.recorded
    }

    /// The value, without whether it was recorded.
    pub fn into_inner(self) -> T {
        self.value
    }

    /// The same change, holding `f` of its value.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Recorded<U> {
        Recorded {
            value: f(self.value),
            recorded: self.recorded,
        }
    }
}

impl<T> std::ops::Deref for Recorded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

/// What [`Grants::clear_cache`] did.
#[derive(Clone, Debug, Serialize)]
pub struct CacheCleared {
    /// The cache.
    pub alias: Alias,
    /// Whether it had a private layer.
    pub cleared: bool,
    /// The bytes its layer held.
    pub bytes: u64,
}

/// Everything `grant list` shows.
#[derive(Clone, Debug, Serialize)]
pub struct Listing {
    /// The approved grants.
    pub grants: Vec<GrantView>,
    /// The pending requests (not expired).
    pub requests: Vec<Request>,
    /// Every pending request and the most recent decided ones, with where each stands
    /// (pending, approved, denied with the human's reason, expired). Not serialized when
    /// empty, so a listing without requests keeps its shape.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub outcomes: Vec<Outcome>,
}

impl Grants {
    /// The grants of `manifest` (default `<root>/workflow.json`) for the state root `root`.
    ///
    /// # Errors
    ///
    /// `invalid_manifest` when the manifest is invalid or lies inside a granted folder (an
    /// agent could then rewrite its own grants); `not_found` when its directory is missing.
    pub fn open(root: &StateRoot, manifest: Option<&Path>) -> Result<Self> {
        let path = manifest.map_or_else(|| root.default_manifest(), Path::to_path_buf);
        let manifest = Manifest::open(&path)?;
        let this = Self {
            manifest,
            state_root: root.path().to_path_buf(),
            root: root.anchor().try_clone()?,
            audit: root.audit(),
            #[cfg(target_os = "linux")]
            ongoing: std::sync::OnceLock::new(),
            changes: std::sync::OnceLock::new(),
            host: this_host(),
            machine: this_machine(),
        };
        let (_, doc) = this.manifest.load()?;
        if let Some(g) = doc
            .grants
            .iter()
            .find(|g| this.manifest.path().starts_with(&g.path))
        {
            return Err(Error::InvalidManifest {
                path: Shown::path(this.manifest.path()),
                why: format!(
                    "it lies inside the granted folder `{}`, where an agent could rewrite it",
                    g.alias
                ),
            });
        }
        Ok(this)
    }

    /// The state root's directory.
    #[cfg(target_os = "linux")]
    pub(crate) fn root(&self) -> &Anchor {
        &self.root
    }

    /// The state root's path.
    #[cfg(target_os = "linux")]
    pub(crate) fn root_path(&self) -> &Path {
        &self.state_root
    }

    /// The registry of effects in flight of the state root (`crate::ongoing`).
    ///
    /// # Errors
    ///
    /// `insecure_root` when it is not private; `io` when it cannot be made.
    #[cfg(target_os = "linux")]
    pub(crate) fn ongoing(&self) -> Result<&crate::ongoing::Ongoing> {
        if let Some(ongoing) = self.ongoing.get() {
            return Ok(ongoing);
        }
        let opened = crate::ongoing::open(&self.root, &self.state_root, Arc::clone(&self.audit))?;
        Ok(self.ongoing.get_or_init(|| opened))
    }

    /// The store of change sets of the state root ([`crate::changes`]).
    ///
    /// # Errors
    ///
    /// `insecure_root` when it is not private; `io` when it cannot be made.
    pub(crate) fn changes(&self) -> Result<&crate::changes::set::Store> {
        if let Some(store) = self.changes.get() {
            return Ok(store);
        }
        let opened = crate::changes::set::Store::open(
            &self.root,
            &self.state_root,
            Arc::clone(&self.audit),
        )?;
        Ok(self.changes.get_or_init(|| opened))
    }

    /// The manifest file.
    pub(crate) fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The audit log decisions are appended to.
    pub(crate) fn audit(&self) -> &AuditLog {
        &self.audit
    }

    /// This host's name, as recorded in new grants.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The grants with their availability here, and the pending requests.
    ///
    /// # Errors
    ///
    /// `invalid_manifest`, `io`.
    pub fn list(&self) -> Result<Listing> {
        let (_, doc) = self.manifest.load()?;
        let grants = doc
            .grants
            .iter()
            .map(|grant| {
                let unavailable = self
                    .rules()
                    .usable(grant, &doc.grants)
                    .err()
                    .map(|why| why.to_string());
                let grant = grant.clone();
                GrantView {
                    env: grant.alias.env_key(),
                    available: unavailable.is_none(),
                    unavailable,
                    grant,
                    private_layer: None,
                }
            })
            .collect();
        let now = std::time::SystemTime::now();
        let outcomes = doc.outcomes(now);
        let requests = doc.pending(now).into_iter().cloned().collect();
        Ok(Listing {
            grants,
            requests,
            outcomes,
        })
    }

    /// Fill in the size of each cache's private layer in `listing` (a walk of each layer, so
    /// only the human's listings do it).
    ///
    /// # Errors
    ///
    /// `insecure_root`, `io`.
    pub fn measure_caches(&self, listing: &mut Listing) -> Result<()> {
        let caches = listing
            .grants
            .iter_mut()
            .filter(|v| v.grant.toolchain.kind == Kind::Cache);
        let mut opened = None;
        for view in caches {
            let dir = match &opened {
                Some(dir) => dir,
                None => opened.insert(crate::caches::Caches::open(&self.root, &self.state_root)?),
            };
            // A broken layer is not measured (`doctor` names it; commands leave its cache out):
            // the listing stays.
            view.private_layer = match dir.size(view.grant.alias.as_str()) {
                Ok(size) => size,
                Err(e) => {
                    tracing::warn!(error = %e, "the private layer of cache `{}` cannot be measured", view.grant.alias);
                    None
                }
            };
        }
        Ok(())
    }

    /// Empty the private layer of the cache `alias` (what confined commands wrote to it): the
    /// human's action, recorded. Commands running keep the layer they started with.
    ///
    /// # Errors
    ///
    /// `unknown_alias`; `invalid_argument` without a reason, or when the grant is not a cache;
    /// `insecure_root`, `io`.
    pub fn clear_cache(&self, alias: &str, reason: &str, actor: &str) -> Result<CacheCleared> {
        let alias = Alias::new(alias)?;
        reason_given("grant.cache_clear", "clearing of a cache", reason)?;
        let (_, doc) = self.manifest.load()?;
        let grant = find(&doc, &alias)?;
        if grant.toolchain.kind != Kind::Cache {
            return Err(Error::InvalidArgument {
                what: Shown::text(alias.as_str()),
                why: format!(
                    "`{alias}` is a {}, not a cache",
                    grant.toolchain.kind.as_str()
                ),
            });
        }
        let caches = crate::caches::Caches::open(&self.root, &self.state_root)?;
        let before = caches.size(alias.as_str())?;
        let cleared = CacheCleared {
            alias: alias.clone(),
            cleared: before.is_some(),
            bytes: before.map_or(0, |s| s.bytes),
        };
        // Recorded before it happens, so no crash leaves it unrecorded.
        let fields = json!({ "reason": clean_reason(reason), "result": &cleared });
        self.audit
            .append("grant.cache_clear", clean_reason(actor), &fields)?;
        if let Err(e) = caches.clear(alias.as_str()) {
            let failed = json!({ "alias": &alias, "error": e.to_string() });
            let _ = self
                .audit
                .append("grant.cache_clear_failed", clean_reason(actor), failed);
            return Err(e);
        }
        Ok(cleared)
    }

    /// For `init`: repair what of the manifest's own files the current user owns (a lock file
    /// or a changelog archive that is not a regular file, a lock file holding garbage) and
    /// the caches' private layers. What was done.
    ///
    /// # Errors
    ///
    /// `io`.
    pub fn repair(&self) -> Result<Vec<String>> {
        let mut repaired: Vec<String> = self.manifest.repair_lock()?.into_iter().collect();
        repaired.extend(self.manifest.archive().repair()?);
        // The private layer of each cache grant.
        let (_, doc) = self.manifest.load()?;
        let caches = doc
            .grants
            .iter()
            .filter(|g| g.toolchain.kind == Kind::Cache);
        let mut opened = None;
        for grant in caches {
            let dir = match &opened {
                Some(dir) => dir,
                None => opened.insert(crate::caches::Caches::open(&self.root, &self.state_root)?),
            };
            repaired.extend(dir.repair(grant.alias.as_str())?);
        }
        Ok(repaired)
    }

    /// What is wrong with the grants' own files, in words (for `doctor`): the changelog's
    /// archive when it is not a file, and the private layer of each cache grant that cannot be
    /// used (its cache is left out of confined commands). `safe-lanes init` repairs them.
    pub fn problems(&self) -> Vec<String> {
        let mut out: Vec<String> = self.manifest.archive().problem().into_iter().collect();
        out.extend(self.cache_problems());
        out
    }

    fn cache_problems(&self) -> Vec<String> {
        let Ok((_, doc)) = self.manifest.load() else {
            return Vec::new();
        };
        let caches: Vec<&Grant> = doc
            .grants
            .iter()
            .filter(|g| g.toolchain.kind == Kind::Cache)
            .collect();
        if caches.is_empty() {
            return Vec::new();
        }
        let dir = match crate::caches::Caches::open(&self.root, &self.state_root) {
            Ok(dir) => dir,
            Err(e) => return vec![format!("the caches' layers cannot be used: {e}")],
        };
        caches
            .into_iter()
            .filter_map(|g| {
                dir.problem(g.alias.as_str()).map(|why| {
                    format!(
                        "cache `{}`: its private layer is broken ({why}): the cache is left out \
                         of confined commands until `safe-lanes init` repairs it",
                        g.alias
                    )
                })
            })
            .collect()
    }

    /// Whether a change was made whose audit record is not written yet (the log could not take
    /// it): the next change writes it.
    ///
    /// # Errors
    ///
    /// `insecure_root` for a broken lock file; `io`.
    pub fn pending_record(&self) -> Result<bool> {
        self.manifest.pending_record()
    }

    /// The identity of the manifest's current version, without reading it: it changes with
    /// every change to the grants or requests (by this process or any other), so a page
    /// showing them can tell when it is out of date.
    ///
    /// # Errors
    ///
    /// `io` when the manifest's directory cannot be read.
    pub fn version(&self) -> Result<Stamp> {
        self.manifest.stamp()
    }

    /// The whole changelog, oldest first: the entries moved out of the manifest to its
    /// archive beside it (`<stem>.changelog.jsonl`), then the manifest's own.
    ///
    /// # Errors
    ///
    /// `invalid_manifest` (the archive's too), `insecure_root` when the archive is not a
    /// file, `io`.
    pub fn changelog(&self) -> Result<Vec<Change>> {
        self.manifest.history()
    }

    /// Add a grant (the human's action).
    ///
    /// # Errors
    ///
    /// `invalid_argument` without a reason; `invalid_alias`, `alias_taken`, `relative_path`,
    /// `nul_byte`, `not_found`, `state_root`, `overlapping_grant`, `invalid_manifest`, `io`.
    pub fn add(
        &self,
        alias: &str,
        path: &Path,
        access: Access,
        reason: &str,
        actor: &str,
    ) -> Result<Recorded<Grant>> {
        self.add_with(
            alias,
            path,
            Some(access),
            Toolchain::folder(),
            reason,
            actor,
        )
    }

    /// Add a grant of any kind: a folder with `access`, or a tool or a cache (whose access
    /// the kind fixes; `access`, when given, must be it) with the variables and bin folder of
    /// `toolchain`. Every rule of [`Grants::add`] applies, and no two grants may set the same
    /// variable.
    ///
    /// # Errors
    ///
    /// As [`Grants::add`], and `invalid_argument` when `toolchain` does not fit its kind or
    /// sets a variable another grant sets.
    pub fn add_with(
        &self,
        alias: &str,
        path: &Path,
        access: Option<Access>,
        toolchain: Toolchain,
        reason: &str,
        actor: &str,
    ) -> Result<Recorded<Grant>> {
        let alias = Alias::new(alias)?;
        let access = toolchain.access(access)?;
        let path = self.canonical_folder(path)?;
        self.change(Action::Add, actor, reason, |doc, changelog| {
            let mut grant = self.new_grant(doc, alias, path, access, toolchain.kind)?;
            toolchain::attach(&mut grant, toolchain, &doc.grants)?;
            changelog.add(doc, &grant, |c| {
                c.path = Some(grant.path.clone());
                c.access = Some(access);
                c.kind = grant.toolchain.kind;
            });
            doc.grants.push(grant.clone());
            Ok(grant)
        })
    }

    /// Change a grant's access (the human's action).
    ///
    /// # Errors
    ///
    /// `invalid_argument` without a reason; `unknown_alias`, `overlapping_grant`,
    /// `invalid_manifest`, `io`.
    pub fn set_access(
        &self,
        alias: &str,
        access: Access,
        reason: &str,
        actor: &str,
    ) -> Result<Recorded<Grant>> {
        let alias = Alias::new(alias)?;
        self.change(Action::SetAccess, actor, reason, |doc, changelog| {
            let from = find(doc, &alias)?.access;
            set_access_in(doc, &alias, access)?;
            let grant = find(doc, &alias)?.clone();
            changelog.add(doc, &grant, |c| {
                c.from = Some(from);
                c.access = Some(access);
            });
            Ok(grant)
        })
    }

    /// Lift the protection of `lift` and restore that of `restore` for the grant `alias`
    /// (ADR 0016): the human's choice of what a confined command may change among
    /// the paths the human's own tools run later. Lifting gives the agent more, so it needs a
    /// reason.
    ///
    /// # Errors
    ///
    /// `unknown_alias`; `invalid_argument` without a reason, or for a path lifted and
    /// restored at once; `invalid_manifest`, `io`.
    pub fn set_protection(
        &self,
        alias: &str,
        lift: &[LiftedPath],
        restore: &[LiftedPath],
        reason: &str,
        actor: &str,
    ) -> Result<Recorded<Grant>> {
        let alias = Alias::new(alias)?;
        if let Some(both) = lift.iter().find(|l| restore.contains(l)) {
            return Err(Error::InvalidArgument {
                what: Shown::text(both.as_str()),
                why: "a path is either lifted or protected again, not both".into(),
            });
        }
        self.change(Action::Protect, actor, reason, |doc, changelog| {
            let grant = find_mut(doc, &alias)?;
            let allowed = &mut grant.allow_protected;
            allowed.retain(|p| !restore.contains(p));
            for l in lift {
                if !allowed.contains(l) {
                    allowed.push(l.clone());
                }
            }
            allowed.sort();
            let grant = grant.clone();
            changelog.add(doc, &grant, |c| {
                c.allow_protected = Some(grant.allow_protected.clone());
            });
            Ok(grant)
        })
    }

    /// Make the read-write folder grant `alias` direct — confined commands then write its
    /// folder at once, without a layer, and nothing they write waits for the human — or, with
    /// `direct` false, layered again (ADR 0027). Making it direct gives the agent more, so it
    /// needs a reason like every change.
    ///
    /// # Errors
    ///
    /// `unknown_alias`; `invalid_argument` without a reason, or for a grant that is not a
    /// read-write folder; `invalid_manifest`, `io`.
    pub fn set_direct(
        &self,
        alias: &str,
        direct: bool,
        reason: &str,
        actor: &str,
    ) -> Result<Recorded<Grant>> {
        let alias = Alias::new(alias)?;
        self.change(Action::Direct, actor, reason, |doc, changelog| {
            let grant = find_mut(doc, &alias)?;
            if direct {
                can_be_direct(grant.access, grant.toolchain.kind)?;
            }
            grant.direct = direct;
            let grant = grant.clone();
            changelog.add(doc, &grant, |c| c.direct = Some(direct));
            Ok(grant)
        })
    }

    /// Set the grant `alias`'s own hidden paths (ADR 0031): `hide`, patterns hidden beside the
    /// library's default list, and `unhide`, patterns whose paths are shown although a row
    /// hides them. Each list replaces the one the grant had. Showing a secret gives the agent
    /// more, so it needs a reason like every change.
    ///
    /// # Errors
    ///
    /// `unknown_alias`; `invalid_argument` without a reason, for a pattern that is not one
    /// ([`crate::hidden::check_lists`]), or for a grant that is not a folder; `too_large`;
    /// `invalid_manifest`, `io`.
    pub fn set_hidden(
        &self,
        alias: &str,
        hide: &[String],
        unhide: &[String],
        reason: &str,
        actor: &str,
    ) -> Result<Recorded<Grant>> {
        let alias = Alias::new(alias)?;
        crate::hidden::check_lists(hide, unhide)?;
        let unique = |list: &[String]| {
            let mut list = list.to_vec();
            list.sort();
            list.dedup();
            list
        };
        self.change(Action::SetHidden, actor, reason, |doc, changelog| {
            let grant = find_mut(doc, &alias)?;
            check_hidden(grant.toolchain.kind, hide, unhide)?;
            grant.hide = unique(hide);
            grant.unhide = unique(unhide);
            let grant = grant.clone();
            changelog.add(doc, &grant, |c| {
                c.hide = Some(grant.hide.clone());
                c.unhide = Some(grant.unhide.clone());
            });
            Ok(grant)
        })
    }

    /// Revoke a grant: it leaves `folder_access`; the changelog keeps its history.
    ///
    /// # Errors
    ///
    /// `invalid_argument` without a reason; `unknown_alias`, `invalid_manifest`, `io`.
    pub fn revoke(&self, alias: &str, reason: &str, actor: &str) -> Result<Recorded<Grant>> {
        let alias = Alias::new(alias)?;
        self.change(Action::Revoke, actor, reason, |doc, changelog| {
            let grant = find(doc, &alias)?.clone();
            doc.grants.retain(|g| g.alias != alias);
            changelog.add(doc, &grant, |c| {
                c.path = Some(grant.path.clone());
                c.from = Some(grant.access);
            });
            Ok(grant)
        })
    }

    /// Adopt on this host a grant not bound to it — one that names no host (written by
    /// another tool, or restored from elsewhere without one), or one of another host or
    /// machine (a manifest restored here, a state root mounted into a container: the explicit
    /// host mapping, ADR 0005): it gets this host and machine, and an approval time if it has
    /// none (the human's action). Its folder must be at the path it names, and the grant must
    /// keep every grant rule.
    ///
    /// # Errors
    ///
    /// `unknown_alias`; `invalid_argument` without a reason, or when the grant is bound to
    /// this machine already; every folder refusal of [`Grants::add`] for its path, and
    /// `symlink_escape` when that path is not
    /// canonical here; `overlapping_grant`, `invalid_manifest`, `io`.
    pub fn adopt(&self, alias: &str, reason: &str, actor: &str) -> Result<Recorded<Grant>> {
        let alias = Alias::new(alias)?;
        self.change(Action::Adopt, actor, reason, |doc, changelog| {
            let grant = find(doc, &alias)?;
            let here = match &grant.machine {
                Some(machine) => *machine == self.machine,
                None => grant.host.as_deref() == Some(self.host.as_str()),
            };
            if here {
                return Err(Error::InvalidArgument {
                    what: Shown::text(alias.as_str()),
                    why: "the grant is bound to this machine already; only a grant without a \
                          host, or from another machine, can be adopted"
                        .into(),
                });
            }
            self.canonical_as_is(&grant.path, "the grant's path is not canonical here")?;
            let grant = adopt_in(doc, &alias, &self.host, &self.machine)?;
            changelog.add(doc, &grant, |c| {
                c.path = Some(grant.path.clone());
                c.access = Some(grant.access);
            });
            Ok(grant)
        })
    }

    /// File a request for a new or wider grant (what an agent may do). It grants nothing. A
    /// second request for the same alias updates the pending one.
    ///
    /// # Errors
    ///
    /// `invalid_alias`; `relative_path` or `nul_byte` for a proposed path; `invalid_manifest`,
    /// `io`.
    ///
    /// # Security
    ///
    /// Every argument is untrusted. A proposed path is only recorded; it is validated when, and
    /// if, the human approves it.
    pub fn request(
        &self,
        alias: &str,
        access: Access,
        reason: &str,
        path: Option<&Path>,
        actor: &str,
    ) -> Result<Recorded<Request>> {
        let asked = Asked::folder(access, path);
        self.request_toolchain(alias, asked, reason, actor)
    }

    /// [`Grants::request`] for a grant of any kind: a folder, or a tool or a cache with the
    /// variables and bin folder `asked` names (checked as [`Grants::add_with`] checks them).
    ///
    /// # Errors
    ///
    /// As [`Grants::request`], and `invalid_argument` when the toolchain does not fit its
    /// kind.
    pub fn request_toolchain(
        &self,
        alias: &str,
        asked: Asked<'_>,
        reason: &str,
        actor: &str,
    ) -> Result<Recorded<Request>> {
        self.request_unrecorded(alias, asked, reason, actor)
            .map_err(|e| self.audit.refused(Operation::GrantRequest, actor, alias, e))
    }

    fn request_unrecorded(
        &self,
        alias: &str,
        asked: Asked<'_>,
        reason: &str,
        actor: &str,
    ) -> Result<Recorded<Request>> {
        let Asked {
            access,
            path,
            toolchain,
        } = asked;
        let access = toolchain.access(Some(access))?;
        let alias = Alias::new(alias)?;
        if let Some(p) = path {
            AbsPath::normalized(p)?;
            storable(p)?;
        }
        let reason = clean_reason(reason);
        let filed = self.change(Action::Request, actor, &reason, |doc, changelog| {
            // One reading of the clock for the whole change, never before what is recorded.
            let now = doc.clock(std::time::SystemTime::now());
            let expired = doc.drop_expired(now);
            if let Ok(existing) = find(doc, &alias) {
                changes_something(existing, access, path)?;
            }
            // A new id for every version: the human approves the request they read, and an
            // update in between makes that id unknown rather than silently different.
            let asked = Asked {
                access,
                path,
                toolchain: toolchain.clone(),
            };
            let filed = Filed(new_request(&alias, asked, &reason, actor, now), expired);
            // Every filing has its changelog entry, an update too (the manifest's archive keeps
            // a requester re-filing in a loop from growing the manifest).
            match doc.requests.iter().position(|r| r.alias == alias) {
                Some(at) => doc.requests[at] = filed.0.clone(),
                None if doc.requests.len() >= MAX_PENDING_REQUESTS => {
                    return Err(Error::TooLarge {
                        what: "the number of pending requests",
                        limit: MAX_PENDING_REQUESTS as u64,
                    });
                }
                None => doc.requests.push(filed.0.clone()),
            }
            changelog.add(doc, &filed, |c| {
                c.path = filed.0.path.clone();
                c.access = Some(access);
            });
            Ok(filed)
        })?;
        Ok(filed.map(|Filed(request, _)| request))
    }

    /// Approve a pending request (the human's action): with the proposed path, or `path` when
    /// the human gives one. A request for an alias already granted changes its access.
    ///
    /// # Errors
    ///
    /// `not_found` (no such request, or no path), and every error of [`Grants::add`] or
    /// [`Grants::set_access`] (`invalid_argument` without a reason among them).
    pub fn approve(
        &self,
        request_id: &str,
        path: Option<&Path>,
        reason: &str,
        actor: &str,
    ) -> Result<Recorded<Grant>> {
        self.approve_checked(request_id, None, path, reason, actor)
    }

    /// [`Grants::approve`], only if the request still makes the change `seen` spells out
    /// (what the human was shown: [`Proposal`]), checked under the manifest's lock.
    ///
    /// # Errors
    ///
    /// `invalid_argument` when it does not (saying what it would change now); as
    /// [`Grants::approve`] otherwise.
    pub fn approve_seen(
        &self,
        request_id: &str,
        seen: &Seen,
        path: Option<&Path>,
        reason: &str,
        actor: &str,
    ) -> Result<Recorded<Grant>> {
        self.approve_checked(request_id, Some(seen), path, reason, actor)
    }

    /// Every pending request with the change approving it would make now.
    ///
    /// # Errors
    ///
    /// `invalid_manifest`, `io`.
    pub fn proposals(&self) -> Result<Vec<Proposal>> {
        let (_, doc) = self.manifest.load()?;
        let now = std::time::SystemTime::now();
        Ok(doc
            .pending(now)
            .into_iter()
            .map(|r| Proposal::of(r, &doc.grants))
            .collect())
    }

    /// The pending request `request_id` with the change approving it would make now.
    ///
    /// # Errors
    ///
    /// `not_found`, `invalid_manifest`, `io`.
    pub fn proposal(&self, request_id: &str) -> Result<Proposal> {
        self.proposals()?
            .into_iter()
            .find(|p| p.request.id == request_id)
            .ok_or_else(|| Error::NotFound {
                path: Shown::text(request_id),
                why: "no pending request has this id".into(),
            })
    }

    fn approve_checked(
        &self,
        request_id: &str,
        seen: Option<&Seen>,
        path: Option<&Path>,
        reason: &str,
        actor: &str,
    ) -> Result<Recorded<Grant>> {
        // Validate a human-given path before taking the lock.
        let given = path.map(|p| self.canonical_folder(p)).transpose()?;
        let approved = self.change(Action::Approve, actor, reason, |doc, changelog| {
            if let Some(seen) = seen {
                check_seen(doc, request_id, seen, given.as_ref())?;
            }
            let (grant, from, request) =
                self.approving(doc, request_id, given.clone(), Look::Open)?;
            let approved = Approved { grant, request };
            changelog.add(doc, &approved, |c| {
                c.path = Some(approved.grant.path.clone());
                c.from = from;
                c.access = Some(approved.grant.access);
            });
            Ok(approved)
        })?;
        Ok(approved.map(|approved| approved.grant))
    }

    /// Whether approving the request `request_id` — with the folder `chosen` by the human for
    /// a request that names none — would succeed now: the very checks [`Grants::approve`]
    /// makes, on a copy of the grants. Nothing is changed or recorded. Every screen asks this
    /// before it offers to approve ([`Review::standing`]).
    ///
    /// # Errors
    ///
    /// The error approving would give now (`invalid_argument` for a request that names no
    /// folder when none is chosen).
    pub fn approvable(&self, request_id: &str, chosen: Option<&Path>) -> Result<()> {
        let given = chosen.map(|p| self.canonical_folder(p)).transpose()?;
        let (_, mut doc) = self.manifest.load()?;
        self.approving(&mut doc, request_id, given, Look::Open)
            .map(drop)
    }

    /// [`Grants::approvable`] from what is written alone: the request's folder is judged as it
    /// is written (approving would also open it, to check it is canonical and there), so no
    /// path an agent chose is opened, followed or mounted by a list of requests.
    ///
    /// # Errors
    ///
    /// As [`Grants::approvable`], but for what only opening the folder tells.
    pub(crate) fn approvable_as_written(&self, request_id: &str) -> Result<()> {
        let (_, mut doc) = self.manifest.load()?;
        self.approving(&mut doc, request_id, None, Look::AsWritten)
            .map(drop)
    }

    /// Approve the request `request_id` in `doc`, with the folder `given` by the human (else
    /// the one it proposes): the grant as it is then, the access it had before when it
    /// existed, and the request.
    fn approving(
        &self,
        doc: &mut Document,
        request_id: &str,
        given: Option<PathBuf>,
        look: Look,
    ) -> Result<(Grant, Option<Access>, Request)> {
        refuse_expired(doc, request_id)?;
        let request = take_request(doc, request_id)?;
        let folder = match (given, look) {
            (Some(given), _) => Some(given),
            (None, Look::Open) => self.proposed_folder(&request)?,
            (None, Look::AsWritten) => match &request.path {
                Some(path) => {
                    self.rules()
                        .placement(path)
                        .map_err(|why| why.refusal(path))?;
                    Some(path.clone())
                }
                None => None,
            },
        };
        let (grant, from) = self.grant_for(doc, &request, folder)?;
        Ok((grant, from, request))
    }

    /// Apply approving `request` (with `folder`, if any) to `doc`: the grant as it is then,
    /// and the access it had before when it existed.
    fn grant_for(
        &self,
        doc: &mut Document,
        request: &Request,
        folder: Option<PathBuf>,
    ) -> Result<(Grant, Option<Access>)> {
        if let Ok(existing) = find(doc, &request.alias) {
            let existing = existing.clone();
            let grant = widen(doc, &existing, request, folder.as_deref())?;
            return Ok((grant, Some(existing.access)));
        }
        let Some(path) = folder else {
            return Err(Error::InvalidArgument {
                what: Shown::text(&request.id),
                why: "the request names no folder: approve it with a path".into(),
            });
        };
        let kind = request.toolchain.kind;
        let mut grant = self.new_grant(doc, request.alias.clone(), path, request.access, kind)?;
        toolchain::attach(&mut grant, request.toolchain.clone(), &doc.grants)?;
        doc.grants.push(grant.clone());
        Ok((grant, None))
    }

    /// The folder `request` proposes, as the human saw it: it must already be canonical, or a
    /// symbolic link planted by the agent could turn an innocent-looking path into another
    /// folder. The human can always name the folder explicitly instead.
    fn proposed_folder(&self, request: &Request) -> Result<Option<PathBuf>> {
        let Some(proposed) = &request.path else {
            return Ok(None);
        };
        let why = "the proposed folder is not canonical (a symbolic link or `..` leads \
                   elsewhere); approve it with an explicit --path";
        self.canonical_as_is(proposed, why).map(Some)
    }

    /// [`Grants::canonical_folder`] of a path that must already be canonical, as it was
    /// written down: `symlink_escape`, saying `why`, when it leads elsewhere.
    fn canonical_as_is(&self, path: &Path, why: &'static str) -> Result<PathBuf> {
        let canonical = self.canonical_folder(path)?;
        if canonical != path {
            return Err(Error::SymlinkEscape {
                path: Shown::path(path),
                why,
            });
        }
        Ok(canonical)
    }

    /// Deny a pending request (the human's action); the changelog records why.
    ///
    /// # Errors
    ///
    /// `invalid_argument` without a reason; `not_found` when there is no such request;
    /// `invalid_manifest`, `io`.
    pub fn deny(&self, request_id: &str, reason: &str, actor: &str) -> Result<Recorded<Request>> {
        self.deny_where(|r| r.id == request_id, request_id, reason, actor)
    }

    /// Deny whatever request is pending for `alias`, whatever its current id (a requester that
    /// keeps re-filing cannot keep the human from saying no).
    ///
    /// # Errors
    ///
    /// `invalid_alias`; `not_found` when nothing is pending for it; `invalid_manifest`, `io`.
    pub fn deny_alias(&self, alias: &str, reason: &str, actor: &str) -> Result<Recorded<Request>> {
        let alias = Alias::new(alias)?;
        self.deny_where(|r| r.alias == alias, alias.as_str(), reason, actor)
    }

    fn deny_where(
        &self,
        which: impl Fn(&Request) -> bool,
        shown: &str,
        reason: &str,
        actor: &str,
    ) -> Result<Recorded<Request>> {
        self.change(Action::Deny, actor, reason, |doc, changelog| {
            let at = doc
                .requests
                .iter()
                .position(which)
                .ok_or_else(|| Error::NotFound {
                    path: Shown::text(shown),
                    why: "no pending request matches".into(),
                })?;
            let request = doc.requests.remove(at);
            changelog.add(doc, &request, |c| c.access = Some(request.access));
            Ok(request)
        })
    }

    /// A live session over these grants for the human running this process (its operations
    /// are recorded as [`Actor::human`]): every operation sees the manifest as it is then.
    pub fn session(self: &Arc<Self>) -> Session {
        Session::new(Arc::clone(self), Actor::human())
    }

    /// The agent's side of these grants ([`AgentGrants`]), for an agent-facing adapter.
    pub fn agent(self: &Arc<Self>) -> AgentGrants {
        AgentGrants::new(Arc::clone(self))
    }

    /// The grant rules for this state root, manifest and host.
    pub(crate) fn rules(&self) -> rules::Rules<'_> {
        rules::Rules {
            state_root: &self.state_root,
            manifest: self.manifest.path(),
            host: &self.host,
            machine: &self.machine,
        }
    }

    /// Check the folder `path` for a new grant with `access`, as adding or approving would
    /// (absolute, an existing directory, canonical placement, storable, no overlap with the
    /// grants as they are), without changing anything: its canonical path.
    ///
    /// # Errors
    ///
    /// `relative_path`, `nul_byte`, `not_found`, `state_root`, `overlapping_grant`,
    /// `invalid_manifest`, `io`.
    pub fn check_folder(&self, path: &Path, access: Access) -> Result<PathBuf> {
        let canonical = self.canonical_folder(path)?;
        let (_, doc) = self.manifest.load()?;
        rules::collision_new(&canonical, access, &doc.grants)
            .map_err(|why| why.refusal(&canonical))?;
        Ok(canonical)
    }

    /// Validate a folder for a grant and return its canonical path.
    fn canonical_folder(&self, path: &Path) -> Result<PathBuf> {
        AbsPath::new(path)?;
        // The path comes from the human (or a request the human approves): opening it by path,
        // following links, is how it is canonicalized; the kernel says where it landed.
        let dir = Anchor::open_ambient(path, Ambient::because("a folder the human grants"))?;
        let canonical = beneath::location_of(dir.as_fd())?;
        self.rules()
            .placement(&canonical)
            .map_err(|why| why.refusal(&canonical))?;
        storable(&canonical)?;
        Ok(canonical)
    }

    /// A new grant of `kind`, checked against the grants already in `doc`.
    fn new_grant(
        &self,
        doc: &Document,
        alias: Alias,
        path: PathBuf,
        access: Access,
        kind: Kind,
    ) -> Result<Grant> {
        if let Some(other) = doc
            .grants
            .iter()
            .find(|g| g.alias.env_key() == alias.env_key())
        {
            return Err(Error::AliasTaken {
                alias: Shown::text(alias.as_str()),
                why: format!(
                    "already used by grant `{}` (environment key {})",
                    other.alias,
                    alias.env_key()
                ),
            });
        }
        let grant = Grant {
            id: format!("folder_{}", &random_hex()[..16]),
            alias,
            path,
            access,
            created_at: Some(now()),
            host: Some(self.host.clone()),
            machine: Some(self.machine.clone()),
            toolchain: Toolchain::folder(),
            allow_protected: Vec::new(),
            hide: Vec::new(),
            unhide: Vec::new(),
            direct: false,
            other_keys: OtherKeys::new(),
        };
        rules::collision_new_of(&grant.path, access, kind, &doc.grants)
            .map_err(|why| why.refusal(&grant.path))?;
        Ok(grant)
    }

    /// Make one change to the grants or requests, recorded: `apply` changes the manifest's
    /// document under its lock and adds the changelog entry with [`Changelog::add`]; the audit
    /// record of `action` by `actor` is made from what `apply` returns ([`Subject`]). Both go
    /// through [`Manifest::update_recorded`], so every changelog entry has its record.
    ///
    /// # Errors
    ///
    /// Whatever `apply` returns; as [`Manifest::update_recorded`] otherwise.
    fn change<T: Subject>(
        &self,
        action: Action,
        actor: &str,
        reason: &str,
        apply: impl FnOnce(&mut Document, &Changelog<'_>) -> Result<T>,
    ) -> Result<Recorded<T>> {
        if action.is_humans() {
            reason_given(action.event(), action.described(), reason)?;
        }
        let changelog = Changelog {
            action,
            actor,
            reason,
        };
        self.manifest.update_recorded(
            &self.audit,
            |doc| apply(doc, &changelog),
            |value| Record {
                event: action.event().to_owned(),
                actor: actor.to_owned(),
                fields: value.made().fields(reason),
            },
        )
    }
}

/// The changelog entry of the change being made ([`Grants::change`]): its action, who makes
/// it and why.
struct Changelog<'a> {
    action: Action,
    actor: &'a str,
    reason: &'a str,
}

impl Changelog<'_> {
    /// Add to `doc`'s changelog the entry for this change to `subject` (its alias and ids),
    /// with the details `fill` sets. Every change adds one.
    fn add<S: Subject>(&self, doc: &mut Document, subject: &S, fill: impl FnOnce(&mut Change)) {
        let made = subject.made();
        let (grant, request) = made.parts();
        // A filing's entry has the filing's own time (one reading of the clock per change).
        let at = match made {
            Made::Filed(request, _) => request.requested_at.clone(),
            _ => now(),
        };
        let mut change = Change {
            at,
            action: self.action,
            actor: clean_reason(self.actor),
            reason: clean_reason(self.reason),
            alias: made.alias().clone(),
            grant_id: grant.map(|g| g.id.clone()),
            request_id: request.map(|r| r.id.clone()),
            path: None,
            from: None,
            access: None,
            kind: Kind::Folder,
            allow_protected: None,
            direct: None,
            hide: None,
            unhide: None,
            other_keys: OtherKeys::new(),
        };
        fill(&mut change);
        doc.changelog.push(change);
    }
}

/// What a change to the grants made, as its changelog entry and its audit record name it.
#[derive(Clone, Copy)]
enum Made<'a> {
    /// A grant added, changed, revoked or adopted: recorded as `{reason, grant}`.
    Grant(&'a Grant),
    /// A request as an agent filed it, and the pending requests filing it found expired and
    /// dropped: recorded as `{request, expired?}`, whose reason is the request's own.
    Filed(&'a Request, &'a [Request]),
    /// A request the human denied: recorded as `{reason, request}`.
    Denied(&'a Request),
    /// A request the human approved, and the grant as it is then: recorded as
    /// `{reason, request, grant}`.
    Approved(&'a Grant, &'a Request),
}

impl<'a> Made<'a> {
    /// The alias the change concerns.
    fn alias(self) -> &'a Alias {
        match self {
            Made::Grant(grant) | Made::Approved(grant, _) => &grant.alias,
            Made::Filed(request, _) | Made::Denied(request) => &request.alias,
        }
    }

    /// The grant and the request the change concerns, where it concerns them.
    fn parts(self) -> (Option<&'a Grant>, Option<&'a Request>) {
        match self {
            Made::Grant(grant) => (Some(grant), None),
            Made::Filed(request, _) | Made::Denied(request) => (None, Some(request)),
            Made::Approved(grant, request) => (Some(grant), Some(request)),
        }
    }

    /// The audit record's fields, `reason` being the one given for the change.
    fn fields(self, reason: &str) -> serde_json::Value {
        let reason = clean_reason(reason);
        match self {
            Made::Grant(grant) => json!({ "reason": reason, "grant": grant }),
            Made::Filed(request, []) => json!({ "request": request }),
            // The requests the filing found expired and dropped: their expiry is this record
            // (each named, at most MAX_PENDING_REQUESTS of them: the record stays small).
            Made::Filed(request, expired) => {
                let named: Vec<serde_json::Value> = expired
                    .iter()
                    .take(MAX_PENDING_REQUESTS)
                    .map(
                        |r| json!({ "id": r.id, "alias": r.alias, "requested_at": r.requested_at }),
                    )
                    .collect();
                json!({ "request": request, "expired": named, "expired_count": expired.len() })
            }
            Made::Denied(request) => json!({ "reason": reason, "request": request }),
            Made::Approved(grant, request) => {
                json!({ "reason": reason, "request": request, "grant": grant })
            }
        }
    }
}

/// What a change to the grants returns ([`Grants::change`]): it says what the change made.
trait Subject {
    /// What the change made, for its changelog entry and its audit record.
    fn made(&self) -> Made<'_>;
}

impl Subject for Grant {
    fn made(&self) -> Made<'_> {
        Made::Grant(self)
    }
}

/// A request the human denied.
impl Subject for Request {
    fn made(&self) -> Made<'_> {
        Made::Denied(self)
    }
}

/// A request as an agent filed it.
struct Filed(Request, Vec<Request>);

impl Subject for Filed {
    fn made(&self) -> Made<'_> {
        Made::Filed(&self.0, &self.1)
    }
}

/// A request the human approved, and the grant as it is then.
struct Approved {
    grant: Grant,
    request: Request,
}

impl Subject for Approved {
    fn made(&self) -> Made<'_> {
        Made::Approved(&self.grant, &self.request)
    }
}

/// Every change the human makes says why: the changelog (and the audit log) is what the human
/// reads later to know why an agent may use a folder, or may no longer. The one rule, for
/// every caller (the command line, the page, a gateway of the human's): a human change whose
/// reason is empty once cleaned ([`clean_reason`]) is refused, and nothing changes.
pub(crate) fn reason_given(event: &str, change: &str, reason: &str) -> Result<()> {
    if !clean_reason(reason).is_empty() {
        return Ok(());
    }
    Err(Error::InvalidArgument {
        what: Shown::text(event),
        why: format!(
            "every change of yours is recorded with why, and this {change} gives no reason: give \
             one (add --reason '…' to the command line, which only a terminal asks for; the note \
             on the page)"
        ),
    })
}

/// Refuse the request `request_id` if it expired: the agent can ask again.
fn refuse_expired(doc: &Document, request_id: &str) -> Result<()> {
    let now = std::time::SystemTime::now();
    match doc.requests.iter().find(|r| r.id == request_id) {
        Some(r) if doc.expired(r, now) => Err(Error::NotFound {
            path: Shown::text(request_id),
            why: "the request expired before it was approved; the agent can ask again".into(),
        }),
        _ => Ok(()),
    }
}

/// Refuse unless the request `request_id` still makes the change `seen` spells out (with the
/// folder the human gave, if any). An unknown request is left for the caller to refuse.
fn check_seen(
    doc: &Document,
    request_id: &str,
    seen: &Seen,
    given: Option<&PathBuf>,
) -> Result<()> {
    let request = doc.requests.iter().find(|r| r.id == request_id);
    match request.map(|r| Proposal::of(r, &doc.grants)) {
        Some(proposal) => seen.check(&proposal, given),
        None => Ok(()),
    }
}

/// The grant with `alias`.
fn find<'d>(doc: &'d Document, alias: &Alias) -> Result<&'d Grant> {
    doc.grants
        .iter()
        .find(|g| &g.alias == alias)
        .ok_or_else(|| Error::UnknownAlias {
            alias: Shown::text(alias.as_str()),
        })
}

/// The grant with `alias`, to change.
fn find_mut<'d>(doc: &'d mut Document, alias: &Alias) -> Result<&'d mut Grant> {
    doc.grants
        .iter_mut()
        .find(|g| &g.alias == alias)
        .ok_or_else(|| Error::UnknownAlias {
            alias: Shown::text(alias.as_str()),
        })
}

/// Approve `request` for the alias `existing` already has: its access changes, on the same
/// folder (a request can never move an alias to another folder).
fn widen(
    doc: &mut Document,
    existing: &Grant,
    request: &Request,
    folder: Option<&Path>,
) -> Result<Grant> {
    if existing.access == request.access {
        return Err(unchanged(existing, request.access));
    }
    if let Some(folder) = folder.filter(|f| moves(existing, f)) {
        return Err(Error::AliasTaken {
            alias: Shown::text(request.alias.as_str()),
            why: format!(
                "already granted for {}, not for {}",
                Shown::path(&existing.path),
                Shown::path(folder)
            ),
        });
    }
    set_access_in(doc, &request.alias, request.access)?;
    Ok(find(doc, &request.alias)?.clone())
}

/// How approving looks at a request's folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Look {
    /// Open it (following links): it must be canonical and there.
    Open,
    /// Judge it as written, opening nothing.
    AsWritten,
}

/// A request for the grant `existing` must change it, and can change only its access: one
/// asking for the access it has would be approved to no effect, and one naming another folder
/// cannot move the grant (`invalid_argument`, saying what to ask instead).
fn changes_something(existing: &Grant, access: Access, path: Option<&Path>) -> Result<()> {
    if let Some(path) = path.filter(|p| moves(existing, p)) {
        return Err(Error::InvalidArgument {
            what: Shown::text(existing.alias.as_str()),
            why: format!(
                "the grant is for {}, not for {}: a request cannot move a grant; ask for the \
                 other folder under a new alias",
                Shown::path(&existing.path),
                Shown::path(path)
            ),
        });
    }
    if existing.access == access {
        return Err(unchanged(existing, access));
    }
    Ok(())
}

/// Whether `folder` (as written: its text, normalized) is not the folder of `existing`.
fn moves(existing: &Grant, folder: &Path) -> bool {
    AbsPath::normalized(folder)
        .ok()
        .is_none_or(|p| p.as_path() != existing.path)
}

/// The refusal of a change to `existing` that gives it the access it has.
fn unchanged(existing: &Grant, access: Access) -> Error {
    Error::InvalidArgument {
        what: Shown::text(existing.alias.as_str()),
        why: format!("the grant already has {access} access: the request would change nothing"),
    }
}

/// Give the grant `alias` this `host`, and an approval time if it has none; checked against
/// the other grants.
fn adopt_in(doc: &mut Document, alias: &Alias, host: &str, machine: &str) -> Result<Grant> {
    let grant = find_mut(doc, alias)?;
    grant.host = Some(host.to_owned());
    grant.machine = Some(machine.to_owned());
    grant.created_at.get_or_insert_with(now);
    let grant = grant.clone();
    check_overlaps(&grant, &doc.grants)?;
    Ok(grant)
}

fn set_access_in(doc: &mut Document, alias: &Alias, access: Access) -> Result<()> {
    let grant = find_mut(doc, alias)?;
    grant.access = grant.toolchain.kind.access(Some(access))?;
    let grant = grant.clone();
    check_overlaps(&grant, &doc.grants)
}

fn take_request(doc: &mut Document, id: &str) -> Result<Request> {
    let at = doc
        .requests
        .iter()
        .position(|r| r.id == id)
        .ok_or_else(|| Error::NotFound {
            path: Shown::text(id),
            why: "no pending request has this id".into(),
        })?;
    Ok(doc.requests.remove(at))
}

/// Refuse `changed` (the grant being made or changed, a member of `all`) when it overlaps
/// another grant in either direction ([`rules::collision`]), naming the grant that was there.
/// Overlaps among the others were there before this change: they make those grants unusable
/// ([`rules::Rules::usable`]), not this change impossible.
fn check_overlaps(changed: &Grant, all: &[Grant]) -> Result<()> {
    rules::collision(changed, all).map_err(|why| why.refusal(&changed.path))
}

/// Refuse `--direct` for a grant that is not a read-write folder: only such a grant has a layer
/// to do without (ADR 0027).
///
/// # Errors
///
/// `invalid_argument`.
pub fn can_be_direct(access: Access, kind: Kind) -> Result<()> {
    if access == Access::ReadWrite && kind.is_folder() {
        Ok(())
    } else {
        Err(Error::InvalidArgument {
            what: Shown::text("direct"),
            why: "only a read-write folder grant can be written directly".into(),
        })
    }
}

/// A path must be UTF-8 to be stored in the (JSON) manifest exactly.
fn storable(path: &Path) -> Result<()> {
    let why = match path.to_str() {
        None => "this path is not UTF-8, so a JSON manifest cannot hold it",
        Some(text) if text.chars().any(char::is_control) => "this path holds control characters",
        Some(_) => return Ok(()),
    };
    Err(Error::InvalidManifest {
        path: Shown::path(path),
        why: why.to_owned(),
    })
}

/// A new version of a request, with an id of its own.
fn new_request(
    alias: &Alias,
    asked: Asked<'_>,
    reason: &str,
    actor: &str,
    at: std::time::SystemTime,
) -> Request {
    Request {
        id: format!("req_{}", &random_hex()[..16]),
        alias: alias.clone(),
        access: asked.access,
        reason: reason.to_owned(),
        path: asked.path.map(Path::to_path_buf),
        requested_at: humantime::format_rfc3339_seconds(at).to_string(),
        requested_by: Some(actor.to_owned()),
        toolchain: asked.toolchain,
        other_keys: OtherKeys::new(),
    }
}

/// The current time, RFC 3339 to the second.
fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// This machine's identity as grants record it: a digest of `/etc/machine-id` (or the D-Bus
/// copy), which is meant to stay private, so only a digest is stored; the host name where
/// neither exists.
fn this_machine() -> String {
    let read = |dir: &str| -> Option<String> {
        let why = Ambient::because("the machine's identity, from the system");
        let dir = Anchor::open_ambient(Path::new(dir), why).ok()?;
        let fd = dir
            .open_read(RelPath::new("machine-id").ok()?, beneath::Symlinks::Beneath)
            .ok()?;
        let mut text = String::new();
        let file = std::io::Read::take(std::fs::File::from(fd), 256);
        std::io::Read::read_to_string(&mut { file }, &mut text).ok()?;
        Some(text.trim().to_owned()).filter(|id| !id.is_empty())
    };
    let id = read("/etc")
        .or_else(|| read("/var/lib/dbus"))
        .unwrap_or_else(this_host);
    let digest = crate::digest::sha256_hex(format!("safe-lanes machine {id}").as_bytes());
    digest[..32].to_owned()
}

/// This host's name (`uname -n`).
fn this_host() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}
