//! Unconfined: the few operations that start from a path the primitive does not confine — a
//! trusted path from the human (the state root, a folder to grant), the configuration (an
//! upload root), or the system (the sandbox's system set). Each takes an [`Ambient`] that says
//! why it may, so every such call names its reason where it is made, and a reader finds them
//! all by searching for `Ambient::because`. Nothing an agent supplies reaches these.

#[cfg(target_os = "linux")]
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{Mode, OFlags};

use super::errno::refusal;
use super::{Anchor, Symlinks};
use crate::error::{Error, Result};

/// Why a call may start from a path the primitive does not confine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ambient {
    why: &'static str,
}

impl Ambient {
    /// Authority to use an unconfined path, for the reason `why` (a trusted source, such as
    /// "the state root the human chose").
    pub const fn because(why: &'static str) -> Self {
        Self { why }
    }

    /// The reason given.
    pub fn why(self) -> &'static str {
        self.why
    }
}

impl Anchor {
    /// Unconfined: opens the directory at `path`, following symbolic links.
    ///
    /// # Errors
    ///
    /// `not_found` when nothing is there or it is not a directory, `io` otherwise.
    pub fn open_ambient(path: &Path, _why: Ambient) -> Result<Self> {
        let fd = rustix::fs::open(
            path,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| refusal(e, path, Symlinks::Beneath, "open"))?;
        Ok(Self::new(fd))
    }
}

/// Unconfined: create the directory `path` and any missing parents, each new one with `mode`.
/// Existing directories are left as they are.
///
/// # Errors
///
/// `io` when a directory cannot be created.
pub fn create_dir_all(path: &Path, mode: u32, _why: Ambient) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(path)
        .map_err(|e| Error::io("mkdir", path, e))
}

/// Unconfined, Linux only: an `O_PATH` descriptor of the absolute `path` (following links),
/// which can neither read nor write — what Landlock rules and mounts are attached to.
///
/// # Errors
///
/// `not_found` when nothing is there, `io` otherwise.
#[cfg(target_os = "linux")]
pub(crate) fn open_path(path: &Path, _why: Ambient) -> Result<OwnedFd> {
    rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| refusal(e, path, Symlinks::Beneath, "open"))
}
