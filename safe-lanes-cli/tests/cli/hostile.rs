//! A hostile command in the sandbox, through the real binary, run twice: by the user running
//! the tests (root in CI) and by an ordinary user (`nobody`). Each case is an attack that got
//! through the Landlock-and-seccomp design before namespaces.
//!
//! When the tests do not run as root they cannot switch users; the second run is then made
//! as the same (already unprivileged) user.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use safe_lanes_testkit::users::{self, UserDir};

use crate::util::{HEARTBEAT, Run, appears, stops_writing};

/// One user's world: a state root, a read-write grant `proj`, a read-only grant `docs`, a
/// folder `outside` of no grant, and a copy of the binary that user can run.
struct Lab {
    dir: UserDir,
    binary: PathBuf,
}

impl Lab {
    /// The labs of both runs.
    fn both() -> [Lab; 2] {
        users::both().map(Lab::new)
    }

    fn new(uid: u32) -> Self {
        let dir = UserDir::new(uid, &["home", "proj", "docs", "outside"]);
        std::fs::write(dir.p("docs/readme"), "read only").unwrap();
        std::fs::write(dir.p("outside/secret"), "secret").unwrap();
        dir.give("docs/readme");
        dir.give("outside/secret");
        let binary = dir.copy_binary(Path::new(env!("CARGO_BIN_EXE_safe-lanes")), "safe-lanes");
        let lab = Self { dir, binary };
        for (alias, access) in [("proj", "read_write"), ("docs", "read_only")] {
            let path = lab.p(alias);
            let run = lab.cli(&[
                "grant",
                "add",
                "--reason",
                "test",
                "--alias",
                alias,
                "--path",
                path.to_str().unwrap(),
                "--access",
                access,
            ]);
            assert_eq!(run.status, 0, "{run:?}");
        }
        lab
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.dir.p(rel)
    }

    /// Make `proj` direct: what a command writes there shows while it runs, which the tests
    /// that watch a command from outside need (a layered grant's writes land when it ends).
    fn direct(&self) {
        let run = self.cli(&[
            "grant",
            "set-access",
            "proj",
            "read_write",
            "--direct",
            "--reason",
            "watched",
        ]);
        assert_eq!(run.status, 0, "{run:?}");
    }

    /// The path `rel` in the layer of the one change set a running command has (where its
    /// writes are until it ends), once there is one.
    fn in_layer(&self, rel: &str) -> PathBuf {
        let sets = self.p("state/changes");
        let set = std::fs::read_dir(&sets)
            .ok()
            .and_then(|mut d| d.find_map(|e| e.ok()))
            .map_or_else(|| sets.join("none"), |e| e.path());
        set.join("layers/0/upper").join(rel)
    }

    /// `safe-lanes --root <root> ARGS`, as this lab's user.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .arg("--root")
            .arg(self.p("state"))
            .args(args)
            .current_dir(self.p("home"))
            .env_clear()
            .env("HOME", self.p("home"))
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        self.as_user(&mut command);
        command
    }

    fn as_user(&self, command: &mut Command) {
        // `std` also clears the supplementary groups when root switches users.
        self.dir.run_as(command);
    }

    fn cli(&self, args: &[&str]) -> Run {
        let out = spawn(&mut self.command(args)).wait_with_output().unwrap();
        Run::from(out)
    }

    /// Run `script` with `/bin/sh` in `proj`, `$1…` = `args`; the JSON outcome.
    fn exec(&self, script: &str, args: &[&str]) -> Value {
        let mut full = vec![
            "--json", "exec", "--cwd", "proj", "--", "/bin/sh", "-c", script, "sh",
        ];
        full.extend_from_slice(args);
        let run = self.cli(&full);
        assert!(run.status == 0 || run.status == 1, "{run:?}");
        run.json()
    }

    /// Run the attacks of `script` (lines from [`attempt`]) and assert that every one held.
    fn all_held(&self, script: &str, args: &[&str]) {
        let out = self.exec(script, args);
        assert_eq!(
            got_through(&out),
            Vec::<String>::new(),
            "{} {out}",
            self.who()
        );
    }

    /// Start `safe-lanes exec` on `script` without waiting for it.
    fn spawn_exec(&self, script: &str) -> Child {
        let lab = self.p("proj");
        spawn(&mut self.command(&[
            "exec",
            "--cwd",
            "proj",
            "--",
            "/bin/sh",
            "-c",
            script,
            "sh",
            lab.to_str().unwrap(),
        ]))
    }

    /// A process of this lab's user, outside the sandbox, to attack.
    fn victim(&self) -> Child {
        let mut command = Command::new("/bin/sleep");
        command.arg("60");
        self.as_user(&mut command);
        command.spawn().unwrap()
    }

    /// `safe-lanes --root <root> ARGS` inside a user namespace in which no further user
    /// namespace may be made (as on hosts that disable them).
    fn without_user_namespaces(&self, args: &[&str]) -> Run {
        let mut command = Command::new("unshare");
        command
            .args(["--user", "--map-root-user", "/bin/sh", "-c"])
            .arg(r#"echo 0 > /proc/sys/user/max_user_namespaces && exec "$@""#)
            .arg("sh")
            .arg(&self.binary)
            .arg("--root")
            .arg(self.p("state"))
            .args(args)
            .env_clear()
            .env("HOME", self.p("home"))
            .env("PATH", "/usr/bin:/bin")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        self.as_user(&mut command);
        let out = spawn(&mut command).wait_with_output().unwrap();
        Run::from(out)
    }

    fn who(&self) -> String {
        format!("uid {}", self.dir.uid)
    }
}

/// Spawn `command`, retrying while the copied binary is still open for writing in a child
/// that another test forked during the copy (`ETXTBSY` until that child calls `exec`).
fn spawn(command: &mut Command) -> Child {
    for _ in 0..100 {
        match command.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(Duration::from_millis(20));
            }
            spawned => return spawned.unwrap(),
        }
    }
    panic!("{command:?} stayed busy");
}

/// Every line of `out`'s stdout that is not `held`: the attacks that got through.
fn got_through(out: &Value) -> Vec<String> {
    out["stdout"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with("held"))
        .map(str::to_owned)
        .collect()
}

/// A shell line that prints `held: NAME` when `ATTACK` fails and `THROUGH: NAME` when it works.
fn attempt(name: &str, attack: &str) -> String {
    assert!(!name.contains('\''), "the name is quoted with '");
    format!(
        "if {attack} >/dev/null 2>&1; then echo 'THROUGH: {name}'; else echo 'held: {name}'; fi\n"
    )
}

#[test]
fn other_processes_and_their_limits_are_out_of_reach() {
    for lab in Lab::both() {
        let mut victim = lab.victim();
        let pid = victim.id().to_string();
        let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
        let script = [
            attempt("prlimit --fsize", r#"prlimit --pid "$1" --fsize=0"#),
            attempt("prlimit --nofile", r#"prlimit --pid "$1" --nofile=3:3"#),
            attempt("prlimit --core", r#"prlimit --pid "$1" --core=unlimited"#),
            attempt("kill -STOP", r#"kill -STOP "$1""#),
            attempt("kill -9", r#"kill -9 "$1""#),
            attempt("renice", r#"renice -n 19 -p "$1""#),
            attempt("kill the parent", r#"[ "$PPID" -gt 1 ] && kill -0 "$PPID""#),
        ]
        .concat();
        lab.all_held(&script, &[&pid]);
        assert!(
            victim.try_wait().unwrap().is_none(),
            "{}: the victim lives",
            lab.who()
        );
        let after = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
        assert_eq!(after, limits, "{}: its limits are unchanged", lab.who());
        victim.kill().unwrap();
        victim.wait().unwrap();
    }
}

#[test]
fn everything_a_command_started_dies_when_the_gateway_is_killed() {
    for lab in Lab::both() {
        // A background writer in a new session, and a foreground sleep; then kill -9 the CLI.
        lab.direct();
        let script = format!(r#"setsid sh -c '{HEARTBEAT}' sh "$1" & sleep 60"#);
        let mut gateway = lab.spawn_exec(&script);
        let beat = lab.p("proj/beat");
        assert!(appears(&beat), "{}: the writer started", lab.who());
        gateway.kill().unwrap();
        gateway.wait().unwrap();
        assert!(
            stops_writing(&beat),
            "{}: the writer outlived the gateway",
            lab.who()
        );
    }
}

#[test]
fn system_v_ipc_of_the_host_is_invisible() {
    for lab in Lab::both() {
        let mut ids = Vec::new();
        for kind in ["-M", "-Q", "-S"] {
            let mut command = Command::new("ipcmk");
            match kind {
                "-M" => command.args(["-M", "4096"]),
                "-S" => command.args(["-S", "1"]),
                _ => command.arg("-Q"),
            };
            lab.as_user(&mut command);
            let out = command.output().unwrap();
            assert!(out.status.success(), "{out:?}");
            let text = String::from_utf8_lossy(&out.stdout);
            let id = text.split(':').next_back().unwrap().trim().to_owned();
            ids.push((kind, id));
        }
        let mut script = attempt("list the host objects", "ipcs -a | grep -E '^0x'");
        for (kind, id) in &ids {
            let flag = kind.to_lowercase();
            script += &attempt(&format!("ipcrm {flag} {id}"), &format!("ipcrm {flag} {id}"));
        }
        lab.all_held(&script, &[]);
        for (kind, id) in &ids {
            let mut command = Command::new("ipcrm");
            command.args([kind.to_lowercase().as_str(), id.as_str()]);
            lab.as_user(&mut command);
            assert!(
                command.status().unwrap().success(),
                "{}: {kind} {id} still there",
                lab.who()
            );
        }
    }
}

#[test]
fn no_capabilities_no_devices_no_terminal() {
    for lab in Lab::both() {
        let caps = r#"/usr/bin/python3 -c '
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
class Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
class Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]
header = Header(0x20080522, 0)
data = (Data * 2)()
assert libc.capget(ctypes.byref(header), data) == 0
held = [d.effective | d.permitted | d.inheritable for d in data]
bounding = [c for c in range(64) if libc.prctl(23, c, 0, 0, 0) == 1]
ambient = [c for c in range(64) if libc.prctl(47, 1, c, 0, 0) == 1]
sys.exit(0 if held == [0, 0] and bounding == [] and ambient == [] else 1)
'"#;
        let tiocsti = r#"/usr/bin/python3 -c '
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
r = libc.ioctl(0, 0x5412, ctypes.c_char_p(b"x"))
sys.exit(0 if r == 0 or ctypes.get_errno() != 1 else 1)
'"#;
        let script = [
            format!("if {caps}; then echo 'held: no capabilities'; else echo 'THROUGH: capabilities'; fi\n"),
            attempt("mknod a terminal", r#"mknod "$HOME/tty" c 4 1"#),
            attempt("mknod in the grant", r#"mknod ./tty c 4 1"#),
            attempt("sethostname", "hostname evil"),
            attempt("chroot", "chroot / /bin/true"),
            attempt("read /etc/shadow", "cat /etc/shadow"),
            attempt("read /etc/gshadow", "cat /etc/gshadow"),
            attempt("open /dev/tty", "exec 3</dev/tty"),
            attempt("TIOCSTI", tiocsti),
            attempt("list /dev", "ls /dev/pts"),
            attempt("kernel log", "dmesg"),
            attempt("accounting", r#"/usr/bin/python3 -c 'import ctypes, sys; sys.exit(ctypes.CDLL(None).acct(b"/tmp/acct"))'"#),
        ]
        .concat();
        lab.all_held(&script, &[]);
        assert!(!lab.p("proj/tty").exists());
    }
}

#[test]
fn nothing_outside_the_grants_can_be_seen_and_nothing_read_only_changed() {
    for lab in Lab::both() {
        let readme = lab.p("docs/readme");
        let before = std::fs::metadata(&readme).unwrap();
        let outside = lab.p("outside");
        let inotify = r#"/usr/bin/python3 -c '
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
sys.exit(0 if fd >= 0 and libc.inotify_add_watch(fd, sys.argv[1].encode(), 0xfff) >= 0 else 1)
' "#;
        let script = [
            attempt("inotify outside", &format!(r#"{inotify} "$1""#)),
            attempt("stat outside", r#"stat "$1/secret""#),
            attempt("readlink outside", r#"readlink -e "$1/secret""#),
            attempt("list outside", r#"ls "$1""#),
            attempt("chmod read-only", r#"chmod 777 "$2""#),
            attempt("utime read-only", r#"touch -d 2001-01-01 "$2""#),
            attempt("xattr read-only", r#"/usr/bin/python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.x", b"1")' "$2""#),
            attempt("chmod system", "chmod 600 /etc/hostname"),
            attempt("utime system", "touch -d 2001-01-01 /etc/hostname"),
            attempt("write the root", "mkdir /planted"),
        ]
        .concat();
        lab.all_held(
            &script,
            &[outside.to_str().unwrap(), readme.to_str().unwrap()],
        );
        let after = std::fs::metadata(&readme).unwrap();
        assert_eq!(
            (after.mode(), after.mtime(), after.mtime_nsec()),
            (before.mode(), before.mtime(), before.mtime_nsec()),
            "{}",
            lab.who()
        );
        assert!(!Path::new("/planted").exists());
    }
}

#[test]
fn scratch_space_leaves_nothing_behind_even_when_the_gateway_dies() {
    let leftovers = || {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("safe-lanes-"))
            })
            .count()
    };
    let before = leftovers();
    for lab in Lab::both() {
        lab.direct();
        let script = r#"cd "$HOME" && for i in $(seq 300); do mkdir d && cd d || exit 1; done && touch "$1/deep" && sleep 60"#;
        let mut gateway = lab.spawn_exec(script);
        let deep = lab.p("proj/deep");
        assert!(appears(&deep), "{}: the tree was made", lab.who());
        gateway.kill().unwrap();
        gateway.wait().unwrap();
    }
    assert_eq!(
        leftovers(),
        before,
        "nothing left in the host's temporary directory"
    );
}

#[test]
fn without_user_namespaces_nothing_runs_and_the_reason_is_given() {
    for lab in Lab::both() {
        // Here, doctor lists every layer.
        let doctor = lab.cli(&["--json", "doctor"]).json();
        assert_eq!(doctor["sandbox"]["available"], true, "{doctor}");
        let layers = doctor["sandbox"]["layers"].as_array().unwrap();
        assert_eq!(layers.len(), 8, "{doctor}");
        for layer in [
            "overlays whose writes stay in the state root",
            "oom_score_adj",
            "private /tmp",
            "set-uid",
        ] {
            assert!(
                layers.iter().any(|l| l.as_str().unwrap().contains(layer)),
                "{layer}: {doctor}"
            );
        }
        // In a user namespace where no further user namespace may be made: nothing runs.
        let proj = lab.p("proj");
        let exec = lab.without_user_namespaces(&[
            "--json",
            "exec",
            "--",
            "/bin/sh",
            "-c",
            "echo ran > \"$1/ran\"",
            "sh",
            proj.to_str().unwrap(),
        ]);
        assert_eq!(exec.status, 3, "{}: {exec:?}", lab.who());
        assert_eq!(exec.code(), "sandbox_unavailable", "{}", lab.who());
        let message = exec.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains("user namespaces"), "{message}");
        assert!(
            !proj.join("ran").exists(),
            "{}: the command did not run",
            lab.who()
        );
        // And doctor says why.
        let doctor = lab.without_user_namespaces(&["--json", "doctor"]).json();
        assert_eq!(doctor["sandbox"]["available"], false, "{doctor}");
        assert!(
            doctor["sandbox"]["problem"]
                .as_str()
                .unwrap()
                .contains("user namespaces"),
            "{doctor}"
        );
    }
}

#[test]
fn a_set_a_killed_gateway_left_is_held_whole_by_the_next_command() {
    for lab in Lab::both() {
        let who = lab.who();
        let mut gateway = lab.spawn_exec(r#"touch started && echo x > .git-ish; sleep 60"#);
        let started = || lab.in_layer("started");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !started().exists() {
            assert!(std::time::Instant::now() < deadline, "{who}: it never ran");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(
            !lab.p("proj/started").exists(),
            "{who}: nothing in the folder yet"
        );
        gateway.kill().unwrap();
        gateway.wait().unwrap();
        // The next command finishes what the dead one left: held whole, never published.
        let out = lab.exec("true", &[]);
        assert_eq!(out["exit_code"], 0, "{who}: {out}");
        assert!(
            !lab.p("proj/started").exists(),
            "{who}: an interrupted set is not published"
        );
        let sets = lab.cli(&["--json", "changes"]).json();
        let sets = sets["sets"].as_array().unwrap();
        assert_eq!(sets.len(), 1, "{who}: {sets:?}");
        let whys: Vec<&str> = sets[0]["held"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["why"].as_str().unwrap())
            .collect();
        assert_eq!(whys, ["interrupted", "interrupted"], "{who}: {sets:?}");
        let records = safe_lanes_testkit::audit::records(&lab.p("state"));
        let count = |event: &str| records.iter().filter(|r| r["event"] == event).count();
        assert_eq!(count("exec.ended_unknown"), 1, "{who}");
        assert_eq!(count("change.held"), 1, "{who}");
        // The human applies it as shown.
        let id = sets[0]["id"].as_str().unwrap();
        let shown = lab.cli(&["--json", "changes", "show", id]).json();
        let digest = shown["digest"].as_str().unwrap();
        let applied = lab.cli(&[
            "changes",
            "apply",
            id,
            "--digest",
            digest,
            "--reason",
            "it was mine",
        ]);
        assert_eq!(applied.status, 0, "{who}: {applied:?}");
        assert!(
            lab.p("proj/started").exists() && lab.p("proj/.git-ish").exists(),
            "{who}"
        );
    }
}
