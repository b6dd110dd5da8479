//! Arbitrary path bytes against a fixture tree with symbolic links, hard links and FIFOs:
//! every success is a regular, single-link file inside an allowed root, never under the state
//! root except `.downloads`, and the handle is the file at the reported path.
//!
//! A second allowlist leaves `elsewhere/` outside (with links to it, to a file in it and to a
//! file missing from it): a path that does not spell a place inside one of its roots is
//! refused `outside_allowlist` (or `state_root`, or a lexical refusal), never anything that
//! depends on what exists; and no refusal names a place in `elsewhere/` the path did not spell.

#![no_main]

use std::ffi::{OsStr, OsString};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use safe_lanes::beneath::identity;
use safe_lanes::{Code, StateRoot, UploadSource};

struct Fixture {
    base: PathBuf,
    state: PathBuf,
    source: UploadSource,
    /// Roots `a` and `b` only, `elsewhere/` outside them.
    narrow: UploadSource,
    /// The components each root of `narrow` may be spelled with, and the state root's and
    /// `.downloads`' components.
    narrow_roots: Vec<Vec<Vec<u8>>>,
    state_parts: Vec<Vec<u8>>,
    downloads_parts: Vec<Vec<u8>>,
    elsewhere: String,
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
        for d in ["a/sub", "b", "outside", "elsewhere/dir"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        std::fs::write(base.join("a/file"), "a").unwrap();
        std::fs::write(base.join("a/sub/deep"), "deep").unwrap();
        std::fs::write(base.join("b/other"), "b").unwrap();
        std::fs::write(base.join("outside/secret"), "secret").unwrap();
        std::fs::write(base.join("elsewhere/hidden"), "hidden").unwrap();
        symlink(base.join("elsewhere"), base.join("a/to-elsewhere")).unwrap();
        symlink(base.join("elsewhere/hidden"), base.join("a/to-hidden")).unwrap();
        symlink(base.join("elsewhere/gone"), base.join("a/to-gone")).unwrap();
        symlink("../../elsewhere/dir", base.join("a/sub/to-dir")).unwrap();
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
        // Loaded before `.upload-roots` exists: `.downloads`, `a` and `b` only.
        let narrow_env: OsString =
            format!("{}:{}", base.join("a").display(), base.join("b").display()).into();
        let narrow = UploadSource::load_with(&root, |k| {
            (k == "SAFE_LANES_UPLOAD_ROOTS").then(|| narrow_env.clone())
        })
        .unwrap();
        let narrow_roots = narrow
            .roots()
            .iter()
            .flat_map(|r| {
                [
                    parts(r.path.as_os_str().as_bytes()),
                    parts(r.entry.as_bytes()),
                ]
            })
            .collect();
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
            state_parts: parts(state.as_os_str().as_bytes()),
            downloads_parts: parts(state.join(".downloads").as_os_str().as_bytes()),
            elsewhere: base.join("elsewhere").to_str().unwrap().to_owned(),
            base,
            state,
            source,
            narrow,
            narrow_roots,
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
    check_narrow(f, &path);
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

/// The components of an absolute path as written: `.` and empty ones dropped, `..` taking
/// away the one before (the rule the library states, restated here as the oracle).
fn parts(path: &[u8]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    for part in path.split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                out.pop();
            }
            _ => out.push(part.to_vec()),
        }
    }
    out
}

/// The allowlist without `elsewhere/`: refusals of paths spelled outside it do not depend on
/// what exists, and no refusal names a place in `elsewhere/` the path did not spell.
fn check_narrow(f: &Fixture, path: &Path) {
    let asked = path.to_string_lossy();
    match f.narrow.open(path) {
        Ok(opened) => assert!(
            !opened.path.starts_with(&f.elsewhere)
                && !opened.path.starts_with(f.base.join("outside")),
            "{} is outside the narrow allowlist",
            opened.path.display()
        ),
        Err(e) => {
            let message = e.to_string();
            let spelled = parts(path.as_os_str().as_bytes());
            // A refusal names the path as spelled, `.` and `..` taken away: that text may
            // contain `elsewhere/` (`a/?/…/./elsewhere…` does) without anything having been
            // looked up there.
            let written = String::from_utf8_lossy(&spelled.join(&b'/')).into_owned();
            assert!(
                !message.contains(&f.elsewhere)
                    || asked.contains(&f.elsewhere)
                    || format!("/{written}").contains(&f.elsewhere),
                "{asked:?}: {message}"
            );
            let inside = f.narrow_roots.iter().any(|r| spelled.starts_with(r));
            let in_state =
                spelled.starts_with(&f.state_parts) && !spelled.starts_with(&f.downloads_parts);
            if !inside || in_state {
                assert!(
                    matches!(
                        e.code(),
                        Code::OutsideAllowlist
                            | Code::StateRoot
                            | Code::RelativePath
                            | Code::NulByte
                            | Code::InvalidArgument
                            | Code::NotRegularFile
                    ),
                    "{asked:?} is spelled outside, yet: {message}"
                );
            }
        }
    }
}
