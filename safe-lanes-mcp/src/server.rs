//! The tools. Each maps its arguments to one library call; the library holds every policy.

use std::path::PathBuf;
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{Implementation, JsonObject, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{Json, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use safe_lanes::desk::{
    AccessAsk, CommandReport, DownloadList, GrantsList, Requested, ShellRequest, Uploaded,
};
use safe_lanes::{AgentDesk, Control, DeskOptions, Patched, Saved, Source, StateRoot};

use crate::content::or_invalid;
#[cfg(target_os = "linux")]
use crate::params::FetchUrl;
use crate::params::{
    AccessRequest, Content, DownloadsPage, FolderPatch, JobPoll, JobRef, Nothing, ShellCommand,
    SourcePath,
};
use crate::reply::{Reply, arguments, blocking, inline};
use crate::schema::{input, output};
use crate::shell;
use crate::spill::Spilled;
use crate::transport::Cancels;

/// Files up to this size are hashed on the runtime's thread (well under a millisecond); larger
/// ones on the blocking pool, so one large file does not hold up other calls.
const INLINE_HASH_BYTES: u64 = 256 * 1024;

/// What the server was started with.
#[derive(Debug)]
pub(crate) struct Config {
    pub(crate) root: PathBuf,
    /// What the agent's desk is opened with (the manifest, the narrowing, the caps, the
    /// uploader).
    pub(crate) desk: DeskOptions,
    /// Where the transport reports cancelled requests.
    pub(crate) cancels: Cancels,
}

/// The MCP server: a table of tools, each one call of the agent's desk.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    desk: AgentDesk,
    cancels: Cancels,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Server {
    pub(crate) fn new(config: Config) -> safe_lanes::Result<Self> {
        let desk = AgentDesk::open(StateRoot::open(&config.root)?, config.desk)?;
        let mut tool_router = Self::tool_router();
        #[cfg(target_os = "linux")]
        if desk.can_fetch() {
            tool_router += Self::fetch_router();
        }
        if !desk.can_upload() {
            tool_router.remove_route("upload_file");
            tool_router.remove_route("upload_content");
        }
        Ok(Self {
            desk,
            cancels: config.cancels,
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
        let desk = self.desk.clone();
        let saved = blocking(move || Ok(desk.save(filename, control.reader(content))?)).await;
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
        output_schema = output::<DownloadList>(),
        description = "List the files in the download folder (name, path, size, time), by \
        name, a page at a time: pass `next_cursor` back as `cursor` for the next page."
    )]
    async fn downloads_list(&self, Parameters(raw): Parameters<JsonObject>) -> Reply<DownloadList> {
        let args: DownloadsPage = arguments(raw)?;
        let limit = usize::try_from(args.limit.0).unwrap_or(usize::MAX);
        let desk = self.desk.clone();
        let page = blocking(move || Ok(desk.downloads(args.cursor.as_deref(), limit)?)).await?;
        Ok(Json(page))
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
        let check = inline(|| Ok(self.desk.check_upload(&args.path)?))?;
        let source = if check.bytes() <= INLINE_HASH_BYTES {
            inline(|| Ok(check.hash()?))?
        } else {
            blocking(move || Ok(check.hash()?)).await?
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
        let desk = self.desk.clone();
        Ok(Json(
            blocking(move || Ok(desk.upload_file(&args.path)?)).await?,
        ))
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
        let desk = self.desk.clone();
        let sent =
            blocking(move || Ok(desk.upload_content(&filename, control.reader(content))?)).await;
        Ok(Json(or_invalid(sent, &invalid)?))
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
        let desk = self.desk.clone();
        Ok(Json(blocking(move || Ok(desk.grants()?)).await?))
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
        the command in `approve_with` (hand it over as it is: on a terminal it asks the user \
        why; elsewhere the user adds a --reason). Give a `path` only if the user named the \
        exact folder; otherwise the user chooses it when approving."
    )]
    async fn folder_access_request(
        &self,
        Parameters(raw): Parameters<JsonObject>,
        context: RequestContext<RoleServer>,
    ) -> Reply<Requested> {
        let args: AccessRequest = arguments(raw)?;
        // Who asked, as the client named itself, for the human to see: at `initialize`, or
        // (a client of the stateless protocol, which never initializes) in each request's
        // `_meta`.
        let client = context
            .peer
            .peer_info()
            .map(|info| info.client_info.clone())
            .or_else(|| context.meta.client_info());
        let desk = match client {
            Some(info) => self
                .desk
                .with_client(format!("{} {}", info.name, info.version)),
            None => self.desk.clone(),
        };
        let ask = AccessAsk {
            alias: args.alias,
            access: args.access.into(),
            reason: args.reason,
            path: args.path,
            kind: args.kind.map(Into::into).unwrap_or_default(),
            vars: args.vars,
            bin: args.bin,
        };
        Ok(Json(
            blocking(move || Ok(desk.request_access(&ask)?)).await?,
        ))
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
        (`traversal`) and symbolic links (`symlink_escape`) are refused. A change to what the \
        user's own tools act on (git state, a tool's or an agent host's configuration, start-up \
        files) is not applied but held for the user to review: the result says `held: true`, \
        with the change set's id and why; tell the user."
    )]
    async fn folder_patch(&self, Parameters(raw): Parameters<JsonObject>) -> Reply<Patched> {
        let args: FolderPatch = arguments(raw)?;
        let desk = self.desk.clone();
        let done = blocking(move || Ok(desk.patch(&args.alias, &args.path, &args.diff)?)).await?;
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
        output_schema = output::<CommandReport>(),
        description = "Run a shell command (`/bin/sh -c`) in a sandbox that can read the \
        read-only granted folders, read and write the read-write ones, and nothing else of the \
        user's files. Each granted folder's path is in the environment variable shown by \
        `folder_grants_list` (WORKFLOW_FOLDER_<ALIAS>). Network connections are blocked. \
        Output is capped; the command is killed after `timeout_s` seconds, or when the user \
        revokes or narrows a folder it uses. Its writes to a read-write folder reach the folder \
        when it ends (`changes.published`), except changes to what the user's own tools act on \
        (git configuration and hooks, tools' and agent hosts' settings, start-up files, links \
        out of the folder): those are held for the user to review (`changes.held`, with why, \
        and `changes.set`); tell the user. Use this to read, list and search files. For \
        anything that may take longer than about 30 seconds (a build, a test suite, an \
        install), set `background` and follow it with `shell_job_status`: agent hosts cancel \
        a call at their own timeout, whatever progress it reports."
    )]
    async fn shell_exec(
        &self,
        Parameters(raw): Parameters<JsonObject>,
        context: RequestContext<RoleServer>,
    ) -> Reply<CommandReport> {
        let args: ShellCommand = arguments(raw)?;
        let shell = ShellRequest {
            command: args.command,
            cwd: args.cwd,
            timeout: Duration::from_secs(args.timeout_s.0),
        };
        let desk = self.desk.clone();
        if args.background {
            return Ok(Json(
                blocking(move || Ok(desk.shell_background(&shell)?)).await?,
            ));
        }
        let control = self.watch(&context);
        let watched = control.clone();
        let work = tokio::task::spawn_blocking(move || desk.shell(&shell, &watched));
        Ok(Json(shell::with_progress(work, &control, &context).await?))
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
        output_schema = output::<CommandReport>(),
        description = "Report a background command started by `shell_exec` with `background`: \
        its status and the output that is new since the previous report. Give `wait_s` to wait \
        up to that long for it to finish. Once it reports `finished`, the job is forgotten."
    )]
    async fn shell_job_status(
        &self,
        Parameters(raw): Parameters<JsonObject>,
    ) -> Reply<CommandReport> {
        let args: JobPoll = arguments(raw)?;
        let wait = Duration::from_secs(args.wait_s.0);
        let desk = self.desk.clone();
        Ok(Json(
            blocking(move || Ok(desk.job_status(&args.job_id, wait)?)).await?,
        ))
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
        output_schema = output::<CommandReport>(),
        description = "Stop a background command started by `shell_exec` with `background`, \
        and everything it started; report how it ended and its last output."
    )]
    async fn shell_job_stop(
        &self,
        Parameters(raw): Parameters<JsonObject>,
    ) -> Reply<CommandReport> {
        let args: JobRef = arguments(raw)?;
        let desk = self.desk.clone();
        Ok(Json(
            blocking(move || Ok(desk.job_stop(&args.job_id)?)).await?,
        ))
    }

    /// A control for this request's work, stopped if the client cancels the request.
    fn watch(&self, context: &RequestContext<RoleServer>) -> Control {
        let control = Control::new();
        self.cancels.watch(&context.id, &control);
        control
    }
}

/// The tool that fetches into the download lane, offered only when the human started the
/// server with `--fetch` (Linux: the library's fetcher is Linux-only).
#[cfg(target_os = "linux")]
#[tool_router(router = fetch_router)]
impl Server {
    #[tool(
        title = "Fetch a file into the download folder",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = true
        ),
        input_schema = input::<FetchUrl>(),
        output_schema = output::<safe_lanes::fetch::Fetched>(),
        description = "Download a file from an `https` URL straight into the local download \
        folder: the server fetches it, so its content never passes through you (prefer this to \
        `download_save` for anything you would otherwise have to copy). The file is saved like \
        `download_save` saves (a sanitized name from `filename`, the server's name or the URL; \
        never overwriting); you get its path, size, SHA-256, content type and final URL. \
        Addresses on this machine or its private networks are refused (`address_refused`), \
        as are redirects to them; a server error or a broken transfer is `fetch_failed`; past \
        the size cap, `too_large`."
    )]
    async fn download_fetch(
        &self,
        Parameters(raw): Parameters<JsonObject>,
    ) -> Reply<safe_lanes::fetch::Fetched> {
        let args: FetchUrl = arguments(raw)?;
        let desk = self.desk.clone();
        let fetched =
            blocking(move || Ok(desk.fetch(&args.url, args.filename.as_deref())?)).await?;
        Ok(Json(fetched))
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
            .with_instructions(self.instructions())
    }
}

impl Server {
    /// What the server tells the client at `initialize`: how the tools fit together, and the
    /// folders granted at this moment (alias, id, access), or why they cannot be listed.
    fn instructions(&self) -> String {
        let mut text = String::from(INSTRUCTIONS);
        match self.desk.grants() {
            Ok(list) => {
                let (available, unavailable): (Vec<_>, Vec<_>) =
                    list.grants.iter().partition(|g| g.available);
                if available.is_empty() && unavailable.is_empty() {
                    text.push_str(" No folder is granted to you yet.");
                } else if available.is_empty() {
                    text.push_str(" No granted folder is available on this host now.");
                } else {
                    text.push_str(" Folders granted to you now (alias, id, access):");
                    for g in available {
                        text.push_str(&format!(" `{}` ({}, {});", g.alias, g.id, g.access));
                    }
                    text.pop();
                    text.push('.');
                }
                if !unavailable.is_empty() {
                    text.push_str(&format!(
                        " {} more granted but unavailable here (folder_grants_list says why).",
                        unavailable.len()
                    ));
                }
            }
            Err(error) => {
                text.push_str(&format!(" The granted folders cannot be listed: {error}."))
            }
        }
        text.push_str(
            " Grants change while you work: call folder_grants_list for the current ones.",
        );
        text
    }
}

const INSTRUCTIONS: &str = "Local-disk tools with fixed safe lanes. Received content is saved \
with download_save (you give a name hint, never a path); download_fetch, when offered, fetches a \
URL into the download folder without the content passing through you. Files leave the machine \
only from folders the user allowed (upload_resolve, and upload_file/upload_content when an \
uploader is configured). You work in folders the user granted, by alias or id: shell_exec reads \
and runs commands in a sandbox limited to them (in the background for long commands); \
folder_patch edits a file in a read-write one. To get access to another folder, call \
folder_access_request and tell the user: only the user can approve it. A refusal comes back as \
'<code>: <message>'.";
