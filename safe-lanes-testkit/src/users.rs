//! The two users of the hostile runs: the one running the tests (root in CI), and an ordinary
//! one (`nobody`), each with a world of their own.
//!
//! When the tests do not run as root they cannot switch users; the second run is then made as
//! the same (already unprivileged) user.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The unprivileged user of the second run.
pub const NOBODY: u32 = 65534;

/// The users of both runs: this process's, and [`NOBODY`] (or this one again when it is not
/// root).
pub fn both() -> [u32; 2] {
    let me = rustix::process::geteuid().as_raw();
    [me, if me == 0 { NOBODY } else { me }]
}

/// A temporary folder (0755) owned by `uid`, holding `dirs` (theirs too).
#[derive(Debug)]
pub struct UserDir {
    /// The folder, removed when dropped.
    pub tmp: tempfile::TempDir,
    /// Its owner.
    pub uid: u32,
    /// Its owner's group (this process's for this process's user, else the uid's own).
    pub gid: u32,
}

impl UserDir {
    /// A folder for `uid` with the sub-folders `dirs`.
    pub fn new(uid: u32, dirs: &[&str]) -> Self {
        let gid = if uid == rustix::process::geteuid().as_raw() {
            rustix::process::getegid().as_raw()
        } else {
            uid
        };
        let tmp = tempfile::tempdir().unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let dir = Self { tmp, uid, gid };
        dir.give("");
        for d in dirs {
            std::fs::create_dir(dir.p(d)).unwrap();
            dir.give(d);
        }
        dir
    }

    /// `<folder>/<rel>`.
    pub fn p(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// Give `<folder>/<rel>` to the owner.
    pub fn give(&self, rel: &str) {
        give(&self.p(rel), self.uid, self.gid);
    }

    /// Copy the binary `from` into the folder as `name`, the owner's to run.
    pub fn copy_binary(&self, from: &Path, name: &str) -> PathBuf {
        let to = self.p(name);
        std::fs::copy(from, &to).unwrap();
        self.give(name);
        to
    }

    /// Make `command` run as the owner (when it is not this process's user).
    pub fn run_as(&self, command: &mut Command) {
        use std::os::unix::process::CommandExt;
        if self.uid != rustix::process::geteuid().as_raw() {
            command.uid(self.uid).gid(self.gid);
        }
    }
}

/// `chown path uid:gid` (not following a final link).
pub fn give(path: &Path, uid: u32, gid: u32) {
    rustix::fs::chownat(
        rustix::fs::CWD,
        path,
        Some(rustix::fs::Uid::from_raw(uid)),
        Some(rustix::fs::Gid::from_raw(gid)),
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
    .unwrap();
}

/// Give `dir` and everything in it to `uid` and `gid`.
pub fn give_tree(dir: &Path, uid: u32, gid: u32) {
    give(dir, uid, gid);
    for entry in crate::fs::tree(dir) {
        give(&dir.join(entry), uid, gid);
    }
}
