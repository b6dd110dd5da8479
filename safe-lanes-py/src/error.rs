//! The library's errors as Python exceptions: `safe_lanes.Error`, with `Refused` for refused
//! input and `Failed` for operational failures (`io`), each carrying the stable `code` and the
//! library's `message`.
//!
//! The classes are defined in Python (`safe_lanes/_errors.py`), so they have an ordinary
//! constructor, `args` and pickling; which of the two a failure raises is the library's
//! [`Code::is_refusal`](safe_lanes::Code::is_refusal).

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// A failure of the library, on its way to Python.
pub(crate) struct Failure(pub(crate) safe_lanes::Error);

impl From<safe_lanes::Error> for Failure {
    fn from(e: safe_lanes::Error) -> Self {
        Self(e)
    }
}

impl From<Failure> for PyErr {
    fn from(Failure(e): Failure) -> Self {
        Python::attach(|py| {
            exception(
                py,
                e.code().as_str(),
                &e.message().to_string(),
                e.code().is_refusal(),
            )
        })
    }
}

/// What a binding call returns: a value, or a library failure (which `?` raises).
pub(crate) type Result<T> = std::result::Result<T, Failure>;

/// The exception for `code` and `message`: `Refused` when the input was refused, `Failed`
/// otherwise.
pub(crate) fn exception(py: Python<'_>, code: &str, message: &str, refusal: bool) -> PyErr {
    static REFUSED: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    static FAILED: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let class = if refusal {
        REFUSED.import(py, "safe_lanes._errors", "Refused")
    } else {
        FAILED.import(py, "safe_lanes._errors", "Failed")
    };
    match class.and_then(|class| class.call1((code, message))) {
        Ok(value) => PyErr::from_value(value),
        Err(e) => e,
    }
}

/// A library failure caused by an exception of the caller's (its data's iterator or file
/// raised): the library's error, `from` the caller's exception, which stays the cause.
pub(crate) fn caused_by(py: Python<'_>, failure: Failure, cause: PyErr) -> PyErr {
    let err: PyErr = failure.into();
    err.set_cause(py, Some(cause));
    err
}
