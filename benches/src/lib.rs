//! Helpers shared by the benchmarks in `benches/`.

#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

/// Time `n` runs of `measured`, running `other` before each one (untimed), so that two
/// functions compared with each other see the same system state: on a journaling filesystem,
/// background write-back from one side would otherwise slow the other.
pub fn interleaved(n: u64, mut measured: impl FnMut(), mut other: impl FnMut()) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..n {
        other();
        let start = Instant::now();
        measured();
        total += start.elapsed();
    }
    total
}

/// Time `n` runs of `measured` in blocks of `block` runs, each block after as many runs of
/// `other` (untimed): [`interleaved`] for operations too short to time one at a time, so that
/// two functions compared with each other still see the same load.
pub fn interleaved_blocks(
    n: u64,
    block: u64,
    mut measured: impl FnMut(),
    mut other: impl FnMut(),
) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = n;
    while left > 0 {
        let runs = left.min(block);
        for _ in 0..runs {
            other();
        }
        let start = Instant::now();
        for _ in 0..runs {
            measured();
        }
        total += start.elapsed();
        left -= runs;
    }
    total
}

/// The hint sets of the `sanitize` benchmarks, shared with the instruction-count driver
/// (`examples/sanitize_instructions.rs`) so both measure the same names.
pub mod hints {
    /// Typical names and hostile ones, mixed (13 hints).
    pub fn mixed() -> Vec<String> {
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

    /// Ordinary names, most of which need no change (7 hints).
    pub fn benign() -> Vec<String> {
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
    /// shortcuts, reserved characters and an over-long name (10 hints).
    pub fn hostile() -> Vec<String> {
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
}

/// The setting of the upload `open` measurements, shared by the `resolve` benchmark and the
/// `upload_open` instruction-count driver: one file five directories below its allowed root.
pub mod upload {
    use std::fs::File;
    use std::os::fd::OwnedFd;
    use std::path::PathBuf;

    use rustix::fs::{Mode, OFlags, ResolveFlags};
    use safe_lanes::{StateRoot, UploadSource};

    /// `report.pdf` in the allowed root `a/b/c/d/e` of a scratch directory, removed when
    /// dropped.
    #[derive(Debug)]
    pub struct Setting {
        /// The state root's allowlist, loaded.
        pub source: UploadSource,
        /// The file's absolute path.
        pub target: PathBuf,
        /// The allowed root's path.
        pub allowed: PathBuf,
        /// The allowed root, open: what a bare `openat2` resolves beneath.
        pub allowed_dir: File,
        _tmp: tempfile::TempDir,
    }

    impl Setting {
        /// Make the scratch tree, its state root and allowlist.
        pub fn new() -> Self {
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
            Self {
                source,
                target: allowed.join("report.pdf"),
                allowed_dir: File::open(&allowed).expect("open root"),
                allowed,
                _tmp: tmp,
            }
        }

        /// The baseline: a bare `openat2(RESOLVE_BENEATH)` of the file in its allowed root.
        pub fn raw_open(&self) -> OwnedFd {
            rustix::fs::openat2(
                &self.allowed_dir,
                "report.pdf",
                OFlags::RDONLY | OFlags::CLOEXEC,
                Mode::empty(),
                ResolveFlags::BENEATH,
            )
            .expect("openat2")
        }
    }

    impl Default for Setting {
        fn default() -> Self {
            Self::new()
        }
    }
}
