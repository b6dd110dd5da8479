//! Arbitrary path bytes against a fixture tree with symbolic links, hard links and FIFOs:
//! every success is a regular, single-link file inside an allowed root, never under the state
//! root except `.downloads`, and the handle is the file at the reported path.

#![no_main]

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use safe_lanes::beneath::identity;
use safe_lanes::{StateRoot, UploadSource};

struct Fixture {
    base: PathBuf,
    state: PathBuf,
    source: UploadSource,
    _tmp: tempfile::TempDir,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().to_path_buf();
        let root = StateRoot::open(&base.join("state")).unwrap();
        let state = root.path().to_path_buf();
        std::fs::write(state.join("token"), "TOKEN").unwrap();
        std::fs::write(state.join(".downloads/got.txt"), "got").unwrap();
        for d in ["a/sub", "b", "outside"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        std::fs::write(base.join("a/file"), "a").unwrap();
        std::fs::write(base.join("a/sub/deep"), "deep").unwrap();
        std::fs::write(base.join("b/other"), "b").unwrap();
        std::fs::write(base.join("outside/secret"), "secret").unwrap();
        symlink(base.join("b/other"), base.join("a/to-b")).unwrap();
        symlink(base.join("outside"), base.join("a/to-outside")).unwrap();
        symlink(state.join("token"), base.join("a/to-token")).unwrap();
        symlink("..", base.join("a/sub/up")).unwrap();
        std::fs::hard_link(state.join("token"), base.join("a/token-link")).unwrap();
        let fifo = base.join("a/fifo");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        std::fs::write(
            state.join(".upload-roots"),
            format!(
                "{}\n{}\n{}\n",
                base.join("a").display(),
                base.join("b").display(),
                base.display()
            ),
        )
        .unwrap();
        let source = UploadSource::load_with(&root, |_| None).unwrap();
        Fixture {
            base,
            state,
            source,
            _tmp: tmp,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let path: PathBuf = if data.first() == Some(&b'/') {
        PathBuf::from(OsStr::from_bytes(data))
    } else {
        f.base.join(OsStr::from_bytes(data))
    };
    let Ok(opened) = f.source.open(&path) else {
        return;
    };
    let allowed = f
        .source
        .roots()
        .iter()
        .any(|r| opened.path.starts_with(&r.path));
    assert!(allowed, "{} is outside every root", opened.path.display());
    assert!(
        !opened.path.starts_with(&f.state) || opened.path.starts_with(f.state.join(".downloads")),
        "{} is under the state root",
        opened.path.display()
    );
    let st = std::fs::symlink_metadata(&opened.path).unwrap();
    assert!(st.file_type().is_file() && st.nlink() == 1);
    assert_eq!(identity(opened.file.as_fd()).unwrap(), (st.dev(), st.ino()));
    assert!(opened.path.is_absolute() && opened.path != Path::new("/"));
});
