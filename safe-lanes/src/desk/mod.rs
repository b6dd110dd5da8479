//! The agent's door: everything an agent may ask a gateway for, one method each.
//!
//! A gateway (an MCP server, an agent runtime, a Python binding) builds one [`AgentDesk`] from
//! a [`StateRoot`] and the options it chooses ([`DeskOptions`]: the manifest, a narrowing, the
//! size cap, the uploader, the output kept of commands). Every operation takes the agent's raw
//! input — strings, bytes, a reader — exactly as it arrived, checks it, records its own audit
//! operation, and answers one serializable report ([`report`]). The adapter only moves input in
//! and reports out: it holds no policy, names no audit operation and declares no result type.
//!
//! The desk is cheap to clone and shareable across threads and async tasks: its state — the
//! download lane, the session following the manifest, the background jobs — is held once,
//! behind an [`Arc`]. The folder-grant side opens when first needed, so a manifest that cannot
//! be read leaves the lanes working and the grant operations answering `invalid_manifest`
//! until it is fixed.
//!
//! What the agent asks for is untrusted (it may have been written by an attacker through prompt
//! injection): names are sanitized, paths checked against the allowlist, aliases against the
//! grants, commands confined. The desk is the agent's side only; the human's decisions
//! (approving, revoking) are [`Grants`](crate::Grants)', never the desk's.
//!
//! ```
//! use safe_lanes::StateRoot;
//! use safe_lanes::desk::{AgentDesk, DeskOptions};
//! # let tmp = tempfile::tempdir().unwrap();
//! let root = StateRoot::open(&tmp.path().join("state"))?;
//! let desk = AgentDesk::open(root, DeskOptions::default())?;
//!
//! // A name an attacker chose becomes one safe name in the download lane.
//! let saved = desk.save("../../.bashrc", &b"echo pwned"[..])?;
//! assert_eq!(saved.name, "bashrc");
//! // A path outside the human's upload roots is refused, with a stable code.
//! let refused = desk.check_upload("/etc/shadow").unwrap_err();
//! assert_eq!(refused.code(), safe_lanes::Code::OutsideAllowlist);
//! // What the agent may use: nothing, until the human grants it.
//! assert!(desk.grants()?.grants.is_empty());
//! # Ok::<(), safe_lanes::Error>(())
//! ```

pub mod report;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::Limits;
use crate::audit::Operation;
use crate::confine::{Confined, Jobs};
use crate::control::Control;
use crate::deposit::{Sent, UploadDeposit, Uploader};
use crate::download::{DownloadLane, Saved};
use crate::error::{Error, Result, Shown};
use crate::grants::{Access, AgentGrants, Asked, Kind, Narrowing, Session, Toolchain};
use crate::patch::Patched;
use crate::root::StateRoot;
use crate::upload::{Opened, Source, UploadSource};

pub use report::{
    CommandReport, DownloadList, GrantInfo, GrantsList, JobStatus, RequestInfo, RequestOutcome,
    Requested, Uploaded, UploadedContent,
};

/// What a gateway chooses for its agent (every field has a default: start from
/// [`DeskOptions::default`] and set what differs).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DeskOptions {
    /// The grants manifest (default `<root>/workflow.json`).
    pub manifest: Option<PathBuf>,
    /// What the agent's session is narrowed to: every grant operation works in a child session
    /// of the human's grants with this on top (default: none, every grant).
    pub narrowing: Narrowing,
    /// The largest content a save or an upload takes, in bytes (default 50 MiB).
    pub max_bytes: u64,
    /// The uploader; without one, uploads are `not_configured`.
    pub uploader: Option<Uploader>,
    /// Output kept of each stream of a command (default 256 KiB).
    pub max_output: usize,
    /// The most background jobs at once (default 8).
    pub max_jobs: usize,
    /// Who the agent is, as its client named itself: shown to the human with its requests.
    pub client: Option<String>,
    /// Fetching URLs into the download lane, as the human allowed it; without it (the
    /// default), fetches are `not_configured` (Linux, feature `fetch`; ADR 0017).
    #[cfg(all(target_os = "linux", feature = "fetch"))]
    pub fetch: Option<crate::fetch::FetchPolicy>,
}

impl Default for DeskOptions {
    fn default() -> Self {
        Self {
            manifest: None,
            narrowing: Narrowing::none(),
            max_bytes: 50 << 20,
            uploader: None,
            max_output: 256 << 10,
            max_jobs: 8,
            client: None,
            #[cfg(all(target_os = "linux", feature = "fetch"))]
            fetch: None,
        }
    }
}

/// A shell command an agent asks to run.
#[derive(Clone, Debug)]
pub struct ShellRequest {
    /// The command, run by `/bin/sh -c`.
    pub command: String,
    /// The alias (or id) of a granted folder to start in; default a private scratch directory.
    pub cwd: Option<String>,
    /// Time before it and everything it started are killed.
    pub timeout: Duration,
}

/// An agent's request for access to a folder, as it asked.
#[derive(Clone, Debug)]
pub struct AccessAsk {
    /// The alias asked for, or the id of a granted folder to widen (`folder_…`).
    pub alias: String,
    /// The access asked for.
    pub access: Access,
    /// Why, in the agent's words (shown to the human).
    pub reason: String,
    /// The exact folder proposed, if the user named one.
    pub path: Option<String>,
    /// A folder (the default), a tool or a cache.
    pub kind: Kind,
    /// For a tool or a cache: the variables to set to its path.
    pub vars: Vec<String>,
    /// For a tool: its programs' folder, relative to it.
    pub bin: Option<String>,
}

/// Everything an agent may ask for (module docs). Cheap to clone: clones share one state.
#[derive(Clone, Debug)]
pub struct AgentDesk {
    shared: Arc<Shared>,
    /// Who is asking (see [`AgentDesk::with_client`]).
    client: Option<Arc<str>>,
}

#[derive(Debug)]
struct Shared {
    root: StateRoot,
    /// The download lane, opened once it can be: a broken lane refuses only its own
    /// operations (`insecure_root`), and is opened again at the next one after `init`.
    lane: Mutex<Option<Arc<DownloadLane>>>,
    options: DeskOptions,
    folders: Mutex<Option<Arc<Folders>>>,
    #[cfg(all(target_os = "linux", feature = "fetch"))]
    fetcher: Option<crate::fetch::Fetcher>,
}

/// The folder-grant side, opened once the manifest can be read.
#[derive(Debug)]
struct Folders {
    grants: AgentGrants,
    session: Arc<Session>,
    jobs: Jobs,
}

/// A file that passed the upload allowlist, opened and not yet read
/// ([`AgentDesk::check_upload`]).
#[derive(Debug)]
pub struct UploadCheck {
    sources: UploadSource,
    opened: Opened,
}

impl UploadCheck {
    /// Its size, from the descriptor that was checked.
    pub fn bytes(&self) -> u64 {
        self.opened.bytes
    }

    /// Read it through the checked descriptor: its canonical path, size and SHA-256.
    ///
    /// # Errors
    ///
    /// `io` when it cannot be read.
    pub fn hash(self) -> Result<Source> {
        self.sources.hash(self.opened)
    }
}

impl AgentDesk {
    /// The desk of `root` with `options`. The download lane and the folder-grant side open
    /// now if they can, or at their first operation: a broken piece of the root refuses only
    /// what needs it.
    ///
    /// # Errors
    ///
    /// `invalid_argument` for a fetch policy's malformed host entry.
    pub fn open(root: StateRoot, options: DeskOptions) -> Result<Self> {
        let client = options.client.as_deref().map(Arc::from);
        #[cfg(all(target_os = "linux", feature = "fetch"))]
        let fetcher = options
            .fetch
            .clone()
            .map(crate::fetch::Fetcher::new)
            .transpose()?;
        let shared = Shared {
            root,
            lane: Mutex::new(None),
            options,
            folders: Mutex::new(None),
            #[cfg(all(target_os = "linux", feature = "fetch"))]
            fetcher,
        };
        if let Err(e) = shared.lane() {
            tracing::warn!("the download lane is unavailable until it is repaired: {e}");
        }
        if let Err(e) = shared.folders() {
            tracing::warn!("folder grants are unavailable until the manifest is fixed: {e}");
        }
        Ok(Self {
            shared: Arc::new(shared),
            client,
        })
    }

    /// This desk, for the client that named itself `client` (its requests show the name to
    /// the human). Shares everything else with `self`.
    #[must_use]
    pub fn with_client(&self, client: impl Into<String>) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            client: Some(Arc::from(client.into())),
        }
    }

    /// The state root.
    pub fn root(&self) -> &StateRoot {
        &self.shared.root
    }

    /// The options it was opened with.
    pub fn options(&self) -> &DeskOptions {
        &self.shared.options
    }

    /// Whether uploads are configured (an uploader was given).
    pub fn can_upload(&self) -> bool {
        self.shared.options.uploader.is_some()
    }

    /// Save `content` received from a third party into the download lane under a name made
    /// from `name_hint` (sanitized; never a path), never replacing a file; recorded as
    /// `download.save`.
    ///
    /// # Errors
    ///
    /// `too_large` past the size cap; `invalid_argument` when `content` fails with
    /// [`InvalidData`](std::io::ErrorKind::InvalidData) (invalid base64 an adapter decodes as
    /// it reads), recorded as refused; `io`; what `content` fails with otherwise. Nothing is
    /// left.
    pub fn save(&self, name_hint: impl AsRef<[u8]>, content: impl Read) -> Result<Saved> {
        self.shared.lane()?.save(name_hint, content)
    }

    /// Fetch `url` straight into the download lane — the bytes never pass through the agent —
    /// under a name made from `filename_hint` (else the server's or the URL's), behind the
    /// SSRF guard of [`crate::fetch`]; recorded as `download.fetch`.
    ///
    /// # Errors
    ///
    /// `not_configured` unless the human allowed fetching ([`DeskOptions::fetch`]);
    /// `address_refused`, `invalid_argument`, `too_large`, `fetch_failed`, `io` as
    /// [`crate::fetch::Fetcher::fetch`] says. Nothing is left in the lane.
    #[cfg(all(target_os = "linux", feature = "fetch"))]
    pub fn fetch(&self, url: &str, filename_hint: Option<&str>) -> Result<crate::fetch::Fetched> {
        let fetcher = self
            .shared
            .fetcher
            .as_ref()
            .ok_or_else(|| Error::NotConfigured {
                what: "fetching",
                why: "the gateway was started without it (`safe-lanes-mcp --fetch`)".into(),
            })?;
        fetcher.fetch(&*self.shared.lane()?, url, filename_hint)
    }

    /// Whether fetching is configured ([`DeskOptions::fetch`]).
    pub fn can_fetch(&self) -> bool {
        #[cfg(all(target_os = "linux", feature = "fetch"))]
        return self.shared.fetcher.is_some();
        #[cfg(not(all(target_os = "linux", feature = "fetch")))]
        false
    }

    /// A page of the download lane's files, by name: at most `limit` (at least 1), after the
    /// `cursor` a previous page gave.
    ///
    /// # Errors
    ///
    /// `invalid_argument` for a cursor no page gave; `io`.
    pub fn downloads(&self, cursor: Option<&str>, limit: usize) -> Result<DownloadList> {
        self.shared.lane()?.listing(cursor, limit)
    }

    /// Check that the file at `path` (absolute, as the agent gave it) may be uploaded, and open
    /// it (a few system calls: no content is read); refusals are recorded as `upload.refused`.
    ///
    /// # Errors
    ///
    /// `outside_allowlist`, `state_root`, `not_regular_file`, `hardlinked`, `not_found` and
    /// the other refusals of [`UploadSource::open`].
    pub fn check_upload(&self, path: &str) -> Result<UploadCheck> {
        let sources = UploadSource::load(&self.shared.root)?;
        let opened = sources.open(Path::new(path))?;
        Ok(UploadCheck { sources, opened })
    }

    /// [`AgentDesk::check_upload`], then its content hashed.
    ///
    /// # Errors
    ///
    /// As [`AgentDesk::check_upload`] and [`UploadCheck::hash`].
    pub fn resolve_upload(&self, path: &str) -> Result<Source> {
        self.check_upload(path)?.hash()
    }

    /// Upload the file at `path` (checked as [`AgentDesk::check_upload`] does) with the
    /// uploader: a copy is staged in the deposit, handed to it, and erased.
    ///
    /// # Errors
    ///
    /// `not_configured` without an uploader; the refusals of [`AgentDesk::check_upload`];
    /// `too_large`; `io` when the uploader cannot start, fails, or times out.
    pub fn upload_file(&self, path: &str) -> Result<Uploaded> {
        let uploader = self.uploader()?;
        let check = self.check_upload(path)?;
        let deposit = self.deposit()?;
        let sent = deposit.send(deposit.stage_source(&check.opened)?, uploader)?;
        uploaded(Some(check.opened.path.to_string_lossy().into_owned()), sent)
    }

    /// Upload `content` the agent wrote, under a name made from `name_hint`, with the uploader.
    ///
    /// # Errors
    ///
    /// As [`AgentDesk::upload_file`], and what `content` fails with.
    pub fn upload_content(&self, name_hint: &str, content: impl Read) -> Result<Uploaded> {
        let uploader = self.uploader()?;
        let deposit = self.deposit()?;
        let staged = deposit.stage(name_hint, content)?;
        uploaded(None, deposit.send(staged, uploader)?)
    }

    /// The grants the agent may use, its pending requests and what became of its requests.
    ///
    /// # Errors
    ///
    /// `invalid_manifest`; `io`.
    pub fn grants(&self) -> Result<GrantsList> {
        let listing = self.shared.folders()?.session.list()?;
        Ok(GrantsList {
            grants: listing.grants.into_iter().map(GrantInfo::from).collect(),
            requests: listing
                .requests
                .into_iter()
                .map(RequestInfo::from)
                .collect(),
            outcomes: listing
                .outcomes
                .into_iter()
                .map(RequestOutcome::from)
                .collect(),
        })
    }

    /// File `ask` for the human: it grants nothing until the human approves it, with the
    /// command the report gives.
    ///
    /// # Errors
    ///
    /// `invalid_alias`, `invalid_argument` (a variable, a bin folder, an access a tool or a
    /// cache cannot have), `relative_path`, `invalid_manifest`, `io`.
    pub fn request_access(&self, ask: &AccessAsk) -> Result<Requested> {
        let folders = self.shared.folders()?;
        let toolchain = Toolchain::parse(ask.kind, &ask.vars, ask.bin.as_deref())?;
        let asked = Asked {
            access: ask.access,
            path: ask.path.as_deref().map(Path::new),
            toolchain,
        };
        let client = self.client.as_deref().unwrap_or("an unnamed client");
        let alias = folders.session.requested_alias(&ask.alias)?;
        let request = folders
            .grants
            .request_asked_from(client, &alias, asked, &ask.reason)?;
        let proposal = folders.grants.proposal(&request.id)?;
        let manifest = self.shared.options.manifest.as_deref();
        Ok(Requested {
            approve_with: proposal.approve_command(self.shared.root.path(), manifest),
            request: RequestInfo::from(request),
            status: "pending".to_owned(),
        })
    }

    /// Apply the unified `diff` to the file `path` (relative) of the read-write grant `alias`
    /// (an alias, or a grant's id: [`crate::grants::Session::alias`]).
    ///
    /// # Errors
    ///
    /// As [`crate::apply_patch`], and the refusals of an alias.
    pub fn patch(&self, alias: &str, path: &str, diff: &str) -> Result<Patched> {
        let session = &self.shared.folders()?.session;
        let alias = session.alias(Operation::Patch, alias)?;
        crate::patch::apply_patch(session, &alias, Path::new(path), diff)
    }

    /// Run `shell` confined, in the foreground: `control` stops it (a cancelled request) and
    /// reads its output while it runs.
    ///
    /// # Errors
    ///
    /// The refusals of [`Confined::run`] (`sandbox_unavailable`, an alias); a command that
    /// fails, times out or is stopped is a report, not an error.
    pub fn shell(&self, shell: &ShellRequest, control: &Control) -> Result<CommandReport> {
        let folders = self.shared.folders()?;
        let command = self.shared.command(&folders.session, shell)?;
        let done = command.run_with(&folders.session, control)?;
        Ok(CommandReport::finished(done, control.elapsed()))
    }

    /// Start `shell` confined in the background: its first report (usually still running).
    ///
    /// # Errors
    ///
    /// `too_many_jobs`, and the refusals of [`AgentDesk::shell`].
    pub fn shell_background(&self, shell: &ShellRequest) -> Result<CommandReport> {
        let folders = self.shared.folders()?;
        let command = self.shared.command(&folders.session, shell)?;
        Ok(CommandReport::job(folders.jobs.start(command)?))
    }

    /// Report the background job `job_id`, first waiting up to `wait` for it to end; the
    /// report that says it finished is its last.
    ///
    /// # Errors
    ///
    /// `not_found` for an unknown (or already reported) job.
    pub fn job_status(&self, job_id: &str, wait: Duration) -> Result<CommandReport> {
        let folders = self.shared.folders()?;
        Ok(CommandReport::job(folders.jobs.report(job_id, wait)?))
    }

    /// Stop the background job `job_id` and everything it started; its last report.
    ///
    /// # Errors
    ///
    /// As [`AgentDesk::job_status`].
    pub fn job_stop(&self, job_id: &str) -> Result<CommandReport> {
        let folders = self.shared.folders()?;
        let report = folders.jobs.stop(job_id, "stopped by the agent")?;
        Ok(CommandReport::job(report))
    }

    fn uploader(&self) -> Result<&Uploader> {
        self.shared
            .options
            .uploader
            .as_ref()
            .ok_or_else(|| Error::NotConfigured {
                what: "an uploader",
                why: "the gateway was started without one".into(),
            })
    }

    fn deposit(&self) -> Result<UploadDeposit> {
        Ok(UploadDeposit::open(&self.shared.root)?.with_max_bytes(self.shared.options.max_bytes))
    }
}

impl Shared {
    /// The download lane, opened now if it was not yet.
    fn lane(&self) -> Result<Arc<DownloadLane>> {
        let mut held = crate::sync::lock(&self.lane);
        if let Some(open) = &*held {
            return Ok(Arc::clone(open));
        }
        let lane = match DownloadLane::open(&self.root) {
            // The root saw the lane broken when it was opened: look again, it may have been
            // repaired since (`init`).
            Err(Error::InsecureRoot { .. }) => {
                DownloadLane::open(&StateRoot::open(self.root.path())?)?
            }
            other => other?,
        };
        let open = Arc::new(lane.with_max_bytes(self.options.max_bytes));
        *held = Some(Arc::clone(&open));
        Ok(open)
    }

    /// The folder-grant side, opened now if it could not be before.
    fn folders(&self) -> Result<Arc<Folders>> {
        let mut folders = crate::sync::lock(&self.folders);
        if let Some(open) = &*folders {
            return Ok(Arc::clone(open));
        }
        let grants = AgentGrants::open(&self.root, self.options.manifest.as_deref())?;
        let all = grants.session();
        // What a gateway that died left in change sets is finished (or held) now, not at the
        // next command only.
        if let Ok(store) = all.grants().changes() {
            crate::changes::finish::recover(store, &all);
        }
        let session = Arc::new(all.child(self.options.narrowing.clone()));
        let jobs = Jobs::new(Arc::clone(&session), self.options.max_jobs);
        let open = Arc::new(Folders {
            grants,
            session,
            jobs,
        });
        *folders = Some(Arc::clone(&open));
        Ok(open)
    }

    /// The confined command `shell` asks for (its alias checked, a refusal recorded).
    fn command(&self, session: &Session, shell: &ShellRequest) -> Result<Confined> {
        let mut command = Confined::shell(&shell.command).limits(Limits {
            timeout: shell.timeout,
            max_output: self.options.max_output,
        });
        if let Some(alias) = &shell.cwd {
            command = command.cwd(session.alias(Operation::Exec, alias)?);
        }
        Ok(command)
    }
}

/// What an upload answers: its report, or, when the uploader failed, an `io` error saying how
/// (with the end of what it printed on stderr).
fn uploaded(path: Option<String>, sent: Sent) -> Result<Uploaded> {
    let out = &sent.outcome;
    if !out.success() {
        let how = match (out.timed_out, out.exit_code) {
            (true, _) => "timed out".to_owned(),
            (false, Some(code)) => format!("exited with code {code}"),
            (false, None) => format!("was killed by signal {}", out.signal.unwrap_or(0)),
        };
        let tail: String = {
            let chars: Vec<char> = out.stderr.chars().collect();
            chars[chars.len().saturating_sub(500)..].iter().collect()
        };
        return Err(Error::io(
            "the uploader",
            Shown::text(&how),
            std::io::Error::other(Shown::text(tail.trim()).to_string()),
        ));
    }
    Ok(Uploaded {
        source: UploadedContent {
            path,
            bytes: sent.bytes,
            sha256: sent.sha256,
        },
        staged: sent.staged.to_string_lossy().into_owned(),
        name: sent.name,
        exit_code: out.exit_code,
        stdout: sent.outcome.stdout,
        stderr: sent.outcome.stderr,
        recorded: sent.outcome.recorded,
    })
}
