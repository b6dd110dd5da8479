//! The private layers of cache grants: what confined commands write to a cache, kept in the
//! state root so the human's own tools never see it.
//!
//! A cache grant (a package registry, a build cache) is shown to confined commands as an
//! overlay: the human's folder is its read-only lower layer, and its upper layer is
//! `<root>/caches/<alias>/upper` (ADR 0016). Commands read what the human's tools cached and
//! share with each other what they write; nothing a command wrote reaches the folder the
//! human's `cargo build` reads, so a crate rewritten in a cache runs nowhere but in the
//! sandbox.
//!
//! ```text
//! <root>/caches/                0700
//! <root>/caches/<alias>/        one per cache grant
//!     grant                     the id of the grant the layer belongs to
//!     upper/                    what confined commands wrote (overlayfs's upper layer)
//!     work/<random>/            each running command's overlayfs work directory, held
//! ```
//!
//! A layer belongs to one grant: a cache revoked and granted again under the same alias (a new
//! id) starts from an empty layer. `grant cache-clear` empties one.
//!
//! Only Linux mounts layers; elsewhere confined commands are refused, and only measuring and
//! clearing a layer is used.
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

use std::io::Read;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use rustix::fs::FileType;
use serde::Serialize;

use crate::beneath::{Anchor, Symlinks};
use crate::error::{Error, Result, Shown};
use crate::fd::{ReadAt, write_all};
use crate::held::{self, Held, Holder};
use crate::input::{Name, RelPath};
use crate::random::random_hex;
use crate::root::{CACHES_DIR, private_dir};

const GRANT_FILE: &str = "grant";
const UPPER: &str = "upper";
const WORK: &str = "work";
/// How many entries [`Caches::size`] counts at most (a larger layer is reported as at least).
const MAX_COUNTED: usize = 200_000;

/// The caches' directory of one state root.
#[derive(Debug)]
pub(crate) struct Caches {
    dir: Anchor,
    path: PathBuf,
}

/// One running command's view of a cache's layer: the upper layer and a work directory of its
/// own, removed when dropped.
#[derive(Debug)]
pub(crate) struct Layer {
    /// `<root>/caches/<alias>/upper`.
    pub(crate) upper: PathBuf,
    /// The upper layer's directory.
    pub(crate) upper_dir: Anchor,
    /// This command's work directory, `<root>/caches/<alias>/work/<random>`.
    pub(crate) work: PathBuf,
    works: Anchor,
    held: Held<Anchor>,
}

impl Layer {
    /// This command's work directory.
    pub(crate) fn work_dir(&self) -> &Anchor {
        &self.held.entry
    }
}

impl Drop for Layer {
    fn drop(&mut self) {
        // Overlayfs leaves an empty `work` (mode 000) in it; the removal copes with that.
        let removed = Name::new(&self.held.name).and_then(|n| self.works.remove_all(n));
        if let Err(e) = removed {
            tracing::warn!(error = %e, "could not remove a cache's work directory");
        }
    }
}

/// The size of a cache's private layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LayerSize {
    /// Bytes of the regular files in it (counted up to a bound).
    pub bytes: u64,
    /// Files and directories in it (counted up to a bound).
    pub entries: u64,
    /// Whether counting stopped at the bound (the layer is at least this large).
    pub at_least: bool,
}

impl LayerSize {
    /// The size as a person reads it: `1 file or folder, 12 bytes`, `at least 100000 files
    /// and folders, at least 20 GiB`.
    pub fn in_words(&self) -> String {
        let at_least = if self.at_least { "at least " } else { "" };
        let entries = match self.entries {
            1 => "1 file or folder".to_owned(),
            n => format!("{n} files and folders"),
        };
        format!(
            "{at_least}{entries}, {at_least}{}",
            crate::risk::bytes_in_words(self.bytes)
        )
    }
}

impl Caches {
    /// `<root>/caches` of the state root whose directory is `root` (at `root_path`), made when
    /// missing.
    ///
    /// # Errors
    ///
    /// `insecure_root` when it is not private; `io`.
    pub(crate) fn open(root: &Anchor, root_path: &Path) -> Result<Self> {
        Ok(Self {
            dir: private_dir(root, root_path, CACHES_DIR)?,
            path: root_path.join(CACHES_DIR),
        })
    }

    /// The layer of the cache grant `alias` (id `id`), made when missing or when it belonged
    /// to another grant, with a work directory for one command.
    ///
    /// # Errors
    ///
    /// `io`.
    pub(crate) fn layer(&self, alias: &str, id: &str) -> Result<Layer> {
        let cache = self.cache_dir(alias, id)?;
        let upper_dir = open_or_make(&cache, UPPER)?;
        let works = open_or_make(&cache, WORK)?;
        sweep(&works);
        let held = Held::create_dir(&works)?;
        let base = self.path.join(alias);
        Ok(Layer {
            upper: base.join(UPPER),
            upper_dir,
            work: base.join(WORK).join(&held.name),
            works,
            held,
        })
    }

    /// Put the layer of `alias` right when it is not a private directory of this user (a link
    /// is removed; anything else is moved aside, nothing lost), saying what was done.
    ///
    /// # Errors
    ///
    /// `io`.
    pub(crate) fn repair(&self, alias: &str) -> Result<Option<String>> {
        Ok(crate::root::repair_dir_entry(&self.dir, alias)?
            .map(|done| format!("{CACHES_DIR}/{alias}: {done}")))
    }

    /// What is wrong with the layer of `alias`, if it is there and not a private directory of
    /// this user.
    pub(crate) fn problem(&self, alias: &str) -> Option<String> {
        let st = match self.dir.stat_entry(Name::new(alias).ok()?) {
            Ok(st) => st,
            Err(Error::NotFound { .. }) => return None,
            Err(e) => return Some(e.to_string()),
        };
        let directory =
            rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory;
        let own = st.st_uid == rustix::process::geteuid().as_raw();
        (!directory || !own).then(|| {
            format!(
                "{CACHES_DIR}/{alias} is {}{}",
                crate::beneath::kind_of(&st),
                if own { "" } else { " of another user" }
            )
        })
    }

    /// The size of the layer of `alias`, if there is one.
    ///
    /// # Errors
    ///
    /// `io`.
    pub(crate) fn size(&self, alias: &str) -> Result<Option<LayerSize>> {
        let upper = match self
            .dir
            .open_dir(RelPath::new(&Path::new(alias).join(UPPER))?, Symlinks::Deny)
        {
            Ok(upper) => upper,
            Err(Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut size = LayerSize {
            bytes: 0,
            entries: 0,
            at_least: false,
        };
        let mut pending = vec![upper];
        while let Some(dir) = pending.pop() {
            for (name, st) in dir.entries()? {
                size.entries += 1;
                if size.entries as usize > MAX_COUNTED {
                    size.at_least = true;
                    return Ok(Some(size));
                }
                match FileType::from_raw_mode(st.st_mode) {
                    FileType::RegularFile => size.bytes += st.st_size.max(0) as u64,
                    FileType::Directory => {
                        if let Ok(sub) = dir.open_dir(Name::new(&name)?.as_rel(), Symlinks::Deny) {
                            pending.push(sub);
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(Some(size))
    }

    /// Empty the layer of `alias`: it is renamed aside (running commands keep the layer they
    /// mounted) and removed. Whether there was one.
    ///
    /// # Errors
    ///
    /// `io`.
    pub(crate) fn clear(&self, alias: &str) -> Result<bool> {
        let aside = format!(".cleared-{}", random_hex());
        match self.dir.rename_new(Name::new(alias)?, Name::new(&aside)?) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOENT.raw_os_error()) => {
                return Ok(false);
            }
            Err(e) => return Err(e),
        }
        self.dir.remove_all(Name::new(&aside)?)?;
        Ok(true)
    }

    /// `<alias>/`, holding the layer of grant `id`: a layer of another grant (or of none) is
    /// cleared first.
    fn cache_dir(&self, alias: &str, id: &str) -> Result<Anchor> {
        let cache = open_or_make(&self.dir, alias)?;
        match read_small(&cache, GRANT_FILE)? {
            Some(owner) if owner == id.as_bytes() => {}
            None if cache.entries()?.is_empty() => {
                let fd = cache.create_new(Name::new(GRANT_FILE)?, 0o600)?;
                write_all(fd.as_fd(), id.as_bytes())
                    .map_err(|e| Error::io("write", GRANT_FILE, e))?;
            }
            _ => {
                self.clear(alias)?;
                return self.cache_dir(alias, id);
            }
        }
        Ok(cache)
    }
}

/// The directory `name` in `parent` (0700), made when missing; never a link.
fn open_or_make(parent: &Anchor, name: &str) -> Result<Anchor> {
    match parent.create_dir(Name::new(name)?, 0o700) {
        Err(e) if e.raw_os_error() != Some(rustix::io::Errno::EXIST.raw_os_error()) => {
            return Err(e);
        }
        _ => {}
    }
    parent
        .open_dir(RelPath::new(name)?, Symlinks::Deny)
        .map_err(|e| match e.code() {
            crate::error::Code::Io => e,
            _ => Error::InsecureRoot {
                path: Shown::path(Path::new(name)),
                why: format!("not a real directory ({e}): `safe-lanes init` puts it right"),
            },
        })
}

/// The content of the small regular file `name` in `dir`, or `None` when absent.
fn read_small(dir: &Anchor, name: &str) -> Result<Option<Vec<u8>>> {
    let fd = match dir.open_read(RelPath::new(name)?, Symlinks::Deny) {
        Ok(fd) => fd,
        Err(Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut text = Vec::new();
    ReadAt::new(fd.as_fd())
        .take(4096)
        .read_to_end(&mut text)
        .map_err(|e| Error::io("read", name, e))?;
    Ok(Some(text))
}

/// Remove the work directories no live process holds (a command whose gateway died).
fn sweep(works: &Anchor) {
    let Ok(entries) = works.entries() else {
        return;
    };
    for (name, st) in entries {
        let holder = held::holder(works, &name, &st);
        if matches!(holder, Holder::Live | Holder::Making | Holder::Unknown) {
            continue;
        }
        let _ = Name::new(&name).and_then(|name| works.remove_all(name));
        drop(holder);
    }
}
