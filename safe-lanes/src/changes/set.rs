//! A change set on disk, and the store of them under the state root.
//!
//! ```text
//! <root>/changes/                 0700
//! <root>/changes/<id>/            one set: locked (flock) by the process working on it
//!     set.json                    what it is: its origin, when it started, its grants
//!     t0                          an empty file made when it began: its ctime is the start
//!     layers/<n>/upper/           what the command wrote in grant n (overlayfs's upper layer)
//!     layers/<n>/work/            overlayfs's work directory
//!     journal.json                what is being done (publishing, applying, discarding),
//!                                 written before any of it is done
//!     late                        changes found in conflict while publishing, one per line
//!     trash/                      what publishing replaced or removed, until it ends
//!     held/<n>/                   what waits for the human, as it will land in grant n
//!     held.json                   the held changes, once decided
//! ```
//!
//! A set is *working* while its lock is held (a command runs, or its changes are being
//! published, applied or discarded); *waiting* once `held.json` is written and no journal is
//! left; *interrupted* when its process died before deciding (no journal, no `held.json`).
//! The next process to look ([`Store::recover`]) finishes what a journal says, and holds an
//! interrupted set whole.

#[cfg(target_os = "linux")]
use std::ffi::CStr;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::journal::Journal;
use crate::audit::AuditLog;
use crate::beneath::{Anchor, Publish, Symlinks};
use crate::error::{Error, Result, Shown};
use crate::fd::ReadAt;
use crate::held::{self, Held, Holder};
use crate::input::{Name, RelPath};
use crate::root::{CHANGES_DIR, private_dir};

pub(super) const SET_FILE: &str = "set.json";
const T0_FILE: &str = "t0";
pub(super) const LAYERS: &str = "layers";
pub(super) const UPPER: &str = "upper";
const WORK: &str = "work";
pub(super) const HELD_DIR: &str = "held";
pub(super) const TRASH: &str = "trash";
pub(super) const JOURNAL: &str = "journal.json";
pub(super) const HELD_FILE: &str = "held.json";
pub(super) const LATE: &str = "late";
/// The most a set's own files (`set.json`, `journal.json`, `held.json`, `late`) may hold.
const MAX_FILE: u64 = 64 << 20;
/// The overlayfs attribute marking a directory whose lower one is hidden (`userxattr`).
#[cfg(target_os = "linux")]
pub(super) const OPAQUE: &CStr = c"user.overlay.opaque";

/// What a set is, written once when it begins.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Meta {
    /// Its id (`set_…`), its directory's name.
    pub(crate) id: String,
    /// What made it.
    pub(crate) origin: Origin,
    /// When it began (RFC 3339).
    pub(crate) started: String,
    /// The `ctime` of its `t0` file, made as it began: a change in a folder with a later (or
    /// equal) `ctime` was made while it ran.
    pub(crate) t0: (i64, i64),
    /// One per layer, in order: the grant it is over.
    pub(crate) layers: Vec<LayerMeta>,
}

/// What made a set: a command or a patch.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Origin {
    /// `exec` (a confined command) or `patch` (`folder_patch`).
    pub(crate) op: String,
    /// The command line, or the patched file.
    pub(crate) command: String,
    /// Who asked (the agent's actor).
    pub(crate) actor: String,
}

/// The grant a layer is over.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LayerMeta {
    /// The grant's id.
    pub(crate) grant: String,
    /// Its alias.
    pub(crate) alias: String,
    /// Its folder.
    pub(crate) path: PathBuf,
}

/// The store of change sets of one state root.
#[derive(Debug)]
pub(crate) struct Store {
    pub(super) dir: Anchor,
    pub(super) path: PathBuf,
    pub(super) audit: Arc<AuditLog>,
}

/// A set this process works on: locked until dropped.
#[derive(Debug)]
pub(crate) struct OpenSet {
    pub(crate) meta: Meta,
    pub(super) dir: Anchor,
    pub(super) path: PathBuf,
    /// The store's directory (`<root>/changes`).
    store: Anchor,
    audit: Arc<AuditLog>,
    /// The lock: a held entry this process made, or the descriptor [`held::holder`] took it
    /// through.
    _lock: Lock,
}

#[derive(Debug)]
enum Lock {
    Made(Held<Anchor>),
    Taken(OwnedFd),
}

impl Drop for Lock {
    /// Unlocked by its holder, not left to the closing of its descriptor: a copy a `fork`
    /// elsewhere in the process made would keep it until that child runs its program.
    fn drop(&mut self) {
        match self {
            Lock::Made(held) => unlock(&held.entry),
            Lock::Taken(fd) => unlock(fd),
        }
    }
}

/// Release the `flock` on `fd` for every copy of its open file description.
fn unlock(fd: &impl AsFd) {
    let _ = rustix::fs::flock(fd, rustix::fs::FlockOperation::Unlock);
}

/// How many times [`Store::take`] looks again, 20 ms apart, at a set another holds.
const TAKE_TRIES: usize = 50;

/// Where a set is in its life, as a listing finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// A process works on it.
    Working,
    /// Decided: its held changes wait for the human.
    Waiting,
    /// A journal is left to finish.
    Unfinished,
    /// Its process died before deciding.
    Interrupted,
    /// Not a set (made half, or not ours).
    Broken,
}

impl Store {
    /// `<root>/changes` of the state root whose directory is `root` (at `root_path`), made
    /// when missing.
    ///
    /// # Errors
    ///
    /// `insecure_root` when it is not private; `io`.
    pub(crate) fn open(root: &Anchor, root_path: &Path, audit: Arc<AuditLog>) -> Result<Self> {
        Ok(Self {
            dir: private_dir(root, root_path, CHANGES_DIR)?,
            path: root_path.join(CHANGES_DIR),
            audit,
        })
    }

    /// Begin a set made by `origin` over the grants of `layers`: its directory, locked, with
    /// an empty upper and work directory per layer.
    ///
    /// # Errors
    ///
    /// `io`; nothing is left when it fails.
    pub(crate) fn begin(&self, origin: Origin, layers: Vec<LayerMeta>) -> Result<OpenSet> {
        let id = format!("set_{}", &crate::random::random_hex()[..16]);
        let held = Held::create_dir_named(&self.dir, id.clone())?;
        let made = (|| {
            let dir = &held.entry;
            let t0 = dir.create_new(Name::new(T0_FILE)?, 0o600)?;
            let st = rustix::fs::fstat(&t0).map_err(|e| Error::io("fstat", T0_FILE, e))?;
            dir.create_dir(Name::new(LAYERS)?, 0o700)?;
            let layers_dir = dir.open_dir(RelPath::new(LAYERS)?, Symlinks::Deny)?;
            for n in 0..layers.len() {
                let name = n.to_string();
                layers_dir.create_dir(Name::new(&name)?, 0o700)?;
                let layer = layers_dir.open_dir(RelPath::new(&name)?, Symlinks::Deny)?;
                layer.create_dir(Name::new(UPPER)?, 0o755)?;
                layer.create_dir(Name::new(WORK)?, 0o700)?;
            }
            let meta = Meta {
                id: id.clone(),
                origin,
                started: humantime::format_rfc3339_seconds(std::time::SystemTime::now())
                    .to_string(),
                t0: (st.st_ctime, st.st_ctime_nsec as i64),
                layers,
            };
            write_json(dir, SET_FILE, &meta)?;
            Ok(meta)
        })();
        match made {
            Ok(meta) => Ok(OpenSet {
                dir: held.entry.try_clone()?,
                path: self.path.join(&id),
                store: self.dir.try_clone()?,
                audit: Arc::clone(&self.audit),
                meta,
                _lock: Lock::Made(held),
            }),
            Err(e) => {
                let _ = Name::new(&id).and_then(|n| self.dir.remove_all(n));
                Err(e)
            }
        }
    }

    /// The sets, each with its state (the working ones included), oldest first.
    ///
    /// # Errors
    ///
    /// `io` when the store cannot be listed.
    pub(crate) fn states(&self) -> Result<Vec<(String, State)>> {
        let mut out = Vec::new();
        for (name, st) in self.dir.entries()? {
            let Some(id) = name.to_str().filter(|n| is_set_id(n)) else {
                // A set's directory whose maker died while making it.
                if let Holder::Stale = held::holder(&self.dir, &name, &st) {
                    let _ = Name::new(&name).and_then(|n| self.dir.remove_all(n));
                }
                continue;
            };
            let state = match held::holder(&self.dir, &name, &st) {
                Holder::Abandoned(fd) => {
                    let state = state_of(&Anchor::new(
                        fd.try_clone().map_err(|e| Error::io("dup", id, e))?,
                    ));
                    unlock(&fd);
                    state
                }
                // A set a process holds is working, unless its files say it waits: a lock
                // can be held a moment longer by a copy of its descriptor that a `fork`
                // elsewhere in that process made.
                Holder::Live | Holder::Making | Holder::Unknown => {
                    match self.dir.open_dir(RelPath::new(id)?, Symlinks::Deny) {
                        Ok(dir) if state_of(&dir) == State::Waiting => State::Waiting,
                        _ => State::Working,
                    }
                }
                Holder::Stale | Holder::None => State::Broken,
            };
            out.push((id.to_owned(), state, st.st_mtime));
        }
        out.sort_by_key(|(id, _, mtime)| (*mtime, id.clone()));
        Ok(out.into_iter().map(|(id, state, _)| (id, state)).collect())
    }

    /// Open the set `id` to work on it, taking its lock.
    ///
    /// # Errors
    ///
    /// `not_found` for no such set; `invalid_argument` while another process works on it;
    /// `io`.
    pub(crate) fn take(&self, id: &str) -> Result<OpenSet> {
        let missing = || Error::NotFound {
            path: Shown::text(id),
            why: "no such change set (`safe-lanes changes` lists them)".into(),
        };
        if !is_set_id(id) {
            return Err(missing());
        }
        let name = Name::new(id)?;
        let st = match self.dir.stat_entry(name) {
            Ok(st) => st,
            Err(Error::NotFound { .. }) => return Err(missing()),
            Err(e) => return Err(e),
        };
        // A lock held by a copy of a descriptor that a `fork` made goes within moments (its
        // child runs its program); one held by a process at work may take longer.
        let mut holder = held::holder(&self.dir, name.as_os_str(), &st);
        for _ in 0..TAKE_TRIES {
            if !matches!(holder, Holder::Live) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            holder = held::holder(&self.dir, name.as_os_str(), &st);
        }
        match holder {
            Holder::Abandoned(fd) => {
                let dir = Anchor::new(fd.try_clone().map_err(|e| Error::io("dup", id, e))?);
                let meta: Meta = read_json(&dir, SET_FILE)?.ok_or_else(missing)?;
                Ok(OpenSet {
                    meta,
                    dir,
                    path: self.path.join(id),
                    store: self.dir.try_clone()?,
                    audit: Arc::clone(&self.audit),
                    _lock: Lock::Taken(fd),
                })
            }
            Holder::Live | Holder::Making | Holder::Unknown => Err(Error::InvalidArgument {
                what: Shown::text(id),
                why: "the change set is being worked on by another process (its command runs, \
                      or its changes are being published); try again when it ends"
                    .into(),
            }),
            Holder::Stale | Holder::None => Err(missing()),
        }
    }

    /// Remove the set `id` if it is broken — made half (no `set.json`) by a process that
    /// died — and nobody holds it.
    pub(crate) fn remove_broken(&self, id: &str) {
        let Ok(name) = Name::new(id) else { return };
        let Ok(st) = self.dir.stat_entry(name) else {
            return;
        };
        if let Holder::Abandoned(fd) = held::holder(&self.dir, name.as_os_str(), &st)
            && state_of(&Anchor::new(fd)) == State::Broken
        {
            let _ = self.dir.remove_all(name);
        }
    }
}

impl OpenSet {
    /// The audit log it is recorded in.
    pub(super) fn audit(&self) -> &AuditLog {
        &self.audit
    }

    /// Remove the whole set (still locked: nobody takes it meanwhile): its `set.json` first,
    /// so that a process killed while removing the rest leaves what is no set at all (removed by
    /// the next process), never one that looks interrupted and would be decided again.
    pub(super) fn remove(&self) -> Result<()> {
        match self.dir.remove_file(Name::new(SET_FILE)?) {
            Ok(()) | Err(Error::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        self.store.remove_all(Name::new(&self.meta.id)?)
    }

    /// The set's directory.
    pub(super) fn dir(&self) -> &Anchor {
        &self.dir
    }

    /// The upper directory of layer `n`, and its path.
    pub(crate) fn upper(&self, n: usize) -> Result<(Anchor, PathBuf)> {
        let rel = Path::new(LAYERS).join(n.to_string()).join(UPPER);
        Ok((
            self.dir.open_dir(RelPath::new(&rel)?, Symlinks::Deny)?,
            self.path.join(rel),
        ))
    }

    /// The work directory of layer `n`, and its path.
    #[cfg(target_os = "linux")]
    pub(crate) fn work(&self, n: usize) -> Result<(Anchor, PathBuf)> {
        let rel = Path::new(LAYERS).join(n.to_string()).join(WORK);
        Ok((
            self.dir.open_dir(RelPath::new(&rel)?, Symlinks::Deny)?,
            self.path.join(rel),
        ))
    }

    /// Where it is in its life (as a listing would find it, were it not locked).
    pub(super) fn state(&self) -> State {
        state_of(&self.dir)
    }

    /// The journal left to finish, if any.
    pub(super) fn journal(&self) -> Result<Option<Journal>> {
        read_json(&self.dir, JOURNAL)
    }

    /// Write `journal` (atomically) before any of it is done.
    pub(super) fn write_journal(&self, journal: &Journal) -> Result<()> {
        write_json(&self.dir, JOURNAL, journal)
    }

    /// Its held changes, once decided.
    pub(super) fn held(&self) -> Result<Vec<super::HeldEntry>> {
        let held: Vec<super::HeldEntry> = read_json(&self.dir, HELD_FILE)?.unwrap_or_default();
        match held.iter().find(|h| h.layer >= self.meta.layers.len()) {
            Some(h) => Err(Error::InvalidManifest {
                path: Shown::text(HELD_FILE),
                why: format!(
                    "a change set's {HELD_FILE} names layer {} of a set of {}",
                    h.layer,
                    self.meta.layers.len()
                ),
            }),
            None => Ok(held),
        }
    }
}

/// What the set whose directory is `dir` is, from its files.
fn state_of(dir: &Anchor) -> State {
    let has = |name: &str| Name::new(name).is_ok_and(|n| dir.stat_entry(n).is_ok());
    if !has(SET_FILE) {
        State::Broken
    } else if has(JOURNAL) {
        State::Unfinished
    } else if has(HELD_FILE) {
        State::Waiting
    } else {
        State::Interrupted
    }
}

/// Whether `name` is a set's id: `set_` and 16 lowercase hex digits.
pub(crate) fn is_set_id(name: &str) -> bool {
    name.strip_prefix("set_").is_some_and(|hex| {
        hex.len() == 16 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// Write `value` as the JSON file `name` of `dir`, atomically: a reader, or the next process
/// after any process's death, finds the old file or the new one. Not `fsync`ed: a set is as
/// durable as the audit log it is recorded in, which survives the death of a process, not of
/// the machine (ADR 0027); every sync here would also make the file system commit everything
/// the command wrote, which is the command's cost, not the set's.
pub(super) fn write_json(dir: &Anchor, name: &str, value: &impl Serialize) -> Result<()> {
    let bytes = serde_json::to_vec(value)
        .map_err(|e| Error::io("serialize", name, std::io::Error::other(e)))?;
    dir.write_file_unsynced(Name::new(name)?, &bytes, 0o600, Publish::Replace)
}

/// The JSON file `name` of `dir`, if it is there.
///
/// # Errors
///
/// `io`, and for a file that does not parse (a hand-edited set) `invalid_manifest`.
pub(super) fn read_json<T: serde::de::DeserializeOwned>(
    dir: &Anchor,
    name: &str,
) -> Result<Option<T>> {
    let Some(bytes) = read_small(dir, name)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| Error::InvalidManifest {
            path: Shown::text(name),
            why: format!("a change set's {name} does not read: {e}"),
        })
}

/// The content of the regular file `name` of `dir` (at most [`MAX_FILE`]), if it is there.
pub(super) fn read_small(dir: &Anchor, name: &str) -> Result<Option<Vec<u8>>> {
    let fd = match dir.open_read(RelPath::new(name)?, Symlinks::Deny) {
        Ok(fd) => fd,
        Err(Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    ReadAt::new(fd.as_fd())
        .take(MAX_FILE)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io("read", name, e))?;
    Ok(Some(bytes))
}
