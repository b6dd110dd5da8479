//! The command line, as clap parses it. Nothing here interprets a path.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use safe_lanes::grants::LiftedPath;

/// Safe local-disk lanes for AI-agent gateways: the human's (trusted) side.
#[derive(Debug, Parser)]
#[command(name = "safe-lanes", version, about, long_about = None)]
pub(crate) struct Cli {
    /// The state root (else SAFE_LANES_ROOT, GWSA_ROOT, $XDG_STATE_HOME/safe-lanes,
    /// ~/.local/state/safe-lanes).
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) root: Option<PathBuf>,

    /// The grants manifest (default: `<root>/workflow.json`).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) manifest: Option<PathBuf>,

    /// Print exactly one JSON object on stdout: the result, or {"error":{"code","message"}}.
    #[arg(long, global = true)]
    pub(crate) json: bool,

    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Create the state root and its lanes with mode 0700.
    Init,
    /// Check the state root, the lanes and what the kernel offers (openat2, Landlock).
    Doctor,
    /// The download lane: where received files land.
    #[command(subcommand)]
    Download(DownloadCommand),
    /// The upload side: which files may leave, and staging them for an uploader.
    #[command(subcommand)]
    Upload(UploadCommand),
    /// Folder grants: what the agent may use, by alias.
    #[command(subcommand)]
    Grant(GrantCommand),
    /// Run a command confined by Landlock to the granted folders.
    Exec {
        /// Start in this grant's folder (default: a private scratch directory).
        #[arg(long, value_name = "ALIAS")]
        cwd: Option<String>,
        /// Kill the command (and everything it started) after this many seconds.
        #[arg(long, value_name = "SECONDS", default_value_t = 120)]
        timeout: u64,
        /// Allow TCP connections and listening sockets.
        #[arg(long)]
        network: bool,
        /// Run in a narrowed session: only these grants, each optionally capped, e.g.
        /// 'site,docs:read_only' (`docs` at most read-only).
        #[arg(long, value_name = "ALIAS[:ACCESS],…")]
        only: Option<String>,
        /// The command and its arguments.
        #[arg(last = true, required = true, value_name = "CMD ARGS")]
        command: Vec<OsString>,
    },
    /// Held changes: what confined commands and patches changed that waits for you (git
    /// state, tool and agent-host configuration, start-up files, links out of a folder, your
    /// own edits made meanwhile). Without a subcommand, the held sets.
    Changes {
        #[command(subcommand)]
        command: Option<ChangesCommand>,
    },
    /// The confined commands running now (the agent's commands and background jobs, your
    /// own `exec`): command line, folder, elapsed time, the last lines of output. Without a
    /// subcommand, the list.
    Jobs {
        #[command(subcommand)]
        command: Option<JobsCommand>,
    },
    /// Apply a unified diff to one file beneath a read-write grant.
    Patch {
        /// The grant's alias.
        #[arg(long)]
        alias: String,
        /// The file, relative to the granted folder.
        #[arg(long, value_name = "RELATIVE")]
        file: PathBuf,
        /// The diff; `-` or nothing reads standard input.
        #[arg(value_name = "DIFF|-")]
        diff: Option<PathBuf>,
    },
    /// The audit log.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Open the approval page: the grants and requests in a local web page (loopback only,
    /// signed in by a one-time link).
    Ui {
        /// The port on 127.0.0.1 (default: a free one).
        #[arg(long, value_name = "PORT", default_value_t = 0)]
        port: u16,
        /// Stop once no request has come for this long (e.g. `30m`, `90s`).
        #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = humantime::parse_duration)]
        idle: Duration,
        /// Open the sign-in link in the desktop's browser (`xdg-open`).
        #[arg(long)]
        open: bool,
    },
    /// Print a completion script for SHELL (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff) of safe-lanes or of one of its commands
    /// (`safe-lanes man grant add > safe-lanes-grant-add.1`), or write every page into a
    /// folder (`safe-lanes man --dir ~/.local/share/man/man1`).
    Man {
        /// The command whose page to print (none: the page of safe-lanes).
        #[arg(value_name = "COMMAND")]
        command: Vec<String>,
        /// Write every page into DIR as NAME.1 instead.
        #[arg(long, value_name = "DIR", conflicts_with = "command")]
        dir: Option<PathBuf>,
    },
}

/// `read_only` or `read_write`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
#[value(rename_all = "snake_case")]
pub(crate) enum AccessArg {
    ReadOnly,
    ReadWrite,
}

impl From<AccessArg> for safe_lanes::Access {
    fn from(a: AccessArg) -> Self {
        match a {
            AccessArg::ReadOnly => safe_lanes::Access::ReadOnly,
            AccessArg::ReadWrite => safe_lanes::Access::ReadWrite,
        }
    }
}

/// `folder`, `tool` or `cache`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
#[value(rename_all = "snake_case")]
pub(crate) enum KindArg {
    Folder,
    Tool,
    Cache,
}

impl From<KindArg> for safe_lanes::grants::Kind {
    fn from(k: KindArg) -> Self {
        match k {
            KindArg::Folder => Self::Folder,
            KindArg::Tool => Self::Tool,
            KindArg::Cache => Self::Cache,
        }
    }
}

/// What a tool or a cache grant adds: its kind, variables and programs folder.
#[derive(Debug, clap::Args)]
pub(crate) struct ToolchainArgs {
    /// folder (the default), tool (read and run only) or cache (read-write).
    #[arg(long, value_enum)]
    pub(crate) kind: Option<KindArg>,
    /// For a tool or a cache: a variable set to its path in confined commands (repeatable),
    /// e.g. CARGO_HOME.
    #[arg(long = "var", value_name = "NAME")]
    pub(crate) vars: Vec<String>,
    /// For a tool: its programs folder, relative to it, put first on confined commands' PATH.
    #[arg(long, value_name = "RELATIVE")]
    pub(crate) bin: Option<String>,
}

impl ToolchainArgs {
    /// The toolchain the flags name, each part checked by the library.
    pub(crate) fn toolchain(&self) -> safe_lanes::Result<safe_lanes::grants::Toolchain> {
        let kind = self.kind.map(Into::into).unwrap_or_default();
        safe_lanes::grants::Toolchain::parse(kind, &self.vars, self.bin.as_deref())
    }
}

/// Which paths of a read-write grant a confined command's changes reach without waiting for
/// the human (`docs/threat-model.md`, "What a command leaves behind").
#[derive(Debug, clap::Args)]
pub(crate) struct ProtectionArgs {
    /// Publish a command's changes to PATH (relative to the folder) and everything inside it
    /// without holding them for you, e.g. `.vscode` or `.git/hooks` (repeatable). Links out
    /// of the folder and your own edits made meanwhile are held all the same.
    #[arg(long = "allow-protected", value_name = "PATH")]
    pub(crate) lift: Vec<String>,
    /// Hold changes to PATH again (repeatable).
    #[arg(long = "protect", value_name = "PATH")]
    pub(crate) restore: Vec<String>,
}

impl ProtectionArgs {
    /// The paths to lift and to protect again, each checked by the library; `None` when no
    /// flag was given.
    pub(crate) fn paths(&self) -> safe_lanes::Result<Option<(Vec<LiftedPath>, Vec<LiftedPath>)>> {
        if self.lift.is_empty() && self.restore.is_empty() {
            return Ok(None);
        }
        let check = |paths: &[String]| -> safe_lanes::Result<Vec<LiftedPath>> {
            paths.iter().map(|p| LiftedPath::new(p)).collect()
        };
        Ok(Some((check(&self.lift)?, check(&self.restore)?)))
    }
}

/// The human's own hidden paths of a folder grant, beside the library's list of secrets
/// (`.env`, keys, `.ssh/` …): what no command, patch or upload of the agent's reaches.
#[derive(Debug, clap::Args)]
pub(crate) struct HiddenArgs {
    /// Hide the paths PATTERN matches as well, at any depth (`secrets/`, `*.sqlite`,
    /// `config/prod.yml`; `*` and `?` within one name; repeatable).
    #[arg(long = "hide", value_name = "PATTERN")]
    pub(crate) hide: Vec<String>,
    /// Show the paths PATTERN matches although the list hides them, e.g. `.env` for a
    /// project whose `.env` holds no secret (repeatable).
    #[arg(long = "unhide", value_name = "PATTERN")]
    pub(crate) unhide: Vec<String>,
}

impl HiddenArgs {
    /// Whether any flag was given.
    pub(crate) fn given(&self) -> bool {
        !self.hide.is_empty() || !self.unhide.is_empty()
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum GrantCommand {
    /// The grants, with their environment key and availability, and the pending requests.
    List,
    /// The pending requests, each with the change approving it would make.
    Requests,
    /// One pending request, the change approving it would make, and the line that approves it.
    Show {
        /// The request's id (see `grant requests`).
        request_id: String,
    },
    /// Walk the pending requests on a terminal: approve, deny with a reason, or skip each.
    Review,
    /// The changelog: every add, access change, revoke, request, approval and denial.
    Log,
    /// Grant a folder, or let a toolchain in: a tool (read and execute) or a cache (read-write).
    Add {
        /// The alias agents will use: `[a-z0-9][a-z0-9_-]{0,47}`.
        #[arg(long)]
        alias: String,
        /// The folder (absolute; stored canonical).
        #[arg(long, required_unless_present = "pick", conflicts_with = "pick")]
        path: Option<PathBuf>,
        /// Choose the folder in the desktop's own folder dialog (the XDG desktop portal on the
        /// session bus) instead of giving --path.
        #[arg(long)]
        pick: bool,
        /// read_only or read_write (a tool is always read_only, a cache read_write).
        #[arg(long, value_enum, required_unless_present = "kind")]
        access: Option<AccessArg>,
        #[command(flatten)]
        toolchain: ToolchainArgs,
        #[command(flatten)]
        protection: ProtectionArgs,
        #[command(flatten)]
        hidden: HiddenArgs,
        /// For a read-write folder: confined commands write it directly, without a layer of
        /// their own, so nothing they write waits for you (git state, tool configuration …
        /// land at once). For a file system that cannot hold a layer; every listing warns.
        #[arg(long)]
        direct: bool,
        /// Why, for the changelog.
        #[arg(long, default_value = "")]
        reason: String,
        /// Who, for the changelog (default: the OS user).
        #[arg(long)]
        actor: Option<String>,
    },
    /// Change a grant's access, which of its paths a command's changes publish without
    /// holding them, and whether commands write it directly.
    SetAccess {
        /// The grant's alias.
        alias: String,
        /// read_only or read_write.
        #[arg(value_enum)]
        access: AccessArg,
        #[command(flatten)]
        protection: ProtectionArgs,
        /// Make it direct: confined commands write it without a layer (see `grant add`).
        #[arg(long, conflicts_with = "layered")]
        direct: bool,
        /// Make it layered again: each command's changes are checked when it ends.
        #[arg(long)]
        layered: bool,
        /// Why, for the changelog.
        #[arg(long, default_value = "")]
        reason: String,
        /// Who, for the changelog (default: the OS user).
        #[arg(long)]
        actor: Option<String>,
    },
    /// Set a folder grant's own hidden paths: each list given replaces the grant's (no flag:
    /// both emptied, the library's list alone in force).
    SetHidden {
        /// The grant's alias.
        alias: String,
        #[command(flatten)]
        hidden: HiddenArgs,
        /// Why, for the changelog.
        #[arg(long, default_value = "")]
        reason: String,
        /// Who, for the changelog (default: the OS user).
        #[arg(long)]
        actor: Option<String>,
    },
    /// Empty a cache grant's private layer: what confined commands wrote to it, kept in the
    /// state root (the folder itself is never written by a command).
    CacheClear {
        /// The cache's alias.
        alias: String,
        /// Why, for the audit log.
        #[arg(long, default_value = "")]
        reason: String,
        /// Who, for the audit log (default: the OS user).
        #[arg(long)]
        actor: Option<String>,
    },
    /// Revoke a grant (the changelog keeps its history).
    Revoke {
        /// The grant's alias.
        alias: String,
        /// Why, for the changelog.
        #[arg(long, default_value = "")]
        reason: String,
        /// Who, for the changelog (default: the OS user).
        #[arg(long)]
        actor: Option<String>,
    },
    /// Adopt on this host a grant not bound to it: approved without a host (one another tool
    /// wrote), or on another host or machine (a manifest restored here, a mounted state root).
    Adopt {
        /// The grant's alias.
        alias: String,
        /// Why, for the changelog.
        #[arg(long, default_value = "")]
        reason: String,
        /// Who, for the changelog (default: the OS user).
        #[arg(long)]
        actor: Option<String>,
    },
    /// File a request (what an agent does; it grants nothing until approved).
    Request {
        /// The alias asked for.
        #[arg(long)]
        alias: String,
        /// read_only or read_write.
        #[arg(long, value_enum)]
        access: AccessArg,
        /// Why.
        #[arg(long)]
        reason: String,
        /// The exact folder proposed, if any.
        #[arg(long)]
        path: Option<PathBuf>,
        #[command(flatten)]
        toolchain: ToolchainArgs,
        /// Who, for the changelog (default: the OS user).
        #[arg(long)]
        actor: Option<String>,
    },
    /// Approve a pending request, with its proposed folder or the one given here.
    Approve(ApproveArgs),
    /// Deny a pending request, by id or by alias.
    Deny {
        /// The request's id (see `grant requests`).
        #[arg(required_unless_present = "alias")]
        request_id: Option<String>,
        /// Deny whatever is pending for this alias, whatever its id.
        #[arg(long, conflicts_with = "request_id")]
        alias: Option<String>,
        /// Why, for the changelog.
        #[arg(long, default_value = "")]
        reason: String,
        /// Who, for the changelog (default: the OS user).
        #[arg(long)]
        actor: Option<String>,
    },
}

/// `changes list | show | apply | discard`.
#[derive(Debug, Subcommand)]
pub(crate) enum ChangesCommand {
    /// The held sets: id, grant, the command or patch, when, and each held path with why.
    List,
    /// One set in full: each change (created, modified, deleted, mode, link) with a diff for
    /// text, why it is held, the library's warnings, and the digest `apply` asks for.
    Show {
        /// The set's id (`set_…`, see `changes`).
        id: String,
    },
    /// Apply exactly what `changes show` showed: all of the set, or the `--path` ones. The
    /// digest binds it: if the set or the folder changed since, nothing is applied.
    Apply {
        /// The set's id.
        id: String,
        /// Apply only this change (as `show` lists it; repeatable).
        #[arg(long = "path", value_name = "PATH")]
        paths: Vec<String>,
        /// The digest `changes show` printed.
        #[arg(long)]
        digest: String,
        /// Why, for the audit log.
        #[arg(long, default_value = "")]
        reason: String,
        /// Who, for the audit log (default: the OS user).
        #[arg(long)]
        actor: Option<String>,
    },
    /// Discard a set: nothing of it reaches the folder.
    Discard {
        /// The set's id.
        id: String,
        /// Discard only while the set is what `changes show` showed with this digest.
        #[arg(long)]
        digest: Option<String>,
        /// Why, for the audit log.
        #[arg(long, default_value = "")]
        reason: String,
        /// Who, for the audit log (default: the OS user).
        #[arg(long)]
        actor: Option<String>,
    },
}

/// `jobs list | stop`.
#[derive(Debug, Subcommand)]
pub(crate) enum JobsCommand {
    /// The commands running now, oldest first.
    List,
    /// Stop a running command and everything it started, within a tenth of a second.
    Stop {
        /// Its id (see `jobs`).
        id: String,
        /// Why, for the audit log (asked on a terminal when not given).
        #[arg(long, default_value = "")]
        reason: String,
        /// Who, for the audit log (default: the OS user).
        #[arg(long)]
        actor: Option<String>,
    },
}

/// `upload roots add | remove`: the human's changes to `.upload-roots`.
#[derive(Debug, Subcommand)]
pub(crate) enum RootsCommand {
    /// Allow FOLDER as an upload root: its canonical path becomes a line of `.upload-roots`
    /// (every other line kept). `/`, a home folder or a folder holding one is refused.
    Add {
        /// An absolute path to a directory.
        #[arg(value_name = "FOLDER", allow_hyphen_values = true)]
        path: PathBuf,
        /// Why, for the audit log (asked on a terminal when missing).
        #[arg(long, default_value = "")]
        reason: String,
        /// Who, for the audit log (default: the OS user).
        #[arg(long)]
        actor: Option<String>,
    },
    /// Stop allowing FOLDER: every line of `.upload-roots` naming it is removed.
    Remove {
        /// The folder, as written in the file or any path to it.
        #[arg(value_name = "FOLDER", allow_hyphen_values = true)]
        path: PathBuf,
        /// Why, for the audit log (asked on a terminal when missing).
        #[arg(long, default_value = "")]
        reason: String,
        /// Who, for the audit log (default: the OS user).
        #[arg(long)]
        actor: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum UploadCommand {
    /// Check that PATH may be uploaded; print its canonical path, root, size and SHA-256.
    Check {
        /// An absolute path.
        #[arg(value_name = "PATH", allow_hyphen_values = true, value_parser = any_path())]
        path: PathBuf,
    },
    /// List the effective upload roots with their origin, and the ignored entries with why;
    /// or add or remove a line of `.upload-roots`.
    Roots {
        #[command(subcommand)]
        change: Option<RootsCommand>,
    },
    /// Check PATH, stage a copy in the deposit, run UPLOADER there, erase the copy.
    ///
    /// `{file}` in the uploader's arguments becomes the staged file's path relative to the
    /// deposit (the uploader's working directory); without `{file}` the path is appended.
    Send {
        /// An absolute path.
        #[arg(value_name = "PATH", allow_hyphen_values = true, value_parser = any_path())]
        path: PathBuf,
        /// Kill the uploader after this many seconds.
        #[arg(long, value_name = "SECONDS", default_value_t = 300)]
        timeout: u64,
        /// The uploader and its arguments.
        #[arg(last = true, required = true, value_name = "UPLOADER ARGS")]
        uploader: Vec<OsString>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum DownloadCommand {
    /// Save FILE (or standard input) into the lane under a name derived from HINT.
    Save {
        /// A name hint; it is sanitized, never used as a path.
        #[arg(long, value_name = "HINT", allow_hyphen_values = true)]
        name: OsString,
        /// The content to save; `-` or nothing reads standard input.
        #[arg(value_name = "FILE|-")]
        file: Option<PathBuf>,
        /// Refuse content larger than this many bytes.
        #[arg(long, value_name = "BYTES")]
        max_bytes: Option<u64>,
        /// Skip the fsyncs (faster; a crash may lose the file, never half-write it).
        #[arg(long)]
        buffered: bool,
    },
    /// List the files in the lane.
    List,
    /// Remove files last modified longer ago than DURATION (e.g. 30d, 12h).
    Prune {
        /// The age, such as `30d`, `12h`, `90min`.
        #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
        older_than: Duration,
        /// Only show what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum AuditCommand {
    /// Walk the hash chain and report the first line that breaks it.
    Verify,
    /// The log as a person reads it: one line per record (local time, actor, event, outcome,
    /// the subject escaped), newest last.
    Show {
        /// Only refusals (what was tried and not let through).
        #[arg(long)]
        refused: bool,
        /// Only events that start with PREFIX (`upload`, `grant.`, `exec`).
        #[arg(long, value_name = "PREFIX")]
        op: Option<String>,
        /// Only records whose actor contains WHO (`agent`, `uid:1000`, a user's name).
        #[arg(long, value_name = "WHO")]
        actor: Option<String>,
        /// Only records since a time ago (`2h`, `3days`) or a time (`2026-12-01T09:00:00Z`).
        #[arg(long, value_name = "DURATION|TIME", value_parser = since)]
        since: Option<std::time::SystemTime>,
        /// At most N records, the newest.
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// Keep watching: print each new record as it is written (until interrupted).
        #[arg(long)]
        follow: bool,
    },
    /// What was done and tried: per operation and outcome, counts, and every refusal listed.
    Summary {
        /// Only records since a time ago (`2h`, `3days`) or a time (`2026-12-01T09:00:00Z`).
        #[arg(long, value_name = "DURATION|TIME", value_parser = since)]
        since: Option<std::time::SystemTime>,
    },
}

/// `--since`: a duration back from now (`2h`), or a time (RFC 3339, UTC when no offset).
fn since(text: &str) -> Result<std::time::SystemTime, String> {
    if let Ok(ago) = humantime::parse_duration(text) {
        return std::time::SystemTime::now()
            .checked_sub(ago)
            .ok_or_else(|| format!("{text}: too far back"));
    }
    humantime::parse_rfc3339_weak(text).map_err(|_| {
        format!("{text}: neither a duration (`2h`, `30min`) nor a time (`2026-12-01T09:00:00Z`)")
    })
}

/// `grant approve`: the request, and the change as the human saw it.
#[derive(Debug, clap::Args)]
pub(crate) struct ApproveArgs {
    /// The request's id (see `grant requests`).
    pub(crate) request_id: String,
    /// The folder to grant (required when the request proposes none).
    #[arg(long)]
    pub(crate) path: Option<PathBuf>,
    /// The alias the change is for, as shown (required without a terminal).
    #[arg(long)]
    pub(crate) alias: Option<String>,
    /// The access the change gives, as shown (required without a terminal).
    #[arg(long, value_enum)]
    pub(crate) access: Option<AccessArg>,
    /// The change's digest, as shown by `grant show` (checked when given).
    #[arg(long)]
    pub(crate) digest: Option<String>,
    /// Why, for the changelog.
    #[arg(long, default_value = "")]
    pub(crate) reason: String,
    /// Who, for the changelog (default: the OS user).
    #[arg(long)]
    pub(crate) actor: Option<String>,
}

/// A path argument taken as it is, the empty one included: what a path may be is the
/// library's to say (`upload check ""` is `relative_path`, as the agent's `upload_resolve`
/// answers), not clap's.
fn any_path() -> impl clap::builder::TypedValueParser<Value = PathBuf> {
    use clap::builder::TypedValueParser as _;
    clap::builder::OsStringValueParser::new().map(PathBuf::from)
}
