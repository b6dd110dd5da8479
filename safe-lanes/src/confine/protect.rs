//! The sandbox's side of protected paths ([`crate::protected`]): what each command's root
//! mounts over its read-write grants so nothing in them runs later as the human.
//!
//! Looked at per command, not per kept layout: a repository may appear in a grant, or a hook
//! folder vanish, between two commands.

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

use super::placeholders::{self, InUse, Wanted};
use super::sandbox::Mount;
use crate::beneath::{HOLD, Symlinks};
use crate::error::{Error, Result, Shown};
use crate::grants::{Access, Effective, Kind, Session};
use crate::input::RelPath;
use crate::protected::{Protection, State, is_home};

/// The mounts that keep a command's read-write grants' protected paths read-only, and the
/// hold on the placeholders among them (none are removed while it lives).
#[derive(Debug)]
pub(super) struct Protecting {
    _held: Option<InUse>,
    /// `(absolute path, descriptor, read-only)`: protected paths read-only, pins writable.
    binds: Vec<(PathBuf, OwnedFd, bool)>,
}

impl Protecting {
    /// Each path to bind over itself.
    pub(super) fn mounts(&self) -> Vec<Mount<'_>> {
        self.binds
            .iter()
            .map(|(path, fd, read_only)| Mount {
                path,
                fd: fd.as_fd(),
                read_only: *read_only,
            })
            .collect()
    }
}

/// The protection of each read-write folder grant among `grants`, with the placeholders of
/// what is missing made and held.
///
/// # Errors
///
/// `protected_path` for a protected path that is a symbolic link (it cannot be kept
/// read-only); `sandbox_unavailable` when a grant holds more than can be looked at; `io`.
pub(super) fn protect(session: &Session, grants: &[&Effective]) -> Result<Protecting> {
    let writable: Vec<&Effective> = grants
        .iter()
        .copied()
        .filter(|g| g.access == Access::ReadWrite && g.toolchain.kind == Kind::Folder)
        .collect();
    if writable.is_empty() {
        return Ok(Protecting {
            _held: None,
            binds: Vec::new(),
        });
    }
    // Looked at under the registry's lock, so no placeholder found now goes before the
    // command holds it.
    let registry = placeholders::Registry::open(session.grants())?;
    let locked = registry.lock()?;
    let mut scans = Vec::new();
    for g in &writable {
        let lifted: Vec<PathBuf> = g
            .allow_protected
            .iter()
            .map(|l| l.as_path().to_owned())
            .collect();
        let scan = Protection::scan(g.folder()?, is_home(&g.path), &lifted)?;
        if let Some(link) = scan.entries().iter().find(|p| p.state == State::Link) {
            return Err(Error::ProtectedPath {
                path: Shown::path(&g.path.join(&link.path)),
                why: format!(
                    "it is a symbolic link, which the sandbox cannot keep read-only; replace it \
                     with what it points to, or lift its protection (`safe-lanes grant \
                     set-access {} read_write --allow-protected {}`)",
                    g.alias,
                    Shown::path(&link.path)
                ),
            });
        }
        scans.push(scan);
    }
    let mut wanted = Vec::new();
    for (g, scan) in writable.iter().zip(&scans) {
        for p in scan.entries() {
            if let State::Missing(placeholder) = p.state {
                wanted.push(Wanted {
                    folder: g.folder()?,
                    grant: &g.path,
                    path: &p.path,
                    placeholder,
                });
            }
        }
    }
    let held = locked.hold(&wanted)?;
    let mut binds = Vec::new();
    for (g, scan) in writable.iter().zip(&scans) {
        let folder = g.folder()?;
        let pinned = scan.pins().into_iter().map(|p| (p, false));
        let protected = scan.entries().iter().map(|p| (p.path.clone(), true));
        for (rel, read_only) in pinned.chain(protected) {
            let fd = folder
                .open(
                    RelPath::new(&rel)?,
                    HOLD,
                    rustix::fs::Mode::empty(),
                    Symlinks::Deny,
                )
                .map_err(|e| Error::SandboxUnavailable {
                    why: format!(
                        "the protected path {} could not be kept read-only: {e}",
                        Shown::path(&g.path.join(&rel))
                    ),
                })?;
            binds.push((g.path.join(&rel), fd, read_only));
        }
    }
    Ok(Protecting {
        _held: Some(held),
        binds,
    })
}
