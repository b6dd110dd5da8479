//! Whether a directory's names changed: the kernel's change notifications (`inotify`) on an
//! anchored directory, so that a view derived from reading it can be kept until it changes.

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
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok()?;
        // `inotify` names what it watches by path only: the kernel's own link to the
        // descriptor names exactly the directory anchored, whatever its path is now.
        let link = format!("/proc/self/fd/{}", dir.as_fd().as_raw_fd());
        let names = WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF
            | WatchFlags::ONLYDIR;
        inotify::add_watch(&fd, link.as_str(), names).ok()?;
        Some(Self { fd })
    }

    /// Whether anything was reported since the last call (or since the watch was made): the
    /// pending notifications are read and dropped. A failure to read counts as a change.
    pub(crate) fn changed(&self) -> bool {
        let mut changed = false;
        let mut buf = [0u8; 4096];
        loop {
            match rustix::io::read(&self.fd, &mut buf) {
                Ok(0) | Err(Errno::AGAIN) => return changed,
                Ok(_) => changed = true,
                Err(Errno::INTR) => {}
                Err(_) => return true,
            }
        }
    }
}
