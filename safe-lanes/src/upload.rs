//! Which local files may leave the machine: the upload-source allowlist and its hard guard.
//!
//! An agent that can say "upload `~/.ssh/id_ed25519`" can exfiltrate anything the user can
//! read. [`UploadSource`] allows a source only from folders the human named:
//!
//! - `<root>/.downloads`, always (re-uploading a received file is a direct sequence);
//! - each line of `<root>/.upload-roots` (absolute paths; blank lines and lines starting with
//!   `#` are ignored; a relative, missing or non-directory entry is ignored and *reported*);
//! - `SAFE_LANES_UPLOAD_ROOTS`, then `GWSA_UPLOAD_ROOTS` (`:`-separated).
//!
//! The default is therefore "only `.downloads`". Each root is opened as an [`Anchor`] and its
//! canonical path taken from the kernel when the allowlist is loaded.
//!
//! # Resolution
//!
//! [`UploadSource::open`] takes an absolute path and returns an open, read-only handle to
//! exactly the file that was checked. Nothing outside the allowed roots is ever looked at: what
//! lies there — whether a file exists, where a link points — cannot change the answer, so the
//! call is no oracle for the rest of the disk.
//!
//! 1. Lexical checks: absolute (`relative_path`), no NUL (`nul_byte`), no trailing `/`, `.` or
//!    `..` (`not_regular_file`), at most `PATH_MAX` bytes (`invalid_argument`).
//! 2. **The path as written** ([`AbsPath::spelled`]: `.` and empty components dropped, `..`
//!    taking away the component before it). Spelled under the state root but not under
//!    `.downloads`: `state_root`. Not starting with an allowed root's components — its
//!    canonical path, or an entry as the human wrote it (`/home/u/Docs` when that is a link
//!    to `/data/docs`) — `outside_allowlist`, naming only the path given. Neither opens
//!    anything.
//! 3. **The open**: the rest of the path is opened beneath that root's descriptor with
//!    `RESOLVE_NO_SYMLINKS`. Success means the file is beneath the root and its canonical
//!    path is the root's followed by the rest. A missing file is `not_found`: it is missing
//!    inside an allowed root.
//! 4. **Symbolic links**: when a link is on the way, the rest is walked beneath the root one
//!    component at a time. Each link is read where it lies (inside the root) and expanded by
//!    its text: a relative target continues from the link's directory (its `..` climbs real
//!    directories already entered; above the root it continues from the root's parent, read
//!    as written), an absolute target is read as written with what follows it. Wherever the
//!    text leads, step 2 decides again before anything there is touched: a link into another
//!    allowed root is followed beneath that root's descriptor, a link anywhere else is
//!    `outside_allowlist` naming the path given, never the target. The file is finally opened
//!    beneath its root with `RESOLVE_NO_SYMLINKS`, so what was walked is what is opened; a
//!    change between two steps restarts the walk (at most three times). As the kernel
//!    would: a link whose text ends in `/` names a directory (`not_found` when it leads to
//!    a file), and no link is followed on a mount that follows none (`nosymfollow`:
//!    `symlink_escape`).
//! 5. **Hard guard**: anything under a state root other than its `.downloads` is refused
//!    (`state_root`), even when an allowlist entry covers it by mistake — the state root in
//!    use, and every other one the environment or the defaults name (`SAFE_LANES_ROOT`,
//!    `GWSA_ROOT`, `$XDG_STATE_HOME/safe-lanes`, `~/.local/state/safe-lanes`: another
//!    gateway's tokens), by the path as written and by where the kernel finds it.
//! 6. Only files of data: nothing on a pseudo-filesystem (`proc`, `sysfs`, `cgroup` …) and
//!    no device node (`pseudo_file`), decided from the opened descriptor (`fstatfs`), not the
//!    path — `/proc/self/environ` is the gateway's own environment, wherever `proc` is
//!    mounted; only regular files (`not_regular_file`; FIFOs are opened non-blocking, so a
//!    FIFO is refused at once), with exactly one link (`hardlinked`: a second link can
//!    smuggle any inode, such as a token, into an allowed folder).

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};
use serde::Serialize;

use crate::actor::Actor;
use crate::beneath::{self, Ambient, Anchor, Symlinks, location_of};
use crate::error::{Error, Result, Shown};
use crate::hidden::Hidden;
use crate::input::{self, AbsPath, Name, RelPath};
use crate::root::{DOWNLOADS_DIR, RootLocation, StateRoot, UPLOAD_ROOTS_FILE};

/// Walks through symbolic links restarted when what they checked changed before the open.
const ATTEMPTS: usize = 3;
/// Why the hard guard refuses a source under the state root in use.
const INSIDE_STATE_ROOT: &str =
    "inside the safe-lanes state root, which only the library itself may touch";
/// Why the hard guard refuses a source under another state root.
const INSIDE_OTHER_ROOT: &str = "inside another safe-lanes state root (one SAFE_LANES_ROOT, \
     GWSA_ROOT or a default names), which only the library itself may touch";
/// The most symbolic links followed for one source (as the kernel's `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;
/// How a source is opened: read-only, and without blocking on a FIFO.
const READ: OFlags = OFlags::RDONLY.union(OFlags::NONBLOCK);
/// Environment variables naming extra roots, in the order they are read.
pub(crate) const ENV_VARS: [&str; 2] = ["SAFE_LANES_UPLOAD_ROOTS", "GWSA_UPLOAD_ROOTS"];

/// Where an allowed root came from.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AllowedBy {
    /// `<root>/.downloads`, always allowed.
    Downloads,
    /// A line of `<root>/.upload-roots`.
    File,
    /// An environment variable.
    Env,
}

impl AllowedBy {
    /// The snake_case name, as in JSON (`downloads`, `file`, `env`).
    pub fn as_str(&self) -> &'static str {
        match self {
            AllowedBy::Downloads => "downloads",
            AllowedBy::File => "file",
            AllowedBy::Env => "env",
        }
    }
}

impl std::fmt::Display for AllowedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One allowed root.
#[derive(Debug, Serialize)]
pub struct AllowedRoot {
    /// The canonical path.
    #[serde(serialize_with = "crate::lossy::path")]
    pub path: PathBuf,
    /// Where it came from.
    pub origin: AllowedBy,
    /// The entry as written (a line of the file, or an element of the variable).
    pub entry: String,
    /// Whether the root contains a state root — the one in use, or another one the
    /// environment or the defaults name (the hard guard then refuses everything under that
    /// state root but its `.downloads`).
    pub covers_state_root: bool,
    #[serde(skip)]
    anchor: Anchor,
    /// The components a path may start with to be in this root: its canonical path's, and
    /// those of each entry that named it, as written (when absolute, without `.` or `..`).
    #[serde(skip)]
    spellings: Vec<Vec<Vec<u8>>>,
}

/// An allowlist entry that was ignored, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IgnoredEntry {
    /// Where it came from.
    pub origin: AllowedBy,
    /// The entry as written (escaped for display).
    pub entry: String,
    /// For the file, the 1-based line number; for a variable, its name.
    pub at: String,
    /// Why it was ignored.
    pub why: String,
}

/// A source file that passed every check, open for reading.
#[derive(Debug)]
pub struct Opened {
    /// The handle to exactly the file that was checked (read-only, offset 0). Reads through it
    /// wait as a file's do; on a disk filesystem (ext4, xfs …) it may still carry the
    /// `O_NONBLOCK` it was opened with (so that a FIFO could not block the open), which reads
    /// of such a file ignore.
    pub file: File,
    /// Its canonical path.
    pub path: PathBuf,
    /// The allowed root it lies in.
    pub root: PathBuf,
    /// Its size in bytes when it was checked.
    pub bytes: u64,
}

/// A resolved source with its SHA-256 (what `upload check` prints).
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct Source {
    /// Its canonical path.
    #[serde(serialize_with = "crate::lossy::path")]
    pub path: PathBuf,
    /// The allowed root it lies in.
    #[serde(serialize_with = "crate::lossy::path")]
    pub root: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// The lowercase hex SHA-256 of its content, read through the handle.
    pub sha256: String,
    /// The handle to exactly the file that was checked (offset 0).
    #[serde(skip)]
    pub file: File,
}

/// The upload-source allowlist of a state root.
#[derive(Debug)]
pub struct UploadSource {
    roots: Vec<AllowedRoot>,
    ignored: Vec<IgnoredEntry>,
    guard: HardGuard,
    audit: std::sync::Arc<crate::audit::AuditLog>,
    actor: Actor,
}

impl UploadSource {
    /// Load the allowlist of `root` from `.upload-roots` and the process environment.
    ///
    /// # Errors
    ///
    /// `io` when the lane descriptor cannot be duplicated. Unusable entries are not errors:
    /// they are listed by [`UploadSource::ignored`].
    pub fn load(root: &StateRoot) -> Result<Self> {
        Self::load_with(root, |key| std::env::var_os(key))
    }

    /// [`UploadSource::load`] with an explicit environment lookup.
    ///
    /// # Errors
    ///
    /// As [`UploadSource::load`].
    pub fn load_with(root: &StateRoot, env: impl Fn(&str) -> Option<OsString>) -> Result<Self> {
        let downloads = root.downloads_path();
        let mut this = Self {
            roots: Vec::new(),
            ignored: Vec::new(),
            guard: HardGuard::new(root, RootLocation::named_with(&env)?),
            audit: root.audit(),
            actor: Actor::Agent,
        };
        this.roots.push(AllowedRoot {
            spellings: vec![parts_of(&downloads)],
            path: downloads.clone(),
            origin: AllowedBy::Downloads,
            entry: downloads.to_string_lossy().into_owned(),
            covers_state_root: this.guard.covered_by(&downloads),
            anchor: root.downloads()?.try_clone()?,
        });
        for (at, line) in read_roots_file(root) {
            match line {
                Ok(line) => this.add(AllowedBy::File, at, line.as_bytes()),
                Err(why) => this.ignored.push(IgnoredEntry {
                    origin: AllowedBy::File,
                    entry: UPLOAD_ROOTS_FILE.to_owned(),
                    at,
                    why,
                }),
            }
        }
        for var in ENV_VARS {
            if let Some(value) = env(var) {
                for entry in value
                    .as_bytes()
                    .split(|&b| b == b':')
                    .filter(|e| !e.is_empty())
                {
                    this.add(AllowedBy::Env, var.to_owned(), entry);
                }
            }
        }
        // Longest roots first: a file in nested roots is reported against the innermost one.
        this.roots
            .sort_by_key(|r| std::cmp::Reverse(r.path.as_os_str().len()));
        Ok(this)
    }

    fn add(&mut self, origin: AllowedBy, at: String, entry: &[u8]) {
        let shown = Shown::bytes(entry).to_string();
        let ignore = |why: String| IgnoredEntry {
            origin: origin.clone(),
            entry: shown.clone(),
            at: at.clone(),
            why,
        };
        let spelled = PathBuf::from(OsString::from_vec(entry.to_vec()));
        if !spelled.is_absolute() {
            self.ignored.push(ignore("not an absolute path".to_owned()));
            return;
        }
        if entry.contains(&0) {
            self.ignored.push(ignore("contains a NUL byte".to_owned()));
            return;
        }
        // The entry is the human's: opening it by path, following links, is intended.
        let why = Ambient::because("an upload root the human configured");
        let anchor = match Anchor::open_ambient(&spelled, why) {
            Ok(anchor) => anchor,
            Err(e) => {
                self.ignored.push(ignore(match e.code() {
                    crate::error::Code::NotFound => "missing, or not a directory".to_owned(),
                    _ => e.to_string(),
                }));
                return;
            }
        };
        let path = match location_of(anchor.as_fd()) {
            Ok(path) => path,
            Err(e) => {
                self.ignored
                    .push(ignore(format!("its location is unknown: {e}")));
                return;
            }
        };
        // The one rule on roots too broad to be one: `/`, a home folder, a folder holding one.
        if let Some(why) = crate::upload_roots::too_broad(&path) {
            self.ignored.push(ignore(why));
            return;
        }

        let root = AllowedRoot {
            covers_state_root: self.guard.covered_by(&path),
            path,
            origin,
            entry: shown,
            anchor,
            spellings: Vec::new(),
        };
        self.push_root(root, &spelled);
    }

    /// Add `root`, opened from the entry `written`, or only that spelling when its directory
    /// is in the list already.
    fn push_root(&mut self, mut root: AllowedRoot, written: &Path) {
        // The human's spelling names the root too, unless it says `.` or `..`: those would be
        // read as written, which need not be where the kernel went when it opened the entry.
        let written = AbsPath::normalized(written).ok().map(|_| parts_of(written));
        if let Some(known) = self.roots.iter_mut().find(|r| r.path == root.path) {
            known
                .spellings
                .extend(written.filter(|w| !known.spellings.contains(w)));
            return;
        }
        root.spellings.push(parts_of(&root.path));
        root.spellings
            .extend(written.filter(|w| *w != root.spellings[0]));
        self.roots.push(root);
    }

    /// The actor recorded in the audit log ([`Actor::Agent`] by default).
    pub fn with_actor(mut self, actor: Actor) -> Self {
        self.actor = actor;
        self
    }

    /// The effective allowed roots (`.downloads` included).
    pub fn roots(&self) -> &[AllowedRoot] {
        &self.roots
    }

    /// The entries that were ignored, with why.
    pub fn ignored(&self) -> &[IgnoredEntry] {
        &self.ignored
    }

    /// Check `path` and open exactly the file that was checked (no hashing). See the module
    /// documentation for every rule.
    ///
    /// # Errors
    ///
    /// `relative_path`, `nul_byte`, `invalid_argument`, `outside_allowlist`, `state_root`,
    /// `not_found` (missing inside an allowed root), `symlink_escape` (a loop of links, a link
    /// on a `nosymfollow` mount, or a path that kept changing), `pseudo_file`,
    /// `not_regular_file`, `hardlinked`, or `io`.
    ///
    /// # Security
    ///
    /// `path` is untrusted. The returned handle was opened beneath an allowed root's
    /// descriptor, is never under a state root except its `.downloads`, and is a regular file
    /// of data (never the kernel's view of a process, such as `/proc/self/environ`). Nothing
    /// outside the allowed roots is looked at, so the outcome and the message are the same
    /// whatever exists there, and never name where a link leads outside.
    pub fn open(&self, path: &Path) -> Result<Opened> {
        self.open_unrecorded(path).map_err(|e| {
            self.audit.refused(
                crate::audit::Operation::Upload,
                self.actor,
                &path.to_string_lossy(),
                e,
            )
        })
    }

    fn open_unrecorded(&self, asked: &Path) -> Result<Opened> {
        let checked = check_lexically(asked)?;
        let spelled = checked.spelled();
        self.guard_spelled(asked, &spelled)?;
        let (root, rest) = self.root_of(asked, &spelled)?;
        // The rest as the path wrote it when it is exactly the components (no `.`, `..` or
        // doubled `/` among them, the common case): nothing to join.
        let text = checked.as_path().as_os_str().as_bytes();
        let rel = match span_of(text, rest) {
            Some(span) => std::borrow::Cow::Borrowed(Path::new(OsStr::from_bytes(span))),
            None => std::borrow::Cow::Owned(join(rest)),
        };
        let opened = RelPath::new(&rel)
            .and_then(|rel| root.anchor.open(rel, READ, Mode::empty(), Symlinks::Deny));
        match opened {
            Ok(fd) => self.accept(asked, fd, below(&root.path, &rel), root),
            // A symbolic link on the way: follow it, through allowed roots only.
            Err(Error::SymlinkEscape { .. }) => self.open_through_links(asked, root, rest),
            Err(e) => Err(e),
        }
    }

    /// [`UploadSource::open`], then hash the whole file through the handle.
    ///
    /// # Errors
    ///
    /// As [`UploadSource::open`], and `io` when reading fails.
    pub fn resolve(&self, path: &Path) -> Result<Source> {
        self.hash(self.open(path)?)
    }

    /// Hash a file [`UploadSource::open`] checked, through its handle, and record it.
    ///
    /// # Errors
    ///
    /// `io` when reading fails.
    pub fn hash(&self, opened: Opened) -> Result<Source> {
        let copied = crate::copy::sha256_of(&mut crate::fd::ReadAt::new(opened.file.as_fd()))?;
        let source = Source {
            path: opened.path,
            root: opened.root,
            bytes: copied.bytes,
            sha256: copied.sha256,
            file: opened.file,
        };
        self.audit.append("upload.resolve", self.actor, &source)?;
        Ok(source)
    }

    /// The allowed root the components `spelled` start with (the innermost, when roots nest)
    /// and the components below it; decided from the text alone, nothing is opened.
    ///
    /// # Errors
    ///
    /// `outside_allowlist`, naming `asked` only (never where a link led), or `state_root`
    /// from [`UploadSource::guard_spelled`].
    fn place<'p>(
        &self,
        asked: &Path,
        spelled: &'p [&'p [u8]],
    ) -> Result<(&AllowedRoot, &'p [&'p [u8]])> {
        let placed = self.root_of(asked, spelled)?;
        self.guard_spelled(asked, spelled)?;
        Ok(placed)
    }

    /// [`UploadSource::place`] without the hard guard, for a caller that applied it first.
    ///
    /// # Errors
    ///
    /// `outside_allowlist`, naming `asked` only.
    fn root_of<'p>(
        &self,
        asked: &Path,
        spelled: &'p [&'p [u8]],
    ) -> Result<(&AllowedRoot, &'p [&'p [u8]])> {
        let found = self
            .roots
            .iter()
            .flat_map(|root| root.spellings.iter().map(move |s| (root, s)))
            .filter(|(_, s)| starts_with(spelled, s))
            .max_by_key(|(_, s)| s.len());
        let Some((root, spelling)) = found else {
            return Err(Error::OutsideAllowlist {
                path: Shown::path(asked),
            });
        };
        Ok((root, &spelled[spelling.len()..]))
    }

    /// Open the rest of a path through the symbolic links on it, walking again when something
    /// changed between two steps.
    fn open_through_links(
        &self,
        asked: &Path,
        root: &AllowedRoot,
        rest: &[&[u8]],
    ) -> Result<Opened> {
        for _ in 0..ATTEMPTS {
            let walk = Walk {
                root,
                walked: Vec::new(),
                queue: rest.iter().map(|part| part.to_vec()).collect(),
                links: 0,
                directory_only: false,
            };
            if let Some(opened) = self.walk(asked, walk)? {
                return Ok(opened);
            }
        }
        Err(Error::SymlinkEscape {
            path: Shown::path(asked),
            why: "the file kept changing while it was checked",
        })
    }

    /// Walk the rest of a path beneath its root one component at a time, expanding each link
    /// by its text ([`UploadSource::expand`]); `None` when something changed between steps.
    fn walk<'s>(&'s self, asked: &Path, mut w: Walk<'s>) -> Result<Option<Opened>> {
        while let Some(part) = w.queue.pop_front() {
            if part == b".." {
                if w.walked.pop().is_none() {
                    // Above the root: what follows is read from the root's parent, as written.
                    let parent = w.root.path.parent().unwrap_or(Path::new("/"));
                    let above = parts_of(parent).into_iter().chain(w.queue.drain(..));
                    let above = above.collect();
                    self.enter(asked, &mut w, above)?;
                }
                continue;
            }
            let Some(dir) = w.directory()? else {
                return Ok(None);
            };
            let name = Name::new(OsStr::from_bytes(&part))?;
            let kind = FileType::from_raw_mode(dir.stat_entry(name)?.st_mode);
            let last = w.queue.is_empty();
            match kind {
                FileType::Symlink if !dir.follows_links()? => {
                    return Err(Error::SymlinkEscape {
                        path: Shown::path(asked),
                        why: "a symbolic link on the way is on a mount that follows none \
                              (nosymfollow)",
                    });
                }
                FileType::Symlink => match dir.read_link(name)? {
                    Some(target) => self.expand(asked, &mut w, &target)?,
                    None => return Ok(None),
                },
                FileType::Directory if !last => w.walked.push(part),
                // A link whose text ends in `/` (or `/.`) names a directory, as every
                // component before the last does: the kernel answers ENOTDIR.
                _ if !last || (w.directory_only && kind != FileType::Directory) => {
                    return Err(Error::NotFound {
                        path: Shown::path(asked),
                        why: "a path component is not a directory".into(),
                    });
                }
                _ => {
                    w.walked.push(part);
                    return self.open_walked(asked, &w);
                }
            }
        }
        // Every component was a directory, a `..` or a link: the path ends at a directory.
        Err(Error::NotRegularFile {
            path: Shown::path(asked),
            kind: "a directory",
        })
    }

    /// Replace a symbolic link on the walk by its `target`. A relative target continues from
    /// the link's directory; an absolute one is read as written with what follows it and
    /// placed again ([`UploadSource::enter`]), before anything it names is touched.
    fn expand<'s>(&'s self, asked: &Path, w: &mut Walk<'s>, target: &[u8]) -> Result<()> {
        w.links += 1;
        if w.links > MAX_LINKS {
            return Err(Error::SymlinkEscape {
                path: Shown::path(asked),
                why: "too many levels of symbolic links",
            });
        }
        if target.is_empty() {
            return Err(Error::NotFound {
                path: Shown::path(asked),
                why: "a symbolic link on the way is empty".into(),
            });
        }
        // The link stood last, and its text ends like a directory's: so must the path.
        w.directory_only |= w.queue.is_empty() && names_a_directory(target);
        let parts = target
            .split(|&b| b == b'/')
            .filter(|part| !part.is_empty() && *part != b".")
            .map(<[u8]>::to_vec);
        if target.starts_with(b"/") {
            let joined = parts.chain(w.queue.drain(..)).collect();
            return self.enter(asked, w, joined);
        }
        let parts: Vec<Vec<u8>> = parts.collect();
        for part in parts.into_iter().rev() {
            w.queue.push_front(part);
        }
        Ok(())
    }

    /// Continue the walk at the absolute path `parts`, read as written: in the allowed root it
    /// names ([`UploadSource::place`]), or nowhere.
    fn enter<'s>(&'s self, asked: &Path, w: &mut Walk<'s>, parts: Vec<Vec<u8>>) -> Result<()> {
        let spelled = input::read_as_written(parts.iter().map(Vec::as_slice));
        let (root, rest) = self.place(asked, &spelled)?;
        w.root = root;
        w.walked.clear();
        w.queue = rest.iter().map(|part| part.to_vec()).collect();
        Ok(())
    }

    /// Open the file the walk reached, beneath its root with no link allowed; `None` when the
    /// path changed since it was walked.
    fn open_walked(&self, asked: &Path, w: &Walk<'_>) -> Result<Option<Opened>> {
        let parts: Vec<&[u8]> = w.walked.iter().map(Vec::as_slice).collect();
        let rel = join(&parts);
        let opened = RelPath::new(&rel)
            .and_then(|rel| w.root.anchor.open(rel, READ, Mode::empty(), Symlinks::Deny));
        match opened {
            Ok(fd) => self
                .accept(asked, fd, below(&w.root.path, &rel), w.root)
                .map(Some),
            Err(Error::SymlinkEscape { .. } | Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The checks on an opened candidate: hard guard, a file of data (no pseudo-file), regular,
    /// one link.
    fn accept(
        &self,
        asked: &Path,
        fd: OwnedFd,
        real: PathBuf,
        root: &AllowedRoot,
    ) -> Result<Opened> {
        self.guard(&real)?;
        let st = beneath::data_file(fd.as_fd(), asked)?;
        // O_NONBLOCK only kept a FIFO from blocking the open. Reads of a file on a disk
        // filesystem ignore it (`reads_ignore_nonblock` says why, and what it leaves out); the
        // library itself reads only with `pread`, and hands the descriptor to no other process
        // (a deposit copies the content). Elsewhere it is cleared: a FUSE server, for one, is
        // told each read's flags.
        if !beneath::reads_ignore_nonblock(&st) {
            rustix::fs::fcntl_setfl(&fd, OFlags::empty())
                .map_err(|e| Error::io("fcntl", asked, e))?;
        }
        // Walked beneath an outer root into a nested one, the file is reported in the inner.
        let root = self
            .roots
            .iter()
            .find(|r| is_within(&r.path, &real))
            .unwrap_or(root);
        // Judged where the file is (the links on the way followed, the root's own names
        // included: a root that is `~/.ssh` hides all it holds) and as it was asked for (a
        // link named `.env` to a file of another name). The download lane holds what agents
        // saved, none of the human's secrets.
        let hidden = (root.origin != AllowedBy::Downloads)
            .then(|| {
                let list = Hidden::default();
                list.hides_file(&real, fd.as_fd())
                    .or_else(|| list.hides_file(asked, fd.as_fd()))
            })
            .flatten();
        if let Some(hidden) = hidden {
            return Err(hidden.refusal(asked));
        }
        Ok(Opened {
            file: File::from(fd),
            path: real,
            root: root.path.clone(),
            bytes: st.st_size as u64,
        })
    }

    /// The hard guard on the canonical path of an opened file ([`HardGuard`]).
    ///
    /// `real` is normalized (an allowed root's real path joined with names read as written:
    /// no `.`, `..` or empty component), so its components are compared as they stand, with
    /// nothing allocated on the way of every open.
    fn guard(&self, real: &Path) -> Result<()> {
        let parts = || {
            real.as_os_str()
                .as_bytes()
                .split(|&b| b == b'/')
                .filter(|part| !part.is_empty())
        };
        self.guard.check(real, parts)
    }

    /// The hard guard on what a path spells, before anything is opened ([`HardGuard`]). It
    /// depends on the text alone, so it tells nothing about what exists there.
    fn guard_spelled(&self, asked: &Path, spelled: &[&[u8]]) -> Result<()> {
        self.guard.check(asked, || spelled.iter().copied())
    }
}

/// Whether the folder `dir` (canonical) contains a state root the hard guard of `root` keeps
/// out — what [`AllowedRoot::covers_state_root`] reports, for a folder not allowed yet.
///
/// # Errors
///
/// As [`RootLocation::named_with`].
pub(crate) fn contains_state_root(root: &StateRoot, dir: &Path) -> Result<bool> {
    let named = RootLocation::named_with(|name| std::env::var_os(name))?;
    Ok(HardGuard::new(root, named).covered_by(dir))
}

/// The hard guard: nothing under a state root but its `.downloads`, whatever the allowlist
/// says — under the state root in use, and under every other one the environment or the
/// defaults name ([`RootLocation::named_with`]: `SAFE_LANES_ROOT`, `GWSA_ROOT`, the XDG
/// default), which may hold another gateway's tokens (`GWSA_ROOT=G` beside
/// `SAFE_LANES_ROOT=S`: `G/token.json` never leaves through `S`).
#[derive(Debug)]
struct HardGuard {
    roots: Vec<Guarded>,
}

/// One state root the hard guard keeps out.
#[derive(Debug)]
struct Guarded {
    /// The components of each path it is known by: as named, and where the kernel finds it
    /// (or its nearest existing parent, for one not made yet).
    spellings: Vec<Vec<Vec<u8>>>,
    /// Why a source under it is refused.
    why: &'static str,
}

impl HardGuard {
    /// The guard of `root` (the state root in use) and of the roots `named`.
    fn new(root: &StateRoot, named: Vec<RootLocation>) -> Self {
        let mut roots = vec![Guarded {
            spellings: vec![parts_of(root.path())],
            why: INSIDE_STATE_ROOT,
        }];
        for named in named {
            let mut spellings = vec![parts_of(&named.path)];
            let found = parts_of(&where_found(&named.path));
            if !spellings.contains(&found) {
                spellings.push(found);
            }
            // A root named twice (the one in use, by the variable that chose it) is one root,
            // known by every spelling.
            match roots
                .iter_mut()
                .find(|r| spellings.iter().any(|s| r.spellings.contains(s)))
            {
                Some(known) => {
                    for spelling in spellings {
                        if !known.spellings.contains(&spelling) {
                            known.spellings.push(spelling);
                        }
                    }
                }
                None => roots.push(Guarded {
                    spellings,
                    why: INSIDE_OTHER_ROOT,
                }),
            }
        }
        Self { roots }
    }

    /// Refuse the path whose components `parts` yields (an absolute path, read as written)
    /// when they lie under a guarded state root but not under its `.downloads`; `shown`
    /// names the path.
    fn check<'p, I>(&self, shown: &Path, parts: impl Fn() -> I) -> Result<()>
    where
        I: Iterator<Item = &'p [u8]>,
    {
        for root in &self.roots {
            for spelling in &root.spellings {
                let mut rest = parts();
                let under = spelling
                    .iter()
                    .all(|part| rest.next() == Some(part.as_slice()));
                let downloads = under && rest.next() == Some(DOWNLOADS_DIR.as_bytes());
                if under && !downloads {
                    return Err(Error::StateRoot {
                        path: Shown::path(shown),
                        why: root.why,
                    });
                }
            }
        }
        Ok(())
    }

    /// Whether the directory `dir` (canonical) contains a guarded state root.
    fn covered_by(&self, dir: &Path) -> bool {
        let dir = parts_of(dir);
        self.roots.iter().any(|root| {
            root.spellings.iter().any(|spelling| {
                let spelling: Vec<&[u8]> = spelling.iter().map(Vec::as_slice).collect();
                starts_with(&spelling, &dir)
            })
        })
    }
}

/// Where the kernel finds `path` (it follows links, as the human's setting means): the
/// location of the directory there, or of its nearest existing parent followed by the rest
/// as written; `path` itself when none can be told.
fn where_found(path: &Path) -> PathBuf {
    let why = Ambient::because("a state root the environment names, to keep uploads out of it");
    for parent in path.ancestors() {
        let Ok(anchor) = Anchor::open_ambient(parent, why) else {
            continue;
        };
        let Ok(located) = location_of(anchor.as_fd()) else {
            break;
        };
        let rest = path.strip_prefix(parent).unwrap_or(Path::new(""));
        return located.join(rest);
    }
    path.to_path_buf()
}

/// Whether a link's text names a directory: it ends in `/`, or its last component is `.`
/// (a `..` there climbs, and the walk ends at a directory anyway).
fn names_a_directory(target: &[u8]) -> bool {
    target.ends_with(b"/") || target == b"." || target.ends_with(b"/.")
}

/// Where a walk through symbolic links stands.
struct Walk<'s> {
    /// The allowed root it is beneath.
    root: &'s AllowedRoot,
    /// The directories entered beneath the root, none of them a link.
    walked: Vec<Vec<u8>>,
    /// The components still to resolve (`..` kept: it climbs `walked`).
    queue: VecDeque<Vec<u8>>,
    /// Links followed so far.
    links: usize,
    /// Whether the path must end at a directory: a link that stood last had a text ending
    /// in `/` or `/.`.
    directory_only: bool,
}

impl Walk<'_> {
    /// The directory the walk stands in, opened beneath the root with no link allowed;
    /// `None` when it is no longer there.
    fn directory(&self) -> Result<Option<Anchor>> {
        let parts: Vec<&[u8]> = self.walked.iter().map(Vec::as_slice).collect();
        let rel = join(&parts);
        match RelPath::new(&rel).and_then(|rel| self.root.anchor.open_dir(rel, Symlinks::Deny)) {
            Ok(dir) => Ok(Some(dir)),
            Err(Error::SymlinkEscape { .. } | Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Whether the components `parts` start with the components `base`.
fn starts_with(parts: &[&[u8]], base: &[Vec<u8>]) -> bool {
    parts.len() >= base.len() && parts.iter().zip(base).all(|(p, b)| *p == b.as_slice())
}

/// The components of an absolute path, read as written.
fn parts_of(path: &Path) -> Vec<Vec<u8>> {
    let bytes = path.as_os_str().as_bytes();
    input::read_as_written(bytes.split(|&b| b == b'/'))
        .into_iter()
        .map(<[u8]>::to_vec)
        .collect()
}

/// Components joined into a relative path (empty for none: the directory itself).
fn join(parts: &[&[u8]]) -> PathBuf {
    PathBuf::from(OsString::from_vec(parts.join(&b'/')))
}

/// The components `parts`, each borrowed from `text`, as the run of `text` they span when
/// that run is exactly them joined by `/`; `None` otherwise (a `.`, `..` or doubled `/` among
/// them), and for parts borrowed from elsewhere. The text is compared, so the answer never
/// rests on where the parts lie alone.
fn span_of<'t>(text: &'t [u8], parts: &[&[u8]]) -> Option<&'t [u8]> {
    let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
        return Some(&[]);
    };
    let base = text.as_ptr() as usize;
    let start = (first.as_ptr() as usize).checked_sub(base)?;
    let end = (last.as_ptr() as usize + last.len()).checked_sub(base)?;
    let span = text.get(start..end)?;
    span.split(|&b| b == b'/')
        .eq(parts.iter().copied())
        .then_some(span)
}

/// `rel` below the directory `dir`, as [`Path::join`] makes it, allocated once.
fn below(dir: &Path, rel: &Path) -> PathBuf {
    let mut path = PathBuf::with_capacity(dir.as_os_str().len() + 1 + rel.as_os_str().len());
    path.push(dir);
    path.push(rel);
    path
}

/// Whether `path` is `base` or below it, by whole components; both are normalized (absolute,
/// with no `.`, `..` or empty component inside), so their bytes are compared.
fn is_within(base: &Path, path: &Path) -> bool {
    let (base, path) = (base.as_os_str().as_bytes(), path.as_os_str().as_bytes());
    path.strip_prefix(base)
        .is_some_and(|rest| rest.is_empty() || rest[0] == b'/' || base.ends_with(b"/"))
}

/// The lexical checks of step 1; the checked path, for what it spells.
fn check_lexically(path: &Path) -> Result<AbsPath<'_>> {
    let checked = AbsPath::new(path)?;
    let bytes = checked.as_path().as_os_str().as_bytes();
    if bytes.ends_with(b"/") || bytes.ends_with(b"/.") || bytes.ends_with(b"/..") {
        return Err(Error::NotRegularFile {
            path: Shown::bytes(bytes),
            kind: "a directory path (it ends with `/`, `.` or `..`)",
        });
    }
    Ok(checked)
}

/// The most `.upload-roots` may hold (a list of folders; anything larger was not written by
/// hand, and is not read whole).
const MAX_ROOTS_FILE_BYTES: u64 = 1 << 20;

/// The lines of `.upload-roots` with their line numbers; one error entry when the file
/// cannot be read (a missing file is simply no lines).
fn read_roots_file(root: &StateRoot) -> Vec<(String, std::result::Result<String, String>)> {
    let opened = RelPath::new(UPLOAD_ROOTS_FILE)
        .and_then(|name| root.anchor().open_read(name, Symlinks::Deny));
    let fd = match opened {
        Ok(fd) => fd,
        Err(Error::NotFound { .. }) => return Vec::new(),
        Err(e) => return vec![("0".to_owned(), Err(format!("unreadable: {e}")))],
    };
    let mut text = Vec::new();
    if let Err(e) = File::from(fd)
        .take(MAX_ROOTS_FILE_BYTES + 1)
        .read_to_end(&mut text)
    {
        return vec![("0".to_owned(), Err(format!("unreadable: {e}")))];
    }
    if text.len() as u64 > MAX_ROOTS_FILE_BYTES {
        let why = format!("ignored: larger than {MAX_ROOTS_FILE_BYTES} bytes");
        return vec![("0".to_owned(), Err(why))];
    }
    text.split(|&b| b == b'\n')
        .enumerate()
        .filter_map(|(i, line)| {
            let line = line.trim_ascii();
            if line.is_empty() || line.starts_with(b"#") {
                return None;
            }
            Some((
                (i + 1).to_string(),
                Ok(String::from_utf8_lossy(line).into_owned()),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containment_is_by_whole_components() {
        assert!(is_within(Path::new("/a/b"), Path::new("/a/b")));
        assert!(is_within(Path::new("/a/b"), Path::new("/a/b/c")));
        assert!(!is_within(Path::new("/a/b"), Path::new("/a/bc")));
        assert!(!is_within(Path::new("/a/b"), Path::new("/a")));
        assert!(is_within(Path::new("/"), Path::new("/a")));
        assert!(is_within(Path::new("/a/b"), Path::new("/a/b/")));
    }

    #[test]
    fn the_rest_is_borrowed_only_where_it_is_its_components_joined() {
        let rest_of = |path: &'static str| {
            let spelled = AbsPath::new(Path::new(path)).unwrap().spelled();
            let rest = spelled[1..].to_vec();
            let span = span_of(path.as_bytes(), &rest).map(<[u8]>::to_vec);
            let joined = join(&rest).into_os_string().into_vec();
            if let Some(span) = &span {
                assert_eq!(*span, joined, "{path}");
            }
            span
        };
        assert_eq!(rest_of("/r/a/b.txt").as_deref(), Some(&b"a/b.txt"[..]));
        assert_eq!(rest_of("/r//a/b").as_deref(), Some(&b"a/b"[..]));
        assert_eq!(rest_of("/r/x/../a/b").as_deref(), Some(&b"a/b"[..]));
        assert_eq!(rest_of("/r").as_deref(), Some(&b""[..]));
        for spaced in ["/r/a//b", "/r/a/./b", "/r/a/x/../b", "/r/a/.//b/c"] {
            assert_eq!(rest_of(spaced), None, "{spaced}");
        }
        // Components that are not the text's own are never taken for it.
        let other = b"a/b".to_vec();
        let parts: Vec<&[u8]> = other.split(|&b| b == b'/').collect();
        assert_eq!(span_of(b"/r/a/b", &parts), None);
    }

    #[test]
    fn a_root_is_matched_by_whole_components() {
        let base = parts_of(Path::new("/a/b"));
        let spelled = |p: &str| parts_of(Path::new(p));
        let starts = |p: &str| {
            let parts = spelled(p);
            let parts: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
            starts_with(&parts, &base)
        };
        assert!(starts("/a/b"));
        assert!(starts("/a//./b/c"));
        assert!(starts("/a/x/../b/c"));
        assert!(!starts("/a/bc"));
        assert!(!starts("/a/b/../c"));
        assert!(!starts("/a"));
    }
}
