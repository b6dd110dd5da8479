//! The tools. Each maps its arguments to one library call; the library holds every policy.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{Implementation, JsonObject, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{Json, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use safe_lanes::confine::Jobs;
use safe_lanes::grants::{AgentGrants, Asked, Narrowing, Toolchain};
use safe_lanes::{
    Code, Confined, Control, DownloadLane, Limits, Patched, Saved, Session, Source, StateRoot,
    UploadDeposit, UploadSource, Uploader, apply_patch,
};

use crate::content::or_invalid;
use crate::params::{
    AccessRequest, Content, Downloads, DownloadsPage, FolderPatch, GrantInfo, GrantsList, JobPoll,
    JobRef, Nothing, RequestInfo, RequestOutcome, Requested, ShellCommand, ShellResult, SourcePath,
    Uploaded, UploadedContent,
};
use crate::reply::{Failure, Reply, arguments, blocking, inline, invalid, refusal};
use crate::schema::{input, output};
use crate::shell;
use crate::spill::Spilled;
use crate::transport::Cancels;

/// Output kept of each stream of a shell command.
const SHELL_OUTPUT: usize = 256 * 1024;
/// Files up to this size are hashed on the runtime's thread (well under a millisecond); larger
/// ones on the blocking pool, so one large file does not hold up other calls.
const INLINE_HASH_BYTES: u64 = 256 * 1024;
/// The most background jobs at once.
const MAX_JOBS: usize = 8;

/// What the server was started with.
#[derive(Debug)]
pub(crate) struct Config {
    pub(crate) root: PathBuf,
    pub(crate) manifest: Option<PathBuf>,
    pub(crate) uploader: Option<Uploader>,
    /// The largest content a tool saves or stages.
    pub(crate) max_bytes: u64,
    /// What the agent's session is narrowed to (`--only`): every grant tool works in a child
    /// session of the human's grants with this on top.
    pub(crate) narrowing: Narrowing,
    /// Where the transport reports cancelled requests.
    pub(crate) cancels: Cancels,
}

/// Everything the tools share.
#[derive(Debug)]
struct State {
    config: Config,
    root: StateRoot,
    lane: DownloadLane,
    folders: Mutex<Option<Arc<Folders>>>,
}

/// The folder-grant side, opened once the manifest can be read: an invalid manifest leaves
/// the lanes serving and the grant tools answering `invalid_manifest` until it is fixed.
#[derive(Debug)]
struct Folders {
    grants: AgentGrants,
    session: Arc<Session>,
    jobs: Jobs,
}

/// The MCP server.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    state: Arc<State>,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Server {
    pub(crate) fn new(config: Config) -> safe_lanes::Result<Self> {
        let root = StateRoot::open(&config.root)?;
        let lane = DownloadLane::open(&root)?.with_max_bytes(config.max_bytes);
        let mut tool_router = Self::tool_router();
        if config.uploader.is_none() {
            tool_router.remove_route("upload_file");
            tool_router.remove_route("upload_content");
        }
        let state = State {
            config,
            root,
            lane,
            folders: Mutex::new(None),
        };
        if let Err(e) = state.open_folders() {
            tracing::warn!("folder grants are unavailable until the manifest is fixed: {e}");
        }
        Ok(Self {
            state: Arc::new(state),
            tool_router,
        })
    }

    #[tool(
        title = "Save a received file",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        ),
        input_schema = input::<Content>(),
        output_schema = output::<Saved>(),
        description = "Save content received from a third party (an attachment, a fetched \
        file) to the local download folder. You give a file name hint and the content as `text` \
        or `base64` (exactly one); you cannot choose the folder. The name is sanitized (no \
        paths, hidden names, devices or shortcut extensions), an existing file is never \
        overwritten (a number is added instead), and the final path is returned. Refused with \
        `too_large` past the size cap."
    )]
    async fn download_save(
        &self,
        Parameters(raw): Parameters<JsonObject>,
        context: RequestContext<RoleServer>,
    ) -> Reply<Saved> {
        let args: Content = arguments(raw)?;
        let (filename, content) = args.into_reader(context.extensions.get::<Spilled>())?;
        let invalid = content.invalid();
        let control = self.watch(&context);
        let state = Arc::clone(&self.state);
        let saved = blocking(move || Ok(state.lane.save(filename, control.reader(content))?)).await;
        Ok(Json(or_invalid(saved, &invalid)?))
    }

    #[tool(
        title = "List downloaded files",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        input_schema = input::<DownloadsPage>(),
        output_schema = output::<Downloads>(),
        description = "List the files in the download folder (name, path, size, time), by \
        name, a page at a time: pass `next_cursor` back as `cursor` for the next page."
    )]
    async fn downloads_list(&self, Parameters(raw): Parameters<JsonObject>) -> Reply<Downloads> {
        let args: DownloadsPage = arguments(raw)?;
        let after = args.cursor.as_deref().map(from_cursor).transpose()?;
        let limit = usize::try_from(args.limit.0).unwrap_or(usize::MAX);
        let state = Arc::clone(&self.state);
        let page = blocking(move || Ok(state.lane.page(after.as_deref(), limit)?)).await?;
        Ok(Json(Downloads {
            next_cursor: page.next.as_deref().map(to_cursor),
            files: page.entries,
        }))
    }

    #[tool(
        title = "Check a file for upload",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        input_schema = input::<SourcePath>(),
        output_schema = output::<Source>(),
        description = "Check whether a local file may be uploaded, and get its canonical \
        path, size and SHA-256. Only files inside the upload folders the user allowed (always \
        including the download folder) can be uploaded; everything else is refused \
        (`outside_allowlist`), as is anything in the gateway's own state (`state_root`), \
        directories and devices (`not_regular_file`) and files with several hard links \
        (`hardlinked`). The path must be absolute."
    )]
    async fn upload_resolve(&self, Parameters(raw): Parameters<JsonObject>) -> Reply<Source> {
        let args: SourcePath = arguments(raw)?;
        let (sources, opened) = inline(|| {
            let sources = UploadSource::load(&self.state.root)?;
            let opened = sources.open(Path::new(&args.path))?;
            Ok((sources, opened))
        })?;
        let source = if opened.bytes <= INLINE_HASH_BYTES {
            inline(|| Ok(sources.hash(opened)?))?
        } else {
            blocking(move || Ok(sources.hash(opened)?)).await?
        };
        Ok(Json(source))
    }

    #[tool(
        title = "Upload a file",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = true
        ),
        input_schema = input::<SourcePath>(),
        output_schema = output::<Uploaded>(),
        description = "Upload a local file with the configured uploader. The file must pass \
        the same checks as `upload_resolve`; a copy is staged for the uploader and erased \
        afterwards. Refused with `too_large` past the size cap."
    )]
    async fn upload_file(&self, Parameters(raw): Parameters<JsonObject>) -> Reply<Uploaded> {
        let args: SourcePath = arguments(raw)?;
        let state = Arc::clone(&self.state);
        blocking(move || {
            let uploader = state.uploader()?;
            let opened = UploadSource::load(&state.root)?.open(Path::new(&args.path))?;
            let deposit = UploadDeposit::open(&state.root)?.with_max_bytes(state.config.max_bytes);
            let sent = deposit.send(deposit.stage_source(&opened)?, uploader)?;
            uploaded(Some(lossy(&opened.path)), sent)
        })
        .await
    }

    #[tool(
        title = "Upload written content",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = true
        ),
        input_schema = input::<Content>(),
        output_schema = output::<Uploaded>(),
        description = "Upload content you wrote (as `text` or `base64`, exactly one) with the \
        configured uploader, under the given file name. The content is staged for the uploader \
        and erased afterwards."
    )]
    async fn upload_content(
        &self,
        Parameters(raw): Parameters<JsonObject>,
        context: RequestContext<RoleServer>,
    ) -> Reply<Uploaded> {
        let args: Content = arguments(raw)?;
        let (filename, content) = args.into_reader(context.extensions.get::<Spilled>())?;
        let invalid = content.invalid();
        let control = self.watch(&context);
        let state = Arc::clone(&self.state);
        let sent = blocking(move || {
            let uploader = state.uploader()?;
            let deposit = UploadDeposit::open(&state.root)?.with_max_bytes(state.config.max_bytes);
            let staged = deposit.stage(&filename, control.reader(content))?;
            uploaded(None, deposit.send(staged, uploader)?)
        })
        .await;
        or_invalid(sent, &invalid)
    }

    #[tool(
        title = "List granted folders",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        input_schema = input::<Nothing>(),
        output_schema = output::<GrantsList>(),
        description = "List the folders the user granted you (alias, path, read_only or \
        read_write, the environment variable that holds the path in `shell_exec`, and whether \
        each is available), and the access requests waiting for the user's decision."
    )]
    async fn folder_grants_list(
        &self,
        Parameters(raw): Parameters<JsonObject>,
    ) -> Reply<GrantsList> {
        let _: Nothing = arguments(raw)?;
        let state = Arc::clone(&self.state);
        let listing = blocking(move || Ok(state.folders()?.session.list()?)).await?;
        Ok(Json(GrantsList {
            grants: listing
                .grants
                .into_iter()
                .map(|g| GrantInfo {
                    alias: g.grant.alias.to_string(),
                    path: lossy(&g.grant.path),
                    access: g.grant.access.to_string(),
                    env: g.env,
                    available: g.available,
                    unavailable: g.unavailable,
                    kind: (!g.grant.kind.is_folder()).then(|| g.grant.kind.to_string()),
                    vars: g.grant.vars.iter().map(ToString::to_string).collect(),
                    allow_protected: g
                        .grant
                        .allow_protected
                        .iter()
                        .map(ToString::to_string)
                        .collect(),
                })
                .collect(),
            requests: listing.requests.into_iter().map(request_info).collect(),
            outcomes: listing
                .outcomes
                .into_iter()
                .map(|o| RequestOutcome {
                    id: o.id,
                    alias: o.alias.to_string(),
                    access: o.access.map(|a| a.to_string()),
                    status: o.status.as_str().to_owned(),
                    decision: o.decision,
                    at: o.at,
                })
                .collect(),
        }))
    }

    #[tool(
        title = "Request folder access",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        ),
        input_schema = input::<AccessRequest>(),
        output_schema = output::<Requested>(),
        description = "Ask the user for access to a folder, or for more access to a granted \
        one. This grants nothing by itself: the request waits until the user approves it with \
        the command in `approve_with`. Give a `path` only if the user named the exact folder; \
        otherwise the user chooses it when approving."
    )]
    async fn folder_access_request(
        &self,
        Parameters(raw): Parameters<JsonObject>,
        context: RequestContext<RoleServer>,
    ) -> Reply<Requested> {
        let args: AccessRequest = arguments(raw)?;
        let state = Arc::clone(&self.state);
        // Who asked, as the client named itself at `initialize`, for the human to see.
        let client = context.peer.peer_info().map_or_else(
            || "an unnamed client".to_owned(),
            |info| format!("{} {}", info.client_info.name, info.client_info.version),
        );
        let (request, approve_with) = blocking(move || {
            let grants = &state.folders()?.grants;
            let kind = args.kind.map(Into::into).unwrap_or_default();
            let toolchain = Toolchain::parse(kind, &args.vars, args.bin.as_deref())?;
            let asked = Asked {
                access: args.access.into(),
                path: args.path.as_deref().map(Path::new),
                toolchain,
            };
            let request = grants.request_asked_from(&client, &args.alias, asked, &args.reason)?;
            let proposal = grants.proposal(&request.id)?;
            let manifest = state.config.manifest.as_deref();
            Ok((
                request,
                proposal.approve_command(state.root.path(), manifest),
            ))
        })
        .await?;
        Ok(Json(Requested {
            request: request_info(request),
            status: "pending".to_owned(),
            approve_with,
        }))
    }

    #[tool(
        title = "Patch a file in a granted folder",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        ),
        input_schema = input::<FolderPatch>(),
        output_schema = output::<Patched>(),
        description = "Edit one file in a read-write granted folder by applying a unified \
        diff (as `diff -u` or `git diff` print it) to it. Every hunk must match the file \
        exactly, or nothing is changed (`patch_rejected`). `--- /dev/null` creates the file and \
        `+++ /dev/null` deletes it. Read-only folders (`read_only`), paths leaving the folder \
        (`traversal`) and symbolic links (`symlink_escape`) are refused."
    )]
    async fn folder_patch(&self, Parameters(raw): Parameters<JsonObject>) -> Reply<Patched> {
        let args: FolderPatch = arguments(raw)?;
        let state = Arc::clone(&self.state);
        let done = blocking(move || {
            let session = &state.folders()?.session;
            let alias = session.alias("patch", &args.alias)?;
            let file = Path::new(&args.path);
            Ok(apply_patch(session, &alias, file, &args.diff)?)
        })
        .await?;
        Ok(Json(done))
    }

    #[tool(
        title = "Run a sandboxed shell command",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        ),
        input_schema = input::<ShellCommand>(),
        output_schema = output::<ShellResult>(),
        description = "Run a shell command (`/bin/sh -c`) in a sandbox that can read the \
        read-only granted folders, read and write the read-write ones, and nothing else of the \
        user's files. Each granted folder's path is in the environment variable shown by \
        `folder_grants_list` (WORKFLOW_FOLDER_<ALIAS>). Network connections are blocked. \
        Output is capped; the command is killed after `timeout_s` seconds, or when the user \
        revokes or narrows a folder it uses. Use this to read, list and search files. For a \
        command that may run longer than a minute, set `background` and follow it with \
        `shell_job_status`."
    )]
    async fn shell_exec(
        &self,
        Parameters(raw): Parameters<JsonObject>,
        context: RequestContext<RoleServer>,
    ) -> Reply<ShellResult> {
        let args: ShellCommand = arguments(raw)?;
        let state = Arc::clone(&self.state);
        if args.background {
            let report = blocking(move || {
                let folders = state.folders()?;
                let command = command(&folders.session, &args)?;
                Ok(folders.jobs.start(command)?)
            })
            .await?;
            return Ok(Json(shell::job(report)));
        }
        let control = self.watch(&context);
        let watched = control.clone();
        let work = tokio::task::spawn_blocking(move || {
            let folders = state.folders()?;
            let command = command(&folders.session, &args)?;
            Ok::<_, Failure>(command.run_with(&folders.session, &watched)?)
        });
        let done = shell::with_progress(work, &control, &context).await?;
        Ok(Json(shell::finished(done, control.elapsed())))
    }

    #[tool(
        title = "Check a background command",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        ),
        input_schema = input::<JobPoll>(),
        output_schema = output::<ShellResult>(),
        description = "Report a background command started by `shell_exec` with `background`: \
        its status and the output that is new since the previous report. Give `wait_s` to wait \
        up to that long for it to finish. Once it reports `finished`, the job is forgotten."
    )]
    async fn shell_job_status(
        &self,
        Parameters(raw): Parameters<JsonObject>,
    ) -> Reply<ShellResult> {
        let args: JobPoll = arguments(raw)?;
        let state = Arc::clone(&self.state);
        let wait = Duration::from_secs(args.wait_s.0);
        let report =
            blocking(move || Ok(state.folders()?.jobs.report(&args.job_id, wait)?)).await?;
        Ok(Json(shell::job(report)))
    }

    #[tool(
        title = "Stop a background command",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        ),
        input_schema = input::<JobRef>(),
        output_schema = output::<ShellResult>(),
        description = "Stop a background command started by `shell_exec` with `background`, \
        and everything it started; report how it ended and its last output."
    )]
    async fn shell_job_stop(&self, Parameters(raw): Parameters<JsonObject>) -> Reply<ShellResult> {
        let args: JobRef = arguments(raw)?;
        let state = Arc::clone(&self.state);
        let report = blocking(move || {
            Ok(state
                .folders()?
                .jobs
                .stop(&args.job_id, "stopped by the agent")?)
        })
        .await?;
        Ok(Json(shell::job(report)))
    }

    /// A control for this request's work, stopped if the client cancels the request.
    fn watch(&self, context: &RequestContext<RoleServer>) -> Control {
        let control = Control::new();
        self.state.config.cancels.watch(&context.id, &control);
        control
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "safe-lanes-mcp",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(INSTRUCTIONS)
    }
}

const INSTRUCTIONS: &str = "Local-disk tools with fixed safe lanes. Received content is saved \
with download_save (you give a name hint, never a path). Files leave the machine only from \
folders the user allowed (upload_resolve, and upload_file/upload_content when an uploader is \
configured). You work in folders the user granted, by alias: folder_grants_list shows them; \
shell_exec reads and runs commands in a sandbox limited to them (in the background for long \
commands); folder_patch edits a file in a read-write one. To get access to another folder, call \
folder_access_request and tell the user: only the user can approve it. A refusal comes back as \
'<code>: <message>'.";

/// The command `args` asks for, in `session` (its alias checked and a refusal recorded).
fn command(session: &Session, args: &ShellCommand) -> Result<Confined, Failure> {
    let mut command = Confined::shell(&args.command).limits(Limits {
        timeout: Duration::from_secs(args.timeout_s.0),
        max_output: SHELL_OUTPUT,
    });
    if let Some(alias) = &args.cwd {
        command = command.cwd(session.alias("exec", alias)?);
    }
    Ok(command)
}

impl State {
    /// The folder-grant side, opened now if it could not be before.
    fn folders(&self) -> Result<Arc<Folders>, Failure> {
        Ok(self.open_folders()?)
    }

    fn open_folders(&self) -> safe_lanes::Result<Arc<Folders>> {
        let mut folders = self.folders.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(open) = &*folders {
            return Ok(Arc::clone(open));
        }
        let grants = AgentGrants::open(&self.root, self.config.manifest.as_deref())?;
        let session = Arc::new(grants.session().child(self.config.narrowing.clone()));
        let jobs = Jobs::new(Arc::clone(&session), MAX_JOBS);
        let open = Arc::new(Folders {
            grants,
            session,
            jobs,
        });
        *folders = Some(Arc::clone(&open));
        Ok(open)
    }

    fn uploader(&self) -> Result<&Uploader, Failure> {
        self.config
            .uploader
            .as_ref()
            .ok_or_else(|| refusal(Code::NotConfigured, "no uploader is configured"))
    }
}

fn uploaded(path: Option<String>, sent: safe_lanes::deposit::Sent) -> Reply<Uploaded> {
    let out = &sent.outcome;
    if !out.success() {
        let how = match (out.timed_out, out.exit_code) {
            (true, _) => "timed out".to_owned(),
            (false, Some(code)) => format!("exited with code {code}"),
            (false, None) => format!("was killed by signal {}", out.signal.unwrap_or(0)),
        };
        let tail: String = out
            .stderr
            .chars()
            .rev()
            .take(500)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return Err(refusal(
            Code::Io,
            &format!("the uploader {how}: {}", tail.trim()),
        ));
    }
    Ok(Json(Uploaded {
        source: UploadedContent {
            path,
            bytes: sent.bytes,
            sha256: sent.sha256.clone(),
        },
        staged: lossy(&sent.staged),
        name: sent.name.clone(),
        exit_code: out.exit_code,
        stdout: out.stdout.clone(),
        stderr: out.stderr.clone(),
        recorded: out.recorded,
    }))
}

fn request_info(r: safe_lanes::grants::Request) -> RequestInfo {
    RequestInfo {
        id: r.id,
        alias: r.alias.to_string(),
        access: r.access.to_string(),
        reason: r.reason,
        path: r.path.map(|p| lossy(&p)),
        requested_at: r.requested_at,
        kind: (!r.kind.is_folder()).then(|| r.kind.to_string()),
    }
}

/// The opaque cursor for a page that starts after the file `name` (its bytes, so a name that
/// is not UTF-8 is exact too).
fn to_cursor(name: &std::ffi::OsStr) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(name.as_encoded_bytes())
}

/// The file name a cursor from [`to_cursor`] stands for.
fn from_cursor(cursor: &str) -> Result<std::ffi::OsString, Failure> {
    use std::os::unix::ffi::OsStringExt;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()
        .map(std::ffi::OsString::from_vec)
        .ok_or_else(|| invalid("`cursor`: not a `next_cursor` that `downloads_list` returned"))
}

fn lossy(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}
