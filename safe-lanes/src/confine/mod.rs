//! Confined commands: run a program under Linux Landlock, with exactly the folders of a
//! [`Session`] and nothing else of the user's.
//!
//! The sandbox of one command:
//!
//! | what | rights |
//! |---|---|
//! | each available read-only grant | read files, list directories, execute |
//! | each available read-write grant | every filesystem right Landlock mediates |
//! | `/usr`, `/bin`, `/sbin`, `/lib*`, `/etc` | read and execute |
//! | `/dev/null` | read, write, truncate |
//! | `/dev/zero`, `/dev/urandom`, `/dev/random` | read |
//! | a private scratch directory (its `HOME` and `TMPDIR`, removed afterwards) | everything |
//! | anything else — `$HOME`, `/tmp`, `/root`, `/proc`, the state root, the manifest | nothing |
//! | TCP bind and connect | denied, unless the caller asks for network |
//! | any socket but TCP/IP (UNIX sockets by path, UDP without network, netlink…) | denied (seccomp) |
//! | leaving the process group (`setsid`, `setpgid`), namespaces, `io_uring`, keyrings | denied (seccomp) |
//! | signals and abstract UNIX sockets outside the sandbox (Landlock ABI 6) | denied |
//!
//! The environment is cleared, then `PATH`, `LANG`, `HOME`, `TMPDIR` and one
//! `WORKFLOW_FOLDER_<ALIAS>` per available grant are set: the parent's tokens never reach the
//! child. Only descriptors 0–2 are inherited (stdin is `/dev/null`; stdout and stderr are
//! captured and capped). The process runs in its own process group with `no_new_privs`; the
//! timeout kills the whole group.
//!
//! The restriction is applied in the child before `exec`. It must be *fully* enforced: on a
//! kernel without Landlock ABI 4 (Linux 6.7), or where any part of the ruleset cannot be
//! enforced, the command is refused with `sandbox_unavailable` and never runs unconfined.
//!
//! # Live narrowing
//!
//! A Landlock domain cannot be changed from outside. So while a command runs, its grants are
//! re-checked against the manifest every [`WATCH_INTERVAL`]; when a grant it was started with is
//! revoked, narrowed, moved or becomes unavailable, the command's process group is killed and
//! the outcome says why (`stopped`). No process keeps broader authority than the manifest.

mod probe;
mod ruleset;
mod syscalls;

use std::ffi::{OsStr, OsString};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use landlock::ABI;
use serde::Serialize;

pub use probe::{LandlockSupport, REQUIRED_ABI, landlock_support};

use crate::beneath::Anchor;
use crate::download::random_hex;
use crate::error::{Error, Result, Shown};
use crate::grants::{Access, Alias, Session, Snapshot, Want};
use crate::run::{Limits, Outcome, run};

/// How often a running command's grants are compared with the manifest.
pub const WATCH_INTERVAL: Duration = Duration::from_millis(100);

/// Read-only system hierarchies every confined program gets (those that exist).
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
];
/// Device files readable by every confined program.
const READABLE_DEVICES: &[&str] = &["/dev/zero", "/dev/urandom", "/dev/random"];
/// The `PATH` of confined programs.
const CHILD_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";

/// A command to run confined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Confined {
    program: OsString,
    args: Vec<OsString>,
    cwd: Option<String>,
    network: bool,
    limits: Limits,
}

/// How a confined command ended.
#[derive(Clone, Debug, Serialize)]
pub struct ConfinedOutcome {
    /// Exit code, signal, output, timeout and truncation.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// The aliases of the grants the command could use, with their access.
    pub grants: Vec<(Alias, Access)>,
}

impl Confined {
    /// `program args…`.
    pub fn new(
        program: impl Into<OsString>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Self {
        Self {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            cwd: None,
            network: false,
            limits: Limits::default(),
        }
    }

    /// `/bin/sh -c command`.
    pub fn shell(command: &str) -> Self {
        Self::new("/bin/sh", ["-c", command])
    }

    /// Start in the folder of the grant `alias` (default: the private scratch directory).
    pub fn cwd(mut self, alias: impl Into<String>) -> Self {
        self.cwd = Some(alias.into());
        self
    }

    /// Allow TCP bind and connect.
    pub fn network(mut self, allow: bool) -> Self {
        self.network = allow;
        self
    }

    /// Bound run time and kept output.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Run the command confined to `session`'s grants as they are now.
    ///
    /// # Errors
    ///
    /// `sandbox_unavailable` when Landlock cannot be fully enforced here (nothing runs);
    /// `invalid_alias`, `unknown_alias`, `revoked`, `unavailable_on_host` for the `cwd` alias;
    /// `invalid_manifest`; `io` when the program cannot be started. A program that fails,
    /// times out or is stopped by a revoke is not an error: see the outcome.
    ///
    /// # Security
    ///
    /// The command and its arguments may come from an agent. They run with the rights in the
    /// module documentation and no others.
    pub fn run(&self, session: &Session) -> Result<ConfinedOutcome> {
        self.run_unrecorded(session).map_err(|e| {
            let mut subject = self.program.to_string_lossy().into_owned();
            for arg in &self.args {
                subject.push(' ');
                subject.push_str(&arg.to_string_lossy());
            }
            session.refused("exec", &subject, e)
        })
    }

    fn run_unrecorded(&self, session: &Session) -> Result<ConfinedOutcome> {
        let abi = supported_abi()?;
        let snapshot = session.snapshot()?;
        let cwd_grant = match &self.cwd {
            Some(alias) => Some(snapshot.folder(&Alias::new(alias)?, Want::Read)?),
            None => None,
        };
        let scratch = Scratch::create()?;
        let system = open_system_paths();
        let grants: Vec<_> = snapshot.available().collect();
        let mut rules = Vec::new();
        for g in &grants {
            let access = match g.access {
                Access::ReadOnly => ruleset::read_only(abi),
                Access::ReadWrite => ruleset::read_write(abi),
            };
            rules.push((g.folder()?.as_fd(), access));
        }
        for (fd, write) in &system {
            let access = match write {
                Some(write) => ruleset::device(abi, *write),
                None => ruleset::read_only(abi),
            };
            rules.push((fd.as_fd(), access));
        }
        rules.push((scratch.dir.as_fd(), ruleset::read_write(abi)));
        let created = ruleset::build(abi, &rules, self.network)?;
        let filters = syscalls::filters(
            self.network,
            std::process::id(),
            rustix::process::getpgrp().as_raw_nonzero().get() as u32,
        )?;

        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .env_clear()
            .env("PATH", CHILD_PATH)
            .env(
                "LANG",
                std::env::var_os("LANG").unwrap_or_else(|| "C.UTF-8".into()),
            )
            .env("HOME", &scratch.path)
            .env("TMPDIR", &scratch.path)
            .envs(grants.iter().map(|g| (g.env.as_str(), g.path.as_os_str())))
            .current_dir(cwd_grant.map_or(scratch.path.as_path(), |g| g.path.as_path()));
        ruleset::restrict_before_exec(&mut command, created, filters);
        let used: Vec<(Alias, Access, PathBuf)> = grants
            .iter()
            .map(|g| (g.alias.clone(), g.access, g.path.clone()))
            .collect();
        let watch = || still_granted(session, &used);
        let outcome =
            run(&mut command, self.limits, Some(&watch)).map_err(|e| match e.raw_os_error() {
                Some(ruleset::RESTRICT_FAILED) => Error::SandboxUnavailable {
                    why: "the Landlock restriction could not be fully enforced in the child".into(),
                },
                _ => e,
            })?;
        drop(scratch);
        let result = ConfinedOutcome {
            outcome,
            grants: used.into_iter().map(|(a, access, _)| (a, access)).collect(),
        };
        session.record(
            "exec.run",
            serde_json::json!({
                "program": self.program.to_string_lossy(),
                "args": self.args.iter().map(|a| Shown::bytes(a.as_encoded_bytes()).to_string()).collect::<Vec<_>>(),
                "cwd": self.cwd,
                "network": self.network,
                "grants": &result.grants,
                "exit_code": result.outcome.exit_code,
                "timed_out": result.outcome.timed_out,
                "stopped": result.outcome.stopped,
            }),
        )?;
        Ok(result)
    }
}

/// `None` while every grant in `used` is still in the manifest with the same folder and at least
/// the same access; otherwise why the command must stop.
fn still_granted(session: &Session, used: &[(Alias, Access, PathBuf)]) -> Option<String> {
    let now: std::sync::Arc<Snapshot> = match session.snapshot() {
        Ok(now) => now,
        Err(e) => return Some(format!("the grants can no longer be read: {e}")),
    };
    for (alias, access, path) in used {
        let Some(current) = now.grants.iter().find(|g| &g.alias == alias) else {
            return Some(format!("grant `{alias}` was revoked"));
        };
        if &current.path != path {
            return Some(format!("grant `{alias}` now points to another folder"));
        }
        if current.access < *access {
            return Some(format!(
                "grant `{alias}` was narrowed to {}",
                current.access
            ));
        }
        if !current.is_available() {
            return Some(format!("grant `{alias}` became unavailable"));
        }
    }
    None
}

/// The Landlock ABI rulesets are built for: the kernel's (as far as the `landlock` crate
/// knows it), at least [`REQUIRED_ABI`].
fn supported_abi() -> Result<ABI> {
    static SUPPORT: OnceLock<LandlockSupport> = OnceLock::new();
    let support = SUPPORT.get_or_init(landlock_support);
    match (support.fully_enforced, support.abi) {
        (true, Some(abi)) if abi >= REQUIRED_ABI => Ok(ABI::from(abi as i32)),
        _ => Err(Error::SandboxUnavailable {
            why: support
                .problem
                .clone()
                .unwrap_or_else(|| "Landlock is not available".to_owned()),
        }),
    }
}

/// The system hierarchies and devices that exist here, opened for rules: `None` for a
/// read-only directory, `Some(writable)` for a device file.
fn open_system_paths() -> Vec<(std::os::fd::OwnedFd, Option<bool>)> {
    let open = |path: &str| crate::beneath::open_path_unchecked(Path::new(path)).ok();
    let mut out = Vec::new();
    for dir in SYSTEM_DIRS {
        if let Some(fd) = open(dir) {
            out.push((fd, None));
        }
    }
    for dev in READABLE_DEVICES {
        if let Some(fd) = open(dev) {
            out.push((fd, Some(false)));
        }
    }
    if let Some(fd) = open("/dev/null") {
        out.push((fd, Some(true)));
    }
    out
}

/// A private directory for one command's `HOME` and `TMPDIR`, removed when dropped.
struct Scratch {
    parent: Anchor,
    name: OsString,
    dir: Anchor,
    path: PathBuf,
}

impl Scratch {
    fn create() -> Result<Self> {
        let base = std::env::temp_dir();
        let parent = Anchor::open_unchecked(&base)?;
        let name = OsString::from(format!("safe-lanes-scratch-{}", random_hex()));
        parent.create_dir(&name, 0o700)?;
        let dir = parent.open_dir(Path::new(&name), crate::beneath::Symlinks::Deny)?;
        let base = crate::beneath::location_of(parent.as_fd()).unwrap_or(base);
        Ok(Self {
            path: base.join(&name),
            parent,
            name,
            dir,
        })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Err(e) = self.parent.remove_all(OsStr::new(&self.name)) {
            tracing::warn!(dir = %Shown::path(&self.path), error = %e, "could not remove a scratch directory");
        }
    }
}
