//! `safe_lanes.UploadSource`: which local files may leave the machine (the allowlist and its
//! hard guard), and a file object on exactly the file that was checked.

use std::os::fd::IntoRawFd;
use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use serde::Serialize;

use crate::error::Result;
use crate::report::{dict_of, report};
use crate::root::StateRoot;

/// The upload-source allowlist of a state root: `<root>/.downloads` (always), each line of
/// `<root>/.upload-roots`, and `SAFE_LANES_UPLOAD_ROOTS` / `GWSA_UPLOAD_ROOTS`; nothing under
/// the state root but `.downloads`, whatever they say. Refusals are recorded as the agent's.
#[pyclass(frozen, module = "safe_lanes")]
#[derive(Debug)]
pub(crate) struct UploadSource(pub(crate) safe_lanes::UploadSource);

#[pymethods]
impl UploadSource {
    /// Load the allowlist of `root` (from `.upload-roots` and the environment, now).
    #[staticmethod]
    fn load(py: Python<'_>, root: &StateRoot) -> Result<Self> {
        Ok(Self(py.detach(|| safe_lanes::UploadSource::load(&root.0))?))
    }

    /// Check that the file at `path` (absolute, as the agent gave it) may be uploaded, and
    /// read it through the checked descriptor: its canonical path, root, size and SHA-256.
    ///
    /// Raises `Refused` with `outside_allowlist`, `state_root`, `not_regular_file`,
    /// `hardlinked`, `not_found`, `symlink_escape`, `relative_path`, `nul_byte` or
    /// `invalid_argument`; `Failed` (`io`) when reading fails.
    fn resolve(&self, py: Python<'_>, path: PathBuf) -> Result<Source> {
        Ok(Source(Resolved::from(py.detach(|| self.0.resolve(&path))?)))
    }

    /// Check `path` as `resolve` does and return a binary file object (`safe_lanes.Opened`, an
    /// `io.FileIO`) that reads exactly the file that was checked, through its descriptor: it
    /// is never opened again by path, so a file swapped in after the check is not what is
    /// read. Use it in `with`; give it to `UploadDeposit.stage_source`.
    ///
    /// Raises as `resolve` does.
    fn open(&self, py: Python<'_>, path: PathBuf) -> PyResult<Py<PyAny>> {
        let opened = py
            .detach(|| self.0.open(&path))
            .map_err(crate::error::Failure)?;
        static OPENED: PyOnceLock<Py<PyType>> = PyOnceLock::new();
        let class = OPENED.import(py, "safe_lanes._files", "Opened")?;
        Ok(class.call1((Checked(opened),))?.unbind())
    }

    /// The allowed roots: each `{"path", "origin", "entry", "covers_state_root"}`.
    #[getter]
    fn roots(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        self.0.roots().iter().map(|r| dict_of(py, r)).collect()
    }

    /// The allowlist entries that were ignored: each `{"origin", "entry", "at", "why"}`.
    #[getter]
    fn ignored(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        self.0.ignored().iter().map(|r| dict_of(py, r)).collect()
    }

    fn __repr__(&self) -> String {
        let roots: Vec<_> = self.0.roots().iter().map(|r| r.path.clone()).collect();
        format!("UploadSource({roots:?})")
    }
}

/// A source that passed the allowlist and was read through its descriptor.
#[derive(Debug, Serialize)]
pub(crate) struct Resolved {
    #[serde(serialize_with = "lossy")]
    path: PathBuf,
    #[serde(serialize_with = "lossy")]
    root: PathBuf,
    bytes: u64,
    sha256: String,
}

impl From<safe_lanes::Source> for Resolved {
    /// The report of `source`, without its descriptor (closed here).
    fn from(source: safe_lanes::Source) -> Self {
        Self {
            path: source.path,
            root: source.root,
            bytes: source.bytes,
            sha256: source.sha256,
        }
    }
}

fn lossy<S: serde::Serializer>(
    path: &std::path::Path,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.collect_str(&path.to_string_lossy())
}

report! {
    /// A source file that passed every check of the allowlist, with its SHA-256 (what
    /// `safe-lanes upload check` prints).
    Source(Resolved) in "safe_lanes" {
        /// Its canonical path (`pathlib.Path`).
        path: PathBuf,
        /// The allowed root it lies in (`pathlib.Path`).
        root: PathBuf,
        /// Its size in bytes.
        bytes: u64,
        /// The lowercase hex SHA-256 of its content, read through the checked descriptor.
        sha256: String,
    }
}

/// The checked descriptor behind a `safe_lanes.Opened` file object: what
/// `UploadDeposit.stage_source` stages.
#[pyclass(frozen, module = "safe_lanes")]
#[derive(Debug)]
pub(crate) struct Checked(pub(crate) safe_lanes::Opened);

#[pymethods]
impl Checked {
    /// Its canonical path.
    #[getter]
    fn path(&self) -> PathBuf {
        self.0.path.clone()
    }

    /// The allowed root it lies in.
    #[getter]
    fn root(&self) -> PathBuf {
        self.0.root.clone()
    }

    /// Its size in bytes when it was checked.
    #[getter]
    fn bytes(&self) -> u64 {
        self.0.bytes
    }

    /// A new descriptor of the checked open file (`dup`: the same file, never opened again by
    /// path), owned by the caller; the file object reads through it.
    fn reader_fd(&self) -> Result<i32> {
        let file =
            self.0.file.try_clone().map_err(|e| {
                safe_lanes::Error::io("dup", safe_lanes::Shown::path(&self.0.path), e)
            })?;
        Ok(file.into_raw_fd())
    }

    fn __repr__(&self) -> String {
        format!("Checked({:?})", self.0.path)
    }
}
