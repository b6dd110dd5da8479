//! Unconfined: the few operations that start from a path the primitive does not confine — a
//! trusted path from the human (the state root, a folder to grant), the configuration (an
//! upload root), or the system (the sandbox's system set). Each takes an [`Ambient`] that says
//! why it may, so every such call names its reason where it is made, and a reader finds them
//! all by searching for `Ambient::because`. Nothing an agent supplies reaches these.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use super::{Anchor, Symlinks, location_of, refusal};
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

/// Unconfined: an `O_PATH` descriptor of the absolute `path` (following links), which can
/// neither read nor write — what Landlock rules and mounts are attached to.
///
/// # Errors
///
/// `not_found` when nothing is there, `io` otherwise.
pub fn open_path(path: &Path, _why: Ambient) -> Result<OwnedFd> {
    rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| refusal(e, path, Symlinks::Beneath, "open"))
}

/// Unconfined: resolve the absolute `path` the way the kernel does — following symbolic
/// links anywhere, but refusing `/proc` magic links — to an `O_PATH` descriptor, and report
/// where it landed ([`location_of`]).
///
/// An `O_PATH` descriptor can neither read nor write. Callers use the pair to *decide which
/// anchor to use*, then open the file for real beneath that anchor and compare
/// [`identity`](super::identity) with this descriptor, so a swap between the two is detected,
/// never trusted.
///
/// # Errors
///
/// `not_found`, `symlink_escape` (a loop or a magic link), `io`.
pub fn locate(path: &Path, _why: Ambient) -> Result<(OwnedFd, PathBuf)> {
    let fd = rustix::fs::openat2(
        rustix::fs::CWD,
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        rustix::fs::ResolveFlags::NO_MAGICLINKS,
    )
    .or_else(|e| match e {
        // Without openat2 the magic-link refusal is lost; O_PATH still cannot read or write.
        Errno::NOSYS | Errno::PERM => {
            rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
        }
        other => Err(other),
    })
    .map_err(|e| refusal(e, path, Symlinks::Beneath, "openat2"))?;
    let location = location_of(fd.as_fd())?;
    Ok((fd, location))
}
