//! What an older version of the library left in a state root, and how `init` clears it.
//!
//! Before change sets (ADR 0027), a command in a read-write grant stood empty *placeholders*
//! in the human's folder for protected paths that did not exist (an empty `.vscode/`, an
//! empty `.git/config.worktree`, a `.git/commondir` of `.`), journaled in
//! `<root>/.placeholders/journal` and removed when the last command ended. A process killed
//! before that left them there, and some break the human's tools (git reads an empty
//! `commondir` as a path). Nothing makes placeholders any more; [`clear_placeholders`]
//! removes those a journal still names — each only while it still is one, so nothing the
//! human put there since is touched — and then the registry.

use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{FileType, FlockOperation};

use crate::beneath::{Anchor, Symlinks};
use crate::error::{Error, Result};
use crate::fd::ReadAt;
use crate::input::{AbsPath, Name, RelPath};

/// The registry older versions kept under the root.
const REGISTRY: &str = ".placeholders";
/// Its journal of placeholders made, and the file commands held while they ran.
const JOURNAL: &str = "journal";
const IN_USE: &str = "in-use";
/// The most of the journal read.
const MAX_JOURNAL: u64 = 16 << 20;

/// Remove the placeholders the journal of an older version's registry names, then the
/// registry; unless a command of that version still runs (it holds `in-use`). What was done,
/// in a sentence, if anything.
///
/// # Errors
///
/// `io` when the registry cannot be read or removed.
pub(crate) fn clear_placeholders(root: &Anchor) -> Result<Option<String>> {
    let registry = match root.open_dir(RelPath::new(REGISTRY)?, Symlinks::Deny) {
        Ok(dir) => dir,
        Err(Error::NotFound { .. } | Error::SymlinkEscape { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    if let Ok(in_use) = registry.open_read(RelPath::new(IN_USE)?, Symlinks::Deny)
        && rustix::fs::flock(&in_use, FlockOperation::NonBlockingLockExclusive).is_err()
    {
        return Ok(None);
    }
    let mut text = Vec::new();
    if let Ok(journal) = registry.open_read(RelPath::new(JOURNAL)?, Symlinks::Deny) {
        ReadAt::new(journal.as_fd())
            .take(MAX_JOURNAL)
            .read_to_end(&mut text)
            .map_err(|e| Error::io("read", JOURNAL, e))?;
    }
    let mut removed = 0;
    // Records of three NUL-ended fields: the kind (`d`, or `f` and the file's content), the
    // grant's folder, the path in it.
    let mut fields = text.split(|b| *b == 0);
    while let (Some(kind), Some(grant), Some(path)) = (fields.next(), fields.next(), fields.next())
    {
        let grant = Path::new(std::ffi::OsStr::from_bytes(grant));
        let path = Path::new(std::ffi::OsStr::from_bytes(path));
        match remove_if_placeholder(kind, grant, path) {
            Ok(true) => removed += 1,
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "could not remove an old placeholder"),
        }
    }
    root.remove_all(Name::new(REGISTRY)?)?;
    Ok(Some(format!(
        "removed the registry of placeholders an older version kept ({REGISTRY}), and the \
         {removed} placeholder(s) it had left in granted folders"
    )))
}

/// Remove the placeholder `kind` at `path` of the folder `grant`, if it still is one: an empty
/// directory for `d`, a regular file holding exactly the content after `f`.
fn remove_if_placeholder(kind: &[u8], grant: &Path, path: &Path) -> Result<bool> {
    let Ok(folder) = AbsPath::new(grant).and_then(Anchor::open_canonical) else {
        return Ok(false);
    };
    let (Some(name), Some(parent)) = (path.file_name(), path.parent()) else {
        return Ok(false);
    };
    let dir = if parent.as_os_str().is_empty() {
        folder
    } else {
        match folder.open_dir(RelPath::without_parents(parent)?, Symlinks::Deny) {
            Ok(dir) => dir,
            Err(_) => return Ok(false),
        }
    };
    let name = Name::new(name)?;
    match kind.split_first() {
        // Only while empty: `rmdir` refuses otherwise.
        Some((b'd', _)) => Ok(dir.remove_dir(name).is_ok()),
        Some((b'f', content)) => {
            let Ok(fd) = dir.open_read(name.as_rel(), Symlinks::Deny) else {
                return Ok(false);
            };
            let st = rustix::fs::fstat(&fd).map_err(|e| Error::io("fstat", path, e))?;
            let mut text = Vec::new();
            ReadAt::new(fd.as_fd())
                .take(content.len() as u64 + 1)
                .read_to_end(&mut text)
                .map_err(|e| Error::io("read", path, e))?;
            if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || text != content {
                return Ok(false);
            }
            let same = crate::beneath::identity(fd.as_fd())?;
            dir.remove_file_if(name, |now| crate::beneath::stat_identity(now) == same)
        }
        _ => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_placeholders_an_older_version_left_go_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        let p = |rel: &str| tmp.path().join(rel);
        for dir in [
            "root/.placeholders",
            "proj/.vscode",
            "proj/.idea/kept",
            "proj/.git",
        ] {
            std::fs::create_dir_all(p(dir)).unwrap();
        }
        std::fs::write(p("proj/.git/commondir"), ".\n").unwrap();
        std::fs::write(p("proj/.git/config.worktree"), "[core]\n").unwrap();
        let proj = p("proj").canonicalize().unwrap();
        let mut journal = Vec::new();
        for (kind, path) in [
            (&b"d"[..], ".vscode"),
            (b"d", ".idea"),
            (b"f.\n", ".git/commondir"),
            (b"f", ".git/config.worktree"),
            (b"d", "../outside"),
        ] {
            for part in [kind, proj.as_os_str().as_bytes(), path.as_bytes()] {
                journal.extend_from_slice(part);
                journal.push(0);
            }
        }
        std::fs::write(p("root/.placeholders/journal"), journal).unwrap();
        std::fs::write(p("root/.placeholders/in-use"), "").unwrap();
        let root =
            Anchor::open_canonical(AbsPath::new(&p("root").canonicalize().unwrap()).unwrap())
                .unwrap();
        let said = clear_placeholders(&root).unwrap().unwrap();
        assert!(said.contains("2 placeholder(s)"), "{said}");
        assert!(!p("proj/.vscode").exists() && !p("proj/.git/commondir").exists());
        // The human's: a folder with something in it, a file with other content.
        assert!(p("proj/.idea/kept").exists());
        assert_eq!(
            std::fs::read(p("proj/.git/config.worktree")).unwrap(),
            b"[core]\n"
        );
        assert!(!p("root/.placeholders").exists());
        assert_eq!(clear_placeholders(&root).unwrap(), None, "once");
    }
}
