//! `UploadSource::open` (or, with `raw`, a bare `openat2(RESOLVE_BENEATH)`) of one file, `N`
//! times, in the setting of `benches/resolve.rs`: for instruction counts, which stay the same
//! when the machine is busy. Run it under `valgrind --tool=callgrind` with `N` = 0 and
//! `N` = 10000: the difference over 10000 is the cost of one open.
//!
//! Usage: `upload_open lane|raw N`

use std::fs::File;
use std::hint::black_box;
use std::path::Path;

use rustix::fs::{Mode, OFlags, ResolveFlags};
use safe_lanes::{StateRoot, UploadSource};

fn main() {
    let mut args = std::env::args().skip(1);
    let side = args.next().unwrap_or_else(|| "lane".to_owned());
    let n: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(10_000);
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
    for _ in 0..n {
        if side == "raw" {
            black_box(
                rustix::fs::openat2(
                    &allowed_dir,
                    "report.pdf",
                    OFlags::RDONLY | OFlags::CLOEXEC,
                    Mode::empty(),
                    ResolveFlags::BENEATH,
                )
                .expect("openat2"),
            );
        } else {
            black_box(source.open(black_box(Path::new(&target))).expect("open"));
        }
    }
}
