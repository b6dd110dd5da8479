//! What an opened file must be before its content is read or replaced on an agent's behalf.

use std::os::fd::BorrowedFd;
use std::path::Path;

use rustix::fs::{FileType, Stat};

use super::stat::{kind_of, link_count};
use crate::error::{Error, Result, Shown};

/// The status of `fd`, when it is a regular file with exactly one link — what an upload may
/// send and a patch may change. `shown` names it in refusals.
///
/// A second link could be anything the user owns (a token file linked into an allowed
/// folder): its content is refused whatever its name, and so is a directory, device, socket
/// or FIFO.
///
/// # Errors
///
/// `not_regular_file`, `hardlinked`, `io`.
pub(crate) fn regular_single_link(fd: BorrowedFd<'_>, shown: &Path) -> Result<Stat> {
    let st = rustix::fs::fstat(fd).map_err(|e| Error::io("fstat", shown, e))?;
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
