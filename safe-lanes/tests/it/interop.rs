//! The `cap-std` feature (`beneath::interop`): an anchor from a cap-std `Dir` and back, the descriptor staying the
//! same directory and a directory.

use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, symlink};

use cap_std::fs::Dir;
use safe_lanes::Code;
use safe_lanes::beneath::{Anchor, Symlinks, identity};
use safe_lanes::input::RelPath;

/// Test fixtures are opened by their paths.
const FIXTURE: safe_lanes::beneath::Ambient =
    safe_lanes::beneath::Ambient::because("a test fixture");

fn tree() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("base")).unwrap();
    std::fs::write(tmp.path().join("base/file.txt"), "inside").unwrap();
    std::fs::write(tmp.path().join("secret.txt"), "outside").unwrap();
    symlink("../secret.txt", tmp.path().join("base/out")).unwrap();
    tmp
}

#[test]
fn a_cap_std_dir_becomes_a_full_anchor_on_the_same_directory() {
    let tmp = tree();
    let base = tmp.path().join("base");
    // cap-std opens directories with O_PATH, which can neither list nor fsync.
    let dir = Dir::open_ambient_dir(&base, cap_std::ambient_authority()).unwrap();
    let anchor = Anchor::try_from(dir).unwrap();
    let want = std::fs::metadata(&base).unwrap();
    assert_eq!(identity(anchor.as_fd()).unwrap(), (want.dev(), want.ino()));
    let names: Vec<_> = anchor
        .entries()
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    anchor.sync().unwrap();
    assert!(
        anchor
            .open_read(RelPath::new("file.txt").unwrap(), Symlinks::Beneath)
            .is_ok()
    );
    for (path, code) in [
        ("out", Code::SymlinkEscape),
        ("../secret.txt", Code::Traversal),
    ] {
        let err = RelPath::new(path)
            .and_then(|p| anchor.open_read(p, Symlinks::Beneath))
            .unwrap_err();
        assert_eq!(err.code(), code, "{path}");
    }
}

#[test]
fn a_dir_that_is_not_a_directory_is_refused() {
    let tmp = tree();
    let file = std::fs::File::open(tmp.path().join("base/file.txt")).unwrap();
    let err = Anchor::try_from(Dir::from_std_file(file)).unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err}");
}

#[test]
fn an_anchor_handed_to_cap_std_keeps_its_directory() {
    let tmp = tree();
    let anchor = Anchor::open_ambient(&tmp.path().join("base"), FIXTURE).unwrap();
    let before = identity(anchor.as_fd()).unwrap();
    let dir = Dir::from(anchor);
    assert_eq!(identity(dir.as_fd()).unwrap(), before);
    assert_eq!(dir.read_to_string("file.txt").unwrap(), "inside");
    assert!(dir.open("out").is_err(), "cap-std refuses the escape too");
    assert!(dir.open("../secret.txt").is_err());
}
