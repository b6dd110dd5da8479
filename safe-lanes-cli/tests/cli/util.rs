//! Running the binary in a clean environment.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

pub(crate) use safe_lanes_testkit::fs::tree;
pub(crate) use safe_lanes_testkit::heartbeat::{HEARTBEAT, appears, stops_writing};
use safe_lanes_testkit::users::{NOBODY, give_tree};

/// The result of one run.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) status: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl From<std::process::Output> for Run {
    fn from(out: std::process::Output) -> Self {
        Run {
            status: out.status.code().expect("exited"),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Run {
    /// The single JSON object on stdout.
    pub(crate) fn json(&self) -> Value {
        let mut objects = serde_json::Deserializer::from_str(&self.stdout).into_iter::<Value>();
        let first = objects
            .next()
            .unwrap_or_else(|| panic!("no JSON on stdout; stderr: {}", self.stderr))
            .expect("valid JSON");
        assert!(
            objects.next().is_none(),
            "exactly one JSON value: {}",
            self.stdout
        );
        assert!(first.is_object(), "a JSON object: {first}");
        first
    }

    /// The error code of a `--json` refusal.
    pub(crate) fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("no error code in {}", self.stdout))
            .to_owned()
    }
}

/// A temporary home, working directory and state root for one test.
pub(crate) struct Env {
    pub(crate) tmp: tempfile::TempDir,
}

impl Env {
    pub(crate) fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        for d in ["home", "cwd"] {
            std::fs::create_dir(tmp.path().join(d)).unwrap();
        }
        Self { tmp }
    }

    pub(crate) fn root(&self) -> PathBuf {
        self.tmp.path().join("state")
    }

    pub(crate) fn home(&self) -> PathBuf {
        self.tmp.path().join("home")
    }

    pub(crate) fn cwd(&self) -> PathBuf {
        self.tmp.path().join("cwd")
    }

    /// Run `safe-lanes --root <root> ARGS` with `stdin`.
    pub(crate) fn run(&self, args: &[&str], stdin: &[u8]) -> Run {
        let root = self.root();
        let mut full = vec!["--root", root.to_str().unwrap()];
        full.extend_from_slice(args);
        self.run_raw(&full, stdin)
    }

    /// Run `safe-lanes ARGS` with HOME and the working directory in the sandbox, and no
    /// root variables.
    pub(crate) fn run_raw(&self, args: &[&str], stdin: &[u8]) -> Run {
        run_in(&self.cwd(), &self.home(), args, stdin, &[])
    }

    /// Run `safe-lanes --root <root> ARGS` with extra environment variables.
    pub(crate) fn run_env(&self, args: &[&str], stdin: &[u8], vars: &[(&str, &str)]) -> Run {
        let root = self.root();
        let mut full = vec!["--root", root.to_str().unwrap()];
        full.extend_from_slice(args);
        run_in(&self.cwd(), &self.home(), &full, stdin, vars)
    }

    /// Run `safe-lanes --root <root> ARGS`, under `wrapper` when it is not empty
    /// ([`Env::run_wrapped`]).
    pub(crate) fn run_as(&self, wrapper: &[&str], args: &[&str]) -> Run {
        if wrapper.is_empty() {
            self.run(args, b"")
        } else {
            self.run_wrapped(wrapper, args)
        }
    }

    /// Run `WRAPPER… safe-lanes --root <root> ARGS`: the binary under a program that sets
    /// something up first (`unshare`, `setpriv`), which gets the binary's path as its last
    /// argument before ARGS.
    pub(crate) fn run_wrapped(&self, wrapper: &[&str], args: &[&str]) -> Run {
        let root = self.root();
        let mut full = vec![
            env!("CARGO_BIN_EXE_safe-lanes"),
            "--root",
            root.to_str().unwrap(),
        ];
        full.extend_from_slice(args);
        let (program, before) = wrapper.split_first().expect("a wrapper program");
        let mut all = before.to_vec();
        all.extend_from_slice(&full);
        spawn(program, &self.cwd(), &self.home(), &all, b"", &[])
    }
}

/// The users a sandbox test runs as: this one, and (when this runs as root) uid 65534 through
/// `setpriv`, as the wrapper [`Env::run_as`] takes.
pub(crate) fn users() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out = vec![("this user", Vec::new())];
    if rustix::process::geteuid().is_root() {
        let drop = vec![
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ];
        out.push(("uid 65534", drop));
    }
    out
}

/// Give `dir` and everything in it to uid and gid 65534.
pub(crate) fn give_to_nobody(dir: &Path) {
    give_tree(dir, NOBODY, NOBODY);
}

pub(crate) fn run_in(
    cwd: &Path,
    home: &Path,
    args: &[&str],
    stdin: &[u8],
    vars: &[(&str, &str)],
) -> Run {
    spawn(
        env!("CARGO_BIN_EXE_safe-lanes"),
        cwd,
        home,
        args,
        stdin,
        vars,
    )
}

/// Run `program ARGS` in `cwd` with a clean environment: `HOME`, `PATH` and `vars`.
fn spawn(
    program: &str,
    cwd: &Path,
    home: &Path,
    args: &[&str],
    stdin: &[u8],
    vars: &[(&str, &str)],
) -> Run {
    let mut child = Command::new(program)
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(vars.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {program}: {e}"));
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    Run::from(child.wait_with_output().unwrap())
}

/// Whether `unshare -rm` (a user and mount namespace of one's own, where a test may mount)
/// works here, or why not.
pub(crate) fn private_mounts() -> Result<(), String> {
    let out = Command::new("unshare")
        .args(["-rm", "true"])
        .output()
        .map_err(|e| format!("cannot run unshare: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "unshare -rm failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The status a wrapper script exits with when its own setup (a mount) failed.
pub(crate) const SETUP_FAILED: i32 = 97;
