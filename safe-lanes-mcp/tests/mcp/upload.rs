//! `upload_resolve`, `upload_file`, `upload_content`, and a symlink-swap race.

use std::os::unix::fs::symlink;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{CWD, RenameFlags};
use serde_json::json;

use base64::Engine as _;

use crate::util::{World, sha256_hex};

#[tokio::test]
async fn resolve_allows_the_lane_and_refuses_everything_else() {
    let w = World::new().await;
    let saved = w
        .ok(
            "download_save",
            json!({"filename": "report.pdf", "text": "%PDF"}),
        )
        .await;
    let resolved = w.ok("upload_resolve", json!({"path": saved["path"]})).await;
    assert_eq!(resolved["path"], saved["path"]);
    assert_eq!(
        resolved["root"],
        w.root().join(".downloads").to_str().unwrap()
    );
    assert_eq!(resolved["sha256"], saved["sha256"]);
    std::fs::write(w.p("outside/id_ed25519"), "KEY").unwrap();
    std::fs::write(w.root().join("token"), "TOKEN").unwrap();
    let cases = [
        (
            w.p("outside/id_ed25519").display().to_string(),
            "outside_allowlist",
        ),
        (w.root().join("token").display().to_string(), "state_root"),
        (
            w.root().join("audit.jsonl").display().to_string(),
            "state_root",
        ),
        ("relative/path".to_owned(), "relative_path"),
        ("/etc/passwd\0/x".to_owned(), "nul_byte"),
        (
            w.root().join(".downloads").display().to_string(),
            "not_regular_file",
        ),
    ];
    for (path, code) in cases {
        assert_eq!(
            w.refused("upload_resolve", json!({ "path": path })).await,
            code,
            "{path:?}"
        );
    }
}

/// Regression: `upload_resolve` was an oracle for the whole disk (`/etc/shadow` refused as
/// outside the allowlist, `/etc/nonexistent` as not found) and named where a link in an
/// allowed folder points. Now the agent reads the same answer whatever exists outside, and
/// only the path it gave.
#[tokio::test]
async fn resolve_tells_nothing_about_what_exists_outside_the_roots() {
    let w = World::new().await;
    std::fs::write(w.p("outside/key"), "KEY").unwrap();
    symlink(w.p("outside/key"), w.p("share/to-key")).unwrap();
    symlink(w.p("outside/gone"), w.p("share/to-gone")).unwrap();
    symlink(w.p("outside"), w.p("share/to-outside")).unwrap();
    std::fs::write(
        w.root().join(".upload-roots"),
        format!("{}\n", w.p("share").display()),
    )
    .unwrap();
    let cases = [
        "/etc/shadow".into(),
        "/etc/nonexistent".into(),
        w.p("outside/key"),
        w.p("outside/gone"),
        w.p("share/../outside/key"),
        w.p("share/to-key"),
        w.p("share/to-gone"),
        w.p("share/to-outside/key"),
        w.p("share/to-outside/gone"),
    ];
    let leaked = w.p("outside/").display().to_string();
    for path in cases {
        let path = path.display().to_string();
        let result = w
            .call("upload_resolve", json!({ "path": path }))
            .await
            .unwrap();
        assert_eq!(crate::util::refusal_code(&result), "outside_allowlist");
        let text = &result.content[0].as_text().unwrap().text;
        assert_eq!(
            text,
            &format!(
                "outside_allowlist: {path}: not inside any allowed upload root (the human allows \
                 a folder with `safe-lanes upload roots add FOLDER`)"
            )
        );
        assert!(path.contains(&leaked) || !text.contains(&leaked), "{text}");
    }
}

#[tokio::test]
async fn upload_file_and_content_run_the_uploader_on_a_staged_copy() {
    let seen = tempfile::tempdir().unwrap();
    let log = seen.path().join("seen");
    let uploader = format!(
        "/bin/sh -c 'pwd > {0}; cat \"$1\" >> {0}; echo done' sh {{file}}",
        log.display()
    );
    let w = World::with_args(&["--uploader", &uploader]).await;
    let saved = w
        .ok(
            "download_save",
            json!({"filename": "a.txt", "text": "from the lane"}),
        )
        .await;
    let sent = w.ok("upload_file", json!({"path": saved["path"]})).await;
    assert_eq!(sent["exit_code"], 0);
    assert_eq!(sent["stdout"], "done\n");
    assert_eq!(sent["source"]["sha256"], sha256_hex(b"from the lane"));
    let text = std::fs::read_to_string(&log).unwrap();
    let own = std::path::Path::new(sent["staged"].as_str().unwrap())
        .ancestors()
        .nth(2)
        .unwrap()
        .to_owned();
    assert_eq!(
        text,
        format!(
            "{}\nfrom the lane",
            w.root().join(".uploads").join(own).display()
        ),
        "the uploader runs in its upload's own directory"
    );
    let sent = w
        .ok(
            "upload_content",
            json!({"filename": "notes.md", "text": "# written"}),
        )
        .await;
    assert_eq!(sent["source"]["bytes"], 9);
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .ends_with("# written")
    );
    assert!(
        std::fs::read_dir(w.root().join(".uploads"))
            .unwrap()
            .next()
            .is_none(),
        "erased"
    );
    assert_eq!(
        w.refused("upload_file", json!({"path": "/etc/passwd"}))
            .await,
        "outside_allowlist"
    );
}

/// Regression: `upload_file` staged its source whatever its size, while `download_save` and
/// `upload_content` were capped. A source past `--max-bytes` (here one that grew after it was
/// saved) is refused with `too_large`, the uploader never runs, and nothing stays staged.
#[tokio::test]
async fn upload_file_is_refused_past_the_size_cap() {
    let seen = tempfile::tempdir().unwrap();
    let ran = seen.path().join("ran");
    let uploader = format!("/bin/sh -c 'touch {}' sh {{file}}", ran.display());
    let w = World::with_args(&["--uploader", &uploader, "--max-bytes", "1000"]).await;
    let saved = w
        .ok(
            "download_save",
            json!({"filename": "log.txt", "text": "small"}),
        )
        .await;
    let path = saved["path"].as_str().unwrap();
    std::fs::write(path, vec![b'x'; 5000]).unwrap();
    assert_eq!(
        w.refused("upload_file", json!({ "path": path })).await,
        "too_large"
    );
    assert!(!ran.exists(), "the uploader ran");
    assert!(
        std::fs::read_dir(w.root().join(".uploads"))
            .unwrap()
            .next()
            .is_none()
    );
    // At the cap it goes through.
    std::fs::write(path, vec![b'x'; 1000]).unwrap();
    let sent = w.ok("upload_file", json!({ "path": path })).await;
    assert_eq!(sent["source"]["bytes"], 1000);
    assert!(ran.exists());
}

#[tokio::test]
async fn a_failing_uploader_is_an_error_result() {
    let w = World::with_args(&["--uploader", "/bin/sh -c 'echo broken >&2; exit 3'"]).await;
    let result = w
        .call("upload_content", json!({"filename": "a", "text": "x"}))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    assert_eq!(crate::util::refusal_code(&result), "io");
    assert!(
        result.content[0]
            .as_text()
            .unwrap()
            .text
            .contains("exited with code 3")
    );
    assert!(
        std::fs::read_dir(w.root().join(".uploads"))
            .unwrap()
            .next()
            .is_none()
    );
}

#[tokio::test]
async fn a_symlink_swap_race_never_resolves_outside() {
    let w = World::new().await;
    std::fs::create_dir(w.p("share/swap")).unwrap();
    std::fs::write(w.p("share/swap/file"), "inside").unwrap();
    std::fs::write(w.p("outside/file"), "outside").unwrap();
    symlink(w.p("outside"), w.p("share/swaplink")).unwrap();
    std::fs::write(
        w.root().join(".upload-roots"),
        format!("{}\n", w.p("share").display()),
    )
    .unwrap();
    let outside_hash = sha256_hex(b"outside");
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (a, b) = (w.p("share/swap"), w.p("share/swaplink"));
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                rustix::fs::renameat_with(CWD, &a, CWD, &b, RenameFlags::EXCHANGE).unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    let path = w.p("share/swap/file").display().to_string();
    let (mut inside, mut outside, mut refused) = (0, 0, 0);
    for _ in 0..2000 {
        let result = w
            .call("upload_resolve", json!({ "path": path }))
            .await
            .unwrap();
        if result.is_error == Some(true) {
            refused += 1;
            continue;
        }
        let content = result.structured_content.unwrap();
        if content["sha256"] == outside_hash.as_str()
            || !content["path"]
                .as_str()
                .unwrap()
                .starts_with(w.p("share").to_str().unwrap())
        {
            outside += 1;
        } else {
            inside += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert_eq!(outside, 0, "results from outside the allowed root");
    assert!(swaps > 100, "the swapper ran ({swaps})");
    assert!(
        inside > 0 && refused > 0,
        "both outcomes seen: {inside} inside, {refused} refused"
    );
}

/// Regression: with `/` (or `/proc`) allowed, `upload_file {"path": "/proc/self/environ"}` uploaded the
/// server's own environment, its tokens included. A pseudo-file is refused (`pseudo_file`),
/// the uploader never runs, and the refusal is recorded.
#[tokio::test]
async fn the_servers_own_process_files_are_never_uploaded() {
    let seen = tempfile::tempdir().unwrap();
    let ran = seen.path().join("ran");
    let uploader = format!("/bin/sh -c 'touch {}' sh {{file}}", ran.display());
    let w = World::with_args(&["--uploader", &uploader]).await;
    std::fs::write(w.root().join(".upload-roots"), "/proc\n").unwrap();
    for path in [
        "/proc/self/environ",
        "/proc/self/cmdline",
        "/proc/self/status",
    ] {
        assert_eq!(
            w.refused("upload_file", json!({ "path": path })).await,
            "pseudo_file",
            "{path}"
        );
        assert_eq!(
            w.refused("upload_resolve", json!({ "path": path })).await,
            "pseudo_file",
            "{path}"
        );
    }
    assert!(!ran.exists(), "the uploader ran");
    let refused = safe_lanes_testkit::audit::records(&w.root())
        .into_iter()
        .filter(|r| r["event"] == "upload.refused" && r["code"] == "pseudo_file")
        .count();
    assert_eq!(refused, 6);
}

/// Regression: content that is not valid base64 was refused (`invalid_argument`) without a
/// record, short or long, while every other refusal of the agent is recorded.
#[tokio::test]
async fn invalid_base64_is_refused_and_recorded() {
    let w = World::with_args(&["--uploader", "/bin/cat {file}"]).await;
    let mut long = base64::engine::general_purpose::STANDARD.encode(vec![9u8; 1 << 20]);
    long.replace_range(1_000_001..1_000_002, "!");
    for base64 in ["not base64!".to_owned(), long] {
        for tool in ["download_save", "upload_content"] {
            let args = json!({"filename": "bad.bin", "base64": base64});
            assert_eq!(w.refused(tool, args).await, "invalid_argument", "{tool}");
        }
    }
    let records = safe_lanes_testkit::audit::records(&w.root());
    let refused = |event: &str| {
        records
            .iter()
            .filter(|r| r["event"] == event && r["code"] == "invalid_argument")
            .count()
    };
    assert_eq!(refused("download.refused"), 2, "{records:?}");
    assert_eq!(refused("upload.refused"), 2, "{records:?}");
}

/// Regression: with `GWSA_ROOT=G` in the server's environment beside its own state root and
/// an allowlist covering G's parent, `upload_file` sent `G/token.json`. Every state root the
/// environment names is under the hard guard, but its `.downloads`; the uploader never runs.
#[tokio::test]
async fn the_tokens_of_another_named_state_root_are_never_uploaded() {
    let seen = tempfile::tempdir().unwrap();
    let ran = seen.path().join("ran");
    let uploader = format!("/bin/sh -c 'touch {}' sh {{file}}", ran.display());
    let w = World::with_env(&["--uploader", &uploader], |t| {
        vec![("GWSA_ROOT", t.join("share/gwsa"))]
    })
    .await;
    let gwsa = w.p("share/gwsa");
    std::fs::create_dir_all(gwsa.join(".downloads")).unwrap();
    std::fs::write(gwsa.join("token.json"), "TOKEN").unwrap();
    std::fs::write(gwsa.join(".downloads/got.pdf"), "%PDF").unwrap();
    let roots = format!("{}\n", w.p("share").display());
    std::fs::write(w.root().join(".upload-roots"), roots).unwrap();
    for tool in ["upload_resolve", "upload_file"] {
        let token = json!({ "path": gwsa.join("token.json") });
        assert_eq!(w.refused(tool, token).await, "state_root", "{tool}");
    }
    assert!(!ran.exists(), "the uploader ran");
    let received = w
        .ok(
            "upload_resolve",
            json!({ "path": gwsa.join(".downloads/got.pdf") }),
        )
        .await;
    assert_eq!(received["bytes"], 4, "{received}");
}

/// A secret inside an allowed root or a read-write grant (`.env`, a key, `.ssh/`, an `.npmrc`
/// holding a token) is refused with `hidden_path` by `upload_file` and `folder_patch` —
/// also through a link, and whatever the path asked for — and recorded; its examples and the
/// project's own files are not.
#[tokio::test]
async fn hidden_paths_are_never_uploaded_or_patched() {
    let seen = tempfile::tempdir().unwrap();
    let ran = seen.path().join("ran");
    let uploader = format!("/bin/sh -c 'echo x >> {}' sh {{file}}", ran.display());
    let w = World::with_args(&["--uploader", &uploader]).await;
    let proj = w.p("proj");
    std::fs::create_dir_all(proj.join(".ssh")).unwrap();
    std::fs::create_dir_all(proj.join("deploy")).unwrap();
    std::fs::write(proj.join(".env"), "TOKEN=secret\n").unwrap();
    std::fs::write(proj.join(".ssh/id_ed25519"), "key\n").unwrap();
    std::fs::write(proj.join("deploy/tls.pem"), "-----BEGIN PRIVATE KEY-----\n").unwrap();
    std::fs::write(proj.join("deploy/ca.pem"), "-----BEGIN CERTIFICATE-----\n").unwrap();
    std::fs::write(proj.join(".npmrc"), "//r.example/:_authToken=abc\n").unwrap();
    std::fs::write(proj.join("README.md"), "hello\n").unwrap();
    std::fs::write(proj.join(".env.example"), "TOKEN=\n").unwrap();
    symlink(".env", proj.join("notes.txt")).unwrap();
    std::fs::write(
        w.root().join(".upload-roots"),
        format!("{}\n", proj.display()),
    )
    .unwrap();
    for rel in [
        ".env",
        ".ssh/id_ed25519",
        "deploy/tls.pem",
        ".npmrc",
        "notes.txt",
    ] {
        let path = proj.join(rel).display().to_string();
        assert_eq!(
            w.refused("upload_file", json!({ "path": path })).await,
            "hidden_path",
            "{rel}"
        );
    }
    assert!(!ran.exists(), "the uploader never ran for a secret");
    for rel in ["README.md", ".env.example", "deploy/ca.pem"] {
        let path = proj.join(rel).display().to_string();
        w.ok("upload_file", json!({ "path": path })).await;
    }

    w.cli(&[
        "grant",
        "add",
        "--reason",
        "test",
        "--alias",
        "proj",
        "--path",
        &proj.display().to_string(),
        "--access",
        "read_write",
    ]);
    let add = |name: &str| format!("--- /dev/null\n+++ b/{name}\n@@ -0,0 +1 @@\n+more\n");
    let key = "--- /dev/null\n+++ b/deploy/new.key\n@@ -0,0 +1 @@\n+-----BEGIN PRIVATE KEY-----\n";
    let change = "--- a/.env\n+++ b/.env\n@@ -1 +1 @@\n-TOKEN=secret\n+TOKEN=other\n";
    let token = "--- a/.npmrc\n+++ b/.npmrc\n@@ -1 +1,2 @@\n //r.example/:_authToken=abc\n+x=1\n";
    for (path, diff) in [
        (".env", change.to_owned()),
        ("deploy/new.key", key.to_owned()),
        (".aws/credentials", add(".aws/credentials")),
        (".npmrc", token.to_owned()),
    ] {
        let args = json!({"alias": "proj", "path": path, "diff": diff});
        assert_eq!(
            w.refused("folder_patch", args).await,
            "hidden_path",
            "{path}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(proj.join(".env")).unwrap(),
        "TOKEN=secret\n"
    );
    assert!(!proj.join("deploy/new.key").exists());
    let args = json!({"alias": "proj", "path": "notes.md", "diff": add("notes.md")});
    w.ok("folder_patch", args).await;
    let records = safe_lanes_testkit::audit::records(&w.root());
    let refused = |event: &str| {
        records
            .iter()
            .filter(|r| r["event"] == event && r["code"] == "hidden_path")
            .count()
    };
    assert_eq!(
        (refused("upload.refused"), refused("patch.refused")),
        (5, 4)
    );
}
