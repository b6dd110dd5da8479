//! How a failed call becomes the library's error: a resolution errno mapped to its refusal
//! code ([`refusal`]), and names and descriptors shown in messages.

use std::ffi::OsStr;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::io::Errno;

use super::Symlinks;
use super::location::location_of;
use crate::error::{Error, Shown};

/// An open descriptor for an error message: where the kernel says it is, or its number.
pub(crate) fn shown_fd(fd: BorrowedFd<'_>) -> Shown {
    location_of(fd).map_or_else(
        |_| Shown::text(&format!("descriptor {}", fd.as_raw_fd())),
        |path| Shown::path(&path),
    )
}

/// A name in the anchor's directory, for an error message.
pub(super) fn name_shown(name: &(impl AsRef<OsStr> + ?Sized)) -> Shown {
    Shown::bytes(name.as_ref().as_bytes())
}

/// Map a resolution errno to the library's refusal codes.
pub(super) fn refusal(errno: Errno, path: &Path, symlinks: Symlinks, call: &'static str) -> Error {
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
            why: "too many levels of symbolic links, a /proc magic link, or a link on a mount \
                  that follows none (nosymfollow)",
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
