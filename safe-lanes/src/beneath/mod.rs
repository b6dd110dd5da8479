//! The one confinement primitive: every file the library touches is reached through here.
//!
//! An [`Anchor`] is an open directory descriptor. Every operation takes a path *relative to
//! the anchor* and is resolved by the kernel (or, where the kernel cannot, by a careful
//! component walk) so that it can never leave the anchor's directory: not through `..`, not
//! through an absolute or relative symbolic link, not through a `/proc` magic link, and not
//! through a directory renamed while the lookup runs.
//!
//! # Backends
//!
//! - [`Backend::Openat2`]: one `openat2(2)` call with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`
//!   (and `RESOLVE_NO_SYMLINKS` when links are refused). The kernel guarantees containment,
//!   including under concurrent renames (it fails with `EAGAIN` rather than guess; the call is
//!   retried, then handed to the walk).
//! - [`Backend::Walk`]: for kernels without `openat2` (before 5.6, or where a seccomp filter
//!   hides it). Each component is opened with `O_PATH | O_NOFOLLOW` relative to the previous
//!   descriptor; `..` pops back to a descriptor already held, so it never reaches above the
//!   anchor; a symbolic link is read through its own descriptor and expanded in place (absolute
//!   targets are escapes); at most 40 links are followed.
//!
//! [`Backend::Auto`] uses `openat2` and remembers, process-wide, if the kernel lacks it.
//! Where the system has no `openat2` at all (macOS), [`Backend::Auto`] is the walk, and
//! [`Backend::Openat2`] fails every lookup with `ENOSYS`.
//!
//! # Publishing
//!
//! A new file is written out of sight and then given its name without replacing anything
//! ([`Publishing`]): unnamed (`O_TMPFILE`) and linked with `linkat` on Linux, or under a
//! hidden name created `O_EXCL | O_NOFOLLOW` and renamed without replacing
//! (`renameat2(RENAME_NOREPLACE)` on Linux, `renameatx_np(RENAME_EXCL)` on macOS,
//! `linkat` + `unlinkat` where the filesystem has neither) — the only way on macOS. Tests force
//! the second on Linux with [`force_publishing`], as they force the walk with [`force_backend`],
//! so the paths macOS takes are exercised on every run.
//!
//! Anchors the library opens for itself (lanes, grant folders, allowed roots) take the
//! backend of [`Anchor::new`]: [`Backend::Auto`], unless a test forced another on its own
//! thread with [`force_backend`], which is how every escape table runs on both backends.
//!
//! With the `cap-std` feature, an anchor converts to and from a `cap_std::fs::Dir`
//! (`TryFrom<Dir> for Anchor`, `From<Anchor> for Dir`), for gateways that already hold their
//! folders as cap-std capabilities.
//!
//! # Guarantee
//!
//! A descriptor returned by [`Anchor::open`] (and the other methods) refers to an inode that was
//! reachable from the anchor's directory by the given path without leaving it, at the moment of
//! the lookup. Nothing here compares path strings to decide containment.

mod ambient;
mod file;
#[cfg(feature = "cap-std")]
mod interop;
#[cfg(target_os = "linux")]
mod openat2;
mod publish;
mod walk;

#[cfg(target_os = "linux")]
pub use ambient::open_path;
pub use ambient::{Ambient, create_dir_all};
pub use file::regular_single_link;
pub use publish::Publish;

use std::cell::Cell;
use std::ffi::{OsStr, OsString};
use std::marker::PhantomData;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
#[cfg(target_os = "linux")]
use std::sync::atomic::{AtomicU8, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, Stat};
use rustix::io::Errno;

use crate::error::{Error, Result, Shown};
use crate::input::{AbsPath, Name, RelPath};

/// How symbolic links met while resolving a path are treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Symlinks {
    /// Follow links whose target stays beneath the anchor; a link that leads out is an escape.
    Beneath,
    /// Refuse any link, at any component including the last.
    Deny,
}

/// Which resolution mechanism an [`Anchor`] uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Backend {
    /// `openat2` when the kernel has it, the component walk otherwise (decided once per process).
    #[default]
    Auto,
    /// Always `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`; fails where the kernel lacks it.
    Openat2,
    /// Always the `O_NOFOLLOW` component walk.
    Walk,
}

/// What the kernel offers, probed once per process.
#[cfg(target_os = "linux")]
const UNKNOWN: u8 = 0;
#[cfg(target_os = "linux")]
const PRESENT: u8 = 1;
#[cfg(target_os = "linux")]
const ABSENT: u8 = 2;
#[cfg(target_os = "linux")]
static OPENAT2: AtomicU8 = AtomicU8::new(UNKNOWN);
#[cfg(target_os = "linux")]
static LINK_EMPTY_PATH: AtomicU8 = AtomicU8::new(UNKNOWN);

/// Whether this system answers `openat2(2)` (probed on first use, then remembered); always
/// `false` where there is no such call (anything but Linux).
pub fn openat2_available() -> bool {
    #[cfg(not(target_os = "linux"))]
    return false;
    #[cfg(target_os = "linux")]
    match OPENAT2.load(Ordering::Relaxed) {
        PRESENT => true,
        ABSENT => false,
        _ => {
            let probe = rustix::fs::openat2(
                rustix::fs::CWD,
                "/",
                OFlags::PATH | OFlags::CLOEXEC,
                Mode::empty(),
                rustix::fs::ResolveFlags::empty(),
            );
            let present = !matches!(probe, Err(Errno::NOSYS | Errno::PERM));
            OPENAT2.store(if present { PRESENT } else { ABSENT }, Ordering::Relaxed);
            present
        }
    }
}

thread_local! {
    /// The backend [`Anchor::new`] gives on this thread ([`force_backend`]).
    static DEFAULT_BACKEND: Cell<Backend> = const { Cell::new(Backend::Auto) };
}

/// For tests: every anchor this thread creates with [`Anchor::new`] (hence
/// [`Anchor::open_ambient`], [`Anchor::open_canonical`] and every lane, grant folder and
/// allowed root the library opens) uses `backend` until the returned guard is dropped.
///
/// The library opens most anchors itself, so this is how a table of grant or patch cases runs
/// on the walk. The setting is per thread, so tests running beside it on other threads keep
/// [`Backend::Auto`]; anchors that already exist keep their backend. Either backend confines
/// (module documentation): this chooses a mechanism, never whether paths are confined.
#[doc(hidden)]
pub fn force_backend(backend: Backend) -> ForcedBackend {
    let previous = DEFAULT_BACKEND.replace(backend);
    ForcedBackend {
        previous,
        _same_thread: PhantomData,
    }
}

/// Restores the thread's previous default backend when dropped (see [`force_backend`]).
#[doc(hidden)]
#[derive(Debug)]
#[must_use = "the backend is forced only while the guard lives"]
pub struct ForcedBackend {
    previous: Backend,
    /// Not `Send`: the guard must be dropped on the thread whose setting it restores.
    _same_thread: PhantomData<*const ()>,
}

impl Drop for ForcedBackend {
    fn drop(&mut self) {
        DEFAULT_BACKEND.set(self.previous);
    }
}

/// How a new file is written out of sight and then given its name, never replacing anything
/// (module documentation, "Publishing").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Publishing {
    /// The best this system has: [`Publishing::Link`] on Linux, [`Publishing::Rename`]
    /// elsewhere.
    #[default]
    Auto,
    /// Linux: an unnamed `O_TMPFILE` file, named with `linkat` (nothing is left by a crash);
    /// a filesystem without `O_TMPFILE` falls back to [`Publishing::Rename`].
    #[cfg(target_os = "linux")]
    Link,
    /// A hidden name created `O_EXCL | O_NOFOLLOW`, renamed without replacing
    /// ([`Anchor::rename_new`]); a crash leaves the hidden file for the next sweep.
    Rename,
    /// [`Publishing::Rename`] as a system without an exclusive rename does it: the hidden name
    /// is linked to the new one, then removed ([`Anchor::rename_new`]'s fallback). For tests,
    /// so that fallback runs on every Linux run.
    RenameByLink,
}

thread_local! {
    /// The publishing [`publishing`] gives on this thread ([`force_publishing`]).
    static DEFAULT_PUBLISHING: Cell<Publishing> = const { Cell::new(Publishing::Auto) };
}

/// How a lane opened now, on this thread, publishes new files: [`Publishing::Link`] on Linux,
/// [`Publishing::Rename`] elsewhere, unless a test forced another with [`force_publishing`].
/// Never [`Publishing::Auto`].
pub fn publishing() -> Publishing {
    match DEFAULT_PUBLISHING.get() {
        #[cfg(target_os = "linux")]
        Publishing::Auto => Publishing::Link,
        #[cfg(not(target_os = "linux"))]
        Publishing::Auto => Publishing::Rename,
        forced => forced,
    }
}

/// For tests: every lane this thread opens publishes with `publishing` until the returned
/// guard is dropped, as [`force_backend`] does for resolution. On Linux this is how the
/// rename-based publishing macOS uses runs under the same tables as the default.
#[doc(hidden)]
pub fn force_publishing(publishing: Publishing) -> ForcedPublishing {
    let previous = DEFAULT_PUBLISHING.replace(publishing);
    ForcedPublishing {
        previous,
        _same_thread: PhantomData,
    }
}

/// Restores the thread's previous publishing when dropped (see [`force_publishing`]).
#[doc(hidden)]
#[derive(Debug)]
#[must_use = "the publishing is forced only while the guard lives"]
pub struct ForcedPublishing {
    previous: Publishing,
    /// Not `Send`: the guard must be dropped on the thread whose setting it restores.
    _same_thread: PhantomData<*const ()>,
}

impl Drop for ForcedPublishing {
    fn drop(&mut self) {
        DEFAULT_PUBLISHING.set(self.previous);
    }
}

/// Flags that open an entry only to hold it (to learn what and where it is): `O_PATH` on
/// Linux, which neither reads nor writes and opens any kind of file; elsewhere, with no
/// `O_PATH`, `O_RDONLY | O_NONBLOCK` (the entry must be readable; a FIFO does not block).
#[cfg(target_os = "linux")]
pub const HOLD: OFlags = OFlags::PATH;
/// Flags that open an entry only to hold it (to learn what and where it is): `O_PATH` on
/// Linux, which neither reads nor writes and opens any kind of file; elsewhere, with no
/// `O_PATH`, `O_RDONLY | O_NONBLOCK` (the entry must be readable; a FIFO does not block).
#[cfg(not(target_os = "linux"))]
pub const HOLD: OFlags = OFlags::RDONLY.union(OFlags::NONBLOCK);

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
    fd: OwnedFd,
    backend: Backend,
}

impl Anchor {
    /// Where this directory is, for an error message: the kernel's path for the descriptor,
    /// or its number. Only called on an error path.
    fn shown(&self) -> Shown {
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
    /// test forced on this thread with [`force_backend`]).
    pub fn new(fd: OwnedFd) -> Self {
        Self::with_backend(fd, DEFAULT_BACKEND.get())
    }

    /// Wrap an open directory descriptor with a chosen backend (for anchors the library opens
    /// itself, tests use [`force_backend`]).
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
    /// [`HOLD`] are the flags to only hold the result, on every system.
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

    /// Linux only: creates an unnamed (`O_TMPFILE`), readable and writable, `mode` file in the
    /// anchor's directory (elsewhere, [`Publishing::Rename`] is how new files are staged).
    ///
    /// It has no name until [`Anchor::link_new`] gives it one; dropped before that, it vanishes
    /// with nothing left on disk, even after a crash.
    ///
    /// # Errors
    ///
    /// `io`; `EOPNOTSUPP`/`EISDIR` mean the filesystem has no `O_TMPFILE`.
    #[cfg(target_os = "linux")]
    pub fn create_unnamed(&self, mode: u32) -> Result<OwnedFd> {
        rustix::fs::openat(
            &self.fd,
            ".",
            OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
            mode_bits(mode),
        )
        .map_err(|e| Error::io("open(O_TMPFILE)", self.shown(), e))
    }

    /// Linux only: gives the unnamed file `file` (from [`Anchor::create_unnamed`]) the name
    /// `name` in the anchor's directory, never replacing anything: an existing entry of that
    /// name (a file, a directory, a dangling symbolic link) fails with `EEXIST`.
    ///
    /// Uses `linkat(AT_EMPTY_PATH)` where the process may, else the `/proc/self/fd` link.
    ///
    /// # Errors
    ///
    /// `io` (test `EEXIST` with [`Error::raw_os_error`]).
    #[cfg(target_os = "linux")]
    pub fn link_new(&self, file: BorrowedFd<'_>, name: Name<'_>) -> Result<()> {
        let name = name.as_os_str();
        let by_empty_path = || rustix::fs::linkat(file, c"", &self.fd, name, AtFlags::EMPTY_PATH);
        let by_proc = || {
            let proc = format!("/proc/self/fd/{}", file.as_raw_fd());
            rustix::fs::linkat(
                rustix::fs::CWD,
                proc.as_str(),
                &self.fd,
                name,
                AtFlags::SYMLINK_FOLLOW,
            )
        };
        let result = match LINK_EMPTY_PATH.load(Ordering::Relaxed) {
            PRESENT => by_empty_path(),
            ABSENT => by_proc(),
            _ => match by_empty_path() {
                // Without CAP_DAC_READ_SEARCH the kernel answers ENOENT to AT_EMPTY_PATH.
                Err(Errno::NOENT) => {
                    let r = by_proc();
                    if r.is_ok() {
                        LINK_EMPTY_PATH.store(ABSENT, Ordering::Relaxed);
                    }
                    r
                }
                r => {
                    if r.is_ok() {
                        LINK_EMPTY_PATH.store(PRESENT, Ordering::Relaxed);
                    }
                    r
                }
            },
        };
        result.map_err(|e| Error::io("linkat", name_shown(name), e))
    }

    /// Creates `name` in the anchor's directory with `O_CREAT | O_EXCL | O_NOFOLLOW`, readable
    /// and writable, with `mode`. An existing entry of any kind (including a symbolic link) is `EEXIST`.
    ///
    /// # Errors
    ///
    /// `io` (test `EEXIST` with [`Error::raw_os_error`]).
    pub fn create_new(&self, name: Name<'_>, mode: u32) -> Result<OwnedFd> {
        let name = name.as_os_str();
        rustix::fs::openat(
            &self.fd,
            name,
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            mode_bits(mode),
        )
        .map_err(|e| Error::io("open(O_EXCL)", name_shown(name), e))
    }

    /// Renames `from` to `to` within the anchor's directory without ever replacing `to`
    /// (`renameat2(RENAME_NOREPLACE)` on Linux, `renameatx_np(RENAME_EXCL)` on macOS, or
    /// `link` + `unlink` where the system or the filesystem lacks it; that fallback cannot
    /// move a directory).
    ///
    /// # Errors
    ///
    /// `io` (`EEXIST` when `to` exists).
    #[doc(alias = "renameat2")]
    #[doc(alias = "renameatx_np")]
    pub fn rename_new(&self, from: Name<'_>, to: Name<'_>) -> Result<()> {
        let names = (from.as_os_str(), to.as_os_str());
        let unsupported = |e: Errno| {
            e == Errno::INVAL || e == Errno::NOSYS || e == Errno::NOTSUP || e == Errno::OPNOTSUPP
        };
        let exclusive = match publishing() {
            Publishing::RenameByLink => Err(Errno::NOSYS),
            _ => rustix::fs::renameat_with(
                &self.fd,
                names.0,
                &self.fd,
                names.1,
                RenameFlags::NOREPLACE,
            ),
        };
        match exclusive {
            Ok(()) => Ok(()),
            Err(e) if unsupported(e) => {
                rustix::fs::linkat(&self.fd, names.0, &self.fd, names.1, AtFlags::empty())
                    .map_err(|e| Error::io("linkat", name_shown(names.1), e))?;
                self.remove_file(from)
            }
            Err(e) => Err(Error::io("renameat2", name_shown(names.1), e)),
        }
    }

    /// Renames `from` over `to` within the anchor's directory (atomic replace), for files the
    /// library owns, such as a manifest.
    ///
    /// # Errors
    ///
    /// `io`.
    pub fn rename_replace(&self, from: Name<'_>, to: Name<'_>) -> Result<()> {
        let (from, to) = (from.as_os_str(), to.as_os_str());
        rustix::fs::renameat(&self.fd, from, &self.fd, to)
            .map_err(|e| Error::io("renameat", name_shown(to), e))
    }

    /// Removes the entry `name` (not a directory) from the anchor's directory. A symbolic link
    /// is removed itself, never followed.
    ///
    /// # Errors
    ///
    /// `io`.
    pub fn remove_file(&self, name: Name<'_>) -> Result<()> {
        let name = name.as_os_str();
        rustix::fs::unlinkat(&self.fd, name, AtFlags::empty())
            .map_err(|e| Error::io("unlinkat", name_shown(name), e))
    }

    /// Removes the entry `name` (not a directory) only if its `lstat` still passes `still`:
    /// the caller's check that it is the file it judged, such as the same `(st_dev, st_ino)`.
    /// Returns whether it was removed; a name that is gone, or now fails `still`, is left alone.
    ///
    /// The `lstat` and the `unlinkat` are two system calls: a process that may write the
    /// directory can still rename another file into the name between them. This narrows the
    /// window to those two calls; it does not close it.
    ///
    /// # Errors
    ///
    /// `io`.
    pub fn remove_file_if(
        &self,
        name: Name<'_>,
        still: impl FnOnce(&Stat) -> bool,
    ) -> Result<bool> {
        let gone = |e: &Error| e.raw_os_error() == Some(Errno::NOENT.raw_os_error());
        match self.stat_entry(name) {
            Ok(st) if still(&st) => match self.remove_file(name) {
                Err(e) if gone(&e) => Ok(false),
                other => other.map(|()| true),
            },
            Ok(_) | Err(Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Removes the empty directory `name` from the anchor's directory.
    ///
    /// # Errors
    ///
    /// `io`.
    pub fn remove_dir(&self, name: Name<'_>) -> Result<()> {
        let name = name.as_os_str();
        rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR)
            .map_err(|e| Error::io("rmdir", name_shown(name), e))
    }

    /// Removes the entry `name` and, for a directory, everything below it. Nothing is followed:
    /// a symbolic link is removed itself, and each directory is entered through a descriptor.
    ///
    /// # Errors
    ///
    /// `io` (including a tree deeper than 256 levels).
    pub fn remove_all(&self, name: Name<'_>) -> Result<()> {
        self.remove_all_at(name, 0)
    }

    fn remove_all_at(&self, name: Name<'_>, depth: usize) -> Result<()> {
        const MAX_DEPTH: usize = 256;
        let st = self.stat_entry(name)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return self.remove_file(name);
        }
        if depth >= MAX_DEPTH {
            return Err(Error::io(
                "rmdir",
                name_shown(name.as_os_str()),
                Errno::LOOP,
            ));
        }
        // A directory its writer made unreadable or unwritable (`chmod 000`) is ours: make it
        // 0700 so it can be emptied. `st` said it is a directory, not a link.
        if permissions(&st) & 0o700 != 0o700 {
            let (fd, mode) = (&self.fd, mode_bits(0o700));
            let _ = rustix::fs::chmodat(fd, name.as_os_str(), mode, AtFlags::empty());
        }
        let dir = self.open_dir(name.as_rel(), Symlinks::Deny)?;
        for (entry, _) in dir.entries()? {
            dir.remove_all_at(Name::new(&entry)?, depth + 1)?;
        }
        self.remove_dir(name)
    }

    /// Creates the directory `name` in the anchor's directory with `mode`.
    ///
    /// # Errors
    ///
    /// `io` (`EEXIST` when it exists).
    pub fn create_dir(&self, name: Name<'_>, mode: u32) -> Result<()> {
        let name = name.as_os_str();
        rustix::fs::mkdirat(&self.fd, name, mode_bits(mode))
            .map_err(|e| Error::io("mkdirat", name_shown(name), e))
    }

    /// The text of the symbolic link `name` in the anchor's directory (`readlinkat`: the link
    /// is read, never followed), or `None` when `name` is not a link (any more).
    ///
    /// # Errors
    ///
    /// `io`.
    pub fn read_link(&self, name: Name<'_>) -> Result<Option<Vec<u8>>> {
        match rustix::fs::readlinkat(&self.fd, name.as_os_str(), Vec::new()) {
            Ok(target) => Ok(Some(target.into_bytes())),
            Err(Errno::INVAL | Errno::NOENT) => Ok(None),
            Err(e) => Err(Error::io("readlinkat", name_shown(name.as_os_str()), e)),
        }
    }

    /// `lstat` of the entry `name` in the anchor's directory (links are not followed).
    ///
    /// # Errors
    ///
    /// `not_found` when absent, `io` otherwise.
    pub fn stat_entry(&self, name: Name<'_>) -> Result<Stat> {
        let name = name.as_os_str();
        rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| refusal(e, Path::new(name), Symlinks::Deny, "stat"))
    }

    /// The names in the anchor's directory, without `.` and `..`, each with its `lstat`.
    /// An entry removed while listing is skipped.
    ///
    /// # Errors
    ///
    /// `io` when the directory cannot be read.
    pub fn entries(&self) -> Result<Vec<(OsString, Stat)>> {
        let dir = rustix::fs::Dir::read_from(&self.fd)
            .map_err(|e| Error::io("opendir", self.shown(), e))?;
        let mut out = Vec::new();
        for entry in dir {
            let entry = entry.map_err(|e| Error::io("readdir", self.shown(), e))?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let name = OsString::from_vec(name.to_vec());
            match rustix::fs::statat(&self.fd, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => out.push((name, stat)),
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(Error::io("fstatat", name_shown(&name), e)),
            }
        }
        Ok(out)
    }

    /// `fsync` of the directory itself, making created, linked and removed names durable.
    ///
    /// # Errors
    ///
    /// `io` if the call fails.
    pub fn sync(&self) -> Result<()> {
        rustix::fs::fsync(&self.fd).map_err(|e| Error::io("fsync", self.shown(), e))
    }
}

impl AsFd for Anchor {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The current location of an open file, as the kernel reports it for the descriptor
/// (`readlink("/proc/self/fd/N")` on Linux, `fcntl(F_GETPATH)` on macOS).
///
/// This *reports* where an already-open inode is; it never opens anything. Callers use it to
/// learn a canonical path and then confirm identity through an [`Anchor`].
///
/// # Errors
///
/// `io` when `/proc` is not mounted, the file has been deleted, or the system cannot say.
#[doc(alias = "F_GETPATH")]
pub fn location_of(fd: BorrowedFd<'_>) -> Result<PathBuf> {
    let (call, asked, target) = reported_location(fd)?;
    let target = PathBuf::from(OsString::from_vec(target));
    if !target.is_absolute() || rustix::fs::fstat(fd).is_ok_and(|s| s.st_nlink == 0) {
        return Err(Error::io(
            call,
            asked.as_str(),
            std::io::Error::other("the file is not reachable by a path"),
        ));
    }
    Ok(target)
}

/// The system call that reports where `fd` is, what it was asked, and its answer.
#[cfg(target_os = "linux")]
fn reported_location(fd: BorrowedFd<'_>) -> Result<(&'static str, String, Vec<u8>)> {
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let target = rustix::fs::readlink(link.as_str(), Vec::new())
        .map_err(|e| Error::io("readlink", link.as_str(), e))?;
    Ok(("readlink", link, target.into_bytes()))
}

/// The system call that reports where `fd` is, what it was asked, and its answer.
#[cfg(target_vendor = "apple")]
fn reported_location(fd: BorrowedFd<'_>) -> Result<(&'static str, String, Vec<u8>)> {
    let asked = "F_GETPATH".to_owned();
    let target = rustix::fs::getpath(fd).map_err(|e| Error::io("fcntl", asked.as_str(), e))?;
    Ok(("fcntl", asked, target.into_bytes()))
}

/// The system call that reports where `fd` is: none known on this system.
#[cfg(not(any(target_os = "linux", target_vendor = "apple")))]
fn reported_location(_fd: BorrowedFd<'_>) -> Result<(&'static str, String, Vec<u8>)> {
    Err(Error::io(
        "location",
        "descriptor",
        std::io::Error::from(std::io::ErrorKind::Unsupported),
    ))
}

/// `(device, inode)`: the identity of an open file.
///
/// # Errors
///
/// `io` if `fstat` fails.
pub fn identity(fd: BorrowedFd<'_>) -> Result<(u64, u64)> {
    let st = rustix::fs::fstat(fd).map_err(|e| Error::io("fstat", shown_fd(fd), e))?;
    Ok(stat_identity(&st))
}

/// `(device, inode)` from a `stat`, in the same width on every system (`st_dev` is 64 bits
/// on Linux, 32 on macOS).
#[allow(clippy::unnecessary_cast, clippy::cast_sign_loss)]
pub fn stat_identity(st: &Stat) -> (u64, u64) {
    (st.st_dev as u64, st.st_ino as u64)
}

/// The permission, set-id and sticky bits of a `stat` (`st_mode & 0o7777`), as a `u32` on
/// every system (`st_mode` is 16 bits on macOS).
#[allow(clippy::useless_conversion)]
pub fn permissions(st: &Stat) -> u32 {
    u32::from(st.st_mode) & 0o7777
}

/// The number of hard links of a `stat`, as a `u64` on every system.
#[allow(clippy::useless_conversion)]
pub fn link_count(st: &Stat) -> u64 {
    u64::from(st.st_nlink)
}

/// Permission bits for a system call, from the `u32` the library writes them as (they fit
/// the 16 bits of macOS's `mode_t`).
#[allow(clippy::unnecessary_cast, clippy::cast_possible_truncation)]
pub(crate) fn mode_bits(mode: u32) -> Mode {
    Mode::from_raw_mode((mode & 0o7777) as rustix::fs::RawMode)
}

/// A human word for the file type in `stat`, for messages ("a directory", "a FIFO", …).
pub fn kind_of(stat: &Stat) -> &'static str {
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "an unknown kind of file",
    }
}

/// An open descriptor for an error message: where the kernel says it is, or its number.
pub(crate) fn shown_fd(fd: BorrowedFd<'_>) -> Shown {
    location_of(fd).map_or_else(
        |_| Shown::text(&format!("descriptor {}", fd.as_raw_fd())),
        |path| Shown::path(&path),
    )
}

fn name_shown(name: &(impl AsRef<OsStr> + ?Sized)) -> Shown {
    Shown::bytes(name.as_ref().as_bytes())
}

/// Map a resolution errno to the library's refusal codes.
pub(crate) fn refusal(errno: Errno, path: &Path, symlinks: Symlinks, call: &'static str) -> Error {
    let shown = Shown::path(path);
    match errno {
        Errno::XDEV => Error::SymlinkEscape {
            path: shown,
            why: "a symbolic link or `..` leads outside the folder",
        },
        Errno::LOOP if symlinks == Symlinks::Deny => Error::SymlinkEscape {
            path: shown,
            why: "goes through a symbolic link, which is not allowed here",
        },
        Errno::LOOP => Error::SymlinkEscape {
            path: shown,
            why: "too many levels of symbolic links, or a /proc magic link",
        },
        Errno::NOENT => Error::NotFound {
            path: shown,
            why: "no such file or directory".into(),
        },
        Errno::NOTDIR => Error::NotFound {
            path: shown,
            why: "a path component is not a directory".into(),
        },
        Errno::NAMETOOLONG => Error::InvalidArgument {
            what: shown,
            why: "the path or one of its names is too long to exist".into(),
        },
        Errno::NXIO => Error::NotRegularFile {
            path: shown,
            kind: "a socket or a device without a driver",
        },
        other => Error::io(call, shown, other),
    }
}
