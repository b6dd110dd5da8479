//! What filesystem an open file is on, from `fstatfs(2)` on its descriptor, never from its
//! path (a bind mount or a link puts `/proc` anywhere): whether it is a pseudo-filesystem,
//! and whether its mount follows symbolic links.
//!
//! A pseudo-filesystem holds no data of the user's: its files are views of the kernel and of
//! running processes, made up when they are read. `/proc/self/environ` is the reading
//! process's environment (a gateway's tokens), `/proc/self/cmdline` its arguments,
//! `/sys/…` the machine's. Such a file must never leave as an upload, whatever folder the
//! human allowed. On Linux the filesystem is told by its magic number (`f_type`); `devtmpfs`
//! shares `tmpfs`'s, so what it holds is refused by kind instead (device nodes). On macOS,
//! with no `f_type`, by its name (`f_fstypename`): `devfs` and `fdesc`.
//!
//! # References
//!
//! - [statfs(2)](https://man7.org/linux/man-pages/man2/statfs.2.html)
//! - `include/uapi/linux/magic.h` in the Linux sources

use std::os::fd::BorrowedFd;

use rustix::io::Errno;

/// The pseudo-filesystems, by the magic number `fstatfs` reports as `f_type` (`libc`'s names
/// where it has them, `magic.h`'s values where it has not).
#[cfg(target_os = "linux")]
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
const PSEUDO: &[(u32, &str)] = &[
    (libc::PROC_SUPER_MAGIC as u32, "proc"),
    (libc::SYSFS_MAGIC as u32, "sysfs"),
    (libc::DEBUGFS_MAGIC as u32, "debugfs"),
    (libc::TRACEFS_MAGIC as u32, "tracefs"),
    (libc::CGROUP_SUPER_MAGIC as u32, "cgroup"),
    (libc::CGROUP2_SUPER_MAGIC as u32, "cgroup2"),
    (libc::SECURITYFS_MAGIC as u32, "securityfs"),
    (libc::SELINUX_MAGIC as u32, "selinuxfs"),
    (libc::SMACK_MAGIC as u32, "smackfs"),
    (libc::BPF_FS_MAGIC as u32, "bpf"),
    (libc::DEVPTS_SUPER_MAGIC as u32, "devpts"),
    (libc::NSFS_MAGIC as u32, "nsfs"),
    (libc::RDTGROUP_SUPER_MAGIC as u32, "resctrl"),
    (libc::XENFS_SUPER_MAGIC as u32, "xenfs"),
    (libc::OPENPROM_SUPER_MAGIC as u32, "openpromfs"),
    (libc::USBDEVICE_SUPER_MAGIC as u32, "usbdevfs"),
    (0x6165_676c, "pstore"),      // PSTOREFS_MAGIC
    (0xde5e_81e4, "efivarfs"),    // EFIVARFS_MAGIC
    (0x6265_6570, "configfs"),    // CONFIGFS_MAGIC
    (0x6573_5543, "fusectl"),     // FUSECTL_SUPER_MAGIC
    (0x1980_0202, "mqueue"),      // MQUEUE_MAGIC
    (0x4249_4e4d, "binfmt_misc"), // BINFMTFS_MAGIC
];

/// The pseudo-filesystems, by the name `fstatfs` reports as `f_fstypename`.
#[cfg(not(target_os = "linux"))]
const PSEUDO: &[&str] = &[
    "devfs",
    "fdesc",
    "fdescfs",
    "procfs",
    "linprocfs",
    "linsysfs",
];

/// `ST_NOSYMFOLLOW` in `f_flags` (Linux 5.10): the mount follows no symbolic link.
#[cfg(target_os = "linux")]
const ST_NOSYMFOLLOW: u64 = 0x2000;

/// The name of the pseudo-filesystem `fd` is on (`"proc"`, `"sysfs"` …), or `None` for a
/// filesystem that holds data; `st` is `fd`'s status.
///
/// On Linux a file whose device number has a major other than 0 is on a filesystem backed by
/// a block device (ext4 on a disk …), which no pseudo-filesystem is: every one of them is
/// mounted on an anonymous device (major 0), as are `tmpfs`, overlays and network mounts. So
/// only those are asked `fstatfs`, which costs more than the open on some filesystems (ext4
/// sums its per-CPU counters).
#[doc(alias = "fstatfs")]
pub(crate) fn pseudo_filesystem(
    fd: BorrowedFd<'_>,
    st: &rustix::fs::Stat,
) -> Result<Option<&'static str>, Errno> {
    if on_a_block_device(st) {
        return Ok(None);
    }
    let st = rustix::fs::fstatfs(fd)?;
    Ok(pseudo_named(&st))
}

/// Whether reading the regular file whose status is `st` through a descriptor is the same
/// with `O_NONBLOCK` as without, so that the flag (which kept a FIFO from blocking the open)
/// need not be cleared: a file on a filesystem backed by a block device ([`on_a_block_device`]:
/// ext4, xfs …), whose mode never asked for mandatory locking.
///
/// Why that holds, on Linux: `read(2)` and `pread(2)` of a regular file turn no file flag but
/// `O_APPEND`, `O_DIRECT` and the sync ones into flags of the request (`iocb_flags`), so
/// `O_NONBLOCK` never reaches the page cache or the disk filesystems' read paths (only
/// `RWF_NOWAIT`, which `preadv2` passes, does). `splice(2)` and `sendfile(2)` wait by the flag
/// of the pipe or socket, not of the file (both seen to wait on a full one, on Linux 6.18).
/// The one place a regular file's `O_NONBLOCK` changed a read was mandatory locking (removed
/// in Linux 5.15): `EAGAIN` instead of waiting for a lock, on a `mand` mount, for a file that
/// is set-group-ID without group execute; such a mode keeps the flag cleared here whatever the
/// kernel. Every other filesystem (on an anonymous device:
/// `tmpfs`, overlays, FUSE, NFS, btrfs subvolumes) may hand the flag to code of its own, and
/// keeps it cleared.
///
/// What this does not cover: a FUSE filesystem on a block device (`fuseblk`, such as ntfs-3g)
/// is given each read's file flags, which a server may look at; and io_uring, on some older
/// kernels, answers `EAGAIN` instead of waiting for the disk when a file has `O_NONBLOCK`.
/// Either could only make a read fail, never read another file: the checks were all made.
#[cfg(target_os = "linux")]
pub(crate) fn reads_ignore_nonblock(st: &rustix::fs::Stat) -> bool {
    const MANDATORY: u32 = libc::S_ISGID | libc::S_IXGRP;
    on_a_block_device(st) && st.st_mode & MANDATORY != libc::S_ISGID
}

/// Whether reading the regular file whose status is `st` is the same with `O_NONBLOCK` as
/// without: never assumed here.
#[cfg(not(target_os = "linux"))]
pub(crate) fn reads_ignore_nonblock(_st: &rustix::fs::Stat) -> bool {
    false
}

/// Whether `st` is of a file on a filesystem backed by a block device (Linux: its device
/// number's major is not 0).
#[cfg(target_os = "linux")]
#[allow(clippy::useless_conversion)]
fn on_a_block_device(st: &rustix::fs::Stat) -> bool {
    rustix::fs::major(st.st_dev.into()) != 0
}

/// Whether `st` is of a file on a filesystem backed by a block device: never assumed here.
#[cfg(not(target_os = "linux"))]
fn on_a_block_device(_st: &rustix::fs::Stat) -> bool {
    false
}

#[cfg(target_os = "linux")]
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn pseudo_named(st: &rustix::fs::StatFs) -> Option<&'static str> {
    // A magic number is 32 bits; `f_type` is a signed word whose width varies by target.
    let magic = st.f_type as u32;
    PSEUDO
        .iter()
        .find(|(known, _)| *known == magic)
        .map(|(_, name)| *name)
}

#[cfg(not(target_os = "linux"))]
#[allow(clippy::cast_sign_loss, clippy::unnecessary_cast)]
fn pseudo_named(st: &rustix::fs::StatFs) -> Option<&'static str> {
    let name: Vec<u8> = st
        .f_fstypename
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    PSEUDO
        .iter()
        .find(|known| known.as_bytes() == name)
        .copied()
}

/// Whether the kernel follows symbolic links on the mount holding `fd`: not on one mounted
/// `nosymfollow` (Linux 5.10), where every lookup through a link fails with `ELOOP`. A
/// resolver that reads links and follows them itself must ask this, or it would follow what
/// the kernel never would. Elsewhere, always.
#[doc(alias = "nosymfollow")]
#[cfg(target_os = "linux")]
#[allow(clippy::cast_sign_loss)]
pub(crate) fn follows_links(fd: BorrowedFd<'_>) -> Result<bool, Errno> {
    let st = rustix::fs::fstatfs(fd)?;
    Ok(st.f_flags as u64 & ST_NOSYMFOLLOW == 0)
}

/// Whether the kernel follows symbolic links on the mount holding `fd`: always, here (no
/// `nosymfollow` is known on this system).
#[cfg(not(target_os = "linux"))]
pub(crate) fn follows_links(_fd: BorrowedFd<'_>) -> Result<bool, Errno> {
    Ok(true)
}
