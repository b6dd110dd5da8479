//! Effects that have begun and not yet ended: a confined command, an uploader. Each has
//! exactly one start record, written before it begins, and exactly one end.
//!
//! A command or an upload acts outside the library the moment it starts, so its record
//! cannot wait for its end: a gateway killed mid-command would leave an effect with no record
//! at all. Instead (ADR 0018):
//!
//! 1. [`Ongoing::start`] makes a held entry in `<root>/.ongoing/` (locked by this process,
//!    [`crate::held`]), appends `<op>.start` with the entry's id, and writes into the entry
//!    where that record begins in the log;
//! 2. the effect runs;
//! 3. [`Started::end`] appends `<op>.end` with the same id and how it ended, then removes the
//!    entry. A [`Started`] dropped without an end (an error, a panic) ends as `unknown`.
//!
//! While it runs, the entry is also how the human sees and stops it from another process
//! ([`crate::running`]): after its two header lines, the process keeps the last lines of the
//! command's output there ([`Started::publish_tail`], one JSON line, rewritten at most once a
//! second), and the human asks it to stop by taking the write permission off the entry
//! ([`stop_mode`]): the process looks at its entry's mode every watch period (100 ms).
//!
//! An entry whose lock is free belongs to a process that died between 1 and 3. The next
//! process to start an effect (or to open the deposit) closes it: if the log holds no
//! `<op>.end` with its id after its start, it appends `<op>.ended_unknown` ("the gateway
//! died"), then removes the entry. Looking in the log first means a process that died after
//! its end record but before removing its entry gets no second record.

use std::io::Read;
use std::os::fd::AsFd;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::actor::Actor;
use crate::audit::AuditLog;
use crate::beneath::Anchor;
use crate::error::{Error, Result};
use crate::fd::{ReadAt, write_all};
use crate::held::{self, Held, Holder};
use crate::input::Name;
use crate::root::ONGOING_DIR;

/// The most an entry's header holds (its kind and an offset).
const MAX_ENTRY: u64 = 256;
/// The most of each stream's end an entry keeps for the human to see.
pub(crate) const MAX_TAIL: usize = 2048;
/// The mode of an entry the human asked to stop.
pub(crate) const STOP_MODE: u32 = 0o400;
/// The mode of every other entry, set when it is made, whatever the umask.
const RUN_MODE: u32 = 0o600;

/// The registry of effects in flight of one state root.
#[derive(Debug, Clone)]
pub(crate) struct Ongoing {
    dir: Arc<Anchor>,
    audit: Arc<AuditLog>,
}

/// One effect in flight: its start is recorded; end it with [`Started::end`].
#[derive(Debug)]
pub(crate) struct Started {
    ongoing: Ongoing,
    op: &'static str,
    actor: Actor,
    held: Option<Held<std::os::fd::OwnedFd>>,
    /// Where the tail goes in the entry: after its header.
    header: u64,
    /// Where its start record begins in the log: its end record says so (`start_at`), so a
    /// reader of the log joins the two without reading what lies between.
    start_at: Option<u64>,
}

impl Ongoing {
    /// The registry in `dir` (`<root>/.ongoing`, made and checked by the caller), recording in
    /// `audit`.
    pub(crate) fn new(dir: Anchor, audit: Arc<AuditLog>) -> Self {
        Self {
            dir: Arc::new(dir),
            audit,
        }
    }

    /// Record the start of `op` (`exec`, `upload`) by `actor` with `fields` (a JSON object),
    /// before it begins; first close what a dead process left.
    ///
    /// # Errors
    ///
    /// `io` when the entry cannot be made or the record cannot be written: the effect must then
    /// not begin (nothing is left behind).
    pub(crate) fn start(&self, op: &'static str, actor: Actor, fields: Value) -> Result<Started> {
        self.close_dead();
        let held = Held::create_file(&self.dir)?;
        // Its mode says whether the human asked it to stop ([`STOP_MODE`]): set it whatever
        // the umask made of it.
        rustix::fs::fchmod(&held.entry, crate::beneath::mode_bits(RUN_MODE))
            .map_err(|e| Error::io("fchmod", ONGOING_DIR, e))?;
        // The kind first: an entry whose process died before the offset was written is still
        // known for what it is.
        let kind = format!("{op}\n");
        write_all(held.entry.as_fd(), kind.as_bytes())
            .map_err(|e| Error::io("write", ONGOING_DIR, e))?;
        let mut started = Started {
            ongoing: self.clone(),
            op,
            actor,
            held: Some(held),
            header: kind.len() as u64,
            start_at: None,
        };
        let id = started.id().to_owned();
        let offset = match self
            .audit
            .append_at(&format!("{op}.start"), actor, with_id(&id, fields))
        {
            Ok(offset) => offset,
            Err(e) => {
                // Not started: no record, no entry.
                started.forget();
                return Err(e);
            }
        };
        started.start_at = Some(offset);
        if let Some(held) = &started.held {
            // Where the start is in the log; without it, a dead entry is closed all the same.
            let line = format!("{offset}\n");
            if write_all(held.entry.as_fd(), line.as_bytes()).is_ok() {
                started.header += line.len() as u64;
            }
        }
        Ok(started)
    }

    /// Close every entry whose process died: record `<op>.ended_unknown` unless its end is in
    /// the log already, then remove it.
    pub(crate) fn close_dead(&self) {
        let Ok(entries) = self.dir.entries() else {
            return;
        };
        for (name, st) in entries {
            let Holder::Abandoned(fd) = held::holder(&self.dir, &name, &st) else {
                continue;
            };
            let closed = match read_entry(&fd) {
                Some((op, offset)) => self.close(&op, &name.to_string_lossy(), offset),
                // Made, but its start was never recorded (or its content lost): nothing to end.
                None => Ok(()),
            };
            match closed {
                Ok(()) => {
                    let _ = Name::new(&name).and_then(|n| self.dir.remove_file(n));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not close an effect a dead process left")
                }
            }
            drop(fd);
        }
    }

    fn close(&self, op: &str, id: &str, offset: Option<u64>) -> Result<()> {
        let offset = match offset {
            Some(offset) => offset,
            // Died around its start record: there is something to end only if it was written.
            None if self.audit.followed_by(0, &format!("{op}.start"), id)? => 0,
            None => return Ok(()),
        };
        if self.audit.followed_by(offset, &format!("{op}.end"), id)? {
            return Ok(());
        }
        let mut fields = json!({
            "id": id,
            "why": "the process running it ended before recording how it ended (killed, or the \
                    machine stopped); what it did is unknown",
        });
        if self.audit.record_at(offset)?.is_some_and(|r| r["id"] == id) {
            fields["start_at"] = offset.into();
        }
        self.audit
            .append(&format!("{op}.ended_unknown"), "safe-lanes", fields)
    }
}

/// The end of `text`: at most [`MAX_TAIL`] bytes, from a line's start when one is in reach.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn tail(text: &str) -> &str {
    if text.len() <= MAX_TAIL {
        return text;
    }
    let mut start = text.len() - MAX_TAIL;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let end = &text[start..];
    // From the first line that starts within reach, unless the only line end is the last
    // character (one long last line: then its end).
    match end.find('\n') {
        Some(n) if n + 1 < end.len() => &end[n + 1..],
        _ => end,
    }
}

/// A duration as an end record holds it (`duration_ms`): whole milliseconds.
pub(crate) fn millis(elapsed: std::time::Duration) -> u64 {
    u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
}

impl Started {
    /// The effect's id, in both of its records.
    pub(crate) fn id(&self) -> &str {
        self.held.as_ref().map_or("", |h| h.name.as_str())
    }

    /// Whether the human asked the effect to stop ([`crate::running::stop`] took the write
    /// permission off its entry).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn stop_asked(&self) -> bool {
        self.held.as_ref().is_some_and(|held| {
            rustix::fs::fstat(&held.entry)
                .is_ok_and(|st| crate::beneath::permissions(&st) == STOP_MODE)
        })
    }

    /// Keep the ends of the command's output in the entry, for the human to see while it
    /// runs: one JSON line after the header (`{"stdout": …, "stderr": …}`, each at most
    /// [`MAX_TAIL`] bytes of the stream's end). Best effort: a failure leaves the last one.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn publish_tail(&self, stdout: &str, stderr: &str) {
        let Some(held) = &self.held else { return };
        let mut line = json!({ "stdout": tail(stdout), "stderr": tail(stderr) }).to_string();
        line.push('\n');
        let fd = held.entry.as_fd();
        if crate::fd::write_all_at(fd, line.as_bytes(), self.header).is_ok() {
            let _ = rustix::fs::ftruncate(fd, self.header + line.len() as u64);
        }
    }

    /// Record how the effect ended (`fields`, a JSON object), then forget it.
    ///
    /// # Errors
    ///
    /// `io` when the record cannot be written: the entry then stays, and the next process
    /// closes it as `ended_unknown`.
    pub(crate) fn end(mut self, fields: impl Serialize) -> Result<()> {
        let fields = serde_json::to_value(fields).unwrap_or(Value::Null);
        let recorded = self.record_end(fields);
        if recorded.is_ok() {
            self.forget();
        } else {
            // Leave the entry for the next process, unlocked when this one goes.
            self.held = None;
        }
        recorded
    }

    fn record_end(&self, fields: Value) -> Result<()> {
        let event = format!("{}.end", self.op);
        let mut fields = with_id(self.id(), fields);
        if let (Some(at), Value::Object(map)) = (self.start_at, &mut fields) {
            map.insert("start_at".into(), at.into());
        }
        self.ongoing.audit.append(&event, self.actor, fields)
    }

    /// Remove the entry (while still locked).
    fn forget(&mut self) {
        if let Some(held) = self.held.take() {
            let _ = Name::new(&held.name).and_then(|n| self.ongoing.dir.remove_file(n));
        }
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if self.held.is_some() {
            // Ended without saying how (an error after the start, a panic).
            if self.record_end(json!({ "ended": "unknown" })).is_ok() {
                self.forget();
            }
        }
    }
}

/// `fields` (a JSON object) with `id` first.
fn with_id(id: &str, fields: Value) -> Value {
    let mut out = Map::new();
    out.insert("id".into(), Value::String(id.to_owned()));
    if let Value::Object(fields) = fields {
        out.extend(fields);
    }
    Value::Object(out)
}

/// The kind and start offset an entry holds (the offset is missing when its process died
/// around its start record).
fn read_entry(fd: &std::os::fd::OwnedFd) -> Option<(String, Option<u64>)> {
    let mut bytes = Vec::new();
    ReadAt::new(fd.as_fd())
        .take(MAX_ENTRY)
        .read_to_end(&mut bytes)
        .ok()?;
    header(&bytes)
}

/// The kind and start offset an entry's first bytes hold. Bytes, not text: what follows the
/// header (a command's output) may be cut inside a character anywhere.
pub(crate) fn header(bytes: &[u8]) -> Option<(String, Option<u64>)> {
    let mut lines = bytes.split(|b| *b == b'\n');
    let op = lines.next()?;
    let known = op.iter().all(|b| b.is_ascii_lowercase() || *b == b'_');
    if !known || op.is_empty() {
        return None;
    }
    let offset = lines
        .next()
        .and_then(|o| std::str::from_utf8(o).ok())
        .and_then(|o| o.parse().ok());
    Some((String::from_utf8_lossy(op).into_owned(), offset))
}

/// Open `<root>/.ongoing` of the state root `root` at `root_path`.
///
/// # Errors
///
/// `insecure_root` when it is not private; `io`.
pub(crate) fn open(
    root: &Anchor,
    root_path: &std::path::Path,
    audit: Arc<AuditLog>,
) -> Result<Ongoing> {
    let dir = crate::root::private_dir(root, root_path, ONGOING_DIR)?;
    Ok(Ongoing::new(dir, audit))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: an entry holds its command's output after the header, read only to its
    /// first 256 bytes; a character cut there made the whole read fail as text, and the entry
    /// of a dead gateway was removed without its `ended_unknown` record.
    #[test]
    fn the_header_is_read_whatever_follows_it() {
        // Offsets of every width, so that for some the cut falls inside a character.
        let mut cut_inside = 0;
        for offset in [
            1_u64, 12, 123, 1234, 12345, 123456, 1234567, 12345678, 123456789,
        ] {
            let mut entry = format!("exec\n{offset}\n").into_bytes();
            let tail = json!({ "stdout": "\u{2713} done ".repeat(40), "stderr": "" });
            entry.extend_from_slice(tail.to_string().as_bytes());
            let cut = &entry[..MAX_ENTRY as usize];
            cut_inside += usize::from(std::str::from_utf8(cut).is_err());
            assert_eq!(header(cut), Some(("exec".to_owned(), Some(offset))));
        }
        assert!(cut_inside > 0, "some cut falls inside a character");
        assert_eq!(header(b"exec\n"), Some(("exec".to_owned(), None)));
        assert_eq!(header(b"EXEC\n1\n"), None);
        assert_eq!(header(b""), None);
    }

    #[test]
    fn a_tail_starts_at_a_line_and_is_never_empty_for_a_long_last_line() {
        let lines: String = (0..400).map(|n| format!("line {n}\n")).collect();
        let shown = tail(&lines);
        assert!(
            shown.len() <= MAX_TAIL && shown.starts_with("line "),
            "{shown}"
        );
        assert!(shown.ends_with("line 399\n"));
        let one = "x".repeat(3 * MAX_TAIL) + "\n";
        assert_eq!(
            tail(&one).len(),
            MAX_TAIL,
            "a long last line is cut, not dropped"
        );
        let wide = "\u{2713}".repeat(MAX_TAIL);
        assert!(tail(&wide).len() <= MAX_TAIL && !tail(&wide).is_empty());
    }
}
