//! Paths in JSON output: JSON strings are Unicode, file names are bytes. Every path the library
//! *reports* is serialized lossily (invalid UTF-8 becomes U+FFFD), so producing a report can
//! never fail or panic. Paths the library *stores* (grants in the manifest) are refused at the
//! door when they are not UTF-8, so they round-trip exactly.

use std::path::Path;

use serde::Serializer;

/// `#[serde(serialize_with = "crate::lossy::path")]`.
pub(crate) fn path<S: Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&path.to_string_lossy())
}

/// `#[serde(serialize_with = "crate::lossy::option_path")]`: `null`, or the path as
/// [`path`] writes it.
pub(crate) fn option_path<S: Serializer>(
    path: &Option<std::path::PathBuf>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match path {
        Some(p) => s.serialize_str(&p.to_string_lossy()),
        None => s.serialize_none(),
    }
}
