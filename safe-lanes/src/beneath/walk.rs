//! The component-walk backend, for kernels without `openat2(2)`.
//!
//! Invariants, held at every step:
//!
//! - `stack` holds a descriptor for every directory entered below the anchor, in order; the
//!   current directory is its top (or the anchor when it is empty). Every one of them was
//!   opened relative to the one before with `O_NOFOLLOW`, so each is beneath the anchor.
//! - `..` pops the stack; popping an empty stack would leave the anchor and is `EXDEV`.
//!   The kernel's `..` is never used, so a directory moved elsewhere while we hold it cannot
//!   take the walk with it.
//! - A symbolic link is read through a descriptor of the link itself (`readlinkat(fd, "")`), so
//!   the text read is the text of the link that was checked; its components replace it in the
//!   queue. An absolute target is `EXDEV`; more than [`MAX_LINKS`] links is `ELOOP`.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

use super::Symlinks;

/// The most symbolic links one lookup follows (as the kernel's `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// Resolve `path` beneath `anchor` one component at a time and open the last one with `flags`.
pub(super) fn open(
    anchor: BorrowedFd<'_>,
    path: &Path,
    flags: OFlags,
    mode: Mode,
    symlinks: Symlinks,
) -> Result<OwnedFd, Errno> {
    let bytes = path.as_os_str().as_bytes();
    let mut queue = split(bytes);
    // A trailing `/`, `.` or `..` means the result is a directory: every component is then
    // entered, and the directory reached is opened as `.` at the end.
    let mut want_dir = ends_like_dir(bytes);
    let mut stack: Vec<OwnedFd> = Vec::new();
    let mut links = 0usize;

    while let Some(part) = queue.pop_front() {
        let cur = stack.last().map_or(anchor, |fd| fd.as_fd());
        if part == b".." {
            stack.pop().ok_or(Errno::XDEV)?;
            continue;
        }
        let name = Path::new(OsStr::from_bytes(&part));
        let was_last = queue.is_empty();
        if !was_last || want_dir {
            // A component to enter: it must be a directory or a link to one.
            let fd = node(cur, name)?;
            match file_type(&fd)? {
                FileType::Directory => stack.push(fd),
                FileType::Symlink => expand(&fd, &mut queue, &mut links, symlinks, was_last)
                    .map(|dir| want_dir |= dir)?,
                _ => return Err(Errno::NOTDIR),
            }
            continue;
        }
        match open_last(cur, name, flags, mode)? {
            Last::Opened(fd) => return Ok(fd),
            Last::Link(link) => want_dir |= expand(&link, &mut queue, &mut links, symlinks, true)?,
        }
    }
    let cur = stack.last().map_or(anchor, |fd| fd.as_fd());
    rustix::fs::openat(cur, ".", flags | OFlags::DIRECTORY, mode)
}

/// What the last component of a path turned out to be.
enum Last {
    /// The file itself, opened with the caller's flags.
    Opened(OwnedFd),
    /// A symbolic link (as `O_PATH`), still to be expanded.
    Link(OwnedFd),
}

/// Open the last component `name` in `dir` for real, never following a link implicitly. A
/// link there fails with `ELOOP`, or `ENOTDIR` under `O_DIRECTORY` (`O_PATH` opens it): it is
/// then handed back to be expanded.
fn open_last(dir: BorrowedFd<'_>, name: &Path, flags: OFlags, mode: Mode) -> Result<Last, Errno> {
    match rustix::fs::openat(dir, name, flags | OFlags::NOFOLLOW, mode) {
        Ok(fd) if flags.contains(OFlags::PATH) && file_type(&fd)? == FileType::Symlink => {
            Ok(Last::Link(fd))
        }
        Ok(fd) => Ok(Last::Opened(fd)),
        Err(e @ (Errno::LOOP | Errno::NOTDIR)) => {
            let fd = node(dir, name)?;
            if file_type(&fd)? != FileType::Symlink {
                return Err(e);
            }
            Ok(Last::Link(fd))
        }
        Err(e) => Err(e),
    }
}

fn file_type(fd: &OwnedFd) -> Result<FileType, Errno> {
    Ok(FileType::from_raw_mode(rustix::fs::fstat(fd)?.st_mode))
}

/// Replace a symbolic link (open as `O_PATH | O_NOFOLLOW` in `link`) by its target's
/// components. Returns whether the target, standing last, demands a directory (`sub/`).
fn expand(
    link: &OwnedFd,
    queue: &mut VecDeque<Vec<u8>>,
    links: &mut usize,
    symlinks: Symlinks,
    last: bool,
) -> Result<bool, Errno> {
    if symlinks == Symlinks::Deny {
        return Err(Errno::LOOP);
    }
    *links += 1;
    if *links > MAX_LINKS {
        return Err(Errno::LOOP);
    }
    let target = rustix::fs::readlinkat(link, c"", Vec::new())?;
    let target = target.to_bytes();
    if target.is_empty() {
        return Err(Errno::NOENT);
    }
    if target.first() == Some(&b'/') {
        return Err(Errno::XDEV);
    }
    for part in split(target).into_iter().rev() {
        queue.push_front(part);
    }
    Ok(last && ends_like_dir(target))
}

/// The components of `bytes`, without empty and `.` ones (`..` is kept).
fn split(bytes: &[u8]) -> VecDeque<Vec<u8>> {
    bytes
        .split(|&b| b == b'/')
        .filter(|p| !p.is_empty() && *p != b".")
        .map(<[u8]>::to_vec)
        .collect()
}

/// Whether a path demands a directory: it ends in `/`, or its last component is `.` or `..`.
fn ends_like_dir(bytes: &[u8]) -> bool {
    let last = bytes.rsplit(|&b| b == b'/').next().unwrap_or_default();
    bytes.ends_with(b"/") || last == b"." || last == b".."
}

/// An `O_PATH` descriptor of the entry `name` itself (a link is not followed).
fn node(dir: BorrowedFd<'_>, name: &Path) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}
