//! `safe_lanes.AgentDesk`: everything an agent may ask a gateway for, one method each, with
//! the report each answers; `safe_lanes.Control`, to stop a call from another thread.

use std::sync::Mutex;
use std::sync::mpsc;
use std::time::Duration;

use pyo3::prelude::*;
use safe_lanes::desk::{AccessAsk, ShellRequest};

use crate::deposit::{Uploader, seconds};
use crate::download::{DownloadList, Hint, Saved, streamed};
use crate::error::{Failure, Result};
use crate::report::report;
use crate::root::StateRoot;
use crate::upload::{Resolved, Source};

/// The agent's door: one method per operation an agent may ask for. Each takes the agent's
/// input as it arrived (names, paths, aliases, diffs, commands — untrusted), checks it,
/// records it in the audit log as the agent, and answers one report. Nothing here approves
/// or widens a grant: that is `safe_lanes.human.Grants`, the human's.
///
/// Every call releases the GIL while it works. One desk is meant to be shared by every
/// thread of the gateway: its lane, its session (following the manifest) and its background
/// jobs are held once.
#[pyclass(frozen, module = "safe_lanes")]
#[derive(Debug)]
pub(crate) struct AgentDesk(safe_lanes::AgentDesk);

#[pymethods]
impl AgentDesk {
    /// The desk of `root`. `manifest`: the grants file (default `<root>/workflow.json`);
    /// `only`: what this agent may see of the human's grants (`"site,docs:read_only"`, as
    /// `safe-lanes-mcp --only`; a sub-agent's desk sees at most that); `max_bytes`: the
    /// largest save or upload; `uploader`: without one, uploads are `not_configured`;
    /// `max_output`: bytes kept of each stream of a command; `max_jobs`: background jobs at
    /// once; `client`: the agent's name, shown to the human with its requests.
    ///
    /// Raises `Refused` for a malformed `only` (`invalid_argument`, `invalid_alias`).
    #[new]
    #[pyo3(signature = (
        root, *, manifest=None, only=None, max_bytes=50 << 20, uploader=None,
        max_output=256 << 10, max_jobs=8, client=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        root: &StateRoot,
        manifest: Option<std::path::PathBuf>,
        only: Option<String>,
        max_bytes: u64,
        uploader: Option<&Uploader>,
        max_output: usize,
        max_jobs: usize,
        client: Option<String>,
    ) -> Result<Self> {
        let mut options = safe_lanes::DeskOptions::default();
        options.manifest = manifest;
        if let Some(only) = only {
            options.narrowing = only.parse()?;
        }
        options.max_bytes = max_bytes;
        options.uploader = uploader.map(|u| u.0.clone());
        options.max_output = max_output;
        options.max_jobs = max_jobs;
        options.client = client;
        let root = root.handle()?;
        Ok(Self(
            py.detach(|| safe_lanes::AgentDesk::open(root, options))?,
        ))
    }

    /// This desk for the client named `client` (its requests show the name to the human);
    /// everything else is shared.
    fn with_client(&self, client: String) -> Self {
        Self(self.0.with_client(client))
    }

    /// Whether uploads are configured (an uploader was given).
    #[getter]
    fn can_upload(&self) -> bool {
        self.0.can_upload()
    }

    /// Save content received from a third party into the download lane, under a name made
    /// from `name_hint` (sanitized; never a path), never replacing a file. `data` is `bytes`,
    /// a binary file object, or an iterable of `bytes`, streamed; `control.stop()` from another
    /// thread abandons it (nothing is left).
    ///
    /// Raises `Refused` (`too_large`), `Failed` (`io`, or what `data` raised as its cause).
    #[pyo3(signature = (name_hint, data, *, control=None))]
    fn save(
        &self,
        py: Python<'_>,
        name_hint: Hint,
        data: &Bound<'_, PyAny>,
        control: Option<&Control>,
    ) -> PyResult<Saved> {
        let hint = name_hint.into_bytes();
        let desk = &self.0;
        streamed(py, data, control, move |content| desk.save(hint, content)).map(Saved)
    }

    /// A page of the download lane's files, by name: at most `limit`, after the `cursor` a
    /// previous page gave.
    #[pyo3(signature = (cursor=None, limit=100))]
    fn downloads(
        &self,
        py: Python<'_>,
        cursor: Option<String>,
        limit: usize,
    ) -> Result<DownloadList> {
        Ok(DownloadList(
            py.detach(|| self.0.downloads(cursor.as_deref(), limit))?,
        ))
    }

    /// Check that the file at `path` (absolute, as the agent gave it) may be uploaded, and hash
    /// it through the checked descriptor.
    ///
    /// Raises `Refused` with `outside_allowlist`, `state_root`, `not_regular_file`,
    /// `hardlinked`, `not_found`, … (recorded as `upload.refused`).
    fn resolve_upload(&self, py: Python<'_>, path: String) -> Result<Source> {
        Ok(Source(Resolved::from(
            py.detach(|| self.0.resolve_upload(&path))?,
        )))
    }

    /// Upload the file at `path` (checked as `resolve_upload` does) with the desk's uploader:
    /// staged in the deposit, handed to it, erased.
    ///
    /// Raises `Refused` (`not_configured` without an uploader, the refusals of
    /// `resolve_upload`, `too_large`), `Failed` (`io`) when the uploader cannot start, fails or
    /// times out.
    fn upload_file(&self, py: Python<'_>, path: String) -> Result<Uploaded> {
        Ok(Uploaded(py.detach(|| self.0.upload_file(&path))?))
    }

    /// Upload `data` the agent wrote, under a name made from `name_hint`, with the desk's
    /// uploader. Raises as `upload_file` does.
    fn upload_content(
        &self,
        py: Python<'_>,
        name_hint: String,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<Uploaded> {
        let desk = &self.0;
        streamed(py, data, None, move |content| {
            desk.upload_content(&name_hint, content)
        })
        .map(Uploaded)
    }

    /// The grants the agent may use, its pending requests, and what became of its requests.
    ///
    /// Raises `Refused` (`invalid_manifest`).
    fn grants(&self, py: Python<'_>) -> Result<GrantsList> {
        Ok(GrantsList(py.detach(|| self.0.grants())?))
    }

    /// File a request for the human: a folder `alias` with `access` (`"read_only"` or
    /// `"read_write"`) for `reason`, at `path` when the user named the exact folder; or a
    /// `kind="tool"` / `"cache"` with its `vars` and `bin`. It grants nothing until the human
    /// approves it with the report's `approve_with`.
    ///
    /// Raises `Refused` (`invalid_alias`, `invalid_argument`, `relative_path`,
    /// `invalid_manifest`).
    #[pyo3(signature = (alias, access, reason, *, path=None, kind="folder", vars=Vec::new(), bin=None))]
    #[allow(clippy::too_many_arguments)]
    fn request_access(
        &self,
        py: Python<'_>,
        alias: String,
        access: &str,
        reason: String,
        path: Option<String>,
        kind: &str,
        vars: Vec<String>,
        bin: Option<String>,
    ) -> Result<Requested> {
        let ask = AccessAsk {
            alias,
            access: safe_lanes::Access::from_argument(access)?,
            reason,
            path,
            kind: safe_lanes::grants::Kind::parse(kind)?,
            vars,
            bin,
        };
        Ok(Requested(py.detach(|| self.0.request_access(&ask))?))
    }

    /// Apply the unified `diff` (strict: no fuzz) to the file `path` (relative) of the
    /// read-write grant `alias` (or its id), atomically. A diff to a path the human's own
    /// tools act on (git state, a tool's or an agent host's configuration …) is not applied
    /// but held for the human: the report says `held`, with the change set and why.
    ///
    /// Raises `Refused` (`patch_rejected`, `read_only`, `unknown_alias`, `traversal`,
    /// `symlink_escape`, …): the file is then unchanged.
    fn apply_patch(
        &self,
        py: Python<'_>,
        alias: String,
        path: String,
        diff: String,
    ) -> Result<Patched> {
        Ok(Patched(py.detach(|| self.0.patch(&alias, &path, &diff))?))
    }

    /// Run `command` confined (`/bin/sh -c command`; a list of arguments is quoted into one
    /// line), in the granted folder `cwd` (an alias or id; default a private scratch folder),
    /// killed with everything it started after `timeout` seconds. The GIL is released until it
    /// ends; `control.stop(why)` from another thread, or a `KeyboardInterrupt`, stops it. A
    /// command that fails, times out or is stopped is a report, not an error.
    ///
    /// Its writes to a read-write grant reach the folder only when it ends, each judged by
    /// the library's rule: published, or held for the human (the report's `changes`). A grant
    /// the human made direct is written at once.
    ///
    /// Raises `Refused` (`sandbox_unavailable` naming the layer, an alias refusal).
    #[pyo3(signature = (command, *, cwd=None, timeout=60.0, control=None))]
    fn run(
        &self,
        py: Python<'_>,
        command: &Bound<'_, PyAny>,
        cwd: Option<String>,
        timeout: f64,
        control: Option<&Control>,
    ) -> PyResult<CommandReport> {
        let shell = shell_request(command, cwd, timeout)?;
        let control = control.map_or_else(safe_lanes::Control::new, |c| c.0.clone());
        let desk = &self.0;
        interruptible(py, &control, || desk.shell(&shell, &control)).map(CommandReport)
    }

    /// Start `command` confined in the background (as `run`): its first report, whose `job_id`
    /// `job_status` and `job_stop` take.
    ///
    /// Raises `Refused` (`too_many_jobs`, and as `run`).
    #[pyo3(signature = (command, *, cwd=None, timeout=600.0))]
    fn run_background(
        &self,
        py: Python<'_>,
        command: &Bound<'_, PyAny>,
        cwd: Option<String>,
        timeout: f64,
    ) -> PyResult<CommandReport> {
        let shell = shell_request(command, cwd, timeout)?;
        let report = py
            .detach(|| self.0.shell_background(&shell))
            .map_err(Failure)?;
        Ok(CommandReport(report))
    }

    /// Report the background job `job_id`, first waiting up to `wait` seconds for it to end:
    /// its new output, and how it ended once it has (that report is its last).
    ///
    /// Raises `Refused` (`not_found`) for an unknown or already reported job.
    #[pyo3(signature = (job_id, wait=0.0))]
    fn job_status(&self, py: Python<'_>, job_id: String, wait: f64) -> PyResult<CommandReport> {
        let wait = seconds(wait)?;
        let report = py
            .detach(|| self.0.job_status(&job_id, wait))
            .map_err(Failure)?;
        Ok(CommandReport(report))
    }

    /// Stop the background job `job_id` and everything it started; its last report.
    fn job_stop(&self, py: Python<'_>, job_id: String) -> Result<CommandReport> {
        Ok(CommandReport(py.detach(|| self.0.job_stop(&job_id))?))
    }

    fn __repr__(&self) -> String {
        format!("AgentDesk({:?})", self.0.root().path())
    }
}

/// The confined command `command` asks for: a string for `/bin/sh -c`, or a list of
/// arguments, each quoted.
fn shell_request(
    command: &Bound<'_, PyAny>,
    cwd: Option<String>,
    timeout: f64,
) -> PyResult<ShellRequest> {
    let command = match command.extract::<String>() {
        Ok(line) => line,
        Err(_) => {
            let words: Vec<String> = command.extract().map_err(|_| {
                pyo3::exceptions::PyTypeError::new_err(
                    "a command is a string (run by /bin/sh -c) or a list of arguments",
                )
            })?;
            shlex::try_join(words.iter().map(String::as_str)).map_err(|e| {
                pyo3::exceptions::PyValueError::new_err(format!("cannot quote the command: {e}"))
            })?
        }
    };
    Ok(ShellRequest {
        command,
        cwd,
        timeout: seconds(timeout)?,
    })
}

/// Run `work` on a thread of its own while this one waits detached from the interpreter,
/// attaching every 100 ms to take signals: a `KeyboardInterrupt` stops the work through
/// `control` and is raised once the work has ended (nothing it started outlives it).
fn interruptible<T: Send>(
    py: Python<'_>,
    control: &safe_lanes::Control,
    work: impl FnOnce() -> safe_lanes::Result<T> + Send,
) -> PyResult<T> {
    let (tx, mut rx) = mpsc::channel();
    let mut interrupted = None;
    let done = std::thread::scope(|scope| {
        scope.spawn(move || {
            let _ = tx.send(work());
        });
        loop {
            // The receiver goes with the detached closure and comes back (it is not `Sync`).
            let (got, back) = py.detach(move || (rx.recv_timeout(Duration::from_millis(100)), rx));
            rx = back;
            match got {
                Ok(done) => break done,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if interrupted.is_none()
                        && let Err(e) = py.check_signals()
                    {
                        control.stop("interrupted by the gateway");
                        interrupted = Some(e);
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    break Err(safe_lanes::Error::io(
                        "a confined command",
                        "its thread",
                        std::io::Error::other("ended without an answer"),
                    ));
                }
            }
        }
    });
    if let Some(e) = interrupted {
        return Err(e);
    }
    done.map_err(|e| Failure(e).into())
}

/// A handle to stop an operation from another thread and to read a command's output while it
/// runs: give it to `run` (or a save) and keep it.
#[pyclass(frozen, module = "safe_lanes")]
#[derive(Debug)]
pub(crate) struct Control(
    pub(crate) safe_lanes::Control,
    Mutex<safe_lanes::control::Mark>,
);

#[pymethods]
impl Control {
    /// A handle for an operation starting now.
    #[new]
    fn new() -> Self {
        Self(safe_lanes::Control::new(), Mutex::default())
    }

    /// Ask the operation to stop, saying why (the first reason is kept): a command's whole
    /// process group is killed within 100 ms, a save fails at its next read.
    #[pyo3(signature = (why="stopped by the gateway"))]
    fn stop(&self, why: &str) {
        self.0.stop(why);
    }

    /// Why the operation was asked to stop, if it was.
    #[getter]
    fn stopped(&self) -> Option<String> {
        self.0.stopped()
    }

    /// Seconds since the handle was made.
    #[getter]
    fn elapsed(&self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }

    /// What the command printed since the last call: `(stdout, stderr, truncated)`.
    fn output(&self) -> (String, String, bool) {
        let mut mark = self
            .1
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (new, next) = self.0.output_since(*mark);
        *mark = next;
        (new.stdout, new.stderr, new.truncated)
    }
}

report! {
    /// The folder grants, as the agent sees them.
    GrantsList(safe_lanes::desk::GrantsList) in "safe_lanes" {
        /// Approved folders.
        grants: Vec<GrantInfo> = |list| list.grants.iter().cloned().map(GrantInfo).collect(),
        /// Requests waiting for the human.
        requests: Vec<RequestInfo> = |list| list.requests.iter().cloned().map(RequestInfo).collect(),
        /// Requests and what became of them (pending, approved, denied, expired).
        outcomes: Vec<RequestOutcome> =
            |list| list.outcomes.iter().cloned().map(RequestOutcome).collect(),
    }
}

report! {
    /// One approved grant.
    GrantInfo(safe_lanes::desk::GrantInfo) in "safe_lanes" {
        /// Its alias.
        alias: String,
        /// Its stable id (`folder_…`).
        id: String,
        /// Its absolute path.
        path: String,
        /// `read_only` or `read_write`.
        access: String,
        /// The environment variable holding its path in confined commands.
        env: String,
        /// Whether it can be used on this host now.
        available: bool,
        /// Why not, when it cannot.
        unavailable: Option<String>,
        /// `tool` or `cache`; `None` for a folder.
        kind: Option<String>,
        /// For a tool or a cache: the variables set to its path.
        vars: Vec<String>,
        /// The paths whose changes the human lets through without review (a command's or a
        /// patch's changes there are published, not held).
        allow_protected: Vec<String>,
        /// Whether the human made this read-write grant direct: commands write it at once,
        /// without a layer, and nothing waits for review.
        direct: bool,
    }
}

report! {
    /// A pending request.
    RequestInfo(safe_lanes::desk::RequestInfo) in "safe_lanes" {
        /// Its id.
        id: String,
        /// The alias asked for.
        alias: String,
        /// The access asked for.
        access: String,
        /// Why.
        reason: String,
        /// The folder proposed, if any.
        path: Option<String>,
        /// When (RFC 3339).
        requested_at: String,
        /// `tool` or `cache`; `None` for a folder.
        kind: Option<String>,
    }
}

report! {
    /// What became of a request.
    RequestOutcome(safe_lanes::desk::RequestOutcome) in "safe_lanes" {
        /// The request's id.
        id: String,
        /// The alias asked for.
        alias: String,
        /// The access asked for.
        access: Option<String>,
        /// `pending`, `approved`, `denied` or `expired`.
        status: String,
        /// The human's reason, for an approved or denied request.
        decision: Option<String>,
        /// When it was asked for, or decided (RFC 3339).
        at: String,
    }
}

report! {
    /// A request filed for the human.
    Requested(safe_lanes::desk::Requested) in "safe_lanes" {
        /// The request, pending until the human decides.
        request: RequestInfo = |r| RequestInfo(r.request.clone()),
        /// Always `pending`: nothing is granted until the human approves.
        status: String,
        /// The command the human runs to approve it.
        approve_with: String,
    }
}

report! {
    /// A confined command: how it ended, or how a background job is doing.
    CommandReport(safe_lanes::desk::CommandReport) in "safe_lanes" {
        /// `running` (a background job still running) or `finished`.
        status: &'static str = |r| match r.status {
            safe_lanes::desk::JobStatus::Running => "running",
            safe_lanes::desk::JobStatus::Finished => "finished",
        },
        /// The background job's id (only for background jobs).
        job_id: Option<String>,
        /// Seconds since the command started.
        elapsed_s: f64,
        /// Its exit code (`None` while running, or when killed by a signal).
        exit_code: Option<i32>,
        /// The signal that killed it, if any.
        signal: Option<i32>,
        /// Standard output (capped); for a background job, what is new since the last poll.
        stdout: String,
        /// Standard error (capped); for a background job, what is new since the last poll.
        stderr: String,
        /// Whether the timeout killed it.
        timed_out: bool,
        /// Whether output was cut at the cap.
        truncated: bool,
        /// Why it was stopped early (a revoked or narrowed grant, a stop), if it was.
        stopped: Option<String>,
        /// Whether the audit log holds what is known so far.
        recorded: bool,
        /// The grants it could use, each `(alias, access)` (once it has finished).
        grants: Vec<(String, String)> = |r| r
            .grants
            .iter()
            .map(|(alias, access)| (alias.to_string(), access.to_string()))
            .collect(),
        /// Whether it finished with exit status 0, untouched by a timeout or a stop.
        success: bool = |r| r.success(),
        /// What became of its changes to the read-write folders (once it has finished): how
        /// many were published, and which are held for the human.
        changes: Changes = |r| Changes(r.changes.clone()),
        /// What to do about how it ended, when known (once it has finished): a program its
        /// shell could not find, with the tool grants that would let it in.
        hint: Option<String>,
    }
}

report! {
    /// What became of a confined command's changes to its read-write folders. A held change
    /// is not in the folder: the human reviews it (`safe_lanes.human.HeldChanges`, `safe-lanes
    /// changes show SET`) and applies or discards it.
    Changes(safe_lanes::changes::Summary) in "safe_lanes" {
        /// How many changes were published into the folders.
        published: u64,
        /// The changes held for the human, each with its path, why and grant.
        held: Vec<HeldPath> = |s| s.held.iter().cloned().map(HeldPath).collect(),
        /// The id of the held change set (`set_…`), when something is held.
        set: Option<String>,
        /// How many changes were dropped (set-id files, devices, FIFOs, sockets are never
        /// created).
        dropped: u64,
        /// What was held and how the human applies it, in words.
        note: Option<String>,
    }
}

report! {
    /// One change held for the human.
    HeldPath(safe_lanes::changes::HeldPath) in "safe_lanes" {
        /// The path, relative to the grant's folder.
        path: String,
        /// Why it is held: `git_state`, `tool_config`, `agent_config`, `editor_config`,
        /// `start_up`, `link_outside`, `conflict` or `interrupted`.
        why: &'static str = |h| h.why.as_str(),
        /// The grant's alias.
        grant: String,
    }
}

report! {
    /// What an upload did.
    Uploaded(safe_lanes::desk::Uploaded) in "safe_lanes" {
        /// What was uploaded.
        source: UploadedContent = |u| UploadedContent(u.source.clone()),
        /// The staged file the uploader was given, relative to the deposit.
        staged: String,
        /// The name the content goes by (what `{name}` became).
        name: String,
        /// The uploader's exit code.
        exit_code: Option<i32>,
        /// What it printed.
        stdout: String,
        /// What it printed on stderr.
        stderr: String,
        /// Whether how it ended is in the audit log.
        recorded: bool,
    }
}

report! {
    /// The content an uploader received.
    UploadedContent(safe_lanes::desk::UploadedContent) in "safe_lanes" {
        /// The source file, when a file was uploaded.
        path: Option<String>,
        /// Its size.
        bytes: u64,
        /// Its SHA-256, hex.
        sha256: String,
    }
}

report! {
    /// What a patch did.
    Patched(safe_lanes::Patched) in "safe_lanes" {
        /// The file, inside the granted folder (`pathlib.Path`).
        path: std::path::PathBuf,
        /// `modified`, `created` or `deleted`.
        change: &'static str = |p| p.change.as_str(),
        /// Hunks applied.
        hunks: usize,
        /// Its size afterwards (what it would be, when held).
        bytes: u64,
        /// Whether the change was held for the human instead of made: the path is one the
        /// human's own tools act on. The file is then unchanged.
        held: bool,
        /// The change set holding it, when held.
        set: Option<String>,
        /// Why it is held, when held (`git_state`, `agent_config`, …).
        why: Option<&'static str> = |p| p.why.map(safe_lanes::changes::Why::as_str),
    }
}
