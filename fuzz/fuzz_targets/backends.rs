//! The primitive's two backends, and cap-std's `Dir`, against each other on one tree.
//!
//! The tree has files, directories, a FIFO and symbolic links of every kind (relative,
//! absolute, climbing out, chains, loops, a chain of exactly the kernel's 40-link limit), and
//! two links whose targets the input writes (`free` in the base, `dir/free` below it).
//!
//! Input: one byte of flags, then `target of free NUL target of dir/free NUL path`; with fewer
//! parts the last one is the path and the links are not made. The low two bits of the flags
//! choose the open: for reading, as a directory, `O_PATH`, or `O_PATH | O_DIRECTORY`.
//!
//! Invariants, on every run:
//!
//! - under each link policy, openat2 and the walk open the same inode (`st_dev`, `st_ino`) or
//!   refuse with the same code;
//! - whatever either opens is beneath the base (where `/proc` says the descriptor is);
//! - denying links only takes successes away: what `Symlinks::Deny` opens, `Beneath` opens too;
//! - cap-std's `Dir::open_with`, with the same flags and links followed (its only mode for
//!   the components before the last), opens the same inode as `Symlinks::Beneath`, or fails too.
//!
//! Deliberate differences, not compared: the empty path (the primitive opens the anchor itself,
//! as for `.`; cap-std answers `ENOENT`, as POSIX does), a `..` that climbs above the base as
//! written (the primitive refuses it, `traversal`; cap-std resolves it after the links before
//! it), and the kind of a refusal by cap-std, which has no codes. `/proc` magic links cannot be reached as components beneath a temporary
//! directory; the tree's link to `/proc/self/root` is absolute, which all three refuse first.

#![no_main]

use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use libfuzzer_sys::fuzz_target;
use rustix::fs::{Mode, OFlags};
use safe_lanes::Code;
use safe_lanes::beneath::{Anchor, Backend, Symlinks, identity, location_of};
use safe_lanes::input::RelPath;

/// Test fixtures are opened by their paths.
const BY_PATH: safe_lanes::beneath::Ambient =
    safe_lanes::beneath::Ambient::because("a test fixture");

struct Fixture {
    base: PathBuf,
    openat2: Anchor,
    walk: Anchor,
    cap: Dir,
    _tmp: tempfile::TempDir,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap().join("base");
        std::fs::create_dir_all(base.join("dir/sub")).unwrap();
        std::fs::create_dir_all(base.join("empty")).unwrap();
        std::fs::write(tmp.path().join("outside.txt"), "outside").unwrap();
        std::fs::write(base.join("file.txt"), "file").unwrap();
        std::fs::write(base.join("dir/inner.txt"), "inner").unwrap();
        std::fs::write(base.join("dir/sub/deep.txt"), "deep").unwrap();
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &base.join("fifo"),
            Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let links: &[(&str, &str)] = &[
            ("link_in", "dir/inner.txt"),
            ("link_dir", "dir"),
            ("link_dir_slash", "dir/"),
            ("link_up", "../outside.txt"),
            ("link_abs", "/etc/passwd"),
            ("link_dot", "."),
            ("link_dotdot", ".."),
            ("loop1", "loop2"),
            ("loop2", "loop1"),
            ("self", "self"),
            ("dangling", "nothing-here"),
            ("dangling_dir", "nothing-here/"),
            ("proc", "/proc/self/root"),
            ("dir/up", ".."),
            ("dir/here", "."),
            ("dir/escape", "../../outside.txt"),
            ("dir/chain", "sub/../../link_in"),
            ("dir/sub/top", "../../link_dir/sub"),
            ("dir/sub/file_slash", "deep.txt/"),
        ];
        for (name, target) in links {
            symlink(target, base.join(name)).unwrap();
        }
        symlink(base.join("file.txt"), base.join("link_abs_inside")).unwrap();
        // c0 → c1 → … → c40 → file.txt: from c0, 41 links; from c1, exactly 40.
        for i in 0..=40 {
            let target = if i == 40 {
                "file.txt".to_owned()
            } else {
                format!("c{}", i + 1)
            };
            symlink(target, base.join(format!("c{i}"))).unwrap();
        }
        let open = || Anchor::open_ambient(&base, BY_PATH).unwrap();
        let cap = Dir::open_ambient_dir(&base, cap_std::ambient_authority()).unwrap();
        Fixture {
            openat2: open().into_backend(Backend::Openat2),
            walk: open().into_backend(Backend::Walk),
            cap,
            base,
            _tmp: tmp,
        }
    })
}

/// What one lookup gave.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Opened((u64, u64)),
    Refused(Code),
}

fn outcome(base: &Path, got: safe_lanes::Result<OwnedFd>) -> Outcome {
    match got {
        Ok(fd) => {
            let at = location_of(fd.as_fd()).unwrap();
            assert!(
                at.starts_with(base),
                "opened {} outside the base",
                at.display()
            );
            Outcome::Opened(identity(fd.as_fd()).unwrap())
        }
        Err(e) => Outcome::Refused(e.code()),
    }
}

/// A link the input writes, there for one run.
struct FreeLink(PathBuf);

impl FreeLink {
    fn make(at: PathBuf, target: &[u8]) -> Option<Self> {
        symlink(OsStr::from_bytes(target), &at)
            .ok()
            .map(|()| Self(at))
    }
}

impl Drop for FreeLink {
    fn drop(&mut self) {
        std::fs::remove_file(&self.0).unwrap();
    }
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let Some((&bits, rest)) = data.split_first() else {
        return;
    };
    let mut parts: Vec<&[u8]> = rest.splitn(3, |&b| b == 0).collect();
    let path = Path::new(OsStr::from_bytes(parts.pop().unwrap_or_default()));
    let _links: Vec<FreeLink> = ["free", "dir/free"]
        .iter()
        .zip(parts)
        .filter_map(|(at, target)| FreeLink::make(f.base.join(at), target))
        .collect();
    let flags = match bits & 3 {
        0 => OFlags::RDONLY | OFlags::NONBLOCK,
        1 => OFlags::RDONLY | OFlags::NONBLOCK | OFlags::DIRECTORY,
        2 => OFlags::PATH,
        _ => OFlags::PATH | OFlags::DIRECTORY,
    };

    let lookup = |anchor: &Anchor, symlinks| {
        let opened =
            RelPath::new(path).and_then(|p| anchor.open(p, flags, Mode::empty(), symlinks));
        outcome(&f.base, opened)
    };
    let mut beneath = None;
    for symlinks in [Symlinks::Beneath, Symlinks::Deny] {
        let by_openat2 = lookup(&f.openat2, symlinks);
        let by_walk = lookup(&f.walk, symlinks);
        assert_eq!(
            by_openat2, by_walk,
            "{symlinks:?} {path:?} with {flags:?}: openat2, walk"
        );
        match (&beneath, &by_openat2) {
            (None, _) => beneath = Some(by_openat2),
            (Some(b), Outcome::Opened(_)) => assert_eq!(b, &by_openat2, "Deny opened more"),
            _ => {}
        }
    }

    if path.as_os_str().is_empty() {
        return;
    }
    let mut options = OpenOptions::new();
    options.read(true).custom_flags(flags.bits() as i32);
    let by_cap = f
        .cap
        .open_with(path, &options)
        .ok()
        .map(|file| identity(file.as_fd()).unwrap());
    match (beneath.unwrap(), by_cap) {
        (Outcome::Opened(ours), Some(theirs)) => {
            assert_eq!(
                ours, theirs,
                "{path:?} with {flags:?}: another file than cap-std's"
            )
        }
        (Outcome::Refused(_), None) => {}
        // A `..` that climbs above the base as written is refused before anything is opened
        // (`traversal`); cap-std resolves it after the links before it (`free/../..` through
        // `free -> dir/sub` is back in the base). Stricter, on purpose.
        (Outcome::Refused(Code::Traversal), Some(_)) => {}
        (ours, theirs) => panic!("{path:?} with {flags:?}: {ours:?}, cap-std {theirs:?}"),
    }
});
