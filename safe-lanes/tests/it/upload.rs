//! The upload-source allowlist: a table of legitimate and refused sources, the hard guard, and
//! a race with a thread swapping a directory and a symbolic link to outside.
//!
//! The table (by `backends`) and the race run with each backend for the roots' anchors (the
//! fast path and the confirming re-open); the step that follows links to learn where a path
//! leads is always the kernel's own resolution.

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{CWD, RenameFlags};
use safe_lanes::beneath::{force_backend, identity};
use safe_lanes::upload::AllowedBy;
use safe_lanes::{Code, StateRoot, UploadSource};
use sha2::Digest;

use crate::backends::BACKENDS;
use crate::util::mkfifo;

/// A state root with a token, three allowed roots (one listed through a symbolic link), and
/// files outside.
struct World {
    tmp: tempfile::TempDir,
    root: StateRoot,
}

impl World {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        let root = StateRoot::open(&t.join("state")).unwrap();
        std::fs::write(t.join("state/token"), "TOKEN").unwrap();
        std::fs::write(t.join("state/.downloads/got.pdf"), "received").unwrap();
        std::fs::write(t.join("state/.uploads/staged.txt"), "staged").unwrap();
        std::fs::create_dir_all(t.join("allowed1/sub")).unwrap();
        std::fs::create_dir_all(t.join("allowed2")).unwrap();
        std::fs::create_dir_all(t.join("real3")).unwrap();
        std::fs::create_dir_all(t.join("allowed1_evil")).unwrap();
        std::fs::create_dir_all(t.join("outside")).unwrap();
        symlink(t.join("real3"), t.join("link-to-3")).unwrap();
        std::fs::write(t.join("allowed1/file.txt"), "one").unwrap();
        std::fs::write(t.join("allowed1/sub/x.txt"), "x").unwrap();
        std::fs::write(t.join("allowed1/new\nline.txt"), "newline").unwrap();
        std::fs::write(t.join("allowed2/other.txt"), "two").unwrap();
        std::fs::write(t.join("real3/doc.txt"), "three").unwrap();
        std::fs::write(t.join("allowed1_evil/file.txt"), "evil").unwrap();
        std::fs::write(t.join("outside/secret"), "SECRET").unwrap();
        symlink(t.join("allowed2/other.txt"), t.join("allowed1/to-other")).unwrap();
        symlink("/etc", t.join("allowed1/etc-link")).unwrap();
        symlink(t.join("outside/secret"), t.join("allowed1/secret-link")).unwrap();
        symlink(t.join("nothing"), t.join("allowed1/dangling")).unwrap();
        symlink(t.join("state/token"), t.join("allowed1/token-link")).unwrap();
        std::fs::hard_link(t.join("state/token"), t.join("allowed1/token-hardlink")).unwrap();
        mkfifo(&t.join("allowed1/fifo"));
        let roots = format!(
            "# upload roots\n\n{}\n  {}  \n{}\nrelative/path\n{}\n{}\n",
            t.join("allowed1").display(),
            t.join("allowed2").display(),
            t.join("link-to-3").display(),
            t.join("missing").display(),
            t.join("allowed1/file.txt").display(),
        );
        std::fs::write(t.join("state/.upload-roots"), roots).unwrap();
        Self { tmp, root }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    fn source(&self) -> UploadSource {
        UploadSource::load_with(&self.root, |_| None).unwrap()
    }
}

#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Allowed: the canonical path and root, relative to the temporary directory.
    Allowed(&'static str, &'static str),
    Refused(Code),
}
use Expect::{Allowed, Refused};

const TABLE: &[(&str, Expect)] = &[
    (
        "allowed1/file.txt",
        Allowed("allowed1/file.txt", "allowed1"),
    ),
    (
        "allowed1/to-other",
        Allowed("allowed2/other.txt", "allowed2"),
    ),
    ("link-to-3/doc.txt", Allowed("real3/doc.txt", "real3")),
    (
        "allowed1/./sub/./x.txt",
        Allowed("allowed1/sub/x.txt", "allowed1"),
    ),
    (
        "allowed1//sub/../file.txt",
        Allowed("allowed1/file.txt", "allowed1"),
    ),
    (
        "allowed1/new\nline.txt",
        Allowed("allowed1/new\nline.txt", "allowed1"),
    ),
    (
        "state/.downloads/got.pdf",
        Allowed("state/.downloads/got.pdf", "state/.downloads"),
    ),
    (
        "allowed1/../allowed2/other.txt",
        Allowed("allowed2/other.txt", "allowed2"),
    ),
    ("allowed1_evil/file.txt", Refused(Code::OutsideAllowlist)),
    ("outside/secret", Refused(Code::OutsideAllowlist)),
    ("allowed1/../outside/secret", Refused(Code::Traversal)),
    (
        "allowed1/sub/../../outside/secret",
        Refused(Code::Traversal),
    ),
    ("allowed1/etc-link/passwd", Refused(Code::SymlinkEscape)),
    ("allowed1/secret-link", Refused(Code::SymlinkEscape)),
    ("allowed1/dangling", Refused(Code::NotFound)),
    ("allowed1/missing.txt", Refused(Code::NotFound)),
    ("state/token", Refused(Code::StateRoot)),
    ("allowed1/token-link", Refused(Code::StateRoot)),
    ("allowed1/token-hardlink", Refused(Code::Hardlinked)),
    ("state/.uploads/staged.txt", Refused(Code::StateRoot)),
    ("state/.upload-roots", Refused(Code::StateRoot)),
    ("state/audit.jsonl", Refused(Code::StateRoot)),
    ("allowed1/fifo", Refused(Code::NotRegularFile)),
    ("allowed1/sub", Refused(Code::NotRegularFile)),
    ("allowed1", Refused(Code::NotRegularFile)),
    ("allowed1/file.txt/", Refused(Code::NotRegularFile)),
];

fn sha256(data: &[u8]) -> String {
    sha2::Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The table on this thread's default backend; `backends` runs it on each one.
#[test]
pub(crate) fn the_source_table_holds() {
    let w = World::new();
    let source = w.source();
    let backend = crate::backends::default_backend();
    let mut failures = Vec::new();
    for &(rel, expect) in TABLE {
        let asked = w.p(rel);
        let got = source.resolve(&asked);
        let ok = match (expect, &got) {
            (Allowed(path, root), Ok(s)) => {
                let content = std::fs::read(w.p(path)).unwrap();
                s.path == w.p(path)
                    && s.root == w.p(root)
                    && s.bytes == content.len() as u64
                    && s.sha256 == sha256(&content)
            }
            (Refused(code), Err(e)) => e.code() == code,
            _ => false,
        };
        if !ok {
            failures.push(format!(
                "{backend:?} {rel:?}: expected {expect:?}, got {:?}",
                got.map(|s| (s.path, s.root))
                    .map_err(|e| (e.code(), e.to_string()))
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn hostile_path_shapes_are_refused_before_any_lookup() {
    let w = World::new();
    let source = w.source();
    let cases: Vec<(OsString, Code)> = vec![
        ("allowed1/file.txt".into(), Code::RelativePath),
        ("".into(), Code::RelativePath),
        ("./file".into(), Code::RelativePath),
        (
            format!("/{}", "a".repeat(5000)).into(),
            Code::InvalidArgument,
        ),
        (
            OsString::from(std::ffi::OsStr::from_bytes(b"/tmp/x\0/etc/passwd")),
            Code::NulByte,
        ),
        (
            format!("/proc/self/root{}", w.p("allowed1/file.txt").display()).into(),
            Code::SymlinkEscape,
        ),
        ("/proc/self/fd/0".into(), Code::SymlinkEscape),
    ];
    for (path, code) in cases {
        let err = source.resolve(Path::new(&path)).unwrap_err();
        assert_eq!(err.code(), code, "{path:?}: {err}");
        assert!(!err.to_string().contains('\0'));
    }
}

#[test]
fn a_fifo_is_refused_at_once() {
    let w = World::new();
    // No writer ever opens the FIFO: a blocking open would hang this test forever.
    let err = w.source().open(&w.p("allowed1/fifo")).unwrap_err();
    assert_eq!(err.code(), Code::NotRegularFile);
    assert!(err.to_string().contains("FIFO"), "{err}");
}

#[test]
fn the_handle_is_the_file_that_was_checked() {
    let w = World::new();
    let opened = w.source().open(&w.p("allowed1/file.txt")).unwrap();
    let want = std::fs::metadata(w.p("allowed1/file.txt")).unwrap();
    assert_eq!(
        identity(opened.file.as_fd()).unwrap(),
        (want.dev(), want.ino())
    );
    // Replacing the file after the check does not change what the handle reads.
    std::fs::rename(w.p("outside/secret"), w.p("allowed1/file.txt")).unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut &opened.file, &mut text).unwrap();
    assert_eq!(text, "one");
}

#[test]
fn roots_and_ignored_entries_are_reported() {
    let w = World::new();
    let env = format!(
        "{}:relative::{}",
        w.p("allowed2").display(),
        w.p("outside/secret").display()
    );
    let source = UploadSource::load_with(&w.root, |k| {
        (k == "SAFE_LANES_UPLOAD_ROOTS").then(|| env.clone().into())
    })
    .unwrap();
    let mut roots: Vec<(PathBuf, AllowedBy)> = source
        .roots()
        .iter()
        .map(|r| (r.path.clone(), r.origin.clone()))
        .collect();
    roots.sort();
    let mut want = vec![
        (w.p("allowed1"), AllowedBy::File),
        (w.p("allowed2"), AllowedBy::File),
        (w.p("real3"), AllowedBy::File),
        (w.p("state/.downloads"), AllowedBy::Downloads),
    ];
    want.sort();
    assert_eq!(
        roots, want,
        "allowed2 from the env is a duplicate and listed once"
    );
    let ignored: Vec<(AllowedBy, String)> = source
        .ignored()
        .iter()
        .map(|i| (i.origin.clone(), i.why.clone()))
        .collect();
    assert_eq!(ignored.len(), 5, "{ignored:?}");
    assert!(ignored.contains(&(AllowedBy::File, "not an absolute path".into())));
    assert!(ignored.contains(&(AllowedBy::File, "missing, or not a directory".into())));
    assert!(ignored.contains(&(AllowedBy::Env, "not an absolute path".into())));
    assert_eq!(
        ignored
            .iter()
            .filter(|(_, why)| why == "missing, or not a directory")
            .count(),
        3,
        "the missing dir, the file line and the file from the env"
    );
}

#[test]
fn gwsa_variable_is_read_too_and_the_default_is_downloads_only() {
    let w = World::new();
    std::fs::remove_file(w.p("state/.upload-roots")).unwrap();
    let only = UploadSource::load_with(&w.root, |_| None).unwrap();
    assert_eq!(only.roots().len(), 1);
    assert_eq!(only.roots()[0].origin, AllowedBy::Downloads);
    assert_eq!(
        only.resolve(&w.p("allowed1/file.txt")).unwrap_err().code(),
        Code::OutsideAllowlist
    );
    let gwsa = w.p("allowed2").into_os_string();
    let with = UploadSource::load_with(&w.root, |k| {
        (k == "GWSA_UPLOAD_ROOTS").then(|| gwsa.clone())
    })
    .unwrap();
    assert!(with.resolve(&w.p("allowed2/other.txt")).is_ok());
}

#[test]
fn the_hard_guard_holds_when_the_allowlist_covers_the_state_root() {
    let w = World::new();
    // The human lists the parent of the state root, and the state root itself.
    let roots = format!("{}\n{}\n", w.tmp.path().display(), w.p("state").display());
    std::fs::write(w.p("state/.upload-roots"), roots).unwrap();
    let source = w.source();
    assert!(source.roots().iter().any(|r| r.covers_state_root));
    for rel in [
        "state/token",
        "state/.upload-roots",
        "state/.uploads/staged.txt",
        "state/audit.jsonl",
    ] {
        assert_eq!(
            source.resolve(&w.p(rel)).unwrap_err().code(),
            Code::StateRoot,
            "{rel}"
        );
    }
    assert!(source.resolve(&w.p("state/.downloads/got.pdf")).is_ok());
    assert!(
        source.resolve(&w.p("outside/secret")).is_ok(),
        "now inside an allowed root"
    );
}

#[test]
fn a_swapped_directory_never_yields_a_handle_outside() {
    let w = World::new();
    let t = w.tmp.path();
    std::fs::create_dir(t.join("allowed1/swap")).unwrap();
    std::fs::write(t.join("allowed1/swap/file.txt"), "inside").unwrap();
    std::fs::write(t.join("outside/file.txt"), "outside").unwrap();
    symlink(t.join("outside"), t.join("allowed1/swaplink")).unwrap();
    let forbidden = std::fs::metadata(t.join("outside/file.txt")).unwrap();
    let forbidden = (forbidden.dev(), forbidden.ino());

    for backend in BACKENDS {
        let _forced = force_backend(backend);
        let source = w.source();
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let (a, b) = (t.join("allowed1/swap"), t.join("allowed1/swaplink"));
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut swaps = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    rustix::fs::renameat_with(CWD, &a, CWD, &b, RenameFlags::EXCHANGE).unwrap();
                    swaps += 1;
                }
                swaps
            })
        };
        let asked = t.join("allowed1/swap/file.txt");
        let (mut outside, mut inside, mut refused) = (0u32, 0u32, 0u32);
        for _ in 0..10_000 {
            match source.open(&asked) {
                Ok(o) if identity(o.file.as_fd()).unwrap() == forbidden => outside += 1,
                Ok(o) => {
                    assert!(
                        o.path.starts_with(t.join("allowed1")),
                        "{}",
                        o.path.display()
                    );
                    inside += 1;
                }
                Err(e) => {
                    assert!(
                        matches!(
                            e.code(),
                            Code::SymlinkEscape | Code::NotFound | Code::OutsideAllowlist
                        ),
                        "{e}"
                    );
                    refused += 1;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        let swaps = swapper.join().unwrap();
        assert_eq!(outside, 0, "{backend:?}: handles outside the allowed roots");
        assert!(swaps > 100, "{backend:?}: the swapper ran ({swaps} swaps)");
        assert!(
            inside > 0 && refused > 0,
            "{backend:?}: both outcomes seen ({inside}, {refused})"
        );
    }
}

#[test]
fn refusals_and_resolutions_are_audited() {
    let w = World::new();
    let source = w.source();
    source.resolve(&w.p("allowed1/file.txt")).unwrap();
    source.resolve(&w.p("outside/secret")).unwrap_err();
    let log = std::fs::read_to_string(w.p("state/audit.jsonl")).unwrap();
    let events: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last_two: Vec<&str> = events
        .iter()
        .rev()
        .take(2)
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(last_two, ["upload.refused", "upload.resolve"]);
    let refused = events.last().unwrap();
    assert_eq!(refused["code"], "outside_allowlist");
    assert_eq!(refused["actor"], "agent");
    assert!(
        refused["subject"]
            .as_str()
            .unwrap()
            .ends_with("outside/secret")
    );
    assert!(w.root.audit().verify().unwrap().is_intact());
}
