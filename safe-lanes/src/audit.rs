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
//! # Nothing torn, nothing cut unseen
//!
//! - An append that fails half-way (a full disk) is rolled back: the file is cut back to where
//!   the line began. One cut short by a crash is found by the next append, under the lock: the
//!   partial line is removed and an `audit.repaired` record says how many bytes it had. A
//!   torn line therefore never stays, and the chain always goes on from the last whole line.
//! - A **witness**, `audit.head` beside the log, holds the `seq` and `hash` of the last line
//!   appended (one fixed-size `pwrite`, after the line). [`AuditLog::verify`] checks the log
//!   reaches that line with that hash, so lines cut from the end, or an emptied log, are
//!   reported, which the chain alone cannot show.
//!
//! The chain has no secret: it makes tampering *evident* to anyone who did not rewrite the
//! whole tail of the log and the witness together, which is what a local, user-owned log can
//! offer. [`Verification`] says what was proved: a correctly chained line appended by someone
//! else after the witness, or a log and witness rewritten together, are not detected.

use std::fmt::Display;
use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

use rustix::fs::{FlockOperation, Mode, OFlags, SeekFrom};
use serde::Serialize;

use crate::beneath::{Anchor, OwnFile, Symlinks};
use crate::digest::sha256_hex;
use crate::error::{Error, Result, Shown};
use crate::input::RelPath;

/// `prev` of the first line.
const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// `,"hash":"` + 64 hex digits + `"}`.
const SEAL_LEN: usize = 9 + 64 + 2;
/// How much of the file end is read first to find the last line (doubled until it is found).
const TAIL: u64 = 4 * 1024;
/// The most read back to find where the last line starts.
const MAX_LINE: usize = 1 << 20;
/// The witness file, beside the log.
const WITNESS_FILE: &str = "audit.head";
/// A witness record: `seq=` + 20 digits + ` hash=` + 64 hex digits + newline (fixed size, so a
/// new record always covers the old one).
const WITNESS_LEN: usize = 4 + 20 + 6 + 64 + 1;
/// The event of a record saying the log had been cut ([`AuditLog::verify`] reports it).
const CUT_EVENT: &str = "audit.cut";
/// The event of a record saying the log was started again by `init` ([`AuditLog::verify`]
/// reports it).
const RESTART_EVENT: &str = "audit.restarted";
/// The actor of the records the log writes about itself.
const LOG_ITSELF: &str = "safe-lanes";
/// The line buffer is kept from one append to the next up to this capacity (a rare, larger
/// record does not keep its memory).
const KEPT_LINE: usize = 16 * 1024;

/// An operation an agent (or the human) may ask for, as the audit log names it: its refusals
/// are recorded as `<op>.refused`. Every name is here, once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Operation {
    /// Saving received content into the download lane.
    Download,
    /// Reading a file to upload, or staging content for the uploader.
    Upload,
    /// Running a confined command.
    Exec,
    /// Patching a file in a read-write grant.
    Patch,
    /// Filing a request for a grant.
    GrantRequest,
    /// Fetching a URL into the download lane.
    Fetch,
}

impl Operation {
    /// Its name in the audit log (`download`, `upload`, `exec`, `patch`, `grant.request`,
    /// `download.fetch`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Download => "download",
            Self::Upload => "upload",
            Self::Exec => "exec",
            Self::Patch => "patch",
            Self::GrantRequest => "grant.request",
            Self::Fetch => "download.fetch",
        }
    }
}

/// The audit log of one state root.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    /// The log, once it could be opened (it stays open).
    open: OnceLock<Mutex<Inner>>,
    /// While it cannot be used, why and where to look again: something other than a regular
    /// file stands where it belongs (a link, a FIFO, a directory), which `safe-lanes init`
    /// repairs. Meanwhile nothing that must be recorded can happen, everything else still
    /// works, and each use looks again, so a running server takes up the repaired log.
    unusable: Mutex<Option<Unusable>>,
}

#[derive(Debug)]
struct Unusable {
    why: String,
    root: Anchor,
    name: String,
}

#[derive(Debug)]
struct Inner {
    fd: OwnedFd,
    /// Whether the log can be appended to (not on a read-only state root).
    writable: bool,
    /// The witness, or why there is none to write (a read-only root; a witness that is not a
    /// regular file, which `safe-lanes init` repairs): then the log is appended to without
    /// one, and `verify` says the end is not witnessed.
    witness: std::result::Result<OwnedFd, String>,
    /// The end of the log after our last append: when the size is unchanged, nobody else
    /// appended and the tail need not be read again.
    last: Option<Tail>,
    /// The buffer each line is built in, reused.
    line: Vec<u8>,
}

/// Where the chain stands: the last whole line and where it ends.
#[derive(Clone, Debug)]
struct Tail {
    seq: u64,
    hash: String,
    /// The offset just past the last whole line.
    end: u64,
    /// Bytes after the last whole line: a line cut short.
    torn: u64,
}

/// The outcome of [`AuditLog::verify`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verification {
    /// Lines read.
    pub lines: u64,
    /// The first line that breaks the chain, if any (a log that ends before its witness is
    /// broken at the first missing line). A break the log recorded itself (one of
    /// [`Verification::seams`]) is reported when the chain holds otherwise.
    pub broken: Option<BrokenLine>,
    /// Every line recording that lines are missing before it (`audit.cut`: the log had been cut;
    /// `audit.restarted`: `safe-lanes init` started a new log in place of what was not one).
    /// The chain is checked past them: they are evidence the log keeps, not where checking
    /// stops.
    pub seams: Vec<BrokenLine>,
    /// What could be checked of the log's end.
    pub tail: TailCheck,
}

/// What [`AuditLog::verify`] could prove about the end of the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum TailCheck {
    /// The log reaches the witness's line with the witness's hash: nothing was cut from the
    /// end. Lines after it (`after`) are chained but not witnessed (a crash between a line and
    /// its witness, or a line appended by someone else).
    Witnessed {
        /// The witness's `seq`.
        seq: u64,
        /// Lines after the witnessed one.
        after: u64,
    },
    /// No witness, or an unreadable one: lines cut from the end would not show.
    NotWitnessed {
        /// Why.
        why: String,
    },
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

/// What one line says, before it is sealed.
struct Record<'a, F> {
    seq: u64,
    event: &'a str,
    actor: &'a dyn Display,
    fields: F,
    prev: &'a str,
}

impl AuditLog {
    /// Open (creating with mode 0600) `name` beneath `root`. Something other than a regular
    /// file there (a link, a FIFO, a directory, a socket) does not fail the open: the log is
    /// unusable, and every use of it answers `insecure_root` until `safe-lanes init` starts a
    /// new one ([`AuditLog::problem`] says why).
    ///
    /// # Errors
    ///
    /// `io`. On a read-only state root the log is opened read-only: it can be verified, and
    /// every append fails with `io`.
    pub fn open(root: &Anchor, root_path: &Path, name: &str) -> Result<Self> {
        let path = root_path.join(name);
        let (open, unusable) = match open_log(root, name, true)? {
            Ok(inner) => (OnceLock::from(Mutex::new(inner)), None),
            Err(why) => {
                let root = root.try_clone()?;
                let name = name.to_owned();
                (OnceLock::new(), Some(Unusable { why, root, name }))
            }
        };
        Ok(Self {
            path,
            open,
            unusable: Mutex::new(unusable),
        })
    }

    /// The log, locked; or, when it still cannot be used, `insecure_root` saying why.
    fn inner(&self) -> Result<MutexGuard<'_, Inner>> {
        if let Some(open) = self.open.get() {
            return Ok(crate::sync::lock(open));
        }
        let mut unusable = crate::sync::lock(&self.unusable);
        let why = match unusable.as_mut() {
            // Opened by another thread meanwhile.
            None => String::new(),
            // Never made here: a log that went missing is started again by `init`, with the
            // record that says so.
            Some(u) => match open_log(&u.root, &u.name, false)? {
                Ok(inner) => {
                    let _ = self.open.set(Mutex::new(inner));
                    String::new()
                }
                Err(why) => {
                    u.why.clone_from(&why);
                    why
                }
            },
        };
        match self.open.get() {
            Some(open) => {
                *unusable = None;
                Ok(crate::sync::lock(open))
            }
            None => Err(Error::InsecureRoot {
                path: Shown::path(&self.path),
                why: format!(
                    "{why}: nothing that must be recorded can happen until `safe-lanes init` \
                     moves it aside and starts a new log"
                ),
            }),
        }
    }

    /// Why the log cannot be used, when it cannot (something other than a regular file stands
    /// where it belongs): `doctor` says so, `init` moves it aside and starts a new log.
    pub fn problem(&self) -> Option<String> {
        match self.inner() {
            Ok(_) => None,
            Err(_) => crate::sync::lock(&self.unusable)
                .as_ref()
                .map(|u| format!("the audit log ({}): {}", Shown::path(&self.path), u.why)),
        }
    }

    /// Why the witness cannot be written, when it cannot (a read-only root; `audit.head`
    /// that is not a regular file): `doctor` says so, `init` repairs it.
    pub fn witness_problem(&self) -> Option<String> {
        let inner = self.inner().ok()?;
        inner.witness.as_ref().err().cloned()
    }

    /// Replace a witness that is not a regular file (a directory, a link, a FIFO put there)
    /// with one recording the log's last line, in `root` (the state root's directory this
    /// log was opened from). Whether it did.
    ///
    /// # Errors
    ///
    /// `io` when the broken witness cannot be removed or the new one made.
    pub fn repair_witness(&self, root: &Anchor) -> Result<bool> {
        let Ok(mut inner) = self.inner() else {
            return Ok(false);
        };
        if !inner.writable || inner.witness.is_ok() {
            return Ok(false);
        }
        root.remove_all(crate::input::Name::new(WITNESS_FILE)?)?;
        let witness = open_witness(root)
            .map_err(|why| Error::io("open", WITNESS_FILE, io::Error::other(why)))?;
        let size = rustix::fs::seek(&inner.fd, SeekFrom::End(0))
            .map_err(|e| Error::io("lseek", &self.path, e))?;
        let tail = self.read_tail(inner.fd.as_fd(), size)?;
        let mut record = Vec::new();
        rustix::io::pwrite(&witness, witness_record(&mut record, &tail), 0)
            .map_err(|e| Error::io("pwrite", WITNESS_FILE, e))?;
        inner.witness = Ok(witness);
        inner.last = None;
        Ok(true)
    }

    /// Start a new log `name` in `root` where what stood was taken out of the way (`earlier`
    /// says what and how; `witnessed` is the line the witness had recorded, read before). Its
    /// first record, `audit.restarted`, names both, and [`AuditLog::verify`] reports it for as
    /// long as the log lives, as it does a cut: the earlier log's lines are not in this one.
    ///
    /// The log appears whole: written and `fsync`ed under a temporary name, then renamed into
    /// place if nothing is there. A log another process started meanwhile is left as it is
    /// when it begins with such a record already (two `init`s at once), and gets the record
    /// appended otherwise. Whether this call wrote the record.
    ///
    /// # Errors
    ///
    /// `io`.
    pub(crate) fn start_again(
        root: &Anchor,
        name: &str,
        earlier: &str,
        witnessed: Option<(u64, String)>,
    ) -> Result<bool> {
        let fields = serde_json::json!({
            "earlier_log": earlier,
            "witness_seq": witnessed.as_ref().map(|(seq, _)| seq),
            "witness_hash": witnessed.as_ref().map(|(_, hash)| hash),
            "why": "what stood where the audit log belongs was not a file; \
                    `safe-lanes init` took it out of the way and started this log",
        });
        let mut line = Vec::new();
        let record = Record {
            seq: 1,
            event: RESTART_EVENT,
            actor: &LOG_ITSELF,
            fields: &fields,
            prev: GENESIS,
        };
        record
            .write_unsealed(&mut line)
            .map_err(|e| Error::io("serialize", "audit event", e))?;
        let hash = seal(&mut line);
        line.push(b'\n');
        let temporary = format!("{name}.new-{}", crate::random::random_hex());
        let temporary = crate::input::Name::new(&temporary)?;
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL;
        let OwnFile::Open(fd) = root.open_own_file(temporary, flags, Mode::from_raw_mode(0o600))?
        else {
            return Err(Error::io(
                "open",
                name,
                io::Error::other("not a regular file"),
            ));
        };
        let written = crate::fd::write_all(fd.as_fd(), &line)
            .and_then(|()| rustix::fs::fsync(&fd).map_err(io::Error::from))
            .map_err(|e| Error::io("write", name, e));
        let placed =
            written.and_then(|()| root.rename_new(temporary, crate::input::Name::new(name)?));
        match placed {
            Ok(()) => {
                let tail = Tail {
                    seq: 1,
                    hash,
                    end: line.len() as u64,
                    torn: 0,
                };
                if let Ok(witness) = open_witness(root) {
                    let _ = rustix::io::pwrite(&witness, witness_record(&mut line, &tail), 0);
                }
                Ok(true)
            }
            Err(e) => {
                let _ = root.remove_file(temporary);
                if e.raw_os_error() != Some(rustix::io::Errno::EXIST.raw_os_error()) {
                    return Err(e);
                }
                let log = Self::open(root, Path::new(""), name)?;
                let first = log.records_from(0)?.0.into_iter().next();
                if first.is_some_and(|r| r["event"] == RESTART_EVENT) {
                    return Ok(false);
                }
                log.append(RESTART_EVENT, LOG_ITSELF, fields).map(|()| true)
            }
        }
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one event with its fields (a struct or map that serializes to a JSON object).
    ///
    /// # Errors
    ///
    /// `insecure_root` when the log is not a file ([`AuditLog::problem`]); `io` when it cannot
    /// be locked, read or written.
    pub fn append(&self, event: &str, actor: impl Display, fields: impl Serialize) -> Result<()> {
        self.append_at(event, actor, fields).map(|_| ())
    }

    /// [`AuditLog::append`], saying where in the log the record begins (its byte offset), so
    /// that a later look for what followed it ([`AuditLog::followed_by`]) reads only the rest.
    ///
    /// # Errors
    ///
    /// As [`AuditLog::append`].
    pub(crate) fn append_at(
        &self,
        event: &str,
        actor: impl Display,
        fields: impl Serialize,
    ) -> Result<u64> {
        let mut inner = self.inner()?;
        if !inner.writable {
            let read_only = io::Error::other("the state root is read-only, so is its audit log");
            return Err(Error::io("append", &self.path, read_only));
        }
        rustix::fs::flock(&inner.fd, FlockOperation::LockExclusive)
            .map_err(|e| Error::io("flock", &self.path, e))?;
        let result = self.append_locked(&mut inner, event, &actor, fields);
        // The descriptor stays open for the next append: unlock explicitly.
        let _ = rustix::fs::flock(&inner.fd, FlockOperation::Unlock);
        result
    }

    fn append_locked(
        &self,
        inner: &mut Inner,
        event: &str,
        actor: &dyn Display,
        fields: impl Serialize,
    ) -> Result<u64> {
        // Where the log ends now (another process may have appended since our last line): the
        // end of the file, which `O_APPEND` writes go to.
        let size = rustix::fs::seek(&inner.fd, SeekFrom::End(0))
            .map_err(|e| Error::io("lseek", &self.path, e))?;
        let mut tail = match inner.last.take() {
            Some(known) if known.end == size => known,
            _ => {
                let mut tail = self.read_tail(inner.fd.as_fd(), size)?;
                self.record_cut(inner, &mut tail)?;
                tail
            }
        };
        if tail.torn > 0 {
            // A line cut short by a crash: remove it, and say so in the chain.
            rustix::fs::ftruncate(&inner.fd, tail.end)
                .map_err(|e| Error::io("ftruncate", &self.path, e))?;
            let removed = serde_json::json!({
                "removed_bytes": tail.torn,
                "why": "the end of the log held a record cut short (a crash or a full disk)",
            });
            tail.torn = 0;
            self.write_line(inner, &mut tail, "audit.repaired", &LOG_ITSELF, removed)?;
        }
        let at = tail.end;
        self.write_line(inner, &mut tail, event, actor, fields)?;
        inner.last = Some(tail);
        Ok(at)
    }

    /// Whether a record of `event` whose field `id` is `id` comes at or after byte `offset` of
    /// the log (a record [`AuditLog::append_at`] placed there, or later).
    ///
    /// # Errors
    ///
    /// `insecure_root` when the log is not a file; `io` when it cannot be read.
    pub(crate) fn followed_by(&self, offset: u64, event: &str, id: &str) -> Result<bool> {
        self.find_after(offset, id, |record| record["event"] == event)
    }

    /// Whether a record whose field `id` is `id` and that `matches` comes at or after byte
    /// `offset` of the log.
    ///
    /// # Errors
    ///
    /// `insecure_root` when the log is not a file; `io` when it cannot be read.
    pub(crate) fn find_after(
        &self,
        offset: u64,
        id: &str,
        matches: impl Fn(&serde_json::Value) -> bool,
    ) -> Result<bool> {
        let fd = {
            let inner = self.inner()?;
            inner
                .fd
                .try_clone()
                .map_err(|e| Error::io("dup", &self.path, e))?
        };
        let mut reader = crate::fd::ReadAt::new(fd.as_fd());
        reader.skip(offset);
        let needle = format!("\"id\":\"{id}\"");
        for line in BufReader::new(reader).split(b'\n') {
            let line = line.map_err(|e| Error::io("read", &self.path, e))?;
            if !line.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                continue;
            }
            let value: serde_json::Value = match serde_json::from_slice(&line) {
                Ok(value) => value,
                Err(_) => continue,
            };
            if value["id"] == id && matches(&value) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Where the log ends now: a record appended next begins at or after this offset.
    ///
    /// # Errors
    ///
    /// `insecure_root` when the log is not a file; `io` when it cannot be examined.
    pub(crate) fn end(&self) -> Result<u64> {
        let inner = self.inner()?;
        let size = rustix::fs::fstat(&inner.fd)
            .map(|st| u64::try_from(st.st_size).unwrap_or(0))
            .map_err(|e| Error::io("fstat", &self.path, e))?;
        // The end of the last whole line: a line cut short by a crash is replaced by the next
        // append, whose records then begin where it began.
        let mut window = 4096u64;
        loop {
            let start = size.saturating_sub(window);
            let mut buf = vec![0u8; usize::try_from(size - start).unwrap_or(0)];
            let read = rustix::io::pread(&inner.fd, &mut buf, start)
                .map_err(|e| Error::io("pread", &self.path, e))?;
            if let Some(at) = buf[..read].iter().rposition(|b| *b == b'\n') {
                return Ok(start + at as u64 + 1);
            }
            if start == 0 {
                return Ok(0);
            }
            window = window.saturating_mul(2);
        }
    }

    /// When the log ends before the line its witness recorded (lines were cut from the end, or
    /// the last one replaced), say so in the chain before the witness moves on, so the
    /// evidence stays: [`AuditLog::verify`] reports every such record.
    fn record_cut(&self, inner: &mut Inner, tail: &mut Tail) -> Result<()> {
        let Ok(witness) = &inner.witness else {
            return Ok(());
        };
        let mut buf = [0u8; WITNESS_LEN];
        let read = rustix::io::pread(witness, &mut buf, 0).unwrap_or(0);
        let Some((seq, hash)) = parse_witness(&buf[..read]) else {
            return Ok(());
        };
        if seq < tail.seq || (seq == tail.seq && hash == tail.hash) {
            return Ok(());
        }
        let cut = serde_json::json!({
            "witness_seq": seq,
            "witness_hash": hash,
            "log_seq": tail.seq,
            "why": "the log ended before the line its witness recorded: lines were cut from \
                    the end or the last one replaced",
        });
        if tail.torn > 0 {
            rustix::fs::ftruncate(&inner.fd, tail.end)
                .map_err(|e| Error::io("ftruncate", &self.path, e))?;
            tail.torn = 0;
        }
        self.write_line(inner, tail, CUT_EVENT, &LOG_ITSELF, cut)
    }

    /// Write the next line after `tail` and move `tail` past it, then the witness. A write that
    /// fails half-way is rolled back to `tail.end`.
    fn write_line(
        &self,
        inner: &mut Inner,
        tail: &mut Tail,
        event: &str,
        actor: &dyn Display,
        fields: impl Serialize,
    ) -> Result<()> {
        let mut bytes = std::mem::take(&mut inner.line);
        let record = Record {
            seq: tail.seq + 1,
            event,
            actor,
            fields,
            prev: &tail.hash,
        };
        let written = record
            .write_unsealed(&mut bytes)
            .map_err(|e| Error::io("serialize", "audit event", e))
            .and_then(|()| self.write_sealed(inner, &mut bytes, tail));
        if bytes.capacity() <= KEPT_LINE {
            inner.line = bytes;
        }
        written
    }

    /// Seal the unsealed line in `bytes` and write it after `tail` (see
    /// [`AuditLog::write_line`]).
    fn write_sealed(&self, inner: &Inner, bytes: &mut Vec<u8>, tail: &mut Tail) -> Result<()> {
        let hash = seal(bytes);
        bytes.push(b'\n');
        crate::crash::point_after("audit.mid_line", || {
            let _ = crate::fd::write_all(inner.fd.as_fd(), &bytes[..bytes.len() / 2]);
        });
        if let Err(e) = crate::fd::write_all(inner.fd.as_fd(), bytes) {
            // Never leave part of a line: cut back to where it began (if even that fails, the
            // next append repairs it).
            let _ = rustix::fs::ftruncate(&inner.fd, tail.end);
            return Err(Error::io("write", &self.path, e));
        }
        tail.seq += 1;
        tail.hash = hash;
        tail.end += bytes.len() as u64;
        // The line is written: its buffer now holds the witness record.
        if let Ok(witness) = &inner.witness
            && let Err(e) = rustix::io::pwrite(witness, witness_record(bytes, tail), 0)
        {
            tracing::warn!(error = %e, "could not update the audit log's witness");
        }
        Ok(())
    }

    /// The last whole line of a log of `size` bytes and where it ends (seq 0 and the genesis
    /// hash when there is none), with the bytes of a line cut short after it.
    fn read_tail(&self, fd: std::os::fd::BorrowedFd<'_>, size: u64) -> Result<Tail> {
        let buf = self.read_end(fd, size)?;
        // The bytes after the last newline are a line cut short (none when the log ends well).
        let whole = buf.iter().rposition(|&b| b == b'\n').map_or(0, |at| at + 1);
        let torn = (buf.len() - whole) as u64;
        let end = size - torn;
        let text = buf[..whole].strip_suffix(b"\n").unwrap_or_default();
        if end == 0 || (text.is_empty() && whole == 0) {
            return Ok(Tail {
                seq: 0,
                hash: GENESIS.to_owned(),
                end,
                torn,
            });
        }
        let last = text.rsplit(|&b| b == b'\n').next().unwrap_or_default();
        let parsed: Option<(u64, String)> = serde_json::from_slice::<serde_json::Value>(last)
            .ok()
            .and_then(|v| Some((v.get("seq")?.as_u64()?, v.get("hash")?.as_str()?.to_owned())));
        // A foreign last line still chains: the next line's `prev` is its hash, and `verify`
        // reports the line itself.
        let (seq, hash) = parsed.unwrap_or_else(|| (0, sha256_hex(last)));
        Ok(Tail {
            seq,
            hash,
            end,
            torn,
        })
    }

    /// The end of the log: its last [`TAIL`] bytes, then twice as many, and so on, until they
    /// hold the start of the last whole line (two newlines, or the whole log) or [`MAX_LINE`]
    /// bytes. A record is a few hundred bytes, so this is almost always one small read.
    fn read_end(&self, fd: std::os::fd::BorrowedFd<'_>, size: u64) -> Result<Vec<u8>> {
        let mut want = TAIL;
        loop {
            let from = size.saturating_sub(want);
            let mut buf = vec![0u8; (size - from) as usize];
            let mut filled = 0;
            while filled < buf.len() {
                let n = rustix::io::pread(fd, &mut buf[filled..], from + filled as u64)
                    .map_err(|e| Error::io("pread", &self.path, e))?;
                if n == 0 {
                    break;
                }
                filled += n;
            }
            buf.truncate(filled);
            let newlines = buf.iter().filter(|&&b| b == b'\n').count();
            if from == 0 || newlines >= 2 || want >= MAX_LINE as u64 {
                return Ok(buf);
            }
            want *= 2;
        }
    }

    /// Record a refusal (`<op>.refused`) of an operation on `subject`, then hand the error back.
    /// An error that is not a refusal (`io`, `fetch_failed`: nothing was decided, something
    /// failed; see [`crate::Code::is_refusal`]) is handed back unrecorded. A failure to write
    /// the record is logged and does not hide the refusal.
    pub fn refused(
        &self,
        op: Operation,
        actor: impl std::fmt::Display,
        subject: &str,
        error: crate::error::Error,
    ) -> crate::error::Error {
        self.refused_with(op, actor, subject, error, &[])
    }

    /// [`AuditLog::refused`], with `extra` fields in the record (a fetch's whole URL, which
    /// the escaped `subject` may shorten).
    pub(crate) fn refused_with(
        &self,
        op: Operation,
        actor: impl std::fmt::Display,
        subject: &str,
        error: crate::error::Error,
        extra: &[(&str, &str)],
    ) -> crate::error::Error {
        if !error.code().is_refusal() {
            return error;
        }
        let mut fields = serde_json::json!({
            "subject": crate::error::Shown::text(subject).as_str(),
            "code": error.code().as_str(),
            "message": error.message().to_string(),
        });
        for (name, value) in extra {
            fields[*name] = serde_json::Value::from(*value);
        }
        if let Err(e) = self.append(&format!("{}.refused", op.as_str()), actor, fields) {
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
        let inner = match self.inner() {
            Ok(inner) => inner,
            Err(e) if e.code() == crate::error::Code::InsecureRoot => {
                return Ok(Verification {
                    lines: 0,
                    seams: Vec::new(),
                    broken: Some(BrokenLine {
                        line: 1,
                        why: e.message().to_string(),
                    }),
                    tail: TailCheck::NotWitnessed {
                        why: "the log cannot be read".into(),
                    },
                });
            }
            Err(e) => return Err(e),
        };
        let fd = inner
            .fd
            .try_clone()
            .map_err(|e| Error::io("dup", &self.path, e))?;
        let witness = self.read_witness(&inner);
        drop(inner);
        let reader = BufReader::new(crate::fd::ReadAt::new(fd.as_fd()));
        let witnessed = witness.as_ref().ok().map(|(seq, _)| *seq);
        let (mut verification, hash_at_witness) =
            verify_reader(reader, witnessed).map_err(|e| Error::io("read", &self.path, e))?;
        verification.tail = match witness {
            Err(why) => TailCheck::NotWitnessed { why },
            Ok((seq, hash)) => {
                if verification.broken.is_none() {
                    verification.broken =
                        tail_break(verification.lines, seq, &hash, hash_at_witness);
                }
                TailCheck::Witnessed {
                    seq,
                    after: verification.lines.saturating_sub(seq),
                }
            }
        };
        if verification.broken.is_none() {
            verification.broken = verification.seams.first().cloned();
        }
        Ok(verification)
    }

    /// The witness's seq and hash, or why there is none to check against.
    fn read_witness(&self, inner: &Inner) -> std::result::Result<(u64, String), String> {
        let mut buf = [0u8; WITNESS_LEN];
        let read = match &inner.witness {
            Ok(fd) => rustix::io::pread(fd, &mut buf, 0).map_err(|e| e.to_string()),
            Err(why) if inner.writable => return Err(why.clone()),
            Err(_) => {
                let dir = self.path.parent().unwrap_or(Path::new("/"));
                let why = crate::beneath::Ambient::because("the audit witness of a read-only root");
                Anchor::open_ambient(dir, why)
                    .and_then(|d| d.open_read(RelPath::new(WITNESS_FILE)?, Symlinks::Deny))
                    .map_err(|e| e.to_string())
                    .and_then(|fd| rustix::io::pread(&fd, &mut buf, 0).map_err(|e| e.to_string()))
            }
        }?;
        parse_witness(&buf[..read]).ok_or_else(|| {
            if read == 0 {
                "the log has no witness yet (it was written before witnesses, or never)".into()
            } else {
                "the witness is not readable (cut short by a power failure, or changed)".into()
            }
        })
    }
}

/// Open the log `name` in `root` (made, mode 0600, when missing and `create`): the log, or why
/// it cannot be used (not a regular file, or missing). Read-only on a read-only state root.
fn open_log(root: &Anchor, name: &str, create: bool) -> Result<std::result::Result<Inner, String>> {
    let mode = Mode::from_raw_mode(0o600);
    let name = crate::input::Name::new(name)?;
    let writable = OFlags::RDWR | OFlags::APPEND;
    // A log that went missing while its witness records lines is not made again silently:
    // `init` starts the new one, with the record that says so.
    let missing = |root: &Anchor| match witnessed(root) {
        Some((seq, _)) if seq > 0 => Some(format!(
            "it is missing, though its witness records line {seq}"
        )),
        _ => None,
    };
    let opened = match root.open_own_file(name, writable, mode) {
        Err(Error::NotFound { .. }) => match missing(root) {
            Some(why) => return Ok(Err(why)),
            None if create => root.open_own_file(name, writable | OFlags::CREATE, mode),
            None => return Ok(Err("it is missing".to_owned())),
        },
        opened => opened,
    };
    let (opened, writable, witness) = match opened {
        Ok(opened) => (opened, true, open_witness(root)),
        Err(e) if read_only(&e) => (
            root.open_own_file(name, OFlags::RDONLY, mode)?,
            false,
            Err("the state root is read-only".to_owned()),
        ),
        Err(e) => return Err(e),
    };
    let fd = match opened {
        OwnFile::Open(fd) => fd,
        OwnFile::Broken(kind) => return Ok(Err(format!("it is {kind}, not a file"))),
    };
    Ok(Ok(Inner {
        fd,
        writable,
        witness,
        last: None,
        line: Vec::new(),
    }))
}

/// The line the witness in `root` records, if it records one.
pub(crate) fn witnessed(root: &Anchor) -> Option<(u64, String)> {
    let fd = open_witness(root).ok()?;
    let mut buf = [0u8; WITNESS_LEN];
    let read = rustix::io::pread(&fd, &mut buf, 0).ok()?;
    parse_witness(&buf[..read])
}

/// The witness `audit.head` in `root`, opened for writing (made when missing), or why it
/// cannot be: it must be a regular file (a FIFO would not hold it, a directory or a link
/// cannot be written).
fn open_witness(root: &Anchor) -> std::result::Result<OwnedFd, String> {
    let mode = Mode::from_raw_mode(0o600);
    let opened = crate::input::Name::new(WITNESS_FILE)
        .and_then(|name| root.open_own_file(name, OFlags::RDWR | OFlags::CREATE, mode));
    match opened {
        Ok(OwnFile::Open(fd)) => Ok(fd),
        Ok(OwnFile::Broken(kind)) => Err(format!(
            "the witness ({WITNESS_FILE}) is {kind}: `safe-lanes init` repairs it"
        )),
        Err(e) => Err(format!(
            "the witness ({WITNESS_FILE}) cannot be opened: {e}"
        )),
    }
}

/// Whether opening for writing failed because the state root cannot be written.
fn read_only(error: &Error) -> bool {
    [
        rustix::io::Errno::ROFS,
        rustix::io::Errno::ACCESS,
        rustix::io::Errno::PERM,
    ]
    .iter()
    .any(|errno| error.raw_os_error() == Some(errno.raw_os_error()))
}

/// The witness record for `tail`, written in `out` (emptied first).
fn witness_record<'a>(out: &'a mut Vec<u8>, tail: &Tail) -> &'a [u8] {
    out.clear();
    // Writing to a `Vec` cannot fail.
    let _ = writeln!(out, "seq={:020} hash={}", tail.seq, tail.hash);
    out
}

/// The seq and hash of a witness record.
fn parse_witness(bytes: &[u8]) -> Option<(u64, String)> {
    let text = std::str::from_utf8(bytes).ok()?.strip_suffix('\n')?;
    let (seq, hash) = text.strip_prefix("seq=")?.split_once(" hash=")?;
    let hex = hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit());
    (seq.len() == 20 && hex).then(|| Some((seq.parse().ok()?, hash.to_owned())))?
}

/// How the end of a chain of `lines` whole lines breaks against its witness (`seq`, `hash`),
/// given the hash of line `seq` when the chain reached it.
fn tail_break(lines: u64, seq: u64, hash: &str, at_witness: Option<String>) -> Option<BrokenLine> {
    if lines < seq {
        return Some(BrokenLine {
            line: lines + 1,
            why: format!(
                "the log ends after line {lines}, but its witness says line {seq} was written: \
                 lines were cut from the end"
            ),
        });
    }
    (seq > 0 && at_witness.as_deref() != Some(hash)).then(|| BrokenLine {
        line: seq,
        why: "it is not the line the witness recorded: the end of the log was replaced".into(),
    })
}

/// Verify a chain read from `reader`; also the hash of line `witnessed`, if it is reached.
fn verify_reader(
    reader: impl BufRead,
    witnessed: Option<u64>,
) -> io::Result<(Verification, Option<String>)> {
    let mut prev = GENESIS.to_owned();
    let mut lines = 0u64;
    let mut at_witness = None;
    let mut seams = Vec::new();
    for line in reader.split(b'\n') {
        let line = line?;
        lines += 1;
        match check_line(&line, lines, &prev) {
            Ok(Checked { hash, seam }) => {
                prev = hash;
                seams.extend(seam.map(|why| BrokenLine { line: lines, why }));
            }
            Err(why) => {
                let broken = Some(BrokenLine { line: lines, why });
                let tail = TailCheck::NotWitnessed {
                    why: "the chain breaks before its end".into(),
                };
                return Ok((
                    Verification {
                        lines,
                        broken,
                        seams,
                        tail,
                    },
                    None,
                ));
            }
        }
        if witnessed == Some(lines) {
            at_witness = Some(prev.clone());
        }
    }
    let tail = TailCheck::NotWitnessed {
        why: "not checked yet".into(),
    };
    let verification = Verification {
        lines,
        broken: None,
        seams,
        tail,
    };
    Ok((verification, at_witness))
}

/// A line that holds its place in the chain.
struct Checked {
    /// Its hash (the next line's `prev`).
    hash: String,
    /// When it records that lines are missing before it, what it says.
    seam: Option<String>,
}

/// Check line number `n` of the chain, which must follow the hash `prev`: its hash and what it
/// records of lines missing before it, or why it breaks the chain.
fn check_line(line: &[u8], n: u64, prev: &str) -> std::result::Result<Checked, String> {
    let text = std::str::from_utf8(line).map_err(|_| "not UTF-8".to_owned())?;
    let hash = unseal(text).ok_or("no `hash` field at the end of the line")?;
    let unsealed = format!("{}}}", &text[..text.len() - SEAL_LEN]);
    if sha256_hex(unsealed.as_bytes()) != hash {
        return Err("its content does not match its hash: the line was changed".into());
    }
    let value = serde_json::from_str::<serde_json::Value>(&unsealed)
        .map_err(|_| "not a JSON object".to_owned())?;
    if value.get("seq").and_then(serde_json::Value::as_u64) != Some(n) {
        return Err(format!(
            "sequence number is not {n}: a line was removed, inserted or moved"
        ));
    }
    if value.get("prev").and_then(serde_json::Value::as_str) != Some(prev) {
        return Err(
            "does not follow the line before it: a line was changed, removed or moved".into(),
        );
    }
    Ok(Checked {
        hash: hash.to_owned(),
        seam: seam(&value),
    })
}

/// What a record says of lines missing before it, when it is one the log wrote about itself
/// for that (a cut; a restart after which lines are known or feared lost).
fn seam(value: &serde_json::Value) -> Option<String> {
    let event = value.get("event").and_then(serde_json::Value::as_str)?;
    let witness_seq = value.get("witness_seq").and_then(serde_json::Value::as_u64);
    match event {
        CUT_EVENT => Some(format!(
            "records that the log had been cut: it ended before line {} that its witness \
             recorded",
            witness_seq.unwrap_or(0)
        )),
        RESTART_EVENT if witness_seq != Some(0) => {
            let earlier = value.get("earlier_log").and_then(serde_json::Value::as_str);
            let lost = witness_seq.map_or_else(
                || "how many lines it held is not known: it had no readable witness".to_owned(),
                |seq| format!("its witness had recorded line {seq}"),
            );
            Some(format!(
                "records that the log was started again by `safe-lanes init`: the earlier \
                 log's lines are not in this one ({}; {lost})",
                earlier.unwrap_or("what stood there is not said")
            ))
        }
        _ => None,
    }
}

impl<F: Serialize> Record<'_, F> {
    /// Write the unsealed line into `out` (emptied first): one JSON object,
    /// `{"seq":…,"ts":…,"event":…,"actor":…,<the fields' own members>,"prev":…}`.
    ///
    /// The fields must serialize to a JSON object (its members are spliced in, in order) or to
    /// `null` (no members); anything else is an error.
    fn write_unsealed(self, out: &mut Vec<u8>) -> io::Result<()> {
        out.clear();
        let now = humantime::format_rfc3339_millis(std::time::SystemTime::now());
        write!(out, "{{\"seq\":{},\"ts\":\"{now}\",\"event\":", self.seq)?;
        serde_json::to_writer(&mut *out, self.event)?;
        out.extend_from_slice(b",\"actor\":");
        serde_json::to_writer(&mut *out, &Text(self.actor))?;
        let start = out.len();
        serde_json::to_writer(&mut *out, &self.fields)?;
        match &out[start..] {
            b"null" | b"{}" => out.truncate(start),
            // `{"a":1}` becomes `,"a":1`: the members follow the ones before.
            [b'{', .., b'}'] => {
                out[start] = b',';
                out.pop();
            }
            _ => {
                let why = "the fields of an audit event must serialize to a JSON object";
                return Err(io::Error::other(why));
            }
        }
        out.extend_from_slice(b",\"prev\":");
        serde_json::to_writer(&mut *out, self.prev)?;
        out.push(b'}');
        Ok(())
    }
}

/// Serializes what it holds as a JSON string of its `Display` form, written as it is formatted.
struct Text<'a>(&'a dyn Display);

impl Serialize for Text<'_> {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self.0)
    }
}

/// Seal the unsealed JSON object in `line` in place: its closing brace becomes
/// `,"hash":"<hex>"}`, where the hash is the SHA-256 of the unsealed text. Returns the hash.
fn seal(line: &mut Vec<u8>) -> String {
    let hash = sha256_hex(line);
    if line.last() == Some(&b'}') {
        line.pop();
    }
    line.extend_from_slice(b",\"hash\":\"");
    line.extend_from_slice(hash.as_bytes());
    line.extend_from_slice(b"\"}");
    hash
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

impl AuditLog {
    /// The records from byte `offset` of the log on, oldest first, and the offset just after
    /// the last whole line read (where the next look starts). A line cut short at the end is
    /// left for the next look; a line that is not a JSON object is skipped (`verify` reports
    /// it).
    ///
    /// # Errors
    ///
    /// `insecure_root` when the log is not a file; `io` when it cannot be read.
    pub fn records_from(&self, offset: u64) -> Result<(Vec<serde_json::Value>, u64)> {
        self.read_from(offset, usize::MAX)
    }

    /// A descriptor of the log to read (its own offset untouched: read it with `pread`), and
    /// its size now.
    ///
    /// # Errors
    ///
    /// `insecure_root` when the log is not a file; `io` when it cannot be examined.
    pub(crate) fn reader(&self) -> Result<(OwnedFd, u64)> {
        let inner = self.inner()?;
        let fd = inner
            .fd
            .try_clone()
            .map_err(|e| Error::io("dup", &self.path, e))?;
        let size = rustix::fs::fstat(&fd)
            .map(|st| u64::try_from(st.st_size).unwrap_or(0))
            .map_err(|e| Error::io("fstat", &self.path, e))?;
        Ok((fd, size))
    }

    /// The record that begins at byte `offset` of the log, if a whole one does (reading that
    /// one line only).
    ///
    /// # Errors
    ///
    /// `insecure_root` when the log is not a file; `io` when it cannot be read.
    pub(crate) fn record_at(&self, offset: u64) -> Result<Option<serde_json::Value>> {
        Ok(self.read_from(offset, 1)?.0.pop())
    }

    /// At most `most` records from byte `offset` on, and where reading stopped.
    fn read_from(&self, offset: u64, most: usize) -> Result<(Vec<serde_json::Value>, u64)> {
        let fd = {
            let inner = self.inner()?;
            inner
                .fd
                .try_clone()
                .map_err(|e| Error::io("dup", &self.path, e))?
        };
        let mut reader = BufReader::new(crate::fd::ReadAt::new(fd.as_fd()));
        reader.get_mut().skip(offset);
        let (mut records, mut end) = (Vec::new(), offset);
        let mut line = Vec::new();
        while records.len() < most {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| Error::io("read", &self.path, e))?;
            if n == 0 || line.last() != Some(&b'\n') {
                break;
            }
            end += n as u64;
            if let Ok(value @ serde_json::Value::Object(_)) = serde_json::from_slice(&line) {
                records.push(value);
            }
        }
        Ok((records, end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_and_unseal_agree() {
        let mut line = br#"{"seq":1,"prev":"x"}"#.to_vec();
        let hash = seal(&mut line);
        let line = String::from_utf8(line).unwrap();
        assert_eq!(unseal(&line), Some(hash.as_str()));
        assert!(line.ends_with(&format!(",\"hash\":\"{hash}\"}}")));
        assert_eq!(unseal("{}"), None);
    }
}
