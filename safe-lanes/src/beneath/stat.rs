//! What a `stat` says, in the same widths on every system: identity, permission bits, link
//! count, kind of file.

use std::os::fd::BorrowedFd;

use rustix::fs::{FileType, Mode, Stat};

use super::errno::shown_fd;
use crate::error::{Error, Result};

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
pub(crate) fn stat_identity(st: &Stat) -> (u64, u64) {
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
pub(crate) fn link_count(st: &Stat) -> u64 {
    u64::from(st.st_nlink)
}

/// Permission bits for a system call, from the `u32` the library writes them as (they fit
/// the 16 bits of macOS's `mode_t`).
#[allow(clippy::unnecessary_cast, clippy::cast_possible_truncation)]
pub(crate) fn mode_bits(mode: u32) -> Mode {
    Mode::from_raw_mode((mode & 0o7777) as rustix::fs::RawMode)
}

/// A human word for the file type in `stat`, for messages ("a directory", "a FIFO", …).
pub(crate) fn kind_of(stat: &Stat) -> &'static str {
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
