//! What an opened file must be before its content is read or replaced on an agent's behalf.

use std::os::fd::BorrowedFd;
use std::path::Path;

use rustix::fs::{FileType, Stat};

use super::filesystem::pseudo_filesystem;
use super::stat::{kind_of, link_count};
use crate::error::{Error, Result, Shown};

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
