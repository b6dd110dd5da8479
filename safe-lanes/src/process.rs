//! Hardening of the process that hosts the library: no core file, not dumpable, and whether it
//! runs as root.
//!
//! A gateway holds what an agent must not reach: descriptors of the state root and of the
//! granted folders, an uploader's credentials in its environment, received content in memory.
//! [`harden`] is the first call of both adapters' `main`:
//!
//! - `prctl(PR_SET_DUMPABLE, 0)`: other processes of the same user can no longer `ptrace` the
//!   gateway or read its memory, environment or descriptors through `/proc/<pid>/` (those
//!   entries now belong to root), and a crash writes no core dump;
//! - `setrlimit(RLIMIT_CORE, 0, 0)`: no core file either, even if something made the process
//!   dumpable again; the hard limit of 0 cannot be raised again without `CAP_SYS_RESOURCE`.
//!
//! Both are inherited by the processes the gateway starts until they execute a program; from
//! then on the program runs with its own memory and is dumpable again, while the core limit of 0
//! stays. A forked child that must write its own `/proc/self/uid_map` as an unprivileged user
//! (to enter a user namespace) has to make itself dumpable again first: while it is not, those
//! files belong to root and the write is refused. The `confine` sandbox does so for those
//! writes only.
//!
//! Not dumpable is Linux's (`PR_SET_DUMPABLE`); elsewhere (macOS) there is no such switch
//! for a process to set on itself, so [`harden`] sets the core limit only and says so in
//! [`Hardening::unavailable`].
//!
//! [`harden`] also reports whether the effective user is root. safe-lanes works as root, but
//! the files confined commands create in granted folders then belong to root, which is rarely
//! what the user wants; [`Hardening::warning`] is the one line the adapters print about it.
//!
//! # Test strategy
//!
//! The adapters' tests start the real binaries and look at them from outside: the core limit in
//! `/proc/<pid>/limits`, and that a process of the same user cannot read `/proc/<pid>/environ`
//! (which it can for a dumpable process of that user).

use serde::Serialize;

use crate::error::{Error, Result};

/// The one-line warning for a process that runs as root.
const ROOT_WARNING: &str = "running as root is not recommended: files that confined commands \
    create in granted folders will belong to root; run safe-lanes as the user who owns them";

/// What [`harden`] left in place, or what [`status`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Hardening {
    /// The process is not dumpable (`PR_GET_DUMPABLE` is 0): same-user processes cannot trace
    /// it or read its memory.
    pub not_dumpable: bool,
    /// Core files are off: the soft and hard `RLIMIT_CORE` are both 0.
    pub no_core_files: bool,
    /// The effective user id is 0.
    pub running_as_root: bool,
    /// What this system cannot do of the above, and why (`None` on Linux: everything).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<&'static str>,
}

/// What [`harden`] cannot do on this system.
#[cfg(target_os = "linux")]
const UNAVAILABLE: Option<&str> = None;
/// What [`harden`] cannot do on this system.
#[cfg(not(target_os = "linux"))]
const UNAVAILABLE: Option<&str> = Some(
    "not dumpable: this system has no PR_SET_DUMPABLE, so only core files are turned off; \
     a debugger the user authorises can still attach",
);

impl Hardening {
    /// The warning an adapter prints at start (the MCP server) or in `doctor` (the CLI), if any.
    ///
    /// Guarantee: `Some` exactly when the process runs as root; the text is one line.
    pub fn warning(&self) -> Option<&'static str> {
        self.running_as_root.then_some(ROOT_WARNING)
    }
}

/// Make this process not dumpable and turn core files off, then report the result.
///
/// Guarantee: on `Ok`, the process is not dumpable (on Linux; see [`Hardening::unavailable`]
/// elsewhere) and its core limit is 0 (soft and hard), as the returned [`Hardening`] confirms
/// from the kernel's answers. Call it first in `main`, before
/// any secret is read and before any thread or child is started.
///
/// # Errors
///
/// `io` when `prctl(PR_SET_DUMPABLE)` or `setrlimit(RLIMIT_CORE)` fails, or when the kernel
/// does not report the state they set: the caller should not go on unprotected.
///
/// # References
///
/// - [`prctl(PR_SET_DUMPABLE)`](https://man7.org/linux/man-pages/man2/PR_SET_DUMPABLE.2const.html)
/// - [`setrlimit(RLIMIT_CORE)`](https://man7.org/linux/man-pages/man2/setrlimit.2.html)
/// - [`proc_pid(5)`](https://man7.org/linux/man-pages/man5/proc_pid.5.html), on who owns
///   `/proc/<pid>/` entries of a process that is not dumpable
#[doc(alias = "PR_SET_DUMPABLE")]
#[doc(alias = "RLIMIT_CORE")]
pub fn harden() -> Result<Hardening> {
    use rustix::process::{Resource, Rlimit};
    #[cfg(target_os = "linux")]
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(|e| Error::io("prctl", "PR_SET_DUMPABLE 0", e))?;
    let zero = Rlimit {
        current: Some(0),
        maximum: Some(0),
    };
    rustix::process::setrlimit(Resource::Core, zero)
        .map_err(|e| Error::io("setrlimit", "RLIMIT_CORE 0 0", e))?;
    let status = status();
    if !((status.not_dumpable || UNAVAILABLE.is_some()) && status.no_core_files) {
        return Err(Error::io(
            "prctl",
            "PR_GET_DUMPABLE",
            std::io::Error::other("the process is still dumpable or may write core files"),
        ));
    }
    Ok(status)
}

/// What the kernel says about this process now: dumpable or not, its core limit, its user.
///
/// Guarantee: observes only; changes nothing. A state that cannot be read is reported as not
/// protected.
#[doc(alias = "PR_GET_DUMPABLE")]
pub fn status() -> Hardening {
    use rustix::process::Resource;
    let core = rustix::process::getrlimit(Resource::Core);
    Hardening {
        not_dumpable: not_dumpable(),
        no_core_files: core.current == Some(0) && core.maximum == Some(0),
        running_as_root: running_as_root(),
        unavailable: UNAVAILABLE,
    }
}

/// `PR_GET_DUMPABLE` is 0.
#[cfg(target_os = "linux")]
fn not_dumpable() -> bool {
    use rustix::process::DumpableBehavior;
    matches!(
        rustix::process::dumpable_behavior(),
        Ok(DumpableBehavior::NotDumpable)
    )
}

/// No such state on this system.
#[cfg(not(target_os = "linux"))]
fn not_dumpable() -> bool {
    false
}

/// Whether the effective user id of this process is 0.
///
/// Guarantee: the library's one answer to "is this root", which the adapters only print.
#[doc(alias = "geteuid")]
pub fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}
