//! The upload roots the human manages: the one rule on folders too broad to be one, and the
//! changes `upload roots add` and `upload roots remove` make to `.upload-roots`.
//!
//! The rule ([`too_broad`]): `/`, a person's home folder (`$HOME`, root's, or a user
//! account's in `/etc/passwd`) or a folder holding one (`/home`) is never an upload root —
//! everything of an account, its keys and tokens, would be one upload away. The loader
//! ([`crate::UploadSource`]) ignores such an entry, saying why, wherever it is written;
//! `upload roots add` refuses it. Anything else risky ([`warnings`]: the state root inside it,
//! a place credentials are kept, a hidden folder, a look-alike name) is allowed and shown.
//!
//! The file stays the human's to edit by hand: a change adds or removes whole lines, keeps
//! every other line (comments, blank lines, entries) as it was, is written atomically under a
//! lock (`.upload-roots.lock`), needs a reason, and is recorded in the audit log
//! (`upload_roots.add`, `upload_roots.remove`).

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, Mode, OFlags};
use serde::Serialize;
use serde_json::json;

use crate::beneath::{self, Ambient, Anchor, Symlinks};
use crate::error::{Error, Result, Shown};
use crate::input::{AbsPath, Name, RelPath};
use crate::risk::{self, Risk, Warning};
use crate::root::{StateRoot, UPLOAD_ROOTS_FILE};

/// The most of `.upload-roots` read (as the loader reads it).
const MAX_FILE_BYTES: u64 = 1 << 20;
/// The lock file of changes to `.upload-roots`, beside it.
const LOCK_FILE: &str = ".upload-roots.lock";

/// Why the folder `path` (canonical) may not be an upload root, if it may not: it is `/`, a
/// person's home folder, or holds one.
pub fn too_broad(path: &Path) -> Option<String> {
    if path == Path::new("/") {
        return Some(
            "`/` is the whole file system: every file of this machine, its keys and tokens \
             among them, would be uploadable; allow the folder you share from instead"
                .to_owned(),
        );
    }
    let home = crate::accounts::people_homes()
        .into_iter()
        .find(|home| home.starts_with(path))?;
    let what = if home == path {
        "is a home folder".to_owned()
    } else {
        format!("holds the home folder {}", Shown::path(&home))
    };
    Some(format!(
        "{} {what}: every file of the account, its keys, tokens and browser profiles, would be \
         uploadable; allow a folder inside it that you share from instead",
        Shown::path(path)
    ))
}

/// What to look twice at in the upload root `path` (canonical) of the state root `root`: it
/// holds a state root the hard guard keeps out (the one in use or another the environment
/// names; the guard still refuses everything there but `.downloads`), or the warnings of
/// [`risk::path_warnings`] (credentials, a hidden folder, a look-alike name).
pub fn warnings(path: &Path, root: &StateRoot) -> Vec<Warning> {
    let mut out = Vec::new();
    // A guard that cannot be built (an environment naming an unusable root) is warned of too.
    if crate::upload::contains_state_root(root, path).unwrap_or(true) {
        out.push(Warning {
            risk: Risk::StateRoot,
            message: format!(
                "{} holds a safe-lanes state root: nothing in it but `.downloads` is ever \
                 uploaded, whatever the allowlist says, but a narrower folder says what you mean",
                Shown::path(path),
            ),
            spelled: None,
        });
    }
    out.extend(
        risk::path_warnings(path, crate::accounts::own_home().as_deref())
            .into_iter()
            .filter(|w| !matches!(w.risk, Risk::Home | Risk::HomeAncestor)),
    );
    out
}

/// A change to `.upload-roots`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RootsChanged {
    /// The folder: where the kernel found it (for a removal of an entry that no longer
    /// opens, as given).
    #[serde(serialize_with = "crate::lossy::path")]
    pub path: PathBuf,
    /// Whether the file changed (`false`: it was allowed already).
    pub changed: bool,
    /// The lines (1-based) removed, for a removal.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed_lines: Vec<usize>,
    /// What to look twice at, for an addition ([`warnings`]).
    pub warnings: Vec<Warning>,
}

impl StateRoot {
    /// Allow the folder `path` (absolute; the human's, opened following links) as an upload
    /// root: its canonical path is appended to `.upload-roots` as a line of its own, every
    /// other line kept. Nothing is written when an entry of the file names it already.
    ///
    /// # Errors
    ///
    /// `invalid_argument` without a reason, for a folder [`too_broad`] to be one, or one
    /// whose path cannot be written as a line; `relative_path`, `nul_byte`, `not_found` (not a
    /// directory), `insecure_root`, `io`.
    pub fn add_upload_root(&self, path: &Path, reason: &str, actor: &str) -> Result<RootsChanged> {
        crate::grants::reason_given("upload_roots.add", "addition of an upload root", reason)?;
        AbsPath::new(path)?;
        let canonical = canonical(path)?;
        if let Some(why) = too_broad(&canonical) {
            return Err(Error::InvalidArgument {
                what: Shown::path(&canonical),
                why,
            });
        }
        let line = canonical.as_os_str().as_bytes();
        if line.iter().any(|b| matches!(b, b'\n' | b'\r')) || line.trim_ascii() != line {
            return Err(Error::InvalidArgument {
                what: Shown::path(&canonical),
                why: "its path holds a line break or ends in a space, so it cannot be written as \
                      a line of .upload-roots"
                    .into(),
            });
        }
        let warnings = warnings(&canonical, self);
        let _lock = self.roots_lock()?;
        let mut text = self.read_roots()?;
        let known = lines(&text).any(|(_, entry)| same_folder(entry, &canonical));
        if !known {
            if !text.is_empty() && !text.ends_with(b"\n") {
                text.push(b'\n');
            }
            text.extend_from_slice(line);
            text.push(b'\n');
            self.write_roots(&text)?;
            self.audit().append(
                "upload_roots.add",
                crate::grants::clean_reason(actor),
                json!({ "path": Shown::path(&canonical).to_string(),
                        "reason": crate::grants::clean_reason(reason) }),
            )?;
        }
        Ok(RootsChanged {
            path: canonical,
            changed: !known,
            removed_lines: Vec::new(),
            warnings,
        })
    }

    /// Stop allowing the folder `path` as an upload root: every line of `.upload-roots`
    /// that names it (as written, or the same folder when both open) is removed, every other
    /// line kept.
    ///
    /// # Errors
    ///
    /// `invalid_argument` without a reason; `not_found` when no line of the file names it
    /// (an entry of `SAFE_LANES_UPLOAD_ROOTS` or `GWSA_UPLOAD_ROOTS` is the environment's);
    /// `relative_path`, `nul_byte`, `insecure_root`, `io`.
    pub fn remove_upload_root(
        &self,
        path: &Path,
        reason: &str,
        actor: &str,
    ) -> Result<RootsChanged> {
        crate::grants::reason_given("upload_roots.remove", "removal of an upload root", reason)?;
        AbsPath::new(path)?;
        let opened = canonical(path).ok();
        let given = path.as_os_str().as_bytes();
        let _lock = self.roots_lock()?;
        let text = self.read_roots()?;
        let names = |entry: &[u8]| {
            entry == given || opened.as_deref().is_some_and(|c| same_folder(entry, c))
        };
        let removed: Vec<usize> = lines(&text)
            .filter(|(_, entry)| names(entry))
            .map(|(n, _)| n)
            .collect();
        if removed.is_empty() {
            return Err(Error::NotFound {
                path: Shown::path(path),
                why: "no line of .upload-roots names it (an entry of SAFE_LANES_UPLOAD_ROOTS or \
                      GWSA_UPLOAD_ROOTS is removed from the environment)"
                    .into(),
            });
        }
        let kept: Vec<&[u8]> = text
            .split(|&b| b == b'\n')
            .enumerate()
            .filter(|(i, _)| !removed.contains(&(i + 1)))
            .map(|(_, line)| line)
            .collect();
        self.write_roots(&kept.join(&b'\n'))?;
        let shown = opened.clone().unwrap_or_else(|| path.to_path_buf());
        self.audit().append(
            "upload_roots.remove",
            crate::grants::clean_reason(actor),
            json!({ "path": Shown::path(&shown).to_string(), "lines": removed,
                    "reason": crate::grants::clean_reason(reason) }),
        )?;
        Ok(RootsChanged {
            path: shown,
            changed: true,
            removed_lines: removed,
            warnings: Vec::new(),
        })
    }

    /// The bytes of `.upload-roots` (none when it is missing).
    fn read_roots(&self) -> Result<Vec<u8>> {
        let fd = match self
            .anchor()
            .open_read(RelPath::new(UPLOAD_ROOTS_FILE)?, Symlinks::Deny)
        {
            Ok(fd) => fd,
            Err(Error::NotFound { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut text = Vec::new();
        crate::fd::ReadAt::new(std::os::fd::AsFd::as_fd(&fd))
            .take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut text)
            .map_err(|e| Error::io("read", &self.path().join(UPLOAD_ROOTS_FILE), e))?;
        if text.len() as u64 > MAX_FILE_BYTES {
            return Err(Error::TooLarge {
                what: ".upload-roots, in bytes,",
                limit: MAX_FILE_BYTES,
            });
        }
        Ok(text)
    }

    /// Replace `.upload-roots` with `text`, atomically, keeping its permission bits.
    fn write_roots(&self, text: &[u8]) -> Result<()> {
        let name = Name::new(UPLOAD_ROOTS_FILE)?;
        let mode = self
            .anchor()
            .stat_entry(name)
            .map_or(0o600, |st| beneath::permissions(&st) & 0o755);
        self.anchor()
            .write_file(name, text, mode, beneath::Publish::Replace)
    }

    /// An exclusive lock for a change to `.upload-roots`, released when dropped.
    fn roots_lock(&self) -> Result<std::os::fd::OwnedFd> {
        let fd = self.anchor().open(
            RelPath::new(LOCK_FILE)?,
            OFlags::RDWR | OFlags::CREATE | OFlags::NONBLOCK,
            Mode::from_raw_mode(0o600),
            Symlinks::Deny,
        )?;
        rustix::fs::flock(&fd, FlockOperation::LockExclusive)
            .map_err(|e| Error::io("flock", &self.path().join(LOCK_FILE), e))?;
        Ok(fd)
    }
}

/// Where the kernel finds the folder `path` (the human's, following links).
fn canonical(path: &Path) -> Result<PathBuf> {
    let dir = Anchor::open_ambient(path, Ambient::because("an upload root the human names"))?;
    beneath::location_of(dir.as_fd())
}

/// The entries of the file's `text`, as the loader reads them: each line's number (1-based)
/// and its text trimmed, blank lines and comments left out.
fn lines(text: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    text.split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim_ascii()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with(b"#"))
}

/// Whether the entry `entry` names the folder `canonical`: spelled so, or opening to it.
fn same_folder(entry: &[u8], canonical: &Path) -> bool {
    if entry == canonical.as_os_str().as_bytes() {
        return true;
    }
    let path = PathBuf::from(OsString::from_vec(entry.to_vec()));
    path.is_absolute() && !entry.contains(&0) && canonical_of(&path).as_deref() == Some(canonical)
}

fn canonical_of(path: &Path) -> Option<PathBuf> {
    canonical(path).ok()
}
