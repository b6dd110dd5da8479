//! Helpers shared by the integration tests: the fixture, and what every suite shares
//! (`safe_lanes_testkit`).

use std::path::PathBuf;
use std::sync::Arc;

use safe_lanes::{Access, Grants, StateRoot};
use tempfile::TempDir;

pub(crate) use safe_lanes_testkit::disk::SmallDisk;
pub(crate) use safe_lanes_testkit::fs::{mkfifo, mode, names};
pub(crate) use safe_lanes_testkit::heartbeat::{HEARTBEAT, dies_soon, stops_writing};

/// A fresh temporary directory with a state root at `<tmp>/state`.
pub(crate) struct Fixture {
    pub(crate) tmp: TempDir,
    pub(crate) root: StateRoot,
}

impl Fixture {
    pub(crate) fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = StateRoot::open(&tmp.path().join("state")).expect("open state root");
        Self { tmp, root }
    }

    /// `<tmp>/<rel>`.
    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// Make the folders `dirs` (with their parents) and the files `files` (`(path, content)`),
    /// all relative to the temporary directory.
    pub(crate) fn layout(&self, dirs: &[&str], files: &[(&str, &str)]) {
        for dir in dirs {
            std::fs::create_dir_all(self.path(dir)).unwrap();
        }
        for (file, content) in files {
            std::fs::write(self.path(file), content).unwrap();
        }
    }

    /// The human's grants of the default manifest.
    pub(crate) fn grants(&self) -> Arc<Grants> {
        Arc::new(Grants::open(&self.root, None).unwrap())
    }
}

/// How a test sets up one grant of its world.
pub(crate) enum Granted {
    /// Approved with this access.
    Live(Access),
    /// Approved read-write, then revoked.
    Revoked,
    /// Only requested (by the agent), read-write, for its folder.
    Pending,
}

/// Set up `grants` of `fx`: each `(alias, folder, how)`, the folder relative to its temporary
/// directory.
pub(crate) fn grant_all(fx: &Fixture, grants: &Grants, wanted: &[(&str, &str, Granted)]) {
    for (alias, folder, how) in wanted {
        let folder = fx.path(folder);
        match how {
            Granted::Live(access) => {
                grants
                    .add(alias, &folder, *access, "test", "tester")
                    .unwrap();
            }
            Granted::Revoked => {
                grants
                    .add(alias, &folder, Access::ReadWrite, "test", "tester")
                    .unwrap();
                grants.revoke(alias, "test", "tester").unwrap();
            }
            Granted::Pending => {
                grants
                    .request(alias, Access::ReadWrite, "test", Some(&folder), "agent")
                    .unwrap();
            }
        }
    }
}

/// A fixed relative path of a test, checked as the primitive requires.
pub(crate) fn rel(path: &str) -> safe_lanes::input::RelPath<'_> {
    safe_lanes::input::RelPath::new(path).expect("a valid relative path")
}
