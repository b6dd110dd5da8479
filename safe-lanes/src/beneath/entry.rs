//! What an [`Anchor`] does to one name in its own directory: create, link, rename, remove,
//! read a link, `lstat`, list. Each takes a [`Name`] (a single component, never a path) and
//! looks it up in the anchor's directory alone; a directory is entered only through
//! [`Anchor::open_dir`], the primitive.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
#[cfg(target_os = "linux")]
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, OFlags, RenameFlags, Stat};
use rustix::io::Errno;

use super::errno::{name_shown, refusal};
use super::mechanism::{Publishing, publishing};
#[cfg(target_os = "linux")]
use super::probe::LINK_EMPTY_PATH;
use super::stat::{mode_bits, permissions};
use super::{Anchor, Symlinks};
use crate::error::{Error, Result};

/// What [`Anchor::move_entry`] does with an entry already at its destination.
#[cfg(any(target_os = "linux", target_vendor = "apple"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Onto {
    /// Nothing may be there: the move fails with `EEXIST`.
    New,
    /// Something must be there, and the two are swapped.
    Exchange,
}
use crate::input::Name;

impl Anchor {
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
        let result = match LINK_EMPTY_PATH.known() {
            Some(true) => by_empty_path(),
            Some(false) => by_proc(),
            None => {
                // Without CAP_DAC_READ_SEARCH the kernel answers ENOENT to AT_EMPTY_PATH.
                let (result, present) = match by_empty_path() {
                    Err(Errno::NOENT) => (by_proc(), false),
                    other => (other, true),
                };
                if result.is_ok() {
                    LINK_EMPTY_PATH.learn(present);
                }
                result
            }
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

    /// Linux and macOS: moves the entry `name` of the anchor's directory to `to` in the
    /// directory `dest` (`renameat2`, `renameatx_np` on macOS; both names looked up in their
    /// own directory alone): without ever replacing `to` ([`Onto::New`], `EEXIST` when it
    /// exists), or swapping the two entries atomically ([`Onto::Exchange`], `ENOENT` when `to`
    /// is missing). Nothing is followed.
    ///
    /// # Errors
    ///
    /// `io` (test `EEXIST`, `ENOENT` and `EXDEV` — two file systems — with
    /// [`Error::raw_os_error`]).
    #[cfg(any(target_os = "linux", target_vendor = "apple"))]
    #[doc(alias = "renameat2")]
    pub(crate) fn move_entry(
        &self,
        name: Name<'_>,
        dest: &Anchor,
        to: Name<'_>,
        onto: Onto,
    ) -> Result<()> {
        let flags = match onto {
            Onto::New => RenameFlags::NOREPLACE,
            Onto::Exchange => RenameFlags::EXCHANGE,
        };
        rustix::fs::renameat_with(&self.fd, name.as_os_str(), &dest.fd, to.as_os_str(), flags)
            .map_err(|e| Error::io("renameat2", name_shown(to.as_os_str()), e))
    }

    /// The value of the extended attribute `attribute` of the directory itself, if it has one
    /// (at most 256 bytes).
    ///
    /// # Errors
    ///
    /// `io` for a failure other than the attribute's absence.
    #[cfg(target_os = "linux")]
    pub(crate) fn attribute(&self, attribute: &std::ffi::CStr) -> Result<Option<Vec<u8>>> {
        let mut value = [0u8; 256];
        match rustix::fs::fgetxattr(&self.fd, attribute, &mut value) {
            Ok(n) => Ok(Some(value[..n].to_vec())),
            Err(Errno::NODATA | Errno::NOTSUP) => Ok(None),
            Err(e) => Err(Error::io("fgetxattr", self.shown(), e)),
        }
    }

    /// Sets the permission bits of the directory itself to `mode` (`fchmod`).
    ///
    /// # Errors
    ///
    /// `io`.
    pub(crate) fn set_mode(&self, mode: u32) -> Result<()> {
        rustix::fs::fchmod(&self.fd, mode_bits(mode))
            .map_err(|e| Error::io("fchmod", self.shown(), e))
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
        let st = self.stat_entry(name)?;
        self.remove_all_at(name, &st, 0)
    }

    /// [`Self::remove_all`] of `name`, whose `lstat` is `st` (as its listing gave it).
    fn remove_all_at(&self, name: Name<'_>, st: &Stat, depth: usize) -> Result<()> {
        const MAX_DEPTH: usize = 256;
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
        // 0700 so it can be emptied. `chmodat` follows a link, so the entry is looked at again
        // just before (as the listing saw it, it was a directory).
        if permissions(st) & 0o700 != 0o700
            && self
                .stat_entry(name)
                .is_ok_and(|now| FileType::from_raw_mode(now.st_mode) == FileType::Directory)
        {
            let (fd, mode) = (&self.fd, mode_bits(0o700));
            let _ = rustix::fs::chmodat(fd, name.as_os_str(), mode, AtFlags::empty());
        }
        let dir = self.open_dir(name.as_rel(), Symlinks::Deny)?;
        for (entry, st) in dir.entries()? {
            dir.remove_all_at(Name::new(&entry)?, &st, depth + 1)?;
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

    /// [`Self::stat_entry`], `None` when there is no entry `name` (nothing is made of its
    /// absence: a walk that expects most names to be missing pays nothing for them).
    ///
    /// # Errors
    ///
    /// `io`, as [`Self::stat_entry`] but for absence.
    pub fn stat_entry_if_any(&self, name: Name<'_>) -> Result<Option<Stat>> {
        match rustix::fs::statat(&self.fd, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(st)),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(refusal(
                e,
                Path::new(name.as_os_str()),
                Symlinks::Deny,
                "stat",
            )),
        }
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

    /// Each name in the anchor's directory, without `.` and `..`, with its type when the
    /// directory says it (`None` when the file system does not): one read of the directory,
    /// no `lstat`, nothing allocated per name.
    ///
    /// # Errors
    ///
    /// `io` when the directory cannot be read.
    pub fn each_name(
        &self,
        mut visit: impl FnMut(&std::ffi::OsStr, Option<FileType>),
    ) -> Result<()> {
        let dir = rustix::fs::Dir::read_from(&self.fd)
            .map_err(|e| Error::io("opendir", self.shown(), e))?;
        for entry in dir {
            let entry = entry.map_err(|e| Error::io("readdir", self.shown(), e))?;
            hand_on(entry.file_name(), entry.file_type(), &mut visit);
        }
        Ok(())
    }

    /// [`Anchor::each_name`] through this anchor's own descriptor, read from its start: no
    /// second descriptor is opened (two system calls fewer a listing), for walks that list
    /// many directories once each.
    ///
    /// Reading moves the descriptor's offset, which every duplicate of it shares: use this only
    /// for an anchor the caller opened and shares with no one — never one that was
    /// [`Anchor::try_clone`]d or that another thread lists; `&mut` keeps this process's other
    /// users of this anchor out while it reads.
    ///
    /// # Errors
    ///
    /// `io` when the directory cannot be read.
    #[cfg(target_os = "linux")]
    pub(crate) fn each_name_unshared(
        &mut self,
        mut visit: impl FnMut(&std::ffi::OsStr, Option<FileType>),
    ) -> Result<()> {
        use std::mem::MaybeUninit;
        rustix::fs::seek(&self.fd, rustix::fs::SeekFrom::Start(0))
            .map_err(|e| Error::io("lseek", self.shown(), e))?;
        let mut buf = [MaybeUninit::<u8>::uninit(); 8192];
        let mut dir = rustix::fs::RawDir::new(&self.fd, &mut buf);
        while let Some(entry) = dir.next() {
            let entry = entry.map_err(|e| Error::io("getdents64", self.shown(), e))?;
            hand_on(entry.file_name(), entry.file_type(), &mut visit);
        }
        Ok(())
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

/// Hand one directory entry on to a listing's `visit`: never `.` or `..`, its type `None`
/// where the directory does not say it.
fn hand_on(
    name: &std::ffi::CStr,
    kind: FileType,
    visit: &mut impl FnMut(&std::ffi::OsStr, Option<FileType>),
) {
    use std::os::unix::ffi::OsStrExt;
    let name = name.to_bytes();
    if name == b"." || name == b".." {
        return;
    }
    let kind = match kind {
        FileType::Unknown => None,
        kind => Some(kind),
    };
    visit(std::ffi::OsStr::from_bytes(name), kind);
}
