//! The [`Anchor`]: an open directory, and how a path is resolved beneath it (by the backend
//! it was given, [`Backend`]) so that the result never leaves that directory.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{Mode, OFlags, Stat};
use rustix::io::Errno;

use super::errno::{refusal, shown_fd};
use super::mechanism::{Backend, default_backend};
#[cfg(target_os = "linux")]
use super::openat2;
#[cfg(target_os = "linux")]
use super::probe::openat2_available;
use super::{ambient, walk};
use crate::error::{Error, Result, Shown};
use crate::input::{AbsPath, RelPath};

/// How symbolic links met while resolving a path are treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Symlinks {
    /// Follow links whose target stays beneath the anchor; a link that leads out is an escape.
    Beneath,
    /// Refuse any link, at any component including the last.
    Deny,
}

/// Flags that open an entry only to hold it (to learn what and where it is): `O_PATH` on
/// Linux, which neither reads nor writes and opens any kind of file; elsewhere, with no
/// `O_PATH`, `O_RDONLY | O_NONBLOCK` (the entry must be readable; a FIFO does not block).
#[cfg(target_os = "linux")]
pub(crate) const HOLD: OFlags = OFlags::PATH;
/// Flags that open an entry only to hold it (to learn what and where it is): `O_PATH` on
/// Linux, which neither reads nor writes and opens any kind of file; elsewhere, with no
/// `O_PATH`, `O_RDONLY | O_NONBLOCK` (the entry must be readable; a FIFO does not block).
#[cfg(not(target_os = "linux"))]
pub(crate) const HOLD: OFlags = OFlags::RDONLY.union(OFlags::NONBLOCK);

/// The flags a lookup really uses: `O_CLOEXEC` always, `O_NOCTTY` unless `O_PATH`, and no
/// `O_NOFOLLOW` (links are governed by [`Symlinks`]).
fn normalized(flags: OFlags) -> OFlags {
    #[cfg(target_os = "linux")]
    if flags.contains(OFlags::PATH) {
        // openat2 accepts only O_DIRECTORY and O_CLOEXEC beside O_PATH.
        return (flags & (OFlags::PATH | OFlags::DIRECTORY)) | OFlags::CLOEXEC;
    }
    (flags - OFlags::NOFOLLOW) | OFlags::CLOEXEC | OFlags::NOCTTY
}

/// A directory descriptor that confined operations are relative to.
///
/// Cloning is by `dup`: the clone refers to the same directory.
#[derive(Debug)]
pub struct Anchor {
    /// The directory; the sibling modules of this one use it for calls on the directory
    /// itself or on one name in it, never to resolve a path.
    pub(super) fd: OwnedFd,
    backend: Backend,
}

impl Anchor {
    /// Where this directory is, for an error message: the kernel's path for the descriptor,
    /// or its number. Only called on an error path.
    pub(super) fn shown(&self) -> Shown {
        shown_fd(self.fd.as_fd())
    }

    /// Opens the directory at the absolute, canonical `path` (one a human approved earlier),
    /// refusing any symbolic link on the way: resolution starts at `/` and goes through the
    /// primitive with [`Symlinks::Deny`].
    ///
    /// # Errors
    ///
    /// `traversal` for a `..` above `/`, `symlink_escape` when a component has become a
    /// link since, `not_found`.
    pub fn open_canonical(path: AbsPath<'_>) -> Result<Self> {
        // Resolution starts at `/`; from there every component goes through the primitive.
        let root = ambient::Ambient::because("the root directory, where a canonical path starts");
        Self::open_ambient(Path::new("/"), root)?.open_dir(path.below_root()?, Symlinks::Deny)
    }

    /// Wrap an open directory descriptor, with the [`Backend::Auto`] backend (or the one a
    /// test forced on this thread with [`force_backend`](super::force_backend)).
    pub fn new(fd: OwnedFd) -> Self {
        Self::with_backend(fd, default_backend())
    }

    /// Wrap an open directory descriptor with a chosen backend (for anchors the library opens
    /// itself, tests use [`force_backend`](super::force_backend)).
    pub fn with_backend(fd: OwnedFd, backend: Backend) -> Self {
        Self { fd, backend }
    }

    /// The same directory with another backend.
    pub fn into_backend(self, backend: Backend) -> Self {
        Self::with_backend(self.fd, backend)
    }

    /// A second anchor on the same directory (`dup`).
    ///
    /// # Errors
    ///
    /// `io` when the descriptor table is full.
    pub fn try_clone(&self) -> Result<Self> {
        let fd = self
            .fd
            .try_clone()
            .map_err(|e| Error::io("dup", self.shown(), e))?;
        Ok(Self::with_backend(fd, self.backend))
    }

    /// The directory descriptor.
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The backend this anchor resolves paths with.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// `fstat` of the anchor's directory.
    ///
    /// # Errors
    ///
    /// `io` if the call fails.
    pub fn stat(&self) -> Result<Stat> {
        rustix::fs::fstat(&self.fd).map_err(|e| Error::io("fstat", self.shown(), e))
    }

    /// Whether the kernel follows symbolic links in this directory: not on a mount made
    /// `nosymfollow` (Linux 5.10), where every lookup through a link fails. A caller that
    /// reads links to follow them itself ([`Anchor::read_link`]) asks this first, so it never
    /// follows a link the kernel would not.
    ///
    /// # Errors
    ///
    /// `io` if `fstatfs` fails.
    #[doc(alias = "nosymfollow")]
    pub fn follows_links(&self) -> Result<bool> {
        super::filesystem::follows_links(self.fd.as_fd())
            .map_err(|e| Error::io("fstatfs", self.shown(), e))
    }

    /// Opens `path` beneath the anchor for reading, without blocking on FIFOs or taking a
    /// controlling terminal.
    ///
    /// # Errors
    ///
    /// See [`Anchor::open`].
    ///
    /// # Security
    ///
    /// The result is beneath the anchor; see the module documentation.
    pub fn open_read(&self, path: RelPath<'_>, symlinks: Symlinks) -> Result<OwnedFd> {
        self.open(
            path,
            OFlags::RDONLY | OFlags::NONBLOCK,
            Mode::empty(),
            symlinks,
        )
    }

    /// Opens the directory at `path` beneath the anchor as a new anchor with the same backend.
    ///
    /// # Errors
    ///
    /// See [`Anchor::open`]; a non-directory is `not_found` ("not a directory").
    pub fn open_dir(&self, path: RelPath<'_>, symlinks: Symlinks) -> Result<Anchor> {
        let fd = self.open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
            symlinks,
        )?;
        Ok(Self::with_backend(fd, self.backend))
    }

    /// Opens `path` beneath the anchor with `flags` (`O_CLOEXEC`, and `O_NOCTTY` unless
    /// `O_PATH`, are always added; `O_NOFOLLOW` is ignored: links are governed by `symlinks`).
    /// `O_PATH` (on Linux; elsewhere `O_RDONLY | O_NONBLOCK`) are the flags to only hold the
    /// result, on every system.
    ///
    /// # Errors
    ///
    /// - `symlink_escape` when a link leads out of the anchor, or any link under
    ///   [`Symlinks::Deny`], or more than 40 links;
    /// - `not_found` when a component is missing or not a directory;
    /// - `io` for everything else (including `EEXIST` under `O_CREAT | O_EXCL`, which callers
    ///   recognise with [`Error::raw_os_error`]).
    ///
    /// # Security
    ///
    /// The returned descriptor refers to an inode beneath the anchor (module documentation).
    pub fn open(
        &self,
        path: RelPath<'_>,
        flags: OFlags,
        mode: Mode,
        symlinks: Symlinks,
    ) -> Result<OwnedFd> {
        let path = path.as_path();
        let flags = normalized(flags);
        let result = match self.backend {
            Backend::Walk => walk::open(self.as_fd(), path, flags, mode, symlinks),
            #[cfg(target_os = "linux")]
            Backend::Openat2 => openat2::open(self.as_fd(), path, flags, mode, symlinks),
            #[cfg(target_os = "linux")]
            Backend::Auto if openat2_available() => {
                match openat2::open(self.as_fd(), path, flags, mode, symlinks) {
                    Err(Errno::AGAIN) => walk::open(self.as_fd(), path, flags, mode, symlinks),
                    other => other,
                }
            }
            #[cfg(not(target_os = "linux"))]
            Backend::Openat2 => Err(Errno::NOSYS),
            Backend::Auto => walk::open(self.as_fd(), path, flags, mode, symlinks),
        };
        result.map_err(|e| refusal(e, path, symlinks, "open"))
    }
}

impl AsFd for Anchor {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
