//! What a confined command may not leave behind in a read-write grant: the files the human's
//! own tools run later.
//!
//! A read-write grant lets an agent change anything in a folder. Some of what it could change
//! is not the agent's work but instructions to the human's tools, which run them outside every
//! sandbox: git runs `core.fsmonitor` from `.git/config` on the next `git status` and the
//! hooks of `.git/hooks/` on `git commit`; direnv, VS Code and JetBrains IDEs act on `.envrc`,
//! `.vscode/` and `.idea/` when the human opens the folder; a shell reads its start-up files.
//! These paths are **protected**: read-only inside the sandbox, and refused by
//! [`apply_patch`](crate::patch::apply_patch) with `protected_path`.
//!
//! | where | protected |
//! |---|---|
//! | the top of every read-write grant | `.envrc`, `.vscode/`, `.idea/`; the start-up files of [`START_UP_FILES`] |
//! | the working tree of each repository (the grant itself, and each folder directly inside it, that has a `.git`) | `.gitmodules`, and `.git` itself when it is a file (a pointer to the git directory) |
//! | a bare repository (the grant itself, or a folder directly inside it, holding `HEAD`, `objects` and `refs`) | as a git directory |
//! | each git directory (a repository's `.git`, the one a `.git` file points to and its common directory, each submodule's under `modules/`, each linked worktree's under `worktrees/`) | `config`, `hooks/`, `info/`, `commondir`, `config.worktree` |
//!
//! A protected path that exists is mounted read-only over itself. One that does not exist is
//! created as a [`Placeholder`] first (an empty directory, or for the two files git reads
//! where it expects them, a file git reads as "nothing") and then mounted read-only, so the
//! command cannot create it; placeholders are removed once no confined command needs them
//! (`confine/placeholders.rs`). Start-up files get placeholders only in a home folder: in
//! any other folder a missing `.bashrc` is never read. Every directory on the way from the
//! grant to a protected path is *pinned* (mounted over itself, still writable), so the
//! command cannot rename `.git` away and put a git directory of its own in its place.
//!
//! Commits keep working: git writes objects, refs, logs and the index, none of which is
//! protected. The human lifts a protection per grant with `--allow-protected PATH`
//! ([`Grant::allow_protected`](crate::grants::Grant::allow_protected)): PATH, relative to the
//! grant, lifts every protected path equal to it or inside it. The agent cannot.
//!
//! Not covered, by design: what the human runs knowingly — a `Makefile`, `package.json`
//! scripts, a `build.rs`, the hooks a repository keeps in its working tree for a hook manager
//! (`core.hooksPath = .husky`) — is the agent's work, to be reviewed like any change; and a
//! repository the agent creates itself (`git init` in a new folder) carries the agent's
//! configuration (the threat model says so).

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{FileType, Stat};

use crate::beneath::{Anchor, Symlinks};
use crate::error::{Error, Result, Shown};
use crate::fd::ReadAt;
use crate::input::{Name, RelPath};

/// What stands in for a protected path that does not exist, so that a confined command cannot
/// create it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placeholder {
    /// An empty directory (every tool that looks for a file there finds nothing to read).
    Dir,
    /// A file with this content: what git reads as if the file were absent (`commondir` of
    /// `.`: the git directory is its own; an empty `config.worktree`).
    File(&'static [u8]),
}

/// One protected name and what stands in for it when missing.
struct Rule {
    name: &'static str,
    placeholder: Placeholder,
}

const fn rule(name: &'static str, placeholder: Placeholder) -> Rule {
    Rule { name, placeholder }
}

/// Protected at the top of every read-write grant.
const IN_GRANT: &[Rule] = &[
    rule(".envrc", Placeholder::Dir),
    rule(".vscode", Placeholder::Dir),
    rule(".idea", Placeholder::Dir),
];

/// The shell and tool start-up files: protected at the top of every read-write grant where
/// they exist, and where they do not, in a home folder (the only folder a shell reads them
/// from).
pub(crate) const START_UP_FILES: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshenv",
    ".zshrc",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".gitconfig",
];

/// Protected at the top of each repository's working tree.
const IN_WORKTREE: &[Rule] = &[rule(".gitmodules", Placeholder::Dir)];

/// Protected in each git directory.
const IN_GIT_DIR: &[Rule] = &[
    rule("config", Placeholder::File(b"")),
    rule("hooks", Placeholder::Dir),
    rule("info", Placeholder::Dir),
    rule("commondir", Placeholder::File(b".\n")),
    rule("config.worktree", Placeholder::File(b"")),
];

/// The entries whose presence makes a directory under `modules/` a submodule's git directory.
const GIT_DIR_MARKERS: &[&str] = &["HEAD", "objects", "config", "hooks"];

/// The most a `.git` pointer file or a `commondir` may hold (git's own bound for a pointer).
const MAX_POINTER_BYTES: u64 = 1 << 20;
/// How deep the walk of a git directory's `modules/` goes, and how many entries it reads at
/// most before refusing (a tree that large is refused rather than half protected).
const MAX_MODULES_DEPTH: usize = 16;
const MAX_ENTRIES: usize = 20_000;

/// What a protected path is now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// A directory: mounted read-only over itself.
    Dir,
    /// A file (or another node that is not a directory or a link): mounted read-only over
    /// itself.
    File,
    /// A symbolic link: it cannot be mounted over, so a confined command is refused until the
    /// human replaces it or lifts its protection.
    Link,
    /// Absent: this stands in for it.
    Missing(Placeholder),
}

/// One protected path of a grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Protected {
    /// Relative to the grant's folder.
    pub path: PathBuf,
    /// What it is now.
    pub state: State,
}

/// The protected paths of one read-write grant as they are now, and its git directories.
#[derive(Clone, Debug, Default)]
pub(crate) struct Protection {
    entries: Vec<Protected>,
    git_dirs: Vec<PathBuf>,
}

impl Protection {
    /// Look at the folder of a read-write grant: its top, the repositories in it and their git
    /// directories. `home` says the folder is a home folder (the user's `$HOME`, or a home directory in `/etc/passwd`); paths equal to or
    /// inside one of `lifted` are left out.
    ///
    /// # Errors
    ///
    /// `sandbox_unavailable` when a git directory's `modules/` holds more than can be looked at
    /// (it would be half protected); `io` when a directory cannot be read.
    ///
    /// # Security
    ///
    /// Everything is looked at beneath `folder` without following a link; what a `.git` file
    /// or a `commondir` names (text a command could have written) only ever adds protection,
    /// and is looked at beneath `folder` too.
    pub(crate) fn scan(folder: &Anchor, home: bool, lifted: &[PathBuf]) -> Result<Self> {
        let mut scan = Scan {
            folder,
            out: Protection::default(),
            seen: 0,
            git_seen: BTreeSet::new(),
        };
        scan.rules(Path::new(""), IN_GRANT)?;
        for name in START_UP_FILES {
            scan.one(Path::new(""), name, home.then_some(Placeholder::Dir))?;
        }
        scan.repository(Path::new(""))?;
        for (name, st) in folder.entries()? {
            if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
                scan.repository(Path::new(&name))?;
            }
        }
        let mut out = scan.out;
        out.entries.retain(|p| !is_lifted(&p.path, lifted));
        out.entries.sort_by(|a, b| a.path.cmp(&b.path));
        out.entries.dedup_by(|a, b| a.path == b.path);
        Ok(out)
    }

    /// The protected paths.
    pub(crate) fn entries(&self) -> &[Protected] {
        &self.entries
    }

    /// The directories to pin: every directory strictly between the grant's folder and a
    /// protected path, and every git directory.
    #[cfg(any(target_os = "linux", test))]
    pub(crate) fn pins(&self) -> BTreeSet<PathBuf> {
        let mut pins = BTreeSet::new();
        for p in self.entries.iter().map(|p| &p.path).chain(&self.git_dirs) {
            let mut at = p.as_path();
            // The grant's folder itself is a mount already.
            if !at.as_os_str().is_empty() && self.git_dirs.iter().any(|g| g == at) {
                pins.insert(at.to_path_buf());
            }
            while let Some(parent) = at.parent().filter(|p| !p.as_os_str().is_empty()) {
                pins.insert(parent.to_path_buf());
                at = parent;
            }
        }
        pins
    }

    /// The refusal for writing `path` (relative to the grant, no `..`, links not followed)
    /// with a patch, if it is protected: equal to or inside a protected path, or inside a git
    /// directory (a patch edits text, not git's internals), unless the human lifted it
    /// (`lifted`, as in [`Protection::scan`]); the message names the grant `alias`.
    pub(crate) fn refusal(&self, path: &Path, lifted: &[PathBuf], alias: &str) -> Option<Error> {
        let path = normal(path);
        if is_lifted(&path, lifted) {
            return None;
        }
        let why = if let Some(p) = self.entries.iter().find(|p| path.starts_with(&p.path)) {
            format!(
                "{} is a path the human's own tools run later (see docs/threat-model.md)",
                Shown::path(&p.path)
            )
        } else if let Some(g) = self.git_dirs.iter().find(|g| path.starts_with(g)) {
            format!(
                "it is inside the git directory {}, which a patch does not edit",
                Shown::path(g)
            )
        } else {
            return None;
        };
        Some(Error::ProtectedPath {
            path: Shown::path(&path),
            why: format!(
                "{why}; the human can lift it for this grant with `safe-lanes grant set-access \
                 {alias} read_write --allow-protected {}`",
                Shown::path(&path)
            ),
        })
    }
}

/// Whether `path` is equal to or inside one of `lifted`.
fn is_lifted(path: &Path, lifted: &[PathBuf]) -> bool {
    lifted.iter().any(|l| path.starts_with(l))
}

/// `path` without `.` components and repeated separators.
fn normal(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect()
}

/// The walk of one grant's folder.
struct Scan<'a> {
    folder: &'a Anchor,
    out: Protection,
    /// Entries read so far (bounded by [`MAX_ENTRIES`]).
    seen: usize,
    /// Git directories already looked at (a `commondir` may name one twice).
    git_seen: BTreeSet<PathBuf>,
}

impl Scan<'_> {
    /// The directory `rel` of the grant, when it is one (no link followed), else `None`.
    fn dir(&self, rel: &Path) -> Result<Option<Anchor>> {
        if rel.as_os_str().is_empty() {
            return self.folder.try_clone().map(Some);
        }
        match self.folder.open_dir(RelPath::new(rel)?, Symlinks::Deny) {
            Ok(dir) => Ok(Some(dir)),
            Err(e) if e.code() != crate::error::Code::Io => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn rules(&mut self, at: &Path, rules: &[Rule]) -> Result<()> {
        for r in rules {
            self.one(at, r.name, Some(r.placeholder))?;
        }
        Ok(())
    }

    /// Protect `at/name`: as it is, or by `placeholder` when missing (`None`: only when it
    /// exists).
    fn one(&mut self, at: &Path, name: &str, placeholder: Option<Placeholder>) -> Result<()> {
        let Some(dir) = self.dir(at)? else {
            return Ok(());
        };
        let state = match lstat(&dir, name)? {
            Some(st) => state_of(&st),
            None => match placeholder {
                Some(p) => State::Missing(p),
                None => return Ok(()),
            },
        };
        self.out.entries.push(Protected {
            path: at.join(name),
            state,
        });
        Ok(())
    }

    /// A working tree at `rel` (the grant, or a folder directly inside it), if it has a `.git`.
    fn repository(&mut self, rel: &Path) -> Result<()> {
        let Some(dir) = self.dir(rel)? else {
            return Ok(());
        };
        let Some(st) = lstat(&dir, ".git")? else {
            // A bare repository (the human pushes to it; its hooks run then).
            let bare = ["HEAD", "objects", "refs"]
                .iter()
                .all(|m| lstat(&dir, m).ok().flatten().is_some());
            return if bare { self.git_dir(rel, 0) } else { Ok(()) };
        };
        self.rules(rel, IN_WORKTREE)?;
        let dot_git = rel.join(".git");
        match state_of(&st) {
            State::Dir => self.git_dir(&dot_git, 0),
            State::File => {
                self.out.entries.push(Protected {
                    path: dot_git.clone(),
                    state: State::File,
                });
                if let Some(target) = self.pointer(&dot_git, b"gitdir: ")? {
                    let target = self.inside(rel, &target);
                    if let Some(target) = target {
                        self.git_dir(&target, 0)?;
                    }
                }
                Ok(())
            }
            state => {
                self.out.entries.push(Protected {
                    path: dot_git,
                    state,
                });
                Ok(())
            }
        }
    }

    /// A git directory at `rel`: its own protected paths, its linked worktrees', the common
    /// directory it names, and its submodules' (`depth` levels of submodules down).
    fn git_dir(&mut self, rel: &Path, depth: usize) -> Result<()> {
        if depth > MAX_MODULES_DEPTH || !self.git_seen.insert(rel.to_path_buf()) {
            return Ok(());
        }
        if self.dir(rel)?.is_none() {
            return Ok(());
        }
        self.out.git_dirs.push(rel.to_path_buf());
        self.rules(rel, IN_GIT_DIR)?;
        if let Some(common) = self.pointer(&rel.join("commondir"), b"")?
            && let Some(common) = self.inside(rel, &common)
        {
            self.git_dir(&common, depth)?;
        }
        let worktrees = rel.join("worktrees");
        for name in self.subdirs(&worktrees)? {
            let admin = worktrees.join(name);
            self.out.git_dirs.push(admin.clone());
            self.rules(&admin, IN_GIT_DIR)?;
        }
        self.modules(&rel.join("modules"), depth)
    }

    /// The submodule git directories under `modules` (a submodule's name may have several
    /// components: `modules/vendor/lib`).
    fn modules(&mut self, modules: &Path, depth: usize) -> Result<()> {
        let mut pending = vec![(modules.to_path_buf(), 0)];
        while let Some((dir, level)) = pending.pop() {
            for name in self.subdirs(&dir)? {
                let child = dir.join(&name);
                let markers = self.dir(&child)?.map_or(Ok(false), |d| {
                    Ok::<_, Error>(
                        GIT_DIR_MARKERS
                            .iter()
                            .any(|m| lstat(&d, m).ok().flatten().is_some()),
                    )
                })?;
                if markers {
                    self.git_dir(&child, depth + 1)?;
                } else if level < MAX_MODULES_DEPTH {
                    pending.push((child, level + 1));
                }
            }
        }
        Ok(())
    }

    /// The directories directly inside `rel` (none when it is not a directory).
    fn subdirs(&mut self, rel: &Path) -> Result<Vec<std::ffi::OsString>> {
        let Some(dir) = self.dir(rel)? else {
            return Ok(Vec::new());
        };
        let entries = dir.entries()?;
        self.seen += entries.len();
        if self.seen > MAX_ENTRIES {
            return Err(Error::SandboxUnavailable {
                why: format!(
                    "{} holds more than {MAX_ENTRIES} entries to look at for protected paths; \
                     a confined command there would be only partly protected",
                    Shown::path(rel)
                ),
            });
        }
        Ok(entries
            .into_iter()
            .filter(|(_, st)| FileType::from_raw_mode(st.st_mode) == FileType::Directory)
            .map(|(name, _)| name)
            .collect())
    }

    /// What the regular file `rel` names after `prefix` (git's reading: the rest of the file
    /// without trailing line ends), or `None` when it is absent, not a regular file, too long,
    /// or does not start with `prefix`.
    fn pointer(&self, rel: &Path, prefix: &[u8]) -> Result<Option<PathBuf>> {
        let fd = match self.folder.open_read(RelPath::new(rel)?, Symlinks::Deny) {
            Ok(fd) => fd,
            Err(e) if e.code() != crate::error::Code::Io => return Ok(None),
            Err(e) => return Err(e),
        };
        let st = rustix::fs::fstat(&fd).map_err(|e| Error::io("fstat", rel, e))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Ok(None);
        }
        let mut text = Vec::new();
        ReadAt::new(std::os::fd::AsFd::as_fd(&fd))
            .take(MAX_POINTER_BYTES + 1)
            .read_to_end(&mut text)
            .map_err(|e| Error::io("read", rel, e))?;
        if text.len() as u64 > MAX_POINTER_BYTES {
            return Ok(None);
        }
        let Some(rest) = text.strip_prefix(prefix) else {
            return Ok(None);
        };
        let end = rest
            .iter()
            .rposition(|b| *b != b'\n' && *b != b'\r')
            .map_or(0, |i| i + 1);
        let rest = &rest[..end];
        let rest = &rest[..rest.iter().position(|b| *b == 0).unwrap_or(rest.len())];
        if rest.is_empty() {
            return Ok(None);
        }
        Ok(Some(PathBuf::from(OsStr::from_bytes(rest))))
    }

    /// `target` (as a pointer in `base` names it) relative to the grant, when it lies inside
    /// the grant. An absolute target is taken as spelled under the grant's folder; `..` is
    /// folded as spelled. What it really is gets looked at beneath the folder afterwards.
    fn inside(&self, base: &Path, target: &Path) -> Option<PathBuf> {
        let joined = if target.is_absolute() {
            let folder = crate::beneath::location_of(self.folder.as_fd()).ok()?;
            target.strip_prefix(&folder).ok()?.to_path_buf()
        } else {
            base.join(target)
        };
        let mut out = PathBuf::new();
        for c in joined.components() {
            match c {
                Component::Normal(n) => out.push(n),
                Component::ParentDir => {
                    if !out.pop() {
                        return None;
                    }
                }
                Component::CurDir => {}
                Component::RootDir | Component::Prefix(_) => return None,
            }
        }
        (!out.as_os_str().is_empty()).then_some(out)
    }
}

/// `lstat` of `name` in `dir`, or `None` when absent.
fn lstat(dir: &Anchor, name: &str) -> Result<Option<Stat>> {
    match dir.stat_entry(Name::new(name)?) {
        Ok(st) => Ok(Some(st)),
        Err(Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

fn state_of(st: &Stat) -> State {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => State::Dir,
        FileType::Symlink => State::Link,
        _ => State::File,
    }
}

pub(crate) use crate::accounts::is_home;

#[cfg(test)]
mod tests;
