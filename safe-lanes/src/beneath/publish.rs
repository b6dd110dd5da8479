//! Writing a whole file under its final name atomically.

use std::ffi::OsString;
use std::os::fd::AsFd;

use rustix::fs::Mode;

use super::{Anchor, name_shown};
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
        let mut tmp = OsString::from(".");
        tmp.push(name.as_os_str());
        tmp.push(format!(".{}.tmp", crate::random::random_hex()));
        let tmp = Name::new(&tmp)?;
        let fd = self.create_new(tmp, 0o600)?;
        let written = (|| {
            let shown = name_shown(name.as_os_str());
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))
                .map_err(|e| Error::io("fchmod", shown.clone(), e))?;
            crate::fd::write_all(fd.as_fd(), bytes)
                .map_err(|e| Error::io("write", shown.clone(), e))?;
            rustix::fs::fsync(&fd).map_err(|e| Error::io("fsync", shown, e))?;
            match publish {
                Publish::Replace => self.rename_replace(tmp, name)?,
                Publish::New => self.rename_new(tmp, name)?,
            }
            self.sync()
        })();
        if written.is_err() {
            let _ = self.remove_file(tmp);
        }
        written
    }
}
