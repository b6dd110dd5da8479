//! The `openat2(2)` backend: the kernel resolves the whole path beneath the anchor.

use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use super::Symlinks;

/// How many times a lookup that raced a rename (`EAGAIN`) is retried before giving up.
const RETRIES: usize = 8;

/// `openat2(dir, path, flags, mode, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS [| RESOLVE_NO_SYMLINKS])`.
///
/// # References
///
/// - [openat2(2)](https://man7.org/linux/man-pages/man2/openat2.2.html)
pub(super) fn open(
    dir: BorrowedFd<'_>,
    path: &Path,
    flags: OFlags,
    mode: Mode,
    symlinks: Symlinks,
) -> Result<OwnedFd, Errno> {
    let mut resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    if symlinks == Symlinks::Deny {
        resolve |= ResolveFlags::NO_SYMLINKS;
    }
    // openat2 rejects a mode without O_CREAT/O_TMPFILE.
    let mode = if flags.intersects(OFlags::CREATE | OFlags::TMPFILE) {
        mode
    } else {
        Mode::empty()
    };
    let path = if path.as_os_str().is_empty() {
        Path::new(".")
    } else {
        path
    };
    let mut last = Errno::AGAIN;
    for _ in 0..RETRIES {
        match rustix::fs::openat2(dir, path, flags, mode, resolve) {
            Err(Errno::AGAIN) => last = Errno::AGAIN,
            other => return other,
        }
    }
    Err(last)
}
