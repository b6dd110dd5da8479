//! Whether a process still runs, seen from outside any sandbox: it rewrites a file every
//! 50 ms, or its `/proc` entry is gone.

use std::path::Path;
use std::time::Duration;

/// A shell loop that rewrites `"$1/beat"` every 50 ms, for [`stops_writing`].
pub const HEARTBEAT: &str = r#"while :; do date +%s%N > "$1/beat"; sleep 0.05; done"#;

/// Whether whatever rewrites `beat` (every 50 ms, see [`HEARTBEAT`]) has stopped: its content
/// stays the same for half a second, within five seconds.
pub fn stops_writing(beat: &Path) -> bool {
    let read = || std::fs::read(beat).unwrap_or_default();
    (0..10).any(|_| {
        let before = read();
        std::thread::sleep(Duration::from_millis(500));
        before == read()
    })
}

/// Whether `path` exists within ten seconds.
pub fn appears(path: &Path) -> bool {
    (0..500).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        path.exists()
    })
}

/// Whether process `pid` is gone (or a zombie waiting for whoever adopted it), waiting up to
/// two seconds for it to go.
pub fn dies_soon(pid: i32) -> bool {
    let dead = || match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    };
    (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        dead()
    })
}
