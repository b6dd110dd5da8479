//! `safe-lanes`: the human's command line. The human is the trusted side: this is where
//! folders are granted, requests approved and the lanes inspected.
//!
//! `main → run → Report`: arguments are parsed by clap (usage errors exit 2), each command
//! is a few lines over one library call, and [`output`] prints the result as text or as
//! exactly one JSON object (`--json`). Exit status: 0 ok, 1 operational failure, 2 usage,
//! 3 refused (any error code but `io`).

#![forbid(unsafe_code)]

#[cfg(unix)]
mod args;
#[cfg(unix)]
mod commands;
#[cfg(unix)]
mod output;

#[cfg(unix)]
use std::io::IsTerminal;
use std::process::ExitCode;

#[cfg(unix)]
use clap::Parser;

#[cfg(unix)]
fn main() -> ExitCode {
    // First, before anything is read: no core file, no same-user tracing.
    let hardening = safe_lanes::harden();
    log_to_stderr();
    let cli = match args::Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return output::usage(&err, json_asked(std::env::args_os())),
    };
    let json = cli.json;
    let result = match hardening {
        Ok(_) => commands::run(cli),
        Err(e) => Err(e.into()),
    };
    output::finish(result, json)
}

/// Where the library has no backend (Windows): every command is refused with the library's
/// `unsupported_platform`, as text on stderr or as the one JSON object `--json` asks for, with
/// exit status 3 (refused). Nothing is opened or created.
#[cfg(not(unix))]
fn main() -> ExitCode {
    use std::io::Write;
    let json = json_asked(std::env::args_os());
    let Err(error) = safe_lanes::StateRoot::open_default(None) else {
        return ExitCode::FAILURE;
    };
    let (code, message) = (error.code(), error.message().to_string());
    if json {
        let error = serde_json::json!({ "error": { "code": code, "message": message } });
        let _ = writeln!(std::io::stdout().lock(), "{error}");
    } else {
        let _ = writeln!(std::io::stderr(), "safe-lanes: {code}: {message}");
    }
    ExitCode::from(3)
}

/// Send the library's log (its warnings) to stderr: level from `RUST_LOG`, `warn` by default;
/// colours only on a terminal. Stdout stays the result's alone.
#[cfg(unix)]
fn log_to_stderr() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(filter)
        .try_init();
}

/// Whether `--json` is among the arguments, before any `--` (after it, arguments belong to
/// the command run), even when the command line does not parse.
fn json_asked(args: impl IntoIterator<Item = std::ffi::OsString>) -> bool {
    args.into_iter()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}
