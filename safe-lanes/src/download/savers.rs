//! Which lane handles may have left a save unrecorded: the registry `<root>/.savers`.
//!
//! A save is published, then recorded, then unmarked (ADR 0009); a process that dies in
//! between leaves a marked file for the next lane to record as recovered. Finding such files
//! means reading the whole lane, so a lane reads it only when a crash may have happened:
//!
//! - every handle that saves holds an entry in the registry ([`Held`]) from before its first
//!   save until it is dropped, and an entry whose lock is free was left by a handle whose
//!   process died;
//! - the registry's [`KNOWN`] file says that every file left unrecorded before the first entry
//!   was made has been recorded; without it (a new registry, a root a previous version used,
//!   a registry removed by hand) nothing is known.
//!
//! A new handle reads the lane when it finds a dead entry or no [`KNOWN`] file. Once every
//! marked file is recorded it removes the dead entries and writes [`KNOWN`]; if one could not
//! be recorded, both stay as they are, and the next handle tries again.

use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};

use crate::audit::AuditLog;
use crate::beneath::Anchor;
use crate::error::{Code, Error, Result, Shown};
use crate::fd::{ReadAt, write_all};
use crate::held::{Held, Holder, holder};
use crate::input::Name;
use crate::root::{SAVERS_DIR, StateRoot};

/// The registry's record that what happened before its entries is known (module docs). Hidden,
/// so it is never taken for an entry.
const KNOWN: &str = ".known";

/// How many dead entries one handle holds (locked) at once; more still make it read the lane,
/// and are removed by the handles after it.
const MAX_DEAD_HELD: usize = 64;

/// The registry of a lane's savers.
#[derive(Debug)]
pub(super) struct Savers {
    /// `<root>/.savers`, or why it could not be opened or made (a read-only root; a registry
    /// that is not a private directory of this user, which `safe-lanes init` repairs): then
    /// the handle reads the lane, and cannot save.
    dir: std::result::Result<Anchor, Unusable>,
    /// Whether an entry is made durable (`fsync` of the registry) before a save publishes.
    durable: bool,
}

/// Why the registry cannot be used.
#[derive(Debug)]
struct Unusable {
    /// It is there but not private to this user (another user's, a link, a file).
    insecure: bool,
    why: String,
}

/// A handle's entry in the registry, removed when dropped.
#[derive(Debug)]
pub(super) struct Registration {
    dir: Anchor,
    held: Held<OwnedFd>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Removed while still locked (see `crate::held`).
        let _ = Name::new(&self.held.name).and_then(|name| self.dir.remove_file(name));
    }
}

/// What the registry said before a handle's first use of the lane.
#[derive(Debug)]
pub(super) struct Evidence<'s> {
    /// The registry, when there is one.
    dir: Option<&'s Anchor>,
    /// What happened before is unknown: no [`KNOWN`] file, or no registry to read.
    unknown: bool,
    /// The entries of handles whose process died, locked by this handle.
    dead: Vec<(String, OwnedFd)>,
    /// The earliest log offset the dead handles' records can be at.
    since: u64,
}

impl Savers {
    /// The registry of `root`.
    ///
    /// # Errors
    ///
    /// None: when `.savers` cannot be opened or made, or is not a private directory of the
    /// current user, the handle goes without it: it reads the lane (listing works), and every
    /// save is refused with the reason (`insecure_root` for a registry others could change).
    pub(super) fn open(root: &StateRoot) -> Result<Self> {
        let dir = root.savers().map_err(|e| Unusable {
            insecure: e.code() == Code::InsecureRoot,
            why: e.to_string(),
        });
        Ok(Self { dir, durable: true })
    }

    /// Whether entries are made durable before a save publishes (for durable lanes).
    pub(super) fn set_durable(&mut self, durable: bool) {
        self.durable = durable;
    }

    /// Register a handle about to save.
    ///
    /// # Errors
    ///
    /// `io` without a registry, or when the entry cannot be made: the handle must not save
    /// unregistered, since a crash of it would go unseen.
    pub(super) fn register(&self, audit: &AuditLog) -> Result<Registration> {
        let dir = self.dir()?;
        let held = Held::create_file(dir)?;
        // Where the log stood: whatever this handle records comes after it, which is where a
        // reader of the lane looks for records of the files it finds marked.
        let since = audit.end()?;
        write_all(held.entry.as_fd(), since.to_string().as_bytes())
            .map_err(|e| Error::io("write", Shown::text(SAVERS_DIR), e))?;
        if self.durable {
            dir.sync()?;
        }
        Ok(Registration {
            dir: dir.try_clone()?,
            held,
        })
    }

    /// A save is about to publish: until [`Unsettled::settled`], anything that ends it (an
    /// error, a panic) leaves evidence for the next handle (see [`Unsettled`]).
    pub(super) fn unsettled(&self, audit: &AuditLog) -> Unsettled<'_> {
        Unsettled {
            savers: self,
            since: audit.end().unwrap_or(0),
            armed: true,
        }
    }

    /// Leave an entry nobody holds, as a dead handle's, saying its records come after the log
    /// offset `since`: the next handle reads the lane.
    fn leave_evidence(&self, since: u64) {
        let left = self.dir().and_then(|dir| {
            let held = Held::create_file(dir)?;
            write_all(held.entry.as_fd(), since.to_string().as_bytes())
                .map_err(|e| Error::io("write", Shown::text(SAVERS_DIR), e))
        });
        if let Err(e) = left {
            tracing::warn!(error = %e, "a save may have left a file unrecorded, and the registry of savers cannot say so");
        }
    }

    /// The registry's directory, or why there is none (`insecure_root` for one others could
    /// change, else `io`).
    fn dir(&self) -> Result<&Anchor> {
        self.dir.as_ref().map_err(|unusable| {
            if unusable.insecure {
                Error::InsecureRoot {
                    path: Shown::text(SAVERS_DIR),
                    why: format!(
                        "{}; saves are refused until `safe-lanes init` repairs it",
                        unusable.why
                    ),
                }
            } else {
                let why = std::io::Error::other(unusable.why.clone());
                Error::io("open", Shown::text(SAVERS_DIR), why)
            }
        })
    }

    /// What the registry says now: whether a handle died, or nothing is known.
    pub(super) fn evidence(&self) -> Evidence<'_> {
        let mut evidence = Evidence {
            dir: self.dir.as_ref().ok(),
            unknown: true,
            dead: Vec::new(),
            since: u64::MAX,
        };
        let Some((dir, entries)) = self
            .dir
            .as_ref()
            .ok()
            .and_then(|dir| Some((dir, dir.entries().ok()?)))
        else {
            return evidence;
        };
        for (name, st) in entries {
            if name == KNOWN {
                evidence.unknown = false;
                continue;
            }
            match holder(dir, &name, &st) {
                // Left for the handles after this one (its lock went with the descriptor).
                Holder::Abandoned(_) if evidence.dead.len() >= MAX_DEAD_HELD => {}
                Holder::Abandoned(locked) => {
                    let name = name.to_string_lossy().into_owned();
                    evidence.since = evidence.since.min(since_of(&locked));
                    evidence.dead.push((name, locked));
                }
                Holder::Unknown => evidence.unknown = true,
                Holder::Stale => {
                    let _ = Name::new(&name).and_then(|name| dir.remove_file(name));
                }
                Holder::Live | Holder::Making | Holder::None => {}
            }
        }
        evidence
    }
}

/// The log offset a saver's entry holds (0, the whole log, when it holds none).
fn since_of(entry: &OwnedFd) -> u64 {
    let mut text = String::new();
    let read = ReadAt::new(entry.as_fd())
        .take(32)
        .read_to_string(&mut text);
    read.ok()
        .and_then(|_| text.trim().parse().ok())
        .unwrap_or(0)
}

impl Evidence<'_> {
    /// Whether the lane must be read for files a dead handle left unrecorded.
    pub(super) fn crash_possible(&self) -> bool {
        self.unknown || !self.dead.is_empty()
    }

    /// The log offset from which the dead handles' records are (0 when nothing is known).
    pub(super) fn since(&self) -> u64 {
        if self.unknown { 0 } else { self.since }
    }

    /// The lane was read and every marked file recorded: the dead handles' entries go, and
    /// from now on what happened before is known.
    pub(super) fn settled(self) {
        let Some(dir) = self.dir else {
            return;
        };
        for (name, _locked) in &self.dead {
            if let Err(e) = Name::new(name).and_then(|name| dir.remove_all(name)) {
                tracing::warn!(error = %e, entry = %Shown::text(name), "could not remove a dead saver's entry");
            }
        }
        if self.unknown
            && let Err(e) = Name::new(KNOWN).and_then(|known| dir.create_new(known, 0o600))
            && e.raw_os_error() != Some(rustix::io::Errno::EXIST.raw_os_error())
        {
            tracing::warn!(error = %e, "could not record that the lane was read");
        }
    }
}

/// A save between publishing and knowing its file recorded (or gone). Dropped armed (an error
/// or a panic came first), it leaves an entry nobody holds ([`Savers::leave_evidence`]), so the
/// next handle, in any process, reads the lane and records what this save left: a live process
/// whose save failed half-way is treated as one that died there.
#[derive(Debug)]
pub(super) struct Unsettled<'s> {
    savers: &'s Savers,
    /// Where the log stood before the file was published.
    since: u64,
    armed: bool,
}

impl Unsettled<'_> {
    /// The file is recorded, or removed: nothing is left to find.
    pub(super) fn settled(mut self) {
        self.armed = false;
    }
}

impl Drop for Unsettled<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.savers.leave_evidence(self.since);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn savers() -> (tempfile::TempDir, Savers, std::sync::Arc<AuditLog>) {
        let tmp = tempfile::tempdir().unwrap();
        let root = StateRoot::open(&tmp.path().join("state")).unwrap();
        let savers = Savers::open(&root).unwrap();
        (tmp, savers, root.audit())
    }

    /// A save that ends between publishing and settling (an error, a panic) leaves an entry
    /// nobody holds, exactly as a dead handle would; one that settles leaves nothing.
    #[test]
    fn an_unsettled_save_leaves_a_dead_entry_and_a_settled_one_nothing() {
        let (_tmp, savers, audit) = savers();
        savers.evidence().settled();
        assert!(!savers.evidence().crash_possible(), "known, no saver died");
        savers.unsettled(&audit).settled();
        assert!(!savers.evidence().crash_possible());
        drop(savers.unsettled(&audit));
        let evidence = savers.evidence();
        assert_eq!(evidence.dead.len(), 1);
        evidence.settled();
        assert!(!savers.evidence().crash_possible(), "removed once settled");
        let panicked = std::panic::catch_unwind(|| {
            let _unsettled = savers.unsettled(&audit);
            panic!("between publishing and recording");
        });
        assert!(panicked.is_err());
        assert!(savers.evidence().crash_possible(), "a panic leaves it too");
    }

    /// Without a registry a handle may read the lane, but not save.
    #[test]
    fn without_a_registry_nothing_registers() {
        let savers = Savers {
            dir: Err(Unusable {
                insecure: false,
                why: "read-only file system".to_owned(),
            }),
            durable: true,
        };
        assert!(savers.evidence().crash_possible());
        let tmp = tempfile::tempdir().unwrap();
        let root = StateRoot::open(&tmp.path().join("state")).unwrap();
        let refused = savers.register(&root.audit()).unwrap_err();
        assert_eq!(refused.code(), Code::Io);
        assert!(refused.to_string().contains("read-only"), "{refused}");
    }
}
