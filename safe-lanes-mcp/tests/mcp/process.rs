//! The server process itself: no core file, out of reach of other processes of its user, and a
//! warning when it runs as root.
//!
//! The server runs as `nobody` when the tests run as root (as in CI), else as the tests' user.
//! What shows that a process is not dumpable, from outside: its `/proc/<pid>/` entries belong
//! to root although the process does not run as root, and another process of the same user
//! cannot read its `/proc/<pid>/environ`, which it can for a dumpable process of that user.

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use crate::raw::{Raw, Shared, proc_status_field};

const NOBODY: u32 = 65534;

/// The user the server runs as in these tests, and whether that is another user than ours.
fn server_user() -> (u32, Option<u32>) {
    if rustix::process::geteuid().is_root() {
        (NOBODY, Some(NOBODY))
    } else {
        (rustix::process::geteuid().as_raw(), None)
    }
}

/// Whether a process running as `user` can read `/proc/<pid>/environ`.
fn can_read_environ(pid: u32, user: Option<u32>) -> bool {
    let mut cat = Command::new("cat");
    cat.arg(format!("/proc/{pid}/environ"))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(id) = user {
        cat.uid(id).gid(id);
    }
    cat.status().unwrap().success()
}

#[test]
fn the_server_writes_no_core_file_and_other_processes_of_its_user_cannot_read_it() {
    let shared = Shared::new();
    let (uid, user) = server_user();
    let root = shared.root_for("state", uid);
    let server = Raw::start(&shared.binary(), &root, &[], user);
    let pid = server.pid();
    assert_eq!(
        proc_status_field(pid, "Uid").split_whitespace().nth(1),
        Some(uid.to_string().as_str())
    );
    // RLIMIT_CORE: soft and hard 0.
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let core: Vec<&str> = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max core file size"))
        .expect("a core limit line")
        .split_whitespace()
        .collect();
    assert_eq!(core, ["0", "0", "bytes"], "{limits}");
    // Not dumpable: its /proc entries belong to root, and its user cannot read them.
    assert_ne!(uid, 0);
    let owner = std::fs::metadata(format!("/proc/{pid}/environ"))
        .unwrap()
        .uid();
    assert_eq!(
        owner, 0,
        "/proc/{pid} belongs to the server's user: it is dumpable"
    );
    assert!(
        !can_read_environ(pid, user),
        "a process of the server's user read its environment"
    );
    // The same reads succeed on a dumpable process of that user: the observation can fail.
    let mut control = Command::new("cat");
    control.stdin(Stdio::piped()).stdout(Stdio::null());
    if let Some(id) = user {
        control.uid(id).gid(id);
    }
    let mut control = control.spawn().unwrap();
    let readable = can_read_environ(control.id(), user);
    let owner = std::fs::metadata(format!("/proc/{}/environ", control.id()))
        .unwrap()
        .uid();
    let _ = control.kill();
    let _ = control.wait();
    assert!(readable);
    assert_eq!(owner, uid);
    drop(server);
}

/// At start, the server warns on stderr (one line) exactly when it runs as root.
#[test]
fn the_server_warns_when_it_runs_as_root_and_only_then() {
    let shared = Shared::new();
    let me = rustix::process::geteuid();
    let as_me = Raw::start(
        &shared.binary(),
        &shared.root_for("mine", me.as_raw()),
        &[],
        None,
    );
    let warned = |startup: &[String]| {
        startup
            .iter()
            .filter(|l| l.contains("WARN") && l.contains("running as root"))
            .count()
    };
    assert_eq!(
        warned(&as_me.startup),
        usize::from(me.is_root()),
        "{:?}",
        as_me.startup
    );
    if me.is_root() {
        let as_nobody = Raw::start(
            &shared.binary(),
            &shared.root_for("nobody", NOBODY),
            &[],
            Some(NOBODY),
        );
        assert_eq!(warned(&as_nobody.startup), 0, "{:?}", as_nobody.startup);
    }
}
