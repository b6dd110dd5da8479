//! Paths in a change set's own files, exactly: a file name is bytes, a JSON string is
//! Unicode. A path that is UTF-8 is stored as a string, any other as the array of its bytes,
//! so that what the journal says to move is the very name the command wrote.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Stored {
    Text(String),
    Bytes(Vec<u8>),
}

/// `#[serde(with = "stored")]` on a `PathBuf`.
pub(crate) fn serialize<S: Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
    match path.to_str() {
        Some(text) => Stored::Text(text.to_owned()),
        None => Stored::Bytes(path.as_os_str().as_encoded_bytes().to_vec()),
    }
    .serialize(s)
}

/// The other half of [`serialize`].
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
    Ok(match Stored::deserialize(d)? {
        Stored::Text(text) => PathBuf::from(text),
        Stored::Bytes(bytes) => PathBuf::from(OsString::from_vec(bytes)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct One(#[serde(with = "super")] PathBuf);

    #[test]
    fn every_name_round_trips() {
        for bytes in [&b"src/main.rs"[..], b"caf\xc3\xa9", b"bad\xff\xfename", b""] {
            let path = One(PathBuf::from(OsString::from_vec(bytes.to_vec())));
            let json = serde_json::to_string(&path).unwrap();
            assert_eq!(serde_json::from_str::<One>(&json).unwrap(), path, "{json}");
        }
    }
}
