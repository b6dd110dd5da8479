//! One function per command; each is a few lines over one library call.

mod approve;
mod ask;
mod audit;
mod changes;
mod confined;
mod download;
mod grant;
mod jobs;
mod reference;
mod root;
mod ui;
mod upload;

use anyhow::Result;

use crate::args::{AuditCommand, Cli, Command};
use crate::output::Report;

/// Run the parsed command line.
pub(crate) fn run(cli: Cli) -> Result<Report> {
    let root = cli.root.as_deref();
    match cli.command {
        Command::Init => root::init(root, cli.manifest.as_deref()),
        Command::Doctor => root::doctor(root, cli.manifest.as_deref()),
        Command::Download(cmd) => download::run(root, cmd),
        Command::Upload(cmd) => upload::run(root, cmd),
        Command::Grant(cmd) => grant::run(root, cli.manifest.as_deref(), cmd),
        Command::Exec {
            cwd,
            timeout,
            network,
            only,
            command,
        } => {
            let exec = confined::Exec {
                cwd,
                timeout,
                network,
                only,
                stream: !cli.json,
            };
            confined::exec(root, cli.manifest.as_deref(), exec, command)
        }
        Command::Changes { command } => changes::run(root, cli.manifest.as_deref(), command),
        Command::Jobs { command } => jobs::run(root, command),
        Command::Patch { alias, file, diff } => {
            confined::patch(root, cli.manifest.as_deref(), &alias, &file, diff)
        }
        Command::Audit(AuditCommand::Verify) => root::audit_verify(root, cli.manifest.as_deref()),
        Command::Audit(AuditCommand::Show {
            refused,
            op,
            actor,
            since,
            limit,
            follow,
        }) => {
            let filter = safe_lanes::audit_view::Filter {
                refused,
                op,
                actor,
                since,
                limit,
            };
            audit::show(root, &filter, follow, cli.json)
        }
        Command::Audit(AuditCommand::Summary { since }) => audit::summary(root, since),
        Command::Ui { port, idle, open } => {
            let page = ui::Page { port, idle, open };
            ui::run(root, cli.manifest.as_deref(), page, cli.json)
        }
        Command::Completions { shell } => reference::completions(shell),
        Command::Man { command, dir } => reference::man(&command, dir.as_deref()),
    }
}

/// Open for reading a file the human named on the command line (their own argument: reading
/// it is not a confinement decision). A missing file is `not_found` (exit 3), like every
/// other "no such file"; any other failure is `io`.
fn open_argument(path: &std::path::Path) -> Result<std::fs::File> {
    std::fs::File::open(path).map_err(|e| {
        let error = match e.kind() {
            std::io::ErrorKind::NotFound => safe_lanes::Error::NotFound {
                path: safe_lanes::Shown::path(path),
                why: "no such file".into(),
            },
            _ => safe_lanes::Error::io("open", safe_lanes::Shown::path(path), e),
        };
        error.into()
    })
}
