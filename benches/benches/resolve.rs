//! `UploadSource::open` (the open and every check, no hashing) against a raw
//! `openat2(RESOLVE_BENEATH)` of the same file and against the common, racy
//! `canonicalize + starts_with + File::open`, with the allowed root five directories deep.

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use safe_lanes_benches::upload::Setting;

fn resolve(c: &mut Criterion) {
    let setting = Setting::new();
    let (source, target, allowed) = (&setting.source, &setting.target, &setting.allowed);

    let mut g = c.benchmark_group("resolve");
    g.bench_function("raw_openat2", |b| b.iter(|| black_box(setting.raw_open())));
    g.bench_function("canonicalize_open", |b| {
        b.iter(|| {
            let real = std::fs::canonicalize(black_box(target)).expect("canonicalize");
            assert!(real.starts_with(allowed));
            black_box(std::fs::File::open(&real).expect("open"))
        })
    });
    g.bench_function("safe_lanes", |b| {
        b.iter(|| black_box(source.open(black_box(Path::new(target))).expect("open")))
    });
    g.finish();
}

criterion_group!(benches, resolve);
criterion_main!(benches);
