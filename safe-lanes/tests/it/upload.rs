//! The upload-source allowlist: a table of legitimate and refused sources, the hard guard,
//! paths outside every root refused alike whatever is there (and without a lookup), and a race
//! with a thread swapping a directory and a symbolic link to outside.
//!
//! The table (by `backends`), the outside table and the race run with each backend for the
//! roots' anchors: every open, and the walk through symbolic links, goes through them.

use std::collections::BTreeMap;
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
use safe_lanes::{Code, UploadSource};
use sha2::Digest;

use crate::backends::BACKENDS;
use crate::util::{Fixture, SmallDisk, mkfifo};

/// A state root with a token, three allowed roots (one listed through a symbolic link), and
/// files outside.
struct World {
    fx: Fixture,
}

impl std::ops::Deref for World {
    type Target = Fixture;
    fn deref(&self) -> &Fixture {
        &self.fx
    }
}

impl World {
    fn new() -> Self {
        let fx = Fixture::new();
        let t = fx.tmp.path();
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
        symlink(
            t.join("allowed1/nothing"),
            t.join("allowed1/dangling-inside"),
        )
        .unwrap();
        symlink("..", t.join("allowed1/up")).unwrap();
        symlink("../file.txt", t.join("allowed1/sub/back")).unwrap();
        symlink("sub", t.join("allowed1/to-sub")).unwrap();
        symlink("file.txt/", t.join("allowed1/file-slash")).unwrap();
        symlink("sub/", t.join("allowed1/sub-slash")).unwrap();
        symlink("to-other/", t.join("allowed1/to-other-slash")).unwrap();
        symlink(
            format!("{}/", t.join("allowed2/other.txt").display()),
            t.join("allowed1/abs-slash"),
        )
        .unwrap();
        symlink("loop", t.join("allowed1/loop")).unwrap();
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
        Self { fx }
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
    // Links followed by their text, through allowed roots only.
    (
        "allowed1/up/allowed2/other.txt",
        Allowed("allowed2/other.txt", "allowed2"),
    ),
    (
        "allowed1/sub/back",
        Allowed("allowed1/file.txt", "allowed1"),
    ),
    (
        "allowed1/to-sub/x.txt",
        Allowed("allowed1/sub/x.txt", "allowed1"),
    ),
    // A path is read as written: this `..` takes away `etc-link`, so nothing under /etc is
    // looked at.
    (
        "allowed1/etc-link/../file.txt",
        Allowed("allowed1/file.txt", "allowed1"),
    ),
    ("allowed1_evil/file.txt", Refused(Code::OutsideAllowlist)),
    ("outside/secret", Refused(Code::OutsideAllowlist)),
    (
        "allowed1/../outside/secret",
        Refused(Code::OutsideAllowlist),
    ),
    (
        "allowed1/sub/../../outside/secret",
        Refused(Code::OutsideAllowlist),
    ),
    ("allowed1/etc-link/passwd", Refused(Code::OutsideAllowlist)),
    ("allowed1/secret-link", Refused(Code::OutsideAllowlist)),
    (
        "allowed1/up/outside/secret",
        Refused(Code::OutsideAllowlist),
    ),
    // Its target is missing, outside: that is not for the agent to learn.
    ("allowed1/dangling", Refused(Code::OutsideAllowlist)),
    ("allowed1/dangling-inside", Refused(Code::NotFound)),
    ("allowed1/missing.txt", Refused(Code::NotFound)),
    ("allowed1/file.txt/x", Refused(Code::NotFound)),
    ("allowed1/loop", Refused(Code::SymlinkEscape)),
    // A link's text ending in `/` names a directory, as the kernel reads it (ENOTDIR).
    ("allowed1/file-slash", Refused(Code::NotFound)),
    ("allowed1/to-other-slash", Refused(Code::NotFound)),
    ("allowed1/abs-slash", Refused(Code::NotFound)),
    ("allowed1/sub-slash", Refused(Code::NotRegularFile)),
    ("state/token", Refused(Code::StateRoot)),
    ("state/.downloads/../token", Refused(Code::StateRoot)),
    // The state root is outside every allowed root here: where the link leads is not told.
    ("allowed1/token-link", Refused(Code::OutsideAllowlist)),
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
pub(crate) fn hostile_path_shapes_are_refused_before_any_lookup() {
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
        // Spelled outside every root, so never looked up, however they would resolve.
        (
            format!("/proc/self/root{}", w.p("allowed1/file.txt").display()).into(),
            Code::OutsideAllowlist,
        ),
        ("/proc/self/fd/0".into(), Code::OutsideAllowlist),
    ];
    for (path, code) in cases {
        let err = source.resolve(Path::new(&path)).unwrap_err();
        assert_eq!(err.code(), code, "{path:?}: {err}");
        assert!(!err.to_string().contains('\0'));
    }
}

#[test]
pub(crate) fn a_fifo_is_refused_at_once() {
    let w = World::new();
    // No writer ever opens the FIFO: a blocking open would hang this test forever.
    let err = w.source().open(&w.p("allowed1/fifo")).unwrap_err();
    assert_eq!(err.code(), Code::NotRegularFile);
    assert!(err.to_string().contains("FIFO"), "{err}");
}

/// Whether the descriptor of an opened source still has the `O_NONBLOCK` it was opened with.
fn nonblocking(opened: &safe_lanes::Opened) -> bool {
    rustix::fs::fcntl_getfl(&opened.file)
        .unwrap()
        .contains(rustix::fs::OFlags::NONBLOCK)
}

/// On a filesystem that is not backed by a block device (tmpfs here; FUSE, NFS and overlays
/// are the same) the `O_NONBLOCK` that kept a FIFO from blocking the open is cleared before
/// the handle is returned, and the file reads whole, through the handle and hashed.
#[test]
pub(crate) fn a_source_on_tmpfs_is_handed_over_blocking_and_reads_whole() {
    let shm = Path::new("/dev/shm");
    let on = rustix::fs::statfs(shm).expect("/dev/shm, a tmpfs, is needed");
    assert_eq!(on.f_type, libc::TMPFS_MAGIC, "/dev/shm is not a tmpfs");
    let dir = tempfile::tempdir_in(shm).unwrap();
    let content = vec![b'x'; 300_000];
    std::fs::write(dir.path().join("big.bin"), &content).unwrap();
    mkfifo(&dir.path().join("fifo"));
    let fx = Fixture::new();
    std::fs::write(
        fx.root.path().join(".upload-roots"),
        format!("{}\n", dir.path().display()),
    )
    .unwrap();
    let source = UploadSource::load_with(&fx.root, |_| None).unwrap();

    let opened = source.open(&dir.path().join("big.bin")).unwrap();
    assert!(!nonblocking(&opened), "O_NONBLOCK left set on a tmpfs file");
    let mut read = Vec::new();
    std::io::Read::read_to_end(&mut &opened.file, &mut read).unwrap();
    assert_eq!(read, content);
    let hashed = source.resolve(&dir.path().join("big.bin")).unwrap();
    assert_eq!(hashed.sha256, sha256(&content));
    // A FIFO there is still refused at once (no writer: a blocking open would hang).
    let err = source.open(&dir.path().join("fifo")).unwrap_err();
    assert_eq!(err.code(), Code::NotRegularFile);
}

/// On a filesystem backed by a block device (the temporary directory's: ext4 or xfs on CI) the
/// descriptor is handed over as opened, `O_NONBLOCK` included, which reads of such a file
/// ignore: it reads whole. A file whose mode asked for mandatory locking (set-group-ID without
/// group execute: `EAGAIN` instead of waiting, before Linux 5.15) has the flag cleared.
#[test]
pub(crate) fn a_source_on_a_disk_filesystem_reads_whole_with_its_open_flags() {
    let fx = Fixture::new();
    let dev = std::fs::metadata(fx.tmp.path()).unwrap().dev();
    assert_ne!(
        rustix::fs::major(dev),
        0,
        "the temporary directory must be on a filesystem backed by a block device"
    );
    let allowed = fx.path("allowed");
    std::fs::create_dir(&allowed).unwrap();
    let content = vec![b'y'; 300_000];
    std::fs::write(allowed.join("big.bin"), &content).unwrap();
    std::fs::write(allowed.join("locked.bin"), &content).unwrap();
    let setgid = std::os::unix::fs::PermissionsExt::from_mode(0o2640);
    std::fs::set_permissions(allowed.join("locked.bin"), setgid).unwrap();
    std::fs::write(
        fx.root.path().join(".upload-roots"),
        format!("{}\n", allowed.display()),
    )
    .unwrap();
    let source = UploadSource::load_with(&fx.root, |_| None).unwrap();

    let opened = source.open(&allowed.join("big.bin")).unwrap();
    assert!(
        nonblocking(&opened),
        "the descriptor was changed after the open"
    );
    let mut read = Vec::new();
    std::io::Read::read_to_end(&mut &opened.file, &mut read).unwrap();
    assert_eq!(read, content);
    let hashed = source.resolve(&allowed.join("big.bin")).unwrap();
    assert_eq!(hashed.sha256, sha256(&content));

    let locked = source.open(&allowed.join("locked.bin")).unwrap();
    assert!(
        !nonblocking(&locked),
        "O_NONBLOCK left set on a file asking for mandatory locks"
    );
}

#[test]
pub(crate) fn the_handle_is_the_file_that_was_checked() {
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
pub(crate) fn roots_and_ignored_entries_are_reported() {
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

/// A root is named by its canonical path and by every entry the human wrote for it that has
/// no `.` or `..` (such an entry is read as written, which need not be where the kernel went).
#[test]
fn a_root_answers_to_each_spelling_the_human_wrote() {
    let w = World::new();
    let roots = format!(
        "{}\n{}\n",
        w.p("real3").display(),
        w.p("allowed2/../link-to-3").display()
    );
    std::fs::write(w.p("state/.upload-roots"), roots).unwrap();
    let canonical_only = w.source();
    assert_eq!(canonical_only.roots().len(), 2, "`.downloads` and `real3`");
    assert!(canonical_only.open(&w.p("real3/doc.txt")).is_ok());
    assert_eq!(
        canonical_only
            .open(&w.p("link-to-3/doc.txt"))
            .unwrap_err()
            .code(),
        Code::OutsideAllowlist
    );
    let link = w.p("link-to-3").into_os_string();
    let both = UploadSource::load_with(&w.root, |k| {
        (k == "SAFE_LANES_UPLOAD_ROOTS").then(|| link.clone())
    })
    .unwrap();
    assert_eq!(both.roots().len(), 2, "one root, two spellings");
    let opened = both.open(&w.p("link-to-3/doc.txt")).unwrap();
    assert_eq!(
        (opened.path, opened.root),
        (w.p("real3/doc.txt"), w.p("real3"))
    );
    assert_eq!(
        both.open(&w.p("link-to-3/../outside/secret"))
            .unwrap_err()
            .code(),
        Code::OutsideAllowlist
    );
}

#[test]
pub(crate) fn the_hard_guard_holds_when_the_allowlist_covers_the_state_root() {
    let w = World::new();
    // The human lists the parent of the state root, and the state root itself.
    let roots = format!("{}\n{}\n", w.tmp.path().display(), w.p("state").display());
    std::fs::write(w.p("state/.upload-roots"), roots).unwrap();
    let source = w.source();
    // Both contain it (the lane `.downloads`, inside it, does not).
    let covering: Vec<_> = source
        .roots()
        .iter()
        .filter(|r| r.covers_state_root)
        .map(|r| r.entry.clone())
        .collect();
    assert_eq!(
        covering,
        [
            w.p("state").display().to_string(),
            w.tmp.path().display().to_string()
        ]
    );
    for rel in [
        "state/token",
        "state/.upload-roots",
        "state/.uploads/staged.txt",
        "state/audit.jsonl",
        "allowed1/token-link",
        "allowed1/up/state/token",
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
pub(crate) fn refusals_and_resolutions_are_audited() {
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

/// Regression: `upload_resolve` told the agent which files exist anywhere (`/etc/shadow` was
/// `outside_allowlist`, `/etc/nonexistent` `not_found`) and where a link in an allowed folder
/// points (`outside_allowlist: /usr/share/zoneinfo/Etc/UTC`). Every path that leads outside
/// the allowed roots — spelled there, climbing there with `..`, or through a link to a file, a
/// directory, a FIFO or a loop there — is refused with the same code and a message naming only
/// the path given, whether or not anything exists where it leads; and a link that passes
/// outside on its way back into a root works the same whether that outside place exists.
#[test]
fn outside_the_roots_nothing_is_told_about_what_exists() {
    let w = World::new();
    let cases = outside_cases(&w);
    for backend in BACKENDS {
        let _forced = force_backend(backend);
        let source = w.source();
        for (asked, leads) in &cases {
            let err = source.open(asked).unwrap_err();
            let message = err.message().to_string();
            assert_eq!(
                err.code(),
                Code::OutsideAllowlist,
                "{backend:?} {asked:?}: {err}"
            );
            assert_eq!(
                message,
                format!(
                    "{}: not inside any allowed upload root{}",
                    asked.display(),
                    " (the human allows a folder with `safe-lanes upload roots add FOLDER`)"
                ),
                "{backend:?}"
            );
            if let Some(leads) = leads {
                let leads = leads.to_str().unwrap();
                assert!(
                    !message.contains(leads),
                    "{backend:?}: {message} names {leads}"
                );
            }
        }
        for detour in ["allowed1/detour-there", "allowed1/detour-nowhere"] {
            let opened = source.open(&w.p(detour)).unwrap();
            assert_eq!(
                opened.path,
                w.p("allowed2/other.txt"),
                "{backend:?} {detour}"
            );
        }
    }
    // 13 paths through links and 2 climbing out of allowed1, on each backend.
    assert_eq!(refusals_in_allowed1_name_no_target(&w), 2 * (13 + 2));
}

/// The outside table, with its links, FIFO and loop made in `w`: each path asked, and where
/// it leads when that is not what it spells (a message must never name it).
fn outside_cases(w: &World) -> Vec<(PathBuf, Option<PathBuf>)> {
    let t = w.tmp.path();
    mkfifo(&t.join("outside/fifo"));
    symlink("loop", t.join("outside/loop")).unwrap();
    for (name, target) in [
        ("missing-link", t.join("outside/missing")),
        ("outside-link", t.join("outside")),
        ("fifo-link", t.join("outside/fifo/x")),
        ("loop-link", t.join("outside/loop")),
        ("shadow-link", PathBuf::from("/etc/shadow")),
        ("nowhere-link", PathBuf::from("/nonexistent/x")),
        ("detour-there", t.join("outside/../allowed2/other.txt")),
        ("detour-nowhere", t.join("nothing/../allowed2/other.txt")),
    ] {
        symlink(target, w.p(&format!("allowed1/{name}"))).unwrap();
    }
    let spelled_outside = [
        PathBuf::from("/etc/shadow"),
        PathBuf::from("/etc/nonexistent"),
        PathBuf::from("/nonexistent/x"),
        PathBuf::from("/proc/self/root/etc/shadow"),
        w.p("outside/secret"),
        w.p("outside/missing"),
        w.p("outside/fifo/x"),
        w.p("outside/loop/x"),
        w.p("allowed1/../outside/secret"),
        w.p("allowed1/../outside/missing"),
    ];
    let mut cases: Vec<(PathBuf, Option<PathBuf>)> =
        spelled_outside.into_iter().map(|p| (p, None)).collect();
    for (asked, leads) in [
        ("allowed1/secret-link", t.join("outside/secret")),
        ("allowed1/missing-link", t.join("outside/missing")),
        ("allowed1/dangling", t.join("nothing")),
        ("allowed1/outside-link/secret", t.join("outside/secret")),
        ("allowed1/outside-link/missing", t.join("outside/missing")),
        ("allowed1/etc-link/shadow", PathBuf::from("/etc/shadow")),
        (
            "allowed1/etc-link/nonexistent",
            PathBuf::from("/etc/nonexistent"),
        ),
        ("allowed1/fifo-link", t.join("outside/fifo/x")),
        ("allowed1/loop-link", t.join("outside/loop")),
        ("allowed1/shadow-link", PathBuf::from("/etc/shadow")),
        ("allowed1/nowhere-link", PathBuf::from("/nonexistent/x")),
        ("allowed1/up/outside/secret", t.join("outside/secret")),
        ("allowed1/up/outside/missing", t.join("outside/missing")),
    ] {
        cases.push((w.p(asked), Some(leads)));
    }
    cases
}

/// The audit log records the refusals with their messages: of those asked under `allowed1`,
/// none names a place outside. Returns how many there were.
fn refusals_in_allowed1_name_no_target(w: &World) -> usize {
    let t = w.tmp.path();
    let log = std::fs::read_to_string(w.p("state/audit.jsonl")).unwrap();
    let (outside, nothing) = (t.join("outside"), t.join("nothing"));
    let targets = [
        outside.to_str().unwrap(),
        nothing.to_str().unwrap(),
        "/etc/shadow",
        "/etc/nonexistent",
        "/nonexistent/x",
    ];
    let allowed1 = w.p("allowed1");
    let mut seen = 0;
    for event in log.lines() {
        let event: serde_json::Value = serde_json::from_str(event).unwrap();
        let subject = event["subject"].as_str().unwrap_or_default();
        if event["event"] != "upload.refused" || !subject.starts_with(allowed1.to_str().unwrap()) {
            continue;
        }
        let message = event["message"].as_str().unwrap();
        for target in targets {
            assert!(!message.contains(target), "{message}");
        }
        seen += 1;
    }
    seen
}

/// Every system call that looks a path up, for [`forbid_lookups`].
fn lookups() -> Vec<i64> {
    let mut calls = vec![
        libc::SYS_openat,
        libc::SYS_openat2,
        libc::SYS_newfstatat,
        libc::SYS_statx,
        libc::SYS_statfs,
        libc::SYS_readlinkat,
        libc::SYS_faccessat,
        libc::SYS_faccessat2,
        libc::SYS_getxattr,
        libc::SYS_lgetxattr,
        libc::SYS_listxattr,
        libc::SYS_llistxattr,
        libc::SYS_name_to_handle_at,
        libc::SYS_inotify_add_watch,
        libc::SYS_chdir,
        libc::SYS_execve,
        libc::SYS_execveat,
        libc::SYS_mknodat,
        libc::SYS_mkdirat,
        libc::SYS_unlinkat,
        libc::SYS_symlinkat,
        libc::SYS_linkat,
        libc::SYS_renameat2,
        libc::SYS_truncate,
        libc::SYS_fchmodat,
        libc::SYS_fchownat,
        libc::SYS_utimensat,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        libc::SYS_open,
        libc::SYS_creat,
        libc::SYS_stat,
        libc::SYS_lstat,
        libc::SYS_readlink,
        libc::SYS_access,
        libc::SYS_mkdir,
        libc::SYS_rmdir,
        libc::SYS_unlink,
        libc::SYS_link,
        libc::SYS_symlink,
        libc::SYS_rename,
        libc::SYS_renameat,
        libc::SYS_chmod,
        libc::SYS_chown,
        libc::SYS_lchown,
        libc::SYS_utime,
        libc::SYS_utimes,
        libc::SYS_futimesat,
        libc::SYS_mknod,
    ]);
    calls
}

/// From now on, on this thread only (a seccomp filter, root or not), every system call that
/// looks a path up fails with `ENOTRECOVERABLE`, an error nothing else produces.
fn forbid_lookups() {
    let rules = lookups().into_iter().map(|call| (call, Vec::new()));
    let filter = seccompiler::SeccompFilter::new(
        rules.collect::<BTreeMap<_, _>>(),
        seccompiler::SeccompAction::Allow,
        seccompiler::SeccompAction::Errno(libc::ENOTRECOVERABLE as u32),
        std::env::consts::ARCH.try_into().unwrap(),
    )
    .unwrap();
    let program: seccompiler::BpfProgram = filter.try_into().unwrap();
    seccompiler::apply_filter(&program).unwrap();
}

/// A path spelled outside every allowed root is refused without a single system call that
/// looks a path up: on a thread where each of those fails (a seccomp filter, which binds root
/// too), such paths — existing, missing, under a FIFO, through `/proc` — are still refused
/// with `outside_allowlist`, while a path inside a root, which has to be opened, fails with
/// the filter's error, so the filter is there.
#[test]
fn a_path_outside_every_root_is_refused_without_a_lookup() {
    let w = World::new();
    mkfifo(&w.p("outside/fifo"));
    let outside = [
        PathBuf::from("/etc/shadow"),
        PathBuf::from("/nonexistent/x"),
        PathBuf::from("/proc/self/fd/0"),
        w.p("outside/secret"),
        w.p("outside/fifo/x"),
        w.p("allowed1/../outside/secret"),
    ];
    // The probe for openat2 is made once per process: not on the filtered thread.
    safe_lanes::beneath::openat2_available();
    for backend in BACKENDS {
        let _forced = force_backend(backend);
        let source = w.source();
        let (refused, inside) = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    forbid_lookups();
                    let refused: Vec<(Code, String)> = outside
                        .iter()
                        .map(|p| source.open(p).unwrap_err())
                        .map(|e| (e.code(), e.to_string()))
                        .collect();
                    (refused, source.open(&w.p("allowed1/file.txt")).unwrap_err())
                })
                .join()
                .unwrap()
        });
        for (path, (code, message)) in outside.iter().zip(&refused) {
            assert_eq!(
                *code,
                Code::OutsideAllowlist,
                "{backend:?} {path:?}: {message}"
            );
        }
        assert_eq!(
            inside.raw_os_error(),
            Some(libc::ENOTRECOVERABLE),
            "{backend:?}: {inside}"
        );
    }
}

/// Regression: with `SAFE_LANES_ROOT=S GWSA_ROOT=G` and an allowlist covering G's parent,
/// `G/token.json` was accepted: the hard guard knew only the state root in use. Every state
/// root the environment or the defaults name is guarded — by the path as written and by where
/// the kernel finds it — each but its `.downloads`, and one made after the allowlist was
/// loaded too.
#[test]
fn every_state_root_the_environment_names_is_guarded() {
    let w = World::new();
    let t = w.tmp.path();
    let named = [
        "gateway/gwsa",
        "gateway/xdg/safe-lanes",
        "gateway/home/.local/state/safe-lanes",
    ];
    for root in named {
        std::fs::create_dir_all(t.join(root).join(".downloads")).unwrap();
        std::fs::write(t.join(root).join("token.json"), "TOKEN").unwrap();
        std::fs::write(t.join(root).join(".downloads/got.pdf"), "received").unwrap();
    }
    symlink(t.join("gateway/gwsa"), t.join("gateway/gwsa-link")).unwrap();
    symlink(
        t.join("gateway/gwsa/token.json"),
        t.join("gateway/token-link"),
    )
    .unwrap();
    std::fs::write(
        w.p("state/.upload-roots"),
        format!("{}\n", t.join("gateway").display()),
    )
    .unwrap();
    let env: Vec<(&str, PathBuf)> = vec![
        ("SAFE_LANES_ROOT", w.p("state")),
        ("GWSA_ROOT", t.join("gateway/gwsa-link")),
        ("XDG_STATE_HOME", t.join("gateway/xdg")),
        ("HOME", t.join("gateway/home")),
    ];
    let lookup = |key: &str| {
        env.iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone().into_os_string())
    };
    for backend in BACKENDS {
        let _forced = force_backend(backend);
        let source = UploadSource::load_with(&w.root, lookup).unwrap();
        let gateway = source.roots().iter().find(|r| r.path == t.join("gateway"));
        assert!(gateway.unwrap().covers_state_root, "{backend:?}");
        for root in named {
            for rel in [
                format!("{root}/token.json"),
                format!("{root}/.downloads/../token.json"),
            ] {
                let err = source.resolve(&t.join(&rel)).unwrap_err();
                assert_eq!(err.code(), Code::StateRoot, "{backend:?} {rel}: {err}");
            }
            let received = source.resolve(&t.join(root).join(".downloads/got.pdf"));
            assert!(received.is_ok(), "{backend:?} {root}: {received:?}");
        }
        for rel in ["gateway/gwsa-link/token.json", "gateway/token-link"] {
            let err = source.resolve(&t.join(rel)).unwrap_err();
            assert_eq!(err.code(), Code::StateRoot, "{backend:?} {rel}: {err}");
        }
    }
    // A root named before it exists is guarded once it does.
    let later = t.join("gateway/later");
    let source = UploadSource::load_with(&w.root, |k| {
        (k == "GWSA_ROOT").then(|| later.clone().into_os_string())
    })
    .unwrap();
    std::fs::create_dir(&later).unwrap();
    std::fs::write(later.join("token.json"), "TOKEN").unwrap();
    let err = source.resolve(&later.join("token.json")).unwrap_err();
    assert_eq!(err.code(), Code::StateRoot, "{err}");
    // Without the variables, the other roots are folders like any other.
    let unnamed = w.source();
    assert!(unnamed.resolve(&t.join("gateway/gwsa/token.json")).is_ok());
}

/// Regression: `covers_state_root` said whether a root lay *inside* the state root: `/` was
/// `false` and a folder inside the state root `true`.
#[test]
fn covers_state_root_says_whether_a_root_contains_a_state_root() {
    let w = World::new();
    std::fs::create_dir(w.p("state/inner")).unwrap();
    let roots = format!(
        "{}\n{}\n{}\n{}\n",
        w.tmp.path().parent().unwrap().display(),
        w.tmp.path().display(),
        w.p("state/inner").display(),
        w.p("allowed1").display()
    );
    std::fs::write(w.p("state/.upload-roots"), roots).unwrap();
    let source = w.source();
    let covers: Vec<(PathBuf, bool)> = source
        .roots()
        .iter()
        .map(|r| (r.path.clone(), r.covers_state_root))
        .collect();
    for (path, want) in [
        (w.tmp.path().parent().unwrap().to_path_buf(), true),
        (w.tmp.path().to_path_buf(), true),
        (w.p("state/inner"), false),
        (w.p("allowed1"), false),
        (w.p("state/.downloads"), false),
    ] {
        assert!(
            covers.contains(&(path.clone(), want)),
            "{path:?}: {covers:?}"
        );
    }
}

/// The pseudo-filesystems allowed as upload roots (made here through the variable, as a human
/// might; `/` itself is never an upload root).
fn with_everything_allowed(w: &World) -> UploadSource {
    UploadSource::load_with(&w.root, |k| {
        (k == "SAFE_LANES_UPLOAD_ROOTS").then(|| "/proc:/sys:/dev".into())
    })
    .unwrap()
}

/// Regression: with `/` (or `/proc`) allowed, `/proc/self/environ` — the gateway's own environment, its
/// tokens included — was a valid source. Nothing on `proc`, `sysfs`, `cgroup` and the like,
/// and no device node, is ever an upload source (`pseudo_file`), whatever the allowlist says.
#[test]
fn pseudo_files_are_never_upload_sources() {
    let w = World::new();
    let cgroup = [
        "/sys/fs/cgroup/cgroup.controllers",
        "/sys/fs/cgroup/cpu/cgroup.procs",
        "/sys/fs/cgroup/memory/cgroup.procs",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())
    .expect("a cgroup file (cgroup2 or v1) to try");
    for backend in BACKENDS {
        let _forced = force_backend(backend);
        let source = with_everything_allowed(&w);
        for path in [
            "/proc/self/environ",
            "/proc/self/cmdline",
            "/proc/thread-self/environ",
            "/proc/cpuinfo",
            "/sys/kernel/uevent_seqnum",
            cgroup,
            "/dev/null",
            "/dev/zero",
        ] {
            assert!(Path::new(path).exists(), "{path} is there to refuse");
            let err = source.resolve(Path::new(path)).unwrap_err();
            assert_eq!(err.code(), Code::PseudoFile, "{backend:?} {path}: {err}");
        }
        assert!(
            source.resolve(&w.p("allowed1/file.txt")).is_ok(),
            "{backend:?}"
        );
    }
}

/// The filesystem decides, not the path: `proc` mounted inside an allowed folder is refused
/// the same. Mounting needs root (CI runs as root).
#[test]
fn a_pseudo_filesystem_mounted_in_an_allowed_folder_is_refused_alike() {
    assert!(
        rustix::process::geteuid().is_root(),
        "a bind mount needs root (CI runs as root)"
    );
    let w = World::new();
    let at = w.p("allowed1/proc");
    std::fs::create_dir(&at).unwrap();
    let status = std::process::Command::new("mount")
        .args(["--bind", "/proc"])
        .arg(&at)
        .status()
        .unwrap();
    assert!(status.success(), "mount --bind /proc");
    let unmount = Unmount(at.clone());
    for backend in BACKENDS {
        let _forced = force_backend(backend);
        let source = w.source();
        for rel in ["self/environ", "self/cmdline", "cpuinfo"] {
            let err = source.resolve(&at.join(rel)).unwrap_err();
            assert_eq!(err.code(), Code::PseudoFile, "{backend:?} {rel}: {err}");
            assert!(err.to_string().contains("proc"), "{err}");
        }
    }
    drop(unmount);
}

/// Unmounts its path when dropped.
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// Regression: the walk through links read and followed a link on a mount made
/// `nosymfollow`, where the kernel follows none. Mounting needs root (CI runs as root).
#[test]
fn no_link_is_followed_on_a_nosymfollow_mount() {
    let w = World::new();
    let disk = SmallDisk::mount_as_root_with("1m", "nosymfollow");
    std::fs::write(disk.path.join("file.txt"), "file").unwrap();
    symlink("file.txt", disk.path.join("link")).unwrap();
    let root = disk.path.clone().into_os_string();
    for backend in BACKENDS {
        let _forced = force_backend(backend);
        let source = UploadSource::load_with(&w.root, |k| {
            (k == "SAFE_LANES_UPLOAD_ROOTS").then(|| root.clone())
        })
        .unwrap();
        assert!(
            source.resolve(&disk.path.join("file.txt")).is_ok(),
            "{backend:?}"
        );
        let err = source.resolve(&disk.path.join("link")).unwrap_err();
        assert_eq!(err.code(), Code::SymlinkEscape, "{backend:?}: {err}");
    }
}
