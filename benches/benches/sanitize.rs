//! `safe_lanes::sanitize` against the `sanitize-filename` crate on the same hints.
//!
//! The baseline does less (no NFC, no bidi or zero-width removal, no look-alikes, no
//! extension-preserving truncation); the goal is to be at least as fast anyway.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// Typical names and hostile ones, mixed.
fn hints() -> Vec<String> {
    let mut hints: Vec<String> = [
        "Quarterly Report (final).docx",
        "IMG_20261130_101500.jpg",
        "invoice-2026-11.pdf",
        "../../.bashrc",
        "..\\..\\Windows\\System32\\evil.dll",
        "invoice\u{202E}fdp.exe",
        "CON.txt",
        "e\u{301}te\u{301}.txt",
        "a<b>c|d\"e*f:g%h.txt",
        "evil.desktop",
        "\u{1b}[31mred\u{1b}[0m.txt",
        "résumé.pdf",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    hints.push("y".repeat(250) + ".exe.pdf");
    hints
}

fn sanitize(c: &mut Criterion) {
    let hints = hints();
    let bytes: usize = hints.iter().map(String::len).sum();
    let mut g = c.benchmark_group("sanitize");
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("sanitize_filename_crate", |b| {
        b.iter(|| {
            for h in &hints {
                black_box(sanitize_filename::sanitize(black_box(h)));
            }
        })
    });
    g.bench_function("safe_lanes", |b| {
        b.iter(|| {
            for h in &hints {
                black_box(safe_lanes::sanitize(black_box(h)));
            }
        })
    });
    g.finish();
}

criterion_group!(benches, sanitize);
criterion_main!(benches);
