//! `safe_lanes.DownloadLane`: received content lands in `<root>/.downloads`, under a sanitized
//! name, never replacing anything.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::content::Content;
use crate::desk::Control;
use crate::error::{Failure, Result};
use crate::report::report;
use crate::root::StateRoot;

/// A name hint as given: text, or bytes (a name that is not UTF-8).
#[derive(Debug, FromPyObject)]
pub(crate) enum Hint {
    /// Text.
    Text(String),
    /// Bytes.
    Bytes(Vec<u8>),
}

impl Hint {
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        match self {
            Hint::Text(text) => text.into_bytes(),
            Hint::Bytes(bytes) => bytes,
        }
    }
}

/// Save `content` with `save`, the GIL released, through `control` when one is given; the
/// caller's exception (if its content raised) becomes the cause of the error raised.
pub(crate) fn streamed<T: Send>(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    control: Option<&Control>,
    save: impl FnOnce(&mut dyn std::io::Read) -> safe_lanes::Result<T> + Send,
) -> PyResult<T> {
    let (content, raised) = Content::new(data)?;
    let control = control.map(|c| c.0.clone());
    let done = py.detach(move || match control {
        Some(control) => save(&mut control.reader(content)),
        None => {
            let mut content = content;
            save(&mut content)
        }
    });
    done.map_err(|e| raised.into_err(py, Failure(e)))
}

/// The download lane: `save` lands third-party content in `<root>/.downloads` under a name
/// made from a hint (sanitized: never a path, never hidden, never replacing a file; `name (1).ext`
/// on a collision), streamed, hashed, recorded in the audit log as the agent.
#[pyclass(frozen, module = "safe_lanes")]
#[derive(Debug)]
pub(crate) struct DownloadLane(safe_lanes::DownloadLane);

#[pymethods]
impl DownloadLane {
    /// The lane of `root`. `max_bytes` caps each save (`too_large`, nothing kept); `durable`
    /// waits for the disk (`fsync` of the file and the lane) before a save returns, so a saved
    /// file survives a power loss. Open one and keep it.
    #[new]
    #[pyo3(signature = (root, *, max_bytes=None, durable=false))]
    fn new(
        py: Python<'_>,
        root: &StateRoot,
        max_bytes: Option<u64>,
        durable: bool,
    ) -> Result<Self> {
        let lane = py.detach(|| safe_lanes::DownloadLane::open(&root.0))?;
        let lane = lane.with_durability(if durable {
            safe_lanes::Durability::Durable
        } else {
            safe_lanes::Durability::Buffered
        });
        Ok(Self(match max_bytes {
            Some(max) => lane.with_max_bytes(max),
            None => lane,
        }))
    }

    /// Save `data` (`bytes`, a binary file object, or an iterable of `bytes`, read as a stream)
    /// under a name made from `name_hint` (`str` or `bytes`; a hint, never a path). The GIL is
    /// released while it runs; `control.stop()` from another thread makes it fail at its next
    /// read, leaving nothing.
    ///
    /// Raises `Refused` (`too_large`) past the cap, `Failed` (`io`) when writing fails or
    /// `data` raised (its exception is the cause). Nothing is left in the lane on error.
    #[pyo3(signature = (name_hint, data, *, control=None))]
    fn save(
        &self,
        py: Python<'_>,
        name_hint: Hint,
        data: &Bound<'_, PyAny>,
        control: Option<&Control>,
    ) -> PyResult<Saved> {
        let hint = name_hint.into_bytes();
        let lane = &self.0;
        streamed(py, data, control, move |content| lane.save(hint, content)).map(Saved)
    }

    /// A page of the lane's files, by name: at most `limit`, after the `cursor` a previous
    /// page gave (its `next_cursor`).
    ///
    /// Raises `Refused` (`invalid_argument`) for a cursor no page gave.
    #[pyo3(signature = (cursor=None, limit=100))]
    fn list(&self, py: Python<'_>, cursor: Option<String>, limit: usize) -> Result<DownloadList> {
        Ok(DownloadList(
            py.detach(|| self.0.listing(cursor.as_deref(), limit))?,
        ))
    }

    /// The lane's folder.
    #[getter]
    fn path(&self) -> PathBuf {
        self.0.path().to_path_buf()
    }

    fn __repr__(&self) -> String {
        format!("DownloadLane({:?})", self.0.path())
    }
}

report! {
    /// A file saved in the download lane.
    Saved(safe_lanes::Saved) in "safe_lanes" {
        /// The absolute path of the saved file (`pathlib.Path`).
        path: PathBuf,
        /// Its name in the lane.
        name: String,
        /// Its size in bytes.
        bytes: u64,
        /// The lowercase hex SHA-256 of its content.
        sha256: String,
        /// Whether its `download.save` record is in the audit log (when not, it is recorded
        /// as `download.recovered` later).
        recorded: bool,
    }
}

report! {
    /// A file found in the download lane.
    Entry(safe_lanes::download::Entry) in "safe_lanes" {
        /// The absolute path (`pathlib.Path`).
        path: PathBuf,
        /// The name in the lane, as text (bytes that are not UTF-8 become U+FFFD; see
        /// `raw_name`).
        name: String,
        /// The name as the lane holds it, byte for byte.
        raw_name: Py<PyBytes> = |entry| Python::attach(|py| {
            PyBytes::new(py, entry.raw_name().as_encoded_bytes()).unbind()
        }),
        /// Size in bytes.
        bytes: u64,
        /// Last modification, RFC 3339.
        modified: String,
    }
}

report! {
    /// A page of the download lane's files.
    DownloadList(safe_lanes::download::DownloadList) in "safe_lanes" {
        /// The download folder.
        path: String,
        /// The files, by name.
        files: Vec<Entry> = |list| list.files.iter().cloned().map(Entry).collect(),
        /// Give this as `cursor` for the next page; `None` on the last page.
        next_cursor: Option<String>,
    }
}
