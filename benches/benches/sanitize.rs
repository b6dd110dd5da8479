//! `safe_lanes::sanitize` against the `sanitize-filename` crate (0.8.0-beta, its fastest
//! release) on the same hints.
//!
//! The baseline does less (no NFC, no bidi or zero-width removal, no look-alikes, no
//! extension-preserving truncation, and it returns a name that needs no change without
//! copying it); the goal is to be at least as fast anyway.
//!
//! Three groups: `sanitize` (13 hints, typical and hostile, mixed), `sanitize_benign`
//! (ordinary names only) and `sanitize_hostile` (hostile hints only).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// Typical names and hostile ones, mixed.
fn mixed() -> Vec<String> {
    let mut hints = owned(&[
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
    ]);
    hints.push(long_hint());
    hints
}

/// Ordinary names, most of which need no change.
fn benign() -> Vec<String> {
    owned(&[
        "Quarterly Report (final).docx",
        "IMG_20261130_101500.jpg",
        "invoice-2026-11.pdf",
        "report.pdf",
        "photo 2024-01-01.jpg",
        "résumé.pdf",
        "\u{DC}bersicht.txt",
    ])
}

/// Traversal, bidi overrides, device names, control characters, look-alike slashes, NFD,
/// shortcuts, reserved characters and an over-long name.
fn hostile() -> Vec<String> {
    let mut hints = owned(&[
        "../../.bashrc",
        "..\\..\\Windows\\System32\\evil.dll",
        "invoice\u{202E}fdp.exe",
        "CON.txt",
        "e\u{301}te\u{301}.txt",
        "a<b>c|d\"e*f:g%h.txt",
        "evil.desktop",
        "\u{1b}[31mred\u{1b}[0m.txt",
        "..\u{2215}..\u{2215}etc\u{2215}passwd",
    ]);
    hints.push(long_hint());
    hints
}

/// 258 bytes: truncated, keeping the real extension.
fn long_hint() -> String {
    "y".repeat(250) + ".exe.pdf"
}

fn owned(hints: &[&str]) -> Vec<String> {
    hints.iter().map(|&h| h.to_owned()).collect()
}

/// One group: `safe_lanes` and `sanitize_filename_crate` on the same hints.
fn group(c: &mut Criterion, name: &str, hints: &[String]) {
    let bytes: usize = hints.iter().map(String::len).sum();
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("sanitize_filename_crate", |b| {
        b.iter(|| {
            for h in hints {
                black_box(sanitize_filename::sanitize(black_box(h.as_str())));
            }
        })
    });
    g.bench_function("safe_lanes", |b| {
        b.iter(|| {
            for h in hints {
                black_box(safe_lanes::sanitize(black_box(h)));
            }
        })
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
