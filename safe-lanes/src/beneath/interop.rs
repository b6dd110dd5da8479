//! Conversions between an [`Anchor`] and a cap-std [`Dir`] (the `cap-std` feature), for
//! gateways that already hold their folders as cap-std capabilities.
//!
//! Both are a directory descriptor and nothing more, so a conversion hands the descriptor
//! over: no path is looked up again, and the capability stays exactly the directory it was.
//! What each side then does with it follows its own rules: cap-std resolves paths its way
//! (links that stay inside are followed, like [`Symlinks::Beneath`]), and none of the lanes'
//! or grants' policies travel with a [`Dir`].

use std::os::fd::OwnedFd;

use cap_std::fs::Dir;

use super::{Anchor, Symlinks};
use crate::error::{Error, Result};
use crate::input::RelPath;

impl TryFrom<Dir> for Anchor {
    type Error = Error;

    /// Takes over the directory of a cap-std [`Dir`], with the backend of [`Anchor::new`].
    ///
    /// The directory is opened again as `.` beneath itself (read-only, `O_DIRECTORY`): cap-std
    /// keeps `O_PATH` descriptors, which can neither list a directory nor `fsync` it, and a
    /// [`Dir`] built from any [`std::fs::File`] may not be a directory at all.
    ///
    /// # Errors
    ///
    /// `not_found` ("not a directory") when the descriptor is not a directory; `io` when it
    /// cannot be opened for reading.
    fn try_from(dir: Dir) -> Result<Self> {
        Anchor::new(OwnedFd::from(dir)).open_dir(RelPath::here(), Symlinks::Deny)
    }
}

impl From<Anchor> for Dir {
    /// Hands the anchor's directory descriptor to cap-std.
    ///
    /// # Security
    ///
    /// The [`Dir`] reaches what the anchor reaches, by cap-std's resolution; policies the
    /// library applies on top of an anchor (a read-only grant, a lane's naming rules) are not
    /// part of the descriptor and do not come along.
    fn from(anchor: Anchor) -> Self {
        Dir::from(anchor.fd)
    }
}
