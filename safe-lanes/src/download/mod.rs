//! The download lane: untrusted files land in `<root>/.downloads` and nowhere else.
//!
//! [`DownloadLane::save`] takes a name *hint* (never a path) and a reader, and:
//!
//! 1. reduces the hint to a [`SafeName`] with [`sanitize`];
//! 2. streams the content into a file that has no name yet (`O_TMPFILE` in the lane, or a
//!    hidden `.partial-*` name where the filesystem or the system lacks it: always on macOS,
//!    see [`crate::beneath::Publishing`]), hashing it on the way and
//!    refusing (`too_large`) past the size cap;
//! 3. in durable mode (the default), `fsync`s the file;
//! 4. publishes it under the name, or `name (1).ext`, `name (2).ext`, … (`name (1).tar.gz` for
//!    a compressed tar archive: [`SafeName::numbered`], the one place they are built) with
//!    `linkat` (or `renameat2(RENAME_NOREPLACE)`), which never replaces anything: an existing
//!    file, a planted symbolic link, a directory or a FIFO at the name is a collision, never
//!    written through;
//! 5. in durable mode, `fsync`s the lane so the new name survives a crash;
//! 6. appends one line to the audit log.
//!
//! A failing reader or a size-cap breach leaves nothing: the unnamed file vanishes with its
//! descriptor, a hidden one is removed by a guard.
//!
//! # Crash recovery
//!
//! A file is published marked (the sticky bit) and unmarked once its record is written, so a
//! process that dies in between leaves a marked file (ADR 0009). Every handle that saves holds
//! an entry in the registry `<root>/.savers` (`savers.rs`, ADR 0015) from before its first
//! save until it is dropped; an entry whose lock is free was left by a process that died.
//! Before its first save or listing, a handle that finds one (or a registry that does not know
//! what happened before it, see `savers.rs`) reads the lane: each marked file is recorded as
//! `download.recovered` and unmarked, and hidden staging files whose saver is gone (nobody holds
//! their lock; older than ten seconds) are removed.
//! Otherwise the lane is not read. A read that could not record everything (a full disk) is
//! tried again at a later save or listing, at most once a second.
//!
//! Exactly one record per file: a saver holds an exclusive `flock` on its file from before it
//! is published until after its record is written and its mark cleared, so a read of the lane
//! never records a file whose saver is alive (it skips a file it cannot lock). A file whose
//! saver died *after* its record, or a reader that died after recording it, is found in the log
//! (records carry the file's identity) and only unmarked. A save whose record fails leaves its
//! file published and marked, says so (`recorded: false`), and the lane records it later.
//!
//! # Finding a free name
//!
//! Each lane remembers, per name, the next suffix to try, so the n-th save of one name costs
//! one `linkat`, not n. A lane that starts on a directory already holding many copies (a new
//! process) finds the first free suffix by galloping (`lstat` of 1, 2, 4, 8, …) and then
//! bisecting: O(log n) probes once, O(1) after. Concurrent savers (threads or processes) that
//! pick the same suffix are sorted out by `linkat` itself: one wins, the others move on.

use std::collections::HashMap;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use rustix::fs::{FileType, Stat};
use rustix::io::Errno;
use serde::Serialize;

use crate::actor::Actor;
use crate::audit::AuditLog;
use crate::beneath::{Anchor, Symlinks};
use crate::copy::copy_hashed;
use crate::error::{Code, Error, Result, Shown};
use crate::input::Name;
use crate::name::{SafeName, sanitize};
use crate::root::StateRoot;

mod cursor;
mod page;
mod savers;

use savers::{Registration, Savers};

/// Mode of every saved file.
const FILE_MODE: u32 = 0o600;
/// The mark of a file not yet recorded: the sticky bit, which means nothing on a regular file.
/// A file is created with it (so it is marked before it is published) and loses it once its
/// record is written; a process that dies in between leaves the mark for the next one to find,
/// record as recovered, and clear (see [`is_marked`]).
const UNRECORDED_MARK: u32 = 0o1000;
/// Prefix of hidden temporary names (only where `O_TMPFILE` is unavailable).
const PARTIAL_PREFIX: &str = ".partial-";
/// A hidden temporary file older than this is a crash leftover and is swept.
const STALE_AFTER: Duration = Duration::from_secs(3600);
/// A staging file younger than this may belong to a saver that has not locked it yet.
const STAGING_GRACE: Duration = Duration::from_secs(10);
/// How many published collisions one save tolerates before giving up (only reachable when
/// another process fills the same names as fast as we probe them).
const MAX_COLLISIONS: u32 = 10_000;
/// Names remembered per lane before the memory is reset.
const MAX_REMEMBERED: usize = 4096;

/// Whether a save waits for the disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// `fsync` the file before publishing it and the lane after: a returned save survives a
    /// crash or power loss.
    #[default]
    Durable,
    /// Leave flushing to the kernel: faster. While the system runs, the name still appears only
    /// once the content is complete; but after a crash or power loss the file may be missing,
    /// or present and empty, because the name may reach the disk before the data.
    Buffered,
}

/// How the unwritten file is held before it gets its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Staging {
    /// `O_TMPFILE`: no name at all until `linkat` (Linux).
    #[cfg(target_os = "linux")]
    Unnamed,
    /// A hidden `.partial-<random>` name, renamed with `RENAME_NOREPLACE`.
    Hidden,
}

impl Staging {
    /// How a lane opened now, on this thread, stages ([`crate::beneath::publishing`]).
    fn now() -> Self {
        #[cfg(target_os = "linux")]
        if crate::beneath::publishing() == crate::beneath::Publishing::Link {
            return Staging::Unnamed;
        }
        Staging::Hidden
    }
}

/// A file saved in the lane.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct Saved {
    /// The absolute path of the saved file.
    #[serde(serialize_with = "crate::lossy::path")]
    pub path: PathBuf,
    /// Its name in the lane.
    pub name: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// The lowercase hex SHA-256 of its content.
    pub sha256: String,
    /// Whether its `download.save` record is in the audit log. When not (the log could not be
    /// written), the file stays marked and is recorded as `download.recovered` later.
    pub recorded: bool,
}

/// A file the human removed from the lane ([`DownloadLane::remove`]).
#[derive(Clone, Debug, Serialize)]
pub struct Removed {
    /// The file, as it was.
    pub entry: Entry,
    /// Whether the audit log holds the removal (the file is gone either way).
    pub recorded: bool,
}

/// What the audit log records of a save or a recovery: the file and its identity.
#[derive(Serialize)]
pub(crate) struct FileRecord<'a> {
    /// `<st_dev>:<st_ino>`: how a later reader of the lane tells this file's record is there.
    id: &'a str,
    path: String,
    name: &'a str,
    /// The name the agent asked for, as it asked (lossy UTF-8), when it is not `name`: the
    /// sign of an attack a screen shows beside the name ([`crate::name::attack_signs`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    hint: Option<String>,
    bytes: u64,
    sha256: &'a str,
}

impl<'a> FileRecord<'a> {
    pub(crate) fn of(id: &'a str, saved: &'a Saved) -> Self {
        Self {
            id,
            path: saved.path.to_string_lossy().into_owned(),
            name: &saved.name,
            hint: None,
            bytes: saved.bytes,
            sha256: &saved.sha256,
        }
    }

    /// The record, with the name the agent asked for.
    pub(crate) fn hinted(mut self, hint: &[u8]) -> Self {
        let hint = String::from_utf8_lossy(hint);
        if hint != self.name {
            self.hint = Some(hint.into_owned());
        }
        self
    }
}

/// The identity a file's records carry.
fn file_id(st_or_fd: (u64, u64)) -> String {
    format!("{}:{}", st_or_fd.0, st_or_fd.1)
}

/// How often a handle whose recovery could not finish tries again.
const RETRY_RECOVERY: Duration = Duration::from_secs(1);

/// Where a handle's recovery stands.
#[derive(Debug)]
struct Recovery {
    /// Whether the lane must be looked at before the next save or listing.
    needed: bool,
    /// When it was last tried.
    tried: Option<std::time::Instant>,
}

/// A file found in the lane by [`DownloadLane::list`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct Entry {
    /// The absolute path.
    #[serde(serialize_with = "crate::lossy::path")]
    pub path: PathBuf,
    /// The name in the lane, as UTF-8 (invalid bytes become U+FFFD: see
    /// [`Entry::raw_name`] for the name itself).
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Last modification, RFC 3339.
    pub modified: String,
    /// The name as the lane holds it, byte for byte: what removal matches, never `name`
    /// (lossy, so two files can share it).
    #[serde(skip)]
    raw: std::ffi::OsString,
    /// `(st_dev, st_ino)` when it was listed.
    #[serde(skip)]
    id: (u64, u64),
}

impl Entry {
    /// The name as the lane holds it, byte for byte (`name` is its lossy UTF-8 form).
    pub fn raw_name(&self) -> &std::ffi::OsStr {
        &self.raw
    }

    /// The name made safe to print: invalid UTF-8 as `\xNN`, control and format characters
    /// escaped (see [`Shown`]).
    pub fn shown(&self) -> Shown {
        Shown::bytes(self.raw.as_encoded_bytes())
    }
}

/// One page of the lane's files ([`DownloadLane::page`]).
#[derive(Debug, Serialize)]
pub struct Page {
    /// The files of this page, by name.
    pub entries: Vec<Entry>,
    /// Where the next page starts (give it as `after`), when more files follow: the name of
    /// this page's last file, byte for byte.
    #[serde(skip)]
    pub next: Option<std::ffi::OsString>,
}

/// A page of the download lane's files, as a gateway hands it on ([`DownloadLane::listing`],
/// the agent's [`AgentDesk::downloads`](crate::AgentDesk::downloads)).
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct DownloadList {
    /// The download folder.
    pub path: String,
    /// The files, by name.
    pub files: Vec<Entry>,
    /// Give this as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// What [`DownloadLane::prune`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Pruned {
    /// The files removed, each recorded in the audit log.
    pub removed: Vec<Entry>,
    /// Files judged old but left alone: right before the unlink, their name was gone or
    /// referred to another file, or the file had been modified since.
    pub skipped: Vec<Entry>,
    /// Files that could not be removed, or were removed but could not be recorded.
    pub failed: Vec<PruneFailure>,
}

/// A file [`DownloadLane::prune`] could not deal with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PruneFailure {
    /// The file.
    #[serde(flatten)]
    pub entry: Entry,
    /// The code of the error (`io`).
    pub code: Code,
    /// What went wrong (names escaped).
    pub message: String,
}

impl PruneFailure {
    fn new(entry: Entry, error: &Error) -> Self {
        Self {
            entry,
            code: error.code(),
            message: error.message().to_string(),
        }
    }
}

/// What the audit log records of each file a prune removes.
#[derive(Serialize)]
struct PruneRecord<'a> {
    /// The name, escaped ([`Shown`]): unambiguous where the lossy name is not.
    name: String,
    bytes: u64,
    modified: &'a str,
}

/// Whether a lane entry is one of the lane's files: a regular file, not a hidden staging file.
fn is_listed(name: &std::ffi::OsStr, st: &Stat) -> bool {
    FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
        && !name
            .as_encoded_bytes()
            .starts_with(PARTIAL_PREFIX.as_bytes())
}

/// Whether the file `st` describes carries the mark of a save not yet recorded
/// ([`UNRECORDED_MARK`]).
fn is_marked(st: &Stat) -> bool {
    crate::beneath::permissions(st) & UNRECORDED_MARK != 0
}

/// Whether a lane file whose `lstat` is `st` is old enough for a prune with `cutoff`: last
/// modified before it. Judged once when listing, and again right before the unlink.
fn is_old(st: &Stat, cutoff: SystemTime) -> bool {
    modified(st) < cutoff
}

/// The moment `age` ago (the epoch when `age` reaches before it).
fn cutoff(age: Duration) -> SystemTime {
    SystemTime::now()
        .checked_sub(age)
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// When the file `st` describes was last modified (before the epoch counts as the epoch).
fn modified(st: &Stat) -> SystemTime {
    let secs = Duration::from_secs(u64::try_from(st.st_mtime).unwrap_or(0));
    let nanos = Duration::new(0, u32::try_from(st.st_mtime_nsec).unwrap_or(0));
    let at = SystemTime::UNIX_EPOCH.checked_add(secs);
    at.and_then(|t| t.checked_add(nanos))
        .or(at)
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// `at` in RFC 3339 to the second; a time past what the format holds (after the year 9999,
/// which a file's timestamp can be) is shown as the last second it holds.
fn rfc3339(at: SystemTime) -> String {
    let mut out = String::new();
    match std::fmt::write(
        &mut out,
        format_args!("{}", humantime::format_rfc3339_seconds(at)),
    ) {
        Ok(()) => out,
        Err(_) => "9999-12-31T23:59:59Z".to_owned(),
    }
}

/// The download lane of a state root.
#[derive(Debug)]
pub struct DownloadLane {
    dir: Anchor,
    path: PathBuf,
    audit: Arc<AuditLog>,
    durability: Durability,
    max_bytes: Option<u64>,
    staging: Staging,
    actor: Actor,
    next_suffix: Mutex<HashMap<String, Next>>,
    /// The registry that says whether a crash may have left files unrecorded.
    savers: Savers,
    /// This handle's entry in it, made before its first save.
    registration: OnceLock<Registration>,
    /// The names read for the last page, kept while the directory does not change.
    listing: page::Listing,
    /// What a crash left is looked for before the first use, and again (at most once a
    /// second) while a look could not record everything ([`DownloadLane::sweep`]).
    recovery: Mutex<Recovery>,
}

/// What a lane remembers about one name.
#[derive(Clone, Copy, Debug)]
enum Next {
    /// The next suffix has not been seen taken: try it directly.
    Try(u32),
    /// A suffix from here on was found taken by someone else: probe before trying.
    Probe(u32),
}

impl DownloadLane {
    /// The download lane of `root`: durable, no size cap, actor [`Actor::Agent`].
    ///
    /// # Errors
    ///
    /// `io` when the lane descriptor cannot be duplicated; `insecure_root` when the registry
    /// of savers (`<root>/.savers`) is not a private directory of the current user.
    pub fn open(root: &StateRoot) -> Result<Self> {
        let lane = Self {
            dir: root.downloads()?.try_clone()?,
            path: root.downloads_path(),
            audit: root.audit(),
            durability: Durability::Durable,
            max_bytes: None,
            staging: Staging::now(),
            actor: Actor::Agent,
            next_suffix: Mutex::new(HashMap::new()),
            savers: Savers::open(root)?,
            registration: OnceLock::new(),
            listing: page::Listing::default(),
            recovery: Mutex::new(Recovery {
                needed: true,
                tried: None,
            }),
        };
        Ok(lane)
    }

    /// Choose durable (default) or buffered saves.
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self.savers.set_durable(durability == Durability::Durable);
        self
    }

    /// Refuse content larger than `max_bytes` (`too_large`, nothing kept).
    pub fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = Some(max_bytes);
        self
    }

    /// The actor recorded in the audit log for saves and prunes ([`Actor::Agent`] by default).
    pub fn with_actor(mut self, actor: Actor) -> Self {
        self.actor = actor;
        self
    }

    /// Stage through hidden `.partial-*` names instead of `O_TMPFILE` (what the lane falls
    /// back to on filesystems without `O_TMPFILE`; public so that path is tested too).
    #[doc(hidden)]
    pub fn with_hidden_staging(mut self) -> Self {
        self.staging = Staging::Hidden;
        self
    }

    /// The lane directory.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Save everything `reader` yields under a name derived from `hint`.
    ///
    /// # Errors
    ///
    /// `too_large` past the size cap; `invalid_argument` when `reader` fails with
    /// [`InvalidData`](std::io::ErrorKind::InvalidData) (content that is not what it claims,
    /// such as invalid base64), recorded as refused like `too_large`; `io` when reading the
    /// input or writing the lane fails otherwise. In every error case nothing is left in the
    /// lane.
    ///
    /// # Security
    ///
    /// The hint is untrusted: it only ever becomes one sanitized name inside the lane. The
    /// save never replaces or writes through anything that exists.
    pub fn save(&self, hint: impl AsRef<[u8]>, reader: impl Read) -> Result<Saved> {
        let hint = hint.as_ref();
        let record = |id: &str, saved: &Saved| {
            self.audit.append(
                "download.save",
                self.actor,
                FileRecord::of(id, saved).hinted(hint),
            )
        };
        self.save_recorded(hint, reader, record).map_err(|e| {
            self.audit.refused(
                crate::audit::Operation::Download,
                self.actor,
                &String::from_utf8_lossy(hint),
                e,
            )
        })
    }

    /// The size cap ([`DownloadLane::with_max_bytes`]), if any.
    pub fn max_bytes(&self) -> Option<u64> {
        self.max_bytes
    }

    /// The audit log the lane records to.
    #[cfg_attr(not(all(target_os = "linux", feature = "fetch")), allow(dead_code))]
    pub(crate) fn audit(&self) -> &AuditLog {
        &self.audit
    }

    /// The actor the lane records.
    #[cfg_attr(not(all(target_os = "linux", feature = "fetch")), allow(dead_code))]
    pub(crate) fn actor(&self) -> Actor {
        self.actor
    }

    /// Save as [`DownloadLane::save`] does, but with `record` writing the file's one audit
    /// record (in place of `download.save`; given the file's id, which the record must carry
    /// for recovery to find it), and no refusal recorded: the caller records the operation the
    /// save is part of (a fetch, `download.fetch`). When `record` fails, the file stays, marked,
    /// and is recorded as recovered later (`recorded: false`), as when `download.save` cannot
    /// be written.
    pub(crate) fn save_recorded(
        &self,
        hint: &[u8],
        mut reader: impl Read,
        record: impl FnOnce(&str, &Saved) -> Result<()>,
    ) -> Result<Saved> {
        self.recover_if_needed();
        self.register()?;
        let name = sanitize(hint);
        let staged = self.stage()?;
        // Held until the record is written and the mark cleared: a reader of the lane never
        // takes this file for one a dead saver left (`recover`).
        rustix::fs::flock(&staged.fd, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| Error::io("flock", name.as_str(), e))?;
        let copied = copy_hashed(
            &mut reader,
            staged.fd.as_fd(),
            self.max_bytes,
            || match self.durability {
                Durability::Durable => {
                    rustix::fs::fsync(&staged.fd).map_err(|e| Error::io("fsync", name.as_str(), e))
                }
                Durability::Buffered => Ok(()),
            },
        )?;
        crate::crash::point("download.staged");
        // Staged with the mark, kept until it is recorded: a crash in between leaves it (see
        // `sweep`), and so does an error or a panic before the record (`unsettled`).
        let unsettled = self.savers.unsettled(&self.audit);
        let published = self.publish(&name, &staged)?;
        if self.durability == Durability::Durable {
            self.dir.sync()?;
        }
        crate::crash::point("download.published");
        let mut saved = Saved {
            path: self.path.join(&published),
            name: published,
            bytes: copied.bytes,
            sha256: copied.sha256,
            recorded: true,
        };
        let id = file_id(crate::beneath::identity(staged.fd.as_fd())?);
        if let Err(e) = record(&id, &saved) {
            // Published, so it stays, marked: this handle (at a later save) or the next one
            // records it as recovered (`unsettled` leaves the evidence).
            tracing::warn!(error = %e, "a saved download could not be recorded; it will be");
            self.recovery_lock().needed = true;
            saved.recorded = false;
            return Ok(saved);
        }
        unsettled.settled();
        crate::crash::point("download.recorded");
        set_mode(&staged.fd, FILE_MODE, &saved.name)?;
        Ok(saved)
    }

    fn recovery_lock(&self) -> std::sync::MutexGuard<'_, Recovery> {
        crate::sync::lock(&self.recovery)
    }

    /// The files in the lane, sorted by name. Anything that is not a regular file is skipped,
    /// and so are hidden staging files.
    ///
    /// # Errors
    ///
    /// `io` when the lane cannot be read.
    pub fn list(&self) -> Result<Vec<Entry>> {
        self.files(|_, _| true)
    }

    /// At most `limit` files of the lane, by name, after the name `after` (the `next` of the
    /// previous page; `None` for the first page). A file saved or removed between pages is
    /// seen or missed, but no file is listed twice, and every file there all along is listed
    /// once, even two whose names differ only in bytes that are not UTF-8.
    ///
    /// The page is found in one read of the directory keeping at most `limit + 1` names
    /// (ADR 0022): memory and `lstat`s are those of the page, whatever the lane holds.
    ///
    /// # Errors
    ///
    /// `io` when the lane cannot be read.
    pub fn page(&self, after: Option<&std::ffi::OsStr>, limit: usize) -> Result<Page> {
        // A file a crash left unrecorded is recorded before it is listed.
        self.recover_if_needed();
        let limit = limit.max(1);
        let mut entries: Vec<Entry> = Vec::new();
        let mut from = after.map(page::Key::of);
        loop {
            // The names that may fill the rest of the page (and tell whether one more
            // follows): one read of the directory, at most `want` names kept.
            let want = limit.saturating_add(1) - entries.len();
            let (chosen, exhausted) =
                self.listing
                    .smallest_after(&self.dir, from.as_ref(), want)?;
            from = chosen.last().cloned();
            for key in chosen {
                // Only the page's names are looked at; one gone or changed since is skipped.
                let Ok(st) = Name::new(&key.raw).and_then(|n| self.dir.stat_entry(n)) else {
                    continue;
                };
                if is_listed(&key.raw, &st) {
                    entries.push(self.entry(key.raw, &st));
                }
            }
            if entries.len() > limit || exhausted {
                break;
            }
        }
        let next = (entries.len() > limit)
            .then(|| entries.get(limit - 1).map(|e| e.raw.clone()))
            .flatten();
        entries.truncate(limit);
        Ok(Page { entries, next })
    }

    /// A page of at most `limit` files (at least 1) after the `cursor` a previous page gave
    /// (its `next_cursor`; `None` for the first page): [`DownloadLane::page`], with the page's
    /// end as an opaque cursor a gateway hands on.
    ///
    /// # Errors
    ///
    /// `invalid_argument` for a cursor no page gave; `io` when the lane cannot be read.
    pub fn listing(&self, cursor: Option<&str>, limit: usize) -> Result<DownloadList> {
        let after = cursor.map(cursor::decode).transpose()?;
        let page = self.page(after.as_deref(), limit.max(1))?;
        Ok(DownloadList {
            path: self.path.to_string_lossy().into_owned(),
            files: page.entries,
            next_cursor: page.next.as_deref().map(cursor::encode),
        })
    }

    /// The [`Entry`] of the lane's file `raw`, whose `lstat` is `st`.
    fn entry(&self, raw: std::ffi::OsString, st: &Stat) -> Entry {
        Entry {
            path: self.path.join(&raw),
            name: raw.to_string_lossy().into_owned(),
            bytes: u64::try_from(st.st_size).unwrap_or(0),
            modified: rfc3339(modified(st)),
            id: crate::beneath::stat_identity(st),
            raw,
        }
    }

    /// The lane's files (see [`is_listed`]) that `keep` accepts, by name (lossy, then bytes).
    fn files(&self, keep: impl Fn(&std::ffi::OsStr, &Stat) -> bool) -> Result<Vec<Entry>> {
        // A file a crash left unrecorded is recorded before it is listed or pruned.
        self.recover_if_needed();
        let mut out: Vec<Entry> = self
            .dir
            .entries()?
            .into_iter()
            .filter(|(name, st)| is_listed(name, st) && keep(name, st))
            .map(|(raw, st)| self.entry(raw, &st))
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.raw.cmp(&b.raw)));
        Ok(out)
    }

    /// The file `name` of the lane, opened to read (never through a link, only a regular file
    /// the lane lists), with its entry: what a screen previews.
    ///
    /// # Errors
    ///
    /// `not_found` when the lane lists no such file (a name with a `/`, a link, a directory,
    /// a save not yet published); `io`.
    pub fn read(&self, name: &str) -> Result<(std::fs::File, Entry)> {
        let not_listed = || Error::NotFound {
            path: Shown::text(name),
            why: "no such file in the download lane".into(),
        };
        let entry = Name::new(name).map_err(|_| not_listed())?;
        let fd = self
            .dir
            .open(
                entry.as_rel(),
                rustix::fs::OFlags::RDONLY
                    | rustix::fs::OFlags::NOFOLLOW
                    | rustix::fs::OFlags::NONBLOCK
                    | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
                Symlinks::Deny,
            )
            .map_err(|e| match e.code() {
                crate::Code::Io => e,
                _ => not_listed(),
            })?;
        let st = rustix::fs::fstat(&fd).map_err(|e| Error::io("fstat", name, e))?;
        if !is_listed(std::ffi::OsStr::new(name), &st) {
            return Err(not_listed());
        }
        let listed = self.entry(std::ffi::OsString::from(name), &st);
        Ok((std::fs::File::from(fd), listed))
    }

    /// Remove the file `name` of the lane (the human's decision), recorded as
    /// `download.remove` with its name, size and `reason`: only the very file that was looked
    /// at (same device and inode), never through a link. A removal whose record cannot be
    /// written is still a removal: [`Removed::recorded`] says so (as a prune does).
    ///
    /// # Errors
    ///
    /// `invalid_argument` without a reason; `not_found` when the lane lists no such file (or it
    /// was replaced meanwhile); `io` when it cannot be removed (nothing was).
    pub fn remove(&self, name: &str, reason: &str) -> Result<Removed> {
        let reason = reason.trim();
        if reason.is_empty() {
            return Err(Error::InvalidArgument {
                what: Shown::text(name),
                why: "a reason is needed: the audit log keeps why a download was removed".into(),
            });
        }
        let (_, entry) = self.read(name)?;
        let same = |st: &Stat| crate::beneath::stat_identity(st) == entry.id;
        if !self.dir.remove_file_if(Name::new(name)?, same)? {
            return Err(Error::NotFound {
                path: Shown::text(name),
                why: "the file changed while it was being removed; nothing was removed".into(),
            });
        }
        let recorded = self.audit.append(
            "download.remove",
            self.actor,
            serde_json::json!({
                "name": entry.shown().to_string(),
                "bytes": entry.bytes,
                "reason": reason,
            }),
        );
        if let Err(e) = &recorded {
            tracing::warn!(error = %e, "removed a download, but its record could not be written");
        }
        Ok(Removed {
            entry,
            recorded: recorded.is_ok(),
        })
    }

    /// The files [`DownloadLane::prune`] would remove now: those last modified more than `age`
    /// ago. Nothing is removed (the dry run of a prune).
    ///
    /// # Errors
    ///
    /// `io` when the lane cannot be read.
    pub fn older_than(&self, age: Duration) -> Result<Vec<Entry>> {
        self.judged(cutoff(age))
    }

    /// The lane's files last modified before `cutoff` (see [`is_old`]).
    fn judged(&self, cutoff: SystemTime) -> Result<Vec<Entry>> {
        self.files(|_, st| is_old(st, cutoff))
    }

    /// Remove every file last modified more than `age` ago (the human's cleanup), each one
    /// recorded in the audit log (`download.prune`, with its escaped name and size).
    ///
    /// Files are judged and removed by the name the lane holds, byte for byte, never by a
    /// lossy one. Right before its unlink, each name is checked to still be the very file
    /// that was judged (same device and inode, still old); one removed, replaced or modified
    /// since is left alone ([`Pruned::skipped`]). A file that cannot be removed does not stop
    /// the others ([`Pruned::failed`]); a record that cannot be written stops the prune, so
    /// at most one removal goes unrecorded, and it is reported.
    ///
    /// # Errors
    ///
    /// `io` when the lane cannot be read; nothing is removed then.
    pub fn prune(&self, age: Duration) -> Result<Pruned> {
        let cutoff = cutoff(age);
        let mut pruned = Pruned::default();
        for entry in self.judged(cutoff)? {
            match self.remove_judged(&entry, cutoff) {
                Ok(true) => {
                    let recorded = self.audit.append(
                        "download.prune",
                        self.actor,
                        PruneRecord {
                            name: entry.shown().to_string(),
                            bytes: entry.bytes,
                            modified: &entry.modified,
                        },
                    );
                    pruned.removed.push(entry.clone());
                    if let Err(e) = recorded {
                        pruned.failed.push(PruneFailure {
                            entry,
                            code: e.code(),
                            message: format!(
                                "removed, but not recorded, so the prune stopped: {e}"
                            ),
                        });
                        break;
                    }
                }
                Ok(false) => pruned.skipped.push(entry),
                Err(e) => pruned.failed.push(PruneFailure::new(entry, &e)),
            }
        }
        Ok(pruned)
    }

    /// Unlink `entry` if its name still refers to the file that was judged: the same device
    /// and inode, still old by `cutoff`. Whether it was removed.
    fn remove_judged(&self, entry: &Entry, cutoff: SystemTime) -> Result<bool> {
        let same = |st: &Stat| crate::beneath::stat_identity(st) == entry.id && is_old(st, cutoff);
        self.dir.remove_file_if(Name::new(&entry.raw)?, same)
    }

    /// A writable file with no final name yet, carrying the mark ([`UNRECORDED_MARK`]).
    fn stage(&self) -> Result<Unpublished<'_>> {
        const STAGED_MODE: u32 = FILE_MODE | UNRECORDED_MARK;
        #[cfg(target_os = "linux")]
        if self.staging == Staging::Unnamed {
            match self.dir.create_unnamed(STAGED_MODE) {
                Ok(fd) => {
                    return Ok(Unpublished {
                        fd,
                        hidden: None,
                        lane: &self.dir,
                    });
                }
                Err(e)
                    if matches!(
                        e.raw_os_error().map(Errno::from_raw_os_error),
                        Some(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL)
                    ) => {}
                Err(e) => return Err(e),
            }
        }
        loop {
            let hidden = format!("{PARTIAL_PREFIX}{}", crate::random::random_hex());
            match self.dir.create_new(Name::new(&hidden)?, STAGED_MODE) {
                Ok(fd) => {
                    return Ok(Unpublished {
                        fd,
                        hidden: Some(hidden),
                        lane: &self.dir,
                    });
                }
                Err(e) if e.raw_os_error() == Some(Errno::EXIST.raw_os_error()) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Give `staged` the first free name among `name`, `name (1)`, …; return it.
    fn publish(&self, name: &SafeName, staged: &Unpublished<'_>) -> Result<String> {
        for _ in 0..MAX_COLLISIONS {
            let n = self.reserve(name);
            let candidate = name.numbered(n);
            let to = Name::new(&candidate)?;
            let attempt = match &staged.hidden {
                #[cfg(target_os = "linux")]
                None => self.dir.link_new(staged.fd.as_fd(), to),
                #[cfg(not(target_os = "linux"))]
                None => Err(Error::io("linkat", name.as_str(), Errno::OPNOTSUPP)),
                Some(hidden) => self.dir.rename_new(Name::new(hidden)?, to),
            };
            match attempt {
                Ok(()) => return Ok(candidate),
                Err(e) if e.raw_os_error() == Some(Errno::EXIST.raw_os_error()) => {
                    self.taken(name, n);
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::io(
            "linkat",
            name.as_str(),
            std::io::Error::other("no free numbered name after 10000 collisions"),
        ))
    }

    /// The suffix to try next for `name`, handed out once (concurrent savers get distinct ones).
    fn reserve(&self, name: &SafeName) -> u32 {
        let mut memory = crate::sync::lock(&self.next_suffix);
        if memory.len() >= MAX_REMEMBERED && !memory.contains_key(name.as_str()) {
            memory.clear();
        }
        let n = match memory.get(name.as_str()).copied() {
            Some(Next::Try(n)) => n,
            Some(Next::Probe(n)) => self.first_free(name, n),
            // A name not seen yet is most likely free: try it, probe only after a collision.
            None => 0,
        };
        memory.insert(name.as_str().to_owned(), Next::Try(n.saturating_add(1)));
        n
    }

    /// Remember that suffix `n` of `name` turned out to be taken.
    fn taken(&self, name: &SafeName, n: u32) {
        let mut memory = crate::sync::lock(&self.next_suffix);
        let next = n.saturating_add(1);
        let entry = memory
            .entry(name.as_str().to_owned())
            .or_insert(Next::Probe(next));
        if let Next::Try(m) = *entry
            && m <= next
        {
            *entry = Next::Probe(next);
        }
    }

    /// The first suffix at or after `from` that looks free: gallop, then bisect (O(log n)).
    fn first_free(&self, name: &SafeName, from: u32) -> u32 {
        let taken = |n: u32| {
            !matches!(
                Name::new(&name.numbered(n)).and_then(|n| self.dir.stat_entry(n)),
                Err(Error::NotFound { .. })
            )
        };
        if !taken(from) {
            return from;
        }
        let (mut lo, mut step) = (from, 1u32);
        let mut hi = loop {
            let probe = lo.saturating_add(step);
            if probe == lo || !taken(probe) {
                break probe;
            }
            lo = probe;
            step = step.saturating_mul(2);
        };
        // Invariant: `lo` is taken, `hi` looks free.
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if taken(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    }

    /// Before this handle's first use, and after a look that could not record everything (at
    /// most once a [`RETRY_RECOVERY`]): when the registry says a saver died (or knows nothing),
    /// what it left is found ([`DownloadLane::sweep`]) and the registry settled.
    fn recover_if_needed(&self) {
        let mut recovery = self.recovery_lock();
        let recent = recovery
            .tried
            .is_some_and(|at| at.elapsed() < RETRY_RECOVERY);
        if !recovery.needed || recent {
            return;
        }
        recovery.tried = Some(std::time::Instant::now());
        let evidence = self.savers.evidence();
        if !evidence.crash_possible() {
            recovery.needed = false;
            return;
        }
        // When something could not be recorded, the evidence stays, for this handle's next
        // try and for the next handle.
        if self.sweep(evidence.since()) {
            evidence.settled();
            recovery.needed = false;
        }
    }

    /// Register this handle as a saver, once, before its first save.
    ///
    /// # Errors
    ///
    /// `io` when the registry cannot take the entry (nothing is saved then).
    fn register(&self) -> Result<()> {
        if self.registration.get().is_none() {
            // Two threads may both register: the entry of the one that loses is dropped.
            let _ = self.registration.set(self.savers.register(&self.audit)?);
        }
        Ok(())
    }

    /// What a process that died mid-save left (reading the whole lane is O(n)): hidden staging
    /// files whose saver is gone are removed ([`DownloadLane::remove_abandoned`]), and a file published but never recorded (a
    /// lane file, see [`is_listed`], that carries the mark, see [`is_marked`]) is recorded now
    /// as recovered (records written since the log offset `since` are looked at first, so a
    /// file recorded already is only unmarked). Whether every such file was recorded.
    fn sweep(&self, since: u64) -> bool {
        let Ok(entries) = self.dir.entries() else {
            return false;
        };
        // Dead savers' staging names first: a crash between the `link` and the `unlink` of the
        // fallback publish leaves the file under both names, and only a single-link file is
        // recovered.
        for (name, st) in &entries {
            if name
                .as_encoded_bytes()
                .starts_with(PARTIAL_PREFIX.as_bytes())
                && FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
            {
                let _ = Name::new(name).and_then(|name| self.remove_abandoned(name, st));
            }
        }
        let mut complete = true;
        for (name, st) in &entries {
            // A hidden staging file carries the mark too, but was never published.
            if is_listed(name, st)
                && is_marked(st)
                && let Err(e) = Name::new(name).and_then(|name| self.recover(name, since))
            {
                tracing::warn!(error = %e, "could not record a recovered download");
                complete = false;
            }
        }
        complete
    }
}

impl DownloadLane {
    /// Remove the staging file `name` (its `lstat` is `st`) if its saver is gone: nobody holds
    /// its lock, and it was made more than [`STAGING_GRACE`] ago (a saver locks its file right
    /// after making it; the grace covers that instant). One older than [`STALE_AFTER`] goes
    /// whatever its lock.
    fn remove_abandoned(&self, name: Name<'_>, st: &Stat) -> Result<()> {
        use rustix::fs::FlockOperation;
        let mtime = SystemTime::UNIX_EPOCH + Duration::from_secs(st.st_mtime.max(0) as u64);
        let age = SystemTime::now().duration_since(mtime).unwrap_or_default();
        if age < STAGING_GRACE {
            return Ok(());
        }
        if age < STALE_AFTER {
            let fd = self.dir.open_read(name.as_rel(), Symlinks::Deny)?;
            if rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive).is_err() {
                // Its saver is alive.
                return Ok(());
            }
            // Removed while locked: a saver cannot take it in between.
            let same = |now: &Stat| {
                crate::beneath::stat_identity(now) == crate::beneath::stat_identity(st)
            };
            self.dir.remove_file_if(name, same)?;
            return Ok(());
        }
        self.dir.remove_file(name)
    }

    /// Record the marked file `name` as recovered (its content hashed now) and clear the mark
    /// — unless its saver is alive (it holds the file's lock, and records it itself), or its
    /// record is in the log after `since` already (then only the mark is cleared).
    fn recover(&self, name: Name<'_>, since: u64) -> Result<()> {
        use rustix::fs::FlockOperation;
        let fd = self.dir.open_read(name.as_rel(), Symlinks::Deny)?;
        if rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive).is_err() {
            // Its saver is alive.
            return Ok(());
        }
        let shown = Path::new(name.as_os_str());
        let st = crate::beneath::data_file(fd.as_fd(), shown)?;
        if !is_marked(&st) {
            return Ok(());
        }
        let copied = crate::copy::sha256_of(&mut crate::fd::ReadAt::new(fd.as_fd()))?;
        let text = name.as_os_str().to_string_lossy().into_owned();
        let saved = Saved {
            path: self.path.join(&text),
            name: text,
            bytes: copied.bytes,
            sha256: copied.sha256,
            recorded: true,
        };
        let id = file_id(crate::beneath::stat_identity(&st));
        let already = self.audit.find_after(since, &id, |r| {
            let file = if r["event"] == "download.recovered" {
                &r["file"]
            } else {
                r
            };
            matches!(
                r["event"].as_str(),
                Some("download.save" | "download.recovered" | "download.fetch")
            ) && file["sha256"] == saved.sha256.as_str()
                && file["name"] == saved.name.as_str()
        })?;
        if !already {
            let why = "published, but the process ended before its record was written";
            let fields = serde_json::json!({
                "id": id,
                "file": FileRecord::of(&id, &saved),
                "why": why,
            });
            self.audit
                .append("download.recovered", LOG_ITSELF, fields)?;
        }
        set_mode(&fd, FILE_MODE, &saved.name)
    }
}

/// `fchmod`, naming the file `shown` on failure.
fn set_mode(fd: &OwnedFd, mode: u32, shown: &str) -> Result<()> {
    rustix::fs::fchmod(fd, crate::beneath::mode_bits(mode))
        .map_err(|e| Error::io("fchmod", shown, e))
}

/// The actor of records the lane writes about itself.
const LOG_ITSELF: &str = "safe-lanes";

/// A file being written; a hidden name is removed when this is dropped.
struct Unpublished<'lane> {
    fd: OwnedFd,
    hidden: Option<String>,
    lane: &'lane Anchor,
}

impl Drop for Unpublished<'_> {
    fn drop(&mut self) {
        if let Some(hidden) = &self.hidden {
            // After a successful publish the hidden name is gone already (ENOENT).
            let _ = Name::new(hidden).and_then(|hidden| self.lane.remove_file(hidden));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lane in a fresh state root, with `old` (40 days old) in it; the temporary directory
    /// must outlive the lane.
    fn lane_with_old_file() -> (tempfile::TempDir, DownloadLane, PathBuf) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = StateRoot::open(&tmp.path().join("state")).expect("state root");
        let lane = DownloadLane::open(&root).expect("lane");
        let old = root.downloads_path().join("old");
        std::fs::write(&old, "old").expect("write");
        let forty_days = SystemTime::now() - Duration::from_secs(40 * 86_400);
        let file = std::fs::File::options()
            .write(true)
            .open(&old)
            .expect("open");
        file.set_modified(forty_days).expect("set_modified");
        (tmp, lane, old)
    }

    /// Between the judgement and the unlink, a file is swapped into the judged name: it is
    /// left alone, whatever its age.
    #[test]
    fn a_file_swapped_in_after_the_judgement_is_left_alone() {
        let (_tmp, lane, old) = lane_with_old_file();
        let cutoff = cutoff(Duration::from_secs(86_400));
        let judged = lane.judged(cutoff).expect("judge");
        assert_eq!(judged.len(), 1);
        let swapped = old.with_file_name("swapped");
        std::fs::write(&swapped, "someone else's").expect("write");
        let file = std::fs::File::options()
            .write(true)
            .open(&swapped)
            .expect("open");
        file.set_modified(SystemTime::UNIX_EPOCH)
            .expect("set_modified");
        std::fs::rename(&swapped, &old).expect("rename");
        assert!(!lane.remove_judged(&judged[0], cutoff).expect("remove"));
        assert_eq!(std::fs::read(&old).expect("kept"), b"someone else's");
    }

    /// The judged file itself, written to since the judgement, is not old any more: it stays.
    #[test]
    fn a_file_modified_after_the_judgement_is_left_alone() {
        let (_tmp, lane, old) = lane_with_old_file();
        let cutoff = cutoff(Duration::from_secs(86_400));
        let judged = lane.judged(cutoff).expect("judge");
        std::fs::write(&old, "written again").expect("write");
        assert!(!lane.remove_judged(&judged[0], cutoff).expect("remove"));
        assert!(old.exists());
        // Judged again, it is old by a later cutoff, and goes.
        let later = SystemTime::now() + Duration::from_secs(60);
        let judged = lane.judged(later).expect("judge");
        assert!(lane.remove_judged(&judged[0], later).expect("remove"));
        assert!(!old.exists());
    }
}
