//! Confined commands where the sandbox's layers do not exist (anything but Linux): every
//! command is refused with `sandbox_unavailable`, and nothing runs.
//!
//! The sandbox is built from Linux's namespaces, Landlock and seccomp (ADR 0007). Without
//! them a command could only run with the user's whole authority, which the library never
//! does in place of a confined one. Folder grants still work as data here (list, request,
//! approve, revoke); only commands confined to them are refused. How macOS could confine
//! them with its own sandbox (Seatbelt) is designed in ADR 0011.

use super::{Confined, ConfinedOutcome, Failure, LandlockSupport, SandboxSupport};
use crate::control::Control;
use crate::error::Error;
use crate::grants::Session;

/// Why confined commands are refused on this system.
const WHY: &str = "confined commands need Linux (user namespaces, Landlock, seccomp); \
    this system has none of them, and a command is never run unconfined instead";

/// What Landlock this system offers: none.
pub fn landlock_support() -> LandlockSupport {
    LandlockSupport {
        abi: None,
        fully_enforced: false,
        problem: Some("Landlock is a Linux security module; this system has none".to_owned()),
    }
}

/// What confined commands get on this system: nothing, with the reason.
pub fn sandbox_support() -> SandboxSupport {
    SandboxSupport {
        landlock: landlock_support(),
        available: false,
        layers: Vec::new(),
        problem: Some(WHY.to_owned()),
    }
}

impl Confined {
    /// Refuses, before anything is recorded as started: there is no sandbox to run the
    /// command in (module documentation).
    pub(super) fn run_recorded(
        &self,
        _session: &Session,
        _control: &Control,
    ) -> std::result::Result<ConfinedOutcome, Failure> {
        Err(Failure::Before(Error::SandboxUnavailable {
            why: WHY.into(),
        }))
    }
}
