//! The state root where the library has no backend (Windows): opening it is refused.
//!
//! Every lane stands on descriptor-relative POSIX calls (`openat`, `O_NOFOLLOW`, `linkat`,
//! `renameat`, `fstat` owners and modes) that Windows does not have, and the library never
//! falls back to deciding containment with path strings. So on Windows nothing is opened:
//! [`StateRoot::open`] and [`StateRoot::init`] refuse with `unsupported_platform`, and the
//! adapters print that refusal. The reasons, and what a real backend would take, are in
//! ADR 0012.

use std::path::Path;

use crate::error::{Error, Result};

/// Why the lanes refuse on this system.
const WHY: &str = "its lanes need descriptor-relative POSIX file calls (openat with \
    O_NOFOLLOW, linkat, renameat, owner and mode checks), which this system does not offer";

/// The state root, on a system where it cannot be opened: no value of this type exists.
#[derive(Debug)]
pub struct StateRoot {
    _never: std::convert::Infallible,
}

impl StateRoot {
    /// Refuses: the lanes have no backend on this system (module documentation).
    ///
    /// # Errors
    ///
    /// Always `unsupported_platform`; nothing is opened or created.
    pub fn open(path: &Path) -> Result<Self> {
        let _ = path;
        Err(refusal())
    }

    /// Refuses, as [`StateRoot::open`]: nothing is created.
    ///
    /// # Errors
    ///
    /// Always `unsupported_platform`.
    pub fn init(path: &Path) -> Result<Self> {
        let _ = path;
        Err(refusal())
    }

    /// Refuses, as [`StateRoot::open`], wherever the root would be.
    ///
    /// # Errors
    ///
    /// Always `unsupported_platform`.
    pub fn open_default(flag: Option<&Path>) -> Result<Self> {
        let _ = flag;
        Err(refusal())
    }
}

/// The refusal every entry point gives here.
fn refusal() -> Error {
    Error::UnsupportedPlatform {
        platform: std::env::consts::OS,
        why: WHY,
    }
}
