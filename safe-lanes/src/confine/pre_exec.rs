//! Everything the library runs between `fork` and `exec`, and nothing else: a confined
//! command's child entering its sandbox (and the first process of its PID namespace, which
//! only waits for it), and an uploader's supervisor.
//!
//! # The rule
//!
//! Each of these processes is a copy of a gateway that may have other threads, made while one
//! of them may have held a lock — the allocator's among them — that nothing in the copy will
//! ever release. So the code here works on values the parent prepared ([`Plan`],
//! [`Supervision`]) and plain values on the stack, and makes system calls: it allocates
//! nothing and frees nothing (a descriptor it re-opens goes into a slot the parent allocated,
//! and is moved out of it), takes no lock, and reports a failure as a raw OS error, a [`Step`]
//! and an `errno` in one number. A process that never `exec`s ends with `_exit`, so nothing
//! is dropped there either. `safe-lanes/tests/after_fork.rs` holds the module to it: its
//! allocator ends any process but the test's own that calls it, and its tests run each of
//! these processes (a probe, which stops before `exec`, among them).
//!
//! # Unsafe
//!
//! This is, with [`super::sys`], one of the two modules where `unsafe` is allowed. Here is
//! where the promises the `unsafe fn`s of `sys` ask for are made, each in a block that says
//! why it holds; the functions here that may only run in such a child are `unsafe fn`s
//! themselves, and [`install_sandbox`] and [`install_supervisor`], the module's doors, are safe.

#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::process::Command;

use landlock::{
    AccessFs, BitFlags, PathBeneath, RulesetCreated, RulesetCreatedAttr, RulesetStatus,
};
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::mount::{
    FsMountFlags, FsOpenFlags, MountAttrFlags, MountPropagationFlags, MoveMountFlags,
    OpenTreeFlags, UnmountFlags,
};
use rustix::process::{Pid, PidfdFlags, Signal, WaitOptions};
use rustix::thread::{CapabilitiesSecureBits, CapabilitySet, CapabilitySets};

use super::limits::ProcessBound;
use super::sandbox::{Entry, Plan, Source};
use super::sys;

/// Arrange for `command`'s child to enter the sandbox of `plan` right before `exec`.
///
/// A step that fails stops the child: `spawn` returns the [`Step`] and the `errno` in one raw
/// OS error (`super::sandbox::failure` reads it).
pub(super) fn install_sandbox(command: &mut Command, mut plan: Plan) {
    let in_child = move || {
        // SAFETY: `before_exec` runs this closure in `command`'s child, between `fork` and
        // `exec`, and nowhere else.
        unsafe { enter(&mut plan) }
    };
    // SAFETY: `in_child` runs `enter`, which keeps to the rule of this module: system calls on
    // `plan` (moved into the closure, prepared in full by `Plan::install`) and on the stack,
    // no allocation, no lock, errors from raw OS errors only.
    unsafe { sys::before_exec(command, in_child) }
}

/// What an uploader's supervisor needs, prepared in the gateway (`crate::child::supervise`).
#[derive(Debug)]
pub(crate) struct Supervision {
    /// The gateway: when it dies, the uploader's group is killed.
    pub(crate) owner: Pid,
    /// The gateway's process group, which the supervisor joins before it kills its own.
    pub(crate) owner_group: Pid,
    /// How long the uploader may run before its group is killed.
    pub(crate) timeout: Timespec,
    /// The uploader's own view of the deposit, when it gets one.
    pub(crate) view: Option<DepositView>,
}

/// An uploader's own view of the upload deposit (`crate::deposit`), made in a mount namespace
/// of its own right before it `exec`s: the deposit covered by an empty, read-only `tmpfs` in
/// which only the upload's private directory is bound back, under its own name. The uploader
/// can list and read its own staged file and nothing else the deposit holds.
///
/// A descriptor names a mount of the namespace it was opened in, which a new one cannot mount
/// on or from: both directories are opened again inside it, by path, and must be the very
/// inodes the gateway holds (`st_dev`, `st_ino`).
#[derive(Debug)]
pub(crate) struct DepositView {
    /// The deposit's path, and its identity.
    pub(crate) deposit: (CString, (u64, u64)),
    /// The upload's private directory's name in the deposit, and its identity.
    pub(crate) own: (CString, (u64, u64)),
    /// What the `uid_map` and `gid_map` of the uploader's user namespaces say: the user and
    /// group mapped to themselves.
    pub(crate) maps: (Vec<u8>, Vec<u8>),
    /// Whether the gateway may make a mount namespace without a user namespace (root).
    pub(crate) privileged: bool,
}

/// Arrange for `command`'s child (the leader of a process group of its own) to fork the
/// command and stay behind as its supervisor, as `crate::child::supervise` describes: it exits
/// like the command, or kills the whole group when the owner dies or the timeout passes. The
/// command enters its [`DepositView`] first, when it has one; a failure there is the spawn's
/// error.
pub(crate) fn install_supervisor(command: &mut Command, supervision: Supervision) {
    let in_child = move || {
        // SAFETY: `before_exec` runs this closure in `command`'s child, between `fork` and
        // `exec`, and nowhere else.
        unsafe { supervisor(&supervision) }
    };
    // SAFETY: `in_child` runs `supervisor`, which keeps to the rule of this module: system
    // calls on `supervision` (prepared in full by the gateway) and on the stack, no
    // allocation, no lock, errors from raw OS errors only.
    unsafe { sys::before_exec(command, in_child) }
}

/// The steps of entering the sandbox, as a child that fails one reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub(super) enum Step {
    Descriptors = 1,
    ParentDeath,
    Limits,
    Namespaces,
    Identity,
    Fork,
    Session,
    Root,
    Mounts,
    Overlay,
    WorkingDirectory,
    Capabilities,
    Landlock,
    Seccomp,
    /// Not a failure: a probe got through every step.
    Probe,
}

/// Step numbers travel in the error `std` reports for a child that failed before `exec`,
/// above the 16 bits an `errno` needs.
pub(super) const STEP_SHIFT: i32 = 16;

impl Step {
    /// Every step, in order.
    pub(super) const ALL: [Step; 15] = [
        Step::Descriptors,
        Step::ParentDeath,
        Step::Limits,
        Step::Namespaces,
        Step::Identity,
        Step::Fork,
        Step::Session,
        Step::Root,
        Step::Mounts,
        Step::Overlay,
        Step::WorkingDirectory,
        Step::Capabilities,
        Step::Landlock,
        Step::Seccomp,
        Step::Probe,
    ];

    /// The error a child returns when this step fails with `errno`: both in one raw OS error,
    /// which does not allocate.
    fn failed(self) -> impl Fn(Errno) -> io::Error + Copy {
        move |errno| {
            io::Error::from_raw_os_error(((self as i32) << STEP_SHIFT) | errno.raw_os_error())
        }
    }
}

/// What the child re-opened for one entry: a bind's source, or an overlay's three layers.
pub(super) type Reopened = [Option<OwnedFd>; 3];

/// Where the new root is assembled before `pivot_root` (inside the private mount namespace,
/// so nothing of it is visible outside).
const STAGE: &CStr = c"/tmp";

/// The child's side of [`install_sandbox`]: every step of `super::sandbox`'s documentation,
/// in order.
///
/// # Safety
///
/// Only in a child between `fork` and `exec` (a [`sys::before_exec`] closure): it forks, as
/// [`sys::fork`] allows there only (see [`become_pid_one`]).
unsafe fn enter(plan: &mut Plan) -> io::Result<()> {
    sys::cloexec_from(3).map_err(Step::Descriptors.failed())?;
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
        .map_err(Step::ParentDeath.failed())?;
    if rustix::process::getppid() != Some(plan.gateway) {
        return Err(Step::ParentDeath.failed()(Errno::SRCH));
    }
    limit_before(plan).map_err(Step::Limits.failed())?;
    sys::unshare_namespaces(plan.unshare).map_err(Step::Namespaces.failed())?;
    map_identity(plan).map_err(Step::Identity.failed())?;
    limit_processes(plan).map_err(Step::Limits.failed())?;
    // SAFETY: this is a child between `fork` and `exec`, by this function's contract.
    unsafe { become_pid_one() }?;
    limit_pids(plan).map_err(Step::Limits.failed())?;
    rustix::process::setsid().map_err(Step::Session.failed())?;
    build_root(plan)?;
    drop_capabilities().map_err(Step::Capabilities.failed())?;
    restrict(plan)?;
    if plan.probe {
        return Err(Step::Probe.failed()(Errno::CANCELED));
    }
    Ok(())
}

/// Before the namespaces: the OOM killer's first choice (`oom_score_adj` 1000, inherited
/// by everything the command starts), and into the command's `pids` cgroup when it has one
/// (before its cgroup namespace, whose root it then is).
fn limit_before(plan: &Plan) -> rustix::io::Result<()> {
    use rustix::process::{DumpableBehavior, set_dumpable_behavior};
    // As in `map_identity`: `/proc/self` of a process that is not dumpable is root's.
    let was = rustix::process::dumpable_behavior()?;
    set_dumpable_behavior(DumpableBehavior::Dumpable)?;
    let written = write_file(c"/proc/self/oom_score_adj", b"1000");
    set_dumpable_behavior(was)?;
    written?;
    if let ProcessBound::Cgroup(procs) = &plan.processes
        && rustix::io::write(procs, b"0")? != 1
    {
        return Err(Errno::IO);
    }
    Ok(())
}

/// As PID 1 of the new PID namespace, for a root gateway: no more process ids in it than
/// [`MAX_PROCESSES`](super::limits::MAX_PROCESSES), through its own `pid_max`. The sysctl
/// shows each PID namespace its own file; a kernel that has one `pid_max` for the whole
/// machine shows the very file the gateway holds open, and then nothing is written
/// (`EXDEV`): lowering it would bound every process of the machine.
fn limit_pids(plan: &Plan) -> rustix::io::Result<()> {
    let ProcessBound::PidMax { host, value } = &plan.processes else {
        return Ok(());
    };
    let fd = rustix::fs::open(
        c"/proc/sys/kernel/pid_max",
        OFlags::WRONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
    )?;
    let st = rustix::fs::fstat(&fd)?;
    if crate::beneath::stat_identity(&st) == *host {
        return Err(Errno::XDEV);
    }
    let bytes = value.as_bytes();
    if rustix::io::write(&fd, bytes)? == bytes.len() {
        Ok(())
    } else {
        Err(Errno::IO)
    }
}

/// In the new user namespace, for an ordinary user's gateway: at most
/// [`MAX_PROCESSES`](super::limits::MAX_PROCESSES) processes and threads for this user in
/// it (`RLIMIT_NPROC`, which counts per user namespace).
fn limit_processes(plan: &Plan) -> rustix::io::Result<()> {
    if !matches!(plan.processes, ProcessBound::Rlimit) {
        return Ok(());
    }
    let max = Some(super::limits::MAX_PROCESSES);
    rustix::process::setrlimit(
        rustix::process::Resource::Nproc,
        rustix::process::Rlimit {
            current: max,
            maximum: max,
        },
    )
}

/// Map the user and group to themselves in the new user namespace.
///
/// A gateway that hardened itself ([`crate::process::harden`]) is not dumpable, and the
/// `/proc/self` files of a process that is not dumpable belong to root: the child is made
/// dumpable for the three writes only, then not dumpable again until `exec`.
fn map_identity(plan: &Plan) -> rustix::io::Result<()> {
    write_maps(&plan.uid_map, &plan.gid_map)
}

/// Write `uid_map` and `gid_map` of this process's new user namespace (after denying
/// `setgroups`), dumpable for the three writes only (see [`map_identity`]).
fn write_maps(uid_map: &[u8], gid_map: &[u8]) -> rustix::io::Result<()> {
    use rustix::process::{DumpableBehavior, set_dumpable_behavior};
    let was = rustix::process::dumpable_behavior()?;
    set_dumpable_behavior(DumpableBehavior::Dumpable)?;
    let written = write_file(c"/proc/self/setgroups", b"deny")
        .and_then(|()| write_file(c"/proc/self/uid_map", uid_map))
        .and_then(|()| write_file(c"/proc/self/gid_map", gid_map));
    set_dumpable_behavior(was)?;
    written
}

/// Whether `error`, from spawning an uploader, is its [`DepositView`] that could not be
/// made, and with which `errno`.
pub(crate) fn view_failed(error: &io::Error) -> Option<io::Error> {
    let raw = error.raw_os_error()?;
    (raw >> STEP_SHIFT == Step::Mounts as i32)
        .then(|| io::Error::from_raw_os_error(raw & ((1 << STEP_SHIFT) - 1)))
}

/// The uploader's side of [`DepositView`]: a mount namespace of its own (inside a user
/// namespace for an ordinary user), the deposit covered by an empty `tmpfs`, the upload's own
/// directory bound back in it (nothing to run, no device, no set-id), the `tmpfs` made
/// read-only; then a user and mount namespace more, which the kernel gives the mounts of the
/// one before as locked (`MNT_LOCKED`): the uploader, even a root one with every capability
/// in its namespace, cannot unmount the cover to see the deposit beneath, nor reach the
/// gateway through `/proc`. Last, the working directory is moved into the bound directory, as
/// the new namespace resolves its path (the one `std` entered is the covered one).
fn enter_view(view: &DepositView) -> rustix::io::Result<()> {
    use rustix::thread::UnshareFlags;
    let (uid_map, gid_map) = &view.maps;
    if view.privileged {
        sys::unshare_namespaces(UnshareFlags::NEWNS)?;
    } else {
        sys::unshare_namespaces(UnshareFlags::NEWUSER | UnshareFlags::NEWNS)?;
        write_maps(uid_map, gid_map)?;
    }
    rustix::mount::mount_change(
        c"/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )?;
    let (deposit_path, deposit_identity) = &view.deposit;
    let (name, own_identity) = &view.own;
    let deposit = reopen(deposit_path, *deposit_identity)?;
    let own = open_identical(&deposit, name, OFlags::PATH, *own_identity)?;
    let cover = new_tmpfs(c"0700", c"64k")?;
    attach(&cover, &deposit)?;
    rustix::fs::mkdirat(&cover, name.as_c_str(), Mode::RWXU)?;
    let at = rustix::fs::openat(
        &cover,
        name.as_c_str(),
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    bind(
        &own,
        &at,
        MASK.difference(MountAttrFlags::MOUNT_ATTR_RDONLY),
        false,
    )?;
    set_flags(&cover, MountAttrFlags::MOUNT_ATTR_RDONLY, false)?;
    drop((deposit, own, cover, at));
    // Lock what was mounted.
    sys::unshare_namespaces(UnshareFlags::NEWUSER | UnshareFlags::NEWNS)?;
    write_maps(uid_map, gid_map)?;
    let deposit = rustix::fs::open(
        deposit_path.as_c_str(),
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let own = open_identical(&deposit, name, OFlags::RDONLY, *own_identity)?;
    rustix::process::fchdir(&own)
}

/// Open the directory `name` in `dir` (with `flags`, not following a link) as the very inode
/// `identity` the gateway holds.
fn open_identical(
    dir: &OwnedFd,
    name: &CStr,
    flags: OFlags,
    identity: (u64, u64),
) -> rustix::io::Result<OwnedFd> {
    let fd = rustix::fs::openat(
        dir,
        name,
        flags | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let st = rustix::fs::fstat(&fd)?;
    if (st.st_dev, st.st_ino) != identity {
        return Err(Errno::XDEV);
    }
    Ok(fd)
}

/// Fork; the parent waits for PID 1 of the new namespace and exits like it, and only the
/// child returns.
///
/// # Safety
///
/// Only in a child between `fork` and `exec`: it forks, as [`sys::fork`] allows there only,
/// and the parent gives up its descriptors, as [`sys::close_from`] allows in a process that
/// never returns.
unsafe fn become_pid_one() -> io::Result<()> {
    let me = rustix::process::getpid();
    let watch =
        rustix::process::pidfd_open(me, PidfdFlags::empty()).map_err(Step::Fork.failed())?;
    // SAFETY: this is a child between `fork` and `exec`, by this function's contract; the
    // parent below only waits and exits, the child goes on with `enter`, both under this
    // module's rule.
    match unsafe { sys::fork() }.map_err(Step::Fork.failed())? {
        sys::Forked::Parent(child) => {
            // Only the command may hold the pipe `std` learns of a failed `exec` through.
            // SAFETY: from here this process only waits and exits, never returning to code
            // that could use or drop a descriptor (`watch` included).
            let _ = unsafe { sys::close_from(3) };
            loop {
                match rustix::process::waitpid(Some(child), WaitOptions::empty()) {
                    Ok(Some((_, status))) => sys::exit_like(status),
                    Err(Errno::INTR) => continue,
                    _ => sys::exit(127),
                }
            }
        }
        sys::Forked::Child => {
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
                .map_err(Step::ParentDeath.failed())?;
            // The waiting parent may have died before the line above: then stop here.
            let mut fds = [PollFd::new(&watch, PollFlags::IN)];
            let ended = rustix::event::poll(&mut fds, Some(&Timespec::default()))
                .map_err(Step::ParentDeath.failed())?;
            if ended != 0 {
                return Err(Step::ParentDeath.failed()(Errno::SRCH));
            }
            Ok(())
        }
    }
}

/// Assemble the new root, move into it and make it read-only.
fn build_root(plan: &mut Plan) -> io::Result<()> {
    let fail = Step::Root.failed();
    rustix::mount::mount_change(
        c"/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )
    .map_err(fail)?;
    // Re-open every source before anything is mounted over the staging point. The layout's
    // entries come first, then the command's own (deeper, so placed after them); one slot
    // each.
    let entries = || plan.layout.entries.iter().chain(&plan.extra);
    for (entry, slot) in entries().zip(plan.slots.iter_mut()) {
        let failed = Step::Identity.failed();
        match &entry.source {
            Source::Bind { path, identity, .. } => {
                slot[0] = Some(reopen(path, *identity).map_err(failed)?);
            }
            Source::Overlay { layers } => {
                for (slot, (path, identity)) in slot.iter_mut().zip(layers) {
                    *slot = Some(reopen(path, *identity).map_err(failed)?);
                }
            }
            _ => {}
        }
    }
    let root = new_tmpfs(c"0755", c"4m").map_err(fail)?;
    rustix::mount::move_mount(
        &root,
        c"",
        rustix::fs::CWD,
        STAGE,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )
    .map_err(fail)?;
    let mut building = Building {
        own: [device_of(&root).map_err(fail)?, 0],
        masks: make_masks(&root).map_err(fail)?,
        root,
        scratch_size: &plan.scratch_size,
        scratch_access: plan.scratch_access,
        ruleset: &mut plan.ruleset,
    };
    for (entry, slot) in entries().zip(plan.slots.iter_mut()) {
        let step = match entry.source {
            Source::Overlay { .. } => Step::Overlay,
            _ => Step::Mounts,
        };
        building.place(entry, slot).map_err(step.failed())?;
    }
    let root = &building.root;
    set_flags(
        root,
        MountAttrFlags::MOUNT_ATTR_RDONLY
            | MountAttrFlags::MOUNT_ATTR_NOSUID
            | MountAttrFlags::MOUNT_ATTR_NODEV,
        false,
    )
    .map_err(fail)?;
    rustix::process::fchdir(root).map_err(fail)?;
    rustix::process::pivot_root(c".", c".").map_err(fail)?;
    rustix::mount::unmount(c".", UnmountFlags::DETACH).map_err(fail)?;
    rustix::process::chdir(plan.cwd.as_c_str()).map_err(Step::WorkingDirectory.failed())
}

/// The new root while the child builds it.
struct Building<'p> {
    /// The new root's `tmpfs`.
    root: OwnedFd,
    /// The devices of the sandbox's own `tmpfs` mounts (the root, then the scratch): the only
    /// places a missing mount point may be created.
    own: [u64; 2],
    /// What masks are bound from.
    masks: Masks,
    /// The `size` of the scratch `tmpfs`.
    scratch_size: &'p CStr,
    /// What the command may do in its scratch `tmpfs` and its caches' overlays.
    scratch_access: BitFlags<AccessFs>,
    /// The command's Landlock ruleset, which gets a rule for each file system made here.
    ruleset: &'p mut Option<RulesetCreated>,
}

impl Building<'_> {
    /// Put `entry` in place below the root, bound from what `slot` holds (taken out of it)
    /// when it is a bind or an overlay.
    fn place(&mut self, entry: &Entry, slot: &mut Reopened) -> rustix::io::Result<()> {
        let source = std::mem::take(slot);
        let Some((name, parents)) = entry.components.split_last() else {
            return Err(Errno::INVAL);
        };
        let parent = walk(&self.root, parents, &self.own)?;
        let own = &self.own;
        match &entry.source {
            Source::Symlink(target) => {
                rustix::fs::symlinkat(target.as_c_str(), &parent, name.as_c_str())
            }
            Source::Scratch => {
                let at = mount_point(&parent, name, true, own)?;
                let scratch = new_tmpfs(c"0700", self.scratch_size)?;
                attach(&scratch, &at)?;
                self.own[1] = device_of(&scratch)?;
                self.allow(&scratch)
            }
            Source::Bind {
                directory,
                read_only,
                device,
                ..
            } => {
                let at = mount_point(&parent, name, *directory, own)?;
                let [Some(source), ..] = source else {
                    return Err(Errno::INVAL);
                };
                let mut flags = MountAttrFlags::MOUNT_ATTR_NOSUID;
                if !*device {
                    flags |= MountAttrFlags::MOUNT_ATTR_NODEV;
                }
                if *read_only {
                    flags |= MountAttrFlags::MOUNT_ATTR_RDONLY;
                }
                bind(&source, &at, flags, true)
            }
            Source::Overlay { .. } => {
                let at = mount_point(&parent, name, true, own)?;
                let [Some(lower), Some(upper), Some(work)] = source else {
                    return Err(Errno::INVAL);
                };
                let overlay = new_overlay(&lower, &upper, &work)?;
                attach(&overlay, &at)?;
                // The overlay is a file system of its own: its own rule, as for the scratch.
                self.allow(&overlay)
            }
            Source::Proc => {
                let at = mount_point(&parent, name, true, own)?;
                // Where the kernel refuses it (a host whose own /proc is partly covered), the
                // command runs without: /proc gives it nothing the sandbox relies on.
                match new_proc() {
                    Ok(proc) => attach(&proc, &at),
                    Err(_) => Ok(()),
                }
            }
            Source::Mask { directory } => {
                let from = if *directory {
                    &self.masks.dir
                } else {
                    &self.masks.file
                };
                bind(
                    from,
                    &mount_point(&parent, name, *directory, own)?,
                    MASK,
                    false,
                )
            }
            Source::Emptied => bind(
                &self.masks.empty,
                &mount_point(&parent, name, false, own)?,
                MASK,
                false,
            ),
        }
    }

    /// Let the command do [`Building::scratch_access`] in the file system `mount` (its scratch
    /// `tmpfs`, a cache's overlay): a Landlock rule the gateway could not add, as the file
    /// system did not exist yet.
    fn allow(&mut self, mount: &OwnedFd) -> rustix::io::Result<()> {
        let ruleset = self.ruleset.take().ok_or(Errno::INVAL)?;
        let ruleset = ruleset
            .add_rule(PathBeneath::new(mount, self.scratch_access))
            .map_err(|_| Errno::NOTRECOVERABLE)?;
        *self.ruleset = Some(ruleset);
        Ok(())
    }
}

/// Drop into Landlock, then seccomp.
fn restrict(plan: &mut Plan) -> io::Result<()> {
    let ruleset = plan
        .ruleset
        .take()
        .ok_or_else(|| Step::Landlock.failed()(Errno::INVAL))?;
    let status = ruleset
        .restrict_self()
        .map_err(|_| Step::Landlock.failed()(Errno::NOTRECOVERABLE))?;
    if status.ruleset != RulesetStatus::FullyEnforced || !status.no_new_privs {
        return Err(Step::Landlock.failed()(Errno::NOTRECOVERABLE));
    }
    for filter in [&plan.filters.eperm, &plan.filters.enosys] {
        seccompiler::apply_filter(filter)
            .map_err(|_| Step::Seccomp.failed()(Errno::NOTRECOVERABLE))?;
    }
    Ok(())
}

/// Re-open `path` (not following a link at its end) as the very inode `identity` the gateway
/// checked.
fn reopen(path: &CStr, identity: (u64, u64)) -> rustix::io::Result<OwnedFd> {
    let fd = rustix::fs::open(
        path,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let stat = rustix::fs::fstat(&fd)?;
    if (stat.st_dev, stat.st_ino) != identity {
        return Err(Errno::XDEV);
    }
    Ok(fd)
}

/// Write all of `bytes` to the existing file at `path`, in one `write`.
fn write_file(path: &CStr, bytes: &[u8]) -> rustix::io::Result<()> {
    let fd = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    if rustix::io::write(&fd, bytes)? == bytes.len() {
        Ok(())
    } else {
        Err(Errno::IO)
    }
}

/// A new `tmpfs` with `mode` and `size`, not yet attached, `nosuid` and `nodev`.
fn new_tmpfs(mode: &CStr, size: &CStr) -> rustix::io::Result<OwnedFd> {
    let fs = rustix::mount::fsopen(c"tmpfs", FsOpenFlags::FSOPEN_CLOEXEC)?;
    rustix::mount::fsconfig_set_string(&fs, c"mode", mode)?;
    rustix::mount::fsconfig_set_string(&fs, c"size", size)?;
    rustix::mount::fsconfig_create(&fs)?;
    rustix::mount::fsmount(
        &fs,
        FsMountFlags::FSMOUNT_CLOEXEC,
        MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV,
    )
}

/// A new overlay, not yet attached, of `lower` (read-only) with `upper` and `work` (the state
/// root's): `nosuid`, `nodev`, extended attributes in the `user.` namespace (which a user
/// namespace may write). Each layer is named by its descriptor (`/proc/self/fd/N`, resolved
/// to the very directory re-opened), so no path is looked up again.
///
/// `volatile` where the kernel has it (Linux 5.10): overlayfs otherwise syncs the whole file
/// system of its upper layer when it is unmounted, which every command's end would wait for
/// (a `sync` of the state root's disk, whatever else is dirty on it). Nothing depends on the
/// layer being on disk before it is read: its content is published by renames, or held, as
/// plain files, no more and no less durable than what a command writes to a folder directly
/// (the journal that publishes it is written atomically, not `fsync`ed: it survives the death
/// of any process, as the audit log's records do; ADR 0027). The work directory,
/// where overlayfs marks a volatile mount, is the command's own and goes with its set.
fn new_overlay(lower: &OwnedFd, upper: &OwnedFd, work: &OwnedFd) -> rustix::io::Result<OwnedFd> {
    let fs = rustix::mount::fsopen(c"overlay", FsOpenFlags::FSOPEN_CLOEXEC)?;
    rustix::mount::fsconfig_set_flag(&fs, c"userxattr")?;
    // An optimization only: a kernel without it mounts the same overlay, syncing at its end.
    let _ = rustix::mount::fsconfig_set_flag(&fs, c"volatile");
    for (key, fd) in [
        (c"lowerdir", lower),
        (c"upperdir", upper),
        (c"workdir", work),
    ] {
        let mut buf = [0u8; 40];
        rustix::mount::fsconfig_set_string(&fs, key, fd_path(fd, &mut buf)?)?;
    }
    rustix::mount::fsconfig_create(&fs)?;
    rustix::mount::fsmount(
        &fs,
        FsMountFlags::FSMOUNT_CLOEXEC,
        MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV,
    )
}

/// `/proc/self/fd/N` for `fd`, written into `buf`.
fn fd_path<'b>(fd: &OwnedFd, buf: &'b mut [u8; 40]) -> rustix::io::Result<&'b CStr> {
    const PREFIX: &[u8] = b"/proc/self/fd/";
    buf[..PREFIX.len()].copy_from_slice(PREFIX);
    let mut n = u32::try_from(fd.as_raw_fd()).map_err(|_| Errno::BADF)?;
    let mut digits = [0u8; 10];
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for (i, d) in digits[..len].iter().rev().enumerate() {
        buf[PREFIX.len() + i] = *d;
    }
    buf[PREFIX.len() + len] = 0;
    CStr::from_bytes_until_nul(&buf[..]).map_err(|_| Errno::INVAL)
}

/// A new `proc` of the current PID namespace, not yet attached: its processes only, no
/// system files (`subset=pid`), others' entries invisible; read-only, `nosuid`, `nodev`,
/// `noexec`. Landlock grants no access to it, so only its links (`/proc/self/exe`) resolve.
fn new_proc() -> rustix::io::Result<OwnedFd> {
    let fs = rustix::mount::fsopen(c"proc", FsOpenFlags::FSOPEN_CLOEXEC)?;
    rustix::mount::fsconfig_set_string(&fs, c"subset", c"pid")?;
    rustix::mount::fsconfig_set_string(&fs, c"hidepid", c"invisible")?;
    rustix::mount::fsconfig_create(&fs)?;
    rustix::mount::fsmount(
        &fs,
        FsMountFlags::FSMOUNT_CLOEXEC,
        MountAttrFlags::MOUNT_ATTR_RDONLY
            | MountAttrFlags::MOUNT_ATTR_NOSUID
            | MountAttrFlags::MOUNT_ATTR_NODEV
            | MountAttrFlags::MOUNT_ATTR_NOEXEC,
    )
}

/// Attach the detached mount `tree` on the mount point `at`.
fn attach(tree: &OwnedFd, at: &OwnedFd) -> rustix::io::Result<()> {
    rustix::mount::move_mount(
        tree,
        c"",
        at,
        c"",
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
    )
}

/// Bind a copy of the mount (tree, when `recursive`) at `source` on the mount point `at`,
/// with `flags` added.
fn bind(
    source: &OwnedFd,
    at: &OwnedFd,
    flags: MountAttrFlags,
    recursive: bool,
) -> rustix::io::Result<()> {
    let mut clone = OpenTreeFlags::OPEN_TREE_CLONE
        | OpenTreeFlags::OPEN_TREE_CLOEXEC
        | OpenTreeFlags::AT_EMPTY_PATH;
    if recursive {
        clone |= OpenTreeFlags::AT_RECURSIVE;
    }
    let tree = rustix::mount::open_tree(source, c"", clone)?;
    set_flags(&tree, flags, recursive)?;
    attach(&tree, at)
}

/// Add `flags` to the mount (tree, when `recursive`) `mount` refers to.
fn set_flags(mount: &OwnedFd, flags: MountAttrFlags, recursive: bool) -> rustix::io::Result<()> {
    sys::mount_set_flags(mount.as_fd(), flags.bits().into(), recursive)
}

/// How every mask is mounted: read-only, nothing to run, no device, no set-id.
const MASK: MountAttrFlags = MountAttrFlags::MOUNT_ATTR_RDONLY
    .union(MountAttrFlags::MOUNT_ATTR_NOSUID)
    .union(MountAttrFlags::MOUNT_ATTR_NODEV)
    .union(MountAttrFlags::MOUNT_ATTR_NOEXEC);

/// What masks are bound from, made in the sandbox's root (never covered by a Landlock rule).
struct Masks {
    /// An empty directory nobody may read (mode 000).
    dir: OwnedFd,
    /// An empty file nobody may read (mode 000).
    file: OwnedFd,
    /// An empty file anyone may read (mode 0444), for [`Source::Emptied`].
    empty: OwnedFd,
}

/// Make the [`Masks`] in `root`.
fn make_masks(root: &OwnedFd) -> rustix::io::Result<Masks> {
    let opened = |name: &CStr, directory: bool| {
        let mut flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        if directory {
            flags |= OFlags::DIRECTORY;
        }
        rustix::fs::openat(root, name, flags, Mode::empty())
    };
    let file = |name: &CStr, mode: u32| {
        let flags = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC;
        drop(rustix::fs::openat(
            root,
            name,
            flags,
            Mode::from_raw_mode(mode),
        )?);
        opened(name, false)
    };
    rustix::fs::mkdirat(root, c".masked", Mode::empty())?;
    Ok(Masks {
        dir: opened(c".masked", true)?,
        file: file(c".masked-file", 0)?,
        empty: file(c".emptied-file", 0o444)?,
    })
}

/// The device of the file system `fd` is on.
fn device_of(fd: &OwnedFd) -> rustix::io::Result<u64> {
    Ok(rustix::fs::fstat(fd)?.st_dev)
}

/// Open (creating where allowed) each of `components` below `root` as a directory, never
/// following a symbolic link.
fn walk(root: &OwnedFd, components: &[CString], own: &[u64; 2]) -> rustix::io::Result<OwnedFd> {
    let mut dir = rustix::io::dup(root)?;
    for name in components {
        dir = mount_point(&dir, name, true, own)?;
    }
    Ok(dir)
}

/// An `O_PATH` descriptor of `name` in `parent` (a directory, or a file when not
/// `directory`), never following a symbolic link. When missing, it is created — but only on
/// one of the sandbox's own file systems (`own`), never in a folder of the gateway's.
fn mount_point(
    parent: &OwnedFd,
    name: &CStr,
    directory: bool,
    own: &[u64; 2],
) -> rustix::io::Result<OwnedFd> {
    let mut flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    if directory {
        flags |= OFlags::DIRECTORY;
    }
    match rustix::fs::openat(parent, name, flags, Mode::empty()) {
        Err(Errno::NOENT) if own.contains(&device_of(parent)?) => {
            if directory {
                rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(0o755))?;
            } else {
                rustix::fs::openat(
                    parent,
                    name,
                    OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC,
                    Mode::from_raw_mode(0o600),
                )?;
            }
            rustix::fs::openat(parent, name, flags, Mode::empty())
        }
        other => other,
    }
}

/// Empty every capability set and lock `securebits` so that no `exec` — not even of a
/// program run as root — gives any back.
fn drop_capabilities() -> rustix::io::Result<()> {
    rustix::thread::set_capabilities_secure_bits(
        CapabilitiesSecureBits::NO_ROOT
            | CapabilitiesSecureBits::NO_ROOT_LOCKED
            | CapabilitiesSecureBits::NO_SETUID_FIXUP
            | CapabilitiesSecureBits::NO_SETUID_FIXUP_LOCKED
            | CapabilitiesSecureBits::KEEP_CAPS_LOCKED
            | CapabilitiesSecureBits::NO_CAP_AMBIENT_RAISE
            | CapabilitiesSecureBits::NO_CAP_AMBIENT_RAISE_LOCKED,
    )?;
    for bit in 0..u64::BITS {
        match rustix::thread::remove_capability_from_bounding_set(CapabilitySet::from_bits_retain(
            1 << bit,
        )) {
            Ok(()) => {}
            Err(Errno::INVAL) => break,
            Err(e) => return Err(e),
        }
    }
    rustix::thread::clear_ambient_capability_set()?;
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )
}

/// The child's side of [`install_supervisor`]: fork the command, which returns (to `exec`);
/// this process becomes its supervisor and never returns. The group it kills is the one it
/// leads (`child::run` spawns it in a group of its own).
///
/// # Safety
///
/// Only in a child between `fork` and `exec` (a [`sys::before_exec`] closure): it forks, as
/// [`sys::fork`] allows there only, and gives up every descriptor but two, as
/// [`sys::close_all_but`] allows in a process that never returns.
unsafe fn supervisor(supervision: &Supervision) -> io::Result<()> {
    let Supervision {
        owner,
        owner_group,
        timeout,
        view,
    } = supervision;
    let (owner, owner_group) = (*owner, *owner_group);
    let owner_fd = rustix::process::pidfd_open(owner, PidfdFlags::empty())?;
    // The owner may have died before the line above: then stop here.
    if rustix::process::getppid() != Some(owner) {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    // SAFETY: this is a child between `fork` and `exec`, by this function's contract; the
    // child below returns to `exec` at once, and this process only polls, kills and exits.
    let child = match unsafe { sys::fork() }? {
        sys::Forked::Child => {
            return view
                .as_ref()
                .map_or(Ok(()), enter_view)
                .map_err(Step::Mounts.failed());
        }
        sys::Forked::Parent(child) => child,
    };
    let group = rustix::process::getpid();
    let kill_group = || {
        let _ = rustix::process::kill_process_group(group, Signal::KILL);
    };
    let Ok(child_fd) = rustix::process::pidfd_open(child, PidfdFlags::empty()) else {
        kill_group();
        sys::exit(127);
    };
    // SAFETY: from here this process uses `owner_fd` and `child_fd` only, and every path ends
    // in `exit`, so nothing that owns another descriptor is used or dropped.
    let _ = unsafe { sys::close_all_but([owner_fd.as_raw_fd(), child_fd.as_raw_fd()]) };
    loop {
        let mut fds = [
            PollFd::new(&child_fd, PollFlags::IN),
            PollFd::new(&owner_fd, PollFlags::IN),
        ];
        match rustix::event::poll(&mut fds, Some(timeout)) {
            Err(Errno::INTR) => continue,
            // The uploader ended: reap it, clear its group (leaving it first), exit like it.
            Ok(_) if !fds[0].revents().is_empty() => {
                let status = rustix::process::waitpid(Some(child), WaitOptions::empty());
                if rustix::process::setpgid(None, Some(owner_group)).is_ok() {
                    kill_group();
                }
                match status {
                    Ok(Some((_, status))) => sys::exit_like(status),
                    _ => sys::exit(127),
                }
            }
            // The owner died, or the time is up (or polling failed): nothing may go on.
            _ => {
                kill_group();
                sys::exit(137);
            }
        }
    }
}
