//! Placeholders for missing protected paths, and when they may go.
//!
//! A protected path that does not exist ([`crate::protected`]) must still be kept from a
//! confined command, so the sandbox mounts it read-only; a mount needs something to mount on,
//! so the gateway first creates a placeholder in the human's folder (an empty directory, or a
//! file git reads as if absent). A placeholder may go only once no confined command relies on
//! it: removing a mount point from outside a sandbox detaches the mount inside it, and the
//! command could then create the path.
//!
//! The registry `<root>/.placeholders/` (0700, checked as a lane is) decides that for every
//! process of the state root:
//!
//! | file | what it says |
//! |---|---|
//! | `lock` | held exclusively (`flock`) while placeholders are made or removed |
//! | `in-use` | each running confined command of a read-write grant holds a shared `flock` on it (an open file description of its own), taken before its placeholders are made and dropped when it ends; the kernel drops it when its process dies |
//! | `journal` | every placeholder made, written before it is made |
//!
//! When `in-use` can be taken exclusively, no confined command of any process relies on a
//! placeholder, and every one in the journal is removed — each only while it still is one (an
//! empty directory, or a file holding exactly its placeholder's content), so nothing the human
//! put there since is touched. The last command to end does it, and so does the next command
//! to start after a crash.
//!
//! Every lock is released by its holder ([`Flocked`]), not left to the close of its
//! descriptor: a `fork` anywhere in the process copies the descriptor, and a copy keeps the
//! lock until the child's `exec` (or for good, in a child that never execs).

use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{FileType, FlockOperation, Mode, OFlags};

use crate::beneath::{Anchor, Symlinks};
use crate::error::{Error, Result, Shown};
use crate::fd::{ReadAt, write_all};
use crate::grants::Grants;
use crate::input::{AbsPath, Name, RelPath};
use crate::protected::Placeholder;
use crate::root::{PLACEHOLDERS_DIR, private_dir};

const LOCK: &str = "lock";
const IN_USE: &str = "in-use";
const JOURNAL: &str = "journal";
/// The most of the journal read at once (it is emptied at every collection).
const MAX_JOURNAL_BYTES: u64 = 16 << 20;

/// A placeholder a command needs: `path` (relative) in the grant whose folder is `folder`, at
/// `grant`.
#[derive(Debug)]
pub(super) struct Wanted<'a> {
    pub(super) folder: &'a Anchor,
    pub(super) grant: &'a Path,
    pub(super) path: &'a Path,
    pub(super) placeholder: Placeholder,
}

/// A running command's hold on the placeholders: while it lives, none is removed. Dropping it
/// removes them all when no other command holds them.
#[derive(Debug)]
pub(super) struct InUse {
    registry: Anchor,
    shared: Option<Flocked>,
}

impl Drop for InUse {
    fn drop(&mut self) {
        drop(self.shared.take());
        if let Err(e) = collect(&self.registry) {
            tracing::warn!(error = %e, "could not remove the placeholders of protected paths");
        }
    }
}

/// The registry of `grants`' state root.
#[derive(Debug)]
pub(super) struct Registry {
    dir: Anchor,
}

/// The registry, locked: nothing is made or removed by anyone else while this lives, and
/// what a crash left has been removed.
#[derive(Debug)]
pub(super) struct Locked<'r> {
    registry: &'r Registry,
    lock: Flocked,
}

impl Registry {
    /// The registry of `grants`' state root (made when missing).
    ///
    /// # Errors
    ///
    /// `insecure_root` when it is not private; `io`.
    pub(super) fn open(grants: &Grants) -> Result<Self> {
        Ok(Self {
            dir: private_dir(grants.root(), grants.root_path(), PLACEHOLDERS_DIR)?,
        })
    }

    /// Lock the registry; first remove the placeholders nobody holds (what a crash left), so
    /// what the caller then finds in its grants is what stays.
    ///
    /// # Errors
    ///
    /// `insecure_root` for a registry file that is not a regular file; `io`.
    pub(super) fn lock(&self) -> Result<Locked<'_>> {
        let lock = Flocked::take(
            file(&self.dir, LOCK, OFlags::RDWR)?,
            FlockOperation::LockExclusive,
            LOCK,
        )?;
        remove_if_unused(&self.dir)?;
        Ok(Locked {
            registry: self,
            lock,
        })
    }
}

impl Locked<'_> {
    /// Hold the placeholders for one command, making those in `wanted` (each journaled
    /// first), then unlock.
    ///
    /// # Errors
    ///
    /// `io` when one cannot be made (what was made is removed again once nobody holds it).
    pub(super) fn hold(self, wanted: &[Wanted<'_>]) -> Result<InUse> {
        let dir = &self.registry.dir;
        if !wanted.is_empty() {
            let journal = file(dir, JOURNAL, OFlags::WRONLY | OFlags::APPEND)?;
            for w in wanted {
                write_all(journal.as_fd(), &record(w))
                    .map_err(|e| Error::io("write", Shown::path(Path::new(JOURNAL)), e))?;
            }
        }
        let shared = Flocked::take(
            file(dir, IN_USE, OFlags::RDONLY)?,
            FlockOperation::LockShared,
            IN_USE,
        )?;
        let made = wanted.iter().try_for_each(make);
        let in_use = InUse {
            registry: dir.try_clone()?,
            shared: Some(shared),
        };
        // Unlocked before `in_use` may be dropped (on a failure): its drop takes the lock.
        drop(self.lock);
        made.map(|()| in_use)
    }
}

/// Remove every journaled placeholder, if no command holds them.
fn collect(registry: &Anchor) -> Result<()> {
    let _lock = Flocked::take(
        file(registry, LOCK, OFlags::RDWR)?,
        FlockOperation::LockExclusive,
        LOCK,
    )?;
    remove_if_unused(registry)
}

/// Under the registry's lock: when nobody holds `in-use`, remove what the journal names and
/// empty it.
fn remove_if_unused(registry: &Anchor) -> Result<()> {
    let in_use = file(registry, IN_USE, OFlags::RDONLY)?;
    let Ok(_unused) = Flocked::take(in_use, FlockOperation::NonBlockingLockExclusive, IN_USE)
    else {
        return Ok(());
    };
    let journal = file(registry, JOURNAL, OFlags::RDWR)?;
    let mut text = Vec::new();
    ReadAt::new(journal.as_fd())
        .take(MAX_JOURNAL_BYTES)
        .read_to_end(&mut text)
        .map_err(|e| Error::io("read", Shown::path(Path::new(JOURNAL)), e))?;
    if text.is_empty() {
        return Ok(());
    }
    let mut fields = text.split(|b| *b == 0);
    while let (Some(kind), Some(grant), Some(path)) = (fields.next(), fields.next(), fields.next())
    {
        let (grant, path) = (
            Path::new(std::ffi::OsStr::from_bytes(grant)),
            Path::new(std::ffi::OsStr::from_bytes(path)),
        );
        if let Err(e) = remove(kind, grant, path) {
            tracing::warn!(error = %e, "could not remove a placeholder");
        }
    }
    rustix::fs::ftruncate(&journal, 0).map_err(|e| Error::io("ftruncate", JOURNAL, e))
}

/// One journal record: the placeholder's kind (`d`, or `f` and its content), the grant's
/// folder and the path in it, each ended by a NUL (which no path holds).
fn record(w: &Wanted<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    match w.placeholder {
        Placeholder::Dir => out.push(b'd'),
        Placeholder::File(content) => {
            out.push(b'f');
            out.extend_from_slice(content);
        }
    }
    for part in [w.grant, w.path] {
        out.push(0);
        out.extend_from_slice(part.as_os_str().as_bytes());
    }
    out.push(0);
    out
}

/// Make the placeholder `w` (nothing when something is there already).
fn make(w: &Wanted<'_>) -> Result<()> {
    let (parent, name) = split(w.path)?;
    let dir = w.folder.open_dir(parent, Symlinks::Deny)?;
    let exists = |e: &Error| e.raw_os_error() == Some(rustix::io::Errno::EXIST.raw_os_error());
    match w.placeholder {
        Placeholder::Dir => match dir.create_dir(name, 0o755) {
            Err(e) if !exists(&e) => Err(e),
            _ => Ok(()),
        },
        Placeholder::File(content) => match dir.create_new(name, 0o644) {
            Ok(fd) => write_all(fd.as_fd(), content).map_err(|e| Error::io("write", w.path, e)),
            Err(e) if exists(&e) => Ok(()),
            Err(e) => Err(e),
        },
    }
}

/// Remove the placeholder a journal record names, if it still is one.
fn remove(kind: &[u8], grant: &Path, path: &Path) -> Result<()> {
    let folder = match Anchor::open_canonical(AbsPath::new(grant)?) {
        Ok(folder) => folder,
        Err(e) if e.code() != crate::error::Code::Io => return Ok(()),
        Err(e) => return Err(e),
    };
    let (parent, name) = split(path)?;
    let dir = match folder.open_dir(parent, Symlinks::Deny) {
        Ok(dir) => dir,
        Err(e) if e.code() != crate::error::Code::Io => return Ok(()),
        Err(e) => return Err(e),
    };
    let ignore = |e: Error| match e.raw_os_error() {
        Some(n) if n == rustix::io::Errno::NOTEMPTY.raw_os_error() => Ok(()),
        Some(n) if n == rustix::io::Errno::NOENT.raw_os_error() => Ok(()),
        Some(n) if n == rustix::io::Errno::NOTDIR.raw_os_error() => Ok(()),
        _ => Err(e),
    };
    match kind.split_first() {
        Some((b'd', _)) => dir.remove_dir(name).or_else(ignore),
        Some((b'f', content)) => {
            let fd = match dir.open_read(name.as_rel(), Symlinks::Deny) {
                Ok(fd) => fd,
                Err(_) => return Ok(()),
            };
            let st = rustix::fs::fstat(&fd).map_err(|e| Error::io("fstat", path, e))?;
            let mut text = Vec::new();
            ReadAt::new(fd.as_fd())
                .take(content.len() as u64 + 1)
                .read_to_end(&mut text)
                .map_err(|e| Error::io("read", path, e))?;
            let ours =
                FileType::from_raw_mode(st.st_mode) == FileType::RegularFile && text == content;
            let same = crate::beneath::identity(fd.as_fd())?;
            if ours {
                dir.remove_file_if(name, |now| crate::beneath::stat_identity(now) == same)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// `path`'s parent (relative) and last component.
fn split(path: &Path) -> Result<(RelPath<'_>, Name<'_>)> {
    let name = path.file_name().ok_or_else(|| Error::InvalidArgument {
        what: Shown::path(path),
        why: "a placeholder path names a file".into(),
    })?;
    let parent = path.parent().unwrap_or(Path::new(""));
    let parent = if parent.as_os_str().is_empty() {
        RelPath::here()
    } else {
        RelPath::without_parents(parent)?
    };
    Ok((parent, Name::new(name)?))
}

/// The registry's file `name`, opened with `flags` (created 0600 when missing); it must be a
/// regular file.
fn file(registry: &Anchor, name: &str, flags: OFlags) -> Result<OwnedFd> {
    let fd = registry.open(
        RelPath::new(name)?,
        flags | OFlags::CREATE | OFlags::NONBLOCK,
        Mode::from_raw_mode(0o600),
        Symlinks::Deny,
    )?;
    let st = rustix::fs::fstat(&fd).map_err(|e| Error::io("fstat", name, e))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(Error::InsecureRoot {
            path: Shown::path(&Path::new(PLACEHOLDERS_DIR).join(name)),
            why: "not a regular file: `safe-lanes init` puts it right".into(),
        });
    }
    Ok(fd)
}

/// A `flock` held on an open file description, released when this is dropped.
///
/// The lock belongs to the open file description, not to the descriptor: closing the
/// descriptor releases it only once no copy of it is left, and a `fork` anywhere in the
/// process (another thread spawning a program) makes copies, which a child keeps until its
/// `exec`, or for good if it never execs. Unlocking releases it for every copy at once.
#[derive(Debug)]
struct Flocked {
    fd: OwnedFd,
    name: &'static str,
}

impl Flocked {
    /// `fd`, the registry's file `name`, locked by `op`.
    fn take(fd: OwnedFd, op: FlockOperation, name: &'static str) -> Result<Self> {
        flock(&fd, op, name)?;
        Ok(Self { fd, name })
    }
}

impl Drop for Flocked {
    fn drop(&mut self) {
        // Unlocking does not block; should it fail, the close that follows still releases
        // the lock once no copy of the descriptor is left.
        if let Err(e) = flock(&self.fd, FlockOperation::Unlock, self.name) {
            tracing::warn!(error = %e, "could not unlock the placeholder registry");
        }
    }
}

fn flock(fd: &OwnedFd, op: FlockOperation, name: &str) -> Result<()> {
    loop {
        match rustix::fs::flock(fd, op) {
            Err(rustix::io::Errno::INTR) => continue,
            other => return other.map_err(|e| Error::io("flock", name, e)),
        }
    }
}
