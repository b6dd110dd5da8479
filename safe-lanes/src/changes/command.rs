//! The layers of one confined command: a change set over its read-write grants, begun before
//! the command starts and decided when it ends; and the recovery of sets whose process died.

use std::path::{Path, PathBuf};

use super::Summary;
use super::journal;
use super::plan::{self, Mode};
use super::rule::{Facts, Kind, Rule, Why, home_prefix};
use super::scan::{self, Item, ItemKind, LayerFacts, Put};
use super::set::{LayerMeta, Meta, OpenSet, Origin, State, Store};
use crate::beneath::Anchor;
use crate::error::Result;
use crate::grants::{Access, Effective, Session, Snapshot};

/// A command's change set: one layer per read-write grant, locked while it lives.
#[derive(Debug)]
pub(crate) struct Layers {
    set: OpenSet,
    layers: Vec<Layer>,
}

/// One layer: the grant it is over, and its directories.
#[derive(Debug)]
pub(crate) struct Layer {
    /// The grant's folder, as the session checked it (the overlay's lower layer).
    pub(crate) folder: Anchor,
    /// The grant's path.
    pub(crate) path: PathBuf,
    /// The paths the human lifted for it.
    lifted: Vec<PathBuf>,
    /// `layers/<n>/upper` and its path.
    pub(crate) upper: (Anchor, PathBuf),
    /// `layers/<n>/work` and its path.
    pub(crate) work: (Anchor, PathBuf),
}

impl Layers {
    /// Begin the change set of a command that `origin` describes, over `grants` (its
    /// read-write folder grants that are not `--direct`), after finishing what dead processes
    /// left.
    ///
    /// # Errors
    ///
    /// `insecure_root`, `io`: the command must then not run.
    pub(crate) fn begin(session: &Session, origin: Origin, grants: &[&Effective]) -> Result<Self> {
        let store = session.grants().changes()?;
        recover(store, session);
        let metas = grants
            .iter()
            .map(|g| LayerMeta {
                grant: g.id.clone(),
                alias: g.alias.to_string(),
                path: g.path.clone(),
            })
            .collect();
        let set = store.begin(origin, metas)?;
        let mut layers = Vec::new();
        for (n, g) in grants.iter().enumerate() {
            layers.push(Layer {
                folder: g.folder()?.try_clone()?,
                path: g.path.clone(),
                lifted: lifted(g),
                upper: set.upper(n)?,
                work: set.work(n)?,
            });
        }
        Ok(Self { set, layers })
    }

    /// Whether every layer's grant is still, in `session`, the read-write grant of the same
    /// folder it was when the command began.
    fn still_granted(&self, session: &Session) -> bool {
        let Ok(snapshot) = session.snapshot() else {
            return false;
        };
        self.set.meta.layers.iter().all(|l| {
            snapshot.grants.iter().any(|g| {
                g.id == l.grant
                    && g.path == l.path
                    && g.access == Access::ReadWrite
                    && !g.direct
                    && g.is_available()
            })
        })
    }

    /// The set's id.
    pub(crate) fn id(&self) -> &str {
        &self.set.meta.id
    }

    /// The layers, in order.
    pub(crate) fn layers(&self) -> &[Layer] {
        &self.layers
    }

    /// Decide and publish what the command left (it has ended: its overlays are gone with its
    /// mount namespace), in `session`: a layer whose grant was revoked, narrowed or moved
    /// meanwhile is held whole. Never fails: what cannot be done now is said in the summary and
    /// left for the next process.
    pub(crate) fn finish(self, session: &Session) -> Summary {
        let set = &self.set;
        let id = set.meta.id.clone();
        let folders: Vec<Option<Anchor>> = self
            .layers
            .iter()
            .map(|l| l.folder.try_clone().ok())
            .collect();
        let rules: Vec<Rule<'_>> = self
            .layers
            .iter()
            .map(|l| Rule::new(&l.path, home_prefix(&l.path), &l.lifted))
            .collect();
        let facts: Vec<LayerFacts<'_>> = self
            .layers
            .iter()
            .map(|l| LayerFacts {
                upper: &l.upper.0,
                folder: &l.folder,
            })
            .collect();
        let mut mode = if self.still_granted(session) {
            Mode::Rule
        } else {
            Mode::HoldAll(Why::Revoked)
        };
        let mut scanned = Vec::new();
        for l in &self.layers {
            match scan::scan(&l.upper.0, &l.folder, set.meta.t0) {
                Ok(items) => scanned.push(items),
                Err(e) => {
                    tracing::warn!(error = %e, "a command's changes could not be read whole: held");
                    mode = Mode::HoldAll(Why::Interrupted);
                    scanned.push(rough(&l.upper.0, Some(&l.folder)));
                }
            }
        }
        if scanned.iter().all(Vec::is_empty) {
            // Nothing changed: no set, no record.
            let _ = set.remove();
            return Summary::default();
        }
        decide_and_run(set, &rules, &facts, scanned, mode, &folders)
            .unwrap_or_else(|e| Summary::unfinished(&id, &e.to_string()))
    }
}

/// The paths the human lifted for `grant`.
pub(crate) fn lifted(grant: &Effective) -> Vec<PathBuf> {
    grant
        .allow_protected
        .iter()
        .map(|l| l.as_path().to_owned())
        .collect()
}

/// Decide `scanned` (one list of changes per layer) as `mode` says, write the journal, do it.
fn decide_and_run(
    set: &OpenSet,
    rules: &[Rule<'_>],
    facts: &[impl Facts],
    scanned: Vec<Vec<Item>>,
    mode: Mode,
    folders: &[Option<Anchor>],
) -> Result<Summary> {
    let offset = set.audit().end()?;
    let layers = scanned
        .into_iter()
        .enumerate()
        .map(|(n, items)| plan::Layer {
            index: n,
            alias: &set.meta.layers[n].alias,
            rule: &rules[n],
            facts: &facts[n],
            items,
        })
        .collect();
    let decided = plan::decide(&set.meta, layers, mode, offset);
    set.write_journal(&decided.journal)?;
    let ran = journal::run(set, &decided.journal, folders)?;
    let mut held = decided.journal.held.clone();
    held.extend(ran.late.iter().cloned());
    let published = decided.published.saturating_sub(ran.late.len() as u64);
    Ok(Summary::of(&set.meta.id, published, decided.dropped, &held))
}

/// The changes of a layer that cannot be read whole, roughly: each entry at its top, as it is.
/// Only ever held.
fn rough(upper: &Anchor, folder: Option<&Anchor>) -> Vec<Item> {
    let Ok(entries) = upper.entries() else {
        return Vec::new();
    };
    entries
        .into_iter()
        .map(|(name, st)| {
            let path = PathBuf::from(&name);
            let before = folder
                .and_then(|f| scan::lstat_rel(f, &path).ok().flatten())
                .map(|st| (scan::kind_of(&st), scan::Fingerprint::of(&st)));
            let kind = match scan::kind_of(&st) {
                Kind::Dir => ItemKind::NewDir,
                Kind::Other if st.st_rdev == 0 => ItemKind::Delete {
                    below: Vec::new(),
                    too_large: false,
                },
                Kind::Other => ItemKind::Put(Put::Special),
                _ => ItemKind::Put(Put::File { mode: 0 }),
            };
            Item {
                path,
                kind,
                carried: false,
                before,
                meanwhile: false,
                layer: Some(scan::Fingerprint::of(&st)),
            }
        })
        .collect()
}

/// The folder of each layer of `meta` in `snapshot`: its grant, still read-write and at the
/// same path; `None` for one that is gone.
fn folders_of(meta: &Meta, snapshot: &Snapshot) -> Vec<Option<Anchor>> {
    meta.layers
        .iter()
        .map(|l| {
            snapshot
                .grants
                .iter()
                .find(|g| g.id == l.grant && g.path == l.path && g.access == Access::ReadWrite)
                .and_then(|g| g.folder().ok())
                .and_then(|f| f.try_clone().ok())
        })
        .collect()
}

/// Finish or hold, as each one's files say, the sets whose process died (`set`'s module
/// docs). What fails is left for the next process.
pub(crate) fn recover(store: &Store, session: &Session) {
    let Ok(states) = store.states() else { return };
    let session = &session.unnarrowed();
    for (id, state) in states {
        let done = match state {
            State::Working | State::Waiting => continue,
            State::Broken => {
                store.remove_broken(&id);
                continue;
            }
            State::Unfinished | State::Interrupted => store
                .take(&id)
                .and_then(|set| recover_one(&set, state, session)),
        };
        if let Err(e) = done {
            tracing::warn!(set = %id, error = %e, "could not finish a change set a dead process left");
        }
    }
}

fn recover_one(set: &OpenSet, state: State, session: &Session) -> Result<()> {
    let snapshot = session.snapshot()?;
    let folders = folders_of(&set.meta, &snapshot);
    if state == State::Unfinished {
        if let Some(journal) = set.journal()? {
            journal::run(set, &journal, &folders)?;
        }
        return Ok(());
    }
    // Interrupted: everything it wrote is held.
    let lifted: Vec<Vec<PathBuf>> = set
        .meta
        .layers
        .iter()
        .map(|l| {
            snapshot
                .grants
                .iter()
                .find(|g| g.id == l.grant)
                .map(lifted)
                .unwrap_or_default()
        })
        .collect();
    let rules: Vec<Rule<'_>> = set
        .meta
        .layers
        .iter()
        .zip(&lifted)
        .map(|(l, lifted)| Rule::new(&l.path, home_prefix(&l.path), lifted))
        .collect();
    let mut uppers = Vec::new();
    for n in 0..set.meta.layers.len() {
        uppers.push(set.upper(n)?.0);
    }
    let mut scanned = Vec::new();
    let mut facts: Vec<Box<dyn Facts>> = Vec::new();
    for (n, upper) in uppers.iter().enumerate() {
        match &folders[n] {
            Some(folder) => {
                scanned.push(
                    scan::scan(upper, folder, set.meta.t0)
                        .unwrap_or_else(|_| rough(upper, Some(folder))),
                );
                facts.push(Box::new(LayerFacts { upper, folder }));
            }
            None => {
                scanned.push(rough(upper, None));
                facts.push(Box::new(Unknown));
            }
        }
    }
    let facts: Vec<&dyn Facts> = facts.iter().map(AsRef::as_ref).collect();
    decide_and_run(
        set,
        &rules,
        &facts,
        scanned,
        Mode::HoldAll(Why::Interrupted),
        &folders,
    )?;
    Ok(())
}

/// Facts of a folder that cannot be looked at: everything unknown.
struct Unknown;

impl Facts for Unknown {
    fn before(&self, _: &Path) -> Option<Kind> {
        Some(Kind::Other)
    }
    fn after(&self, _: &Path) -> Option<Kind> {
        Some(Kind::Other)
    }
    fn before_bytes(&self, _: &Path) -> Option<Vec<u8>> {
        None
    }
    fn after_bytes(&self, _: &Path) -> Option<Vec<u8>> {
        None
    }
}

impl<T: Facts + ?Sized> Facts for &T {
    fn before(&self, rel: &Path) -> Option<Kind> {
        (**self).before(rel)
    }
    fn after(&self, rel: &Path) -> Option<Kind> {
        (**self).after(rel)
    }
    fn before_bytes(&self, rel: &Path) -> Option<Vec<u8>> {
        (**self).before_bytes(rel)
    }
    fn after_bytes(&self, rel: &Path) -> Option<Vec<u8>> {
        (**self).after_bytes(rel)
    }
}
