//! The agent's desk as a gateway uses it — one desk shared by many threads, as a Python
//! binding's callers or an async server's tasks share it — and what each operation leaves in
//! the audit log.

use std::sync::Arc;
use std::time::Duration;

use safe_lanes::desk::{AccessAsk, JobStatus, ShellRequest};
use safe_lanes::grants::Kind;
use safe_lanes::{Access, AgentDesk, Code, Control, DeskOptions, Grants, Uploader};

use crate::util::Fixture;

/// A state root with one read-write grant `proj`, and a desk on it with an uploader that
/// prints what it was given.
fn desk() -> (Fixture, AgentDesk) {
    let fx = Fixture::new();
    let proj = fx.path("proj");
    std::fs::create_dir(&proj).unwrap();
    let grants = Grants::open(&fx.root, None).unwrap();
    grants
        .add("proj", &proj, Access::ReadWrite, "for the tests", "tester")
        .unwrap();
    let mut options = DeskOptions::default();
    options.uploader = Some(Uploader::parse("cat {file}").unwrap());
    options.max_bytes = 1 << 20;
    let root = safe_lanes::StateRoot::open(fx.root.path()).unwrap();
    let desk = AgentDesk::open(root, options).unwrap();
    (fx, desk)
}

fn events(fx: &Fixture) -> Vec<serde_json::Value> {
    safe_lanes_testkit::audit::records(fx.root.path())
}

fn sandbox_ready() {
    let support = safe_lanes::sandbox_support();
    assert!(
        support.available,
        "this test needs the sandbox: {support:?}"
    );
}

/// Eight threads share one desk (clones of it), each saving, listing, uploading, asking for a
/// folder, patching and running commands at once: every operation answers its report, no save
/// replaces another, and the log has exactly one record per effect.
#[test]
fn threads_sharing_one_desk_each_get_their_answer_and_one_record_per_effect() {
    sandbox_ready();
    let (fx, desk) = desk();
    let threads = 8;
    let done: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let desk = desk.clone().with_client(format!("worker {t}"));
                scope.spawn(move || {
                    let saved = desk
                        .save("report.txt", format!("from {t}").as_bytes())
                        .unwrap();
                    let listed = desk.downloads(None, 1000).unwrap();
                    assert!(listed.files.iter().any(|f| f.name == saved.name));
                    let source = desk.resolve_upload(&saved.path.to_string_lossy()).unwrap();
                    assert_eq!(source.sha256, saved.sha256);
                    let sent = desk
                        .upload_content("note.txt", format!("note {t}").as_bytes())
                        .unwrap();
                    assert_eq!(sent.stdout, format!("note {t}"));
                    let asked = desk
                        .request_access(&AccessAsk {
                            alias: format!("docs-{t}"),
                            access: Access::ReadOnly,
                            reason: "to read".into(),
                            path: None,
                            kind: Kind::Folder,
                            vars: Vec::new(),
                            bin: None,
                        })
                        .unwrap();
                    assert!(asked.approve_with.contains("grant approve"), "{asked:?}");
                    let diff = format!("--- /dev/null\n+++ b/f{t}.txt\n@@ -0,0 +1 @@\n+{t}\n");
                    desk.patch("proj", &format!("f{t}.txt"), &diff).unwrap();
                    let shell = ShellRequest {
                        command: format!("cat \"$WORKFLOW_FOLDER_PROJ/f{t}.txt\""),
                        cwd: Some("proj".into()),
                        timeout: Duration::from_secs(60),
                    };
                    let ran = desk.shell(&shell, &Control::new()).unwrap();
                    assert_eq!(
                        (ran.exit_code, ran.stdout.trim()),
                        (Some(0), &*t.to_string())
                    );
                    saved.name
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut names = done.clone();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), threads, "no save replaced another: {done:?}");
    let log = events(&fx);
    let count = |event: &str| log.iter().filter(|r| r["event"] == event).count();
    assert_eq!(count("download.save"), threads);
    assert_eq!(count("upload.start"), threads);
    assert_eq!(count("upload.end"), threads);
    assert_eq!(count("exec.start"), threads);
    assert_eq!(count("exec.end"), threads);
    assert_eq!(count("grant.request"), threads);
    let listing = desk.grants().unwrap();
    assert_eq!(listing.requests.len(), threads);
    assert!(
        listing
            .requests
            .iter()
            .all(|r| r.alias.starts_with("docs-")),
        "{listing:?}"
    );
    let clients: Vec<String> = log
        .iter()
        .filter(|r| r["event"] == "grant.request")
        .map(|r| {
            r["request"]["requested_by"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert!(
        (0..threads).all(|t| clients.iter().any(|c| c.contains(&format!("worker {t}")))),
        "each request names its client: {clients:?}"
    );
}

/// Background jobs are the desk's, shared by its clones: one clone starts a job, another
/// follows it to its end, and its id is then forgotten.
#[test]
fn a_job_started_through_one_clone_is_followed_through_another() {
    sandbox_ready();
    let (_fx, desk) = desk();
    let other = desk.clone();
    let started = desk
        .shell_background(&ShellRequest {
            command: "sleep 0.2; echo done".into(),
            cwd: None,
            timeout: Duration::from_secs(60),
        })
        .unwrap();
    let id = started.job_id.clone().expect("a job id");
    let mut seen = started.stdout;
    let last = loop {
        let report = other.job_status(&id, Duration::from_secs(10)).unwrap();
        seen.push_str(&report.stdout);
        if report.status == JobStatus::Finished {
            break report;
        }
    };
    assert_eq!((last.exit_code, seen.trim()), (Some(0), "done"));
    assert!(last.recorded);
    let gone = desk.job_status(&id, Duration::ZERO).unwrap_err();
    assert_eq!(gone.code(), Code::NotFound);
}

/// What the agent gives is checked, refused with a code, and the refusal recorded: a hostile
/// alias, a path outside the allowlist, a cursor no page gave, an upload without an uploader.
#[test]
fn the_desk_refuses_hostile_input_with_codes_and_records_it() {
    let (fx, desk) = desk();
    let control = Control::new();
    let shell = ShellRequest {
        command: "true".into(),
        cwd: Some("../proj\u{1b}[2J".into()),
        timeout: Duration::from_secs(5),
    };
    assert_eq!(
        desk.shell(&shell, &control).unwrap_err().code(),
        Code::InvalidAlias
    );
    assert_eq!(
        desk.patch("PROJ!", "a.txt", "").unwrap_err().code(),
        Code::InvalidAlias
    );
    assert_eq!(
        desk.resolve_upload("/etc/passwd").unwrap_err().code(),
        Code::OutsideAllowlist
    );
    assert_eq!(
        desk.downloads(Some("not hex"), 10).unwrap_err().code(),
        Code::InvalidArgument
    );
    let log = events(&fx);
    let refused: Vec<&str> = log
        .iter()
        .filter_map(|r| r["event"].as_str().filter(|e| e.ends_with(".refused")))
        .collect();
    assert_eq!(refused, ["exec.refused", "patch.refused", "upload.refused"]);
    let no_uploader = AgentDesk::open(
        safe_lanes::StateRoot::open(fx.root.path()).unwrap(),
        DeskOptions::default(),
    )
    .unwrap();
    let refused = no_uploader.upload_content("a.txt", &b"x"[..]).unwrap_err();
    assert_eq!(refused.code(), Code::NotConfigured);
    assert!(
        refused.to_string().starts_with("not_configured: "),
        "{refused}"
    );
}

/// Pages of the lane's files, by cursor, cover every file once.
#[test]
fn pages_of_the_lane_cover_every_file_once() {
    let (_fx, desk) = desk();
    for i in 0..7 {
        desk.save(format!("f{i}.txt"), &b"x"[..]).unwrap();
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = desk.downloads(cursor.as_deref(), 3).unwrap();
        assert!(page.files.len() <= 3);
        seen.extend(page.files.into_iter().map(|f| f.name));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let expected: Vec<String> = (0..7).map(|i| format!("f{i}.txt")).collect();
    assert_eq!(seen, expected);
    // Shareable across threads and tasks.
    fn shared<T: Send + Sync + Clone + 'static>(_: &T) {}
    shared(&desk);
    let _ = Arc::new(desk);
}

/// A grant's stable id stands for its alias in every operation that names a grant, within what
/// the session sees: a narrowed desk resolves only the ids of the grants it serves.
#[test]
fn a_grants_id_stands_for_its_alias_within_the_session() {
    let (fx, desk) = desk();
    let docs = fx.path("docs");
    std::fs::create_dir(&docs).unwrap();
    let grants = Grants::open(&fx.root, None).unwrap();
    grants
        .add("docs", &docs, Access::ReadOnly, "for the tests", "tester")
        .unwrap();
    let listed = desk.grants().unwrap();
    let id_of = |alias: &str| {
        let grant = listed.grants.iter().find(|g| g.alias == alias).unwrap();
        grant.id.clone()
    };
    let (proj_id, docs_id) = (id_of("proj"), id_of("docs"));
    let create = "--- /dev/null\n+++ b/by-id.txt\n@@ -0,0 +1 @@\n+by id\n";
    let patched = desk.patch(&proj_id, "by-id.txt", create).unwrap();
    assert_eq!(
        patched.path,
        fx.path("proj/by-id.txt").display().to_string()
    );
    assert_eq!(
        desk.patch(&docs_id, "x.txt", create).unwrap_err().code(),
        Code::ReadOnly
    );
    let asked = desk
        .request_access(&AccessAsk {
            alias: docs_id.clone(),
            access: Access::ReadWrite,
            reason: "edit the docs".into(),
            path: None,
            kind: Kind::Folder,
            vars: Vec::new(),
            bin: None,
        })
        .unwrap();
    assert_eq!(asked.request.alias, "docs");
    assert_eq!(
        desk.patch("folder_0000000000000000", "x.txt", create)
            .unwrap_err()
            .code(),
        Code::UnknownAlias
    );

    let mut narrowed = DeskOptions::default();
    narrowed.narrowing = safe_lanes::grants::Narrowing::parse("docs").unwrap();
    let root = safe_lanes::StateRoot::open(fx.root.path()).unwrap();
    let narrowed = AgentDesk::open(root, narrowed).unwrap();
    let refused = narrowed.patch(&proj_id, "by-id.txt", create).unwrap_err();
    assert_eq!(refused.code(), Code::UnknownAlias, "{refused}");
}
