//! Confined commands under Landlock, through real programs. This kernel has Landlock: every
//! test first asserts that the required ruleset is fully enforced here.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use safe_lanes::confine::{landlock_support, sandbox_support};
use safe_lanes::{Access, Alias, Confined, ConfinedOutcome, Control, Grants, Limits, Session};

use crate::util::{Fixture, Granted, HEARTBEAT, grant_all, stops_writing};

fn alias(text: &str) -> Alias {
    Alias::new(text).unwrap()
}

struct World {
    fx: Fixture,
    grants: Arc<Grants>,
}

impl std::ops::Deref for World {
    type Target = Fixture;
    fn deref(&self) -> &Fixture {
        &self.fx
    }
}

impl World {
    fn new() -> Self {
        let support = landlock_support();
        assert!(
            support.fully_enforced && support.abi.is_some_and(|abi| abi >= 4),
            "this suite needs Landlock ABI 4+ fully enforced: {support:?}"
        );
        let fx = Fixture::new();
        fx.layout(
            &["ro", "rw", "live", "pending", "revoked", "outside"],
            &[
                ("ro/data.txt", "read me"),
                ("rw/data.txt", "change me"),
                ("pending/data.txt", "pending"),
                ("revoked/data.txt", "revoked"),
                ("outside/secret", "secret"),
            ],
        );
        std::os::unix::fs::symlink(fx.path("outside"), fx.path("rw/link-out")).unwrap();
        let grants = fx.grants();
        grant_all(
            &fx,
            &grants,
            &[
                ("ro", "ro", Granted::Live(Access::ReadOnly)),
                ("rw", "rw", Granted::Live(Access::ReadWrite)),
                ("live", "live", Granted::Live(Access::ReadWrite)),
                ("revoked", "revoked", Granted::Revoked),
                ("pending", "pending", Granted::Pending),
            ],
        );
        // Written directly: what a command writes there shows while it runs, which the tests
        // that watch a command's heartbeat from outside need.
        grants
            .set_direct("live", true, "watched while commands run", "tester")
            .unwrap();
        Self { fx, grants }
    }

    /// The `exec.end` record of the command whose `exec.start` was the last one, checked to be
    /// its only end.
    fn last_end(&self) -> serde_json::Value {
        let records = safe_lanes_testkit::audit::records(self.root.path());
        let start = records
            .iter()
            .rfind(|r| r["event"] == "exec.start")
            .expect("a start record");
        let ends: Vec<&serde_json::Value> = records
            .iter()
            .filter(|r| r["event"] == "exec.end" && r["id"] == start["id"])
            .collect();
        assert_eq!(ends.len(), 1, "one end for {start}");
        ends[0].clone()
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// Run `script` under `/bin/sh` with `args` as `$1…`.
    fn sh(&self, script: &str, args: &[&Path]) -> ConfinedOutcome {
        sh_in(&self.grants.session(), script, args)
    }

    fn ok(&self, script: &str, args: &[&Path]) -> String {
        let out = self.sh(script, args);
        assert_eq!(
            out.outcome.exit_code,
            Some(0),
            "`{script}` {args:?} should succeed: {out:?}"
        );
        out.outcome.stdout
    }

    fn denied(&self, script: &str, args: &[&Path]) {
        let out = self.sh(script, args);
        assert_ne!(
            out.outcome.exit_code,
            Some(0),
            "`{script}` {args:?} should fail: {out:?}"
        );
        assert!(out.outcome.stopped.is_none() && !out.outcome.timed_out);
    }
}

/// Run `script` under `/bin/sh` in `session`, with `args` as `$1…`.
fn sh_in(session: &Session, script: &str, args: &[&Path]) -> ConfinedOutcome {
    let mut argv: Vec<std::ffi::OsString> = vec!["-c".into(), script.into(), "sh".into()];
    argv.extend(args.iter().map(|a| a.as_os_str().to_owned()));
    Confined::new("/bin/sh", argv).run(session).unwrap()
}

#[test]
fn every_layer_of_the_sandbox_is_available_on_this_kernel() {
    let support = sandbox_support();
    assert!(support.available, "{support:?}");
    assert_eq!(support.problem, None);
    let layers = support.layers.join("; ");
    for layer in [
        "namespaces",
        "system set and the grants only",
        "no capabilities",
        "Landlock ABI",
        "seccomp",
    ] {
        assert!(layers.contains(layer), "{layer} in {layers}");
    }
}

#[test]
fn a_read_only_grant_is_readable_and_nothing_in_it_can_change() {
    let w = World::new();
    let ro = w.p("ro");
    assert_eq!(w.ok(r#"cat "$1/data.txt""#, &[&ro]), "read me");
    assert_eq!(
        w.ok(r#"cat "$WORKFLOW_FOLDER_RO/data.txt""#, &[]),
        "read me"
    );
    assert_eq!(w.ok(r#"ls "$1""#, &[&ro]), "data.txt\n");
    for script in [
        r#"echo x > "$1/data.txt""#,
        r#"echo x >> "$1/data.txt""#,
        r#"truncate -s 0 "$1/data.txt""#,
        r#"echo x > "$1/new.txt""#,
        r#"mkdir "$1/sub""#,
        r#"rm -f "$1/data.txt""#,
        r#"mv "$1/data.txt" "$1/renamed.txt""#,
        r#"echo x > "$HOME/f" && mv "$HOME/f" "$1/moved-in""#,
        r#"ln -s /etc/passwd "$1/link""#,
    ] {
        w.denied(script, &[&ro]);
    }
    assert_eq!(
        std::fs::read_to_string(w.p("ro/data.txt")).unwrap(),
        "read me"
    );
    let names: Vec<_> = std::fs::read_dir(&ro)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["data.txt"]);
}

#[test]
fn a_read_write_grant_allows_every_change() {
    let w = World::new();
    let rw = w.p("rw");
    w.ok(
        r#"echo one > "$1/data.txt" && echo two >> "$1/data.txt""#,
        &[&rw],
    );
    assert_eq!(
        std::fs::read_to_string(w.p("rw/data.txt")).unwrap(),
        "one\ntwo\n"
    );
    w.ok(r#"truncate -s 0 "$1/data.txt""#, &[&rw]);
    assert_eq!(std::fs::read_to_string(w.p("rw/data.txt")).unwrap(), "");
    w.ok(
        r#"echo x > "$HOME/f" && mv "$HOME/f" "$1/moved-in""#,
        &[&rw],
    );
    w.ok(
        r#"mkdir "$1/sub" && mv "$1/moved-in" "$1/sub/renamed" && rm "$1/data.txt""#,
        &[&rw],
    );
    assert!(w.p("rw/sub/renamed").exists());
    assert!(!w.p("rw/data.txt").exists());
    w.ok(r#"rm -r "$1/sub""#, &[&rw]);
    assert!(!w.p("rw/sub").exists());
}

#[test]
fn everything_else_is_neither_readable_nor_writable() {
    let w = World::new();
    let home = PathBuf::from(std::env::var_os("HOME").expect("HOME is set"));
    let state = w.root.path().to_path_buf();
    let manifest = w.root.default_manifest();
    // The host's temporary directory is not the command's `/tmp`.
    let host_tmp = tempfile::Builder::new()
        .prefix("host-only")
        .tempdir_in(std::env::temp_dir())
        .unwrap();
    for dir in [
        w.p("pending"),
        w.p("revoked"),
        w.p("outside"),
        home,
        host_tmp.path().to_path_buf(),
        "/root".into(),
        state,
    ] {
        w.denied(r#"ls "$1""#, &[&dir]);
        w.denied(r#"echo x > "$1/planted""#, &[&dir]);
        assert!(!dir.join("planted").exists(), "{}", dir.display());
    }
    for file in [
        w.p("pending/data.txt"),
        w.p("revoked/data.txt"),
        manifest,
        w.root.path().join("audit.jsonl"),
    ] {
        w.denied(r#"cat "$1""#, &[&file]);
        w.denied(r#"echo x >> "$1""#, &[&file]);
    }
    // A symbolic link inside a read-write grant that leads outside gives no access.
    w.denied(r#"cat "$1/link-out/secret""#, &[&w.p("rw")]);
    w.denied(r#"echo x > "$1/link-out/planted""#, &[&w.p("rw")]);
    assert!(!w.p("outside/planted").exists());
    // The system set is there to run programs, read-only.
    w.ok(
        "cat /etc/hostname >/dev/null && ls /usr/bin >/dev/null",
        &[],
    );
    w.denied("echo x > /etc/planted", &[]);
    w.denied("echo x > /usr/planted", &[]);
}

#[test]
fn the_environment_is_clean_and_names_the_grants() {
    let w = World::new();
    let env = w.ok("env", &[]);
    let keys: std::collections::BTreeSet<&str> = env
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k)
        .collect();
    for key in [
        "PATH",
        "LANG",
        "HOME",
        "TMPDIR",
        "WORKFLOW_FOLDER_RO",
        "WORKFLOW_FOLDER_RW",
    ] {
        assert!(keys.contains(key), "{key} in {keys:?}");
    }
    assert!(!keys.contains("WORKFLOW_FOLDER_REVOKED") && !keys.contains("WORKFLOW_FOLDER_PENDING"));
    // The test harness runs with CARGO_* and RUST_* variables: none may leak.
    assert!(
        keys.iter()
            .all(|k| !k.starts_with("CARGO") && !k.starts_with("RUST")),
        "{keys:?}"
    );
    let allowed = [
        "PATH", "LANG", "HOME", "TMPDIR", "PWD", "OLDPWD", "SHLVL", "_",
    ];
    assert!(
        keys.iter()
            .all(|k| allowed.contains(k) || k.starts_with("WORKFLOW_FOLDER_")),
        "{keys:?}"
    );
    assert!(env.contains(&format!("WORKFLOW_FOLDER_RO={}", w.p("ro").display())));
    // HOME is the sandbox's private `/tmp`, writable, and not the host's.
    let marker = format!("marker-{}", std::process::id());
    let home = w.ok(
        &format!(
            r#"echo x > "$HOME/{marker}" && cat "$HOME/{marker}" >/dev/null && printf %s "$HOME""#
        ),
        &[],
    );
    assert_eq!(home, "/tmp");
    assert!(
        !Path::new(&home).join(&marker).exists(),
        "the scratch is private"
    );
}

#[test]
fn no_new_privileges_and_only_three_descriptors() {
    let w = World::new();
    // Leave a descriptor without close-on-exec open in this process: it must not leak.
    let leaky = rustix::fs::open(
        "/etc/hostname",
        rustix::fs::OFlags::RDONLY,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    // prctl(PR_GET_NO_NEW_PRIVS) from inside (/proc is not part of the sandbox).
    let nnp = w.ok(
        "/usr/bin/python3 -c 'import ctypes; print(ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))'",
        &[],
    );
    assert_eq!(nnp.trim(), "1");
    let open_fds = w.ok(
        "/usr/bin/python3 -c 'import os\nfds = []\nfor fd in range(1024):\n    try:\n        os.fstat(fd); fds.append(fd)\n    except OSError: pass\nprint(fds)'",
        &[],
    );
    assert_eq!(open_fds.trim(), "[0, 1, 2]", "descriptors {open_fds}");
    w.denied("ls /proc/self/", &[]);
    drop(leaky);
}

#[test]
fn unix_sockets_udp_and_the_gateway_are_out_of_reach() {
    let w = World::new();
    // A listening UNIX socket outside every grant, and one inside the read-write grant.
    let outside = std::os::unix::net::UnixListener::bind(w.p("outside/agent.sock")).unwrap();
    let inside = std::os::unix::net::UnixListener::bind(w.p("rw/inside.sock")).unwrap();
    let connect = "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\nprint('connected')";
    for sock in [w.p("outside/agent.sock"), w.p("rw/inside.sock")] {
        let out = Confined::new("/usr/bin/python3", ["-c", connect, sock.to_str().unwrap()])
            .network(true)
            .run(&w.grants.session())
            .unwrap();
        assert_ne!(out.outcome.exit_code, Some(0), "{out:?}");
        assert!(out.outcome.stderr.contains("PermissionError"), "{out:?}");
    }
    drop((outside, inside));
    let udp = "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', 9))";
    let out = Confined::new("/usr/bin/python3", ["-c", udp])
        .run(&w.grants.session())
        .unwrap();
    assert!(out.outcome.stderr.contains("PermissionError"), "{out:?}");
    // A datagram socketpair could still send to a socket by path: refused.
    let dgram = std::os::unix::net::UnixDatagram::bind(w.p("outside/log.sock")).unwrap();
    let send = "import socket, sys\na, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\na.sendto(b'x', sys.argv[1])";
    let out = Confined::new(
        "/usr/bin/python3",
        ["-c", send, w.p("outside/log.sock").to_str().unwrap()],
    )
    .run(&w.grants.session())
    .unwrap();
    assert!(out.outcome.stderr.contains("PermissionError"), "{out:?}");
    dgram.set_nonblocking(true).unwrap();
    assert!(dgram.recv(&mut [0u8; 8]).is_err(), "nothing arrived");
    // A stream socketpair only talks to itself: allowed.
    w.ok("/usr/bin/python3 -c 'import socket; a, b = socket.socketpair(); a.send(b\"x\"); print(b.recv(1))'", &[]);
    // The gateway (here, this test process) is not even visible: no PID outside the
    // command's namespace can be signalled.
    let gateway = std::process::id().to_string();
    w.denied(&format!("kill -0 {gateway}"), &[]);
    w.ok("sleep 5 & kill $! && echo own children are fine", &[]);
    // clone(CLONE_PARENT) would hang children on the gateway.
    let clone_parent = "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nr = libc.syscall(56, 0x8000 | 17, 0, 0, 0, 0)\nif r == 0:\n    os._exit(0)\nprint(r, ctypes.get_errno())";
    assert_eq!(
        w.ok(&format!("/usr/bin/python3 -c '{clone_parent}'"), &[])
            .trim(),
        "-1 1"
    );
    // No nested namespaces.
    w.denied("/usr/bin/unshare --user --map-root-user true", &[]);
}

#[test]
fn threads_and_child_processes_still_work_under_the_filter() {
    let w = World::new();
    // clone3 is refused with ENOSYS so that the C library falls back to clone.
    let threads = w.ok(
        "/usr/bin/python3 -c 'import threading; t = threading.Thread(target=print, args=(\"thread\",)); t.start(); t.join()'",
        &[],
    );
    assert_eq!(threads, "thread\n");
    assert_eq!(w.ok("echo $(echo nested) | cat", &[]), "nested\n");
}

#[test]
fn a_grandchild_in_a_new_session_dies_with_the_command() {
    let w = World::new();
    let rw = w.p("live");
    // `setsid` is allowed now: leaving the session or group no longer escapes anything, since
    // the whole PID namespace ends with the command.
    let script = format!(
        r#"setsid sh -c '{HEARTBEAT}' sh "$1" & while [ ! -e "$1/beat" ]; do sleep 0.01; done; echo started"#
    );
    let out = w.sh(&script, &[&rw]);
    assert_eq!(out.outcome.stdout, "started\n", "{out:?}");
    assert!(
        stops_writing(&w.p("live/beat")),
        "the grandchild kept writing"
    );
}

#[test]
fn tcp_is_denied_unless_network_is_asked_for() {
    let w = World::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let connect = "use IO::Socket::INET; IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $ARGV[0], Proto => 'tcp') or die \"connect: $!\"; print 'connected'";
    let session = w.grants.session();
    let denied = Confined::new("/usr/bin/perl", ["-e", connect, &port])
        .run(&session)
        .unwrap();
    assert_ne!(denied.outcome.exit_code, Some(0), "{denied:?}");
    assert!(denied.outcome.stderr.contains("connect"), "{denied:?}");
    let allowed = Confined::new("/usr/bin/perl", ["-e", connect, &port])
        .network(true)
        .run(&session)
        .unwrap();
    assert_eq!(allowed.outcome.stdout, "connected", "{allowed:?}");
}

#[test]
fn the_timeout_kills_everything_the_command_started() {
    let w = World::new();
    let rw = w.p("live");
    let started = Instant::now();
    let script = format!(r#"sh -c '{HEARTBEAT}' sh "$1" & sleep 60"#);
    let out = Confined::new("/bin/sh", ["-c", &script, "sh", rw.to_str().unwrap()])
        .limits(Limits {
            timeout: Duration::from_millis(500),
            max_output: 1024,
        })
        .run(&w.grants.session())
        .unwrap();
    assert!(out.outcome.timed_out, "{out:?}");
    assert_eq!(
        w.last_end()["timed_out"],
        true,
        "the timeout is on the record"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(w.p("live/beat").exists(), "the background child ran");
    assert!(
        stops_writing(&w.p("live/beat")),
        "the background child was killed too"
    );
}

#[test]
fn the_scratch_directory_never_reaches_the_host_disk() {
    let w = World::new();
    let scratch_dirs = || {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("safe-lanes-"))
            })
            .count()
    };
    let before = scratch_dirs();
    // 300 levels (deeper than a recursive removal would go), parts locked with chmod.
    let out = w.ok(
        r#"cd "$HOME" && for i in $(seq 300); do mkdir d && cd d || exit 1; done && touch f && chmod 000 . && cd "$HOME" && chmod 500 d && echo deep"#,
        &[],
    );
    assert_eq!(out, "deep\n");
    assert_eq!(
        scratch_dirs(),
        before,
        "nothing was left in the host's temporary directory"
    );
}

#[test]
fn output_is_capped() {
    let w = World::new();
    let out = Confined::shell("head -c 100000 /dev/zero")
        .limits(Limits {
            timeout: Duration::from_secs(30),
            max_output: 1000,
        })
        .run(&w.grants.session())
        .unwrap();
    assert_eq!(out.outcome.stdout.len(), 1000);
    assert!(out.outcome.truncated);
}

#[test]
fn the_working_directory_can_be_a_grant() {
    let w = World::new();
    let out = Confined::shell("pwd && cat data.txt")
        .cwd(alias("ro"))
        .run(&w.grants.session())
        .unwrap();
    assert_eq!(
        out.outcome.stdout,
        format!("{}\nread me", w.p("ro").display())
    );
    let err = Confined::shell("pwd")
        .cwd(alias("revoked"))
        .run(&w.grants.session())
        .unwrap_err();
    assert_eq!(err.code(), safe_lanes::Code::Revoked);
    let err = Confined::shell("pwd")
        .cwd(alias("pending"))
        .run(&w.grants.session())
        .unwrap_err();
    assert_eq!(err.code(), safe_lanes::Code::UnknownAlias);
}

#[test]
fn revoking_a_grant_stops_a_running_command_that_writes_into_it() {
    let w = World::new();
    let log = w.p("live/log");
    let session = w.grants.session();
    let revoked_at = std::thread::scope(|s| {
        let runner = s.spawn(|| {
            Confined::new(
                "/bin/sh",
                [
                    "-c",
                    r#"while true; do echo x >> "$1"; sleep 0.05; done"#,
                    "sh",
                    log.to_str().unwrap(),
                ],
            )
            .limits(Limits {
                timeout: Duration::from_secs(60),
                max_output: 1024,
            })
            .run(&session)
            .unwrap()
        });
        // Wait until it writes, then revoke through another handle (as the CLI would).
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0) < 4 {
            assert!(Instant::now() < deadline, "the loop never wrote");
            std::thread::sleep(Duration::from_millis(20));
        }
        Grants::open(&w.root, None)
            .unwrap()
            .revoke("live", "stop now", "alice")
            .unwrap();
        let revoked_at = Instant::now();
        let out = runner.join().unwrap();
        assert!(
            out.outcome
                .stopped
                .as_deref()
                .unwrap_or("")
                .contains("revoked"),
            "{out:?}"
        );
        assert!(!out.outcome.timed_out);
        let end = w.last_end();
        assert!(
            end["stopped"].as_str().unwrap_or("").contains("revoked"),
            "the revoke is on the record: {end}"
        );
        revoked_at
    });
    assert!(revoked_at.elapsed() < Duration::from_secs(20));
    let size = std::fs::metadata(&log).unwrap().len();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        std::fs::metadata(&log).unwrap().len(),
        size,
        "nothing writes after the revoke"
    );
}

#[test]
fn a_command_started_after_a_revoke_does_not_get_the_folder_though_one_just_had_it() {
    let w = World::new();
    let session = w.grants.session();
    let rw = w.p("rw");
    let script = r#"echo "env=${WORKFLOW_FOLDER_RW:-}"; ls "$1" && echo listed"#;
    // Twice, so that the second command reuses what the first one's sandbox was built from.
    for _ in 0..2 {
        let out = sh_in(&session, script, &[&rw]);
        assert!(out.outcome.stdout.contains("listed"), "{out:?}");
        assert!(
            out.grants.iter().any(|(a, _)| a.as_str() == "rw"),
            "{out:?}"
        );
    }
    Grants::open(&w.root, None)
        .unwrap()
        .revoke("rw", "no more", "alice")
        .unwrap();
    let out = sh_in(&session, script, &[&rw]);
    assert_ne!(out.outcome.exit_code, Some(0), "{out:?}");
    assert!(!out.outcome.stdout.contains("listed"), "{out:?}");
    assert!(out.outcome.stdout.contains("env=\n"), "{out:?}");
    assert!(
        out.grants.iter().all(|(a, _)| a.as_str() != "rw"),
        "{out:?}"
    );
    // The other grant is still there.
    let ro = w.p("ro");
    assert!(
        sh_in(&session, script, &[&ro])
            .outcome
            .stdout
            .contains("listed")
    );
}

#[test]
fn narrowing_a_grant_stops_a_running_command() {
    let w = World::new();
    let session = w.grants.session();
    std::thread::scope(|s| {
        let runner = s.spawn(|| {
            Confined::shell("sleep 30")
                .limits(Limits {
                    timeout: Duration::from_secs(60),
                    max_output: 1024,
                })
                .run(&session)
                .unwrap()
        });
        std::thread::sleep(Duration::from_millis(300));
        w.grants
            .set_access("rw", Access::ReadOnly, "narrow", "alice")
            .unwrap();
        let out = runner.join().unwrap();
        assert!(
            out.outcome
                .stopped
                .as_deref()
                .unwrap_or("")
                .contains("narrowed"),
            "{out:?}"
        );
    });
}

/// A caller that gives up (a cancelled call, a stopped job) stops the command and everything
/// it started, and reads its output while it runs.
#[test]
fn a_control_shows_output_as_it_comes_and_stops_the_whole_command() {
    let w = World::new();
    let rw = w.p("live");
    let control = Control::new();
    let out = std::thread::scope(|s| {
        let runner = s.spawn(|| {
            let script =
                format!(r#"echo started; ( {HEARTBEAT} ) & sleep 30; echo late > "$1/late""#);
            Confined::new(
                "/bin/sh",
                ["-c", script.as_str(), "sh", rw.to_str().unwrap()],
            )
            .limits(Limits {
                timeout: Duration::from_secs(60),
                max_output: 1024,
            })
            .run_with(&w.grants.session(), &control)
            .unwrap()
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = String::new();
        let mut mark = safe_lanes::control::Mark::default();
        while !(seen.contains("started") && rw.join("beat").exists()) {
            assert!(Instant::now() < deadline, "no output: {seen:?}");
            let (new, next) = control.output_since(mark);
            seen.push_str(&new.stdout);
            mark = next;
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(seen, "started\n", "the output so far, once");
        control.stop("cancelled by the client");
        runner.join().unwrap()
    });
    assert_eq!(
        out.outcome.stopped.as_deref(),
        Some("cancelled by the client")
    );
    assert!(!out.outcome.timed_out);
    assert_eq!(out.outcome.stdout, "started\n");
    assert!(
        stops_writing(&rw.join("beat")),
        "the background loop died too"
    );
    assert!(!rw.join("late").exists(), "nothing ran after the stop");
}

/// A reader following a command's output is woken by the command's end, whether the command
/// ran or was refused before it started: it never has to look again to learn of it.
#[test]
fn the_end_of_a_command_wakes_whoever_follows_its_output() {
    use safe_lanes::control::{Mark, Waited};
    let w = World::new();
    let session = w.grants.session();
    let follow = |confined: Confined| {
        let control = Control::new();
        std::thread::scope(|s| {
            let runner = s.spawn(|| confined.run_with(&session, &control));
            let mut mark = Mark::default();
            let mut seen = String::new();
            loop {
                // Far longer than the command takes: only a missing wake-up reaches it.
                match control.wait_output(mark, Duration::from_secs(120)) {
                    Waited::New => {
                        let (new, next) = control.output_since(mark);
                        seen.push_str(&new.stdout);
                        mark = next;
                    }
                    Waited::Ended => break,
                    Waited::TimedOut => panic!("the command's end woke nobody: {seen:?}"),
                }
            }
            (seen, runner.join().unwrap())
        })
    };
    let (seen, ran) = follow(Confined::new("/bin/sh", ["-c", "echo one; echo two"]));
    assert_eq!(seen, "one\ntwo\n");
    assert!(ran.unwrap().outcome.success());
    let (seen, refused) = follow(Confined::new("/bin/true", [] as [&str; 0]).cwd(alias("nope")));
    assert_eq!(seen, "");
    assert!(refused.is_err());
}

/// Background jobs (the agent's desk holds them): output is reported once, as it comes; a
/// finished job is reported one last time and forgotten; the number is bounded; a stop kills
/// the whole command; a refusal comes at start; dropping the desk stops what still runs.
#[test]
fn background_jobs_report_new_output_and_are_bounded_and_stopped() {
    use safe_lanes::desk::{JobStatus, ShellRequest};
    use safe_lanes::{AgentDesk, DeskOptions};
    let w = World::new();
    let rw = w.p("live");
    let mut options = DeskOptions::default();
    options.max_jobs = 2;
    let root = safe_lanes::StateRoot::open(w.root.path()).unwrap();
    let desk = AgentDesk::open(root, options).unwrap();
    let shell = |command: &str, cwd: Option<&str>| ShellRequest {
        command: command.to_owned(),
        cwd: cwd.map(str::to_owned),
        timeout: Duration::from_secs(60),
    };
    let short = desk
        .shell_background(&shell("echo one; sleep 0.3; echo two", None))
        .unwrap();
    let id = short.job_id.clone().unwrap();
    let mut seen = short.stdout.clone();
    let last = loop {
        let report = desk.job_status(&id, Duration::from_secs(5)).unwrap();
        seen.push_str(&report.stdout);
        if report.status == JobStatus::Finished {
            break report;
        }
    };
    assert_eq!(seen, "one\ntwo\n", "each line reported exactly once");
    assert_eq!(last.exit_code, Some(0));
    let gone = desk.job_status(&id, Duration::ZERO).unwrap_err();
    assert_eq!(
        gone.code(),
        safe_lanes::Code::NotFound,
        "forgotten once reported"
    );

    let long = |dir: &str| {
        let beat = HEARTBEAT.replace("$1", &format!("$WORKFLOW_FOLDER_LIVE/{dir}"));
        shell(
            &format!(r#"( {beat} ) & sleep 30; echo late > "$WORKFLOW_FOLDER_LIVE/{dir}/late""#),
            None,
        )
    };
    std::fs::create_dir(rw.join("one")).unwrap();
    let two = rw.join("two");
    std::fs::create_dir(&two).unwrap();
    let first = desk.shell_background(&long("one")).unwrap();
    desk.shell_background(&long("two")).unwrap();
    let third = desk.shell_background(&shell("true", None)).unwrap_err();
    assert_eq!(third.code(), safe_lanes::Code::TooManyJobs);
    let refused = desk
        .shell_background(&shell("true", Some("revoked")))
        .unwrap_err();
    assert_eq!(
        refused.code(),
        safe_lanes::Code::TooManyJobs,
        "the bound comes first"
    );

    let deadline = Instant::now() + Duration::from_secs(20);
    while !rw.join("one/beat").exists() {
        assert!(Instant::now() < deadline, "the job never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    let stopped = desk.job_stop(first.job_id.as_deref().unwrap()).unwrap();
    assert_eq!(
        stopped.status,
        JobStatus::Finished,
        "a stopped job has ended"
    );
    assert_eq!(stopped.stopped.as_deref(), Some("stopped by the agent"));
    assert!(
        stops_writing(&rw.join("one/beat")),
        "the job's background loop died too"
    );
    assert!(!rw.join("one/late").exists());

    let refused = desk
        .shell_background(&shell("true", Some("revoked")))
        .unwrap_err();
    assert_eq!(
        refused.code(),
        safe_lanes::Code::Revoked,
        "refused at start"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !two.join("beat").exists() {
        assert!(Instant::now() < deadline, "the second job never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(desk);
    assert!(
        stops_writing(&two.join("beat")),
        "dropping the desk stopped the job"
    );
}

/// A child session narrowed to read-only on a read-write grant runs under a sandbox that
/// cannot write there, while its parent, in the same manifest, still can.
#[test]
fn a_child_narrowed_to_read_only_cannot_write_where_its_parent_can() {
    let w = World::new();
    let parent = w.grants.session();
    let child = parent.child("rw:read_only,ro".parse().unwrap());
    let rw = w.p("rw");
    for script in [
        r#"echo child > "$1/data.txt""#,
        r#"echo child >> "$1/data.txt""#,
        r#"echo child > "$1/new.txt""#,
        r#"rm -f "$1/data.txt""#,
        r#"mkdir "$1/sub""#,
    ] {
        let out = sh_in(&child, script, &[&rw]);
        assert_ne!(out.outcome.exit_code, Some(0), "`{script}`: {out:?}");
        assert!(out.outcome.stopped.is_none() && !out.outcome.timed_out);
        assert_eq!(
            std::fs::read_to_string(w.p("rw/data.txt")).unwrap(),
            "change me"
        );
    }
    assert!(!w.p("rw/new.txt").exists() && !w.p("rw/sub").exists());
    let out = sh_in(&child, r#"cat "$WORKFLOW_FOLDER_RW/data.txt""#, &[]);
    assert_eq!(out.outcome.stdout, "change me", "{out:?}");
    assert_eq!(
        out.grants,
        [
            (alias("ro"), Access::ReadOnly),
            (alias("rw"), Access::ReadOnly)
        ]
    );
    let out = sh_in(&parent, r#"echo parent > "$1/data.txt""#, &[&rw]);
    assert_eq!(out.outcome.exit_code, Some(0), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(w.p("rw/data.txt")).unwrap(),
        "parent\n"
    );
}

/// A grant left out of a child's narrowing is not in its command's environment and its folder
/// cannot be read, though the parent reads it.
#[test]
fn a_child_without_a_grant_cannot_see_it() {
    let w = World::new();
    let parent = w.grants.session();
    let child = parent.child("ro".parse().unwrap());
    let rw = w.p("rw");
    let env = r#"env | grep '^WORKFLOW_FOLDER_' | cut -d= -f1 | sort"#;
    assert_eq!(
        sh_in(&parent, env, &[]).outcome.stdout,
        "WORKFLOW_FOLDER_LIVE\nWORKFLOW_FOLDER_RO\nWORKFLOW_FOLDER_RW\n"
    );
    assert_eq!(
        sh_in(&child, env, &[]).outcome.stdout,
        "WORKFLOW_FOLDER_RO\n"
    );
    let out = sh_in(&child, r#"test -z "${WORKFLOW_FOLDER_RW+set}""#, &[]);
    assert_eq!(out.outcome.exit_code, Some(0), "{out:?}");
    for script in [
        r#"cat "$1/data.txt""#,
        r#"ls "$1""#,
        r#"test -r "$1/data.txt""#,
    ] {
        let out = sh_in(&child, script, &[&rw]);
        assert_ne!(out.outcome.exit_code, Some(0), "`{script}`: {out:?}");
        assert!(!out.outcome.stdout.contains("change me"), "{out:?}");
        let out = sh_in(&parent, script, &[&rw]);
        assert_eq!(out.outcome.exit_code, Some(0), "parent `{script}`: {out:?}");
    }
    let out = sh_in(&child, r#"cat "$WORKFLOW_FOLDER_RO/data.txt""#, &[]);
    assert_eq!(out.outcome.stdout, "read me", "{out:?}");
}

/// The human's revoke or narrowing of a grant, through another handle, stops a child
/// session's running command that uses it, as it stops its parent's.
#[test]
fn the_humans_change_to_a_parent_grant_stops_a_childs_running_command() {
    type Change = fn(&Grants) -> safe_lanes::Result<()>;
    let revoke: Change = |g| g.revoke("live", "stop now", "alice").map(|_| ());
    let narrow: Change = |g| {
        g.set_access("live", Access::ReadOnly, "narrow", "alice")
            .map(|_| ())
    };
    for (change, word) in [(revoke, "revoked"), (narrow, "narrowed")] {
        let w = World::new();
        let rw = w.p("live");
        let child = w
            .grants
            .session()
            .child("live,ro:read_only".parse().unwrap());
        std::thread::scope(|s| {
            let runner = s.spawn(|| {
                Confined::new("/bin/sh", ["-c", HEARTBEAT, "sh", rw.to_str().unwrap()])
                    .limits(Limits {
                        timeout: Duration::from_secs(60),
                        max_output: 1024,
                    })
                    .run(&child)
                    .unwrap()
            });
            let deadline = Instant::now() + Duration::from_secs(20);
            while !rw.join("beat").exists() {
                assert!(Instant::now() < deadline, "the child never wrote");
                std::thread::sleep(Duration::from_millis(20));
            }
            change(&Grants::open(&w.root, None).unwrap()).unwrap();
            let out = runner.join().unwrap();
            let stopped = out.outcome.stopped.as_deref().unwrap_or("");
            assert!(stopped.contains(word), "{word}: {out:?}");
            assert!(!out.outcome.timed_out);
        });
        assert!(
            stops_writing(&rw.join("beat")),
            "{word}: the child still writes"
        );
    }
}

/// A tool's credentials are covered per command, not per layout: a file that appears after
/// commands ran (a `cargo login` while the gateway is up) is covered in the next one, in the
/// same session (whose root layout is kept), and one removed is simply not there. A cache or
/// a folder shows its files as they are.
#[test]
fn a_tools_credentials_are_empty_in_every_command_even_when_they_appear_later() {
    use safe_lanes::grants::{HIDDEN_IN_TOOLS, Kind, Toolchain};
    let w = World::new();
    let tool = w.p("tool");
    std::fs::create_dir(&tool).unwrap();
    std::fs::write(w.p("rw/credentials.toml"), "FOLDER FILE").unwrap();
    let as_tool = Toolchain::parse(Kind::Tool, &[], None).unwrap();
    w.grants
        .add_with("tool", &tool, None, as_tool, "a reason", "tester")
        .unwrap();
    let session = w.grants.session();
    let read = |name: &str| {
        let out = sh_in(
            &session,
            r#"cat "$1" 2>&1; echo "[$?]""#,
            &[&tool.join(name)],
        );
        out.outcome.stdout
    };
    assert!(
        read("credentials.toml").contains("No such file"),
        "none yet"
    );
    for (i, name) in HIDDEN_IN_TOOLS.iter().enumerate() {
        std::fs::write(tool.join(name), format!("SECRET {i}")).unwrap();
        assert_eq!(read(name), "[0]\n", "{name} is there, empty");
    }
    std::fs::write(tool.join("config.toml"), "not a secret").unwrap();
    assert_eq!(read("config.toml"), "not a secret[0]\n");
    std::fs::remove_file(tool.join("credentials")).unwrap();
    assert!(read("credentials").contains("No such file"));
    let folder = sh_in(&session, r#"cat "$1""#, &[&w.p("rw/credentials.toml")]);
    assert_eq!(folder.outcome.stdout, "FOLDER FILE");
}

#[test]
fn a_fork_bomb_is_bounded() {
    let w = World::new();
    let script = r#"i=0; while [ $i -lt 2000 ]; do sleep 5 & [ $? -eq 0 ] || break; i=$((i+1)); done
        echo "started $i""#;
    let out = Confined::shell(script)
        .limits(Limits {
            timeout: Duration::from_secs(30),
            ..Limits::default()
        })
        .run(&w.grants.session())
        .unwrap();
    // The shell stops at the first fork the limit refuses (`dash` gives up: "Cannot fork").
    assert!(!out.outcome.stdout.contains("started 2000"), "{out:?}");
    assert!(out.outcome.stderr.contains("Cannot fork"), "{out:?}");
    assert!(!out.outcome.timed_out, "{out:?}");
    // The next command runs as usual.
    assert_eq!(w.ok("echo next", &[]), "next\n");
}

#[test]
fn a_cache_is_an_overlay_whose_writes_stay_in_the_state_root() {
    use safe_lanes::grants::{Kind, Toolchain};
    let w = World::new();
    let cache = w.p("cache");
    std::fs::create_dir(&cache).unwrap();
    std::fs::write(cache.join("crate.rs"), "fn original() {}").unwrap();
    let as_cache = Toolchain::parse(Kind::Cache, &["CACHE_HOME".into()], None).unwrap();
    w.grants
        .add_with("cache", &cache, None, as_cache, "a reason", "tester")
        .unwrap();
    let script = r#"cat "$CACHE_HOME/crate.rs"; echo 'fn planted() {}' > "$CACHE_HOME/crate.rs" &&
        echo new > "$CACHE_HOME/new" && rm "$CACHE_HOME/crate.rs" && echo again > "$CACHE_HOME/crate.rs" && echo wrote"#;
    let out = w.ok(script, &[]);
    assert!(out.starts_with("fn original() {}"), "{out}");
    assert!(out.contains("wrote"), "{out}");
    // The human's folder is as it was; the next command sees what the last one wrote.
    assert_eq!(
        std::fs::read_to_string(cache.join("crate.rs")).unwrap(),
        "fn original() {}"
    );
    assert!(!cache.join("new").exists());
    assert_eq!(
        w.ok(r#"cat "$CACHE_HOME/crate.rs" "$CACHE_HOME/new""#, &[]),
        "again\nnew\n"
    );
    let mut listing = w.grants.list().unwrap();
    w.grants.measure_caches(&mut listing).unwrap();
    let layer = listing
        .grants
        .iter()
        .find(|g| g.grant.alias.as_str() == "cache")
        .unwrap();
    assert!(
        layer.private_layer.is_some_and(|l| l.bytes > 0),
        "{layer:?}"
    );
    // Emptied: the folder's own content shows again.
    let cleared = w
        .grants
        .clear_cache("cache", "start afresh", "tester")
        .unwrap();
    assert!(cleared.cleared);
    assert_eq!(
        w.ok(r#"cat "$CACHE_HOME/crate.rs""#, &[]),
        "fn original() {}"
    );
    let not_a_cache = w
        .grants
        .clear_cache("rw", "a reason", "tester")
        .unwrap_err();
    assert_eq!(not_a_cache.code(), safe_lanes::Code::InvalidArgument);
    // A cache granted again under the alias starts from an empty layer.
    w.ok(r#"echo mine > "$CACHE_HOME/crate.rs""#, &[]);
    w.grants.revoke("cache", "a reason", "tester").unwrap();
    let as_cache = Toolchain::parse(Kind::Cache, &["CACHE_HOME".into()], None).unwrap();
    w.grants
        .add_with("cache", &cache, None, as_cache, "a reason", "tester")
        .unwrap();
    assert_eq!(
        w.ok(r#"cat "$CACHE_HOME/crate.rs""#, &[]),
        "fn original() {}"
    );
}
