//! `UploadSource::open` (the open and every check, no hashing) against a raw
//! `openat2(RESOLVE_BENEATH)` of the same file and against the common, racy
//! `canonicalize + starts_with + File::open`, with the allowed root five directories deep.

use std::fs::File;
use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use rustix::fs::{Mode, OFlags, ResolveFlags};
use safe_lanes::{StateRoot, UploadSource};

fn resolve(c: &mut Criterion) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let allowed = tmp.path().join("a/b/c/d/e");
    std::fs::create_dir_all(&allowed).expect("mkdir");
    std::fs::write(allowed.join("report.pdf"), b"%PDF-1.7").expect("write");
    let root = StateRoot::open(&tmp.path().join("state")).expect("state root");
    std::fs::write(
        root.path().join(".upload-roots"),
        format!("{}\n", allowed.display()),
    )
    .expect("write roots");
    let source = UploadSource::load_with(&root, |_| None).expect("load");
    let target = allowed.join("report.pdf");
    let allowed_dir = File::open(&allowed).expect("open root");

    let mut g = c.benchmark_group("resolve");
    g.bench_function("raw_openat2", |b| {
        b.iter(|| {
            black_box(
                rustix::fs::openat2(
                    &allowed_dir,
                    "report.pdf",
                    OFlags::RDONLY | OFlags::CLOEXEC,
                    Mode::empty(),
                    ResolveFlags::BENEATH,
                )
                .expect("openat2"),
            )
        })
    });
    g.bench_function("canonicalize_open", |b| {
        b.iter(|| {
            let real = std::fs::canonicalize(black_box(&target)).expect("canonicalize");
            assert!(real.starts_with(&allowed));
            black_box(File::open(&real).expect("open"))
        })
    });
    g.bench_function("safe_lanes", |b| {
        b.iter(|| black_box(source.open(black_box(Path::new(&target))).expect("open")))
    });
    g.finish();
}

criterion_group!(benches, resolve);
criterion_main!(benches);
