//! Ordinary work through a command's layer, through the real server, as the user running the
//! tests (root in CI) and as uid 65534: files and folders created, changed, removed and
//! renamed, a link, an executable bit, a git repository with a branch and a merge, a cargo
//! build, a virtual environment with a package installed, a background job — all of it in the
//! folder when the command ends, nothing held, and the human's own tools use it. A command
//! never overwrites what the human changed meanwhile, and two commands on one grant each
//! publish their own.

use std::os::unix::fs::PermissionsExt;

use serde_json::Value;

use crate::lab::{Entry, Lab, background, held_list, job_end, job_until, shell, triples};

/// A wheel of the package `thepkg` (`VALUE = 7`), written by hand with Python's `zipfile`:
/// installing it needs no network and no build backend. Run with the wheel's path.
const MAKE_WHEEL: &str = r#"
import base64, hashlib, sys, zipfile
files = {
    "thepkg/__init__.py": b"VALUE = 7\n",
    "thepkg-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: thepkg\nVersion: 0.1\n",
    "thepkg-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = ""
for name, data in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record += f"{name},sha256={digest},{len(data)}\n"
record += "thepkg-0.1.dist-info/RECORD,,\n"
files["thepkg-0.1.dist-info/RECORD"] = record.encode()
with zipfile.ZipFile(sys.argv[1], "w") as wheel:
    for name, data in files.items():
        wheel.writestr(name, data)
"#;

/// The ordinary work of one command, in `proj`; `set -e`, so it prints `WORK DONE` only when
/// every step worked.
const WORK: &str = r#"set -e
echo new > new.txt
mkdir -p newdir/deep && echo deep > newdir/deep/file.txt
echo two >> mod.txt
rm old.txt
rm -r dir-old
mv ren.txt renamed.txt
mv dir-ren dir-renamed
ln -s new.txt link.txt
printf '#!/bin/sh\necho the agent script ran\n' > run.sh && chmod +x run.sh
export GIT_AUTHOR_NAME=Agent GIT_AUTHOR_EMAIL=agent@example.com
export GIT_COMMITTER_NAME=Agent GIT_COMMITTER_EMAIL=agent@example.com
git init -q repo
cd repo
echo a > a.txt && git add a.txt && git commit -q -m first
git checkout -q -b feature
echo b > b.txt && git add b.txt && git commit -q -m feature
git checkout -q -
git merge -q --no-ff -m merged feature
cd ..
python3 -m venv v
v/bin/pip install -q --no-index --no-cache-dir --disable-pip-version-check wheels/thepkg-0.1-py3-none-any.whl
"#;

/// A cargo build of a crate the command writes, for a user who can run cargo.
const BUILD: &str = r#"mkdir -p hello/src
printf '[package]\nname = "hello"\nversion = "0.1.0"\nedition = "2021"\n' > hello/Cargo.toml
printf 'fn main() { println!("hello from the agent build"); }\n' > hello/src/main.rs
(cd hello && CARGO_HOME=/tmp/cargo-home cargo build --offline -q)
"#;

/// Wait in a background job until the human creates `<gate>/NAME` (the gate is a read-only
/// grant: the human's file shows at once).
fn wait_for(name: &str) -> String {
    format!(r#"while [ ! -e "$WORKFLOW_FOLDER_GATE/{name}" ]; do sleep 0.05; done"#)
}

/// Let the jobs waiting for `name` go on.
fn open_gate(lab: &Lab, name: &str) {
    std::fs::write(lab.p("gate").join(name), "").unwrap();
}

/// How many changes a command published (its `changes`), checking that it held nothing.
fn published_only(who: &str, changes: &Value) -> u64 {
    assert_eq!(changes["held"], serde_json::json!([]), "{who}: {changes}");
    assert!(changes["set"].is_null(), "{who}: no set is held: {changes}");
    changes["published"].as_u64().unwrap()
}

#[tokio::test]
async fn ordinary_work_lands_in_the_folder_when_the_command_ends() {
    for lab in Lab::both() {
        let who = lab.who();
        let proj = lab.p("proj");
        for (rel, text) in [
            ("mod.txt", "one\n"),
            ("old.txt", "old\n"),
            ("ren.txt", "renamed\n"),
            ("dir-old/x", "x\n"),
            ("dir-ren/y", "y\n"),
        ] {
            let path = proj.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        std::fs::create_dir(proj.join("wheels")).unwrap();
        lab.give();
        lab.human_ok(
            "python3",
            &["-c", MAKE_WHEEL, "wheels/thepkg-0.1-py3-none-any.whl"],
            &proj,
        );
        lab.grant_proj();
        lab.grant("gate", "gate", "read_only");
        // The gateway's commands reach the toolchain through tool grants, which its user
        // must be able to open: a toolchain lent to the human's programs is not theirs.
        let rustup = lab.cargo().filter(|r| !lab.lends(r));
        if let Some(rustup) = &rustup {
            for (alias, path, extra) in [
                ("cargo", &rustup.cargo_home, ["--bin", "bin"]),
                ("rustup", &rustup.rustup_home, ["--var", "RUSTUP_HOME"]),
            ] {
                lab.cli(&[
                    "grant",
                    "add",
                    "--alias",
                    alias,
                    "--path",
                    path.to_str().unwrap(),
                    "--kind",
                    "tool",
                    extra[0],
                    extra[1],
                    "--reason",
                    "builds",
                ]);
            }
        }
        let client = lab.server(&[]).await;

        let script = match &rustup {
            Some(_) => format!("{WORK}{BUILD}echo WORK DONE\n"),
            None => format!("{WORK}echo WORK DONE\n"),
        };
        let result = shell(&client, &script).await;
        assert_eq!(result["exit_code"], 0, "{who}: {result}");
        assert!(
            result["stdout"].as_str().unwrap().contains("WORK DONE"),
            "{who}: {result}"
        );
        let published = published_only(&who, &result["changes"]);
        assert!(published > 0, "{who}: {result}");

        // Files and folders: created, changed, removed, renamed; a link; an executable.
        let read = |rel: &str| std::fs::read_to_string(proj.join(rel)).ok();
        assert_eq!(read("new.txt").as_deref(), Some("new\n"), "{who}");
        assert_eq!(
            read("newdir/deep/file.txt").as_deref(),
            Some("deep\n"),
            "{who}"
        );
        assert_eq!(read("mod.txt").as_deref(), Some("one\ntwo\n"), "{who}");
        assert_eq!(read("renamed.txt").as_deref(), Some("renamed\n"), "{who}");
        assert_eq!(read("dir-renamed/y").as_deref(), Some("y\n"), "{who}");
        for gone in ["old.txt", "dir-old", "ren.txt", "dir-ren"] {
            assert_eq!(
                Entry::of(&proj.join(gone)),
                Entry::Absent,
                "{who}: {gone} was removed"
            );
        }
        assert_eq!(
            Entry::of(&proj.join("link.txt")),
            Entry::Link("new.txt".into()),
            "{who}: the link"
        );
        assert_eq!(read("link.txt").as_deref(), Some("new\n"), "{who}");
        let mode = std::fs::metadata(proj.join("run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111, "{who}: run.sh is executable: {mode:o}");
        let ran = lab.human_ok("./run.sh", &[], &proj);
        assert_eq!(ran, "the agent script ran\n", "{who}");

        // The repository the command made, with its branch and merge.
        let log = lab.git_in("proj/repo", &["log", "--topo-order", "--format=%s"]);
        assert_eq!(
            log, "merged\nfeature\nfirst\n",
            "{who}: the agent's history"
        );
        let status = lab.git_in("proj/repo", &["status", "--porcelain"]);
        assert_eq!(status, "", "{who}: the working tree is clean");
        lab.git_in("proj/repo", &["fsck", "--no-progress"]);
        lab.git_in(
            "proj/repo",
            &["commit", "-q", "--allow-empty", "-m", "the human's"],
        );

        // The environment and the package installed in it.
        let imported = lab.human_ok(
            "v/bin/python",
            &["-c", "import thepkg; print(thepkg.VALUE)"],
            &proj,
        );
        assert_eq!(imported, "7\n", "{who}: the installed package imports");

        match rustup {
            Some(_) => {
                let hello = lab.human_ok("./hello/target/debug/hello", &[], &proj);
                assert_eq!(hello, "hello from the agent build\n", "{who}");
            }
            None => assert!(
                !lab.is_runner(),
                "{who}: the cargo build is skipped only for a user the toolchain is out of reach of"
            ),
        }

        // A background job: what it writes is in the folder only once it ended.
        let mut job = background(
            &client,
            &format!("echo out > bg.txt && echo WRITTEN\n{}\n", wait_for("bg-go")),
        )
        .await;
        let (running, seen) = job_until(&client, &mut job, "WRITTEN").await;
        assert!(running && seen.contains("WRITTEN"), "{who}: {seen}");
        assert_eq!(
            Entry::of(&proj.join("bg.txt")),
            Entry::Absent,
            "{who}: nothing reaches the folder while the job runs"
        );
        open_gate(&lab, "bg-go");
        let report = job_end(&client, job).await;
        assert_eq!(report["exit_code"], 0, "{who}: {report}");
        assert_eq!(
            published_only(&who, &report["changes"]),
            1,
            "{who}: {report}"
        );
        assert_eq!(read("bg.txt").as_deref(), Some("out\n"), "{who}");
        drop(client);
        assert!(lab.held_sets().is_empty(), "{who}: nothing is held");
    }
}

#[tokio::test]
async fn the_humans_edit_meanwhile_wins_and_two_jobs_both_land() {
    for lab in Lab::both() {
        let who = lab.who();
        let proj = lab.p("proj");
        std::fs::write(proj.join("notes.txt"), "the human's first draft\n").unwrap();
        lab.give();
        lab.grant_proj();
        lab.grant("gate", "gate", "read_only");
        let client = lab.server(&[]).await;

        // The human rewrites the file while the command waits to append to it.
        let mut job = background(
            &client,
            &format!(
                "echo READY\n{}\necho \"the agent's line\" >> notes.txt && echo APPENDED\n",
                wait_for("conflict-go")
            ),
        )
        .await;
        let (running, seen) = job_until(&client, &mut job, "READY").await;
        assert!(running, "{who}: the job waits for the human: {seen}");
        std::fs::write(proj.join("notes.txt"), "the human's rewrite\n").unwrap();
        open_gate(&lab, "conflict-go");
        let report = job_end(&client, job).await;
        assert!(
            report["stdout"].as_str().unwrap().contains("APPENDED"),
            "{who}: {report}"
        );
        let conflict = triples(&[("proj", "notes.txt", "conflict")]);
        assert_eq!(
            held_list(&report["changes"]["held"]),
            conflict,
            "{who}: {report}"
        );
        let set = report["changes"]["set"].as_str().expect("a held set");
        assert_eq!(
            std::fs::read_to_string(proj.join("notes.txt")).unwrap(),
            "the human's rewrite\n",
            "{who}: the human's edit is kept"
        );
        let sets = lab.held_sets();
        assert_eq!(sets.len(), 1, "{who}: {sets:?}");
        assert_eq!(sets[0]["id"], set, "{who}: {sets:?}");
        assert_eq!(held_list(&sets[0]["held"]), conflict, "{who}: {sets:?}");

        // Two commands on one grant at once, each writing its own file.
        let mut jobs = Vec::new();
        for name in ["a", "b"] {
            let script = format!(
                "echo {name} > {name}.txt && echo STARTED\n{}\n",
                wait_for("jobs-go")
            );
            jobs.push(background(&client, &script).await);
        }
        for job in &mut jobs {
            let (running, seen) = job_until(&client, job, "STARTED").await;
            assert!(running, "{who}: both jobs run at once: {seen}");
        }
        open_gate(&lab, "jobs-go");
        for job in jobs {
            let report = job_end(&client, job).await;
            assert_eq!(report["exit_code"], 0, "{who}: {report}");
            assert_eq!(
                published_only(&who, &report["changes"]),
                1,
                "{who}: {report}"
            );
        }
        for name in ["a", "b"] {
            assert_eq!(
                std::fs::read_to_string(proj.join(format!("{name}.txt"))).unwrap(),
                format!("{name}\n"),
                "{who}: {name}.txt landed"
            );
        }
        drop(client);
        assert_eq!(lab.held_sets().len(), 1, "{who}: only the conflict is held");
    }
}
