//! A seccomp filter for what the namespaces and Landlock leave reachable.
//!
//! The command's namespaces already hide the gateway, other processes, SysV IPC and every
//! path outside its root. What remains are kernel interfaces that act beyond a namespace or
//! widen the kernel's attack surface. The filter refuses those system calls with `EPERM` (and
//! `clone3` with `ENOSYS`, which makes C libraries fall back to `clone`, whose flags the filter
//! can inspect):
//!
//! | system call | refused when |
//! |---|---|
//! | `socket` | always without network; with network, for anything but `AF_INET`/`AF_INET6` |
//! | `socketpair` | for datagram (and raw) sockets, which can still be sent to a socket by path |
//! | `clone` | with any `CLONE_NEW*` namespace flag, or `CLONE_PARENT` |
//! | `clone3`, `unshare`, `setns` | always (no nested namespaces) |
//! | `ioctl` | `TIOCSTI` and `TIOCLINUX`: typing into a terminal |
//! | `io_uring_setup`/`_enter`/`_register` | always (it would bypass this filter) |
//! | `keyctl`, `add_key`, `request_key` | always |
//! | `bpf`, `perf_event_open`, `userfaultfd` | always |
//! | `syslog` | always (the kernel log) |
//! | `chmod`, `fchmod`, `fchmodat`, `fchmodat2` | when the mode carries `S_ISUID` or `S_ISGID` |
//! | `open`, `openat`, `creat`, `mkdir`, `mkdirat` | when the mode carries `S_ISUID` or `S_ISGID` |
//! | `mknod`, `mknodat` | likewise, and for anything but a regular file: no device, FIFO or socket node |
//! | `openat2` | always, with `ENOSYS` (its mode is behind a pointer the filter cannot read; C libraries do not use it for `open`) |
//!
//! The mode rules are what keeps a command from leaving a set-uid or set-gid program, a device
//! node or a FIFO in a read-write grant for someone to run or open outside the sandbox; `bind`
//! of a socket file needs a `socket` the filter already refuses.
//!
//! Stream and sequenced-packet `socketpair`s stay allowed: they only connect a process to
//! itself. On x86_64 every x32 system call is refused (`EPERM`), by one check ahead of the
//! rules: the command is an x86_64 program, and no rule above needs a second copy for the x32
//! numbers of the same calls (which would double the program the kernel compiles for each
//! command and runs at each system call).
//!
//! The two programs (with and without network) are compiled once per process.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use std::sync::OnceLock;

use crate::error::{Error, Result};

/// The two compiled filters: calls refused with `EPERM`, and `clone3` refused with `ENOSYS`.
pub(crate) struct Filters {
    pub(crate) eperm: BpfProgram,
    pub(crate) enosys: BpfProgram,
}

#[cfg(target_arch = "x86_64")]
const ARCH: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: TargetArch = TargetArch::aarch64;
#[cfg(target_arch = "riscv64")]
const ARCH: TargetArch = TargetArch::riscv64;

/// The x32 ABI marker on x86_64 (its system calls carry the same numbers with this bit set).
#[cfg(target_arch = "x86_64")]
pub(crate) const X32: u32 = 0x4000_0000;

/// `ioctl` requests that push input into a terminal (the same numbers on every architecture
/// above).
const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541C;

const CLONE_FLAGS_REFUSED: [u64; 8] = [
    libc::CLONE_PARENT as u64,
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
];

/// The filters for a command with or without network access, compiled on first use.
///
/// # Errors
///
/// `sandbox_unavailable` when they cannot be compiled for this architecture.
pub(crate) fn filters(network: bool) -> Result<&'static Filters> {
    static WITH: OnceLock<std::result::Result<Filters, String>> = OnceLock::new();
    static WITHOUT: OnceLock<std::result::Result<Filters, String>> = OnceLock::new();
    let cell = if network { &WITH } else { &WITHOUT };
    cell.get_or_init(|| compile_filters(network).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|why| Error::SandboxUnavailable { why: why.clone() })
}

/// System calls refused whatever their arguments.
const ALWAYS_REFUSED: [i64; 12] = [
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_syslog,
];

/// The set-user-ID and set-group-ID mode bits.
const SET_ID: [u64; 2] = [libc::S_ISUID as u64, libc::S_ISGID as u64];
/// `fchmodat2(2)` (Linux 6.6), numbered alike on every architecture.
const SYS_FCHMODAT2: i64 = 452;

/// The system calls that take a mode, with the index of the mode argument.
#[cfg(target_arch = "x86_64")]
const MODE_CALLS: &[(i64, u8)] = &[
    (libc::SYS_chmod, 1),
    (libc::SYS_fchmod, 1),
    (libc::SYS_fchmodat, 2),
    (SYS_FCHMODAT2, 2),
    (libc::SYS_open, 2),
    (libc::SYS_openat, 3),
    (libc::SYS_creat, 1),
    (libc::SYS_mkdir, 1),
    (libc::SYS_mkdirat, 2),
];
#[cfg(not(target_arch = "x86_64"))]
const MODE_CALLS: &[(i64, u8)] = &[
    (libc::SYS_fchmod, 1),
    (libc::SYS_fchmodat, 2),
    (SYS_FCHMODAT2, 2),
    (libc::SYS_openat, 3),
    (libc::SYS_mkdirat, 2),
];
/// `mknod` calls, with the index of the mode argument.
#[cfg(target_arch = "x86_64")]
const MKNOD_CALLS: &[(i64, u8)] = &[(libc::SYS_mknod, 1), (libc::SYS_mknodat, 2)];
#[cfg(not(target_arch = "x86_64"))]
const MKNOD_CALLS: &[(i64, u8)] = &[(libc::SYS_mknodat, 2)];
/// The node types `mknod` may not make: every one but a regular file.
const NODE_TYPES_REFUSED: [u64; 5] = [
    libc::S_IFCHR as u64,
    libc::S_IFBLK as u64,
    libc::S_IFIFO as u64,
    libc::S_IFSOCK as u64,
    libc::S_IFDIR as u64,
];

/// Rules keyed by system call number: a call matching any rule gets the filter's errno.
type Rules = BTreeMap<i64, Vec<SeccompRule>>;

fn unavailable(e: seccompiler::BackendError) -> Error {
    Error::SandboxUnavailable {
        why: format!("seccomp filter: {e}"),
    }
}

/// A rule matching when argument `arg` compared (`len` bits) by `op` with `value` holds.
fn rule(arg: u8, len: SeccompCmpArgLen, op: SeccompCmpOp, value: u64) -> Result<SeccompRule> {
    let condition = SeccompCondition::new(arg, len, op, value).map_err(unavailable)?;
    SeccompRule::new(vec![condition]).map_err(unavailable)
}

fn compile_filters(network: bool) -> Result<Filters> {
    let mut eperm = Rules::new();
    eperm.insert(libc::SYS_socket, socket_rules(network)?);
    // socketpair(domain, type, …): SOCK_DGRAM (2) and SOCK_RAW (3), whatever the flags.
    let socketpair = [libc::SOCK_DGRAM, libc::SOCK_RAW].map(|kind| {
        rule(
            1,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(0xf),
            kind as u64,
        )
    });
    eperm.insert(
        libc::SYS_socketpair,
        socketpair.into_iter().collect::<Result<_>>()?,
    );
    // ioctl(fd, request, …): the requests that push input into a terminal (the kernel
    // compares the request as 32 bits).
    let ioctl = [TIOCSTI, TIOCLINUX]
        .map(|request| rule(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, request));
    eperm.insert(libc::SYS_ioctl, ioctl.into_iter().collect::<Result<_>>()?);
    let clone = CLONE_FLAGS_REFUSED.map(|flag| {
        rule(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(flag),
            flag,
        )
    });
    eperm.insert(libc::SYS_clone, clone.into_iter().collect::<Result<_>>()?);
    for nr in ALWAYS_REFUSED {
        eperm.insert(nr, Vec::new());
    }
    // A mode with a set-id bit (the kernel compares modes as 32 bits).
    let set_id = |arg: u8| {
        SET_ID
            .map(|bit| {
                rule(
                    arg,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::MaskedEq(bit),
                    bit,
                )
            })
            .into_iter()
            .collect::<Result<Vec<_>>>()
    };
    for &(nr, arg) in MODE_CALLS {
        eperm.insert(nr, set_id(arg)?);
    }
    for &(nr, arg) in MKNOD_CALLS {
        let mut rules = set_id(arg)?;
        for kind in NODE_TYPES_REFUSED {
            let is_kind = SeccompCmpOp::MaskedEq(libc::S_IFMT as u64);
            rules.push(rule(arg, SeccompCmpArgLen::Dword, is_kind, kind)?);
        }
        eperm.insert(nr, rules);
    }
    let mut enosys = Rules::new();
    enosys.insert(libc::SYS_clone3, Vec::new());
    enosys.insert(libc::SYS_openat2, Vec::new());
    Ok(Filters {
        eperm: refusing_x32(compile(eperm, libc::EPERM)?),
        enosys: compile(enosys, libc::ENOSYS)?,
    })
}

/// `socket(domain, …)`: refused always without network; with it, for every domain but
/// `AF_INET` and `AF_INET6`.
fn socket_rules(network: bool) -> Result<Vec<SeccompRule>> {
    if !network {
        return Ok(Vec::new());
    }
    let not = |domain: i32| {
        SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::Ne, domain as u64)
            .map_err(unavailable)
    };
    Ok(vec![
        SeccompRule::new(vec![not(libc::AF_INET)?, not(libc::AF_INET6)?]).map_err(unavailable)?,
    ])
}

/// `program` behind a check that refuses every x32 system call with `EPERM` (x86_64; other
/// architectures have no second ABI of that kind, and `program` stays as it is).
///
/// The check reads the architecture first: a call of another architecture (`int 0x80`, i386)
/// goes on to `program`, whose own first check kills the process.
#[cfg(target_arch = "x86_64")]
fn refusing_x32(program: BpfProgram) -> BpfProgram {
    use libc::{BPF_ABS, BPF_JEQ, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_RET, BPF_W};
    use seccompiler::sock_filter;
    /// `AUDIT_ARCH_X86_64`: `EM_X86_64`, 64-bit, little-endian.
    const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
    /// Where `struct seccomp_data` holds the call's number and its architecture.
    const NR: u32 = 0;
    const ARCH: u32 = 4;
    let op = |code: u32, k: u32, jt: u8, jf: u8| sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let mut checked = vec![
        op(BPF_LD | BPF_W | BPF_ABS, ARCH, 0, 0),
        // Another architecture: on to the program (three instructions on).
        op(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 3),
        op(BPF_LD | BPF_W | BPF_ABS, NR, 0, 0),
        // Not x32: on to the program (one instruction on).
        op(BPF_JMP | BPF_JSET | BPF_K, X32, 0, 1),
        op(
            BPF_RET | BPF_K,
            libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
            0,
            0,
        ),
    ];
    checked.extend(program);
    checked
}

#[cfg(not(target_arch = "x86_64"))]
fn refusing_x32(program: BpfProgram) -> BpfProgram {
    program
}

/// A program allowing everything but what `rules` match, which fails with `errno`.
fn compile(rules: Rules, errno: i32) -> Result<BpfProgram> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        ARCH,
    )
    .map_err(unavailable)?;
    filter.try_into().map_err(unavailable)
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use rustix::io::Errno;

    /// Under the filter an x32 system call is refused with `EPERM` whatever it is (without the
    /// filter it fails with `ENOSYS` where the kernel has no x32, and runs where it has), and
    /// the same call by its native number still runs. The filter is installed on a thread of
    /// the test's own, which ends with it.
    #[test]
    fn every_x32_system_call_is_refused_and_native_ones_are_not() {
        let filters = super::filters(false).expect("the filters compile");
        let (x32, native) = std::thread::spawn(move || {
            rustix::thread::set_no_new_privs(true).expect("no_new_privs");
            seccompiler::apply_filter(&filters.eperm).expect("the filter installs");
            (super::super::sys::x32_getpid(), rustix::process::getpid())
        })
        .join()
        .expect("the filtered thread");
        assert_eq!(x32, Err(Errno::PERM));
        assert_eq!(native, rustix::process::getpid());
    }
}
