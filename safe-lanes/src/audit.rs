//! The append-only, hash-chained decision log, `<root>/audit.jsonl`.
//!
//! Every decision (a saved download, an upload, a grant change, a refusal) is one JSON line:
//!
//! ```text
//! {"seq":7,"ts":"2026-11-30T16:02:11.123Z","event":"download.save","actor":"uid:1000",…,"prev":"<hex>","hash":"<hex>"}
//! ```
//!
//! `prev` is the `hash` of the line before (64 zeros for the first line) and `hash` is the
//! SHA-256 of the line as it would read without its `hash` field (the text up to `,"hash"`,
//! closed with `}`). [`AuditLog::verify`] walks the chain and names the first line that was
//! changed, removed, inserted or moved.
//!
//! Appends from several processes (the CLI and a running server) are serialized with an
//! exclusive `flock`, and the file is opened with `O_APPEND`, so lines never interleave.
//!
//! The chain has no secret: it makes tampering *evident* to anyone who did not rewrite the
//! whole tail of the log, which is what a local, user-owned log can offer.

use std::io::{self, BufRead, BufReader};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::fs::{FlockOperation, Mode, OFlags};
use serde::Serialize;

use crate::beneath::{Anchor, Symlinks};
use crate::copy::sha256_hex;
use crate::error::{Error, Result};
use crate::input::RelPath;

/// `prev` of the first line.
const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// `,"hash":"` + 64 hex digits + `"}`.
const SEAL_LEN: usize = 9 + 64 + 2;
/// How much of the file end is read at a time to find the last line.
const TAIL: u64 = 64 * 1024;
/// The most read back to find where the last line starts.
const MAX_LINE: usize = 1 << 20;

/// The audit log of one state root.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    fd: OwnedFd,
    /// The file size after our last append, with the seq and hash of that last line: when the
    /// size is unchanged, nobody else appended and the tail need not be read again.
    last: Option<(u64, u64, String)>,
}

/// The outcome of [`AuditLog::verify`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verification {
    /// Lines read.
    pub lines: u64,
    /// The first line that breaks the chain, if any.
    pub broken: Option<BrokenLine>,
}

impl Verification {
    /// Whether the whole chain holds.
    pub fn is_intact(&self) -> bool {
        self.broken.is_none()
    }
}

/// Where and how the chain breaks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BrokenLine {
    /// The 1-based line number.
    pub line: u64,
    /// What is wrong with it.
    pub why: String,
}

#[derive(Serialize)]
struct Unsealed<'a, F: Serialize> {
    seq: u64,
    ts: String,
    event: &'a str,
    actor: &'a str,
    #[serde(flatten)]
    fields: F,
    prev: &'a str,
}

impl AuditLog {
    /// Open (creating with mode 0600) `name` beneath `root`.
    ///
    /// # Errors
    ///
    /// `symlink_escape` when the log is a symbolic link, `io` otherwise.
    pub fn open(root: &Anchor, root_path: &Path, name: &str) -> Result<Self> {
        let fd = root.open(
            RelPath::new(name)?,
            OFlags::RDWR | OFlags::APPEND | OFlags::CREATE,
            Mode::from_raw_mode(0o600),
            Symlinks::Deny,
        )?;
        Ok(Self {
            path: root_path.join(name),
            inner: Mutex::new(Inner { fd, last: None }),
        })
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one event with its fields (a struct or map that serializes to a JSON object).
    ///
    /// # Errors
    ///
    /// `io` when the log cannot be locked, read or written.
    pub fn append(
        &self,
        event: &str,
        actor: impl std::fmt::Display,
        fields: impl Serialize,
    ) -> Result<()> {
        let actor = actor.to_string();
        let actor = actor.as_str();
        let mut inner = crate::sync::lock(&self.inner);
        rustix::fs::flock(&inner.fd, FlockOperation::LockExclusive)
            .map_err(|e| Error::io("flock", &self.path, e))?;
        let result = self.append_locked(&mut inner, event, actor, fields);
        // The descriptor stays open for the next append: unlock explicitly.
        let _ = rustix::fs::flock(&inner.fd, FlockOperation::Unlock);
        result
    }

    fn append_locked(
        &self,
        inner: &mut Inner,
        event: &str,
        actor: &str,
        fields: impl Serialize,
    ) -> Result<()> {
        let size = rustix::fs::fstat(&inner.fd)
            .map_err(|e| Error::io("fstat", &self.path, e))?
            .st_size as u64;
        let (seq, prev) = match &inner.last {
            Some((known, seq, hash)) if *known == size => (*seq, hash.clone()),
            _ => self.read_last(inner.fd.as_fd(), size)?,
        };
        let unsealed = serde_json::to_string(&Unsealed {
            seq: seq + 1,
            ts: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            event,
            actor,
            fields,
            prev: &prev,
        })
        .map_err(|e| Error::io("serialize", "audit event", io::Error::other(e)))?;
        let (line, hash) = seal(&unsealed);
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        crate::fd::write_all(inner.fd.as_fd(), &bytes)
            .map_err(|e| Error::io("write", &self.path, e))?;
        inner.last = Some((size + bytes.len() as u64, seq + 1, hash));
        Ok(())
    }

    /// The seq and hash of the last line in the file (0 and the genesis hash when empty).
    fn read_last(&self, fd: std::os::fd::BorrowedFd<'_>, size: u64) -> Result<(u64, String)> {
        if size == 0 {
            return Ok((0, GENESIS.to_owned()));
        }
        // Read backwards, a chunk at a time, until the start of the last line is in the buffer
        // (or MAX_LINE has been read: a longer last line is chained by the hash of its tail).
        let mut start = size;
        let mut chunks: Vec<Vec<u8>> = Vec::new();
        let mut read = 0usize;
        loop {
            let from = start.saturating_sub(TAIL);
            let mut chunk = vec![0u8; (start - from) as usize];
            let mut filled = 0;
            while filled < chunk.len() {
                let n = rustix::io::pread(fd, &mut chunk[filled..], from + filled as u64)
                    .map_err(|e| Error::io("pread", &self.path, e))?;
                if n == 0 {
                    break;
                }
                filled += n;
            }
            chunk.truncate(filled);
            read += chunk.len();
            // Only the chunk nearest the end can hold the final newline itself.
            let body = if chunks.is_empty() {
                chunk.strip_suffix(b"\n").unwrap_or(&chunk)
            } else {
                &chunk[..]
            };
            let found = body.contains(&b'\n');
            chunks.push(chunk);
            start = from;
            if start == 0 || found || read >= MAX_LINE {
                break;
            }
        }
        let buf: Vec<u8> = chunks.into_iter().rev().flatten().collect();
        let text = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let last = text.rsplit(|&b| b == b'\n').next().unwrap_or_default();
        let parsed: Option<(u64, String)> = serde_json::from_slice::<serde_json::Value>(last)
            .ok()
            .and_then(|v| Some((v.get("seq")?.as_u64()?, v.get("hash")?.as_str()?.to_owned())));
        // A torn or foreign last line still chains: the next line's `prev` is its hash, and
        // `verify` reports the line itself.
        Ok(parsed.unwrap_or_else(|| (0, sha256_hex(last))))
    }

    /// Record a refusal (`<what>.refused`) of an operation on `subject`, then hand the error back.
    /// An `io` error is not a refusal (nothing was decided, the system failed) and is handed
    /// back unrecorded. A failure to write the record is logged and does not hide the refusal.
    pub fn refused(
        &self,
        what: &str,
        actor: impl std::fmt::Display,
        subject: &str,
        error: crate::error::Error,
    ) -> crate::error::Error {
        if error.code() == crate::error::Code::Io {
            return error;
        }
        let fields = serde_json::json!({
            "subject": crate::error::Shown::text(subject).as_str(),
            "code": error.code().as_str(),
            "message": error.to_string(),
        });
        if let Err(e) = self.append(&format!("{what}.refused"), actor, fields) {
            tracing::warn!(error = %e, "could not record a refusal in the audit log");
        }
        error
    }

    /// Walk the whole chain and report the first line that breaks it.
    ///
    /// # Errors
    ///
    /// `io` when the log cannot be read.
    pub fn verify(&self) -> Result<Verification> {
        let fd = crate::sync::lock(&self.inner)
            .fd
            .try_clone()
            .map_err(|e| Error::io("dup", &self.path, e))?;
        verify_reader(BufReader::new(crate::fd::ReadAt::new(fd.as_fd())))
            .map_err(|e| Error::io("read", &self.path, e))
    }
}

/// Verify a chain read from `reader`.
fn verify_reader(reader: impl BufRead) -> io::Result<Verification> {
    let mut prev = GENESIS.to_owned();
    let mut lines = 0u64;
    for line in reader.split(b'\n') {
        let line = line?;
        lines += 1;
        let broken = |why: String| Verification {
            lines,
            broken: Some(BrokenLine { line: lines, why }),
        };
        let Ok(text) = std::str::from_utf8(&line) else {
            return Ok(broken("not UTF-8".to_owned()));
        };
        let Some(hash) = unseal(text) else {
            return Ok(broken("no `hash` field at the end of the line".to_owned()));
        };
        let unsealed = format!("{}}}", &text[..text.len() - SEAL_LEN]);
        if sha256_hex(unsealed.as_bytes()) != hash {
            return Ok(broken(
                "its content does not match its hash: the line was changed".to_owned(),
            ));
        }
        let Ok(value) = serde_json::from_str::<serde_json::Value>(&unsealed) else {
            return Ok(broken("not a JSON object".to_owned()));
        };
        if value.get("seq").and_then(serde_json::Value::as_u64) != Some(lines) {
            return Ok(broken(format!(
                "sequence number is not {lines}: a line was removed, inserted or moved"
            )));
        }
        if value.get("prev").and_then(serde_json::Value::as_str) != Some(prev.as_str()) {
            return Ok(broken(
                "does not follow the line before it: a line was changed, removed or moved"
                    .to_owned(),
            ));
        }
        prev = hash.to_owned();
    }
    Ok(Verification {
        lines,
        broken: None,
    })
}

/// `(line + seal, hash)` for an unsealed JSON object.
fn seal(unsealed: &str) -> (String, String) {
    let hash = sha256_hex(unsealed.as_bytes());
    let body = unsealed.strip_suffix('}').unwrap_or(unsealed);
    (format!("{body},\"hash\":\"{hash}\"}}"), hash)
}

/// The hash in a sealed line's tail, if the line has the sealed shape.
fn unseal(line: &str) -> Option<&str> {
    if line.len() < SEAL_LEN || !line.is_char_boundary(line.len() - SEAL_LEN) {
        return None;
    }
    let tail = &line[line.len() - SEAL_LEN..];
    let hash = tail.strip_prefix(",\"hash\":\"")?.strip_suffix("\"}")?;
    (hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit())).then_some(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_and_unseal_agree() {
        let (line, hash) = seal(r#"{"seq":1,"prev":"x"}"#);
        assert_eq!(unseal(&line), Some(hash.as_str()));
        assert!(line.ends_with(&format!(",\"hash\":\"{hash}\"}}")));
        assert_eq!(unseal("{}"), None);
    }
}
