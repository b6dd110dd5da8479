//! Confined commands: run a program in a sandbox that holds exactly the folders of a
//! [`Session`] and nothing else of the user's.
//!
//! Each command gets its own user, mount, PID, IPC, UTS and cgroup namespaces (and network
//! namespace, unless it asks for network), a root made of these and nothing else, no
//! capabilities, and Landlock and seccomp as further layers (ADR 0007):
//!
//! | what | rights |
//! |---|---|
//! | each available read-only grant, at its own path | read files, list directories, execute (a read-only mount) |
//! | each available read-write grant, at its own path | everything |
//! | each available tool (a toolchain's folder, [`crate::grants::Kind`]), at its own path; its `bin` first on `PATH` | read files, list directories, execute (a read-only mount) |
//! | each available cache, at its own path | everything |
//! | `/proc`, when a tool is granted: the command's own processes only (`subset=pid`, its own PID namespace) | its links resolve (`/proc/self/exe`); nothing else |
//! | `/usr`, `/etc`, and `/bin`, `/sbin`, `/lib*` (directories, or the system's links to them) | read and execute (read-only mounts) |
//! | `/dev/null` | read, write, truncate |
//! | `/dev/zero`, `/dev/urandom`, `/dev/random` | read |
//! | `/tmp`: a private, size-capped `tmpfs` (its `HOME` and `TMPDIR`), gone with the command | everything |
//! | anything else — `$HOME`, the host's `/tmp`, `/root`, `/proc`, the state root, the manifest, other processes, SysV IPC objects | does not exist |
//! | TCP bind and connect | only when the caller asks for network |
//! | any socket but TCP/IP, nested namespaces, `io_uring`, keyrings, `bpf`, `TIOCSTI` | denied (seccomp) |
//! | capabilities, even for root | none |
//!
//! The environment is cleared, then `PATH`, `LANG`, `HOME`, `TMPDIR`, one
//! `WORKFLOW_FOLDER_<ALIAS>` per available grant and the variables of each available tool and
//! cache are set: the parent's tokens never reach the child. Only descriptors 0–2 are inherited (stdin is `/dev/null`; stdout and stderr are
//! captured and capped). The command is PID 1 of its namespace: when it ends, times out, is
//! stopped, or the gateway dies, every process it started dies with it.
//!
//! The sandbox must be *fully* in place: where user namespaces are disabled, on a kernel
//! without Landlock ABI 4 (Linux 6.7), or where any step fails, the command is refused with
//! `sandbox_unavailable` naming the step, and never runs with fewer layers.
//! [`sandbox_support`] probes every step without running anything.
//!
//! # Live narrowing
//!
//! A sandbox cannot be changed from outside. So while a command runs, its grants are
//! re-checked against the manifest every 100 ms; when a grant it was started with is
//! revoked, narrowed, moved or becomes unavailable, the command is killed and
//! the outcome says why (`stopped`). No process keeps broader authority than the manifest.

mod jobs;

cfg_if::cfg_if! {
    if #[cfg(target_os = "linux")] {
        mod layouts;
        pub mod limits;
        mod linux;
        mod masks;
        pub(crate) mod pre_exec;
        mod probe;
        mod ruleset;
        mod sandbox;
        mod sys;
        mod syscalls;

        pub use linux::sandbox_support;
        pub use probe::landlock_support;
    } else {
        mod unsupported;

        pub use unsupported::{landlock_support, sandbox_support};
    }
}

use std::ffi::OsString;

use serde::Serialize;

pub(crate) use jobs::{JobReport, Jobs};

use crate::child::{Limits, Outcome};
use crate::control::Control;
use crate::error::{Error, Result};
use crate::grants::{Access, Alias, Session};

/// A command to run confined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Confined {
    program: OsString,
    args: Vec<OsString>,
    cwd: Option<Alias>,
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
    /// What became of its changes to its read-write grants.
    pub changes: crate::changes::Summary,
    /// What to do about how it ended, when the library knows: a program the command's shell
    /// could not find (exit status 127) is named with the toolchain that has it and the tool
    /// grant that would let it in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
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
    pub fn cwd(mut self, alias: Alias) -> Self {
        self.cwd = Some(alias);
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
    /// `unknown_alias`, `revoked`, `unavailable_on_host` for the `cwd` alias;
    /// `invalid_manifest`; `io` when the program cannot be started. A program that fails,
    /// times out or is stopped by a revoke is not an error: see the outcome.
    ///
    /// # Security
    ///
    /// The command and its arguments may come from an agent. They run with the rights in the
    /// module documentation and no others.
    pub fn run(&self, session: &Session) -> Result<ConfinedOutcome> {
        self.run_with(session, &Control::new())
    }

    /// [`Confined::run`], with a handle another thread uses to stop the command (its whole
    /// process group is killed within 100 ms; the outcome's `stopped` says why) and to read
    /// its output while it runs ([`Control::output_since`]).
    ///
    /// # Errors
    ///
    /// As [`Confined::run`].
    pub fn run_with(&self, session: &Session, control: &Control) -> Result<ConfinedOutcome> {
        let result = self.recorded_or_refused(session, control);
        // Whatever happened, no more output comes (a reader waiting for it wakes now).
        control.end_output();
        result
    }

    fn recorded_or_refused(&self, session: &Session, control: &Control) -> Result<ConfinedOutcome> {
        self.run_recorded(session, control)
            .map_err(|failure| match failure {
                Failure::Before(e) => {
                    let mut subject = self.program.to_string_lossy().into_owned();
                    for arg in &self.args {
                        subject.push(' ');
                        subject.push_str(&arg.to_string_lossy());
                    }
                    session.refused(crate::audit::Operation::Exec, &subject, e)
                }
                // Its start and its end (with the error) are recorded already.
                Failure::After(e) => e,
            })
    }
}

/// Why a confined command failed: before its start was recorded (a refusal, recorded as
/// `exec.refused`), or after (its end record holds the error).
#[derive(Debug)]
enum Failure {
    Before(Error),
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    After(Error),
}

/// The Landlock ABI whose rights safe-lanes requires in full: filesystem access including
/// `truncate` and `refer` (ABI 3) and TCP bind/connect control (ABI 4). Without Linux there is
/// no Landlock at all.
pub const REQUIRED_ABI: u32 = 4;

/// The kernel's Landlock support, as `doctor` reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LandlockSupport {
    /// The kernel's Landlock ABI version, or `None` when Landlock is not built in, not
    /// enabled at boot, or the system is not Linux.
    pub abi: Option<u32>,
    /// Whether a ruleset with every right of [`REQUIRED_ABI`] is fully enforced here.
    pub fully_enforced: bool,
    /// Why not, when it is not.
    pub problem: Option<String>,
}

/// What confined commands get on this host, as `doctor` reports it.
#[derive(Clone, Debug, Serialize)]
pub struct SandboxSupport {
    /// The kernel's Landlock support.
    pub landlock: LandlockSupport,
    /// Whether a confined command can run here with every layer.
    pub available: bool,
    /// The layers every confined command runs under (empty when not available).
    pub layers: Vec<String>,
    /// Why confined commands are refused here, when they are.
    pub problem: Option<String>,
}
