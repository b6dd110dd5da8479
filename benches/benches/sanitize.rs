//! `safe_lanes::sanitize` against the `sanitize-filename` crate (0.8.0-beta, its fastest
//! release) on the same hints.
//!
//! The baseline does less (no NFC, no bidi or zero-width removal, no look-alikes, no
//! extension-preserving truncation, and it returns a name that needs no change without
//! copying it); the goal is to be at least as fast anyway.
//!
//! Three groups: `sanitize` (13 hints, typical and hostile, mixed), `sanitize_benign`
//! (ordinary names only) and `sanitize_hostile` (hostile hints only). One iteration is one
//! pass over the hints; the two sides run interleaved, in blocks of [`BLOCK`] passes each.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use safe_lanes_benches::hints::{benign, hostile, mixed};
use safe_lanes_benches::interleaved_blocks;

/// Passes timed together: tens of microseconds, long next to the clock's own cost.
const BLOCK: u64 = 64;

fn baseline(hints: &[String]) {
    for h in hints {
        black_box(sanitize_filename::sanitize(black_box(h.as_str())));
    }
}

fn ours(hints: &[String]) {
    for h in hints {
        black_box(safe_lanes::sanitize(black_box(h)));
    }
}

/// One group: `safe_lanes` and `sanitize_filename_crate` on the same hints.
fn group(c: &mut Criterion, name: &str, hints: &[String]) {
    let bytes: usize = hints.iter().map(String::len).sum();
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("sanitize_filename_crate", |b| {
        b.iter_custom(|n| interleaved_blocks(n, BLOCK, || baseline(hints), || ours(hints)))
    });
    g.bench_function("safe_lanes", |b| {
        b.iter_custom(|n| interleaved_blocks(n, BLOCK, || ours(hints), || baseline(hints)))
    });
    g.finish();
}

fn sanitize(c: &mut Criterion) {
    group(c, "sanitize", &mixed());
    group(c, "sanitize_benign", &benign());
    group(c, "sanitize_hostile", &hostile());
}

criterion_group!(benches, sanitize);
criterion_main!(benches);
