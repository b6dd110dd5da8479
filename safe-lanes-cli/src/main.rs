//! `safe-lanes`: the human's command line. The human is the trusted side: this is where
//! folders are granted, requests approved and the lanes inspected.
//!
//! `main → run → Report`: arguments are parsed by clap (usage errors exit 2), each command
//! is a few lines over one library call, and [`output`] prints the result as text or as
//! exactly one JSON object (`--json`). Exit status: 0 ok, 1 operational failure, 2 usage,
//! 3 refused (any error code but `io`).

#![forbid(unsafe_code)]

mod args;
mod commands;
mod output;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // First, before anything is read: no core file, no same-user tracing.
    let hardening = safe_lanes::harden();
    let cli = args::Cli::parse();
    let json = cli.json;
    let result = match hardening {
        Ok(_) => commands::run(cli),
        Err(e) => Err(e.into()),
    };
    output::finish(result, json)
}
