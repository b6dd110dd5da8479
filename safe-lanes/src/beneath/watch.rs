//! Whether a directory's names changed, or a tree's names and modes: the kernel's change
//! notifications (`inotify`) on anchored directories, so that a view derived from reading them
//! can be kept until they change.

use std::os::fd::{AsRawFd, OwnedFd};

use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use rustix::io::Errno;

use super::anchor::Anchor;

/// Change notifications for one directory's names: any name made, removed or moved in or out
/// of it, by any process, and the directory itself removed or moved.
///
/// The kernel queues a notification before the call that made the change returns, so a
/// change that happened before [`NameWatch::changed`] is called is always reported by it.
#[derive(Debug)]
pub(crate) struct NameWatch {
    fd: OwnedFd,
}

impl NameWatch {
    /// Watch `dir`, or `None` where the kernel gives no notifications for it (no `inotify`, or
    /// this user's instances all in use): then nothing may be kept.
    pub(crate) fn new(dir: &Anchor) -> Option<Self> {
        let fd = instance()?;
        add(&fd, dir, NAMES).ok()?;
        Some(Self { fd })
    }

    /// Whether anything was reported since the last call (or since the watch was made): the
    /// pending notifications are read and dropped. A failure to read counts as a change.
    pub(crate) fn changed(&self) -> bool {
        drain(&self.fd)
    }
}

/// Change notifications for a tree of directories, each added as it is read: any name made,
/// removed or moved in one, and any change of the mode, owner or other attributes of one or
/// of an entry in one (and, for a watch [`TreeWatch::seeing_writes`], a file in one written
/// and closed).
#[derive(Debug)]
pub(crate) struct TreeWatch {
    fd: OwnedFd,
    /// A directory could not be added (this user's watches all in use): nothing may be kept.
    incomplete: bool,
    /// What is watched in each directory.
    events: WatchFlags,
}

impl TreeWatch {
    /// A watch of no directory yet, or `None` where the kernel gives no notifications.
    pub(crate) fn new() -> Option<Self> {
        Some(Self {
            fd: instance()?,
            incomplete: false,
            events: NAMES | WatchFlags::ATTRIB,
        })
    }

    /// [`TreeWatch::new`], also seeing a file written and closed (what a file holds decides
    /// whether it is hidden: a token saved into an `.npmrc`).
    pub(crate) fn seeing_writes() -> Option<Self> {
        let mut watch = Self::new()?;
        watch.events |= WatchFlags::CLOSE_WRITE;
        Some(watch)
    }

    /// Watch `dir` too. Add a directory before reading it: a change made after its reading
    /// began is then always reported.
    pub(crate) fn add(&mut self, dir: &Anchor) {
        if add(&self.fd, dir, self.events).is_err() {
            self.incomplete = true;
        }
    }

    /// Whether anything was reported since the last call (or since the first directory was
    /// added), or a directory could not be added: the pending notifications are read and
    /// dropped. A failure to read counts as a change.
    pub(crate) fn changed(&self) -> bool {
        drain(&self.fd) || self.incomplete
    }
}

/// What a directory's names changing raises: any name made, removed or moved in or out of
/// it, and the directory itself removed or moved.
const NAMES: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF)
    .union(WatchFlags::ONLYDIR);

/// A new, non-blocking `inotify` instance.
fn instance() -> Option<OwnedFd> {
    inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok()
}

/// Watch the directory `dir` for `flags` on `fd`.
fn add(fd: &OwnedFd, dir: &Anchor, flags: WatchFlags) -> rustix::io::Result<()> {
    // `inotify` names what it watches by path only: the kernel's own link to the descriptor
    // names exactly the directory anchored, whatever its path is now.
    let link = format!("/proc/self/fd/{}", dir.as_fd().as_raw_fd());
    inotify::add_watch(fd, link.as_str(), flags).map(|_| ())
}

/// Whether `fd` had notifications pending: all are read and dropped. A failure to read
/// counts as one.
fn drain(fd: &OwnedFd) -> bool {
    let mut changed = false;
    let mut buf = [0u8; 4096];
    loop {
        match rustix::io::read(fd, &mut buf) {
            Ok(0) | Err(Errno::AGAIN) => return changed,
            Ok(_) => changed = true,
            Err(Errno::INTR) => {}
            Err(_) => return true,
        }
    }
}
