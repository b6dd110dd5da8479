//! The download lane against raw system calls, always at equal durability.
//!
//! - `save_4k/{raw,lane}` buffered: `create_new + write + close` vs `DownloadLane::save`.
//! - `save_4k_durable/{raw,lane}`: raw adds `fsync(file) + fsync(dir)`, as the lane does.
//! - `save_4k_tmpfs/{raw,lane}`: buffered again, on tmpfs: the code's own overhead.
//! - `save_256m/{raw,lane}` and `save_256m_durable/{raw,lane}`: throughput of one large file.
//! - `duplicates/{first,10000th,10000th_new_process}`: the cost of finding a free name.
//!
//! Fairness on a journaling filesystem: every pair being compared runs *interleaved* (each
//! timed operation of one side follows an untimed one of the other), so both see the same
//! write-back and journal state, and every sample starts after a `sync`. Small files are never
//! removed inside the run (on ext4, creates right after many removals are slow for a while);
//! the scratch directory goes when every benchmark is done.

use std::fs::File;
use std::hint::black_box;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group};
use safe_lanes::{DownloadLane, Durability, StateRoot};
use sha2::{Digest, Sha256};

static UNIQUE: AtomicU64 = AtomicU64::new(0);

fn unique() -> u64 {
    UNIQUE.fetch_add(1, Ordering::Relaxed)
}

/// A fresh state root under the bench's temporary directory.
fn fresh_root(tmp: &Path) -> StateRoot {
    StateRoot::open(&tmp.join(format!("root-{}", unique()))).expect("state root")
}

/// A fresh plain directory for the raw baselines.
fn fresh_dir(tmp: &Path) -> PathBuf {
    let dir = tmp.join(format!("raw-{}", unique()));
    std::fs::create_dir(&dir).expect("mkdir");
    dir
}

/// The raw baseline: `create_new + write_all (+ fsync(file) + fsync(dir)) + close`.
fn raw_save(dir: &Path, dir_handle: &File, data: &[u8], durable: bool) {
    let mut f = File::create_new(dir.join(format!("f{}", unique()))).expect("create");
    f.write_all(data).expect("write");
    if durable {
        f.sync_all().expect("fsync file");
        dir_handle.sync_all().expect("fsync dir");
    }
}

fn small(c: &mut Criterion) {
    let data = vec![0x5au8; 4096];
    // On the real disk, at both durabilities, and buffered on tmpfs too: there the comparison
    // is the code's own overhead, without ext4's inode allocator, whose cost for one create
    // swings several-fold with the block group's history of removals.
    let cases = [
        ("save_4k", scratch(), Durability::Buffered),
        ("save_4k_durable", scratch(), Durability::Durable),
        ("save_4k_tmpfs", memory_scratch(), Durability::Buffered),
    ];
    for (group, tmp, durability) in cases {
        let durable = durability == Durability::Durable;
        let mut g = c.benchmark_group(group);
        g.throughput(Throughput::Bytes(data.len() as u64));
        if durable {
            g.sample_size(20).measurement_time(Duration::from_secs(10));
        }
        // The raw baseline writes into the lane's own directory: ext4 allocates inodes near
        // their directory, and the cost of that depends on the block group's history, so two
        // directories could differ by more than the code does.
        let root = fresh_root(tmp);
        let lane = DownloadLane::open(&root)
            .expect("lane")
            .with_durability(durability);
        let dir = root.downloads_path();
        let dir_handle = File::open(&dir).expect("open dir");
        let raw_op = || raw_save(&dir, &dir_handle, &data, durable);
        let lane_op = || {
            lane.save(format!("f{}.bin", unique()), &data[..])
                .expect("save");
        };
        g.bench_function("raw", |b| {
            b.iter_custom(|n| interleaved(n, raw_op, lane_op))
        });
        g.bench_function("lane", |b| {
            b.iter_custom(|n| interleaved(n, lane_op, raw_op))
        });
        g.finish();
    }
}

fn large(c: &mut Criterion) {
    const SIZE: usize = 256 << 20;
    let tmp = scratch();
    let data = vec![0xa5u8; SIZE];
    for (group, durability) in [
        ("save_256m", Durability::Buffered),
        ("save_256m_durable", Durability::Durable),
    ] {
        let durable = durability == Durability::Durable;
        let mut g = c.benchmark_group(group);
        g.throughput(Throughput::Bytes(SIZE as u64))
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(20));
        // Each side writes into a directory of its own, removed after each iteration (outside
        // the timed region) so the disk does not fill up.
        let raw_op = || {
            let dir = fresh_dir(tmp);
            let dir_handle = File::open(&dir).expect("open dir");
            let start = Instant::now();
            raw_save(&dir, &dir_handle, &data, durable);
            let elapsed = start.elapsed();
            std::fs::remove_dir_all(&dir).expect("cleanup");
            elapsed
        };
        // The same work as the lane, done the simple way: write, then hash. The lane hashes on a
        // second core while it writes, so it should beat this.
        let raw_then_hash_op = || {
            let dir = fresh_dir(tmp);
            let dir_handle = File::open(&dir).expect("open dir");
            let start = Instant::now();
            raw_save(&dir, &dir_handle, &data, durable);
            black_box(Sha256::digest(&data));
            let elapsed = start.elapsed();
            std::fs::remove_dir_all(&dir).expect("cleanup");
            elapsed
        };
        let lane_op = || {
            let root = fresh_root(tmp);
            let lane = DownloadLane::open(&root)
                .expect("lane")
                .with_durability(durability);
            let start = Instant::now();
            lane.save("large.bin", &data[..]).expect("save");
            let elapsed = start.elapsed();
            std::fs::remove_dir_all(root.path()).expect("cleanup");
            elapsed
        };
        g.bench_function("raw", |b| {
            b.iter_custom(|n| {
                (0..n)
                    .map(|_| {
                        settle();
                        lane_op();
                        settle();
                        raw_op()
                    })
                    .sum()
            })
        });
        g.bench_function("raw_then_sha256", |b| {
            b.iter_custom(|n| {
                (0..n)
                    .map(|_| {
                        settle();
                        raw_then_hash_op()
                    })
                    .sum()
            })
        });
        g.bench_function("lane", |b| {
            b.iter_custom(|n| {
                (0..n)
                    .map(|_| {
                        settle();
                        raw_op();
                        settle();
                        lane_op()
                    })
                    .sum()
            })
        });
        g.finish();
    }
}

fn duplicates(c: &mut Criterion) {
    const COPIES: u64 = 10_000;
    let tmp = scratch();
    let mut g = c.benchmark_group("duplicates");
    // Both in one lane (one directory): the 10,000th copy of `report.pdf`, and the first copy
    // of names the lane has never seen.
    let root = fresh_root(tmp);
    let crowded = DownloadLane::open(&root)
        .expect("lane")
        .with_durability(Durability::Buffered);
    for _ in 1..COPIES {
        crowded.save("report.pdf", &b"x"[..]).expect("save");
    }
    let first_op = || {
        crowded
            .save(format!("report-{}.pdf", unique()), &b"x"[..])
            .expect("save");
    };
    let nth_op = || {
        crowded.save("report.pdf", &b"x"[..]).expect("save");
    };
    g.bench_function("first", |b| {
        b.iter_custom(|n| interleaved(n, first_op, nth_op))
    });
    g.bench_function("10000th", |b| {
        b.iter_custom(|n| interleaved(n, nth_op, first_op))
    });
    // A new process on a lane holding 10,000+ copies: one search (gallop + bisect), then O(1).
    let new_process_op = || {
        let lane = DownloadLane::open(&root)
            .expect("lane")
            .with_durability(Durability::Buffered);
        lane.save("report.pdf", &b"x"[..]).expect("save");
    };
    g.bench_function("10000th_new_process", |b| {
        b.iter_custom(|n| interleaved(n, new_process_op, first_op))
    });
    g.finish();
}

/// [`safe_lanes_benches::interleaved`] after a [`settle`].
fn interleaved(n: u64, measured: impl FnMut(), other: impl FnMut()) -> Duration {
    settle();
    safe_lanes_benches::interleaved(n, measured, other)
}

/// Flush everything dirty before a sample, so that no sample pays for the write-back of the
/// one before it.
fn settle() {
    rustix::fs::sync();
}

/// The one scratch directory of this run, under `SAFE_LANES_BENCH_DIR` or the target directory
/// (a real disk, unlike a tmpfs `/tmp`). It is removed only when every benchmark is done: on
/// ext4, creates right after many removals are slow for a while and would skew what follows.
fn scratch() -> &'static Path {
    static SCRATCH: OnceLock<tempfile::TempDir> = OnceLock::new();
    SCRATCH
        .get_or_init(|| {
            let base = std::env::var_os("SAFE_LANES_BENCH_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
            tempfile::tempdir_in(base).expect("scratch dir")
        })
        .path()
}

/// A scratch directory on tmpfs (`/dev/shm`), removed when every benchmark is done.
fn memory_scratch() -> &'static Path {
    static SCRATCH: OnceLock<tempfile::TempDir> = OnceLock::new();
    SCRATCH
        .get_or_init(|| tempfile::tempdir_in("/dev/shm").expect("tmpfs scratch dir"))
        .path()
}

// `large` runs last: it removes big files between iterations.
criterion_group!(benches, small, duplicates, large);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    std::fs::remove_dir_all(scratch()).expect("remove the scratch directory");
    std::fs::remove_dir_all(memory_scratch()).expect("remove the tmpfs scratch directory");
}
