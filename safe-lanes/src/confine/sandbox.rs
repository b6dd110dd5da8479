//! The world a confined command lives in: its own namespaces, a root made of the system set
//! and its grants only, no capabilities, then Landlock and seccomp.
//!
//! A [`Plan`] is prepared in the gateway so that what runs after `fork` only makes system
//! calls. What does not depend on the command is built once and shared: the [`Layout`] of the
//! root (paths turned into C strings, the identity of every folder to mount) for as long as
//! the grants it was made from stand, and the seccomp programs for the process's life. The
//! Landlock ruleset is the command's own: its child adds the rule for its scratch `tmpfs` to
//! it, so a ruleset is never handed to two commands. [`Plan::install`] arranges for the
//! spawned child to enter it:
//!
//! 1. mark descriptors 3+ close-on-exec; die with the gateway thread (`PR_SET_PDEATHSIG`);
//! 2. `unshare` user, mount, PID, IPC, UTS and cgroup namespaces (and network unless asked
//!    for); map the user to itself, `setgroups` denied;
//! 3. `fork`: the child is PID 1 of the new PID namespace; the first process only waits for it
//!    and exits the same way, so the gateway's `Child` still reports the command's status.
//!    When the first process dies (timeout, revoke, or the gateway itself dying) PID 1 gets
//!    `SIGKILL`, and with it every process of the namespace;
//! 4. `setsid` (no controlling terminal);
//! 5. build the root: a fresh `tmpfs` holding the system hierarchies bound read-only, the
//!    system's symbolic links (`/bin → usr/bin`), a few device nodes, a private writable
//!    `tmpfs` at `/tmp` (the command's `HOME` and `TMPDIR`, gone with the namespace), and each
//!    grant at its own path — read-only grants read-only. Every folder is re-opened after
//!    `unshare` and must be the very inode the gateway checked (`st_dev`, `st_ino`); mount
//!    points are reached without following symbolic links, and created only on the sandbox's
//!    own `tmpfs`. Then `pivot_root`, the old root detached, and the root made read-only;
//! 6. drop every capability: `securebits` locked so that root gains none at `exec`, the
//!    bounding and ambient sets emptied, the effective, permitted and inheritable sets cleared;
//! 7. Landlock (with the scratch `tmpfs` added) and the seccomp filters.
//!
//! A failing step stops the child before `exec`; the gateway learns which step and why
//! ([`failure`]) and answers `sandbox_unavailable`. Nothing runs with fewer layers.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use landlock::{
    ABI, Access, AccessFs, BitFlags, PathBeneath, RulesetCreated, RulesetCreatedAttr, RulesetStatus,
};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::mount::{
    FsMountFlags, FsOpenFlags, MountAttrFlags, MountPropagationFlags, MoveMountFlags,
    OpenTreeFlags, UnmountFlags,
};
use rustix::thread::{CapabilitiesSecureBits, CapabilitySet, CapabilitySets, UnshareFlags};

use super::sys;
use super::syscalls::Filters;
use crate::error::{Error, Result};

/// Where the new root is assembled before `pivot_root` (inside the private mount namespace,
/// so nothing of it is visible outside).
const STAGE: &CStr = c"/tmp";
/// The command's private scratch directory, inside the sandbox.
pub(crate) const SCRATCH: &str = "/tmp";

/// What one mount point of the new root gets.
#[derive(Debug)]
enum Source {
    /// A symbolic link to this target (as `/bin → usr/bin`).
    Symlink(CString),
    /// The private, writable `tmpfs`.
    Scratch,
    /// The gateway's file or directory at `path`, which must be the inode `(dev, ino)`.
    Bind {
        path: CString,
        identity: (u64, u64),
        directory: bool,
        read_only: bool,
        device: bool,
    },
    /// An empty, unreadable node over a system file or directory (`directory`) that only its
    /// owner could read: what the sandbox hides when the gateway runs as root, which would
    /// own it.
    Mask { directory: bool },
    /// An empty, read-only file over a file a tool must not show (its credentials, see
    /// [`crate::grants::HIDDEN_IN_TOOLS`]): the name stays, the content is not there.
    Emptied,
    /// An overlay of the gateway's directory `lower` (read-only) and the state root's
    /// directories `upper` and `work`, each `(path, identity)`: a cache grant, whose writes
    /// stay in the state root ([`crate::caches`]).
    Overlay { layers: [(CString, (u64, u64)); 3] },
    /// A `proc` of the command's own PID namespace showing its processes only
    /// (`subset=pid,hidepid=invisible`), for the tools that find themselves through
    /// `/proc/self/exe` (the dynamic loader's `$ORIGIN`, rustc's sysroot).
    Proc,
}

/// One entry of the new root, at a path made of `components` below it.
#[derive(Debug)]
struct Entry {
    components: Vec<CString>,
    source: Source,
}

/// The entries of a command's root, parents before children, ready for the child: what a
/// [`View`] shows, with every path a C string and every folder's identity taken. It holds no
/// descriptor and is the same for every command that sees the same view.
#[derive(Debug)]
pub(crate) struct Layout {
    entries: Vec<Entry>,
}

impl Layout {
    /// The layout of `view`.
    ///
    /// # Errors
    ///
    /// `sandbox_unavailable` when a path cannot be expressed (a NUL byte, not absolute);
    /// `io` when a folder cannot be identified.
    pub(crate) fn new(view: &View<'_>) -> Result<Self> {
        Ok(Self {
            entries: view.entries()?,
        })
    }
}

/// Everything a confined command's child needs to enter its sandbox, prepared in the parent.
pub(crate) struct Plan {
    unshare: UnshareFlags,
    gateway: rustix::process::Pid,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    layout: Arc<Layout>,
    /// Each bind entry's source, re-opened by the child (one slot per entry, allocated here).
    reopened: Vec<Reopened>,
    cwd: CString,
    ruleset: Option<RulesetCreated>,
    scratch_access: BitFlags<AccessFs>,
    filters: &'static Filters,
    /// Per command, placed after the layout, parents first: the files of its tools it must not
    /// see, each covered by an empty file ([`Source::Emptied`]), and the protected paths of its
    /// read-write grants, each bound over itself ([`crate::protected`]).
    extra: Vec<Entry>,
    /// Each extra bind entry's source, re-opened by the child (slots allocated in `install`).
    extra_reopened: Vec<Reopened>,
    /// What masks are bound from (made in the child).
    masks: Option<Masks>,
    /// Stop right before `exec`, reporting [`Step::Probe`].
    probe: bool,
    /// The `size` of the command's private `/tmp`, its share of the scratch budget.
    scratch_size: CString,
    /// `cgroup.procs` of the command's own `pids` cgroup, which the child moves itself into;
    /// without one, `RLIMIT_NPROC` bounds its processes (see `limits`).
    cgroup_procs: Option<OwnedFd>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("layout", &self.layout)
            .field("cwd", &self.cwd)
            .finish_non_exhaustive()
    }
}

/// What a command's root shows.
#[derive(Debug)]
pub(crate) struct View<'a> {
    /// The system hierarchies, bound read-only.
    pub(crate) system: &'a [Mount<'a>],
    /// The system's symbolic links, `(path, target)`.
    pub(crate) symlinks: &'a [(&'a Path, &'a Path)],
    /// The device nodes.
    pub(crate) devices: &'a [Mount<'a>],
    /// `(path, is a directory)` to cover with an empty, unreadable node.
    pub(crate) masked: &'a [(&'a Path, bool)],
    /// The grants, each at its own path.
    pub(crate) grants: &'a [Mount<'a>],
    /// Whether `/proc` shows the command's own processes ([`Source::Proc`]).
    pub(crate) proc: bool,
}

impl View<'_> {
    /// The entries of the new root, parents before children; at the same depth in this order
    /// (the sort is stable): links, the scratch `tmpfs`, the system set, devices, masks, and
    /// the grants last, so that what the human granted is mounted over the rest.
    fn entries(&self) -> Result<Vec<Entry>> {
        let mut entries = Vec::new();
        for (path, target) in self.symlinks {
            entries.push(Entry {
                components: components(path)?,
                source: Source::Symlink(c_string(target.as_os_str().as_bytes())?),
            });
        }
        entries.push(Entry {
            components: components(Path::new(SCRATCH))?,
            source: Source::Scratch,
        });
        for m in self.system {
            bind_entry(&mut entries, m, false)?;
        }
        for m in self.devices {
            bind_entry(&mut entries, m, true)?;
        }
        for (path, directory) in self.masked {
            entries.push(Entry {
                components: components(path)?,
                source: Source::Mask {
                    directory: *directory,
                },
            });
        }
        if self.proc {
            entries.push(Entry {
                components: components(Path::new("/proc"))?,
                source: Source::Proc,
            });
        }
        for m in self.grants {
            bind_entry(&mut entries, m, false)?;
        }
        entries.sort_by_key(|e| e.components.len());
        Ok(entries)
    }
}

/// A cache grant to show as an overlay ([`Plan::overlaying`]).
#[derive(Debug)]
pub(crate) struct Overlay<'a> {
    /// The grant's canonical path: where it is, and where it appears.
    pub(crate) path: &'a Path,
    /// The grant's folder, as the gateway checked it: the read-only lower layer.
    pub(crate) lower: BorrowedFd<'a>,
    /// The upper layer's path and descriptor.
    pub(crate) upper: (&'a Path, BorrowedFd<'a>),
    /// This command's work directory's path and descriptor.
    pub(crate) work: (&'a Path, BorrowedFd<'a>),
}

/// A folder or file of the gateway's to show in the sandbox.
#[derive(Debug)]
pub(crate) struct Mount<'a> {
    /// Its absolute, canonical path: where it is, and where it appears.
    pub(crate) path: &'a Path,
    /// The descriptor the gateway checked it through.
    pub(crate) fd: BorrowedFd<'a>,
    /// Whether writes are refused.
    pub(crate) read_only: bool,
}

impl Plan {
    /// A plan showing `layout`, starting in `cwd` (absolute, default the scratch directory),
    /// with a network namespace unless `network`, restricted by `ruleset` (built for `abi`,
    /// this command's alone) and `filters`.
    ///
    /// # Errors
    ///
    /// `sandbox_unavailable` when `cwd` cannot be expressed (a NUL byte).
    pub(crate) fn new(
        layout: Arc<Layout>,
        cwd: Option<&Path>,
        network: bool,
        ruleset: RulesetCreated,
        abi: ABI,
        filters: &'static Filters,
    ) -> Result<Self> {
        let uid = rustix::process::geteuid().as_raw();
        let gid = rustix::process::getegid().as_raw();
        let mut unshare = UnshareFlags::NEWUSER
            | UnshareFlags::NEWNS
            | UnshareFlags::NEWPID
            | UnshareFlags::NEWIPC
            | UnshareFlags::NEWUTS
            | UnshareFlags::NEWCGROUP;
        if !network {
            unshare |= UnshareFlags::NEWNET;
        }
        Ok(Self {
            unshare,
            gateway: rustix::process::getpid(),
            uid_map: format!("{uid} {uid} 1").into_bytes(),
            gid_map: format!("{gid} {gid} 1").into_bytes(),
            reopened: layout.entries.iter().map(|_| Reopened::default()).collect(),
            layout,
            cwd: c_string(cwd.unwrap_or(Path::new(SCRATCH)).as_os_str().as_bytes())?,
            ruleset: Some(ruleset),
            scratch_access: AccessFs::from_all(abi),
            filters,
            extra: Vec::new(),
            extra_reopened: Vec::new(),
            masks: None,
            probe: false,
            scratch_size: c"1m".to_owned(),
            cgroup_procs: None,
        })
    }

    /// This plan with the bounds of `limits`: the private `/tmp` of size `scratch` (a `tmpfs`
    /// size option), and the processes bounded by the `pids` cgroup whose `cgroup.procs` is
    /// `cgroup_procs`, or else by `RLIMIT_NPROC` in the user namespace.
    pub(crate) fn bounded(mut self, scratch: CString, cgroup_procs: Option<OwnedFd>) -> Self {
        self.scratch_size = scratch;
        self.cgroup_procs = cgroup_procs;
        self
    }

    /// This plan with each of `files` (absolute paths of files in the tools it shows) covered
    /// by an empty, read-only file.
    ///
    /// # Errors
    ///
    /// `sandbox_unavailable` when a path cannot be expressed (a NUL byte, not absolute).
    pub(crate) fn emptying(mut self, files: &[PathBuf]) -> Result<Self> {
        for file in files {
            self.extra.push(Entry {
                components: components(file)?,
                source: Source::Emptied,
            });
        }
        Ok(self)
    }

    /// This plan with each of `mounts` (paths inside its read-write grants: protected paths,
    /// read-only, and the directories on the way to them, pinned) bound over itself.
    ///
    /// # Errors
    ///
    /// `sandbox_unavailable` when a path cannot be expressed; `io` when a descriptor cannot be
    /// identified.
    pub(crate) fn protecting(mut self, mounts: &[Mount<'_>]) -> Result<Self> {
        for m in mounts {
            bind_entry(&mut self.extra, m, false)?;
        }
        Ok(self)
    }

    /// This plan with each of `overlays` — a cache grant's folder at its path, and the state
    /// root's upper and work directories of its layer ([`crate::caches`]) — mounted as an
    /// overlay at the folder's path, writable, its writes kept in the upper layer.
    ///
    /// # Errors
    ///
    /// `sandbox_unavailable` when a path cannot be expressed; `io` when a descriptor cannot be
    /// identified.
    pub(crate) fn overlaying(mut self, overlays: &[Overlay<'_>]) -> Result<Self> {
        for o in overlays {
            let layer = |path: &Path, fd: BorrowedFd<'_>| -> Result<(CString, (u64, u64))> {
                let st = rustix::fs::fstat(fd).map_err(|e| Error::io("fstat", path, e))?;
                Ok((
                    c_string(path.as_os_str().as_bytes())?,
                    (st.st_dev, st.st_ino),
                ))
            };
            self.extra.push(Entry {
                components: components(o.path)?,
                source: Source::Overlay {
                    layers: [
                        layer(o.path, o.lower)?,
                        layer(o.upper.0, o.upper.1)?,
                        layer(o.work.0, o.work.1)?,
                    ],
                },
            });
        }
        Ok(self)
    }

    /// This plan as a probe: the child takes every step, then stops before `exec`.
    pub(crate) fn probing(mut self) -> Self {
        self.probe = true;
        self
    }

    /// Arrange for `command`'s child to enter this sandbox right before `exec`.
    pub(crate) fn install(mut self, command: &mut Command) {
        // Parents before children; sorted (and the child's slots made) here, where allocating
        // is allowed.
        self.extra.sort_by_key(|e| e.components.len());
        self.extra_reopened = self.extra.iter().map(|_| Reopened::default()).collect();
        sys::before_exec(command, move || self.enter());
    }

    /// The child's side: every step of the module documentation, in order.
    fn enter(&mut self) -> io::Result<()> {
        sys::close_from(3, true).map_err(|e| Step::Descriptors.failed_io(e))?;
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
            .map_err(Step::ParentDeath.failed())?;
        if rustix::process::getppid() != Some(self.gateway) {
            return Err(Step::ParentDeath.failed()(Errno::SRCH));
        }
        self.limit_before().map_err(Step::Limits.failed())?;
        sys::unshare(self.unshare).map_err(Step::Namespaces.failed())?;
        self.map_identity().map_err(Step::Identity.failed())?;
        self.limit_processes().map_err(Step::Limits.failed())?;
        self.become_pid_one()?;
        rustix::process::setsid().map_err(Step::Session.failed())?;
        self.build_root()?;
        drop_capabilities().map_err(Step::Capabilities.failed())?;
        self.restrict()?;
        if self.probe {
            return Err(Step::Probe.failed()(Errno::CANCELED));
        }
        Ok(())
    }

    /// Before the namespaces: the OOM killer's first choice (`oom_score_adj` 1000, inherited
    /// by everything the command starts), and into the command's `pids` cgroup when it has one
    /// (before its cgroup namespace, whose root it then is).
    fn limit_before(&self) -> rustix::io::Result<()> {
        use rustix::process::{DumpableBehavior, set_dumpable_behavior};
        // As in `map_identity`: `/proc/self` of a process that is not dumpable is root's.
        let was = rustix::process::dumpable_behavior()?;
        set_dumpable_behavior(DumpableBehavior::Dumpable)?;
        let written = write_file(c"/proc/self/oom_score_adj", b"1000");
        set_dumpable_behavior(was)?;
        written?;
        if let Some(procs) = &self.cgroup_procs
            && rustix::io::write(procs, b"0")? != 1
        {
            return Err(Errno::IO);
        }
        Ok(())
    }

    /// In the new user namespace: without a `pids` cgroup, at most
    /// [`MAX_PROCESSES`](super::limits::MAX_PROCESSES) processes and threads for this user in
    /// it (`RLIMIT_NPROC`, which counts per user namespace).
    fn limit_processes(&self) -> rustix::io::Result<()> {
        if self.cgroup_procs.is_some() {
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
    fn map_identity(&self) -> rustix::io::Result<()> {
        use rustix::process::{DumpableBehavior, set_dumpable_behavior};
        let was = rustix::process::dumpable_behavior()?;
        set_dumpable_behavior(DumpableBehavior::Dumpable)?;
        let written = write_file(c"/proc/self/setgroups", b"deny")
            .and_then(|()| write_file(c"/proc/self/uid_map", &self.uid_map))
            .and_then(|()| write_file(c"/proc/self/gid_map", &self.gid_map));
        set_dumpable_behavior(was)?;
        written
    }

    /// Fork; the parent waits for PID 1 of the new namespace and exits like it.
    fn become_pid_one(&self) -> io::Result<()> {
        let me = rustix::process::getpid();
        let watch = rustix::process::pidfd_open(me, rustix::process::PidfdFlags::empty())
            .map_err(Step::Fork.failed())?;
        match sys::fork().map_err(|e| Step::Fork.failed_io(e))? {
            sys::Forked::Parent(child) => {
                // Only the command may hold the pipe `std` learns of a failed `exec` through.
                let _ = sys::close_from(3, false);
                loop {
                    match rustix::process::waitpid(
                        Some(child),
                        rustix::process::WaitOptions::empty(),
                    ) {
                        Ok(Some((_, status))) => sys::exit_like(status),
                        Err(Errno::INTR) => continue,
                        _ => sys::exit(127),
                    }
                }
            }
            sys::Forked::Child => {
                rustix::process::set_parent_process_death_signal(Some(
                    rustix::process::Signal::KILL,
                ))
                .map_err(Step::ParentDeath.failed())?;
                // The waiting parent may have died before the line above: then stop here.
                let mut fds = [rustix::event::PollFd::new(
                    &watch,
                    rustix::event::PollFlags::IN,
                )];
                let ended =
                    rustix::event::poll(&mut fds, Some(&rustix::event::Timespec::default()))
                        .map_err(Step::ParentDeath.failed())?;
                if ended != 0 {
                    return Err(Step::ParentDeath.failed()(Errno::SRCH));
                }
                Ok(())
            }
        }
    }

    /// Assemble the new root, move into it and make it read-only.
    fn build_root(&mut self) -> io::Result<()> {
        let fail = Step::Root.failed();
        rustix::mount::mount_change(
            c"/",
            MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
        )
        .map_err(fail)?;
        // Re-open every source before anything is mounted over the staging point.
        let layout_slots = self.layout.entries.iter().zip(&mut self.reopened);
        let extra_slots = self.extra.iter().zip(&mut self.extra_reopened);
        for (entry, reopened) in layout_slots.chain(extra_slots) {
            let failed = Step::Identity.failed();
            match &entry.source {
                Source::Bind { path, identity, .. } => {
                    reopened[0] = Some(reopen(path, *identity).map_err(failed)?);
                }
                Source::Overlay { layers } => {
                    for (slot, (path, identity)) in reopened.iter_mut().zip(layers) {
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
        let mut own = [device_of(&root).map_err(fail)?, 0];
        self.masks = Some(make_masks(&root).map_err(fail)?);
        let layout = Arc::clone(&self.layout);
        let reopened = std::mem::take(&mut self.reopened);
        for (entry, source) in layout.entries.iter().zip(reopened) {
            self.place(&root, entry, source, &mut own)
                .map_err(Step::Mounts.failed())?;
        }
        // Below the grants and tools they are in (deeper, so placed after them).
        let extra = std::mem::take(&mut self.extra);
        let reopened = std::mem::take(&mut self.extra_reopened);
        for (entry, source) in extra.iter().zip(reopened) {
            let step = match entry.source {
                Source::Overlay { .. } => Step::Overlay,
                _ => Step::Mounts,
            };
            self.place(&root, entry, source, &mut own)
                .map_err(step.failed())?;
        }
        set_flags(
            &root,
            MountAttrFlags::MOUNT_ATTR_RDONLY
                | MountAttrFlags::MOUNT_ATTR_NOSUID
                | MountAttrFlags::MOUNT_ATTR_NODEV,
            false,
        )
        .map_err(fail)?;
        rustix::process::fchdir(&root).map_err(fail)?;
        rustix::process::pivot_root(c".", c".").map_err(fail)?;
        rustix::mount::unmount(c".", UnmountFlags::DETACH).map_err(fail)?;
        rustix::process::chdir(self.cwd.as_c_str()).map_err(Step::WorkingDirectory.failed())
    }

    /// Put `entry` in place below `root`, bound from `source` (re-opened) when it is a bind.
    /// `own` holds the devices of the sandbox's own `tmpfs` mounts, the only places a missing
    /// mount point may be created.
    fn place(
        &mut self,
        root: &OwnedFd,
        entry: &Entry,
        source: Reopened,
        own: &mut [u64; 2],
    ) -> rustix::io::Result<()> {
        let Some((name, parents)) = entry.components.split_last() else {
            return Err(Errno::INVAL);
        };
        let parent = walk(root, parents, own)?;
        match &entry.source {
            Source::Symlink(target) => {
                rustix::fs::symlinkat(target.as_c_str(), &parent, name.as_c_str())
            }
            Source::Scratch => {
                let at = mount_point(&parent, name, true, own)?;
                let scratch = new_tmpfs(c"0700", &self.scratch_size)?;
                attach(&scratch, &at)?;
                own[1] = device_of(&scratch)?;
                self.allow(&scratch, self.scratch_access)
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
                self.allow(&overlay, self.scratch_access)
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
                let masks = self.masks.as_ref().ok_or(Errno::INVAL)?;
                let from = if *directory { &masks.dir } else { &masks.file };
                bind(
                    from,
                    &mount_point(&parent, name, *directory, own)?,
                    MASK,
                    false,
                )
            }
            Source::Emptied => {
                let masks = self.masks.as_ref().ok_or(Errno::INVAL)?;
                bind(
                    &masks.empty,
                    &mount_point(&parent, name, false, own)?,
                    MASK,
                    false,
                )
            }
        }
    }

    /// Let the command do `access` in the file system `mount` (its scratch `tmpfs`, a cache's
    /// overlay): a Landlock rule the gateway could not add, as the file system did not exist
    /// yet.
    fn allow(&mut self, mount: &OwnedFd, access: BitFlags<AccessFs>) -> rustix::io::Result<()> {
        let ruleset = self.ruleset.take().ok_or(Errno::INVAL)?;
        let ruleset = ruleset
            .add_rule(PathBeneath::new(mount, access))
            .map_err(|_| Errno::NOTRECOVERABLE)?;
        self.ruleset = Some(ruleset);
        Ok(())
    }

    /// Drop into Landlock, then seccomp.
    fn restrict(&mut self) -> io::Result<()> {
        let ruleset = self
            .ruleset
            .take()
            .ok_or_else(|| Step::Landlock.failed()(Errno::INVAL))?;
        let status = ruleset
            .restrict_self()
            .map_err(|_| Step::Landlock.failed()(Errno::NOTRECOVERABLE))?;
        if status.ruleset != RulesetStatus::FullyEnforced || !status.no_new_privs {
            return Err(Step::Landlock.failed()(Errno::NOTRECOVERABLE));
        }
        for filter in [&self.filters.eperm, &self.filters.enosys] {
            seccompiler::apply_filter(filter)
                .map_err(|_| Step::Seccomp.failed()(Errno::NOTRECOVERABLE))?;
        }
        Ok(())
    }
}

/// What the child re-opened for one entry: a bind's source, or an overlay's three layers.
type Reopened = [Option<OwnedFd>; 3];

/// Re-open `path` (not following a link at its end) in the child, as the very inode
/// `identity` the gateway checked.
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

/// Add a bind mount of `m` (a device node when `device`) to `entries`.
fn bind_entry(entries: &mut Vec<Entry>, m: &Mount<'_>, device: bool) -> Result<()> {
    let stat = rustix::fs::fstat(m.fd).map_err(|e| Error::io("fstat", m.path, e))?;
    entries.push(Entry {
        components: components(m.path)?,
        source: Source::Bind {
            path: c_string(m.path.as_os_str().as_bytes())?,
            identity: (stat.st_dev, stat.st_ino),
            directory: rustix::fs::FileType::from_raw_mode(stat.st_mode)
                == rustix::fs::FileType::Directory,
            read_only: m.read_only,
            device,
        },
    });
    Ok(())
}

/// The steps of entering the sandbox, as reported when one fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
enum Step {
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
const STEP_SHIFT: i32 = 16;

impl Step {
    const ALL: [Step; 15] = [
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

    fn failed(self) -> impl Fn(Errno) -> io::Error + Copy {
        move |errno| {
            io::Error::from_raw_os_error(((self as i32) << STEP_SHIFT) | errno.raw_os_error())
        }
    }

    fn failed_io(self, e: io::Error) -> io::Error {
        self.failed()(Errno::from_io_error(&e).unwrap_or(Errno::INVAL))
    }

    fn describe(self, errno: Errno) -> String {
        let what = match self {
            Step::Descriptors => "closing inherited descriptors",
            Step::ParentDeath => "tying the command's life to the gateway's",
            Step::Limits => "bounding its processes and its claim on memory",
            Step::Namespaces => match errno {
                Errno::PERM | Errno::NOSPC | Errno::ACCESS => {
                    "creating namespaces (user namespaces are disabled here: \
                     sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone, \
                     or an AppArmor restriction)"
                }
                _ => "creating namespaces",
            },
            Step::Identity => "mapping the user, or finding a folder as it was checked",
            Step::Fork => "starting the namespace's first process",
            Step::Session => "leaving the terminal session",
            Step::Root => "building the sandbox's root",
            Step::Mounts => "mounting the system set and the grants",
            Step::Overlay => {
                "mounting a cache grant as an overlay whose writes stay in the state root \
                 (the kernel refuses overlayfs in a user namespace here, or the state root's \
                 file system as its upper layer; revoke the cache, or move the state root; \
                 ADR 0016)"
            }
            Step::WorkingDirectory => "entering the working directory",
            Step::Capabilities => "dropping capabilities",
            Step::Landlock => "enforcing the Landlock ruleset in full",
            Step::Seccomp => "installing the seccomp filter",
            Step::Probe => "the probe stopped before exec",
        };
        format!("the sandbox could not be entered: {what}: {errno}")
    }
}

/// Why a confined command's child stopped before `exec`, if `e` says it did (as opposed to
/// `exec` itself failing, such as for a missing program).
pub(crate) fn failure(e: &io::Error) -> Option<Error> {
    let raw = e.raw_os_error()?;
    let step = Step::ALL
        .into_iter()
        .find(|s| *s as i32 == raw >> STEP_SHIFT && *s != Step::Probe)?;
    Some(Error::SandboxUnavailable {
        why: step.describe(Errno::from_raw_os_error(raw & ((1 << STEP_SHIFT) - 1))),
    })
}

/// Whether `e` is a probe's report that every step succeeded.
pub(crate) fn probe_reached(e: &io::Error) -> bool {
    e.raw_os_error() == Some(((Step::Probe as i32) << STEP_SHIFT) | Errno::CANCELED.raw_os_error())
}

/// The components of the absolute `path`, as C strings.
fn components(path: &Path) -> Result<Vec<CString>> {
    let mut out = Vec::new();
    for (i, component) in path.components().enumerate() {
        match component {
            Component::RootDir if i == 0 => {}
            Component::Normal(name) => out.push(c_string(name.as_bytes())?),
            _ => {
                return Err(Error::SandboxUnavailable {
                    why: format!("{} is not a canonical absolute path", path.display()),
                });
            }
        }
    }
    if out.is_empty() {
        return Err(Error::SandboxUnavailable {
            why: "the root itself cannot be mounted into the sandbox".into(),
        });
    }
    Ok(out)
}

fn c_string(bytes: &[u8]) -> Result<CString> {
    CString::new(bytes).map_err(|_| Error::SandboxUnavailable {
        why: "a path with a NUL byte cannot be mounted".into(),
    })
}

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
fn new_overlay(lower: &OwnedFd, upper: &OwnedFd, work: &OwnedFd) -> rustix::io::Result<OwnedFd> {
    let fs = rustix::mount::fsopen(c"overlay", FsOpenFlags::FSOPEN_CLOEXEC)?;
    rustix::mount::fsconfig_set_flag(&fs, c"userxattr")?;
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

/// `/proc/self/fd/N` for `fd`, written into `buf` (no allocation: this runs in the child).
fn fd_path<'b>(fd: &OwnedFd, buf: &'b mut [u8; 40]) -> rustix::io::Result<&'b CStr> {
    use std::os::fd::AsRawFd;
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
        .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::INVAL))
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
