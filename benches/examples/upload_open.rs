//! `UploadSource::open` (or, with `raw`, a bare `openat2(RESOLVE_BENEATH)`) of one file, `N`
//! times, in the setting of `benches/resolve.rs`: for instruction counts, which stay the same
//! when the machine is busy. Run it under `valgrind --tool=callgrind` with `N` = 0 and
//! `N` = 10000: the difference over 10000 is the cost of one open.
//!
//! Usage: `upload_open lane|raw N`

use std::hint::black_box;
use std::path::Path;

use safe_lanes_benches::upload::Setting;

fn main() {
    let mut args = std::env::args().skip(1);
    let side = args.next().unwrap_or_else(|| "lane".to_owned());
    let n: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let setting = Setting::new();
    for _ in 0..n {
        if side == "raw" {
            black_box(setting.raw_open());
        } else {
            black_box(
                setting
                    .source
                    .open(black_box(Path::new(&setting.target)))
                    .expect("open"),
            );
        }
    }
}
