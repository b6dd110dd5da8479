//! The changelog's older request entries, kept beside the manifest so the manifest stays small.
//!
//! Every recorded change to the grants and requests has its changelog entry, a request filed
//! again included. A requester filing in a loop must not grow the manifest (every operation
//! reads it whole), so once its changelog holds more than [`ROTATE_AT`] request entries, the
//! change that finds it so moves all but the newest [`KEEP`] of them to
//! `<manifest stem>.changelog.jsonl` beside it, one JSON object per line, appended and
//! `fsync`ed before the manifest that no longer holds them is written. Only requests move:
//! the human's changes (grants added, revoked, requests decided) stay in the manifest, where
//! what is revoked and what was decided are read from.
//!
//! A crash between the two writes leaves the moved entries in both: the archive then ends
//! with exactly the manifest's first request entries. The next move appends only what follows
//! that run, and reading the history skips it in the manifest, so no entry is lost or shown
//! twice — identical entries included, since the whole run must match.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

use rustix::fs::{FileType, Mode, OFlags};
use serde_json::Value;

use super::manifest::stored;
use super::model::{Action, Change};
use crate::beneath::{Anchor, OwnFile};
use crate::error::{Error, Result, Shown};

/// The most changelog entries the manifest holds before the older ones are moved out.
pub(crate) const ROTATE_AT: usize = 512;
/// The entries the manifest keeps when it moves the older ones out.
pub(crate) const KEEP: usize = 256;
/// The longest archived line read back.
const MAX_LINE: usize = 1 << 20;
/// How much of the archive's end is read to find the run a crash left in both (more than
/// [`ROTATE_AT`] of the longest entries a filing can make).
const MAX_TAIL: u64 = 8 << 20;

/// The archive of the manifest's changelog, in the manifest's directory.
pub(crate) struct Archive<'a> {
    dir: &'a Anchor,
    name: OsString,
    path: PathBuf,
}

impl<'a> Archive<'a> {
    /// The archive of the manifest `manifest` (a file name) in `dir` (shown as `dir_path`).
    pub(crate) fn of(dir: &'a Anchor, dir_path: PathBuf, manifest: &std::ffi::OsStr) -> Self {
        let manifest = std::path::Path::new(manifest);
        let mut name = manifest
            .file_stem()
            .unwrap_or(manifest.as_os_str())
            .to_owned();
        name.push(".changelog.jsonl");
        Self {
            dir,
            path: dir_path.join(&name),
            name,
        }
    }

    /// When `changelog` holds more than [`ROTATE_AT`] request entries, move all but the newest
    /// [`KEEP`] of them to the archive (durably, before the caller writes the manifest without
    /// them).
    ///
    /// # Errors
    ///
    /// `insecure_root` when the archive is not a regular file; `io`. Nothing is taken out of
    /// `changelog` then.
    pub(crate) fn rotate(&self, changelog: &mut Vec<Change>) -> Result<()> {
        let requests: Vec<usize> = (0..changelog.len())
            .filter(|&i| changelog[i].action == Action::Request)
            .collect();
        if requests.len() <= ROTATE_AT {
            return Ok(());
        }
        let moving = &requests[..requests.len() - KEEP];
        let fd = self
            .open(Access::Append)?
            .ok_or_else(|| Error::io("open", &self.path, rustix::io::Errno::NOENT))?;
        let whole = self.cut_torn(&fd)?;
        let run: Vec<Value> = moving.iter().map(|&i| value_of(&changelog[i])).collect();
        let archived = overlap(&self.tail_values(&fd, whole, run.len())?, &run);
        let mut bytes = Vec::new();
        for value in &run[archived..] {
            serde_json::to_writer(&mut bytes, value).map_err(|e| self.unwritable(e))?;
            bytes.push(b'\n');
        }
        crate::crash::point_after("changelog.mid_archive", || {
            let _ = crate::fd::write_all(fd.as_fd(), &bytes[..bytes.len() / 2]);
        });
        crate::fd::write_all(fd.as_fd(), &bytes).map_err(|e| {
            let _ = rustix::fs::ftruncate(&fd, whole);
            Error::io("write", &self.path, e)
        })?;
        rustix::fs::fsync(&fd).map_err(|e| Error::io("fsync", &self.path, e))?;
        crate::crash::point("changelog.archived");
        let mut at = 0;
        let moved: std::collections::HashSet<usize> = moving.iter().copied().collect();
        changelog.retain(|_| {
            at += 1;
            !moved.contains(&(at - 1))
        });
        Ok(())
    }

    /// The whole history, oldest first: the archived entries and `newer` (the manifest's
    /// changelog, less the run a crash left in both) in the order of their times.
    ///
    /// # Errors
    ///
    /// `insecure_root` when the archive is not a regular file; `invalid_manifest` when a line
    /// of it is not a changelog entry; `io`.
    pub(crate) fn history(&self, newer: Vec<Change>) -> Result<Vec<Change>> {
        let Some(fd) = self.open(Access::Read)? else {
            return Ok(newer);
        };
        let mut archived = Vec::new();
        let mut reader = BufReader::new(crate::fd::ReadAt::new(fd.as_fd()));
        let mut line = Vec::new();
        for n in 1.. {
            line.clear();
            reader
                .read_until(b'\n', &mut line)
                .map_err(|e| Error::io("read", &self.path, e))?;
            // The end, or a line a crash cut short (its entry is still in the manifest).
            let Some(whole) = line.strip_suffix(b"\n") else {
                break;
            };
            let entry =
                serde_json::from_slice::<Change>(whole).map_err(|e| Error::InvalidManifest {
                    path: Shown::path(&self.path),
                    why: format!("line {n} is not a changelog entry: {e}"),
                })?;
            archived.push(entry);
        }
        let requests: Vec<Value> = newer
            .iter()
            .filter(|c| c.action == Action::Request)
            .map(value_of)
            .collect();
        let from = archived.len().saturating_sub(requests.len());
        let tail: Vec<Value> = archived[from..].iter().map(value_of).collect();
        let mut twice = overlap(&tail, &requests);
        let newer = newer.into_iter().filter(|c| {
            let skip = twice > 0 && c.action == Action::Request;
            twice -= usize::from(skip);
            !skip
        });
        // Both are in the order they were written; merged by time, the archive first.
        let mut out = Vec::with_capacity(archived.len());
        let mut archived = archived.into_iter().peekable();
        for entry in newer {
            while archived.peek().is_some_and(|a| a.at <= entry.at) {
                out.extend(archived.next());
            }
            out.push(entry);
        }
        out.extend(archived);
        Ok(out)
    }

    /// What is wrong with the archive, when it is not a file (for `doctor`).
    pub(crate) fn problem(&self) -> Option<String> {
        match self.open(Access::Read) {
            Err(e) if e.code() == crate::error::Code::InsecureRoot => Some(e.to_string()),
            _ => None,
        }
    }

    /// For `init`: move what stands where the archive belongs aside when it is not a regular
    /// file (a link is removed). What was done.
    ///
    /// # Errors
    ///
    /// `io`.
    pub(crate) fn repair(&self) -> Result<Option<String>> {
        let Some(name) = self.name.to_str() else {
            return Ok(None);
        };
        let st = match self.dir.stat_entry_if_any(crate::input::Name::new(name)?)? {
            Some(st) if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile => st,
            _ => return Ok(None),
        };
        crate::root::set_aside(self.dir, name, &st).map(Some)
    }

    /// The archive, opened to read or to append (made then), or `None` when there is none.
    fn open(&self, access: Access) -> Result<Option<OwnedFd>> {
        let flags = match access {
            Access::Read => OFlags::RDONLY,
            Access::Append => OFlags::RDWR | OFlags::APPEND | OFlags::CREATE,
        };
        let name = self.name.to_str().ok_or_else(|| self.broken("not UTF-8"))?;
        let opened = self.dir.open_own_file(
            crate::input::Name::new(name)?,
            flags,
            Mode::from_raw_mode(0o600),
        );
        match opened {
            Ok(OwnFile::Open(fd)) => Ok(Some(fd)),
            Ok(OwnFile::Broken(kind)) => Err(self.broken(kind)),
            Err(Error::NotFound { .. }) if access == Access::Read => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Cut a line left half-written by a crash off the end; where the whole lines end.
    fn cut_torn(&self, fd: &OwnedFd) -> Result<u64> {
        let size = rustix::fs::fstat(fd)
            .map(|st| u64::try_from(st.st_size).unwrap_or(0))
            .map_err(|e| Error::io("fstat", &self.path, e))?;
        let tail = self.read_tail(fd, size)?;
        let whole = match tail.iter().rposition(|b| *b == b'\n') {
            Some(at) => size - (tail.len() - at - 1) as u64,
            None if tail.len() as u64 == size => 0,
            None => return Err(self.broken("holding a line longer than 1 MiB")),
        };
        if whole != size {
            rustix::fs::ftruncate(fd, whole).map_err(|e| Error::io("ftruncate", &self.path, e))?;
        }
        Ok(whole)
    }

    /// The last `most` archived entries of the `whole` bytes that end in a newline, as stored
    /// (fewer when the end holds fewer whole lines than [`MAX_TAIL`] bytes take).
    fn tail_values(&self, fd: &OwnedFd, whole: u64, most: usize) -> Result<Vec<Value>> {
        let from = whole.saturating_sub(MAX_TAIL);
        let mut reader = crate::fd::ReadAt::new(fd.as_fd());
        reader.skip(from);
        let mut buf = Vec::new();
        reader
            .take(whole - from)
            .read_to_end(&mut buf)
            .map_err(|e| Error::io("read", &self.path, e))?;
        let mut lines: Vec<&[u8]> = buf
            .strip_suffix(b"\n")
            .unwrap_or(&buf)
            .split(|b| *b == b'\n')
            .collect();
        if from > 0 && !lines.is_empty() {
            // Its first line may have begun before what was read.
            lines.remove(0);
        }
        let start = lines.len().saturating_sub(most);
        Ok(lines[start..]
            .iter()
            .filter_map(|l| serde_json::from_slice::<Change>(l).ok())
            .map(|c| value_of(&c))
            .collect())
    }

    /// At most the last [`MAX_LINE`] bytes of the first `size`.
    fn read_tail(&self, fd: &OwnedFd, size: u64) -> Result<Vec<u8>> {
        let from = size.saturating_sub(MAX_LINE as u64);
        let mut reader = crate::fd::ReadAt::new(fd.as_fd());
        reader.skip(from);
        let mut buf = Vec::new();
        reader
            .take(size - from)
            .read_to_end(&mut buf)
            .map_err(|e| Error::io("read", &self.path, e))?;
        Ok(buf)
    }

    fn broken(&self, kind: &str) -> Error {
        Error::InsecureRoot {
            path: Shown::path(&self.path),
            why: format!(
                "the changelog's archive is {kind}: older changelog entries stay in the manifest \
                 and `grant log` is refused until it is moved away"
            ),
        }
    }

    fn unwritable(&self, e: impl std::error::Error + Send + Sync + 'static) -> Error {
        Error::io("serialize", &self.path, std::io::Error::other(e))
    }
}

/// An entry as stored, for comparing.
fn value_of(change: &Change) -> Value {
    stored(change).unwrap_or(Value::Null)
}

/// The length of the longest run that ends `tail` and begins `run`: what a crash left in both
/// the archive and the manifest.
fn overlap(tail: &[Value], run: &[Value]) -> usize {
    let Some(last) = tail.last() else {
        return 0;
    };
    (1..=tail.len().min(run.len()))
        .rev()
        .find(|&k| run[k - 1] == *last && tail[tail.len() - k..] == run[..k])
        .unwrap_or(0)
}

/// How an archive is opened.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Append,
}
