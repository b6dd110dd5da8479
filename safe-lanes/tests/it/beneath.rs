//! The confinement primitive: an escape table for both link policies (run on each backend by
//! `backends`), and race tests, on each backend, with a thread that keeps swapping
//! directories and links.

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{CWD, RenameFlags};
use safe_lanes::Code;
use safe_lanes::beneath::{Anchor, Symlinks, identity};
use safe_lanes::input::{Name, RelPath};

use crate::backends::BACKENDS;
use crate::util::{SmallDisk, mkfifo, rel};

/// What a lookup must give.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// The file at this path relative to the base.
    Opens(&'static str),
    /// This refusal.
    Refused(Code),
}
use Expect::{Opens, Refused};

/// Test fixtures are opened by their paths.
const FIXTURE: safe_lanes::beneath::Ambient =
    safe_lanes::beneath::Ambient::because("a test fixture");

/// A base directory with links of every kind, and a file outside it.
pub(crate) struct Tree {
    _tmp: tempfile::TempDir,
    pub(crate) base: PathBuf,
}

pub(crate) fn tree() -> Tree {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    let outside = tmp.path().join("outside.txt");
    std::fs::write(&outside, "secret").unwrap();
    std::fs::create_dir_all(base.join("dir/sub")).unwrap();
    std::fs::write(base.join("file.txt"), "file").unwrap();
    std::fs::write(base.join("dir/inner.txt"), "inner").unwrap();
    std::fs::write(base.join("dir/sub/deep.txt"), "deep").unwrap();
    symlink("dir/inner.txt", base.join("link_in")).unwrap();
    symlink("dir", base.join("link_dir")).unwrap();
    symlink("dir/", base.join("link_dir_slash")).unwrap();
    symlink("file.txt/", base.join("link_file_slash")).unwrap();
    symlink("link_in/", base.join("link_link_slash")).unwrap();
    symlink("../outside.txt", base.join("link_up")).unwrap();
    symlink("/etc/passwd", base.join("link_abs")).unwrap();
    symlink(base.join("file.txt"), base.join("link_abs_inside")).unwrap();
    symlink("..", base.join("dir/link_parent")).unwrap();
    symlink("../../outside.txt", base.join("dir/link_escape")).unwrap();
    symlink("sub/../../link_in", base.join("dir/link_chain")).unwrap();
    symlink("loop2", base.join("loop1")).unwrap();
    symlink("loop1", base.join("loop2")).unwrap();
    symlink("nothing-here", base.join("dangling")).unwrap();
    symlink("/proc/self/root/etc/passwd", base.join("proc_link")).unwrap();
    mkfifo(&base.join("fifo"));
    Tree { _tmp: tmp, base }
}

/// `path => (expected with links followed beneath, expected with links denied)`.
const TABLE: &[(&str, Expect, Expect)] = &[
    ("file.txt", Opens("file.txt"), Opens("file.txt")),
    (
        "dir/inner.txt",
        Opens("dir/inner.txt"),
        Opens("dir/inner.txt"),
    ),
    (
        "dir/sub/deep.txt",
        Opens("dir/sub/deep.txt"),
        Opens("dir/sub/deep.txt"),
    ),
    ("dir/../file.txt", Opens("file.txt"), Opens("file.txt")),
    (
        "./dir/./inner.txt",
        Opens("dir/inner.txt"),
        Opens("dir/inner.txt"),
    ),
    (
        "dir//inner.txt",
        Opens("dir/inner.txt"),
        Opens("dir/inner.txt"),
    ),
    (
        "dir/sub/../../file.txt",
        Opens("file.txt"),
        Opens("file.txt"),
    ),
    ("fifo", Opens("fifo"), Opens("fifo")),
    (
        "../outside.txt",
        Refused(Code::Traversal),
        Refused(Code::Traversal),
    ),
    (
        "dir/../../outside.txt",
        Refused(Code::Traversal),
        Refused(Code::Traversal),
    ),
    ("..", Refused(Code::Traversal), Refused(Code::Traversal)),
    (
        "/etc/passwd",
        Refused(Code::AbsolutePath),
        Refused(Code::AbsolutePath),
    ),
    (
        "//etc/passwd",
        Refused(Code::AbsolutePath),
        Refused(Code::AbsolutePath),
    ),
    (
        "link_in",
        Opens("dir/inner.txt"),
        Refused(Code::SymlinkEscape),
    ),
    (
        "link_dir/inner.txt",
        Opens("dir/inner.txt"),
        Refused(Code::SymlinkEscape),
    ),
    (
        "link_dir_slash/inner.txt",
        Opens("dir/inner.txt"),
        Refused(Code::SymlinkEscape),
    ),
    (
        "dir/link_parent/file.txt",
        Opens("file.txt"),
        Refused(Code::SymlinkEscape),
    ),
    // A text ending in `/` names a directory, through any link after it (ENOTDIR).
    (
        "link_file_slash",
        Refused(Code::NotFound),
        Refused(Code::SymlinkEscape),
    ),
    (
        "link_link_slash",
        Refused(Code::NotFound),
        Refused(Code::SymlinkEscape),
    ),
    (
        "dir/link_chain",
        Opens("dir/inner.txt"),
        Refused(Code::SymlinkEscape),
    ),
    (
        "link_up",
        Refused(Code::SymlinkEscape),
        Refused(Code::SymlinkEscape),
    ),
    (
        "link_abs",
        Refused(Code::SymlinkEscape),
        Refused(Code::SymlinkEscape),
    ),
    (
        "link_abs_inside",
        Refused(Code::SymlinkEscape),
        Refused(Code::SymlinkEscape),
    ),
    (
        "dir/link_escape",
        Refused(Code::SymlinkEscape),
        Refused(Code::SymlinkEscape),
    ),
    (
        "dir/link_parent/../outside.txt",
        Refused(Code::SymlinkEscape),
        Refused(Code::SymlinkEscape),
    ),
    (
        "loop1",
        Refused(Code::SymlinkEscape),
        Refused(Code::SymlinkEscape),
    ),
    (
        "proc_link",
        Refused(Code::SymlinkEscape),
        Refused(Code::SymlinkEscape),
    ),
    (
        "dangling",
        Refused(Code::NotFound),
        Refused(Code::SymlinkEscape),
    ),
    (
        "missing.txt",
        Refused(Code::NotFound),
        Refused(Code::NotFound),
    ),
    (
        "file.txt/x",
        Refused(Code::NotFound),
        Refused(Code::NotFound),
    ),
    (
        "dir/missing/x",
        Refused(Code::NotFound),
        Refused(Code::NotFound),
    ),
];

/// The table on this thread's default backend; `backends` runs it on each one.
#[test]
pub(crate) fn escape_table() {
    let t = tree();
    let anchor = Anchor::open_ambient(&t.base, FIXTURE).unwrap();
    let backend = anchor.backend();
    let mut failures = Vec::new();
    for &(path, beneath, deny) in TABLE {
        for (symlinks, expect) in [(Symlinks::Beneath, beneath), (Symlinks::Deny, deny)] {
            let got = RelPath::new(path).and_then(|p| anchor.open_read(p, symlinks));
            let ok = match (expect, &got) {
                (Opens(target), Ok(fd)) => {
                    let want = std::fs::metadata(t.base.join(target)).unwrap();
                    identity(fd.as_fd()).unwrap() == (want.dev(), want.ino())
                }
                (Refused(code), Err(e)) => e.code() == code,
                _ => false,
            };
            if !ok {
                failures.push(format!(
                    "{backend:?} {symlinks:?} {path:?}: expected {expect:?}, got {:?}",
                    got.map(|_| "a descriptor")
                        .map_err(|e| (e.code(), e.to_string()))
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn nul_bytes_are_refused_before_any_system_call() {
    let path = Path::new(OsStr::from_bytes(b"file.txt\0/../../etc/passwd"));
    let err = RelPath::new(path).unwrap_err();
    assert_eq!(err.code(), Code::NulByte);
    assert!(
        !err.to_string().contains('\0'),
        "the message escapes the NUL"
    );
}

#[test]
fn single_component_operations_take_only_names() {
    for bad in ["", ".", "..", "a/b", "../x", "/etc"] {
        let err = Name::new(bad).unwrap_err();
        let expected = if bad.is_empty() {
            Code::InvalidArgument
        } else {
            Code::Traversal
        };
        assert!(err.code() == expected, "{bad:?} gave {:?}", err.code());
    }
    assert_eq!(
        Name::new(OsStr::from_bytes(b"a\0b")).unwrap_err().code(),
        Code::NulByte
    );
}

#[test]
fn a_fifo_opens_without_blocking_and_a_symlink_is_never_created_through() {
    let t = tree();
    let anchor = Anchor::open_ambient(&t.base, FIXTURE).unwrap();
    assert!(anchor.open_read(rel("fifo"), Symlinks::Deny).is_ok());
    // O_EXCL on a dangling link is EEXIST, never a file created at its target.
    let err = anchor
        .create_new(Name::new("dangling").unwrap(), 0o600)
        .unwrap_err();
    assert_eq!(
        err.raw_os_error(),
        Some(rustix::io::Errno::EXIST.raw_os_error())
    );
    assert!(!t.base.join("nothing-here").exists());
}

/// Swap `a` and `b` (both in `dir`) with `renameat2(RENAME_EXCHANGE)` until told to stop.
fn swapper(
    dir: PathBuf,
    a: &'static str,
    b: &'static str,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let (a, b) = (dir.join(a), dir.join(b));
        let mut swaps = 0;
        while !stop.load(Ordering::Relaxed) {
            rustix::fs::renameat_with(CWD, &a, CWD, &b, RenameFlags::EXCHANGE).unwrap();
            swaps += 1;
        }
        swaps
    })
}

#[test]
fn a_directory_swapped_with_an_escaping_symlink_never_yields_the_outside_file() {
    for backend in BACKENDS {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("base");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(base.join("swap")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(base.join("swap/secret.txt"), "inside").unwrap();
        std::fs::write(outside.join("secret.txt"), "outside").unwrap();
        symlink(&outside, base.join("swaplink")).unwrap();
        let forbidden = std::fs::metadata(outside.join("secret.txt")).unwrap();
        let forbidden = (forbidden.dev(), forbidden.ino());

        let anchor = Anchor::open_ambient(&base, FIXTURE)
            .unwrap()
            .into_backend(backend);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = swapper(base.clone(), "swap", "swaplink", Arc::clone(&stop));
        let (mut inside, mut escapes, mut refused) = (0u32, 0u32, 0u32);
        for _ in 0..20_000 {
            match anchor.open_read(rel("swap/secret.txt"), Symlinks::Beneath) {
                Ok(fd) if identity(fd.as_fd()).unwrap() == forbidden => escapes += 1,
                Ok(_) => inside += 1,
                Err(_) => refused += 1,
            }
        }
        stop.store(true, Ordering::Relaxed);
        let swaps = thread.join().unwrap();
        assert_eq!(escapes, 0, "{backend:?}: handles outside the anchor");
        assert!(swaps > 100, "{backend:?}: the swapper ran ({swaps} swaps)");
        assert_eq!(inside + refused, 20_000);
        assert!(inside > 0, "{backend:?}: some opens got the inside file");
    }
}

const DEEP: &str = "a/b/c1/c2/c3/c4/c5/c6/../../../../../../../../target.txt";

#[test]
fn a_directory_moved_out_mid_lookup_never_lets_dotdot_escape() {
    for backend in BACKENDS {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("base");
        let far = tmp.path().join("far/away");
        std::fs::create_dir_all(base.join("a/b/c1/c2/c3/c4/c5/c6")).unwrap();
        std::fs::create_dir_all(&far).unwrap();
        std::fs::write(base.join("target.txt"), "inside").unwrap();
        // From far/away/b, `../../target.txt` is this outside file. The path goes deep below
        // `b` first, so the move often lands while the lookup is still below it.
        std::fs::write(tmp.path().join("far/target.txt"), "outside").unwrap();
        let forbidden = std::fs::metadata(tmp.path().join("far/target.txt")).unwrap();
        let forbidden = (forbidden.dev(), forbidden.ino());

        let anchor = Anchor::open_ambient(&base, FIXTURE)
            .unwrap()
            .into_backend(backend);
        let stop = Arc::new(AtomicBool::new(false));
        let mover = {
            let (inside, away) = (base.join("a/b"), far.join("b"));
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut moves = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    std::fs::rename(&inside, &away).unwrap();
                    std::fs::rename(&away, &inside).unwrap();
                    moves += 1;
                }
                moves
            })
        };
        let mut escapes = 0u32;
        for _ in 0..20_000 {
            if let Ok(fd) = anchor.open_read(rel(DEEP), Symlinks::Beneath)
                && identity(fd.as_fd()).unwrap() == forbidden
            {
                escapes += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        let moves = mover.join().unwrap();
        assert_eq!(
            escapes, 0,
            "{backend:?}: `..` escaped through a moved directory"
        );
        assert!(moves > 100, "{backend:?}: the mover ran ({moves} moves)");
    }
}

/// Regression: the walk read and followed links on a mount made `nosymfollow`, where the
/// kernel follows none (`openat2` answers `ELOOP` there). Both backends refuse them; the files
/// themselves still open. Mounting needs root (CI runs as root).
#[test]
fn no_link_is_followed_on_a_nosymfollow_mount() {
    let disk = SmallDisk::mount_as_root_with("1m", "nosymfollow");
    std::fs::create_dir(disk.path.join("dir")).unwrap();
    std::fs::write(disk.path.join("dir/file.txt"), "file").unwrap();
    symlink("file.txt", disk.path.join("dir/link")).unwrap();
    symlink("dir", disk.path.join("to-dir")).unwrap();
    for backend in BACKENDS {
        let anchor = Anchor::open_ambient(&disk.path, FIXTURE)
            .unwrap()
            .into_backend(backend);
        let file = anchor.open_read(rel("dir/file.txt"), Symlinks::Beneath);
        assert!(file.is_ok(), "{backend:?}: {file:?}");
        for path in ["dir/link", "to-dir/file.txt"] {
            let err = anchor.open_read(rel(path), Symlinks::Beneath).unwrap_err();
            assert_eq!(err.code(), Code::SymlinkEscape, "{backend:?} {path}: {err}");
        }
    }
}
