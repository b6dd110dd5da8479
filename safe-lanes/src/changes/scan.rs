//! Reading what a command left in a layer: each change it made to the folder, found by
//! walking overlayfs's upper directory against the folder as it is now.
//!
//! The upper directory holds exactly what the command changed: new and rewritten files, links
//! and directories (a rewritten file is a whole copy), a *whiteout* (a character device
//! `0:0`) for each name it removed, and directories marked *opaque* (`user.overlay.opaque`)
//! that replace the folder's directory of the same name. Directories the command only wrote
//! into are there too, copied up with their mode. Renaming a file is a new name plus a
//! whiteout; a directory the folder has cannot be renamed in the layer at all (overlayfs
//! answers `EXDEV` without `redirect_dir`, and `mv` copies instead).
//!
//! Each change is an [`Item`]; nothing here decides what becomes of it ([`super::rule`]).

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Stat};
use serde::{Deserialize, Serialize};

use super::rule::{Facts, Kind, MAX_READ};
#[cfg(target_os = "linux")]
use super::set::OPAQUE;
use crate::beneath::{Anchor, Symlinks, permissions, stat_identity};
use crate::error::{Error, Result};
use crate::input::{Name, RelPath};

/// The most entries below a removed directory that are looked at (for what the human changed
/// there, and what it holds); a larger removal is held whole.
const MAX_BELOW: usize = 100_000;

/// What identifies an entry and its content as it was seen: an entry whose fingerprint
/// differs later was replaced or changed since.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Fingerprint {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) size: i64,
    pub(crate) mtime: (i64, i64),
}

impl Fingerprint {
    #[allow(clippy::unnecessary_cast)] // `st_mtime_nsec` is 64 bits on macOS, not on every Linux
    pub(crate) fn of(st: &Stat) -> Self {
        let (dev, ino) = stat_identity(st);
        Self {
            dev,
            ino,
            size: st.st_size,
            mtime: (st.st_mtime, st.st_mtime_nsec as i64),
        }
    }
}

/// One change the command made.
#[derive(Clone, Debug)]
pub(crate) struct Item {
    /// Relative to the grant's folder.
    pub(crate) path: PathBuf,
    /// What it is.
    pub(crate) kind: ItemKind,
    /// Inside a directory the command made ([`ItemKind::NewDir`]): it lands with it.
    pub(crate) carried: bool,
    /// What the folder has at this path now, if anything.
    pub(crate) before: Option<(Kind, Fingerprint)>,
    /// Whether the human changed the folder's entry (or, for a removal, anything below it)
    /// while the command ran.
    pub(crate) meanwhile: bool,
    /// The layer's entry, for a new or rewritten one.
    pub(crate) layer: Option<Fingerprint>,
    /// The folder's directory tree the change takes away — a removal of a directory, or a
    /// file, link or node in place of one: each path below it. The rule judges each.
    pub(crate) removes: Option<Below>,
}

/// The paths below a directory of the folder that a change takes away.
#[derive(Clone, Debug, Default)]
pub(crate) struct Below {
    /// Each path below it (relative to the grant's folder), at most [`MAX_BELOW`].
    pub(crate) paths: Vec<PathBuf>,
    /// Whether there were more than [`MAX_BELOW`] (then not all are in `paths`).
    pub(crate) too_large: bool,
}

/// What kind of change an [`Item`] is.
#[derive(Clone, Debug)]
pub(crate) enum ItemKind {
    /// A file, link, or other node the command left (new, or in place of the folder's).
    Put(Put),
    /// A directory the command made, where the folder has none (or a non-directory).
    NewDir,
    /// A directory in both whose permission bits the command changed.
    Mode(u32),
    /// The folder's entry removed (with [`Item::removes`] when it is a directory).
    Delete,
}

/// A non-directory the command left.
#[derive(Clone, Debug)]
pub(crate) enum Put {
    File { mode: u32 },
    Link { target: Vec<u8> },
    Special,
}

/// Every change in the layer `upper` over `folder`, parents before children. `t0` is when the
/// command began (a `ctime`).
///
/// # Errors
///
/// `io` when a directory of either cannot be read: the caller then holds the set whole.
pub(crate) fn scan(upper: &Anchor, folder: &Anchor, t0: (i64, i64)) -> Result<Vec<Item>> {
    let mut out = Vec::new();
    // Directories still to read, by path: each is opened when its turn comes, so no more than
    // one of each tree is open at a time, however many siblings wait.
    let mut frames = vec![Frame {
        rel: PathBuf::new(),
        merged: Some(false),
    }];
    while let Some(frame) = frames.pop() {
        let (dir, folder_dir) = frame.open(upper, folder)?;
        let mut seen = BTreeSet::new();
        let carried = folder_dir.is_none();
        for (name, st) in dir.entries()? {
            let path = frame.rel.join(&name);
            let entry = Name::new(&name)?;
            seen.insert(name.clone());
            let before = match &folder_dir {
                Some((dir, _)) => dir.stat_entry_if_any(entry)?,
                None => None,
            };
            let mut meanwhile = before.as_ref().is_some_and(|st| changed_since(st, t0));
            let fingerprint = before.as_ref().map(|st| (kind_of(st), Fingerprint::of(st)));
            if is_whiteout(&st) {
                // The command removed the folder's entry.
                if let (Some((dir, _)), Some(gone)) = (&folder_dir, &before) {
                    out.push(removal(dir, &path, entry, gone, t0)?);
                }
                continue;
            }
            let layer = Some(Fingerprint::of(&st));
            let kind = FileType::from_raw_mode(st.st_mode);
            let item = |kind, meanwhile, removes| Item {
                path: path.clone(),
                kind,
                carried,
                before: fingerprint,
                meanwhile,
                layer,
                removes,
            };
            if kind == FileType::Directory {
                let merged = match (&folder_dir, &before) {
                    (Some((_, opaque)), Some(st)) if kind_of(st) == Kind::Dir => Some(*opaque),
                    _ => None,
                };
                match merged {
                    Some(_) => {
                        let before_mode = before.as_ref().map_or(0, permissions);
                        if permissions(&st) != before_mode {
                            out.push(item(ItemKind::Mode(permissions(&st)), meanwhile, None));
                        }
                    }
                    None => out.push(item(ItemKind::NewDir, meanwhile, None)),
                }
                frames.push(Frame { rel: path, merged });
                continue;
            }
            let put = match kind {
                FileType::RegularFile => Put::File {
                    mode: permissions(&st),
                },
                FileType::Symlink => Put::Link {
                    target: dir.read_link(entry)?.unwrap_or_default(),
                },
                _ => Put::Special,
            };
            // In place of one of the folder's directories: what was below it goes too.
            let removes = match (&folder_dir, &before) {
                (Some((dir, _)), Some(st)) if kind_of(st) == Kind::Dir => {
                    let (below, changed) = below(dir, &path, entry, t0)?;
                    meanwhile |= changed;
                    Some(below)
                }
                _ => None,
            };
            out.push(item(ItemKind::Put(put), meanwhile, removes));
        }
        // An opaque directory replaces the folder's: what the command did not leave in it is
        // removed.
        if let Some((dir, true)) = &folder_dir {
            for (name, st) in dir.entries()? {
                if !seen.contains(&name) {
                    let path = frame.rel.join(&name);
                    out.push(removal(dir, &path, Name::new(&name)?, &st, t0)?);
                }
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Whether the layer's entry whose `lstat` is `st` is a whiteout: overlayfs's mark (a
/// character device `0:0`) of a name the command removed.
pub(crate) fn is_whiteout(st: &Stat) -> bool {
    FileType::from_raw_mode(st.st_mode) == FileType::CharacterDevice && st.st_rdev == 0
}

/// Whether the layer's directory `dir` is marked opaque (overlayfs's `user.overlay.opaque`):
/// it replaces the folder's directory instead of merging with it. Layers are overlays, made on
/// Linux only; elsewhere no directory is.
fn opaque_dir(dir: &Anchor) -> Result<bool> {
    #[cfg(target_os = "linux")]
    return Ok(dir.attribute(OPAQUE)?.as_deref() == Some(b"y"));
    #[cfg(not(target_os = "linux"))]
    {
        let _ = dir;
        Ok(false)
    }
}

/// A directory of the layer still to read: its path, and whether the folder has a directory
/// there that the layer merges with (`Some`, with whether an opaque directory above hides
/// it), or not (`None`: all below it is new).
struct Frame {
    rel: PathBuf,
    merged: Option<bool>,
}

impl Frame {
    /// The layer's directory, and the folder's with whether it is hidden (opaque), when they
    /// merge.
    fn open(&self, upper: &Anchor, folder: &Anchor) -> Result<(Anchor, Option<(Anchor, bool)>)> {
        let open = |anchor: &Anchor| match self.rel.as_os_str().is_empty() {
            true => anchor.try_clone(),
            false => anchor.open_dir(RelPath::new(&self.rel)?, Symlinks::Deny),
        };
        let dir = open(upper)?;
        let folder_dir = match self.merged {
            Some(hidden) => {
                let opaque = hidden || opaque_dir(&dir)?;
                Some((open(folder)?, opaque))
            }
            None => None,
        };
        Ok((dir, folder_dir))
    }
}

/// The removal of the folder's entry `name` (in `dir`, at `path`), whose `lstat` is `st`: for
/// a directory, with what is below it.
fn removal(dir: &Anchor, path: &Path, name: Name<'_>, st: &Stat, t0: (i64, i64)) -> Result<Item> {
    let mut meanwhile = changed_since(st, t0);
    let removes = match kind_of(st) {
        Kind::Dir => {
            let (below, changed) = below(dir, path, name, t0)?;
            meanwhile |= changed;
            Some(below)
        }
        _ => None,
    };
    Ok(Item {
        path: path.to_path_buf(),
        kind: ItemKind::Delete,
        carried: false,
        before: Some((kind_of(st), Fingerprint::of(st))),
        meanwhile,
        layer: None,
        removes,
    })
}

/// What is below the folder's directory `name` (in `dir`, at `path`), and whether the human
/// changed any of it at or after `t0`. One directory is open at a time.
pub(crate) fn below(
    dir: &Anchor,
    path: &Path,
    name: Name<'_>,
    t0: (i64, i64),
) -> Result<(Below, bool)> {
    let top = dir.open_dir(name.as_rel(), Symlinks::Deny)?;
    let mut below = Below::default();
    let mut changed = false;
    let mut pending = vec![PathBuf::new()];
    'walk: while let Some(rel) = pending.pop() {
        let sub = match rel.as_os_str().is_empty() {
            true => top.try_clone()?,
            false => top.open_dir(RelPath::new(&rel)?, Symlinks::Deny)?,
        };
        for (child, cst) in sub.entries()? {
            if below.paths.len() >= MAX_BELOW {
                below.too_large = true;
                break 'walk;
            }
            let child_rel = rel.join(&child);
            changed |= changed_since(&cst, t0);
            if kind_of(&cst) == Kind::Dir {
                pending.push(child_rel.clone());
            }
            below.paths.push(path.join(child_rel));
        }
    }
    Ok((below, changed))
}

/// Whether the entry whose `lstat` is `st` changed at or after `t0` (its `ctime`, which no
/// program can set).
#[allow(clippy::unnecessary_cast)] // as in `Fingerprint::of`
pub(crate) fn changed_since(st: &Stat, t0: (i64, i64)) -> bool {
    (st.st_ctime, st.st_ctime_nsec as i64) >= t0
}

/// What an `lstat` says the entry is.
pub(crate) fn kind_of(st: &Stat) -> Kind {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Dir,
        FileType::Symlink => Kind::Link,
        _ => Kind::Other,
    }
}

/// `lstat` of `rel` beneath `anchor`, nothing followed: `Ok(None)` when absent.
pub(crate) fn lstat_rel(anchor: &Anchor, rel: &Path) -> Result<Option<Stat>> {
    let Some(name) = rel.file_name() else {
        return anchor.stat().map(Some);
    };
    let parent = rel.parent().unwrap_or(Path::new(""));
    let dir;
    let dir = if parent.as_os_str().is_empty() {
        anchor
    } else {
        dir = match anchor.open_dir(RelPath::new(parent)?, Symlinks::Deny) {
            Ok(dir) => dir,
            Err(Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        &dir
    };
    dir.stat_entry_if_any(Name::new(name)?)
}

/// The content of the regular file `rel` beneath `anchor`, at most [`MAX_READ`] bytes: `None`
/// when it is not one, is larger, or cannot be read.
pub(crate) fn read_rel(anchor: &Anchor, rel: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let fd = anchor
        .open_read(RelPath::new(rel).ok()?, Symlinks::Deny)
        .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return None;
    }
    let mut bytes = Vec::new();
    crate::fd::ReadAt::new(std::os::fd::AsFd::as_fd(&fd))
        .take(MAX_READ + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    (bytes.len() as u64 <= MAX_READ).then_some(bytes)
}

/// What the rule sees of a layer: the folder before, the layer over it after.
///
/// The rule asks the same few questions of many paths (is `objects/ab` a repository, does it
/// hold `HEAD`, a `pyvenv.cfg`): each answer is looked up once, and the directories asked of
/// last stay open, for as long as one decision lasts.
pub(crate) struct LayerFacts<'a> {
    upper: &'a Anchor,
    folder: &'a Anchor,
    seen: RefCell<Seen>,
}

/// Which tree of a layer a lookup is in.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Tree {
    Upper,
    Folder,
}

/// What [`LayerFacts`] has looked up.
#[derive(Default)]
struct Seen {
    stats: HashMap<(Tree, PathBuf), Entry>,
    dirs: HashMap<(Tree, PathBuf), Option<Anchor>>,
}

/// How many directories [`LayerFacts`] keeps open at most.
const OPEN_DIRS: usize = 64;

impl<'a> LayerFacts<'a> {
    /// The facts of the layer `upper` over `folder`.
    pub(crate) fn new(upper: &'a Anchor, folder: &'a Anchor) -> Self {
        Self {
            upper,
            folder,
            seen: RefCell::default(),
        }
    }

    /// What `rel` is in `tree`: `Some(None)` when absent, `None` when it cannot be looked at.
    fn look(&self, tree: Tree, rel: &Path) -> Option<Option<Stat>> {
        let anchor = match tree {
            Tree::Upper => self.upper,
            Tree::Folder => self.folder,
        };
        let Some(name) = rel.file_name() else {
            return anchor.stat().ok().map(Some);
        };
        let name = Name::new(name).ok()?;
        let parent = rel.parent().unwrap_or(Path::new(""));
        if parent.as_os_str().is_empty() {
            return anchor.stat_entry_if_any(name).ok();
        }
        let mut seen = self.seen.borrow_mut();
        let key = (tree, parent.to_path_buf());
        if !seen.dirs.contains_key(&key) {
            if seen.dirs.len() >= OPEN_DIRS {
                seen.dirs.clear();
            }
            let dir = match anchor.open_dir(RelPath::new(parent).ok()?, Symlinks::Deny) {
                Ok(dir) => Some(dir),
                Err(Error::NotFound { .. }) => None,
                Err(_) => return None,
            };
            seen.dirs.insert(key.clone(), dir);
        }
        match &seen.dirs[&key] {
            Some(dir) => dir.stat_entry_if_any(name).ok(),
            None => Some(None),
        }
    }

    /// What `rel` is in `tree`, looked up once.
    fn entry(&self, tree: Tree, rel: &Path) -> Entry {
        let key = (tree, rel.to_path_buf());
        if let Some(known) = self.seen.borrow().stats.get(&key) {
            return *known;
        }
        let entry = match self.look(tree, rel) {
            None => Entry::Is(Kind::Other),
            Some(None) => Entry::Absent,
            Some(Some(st)) if tree == Tree::Upper && is_whiteout(&st) => Entry::Whiteout,
            Some(Some(st)) => Entry::Is(kind_of(&st)),
        };
        self.seen.borrow_mut().stats.insert(key, entry);
        entry
    }
}

/// What a lookup in one tree found.
#[derive(Clone, Copy)]
enum Entry {
    Absent,
    /// In the layer: the command removed the folder's entry.
    Whiteout,
    /// An entry of this kind (a lookup that failed is [`Kind::Other`]).
    Is(Kind),
}

impl Facts for LayerFacts<'_> {
    fn before(&self, rel: &Path) -> Option<Kind> {
        match self.entry(Tree::Folder, rel) {
            Entry::Is(kind) => Some(kind),
            Entry::Absent | Entry::Whiteout => None,
        }
    }

    fn after(&self, rel: &Path) -> Option<Kind> {
        match self.entry(Tree::Upper, rel) {
            Entry::Is(kind) => Some(kind),
            Entry::Whiteout => None,
            Entry::Absent => self.before(rel),
        }
    }

    fn before_bytes(&self, rel: &Path) -> Option<Vec<u8>> {
        read_rel(self.folder, rel)
    }

    fn after_bytes(&self, rel: &Path) -> Option<Vec<u8>> {
        match self.entry(Tree::Upper, rel) {
            Entry::Is(_) => read_rel(self.upper, rel),
            Entry::Whiteout => None,
            Entry::Absent => read_rel(self.folder, rel),
        }
    }
}
