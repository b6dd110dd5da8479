//! Content from Python, read by the library as a stream: `bytes`, a binary file object, or an
//! iterable of `bytes`.
//!
//! [`Content`] is a [`Read`] the library pulls from while the calling thread has detached from
//! the interpreter (the GIL released). Bytes are read where they lie, without the interpreter
//! and without a copy. A file object or an iterable is never read whole: each `read` of the
//! library attaches to the interpreter for one chunk (`file.read(n)`, or the iterable's next
//! item), copies it out and detaches again, so other Python threads run between chunks and the
//! content is held one chunk at a time.
//!
//! An exception raised by the caller's object (a generator that fails, a text file that gives
//! `str`, a `KeyboardInterrupt` delivered between chunks) ends the stream with an I/O error for
//! the library, which then leaves nothing behind; the exception is kept ([`Raised`]) and becomes
//! the cause of the `safe_lanes.Error` raised for the failed call ([`Raised::into_err`]).

use std::io::{self, Read};
use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyException, PyTypeError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyByteArray, PyBytes, PyMemoryView, PyString};

use crate::error::{Failure, caused_by};

/// The content of one call, read by the library.
#[derive(Debug)]
pub(crate) struct Content {
    source: Source,
    raised: Raised,
}

/// Where the bytes come from.
#[derive(Debug)]
enum Source {
    /// One buffer, read in place.
    Bytes { data: PyBackedBytes, at: usize },
    /// A binary file object: `read(n)` until it returns `b""`.
    File(Py<PyAny>),
    /// An iterator of bytes-like chunks; the rest of the current one.
    Chunks {
        items: Py<PyAny>,
        chunk: Option<(PyBackedBytes, usize)>,
    },
    /// The caller's object raised: the stream is over.
    Failed,
}

/// The exception the caller's object raised, if it did, shared with the call that raises it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Raised(Arc<Mutex<Option<Kept>>>);

/// An exception that ended the stream.
#[derive(Debug)]
struct Kept {
    err: PyErr,
    /// A mistake of the calling code (a chunk that is not bytes): raised as itself.
    mistake: bool,
}

impl Raised {
    fn keep(&self, err: PyErr, mistake: bool) {
        let mut slot = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        slot.get_or_insert(Kept { err, mistake });
    }

    /// The exception to raise for `failure`: the caller's own exception when it is a mistake
    /// of the calling code (`TypeError`: a chunk that is not bytes) or not an `Exception` (a
    /// `KeyboardInterrupt`, a `SystemExit`), else the library's error caused by it; the
    /// library's error alone when the caller's object raised nothing.
    pub(crate) fn into_err(self, py: Python<'_>, failure: Failure) -> PyErr {
        let kept = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        match kept {
            Some(Kept { err, mistake }) if mistake || !err.is_instance_of::<PyException>(py) => err,
            Some(Kept { err, .. }) => caused_by(py, failure, err),
            None => failure.into(),
        }
    }
}

impl Content {
    /// The content `data` stands for, and where an exception of its object is kept.
    ///
    /// # Errors
    ///
    /// `TypeError` for `str` (text is not content: encode it) and for what is neither
    /// bytes-like, nor a file object, nor iterable.
    pub(crate) fn new(data: &Bound<'_, PyAny>) -> PyResult<(Self, Raised)> {
        let source = if data.is_instance_of::<PyBytes>() || data.is_instance_of::<PyByteArray>() {
            Source::Bytes {
                data: data.extract()?,
                at: 0,
            }
        } else if data.is_instance_of::<PyMemoryView>() {
            Source::Bytes {
                data: data.call_method0("tobytes")?.extract()?,
                at: 0,
            }
        } else if data.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(
                "content must be bytes, a binary file object or an iterable of bytes, not str \
                 (encode the text first)",
            ));
        } else if data.hasattr("read")? {
            Source::File(data.clone().unbind())
        } else {
            let items = data.try_iter().map_err(|_| {
                PyTypeError::new_err(format!(
                    "content must be bytes, a binary file object or an iterable of bytes, not {}",
                    type_name(data)
                ))
            })?;
            Source::Chunks {
                items: items.into_any().unbind(),
                chunk: None,
            }
        };
        let raised = Raised::default();
        Ok((
            Self {
                source,
                raised: raised.clone(),
            },
            raised,
        ))
    }

    /// Attach to the interpreter and fill `buf` from the caller's object (file or iterator);
    /// an exception, and whether it is the calling code's mistake.
    fn pull(&mut self, buf: &mut [u8]) -> Result<usize, (PyErr, bool)> {
        let mistake = |e| (e, true);
        let raised = |e| (e, false);
        Python::attach(|py| {
            // A signal (Ctrl-C) arrived while the library worked: deliver it now.
            py.check_signals().map_err(raised)?;
            match &mut self.source {
                Source::Bytes { .. } | Source::Failed => Ok(0),
                Source::File(file) => {
                    let got = file
                        .bind(py)
                        .call_method1("read", (buf.len(),))
                        .map_err(raised)?;
                    if got.is_none() {
                        return Err(mistake(PyTypeError::new_err(
                            "the content's file object returned None: it must be a blocking \
                             binary file",
                        )));
                    }
                    let chunk =
                        bytes_of(&got, "the content's file object's read()").map_err(mistake)?;
                    let n = chunk.len().min(buf.len());
                    buf[..n].copy_from_slice(&chunk[..n]);
                    Ok(n)
                }
                Source::Chunks { items, chunk } => loop {
                    if let Some((bytes, at)) = chunk
                        && *at < bytes.len()
                    {
                        let n = (bytes.len() - *at).min(buf.len());
                        buf[..n].copy_from_slice(&bytes[*at..*at + n]);
                        *at += n;
                        return Ok(n);
                    }
                    let Some(next) =
                        items
                            .bind(py)
                            .call_method0("__next__")
                            .map(Some)
                            .or_else(|e| {
                                if e.is_instance_of::<pyo3::exceptions::PyStopIteration>(py) {
                                    Ok(None)
                                } else {
                                    Err(raised(e))
                                }
                            })?
                    else {
                        *chunk = None;
                        return Ok(0);
                    };
                    *chunk = Some((
                        bytes_of(&next, "an item of the content").map_err(mistake)?,
                        0,
                    ));
                },
            }
        })
    }
}

impl Read for Content {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if let Source::Bytes { data, at } = &mut self.source {
            let n = (data.len() - *at).min(buf.len());
            buf[..n].copy_from_slice(&data[*at..*at + n]);
            *at += n;
            return Ok(n);
        }
        match self.pull(buf) {
            Ok(n) => Ok(n),
            Err((err, mistake)) => {
                let why = Python::attach(|py| {
                    let name = err
                        .get_type(py)
                        .name()
                        .map_or_else(|_| "an exception".to_owned(), |n| n.to_string());
                    let text = err
                        .value(py)
                        .str()
                        .map(|s| s.to_string())
                        .unwrap_or_default();
                    // Its text, escaped: no message of the library carries control characters.
                    let text = safe_lanes::Shown::text(&text).to_string();
                    if text.is_empty() {
                        format!("the caller's content raised {name}")
                    } else {
                        format!("the caller's content raised {name}: {text}")
                    }
                });
                self.raised.keep(err, mistake);
                self.source = Source::Failed;
                Err(io::Error::other(why))
            }
        }
    }
}

/// The bytes of `chunk`, which must be bytes-like; `what` names it in the `TypeError`.
fn bytes_of(chunk: &Bound<'_, PyAny>, what: &str) -> PyResult<PyBackedBytes> {
    if chunk.is_instance_of::<PyMemoryView>() {
        return Ok(chunk.call_method0("tobytes")?.extract()?);
    }
    chunk.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be bytes, not {} (open files in binary mode)",
            type_name(chunk)
        ))
    })
}

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map_or_else(|_| "this type".to_owned(), |n| n.to_string())
}
