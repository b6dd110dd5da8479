//! `safe-lanes-mcp`: the agent's side of safe-lanes, an MCP server over stdio.
//!
//! It holds no policy: each tool maps its arguments to one library call (see [`server`]). Logs
//! go to stderr; stdout carries the protocol only.

#![forbid(unsafe_code)]

#[cfg(unix)]
mod content;
#[cfg(unix)]
mod lines;
#[cfg(unix)]
mod log;
#[cfg(unix)]
mod params;
#[cfg(unix)]
mod prefix;
#[cfg(unix)]
mod reply;
#[cfg(unix)]
mod schema;
#[cfg(unix)]
mod server;
#[cfg(unix)]
mod shell;
#[cfg(unix)]
mod spill;
#[cfg(unix)]
mod transport;

#[cfg(unix)]
use std::path::PathBuf;

#[cfg(unix)]
use anyhow::{Context, Result};
#[cfg(unix)]
use clap::Parser;
#[cfg(unix)]
use rmcp::ServiceExt;
#[cfg(unix)]
use safe_lanes::grants::Narrowing;
#[cfg(unix)]
use safe_lanes::{RootLocation, Uploader};

/// The safe-lanes MCP server (stdio).
#[cfg(unix)]
#[derive(Debug, Parser)]
#[command(name = "safe-lanes-mcp", version, about, long_about = None)]
struct Args {
    /// The state root (else SAFE_LANES_ROOT, GWSA_ROOT, $XDG_STATE_HOME/safe-lanes,
    /// ~/.local/state/safe-lanes).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// The grants manifest (default: `<root>/workflow.json`).
    #[arg(long, value_name = "FILE")]
    manifest: Option<PathBuf>,
    /// The uploader command, `{file}` standing for the staged file, e.g.
    /// 'gws drive files create --upload {file}'. Without it, the upload tools are not offered.
    #[arg(long, value_name = "'CMD … {file} …'")]
    uploader: Option<String>,
    /// The largest file `download_save`, `upload_content` and `upload_file` accept, in bytes.
    /// It also sizes the longest request line (twice this, plus 1 MiB).
    #[arg(long, value_name = "BYTES", default_value_t = 50 << 20)]
    max_bytes: u64,
    /// Serve a narrowed session: only these grants, each optionally capped, e.g.
    /// 'site,docs:read_only' (`docs` at most read-only). Without it, every grant.
    #[arg(long, value_name = "ALIAS[:ACCESS],…")]
    only: Option<String>,
    /// The memory all confined commands' private `/tmp`s share, in bytes (default: a quarter
    /// of the machine's memory); each gets at most 1 GiB of it.
    #[arg(long, value_name = "BYTES")]
    tmp_budget: Option<u64>,
    /// Offer `download_fetch`: the server fetches `https` URLs the agent gives straight into
    /// the download folder, behind the SSRF guard (no address of this machine or its private
    /// networks, every redirect checked). Off by default.
    #[arg(long)]
    fetch: bool,
    /// With `--fetch`: plain `http` URLs too.
    #[arg(long, requires = "fetch")]
    fetch_http: bool,
    /// With `--fetch`: fetch only from this host (`files.example.com`, `*.example.com` for the
    /// names below it, or an IP literal); repeat for more. Every address is still checked.
    #[arg(long, value_name = "HOST", requires = "fetch")]
    fetch_host: Vec<String>,
}

#[cfg(unix)]
impl Args {
    /// What `--fetch`, `--fetch-http` and `--fetch-host` ask for.
    #[cfg(target_os = "linux")]
    fn fetch_policy(&self) -> Option<safe_lanes::fetch::FetchPolicy> {
        self.fetch.then(|| {
            let mut policy = safe_lanes::fetch::FetchPolicy::default();
            policy.allow_http = self.fetch_http;
            policy.hosts = (!self.fetch_host.is_empty()).then(|| self.fetch_host.clone());
            policy
        })
    }
}

/// The server; a failure to start is said on one line (`safe-lanes-mcp: --uploader:
/// invalid_argument: …`), never as a backtrace, whatever `RUST_BACKTRACE` says, with exit
/// status 2.
#[cfg(unix)]
fn main() -> std::process::ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let served = match runtime {
        Ok(runtime) => runtime.block_on(serve()),
        Err(e) => Err(anyhow::Error::new(e).context("cannot start the runtime")),
    };
    match served {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "safe-lanes-mcp: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

#[cfg(unix)]
async fn serve() -> Result<()> {
    // First, before anything is read or started: no core file, no same-user tracing.
    let hardening = safe_lanes::harden();
    // Diagnostics through a bounded queue: a stuck or full stderr never holds up a call.
    let log = log::Log::start(std::io::stderr());
    tracing_subscriber::fmt()
        .with_writer(log.clone())
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,rmcp=error".into()),
        )
        .init();
    let hardening = hardening.context("cannot harden the server process")?;
    if let Some(warning) = hardening.warning() {
        tracing::warn!("{warning}");
    }
    let args = Args::parse();
    let root = RootLocation::resolve(args.root.as_deref())?;
    let uploader = args
        .uploader
        .as_deref()
        .map(Uploader::parse)
        .transpose()
        .context("--uploader")?;
    let narrowing = args
        .only
        .as_deref()
        .map(Narrowing::parse)
        .transpose()
        .context("--only")?
        .unwrap_or_default();
    #[cfg(target_os = "linux")]
    if let Some(budget) = args.tmp_budget {
        safe_lanes::confine::limits::set_scratch_budget(budget);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = args.tmp_budget;
    #[cfg(not(target_os = "linux"))]
    if args.fetch {
        anyhow::bail!("--fetch: fetching is available on Linux only");
    }
    let cancels = transport::Cancels::default();
    let mut desk = safe_lanes::DeskOptions::default();
    #[cfg(target_os = "linux")]
    {
        desk.fetch = args.fetch_policy();
    }
    desk.manifest = args.manifest;
    desk.uploader = uploader;
    desk.max_bytes = args.max_bytes;
    desk.narrowing = narrowing;
    let server = server::Server::new(server::Config {
        root: root.path.clone(),
        desk,
        cancels: cancels.clone(),
    })
    .context("cannot open the state root")?;
    log.line(
        format!(
            "safe-lanes-mcp {}: serving MCP on stdio (state root {})\n",
            env!("CARGO_PKG_VERSION"),
            root.path.display()
        )
        .into_bytes(),
    );
    let limits = transport::Limits::for_content_cap(args.max_bytes);
    let transport =
        transport::stdio(limits, cancels.clone()).context("cannot start reading stdin")?;
    server.serve(transport).await?.waiting().await?;
    // The client went away: what its requests still run stops now, and the runtime waits for
    // each to record how it ended (background jobs are stopped, and waited for, as the server
    // state goes).
    cancels.stop_all("the client went away");
    Ok(())
}

/// Where the library has no backend (Windows): the refusal (`unsupported_platform: …`) on
/// stderr, exit status 1, and nothing served.
#[cfg(not(unix))]
fn main() -> std::process::ExitCode {
    use std::io::Write;
    if let Err(error) = safe_lanes::StateRoot::open_default(None) {
        let _ = writeln!(std::io::stderr(), "{error}");
    }
    std::process::ExitCode::FAILURE
}
