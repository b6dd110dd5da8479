//! The library's only `unsafe` code: what a confined command's child processes do between
//! `fork` and `exec` that neither `std` nor `rustix` offers safely.
//!
//! Everything here runs in a child forked from a (possibly multi-threaded) gateway, where only
//! async-signal-safe work is allowed: system calls on values prepared in the parent, no
//! allocation, no locks.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::process::Command;

/// Run `in_child` in `command`'s child right before `exec`.
///
/// `in_child` must only make system calls on values it owns or borrows from the parent's
/// preparation, and build plain values: no allocation, no locks.
#[allow(unsafe_code)]
pub(crate) fn before_exec<F>(command: &mut Command, in_child: F)
where
    F: FnMut() -> io::Result<()> + Send + Sync + 'static,
{
    use std::os::unix::process::CommandExt;
    // SAFETY: `pre_exec` runs `in_child` in the forked child. Its callers in this module tree
    // (`sandbox::Plan::enter`) only make system calls through `rustix`, `landlock` and the
    // functions below, on descriptors and C strings prepared in the parent; they allocate
    // nothing and take no lock. `std::io::Error` values built from a raw OS error do not
    // allocate either.
    unsafe {
        command.pre_exec(in_child);
    }
}

/// `close_range(first, ~0, flags)`: mark (`cloexec`) or close every descriptor from `first` up.
#[allow(unsafe_code)]
pub(crate) fn close_from(first: u32, cloexec: bool) -> io::Result<()> {
    let flags = if cloexec {
        libc::CLOSE_RANGE_CLOEXEC
    } else {
        0
    };
    // SAFETY: a raw system call with plain integer arguments. In the child it either marks
    // descriptors close-on-exec, or (in the namespace's waiting parent, which never returns to
    // Rust code that uses them) closes them.
    let done = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            libc::c_uint::MAX,
            flags as libc::c_uint,
        )
    };
    if done == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Which side of [`fork`] this is.
pub(crate) enum Forked {
    /// The original process; the new one has this PID.
    Parent(rustix::process::Pid),
    /// The new process.
    Child,
}

/// `close_range` of every descriptor from 3 up but `keep` (in any order): what a process that
/// never `exec`s keeps of its parent's (`std` learns of a failed `exec` through a pipe it
/// must not hold).
#[allow(unsafe_code)]
pub(crate) fn close_all_but(keep: [i32; 2]) -> io::Result<()> {
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
        // SAFETY: a raw system call with plain integer arguments, closing descriptors this
        // process never uses again (it only waits for its child and exits).
        let done = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                first as libc::c_uint,
                last as libc::c_uint,
                0 as libc::c_uint,
            )
        };
        if done != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// `fork()`.
#[allow(unsafe_code)]
pub(crate) fn fork() -> io::Result<Forked> {
    // SAFETY: called from a `pre_exec` child, which has a single thread: the state `std`
    // left consistent at its own fork stays consistent, and both sides only go on to make
    // system calls (the child until `exec`, the parent until `exit_like`).
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Forked::Child),
        pid => Ok(Forked::Parent(
            rustix::process::Pid::from_raw(pid).ok_or_else(|| io::Error::other("pid"))?,
        )),
    }
}

/// `unshare(flags)` for new namespaces.
#[allow(unsafe_code)]
pub(crate) fn unshare(flags: rustix::thread::UnshareFlags) -> rustix::io::Result<()> {
    // SAFETY: the hazard `rustix` marks is `CLONE_FILES` (descriptors seen from another thread
    // after the table is unshared). The caller passes namespace flags only, in a `pre_exec`
    // child that has a single thread.
    unsafe { rustix::thread::unshare_unsafe(flags) }
}

/// `_exit(code)`: end this process at once, running no Rust or C cleanup.
#[allow(unsafe_code)]
pub(crate) fn exit(code: i32) -> ! {
    // SAFETY: `_exit` is async-signal-safe and takes a plain integer.
    unsafe { libc::_exit(code) }
}

/// End this process the way `status` says its child ended: the same exit code, or death by
/// the same signal (with core dumps disabled). Never returns.
#[allow(unsafe_code)]
pub(crate) fn exit_like(status: rustix::process::WaitStatus) -> ! {
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
#[allow(unsafe_code)]
pub(crate) fn mount_set_flags(mount: BorrowedFd<'_>, set: u64, recursive: bool) -> io::Result<()> {
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
    if done == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
