//! What a change set whose command has ended comes to: its changes decided by the rule and
//! the journal run ([`decide_and_run`]), here when the command ends or, for a set whose process
//! died, in the next process ([`recover`]).

use std::path::{Path, PathBuf};

use super::Summary;
use super::journal;
use super::plan::{self, Mode};
use super::rule::{Facts, Kind, Rule, Why};
use super::scan::{self, Below, Item, ItemKind, LayerFacts, Put};
use super::set::{LayerMeta, Meta, OpenSet, State, Store};
use crate::beneath::Anchor;
use crate::error::{Error, Result, Shown};
use crate::grants::{Access, Effective, Session, Snapshot};
use crate::input::Name;

/// The paths the human lifted for `grant`.
pub(crate) fn lifted(grant: &Effective) -> Vec<PathBuf> {
    grant
        .allow_protected
        .iter()
        .map(|l| l.as_path().to_owned())
        .collect()
}

/// Decide `scanned` (one list of changes per layer) as `mode` says, write the journal, do it.
pub(crate) fn decide_and_run(
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
/// Only ever held; applying one that would replace a directory of the folder whole is refused
/// ([`super::HeldChanges::apply`]).
pub(crate) fn rough(upper: &Anchor, folder: Option<&Anchor>) -> Vec<Item> {
    let Ok(entries) = upper.entries() else {
        return Vec::new();
    };
    entries
        .into_iter()
        .map(|(name, st)| {
            let path = PathBuf::from(&name);
            let found = folder.and_then(|f| scan::lstat_rel(f, &path).ok().flatten());
            let before = found
                .as_ref()
                .map(|st| (scan::kind_of(st), scan::Fingerprint::of(st)));
            let kind = match scan::kind_of(&st) {
                _ if scan::is_whiteout(&st) => ItemKind::Delete,
                Kind::Dir => ItemKind::NewDir,
                Kind::Other => ItemKind::Put(Put::Special),
                _ => ItemKind::Put(Put::File { mode: 0 }),
            };
            // What of the folder's a removal, or a non-directory in place of a directory,
            // takes away: each path judged, or all of it held when it cannot be read.
            let removes = match (&kind, folder, &before) {
                (ItemKind::NewDir, ..) | (_, None, _) => None,
                (_, Some(f), Some((Kind::Dir, _))) => Some(
                    Name::new(&name)
                        .and_then(|n| scan::below(f, &path, n, (0, 0)))
                        .map_or_else(
                            |_| Below {
                                paths: Vec::new(),
                                too_large: true,
                            },
                            |(below, _)| below,
                        ),
                ),
                _ => None,
            };
            Item {
                path,
                kind,
                carried: false,
                before,
                meanwhile: false,
                layer: Some(scan::Fingerprint::of(&st)),
                removes,
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
            layer_grant(snapshot, l)
                .ok()
                .and_then(|g| g.folder().ok())
                .and_then(|f| f.try_clone().ok())
        })
        .collect()
}

/// The grant `layer` is over, in `snapshot`, while it is the same read-write grant of the
/// same folder: what a set's changes may be published into.
///
/// # Errors
///
/// `revoked` when it is gone or its folder moved, `read_only` when it is read-only now.
pub(crate) fn layer_grant<'s>(snapshot: &'s Snapshot, layer: &LayerMeta) -> Result<&'s Effective> {
    let alias = || Shown::text(&layer.alias);
    let grant = snapshot
        .grants
        .iter()
        .find(|g| g.id == layer.grant && g.path == layer.path)
        .ok_or_else(|| Error::Revoked { alias: alias() })?;
    match grant.access {
        Access::ReadWrite => Ok(grant),
        _ => Err(Error::ReadOnly { alias: alias() }),
    }
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
        .map(|(l, lifted)| Rule::for_grant(&l.path, lifted))
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
                facts.push(Box::new(LayerFacts::new(upper, folder)));
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
