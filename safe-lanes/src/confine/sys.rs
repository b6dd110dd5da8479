//! The system calls that neither `std` nor `rustix` offers safely, as small wrappers: one of
//! the library's two modules where `unsafe` is allowed (the other, [`super::pre_exec`], is the
//! only caller of the `unsafe fn`s here).
//!
//! A wrapper whose caller must uphold something is an `unsafe fn` with a `# Safety` section,
//! as in `std`; the others are safe. None of them allocates, on any path, so that every one
//! can be called between `fork` and `exec`.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::process::Command;

use rustix::io::Errno;
use rustix::process::{Pid, WaitStatus};
use rustix::thread::UnshareFlags;

/// The `errno` of the system call that just failed.
fn last_errno() -> Errno {
    Errno::from_raw_os_error(
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL),
    )
}

/// Run `in_child` in `command`'s child, after `fork` and right before `exec`
/// (`std::os::unix::process::CommandExt::pre_exec`).
///
/// An error `in_child` returns stops the child before `exec`; `spawn` returns it.
///
/// # Safety
///
/// `in_child` runs in a copy of a process that may have had other threads, in which locks
/// (the allocator's among them) may be held by threads that do not exist there. So it must
/// only do async-signal-safe work: system calls on values prepared in the parent (which it
/// owns or borrows), plain values on the stack. It must not allocate or free memory, take a
/// lock, or close or reuse a descriptor something else owns; an `io::Error` it returns must
/// be built from a raw OS error (`from_raw_os_error`), which does not allocate.
#[doc(alias = "pre_exec")]
pub(crate) unsafe fn before_exec<F>(command: &mut Command, in_child: F)
where
    F: FnMut() -> io::Result<()> + Send + Sync + 'static,
{
    use std::os::unix::process::CommandExt;
    // SAFETY: `pre_exec`'s contract is this function's, passed on to the caller.
    unsafe {
        command.pre_exec(in_child);
    }
}

/// The kernel's Landlock ABI version (`landlock_create_ruleset(NULL, 0,
/// LANDLOCK_CREATE_RULESET_VERSION)`), or `None` where Landlock is not built in or not
/// enabled. Creates nothing and restricts nothing.
pub(crate) fn landlock_abi() -> Option<u32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: a raw system call with a null pointer, a zero size and a flag: the kernel reads
    // no memory of ours and returns a number.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0 as libc::size_t,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(version).ok().filter(|&v| v > 0)
}

/// `getpid` by its x32 number (x86_64): how the seccomp filter's x32 check is tested.
#[cfg(all(test, target_arch = "x86_64"))]
pub(crate) fn x32_getpid() -> rustix::io::Result<i64> {
    let number = i64::from(super::syscalls::X32) | libc::SYS_getpid;
    // SAFETY: `getpid` takes no argument and touches no memory, by any number it is called.
    let pid = unsafe { libc::syscall(number) };
    if pid >= 0 { Ok(pid) } else { Err(last_errno()) }
}

/// `close_range(first, ~0, CLOSE_RANGE_CLOEXEC)`: mark every descriptor from `first` up
/// close-on-exec, so that `exec` leaves them behind. Nothing is closed before then.
pub(crate) fn cloexec_from(first: u32) -> rustix::io::Result<()> {
    // SAFETY: a raw system call with plain integer arguments that only sets a flag on
    // descriptors: every owner's descriptor stays open and the same until `exec`.
    let done = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC as libc::c_uint,
        )
    };
    if done == 0 { Ok(()) } else { Err(last_errno()) }
}

/// `close_range(first, ~0, 0)`: close every descriptor from `first` up.
///
/// # Safety
///
/// Those descriptors may be owned by values (`OwnedFd`, `File`, `std`'s own pipes) that
/// would then use or close a number reused since: after the call, the process must not use,
/// close or drop anything that owns one of them. A process that only waits for its child and
/// exits (through [`exit`] or [`exit_like`]) keeps to this.
pub(crate) unsafe fn close_from(first: u32) -> rustix::io::Result<()> {
    // SAFETY: a raw system call with plain integer arguments; the descriptors it closes are
    // the caller's to give up, by this function's contract.
    let done = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            libc::c_uint::MAX,
            0 as libc::c_uint,
        )
    };
    if done == 0 { Ok(()) } else { Err(last_errno()) }
}

/// `close_range` of every descriptor from 3 up but the two of `keep` (in any order): what a
/// process that never `exec`s keeps of its parent's (`std` learns of a failed `exec` through a
/// pipe it must not hold).
///
/// # Safety
///
/// As [`close_from`]: after the call, the process must use nothing that owns a descriptor from
/// 3 up but those of `keep`, and drop nothing that does.
pub(crate) unsafe fn close_all_but(keep: [i32; 2]) -> rustix::io::Result<()> {
    let (low, high) = if keep[0] < keep[1] {
        (keep[0], keep[1])
    } else {
        (keep[1], keep[0])
    };
    let ranges = [(3, low - 1), (low + 1, high - 1), (high + 1, i32::MAX)];
    for (first, last) in ranges {
        if first > last || first < 3 {
            continue;
        }
        // SAFETY: a raw system call with plain integer arguments; the descriptors it closes
        // are the caller's to give up, by this function's contract.
        let done = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                first as libc::c_uint,
                last as libc::c_uint,
                0 as libc::c_uint,
            )
        };
        if done != 0 {
            return Err(last_errno());
        }
    }
    Ok(())
}

/// Which side of [`fork`] this is.
pub(crate) enum Forked {
    /// The original process; the new one has this PID.
    Parent(Pid),
    /// The new process.
    Child,
}

/// `fork()`: a new process, a copy of this one with only the calling thread.
///
/// # Safety
///
/// The same as [`before_exec`]'s, for both processes: call it only in a child between `fork`
/// and `exec` (which has a single thread), and on each side of it keep to async-signal-safe
/// work — no allocation, no lock — until that process calls `exec` or ends. The copy holds the
/// caller's memory as a multi-threaded parent may have left it, locks held included.
pub(crate) unsafe fn fork() -> rustix::io::Result<Forked> {
    // SAFETY: `fork` itself takes no argument; what the two processes may do afterwards is
    // this function's contract, passed on to the caller.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(last_errno()),
        0 => Ok(Forked::Child),
        // Always positive here; a value `Pid` refuses would be the kernel's error.
        pid => Pid::from_raw(pid).map(Forked::Parent).ok_or(Errno::INVAL),
    }
}

/// The `unshare` flags that create namespaces, and nothing else.
const NAMESPACES: UnshareFlags = UnshareFlags::NEWUSER
    .union(UnshareFlags::NEWNS)
    .union(UnshareFlags::NEWPID)
    .union(UnshareFlags::NEWIPC)
    .union(UnshareFlags::NEWUTS)
    .union(UnshareFlags::NEWCGROUP)
    .union(UnshareFlags::NEWNET)
    .union(UnshareFlags::NEWTIME);

/// `unshare(flags)` for new namespaces.
///
/// # Errors
///
/// `EINVAL` when `flags` holds anything but namespaces (`CLONE_FILES`, whose hazard is why
/// `rustix` marks `unshare` unsafe, among them); the kernel's errors otherwise.
pub(crate) fn unshare_namespaces(flags: UnshareFlags) -> rustix::io::Result<()> {
    if !NAMESPACES.contains(flags) {
        return Err(Errno::INVAL);
    }
    // SAFETY: the hazard `rustix` marks is `CLONE_FILES` (a thread seeing descriptors of a
    // table another thread no longer shares), refused above: namespaces only.
    unsafe { rustix::thread::unshare_unsafe(flags) }
}

/// `_exit(code)`: end this process at once, running no Rust or C cleanup (no destructor, no
/// `atexit` handler, no flush of a buffer a parent may also hold a copy of).
pub(crate) fn exit(code: i32) -> ! {
    // SAFETY: `_exit` is async-signal-safe and takes a plain integer.
    unsafe { libc::_exit(code) }
}

/// End this process the way `status` says its child ended: the same exit code, or death by
/// the same signal (with core dumps disabled). Never returns; runs no cleanup, as [`exit`].
pub(crate) fn exit_like(status: WaitStatus) -> ! {
    if let Some(code) = status.exit_status() {
        exit(code);
    }
    if let Some(signal) = status.terminating_signal() {
        let _ = rustix::process::setrlimit(
            rustix::process::Resource::Core,
            rustix::process::Rlimit {
                current: Some(0),
                maximum: Some(0),
            },
        );
        // SAFETY: restoring the default disposition of one signal and sending it to this
        // process; both are async-signal-safe system calls with plain arguments.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::kill(libc::getpid(), signal);
        }
    }
    exit(127)
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `mount_setattr(mount, "", AT_EMPTY_PATH | AT_RECURSIVE?, {attr_set: set})`: add the
/// `MOUNT_ATTR_*` flags `set` to the mount (tree) `mount` refers to, keeping the others.
pub(crate) fn mount_set_flags(
    mount: BorrowedFd<'_>,
    set: u64,
    recursive: bool,
) -> rustix::io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let mut flags = libc::AT_EMPTY_PATH;
    if recursive {
        flags |= libc::AT_RECURSIVE;
    }
    // SAFETY: the path is a static empty C string, `attr` is a live `struct mount_attr` whose
    // size is passed with it, and the kernel only reads both.
    let done = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            mount.as_raw_fd(),
            c"".as_ptr(),
            flags as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if done == 0 { Ok(()) } else { Err(last_errno()) }
}
