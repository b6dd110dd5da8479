//! The process itself: `doctor` reports its hardening and says whether it runs as root.
//!
//! The tests run the binary as the tests' user and, when that is root (as in CI), also as
//! `nobody`, from a copy in a directory every user can enter, on a state root that user owns.
//! (That hardening leaves confined commands working for an unprivileged user is shown by the
//! `hostile` suite, which runs every case as `nobody` too.)

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::util::Run;

const NOBODY: u32 = 65534;

/// A directory every user can enter, with a copy (or hard link) of the binary in it.
struct Shared {
    tmp: tempfile::TempDir,
}

impl Shared {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let binary = Path::new(env!("CARGO_BIN_EXE_safe-lanes"));
        let shared = tmp.path().join("safe-lanes");
        if std::fs::hard_link(binary, &shared).is_err() {
            std::fs::copy(binary, &shared).unwrap();
        }
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self { tmp }
    }

    /// A directory `name` owned by `uid`.
    fn dir_for(&self, name: &str, uid: u32) -> PathBuf {
        let dir = self.tmp.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        std::os::unix::fs::chown(&dir, Some(uid), Some(uid)).unwrap();
        dir
    }

    /// Run `safe-lanes --root <home>/state ARGS` as `user` (a uid and gid; `None`: ours),
    /// with `home` as HOME and working directory.
    fn run(&self, user: Option<u32>, home: &Path, args: &[&str]) -> Run {
        let mut command = Command::new(self.tmp.path().join("safe-lanes"));
        command
            .arg("--root")
            .arg(home.join("state"))
            .args(args)
            .current_dir(home)
            .env_clear()
            .env("HOME", home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::null());
        if let Some(id) = user {
            command.uid(id).gid(id);
        }
        let out = command.output().unwrap();
        Run::from(out)
    }
}

/// `doctor` reports the process's hardening, and warns (one line, not a problem) exactly when it
/// runs as root.
#[test]
fn doctor_says_whether_it_runs_as_root() {
    let shared = Shared::new();
    let me = rustix::process::geteuid();
    let mut users = vec![(me.as_raw(), None, me.is_root())];
    if me.is_root() {
        users.push((NOBODY, Some(NOBODY), false));
    }
    for (uid, user, root) in users {
        let home = shared.dir_for(&format!("home-{uid}"), uid);
        assert_eq!(shared.run(user, &home, &["init"]).status, 0);
        let run = shared.run(user, &home, &["--json", "doctor"]);
        let json = run.json();
        assert_eq!(json["running_as_root"], root, "uid {uid}: {json}");
        assert_eq!(json["process"]["running_as_root"], root, "{json}");
        assert_eq!(json["process"]["not_dumpable"], true, "{json}");
        assert_eq!(json["process"]["no_core_files"], true, "{json}");
        let warnings = json["warnings"].as_array().expect("warnings");
        assert_eq!(warnings.len(), usize::from(root), "{json}");
        assert!(warnings.iter().all(|w| {
            let w = w.as_str().unwrap();
            w.contains("running as root") && !w.contains('\n')
        }));
        // A warning, not a problem: doctor still passes.
        assert_eq!((json["ok"].clone(), run.status), (true.into(), 0), "{json}");
        let text = shared.run(user, &home, &["doctor"]);
        assert_eq!(
            text.stdout
                .lines()
                .filter(|l| l.starts_with("warning: running as root"))
                .count(),
            usize::from(root),
            "{}",
            text.stdout
        );
    }
}

/// An uploader sees only its own upload in the deposit, for root (a mount namespace) and for
/// an ordinary user (a user namespace around it): another upload staged at the same time can
/// be neither listed nor read.
#[test]
fn an_uploader_sees_only_its_own_upload_as_any_user() {
    let shared = Shared::new();
    let me = rustix::process::geteuid();
    let mut users = vec![(me.as_raw(), None)];
    if me.is_root() {
        users.push((NOBODY, Some(NOBODY)));
    }
    for (uid, user) in users {
        let home = shared.dir_for(&format!("home-{uid}"), uid);
        assert_eq!(shared.run(user, &home, &["init"]).status, 0);
        let lane = home.join("state/.downloads");
        for (name, content) in [("secret.txt", "the other upload"), ("mine.txt", "mine")] {
            std::fs::write(lane.join(name), content).unwrap();
            std::fs::set_permissions(lane.join(name), std::fs::Permissions::from_mode(0o600))
                .unwrap();
            std::os::unix::fs::chown(lane.join(name), Some(uid), Some(uid)).unwrap();
        }
        let secret = lane.join("secret.txt");
        let mut other = Command::new(shared.tmp.path().join("safe-lanes"));
        other
            .arg("--root")
            .arg(home.join("state"))
            .args(["upload", "send"])
            .arg(&secret)
            .args(["--", "sh", "-c", "sleep 20", "sh", "{file}"])
            .env_clear()
            .env("HOME", &home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        if let Some(id) = user {
            other.uid(id).gid(id);
        }
        let mut other = other.spawn().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::fs::read_dir(home.join("state/.uploads"))
            .unwrap()
            .count()
            == 0
        {
            assert!(
                std::time::Instant::now() < deadline,
                "uid {uid}: never staged"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let mine = lane.join("mine.txt");
        let run = shared.run(
            user,
            &home,
            &[
                "--json",
                "upload",
                "send",
                mine.to_str().unwrap(),
                "--",
                "sh",
                "-c",
                "ls -a ..; echo ---; cat ../*/in/* 2>&1; true",
                "sh",
                "{file}",
            ],
        );
        let _ = other.kill();
        let _ = other.wait();
        assert_eq!(run.status, 0, "uid {uid}: {run:?}");
        let stdout = run.json()["stdout"].as_str().unwrap().to_owned();
        let (listed, read) = stdout.split_once("---\n").unwrap();
        assert_eq!(
            listed.lines().filter(|l| !l.starts_with('.')).count(),
            1,
            "uid {uid}: {stdout}"
        );
        assert_eq!(read, "mine", "uid {uid}: {stdout}");
    }
}
