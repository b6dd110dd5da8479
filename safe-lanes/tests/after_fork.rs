//! Nothing the library runs between `fork` and `exec` allocates or frees memory.
//!
//! A child forked from a multi-threaded gateway may find the allocator's lock held by a thread
//! that does not exist in it: one allocation there can hang it forever. So everything a child
//! does before `exec` (entering a confined command's sandbox, the namespace's waiting first
//! process, the uploader's supervisor) runs on values prepared in the parent.
//!
//! This test binary's global allocator enforces it: it serves the test process as the system
//! allocator does, and any allocation, reallocation or deallocation in another process — which,
//! in this binary, can only be a child that has not called `exec` yet — writes a message to
//! the child's standard error and ends it at once with [`CAUGHT`]. The tests run real confined
//! commands (over a root with every kind of entry, after the probe that stops before `exec`,
//! and with an `exec` that fails) and supervised uploaders, and check that each ran as it
//! should; one more test checks that the guard does catch an allocation after `fork`. The guard
//! sees Rust's allocator only, not a `malloc` made by C code (the child side calls none: it only
//! makes system calls). It is a binary of its own because a global allocator is global.

#![cfg(target_os = "linux")]
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use safe_lanes::grants::{Kind, Toolchain};
use safe_lanes::{Access, Confined, Grants, StateRoot, UploadDeposit, Uploader};

/// The exit code of a child the guard caught allocating.
const CAUGHT: i32 = 86;

/// The system allocator, for the test process only.
struct TestProcessOnly;

/// The test process's PID, taken at its first allocation (the runtime allocates before `main`,
/// before any test can fork).
static TEST_PROCESS: AtomicI32 = AtomicI32::new(0);

impl TestProcessOnly {
    /// End this process with [`CAUGHT`] unless it is the test process.
    fn check(what: &str) {
        // SAFETY: `getpid` takes no argument and cannot fail.
        let me = unsafe { libc::getpid() };
        let first = TEST_PROCESS.compare_exchange(0, me, Ordering::Relaxed, Ordering::Relaxed);
        if first.is_ok() || first == Err(me) {
            return;
        }
        const PREFIX: &[u8] = b"allocator called between fork and exec: ";
        // SAFETY: writing two live buffers to standard error, then `_exit`, in a process that
        // must not run anything more (the write may fail; nothing depends on it).
        unsafe {
            libc::write(2, PREFIX.as_ptr().cast(), PREFIX.len());
            libc::write(2, what.as_ptr().cast(), what.len());
            libc::_exit(CAUGHT);
        }
    }
}

// SAFETY: every method checks the process, then forwards to `System` with its own arguments.
unsafe impl GlobalAlloc for TestProcessOnly {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::check("alloc\n");
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::check("alloc_zeroed\n");
        // SAFETY: as in `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        Self::check("dealloc\n");
        // SAFETY: `ptr` came from `System` (every allocation here does), with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::check("realloc\n");
        // SAFETY: as in `dealloc`, with the caller's `new_size`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: TestProcessOnly = TestProcessOnly;

/// The guard works: a child that allocates after `fork` is caught, and says so.
#[test]
fn the_guard_catches_an_allocation_after_fork() {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new("/bin/true");
    // SAFETY: the closure allocates on purpose, which the guard turns into `_exit` before the
    // allocator is reached; nothing else runs in the child.
    unsafe {
        command.pre_exec(|| {
            std::hint::black_box(Box::new(1u8));
            Ok(())
        });
    }
    let out = command.output().unwrap();
    assert_eq!(out.status.code(), Some(CAUGHT), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "allocator called between fork and exec: alloc\n"
    );
    // A command without a pre-exec step runs as usual.
    let plain = Command::new("/bin/true").output().unwrap();
    assert!(plain.status.success(), "{plain:?}");
}

/// A state root with grants of every kind a root holds: read-only and read-write folders (the
/// latter an overlay of the command's own, whose git configuration it changes only in its
/// layer), a tool (whose credentials are emptied, and which brings `/proc`) and a cache (an
/// overlay).
struct World {
    tmp: tempfile::TempDir,
    _root: StateRoot,
    grants: Arc<Grants>,
}

impl World {
    fn new() -> Self {
        let support = safe_lanes::sandbox_support();
        assert!(
            support.available,
            "this test needs every layer of the sandbox (and its probe passed): {support:?}"
        );
        let tmp = tempfile::tempdir().unwrap();
        let root = StateRoot::open(&tmp.path().join("state")).unwrap();
        let p = |rel: &str| tmp.path().join(rel);
        for dir in ["ro", "rw/.git/hooks", "tool", "cache"] {
            std::fs::create_dir_all(p(dir)).unwrap();
        }
        std::fs::write(p("ro/data.txt"), "read me").unwrap();
        std::fs::write(p("rw/.git/config"), "[core]\n").unwrap();
        std::fs::write(p("tool/credentials.toml"), "SECRET").unwrap();
        std::fs::write(p("cache/kept"), "cached").unwrap();
        let grants = Arc::new(Grants::open(&root, None).unwrap());
        grants
            .add("ro", &p("ro"), Access::ReadOnly, "a reason", "tester")
            .unwrap();
        grants
            .add("rw", &p("rw"), Access::ReadWrite, "a reason", "tester")
            .unwrap();
        let tool = Toolchain::parse(Kind::Tool, &[], None).unwrap();
        grants
            .add_with("tool", &p("tool"), None, tool, "a reason", "tester")
            .unwrap();
        let cache = Toolchain::parse(Kind::Cache, &["CACHE_HOME".into()], None).unwrap();
        grants
            .add_with("cache", &p("cache"), None, cache, "a reason", "tester")
            .unwrap();
        Self {
            tmp,
            _root: root,
            grants,
        }
    }
}

/// A confined command goes through every step of its sandbox — namespaces, the waiting first
/// process, the root with binds, masks, emptied files, `/proc`, the scratch `tmpfs` and an
/// overlay, capabilities, Landlock, seccomp — and runs, without its child allocating.
#[test]
fn a_confined_command_enters_its_sandbox_without_allocating() {
    let w = World::new();
    let session = w.grants.session();
    let script = r#"cat "$WORKFLOW_FOLDER_RO/data.txt"; echo
        cat "$WORKFLOW_FOLDER_TOOL/credentials.toml"; echo "[emptied]"
        cat "$CACHE_HOME/kept"; echo
        printf "[alias]\\n\\tx = !sh\\n" >> "$WORKFLOW_FOLDER_RW/.git/config" && echo "[layered]"
        echo new > "$WORKFLOW_FOLDER_RW/new" && echo "[written]"
        echo scratch > /tmp/s && cat /tmp/s
        test -L /proc/self/exe && echo "[proc]""#;
    let out = Confined::shell(script).run(&session).unwrap();
    assert_eq!(
        (out.outcome.exit_code, out.outcome.stderr.as_str()),
        (Some(0), ""),
        "{out:?}"
    );
    assert_eq!(
        out.outcome.stdout,
        "read me\n[emptied]\ncached\n[layered]\n[written]\nscratch\n[proc]\n"
    );
    assert_eq!(
        std::fs::read_to_string(w.tmp.path().join("rw/new")).unwrap(),
        "new\n"
    );
    // The new file was published; the git configuration was held.
    assert_eq!(out.changes.held.len(), 1, "{:?}", out.changes);
    assert_eq!(
        std::fs::read_to_string(w.tmp.path().join("rw/.git/config")).unwrap(),
        "[core]\n"
    );
    // And again: each command is a fresh fork.
    for i in 0..20 {
        let out = Confined::shell(&format!("echo {i}")).run(&session).unwrap();
        assert_eq!(out.outcome.stdout, format!("{i}\n"), "{out:?}");
    }
}

/// A program the sandbox does not hold: the child gets through every step, `exec` fails, and
/// the failure is reported as a missing program (not as a child that died allocating).
#[test]
fn a_failing_exec_is_reported_without_allocating() {
    let w = World::new();
    let err = Confined::new("/nonexistent/program", ["x"])
        .run(&w.grants.session())
        .unwrap_err();
    assert_eq!(err.code(), safe_lanes::Code::NotFound, "{err}");
}

/// The uploader's supervisor forks the uploader and waits for it and its owner, and neither it
/// nor the uploader before its `exec` allocates.
#[test]
fn a_supervised_uploader_runs_without_allocating() {
    let tmp = tempfile::tempdir().unwrap();
    let root = StateRoot::open(&tmp.path().join("state")).unwrap();
    let deposit = UploadDeposit::open(&root).unwrap();
    let uploader = Uploader::new("/bin/sh", ["-c", r#"cat "$1""#, "sh", "{file}"]).unwrap();
    for i in 0..5 {
        let staged = deposit
            .stage("notes.md", format!("upload {i}").as_bytes())
            .unwrap();
        let sent = deposit.send(staged, &uploader).unwrap();
        assert!(sent.outcome.success(), "{:?}", sent.outcome);
        assert_eq!(sent.outcome.stdout, format!("upload {i}"));
        assert_eq!(sent.outcome.stderr, "");
    }
    // One that fails ends the same way through its supervisor.
    let failing = Uploader::new("/bin/sh", ["-c", "exit 3", "sh", "{file}"]).unwrap();
    let staged = deposit.stage("a.txt", &b"a"[..]).unwrap();
    let sent = deposit.send(staged, &failing).unwrap();
    assert_eq!(sent.outcome.exit_code, Some(3), "{:?}", sent.outcome);
    assert_eq!(sent.outcome.stderr, "");
}
