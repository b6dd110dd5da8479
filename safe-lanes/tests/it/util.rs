//! Helpers shared by the integration tests.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use safe_lanes::StateRoot;
use tempfile::TempDir;

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
}

/// Names in a directory, sorted.
pub(crate) fn names(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// Permission bits of `path` (not following a final link).
pub(crate) fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).expect("lstat").mode() & 0o7777
}

/// `mkfifo(path, 0600)`.
pub(crate) fn mkfifo(path: &Path) {
    let c = CString::new(path.as_os_str().as_bytes()).expect("no NUL");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        c.as_c_str(),
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .expect("mkfifo");
}

/// Whether process `pid` is gone (or a zombie waiting for whoever adopted it), waiting up to
/// two seconds for it to go.
pub(crate) fn dies_soon(pid: i32) -> bool {
    let dead = || match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    };
    (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(20));
        dead()
    })
}

/// A shell loop that rewrites `"$1/beat"` every 50 ms, for [`stops_writing`].
pub(crate) const HEARTBEAT: &str = r#"while :; do date +%s%N > "$1/beat"; sleep 0.05; done"#;

/// Whether whatever rewrites `beat` (every 50 ms, see [`HEARTBEAT`]) has stopped: its content
/// stays the same for half a second, within five seconds.
pub(crate) fn stops_writing(beat: &Path) -> bool {
    let read = || std::fs::read(beat).unwrap_or_default();
    (0..10).any(|_| {
        let before = read();
        std::thread::sleep(std::time::Duration::from_millis(500));
        before == read()
    })
}

/// A fixed relative path of a test, checked as the primitive requires.
pub(crate) fn rel(path: &str) -> safe_lanes::input::RelPath<'_> {
    safe_lanes::input::RelPath::new(path).expect("a valid relative path")
}

/// A tmpfs of `size` (as `mount -o size=`) mounted in a fresh temporary folder, unmounted when
/// dropped: a disk that fills up. `None` (with the reason on stderr) unless running as root,
/// which mounting needs (CI runs as root).
pub(crate) struct SmallDisk {
    pub(crate) path: std::path::PathBuf,
    _tmp: tempfile::TempDir,
}

impl SmallDisk {
    pub(crate) fn mount(size: &str) -> Option<Self> {
        if !rustix::process::geteuid().is_root() {
            #[allow(clippy::print_stderr)] // the reason for skipping, where the runner shows it
            {
                eprintln!("skipped: mounting a small tmpfs to fill needs root (CI runs as root)");
            }
            return None;
        }
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("small");
        std::fs::create_dir(&path).unwrap();
        let status = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success(), "mount a {size} tmpfs");
        Some(Self { path, _tmp: tmp })
    }

    /// Fill it, leaving less than a page; the filler's path (remove it to make room).
    pub(crate) fn fill(&self) -> std::path::PathBuf {
        let filler = self.path.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        while std::io::Write::write_all(&mut file, &[0u8; 4096]).is_ok() {}
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(&self.path)
            .status();
    }
}
