//! `safe_lanes.harden`, `safe_lanes.sandbox_support` and `safe_lanes.sanitize`.

use pyo3::prelude::*;

use crate::download::Hint;
use crate::error::Result;
use crate::report::report;

/// Make this process not dumpable and turn core files off (call it first, before reading any
/// secret): afterwards no other process of the user can trace the gateway or read its memory,
/// environment or descriptors through `/proc`, and a crash writes no core file.
///
/// Raises `Failed` (`io`) rather than leave the process unprotected.
#[pyfunction]
pub(crate) fn harden() -> Result<Hardening> {
    Ok(Hardening(safe_lanes::harden()?))
}

/// Whether confined commands can run here, with every layer, and why not when they cannot.
#[pyfunction]
pub(crate) fn sandbox_support(py: Python<'_>) -> SandboxSupport {
    SandboxSupport(py.detach(safe_lanes::sandbox_support))
}

/// The safe base name `hint` (`str` or `bytes`) becomes in the lanes: no path, never hidden,
/// no control or bidi characters, no device names, the extension kept.
#[pyfunction]
pub(crate) fn sanitize(hint: Hint) -> String {
    safe_lanes::sanitize(hint.into_bytes()).as_str().to_owned()
}

report! {
    /// What `harden()` left in place.
    Hardening(safe_lanes::Hardening) in "safe_lanes" {
        /// The process is not dumpable: same-user processes cannot trace it or read its memory.
        not_dumpable: bool,
        /// Core files are off (`RLIMIT_CORE` 0, soft and hard).
        no_core_files: bool,
        /// The effective user id is 0.
        running_as_root: bool,
        /// What this system cannot do of the above, and why (`None` on Linux).
        unavailable: Option<&'static str>,
        /// The one-line warning to show where users see it (running as root), if any.
        warning: Option<&'static str> = |h| h.warning(),
    }
}

report! {
    /// What confined commands get on this host (what `safe-lanes doctor` reports).
    SandboxSupport(safe_lanes::SandboxSupport) in "safe_lanes" {
        /// Whether a confined command can run here with every layer.
        available: bool,
        /// The layers every confined command runs under (empty when not available).
        layers: Vec<String>,
        /// Why confined commands are refused here, when they are.
        problem: Option<String>,
    }
}
