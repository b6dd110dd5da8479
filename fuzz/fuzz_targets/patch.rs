//! Arbitrary diffs and target paths never panic and never write outside the read-write grant:
//! after every run the files outside it are exactly as they were.

#![no_main]

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use safe_lanes::{Access, Alias, Grants, Session, StateRoot, apply_patch};

struct Fixture {
    outside: PathBuf,
    before: Vec<(PathBuf, Vec<u8>)>,
    session: Session,
    _tmp: tempfile::TempDir,
}

/// Every entry below `dir` (not following links) with the content of regular files.
fn listing(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let t = e.file_type().unwrap();
        if t.is_dir() {
            out.push((e.path(), Vec::new()));
            out.extend(listing(&e.path()));
        } else if t.is_file() {
            out.push((e.path(), std::fs::read(e.path()).unwrap()));
        } else {
            out.push((e.path(), b"<other>".to_vec()));
        }
    }
    out.sort();
    out
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().to_path_buf();
        let root = StateRoot::open(&base.join("state")).unwrap();
        for d in ["rw/sub", "outside/ro"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        std::fs::write(base.join("rw/a.txt"), "one\ntwo\nthree\n").unwrap();
        std::fs::write(base.join("outside/victim.txt"), "one\ntwo\nthree\n").unwrap();
        std::fs::write(base.join("outside/ro/notes.txt"), "one\ntwo\nthree\n").unwrap();
        symlink(base.join("outside"), base.join("rw/out")).unwrap();
        symlink(base.join("outside/victim.txt"), base.join("rw/victim-link")).unwrap();
        let grants = Arc::new(Grants::open(&root, None).unwrap());
        grants
            .add("rw", &base.join("rw"), Access::ReadWrite, "the fuzz world", "fuzz")
            .unwrap();
        grants
            .add("ro", &base.join("outside/ro"), Access::ReadOnly, "the fuzz world", "fuzz")
            .unwrap();
        let outside = base.join("outside");
        let before = listing(&outside);
        let session = grants.session();
        Fixture {
            outside,
            before,
            session,
            _tmp: tmp,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let (target, diff) = match data.iter().position(|&b| b == b'\n') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (&b"a.txt"[..], data),
    };
    let diff = String::from_utf8_lossy(diff);
    let target = Path::new(OsStr::from_bytes(target));
    for alias in ["rw", "ro"] {
        let _ = apply_patch(&f.session, &Alias::new(alias).unwrap(), target, &diff);
    }
    assert_eq!(
        listing(&f.outside),
        f.before,
        "something outside the read-write grant changed"
    );
});
