//! A gateway running as root covers what others may not read under `/etc` in every command's
//! sandbox, and a gateway that lives long (an MCP server) sees the changes made to `/etc` while
//! it runs: a file made owner-only after its first commands is covered for the next one, and
//! a covered file removed does not stop the commands after it.
//!
//! It changes `/etc` (one file of its own, removed at the end), so it needs root (CI runs as
//! root), and it is a test binary of its own: while it runs, no other test's command is
//! between its search of `/etc` and its mounts.

#![cfg(target_os = "linux")]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use safe_lanes::{Confined, Grants, StateRoot};

/// A file of this test's own under `/etc`, removed when the test ends, however it ends.
struct EtcFile(PathBuf);

impl EtcFile {
    fn new() -> Self {
        let path = Path::new("/etc").join(format!(
            "safe-lanes-test-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::write(&path, "not a secret yet\n").unwrap();
        Self(path)
    }

    fn set_mode(&self, mode: u32) {
        std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

impl Drop for EtcFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn a_long_lived_root_gateway_covers_what_became_owner_only_while_it_ran() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test changes /etc and needs root (CI runs as root)"
    );
    let support = safe_lanes::sandbox_support();
    assert!(
        support.available,
        "this test needs every layer of the sandbox: {support:?}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let root = StateRoot::open(&tmp.path().join("state")).unwrap();
    let grants = std::sync::Arc::new(Grants::open(&root, None).unwrap());
    let session = grants.session();
    let file = EtcFile::new();
    file.set_mode(0o644);
    let read = || {
        let script = format!("cat '{}' 2>/dev/null || echo '[covered]'", file.0.display());
        let out = Confined::shell(&script).run(&session).unwrap();
        assert_eq!(out.outcome.exit_code, Some(0), "{out:?}");
        out.outcome.stdout
    };
    // Readable by everyone: every command reads it (the probe above made the process's first
    // search; each command since keeps a watched one).
    for _ in 0..3 {
        assert_eq!(read(), "not a secret yet\n");
    }
    // Made owner-only while the gateway runs: covered for the very next command.
    file.set_mode(0o600);
    assert_eq!(read(), "[covered]\n");
    assert_eq!(read(), "[covered]\n");
    // Readable again: no longer covered.
    file.set_mode(0o644);
    assert_eq!(read(), "not a secret yet\n");
    // Owner-only, then removed: the next commands run (nothing is left to cover).
    file.set_mode(0o600);
    assert_eq!(read(), "[covered]\n");
    std::fs::remove_file(&file.0).unwrap();
    assert_eq!(
        read(),
        "[covered]\n",
        "cat of a missing file fails the same way"
    );
    let out = Confined::shell("echo ran").run(&session).unwrap();
    assert_eq!(
        (out.outcome.exit_code, out.outcome.stdout.as_str()),
        (Some(0), "ran\n"),
        "{out:?}"
    );
}
