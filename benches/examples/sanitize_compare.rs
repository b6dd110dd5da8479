//! `safe_lanes::sanitize` and `sanitize_filename::sanitize` on the hint sets of the `sanitize`
//! benchmarks, outside criterion: instruction counts, and times taken in interleaved blocks.
//!
//! ```sh
//! cargo build --release -p safe-lanes-benches --example sanitize_compare
//! # instructions: the difference of the two totals, divided by N, is one pass over the set
//! valgrind --tool=callgrind target/release/examples/sanitize_compare count mixed safe_lanes 2000
//! valgrind --tool=callgrind target/release/examples/sanitize_compare count mixed safe_lanes 0
//! # times: ROUNDS rounds, each one block of each side (their order alternating), on every set
//! target/release/examples/sanitize_compare time 400
//! ```
//!
//! Instruction counts stay the same from run to run on a busy machine, where times do not;
//! the interleaved blocks let both sides see the same load. Sets: `mixed`, `benign`,
//! `hostile`; sanitizers: `safe_lanes`, `sanitize_filename`.

// A command-line driver: what it prints is its result.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use safe_lanes_benches::hints;

const USAGE: &str = "usage: sanitize_compare count mixed|benign|hostile safe_lanes|sanitize_filename N\n       sanitize_compare time ROUNDS";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let done = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["count", set, which, n] => set_named(set)
            .zip(n.parse().ok())
            .and_then(|(hints, n)| count(&hints, which, n)),
        ["time", rounds] => rounds.parse().ok().map(time),
        _ => None,
    };
    match done {
        Some(()) => ExitCode::SUCCESS,
        None => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn set_named(name: &str) -> Option<Vec<String>> {
    match name {
        "mixed" => Some(hints::mixed()),
        "benign" => Some(hints::benign()),
        "hostile" => Some(hints::hostile()),
        _ => None,
    }
}

fn safe_lanes_pass(hints: &[String]) {
    for h in hints {
        black_box(safe_lanes::sanitize(black_box(h)));
    }
}

fn baseline_pass(hints: &[String]) {
    for h in hints {
        black_box(sanitize_filename::sanitize(black_box(h.as_str())));
    }
}

/// `n` passes of one sanitizer over `hints`, for an instruction counter.
fn count(hints: &[String], which: &str, n: u64) -> Option<()> {
    let pass = match which {
        "safe_lanes" => safe_lanes_pass,
        "sanitize_filename" => baseline_pass,
        _ => return None,
    };
    for _ in 0..n {
        pass(hints);
    }
    Some(())
}

/// Nanoseconds per pass of `block` passes.
fn block(pass: fn(&[String]), hints: &[String], passes: u32) -> f64 {
    let start = Instant::now();
    for _ in 0..passes {
        pass(hints);
    }
    start.elapsed().as_nanos() as f64 / f64::from(passes)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// For each set: `rounds` rounds of one block of each side (about 2 ms each), the first side
/// alternating; the median time per pass of each side and the median of the rounds' ratios.
fn time(rounds: usize) {
    println!(
        "set      safe_lanes  sanitize-filename  ratio (median of {rounds} interleaved rounds)"
    );
    for name in ["mixed", "benign", "hostile"] {
        let hints = set_named(name).unwrap_or_default();
        let passes = {
            // Calibrate on the baseline: about 2 ms per block.
            let once = block(baseline_pass, &hints, 1000);
            ((2e6 / once) as u32).max(1)
        };
        let (mut ours, mut theirs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            let (a, b) = if round % 2 == 0 {
                let a = block(safe_lanes_pass, &hints, passes);
                (a, block(baseline_pass, &hints, passes))
            } else {
                let b = block(baseline_pass, &hints, passes);
                (block(safe_lanes_pass, &hints, passes), b)
            };
            ours.push(a);
            theirs.push(b);
            ratios.push(a / b);
        }
        println!(
            "{name:<8} {:>8.0} ns  {:>14.0} ns  {:.2}×",
            median(&mut ours),
            median(&mut theirs),
            median(&mut ratios)
        );
    }
}
