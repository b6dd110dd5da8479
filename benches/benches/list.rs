//! `DownloadLane::page`: one page of 100 files from the middle of a lane of 100, 10,000 and
//! 100,000 files (`list/page_of_{100,10000,100000}`), as the pages of a walk through one handle
//! come: the handle keeps the names it read while the directory does not change (ADR 0022).
//! And the same page when the lane changed since the last one (`…_changed`: a file made and
//! removed before each page), which reads the directory again.
//!
//! The lanes are made once per run, with plain files created straight in the lane's folder
//! (a save would add an audit line per file and make the run minutes long), in one scratch
//! directory under `SAFE_LANES_BENCH_DIR` or the target directory, removed at the end.

use std::ffi::OsString;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use criterion::{Criterion, criterion_group};
use safe_lanes::{DownloadLane, StateRoot};

const PAGE: usize = 100;

fn lane_of(scratch: &std::path::Path, files: usize) -> (DownloadLane, OsString) {
    let root = StateRoot::open(&scratch.join(format!("root-{files}"))).expect("state root");
    let lane = DownloadLane::open(&root).expect("lane");
    for i in 0..files {
        std::fs::File::create_new(lane.path().join(format!("file-{i:06}.pdf"))).expect("create");
    }
    // A cursor right before the middle page (a name need not exist to be a cursor): the
    // page after it is a full one, of the lane of 100 too.
    let start = files / 2 - PAGE / 2;
    let cursor = match start.checked_sub(1) {
        Some(before) => OsString::from(format!("file-{before:06}.pdf")),
        None => OsString::from("file-"),
    };
    (lane, cursor)
}

fn list(c: &mut Criterion) {
    let scratch = scratch();
    let mut g = c.benchmark_group("list");
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for files in [100, 10_000, 100_000] {
        let (lane, cursor) = lane_of(&scratch, files);
        let page = lane.page(Some(&cursor), PAGE).expect("page");
        assert_eq!(page.entries.len(), PAGE);
        g.bench_function(format!("page_of_{files}"), |b| {
            b.iter(|| black_box(lane.page(Some(&cursor), PAGE).expect("page")))
        });
        g.bench_function(format!("page_of_{files}_changed"), |b| {
            b.iter_batched(
                || {
                    // A file made and removed again: a change, and the same lane.
                    let made = lane.path().join("new.pdf");
                    std::fs::File::create_new(&made).expect("create");
                    std::fs::remove_file(&made).expect("remove");
                },
                |()| black_box(lane.page(Some(&cursor), PAGE).expect("page")),
                criterion::BatchSize::PerIteration,
            )
        });
    }
    g.finish();
    std::fs::remove_dir_all(&scratch).expect("remove the scratch directory");
}

fn scratch() -> PathBuf {
    let base = std::env::var_os("SAFE_LANES_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    tempfile::tempdir_in(base).expect("scratch dir").keep()
}

criterion_group!(benches, list);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
