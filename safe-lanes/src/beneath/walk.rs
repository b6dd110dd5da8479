//! The component-walk backend: for kernels without `openat2(2)`, and the only backend on
//! systems that have no such call (macOS).
//!
//! Invariants, held at every step:
//!
//! - `stack` holds a descriptor for every directory entered below the anchor, in order; the
//!   current directory is its top (or the anchor when it is empty). Every one of them was
//!   opened relative to the one before by a single name with `O_DIRECTORY | O_NOFOLLOW`, so
//!   each is a directory beneath the anchor, never a link.
//! - `..` pops the stack; popping an empty stack would leave the anchor and is `EXDEV`.
//!   The kernel's `..` is never used, so a directory moved elsewhere while we hold it cannot
//!   take the walk with it.
//! - A name that `O_NOFOLLOW` refuses (`ELOOP`, or `ENOTDIR` under `O_DIRECTORY`) is read
//!   with `readlinkat` in the directory held; its components replace it in the queue and are
//!   walked like any others, so containment never depends on which link was read (one
//!   swapped in between is expanded by the same rules). An absolute target is `EXDEV`; more
//!   than [`MAX_LINKS`] links is `ELOOP`; a name that is no link after all keeps the error.
//! - A link on a mount that follows none (`nosymfollow`) is `ELOOP`, as the kernel answers:
//!   reading a link is allowed there, following it is not.
//!
//! Every call takes one name, so `O_NOFOLLOW` on that name is all the "follow no link"
//! there is to ask for (Apple's `O_NOFOLLOW_ANY` would add nothing). Directories are entered
//! with `O_PATH` on Linux and `O_RDONLY` elsewhere (no `O_PATH` there: a directory must be
//! readable to be walked through).

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

#[cfg(target_os = "linux")]
use rustix::fs::FileType;
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use super::Symlinks;
use super::filesystem::follows_links;

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
            match enter(cur, name)? {
                Last::Opened(fd) => stack.push(fd),
                Last::Link(target) => {
                    want_dir |= expand(&target, &mut queue, &mut links, symlinks, was_last)?;
                }
            }
            continue;
        }
        match open_last(cur, name, flags, mode)? {
            Last::Opened(fd) => return Ok(fd),
            Last::Link(target) => {
                want_dir |= expand(&target, &mut queue, &mut links, symlinks, true)?;
            }
        }
    }
    let cur = stack.last().map_or(anchor, |fd| fd.as_fd());
    rustix::fs::openat(cur, ".", flags | OFlags::DIRECTORY, mode)
}

/// What one component of a path turned out to be.
enum Last {
    /// The entry itself: a directory entered, or the last component opened with the caller's
    /// flags.
    Opened(OwnedFd),
    /// A symbolic link, with its target, still to be expanded.
    Link(Vec<u8>),
}

/// Enter the directory `name` in `dir`, never following a link implicitly: a link is
/// handed back with its target to be expanded.
fn enter(dir: BorrowedFd<'_>, name: &Path) -> Result<Last, Errno> {
    let flags = ENTER | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => Ok(Last::Opened(fd)),
        Err(e) => link_or(dir, name, e),
    }
}

/// Open the last component `name` in `dir` for real, never following a link implicitly. A
/// link there fails with `ELOOP`, or `ENOTDIR` under `O_DIRECTORY` (Linux's `O_PATH` opens
/// the link itself): it is then handed back with its target to be expanded.
fn open_last(dir: BorrowedFd<'_>, name: &Path, flags: OFlags, mode: Mode) -> Result<Last, Errno> {
    match rustix::fs::openat(dir, name, flags | OFlags::NOFOLLOW, mode) {
        #[cfg(target_os = "linux")]
        Ok(fd) if flags.contains(OFlags::PATH) && is_link(&fd)? => link_or(dir, name, Errno::LOOP),
        Ok(fd) => Ok(Last::Opened(fd)),
        Err(e) => link_or(dir, name, e),
    }
}

/// After `O_NOFOLLOW` refused `name` in `dir` with `error`: the link's target when `name` is a
/// symbolic link (the only refusal that can mean one), else `error` itself.
fn link_or(dir: BorrowedFd<'_>, name: &Path, error: Errno) -> Result<Last, Errno> {
    // FreeBSD answers EMLINK where Linux and macOS answer ELOOP.
    if !matches!(error, Errno::LOOP | Errno::NOTDIR | Errno::MLINK) {
        return Err(error);
    }
    match rustix::fs::readlinkat(dir, name, Vec::new()) {
        // The kernel follows no link on a `nosymfollow` mount: neither does the walk.
        Ok(_) if !follows_links(dir)? => Err(Errno::LOOP),
        Ok(target) => Ok(Last::Link(target.into_bytes())),
        // Not a link (any more): the original refusal stands.
        Err(Errno::INVAL) => Err(error),
        Err(e) => Err(e),
    }
}

#[cfg(target_os = "linux")]
fn is_link(fd: &OwnedFd) -> Result<bool, Errno> {
    Ok(FileType::from_raw_mode(rustix::fs::fstat(fd)?.st_mode) == FileType::Symlink)
}

/// Replace a symbolic link by its target's components (`target`, as read from the link).
/// Returns whether the target, standing last, demands a directory (`sub/`).
fn expand(
    target: &[u8],
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

/// How a directory is opened to be walked through: only to look up names in it.
#[cfg(target_os = "linux")]
const ENTER: OFlags = OFlags::PATH;
/// How a directory is opened to be walked through (no `O_PATH` here: read-only).
#[cfg(not(target_os = "linux"))]
const ENTER: OFlags = OFlags::RDONLY;
