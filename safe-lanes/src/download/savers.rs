//! Which lane handles may have left a save unrecorded: the registry `<root>/.savers`.
//!
//! A save is published, then recorded, then unmarked (ADR 0009); a process that dies in
//! between leaves a marked file for the next lane to record as recovered. Finding such files
//! means reading the whole lane, so a lane reads it only when a crash may have happened:
//!
//! - every handle that saves holds an entry in the registry ([`Held`]) from before its first
//!   save until it is dropped, and an entry whose lock is free was left by a handle whose
//!   process died;
//! - the registry's [`KNOWN`] file says that every file left unrecorded before the first entry
//!   was made has been recorded; without it (a new registry, a root a previous version used,
//!   a registry removed by hand) nothing is known.
//!
//! A new handle reads the lane when it finds a dead entry or no [`KNOWN`] file. Once every
//! marked file is recorded it removes the dead entries and writes [`KNOWN`]; if one could not
//! be recorded, both stay as they are, and the next handle tries again.

use std::os::fd::OwnedFd;

use crate::beneath::Anchor;
use crate::error::{Code, Result, Shown};
use crate::held::{Held, Holder, holder};
use crate::input::Name;
use crate::root::StateRoot;

/// The registry's record that what happened before its entries is known (module docs). Hidden,
/// so it is never taken for an entry.
const KNOWN: &str = ".known";

/// The registry of a lane's savers.
#[derive(Debug)]
pub(super) struct Savers {
    /// `<root>/.savers`; `None` when it cannot be made (a read-only root): then every handle
    /// reads the lane, and none registers.
    dir: Option<Anchor>,
}

/// A handle's entry in the registry, removed when dropped.
#[derive(Debug)]
pub(super) struct Registration {
    dir: Anchor,
    held: Held<OwnedFd>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Removed while still locked (see `crate::held`).
        let _ = Name::new(&self.held.name).and_then(|name| self.dir.remove_file(name));
    }
}

/// What the registry said before a handle's first use of the lane.
#[derive(Debug)]
pub(super) struct Evidence<'s> {
    /// The registry, when there is one.
    dir: Option<&'s Anchor>,
    /// What happened before is unknown: no [`KNOWN`] file, or no registry to read.
    unknown: bool,
    /// The entries of handles whose process died, locked by this handle.
    dead: Vec<(String, OwnedFd)>,
}

impl Savers {
    /// The registry of `root`.
    ///
    /// # Errors
    ///
    /// `insecure_root` when `.savers` is not a private directory of the current user (as for
    /// a lane). When it is missing and cannot be made, the handle goes without it.
    pub(super) fn open(root: &StateRoot) -> Result<Self> {
        match root.savers() {
            Ok(dir) => Ok(Self { dir: Some(dir) }),
            Err(e) if e.code() == Code::InsecureRoot => Err(e),
            Err(e) => {
                tracing::debug!(error = %e, "no registry of savers: every lane reads the lane");
                Ok(Self { dir: None })
            }
        }
    }

    /// Register a handle about to save; `None` without a registry.
    ///
    /// # Errors
    ///
    /// `io`: the handle must not save unregistered, since a crash of it would go unseen.
    pub(super) fn register(&self) -> Result<Option<Registration>> {
        let Some(dir) = &self.dir else {
            return Ok(None);
        };
        let held = Held::create_file(dir)?;
        Ok(Some(Registration {
            dir: dir.try_clone()?,
            held,
        }))
    }

    /// What the registry says now: whether a handle died, or nothing is known.
    pub(super) fn evidence(&self) -> Evidence<'_> {
        let mut evidence = Evidence {
            dir: self.dir.as_ref(),
            unknown: true,
            dead: Vec::new(),
        };
        let Some((dir, entries)) = self
            .dir
            .as_ref()
            .and_then(|dir| Some((dir, dir.entries().ok()?)))
        else {
            return evidence;
        };
        for (name, st) in entries {
            if name == KNOWN {
                evidence.unknown = false;
                continue;
            }
            match holder(dir, &name, &st) {
                Holder::Abandoned(locked) => {
                    let name = name.to_string_lossy().into_owned();
                    evidence.dead.push((name, locked));
                }
                Holder::Stale => {
                    let _ = Name::new(&name).and_then(|name| dir.remove_file(name));
                }
                Holder::Live | Holder::Making | Holder::None => {}
            }
        }
        evidence
    }
}

impl Evidence<'_> {
    /// Whether the lane must be read for files a dead handle left unrecorded.
    pub(super) fn crash_possible(&self) -> bool {
        self.unknown || !self.dead.is_empty()
    }

    /// The lane was read and every marked file recorded: the dead handles' entries go, and
    /// from now on what happened before is known.
    pub(super) fn settled(self) {
        let Some(dir) = self.dir else {
            return;
        };
        for (name, _locked) in &self.dead {
            if let Err(e) = Name::new(name).and_then(|name| dir.remove_all(name)) {
                tracing::warn!(error = %e, entry = %Shown::text(name), "could not remove a dead saver's entry");
            }
        }
        if self.unknown
            && let Err(e) = Name::new(KNOWN).and_then(|known| dir.create_new(known, 0o600))
            && e.raw_os_error() != Some(rustix::io::Errno::EXIST.raw_os_error())
        {
            tracing::warn!(error = %e, "could not record that the lane was read");
        }
    }
}
