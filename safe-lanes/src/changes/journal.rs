//! Doing what a set's journal says, so that a process killed at any instant leaves nothing
//! half done: the next process does the rest.
//!
//! A journal is written whole (`journal.json`, atomically) before any of it is
//! done. Each [`Op`] can be done again and finds what was done already: an entry is moved with
//! `renameat2` — never replacing anything, or swapping two entries atomically — and the
//! fingerprint taken when the journal was written tells the entry that was meant to move from
//! one that took its place since. A file in the folder is therefore always either the human's
//! or the command's whole version, never a part of one. When every op is done, the journal's
//! record is appended unless the log already holds it (looked for after the offset the
//! journal noted, by the set's id), and the journal is removed: exactly one record per
//! journal.
//!
//! The folder's entry must still be what it was when the journal was written, or it is not
//! touched: an op that finds it changed (the human saved the file meanwhile, created the
//! name, removed its folder) moves the command's version to the held part instead, as a
//! `conflict` (`late`, one line per conflict, written before the move).

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};

use super::rule::Kind;
use super::scan::{Fingerprint, kind_of, lstat_rel};
use super::set::{HELD_DIR, HELD_FILE, JOURNAL, LATE, LAYERS, OpenSet, TRASH, UPPER, write_json};
use super::{ChangeWord, HeldEntry, Why};
use crate::beneath::{Anchor, Onto, Symlinks};
use crate::error::{Error, Result};
use crate::input::{Name, RelPath};

// The errors a step tells apart, as [`Error::raw_os_error`] gives them.
const EEXIST: i32 = Errno::EXIST.raw_os_error();
const ENOENT: i32 = Errno::NOENT.raw_os_error();
const ENOTDIR: i32 = Errno::NOTDIR.raw_os_error();
const EXDEV: i32 = Errno::XDEV.raw_os_error();

/// What a journal does, and the record it leaves.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Journal {
    /// In order.
    pub(crate) ops: Vec<Op>,
    /// What stays held once it is done (with the conflicts met on the way).
    pub(crate) held: Vec<HeldEntry>,
    /// The record appended once it is done.
    pub(crate) record: Pending,
    /// The end of the audit log when the journal was written.
    pub(crate) offset: u64,
    /// Whether the set goes once it is done (nothing held, or discarded).
    pub(crate) ends_set: bool,
}

/// The record a journal leaves.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Pending {
    /// `change.published`, `change.held`, `change.applied`, `change.discarded`.
    pub(crate) event: String,
    /// Who.
    pub(crate) actor: String,
    /// Its fields (with `id`, the set's).
    pub(crate) fields: serde_json::Value,
}

/// Which tree an entry is moved from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Tree {
    /// The layer a command wrote (`layers/<n>/upper`).
    Upper,
    /// The held part (`held/<n>`).
    Held,
}

/// One step.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum Op {
    /// Move the layer's entry at `path` (and what is below it) to the held part.
    Hold {
        layer: usize,
        #[serde(with = "super::stored")]
        path: PathBuf,
    },
    /// Remove the layer's entry: never created.
    Drop {
        layer: usize,
        #[serde(with = "super::stored")]
        path: PathBuf,
    },
    /// Move the entry `entry` at `path` of `from` into the folder, where nothing may be.
    Create {
        from: Tree,
        layer: usize,
        #[serde(with = "super::stored")]
        path: PathBuf,
        entry: Fingerprint,
        /// What kind of change it is (what a conflict would hold).
        change: ChangeWord,
    },
    /// Swap the entry `entry` at `path` of `from` with the folder's, which must still be
    /// `before`; the folder's old entry ends in `from`, removed with it.
    Replace {
        from: Tree,
        layer: usize,
        #[serde(with = "super::stored")]
        path: PathBuf,
        entry: Fingerprint,
        before: Fingerprint,
        change: ChangeWord,
    },
    /// Set the mode of the folder's directory at `path`, which must still be `before`.
    Mode {
        layer: usize,
        #[serde(with = "super::stored")]
        path: PathBuf,
        mode: u32,
        before: Fingerprint,
        change: ChangeWord,
    },
    /// Move the folder's entry at `path`, which must still be `before`, to `trash/<trash>`.
    Delete {
        layer: usize,
        #[serde(with = "super::stored")]
        path: PathBuf,
        before: Fingerprint,
        trash: usize,
        change: ChangeWord,
    },
    /// Remove the held part's entry at `path` (applied, or discarded).
    Forget {
        layer: usize,
        #[serde(with = "super::stored")]
        path: PathBuf,
    },
}

/// What running a journal came to.
#[derive(Debug, Default)]
pub(crate) struct Ran {
    /// Conflicts met on the way, now held.
    pub(crate) late: Vec<HeldEntry>,
    /// Whether the record was appended (or was there already).
    pub(crate) recorded: bool,
}

/// Do `journal` in `set`, with the folder of each of its layers (`None` for a grant that is
/// gone: a journal with ops on it cannot finish now, and stays for later), then record it and
/// remove it.
///
/// # Errors
///
/// `io`; the journal then stays, and the next process to look does the rest.
pub(crate) fn run(set: &OpenSet, journal: &Journal, folders: &[Option<Anchor>]) -> Result<Ran> {
    let mut work = Work {
        set,
        offset: journal.offset,
        folders,
        late: read_late(set)?,
        roots: HashMap::new(),
        parents: HashMap::new(),
    };
    crate::crash::point("change.journal-written");
    for (i, op) in journal.ops.iter().enumerate() {
        work.op(i, op)?;
        #[cfg(feature = "crash-points")]
        crate::crash::point(&format!("change.op-{i}"));
    }
    let mut held = journal.held.clone();
    for late in &work.late {
        if !held
            .iter()
            .any(|h| h.layer == late.layer && h.path == late.path)
        {
            held.push(late.clone());
        }
    }
    let mut record = journal.record.clone();
    if !work.late.is_empty() {
        add_late(&mut record, &work.late);
    }
    let audit = set.audit();
    let id = set.meta.id.as_str();
    crate::crash::point("change.before-record");
    // One record per journal: whatever this one's record came to say (a conflict met on a
    // second run turns `change.published` into `change.held`), a decision of this set after
    // the journal's offset is it.
    let decided = |r: &serde_json::Value| {
        r["event"]
            .as_str()
            .is_some_and(|e| e.starts_with("change."))
    };
    let recorded = if audit.find_after(journal.offset, id, decided)? {
        true
    } else {
        audit
            .append(&record.event, &record.actor, &record.fields)
            .is_ok()
    };
    crate::crash::point("change.after-record");
    if !recorded {
        // The journal stays, so the set is not done with: the next process runs it again
        // (every step of it is done already) and writes the record then.
        return Ok(Ran {
            late: work.late,
            recorded,
        });
    }
    finish(set, journal.ends_set && held.is_empty(), &held)?;
    Ok(Ran {
        late: work.late,
        recorded,
    })
}

/// A journal's record, with the conflicts met while it ran moved from published to held.
fn add_late(record: &mut Pending, late: &[HeldEntry]) {
    let fields = &mut record.fields;
    if let Some(n) = fields.get("published").and_then(serde_json::Value::as_u64) {
        fields["published"] = (n.saturating_sub(late.len() as u64)).into();
    }
    let held = fields
        .as_object_mut()
        .map(|o| o.entry("held").or_insert_with(|| serde_json::json!([])));
    if let Some(serde_json::Value::Array(held)) = held {
        for l in late {
            held.push(serde_json::json!({
                "grant": l.grant, "path": l.path.to_string_lossy(), "why": l.why,
            }));
        }
    }
    if record.event == "change.published" {
        record.event = "change.held".into();
    }
}

/// The end of a journal: what stays held written and the journal removed, then what the set
/// no longer needs removed — the whole set when nothing of it is held ([`OpenSet::remove`]).
fn finish(set: &OpenSet, ends: bool, held: &[HeldEntry]) -> Result<()> {
    let dir = set.dir();
    if ends {
        return set.remove();
    }
    write_json(dir, HELD_FILE, &held)?;
    dir.remove_file(Name::new(JOURNAL)?)?;
    for name in [LAYERS, TRASH, LATE] {
        match dir.remove_all(Name::new(name)?) {
            Ok(()) | Err(Error::NotFound { .. }) => {}
            Err(e) => tracing::warn!(error = %e, "could not clear a change set's {name}"),
        }
    }
    Ok(())
}

/// The conflicts a run of the journal met before (a process that died in it).
fn read_late(set: &OpenSet) -> Result<Vec<HeldEntry>> {
    let Some(bytes) = super::set::read_small(set.dir(), LATE)? else {
        return Ok(Vec::new());
    };
    // A line cut by a crash is the last one, for a conflict whose move never happened.
    Ok(bytes
        .split(|b| *b == b'\n')
        .filter_map(|line| serde_json::from_slice(line).ok())
        .collect())
}

struct Work<'a> {
    set: &'a OpenSet,
    /// The journal's audit offset: what names its trash slots apart from another journal's.
    offset: u64,
    folders: &'a [Option<Anchor>],
    late: Vec<HeldEntry>,
    /// Each tree's root, opened once.
    roots: HashMap<(Tree, usize), Rc<Anchor>>,
    /// The last directory looked up in each place, with its path.
    parents: HashMap<(Place, usize), (PathBuf, Rc<Anchor>)>,
}

/// Where [`Work::at`] looks: a tree of the set, or the folder itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Place {
    Tree(Tree),
    Folder,
}

impl Work<'_> {
    fn op(&mut self, i: usize, op: &Op) -> Result<()> {
        match op {
            Op::Hold { layer, path } => self.hold(*layer, path),
            Op::Drop { layer, path } => match self.at(Place::Tree(Tree::Upper), *layer, path)? {
                Some((dir, name)) => remove_present(&dir, &name),
                None => Ok(()),
            },
            Op::Create {
                from,
                layer,
                path,
                entry,
                change,
            } => self.create(*from, *layer, path, entry, *change),
            Op::Replace {
                from,
                layer,
                path,
                entry,
                before,
                change,
            } => self.replace(*from, *layer, path, entry, before, *change),
            Op::Mode {
                layer,
                path,
                mode,
                before,
                change,
            } => {
                let folder = self.folder(*layer)?;
                let dir = match folder.open_dir(RelPath::new(path)?, Symlinks::Deny) {
                    Ok(dir) => dir,
                    Err(Error::NotFound { .. }) => {
                        return self.conflict(*layer, path, *change, None);
                    }
                    Err(e) => return Err(e),
                };
                if same_entry(&Fingerprint::of(&dir.stat()?), before) {
                    dir.set_mode(*mode)
                } else {
                    self.conflict(*layer, path, *change, None)
                }
            }
            Op::Delete {
                layer,
                path,
                before,
                trash,
                change,
            } => self.delete(i, *layer, path, before, *trash, *change),
            // What met a conflict stays held: forgotten only once it is in the folder.
            Op::Forget { layer, path }
                if self
                    .late
                    .iter()
                    .any(|l| l.layer == *layer && l.path == *path) =>
            {
                Ok(())
            }
            Op::Forget { layer, path } => match self.at(Place::Tree(Tree::Held), *layer, path)? {
                Some((dir, name)) => remove_present(&dir, &name),
                None => Ok(()),
            },
        }
    }

    /// The root of `tree` for `layer`, opened once.
    fn tree(&mut self, tree: Tree, layer: usize) -> Result<Rc<Anchor>> {
        if let Some(root) = self.roots.get(&(tree, layer)) {
            return Ok(Rc::clone(root));
        }
        let rel = match tree {
            Tree::Upper => Path::new(LAYERS).join(layer.to_string()).join(UPPER),
            Tree::Held => Path::new(HELD_DIR).join(layer.to_string()),
        };
        let root = match self.set.dir().open_dir(RelPath::new(&rel)?, Symlinks::Deny) {
            Err(Error::NotFound { .. }) if tree == Tree::Held => {
                make_dirs(self.set.dir(), &rel)?;
                self.set.dir().open_dir(RelPath::new(&rel)?, Symlinks::Deny)
            }
            other => other,
        }?;
        let root = Rc::new(root);
        self.roots.insert((tree, layer), Rc::clone(&root));
        Ok(root)
    }

    /// The directory holding `path` in `place` of `layer`, and its last name; `None` when a
    /// directory on the way is missing (or is not one). The last directory of each place is
    /// kept open: a run of changes in one folder opens it once.
    fn at(
        &mut self,
        place: Place,
        layer: usize,
        path: &Path,
    ) -> Result<Option<(Rc<Anchor>, OsString)>> {
        let Some(name) = path.file_name() else {
            return Ok(None);
        };
        let parent = path.parent().unwrap_or(Path::new(""));
        if let Some((kept, dir)) = self.parents.get(&(place, layer))
            && kept == parent
        {
            return Ok(Some((Rc::clone(dir), name.to_owned())));
        }
        let root = match place {
            Place::Tree(tree) => self.tree(tree, layer)?,
            Place::Folder => Rc::new(self.folder(layer)?.try_clone()?),
        };
        let dir = if parent.as_os_str().is_empty() {
            root
        } else {
            match root.open_dir(RelPath::new(parent)?, Symlinks::Deny) {
                Ok(dir) => Rc::new(dir),
                Err(Error::NotFound { .. } | Error::SymlinkEscape { .. }) => return Ok(None),
                Err(e) => return Err(e),
            }
        };
        self.parents
            .insert((place, layer), (parent.to_path_buf(), Rc::clone(&dir)));
        Ok(Some((dir, name.to_owned())))
    }

    /// Forget the directories kept open by [`Work::at`] (after a step that may have moved one).
    fn forget_parents(&mut self) {
        self.parents.clear();
    }

    fn folder(&self, layer: usize) -> Result<&Anchor> {
        self.folders
            .get(layer)
            .and_then(Option::as_ref)
            .ok_or_else(|| Error::Revoked {
                alias: crate::error::Shown::text(
                    self.set
                        .meta
                        .layers
                        .get(layer)
                        .map_or("", |l| l.alias.as_str()),
                ),
            })
    }

    /// Move the layer's entry at `path` into the held part.
    fn hold(&mut self, layer: usize, path: &Path) -> Result<()> {
        let Some((dir, name)) = self.at(Place::Tree(Tree::Upper), layer, path)? else {
            return Ok(());
        };
        if lstat_name(&dir, &name)?.is_none() {
            return Ok(());
        }
        let held = self.tree(Tree::Held, layer)?;
        let parent = path.parent().unwrap_or(Path::new(""));
        make_dirs(&held, parent)?;
        let to = if parent.as_os_str().is_empty() {
            held.try_clone()?
        } else {
            held.open_dir(RelPath::new(parent)?, Symlinks::Deny)?
        };
        let name = Name::new(&name)?;
        // A directory moved away: no directory kept open may be inside it.
        self.forget_parents();
        match dir.move_entry(name, &to, name, Onto::New) {
            // The held part has a directory there already: made for what was held from inside
            // this one before (a directory whose publish then met a conflict). What it holds
            // came from here: it goes back in, and the whole directory is held.
            Err(e) if e.raw_os_error() == Some(EEXIST) => {
                let (from, into) = (to.open_dir(name.as_rel(), Symlinks::Deny)?, dir);
                merge_back(&from, &into.open_dir(name.as_rel(), Symlinks::Deny)?, 0)?;
                to.remove_dir(name)?;
                into.move_entry(name, &to, name, Onto::New)
            }
            other => other,
        }
    }

    /// A conflict met while publishing the `change` of `path` in `layer`: it is held. The
    /// entry (from the upper tree, if `from` says so) goes to the held part.
    fn conflict(
        &mut self,
        layer: usize,
        path: &Path,
        change: ChangeWord,
        from: Option<Tree>,
    ) -> Result<()> {
        if !self.late.iter().any(|l| l.layer == layer && l.path == path) {
            let grant = self.set.meta.layers.get(layer).map(|l| l.alias.clone());
            let entry = HeldEntry {
                grant: grant.unwrap_or_default(),
                layer,
                path: path.to_path_buf(),
                change,
                why: Why::Conflict,
                what: "the folder's entry changed while this was being published".into(),
                mode: None,
            };
            append_late(self.set, &entry)?;
            self.late.push(entry);
        }
        match from {
            Some(Tree::Upper) => self.hold(layer, path),
            _ => Ok(()),
        }
    }

    fn create(
        &mut self,
        from: Tree,
        layer: usize,
        path: &Path,
        entry: &Fingerprint,
        change: ChangeWord,
    ) -> Result<()> {
        let Some((src_dir, name)) = self.at(Place::Tree(from), layer, path)? else {
            return Ok(());
        };
        let Some(st) = lstat_name(&src_dir, &name)? else {
            return Ok(());
        };
        if !same_entry(&Fingerprint::of(&st), entry) {
            return Ok(());
        }
        let Some((dst_dir, _)) = self.at(Place::Folder, layer, path)? else {
            return self.conflict(layer, path, change, Some(from));
        };
        let name = Name::new(&name)?;
        if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
            self.forget_parents();
        }
        match src_dir.move_entry(name, &dst_dir, name, Onto::New) {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(EXDEV) => {
                let tmp = temp_name(&self.set.meta.id, path);
                let tmp = Name::new(&tmp)?;
                let _ = dst_dir.remove_all(tmp);
                super::copy::copy_entry(&src_dir, name, &dst_dir, tmp)?;
                match dst_dir.rename_new(tmp, name) {
                    Ok(()) => remove_present(&src_dir, name.as_os_str()),
                    Err(e) if e.raw_os_error() == Some(EEXIST) => {
                        let _ = dst_dir.remove_all(tmp);
                        self.conflict(layer, path, change, Some(from))
                    }
                    Err(e) => Err(e),
                }
            }
            Err(e) if matches!(e.raw_os_error(), Some(EEXIST | ENOENT | ENOTDIR)) => {
                self.conflict(layer, path, change, Some(from))
            }
            Err(e) => Err(e),
        }
    }

    fn replace(
        &mut self,
        from: Tree,
        layer: usize,
        path: &Path,
        entry: &Fingerprint,
        before: &Fingerprint,
        change: ChangeWord,
    ) -> Result<()> {
        let Some((src_dir, name)) = self.at(Place::Tree(from), layer, path)? else {
            return Ok(());
        };
        let Some(st) = lstat_name(&src_dir, &name)? else {
            return Ok(());
        };
        let name = Name::new(&name)?;
        if !same_entry(&Fingerprint::of(&st), entry) {
            // Swapped already, by a run a crash cut short: what is here is the folder's old
            // entry, checked as that run would have — an edit of the human's made just before
            // the swap goes back into the folder, and this change is held.
            if Fingerprint::of(&st) == *before {
                return Ok(());
            }
            let Some((dst_dir, _)) = self.at(Place::Folder, layer, path)? else {
                return Ok(());
            };
            self.forget_parents();
            src_dir.move_entry(name, &dst_dir, name, Onto::Exchange)?;
            return self.conflict(layer, path, change, Some(from));
        }
        let Some((dst_dir, _)) = self.at(Place::Folder, layer, path)? else {
            return self.conflict(layer, path, change, Some(from));
        };
        match lstat_name(&dst_dir, name.as_os_str())? {
            Some(now) if Fingerprint::of(&now) == *before => {}
            _ => return self.conflict(layer, path, change, Some(from)),
        }
        // A directory may be swapped: no directory kept open may be inside either side.
        self.forget_parents();
        let swapped = src_dir.move_entry(name, &dst_dir, name, Onto::Exchange);
        match swapped {
            Ok(()) => {
                // The old entry, now on our side: untouched since it was looked at?
                let old = lstat_name(&src_dir, name.as_os_str())?;
                if old.is_some_and(|old| Fingerprint::of(&old) == *before) {
                    Ok(())
                } else {
                    src_dir.move_entry(name, &dst_dir, name, Onto::Exchange)?;
                    self.conflict(layer, path, change, Some(from))
                }
            }
            Err(e) if e.raw_os_error() == Some(EXDEV) => {
                let tmp = temp_name(&self.set.meta.id, path);
                let tmp = Name::new(&tmp)?;
                let _ = dst_dir.remove_all(tmp);
                super::copy::copy_entry(&src_dir, name, &dst_dir, tmp)?;
                dst_dir.move_entry(tmp, &dst_dir, name, Onto::Exchange)?;
                let old = lstat_name(&dst_dir, tmp.as_os_str())?;
                if old.is_some_and(|old| Fingerprint::of(&old) == *before) {
                    dst_dir.remove_all(tmp)?;
                    remove_present(&src_dir, name.as_os_str())
                } else {
                    dst_dir.move_entry(tmp, &dst_dir, name, Onto::Exchange)?;
                    let _ = dst_dir.remove_all(tmp);
                    self.conflict(layer, path, change, Some(from))
                }
            }
            Err(e) if matches!(e.raw_os_error(), Some(ENOENT | ENOTDIR)) => {
                self.conflict(layer, path, change, Some(from))
            }
            Err(e) => Err(e),
        }
    }

    fn delete(
        &mut self,
        i: usize,
        layer: usize,
        path: &Path,
        before: &Fingerprint,
        trash: usize,
        change: ChangeWord,
    ) -> Result<()> {
        let Some((dir, name)) = self.at(Place::Folder, layer, path)? else {
            return Ok(());
        };
        let name = Name::new(&name)?;
        make_dirs(self.set.dir(), Path::new(TRASH))?;
        let trash_dir = self
            .set
            .dir()
            .open_dir(RelPath::new(TRASH)?, Symlinks::Deny)?;
        let slot = format!("{}-{trash}-{i}", self.offset);
        let slot = Name::new(&slot)?;
        if let Some(moved) = lstat_name(&trash_dir, slot.as_os_str())? {
            // Moved already, by a run a crash cut short: what has the name now is not ours.
            // What was moved is checked as that run would have.
            if Fingerprint::of(&moved) == *before {
                return Ok(());
            }
            let _ = trash_dir.move_entry(slot, &dir, name, Onto::New);
            return self.conflict(layer, path, change, None);
        }
        match lstat_name(&dir, name.as_os_str())? {
            None => return Ok(()),
            Some(now) if Fingerprint::of(&now) == *before => {}
            Some(_) => return self.conflict(layer, path, change, None),
        }
        self.forget_parents();
        match dir.move_entry(name, &trash_dir, slot, Onto::New) {
            Ok(()) => {
                let moved = lstat_name(&trash_dir, slot.as_os_str())?;
                if moved.is_some_and(|m| Fingerprint::of(&m) == *before) {
                    Ok(())
                } else {
                    // Put back; should the name have been made again meanwhile, theirs stays
                    // and ours waits in the trash, held all the same.
                    let _ = trash_dir.move_entry(slot, &dir, name, Onto::New);
                    self.conflict(layer, path, change, None)
                }
            }
            // The trash is on another file system: removed in place.
            Err(e) if e.raw_os_error() == Some(EXDEV) => dir.remove_all(name),
            Err(e) if e.raw_os_error() == Some(EEXIST) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Whether `now` is the entry `then` (same file system and inode).
fn same_entry(now: &Fingerprint, then: &Fingerprint) -> bool {
    (now.dev, now.ino) == (then.dev, then.ino)
}

fn lstat_name(dir: &Anchor, name: &std::ffi::OsStr) -> Result<Option<rustix::fs::Stat>> {
    lstat_rel(dir, Path::new(name))
}

/// Remove `name` from `dir` (and below it), if it is there.
fn remove_present(dir: &Anchor, name: &std::ffi::OsStr) -> Result<()> {
    match dir.remove_all(Name::new(name)?) {
        Ok(()) | Err(Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Move everything in `from` into `into`, where it came from: directories that both have are
/// merged the same way, and emptied ones removed. An entry of `into` is never replaced.
fn merge_back(from: &Anchor, into: &Anchor, depth: usize) -> Result<()> {
    const MAX_DEPTH: usize = 256;
    for (entry, st) in from.entries()? {
        let name = Name::new(&entry)?;
        match from.move_entry(name, into, name, Onto::New) {
            Err(e)
                if e.raw_os_error() == Some(EEXIST)
                    && kind_of(&st) == Kind::Dir
                    && depth < MAX_DEPTH =>
            {
                let sub = from.open_dir(name.as_rel(), Symlinks::Deny)?;
                merge_back(
                    &sub,
                    &into.open_dir(name.as_rel(), Symlinks::Deny)?,
                    depth + 1,
                )?;
                from.remove_dir(name)?;
            }
            other => other?,
        }
    }
    Ok(())
}

/// Make each directory of `rel` beneath `root` that is missing (0700).
pub(super) fn make_dirs(root: &Anchor, rel: &Path) -> Result<()> {
    let mut at = PathBuf::new();
    for c in rel.components() {
        let dir = if at.as_os_str().is_empty() {
            root.try_clone()?
        } else {
            root.open_dir(RelPath::new(&at)?, Symlinks::Deny)?
        };
        match dir.create_dir(Name::new(c.as_os_str())?, 0o700) {
            Err(e) if e.raw_os_error() != Some(EEXIST) => return Err(e),
            _ => {}
        }
        at.push(c);
    }
    Ok(())
}

/// The hidden name a copy is made under beside its place, when the layer is on another file
/// system than the folder: the same for every run of the same journal.
fn temp_name(set: &str, path: &Path) -> String {
    let digest = crate::digest::sha256_hex(path.as_os_str().as_encoded_bytes());
    format!(".safe-lanes-{set}-{}.tmp", &digest[..16])
}

/// Append `entry` to the set's `late` file.
fn append_late(set: &OpenSet, entry: &HeldEntry) -> Result<()> {
    let mut line = serde_json::to_vec(entry)
        .map_err(|e| Error::io("serialize", LATE, std::io::Error::other(e)))?;
    line.push(b'\n');
    let fd = set.dir().open(
        RelPath::new(LATE)?,
        OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE,
        Mode::from_raw_mode(0o600),
        Symlinks::Deny,
    )?;
    crate::fd::write_all(fd.as_fd(), &line).map_err(|e| Error::io("write", LATE, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::AbsPath;

    /// A directory whose publish met a conflict after what was held from inside it went to
    /// the held part: what was held goes back in, and the whole directory is held.
    #[test]
    fn merging_back_returns_each_entry_where_it_came_from() {
        let tmp = tempfile::tempdir().unwrap();
        let p = |rel: &str| tmp.path().join(rel);
        for dir in ["upper/x/.git/hooks", "held/x/.git/hooks", "held/x/new"] {
            std::fs::create_dir_all(p(dir)).unwrap();
        }
        std::fs::write(p("upper/x/.git/HEAD"), "ref\n").unwrap();
        std::fs::write(p("upper/x/main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(p("held/x/.git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        std::fs::write(p("held/x/new/a"), "a\n").unwrap();
        let open = |rel: &str| {
            Anchor::open_canonical(AbsPath::new(&p(rel).canonicalize().unwrap()).unwrap()).unwrap()
        };
        merge_back(&open("held/x"), &open("upper/x"), 0).unwrap();
        for (rel, text) in [
            ("upper/x/.git/HEAD", "ref\n"),
            ("upper/x/.git/hooks/pre-commit", "#!/bin/sh\n"),
            ("upper/x/main.rs", "fn main() {}\n"),
            ("upper/x/new/a", "a\n"),
        ] {
            assert_eq!(std::fs::read_to_string(p(rel)).unwrap(), text, "{rel}");
        }
        let left: Vec<_> = std::fs::read_dir(p("held/x")).unwrap().collect();
        assert!(left.is_empty(), "the held directory is empty: {left:?}");
    }
}
