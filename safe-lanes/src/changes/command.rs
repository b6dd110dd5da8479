//! The layers of one confined command: a change set over its read-write grants, begun before
//! the command starts (each layer an overlay the sandbox mounts) and decided when it ends.

use std::path::PathBuf;

use super::Summary;
use super::finish::{decide_and_run, lifted, recover, rough};
use super::plan::Mode;
use super::rule::{Rule, Why};
use super::scan::{self, LayerFacts};
use super::set::{LayerMeta, OpenSet, Origin};
use crate::beneath::Anchor;
use crate::error::Result;
use crate::grants::{Access, Effective, Session};

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
    /// What it hides.
    hidden: crate::hidden::Hidden,
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
                hidden: g.hidden(),
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
            .map(|l| Rule::for_grant(&l.path, &l.lifted).hiding(l.hidden.clone()))
            .collect();
        let facts: Vec<LayerFacts<'_>> = self
            .layers
            .iter()
            .map(|l| LayerFacts::new(&l.upper.0, &l.folder))
            .collect();
        let mut mode = if self.still_granted(session) {
            Mode::Rule
        } else {
            Mode::HoldAll(Why::Revoked)
        };
        let mut scanned = Vec::new();
        let mut unread = false;
        for l in &self.layers {
            match scan::scan(&l.upper.0, &l.folder, set.meta.t0) {
                Ok(items) => scanned.push(items),
                Err(e) => {
                    tracing::warn!(error = %e, "a command's changes could not be read whole: held");
                    mode = Mode::HoldAll(Why::Interrupted);
                    unread = true;
                    scanned.push(rough(&l.upper.0, Some(&l.folder)));
                }
            }
        }
        if scanned.iter().all(Vec::is_empty) {
            if unread {
                // Not even the layers' tops could be read: the set stays for the next process.
                return Summary::unfinished(&id, "its changes could not be read");
            }
            // Nothing changed: no set, no record.
            let _ = set.remove();
            return Summary::default();
        }
        decide_and_run(set, &rules, &facts, scanned, mode, &folders)
            .unwrap_or_else(|e| Summary::unfinished(&id, &e.to_string()))
    }
}
