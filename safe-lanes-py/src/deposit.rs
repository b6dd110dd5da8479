//! `safe_lanes.UploadDeposit` and `safe_lanes.Uploader`: content staged in `<root>/.uploads`
//! for a command-line uploader, and always erased.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use self_cell::self_cell;

use crate::download::{Hint, streamed};
use crate::error::Result;
use crate::report::report;
use crate::root::StateRoot;
use crate::upload::Checked;

/// The deposit of a state root. Opening it sweeps what no live process holds (what a crash
/// left). Staging and uploads are recorded as the agent's.
#[pyclass(frozen, module = "safe_lanes")]
#[derive(Debug)]
pub(crate) struct UploadDeposit(Arc<safe_lanes::UploadDeposit>);

/// A staged file: the library's, which borrows its deposit, kept with that deposit.
type Holding<'d> = Option<safe_lanes::Staged<'d>>;

self_cell!(
    struct StagedCell {
        owner: Arc<safe_lanes::UploadDeposit>,
        #[covariant]
        dependent: Holding,
    }
    impl {Debug}
);

#[pymethods]
impl UploadDeposit {
    /// The deposit of `root`; `max_bytes` caps what is staged (`too_large`, nothing kept).
    #[new]
    #[pyo3(signature = (root, *, max_bytes=None))]
    fn new(py: Python<'_>, root: &StateRoot, max_bytes: Option<u64>) -> Result<Self> {
        let deposit = py.detach(|| safe_lanes::UploadDeposit::open(&root.0))?;
        Ok(Self(Arc::new(match max_bytes {
            Some(max) => deposit.with_max_bytes(max),
            None => deposit,
        })))
    }

    /// The deposit directory; each uploader runs in its own upload's directory inside it.
    #[getter]
    fn path(&self) -> PathBuf {
        self.0.path().to_path_buf()
    }

    /// Stage `data` (`bytes`, a binary file object, or an iterable of `bytes`, streamed) as a
    /// 0600 file with an inert name made from `name`, in a fresh private directory of the
    /// deposit. A context manager: leaving the `with` block erases it, whatever happens.
    ///
    /// Raises `Refused` (`too_large`) past the cap, `Failed` (`io`); nothing is left.
    #[pyo3(signature = (*, data, name))]
    fn stage(&self, py: Python<'_>, data: &Bound<'_, PyAny>, name: Hint) -> PyResult<Staged> {
        let hint = name.into_bytes();
        let deposit = Arc::clone(&self.0);
        let cell = streamed(py, data, None, move |content| {
            StagedCell::try_new(deposit, |deposit| deposit.stage(hint, content).map(Some))
        })?;
        Ok(Staged::holding(cell))
    }

    /// Stage a copy of a file `UploadSource.open` checked (read through its descriptor, from
    /// its first byte), under its own name. A context manager, as `stage`.
    ///
    /// Raises `TypeError` for anything `UploadSource.open` did not return.
    fn stage_source(&self, py: Python<'_>, opened: &Bound<'_, PyAny>) -> PyResult<Staged> {
        let checked = match opened.cast::<Checked>() {
            Ok(checked) => checked.clone(),
            Err(_) => opened
                .getattr("_checked")
                .ok()
                .and_then(|c| c.cast_into::<Checked>().ok())
                .ok_or_else(|| {
                    PyTypeError::new_err(
                        "stage_source takes the file object UploadSource.open returned",
                    )
                })?,
        };
        let checked = checked.get();
        let deposit = Arc::clone(&self.0);
        let cell = py
            .detach(|| {
                StagedCell::try_new(deposit, |deposit| {
                    deposit.stage_source(&checked.0).map(Some)
                })
            })
            .map_err(crate::error::Failure)?;
        Ok(Staged::holding(cell))
    }

    /// Run `uploader` on `staged` (in its upload's own directory, seeing nothing else of the
    /// deposit, with the staged file's name as `{file}`), then erase it whatever happened. The GIL is released
    /// while it runs. A failing uploader is a `Sent` whose `success` is false, not an error.
    ///
    /// Raises `Failed` (`io`) when the uploader cannot be started; `ValueError` for a staged
    /// file already sent or erased.
    fn send(&self, py: Python<'_>, staged: &Staged, uploader: &Uploader) -> PyResult<Sent> {
        let Some(mut cell) = staged.take() else {
            return Err(PyValueError::new_err(
                "this staged file was already sent or erased",
            ));
        };
        let sent = py.detach(|| {
            cell.with_dependent_mut(|deposit, held| {
                held.take().map(|staged| deposit.send(staged, &uploader.0))
            })
        });
        match sent {
            Some(sent) => Ok(Sent(sent.map_err(crate::error::Failure)?)),
            None => Err(PyValueError::new_err(
                "this staged file was already sent or erased",
            )),
        }
    }

    fn __repr__(&self) -> String {
        format!("UploadDeposit({:?})", self.0.path())
    }
}

/// A file staged in the deposit, erased when the `with` block ends (or at `erase()`, or when
/// sent, or when collected).
///
/// A broker runs its uploader with `cwd=staged.deposit` and `staged.file` as the path.
#[pyclass(frozen, module = "safe_lanes")]
#[derive(Debug)]
pub(crate) struct Staged {
    cell: Mutex<Option<StagedCell>>,
    deposit: PathBuf,
    file: String,
    name: String,
    path: PathBuf,
    bytes: u64,
    sha256: String,
}

impl Staged {
    fn holding(cell: StagedCell) -> Self {
        let deposit = cell.borrow_owner().path().to_path_buf();
        let staged = cell.borrow_dependent().as_ref();
        let (file, name, path, bytes, sha256) = staged.map_or_else(Default::default, |s| {
            (
                s.relative().to_string_lossy().into_owned(),
                s.name().to_owned(),
                s.path(),
                s.bytes(),
                s.sha256().to_owned(),
            )
        });
        Self {
            cell: Mutex::new(Some(cell)),
            deposit,
            file,
            name,
            path,
            bytes,
            sha256,
        }
    }

    /// The staged file, taken out (to send or erase it); `None` once it was.
    fn take(&self) -> Option<StagedCell> {
        self.cell
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

#[pymethods]
impl Staged {
    /// The deposit directory (`pathlib.Path`); the uploader runs in its upload's own directory
    /// inside it.
    #[getter]
    fn deposit(&self) -> PathBuf {
        self.deposit.clone()
    }

    /// The staged file relative to the deposit (`<random>/in/<inert name>`, only
    /// `[A-Za-z0-9._/-]`): the uploader runs in `<random>` and is given `in/<inert name>` as
    /// `{file}`.
    #[getter]
    fn file(&self) -> String {
        self.file.clone()
    }

    /// The name the content goes by (its own name, less characters a screen hides and leading
    /// dashes): what `{name}` becomes.
    #[getter]
    fn name(&self) -> String {
        self.name.clone()
    }

    /// The staged file's absolute path (`pathlib.Path`).
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Bytes staged.
    #[getter]
    fn bytes(&self) -> u64 {
        self.bytes
    }

    /// SHA-256 of the staged content.
    #[getter]
    fn sha256(&self) -> String {
        self.sha256.clone()
    }

    /// Whether it is gone (erased, or sent).
    #[getter]
    fn erased(&self) -> bool {
        self.cell
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_none()
    }

    /// Erase the staged file and its directory now (nothing happens if it is gone already).
    fn erase(&self, py: Python<'_>) {
        if let Some(cell) = self.take() {
            py.detach(move || drop(cell));
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.erase(py);
        false
    }

    fn __repr__(&self) -> String {
        format!(
            "Staged(file={:?}, name={:?}, bytes={}, erased={})",
            self.file,
            self.name,
            self.bytes,
            self.erased()
        )
    }
}

/// An uploader command: a program and its arguments, `{file}` (a whole argument) standing for
/// the staged file, `{name}` for the content's name and `{name:json}` for it escaped for a JSON
/// string; without `{file}` the file is appended. See `safe_lanes::Uploader::new` for what is
/// refused.
#[pyclass(frozen, module = "safe_lanes")]
#[derive(Debug)]
pub(crate) struct Uploader(pub(crate) safe_lanes::Uploader);

#[pymethods]
impl Uploader {
    /// `template`: a command line (`"gws drive files create --upload {file}"`, shell quoting
    /// rules, no shell run) or a list of arguments. `timeout` (seconds, default 120) and
    /// `max_output` (bytes kept of each stream, default 1 MiB) bound its run.
    ///
    /// Raises `Refused` (`invalid_argument`) for an empty template, unbalanced quotes,
    /// `{file}` inside a larger argument, or a placeholder where a program of the template
    /// reads code (see `safe_lanes::Uploader::new`).
    #[new]
    #[pyo3(signature = (template, *, timeout=None, max_output=None))]
    fn new(
        template: &Bound<'_, PyAny>,
        timeout: Option<f64>,
        max_output: Option<usize>,
    ) -> PyResult<Self> {
        let uploader = match template.extract::<String>() {
            Ok(line) => safe_lanes::Uploader::parse(&line),
            Err(_) => {
                let words: Vec<String> = template.extract().map_err(|_| {
                    PyTypeError::new_err("an uploader is a command line or a list of arguments")
                })?;
                let Some((program, args)) = words.split_first() else {
                    return Err(PyValueError::new_err("an uploader needs a program"));
                };
                safe_lanes::Uploader::new(program, args)
            }
        }
        .map_err(crate::error::Failure)?;
        let mut limits = safe_lanes::Limits::default();
        if let Some(timeout) = timeout {
            limits.timeout = seconds(timeout)?;
        }
        if let Some(max_output) = max_output {
            limits.max_output = max_output;
        }
        Ok(Self(uploader.with_limits(limits)))
    }
}

/// `value` seconds as a duration.
///
/// # Errors
///
/// `ValueError` for a negative or non-finite number.
pub(crate) fn seconds(value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| PyValueError::new_err(format!("not a number of seconds: {value}")))
}

report! {
    /// What one upload did: what was staged, and how the uploader ended.
    Sent(safe_lanes::deposit::Sent) in "safe_lanes" {
        /// The staged file, relative to the deposit.
        staged: PathBuf,
        /// The name the content goes by, what `{name}` became.
        name: String,
        /// Bytes staged.
        bytes: u64,
        /// SHA-256 of the staged content.
        sha256: String,
        /// The uploader's exit code (`None` when a signal killed it).
        exit_code: Option<i32> = |sent| sent.outcome.exit_code,
        /// The signal that killed it, if any.
        signal: Option<i32> = |sent| sent.outcome.signal,
        /// What it printed (lossy UTF-8, capped).
        stdout: String = |sent| sent.outcome.stdout.clone(),
        /// What it printed on stderr.
        stderr: String = |sent| sent.outcome.stderr.clone(),
        /// Whether the timeout killed it.
        timed_out: bool = |sent| sent.outcome.timed_out,
        /// Whether output past the cap was dropped.
        truncated: bool = |sent| sent.outcome.truncated,
        /// Whether how it ended is in the audit log (its start always is).
        recorded: bool = |sent| sent.outcome.recorded,
        /// Whether it exited with status 0 on its own.
        success: bool = |sent| sent.outcome.success(),
    }
}
