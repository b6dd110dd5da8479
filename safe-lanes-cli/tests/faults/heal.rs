//! A root whose pieces were broken by hand (or planted): each broken piece disables only what
//! needs it, `doctor` names it, `init` repairs it and says so, and afterwards everything works.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};

use crate::Lab;
use crate::server::Server;

/// How a piece is broken.
enum Break {
    /// A regular file where a directory belongs.
    File,
    /// A symbolic link to a directory of someone else's choosing.
    Link,
    /// A FIFO: opening it for writing blocks.
    Fifo,
    /// A directory where a regular file belongs.
    Dir,
    /// A directory, owned by another user.
    Foreign,
    /// A regular file of 200 MiB (sparse).
    Huge,
    /// A Unix socket: it cannot be opened at all.
    Socket,
    /// A directory anyone may write to (0777).
    Loose,
}

impl Break {
    fn apply(&self, lab: &Lab, path: &Path) {
        let _ = std::fs::remove_dir_all(path);
        let _ = std::fs::remove_file(path);
        match self {
            Self::File => std::fs::write(path, b"not a directory").unwrap(),
            Self::Link => {
                let elsewhere = lab.folder("elsewhere");
                std::os::unix::fs::symlink(elsewhere, path).unwrap();
            }
            Self::Fifo => rustix::fs::mknodat(
                rustix::fs::CWD,
                path,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o600),
                0,
            )
            .unwrap(),
            Self::Dir => std::fs::create_dir(path).unwrap(),
            Self::Foreign => {
                assert!(
                    rustix::process::geteuid().is_root(),
                    "giving a directory to another user needs root (CI runs as root)"
                );
                std::fs::create_dir(path).unwrap();
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).unwrap();
                std::os::unix::fs::chown(path, Some(65_534), Some(65_534)).unwrap();
            }
            Self::Huge => {
                let file = std::fs::File::create(path).unwrap();
                file.set_len(200 << 20).unwrap();
            }
            Self::Socket => drop(std::os::unix::net::UnixListener::bind(path).unwrap()),
            Self::Loose => {
                std::fs::create_dir(path).unwrap();
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
            }
        }
    }
}

/// What still works with the piece broken, and what `doctor` says.
struct Broken<'a> {
    piece: &'a str,
    /// Whether `download save` needs it (refused until repaired).
    saving: bool,
    /// Whether a grant change needs it.
    changing: bool,
    /// Whether `doctor` names it (a lock file holding junk is emptied by the next change, so
    /// it is not a problem).
    named: bool,
}

/// Whether `args` succeeds: `(exit 0, its JSON)`.
fn runs(lab: &Lab, args: &[&str], stdin: &[u8]) -> (bool, Value) {
    let mut command = lab.command(args);
    command.stdin(std::process::Stdio::piped());
    command.stdout(std::process::Stdio::piped());
    command.stderr(std::process::Stdio::piped());
    // A read of the whole of a huge state file shows: the heap may not grow past 64 MiB.
    let mut limited = std::process::Command::new("prlimit");
    limited
        .arg(format!("--data={}", 64 << 20))
        .arg(command.get_program())
        .args(command.get_args())
        .env_clear()
        .env("HOME", lab.tmp.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = limited.spawn().expect("prlimit (util-linux)");
    let _ = std::io::Write::write_all(&mut child.stdin.take().unwrap(), stdin);
    let out = child.wait_with_output().unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.success(), json)
}

fn check(lab: &Lab, broken: &Broken<'_>, step: &str) {
    let what = format!("{} ({step})", broken.piece);
    let (listed, out) = runs(lab, &["grant", "list"], b"");
    assert!(listed, "{what}: `grant list` works: {out}");
    let (saved, out) = runs(lab, &["download", "save", "--name", "a.txt", "-"], b"a");
    assert_eq!(saved, !broken.saving, "{what}: saving: {out}");
    if broken.saving {
        assert_eq!(out["error"]["code"], "insecure_root", "{what}: {out}");
    }
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let alias = format!(
        "g{}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let path = lab.folder(&alias);
    let args = crate::grant_add(&alias, &path, "read_only");
    let (changed, out) = runs(lab, &args, b"");
    assert_eq!(changed, !broken.changing, "{what}: a grant change: {out}");
    let (_, doctor) = runs(lab, &["doctor"], b"");
    let named = doctor["problems"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p.as_str().unwrap().contains(broken.piece));
    assert_eq!(named, broken.named, "{what}: doctor: {doctor}");
}

#[test]
fn every_broken_piece_of_the_root_disables_only_its_feature_and_init_repairs_it() {
    let cases: [(&str, Break, bool, bool, bool); 22] = [
        ("audit.jsonl", Break::Socket, true, true, true),
        (".workflow.json.lock", Break::Socket, false, true, true),
        ("workflow.changelog.jsonl", Break::Link, false, false, true),
        ("workflow.changelog.jsonl", Break::Fifo, false, false, true),
        ("workflow.changelog.jsonl", Break::Dir, false, false, true),
        ("audit.jsonl", Break::Link, true, true, true),
        ("audit.jsonl", Break::Fifo, true, true, true),
        ("audit.jsonl", Break::Dir, true, true, true),
        (".savers", Break::File, true, false, true),
        (".savers", Break::Link, true, false, true),
        (".savers", Break::Foreign, true, false, true),
        ("audit.head", Break::Dir, false, false, true),
        ("audit.head", Break::Link, false, false, true),
        ("audit.head", Break::Fifo, false, false, true),
        (".workflow.json.lock", Break::Fifo, false, true, true),
        (".workflow.json.lock", Break::Dir, false, true, true),
        (".workflow.json.lock", Break::Huge, false, false, false),
        (".downloads", Break::File, true, false, true),
        (".downloads", Break::Link, true, false, true),
        (".downloads", Break::Foreign, true, false, true),
        (".uploads", Break::File, false, false, true),
        (".uploads", Break::Link, false, false, true),
    ];
    for (piece, how, saving, changing, named) in cases {
        let lab = Lab::new();
        lab.grant("first", "read_only");
        lab.saved("before.txt", b"before");
        how.apply(&lab, &lab.root().join(piece));
        let broken = Broken {
            piece,
            saving,
            changing,
            named,
        };
        check(&lab, &broken, "broken");
        if piece == "audit.jsonl" {
            let (verified, out) = runs(&lab, &["audit", "verify"], b"");
            assert!(!verified, "{piece}: verify reports the broken log: {out}");
            assert_eq!(out["intact"], false, "{piece}: {out}");
            assert_eq!(out["lines"], 0, "{piece}: {out}");
        }
        // Two at once, for the log: one starts the new log, the other leaves it alone.
        let other = (piece == "audit.jsonl").then(|| {
            let mut init = lab.command(&["init"]);
            init.stdout(Stdio::piped()).stderr(Stdio::null());
            init.spawn().unwrap()
        });
        let (initialized, out) = runs(&lab, &["init"], b"");
        assert!(initialized, "{piece}: init: {out}");
        let mut repaired = out["repaired"].as_array().unwrap().clone();
        if let Some(other) = other {
            let other = other.wait_with_output().unwrap();
            assert!(other.status.success(), "{piece}: the other init");
            let other: Value = serde_json::from_slice(&other.stdout).unwrap();
            // Whichever of the two started the new log says so.
            repaired.extend(other["repaired"].as_array().unwrap().iter().cloned());
        }
        // A junk lock file may have been emptied by the change above already.
        if named {
            assert!(
                repaired.iter().any(|r| r.as_str().unwrap().contains(piece)),
                "{piece}: init says what it repaired: {out}"
            );
        }
        let fine = Broken {
            piece,
            saving: false,
            changing: false,
            named: false,
        };
        check(&lab, &fine, "repaired");
        let (_, verified) = runs(&lab, &["audit", "verify"], b"");
        if piece == "audit.jsonl" {
            // The earlier log's lines are gone from the chain: `verify` keeps saying so.
            assert_eq!(verified["intact"], false, "{piece}: {verified}");
            assert_eq!(verified["broken"]["line"], 1, "{piece}: {verified}");
            let why = verified["broken"]["why"].as_str().unwrap();
            assert!(why.contains("started again"), "{piece}: {verified}");
            assert!(
                verified["lines"].as_u64().unwrap() >= 3,
                "{piece}: {verified}"
            );
            assert_eq!(
                verified["seams"].as_array().unwrap().len(),
                1,
                "{piece}: {verified}"
            );
            let records = lab.records();
            let restarts: Vec<&Value> = records
                .iter()
                .filter(|r| r["event"] == "audit.restarted")
                .collect();
            assert_eq!(restarts.len(), 1, "one restart for two inits: {restarts:?}");
            let restarted = restarts[0];
            assert_eq!(restarted["seq"], 1, "{restarted}");
            assert_eq!(
                restarted["witness_seq"], 2,
                "the old chain's end: {restarted}"
            );
        } else {
            assert_eq!(verified["intact"], true, "{piece}: {verified}");
        }
    }
}

/// The answer to a tool call: whether it succeeded, and its result.
fn called(server: &mut Server, id: i64, tool: &str, arguments: Value) -> (bool, Value) {
    server.call(id, tool, arguments);
    let answer = server.answer(id);
    let result = answer["result"].clone();
    (result["isError"] == false, result)
}

/// Regression (the fault pass): a broken `.downloads` (a file, a link, a FIFO, a directory
/// others may write, another user's) stopped the MCP server from starting at all, taking
/// commands, grants and requests with it. The server starts; only the lane's tools refuse
/// (`insecure_root`), and once `init` repairs the lane they work again in the same server.
#[test]
fn a_broken_download_lane_refuses_only_the_lane_in_a_running_server() {
    for how in [
        Break::File,
        Break::Link,
        Break::Fifo,
        Break::Loose,
        Break::Foreign,
    ] {
        let lab = Lab::new();
        lab.grant("first", "read_only");
        how.apply(&lab, &lab.root().join(".downloads"));
        let mut server = Server::start(&lab, &[], Stdio::null());
        let (listed, out) = called(&mut server, 1, "folder_grants_list", json!({}));
        assert!(listed, "{out}");
        assert_eq!(
            out["structuredContent"]["grants"][0]["alias"], "first",
            "{out}"
        );
        let (ran, out) = called(&mut server, 2, "shell_exec", json!({"command": "echo hi"}));
        assert!(ran && out["structuredContent"]["stdout"] == "hi\n", "{out}");
        let ask = json!({"alias": "more", "access": "read_only", "reason": "to read"});
        let (asked, out) = called(&mut server, 3, "folder_access_request", ask);
        assert!(asked, "{out}");
        let save = json!({"filename": "a.txt", "text": "a"});
        let (saved, out) = called(&mut server, 4, "download_save", save.clone());
        assert!(!saved, "{out}");
        assert_eq!(out["_meta"]["safe-lanes/code"], "insecure_root", "{out}");
        let (listed, out) = called(&mut server, 5, "downloads_list", json!({}));
        assert!(!listed, "{out}");
        let (initialized, out) = runs(&lab, &["init"], b"");
        assert!(initialized, "init: {out}");
        let (saved, out) = called(&mut server, 6, "download_save", save);
        assert!(saved, "after init, in the same server: {out}");
    }
}

/// Regression (the fault pass): `audit.jsonl` as a link stopped the server from starting; as a
/// FIFO, commands, uploads and requests failed with `io`. Every effect needs its record, so
/// each tool that has one refuses (`insecure_root`) while what records nothing still answers;
/// once `init` moves the piece aside and starts a new log, the same server records again.
#[test]
fn a_broken_audit_log_refuses_what_must_be_recorded_and_init_starts_a_new_one() {
    for how in [Break::Link, Break::Fifo, Break::Dir] {
        let lab = Lab::new();
        lab.grant("first", "read_only");
        how.apply(&lab, &lab.root().join("audit.jsonl"));
        let mut server = Server::start(&lab, &[], Stdio::null());
        let (listed, out) = called(&mut server, 1, "folder_grants_list", json!({}));
        assert!(listed, "{out}");
        let (listed, out) = called(&mut server, 2, "downloads_list", json!({}));
        assert!(listed, "{out}");
        let ask = json!({"alias": "more", "access": "read_only", "reason": "to read"});
        let tools = [
            ("shell_exec", json!({"command": "echo hi"})),
            ("folder_access_request", ask),
            ("download_save", json!({"filename": "a.txt", "text": "a"})),
        ];
        for (id, (tool, arguments)) in (3..).zip(tools.iter()) {
            let (done, out) = called(&mut server, id, tool, arguments.clone());
            assert!(!done, "{tool}: {out}");
            assert_eq!(
                out["_meta"]["safe-lanes/code"], "insecure_root",
                "{tool}: {out}"
            );
        }
        assert!(
            std::fs::read_dir(lab.root().join(".downloads"))
                .unwrap()
                .next()
                .is_none(),
            "nothing saved without its record"
        );
        let (initialized, out) = runs(&lab, &["init"], b"");
        assert!(initialized, "init: {out}");
        for (id, (tool, arguments)) in (10..).zip(tools.iter()) {
            let (done, out) = called(&mut server, id, tool, arguments.clone());
            assert!(done, "{tool} after init, in the same server: {out}");
        }
        let events: Vec<Value> = lab.records().iter().map(|r| r["event"].clone()).collect();
        assert_eq!(events[0], "audit.restarted", "{events:?}");
        for event in ["exec.start", "exec.end", "grant.request", "download.save"] {
            assert_eq!(
                events.iter().filter(|e| *e == event).count(),
                1,
                "{event} once: {events:?}"
            );
        }
    }
}

/// Regression (the fault pass): a broken cache layer (`<root>/caches/<alias>` a link or a
/// file) refused every confined command, not only those that need the cache, and a linked
/// layer broke `grant list`. A command runs without that cache (which it does not see:
/// never the human's folder without its layer), one that starts in the cache is refused, and
/// `grant list` lists it.
#[test]
fn a_broken_cache_layer_leaves_out_only_that_cache() {
    for how in [Break::Link, Break::File] {
        let lab = Lab::new();
        lab.grant("first", "read_only");
        let npm = lab.folder("npm-cache");
        let add = [
            "grant",
            "add",
            "--alias",
            "npm",
            "--path",
            &npm,
            "--kind",
            "cache",
            "--reason",
            "the cache",
        ];
        let (added, out) = runs(&lab, &add, b"");
        assert!(added, "{out}");
        let (ran, out) = runs(&lab, &["exec", "--", "true"], b"");
        assert!(ran, "a command makes the layer: {out}");
        how.apply(&lab, &lab.root().join("caches/npm"));
        let (ran, out) = runs(&lab, &["exec", "--", "sh", "-c", "echo ran"], b"");
        assert!(ran, "a command without the broken cache: {out}");
        assert_eq!(out["stdout"], "ran\n", "{out}");
        let used: Vec<&str> = out["grants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g[0].as_str().unwrap())
            .collect();
        assert_eq!(used, ["first"], "the broken cache is left out: {out}");
        let (ran, out) = runs(&lab, &["exec", "--cwd", "npm", "--", "true"], b"");
        assert!(!ran, "{out}");
        assert_eq!(out["error"]["code"], "insecure_root", "{out}");
        let (listed, out) = runs(&lab, &["grant", "list"], b"");
        assert!(listed, "grant list: {out}");
        assert_eq!(out["grants"].as_array().unwrap().len(), 2, "{out}");
        // `doctor` names it; `init` repairs it, and says so; commands see the cache again.
        let (_, doctor) = runs(&lab, &["doctor"], b"");
        let named = doctor["problems"].as_array().unwrap().iter().any(|p| {
            p.as_str()
                .unwrap()
                .contains("cache `npm`: its private layer is broken")
        });
        assert!(named, "{doctor}");
        let (initialized, out) = runs(&lab, &["init"], b"");
        assert!(initialized, "{out}");
        let repaired = out["repaired"].to_string();
        assert!(repaired.contains("caches/npm"), "{out}");
        let (ran, out) = runs(&lab, &["exec", "--cwd", "npm", "--", "true"], b"");
        assert!(ran, "after init: {out}");
    }
}
