//! The opaque cursor of a page of the download lane that starts after a file: the file's name,
//! byte for byte (so a name that is not UTF-8 is exact too), in hex.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStringExt;

use crate::error::{Error, Result, Shown};

/// The cursor of a page that starts after the file `name`.
pub(super) fn encode(name: &OsStr) -> String {
    name.as_encoded_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The name a page's cursor starts after.
///
/// # Errors
///
/// `invalid_argument` for text no page gave.
pub(super) fn decode(cursor: &str) -> Result<OsString> {
    let bytes = cursor.as_bytes();
    let hex = bytes.len().is_multiple_of(2) && bytes.iter().all(u8::is_ascii_hexdigit);
    let decoded: Option<Vec<u8>> = hex
        .then(|| {
            bytes
                .chunks(2)
                .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
                .collect()
        })
        .flatten();
    decoded
        .filter(|d| !d.is_empty())
        .map(OsString::from_vec)
        .ok_or_else(|| Error::InvalidArgument {
            what: Shown::text(cursor),
            why: "`cursor`: not a `next_cursor` that a page of the downloads gave".into(),
        })
}
