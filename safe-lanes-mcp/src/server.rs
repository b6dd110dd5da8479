//! The tools. Each maps its arguments to one library call; the library holds every policy.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{Implementation, JsonObject, ServerCapabilities, ServerConfig};
use rmcp::{Json, ServerHandler, tool, tool_handler, tool_router};
use safe_lanes::grants::AgentGrants;
use safe_lanes::{
    Code, Confined, DownloadLane, Limits, Session, StateRoot, UploadDeposit, UploadSource,
    Uploader, apply_patch,
};

use crate::params::{
    AccessRequest, Content, DownloadedFile, Downloads, FolderPatch, GrantInfo, GrantsList, Nothing,
    Patched, RequestInfo, Requested, ResolvedSource, SavedFile, ShellCommand, ShellResult,
    SourcePath, Uploaded, UploadedContent,
};
use crate::reply::{Failure, arguments, blocking, input_schema, refusal};

/// The default and largest `timeout_s` of `shell_exec`.
const SHELL_TIMEOUT: (u64, u64) = (60, 600);
/// Output kept of each stream of a shell command.
const SHELL_OUTPUT: usize = 256 * 1024;

/// What the server was started with.
#[derive(Debug)]
pub(crate) struct Config {
    pub(crate) root: PathBuf,
    pub(crate) manifest: Option<PathBuf>,
    pub(crate) uploader: Option<Uploader>,
    /// The largest content a tool saves or stages.
    pub(crate) max_bytes: u64,
}

/// Everything the tools share.
#[derive(Debug)]
struct State {
    config: Config,
    root: StateRoot,
    lane: DownloadLane,
    grants: AgentGrants,
    session: Session,
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
        let grants = AgentGrants::open(&root, config.manifest.as_deref())?;
        let session = grants.session();
        let mut tool_router = Self::tool_router();
        if config.uploader.is_none() {
            tool_router.remove_route("upload_file");
            tool_router.remove_route("upload_content");
        }
        Ok(Self {
            state: Arc::new(State {
                config,
                root,
                lane,
                grants,
                session,
            }),
            tool_router,
        })
    }

    #[tool(
        input_schema = input_schema::<Content>(),
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
    ) -> Result<Json<SavedFile>, Failure> {
        let args: Content = arguments(raw)?;
        let bytes = args.bytes()?;
        let state = Arc::clone(&self.state);
        let saved = blocking(move || Ok(state.lane.save(args.filename, &bytes[..])?)).await?;
        Ok(Json(SavedFile {
            path: lossy(&saved.path),
            name: saved.name,
            bytes: saved.bytes,
            sha256: saved.sha256,
        }))
    }

    #[tool(input_schema = input_schema::<Nothing>(), description = "List the files in the download folder (name, path, size, time).")]
    async fn downloads_list(
        &self,
        Parameters(raw): Parameters<JsonObject>,
    ) -> Result<Json<Downloads>, Failure> {
        let _: Nothing = arguments(raw)?;
        let state = Arc::clone(&self.state);
        let files = blocking(move || Ok(state.lane.list()?)).await?;
        Ok(Json(Downloads {
            files: files
                .into_iter()
                .map(|f| DownloadedFile {
                    path: lossy(&f.path),
                    name: f.name,
                    bytes: f.bytes,
                    modified: f.modified,
                })
                .collect(),
        }))
    }

    #[tool(
        input_schema = input_schema::<SourcePath>(),
        description = "Check whether a local file may be uploaded, and get its canonical \
        path, size and SHA-256. Only files inside the upload folders the user allowed (always \
        including the download folder) can be uploaded; everything else is refused \
        (`outside_allowlist`), as is anything in the gateway's own state (`state_root`), \
        directories and devices (`not_regular_file`) and files with several hard links \
        (`hardlinked`). The path must be absolute."
    )]
    async fn upload_resolve(
        &self,
        Parameters(raw): Parameters<JsonObject>,
    ) -> Result<Json<ResolvedSource>, Failure> {
        let args: SourcePath = arguments(raw)?;
        let state = Arc::clone(&self.state);
        let source =
            blocking(move || Ok(UploadSource::load(&state.root)?.resolve(Path::new(&args.path))?))
                .await?;
        Ok(Json(ResolvedSource {
            path: lossy(&source.path),
            root: lossy(&source.root),
            bytes: source.bytes,
            sha256: source.sha256,
        }))
    }

    #[tool(
        input_schema = input_schema::<SourcePath>(),
        description = "Upload a local file with the configured uploader. The file must pass \
        the same checks as `upload_resolve`; a copy is staged for the uploader and erased \
        afterwards. Refused with `too_large` past the size cap."
    )]
    async fn upload_file(
        &self,
        Parameters(raw): Parameters<JsonObject>,
    ) -> Result<Json<Uploaded>, Failure> {
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
        input_schema = input_schema::<Content>(),
        description = "Upload content you wrote (as `text` or `base64`, exactly one) with the \
        configured uploader, under the given file name. The content is staged for the uploader \
        and erased afterwards."
    )]
    async fn upload_content(
        &self,
        Parameters(raw): Parameters<JsonObject>,
    ) -> Result<Json<Uploaded>, Failure> {
        let args: Content = arguments(raw)?;
        let bytes = args.bytes()?;
        let state = Arc::clone(&self.state);
        blocking(move || {
            let uploader = state.uploader()?;
            let deposit = UploadDeposit::open(&state.root)?.with_max_bytes(state.config.max_bytes);
            let sent = deposit.send(deposit.stage(&args.filename, &bytes[..])?, uploader)?;
            uploaded(None, sent)
        })
        .await
    }

    #[tool(
        input_schema = input_schema::<Nothing>(),
        description = "List the folders the user granted you (alias, path, read_only or \
        read_write, the environment variable that holds the path in `shell_exec`, and whether \
        each is available), and the access requests waiting for the user's decision."
    )]
    async fn folder_grants_list(
        &self,
        Parameters(raw): Parameters<JsonObject>,
    ) -> Result<Json<GrantsList>, Failure> {
        let _: Nothing = arguments(raw)?;
        let state = Arc::clone(&self.state);
        let listing = blocking(move || Ok(state.grants.list()?)).await?;
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
                })
                .collect(),
            requests: listing.requests.into_iter().map(request_info).collect(),
        }))
    }

    #[tool(
        input_schema = input_schema::<AccessRequest>(),
        description = "Ask the user for access to a folder, or for more access to a granted \
        one. This grants nothing by itself: the request waits until the user approves it with \
        the command in `approve_with`. Give a `path` only if the user named the exact folder; \
        otherwise the user chooses it when approving."
    )]
    async fn folder_access_request(
        &self,
        Parameters(raw): Parameters<JsonObject>,
    ) -> Result<Json<Requested>, Failure> {
        let args: AccessRequest = arguments(raw)?;
        let state = Arc::clone(&self.state);
        let request = blocking(move || {
            Ok(state.grants.request(
                &args.alias,
                args.access.into(),
                &args.reason,
                args.path.as_deref().map(Path::new),
            )?)
        })
        .await?;
        let approve_with = self.state.approve_command(&request);
        Ok(Json(Requested {
            request: request_info(request),
            status: "pending".to_owned(),
            approve_with,
        }))
    }

    #[tool(
        input_schema = input_schema::<FolderPatch>(),
        description = "Edit one file in a read-write granted folder by applying a unified \
        diff (as `diff -u` or `git diff` print it) to it. Every hunk must match the file \
        exactly, or nothing is changed (`patch_rejected`). `--- /dev/null` creates the file and \
        `+++ /dev/null` deletes it. Read-only folders (`read_only`), paths leaving the folder \
        (`traversal`) and symbolic links (`symlink_escape`) are refused."
    )]
    async fn folder_patch(
        &self,
        Parameters(raw): Parameters<JsonObject>,
    ) -> Result<Json<Patched>, Failure> {
        let args: FolderPatch = arguments(raw)?;
        let state = Arc::clone(&self.state);
        let done = blocking(move || {
            let alias = state.session.alias("patch", &args.alias)?;
            let file = Path::new(&args.path);
            Ok(apply_patch(&state.session, &alias, file, &args.diff)?)
        })
        .await?;
        Ok(Json(Patched {
            path: lossy(&done.path),
            change: format!("{:?}", done.change).to_lowercase(),
            hunks: done.hunks,
            bytes: done.bytes,
        }))
    }

    #[tool(
        input_schema = input_schema::<ShellCommand>(),
        description = "Run a shell command (`/bin/sh -c`) in a sandbox that can read the \
        read-only granted folders, read and write the read-write ones, and nothing else of the \
        user's files. Each granted folder's path is in the environment variable shown by \
        `folder_grants_list` (WORKFLOW_FOLDER_<ALIAS>). Network connections are blocked. \
        Output is capped; the command is killed after `timeout_s` seconds, or when the user \
        revokes or narrows a folder it uses. Use this to read, list and search files."
    )]
    async fn shell_exec(
        &self,
        Parameters(raw): Parameters<JsonObject>,
    ) -> Result<Json<ShellResult>, Failure> {
        let args: ShellCommand = arguments(raw)?;
        let state = Arc::clone(&self.state);
        let timeout = args
            .timeout_s
            .unwrap_or(SHELL_TIMEOUT.0)
            .clamp(1, SHELL_TIMEOUT.1);
        let done = blocking(move || {
            let mut command = Confined::shell(&args.command).limits(Limits {
                timeout: Duration::from_secs(timeout),
                max_output: SHELL_OUTPUT,
            });
            if let Some(alias) = &args.cwd {
                command = command.cwd(state.session.alias("exec", alias)?);
            }
            Ok(command.run(&state.session)?)
        })
        .await?;
        let out = done.outcome;
        Ok(Json(ShellResult {
            exit_code: out.exit_code,
            signal: out.signal,
            stdout: out.stdout,
            stderr: out.stderr,
            timed_out: out.timed_out,
            truncated: out.truncated,
            stopped: out.stopped,
        }))
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
shell_exec reads and runs commands in a sandbox limited to them; folder_patch edits a file in a \
read-write one. To get access to another folder, call folder_access_request and tell the user: \
only the user can approve it. A refusal comes back as '<code>: <message>'.";

impl State {
    fn uploader(&self) -> Result<&Uploader, Failure> {
        self.config
            .uploader
            .as_ref()
            .ok_or_else(|| refusal(Code::NotConfigured, "no uploader is configured"))
    }

    /// The exact command the human runs to approve `request`.
    fn approve_command(&self, request: &safe_lanes::grants::Request) -> String {
        let mut cmd = format!(
            "safe-lanes --root {}",
            quote(&self.root.path().to_string_lossy())
        );
        if let Some(manifest) = &self.config.manifest {
            cmd.push_str(&format!(
                " --manifest {}",
                quote(&manifest.to_string_lossy())
            ));
        }
        cmd.push_str(&format!(" grant approve {}", request.id));
        if request.path.is_none() {
            cmd.push_str(" --path /absolute/path/of/the/folder");
        }
        cmd
    }
}

fn uploaded(
    path: Option<String>,
    sent: safe_lanes::deposit::Sent,
) -> Result<Json<Uploaded>, Failure> {
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
            sha256: sent.sha256,
        },
        exit_code: out.exit_code,
        stdout: out.stdout.clone(),
        stderr: out.stderr.clone(),
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
    }
}

fn lossy(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Quote for a POSIX shell when needed.
fn quote(text: &str) -> String {
    if text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:@".contains(&b))
    {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}
