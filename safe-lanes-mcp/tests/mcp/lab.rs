//! One user's world for the hostile runs, through the real server: run twice, as the user
//! running the tests (root in CI) and as an ordinary user (uid 65534). The human's part is
//! played by the real CLI and by the human's own programs, run unconfined as that user.
//!
//! When the tests do not run as root they cannot switch users; the second run is then made
//! as the same (already unprivileged) user.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::transport::TokioChildProcess;
use serde_json::{Map, Value, json};

use safe_lanes_testkit::users::{self, UserDir, give_tree};

use crate::util::{Client, cli_binary};

/// One user's world: a state root, folders (`home`, `proj`, `outside`, `gate`), copies of both
/// binaries that user can run, and servers running as that user.
pub(crate) struct Lab {
    dir: UserDir,
}

impl Lab {
    /// The labs of both runs.
    pub(crate) fn both() -> [Lab; 2] {
        users::both().map(Lab::new)
    }

    /// The lab of the user `uid`.
    pub(crate) fn new(uid: u32) -> Self {
        let dir = UserDir::new(uid, &["home", "proj", "outside", "gate"]);
        let server = PathBuf::from(env!("CARGO_BIN_EXE_safe-lanes-mcp"));
        dir.copy_binary(&server, "safe-lanes-mcp");
        dir.copy_binary(&cli_binary(), "safe-lanes");
        Self { dir }
    }

    /// `<lab>/<rel>`.
    pub(crate) fn p(&self, rel: &str) -> PathBuf {
        self.dir.p(rel)
    }

    /// The user, for assertion messages.
    pub(crate) fn who(&self) -> String {
        format!("uid {}", self.dir.uid)
    }

    /// Whether the lab's user is the one running the tests.
    pub(crate) fn is_runner(&self) -> bool {
        self.dir.uid == rustix::process::geteuid().as_raw()
    }

    /// Give everything in the lab to its user.
    pub(crate) fn give(&self) {
        give_tree(self.dir.tmp.path(), self.dir.uid, self.dir.gid);
    }

    fn as_user(&self, command: &mut Command) {
        self.dir.run_as(command);
    }

    /// A program of the human's, run as the lab's user, outside any sandbox, in `cwd`, with
    /// the human's environment (`HOME` the lab's home).
    pub(crate) fn human(&self, program: &str, args: &[&str], cwd: &Path) -> Output {
        self.human_with(program, args, cwd, &[])
            .unwrap_or_else(|e| panic!("{}: {program} {args:?}: {e}", self.who()))
    }

    /// [`Lab::human`] with more variables; the error when the program cannot be started.
    pub(crate) fn human_with(
        &self,
        program: impl AsRef<OsStr>,
        args: &[&str],
        cwd: &Path,
        vars: &[(&str, &OsStr)],
    ) -> std::io::Result<Output> {
        let mut command = Command::new(program);
        command.args(args);
        self.human_env(&mut command, cwd, vars);
        self.as_user(&mut command);
        command.output()
    }

    /// The human's environment for `command`: in `cwd`, `HOME` the lab's home, `vars` added.
    fn human_env(&self, command: &mut Command, cwd: &Path, vars: &[(&str, &OsStr)]) {
        command
            .current_dir(cwd)
            .env_clear()
            .env("HOME", self.p("home"))
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("NPM_CONFIG_UPDATE_NOTIFIER", "false")
            .env("GIT_AUTHOR_NAME", "Human")
            .env("GIT_AUTHOR_EMAIL", "human@example.com")
            .env("GIT_COMMITTER_NAME", "Human")
            .env("GIT_COMMITTER_EMAIL", "human@example.com")
            .envs(vars.iter().copied())
            .stdin(std::process::Stdio::null());
    }

    /// A program of the human's that must succeed; its stdout.
    pub(crate) fn human_ok(&self, program: &str, args: &[&str], cwd: &Path) -> String {
        let out = self.human(program, args, cwd);
        assert!(
            out.status.success(),
            "{}: {program} {args:?} in {}: {out:?}",
            self.who(),
            cwd.display()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `git ARGS` in `<lab>/<dir>`, as the human; it must succeed.
    pub(crate) fn git_in(&self, dir: &str, args: &[&str]) -> String {
        self.human_ok("git", args, &self.p(dir))
    }

    /// `git ARGS` in `proj`, as the human; it must succeed.
    pub(crate) fn git(&self, args: &[&str]) -> String {
        self.git_in("proj", args)
    }

    /// The human's CLI on this lab's state root; it must succeed.
    pub(crate) fn cli(&self, args: &[&str]) -> Value {
        let (ok, out) = self.cli_run(args);
        assert!(ok, "{}: {args:?}: {out}", self.who());
        out
    }

    /// The human's CLI on this lab's state root; it must fail. Its JSON.
    pub(crate) fn cli_fails(&self, args: &[&str]) -> Value {
        let (ok, out) = self.cli_run(args);
        assert!(!ok, "{}: {args:?} succeeded: {out}", self.who());
        out
    }

    /// The human's CLI on this lab's state root: whether it succeeded, and its JSON.
    fn cli_run(&self, args: &[&str]) -> (bool, Value) {
        let mut command = Command::new(self.p("safe-lanes"));
        command
            .arg("--root")
            .arg(self.p("state"))
            .arg("--json")
            .args(args)
            .env_clear()
            .env("HOME", self.p("home"))
            .env("PATH", "/usr/bin:/bin");
        self.as_user(&mut command);
        let out = command.output().unwrap();
        let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (out.status.success(), json)
    }

    /// Grant `<lab>/<rel>` as `alias` with `access`.
    pub(crate) fn grant(&self, alias: &str, rel: &str, access: &str) {
        let path = self.p(rel);
        self.cli(&[
            "grant",
            "add",
            "--alias",
            alias,
            "--path",
            path.to_str().unwrap(),
            "--access",
            access,
            "--reason",
            "the agent's work",
        ]);
    }

    /// Grant `proj` read-write.
    pub(crate) fn grant_proj(&self) {
        self.grant("proj", "proj", "read_write");
    }

    /// A server on this lab's state root, running as its user, started with `extra`.
    pub(crate) async fn server(&self, extra: &[&str]) -> Client {
        serve(|| self.server_command(extra)).await
    }

    /// The command that starts [`Lab::server`].
    pub(crate) fn server_command(&self, extra: &[&str]) -> Command {
        let mut c = Command::new(self.p("safe-lanes-mcp"));
        c.arg("--root")
            .arg(self.p("state"))
            .args(extra)
            .env_clear()
            .env("HOME", self.p("home"))
            .env("PATH", "/usr/bin:/bin")
            .env("RUST_LOG", "error")
            .current_dir(self.p("home"));
        self.as_user(&mut c);
        c
    }

    /// The sets `safe-lanes changes --json` lists.
    pub(crate) fn held_sets(&self) -> Vec<Value> {
        let listed = self.cli(&["changes"]);
        listed["sets"].as_array().expect("sets").clone()
    }

    /// The rustup installation of the tests, when this lab's user can run its `cargo`; `None`
    /// only for the second user, and only when it cannot reach it and the tests cannot lend it
    /// (in CI the toolchain lives in root's home folder, closed to others: run as root, the
    /// tests lend it, see [`Lab::human_cargo`]).
    #[allow(clippy::print_stderr)] // what was not tried and why, where the runner shows it
    pub(crate) fn cargo(&self) -> Option<Rustup> {
        let rustup = Rustup::of_the_tests();
        let ran = self.human_cargo(&rustup, &["--version"], &self.p("home"));
        if ran.as_ref().is_ok_and(|out| out.status.success()) {
            return Some(rustup);
        }
        let who = self.who();
        assert!(
            !self.is_runner() && rustup.closed_by().is_none(),
            "{who}: the human's cargo (the tests' {}) fails: {ran:?}",
            rustup.cargo_home.display()
        );
        let unreachable = match &ran {
            Err(e) => e.kind() == std::io::ErrorKind::PermissionDenied,
            Ok(out) => String::from_utf8_lossy(&out.stderr).contains("ermission denied"),
        };
        assert!(
            unreachable,
            "{who}: the tests' cargo fails for this user for another reason than being out of \
             its reach, so its cargo steps cannot be skipped: {ran:?}"
        );
        eprintln!(
            "{who}: the tests' cargo is out of this user's reach and cannot be lent (the tests \
             do not run as root): its cargo steps are skipped for this user only"
        );
        None
    }

    /// Whether the toolchain `rustup` is out of this lab's user's reach, lent to its human's
    /// programs ([`Lab::human_cargo`]) but not to its gateway. A second user exists only when
    /// the tests run as root, who can lend.
    pub(crate) fn lends(&self, rustup: &Rustup) -> bool {
        !self.is_runner() && rustup.closed_by().is_some()
    }

    /// The human's `cargo` (the tests' own rustup proxy), run as the lab's user like
    /// [`Lab::human_with`]. When the toolchain lies in a folder closed to that user (root's
    /// home in CI) and the tests run as root, it is lent for this one run: in a mount
    /// namespace of its own, the closed folder is replaced by an empty one holding only
    /// `CARGO_HOME` and `RUSTUP_HOME` (bound where they were, so every path in them still
    /// resolves), and only then does the program become the lab's user (`setpriv`).
    pub(crate) fn human_cargo(
        &self,
        rustup: &Rustup,
        args: &[&str],
        cwd: &Path,
    ) -> std::io::Result<Output> {
        let cargo = rustup.cargo_home.join("bin/cargo");
        let Some(closed) = rustup.closed_by().filter(|_| self.lends(rustup)) else {
            return self.human_with(&cargo, args, cwd, &rustup.vars());
        };
        let stash = self.p("toolchain-lent");
        std::fs::create_dir_all(stash.join("rustup")).unwrap();
        std::fs::create_dir_all(stash.join("cargo")).unwrap();
        let (uid, gid) = (self.dir.uid.to_string(), self.dir.gid.to_string());
        let mut command = Command::new("unshare");
        command
            .args([
                "--mount",
                "--propagation",
                "private",
                "--",
                "/bin/sh",
                "-ec",
                LEND,
                "lend",
            ])
            .args([&rustup.rustup_home, &rustup.cargo_home, &closed, &stash])
            .args([uid.as_str(), gid.as_str()])
            .arg(&cargo)
            .args(args);
        self.human_env(&mut command, cwd, &rustup.vars());
        command.output()
    }
}

/// How [`Lab::human_cargo`] lends the toolchain: `$1` `RUSTUP_HOME`, `$2` `CARGO_HOME`, `$3`
/// the closed folder above them, `$4` a folder of the lab's to hold them meanwhile, `$5` and
/// `$6` the user and group to become, then the program and its arguments.
const LEND: &str = r#"
rustup=$1 cargo=$2 closed=$3 stash=$4 uid=$5 gid=$6
shift 6
mount --bind "$rustup" "$stash/rustup"
mount --bind "$cargo" "$stash/cargo"
mount -t tmpfs -o mode=0755,size=1m lent "$closed"
mkdir -p "$rustup" "$cargo"
mount --bind "$stash/rustup" "$rustup"
mount --bind "$stash/cargo" "$cargo"
exec setpriv --reuid="$uid" --regid="$gid" --clear-groups -- "$@"
"#;

/// Where cargo and rustup are installed: `(CARGO_HOME, RUSTUP_HOME)` of the tests.
#[derive(Clone, Debug)]
pub(crate) struct Rustup {
    pub(crate) cargo_home: PathBuf,
    pub(crate) rustup_home: PathBuf,
}

impl Rustup {
    fn of_the_tests() -> Self {
        let home = PathBuf::from(std::env::var_os("HOME").expect("HOME"));
        let var = |name: &str, default: &str| {
            std::env::var_os(name).map_or_else(|| home.join(default), PathBuf::from)
        };
        let found = Self {
            cargo_home: var("CARGO_HOME", ".cargo"),
            rustup_home: var("RUSTUP_HOME", ".rustup"),
        };
        assert!(
            found.cargo_home.join("bin/cargo").exists() && found.rustup_home.is_dir(),
            "this suite needs rustup (cargo in {}, toolchains in {})",
            found.cargo_home.display(),
            found.rustup_home.display()
        );
        found
    }

    /// The folder above both homes that others cannot enter (`/root`, mode 0700), when there
    /// is one and both lie below it.
    fn closed_by(&self) -> Option<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        let closed = self.rustup_home.ancestors().skip(1).find(|dir| {
            std::fs::metadata(dir).is_ok_and(|m| m.permissions().mode() & 0o001 == 0)
        })?;
        self.cargo_home
            .starts_with(closed)
            .then(|| closed.to_path_buf())
    }

    /// The variables the human's cargo runs with.
    pub(crate) fn vars(&self) -> [(&'static str, &OsStr); 2] {
        [
            ("CARGO_HOME", self.cargo_home.as_os_str()),
            ("RUSTUP_HOME", self.rustup_home.as_os_str()),
        ]
    }
}

/// A client of the server `command` starts, retrying while a copied binary is still open for
/// writing in a child another test forked during the copy (`ETXTBSY` until it calls `exec`).
pub(crate) async fn serve(command: impl Fn() -> Command) -> Client {
    for _ in 0..100 {
        match TokioChildProcess::new(tokio::process::Command::from(command())) {
            Ok(child) => return ().serve(child).await.unwrap(),
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::TXTBSY.raw_os_error()) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("the server cannot start: {e}"),
        }
    }
    panic!("the server binary stayed busy")
}

/// Every path under `dir`, `dir` included.
pub(crate) fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let mut at = 0;
    while at < out.len() {
        let path = out[at].clone();
        at += 1;
        let is_dir = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
        if is_dir {
            for entry in std::fs::read_dir(&path).unwrap() {
                out.push(entry.unwrap().path());
            }
        }
    }
    out
}

/// Call `tool` with the JSON object `args`.
pub(crate) async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments are an object")
    };
    let args: Map<String, Value> = args;
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap()
}

/// A successful call's structured content.
pub(crate) async fn ok(client: &Client, tool: &str, args: Value) -> Value {
    let result = call(client, tool, args.clone()).await;
    assert_eq!(result.is_error, Some(false), "{tool} {args}: {result:?}");
    result.structured_content.expect("structured content")
}

/// Run `script` with `shell_exec` in `proj`; its structured result.
pub(crate) async fn shell(client: &Client, script: &str) -> Value {
    shell_in(client, "proj", script).await
}

/// Run `script` with `shell_exec` in the grant `cwd`; its structured result.
pub(crate) async fn shell_in(client: &Client, cwd: &str, script: &str) -> Value {
    ok(
        client,
        "shell_exec",
        json!({ "command": script, "cwd": cwd, "timeout_s": 120 }),
    )
    .await
}

/// A background job: its id, the output its reports gave so far, and its final report once
/// one said it finished (the server then forgets the job).
pub(crate) struct Job {
    id: String,
    seen: String,
    ended: Option<Value>,
}

/// Start `script` in the background in `proj`.
pub(crate) async fn background(client: &Client, script: &str) -> Job {
    let started = ok(
        client,
        "shell_exec",
        json!({ "command": script, "cwd": "proj", "timeout_s": 120, "background": true }),
    )
    .await;
    Job {
        id: started["job_id"].as_str().expect("a job id").to_owned(),
        // The first report already holds what the job printed by then.
        seen: started["stdout"].as_str().unwrap_or("").to_owned(),
        ended: None,
    }
}

impl Job {
    /// One report, waiting up to `wait_s` for the job to finish; whether it still runs.
    async fn poll(&mut self, client: &Client, wait_s: u64) -> bool {
        if self.ended.is_some() {
            return false;
        }
        let report = ok(
            client,
            "shell_job_status",
            json!({ "job_id": self.id, "wait_s": wait_s }),
        )
        .await;
        self.seen.push_str(report["stdout"].as_str().unwrap_or(""));
        if report["status"] == "finished" {
            self.ended = Some(report);
        }
        self.ended.is_none()
    }
}

/// Poll `job` until its output so far contains `text` (or it finishes); whether it was still
/// running after the text showed, and the output seen.
pub(crate) async fn job_until(client: &Client, job: &mut Job, text: &str) -> (bool, String) {
    while !job.seen.contains(text) && job.poll(client, 1).await {}
    let running = job.poll(client, 0).await;
    (running, job.seen.clone())
}

/// Poll `job` until it finishes; its final report, with all its output in `stdout`.
pub(crate) async fn job_end(client: &Client, mut job: Job) -> Value {
    while job.poll(client, 10).await {}
    let mut report = job.ended.take().expect("a final report");
    report["stdout"] = Value::String(job.seen);
    report
}

/// The `(grant, path, why)` of each held change in `held` (a result's `changes.held` or a
/// listed set's `held`), sorted.
pub(crate) fn held_list(held: &Value) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = held
        .as_array()
        .unwrap_or_else(|| panic!("a list of held changes: {held}"))
        .iter()
        .map(|h| {
            let s = |k: &str| {
                h[k].as_str()
                    .unwrap_or_else(|| panic!("{k}: {h}"))
                    .to_owned()
            };
            (s("grant"), s("path"), s("why"))
        })
        .collect();
    out.sort();
    out
}

/// `(grant, path, why)` triples from string slices, sorted.
pub(crate) fn triples(list: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = list
        .iter()
        .map(|(g, p, w)| ((*g).to_owned(), (*p).to_owned(), (*w).to_owned()))
        .collect();
    out.sort();
    out
}

/// What a path is on disk, links not followed: enough to tell whether anything of a held
/// change reached it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// Nothing there.
    Absent,
    /// A regular file: its content and permission bits.
    File { bytes: Vec<u8>, mode: u32 },
    /// A directory.
    Dir,
    /// A symbolic link, with its target.
    Link(PathBuf),
}

impl Entry {
    /// What `path` is now.
    pub(crate) fn of(path: &Path) -> Self {
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return Entry::Absent;
        };
        if meta.is_symlink() {
            Entry::Link(std::fs::read_link(path).unwrap())
        } else if meta.is_dir() {
            Entry::Dir
        } else {
            Entry::File {
                bytes: std::fs::read(path).unwrap(),
                mode: meta.mode() & 0o7777,
            }
        }
    }
}
