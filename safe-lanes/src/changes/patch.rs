//! `folder_patch` through the same rule: a patch to a path the rule holds is not applied but
//! held for the human, in a change set of its own.

use std::path::Path;

use super::journal::{self, Journal};
use super::plan::record;
use super::rule::{After, Change, Facts, Kind, Rule, Verdict};
use super::scan::{LayerFacts, lstat_rel, read_rel};
use super::set::{HELD_DIR, LayerMeta, Origin};
use super::{ChangeWord, HeldEntry, Summary};
use crate::beneath::{Anchor, Publish, Symlinks};
use crate::error::Result;
use crate::grants::{Effective, Session};
use crate::input::{Name, RelPath};

/// What a patch would leave at its file: its new text and mode, or nothing (a removal).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Patching<'a> {
    Write { text: &'a [u8], mode: u32 },
    Remove,
}

/// What the rule says of a patch of `grant`'s `file` (relative, normal) to `patching`.
pub(crate) fn verdict(grant: &Effective, file: &Path, patching: Patching<'_>) -> Result<Verdict> {
    let folder = grant.folder()?;
    let lifted = super::finish::lifted(grant);
    let rule = Rule::for_grant(&grant.path, &lifted).hiding(grant.hidden());
    let facts = PatchFacts {
        folder,
        before: LayerFacts::new(folder, folder),
        file,
        patching,
    };
    let after = match patching {
        Patching::Write { mode, .. } => After::File { mode },
        Patching::Remove => After::Gone,
    };
    Ok(rule.judge(
        &Change {
            path: file,
            after,
            meanwhile: false,
        },
        &facts,
    ))
}

/// Hold a patch of `grant`'s `file` to `patching` for the human (the rule said `why` and
/// `what`): a change set with the new file in its held part, recorded as `change.held`.
///
/// # Errors
///
/// `insecure_root`, `io`; nothing is left.
pub(crate) fn hold(
    session: &Session,
    grant: &Effective,
    file: &Path,
    patching: Patching<'_>,
    held: (super::Why, String),
) -> Result<Summary> {
    let store = session.grants().changes()?;
    let origin = Origin {
        op: "patch".into(),
        command: format!("folder_patch {}:{}", grant.alias, file.display()),
        actor: session.actor().to_string(),
    };
    let set = store.begin(
        origin,
        vec![LayerMeta {
            grant: grant.id.clone(),
            alias: grant.alias.to_string(),
            path: grant.path.clone(),
        }],
    )?;
    let folder = grant.folder()?;
    let existed = lstat_rel(folder, file)?.is_some();
    let change = match patching {
        Patching::Remove => ChangeWord::Deleted,
        Patching::Write { .. } if existed => ChangeWord::Modified,
        Patching::Write { .. } => ChangeWord::Created,
    };
    if let Patching::Write { text, mode } = patching {
        let parent = file.parent().unwrap_or(Path::new(""));
        let root = Path::new(HELD_DIR).join("0").join(parent);
        journal::make_dirs(set.dir(), &root)?;
        let dir = set.dir().open_dir(RelPath::new(&root)?, Symlinks::Deny)?;
        let name = Name::new(file.file_name().unwrap_or_default())?;
        dir.write_file_unsynced(name, text, mode, Publish::New)?;
    }
    let entry = HeldEntry {
        grant: grant.alias.to_string(),
        layer: 0,
        path: file.to_path_buf(),
        change,
        why: held.0,
        what: held.1,
        mode: None,
    };
    let held = vec![entry];
    let journal = Journal {
        ops: Vec::new(),
        record: record(&set.meta, 0, 0, &held, &[], false),
        held,
        offset: set.audit().end()?,
        ends_set: false,
    };
    set.write_journal(&journal)?;
    journal::run(&set, &journal, &[])?;
    Ok(Summary::of(&set.meta.id, 0, 0, &journal.held))
}

/// The folder as it is, with the patched file as the patch would leave it.
struct PatchFacts<'a> {
    folder: &'a Anchor,
    /// The folder as it is, before and after alike.
    before: LayerFacts<'a>,
    file: &'a Path,
    patching: Patching<'a>,
}

impl Facts for PatchFacts<'_> {
    fn before(&self, rel: &Path) -> Option<Kind> {
        self.before.before(rel)
    }

    fn after(&self, rel: &Path) -> Option<Kind> {
        if rel == self.file {
            return match self.patching {
                Patching::Write { .. } => Some(Kind::File),
                Patching::Remove => None,
            };
        }
        self.before(rel)
    }

    fn before_bytes(&self, rel: &Path) -> Option<Vec<u8>> {
        read_rel(self.folder, rel)
    }

    fn after_bytes(&self, rel: &Path) -> Option<Vec<u8>> {
        if rel == self.file {
            return match self.patching {
                Patching::Write { text, .. } => Some(text.to_vec()),
                Patching::Remove => None,
            };
        }
        read_rel(self.folder, rel)
    }
}
