//! `upload check | roots | send`.

use std::path::Path;

use crate::util::{Env, run_in, tree};

/// A state root with a received file, a token, an allowed folder and a secret outside it.
fn world() -> Env {
    let env = Env::new();
    assert_eq!(
        env.run(&["download", "save", "--name", "report.pdf"], b"%PDF")
            .status,
        0
    );
    std::fs::write(env.root().join("token"), "TOKEN").unwrap();
    std::fs::create_dir(env.tmp.path().join("share")).unwrap();
    std::fs::write(env.tmp.path().join("share/deck.txt"), "slides").unwrap();
    std::fs::create_dir(env.home().join(".ssh")).unwrap();
    std::fs::write(env.home().join(".ssh/id_ed25519"), "PRIVATE KEY").unwrap();
    let roots = format!(
        "# mine\n{}\nnot/absolute\n",
        env.tmp.path().join("share").display()
    );
    std::fs::write(env.root().join(".upload-roots"), roots).unwrap();
    env
}

#[test]
fn check_prints_the_contract_json() {
    let env = world();
    let received = env.root().join(".downloads/report.pdf");
    let run = env.run(
        &["--json", "upload", "check", received.to_str().unwrap()],
        b"",
    );
    assert_eq!(run.status, 0, "{run:?}");
    let json = run.json();
    assert_eq!(json["path"], received.to_str().unwrap());
    assert_eq!(
        json["root"],
        env.root().join(".downloads").to_str().unwrap()
    );
    assert_eq!(json["bytes"], 4);
    // printf '%PDF' | sha256sum
    assert_eq!(
        json["sha256"],
        "315d429b7714cedb6ad04ac31240145257692630457f3c88253c5beceac76027"
    );
}

#[test]
fn check_refuses_secrets_with_exit_3_and_a_code() {
    let env = world();
    let cases = [
        (env.home().join(".ssh/id_ed25519"), "outside_allowlist"),
        (env.root().join("token"), "state_root"),
        (env.root().join(".upload-roots"), "state_root"),
        // Read as written, it is outside `share`: refused without a lookup.
        (
            env.tmp.path().join("share/../home/.ssh/id_ed25519"),
            "outside_allowlist",
        ),
        (env.tmp.path().join("share"), "not_regular_file"),
    ];
    for (path, code) in cases {
        let run = env.run(&["--json", "upload", "check", path.to_str().unwrap()], b"");
        assert_eq!(run.status, 3, "{}: {run:?}", path.display());
        assert_eq!(run.code(), code, "{}", path.display());
    }
    let relative = env.run(&["--json", "upload", "check", "share/deck.txt"], b"");
    assert_eq!(
        (relative.status, relative.code().as_str()),
        (3, "relative_path")
    );
}

#[test]
fn roots_lists_origins_and_ignored_entries() {
    let env = world();
    let extra = env.tmp.path().join("extra");
    std::fs::create_dir(&extra).unwrap();
    let run = env.run_env(
        &["--json", "upload", "roots"],
        b"",
        &[("SAFE_LANES_UPLOAD_ROOTS", extra.to_str().unwrap())],
    );
    assert_eq!(run.status, 0, "{run:?}");
    let json = run.json();
    let mut origins: Vec<(String, String)> = json["roots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["origin"].as_str().unwrap().to_owned(),
                r["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    origins.sort();
    assert_eq!(
        origins,
        [
            (
                "downloads".to_owned(),
                env.root().join(".downloads").to_str().unwrap().to_owned()
            ),
            ("env".to_owned(), extra.to_str().unwrap().to_owned()),
            (
                "file".to_owned(),
                env.tmp.path().join("share").to_str().unwrap().to_owned()
            ),
        ]
    );
    assert_eq!(json["ignored"][0]["entry"], "not/absolute");
    assert_eq!(json["ignored"][0]["why"], "not an absolute path");
    let doctor = env.run(&["--json", "doctor"], b"");
    assert_eq!(doctor.status, 1, "doctor reports the ignored line");
    assert_eq!(
        doctor.json()["upload_roots_ignored"][0]["entry"],
        "not/absolute"
    );
}

#[test]
fn send_stages_runs_and_erases() {
    let env = world();
    let seen = env.tmp.path().join("seen.txt");
    let script = format!("cat \"$1\" > '{}'; echo sent", seen.display());
    let deck = env.tmp.path().join("share/deck.txt");
    let run = env.run(
        &[
            "--json",
            "upload",
            "send",
            deck.to_str().unwrap(),
            "--",
            "/bin/sh",
            "-c",
            &script,
            "sh",
            "{file}",
        ],
        b"",
    );
    assert_eq!(run.status, 0, "{run:?}");
    let json = run.json();
    assert_eq!(json["source"]["path"], deck.to_str().unwrap());
    assert_eq!(json["source"]["bytes"], 6);
    assert_eq!(json["exit_code"], 0);
    assert_eq!(json["stdout"], "sent\n");
    assert_eq!(json["stderr"], "");
    assert_eq!(std::fs::read_to_string(&seen).unwrap(), "slides");
    assert!(tree(&env.root().join(".uploads")).is_empty());
}

#[test]
fn a_failing_uploader_exits_1_and_erases() {
    let env = world();
    let deck = env.tmp.path().join("share/deck.txt");
    let run = env.run(
        &[
            "--json",
            "upload",
            "send",
            deck.to_str().unwrap(),
            "--",
            "/bin/sh",
            "-c",
            "exit 4",
        ],
        b"",
    );
    assert_eq!(run.status, 1, "{run:?}");
    assert_eq!(run.json()["exit_code"], 4);
    assert!(tree(&env.root().join(".uploads")).is_empty());
}

#[test]
fn a_refused_source_never_runs_the_uploader() {
    let env = world();
    let marker = env.tmp.path().join("uploader-ran");
    let script = format!("touch '{}'", marker.display());
    let key = env.home().join(".ssh/id_ed25519");
    let run = env.run(
        &[
            "--json",
            "upload",
            "send",
            key.to_str().unwrap(),
            "--",
            "/bin/sh",
            "-c",
            &script,
        ],
        b"",
    );
    assert_eq!(run.status, 3, "{run:?}");
    assert_eq!(run.code(), "outside_allowlist");
    assert!(!marker.exists(), "the uploader never ran");
    assert!(tree(&env.root().join(".uploads")).is_empty());
}

/// The records of the audit log whose event starts with `prefix`.
fn audited(env: &Env, prefix: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(env.root().join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["event"].as_str().unwrap_or("").starts_with(prefix))
        .collect()
}

/// Regression: `upload roots` could only list; the file had to be edited by hand. `upload
/// roots add` and `remove` change whole lines of `.upload-roots` (comments and the other
/// lines kept), need a reason, and are audited; an addition of a folder allowed already
/// writes nothing.
#[test]
fn upload_roots_add_and_remove_keep_the_humans_file() {
    let env = world();
    let file = env.root().join(".upload-roots");
    let docs = env.tmp.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    std::fs::write(docs.join("notes.txt"), "notes").unwrap();
    let docs_s = docs.to_str().unwrap();
    let before = std::fs::read_to_string(&file).unwrap();
    let check = ["--json", "upload", "check", &format!("{docs_s}/notes.txt")];
    assert_eq!(env.run(&check, b"").code(), "outside_allowlist");

    // No reason and no terminal: refused, nothing written, nothing recorded.
    let run = env.run(&["--json", "upload", "roots", "add", docs_s], b"");
    assert_eq!(
        (run.status, run.code()),
        (3, "invalid_argument".into()),
        "{run:?}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
    assert!(audited(&env, "upload_roots.").is_empty());

    let add = [
        "--json",
        "upload",
        "roots",
        "add",
        docs_s,
        "--reason",
        "share the notes",
    ];
    let run = env.run(&add, b"");
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.json()["changed"], true);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        format!("{before}{docs_s}\n")
    );
    assert_eq!(env.run(&check, b"").status, 0);
    // Named again (through `..`): allowed already, the file as it was.
    let again = format!("{docs_s}/../docs");
    let run = env.run(
        &["--json", "upload", "roots", "add", &again, "--reason", "r"],
        b"",
    );
    assert_eq!(run.json()["changed"], false, "{run:?}");
    assert_eq!(audited(&env, "upload_roots.add").len(), 1);

    let share = env.tmp.path().join("share");
    let remove = [
        "upload",
        "roots",
        "remove",
        share.to_str().unwrap(),
        "--reason",
        "done",
    ];
    let run = env.run(&remove, b"");
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        format!("# mine\nnot/absolute\n{docs_s}\n"),
        "only its line removed"
    );
    let run = env.run(
        &[
            "--json",
            "upload",
            "roots",
            "remove",
            share.to_str().unwrap(),
            "--reason",
            "x",
        ],
        b"",
    );
    assert_eq!(run.code(), "not_found", "{run:?}");

    let records = audited(&env, "upload_roots.");
    let said: Vec<(&str, &str, &str)> = records
        .iter()
        .map(|r| {
            (
                r["event"].as_str().unwrap(),
                r["path"].as_str().unwrap(),
                r["reason"].as_str().unwrap(),
            )
        })
        .collect();
    let share_s = share.to_str().unwrap();
    assert_eq!(
        said,
        [
            ("upload_roots.add", docs_s, "share the notes"),
            ("upload_roots.remove", share_s, "done")
        ]
    );
}

/// Regression: `/` was accepted as an upload root without a word (and with it the
/// gateway's own files). One rule: `/`, a home folder and a folder holding one are refused by
/// `upload roots add` and ignored, with why, when written in the file or the environment; the
/// state root inside a root is a warning.
#[test]
fn over_broad_upload_roots_are_refused_by_one_rule() {
    let env = world();
    let file = env.root().join(".upload-roots");
    let before = std::fs::read_to_string(&file).unwrap();
    let home = env.home();
    let holds_home = env.tmp.path().to_path_buf();
    for (folder, says) in [
        (Path::new("/"), "the whole file system"),
        (home.as_path(), "is a home folder"),
        (holds_home.as_path(), "holds the home folder"),
    ] {
        let folder = folder.to_str().unwrap();
        let run = env.run(
            &["--json", "upload", "roots", "add", folder, "--reason", "r"],
            b"",
        );
        assert_eq!(run.code(), "invalid_argument", "{folder}: {run:?}");
        assert!(run.stdout.contains(says), "{folder}: {run:?}");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);

    // Written by hand, or in the environment: ignored, and said.
    std::fs::write(&file, format!("{before}/\n{}\n", home.display())).unwrap();
    let vars = [("SAFE_LANES_UPLOAD_ROOTS", holds_home.to_str().unwrap())];
    let run = env.run_env(&["--json", "upload", "roots"], b"", &vars);
    let json = run.json();
    let mut roots: Vec<&str> = json["roots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["origin"].as_str().unwrap())
        .collect();
    roots.sort_unstable();
    assert_eq!(
        roots,
        ["downloads", "file"],
        "only share and the lane: {run:?}"
    );
    let ignored = json["ignored"].as_array().unwrap();
    assert_eq!(ignored.len(), 4, "{run:?}");
    for (entry, says) in [
        ("/", "the whole file system"),
        (home.to_str().unwrap(), "is a home folder"),
        (holds_home.to_str().unwrap(), "holds the home folder"),
    ] {
        assert!(
            ignored
                .iter()
                .any(|i| i["entry"] == entry && i["why"].as_str().unwrap().contains(says)),
            "{entry}: {run:?}"
        );
    }
    let hostname = ["--json", "upload", "check", "/etc/hostname"];
    let run = env.run_env(&hostname, b"", &vars);
    assert_eq!(run.code(), "outside_allowlist", "{run:?}");
    assert!(
        run.stdout.contains("safe-lanes upload roots add FOLDER"),
        "the refusal says which command allows a folder: {run:?}"
    );

    // The state root itself: allowed (the hard guard still keeps it), with a warning.
    std::fs::write(&file, &before).unwrap();
    let state = env.root();
    let add = [
        "--json",
        "upload",
        "roots",
        "add",
        state.to_str().unwrap(),
        "--reason",
        "r",
    ];
    let run = env.run(&add, b"");
    assert_eq!(run.status, 0, "{run:?}");
    let json = run.json();
    let risks: Vec<&str> = json["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["risk"].as_str().unwrap())
        .collect();
    assert!(risks.contains(&"state_root"), "{run:?}");
    let token = state.join("token");
    let token = ["--json", "upload", "check", token.to_str().unwrap()];
    assert_eq!(env.run(&token, b"").code(), "state_root");
}

/// Regression: `SAFE_LANES_ROOT=S GWSA_ROOT=G safe-lanes upload check G/token.json` with S's
/// allowlist covering G's parent was accepted. Every state root the environment names is
/// under the hard guard, but its `.downloads`.
#[test]
fn check_refuses_the_other_state_roots_tokens() {
    let env = world();
    let gwsa = env.tmp.path().join("share/gwsa");
    std::fs::create_dir_all(gwsa.join(".downloads")).unwrap();
    std::fs::write(gwsa.join("token.json"), "TOKEN").unwrap();
    std::fs::write(gwsa.join(".downloads/got.pdf"), "%PDF").unwrap();
    let vars = [
        ("SAFE_LANES_ROOT", env.root().to_str().unwrap().to_owned()),
        ("GWSA_ROOT", gwsa.to_str().unwrap().to_owned()),
    ];
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let check = |path: &std::path::Path| {
        let args = ["--json", "upload", "check", path.to_str().unwrap()];
        run_in(&env.cwd(), &env.home(), &args, b"", &vars)
    };
    let token = check(&gwsa.join("token.json"));
    assert_eq!(
        (token.status, token.code().as_str()),
        (3, "state_root"),
        "{token:?}"
    );
    let received = check(&gwsa.join(".downloads/got.pdf"));
    assert_eq!(received.status, 0, "{received:?}");
    assert_eq!(check(&env.tmp.path().join("share/deck.txt")).status, 0);
    let roots = run_in(
        &env.cwd(),
        &env.home(),
        &["--json", "upload", "roots"],
        b"",
        &vars,
    );
    let share = roots.json()["roots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == env.tmp.path().join("share").to_str().unwrap())
        .cloned()
        .unwrap();
    assert_eq!(share["covers_state_root"], true, "{share}");
}

/// Regression: with `/` allowed, `upload check /proc/self/cmdline` succeeded. A pseudo-file is
/// refused with `pseudo_file`, whatever the allowlist says.
#[test]
fn check_refuses_pseudo_files_even_under_an_allowed_root() {
    let env = world();
    std::fs::write(env.root().join(".upload-roots"), "/proc\n/dev\n").unwrap();
    for path in ["/proc/self/cmdline", "/proc/self/environ", "/dev/null"] {
        let run = env.run(&["--json", "upload", "check", path], b"");
        assert_eq!(
            (run.status, run.code().as_str()),
            (3, "pseudo_file"),
            "{path}: {run:?}"
        );
    }
}

/// Regression: `upload check ""` was a usage error (exit 2) while the agent's `upload_resolve`
/// answers `relative_path`: the path is the library's to judge, for both.
#[test]
fn an_empty_path_is_a_relative_path_as_for_the_agent() {
    let env = world();
    for args in [
        &["--json", "upload", "check", ""][..],
        &["--json", "upload", "send", "", "--", "true"][..],
    ] {
        let run = env.run(args, b"");
        assert_eq!(
            (run.status, run.code().as_str()),
            (3, "relative_path"),
            "{args:?}: {run:?}"
        );
    }
}

/// Regression: `upload roots` said whether a root lay *inside* the state root: an ancestor of
/// the state root was `false`, a folder inside it `true`.
#[test]
fn roots_say_which_contain_the_state_root() {
    let env = world();
    let inner = env.root().join("inner");
    std::fs::create_dir(&inner).unwrap();
    // The state root itself contains it (an ancestor would also hold the test's home folder,
    // which is never an upload root; the library's test has the ancestors).
    let lines = format!(
        "{}\n{}\n{}\n",
        env.root().display(),
        inner.display(),
        env.tmp.path().join("share").display()
    );
    std::fs::write(env.root().join(".upload-roots"), lines).unwrap();
    let roots = env.run(&["--json", "upload", "roots"], b"").json();
    let covers = |path: &std::path::Path| {
        roots["roots"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["path"] == path.to_str().unwrap())
            .unwrap_or_else(|| panic!("{path:?} in {roots}"))["covers_state_root"]
            .clone()
    };
    assert_eq!(covers(&env.root()), true);
    assert_eq!(covers(&inner), false);
    assert_eq!(covers(&env.tmp.path().join("share")), false);
    assert_eq!(covers(&env.root().join(".downloads")), false);
}

/// Regression: the walk through links followed a link whose text ends in `/` to a regular
/// file; the kernel answers ENOTDIR.
#[test]
fn check_refuses_a_link_ending_in_a_slash_to_a_file() {
    let env = world();
    let share = env.tmp.path().join("share");
    std::os::unix::fs::symlink("deck.txt/", share.join("deck-slash")).unwrap();
    std::os::unix::fs::symlink("deck.txt", share.join("deck-link")).unwrap();
    let check = |path: &std::path::Path| {
        env.run(&["--json", "upload", "check", path.to_str().unwrap()], b"")
    };
    assert_eq!(check(&share.join("deck-link")).status, 0);
    let slash = check(&share.join("deck-slash"));
    assert_eq!(
        (slash.status, slash.code().as_str()),
        (3, "not_found"),
        "{slash:?}"
    );
}

/// Regression: the walk through links followed links on a mount made `nosymfollow`, where
/// the kernel follows none. Mounting needs root (CI runs as root).
#[test]
fn check_follows_no_link_on_a_nosymfollow_mount() {
    let env = world();
    let check = |path: &std::path::Path| {
        env.run(&["--json", "upload", "check", path.to_str().unwrap()], b"")
    };
    let disk = safe_lanes_testkit::disk::SmallDisk::mount_as_root_with("1m", "nosymfollow");
    std::fs::write(disk.path.join("file.txt"), "file").unwrap();
    std::os::unix::fs::symlink("file.txt", disk.path.join("link")).unwrap();
    let lines = format!("{}\n", disk.path.display());
    std::fs::write(env.root().join(".upload-roots"), lines).unwrap();
    assert_eq!(check(&disk.path.join("file.txt")).status, 0);
    let link = check(&disk.path.join("link"));
    assert_eq!(
        (link.status, link.code().as_str()),
        (3, "symlink_escape"),
        "{link:?}"
    );
}
