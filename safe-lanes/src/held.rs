//! Entries that say "in use" for as long as the process that made them lives.
//!
//! A held entry is a file or a directory locked with `flock` by the process that made it, and
//! given its real name only once locked: made unnamed (`O_TMPFILE`) or under a hidden name
//! (`.<random>`), locked, then linked or renamed to `<random>` without replacing anything. The
//! lock goes with the process: an entry under its real name whose lock can be taken was left
//! by a process that ended without removing it (a crash, a `kill -9`). The deposit's staging
//! directories and the download lane's savers are held entries.
//!
//! An owner removes its entry while it still holds the lock, and so does whoever removes an
//! entry it judged abandoned: a lock taken after that finds the name gone, and [`holder`]
//! checks for exactly that. `flock` locks belong to the open file description: a second
//! descriptor, even in the same process, cannot take a lock that is held.

use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, SystemTime};

use rustix::fs::{FileType, FlockOperation, Mode, OFlags, Stat};

use crate::beneath::{Anchor, Symlinks, identity, stat_identity};
use crate::error::{Code, Error, Result};
use crate::input::Name;
use crate::random::random_hex;

/// A hidden entry older than this was left by a process that died while making it.
const STALE_AFTER: Duration = Duration::from_secs(3600);

/// A held entry this process made, `T` being its directory ([`Anchor`]) or its file
/// ([`OwnedFd`]): locked while this lives (the lock goes when it is dropped or the process
/// ends). Removing the entry is its owner's business.
#[derive(Debug)]
pub(crate) struct Held<T> {
    /// The entry, locked.
    pub(crate) entry: T,
    /// Its name in the parent.
    pub(crate) name: String,
}

impl Held<Anchor> {
    /// Make a held directory in `parent` (mode 0700): made under a hidden name, locked, then
    /// renamed.
    ///
    /// # Errors
    ///
    /// `io`; nothing is left in `parent`.
    pub(crate) fn create_dir(parent: &Anchor) -> Result<Self> {
        Self::create_dir_named(parent, random_hex())
    }

    /// [`Held::create_dir`] under the name `name` (a random one the caller made).
    ///
    /// # Errors
    ///
    /// `io` (`EEXIST` when `name` is taken); nothing is left in `parent`.
    pub(crate) fn create_dir_named(parent: &Anchor, name: String) -> Result<Self> {
        let hidden = format!(".{name}");
        parent.create_dir(Name::new(&hidden)?, 0o700)?;
        let made = (|| {
            let dir = parent.open_dir(Name::new(&hidden)?.as_rel(), Symlinks::Deny)?;
            lock(&dir, &hidden)?;
            parent.rename_new(Name::new(&hidden)?, Name::new(&name)?)?;
            Ok(dir)
        })();
        match made {
            Ok(entry) => Ok(Self { entry, name }),
            Err(e) => {
                let _ = Name::new(&hidden).and_then(|hidden| parent.remove_all(hidden));
                Err(e)
            }
        }
    }
}

impl Held<OwnedFd> {
    /// Make a held empty file in `parent` (mode 0600): unnamed, locked, then linked (Linux),
    /// or under a hidden name, locked, then renamed ([`crate::beneath::Publishing`]); renaming a file works on
    /// every filesystem (the `link` + `unlink` fallback), which a directory's does not.
    ///
    /// # Errors
    ///
    /// `io`; nothing is left in `parent`.
    pub(crate) fn create_file(parent: &Anchor) -> Result<Self> {
        let name = random_hex();
        #[cfg(target_os = "linux")]
        if crate::beneath::publishing() == crate::beneath::Publishing::Link
            && let Ok(file) = parent.create_unnamed(0o600)
        {
            lock(&file, &name)?;
            parent.link_new(file.as_fd(), Name::new(&name)?)?;
            return Ok(Self { entry: file, name });
        }
        let hidden = format!(".{name}");
        let file = parent.create_new(Name::new(&hidden)?, 0o600)?;
        let made = lock(&file, &hidden)
            .and_then(|()| parent.rename_new(Name::new(&hidden)?, Name::new(&name)?));
        match made {
            Ok(()) => Ok(Self { entry: file, name }),
            Err(e) => {
                let _ = Name::new(&hidden).and_then(|hidden| parent.remove_file(hidden));
                Err(e)
            }
        }
    }
}

/// Take the lock of a new entry (`shown` names it on failure).
fn lock(entry: impl AsFd, shown: &str) -> Result<()> {
    rustix::fs::flock(entry, FlockOperation::LockExclusive)
        .map_err(|e| Error::io("flock", shown, e))
}

/// Who holds an entry, as [`holder`] finds it.
#[derive(Debug)]
pub(crate) enum Holder {
    /// A live process holds its lock: in use.
    Live,
    /// Nobody does: its process ended without removing it. The lock is now this
    /// descriptor's; keep it until the entry is removed.
    Abandoned(OwnedFd),
    /// A hidden entry being made (see [`Held`]): leave it.
    Making,
    /// A hidden entry older than an hour: its maker died while making it.
    Stale,
    /// Not a held entry: not a file or a directory, or gone.
    None,
    /// It could not be opened to see (out of descriptors, an I/O error): treat it as in use,
    /// and as a possible crash.
    Unknown,
}

/// Who holds the entry `name` of `parent`, whose `lstat` is `st`.
pub(crate) fn holder(parent: &Anchor, name: &OsStr, st: &Stat) -> Holder {
    let kind = FileType::from_raw_mode(st.st_mode);
    if kind != FileType::Directory && kind != FileType::RegularFile {
        return Holder::None;
    }
    if name.as_encoded_bytes().starts_with(b".") {
        let mtime = SystemTime::UNIX_EPOCH + Duration::from_secs(st.st_mtime.max(0) as u64);
        let cutoff = SystemTime::now().checked_sub(STALE_AFTER);
        return match cutoff {
            Some(cutoff) if mtime < cutoff => Holder::Stale,
            _ => Holder::Making,
        };
    }
    let Ok(entry) = Name::new(name) else {
        return Holder::None;
    };
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = match parent.open(entry.as_rel(), flags, Mode::empty(), Symlinks::Deny) {
        Ok(fd) => fd,
        // Gone, or no longer a file or directory (replaced by a link): not a held entry.
        Err(e) if e.code() != Code::Io => return Holder::None,
        Err(_) => return Holder::Unknown,
    };
    if rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive).is_err() {
        return Holder::Live;
    }
    // Its owner, or another judge, may have removed it just before letting the lock go.
    let still_there = identity(fd.as_fd()).is_ok_and(|ours| {
        parent
            .stat_entry(entry)
            .is_ok_and(|st| stat_identity(&st) == ours)
    });
    if still_there {
        Holder::Abandoned(fd)
    } else {
        Holder::None
    }
}
