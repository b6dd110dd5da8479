//! A disk that fills up: a small `tmpfs`.

use std::path::PathBuf;

/// A tmpfs of `size` (as `mount -o size=`) mounted in a fresh temporary folder, unmounted when
/// dropped.
#[derive(Debug)]
pub struct SmallDisk {
    /// Where it is mounted.
    pub path: PathBuf,
    _tmp: tempfile::TempDir,
}

impl SmallDisk {
    /// Mount one, or `None` (the reason on stderr) unless running as root, which mounting
    /// needs (CI runs as root).
    pub fn mount(size: &str) -> Option<Self> {
        Self::mount_with(size, "")
    }

    /// Mount one with more mount options (`nosymfollow`, …, comma-separated after the size);
    /// running as root is required (the test cannot hold without it).
    pub fn mount_as_root_with(size: &str, options: &str) -> Self {
        assert!(
            rustix::process::geteuid().is_root(),
            "mounting a tmpfs needs root (CI runs as root)"
        );
        Self::mount_with(size, options).expect("mounted")
    }

    fn mount_with(size: &str, options: &str) -> Option<Self> {
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
                &format!(
                    "size={size},mode=0700{}{options}",
                    if options.is_empty() { "" } else { "," }
                ),
                "tmpfs",
            ])
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success(), "mount a {size} tmpfs ({options})");
        Some(Self { path, _tmp: tmp })
    }

    /// Mount one; running as root is required (the test cannot hold without it).
    pub fn mount_as_root(size: &str) -> Self {
        assert!(
            rustix::process::geteuid().is_root(),
            "mounting a small tmpfs to fill needs root (CI runs as root)"
        );
        Self::mount(size).expect("mounted")
    }

    /// Fill it, leaving less than a page; the filler's path (remove it to make room).
    pub fn fill(&self) -> PathBuf {
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
