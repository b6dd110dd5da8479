//! The Python package of safe-lanes: the extension module `safe_lanes._native`, which the
//! package `safe_lanes` (agent side) and `safe_lanes.human` (the human's side) re-export.
//!
//! Every class binds one of the library's types and holds no policy of its own: it converts
//! Python arguments to the library's, releases the GIL around the library's call, and hands
//! back the library's report (`report.rs`) or its error (`error.rs`). Content from Python is
//! streamed to the library (`content.rs`). The package is tested from Python
//! (`safe-lanes-py/tests`), built by maturin (`safe-lanes-py/pyproject.toml`).

mod content;
mod deposit;
mod desk;
mod download;
mod error;
mod human;
mod process;
mod report;
mod root;
mod upload;

use pyo3::prelude::*;

/// The native part of `safe_lanes`: import `safe_lanes` (the agent's side) or
/// `safe_lanes.human` (the human's), never this module.
#[pymodule]
#[pyo3(name = "_native")]
mod native {
    #[pymodule_export]
    use super::deposit::{Sent, Staged, UploadDeposit, Uploader};
    #[pymodule_export]
    use super::desk::{
        AgentDesk, Changes, CommandReport, Control, GrantInfo, GrantsList, HeldPath, Patched,
        RequestInfo, RequestOutcome, Requested, Uploaded, UploadedContent,
    };
    #[pymodule_export]
    use super::download::{DownloadLane, DownloadList, Entry, Saved};
    #[pymodule_export]
    use super::human::{
        ChangeReview, Decided, Grant, Grants, HeldChanges, HeldSet, HeldView, Proposal, Request,
        SetReview,
    };
    #[pymodule_export]
    use super::process::{Hardening, SandboxSupport, harden, sandbox_support, sanitize};
    #[pymodule_export]
    use super::root::StateRoot;
    #[pymodule_export]
    use super::upload::{Checked, Source, UploadSource};
}
