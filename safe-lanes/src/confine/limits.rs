//! What confined commands may take of the machine, so the gateway outlives them: memory for
//! their private `/tmp`s, how many processes each may have, and who the kernel kills first
//! when memory runs out.
//!
//! - **Scratch.** Each command's `/tmp` (its `HOME` and `TMPDIR`) is a `tmpfs`: shared memory
//!   the kernel charges to no process, so a command filling it would make the gateway look
//!   like the largest process to the OOM killer. All the private `/tmp`s of one process share
//!   one budget ([`set_scratch_budget`]; by default a quarter of the machine's memory): each
//!   command's `tmpfs` is sized, when it starts, at [`SCRATCH_SIZE`] or what is left of the
//!   budget if less (at least [`MIN_SCRATCH`]), and gives it back when it ends. A command past
//!   its size gets `ENOSPC`. The budget can be overrun by at most `MIN_SCRATCH` per running
//!   command.
//! - **OOM score.** Every confined command, and everything it starts, runs with
//!   `oom_score_adj` 1000: when memory runs out, the kernel kills a command, never the gateway
//!   first.
//! - **Processes.** Each command may have at most [`MAX_PROCESSES`] processes and threads: a
//!   fork bomb stays bounded. For a gateway running as an ordinary user, `RLIMIT_NPROC` is set
//!   inside the command's user namespace, where it counts that namespace's processes only. The
//!   kernel does not apply `RLIMIT_NPROC` to root, so for a gateway running as root the
//!   command's PID namespace allows no more process ids than that: from Linux 6.14 each PID
//!   namespace has a `pid_max` of its own, which the command's first process sets before it
//!   runs anything (ADR 0024). It first checks that the file it opens is its namespace's, not
//!   the machine's (whose `pid_max` it would otherwise lower for everyone): a kernel without
//!   the feature shows it the very file the gateway holds open, and the command is refused.
//!   On older kernels (or with `SAFE_LANES_PROCESS_LIMIT=cgroup`) each command gets a `pids`
//!   cgroup of its own below the gateway's (cgroup v1's `pids` hierarchy, or v2 where the
//!   gateway's cgroup enables `pids` for its children), which costs a move into it: up to an
//!   RCU grace period, milliseconds. Where neither works, commands are refused
//!   (`sandbox_unavailable`), never run unbounded.

use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{Mode, OFlags};

use crate::beneath::{Ambient, Anchor, Symlinks};
use crate::error::{Error, Result};
use crate::fd::{ReadAt, write_all};
use crate::input::{Name, RelPath};

/// The largest private `/tmp` of one command.
pub const SCRATCH_SIZE: u64 = 1 << 30;
/// The smallest private `/tmp` a command gets, even with the budget spent.
pub const MIN_SCRATCH: u64 = 1 << 20;
/// The most processes and threads one confined command may have at once.
pub const MAX_PROCESSES: u64 = 512;
// A PID namespace's `pid_max` is `MAX_PROCESSES + 1`, and the kernel refuses one below 301.
const _: () = assert!(MAX_PROCESSES + 1 >= 301);

/// The budget: `None` until set or first used (then a quarter of the machine's memory).
static BUDGET: Mutex<Option<Budget>> = Mutex::new(None);

#[derive(Debug)]
struct Budget {
    total: u64,
    used: u64,
}

/// Set the budget all private `/tmp`s of this process's confined commands share, in bytes
/// (commands already running keep what they have).
pub fn set_scratch_budget(bytes: u64) {
    let mut budget = crate::sync::lock(&BUDGET);
    let used = budget.as_ref().map_or(0, |b| b.used);
    *budget = Some(Budget { total: bytes, used });
}

/// The budget in force: what [`set_scratch_budget`] set, or a quarter of the machine's memory.
pub(crate) fn scratch_budget() -> u64 {
    let mut budget = crate::sync::lock(&BUDGET);
    budget.get_or_insert_with(default_budget).total
}

fn default_budget() -> Budget {
    Budget {
        total: machine_memory() / 4,
        used: 0,
    }
}

/// The machine's memory in bytes (`sysinfo`), or 4 GiB when it cannot be told.
pub(crate) fn machine_memory() -> u64 {
    let info = rustix::system::sysinfo();
    (info.totalram as u64)
        .saturating_mul(u64::from(info.mem_unit.max(1)))
        .max(1)
}

/// One command's share of the budget, given back when dropped.
#[derive(Debug)]
pub(super) struct Scratch {
    bytes: u64,
}

impl Scratch {
    /// Take a command's share: [`SCRATCH_SIZE`], or what is left if less, at least
    /// [`MIN_SCRATCH`].
    pub(super) fn reserve() -> Self {
        let mut budget = crate::sync::lock(&BUDGET);
        let budget = budget.get_or_insert_with(default_budget);
        let left = budget.total.saturating_sub(budget.used);
        let bytes = SCRATCH_SIZE.min(left).max(MIN_SCRATCH);
        budget.used += bytes;
        Self { bytes }
    }

    /// The `tmpfs` `size` option for it.
    pub(super) fn size_option(&self) -> CString {
        CString::new(format!("{}k", self.bytes.div_ceil(1024))).unwrap_or_default()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(budget) = crate::sync::lock(&BUDGET).as_mut() {
            budget.used = budget.used.saturating_sub(self.bytes);
        }
    }
}

/// Where the process limit of commands comes from.
#[derive(Debug)]
pub(super) enum ProcessLimit {
    /// `RLIMIT_NPROC` in the command's user namespace (an ordinary user).
    Rlimit,
    /// `pid_max` of the command's PID namespace (root, Linux 6.14 and later).
    PidMax(&'static HostPidMax),
    /// A `pids` cgroup of the command's own; the child moves itself into it by writing `0` to
    /// this `cgroup.procs`.
    Cgroup(CommandCgroup),
}

/// What the child of a command does to bound its processes: a [`ProcessLimit`] as the plan
/// carries it into the child.
#[derive(Debug)]
pub(super) enum ProcessBound {
    /// Set `RLIMIT_NPROC` in the new user namespace.
    Rlimit,
    /// Once PID 1 of the new PID namespace, write `value` to `/proc/sys/kernel/pid_max` if the
    /// file opened there is not the machine's, whose identity is `host`.
    PidMax {
        /// `(device, inode)` of the machine's `pid_max`, held open by the gateway
        /// ([`HostPidMax`]), so a kernel without per-namespace `pid_max` shows the child
        /// this very file.
        host: (u64, u64),
        /// [`MAX_PROCESSES`] + 1: ids 1 to [`MAX_PROCESSES`].
        value: CString,
    },
    /// Before the new namespaces, write `0` to this `cgroup.procs`.
    Cgroup(OwnedFd),
}

/// The machine's `/proc/sys/kernel/pid_max`, opened read-only once per process and held open
/// for its lifetime: while it is open, its entry in the kernel's cache stays, so that a child
/// on a kernel without per-namespace `pid_max` finds this same file, and refuses to write it.
#[derive(Debug)]
pub(super) struct HostPidMax {
    _held: OwnedFd,
    identity: (u64, u64),
}

/// The environment variable that makes a root gateway use `pids` cgroups even where the PID
/// namespace's `pid_max` would do (`SAFE_LANES_PROCESS_LIMIT=cgroup`).
pub const PROCESS_LIMIT_VARIABLE: &str = "SAFE_LANES_PROCESS_LIMIT";

/// The first kernel whose PID namespaces have a `pid_max` of their own.
const PID_MAX_PER_NAMESPACE: (u32, u32) = (6, 14);

impl HostPidMax {
    /// The machine's `pid_max`, held open, when the kernel gives each PID namespace its own
    /// (Linux 6.14 and later) and the file is on a writable mount; `None` otherwise (then
    /// `pids` cgroups bound a root gateway's commands).
    fn get() -> Option<&'static Self> {
        static HELD: std::sync::OnceLock<Option<HostPidMax>> = std::sync::OnceLock::new();
        HELD.get_or_init(|| {
            let release = rustix::system::uname();
            let release = release.release().to_str().ok()?;
            if kernel_version(release)? < PID_MAX_PER_NAMESPACE {
                return None;
            }
            let why = Ambient::because("the machine's pid_max, from the system");
            let dir = Anchor::open_ambient(Path::new("/proc/sys/kernel"), why).ok()?;
            let held = dir
                .open_read(RelPath::new("pid_max").ok()?, Symlinks::Deny)
                .ok()?;
            let mount = rustix::fs::fstatvfs(&held).ok()?;
            if mount.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY) {
                return None;
            }
            let identity = crate::beneath::identity(held.as_fd()).ok()?;
            Some(HostPidMax {
                _held: held,
                identity,
            })
        })
        .as_ref()
    }
}

/// `(major, minor)` of a kernel release such as `6.18.44-fc-v1045`.
fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(['.', '-', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts
        .next()?
        .trim_end_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .ok()?;
    Some((major, minor))
}

/// Whether the environment asks for `pids` cgroups ([`PROCESS_LIMIT_VARIABLE`]).
fn cgroups_asked_for() -> bool {
    std::env::var_os(PROCESS_LIMIT_VARIABLE).is_some_and(|v| v == "cgroup")
}

/// How this process bounds its commands' processes, in words (for `doctor`).
pub(super) fn process_limit_mechanism() -> &'static str {
    if !is_kernel_root() {
        "RLIMIT_NPROC in its user namespace"
    } else if !cgroups_asked_for() && HostPidMax::get().is_some() {
        "pid_max of its PID namespace"
    } else {
        "a pids cgroup"
    }
}

/// A command's `pids` cgroup, removed when dropped (once its processes are gone).
#[derive(Debug)]
pub(super) struct CommandCgroup {
    parent: Anchor,
    name: String,
    /// `cgroup.procs` of it, open for writing.
    pub(super) procs: OwnedFd,
}

impl Drop for CommandCgroup {
    fn drop(&mut self) {
        // The namespace's last processes may take a moment to be reaped.
        for _ in 0..50 {
            match Name::new(&self.name).and_then(|n| self.parent.remove_dir(n)) {
                Ok(()) => return,
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOENT.raw_os_error()) => {
                    return;
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
        tracing::warn!(cgroup = %self.name, "could not remove a command's pids cgroup");
    }
}

impl ProcessLimit {
    /// The process limit for one command.
    ///
    /// # Errors
    ///
    /// `sandbox_unavailable` when the gateway runs as root and no `pids` cgroup can be made.
    pub(super) fn for_command() -> Result<Self> {
        if !is_kernel_root() {
            return Ok(Self::Rlimit);
        }
        if !cgroups_asked_for()
            && let Some(host) = HostPidMax::get()
        {
            return Ok(Self::PidMax(host));
        }
        let parent = pids_cgroup().map_err(|why| Error::SandboxUnavailable {
            why: format!(
                "as root, each command's process limit needs a pids cgroup below the gateway's, \
                 and none can be made ({why}); run the gateway as an ordinary user"
            ),
        })?;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let me = rustix::process::getpid().as_raw_nonzero().get();
        sweep(&parent, me);
        let name = format!("safe-lanes.{me}.{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let unavailable = |e: Error| Error::SandboxUnavailable {
            why: format!("a command's pids cgroup could not be made: {e}"),
        };
        parent
            .create_dir(Name::new(&name)?, 0o755)
            .map_err(unavailable)?;
        let made = (|| {
            let dir = parent.open_dir(RelPath::new(&name)?, Symlinks::Deny)?;
            let max = dir.open(
                RelPath::new("pids.max")?,
                OFlags::WRONLY,
                Mode::empty(),
                Symlinks::Deny,
            )?;
            write_all(max.as_fd(), MAX_PROCESSES.to_string().as_bytes())
                .map_err(|e| Error::io("write", "pids.max", e))?;
            dir.open(
                RelPath::new("cgroup.procs")?,
                OFlags::WRONLY,
                Mode::empty(),
                Symlinks::Deny,
            )
        })();
        match made {
            Ok(procs) => Ok(Self::Cgroup(CommandCgroup {
                parent,
                name,
                procs,
            })),
            Err(e) => {
                let _ = Name::new(&name).and_then(|n| parent.remove_dir(n));
                Err(unavailable(e))
            }
        }
    }
}

impl ProcessLimit {
    /// What the command's child does to stay within this limit.
    ///
    /// # Errors
    ///
    /// `io` if the cgroup's `cgroup.procs` cannot be duplicated for the child.
    pub(super) fn bound(&self) -> Result<ProcessBound> {
        Ok(match self {
            Self::Rlimit => ProcessBound::Rlimit,
            Self::PidMax(host) => ProcessBound::PidMax {
                host: host.identity,
                value: CString::new((MAX_PROCESSES + 1).to_string()).unwrap_or_default(),
            },
            Self::Cgroup(cgroup) => ProcessBound::Cgroup(
                rustix::io::dup(&cgroup.procs).map_err(|e| Error::io("dup", "cgroup.procs", e))?,
            ),
        })
    }
}

/// Whether this process is root as the kernel's process accounting sees it (uid 0 of the
/// initial user namespace), which `RLIMIT_NPROC` does not bind: effective uid 0, mapped to 0
/// by the user namespace it is in. Root of a user namespace of its own (mapped to an ordinary
/// user) is bound like that user.
pub(crate) fn is_kernel_root() -> bool {
    if !rustix::process::geteuid().is_root() {
        return false;
    }
    let why = Ambient::because("the process's own user namespace mapping, from the system");
    let map = Anchor::open_ambient(Path::new("/proc/self"), why).and_then(|dir| {
        let fd = dir.open_read(RelPath::new("uid_map")?, Symlinks::Deny)?;
        let mut text = String::new();
        ReadAt::new(fd.as_fd())
            .take(1 << 16)
            .read_to_string(&mut text)
            .map_err(|e| Error::io("read", "uid_map", e))?;
        Ok(text)
    });
    // Unreadable: assume root (the stricter limit path).
    map.map_or(true, |map| {
        map.lines().any(|line| {
            let mut fields = line.split_whitespace();
            (fields.next(), fields.next()) == (Some("0"), Some("0"))
        })
    })
}

/// Remove the command cgroups a process that is gone left (it was killed mid-command).
fn sweep(parent: &Anchor, me: i32) {
    let Ok(entries) = parent.entries() else {
        return;
    };
    for (name, _) in entries {
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("safe-lanes.")) else {
            continue;
        };
        let Some(pid) = rest.split('.').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        let alive = pid == me
            || rustix::process::Pid::from_raw(pid)
                .is_some_and(|p| rustix::process::test_kill_process(p).is_ok());
        if !alive {
            let _ = Name::new(&name).and_then(|n| parent.remove_dir(n));
        }
    }
}

/// The gateway's own cgroup in a hierarchy with the `pids` controller, where children with a
/// `pids.max` can be made: cgroup v1's `pids` hierarchy, or cgroup v2 where the gateway's
/// cgroup enables `pids` for its children. Found from `/proc/self/cgroup` and
/// `/proc/self/mountinfo`.
fn pids_cgroup() -> std::result::Result<Anchor, String> {
    let why = Ambient::because("the gateway's own cgroup, from the system");
    let read = |path: &str| -> std::result::Result<String, String> {
        let (dir, name) = path.rsplit_once('/').ok_or("a path")?;
        let dir = Anchor::open_ambient(Path::new(dir), why).map_err(|e| e.to_string())?;
        let fd = dir
            .open_read(
                RelPath::new(name).map_err(|e| e.to_string())?,
                Symlinks::Deny,
            )
            .map_err(|e| e.to_string())?;
        let mut text = String::new();
        ReadAt::new(fd.as_fd())
            .take(1 << 20)
            .read_to_string(&mut text)
            .map_err(|e| e.to_string())?;
        Ok(text)
    };
    let cgroups = read("/proc/self/cgroup")?;
    let mounts = read("/proc/self/mountinfo")?;
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let v1 = controllers.split(',').any(|c| c == "pids");
        let v2 = controllers.is_empty();
        if !v1 && !v2 {
            continue;
        }
        let Some(mount) = mount_of(&mounts, v1) else {
            continue;
        };
        let dir = mount.join(path.trim_start_matches('/'));
        let Ok(anchor) = Anchor::open_ambient(&dir, why) else {
            continue;
        };
        if v2 {
            let enabled = read(&format!("{}/cgroup.subtree_control", dir.display()))
                .is_ok_and(|c| c.split_whitespace().any(|c| c == "pids"));
            if !enabled {
                continue;
            }
        }
        return Ok(anchor);
    }
    Err("no pids controller the gateway may use".into())
}

/// Where the cgroup hierarchy is mounted: v1's with the `pids` controller (`v1`), or v2's.
fn mount_of(mountinfo: &str, v1: bool) -> Option<PathBuf> {
    for line in mountinfo.lines() {
        let (left, right) = line.split_once(" - ")?;
        let mut right = right.split(' ');
        let (fstype, _source, options) = (right.next()?, right.next()?, right.next().unwrap_or(""));
        let mount_point = left.split(' ').nth(4)?;
        let matches = if v1 {
            fstype == "cgroup" && options.split(',').any(|o| o == "pids")
        } else {
            fstype == "cgroup2"
        };
        if matches {
            return Some(PathBuf::from(unescape(mount_point)));
        }
    }
    None
}

/// A `mountinfo` path with its octal escapes (`\040` for a space) undone.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 4 <= bytes.len()
            && bytes[i + 1..i + 4].iter().all(u8::is_ascii_digit)
        {
            let value =
                (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(value);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_releases_are_read_as_major_and_minor() {
        assert_eq!(kernel_version("6.18.44-fc-v1045"), Some((6, 18)));
        assert_eq!(kernel_version("6.14.0"), Some((6, 14)));
        assert_eq!(kernel_version("6.9-rc3"), Some((6, 9)));
        assert_eq!(kernel_version("5.15.0-91-generic"), Some((5, 15)));
        assert_eq!(kernel_version("6.14+"), Some((6, 14)));
        assert_eq!(kernel_version("4.4.0"), Some((4, 4)));
        assert_eq!(kernel_version("garbage"), None);
        assert_eq!(kernel_version(""), None);
        // Compared as numbers, not text: 6.9 is before 6.14.
        assert!(kernel_version("6.9.1").unwrap() < PID_MAX_PER_NAMESPACE);
        assert!(kernel_version("6.14.1").unwrap() >= PID_MAX_PER_NAMESPACE);
    }

    /// The premise of the child's check: the file held open is the one this process finds
    /// again (the machine's), and a process in a new PID namespace finds another one.
    #[test]
    fn a_new_pid_namespace_shows_a_pid_max_of_its_own_and_the_machines_stays_the_same_file() {
        let release = rustix::system::uname();
        let version = kernel_version(release.release().to_str().unwrap()).unwrap();
        let Some(held) = HostPidMax::get() else {
            assert!(
                version < PID_MAX_PER_NAMESPACE,
                "Linux {version:?} has a pid_max per PID namespace, but it was not found usable"
            );
            return;
        };
        let again = rustix::fs::open(
            "/proc/sys/kernel/pid_max",
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
        assert_eq!(
            crate::beneath::identity(again.as_fd()).unwrap(),
            held.identity
        );
        let out = std::process::Command::new("unshare")
            .args([
                "--user",
                "--map-root-user",
                "--pid",
                "--fork",
                "--mount-proc",
            ])
            .args(["stat", "-Lc", "%d %i", "/proc/sys/kernel/pid_max"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().unwrap());
        let theirs = (fields.next().unwrap(), fields.next().unwrap());
        assert_ne!(
            theirs, held.identity,
            "the new namespace saw the machine's pid_max"
        );
    }

    #[test]
    fn the_pid_max_written_allows_exactly_the_limit() {
        // Ids 1 to MAX_PROCESSES.
        let held = Box::leak(Box::new(HostPidMax {
            _held: rustix::fs::open("/", OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).unwrap(),
            identity: (1, 2),
        }));
        let ProcessBound::PidMax { value, host } = ProcessLimit::PidMax(held).bound().unwrap()
        else {
            panic!("not a pid_max bound");
        };
        assert_eq!(value.to_str().unwrap(), (MAX_PROCESSES + 1).to_string());
        assert_eq!(host, (1, 2));
    }
}
