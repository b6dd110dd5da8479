//! Confined commands on Linux: the sandbox each command gets (the module table of
//! [`super`]), its start and end on the record, and what the sandbox must hold while the
//! command runs.

use std::ffi::{OsStr, OsString};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use landlock::ABI;

use super::probe::landlock_support;
use super::{
    Confined, ConfinedOutcome, Failure, REQUIRED_ABI, SandboxSupport, layouts, limits, masks,
    ruleset, sandbox, sys, syscalls,
};
use crate::beneath::{self, Ambient};
use crate::child::run;
use crate::control::Control;
use crate::error::{Error, Result, Shown};
use crate::grants::{Access, Alias, Effective, Kind, Session, Snapshot, Want};

impl Confined {
    /// What the command's start record says: what it runs, where, with which grants.
    fn start_fields(&self, grants: &[(Alias, Access)]) -> serde_json::Value {
        serde_json::json!({
            "program": self.program.to_string_lossy(),
            "args": self.args.iter().map(|a| Shown::bytes(a.as_encoded_bytes()).to_string()).collect::<Vec<_>>(),
            "cwd": self.cwd,
            "network": self.network,
            "grants": grants,
            "timeout_s": self.limits.timeout.as_secs(),
        })
    }

    pub(super) fn run_recorded(
        &self,
        session: &Session,
        control: &Control,
    ) -> std::result::Result<ConfinedOutcome, Failure> {
        let abi = supported_abi().map_err(Failure::Before)?;
        let (mut command, mut prepared) = self.command(abi, session).map_err(Failure::Before)?;
        let grants: Vec<(Alias, Access)> = prepared
            .used
            .iter()
            .map(|(a, access, _)| (a.clone(), *access))
            .collect();
        let mut fields = self.start_fields(&grants);
        fields["changes"] = prepared.layers.as_ref().map(|l| l.id()).into();
        // Recorded before it runs: a gateway killed while it runs leaves its start, which the
        // next process closes (`crate::ongoing`).
        let ongoing = session.grants().ongoing().map_err(Failure::Before)?;
        let started = ongoing
            .start("exec", session.actor(), fields)
            .map_err(Failure::Before)?;
        let tail = Tail::new();
        let watch = || {
            if started.stop_asked() {
                return Some(crate::running::STOPPED_BY_HUMAN.to_owned());
            }
            tail.publish(&started, control);
            still_granted(session, &prepared.used)
        };
        let began = std::time::Instant::now();
        let ran = run(&mut command, self.limits, control, Some(&watch))
            .map_err(|e| spawn_failure(e, &self.program));
        let layers = prepared.layers.take();
        drop(prepared);
        let mut outcome = match ran {
            Ok(outcome) => outcome,
            Err(e) => {
                let error =
                    serde_json::json!({ "code": e.code(), "message": e.message().to_string() });
                let _ = started.end(serde_json::json!({ "error": error }));
                // What it may have written before failing is decided like any command's.
                drop(layers.map(|l| l.finish(session)));
                return Err(Failure::After(e));
            }
        };
        outcome.recorded = started
            .end(serde_json::json!({
                "exit_code": outcome.exit_code,
                "signal": outcome.signal,
                "timed_out": outcome.timed_out,
                "truncated": outcome.truncated,
                "stopped": outcome.stopped,
                "duration_ms": crate::ongoing::millis(began.elapsed()),
            }))
            .inspect_err(|e| tracing::warn!(error = %e, "could not record how a command ended"))
            .is_ok();
        // Its mount namespace is gone with its last process: the layers are the command's
        // whole doing, to decide now.
        let changes = layers.map(|l| l.finish(session)).unwrap_or_default();
        Ok(ConfinedOutcome {
            hint: missing_program_hint(&outcome),
            outcome,
            grants,
            changes,
        })
    }

    /// The command, set up to enter its sandbox, and what must live while it runs.
    fn command(&self, abi: ABI, session: &Session) -> Result<(Command, Prepared)> {
        let snapshot = session.snapshot()?;
        let cwd_grant = match &self.cwd {
            Some(alias) => Some(snapshot.folder(alias, Want::Read)?),
            None => None,
        };
        let available: Vec<_> = snapshot.available().collect();
        // A cache whose private layer is broken is left out of the command (never its folder
        // without the layer); only a command that starts in it is refused.
        let (caches, broken) = cache_layers(session, &available);
        for (alias, e) in broken {
            if self.cwd.as_ref() == Some(&alias) {
                return Err(e);
            }
            tracing::warn!(error = %e, "cache `{alias}` is left out of the command until `safe-lanes init` repairs its layer");
        }
        let grants: Vec<&Effective> = available
            .into_iter()
            .filter(|g| {
                g.toolchain.kind != Kind::Cache || caches.iter().any(|(c, _)| c.alias == g.alias)
            })
            .collect();
        let aliases: Vec<Alias> = grants.iter().map(|g| g.alias.clone()).collect();
        let masked = masked_now()?;
        let layout =
            layouts::layout_for(&snapshot, &aliases, &masked, || layout(&grants, &masked))?;
        // Held until the command ends: its change set's layers, and its caches' work
        // directories.
        let layered: Vec<&Effective> = grants.iter().copied().filter(|g| layered(g)).collect();
        let layers = if layered.is_empty() {
            None
        } else {
            let origin = crate::changes::set::Origin {
                op: "exec".into(),
                command: self.command_line(),
                actor: session.actor().to_string(),
            };
            Some(crate::changes::command::Layers::begin(
                session, origin, &layered,
            )?)
        };
        let scratch = limits::Scratch::reserve();
        let processes = limits::ProcessLimit::for_command()?;
        let mut overlays = overlays(&caches)?;
        if let Some(layers) = &layers {
            overlays.extend(layers.layers().iter().map(|l| sandbox::Overlay {
                path: &l.path,
                lower: l.folder.as_fd(),
                upper: (&l.upper.1, l.upper.0.as_fd()),
                work: (&l.work.1, l.work.0.as_fd()),
            }));
        }
        let plan = prepare(
            abi,
            &grants,
            layout,
            cwd_grant.map(|g| g.path.as_path()),
            self.network,
        )?
        .overlaying(&overlays)?
        .bounded(scratch.size_option(), processes.bound()?);
        drop(overlays);
        // The layers' descriptors are borrowed by the plan's preparation only.
        let caches: Vec<crate::caches::Layer> =
            caches.into_iter().map(|(_, layer)| layer).collect();

        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .env_clear()
            .env("PATH", child_path(&grants))
            .env(
                "LANG",
                std::env::var_os("LANG").unwrap_or_else(|| "C.UTF-8".into()),
            )
            .env("HOME", sandbox::SCRATCH)
            .env("TMPDIR", sandbox::SCRATCH)
            .envs(grants.iter().map(|g| (g.env.as_str(), g.path.as_os_str())))
            .envs(grants.iter().flat_map(|g| {
                let vars = g.toolchain.vars.iter();
                vars.map(|v| (v.as_str(), g.path.as_os_str()))
            }));
        plan.install(&mut command);
        let used: Vec<(Alias, Access, PathBuf)> = grants
            .iter()
            .map(|g| (g.alias.clone(), g.access, g.path.clone()))
            .collect();
        let prepared = Prepared {
            used,
            layers,
            _caches: caches,
            _scratch: scratch,
            _processes: processes,
        };
        Ok((command, prepared))
    }

    /// The command line, as the human reads it in a change set.
    fn command_line(&self) -> String {
        let mut line = self.program.to_string_lossy().into_owned();
        for arg in &self.args {
            line.push(' ');
            line.push_str(&arg.to_string_lossy());
        }
        line
    }
}

/// Whether a command sees `grant` through a layer of its own ([`crate::changes`]): every
/// read-write folder grant the human did not make `--direct`.
fn layered(grant: &Effective) -> bool {
    grant.access == Access::ReadWrite && grant.toolchain.kind == Kind::Folder && !grant.direct
}

/// Read-only system hierarchies every confined program gets (those that exist).
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
];

/// Device files readable by every confined program.
const READABLE_DEVICES: &[&str] = &["/dev/zero", "/dev/urandom", "/dev/random"];

/// Why the sandbox opens the system set by path: the system's, the same for every command.
const SYSTEM_SET: Ambient = Ambient::because("the system set every confined command sees");

/// What a failure to run `program` in its sandbox means: a step of the sandbox that failed
/// (`sandbox_unavailable`), a program the sandbox does not hold ([`missing_program`]), or the
/// error as it is.
fn spawn_failure(e: Error, program: &OsStr) -> Error {
    use std::io::ErrorKind::{NotFound, PermissionDenied};
    match e {
        Error::Io {
            call: "spawn",
            ref error,
            ..
        } if matches!(error.kind(), NotFound | PermissionDenied) => missing_program(program),
        Error::Io { ref error, .. } => sandbox::failure(error).unwrap_or(e),
        e => e,
    }
}

/// The refusal for a program the sandbox cannot find or run, naming the approval that is
/// missing: the per-user toolchain of the gateway's home that has it, if one does.
fn missing_program(program: &OsStr) -> Error {
    let name = Path::new(program).file_name().unwrap_or(program);
    Error::NotFound {
        path: Shown::path(Path::new(program)),
        why: crate::grants::detect::not_in_sandbox(&name.to_string_lossy()).into(),
    }
}

/// What a command that ended as a shell ends when it cannot find a program (exit status 127,
/// `sh: 1: cargo: not found`) is told: where that program is and which tool grant would let
/// it in.
fn missing_program_hint(outcome: &crate::Outcome) -> Option<String> {
    if outcome.exit_code != Some(127) {
        return None;
    }
    let name = crate::grants::detect::not_found_in(&outcome.stderr)?;
    Some(format!(
        "{name}: {}",
        crate::grants::detect::not_in_sandbox(name)
    ))
}

/// How often a running command's output tail is rewritten for the human to see.
const TAIL_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// What the human was last shown of a running command's output ([`crate::running`]).
struct Tail {
    last: std::sync::Mutex<(std::time::Instant, usize)>,
}

impl Tail {
    fn new() -> Self {
        Self {
            last: std::sync::Mutex::new((std::time::Instant::now(), 0)),
        }
    }

    /// Keep the end of `control`'s output in `started`'s entry, when there is more than was
    /// shown and a second has passed.
    fn publish(&self, started: &crate::ongoing::Started, control: &Control) {
        let mut last = crate::sync::lock(&self.last);
        if last.0.elapsed() < TAIL_EVERY {
            return;
        }
        // With room before the kept end, so it can start at a line.
        let (stdout, stderr, total) = control.tails(2 * crate::ongoing::MAX_TAIL);
        if total != last.1 {
            started.publish_tail(&stdout, &stderr);
        }
        *last = (std::time::Instant::now(), total);
    }
}

/// The `PATH` of a confined command: the bin folder of each available tool, in the
/// manifest's order, then the system's ([`CHILD_PATH`]).
fn child_path(grants: &[&crate::grants::Effective]) -> OsString {
    let mut path = OsString::new();
    for g in grants {
        if let Some(bin) = &g.toolchain.bin {
            path.push(g.path.join(bin.as_str()));
            path.push(":");
        }
    }
    path.push(CHILD_PATH);
    path
}

/// The system's part of the `PATH` of confined programs.
const CHILD_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";

/// What a command's sandbox needs while the command runs: its grants as they were when it
/// started (for the watchdog), its change set's layers, its caches' work directories, its
/// share of the scratch budget and its process limit.
struct Prepared {
    used: Vec<(Alias, Access, PathBuf)>,
    layers: Option<crate::changes::command::Layers>,
    _caches: Vec<crate::caches::Layer>,
    _scratch: limits::Scratch,
    _processes: limits::ProcessLimit,
}

/// The sandbox of a command that sees `grants` (shown as `layout` says), starts in `cwd`
/// (default: its scratch directory) and may use TCP when `network`. Each grant's folder is
/// confirmed, now, to still be at its path.
fn prepare(
    abi: ABI,
    grants: &[&Effective],
    layout: Arc<sandbox::Layout>,
    cwd: Option<&Path>,
    network: bool,
) -> Result<sandbox::Plan> {
    let system = SystemSet::get();
    let mut rules = Vec::new();
    // A cache and a layered grant are overlays the child makes; their rules are added there.
    for g in grants
        .iter()
        .filter(|g| g.toolchain.kind != Kind::Cache && !layered(g))
    {
        let access = match g.access {
            Access::ReadOnly => ruleset::read_only(abi),
            Access::ReadWrite => ruleset::read_write(abi),
        };
        rules.push((g.folder()?.as_fd(), access));
    }
    for (_, fd, _) in &system.dirs {
        rules.push((fd.as_fd(), ruleset::read_only(abi)));
    }
    for (_, fd, writable) in &system.devices {
        rules.push((fd.as_fd(), ruleset::device(abi, *writable)));
    }
    sandbox::Plan::new(
        layout,
        cwd,
        network,
        ruleset::build(abi, &rules, network)?,
        abi,
        syscalls::filters(network)?,
    )?
    .emptying(&hidden_files(grants)?)?
    .masking(&hidden_paths(grants)?)
}

/// The hidden paths of each folder among `grants` that are there now ([`crate::hidden`],
/// found by [`masks::hidden_in`]), to cover: a command can neither read nor list them.
fn hidden_paths(grants: &[&Effective]) -> Result<Vec<(PathBuf, bool)>> {
    let mut covered = Vec::new();
    for g in grants.iter().filter(|g| g.toolchain.kind.is_folder()) {
        let found = masks::hidden_in(g.folder()?.as_fd(), &g.path, &g.hidden())?;
        covered.extend(found.iter().cloned());
    }
    Ok(covered)
}

/// The private layer of each cache among `grants`, with a work directory for one command; and
/// the caches whose layer cannot be had (the `caches` directory, or the cache's own, broken),
/// each with why.
#[allow(clippy::type_complexity)]
fn cache_layers<'g>(
    session: &Session,
    grants: &[&'g Effective],
) -> (
    Vec<(&'g Effective, crate::caches::Layer)>,
    Vec<(Alias, Error)>,
) {
    let cache_grants: Vec<&Effective> = grants
        .iter()
        .copied()
        .filter(|g| g.toolchain.kind == Kind::Cache)
        .collect();
    let (mut layers, mut broken) = (Vec::new(), Vec::new());
    if cache_grants.is_empty() {
        return (layers, broken);
    }
    let caches = crate::caches::Caches::open(session.grants().root(), session.grants().root_path());
    for g in cache_grants {
        let layer = match &caches {
            Ok(caches) => caches.layer(g.alias.as_str(), &g.id),
            Err(e) => Err(Error::InsecureRoot {
                path: Shown::text(g.alias.as_str()),
                why: format!("its layer cannot be had: {}", e.message()),
            }),
        };
        match layer {
            Ok(layer) => layers.push((g, layer)),
            Err(e) => broken.push((g.alias.clone(), e)),
        }
    }
    (layers, broken)
}

/// The overlays of the cache layers `caches`.
fn overlays<'a>(
    caches: &'a [(&Effective, crate::caches::Layer)],
) -> Result<Vec<sandbox::Overlay<'a>>> {
    let mut out = Vec::new();
    for (g, layer) in caches {
        out.push(sandbox::Overlay {
            path: &g.path,
            lower: g.folder()?.as_fd(),
            upper: (&layer.upper, layer.upper_dir.as_fd()),
            work: (&layer.work, layer.work_dir().as_fd()),
        });
    }
    Ok(out)
}

/// The files of `grants` a command must not see ([`Kind::hidden`]) that are there now: each
/// looked up beneath its grant's folder, without following a link (a link is not covered: it
/// leads nowhere the command may not already read).
fn hidden_files(grants: &[&Effective]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for g in grants {
        for name in g.toolchain.kind.hidden() {
            // Absent is fine; a failure to look is not (the command would see it).
            let st = match g.folder()?.stat_entry(crate::input::Name::new(name)?) {
                Ok(st) => st,
                Err(Error::NotFound { .. }) => continue,
                Err(e) => return Err(e),
            };
            if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile
            {
                files.push(g.path.join(name));
            }
        }
    }
    Ok(files)
}

/// What the commands started now may not see ([`masks`]): searched in the system set's own
/// `/etc`, the directory the sandbox shows.
fn masked_now() -> Result<masks::Masked> {
    let system = SystemSet::get();
    let top = match system.dir(masks::MASKED_HIERARCHY) {
        Some(fd) => masks::Top::Dir(fd),
        None if system
            .links
            .iter()
            .any(|(p, _)| *p == Path::new(masks::MASKED_HIERARCHY)) =>
        {
            masks::Top::Link
        }
        None => masks::Top::Absent,
    };
    masks::current(top)
}

/// The layout of the root of a command that sees `grants`: the system set with `masked`
/// covered, then the grants (read-only grants read-only; caches and read-write grants are each
/// command's own overlay, [`cache_layers`] and [`layered`]).
fn layout(grants: &[&Effective], masked: &masks::Masked) -> Result<sandbox::Layout> {
    let system = SystemSet::get();
    let mut grant_mounts = Vec::new();
    for g in grants
        .iter()
        .filter(|g| g.toolchain.kind != Kind::Cache && !layered(g))
    {
        grant_mounts.push(sandbox::Mount {
            path: &g.path,
            fd: g.folder()?.as_fd(),
            read_only: g.access == Access::ReadOnly,
        });
    }
    sandbox::Layout::new(&sandbox::View {
        system: &system.mounts(&system.dirs, true),
        symlinks: &system.symlinks(),
        devices: &system.mounts(&system.devices, false),
        masked: &masked
            .iter()
            .map(|(p, d)| (p.as_path(), *d))
            .collect::<Vec<_>>(),
        grants: &grant_mounts,
        proc: grants.iter().any(|g| g.toolchain.kind == Kind::Tool),
    })
}

/// Probe the whole sandbox: a child goes through every step a confined command's child takes
/// — namespaces, the new root, capabilities, Landlock, seccomp — and stops right before
/// `exec`. Nothing is run.
pub fn sandbox_support() -> SandboxSupport {
    let landlock = landlock_support();
    let outcome = supported_abi().and_then(|abi| {
        let processes = limits::ProcessLimit::for_command()?;
        let plan = prepare(
            abi,
            &[],
            Arc::new(layout(&[], &masked_now()?)?),
            None,
            false,
        )?
        .bounded(c"1m".to_owned(), processes.bound()?)
        .probing();
        let mut command = Command::new("/");
        plan.install(&mut command);
        let spawned = command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        match spawned {
            Err(e) if sandbox::probe_reached(&e) => Ok(abi),
            Err(e) => Err(sandbox::failure(&e).unwrap_or_else(|| Error::io("spawn", "/", e))),
            Ok(mut child) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(Error::SandboxUnavailable {
                    why: "the sandbox probe was not stopped before exec".into(),
                })
            }
        }
    });
    match outcome {
        Ok(abi) => SandboxSupport {
            landlock,
            available: true,
            layers: vec![
                "user, mount, PID, IPC, UTS and cgroup namespaces (and network unless asked for)"
                    .into(),
                "a root of the system set and the grants only (read-only grants read-only)".into(),
                "read-write grants and caches as overlays whose writes stay in the state root; \
                 a read-write grant's changes published when the command ends, what the \
                 human's tools would run held for the human"
                    .into(),
                "no capabilities (bounding and ambient sets empty, securebits locked)".into(),
                format!("Landlock ABI {}", abi as i32),
                "seccomp filter (no set-uid or set-gid bits, device nodes, FIFOs or sockets \
                 created)"
                    .into(),
                format!(
                    "at most {} processes per command ({}); oom_score_adj 1000",
                    limits::MAX_PROCESSES,
                    limits::process_limit_mechanism()
                ),
                format!(
                    "private /tmp of at most {} MiB per command, {} MiB shared by all commands \
                     of one gateway",
                    limits::SCRATCH_SIZE >> 20,
                    limits::scratch_budget() >> 20
                ),
            ],
            problem: None,
        },
        Err(e) => SandboxSupport {
            landlock,
            available: false,
            layers: Vec::new(),
            problem: Some(e.to_string()),
        },
    }
}

/// `None` while every grant in `used` is still in the manifest with the same folder and at least
/// the same access; otherwise why the command must stop.
fn still_granted(session: &Session, used: &[(Alias, Access, PathBuf)]) -> Option<String> {
    let now: Arc<Snapshot> = match session.snapshot() {
        Ok(now) => now,
        Err(e) => return Some(format!("the grants can no longer be read: {e}")),
    };
    for (alias, access, path) in used {
        let Some(current) = now.grants.iter().find(|g| &g.alias == alias) else {
            return Some(format!("grant `{alias}` was revoked"));
        };
        if &current.path != path {
            return Some(format!("grant `{alias}` now points to another folder"));
        }
        if current.access < *access {
            return Some(format!(
                "grant `{alias}` was narrowed to {}",
                current.access
            ));
        }
        if !current.is_available() {
            return Some(format!("grant `{alias}` became unavailable"));
        }
    }
    None
}

/// The Landlock ABI rulesets are built for: the kernel's (as far as the `landlock` crate
/// knows it), at least [`REQUIRED_ABI`]. One system call: that the ruleset is then fully
/// enforced is checked where it is, by each command's child before `exec` (a ruleset built
/// for this ABI is a hard requirement, and a status short of fully enforced with
/// `no_new_privs` stops the child). Where it is below, the probe says why.
fn supported_abi() -> Result<ABI> {
    match sys::landlock_abi() {
        Some(abi) if abi >= REQUIRED_ABI => Ok(ABI::from(abi as i32)),
        _ => Err(Error::SandboxUnavailable {
            why: landlock_support()
                .problem
                .unwrap_or_else(|| "Landlock is not available".to_owned()),
        }),
    }
}

/// The system read-only set as it exists on this host, looked up once per process: the
/// hierarchies that are real directories (bound read-only), those that are symbolic links
/// (recreated as links, such as `/bin → usr/bin`), and the device files.
#[derive(Debug)]
struct SystemSet {
    /// `(path, descriptor)` of each directory.
    dirs: Vec<(&'static Path, std::os::fd::OwnedFd, bool)>,
    /// `(path, target)` of each symbolic link.
    links: Vec<(&'static Path, PathBuf)>,
    /// `(path, descriptor, writable)` of each device.
    devices: Vec<(&'static Path, std::os::fd::OwnedFd, bool)>,
}

impl SystemSet {
    fn get() -> &'static SystemSet {
        static SET: OnceLock<SystemSet> = OnceLock::new();
        SET.get_or_init(|| {
            let mut set = SystemSet {
                dirs: Vec::new(),
                links: Vec::new(),
                devices: Vec::new(),
            };
            for dir in SYSTEM_DIRS {
                let path = Path::new(dir);
                if let Ok(target) = rustix::fs::readlink(path, Vec::new()) {
                    set.links
                        .push((path, PathBuf::from(OsStr::from_bytes(target.as_bytes()))));
                } else if let Ok(fd) = beneath::open_path(path, SYSTEM_SET) {
                    set.dirs.push((path, fd, false));
                }
            }
            for (dev, writable) in READABLE_DEVICES
                .iter()
                .map(|d| (d, false))
                .chain([(&"/dev/null", true)])
            {
                if let Ok(fd) = beneath::open_path(Path::new(dev), SYSTEM_SET) {
                    set.devices.push((Path::new(*dev), fd, writable));
                }
            }
            set
        })
    }

    fn mounts<'a>(
        &self,
        entries: &'a [(&'static Path, std::os::fd::OwnedFd, bool)],
        read_only: bool,
    ) -> Vec<sandbox::Mount<'a>> {
        entries
            .iter()
            .map(|(path, fd, _)| sandbox::Mount {
                path,
                fd: fd.as_fd(),
                read_only,
            })
            .collect()
    }

    /// The set's descriptor of `path`, one of [`SYSTEM_DIRS`], where it has one.
    fn dir(&self, path: &str) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.dirs
            .iter()
            .find(|(p, ..)| *p == Path::new(path))
            .map(|(_, fd, _)| fd.as_fd())
    }

    fn symlinks(&self) -> Vec<(&Path, &Path)> {
        self.links.iter().map(|(p, t)| (*p, t.as_path())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command path asks the kernel one question (its Landlock ABI); `doctor`'s probe
    /// restricts a thread with the required ruleset. Where the probe finds that ruleset fully
    /// enforced, the command path builds for the same ABI the probe reports.
    #[test]
    fn the_command_path_and_the_probe_see_the_same_landlock() {
        let probe = landlock_support();
        assert!(
            probe.fully_enforced,
            "this test needs Landlock ABI {REQUIRED_ABI}: {:?}",
            probe.problem
        );
        assert_eq!(sys::landlock_abi(), probe.abi);
        let kernel = probe.abi.expect("the probe's ABI");
        assert_eq!(
            supported_abi().expect("supported"),
            ABI::from(kernel as i32)
        );
    }
}
