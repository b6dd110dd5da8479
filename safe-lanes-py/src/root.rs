//! `safe_lanes.StateRoot`: the open, verified state root every lane is opened from.

use std::path::PathBuf;

use pyo3::prelude::*;

use crate::error::Result;

/// The state root: opened once, checked (0700, owned by this user), held by descriptor.
///
/// `StateRoot.open()` resolves it as the CLI does: the given path, else `SAFE_LANES_ROOT`,
/// else `GWSA_ROOT`, else `$XDG_STATE_HOME/safe-lanes`, else `~/.local/state/safe-lanes`;
/// what is missing is created (mode 0700). Keep it for the life of the process.
#[pyclass(frozen, module = "safe_lanes")]
#[derive(Debug)]
pub(crate) struct StateRoot(pub(crate) safe_lanes::StateRoot);

impl StateRoot {
    /// Another handle on the same open root (its descriptors duplicated), for a desk that
    /// takes one of its own.
    pub(crate) fn handle(&self) -> Result<safe_lanes::StateRoot> {
        Ok(self.0.try_clone()?)
    }
}

#[pymethods]
impl StateRoot {
    /// Open (creating what is missing) the state root at `path`, or where the environment
    /// says (module docs).
    ///
    /// Raises `Refused` with code `insecure_root` when the root is owned by another user or
    /// writable by others, `Failed` (`io`) when it cannot be created or opened.
    #[staticmethod]
    #[pyo3(signature = (path=None))]
    fn open(py: Python<'_>, path: Option<PathBuf>) -> Result<Self> {
        let root = py.detach(|| safe_lanes::StateRoot::open_default(path.as_deref()))?;
        Ok(Self(root))
    }

    /// The canonical path of the root.
    #[getter]
    fn path(&self) -> PathBuf {
        self.0.path().to_path_buf()
    }

    /// `<root>/.downloads`, the download lane.
    #[getter]
    fn downloads(&self) -> PathBuf {
        self.0.downloads_path()
    }

    /// `<root>/.uploads`, the deposit.
    #[getter]
    fn uploads(&self) -> PathBuf {
        self.0.uploads_path()
    }

    /// Every broken piece of the root, each said in a sentence with what it disables (what
    /// `safe-lanes doctor` shows; `safe-lanes init` repairs it).
    fn broken(&self, py: Python<'_>) -> Vec<String> {
        py.detach(|| self.0.broken())
    }

    fn __repr__(&self) -> String {
        format!("StateRoot({:?})", self.0.path())
    }
}
