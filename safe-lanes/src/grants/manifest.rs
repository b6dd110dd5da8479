//! The manifest file (`workflow.json`): reading it, validating it, and rewriting it atomically
//! under a lock.
//!
//! Only three keys belong to safe-lanes — `folder_access`, `folder_access_requests` and
//! `folder_access_changelog`; every other key is kept as it was, in its place. Reading never
//! writes. Every change runs under an exclusive `flock` of a lock file beside the manifest,
//! re-reads the manifest under that lock, and replaces it with `rename(2)` of a complete,
//! `fsync`ed temporary file: the CLI and a running server never lose each other's changes, and
//! a reader never sees half a file. An invalid manifest is refused (`invalid_manifest`) and
//! left untouched; so is one that names a key twice in any object (JSON readers disagree on
//! which of the two counts, and keeping one would erase the other on the next write).
//!
//! Inside the three lists, each entry keeps the keys that are not ours too
//! ([`OtherKeys`](super::model::OtherKeys)), written back after ours.
//!
//! A writer killed between creating its temporary file and renaming it leaves that file
//! behind; every change sweeps such files first, under the lock, when no writer of ours can be
//! in the middle of a write.

use std::collections::HashSet;
use std::ffi::OsString;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{FileType, FlockOperation, Mode, OFlags};
use rustix::io::Errno;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::model::{Action, Change, Entry, Grant, Request};
use crate::audit::AuditLog;
use crate::beneath::{Ambient, Anchor, OwnFile, Publish, Symlinks};
use crate::error::{Error, Result, Shown};
use crate::input::Name;

/// The manifest key holding approved grants.
pub(crate) const GRANTS_KEY: &str = "folder_access";
/// The manifest key holding pending requests.
pub(crate) const REQUESTS_KEY: &str = "folder_access_requests";
/// The manifest key holding the changelog.
pub(crate) const CHANGELOG_KEY: &str = "folder_access_changelog";

/// Why a record was written by a later change ([`Manifest::update_recorded`]).
const RECOVERED: &str =
    "written by the next change: the process that made this one ended before recording it";

/// The audit record of a manifest change.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Record {
    /// Its event.
    pub(crate) event: String,
    /// Who made the change.
    pub(crate) actor: String,
    /// What changed.
    pub(crate) fields: Value,
}

/// A change written, or about to be, whose record is not written yet: kept in the lock file.
#[derive(Debug, Serialize, Deserialize)]
struct Pending {
    record: Record,
    /// The changelog entry the change adds, by which the next change knows it was written.
    entry: Value,
    /// The change's id, also in its record (`id`), by which the next change knows the record
    /// was written (then it is not written again).
    #[serde(default)]
    id: String,
    /// Where the log ended before the record: it is looked for from there.
    #[serde(default)]
    since: u64,
}

/// The most a lock file's pending record may hold (it is one record and one changelog entry;
/// anything larger was not written by a change).
const MAX_PENDING_BYTES: u64 = 1 << 20;

/// The largest manifest read, in bytes.
const MAX_MANIFEST_BYTES: u64 = 16 << 20;

/// A manifest file, addressed through a descriptor of its directory.
#[derive(Debug)]
pub(crate) struct Manifest {
    path: PathBuf,
    dir: Anchor,
    name: OsString,
}

/// The identity of one version of the manifest: it changes with every write (each write is a
/// new inode renamed into place).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp(Option<(u64, u64, i64, i64, i64)>);

/// A parsed, validated manifest.
#[derive(Clone, Debug, Default)]
pub struct Document {
    /// Every top-level key, in file order (the three safe-lanes keys included as read).
    map: Map<String, Value>,
    /// `folder_access`.
    pub grants: Vec<Grant>,
    /// `folder_access_requests`.
    pub requests: Vec<Request>,
    /// `folder_access_changelog`.
    pub changelog: Vec<Change>,
}

impl Manifest {
    /// Address the manifest at `path` (the human's choice: its directory is opened by path,
    /// following links; the file itself must not be a symbolic link).
    ///
    /// # Errors
    ///
    /// `not_found` when the directory is missing, `invalid_manifest` when `path` names no
    /// file.
    pub(crate) fn open(path: &Path) -> Result<Self> {
        let path = std::path::absolute(path).map_err(|e| Error::io("absolute", path, e))?;
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(Error::InvalidManifest {
                path: Shown::path(&path),
                why: "not a file path".to_owned(),
            });
        };
        let why = Ambient::because("the manifest's folder, chosen by the human");
        let dir = Anchor::open_ambient(parent, why)?;
        let parent = crate::beneath::location_of(dir.as_fd()).unwrap_or_else(|_| parent.into());
        Ok(Self {
            path: parent.join(name),
            dir,
            name: name.to_owned(),
        })
    }

    /// The manifest's path (its directory canonical).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The changelog's archive beside the manifest.
    pub(crate) fn archive(&self) -> super::archive::Archive<'_> {
        let dir = self.path.parent().unwrap_or(Path::new("/")).to_path_buf();
        super::archive::Archive::of(&self.dir, dir, &self.name)
    }

    /// The whole changelog, oldest first: the archived entries, then the manifest's.
    ///
    /// # Errors
    ///
    /// As [`Manifest::load`], and as [`super::archive::Archive::history`].
    pub(crate) fn history(&self) -> Result<Vec<Change>> {
        let (_, doc) = self.load()?;
        self.archive().history(doc.changelog)
    }

    /// The current version's identity, without reading it.
    ///
    /// # Errors
    ///
    /// `io` when the directory cannot be read.
    pub(crate) fn stamp(&self) -> Result<Stamp> {
        match self.dir.stat_entry(self.name()?) {
            Ok(st) => Ok(stamp_of(&st)),
            Err(Error::NotFound { .. }) => Ok(Stamp(None)),
            Err(e) => Err(e),
        }
    }

    /// Read and validate the manifest (a missing file is an empty manifest).
    ///
    /// # Errors
    ///
    /// `invalid_manifest` when it is not valid JSON, not an object, too large, a symbolic
    /// link, or breaks a grant rule; `io` when it cannot be read.
    pub(crate) fn load(&self) -> Result<(Stamp, Document)> {
        let fd = match self.dir.open_read(self.name()?.as_rel(), Symlinks::Deny) {
            Ok(fd) => fd,
            Err(Error::NotFound { .. }) => return Ok((Stamp(None), Document::default())),
            Err(Error::SymlinkEscape { .. }) => {
                return Err(self.invalid("it is a symbolic link; a manifest must be a file".into()));
            }
            Err(e) => return Err(e),
        };
        let st = rustix::fs::fstat(&fd).map_err(|e| Error::io("fstat", &self.path, e))?;
        if st.st_size as u64 > MAX_MANIFEST_BYTES {
            return Err(self.invalid(format!("larger than {MAX_MANIFEST_BYTES} bytes")));
        }
        let mut bytes = Vec::new();
        // Capped again as it is read: the file may grow after the `fstat`.
        std::fs::File::from(fd)
            .take(MAX_MANIFEST_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io("read", &self.path, e))?;
        if bytes.len() as u64 > MAX_MANIFEST_BYTES {
            return Err(self.invalid(format!("larger than {MAX_MANIFEST_BYTES} bytes")));
        }
        let doc = Document::parse(&bytes).map_err(|why| self.invalid(why))?;
        Ok((stamp_of(&st), doc))
    }

    /// Apply `change` to the current manifest under the lock, write the result atomically, and
    /// append the change's audit record (from `record`), still under the lock. Nothing is
    /// written when `change` fails or the result is invalid. What a crash between the write
    /// and the record would lose is kept in the lock file until the record is written, and the
    /// next change writes it first, as recovered (ADR 0009): every changelog entry has its
    /// record. There is no way to change the manifest without one.
    ///
    /// # Errors
    ///
    /// Whatever `change` returns; `invalid_manifest` when the current file is invalid; `io`
    /// (when only the record could not be written, the change stays written, and its record
    /// is written by the next change).
    pub(crate) fn update_recorded<T>(
        &self,
        audit: &AuditLog,
        change: impl FnOnce(&mut Document) -> Result<T>,
        record: impl FnOnce(&T) -> Record,
    ) -> Result<super::Recorded<T>> {
        let lock = self.lock()?;
        self.sweep();
        let (_, mut doc) = self.load()?;
        self.recover(&lock, &doc, audit)?;
        let entries = doc.changelog.len();
        let out = change(&mut doc)?;
        doc.validate().map_err(|why| self.invalid(why))?;
        let mut record = record(&out);
        let id = crate::random::random_hex();
        if let Value::Object(fields) = &mut record.fields {
            fields.insert("id".into(), Value::from(id.as_str()));
        }
        let entry = doc
            .changelog
            .get(entries)
            .map(|entry| serde_json::to_value(entry).unwrap_or(Value::Null));
        // Older request entries move to the archive beside the manifest (the change's own is
        // the newest, and stays). Where that fails, the human's changes go on (the manifest
        // keeps the entries meanwhile), but another filing is refused: an agent filing in a
        // loop would otherwise grow the manifest until no change at all could be written.
        if let Err(e) = self.archive().rotate(&mut doc.changelog) {
            if record.event == Action::Request.event() {
                return Err(e);
            }
            tracing::warn!(error = %e, "the changelog's older entries could not be archived");
        }
        if let Some(entry) = entry {
            let pending = Pending {
                record: record.clone(),
                entry,
                id: id.clone(),
                since: audit.end()?,
            };
            self.keep_pending(&lock, &pending)?;
        }
        crate::crash::point("manifest.pending");
        if let Err(e) = self.write(&doc) {
            let _ = self.clear_pending(&lock);
            return Err(e);
        }
        crate::crash::point("manifest.written");
        // The change is made: from here on it is reported as made, recorded or not.
        if let Err(e) = audit.append(&record.event, &record.actor, &record.fields) {
            // Kept in the lock file: the next change writes it, and `audit verify` says one is
            // pending.
            tracing::warn!(error = %e, "a grant change was made but could not be recorded yet");
            return Ok(super::Recorded::new(out, false));
        }
        crate::crash::point("manifest.recorded");
        if let Err(e) = self.clear_pending(&lock) {
            tracing::warn!(error = %e, "a recorded grant change stays pending in the lock file");
        }
        Ok(super::Recorded::new(out, true))
    }

    /// Whether a change's record waits in the lock file (its change was made, its record not
    /// yet written): what `audit verify` reports.
    ///
    /// # Errors
    ///
    /// `insecure_root` for a lock file that is not a regular file; `io`.
    pub(crate) fn pending_record(&self) -> Result<bool> {
        let Some(lock) = self.lock_file(false)? else {
            return Ok(false);
        };
        let Some(pending) = self.read_pending(&lock)? else {
            return Ok(false);
        };
        let (_, doc) = self.load()?;
        Ok(landed(&doc, &pending))
    }

    /// The pending record the lock file holds, if it holds one.
    fn read_pending(&self, lock: &OwnedFd) -> Result<Option<Pending>> {
        let mut bytes = Vec::new();
        crate::fd::ReadAt::new(lock.as_fd())
            .take(MAX_PENDING_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io("read", &self.path, e))?;
        Ok(serde_json::from_slice::<Pending>(&bytes).ok())
    }

    /// Write the record a crash left in the lock file, if its change was written (its
    /// changelog entry is in `doc`); then forget it.
    fn recover(&self, lock: &OwnedFd, doc: &Document, audit: &AuditLog) -> Result<()> {
        let st = rustix::fs::fstat(lock).map_err(|e| Error::io("fstat", &self.path, e))?;
        if st.st_size == 0 {
            return Ok(());
        }
        if let Some(pending) = self.read_pending(lock)? {
            let landed = landed(doc, &pending);
            // Written before its process died (after the record, before the lock file was
            // cleared): not again.
            let written = !pending.id.is_empty()
                && audit.find_after(pending.since, &pending.id, |r| {
                    r["event"] == pending.record.event.as_str()
                })?;
            if landed && !written {
                let mut fields = pending.record.fields;
                if let Value::Object(map) = &mut fields {
                    map.insert("recovered".into(), Value::from(RECOVERED));
                }
                audit.append(&pending.record.event, &pending.record.actor, &fields)?;
            }
        }
        self.clear_pending(lock)
    }

    /// Keep `pending` in the lock file, durably, until its record is written (nothing of it
    /// when it cannot be written whole).
    fn keep_pending(&self, lock: &OwnedFd, pending: &Pending) -> Result<()> {
        let bytes = serde_json::to_vec(pending)
            .map_err(|e| Error::io("serialize", "a pending record", std::io::Error::other(e)))?;
        self.clear_pending(lock)?;
        let kept = crate::fd::write_all_at(lock.as_fd(), &bytes, 0)
            .map_err(|e| Error::io("write", &self.path, e))
            .and_then(|()| rustix::fs::fsync(lock).map_err(|e| Error::io("fsync", &self.path, e)));
        if kept.is_err() {
            let _ = self.clear_pending(lock);
        }
        kept
    }

    fn clear_pending(&self, lock: &OwnedFd) -> Result<()> {
        rustix::fs::ftruncate(lock, 0).map_err(|e| Error::io("ftruncate", &self.path, e))
    }

    /// An exclusive lock on `.<name>.lock` beside the manifest, released when dropped.
    fn lock(&self) -> Result<OwnedFd> {
        let fd = self
            .lock_file(true)?
            .ok_or_else(|| Error::io("open", &self.path, Errno::NOENT))?;
        rustix::fs::flock(&fd, FlockOperation::LockExclusive)
            .map_err(|e| Error::io("flock", &self.path, e))?;
        Ok(fd)
    }

    /// For `init`: a lock file that is not a regular file (a FIFO, a directory, a link) is
    /// moved aside, and one holding no pending record but bytes (a huge file put there) is
    /// emptied. What was done, if anything.
    ///
    /// # Errors
    ///
    /// `io`.
    pub(crate) fn repair_lock(&self) -> Result<Option<String>> {
        let lock_name = self.lock_name();
        let name = Name::new(&lock_name)?;
        let st = match self.dir.stat_entry(name) {
            Ok(st) => st,
            Err(Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let shown = Shown::path(&self.path.with_file_name(&lock_name));
        let kind = FileType::from_raw_mode(st.st_mode);
        if kind == FileType::Symlink {
            self.dir.remove_file(name)?;
            return Ok(Some(format!(
                "removed the symbolic link at the manifest's lock file {shown}"
            )));
        }
        if kind != FileType::RegularFile {
            let mut aside = lock_name.clone();
            aside.push(format!(".broken-{}", crate::random::random_hex()));
            self.dir.rename_new(name, Name::new(&aside)?)?;
            return Ok(Some(format!(
                "moved {} that stood at the manifest's lock file {shown} aside to {}",
                crate::beneath::kind_of(&st),
                Shown::bytes(aside.as_encoded_bytes())
            )));
        }
        let lock = self.lock()?;
        if st.st_size > 0 && self.read_pending(&lock)?.is_none() {
            self.clear_pending(&lock)?;
            return Ok(Some(format!(
                "emptied the manifest's lock file {shown}, which held {} bytes and no pending record",
                st.st_size
            )));
        }
        Ok(None)
    }

    /// The name of the lock file beside the manifest.
    pub(crate) fn lock_name(&self) -> OsString {
        let mut lock_name = OsString::from(".");
        lock_name.push(&self.name);
        lock_name.push(".lock");
        lock_name
    }

    /// The lock file (made when missing and `create`; `None` when missing otherwise). It must
    /// be a regular file: anything else (a FIFO would block, a directory cannot be locked for
    /// writing) is `insecure_root`, which `safe-lanes init` repairs.
    fn lock_file(&self, create: bool) -> Result<Option<OwnedFd>> {
        let mut flags = OFlags::RDWR | OFlags::NONBLOCK;
        if create {
            flags |= OFlags::CREATE;
        }
        let lock_name = self.lock_name();
        let opened =
            self.dir
                .open_own_file(Name::new(&lock_name)?, flags, Mode::from_raw_mode(0o600));
        match opened {
            Ok(OwnFile::Open(fd)) => Ok(Some(fd)),
            Ok(OwnFile::Broken(kind)) => Err(self.broken_lock(kind)),
            Err(Error::NotFound { .. }) if !create => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn broken_lock(&self, kind: &str) -> Error {
        Error::InsecureRoot {
            path: Shown::path(&self.path.with_file_name(self.lock_name())),
            why: format!(
                "the manifest's lock file is {kind}: grant changes cannot be made until \
                 `safe-lanes init` repairs it (listing the grants still works)"
            ),
        }
    }

    /// Remove the temporary files an earlier writer was killed before renaming: every regular
    /// file named as [`Anchor::write_file`] stages this manifest. Only called under the lock,
    /// so none of them belongs to a write in progress. Best effort: what cannot be listed or
    /// removed is left for the next change, which is never refused for it (a revoke must not
    /// wait on a leftover).
    fn sweep(&self) {
        let (Ok(name), Ok(entries)) = (self.name(), self.dir.entries()) else {
            return;
        };
        for (entry, st) in entries {
            let regular = FileType::from_raw_mode(st.st_mode) == FileType::RegularFile;
            if regular
                && Anchor::is_staging_name(&entry, name)
                && let Ok(leftover) = Name::new(&entry)
            {
                let _ = self.dir.remove_file(leftover);
            }
        }
    }

    /// Write `doc` to a temporary file, `fsync` it, rename it over the manifest, `fsync` the
    /// directory.
    fn write(&self, doc: &Document) -> Result<()> {
        let mut bytes = doc.to_json().map_err(|why| self.invalid(why))?;
        bytes.push(b'\n');
        if bytes.len() as u64 > MAX_MANIFEST_BYTES {
            // Never write what could not be read back.
            return Err(Error::TooLarge {
                what: "the manifest, in bytes,",
                limit: MAX_MANIFEST_BYTES,
            });
        }
        // Keep the mode the human gave the manifest.
        let mode = self
            .dir
            .stat_entry(self.name()?)
            .map_or(0o600, |st| crate::beneath::permissions(&st) & 0o777);
        self.dir
            .write_file(self.name()?, &bytes, mode, Publish::Replace)
    }

    /// The manifest's file name in its directory.
    fn name(&self) -> Result<Name<'_>> {
        Name::new(&self.name)
    }

    fn invalid(&self, why: String) -> Error {
        Error::InvalidManifest {
            path: Shown::path(&self.path),
            why,
        }
    }
}

/// Whether the change `pending` is for was written: its changelog entry is in `doc`.
fn landed(doc: &Document, pending: &Pending) -> bool {
    doc.changelog
        .iter()
        .any(|c| serde_json::to_value(c).ok().as_ref() == Some(&pending.entry))
}

// `st_mtime_nsec` is `i64` on some systems and not on others.
#[allow(clippy::unnecessary_cast)]
fn stamp_of(st: &rustix::fs::Stat) -> Stamp {
    let (dev, ino) = crate::beneath::stat_identity(st);
    Stamp(Some((
        dev,
        ino,
        st.st_mtime,
        st.st_mtime_nsec as i64,
        st.st_size,
    )))
}

impl Document {
    /// The top-level key `key`, as read (any key, ours or not).
    pub fn top_level(&self, key: &str) -> Option<&Value> {
        self.map.get(key)
    }

    /// Parse and validate manifest JSON.
    ///
    /// # Errors
    ///
    /// Why it is invalid, in words: not JSON, not an object, a key named twice in any object
    /// (which key, and where), or a broken rule.
    pub fn parse(bytes: &[u8]) -> std::result::Result<Self, String> {
        let Value::Object(map) = super::strict::parse(bytes)? else {
            return Err("the top level is not a JSON object".to_owned());
        };
        let doc = Document {
            grants: field(&map, GRANTS_KEY)?,
            requests: field(&map, REQUESTS_KEY)?,
            changelog: field(&map, CHANGELOG_KEY)?,
            map,
        };
        doc.validate()?;
        Ok(doc)
    }

    /// The manifest as JSON: every other key as it was, the three safe-lanes keys updated in
    /// place (a key that was absent is added only when it has entries).
    ///
    /// # Errors
    ///
    /// Why it cannot be written (a path that is not UTF-8, which JSON cannot hold).
    pub fn to_json(&self) -> std::result::Result<Vec<u8>, String> {
        let mut map = self.map.clone();
        put(&mut map, GRANTS_KEY, &self.grants)?;
        put(&mut map, REQUESTS_KEY, &self.requests)?;
        put(&mut map, CHANGELOG_KEY, &self.changelog)?;
        serde_json::to_vec_pretty(&Value::Object(map)).map_err(|e| e.to_string())
    }

    /// The whole document as a JSON value (for round-trip checks).
    ///
    /// # Errors
    ///
    /// As [`Document::to_json`].
    pub fn to_value(&self) -> std::result::Result<Value, String> {
        serde_json::from_slice(&self.to_json()?).map_err(|e| e.to_string())
    }

    /// The rules every stored manifest obeys: unique ids, unique aliases and environment keys,
    /// absolute paths other than `/`, and at most one pending request per alias.
    ///
    /// # Errors
    ///
    /// Which rule is broken, in words.
    pub fn validate(&self) -> std::result::Result<(), String> {
        let mut ids = HashSet::new();
        let mut keys = HashSet::new();
        for g in &self.grants {
            if !ids.insert(g.id.as_str()) {
                return Err(format!("grant id `{}` appears twice", Shown::text(&g.id)));
            }
            if !keys.insert(g.alias.env_key()) {
                return Err(format!(
                    "alias `{}` appears twice (or shares its environment key {})",
                    g.alias,
                    g.alias.env_key()
                ));
            }
            if !g.path.is_absolute() {
                return Err(format!("grant `{}` has a relative path", g.alias));
            }
            if g.path == Path::new("/") {
                return Err(format!("grant `{}` grants `/`", g.alias));
            }
            if !normalized(&g.path) {
                return Err(format!(
                    "grant `{}` has a path with `.` or `..` in it",
                    g.alias
                ));
            }
        }
        let mut pending = HashSet::new();
        for r in &self.requests {
            if !ids.insert(r.id.as_str()) {
                return Err(format!("request id `{}` appears twice", Shown::text(&r.id)));
            }
            if !pending.insert(r.alias.as_str()) {
                return Err(format!("two pending requests for alias `{}`", r.alias));
            }
            if r.path
                .as_ref()
                .is_some_and(|p| !p.is_absolute() || !normalized(p))
            {
                return Err(format!(
                    "request `{}` proposes a relative or unnormalized path",
                    r.id
                ));
            }
        }
        Ok(())
    }
}

/// No `.` or `..` component (the form in which paths are stored).
fn normalized(path: &Path) -> bool {
    !path
        .components()
        .any(|c| matches!(c, Component::CurDir | Component::ParentDir))
}

/// Deserialize `map[key]` as a list (absent or `null` is empty).
fn field<T: DeserializeOwned>(
    map: &Map<String, Value>,
    key: &str,
) -> std::result::Result<Vec<T>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|e| format!("`{key}`: {}", Shown::text(&e.to_string()))),
    }
}

/// Set `map[key]` to `items`, in place; an absent key is added only for a non-empty list.
fn put<T: Entry>(
    map: &mut Map<String, Value>,
    key: &str,
    items: &[T],
) -> std::result::Result<(), String> {
    if items.is_empty() && !map.contains_key(key) {
        return Ok(());
    }
    let value = items
        .iter()
        .map(stored)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map(Value::Array)
        .map_err(|e| format!("`{key}`: {e}"))?;
    match map.get_mut(key) {
        Some(slot) => *slot = value,
        None => {
            map.insert(key.to_owned(), value);
        }
    }
    Ok(())
}

/// One entry as stored: its own keys, then the keys that are not ours as they were read (one
/// of ours always wins over an other key of the same name).
pub(super) fn stored<T: Entry>(item: &T) -> serde_json::Result<Value> {
    let mut value = serde_json::to_value(item)?;
    if let Value::Object(object) = &mut value {
        for (key, other) in item.other_keys() {
            object.entry(key.as_str()).or_insert_with(|| other.clone());
        }
    }
    Ok(value)
}
