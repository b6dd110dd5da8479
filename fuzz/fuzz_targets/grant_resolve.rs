//! Arbitrary alias and relative-path bytes: a resolution never lands outside its grant, and a
//! write is never resolved under a read-only grant.

#![no_main]

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use safe_lanes::beneath::location_of;
use safe_lanes::input::RelPath;
use safe_lanes::{Access, Alias, Grants, Session, StateRoot, Want};

struct Fixture {
    base: PathBuf,
    session: Session,
    _tmp: tempfile::TempDir,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let root = StateRoot::open(&base.join("state")).unwrap();
        for d in ["ro/sub", "rw/sub", "outside"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        std::fs::write(base.join("ro/file"), "ro").unwrap();
        std::fs::write(base.join("rw/file"), "rw").unwrap();
        std::fs::write(base.join("outside/secret"), "secret").unwrap();
        for g in ["ro", "rw"] {
            symlink(base.join("outside"), base.join(g).join("abs-out")).unwrap();
            symlink("../outside", base.join(g).join("rel-out")).unwrap();
            symlink("sub", base.join(g).join("in")).unwrap();
            symlink("..", base.join(g).join("sub/up")).unwrap();
        }
        let grants = Arc::new(Grants::open(&root, None).unwrap());
        grants
            .add("ro", &base.join("ro"), Access::ReadOnly, "the fuzz world", "fuzz")
            .unwrap();
        grants
            .add("rw", &base.join("rw"), Access::ReadWrite, "the fuzz world", "fuzz")
            .unwrap();
        let session = grants.session();
        Fixture {
            base,
            session,
            _tmp: tmp,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let Some((&flag, rest)) = data.split_first() else {
        return;
    };
    let want = if flag & 1 == 0 {
        Want::Read
    } else {
        Want::Write
    };
    let (alias, rel) = match rest.iter().position(|&b| b == 0xff) {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (&b"rw"[..], rest),
    };
    let alias = String::from_utf8_lossy(alias);
    // The agent's strings become typed inputs as an adapter makes them, then resolve.
    let rel = Path::new(OsStr::from_bytes(rel));
    let typed = Alias::new(&alias).and_then(|a| Ok((a, RelPath::new(rel)?)));
    let Ok(resolved) = typed.and_then(|(a, rel)| f.session.resolve(&a, rel, want)) else {
        return;
    };
    let grant = f.base.join(alias.as_ref());
    let real = location_of(resolved.fd.as_fd()).unwrap();
    assert!(
        real.starts_with(&grant),
        "{} escaped {}",
        real.display(),
        grant.display()
    );
    assert!(
        want == Want::Read || alias == "rw",
        "a write resolved under {alias}"
    );
    assert!(resolved.access == Access::ReadWrite || want == Want::Read);
});
