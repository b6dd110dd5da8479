//! What lies around a grant's folder, above it, that the rule must know: a grant can be a
//! folder inside a git directory (`repo/.git/hooks`), inside a repository's working tree whose
//! configuration names paths in it (`core.hooksPath = scripts/hooks` with `repo/scripts`
//! granted), or inside a Python environment (`venv/lib/python3.12/site-packages`). The rule
//! sees only the grant; [`Around::of`] looks above it once, as the human's tools would.
//!
//! Everything is read through the primitive, from `/` down, never following a link: the
//! grant's path is canonical. What cannot be read is taken as absent: the rule then judges
//! the grant as a folder of its own, as it always did.

use std::path::{Component, Path, PathBuf};

use super::gitconfig;
use super::rule::pointer;
use super::scan::read_rel;
use crate::beneath::{Ambient, Anchor, Symlinks};
use crate::input::{AbsPath, Name};

/// What lies above a grant's folder, for the rule.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Around {
    /// The grant lies inside a git directory: its path relative to that directory (the
    /// innermost).
    pub(crate) git_dir: Option<PathBuf>,
    /// The grant lies in a repository's working tree: the paths of the grant that the
    /// repository's configuration names (`""`: the whole grant lies in one).
    pub(crate) named: Vec<PathBuf>,
    /// The grant lies inside a Python environment: its path relative to the environment's top.
    pub(crate) environment: Option<PathBuf>,
}

impl Around {
    /// What lies above the folder `grant` (absolute, canonical).
    pub(crate) fn of(grant: &Path) -> Self {
        let mut around = Self::default();
        let root = Ambient::because("the root directory, above a grant's folder");
        let Ok(root) = Anchor::open_ambient(Path::new("/"), root) else {
            return around;
        };
        let mut worktree_seen = false;
        for top in grant.ancestors().skip(1) {
            let Ok(rel) = grant.strip_prefix(top) else {
                continue;
            };
            let Some(dir) = open(&root, top) else {
                continue;
            };
            if around.git_dir.is_none() && is_git_dir(&dir, top) {
                around.git_dir = Some(rel.to_path_buf());
            }
            if around.environment.is_none() && is_file(&dir, "pyvenv.cfg") {
                around.environment = Some(rel.to_path_buf());
            }
            if !worktree_seen && let Some(named) = named_by_worktree(&root, &dir, top, grant) {
                worktree_seen = true;
                around.named = named;
            }
        }
        around
    }
}

/// The directory at the absolute `path`, beneath `root` (`/`).
fn open(root: &Anchor, path: &Path) -> Option<Anchor> {
    let below = AbsPath::new(path).ok()?.below_root().ok()?;
    match path == Path::new("/") {
        true => root.try_clone().ok(),
        false => root.open_dir(below, Symlinks::Deny).ok(),
    }
}

fn kind(dir: &Anchor, name: &str) -> Option<rustix::fs::FileType> {
    let st = dir.stat_entry_if_any(Name::new(name).ok()?).ok()??;
    Some(rustix::fs::FileType::from_raw_mode(st.st_mode))
}

fn is_file(dir: &Anchor, name: &str) -> bool {
    kind(dir, name) == Some(rustix::fs::FileType::RegularFile)
}

fn is_dir(dir: &Anchor, name: &str) -> bool {
    kind(dir, name) == Some(rustix::fs::FileType::Directory)
}

/// Whether `dir` (at `path`) is a git directory, as the rule reads one.
fn is_git_dir(dir: &Anchor, path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.as_encoded_bytes().eq_ignore_ascii_case(b".git"))
        || (kind(dir, "HEAD").is_some()
            && ((is_dir(dir, "objects") && is_dir(dir, "refs"))
                || kind(dir, "commondir").is_some()))
}

/// When `dir` (at `top`) is the top of a working tree (it holds `.git`), the paths of `grant`
/// that its configuration names.
fn named_by_worktree(
    root: &Anchor,
    dir: &Anchor,
    top: &Path,
    grant: &Path,
) -> Option<Vec<PathBuf>> {
    let git_dir = match kind(dir, ".git")? {
        rustix::fs::FileType::Directory => top.join(".git"),
        rustix::fs::FileType::RegularFile => {
            let text = read_rel(dir, Path::new(".git"))?;
            fold(&top.join(pointer(&text)?))
        }
        _ => return None,
    };
    let mut config = Vec::new();
    if let Some(git) = open(root, &git_dir) {
        config.extend(read_rel(&git, Path::new("config")).unwrap_or_default());
        // A linked worktree's configuration is its common directory's.
        if let Some(common) = read_rel(&git, Path::new("commondir")) {
            let common = String::from_utf8_lossy(&common).trim_end().to_owned();
            if let Some(common) = open(root, &fold(&git_dir.join(common))) {
                config.push(b'\n');
                config.extend(read_rel(&common, Path::new("config")).unwrap_or_default());
            }
        }
    }
    let entries = gitconfig::parse(&config).unwrap_or_default();
    let mut named = Vec::new();
    for word in gitconfig::named_paths(&entries) {
        for base in [top, git_dir.as_path()] {
            let at = fold(&base.join(&word));
            if let Ok(rel) = at.strip_prefix(grant) {
                named.push(rel.to_path_buf());
            } else if grant.starts_with(&at) {
                named.push(PathBuf::new());
            }
        }
    }
    Some(named)
}

/// `path` with `.` and `..` folded as written.
fn fold(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(tmp: &tempfile::TempDir, rel: &str) -> PathBuf {
        let path = tmp.path().join(rel);
        std::fs::create_dir_all(&path).unwrap();
        path.canonicalize().unwrap()
    }

    #[test]
    fn a_grant_inside_a_git_directory_an_environment_or_a_worktree_is_seen_as_such() {
        let tmp = tempfile::tempdir().unwrap();
        // A repository whose configuration points git at a folder below the grant's parent.
        let hooks = canonical(&tmp, "repo/.git/hooks");
        std::fs::write(tmp.path().join("repo/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(
            tmp.path().join("repo/.git/config"),
            "[core]\n\thooksPath = scripts/hooks\n",
        )
        .unwrap();
        let scripts = canonical(&tmp, "repo/scripts");
        let site = canonical(&tmp, "venv/lib/python3.12/site-packages");
        std::fs::write(tmp.path().join("venv/pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        let plain = canonical(&tmp, "plain/sub");

        let around = Around::of(&hooks);
        assert_eq!(around.git_dir.as_deref(), Some(Path::new("hooks")));
        let around = Around::of(&scripts);
        assert_eq!(around.git_dir, None);
        assert_eq!(around.named, [PathBuf::from("hooks")]);
        let around = Around::of(&site);
        assert_eq!(
            around.environment.as_deref(),
            Some(Path::new("lib/python3.12/site-packages"))
        );
        assert_eq!(Around::of(&plain), Around::default());
    }
}
