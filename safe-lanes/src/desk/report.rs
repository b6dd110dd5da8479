//! What [`AgentDesk`](super::AgentDesk)'s operations answer: one serializable report per
//! operation, the same for every adapter (the MCP server's tool results, the CLI's `--json`,
//! a Python binding's objects). Their JSON shapes are public contracts (`docs/mcp.md`,
//! `docs/cli.md`); with the `schemars` feature each has its JSON Schema, its field docs
//! addressed to the agent that reads them.

use std::time::Duration;

use serde::Serialize;

use crate::confine::{ConfinedOutcome, JobReport};
use crate::grants::{Access, Alias, GrantView, Request};

pub use crate::download::DownloadList;

/// What the uploader did.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct Uploaded {
    /// What was uploaded.
    pub source: UploadedContent,
    /// The staged file the uploader was given, relative to the deposit: only
    /// `[A-Za-z0-9._/-]`, whatever the content's name.
    pub staged: String,
    /// The name the content goes by (the sanitized file name), what `{name}` became.
    pub name: String,
    /// The uploader's exit code.
    pub exit_code: Option<i32>,
    /// What it printed.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
    /// Whether how it ended is in the audit log (its start always is, written before it ran).
    pub recorded: bool,
}

/// The content an uploader received.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct UploadedContent {
    /// The source file, when a file was uploaded.
    pub path: Option<String>,
    /// Its size.
    pub bytes: u64,
    /// Its SHA-256, hex.
    pub sha256: String,
}

/// The folder grants, as the agent sees them.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct GrantsList {
    /// Approved folders.
    pub grants: Vec<GrantInfo>,
    /// Requests waiting for the human.
    pub requests: Vec<RequestInfo>,
    /// Your requests and what became of them: pending, approved, denied (with the human's
    /// reason) or expired (ask again); the most recent decided ones. Absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub outcomes: Vec<RequestOutcome>,
}

/// What became of a request.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct RequestOutcome {
    /// The request's id.
    pub id: String,
    /// The alias asked for.
    pub alias: String,
    /// The access asked for.
    pub access: Option<String>,
    /// `pending`, `approved`, `denied` or `expired`.
    pub status: String,
    /// The human's reason, for an approved or denied request.
    pub decision: Option<String>,
    /// When it was asked for, or decided (RFC 3339).
    pub at: String,
}

/// One approved folder.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct GrantInfo {
    /// Its alias.
    pub alias: String,
    /// Its stable id (`folder_…`).
    pub id: String,
    /// Its absolute path.
    pub path: String,
    /// `read_only` or `read_write`.
    pub access: String,
    /// The environment variable holding its path in `shell_exec`.
    pub env: String,
    /// Whether it can be used on this host now.
    pub available: bool,
    /// Why not, when it cannot.
    pub unavailable: Option<String>,
    /// `tool` (a toolchain, read and execute only, its programs on `PATH` in `shell_exec`)
    /// or `cache` (read-write, for a toolchain's downloads); absent for a folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// For a tool or a cache: the environment variables set to its path in `shell_exec`
    /// (`CARGO_HOME`, `NVM_DIR`, …).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub vars: Vec<String>,
    /// In a read-write grant, changes to what the user's own tools act on (git state,
    /// `.vscode/`, `.envrc`, agent settings, start-up files …) made by `shell_exec` or
    /// `folder_patch` wait for the user's review; these are the paths the user lets through
    /// without review.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_protected: Vec<String>,
    /// Whether the user made this read-write grant direct: `shell_exec` writes it at once and
    /// nothing waits for review.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub direct: bool,
    /// The patterns of the secrets hidden in this folder (`.env`, keys, `.ssh/` …): in
    /// `shell_exec` they cannot be read or listed, `folder_patch` and `upload_file` refuse them
    /// (`hidden_path`), and what a command writes to one waits for the user's review.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hidden: Vec<String>,
    /// The patterns the user shows in this folder although the list above hides them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unhidden: Vec<String>,
}

/// A pending request.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct RequestInfo {
    /// Its id.
    pub id: String,
    /// The alias asked for.
    pub alias: String,
    /// The access asked for.
    pub access: String,
    /// Why.
    pub reason: String,
    /// The folder proposed, if any.
    pub path: Option<String>,
    /// When (RFC 3339).
    pub requested_at: String,
    /// `tool` or `cache` when that is what was asked for; absent for a folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// A request filed for the human.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct Requested {
    /// The request, pending until the human decides.
    pub request: RequestInfo,
    /// Always `pending`: nothing is granted until the human approves.
    pub status: String,
    /// The command the human runs to approve it, exactly as printed: on a terminal it shows
    /// the change and asks for the reason; elsewhere (a pipe, a script) the human adds
    /// `--reason '…'`. Its paths hold no raw control, bidi or zero-width character.
    pub approve_with: String,
}

/// A confined command: how it ended, or how a background job is doing.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct CommandReport {
    /// `running` (a background job still running) or `finished`.
    pub status: JobStatus,
    /// The background job's id (only for background jobs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// Seconds since the command started.
    pub elapsed_s: f64,
    /// Its exit code (none while running, or when killed by a signal).
    pub exit_code: Option<i32>,
    /// The signal that killed it, if any.
    pub signal: Option<i32>,
    /// Standard output (capped); for a background job, what is new since the last poll.
    pub stdout: String,
    /// Standard error (capped); for a background job, what is new since the last poll.
    pub stderr: String,
    /// Whether the timeout killed it.
    pub timed_out: bool,
    /// Whether output was cut at the cap.
    pub truncated: bool,
    /// Why it was stopped early (a revoked or narrowed grant, a cancellation, a stop), if it
    /// was.
    pub stopped: Option<String>,
    /// Whether the audit log holds what is known so far: its start (written before it ran)
    /// and, once it has finished, how it ended.
    pub recorded: bool,
    /// The grants it could use, each with its access (once it has finished).
    #[cfg_attr(feature = "schemars", schemars(with = "Vec<(String, String)>"))]
    pub grants: Vec<(Alias, Access)>,
    /// What became of its changes to the read-write folders (once it has finished): how many
    /// were published into them, and which were held for the user to review because the
    /// user's own tools would act on them (git state, a tool's or an agent host's
    /// configuration, start-up files, links out of the folder, the user's own edits made
    /// meanwhile). A held change is not in the folder.
    pub changes: crate::changes::Summary,
    /// What to do about how it ended, when known (once it has finished): a program its shell
    /// could not find, with the tool grant that would let it in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// Whether a command is still running.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schemars", schemars(inline))]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Still running (a background job).
    Running,
    /// Ended: the report says how.
    Finished,
}

impl CommandReport {
    /// The report of a command that ended after `elapsed`.
    pub fn finished(done: ConfinedOutcome, elapsed: Duration) -> Self {
        let out = done.outcome;
        Self {
            status: JobStatus::Finished,
            job_id: None,
            elapsed_s: elapsed.as_secs_f64(),
            exit_code: out.exit_code,
            signal: out.signal,
            stdout: out.stdout,
            stderr: out.stderr,
            timed_out: out.timed_out,
            truncated: out.truncated,
            stopped: out.stopped,
            recorded: out.recorded,
            grants: done.grants,
            changes: done.changes,
            hint: done.hint,
        }
    }

    /// A background job's report: its new output, and how it ended once it has.
    pub(crate) fn job(report: JobReport) -> Self {
        let (outcome, grants, changes, hint) = match report.ended {
            Some(done) => (Some(done.outcome), done.grants, done.changes, done.hint),
            None => (None, Vec::new(), crate::changes::Summary::default(), None),
        };
        Self {
            status: if outcome.is_some() {
                JobStatus::Finished
            } else {
                JobStatus::Running
            },
            job_id: Some(report.id),
            elapsed_s: report.elapsed.as_secs_f64(),
            exit_code: outcome.as_ref().and_then(|o| o.exit_code),
            signal: outcome.as_ref().and_then(|o| o.signal),
            stdout: report.output.stdout,
            stderr: report.output.stderr,
            timed_out: outcome.as_ref().is_some_and(|o| o.timed_out),
            truncated: report.output.truncated,
            recorded: outcome.as_ref().is_none_or(|o| o.recorded),
            stopped: outcome.and_then(|o| o.stopped),
            grants,
            changes,
            hint,
        }
    }

    /// Whether it finished with exit status 0, untouched by a timeout or a stop.
    pub fn success(&self) -> bool {
        self.status == JobStatus::Finished
            && self.exit_code == Some(0)
            && !self.timed_out
            && self.stopped.is_none()
    }
}

impl From<GrantView> for GrantInfo {
    fn from(g: GrantView) -> Self {
        Self {
            alias: g.grant.alias.to_string(),
            id: g.grant.id,
            path: g.grant.path.to_string_lossy().into_owned(),
            access: g.grant.access.to_string(),
            env: g.env,
            available: g.available,
            unavailable: g.unavailable,
            kind: (!g.grant.toolchain.kind.is_folder()).then(|| g.grant.toolchain.kind.to_string()),
            vars: g
                .grant
                .toolchain
                .vars
                .iter()
                .map(ToString::to_string)
                .collect(),
            allow_protected: g
                .grant
                .allow_protected
                .iter()
                .map(ToString::to_string)
                .collect(),
            direct: g.grant.direct && g.grant.access == Access::ReadWrite,
            hidden: if g.grant.toolchain.kind.is_folder() {
                crate::hidden::Hidden::new(&g.grant.hide, &g.grant.unhide).patterns()
            } else {
                Vec::new()
            },
            unhidden: g.grant.unhide.clone(),
        }
    }
}

impl From<Request> for RequestInfo {
    fn from(r: Request) -> Self {
        Self {
            id: r.id,
            alias: r.alias.to_string(),
            access: r.access.to_string(),
            reason: r.reason,
            path: r.path.map(|p| p.to_string_lossy().into_owned()),
            requested_at: r.requested_at,
            kind: (!r.toolchain.kind.is_folder()).then(|| r.toolchain.kind.to_string()),
        }
    }
}

impl From<crate::grants::Outcome> for RequestOutcome {
    fn from(o: crate::grants::Outcome) -> Self {
        Self {
            id: o.id,
            alias: o.alias.to_string(),
            access: o.access.map(|a| a.to_string()),
            status: o.status.as_str().to_owned(),
            decision: o.decision,
            at: o.at,
        }
    }
}
