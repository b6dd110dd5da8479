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
//! exactly the file that was checked:
//!
//! 1. Lexical checks: absolute (`relative_path`), no NUL (`nul_byte`), no trailing `/`
//!    (`not_regular_file`), at most `PATH_MAX` bytes.
//! 2. **Fast path**: when the path starts with an allowed root's canonical path, the rest is
//!    opened beneath that root's descriptor with `RESOLVE_NO_SYMLINKS`. Success means the file
//!    is beneath the root and its canonical path is the lexical one.
//! 3. **Followed path**: otherwise (a symbolic link somewhere, a `..` leaving the root, a path
//!    spelled through another directory), the kernel resolves the whole path (`O_PATH`, no
//!    magic links) and reports where the inode it reached lives. That location must lie inside
//!    an allowed root by whole components. The file is then re-opened *beneath that root's
//!    descriptor* with `RESOLVE_NO_SYMLINKS` and must be the same inode, so the handle always
//!    comes from the confinement primitive and a swap between the two opens is detected (and
//!    retried) rather than trusted.
//! 4. **Hard guard**: anything under the state root other than `.downloads` is refused
//!    (`state_root`), even when an allowlist entry covers the state root by mistake.
//! 5. Only regular files (`not_regular_file`; FIFOs are opened non-blocking, so a FIFO is
//!    refused at once), with exactly one link (`hardlinked`: a second link can smuggle any
//!    inode, such as a token, into an allowed folder).
//!
//! Refusals say why: `traversal` when a `..` carried a path that started in an allowed root
//! out of it, `symlink_escape` when a link did, `outside_allowlist` otherwise.

use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use serde::Serialize;

use crate::actor::Actor;
use crate::beneath::{self, Ambient, Anchor, Symlinks, identity, location_of};
use crate::error::{Error, Result, Shown};
use crate::input::{AbsPath, RelPath};
use crate::root::{StateRoot, UPLOAD_ROOTS_FILE};

/// Attempts of the followed path when the file is swapped between its two opens.
const ATTEMPTS: usize = 3;
/// Environment variables naming extra roots, in the order they are read.
pub const ENV_VARS: [&str; 2] = ["SAFE_LANES_UPLOAD_ROOTS", "GWSA_UPLOAD_ROOTS"];

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
    /// Whether the root contains the state root (the hard guard then refuses everything
    /// under the state root but `.downloads`).
    pub covers_state_root: bool,
    #[serde(skip)]
    anchor: Anchor,
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
    /// The handle to exactly the file that was checked (read-only, offset 0).
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
    state_root: PathBuf,
    downloads: PathBuf,
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
        let state_root = root.path().to_path_buf();
        let downloads = root.downloads_path();
        let mut this = Self {
            roots: Vec::new(),
            ignored: Vec::new(),
            state_root,
            downloads: downloads.clone(),
            audit: root.audit(),
            actor: Actor::Agent,
        };
        this.roots.push(AllowedRoot {
            path: downloads.clone(),
            origin: AllowedBy::Downloads,
            entry: downloads.to_string_lossy().into_owned(),
            covers_state_root: false,
            anchor: root.downloads().try_clone()?,
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
        if self.roots.iter().any(|r| r.path == path) {
            return;
        }
        self.roots.push(AllowedRoot {
            covers_state_root: is_within(&self.state_root, &path),
            path,
            origin,
            entry: shown,
            anchor,
        });
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
    /// `relative_path`, `nul_byte`, `not_found`, `traversal`, `symlink_escape`,
    /// `outside_allowlist`, `state_root`, `not_regular_file`, `hardlinked`, or `io`.
    ///
    /// # Security
    ///
    /// `path` is untrusted. The returned handle was opened beneath an allowed root's
    /// descriptor, and is never under the state root except `.downloads`.
    pub fn open(&self, path: &Path) -> Result<Opened> {
        self.open_unrecorded(path).map_err(|e| {
            self.audit
                .refused("upload", self.actor, &path.to_string_lossy(), e)
        })
    }

    fn open_unrecorded(&self, path: &Path) -> Result<Opened> {
        check_lexically(path)?;
        let parts = components(path);
        if let Some((root, rest)) = self.lexical_root(&parts) {
            let opened = RelPath::new(&rest).and_then(|rest| {
                let flags = OFlags::RDONLY | OFlags::NONBLOCK;
                root.anchor.open(rest, flags, Mode::empty(), Symlinks::Deny)
            });
            match opened {
                Ok(fd) => {
                    let real = path_clean::clean(root.path.join(&rest));
                    return self.accept(path, fd, real, root);
                }
                // A link or a `..` out of the root: the followed path decides.
                Err(Error::SymlinkEscape { .. } | Error::Traversal { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        self.open_followed(path, &parts)
    }

    /// [`UploadSource::open`], then hash the whole file through the handle.
    ///
    /// # Errors
    ///
    /// As [`UploadSource::open`], and `io` when reading fails.
    pub fn resolve(&self, path: &Path) -> Result<Source> {
        let opened = self.open(path)?;
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

    /// The root whose canonical path starts `parts`, with the rest of the path.
    fn lexical_root(&self, parts: &[&[u8]]) -> Option<(&AllowedRoot, PathBuf)> {
        self.roots.iter().find_map(|root| {
            let root_parts = components(&root.path);
            parts.starts_with(&root_parts).then(|| {
                let rest = parts[root_parts.len()..].join(&b'/');
                (root, PathBuf::from(OsString::from_vec(rest)))
            })
        })
    }

    /// Let the kernel follow every link, learn where the inode lives, and re-open it beneath
    /// the allowed root that contains it.
    fn open_followed(&self, path: &Path, parts: &[&[u8]]) -> Result<Opened> {
        for _ in 0..ATTEMPTS {
            let why = Ambient::because(
                "where the kernel finds a source, only to pick its allowed root; the file is \
                 re-opened beneath that root and compared by inode",
            );
            let (followed, real) = beneath::locate(path, why)?;
            self.guard(&real)?;
            let Some(root) = self.roots.iter().find(|r| is_within(&r.path, &real)) else {
                return Err(self.classify_outside(path, parts, &real));
            };
            let rest = real.strip_prefix(&root.path).unwrap_or(Path::new(""));
            let opened = RelPath::new(rest).and_then(|rest| {
                let flags = OFlags::RDONLY | OFlags::NONBLOCK;
                root.anchor.open(rest, flags, Mode::empty(), Symlinks::Deny)
            });
            let fd = match opened {
                Ok(fd) => fd,
                // Moved or swapped since the kernel reported it: look again.
                Err(Error::SymlinkEscape { .. } | Error::NotFound { .. }) => continue,
                Err(e) => return Err(e),
            };
            if identity(fd.as_fd())? != identity(followed.as_fd())? {
                continue;
            }
            return self.accept(path, fd, real, root);
        }
        Err(Error::SymlinkEscape {
            path: Shown::path(path),
            why: "the file kept changing while it was checked",
        })
    }

    /// The checks on an opened candidate: hard guard, regular file, one link.
    fn accept(
        &self,
        asked: &Path,
        fd: OwnedFd,
        real: PathBuf,
        root: &AllowedRoot,
    ) -> Result<Opened> {
        self.guard(&real)?;
        let st = beneath::regular_single_link(fd.as_fd(), asked)?;
        // Reads need no O_NONBLOCK; it only kept a FIFO from blocking the open.
        rustix::fs::fcntl_setfl(&fd, OFlags::empty()).map_err(|e| Error::io("fcntl", asked, e))?;
        Ok(Opened {
            file: File::from(fd),
            path: real,
            root: root.path.clone(),
            bytes: st.st_size as u64,
        })
    }

    /// The hard guard: nothing under the state root but `.downloads`.
    fn guard(&self, real: &Path) -> Result<()> {
        if is_within(&self.state_root, real) && !is_within(&self.downloads, real) {
            return Err(Error::StateRoot {
                path: Shown::path(real),
            });
        }
        Ok(())
    }

    /// Why a path whose real location is outside every root was refused.
    fn classify_outside(&self, asked: &Path, parts: &[&[u8]], real: &Path) -> Error {
        let started_inside = self.lexical_root(parts).is_some();
        match (started_inside, parts.contains(&&b".."[..])) {
            (true, true) => Error::Traversal {
                path: Shown::path(asked),
            },
            (true, false) => Error::SymlinkEscape {
                path: Shown::path(asked),
                why: "a symbolic link leads outside the allowed upload roots",
            },
            (false, _) => Error::OutsideAllowlist {
                path: Shown::path(real),
            },
        }
    }
}

/// Whether `path` is `base` or below it, by whole components.
fn is_within(base: &Path, path: &Path) -> bool {
    path.starts_with(base)
}

/// The components of an absolute path, without empty and `.` ones (`..` is kept).
fn components(path: &Path) -> Vec<&[u8]> {
    path.as_os_str()
        .as_bytes()
        .split(|&b| b == b'/')
        .filter(|p| !p.is_empty() && *p != b".")
        .collect()
}

fn check_lexically(path: &Path) -> Result<()> {
    let bytes = AbsPath::new(path)?.as_path().as_os_str().as_bytes();
    if bytes.ends_with(b"/") || bytes.ends_with(b"/.") || bytes.ends_with(b"/..") {
        return Err(Error::NotRegularFile {
            path: Shown::bytes(bytes),
            kind: "a directory path (it ends with `/`, `.` or `..`)",
        });
    }
    Ok(())
}

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
    if let Err(e) = File::from(fd).read_to_end(&mut text) {
        return vec![("0".to_owned(), Err(format!("unreadable: {e}")))];
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
    }

    #[test]
    fn components_keep_dotdot_and_drop_dots() {
        let p = Path::new("/a//./b/../c");
        assert_eq!(components(p), [&b"a"[..], b"b", b"..", b"c"]);
    }
}
