//! Where an open file is, as the kernel reports it.

use std::ffi::OsString;
#[cfg(target_os = "linux")]
use std::os::fd::AsRawFd;
use std::os::fd::BorrowedFd;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use crate::error::{Error, Result};

/// The current location of an open file, as the kernel reports it for the descriptor
/// (`readlink("/proc/self/fd/N")` on Linux, `fcntl(F_GETPATH)` on macOS).
///
/// This *reports* where an already-open inode is; it never opens anything. Callers use it to
/// learn a canonical path and then confirm identity through an [`Anchor`](super::Anchor).
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
