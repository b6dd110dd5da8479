//! The world a confined command lives in: its own namespaces, a root made of the system set
//! and its grants only, no capabilities, then Landlock and seccomp.
//!
//! A [`Plan`] is prepared in the gateway so that what runs after `fork` only makes system
//! calls. What does not depend on the command is built once and shared: the [`Layout`] of the
//! root (paths turned into C strings, the identity of every folder to mount) for as long as
//! the grants it was made from stand, and the seccomp programs for the process's life. The
//! Landlock ruleset is the command's own: its child adds the rule for its scratch `tmpfs` to
//! it, so a ruleset is never handed to two commands. [`Plan::install`] arranges for the
//! spawned child to enter it, in [`pre_exec`], the one module of what runs between `fork` and
//! `exec`:
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

use std::ffi::CString;
use std::io;
use std::os::fd::BorrowedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use landlock::{ABI, Access, AccessFs, BitFlags, RulesetCreated};
use rustix::io::Errno;
use rustix::thread::UnshareFlags;

use super::limits::ProcessBound;
use super::pre_exec::{self, Reopened, STEP_SHIFT, Step};
use super::syscalls::Filters;
use crate::error::{Error, Result};

/// The command's private scratch directory, inside the sandbox.
pub(crate) const SCRATCH: &str = "/tmp";

/// What one mount point of the new root gets.
#[derive(Debug)]
pub(super) enum Source {
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
pub(super) struct Entry {
    pub(super) components: Vec<CString>,
    pub(super) source: Source,
}

/// The entries of a command's root, parents before children, ready for the child: what a
/// [`View`] shows, with every path a C string and every folder's identity taken. It holds no
/// descriptor and is the same for every command that sees the same view.
#[derive(Debug)]
pub(crate) struct Layout {
    pub(super) entries: Vec<Entry>,
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

/// Everything a confined command's child needs to enter its sandbox, prepared in the parent:
/// the child ([`pre_exec`]) reads it, fills the slots allocated for it, and allocates
/// nothing.
pub(crate) struct Plan {
    /// The namespaces to enter.
    pub(super) unshare: UnshareFlags,
    /// The gateway, whose death the child must not outlive.
    pub(super) gateway: rustix::process::Pid,
    /// What the child writes to its `uid_map`.
    pub(super) uid_map: Vec<u8>,
    /// What the child writes to its `gid_map`.
    pub(super) gid_map: Vec<u8>,
    /// The root every command of these grants sees.
    pub(super) layout: Arc<Layout>,
    /// Per command, placed after the layout, parents first: the files of its tools it must not
    /// see, each covered by an empty file ([`Source::Emptied`]), and its overlays: its read-write
    /// grants' layers and its caches ([`Source::Overlay`]).
    pub(super) extra: Vec<Entry>,
    /// One slot per entry of the layout, then of `extra`, for the sources the child re-opens
    /// (allocated in [`Plan::install`]).
    pub(super) slots: Vec<Reopened>,
    /// Where the command starts.
    pub(super) cwd: CString,
    /// The command's own Landlock ruleset, which the child completes and enforces.
    pub(super) ruleset: Option<RulesetCreated>,
    /// What the command may do in its scratch `tmpfs` and its caches' overlays.
    pub(super) scratch_access: BitFlags<AccessFs>,
    /// The seccomp programs, built once per process.
    pub(super) filters: &'static Filters,
    /// Stop right before `exec`, reporting [`Step::Probe`].
    pub(super) probe: bool,
    /// The `size` of the command's private `/tmp`, its share of the scratch budget.
    pub(super) scratch_size: CString,
    /// How the child bounds the command's processes (see `limits`).
    pub(super) processes: ProcessBound,
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
            layout,
            cwd: c_string(cwd.unwrap_or(Path::new(SCRATCH)).as_os_str().as_bytes())?,
            ruleset: Some(ruleset),
            scratch_access: AccessFs::from_all(abi),
            filters,
            extra: Vec::new(),
            slots: Vec::new(),
            probe: false,
            scratch_size: c"1m".to_owned(),
            processes: ProcessBound::Rlimit,
        })
    }

    /// This plan with the bounds of `limits`: the private `/tmp` of size `scratch` (a `tmpfs`
    /// size option), and the processes bounded as `processes` says.
    pub(crate) fn bounded(mut self, scratch: CString, processes: ProcessBound) -> Self {
        self.scratch_size = scratch;
        self.processes = processes;
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

    /// This plan with each of `covered` — `(absolute path, is a directory)` of what a grant
    /// hides — covered by an empty node nobody may read.
    ///
    /// # Errors
    ///
    /// `sandbox_unavailable` when a path cannot be expressed (a NUL byte, not absolute).
    pub(crate) fn masking(mut self, covered: &[(PathBuf, bool)]) -> Result<Self> {
        for (path, directory) in covered {
            self.extra.push(Entry {
                components: components(path)?,
                source: Source::Mask {
                    directory: *directory,
                },
            });
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

    /// Arrange for `command`'s child to enter this sandbox right before `exec`
    /// ([`pre_exec::install_sandbox`]).
    pub(crate) fn install(mut self, command: &mut Command) {
        // Parents before children, and one slot per entry for what the child re-opens: sorted
        // and allocated here, where allocating is allowed.
        // Parents first; at one depth a cover last, so that nothing mounted at the same path
        // (a grant's overlay) lands on top of it.
        self.extra
            .sort_by_key(|e| (e.components.len(), matches!(e.source, Source::Mask { .. })));
        let entries = self.layout.entries.len() + self.extra.len();
        self.slots = (0..entries).map(|_| Reopened::default()).collect();
        pre_exec::install_sandbox(command, self);
    }
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

/// What the gateway says of `step` failing with `errno`.
fn describe(step: Step, errno: Errno) -> String {
    let what = match step {
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
            "mounting a read-write grant or a cache as an overlay whose writes stay in the \
                 state root (the kernel refuses overlayfs in a user namespace here, the \
                 grant's folder as its lower layer, or the state root's file system as its \
                 upper layer: one without user extended attributes); move the state root, or \
                 make the grant direct (`safe-lanes grant set-access ALIAS read_write \
                 --direct`, which holds nothing for review; ADR 0027)"
        }
        Step::WorkingDirectory => "entering the working directory",
        Step::Capabilities => "dropping capabilities",
        Step::Landlock => "enforcing the Landlock ruleset in full",
        Step::Seccomp => "installing the seccomp filter",
        Step::Probe => "the probe stopped before exec",
    };
    format!("the sandbox could not be entered: {what}: {errno}")
}

/// Why a confined command's child stopped before `exec`, if `e` says it did (as opposed to
/// `exec` itself failing, such as for a missing program).
pub(crate) fn failure(e: &io::Error) -> Option<Error> {
    let raw = e.raw_os_error()?;
    let step = Step::ALL
        .into_iter()
        .find(|s| *s as i32 == raw >> STEP_SHIFT && *s != Step::Probe)?;
    Some(Error::SandboxUnavailable {
        why: describe(
            step,
            Errno::from_raw_os_error(raw & ((1 << STEP_SHIFT) - 1)),
        ),
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
