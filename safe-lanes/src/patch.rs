//! Apply a unified diff to one file beneath a read-write grant, strictly and atomically.
//!
//! [`apply_patch`] is how an agent edits a granted folder without a generic "write file" tool:
//!
//! - the grant must be read-write (`read_only`), current (`unknown_alias`, `revoked`) and
//!   available here (`unavailable_on_host`); a pending request grants nothing;
//! - the target is a relative path resolved through the confinement primitive with *no*
//!   symbolic link allowed at any component or at the target (`symlink_escape`), no `..` out
//!   (`traversal`), no absolute path (`absolute_path`), no NUL (`nul_byte`);
//! - the target must be a regular file (`not_regular_file`) with one link (`hardlinked`), UTF-8
//!   text of at most [`MAX_FILE_BYTES`];
//! - the diff must describe exactly one text file: binary patches, renames, copies, mode-only
//!   changes and multi-file diffs are `patch_rejected`;
//! - every hunk must match exactly (context lines included; a hunk may sit at another line
//!   than it says, but never with fuzz), else `patch_rejected` names the failing hunk and the
//!   file is untouched;
//! - `--- /dev/null` creates the file (never over an existing one); `+++ /dev/null` deletes it
//!   (only if the patch removes all of its content);
//! - the result is written to a temporary file in the same directory, `fsync`ed, and renamed
//!   over the target, keeping its mode; a reader sees the old file or the new one, never a mix.

use std::ffi::OsStr;
use std::io::Read;
use std::os::fd::AsFd;
use std::path::{Component, Path, PathBuf};

use diffy::patch_set::{FileMode, FileOperation, ParseOptions, PatchKind, PatchSet};
use rustix::fs::{FileType, Mode, OFlags};
use serde::Serialize;

use crate::beneath::{Anchor, Symlinks, kind_of};
use crate::download::random_hex;
use crate::error::{Error, Result, Shown};
use crate::grants::{Alias, Session, Want};

/// The largest file a patch may read or produce.
pub const MAX_FILE_BYTES: u64 = 16 << 20;
/// The mode of a file a patch creates.
const NEW_FILE_MODE: u32 = 0o644;

/// What a patch did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// An existing file was rewritten.
    Modified,
    /// A new file was created.
    Created,
    /// The file was deleted.
    Deleted,
}

/// The result of [`apply_patch`].
#[derive(Clone, Debug, Serialize)]
pub struct Patched {
    /// The file, inside the granted folder.
    #[serde(serialize_with = "crate::lossy::path")]
    pub path: PathBuf,
    /// What happened to it.
    pub change: Change,
    /// Hunks applied.
    pub hunks: usize,
    /// Its size afterwards.
    pub bytes: u64,
}

/// Apply `diff` to `file` (relative to the grant `alias`) in `session`.
///
/// # Errors
///
/// See the module documentation; `io` for system failures. On every error the target and its
/// directory are unchanged.
///
/// # Security
///
/// `alias`, `file` and `diff` are untrusted.
pub fn apply_patch(session: &Session, alias: &str, file: &Path, diff: &str) -> Result<Patched> {
    apply(session, alias, file, diff)
        .map_err(|e| session.refused("patch", &format!("{alias}:{}", file.to_string_lossy()), e))
}

fn apply(session: &Session, alias: &str, file: &Path, diff: &str) -> Result<Patched> {
    let alias = Alias::new(alias)?;
    let snapshot = session.snapshot()?;
    let grant = snapshot.folder(&alias, Want::Write)?;
    let (parent, name) = split_target(file)?;
    let dir = grant.folder()?.open_dir(parent, Symlinks::Deny)?;
    let edit = parse(diff)?;
    let current = read_target(&dir, name, file)?;
    let base = match (&edit.op, &current) {
        (Op::Create, Some(_)) => {
            return Err(rejected(format!(
                "{} already exists; the patch creates it",
                Shown::path(file)
            )));
        }
        (Op::Create, None) => String::new(),
        (_, None) => {
            return Err(Error::NotFound {
                path: Shown::path(file),
                why: "no such file to patch",
            });
        }
        (_, Some(existing)) => existing.text.clone(),
    };
    let patched = diffy::apply(&base, &edit.patch)
        .map_err(|e| rejected(format!("{e}: its lines do not match {}", Shown::path(file))))?;
    let hunks = edit.patch.hunks().len();
    let path = grant.path.join(file);
    let change = match edit.op {
        Op::Delete => {
            if !patched.is_empty() {
                return Err(rejected(
                    "the patch deletes the file but leaves content in it".into(),
                ));
            }
            dir.remove_file(name)?;
            dir.sync()?;
            Change::Deleted
        }
        Op::Create => {
            write_beside(&dir, name, &patched, NEW_FILE_MODE, Replace::Never)?;
            Change::Created
        }
        Op::Modify => {
            let mode = current.map_or(NEW_FILE_MODE, |c| c.mode);
            write_beside(&dir, name, &patched, mode, Replace::Always)?;
            Change::Modified
        }
    };
    let bytes = if change == Change::Deleted {
        0
    } else {
        patched.len() as u64
    };
    let patched = Patched {
        path: path_clean::clean(path),
        change,
        hunks,
        bytes,
    };
    session.record(
        "patch.apply",
        serde_json::json!({ "alias": alias, "result": &patched }),
    )?;
    Ok(patched)
}

/// What the diff does to its one file.
enum Op {
    Create,
    Modify,
    Delete,
}

struct Edit<'d> {
    op: Op,
    patch: diffy::Patch<'d, str>,
}

/// Parse a diff that changes exactly one text file.
fn parse(diff: &str) -> Result<Edit<'_>> {
    // Git's extended format (renames, modes, binary markers) when it has git headers.
    let options = if diff.lines().any(|l| l.starts_with("diff --git ")) {
        ParseOptions::gitdiff()
    } else {
        ParseOptions::unidiff()
    };
    let files = PatchSet::parse(diff, options)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| {
            rejected(format!(
                "not a unified diff: {}",
                Shown::text(&e.to_string())
            ))
        })?;
    let [file] = <[_; 1]>::try_from(files).map_err(|files: Vec<_>| {
        rejected(format!(
            "the diff must change exactly one file; it changes {}",
            files.len()
        ))
    })?;
    if [file.old_mode(), file.new_mode()]
        .into_iter()
        .flatten()
        .any(|m| matches!(m, FileMode::Symlink | FileMode::Gitlink))
    {
        return Err(rejected(
            "symbolic links and submodules are not patched".into(),
        ));
    }
    let op = match file.operation() {
        FileOperation::Create(_) => Op::Create,
        FileOperation::Delete(_) => Op::Delete,
        FileOperation::Modify { .. } => Op::Modify,
        FileOperation::Rename { .. } | FileOperation::Copy { .. } => {
            return Err(rejected("renames and copies are not patched".into()));
        }
    };
    let patch = match file.into_patch() {
        PatchKind::Text(patch) => patch,
        PatchKind::Binary(_) => return Err(rejected("binary patches are not applied".into())),
    };
    if patch.hunks().is_empty() {
        return Err(rejected("the diff has no hunks".into()));
    }
    Ok(Edit { op, patch })
}

/// The target's directory (relative to the grant) and its name.
fn split_target(file: &Path) -> Result<(&Path, &OsStr)> {
    let bytes = file.as_os_str().as_encoded_bytes();
    if bytes.contains(&0) {
        return Err(Error::NulByte {
            input: Shown::path(file),
        });
    }
    if file.is_absolute() {
        return Err(Error::AbsolutePath {
            path: Shown::path(file),
        });
    }
    if file.components().any(|c| c == Component::ParentDir) {
        return Err(Error::Traversal {
            path: Shown::path(file),
        });
    }
    match (file.parent(), file.file_name()) {
        (Some(parent), Some(name)) if !bytes.ends_with(b"/") => Ok((parent, name)),
        _ => Err(Error::NotRegularFile {
            path: Shown::path(file),
            kind: "a directory",
        }),
    }
}

struct Current {
    text: String,
    mode: u32,
}

/// The target's content and mode, or `None` when it does not exist.
fn read_target(dir: &Anchor, name: &OsStr, shown: &Path) -> Result<Option<Current>> {
    let fd = match dir.open(
        Path::new(name),
        OFlags::RDONLY | OFlags::NONBLOCK,
        Mode::empty(),
        Symlinks::Deny,
    ) {
        Ok(fd) => fd,
        Err(Error::NotFound { .. }) => return Ok(None),
        Err(Error::SymlinkEscape { .. }) => {
            return Err(Error::SymlinkEscape {
                path: Shown::path(shown),
                why: "the target is a symbolic link, which is never patched",
            });
        }
        Err(e) => return Err(e),
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| Error::io("fstat", shown, e))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(Error::NotRegularFile {
            path: Shown::path(shown),
            kind: kind_of(&st),
        });
    }
    if st.st_nlink != 1 {
        return Err(Error::Hardlinked {
            path: Shown::path(shown),
            links: st.st_nlink,
        });
    }
    if st.st_size as u64 > MAX_FILE_BYTES {
        return Err(Error::TooLarge {
            what: "the file, in bytes,",
            limit: MAX_FILE_BYTES,
        });
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io("read", shown, e))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| rejected(format!("{} is not UTF-8 text", Shown::path(shown))))?;
    Ok(Some(Current {
        text,
        mode: st.st_mode & 0o7777,
    }))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Replace {
    Always,
    Never,
}

/// Write `text` to a temporary file in `dir`, `fsync` it, and rename it to `name`.
fn write_beside(dir: &Anchor, name: &OsStr, text: &str, mode: u32, replace: Replace) -> Result<()> {
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(Error::TooLarge {
            what: "the file, in bytes,",
            limit: MAX_FILE_BYTES,
        });
    }
    let tmp = format!(".safe-lanes-patch-{}", random_hex());
    let tmp = OsStr::new(&tmp);
    let fd = dir.create_new(tmp, 0o600)?;
    let result = (|| {
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))
            .map_err(|e| Error::io("fchmod", "patched file", e))?;
        let mut rest = text.as_bytes();
        while !rest.is_empty() {
            let n = rustix::io::write(fd.as_fd(), rest)
                .map_err(|e| Error::io("write", "patched file", e))?;
            rest = &rest[n..];
        }
        rustix::fs::fsync(&fd).map_err(|e| Error::io("fsync", "patched file", e))?;
        match replace {
            Replace::Always => dir.rename_replace(tmp, name)?,
            Replace::Never => dir.rename_new(tmp, name).map_err(|e| {
                if e.raw_os_error() == Some(rustix::io::Errno::EXIST.raw_os_error()) {
                    rejected("the file appeared while the patch was applied".into())
                } else {
                    e
                }
            })?,
        }
        dir.sync()
    })();
    if result.is_err() {
        let _ = dir.remove_file(tmp);
    }
    result
}

fn rejected(why: String) -> Error {
    Error::PatchRejected { why }
}
