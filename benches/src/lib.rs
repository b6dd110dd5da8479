//! Helpers shared by the benchmarks in `benches/`.

#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

/// Time `n` runs of `measured`, running `other` before each one (untimed), so that two
/// functions compared with each other see the same system state: on a journaling filesystem,
/// background write-back from one side would otherwise slow the other.
pub fn interleaved(n: u64, mut measured: impl FnMut(), mut other: impl FnMut()) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..n {
        other();
        let start = Instant::now();
        measured();
        total += start.elapsed();
    }
    total
}
