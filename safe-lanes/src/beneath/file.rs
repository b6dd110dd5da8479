//! What an opened file must be before its content is read or replaced on an agent's behalf.

use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use super::filesystem::pseudo_filesystem;
use super::stat::{kind_of, link_count};
use super::{Anchor, Symlinks};
use crate::error::{Error, Result, Shown};
use crate::input::Name;

/// The status of `fd`, when it is a file of data — a regular file with exactly one link, on
/// a filesystem that holds data — what an upload may send and a patch may change. `shown`
/// names it in refusals.
///
/// Everything is decided from the descriptor, never from a path. A device node, or any file
/// on a pseudo-filesystem (`/proc/self/environ`, the gateway's own environment, wherever
/// `proc` is mounted), is the kernel's view of something, not data. A second link could be
/// anything the user owns (a token file linked into an allowed folder): its content is
/// refused whatever its name, and so is a directory, socket or FIFO.
///
/// # Errors
///
/// `pseudo_file`, `not_regular_file`, `hardlinked`, `io`.
pub(crate) fn data_file(fd: BorrowedFd<'_>, shown: &Path) -> Result<Stat> {
    let st = rustix::fs::fstat(fd).map_err(|e| Error::io("fstat", shown, e))?;
    let pseudo = |what: String| Error::PseudoFile {
        path: Shown::path(shown),
        what,
    };
    if matches!(
        FileType::from_raw_mode(st.st_mode),
        FileType::CharacterDevice | FileType::BlockDevice
    ) {
        return Err(pseudo(format!("{} (a device node)", kind_of(&st))));
    }
    if let Some(name) = pseudo_filesystem(fd, &st).map_err(|e| Error::io("fstatfs", shown, e))? {
        return Err(pseudo(format!("on {name} (a pseudo-filesystem)")));
    }
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(Error::NotRegularFile {
            path: Shown::path(shown),
            kind: kind_of(&st),
        });
    }
    if st.st_nlink != 1 {
        return Err(Error::Hardlinked {
            path: Shown::path(shown),
            links: link_count(&st),
        });
    }
    Ok(st)
}

/// What [`Anchor::open_own_file`] found.
#[derive(Debug)]
pub(crate) enum OwnFile {
    /// The regular file, opened.
    Open(OwnedFd),
    /// What stands where the file belongs instead (`"a symbolic link"`, `"a directory"`,
    /// `"a FIFO"`, …): never followed, never read, never blocked on.
    Broken(&'static str),
}

impl Anchor {
    /// Open one of the library's own files (a log, a witness, a lock file) directly in the
    /// anchor's directory with `flags` (and `mode` when it is created), only if it is a
    /// regular file: a link is not followed, a FIFO does not block the open (it is opened
    /// with `O_NONBLOCK`, cleared again on the regular file), and anything else is said as
    /// [`OwnFile::Broken`] for the caller to refuse in its own words.
    ///
    /// # Errors
    ///
    /// `not_found` when it is missing and `flags` does not create it; `io` otherwise.
    pub(crate) fn open_own_file(
        &self,
        name: Name<'_>,
        flags: OFlags,
        mode: Mode,
    ) -> Result<OwnFile> {
        let opened = self.open(
            name.as_rel(),
            flags | OFlags::NONBLOCK,
            mode,
            Symlinks::Deny,
        );
        let fd = match opened {
            Ok(fd) => fd,
            Err(e) if e.code() == crate::error::Code::SymlinkEscape => {
                return Ok(OwnFile::Broken("a symbolic link"));
            }
            Err(e) if e.raw_os_error() == Some(Errno::ISDIR.raw_os_error()) => {
                return Ok(OwnFile::Broken("a directory"));
            }
            // A socket cannot be opened at all; say what it is.
            Err(e)
                if e.code() == crate::error::Code::NotRegularFile
                    || e.raw_os_error() == Some(Errno::NXIO.raw_os_error()) =>
            {
                let st = self.stat_entry(name)?;
                return Ok(OwnFile::Broken(kind_of(&st)));
            }
            Err(e) => return Err(e),
        };
        let shown = name.as_rel().as_path();
        let st = rustix::fs::fstat(&fd).map_err(|e| Error::io("fstat", shown, e))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Ok(OwnFile::Broken(kind_of(&st)));
        }
        let flags = rustix::fs::fcntl_getfl(&fd).map_err(|e| Error::io("fcntl", shown, e))?;
        rustix::fs::fcntl_setfl(&fd, flags - OFlags::NONBLOCK)
            .map_err(|e| Error::io("fcntl", shown, e))?;
        Ok(OwnFile::Open(fd))
    }
}
