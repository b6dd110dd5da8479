//! Change sets: what a confined command (or a patch) changed in a read-write grant, and what
//! of it reaches the folder.
//!
//! A list of protected paths fixed before a command cannot cover what the command actually
//! writes — at any depth, created while it runs. So a command never writes the human's folder
//! directly. Each read-write grant is shown to it as an overlay: the folder as the read-only
//! lower layer, and an upper layer of the command's own under the state root
//! (`<root>/changes/<set>/layers/<n>/upper`). The command reads the folder with its own
//! writes on top; nothing reaches the folder while it runs.
//!
//! When it ends, its changes are read from the upper layers (`scan`), each is judged by
//! the one rule (`rule::Rule::judge`: published, held for the human, or dropped), and a
//! journal that publishes the rest is written and done (`journal`): new entries moved into
//! the folder by one `renameat2` each (a new directory tree in one), rewritten files swapped
//! in atomically, removals last — the folder's entries checked, at each step, to still be what
//! they were, so the human's edits are never overwritten. A gateway killed at any instant
//! leaves the journal for the next process, which finishes it; one killed before deciding
//! leaves a set that the next process holds whole. Each set leaves exactly one record:
//! `change.published` (nothing held) or `change.held`.
//!
//! What is held waits in `<root>/changes/<set>/held/` for the human: [`HeldChanges`] lists
//! the sets, shows each change (with a diff for text) and a digest of what it showed, applies
//! exactly what was shown (the digest binds it) or discards it — `safe-lanes changes`, and the
//! page's "Held changes" tab. `folder_patch` goes through the same rule (`patch::hold`).
//!
//! A grant the human marked `--direct` has no layer: its writes land at once, and only the
//! sandbox's own rules hold (ADR 0027).

mod around;
#[cfg(target_os = "linux")]
pub(crate) mod command;
mod copy;
pub(crate) mod finish;
mod gitconfig;
mod human;
pub(crate) mod journal;
pub(crate) mod patch;
pub(crate) mod plan;
pub(crate) mod rule;
pub(crate) mod scan;
pub(crate) mod set;
mod stored;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use human::{ChangeReview, Decided, HeldChanges, HeldSet, HeldView, SetReview};
pub use rule::Why;

/// What kind of change a path underwent, in the words listings use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ChangeWord {
    /// A new file or directory.
    Created,
    /// A file rewritten, or an entry replaced by another kind.
    Modified,
    /// Removed.
    Deleted,
    /// A directory's permission bits changed.
    Mode,
    /// A symbolic link made or changed.
    Link,
}

impl ChangeWord {
    /// The word, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeWord::Created => "created",
            ChangeWord::Modified => "modified",
            ChangeWord::Deleted => "deleted",
            ChangeWord::Mode => "mode",
            ChangeWord::Link => "link",
        }
    }
}

/// One held change, as a set keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HeldEntry {
    /// The grant's alias.
    pub(crate) grant: String,
    /// Its layer in the set.
    pub(crate) layer: usize,
    /// Relative to the grant's folder.
    #[serde(with = "stored")]
    pub(crate) path: PathBuf,
    /// What kind of change.
    pub(crate) change: ChangeWord,
    /// Why it is held.
    pub(crate) why: Why,
    /// What exactly, in words.
    pub(crate) what: String,
    /// For a held mode change, the mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) mode: Option<u32>,
}

/// One held change, as a command's result names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct HeldPath {
    /// The path, relative to the grant's folder.
    pub path: String,
    /// Why it is held: `git_state`, `tool_config`, `agent_config`, `editor_config`,
    /// `start_up`, `link_outside`, `conflict`, `interrupted` or `revoked`.
    pub why: Why,
    /// The grant's alias.
    pub grant: String,
}

impl From<&HeldEntry> for HeldPath {
    fn from(h: &HeldEntry) -> Self {
        Self {
            path: h.path.to_string_lossy().into_owned(),
            why: h.why,
            grant: h.grant.clone(),
        }
    }
}

/// What became of a command's (or a patch's) changes to its read-write grants.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct Summary {
    /// How many changes were published into the folders.
    pub published: u64,
    /// The changes held for the human, each with its path, grant and reason. They are not in
    /// the folder: tell the user, who reviews them with `safe-lanes changes show <set>`.
    pub held: Vec<HeldPath>,
    /// The id of the held change set, when something is held.
    pub set: Option<String>,
    /// How many changes were dropped: set-id files, devices, FIFOs, sockets are never
    /// created.
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped: u64,
    /// What was held and how the human applies it, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Summary {
    /// The summary of a set: `published` and `dropped` counted, `held` kept in `set`.
    pub(crate) fn of(set: &str, published: u64, dropped: u64, held: &[HeldEntry]) -> Self {
        let note = (!held.is_empty()).then(|| {
            let mut whys: Vec<&str> = held.iter().map(|h| h.why.as_str()).collect();
            whys.sort_unstable();
            whys.dedup();
            format!(
                "{} change{} held for the human ({}): not in the folder. The human reviews them \
                 with `safe-lanes changes show {set}` and applies them with `safe-lanes changes \
                 apply {set} --digest … --reason …` (or on the approval page, \"Held changes\").",
                held.len(),
                if held.len() == 1 { " is" } else { "s are" },
                whys.join(", ")
            )
        });
        Self {
            published,
            held: held.iter().map(HeldPath::from).collect(),
            set: (!held.is_empty()).then(|| set.to_owned()),
            dropped,
            note,
        }
    }

    /// The summary of a publish that could not finish now: `why`, and that the next process
    /// finishes it.
    #[cfg(target_os = "linux")]
    pub(crate) fn unfinished(set: &str, why: &str) -> Self {
        Self {
            set: Some(set.to_owned()),
            note: Some(format!(
                "the changes could not be published now ({why}); they wait in change set {set}, \
                 which the next confined command or `safe-lanes changes` finishes"
            )),
            ..Self::default()
        }
    }
}
