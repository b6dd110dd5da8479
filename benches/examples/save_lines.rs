//! The Rust side of `scripts/bench-python`: 4 KiB saves into a download lane, one per line of
//! standard input (the line is the name hint), each answered with the nanoseconds the save
//! took, so that the script can interleave them with the same saves made from Python.
//!
//! ```sh
//! cargo build --release -p safe-lanes-benches --example save_lines
//! printf 'a.bin\nb.bin\n' | target/release/examples/save_lines ROOT durable|buffered
//! ```

// A command-line driver: what it prints is its result.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use safe_lanes::{DownloadLane, Durability, StateRoot};

const USAGE: &str = "usage: save_lines ROOT durable|buffered (name hints on standard input)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let durability = match args.get(1).map(String::as_str) {
        Some("durable") => Durability::Durable,
        Some("buffered") => Durability::Buffered,
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let Some(root) = args.first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    match run(Path::new(root), durability) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("save_lines: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(root: &Path, durability: Durability) -> Result<(), Box<dyn std::error::Error>> {
    let root = StateRoot::open(root)?;
    let lane = DownloadLane::open(&root)?.with_durability(durability);
    let data = vec![0x5a_u8; 4096];
    let mut out = std::io::stdout().lock();
    for hint in std::io::stdin().lock().lines() {
        let hint = hint?;
        let started = Instant::now();
        lane.save(hint.as_bytes(), &data[..])?;
        let took = started.elapsed().as_nanos();
        writeln!(out, "{took}")?;
        out.flush()?;
    }
    Ok(())
}
