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
