//! Copying an entry of a layer into a folder on another file system, where it cannot be
//! moved: files with their content, mode and times, links as they are, directories whole.
//! Used only when `renameat2` answers `EXDEV` (the state root and the grant on two file
//! systems); the copy is made under a hidden name and then put in place in one rename.

use std::fs::File;
use std::path::Path;

use rustix::fs::{FileType, Timespec, Timestamps};

use super::scan::lstat_rel;
use crate::beneath::{Anchor, Symlinks};
use crate::error::{Error, Result};
use crate::input::Name;

/// How a name is shown in an error.
fn shown(name: Name<'_>) -> crate::error::Shown {
    crate::error::Shown::path(Path::new(name.as_os_str()))
}

/// How deep a copied directory may go.
const MAX_DEPTH: usize = 256;

/// Copy the entry `name` of `from` to the new entry `to` of `into` (which must not exist).
///
/// # Errors
///
/// `io`; what was copied so far stays under `to`, for the caller to remove.
pub(super) fn copy_entry(from: &Anchor, name: Name<'_>, into: &Anchor, to: Name<'_>) -> Result<()> {
    copy_at(from, name, into, to, 0)
}

fn copy_at(from: &Anchor, name: Name<'_>, into: &Anchor, to: Name<'_>, depth: usize) -> Result<()> {
    let st = lstat_rel(from, Path::new(name.as_os_str()))?.ok_or_else(|| Error::NotFound {
        path: crate::error::Shown::path(Path::new(name.as_os_str())),
        why: "gone while it was being copied".into(),
    })?;
    let times = Timestamps {
        last_access: Timespec {
            tv_sec: st.st_atime,
            tv_nsec: st.st_atime_nsec as _,
        },
        last_modification: Timespec {
            tv_sec: st.st_mtime,
            tv_nsec: st.st_mtime_nsec as _,
        },
    };
    let mode = crate::beneath::permissions(&st);
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => {
            let src = from.open_read(name.as_rel(), Symlinks::Deny)?;
            let dst = into.create_new(to, 0o600)?;
            let (mut src, mut dst) = (File::from(src), File::from(dst));
            std::io::copy(&mut src, &mut dst).map_err(|e| Error::io("copy", shown(to), e))?;
            rustix::fs::fchmod(&dst, crate::beneath::mode_bits(mode))
                .map_err(|e| Error::io("fchmod", shown(to), e))?;
            rustix::fs::futimens(&dst, &times).map_err(|e| Error::io("futimens", shown(to), e))?;
            dst.sync_all().map_err(|e| Error::io("fsync", shown(to), e))
        }
        FileType::Symlink => {
            let target = from.read_link(name)?.unwrap_or_default();
            rustix::fs::symlinkat(target.as_slice(), into, to.as_os_str())
                .map_err(|e| Error::io("symlinkat", shown(to), e))
        }
        FileType::Directory => {
            if depth >= MAX_DEPTH {
                return Err(Error::io("copy", shown(to), rustix::io::Errno::LOOP));
            }
            into.create_dir(to, 0o700)?;
            let src = from.open_dir(name.as_rel(), Symlinks::Deny)?;
            let dst = into.open_dir(to.as_rel(), Symlinks::Deny)?;
            for (entry, _) in src.entries()? {
                let entry = Name::new(&entry)?;
                copy_at(&src, entry, &dst, entry, depth + 1)?;
            }
            dst.set_mode(mode)?;
            rustix::fs::futimens(&dst, &times).map_err(|e| Error::io("futimens", shown(to), e))?;
            dst.sync()
        }
        // Devices, FIFOs and sockets are never published.
        _ => Ok(()),
    }
}
