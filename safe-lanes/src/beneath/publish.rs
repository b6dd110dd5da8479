//! Writing a whole file under its final name atomically.

use std::ffi::{OsStr, OsString};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;

use super::Anchor;
use super::errno::name_shown;
use super::stat::mode_bits;
use crate::error::{Error, Result};
use crate::input::Name;

/// Whether publishing may replace an entry that already has the name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Publish {
    /// Replace it (`renameat`).
    Replace,
    /// Never replace it (`renameat2(RENAME_NOREPLACE)`): `EEXIST` if the name is taken.
    New,
}

impl Anchor {
    /// Writes `bytes` as the file `name` in the anchor's directory with permission bits
    /// `mode`, atomically: into a new hidden file (`.<name>.<random>.tmp`, created with
    /// `O_EXCL`, never following a link), `fsync`ed, then renamed over `name` as `publish`
    /// says, and the directory `fsync`ed. Readers see the old file or the new one, never a
    /// part; on any failure the hidden file is removed and `name` is untouched.
    ///
    /// # Errors
    ///
    /// `io` (with `EEXIST` when `publish` is [`Publish::New`] and `name` exists).
    pub fn write_file(
        &self,
        name: Name<'_>,
        bytes: &[u8],
        mode: u32,
        publish: Publish,
    ) -> Result<()> {
        self.write_file_as(name, bytes, mode, publish, true)
    }

    /// [`Anchor::write_file`] without the `fsync`s: atomic for every reader and across the
    /// death of any process, as durable as the file system makes it on its own (the change
    /// sets' journals, whose records in the audit log are no more).
    pub(crate) fn write_file_unsynced(
        &self,
        name: Name<'_>,
        bytes: &[u8],
        mode: u32,
        publish: Publish,
    ) -> Result<()> {
        self.write_file_as(name, bytes, mode, publish, false)
    }

    fn write_file_as(
        &self,
        name: Name<'_>,
        bytes: &[u8],
        mode: u32,
        publish: Publish,
        durable: bool,
    ) -> Result<()> {
        let tmp = temp_name(name);
        let tmp = Name::new(&tmp)?;
        let fd = self.create_new(tmp, 0o600)?;
        let written = (|| {
            let shown = name_shown(name.as_os_str());
            rustix::fs::fchmod(&fd, mode_bits(mode))
                .map_err(|e| Error::io("fchmod", shown.clone(), e))?;
            crate::fd::write_all(fd.as_fd(), bytes)
                .map_err(|e| Error::io("write", shown.clone(), e))?;
            if durable {
                rustix::fs::fsync(&fd).map_err(|e| Error::io("fsync", shown, e))?;
            }
            match publish {
                Publish::Replace => self.rename_replace(tmp, name)?,
                Publish::New => self.rename_new(tmp, name)?,
            }
            if durable { self.sync() } else { Ok(()) }
        })();
        if written.is_err() {
            let _ = self.remove_file(tmp);
        }
        written
    }
}

/// The digits of the random part of a staging name (16 random bytes in hex).
const TEMP_HEX_LEN: usize = 32;

/// A new hidden name to stage `name` under in [`Anchor::write_file`]: `.<name>.<hex>.tmp`.
fn temp_name(name: Name<'_>) -> OsString {
    let mut tmp = OsString::from(".");
    tmp.push(name.as_os_str());
    tmp.push(format!(".{}.tmp", crate::random::random_hex()));
    tmp
}

impl Anchor {
    /// Whether `entry` is a name [`Anchor::write_file`] stages `target` under
    /// (`.<target>.<32 lowercase hex digits>.tmp`): what a writer killed between creating the
    /// hidden file and renaming it leaves behind. Only the name is looked at.
    pub(crate) fn is_staging_name(entry: &OsStr, target: Name<'_>) -> bool {
        let random = entry
            .as_bytes()
            .strip_prefix(b".")
            .and_then(|rest| rest.strip_prefix(target.as_os_str().as_bytes()))
            .and_then(|rest| rest.strip_prefix(b"."))
            .and_then(|rest| rest.strip_suffix(b".tmp"));
        random.is_some_and(|hex| {
            hex.len() == TEMP_HEX_LEN && hex.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_names_are_recognised_exactly() {
        let target = OsStr::new("workflow.json");
        let name = Name::new(target).unwrap();
        let staged = temp_name(name);
        assert!(Anchor::is_staging_name(&staged, name), "{staged:?}");
        let hex = "0123456789abcdef0123456789abcdef";
        for other in [
            "workflow.json".to_owned(),
            format!(".workflow.json.{hex}"),
            format!("workflow.json.{hex}.tmp"),
            format!(".workflow.json.{}.tmp", &hex[1..]),
            format!(".workflow.json.{hex}0.tmp"),
            format!(".workflow.json.{}.tmp", hex.to_uppercase()),
            format!(".other.json.{hex}.tmp"),
            format!(".workflow.json.x.{hex}.tmp"),
            format!(".workflow.json.{hex}.tmp.tmp"),
            ".workflow.json.lock".to_owned(),
        ] {
            assert!(
                !Anchor::is_staging_name(OsStr::new(&other), name),
                "{other}"
            );
        }
        let ours = format!(".workflow.json.{hex}.tmp");
        assert!(Anchor::is_staging_name(OsStr::new(&ours), name));
    }
}
