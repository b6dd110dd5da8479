//! A confined `/bin/true` (Landlock ruleset, clean environment, private scratch directory,
//! captured output, audit line) against a plain unconfined spawn with captured output.
//! The two run interleaved, so both see the same system state.

use std::process::Command;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use safe_lanes::{Access, Confined, Grants, StateRoot};
use safe_lanes_benches::interleaved;

fn spawn(c: &mut Criterion) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = StateRoot::open(&tmp.path().join("state")).expect("state root");
    let folder = tmp.path().join("project");
    std::fs::create_dir(&folder).expect("mkdir");
    let grants = Arc::new(Grants::open(&root, None).expect("grants"));
    grants
        .add("project", &folder, Access::ReadWrite, "bench", "bench")
        .expect("grant");
    // A read-write grant holding a git repository: every command sees it through a layer of
    // its own, begun before it runs and read when it ends (ADR 0027).
    let repository = tmp.path().join("repository");
    for dir in [".git/hooks", ".git/info", ".git/objects", ".git/refs"] {
        std::fs::create_dir_all(repository.join(dir)).expect("mkdir");
    }
    std::fs::write(repository.join(".git/config"), "[core]\n").expect("config");
    std::fs::write(repository.join(".git/HEAD"), "ref: refs/heads/main\n").expect("HEAD");
    let with_repository =
        Arc::new(Grants::open(&root, Some(&tmp.path().join("repo.json"))).expect("grants"));
    with_repository
        .add(
            "repository",
            &repository,
            Access::ReadWrite,
            "bench",
            "bench",
        )
        .expect("grant");
    let repository_session = with_repository.session();
    let session = grants.session();
    let confined = Confined::new("/bin/true", Vec::<String>::new());
    let in_repository_op = || {
        let out = confined.run(&repository_session).expect("confined run");
        assert_eq!(out.outcome.exit_code, Some(0));
    };
    let confined_op = || {
        let out = confined.run(&session).expect("confined run");
        assert_eq!(out.outcome.exit_code, Some(0));
    };
    let plain_op = || {
        let out = Command::new("/bin/true").output().expect("spawn");
        assert!(out.status.success());
    };
    let mut g = c.benchmark_group("spawn");
    g.sample_size(30);
    g.bench_function("unconfined", |b| {
        b.iter_custom(|n| interleaved(n, plain_op, confined_op))
    });
    g.bench_function("confined", |b| {
        b.iter_custom(|n| interleaved(n, confined_op, plain_op))
    });
    g.bench_function("confined_in_a_repository", |b| {
        b.iter_custom(|n| interleaved(n, in_repository_op, plain_op))
    });
    g.finish();
}

criterion_group!(benches, spawn);
criterion_main!(benches);
