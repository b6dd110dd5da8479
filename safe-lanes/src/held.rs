//! Entries that say "in use" for as long as the process that made them lives.
//!
//! A held entry is a directory made under a hidden name (`.<random>`), locked with `flock`, and
//! only then renamed to its real name (`<random>`) without replacing anything. Under its real
//! name it is therefore always locked while its maker lives, and the lock goes with the
//! process: an entry whose lock can be taken was left by a process that ended without removing
//! it (a crash, a `kill -9`). The deposit's staging directories and the download lane's savers
//! are held entries.
//!
//! `flock` locks belong to the open file description: a second descriptor, even in the same
//! process, cannot take a lock that is held, so two handles in one process see each other too.

use std::ffi::OsStr;

use rustix::fs::{FileType, FlockOperation, Stat};

use crate::beneath::{Anchor, Symlinks};
use crate::error::{Error, Result};
use crate::input::{Name, RelPath};
use crate::random::random_hex;

/// A held entry this process made: locked while this lives (the lock goes when it is dropped
/// or the process ends). Removing the entry is its owner's business.
#[derive(Debug)]
pub(crate) struct Held {
    /// The entry's directory, locked.
    pub(crate) dir: Anchor,
    /// Its name in the parent.
    pub(crate) name: String,
}

impl Held {
    /// Make a held entry in `parent` (mode 0700).
    ///
    /// # Errors
    ///
    /// `io`; nothing is left in `parent`.
    pub(crate) fn create(parent: &Anchor) -> Result<Self> {
        let name = random_hex();
        let hidden = format!(".{name}");
        parent.create_dir(Name::new(&hidden)?, 0o700)?;
        let made = (|| {
            let dir = parent.open_dir(RelPath::new(&hidden)?, Symlinks::Deny)?;
            rustix::fs::flock(&dir, FlockOperation::LockExclusive)
                .map_err(|e| Error::io("flock", hidden.as_str(), e))?;
            parent.rename_new(Name::new(&hidden)?, Name::new(&name)?)?;
            Ok(dir)
        })();
        match made {
            Ok(dir) => Ok(Self { dir, name }),
            Err(e) => {
                let _ = Name::new(&hidden).and_then(|hidden| parent.remove_all(hidden));
                Err(e)
            }
        }
    }
}

/// Who holds an entry, as [`holder`] finds it.
#[derive(Debug)]
pub(crate) enum Holder {
    /// A live process holds its lock: in use.
    Live,
    /// Nobody does any more: its process ended without removing it. The lock is now this
    /// anchor's, so no one else judges it abandoned while the caller keeps it.
    Abandoned(Anchor),
    /// Not a held entry: hidden (still being made, see [`Held::create`]), not a directory, or
    /// gone.
    None,
}

/// Who holds the entry `name` of `parent`, whose `lstat` is `st`.
pub(crate) fn holder(parent: &Anchor, name: &OsStr, st: &Stat) -> Holder {
    let is_dir = FileType::from_raw_mode(st.st_mode) == FileType::Directory;
    if !is_dir || name.as_encoded_bytes().starts_with(b".") {
        return Holder::None;
    }
    let Ok(dir) = Name::new(name).and_then(|n| parent.open_dir(n.as_rel(), Symlinks::Deny)) else {
        return Holder::None;
    };
    match rustix::fs::flock(&dir, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Holder::Abandoned(dir),
        Err(_) => Holder::Live,
    }
}
