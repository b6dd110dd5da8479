//! Secrets inside a grant (ADR 0031), through the real server, as the user running the tests
//! (root in CI) and as uid 65534: a confined command can neither read nor list a hidden
//! `.env`, key or `.ssh/` — directly, through a link, after renaming the folder holding it, in
//! a read-write grant and a read-only one — nor write over one; what it writes to a hidden
//! path is held for the human, never published; the project's own files and a secret's
//! examples are read as ever.

use crate::lab::{Lab, held_list, shell, shell_in, triples};

/// The secrets each grant holds, each with the one line it says.
const SECRETS: &[(&str, &str)] = &[
    (".env", "SECRET-ENV"),
    (".ssh/id_ed25519", "SECRET-SSH"),
    ("deploy/tls.pem", "-----BEGIN PRIVATE KEY----- SECRET-PEM"),
    (".npmrc", "//r.example/:_authToken=SECRET-NPM"),
    ("deep/a/b/.aws/credentials", "SECRET-AWS"),
];

/// What the command tries, each attempt's status printed; `set +e`, every line runs.
const TRIES: &str = r#"set +e
for f in .env notes.txt .ssh/id_ed25519 deploy/tls.pem .npmrc deep/a/b/.aws/credentials; do
  cat "$f"; echo "read $f: $?"
done
ls -A .ssh; echo "list .ssh: $?"
ls -A deep/a/b/.aws; echo "list .aws: $?"
mv deploy moved && cat moved/tls.pem; echo "moved: $?"
grep -r SECRET . ; echo "grep: $?"
cat .env.example README.md cacert.pem
"#;

#[tokio::test]
async fn a_command_neither_reads_nor_lists_nor_overwrites_a_hidden_path() {
    for lab in Lab::both() {
        let who = lab.who();
        for grant in ["proj", "gate", "outside"] {
            let dir = lab.p(grant);
            for (rel, text) in SECRETS {
                let path = dir.join(rel);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, format!("{text}\n")).unwrap();
            }
            std::fs::write(dir.join(".env.example"), "TOKEN=example\n").unwrap();
            std::fs::write(dir.join("README.md"), "the project\n").unwrap();
            std::fs::write(dir.join("cacert.pem"), "-----BEGIN CERTIFICATE-----\n").unwrap();
            std::os::unix::fs::symlink(".env", dir.join("notes.txt")).unwrap();
        }
        // A grant that is itself a secret's folder: all of it is hidden.
        let keys = lab.p("home/.ssh");
        std::fs::create_dir_all(&keys).unwrap();
        std::fs::write(keys.join("known_hosts"), "SECRET-KNOWN\n").unwrap();
        lab.give();
        lab.grant_proj();
        lab.grant("gate", "gate", "read_only");
        lab.grant("keys", "home/.ssh", "read_only");
        lab.cli(&[
            "grant",
            "add",
            "--alias",
            "outside",
            "--path",
            lab.p("outside").to_str().unwrap(),
            "--access",
            "read_write",
            "--direct",
            "--reason",
            "written at once",
        ]);
        let client = lab.server(&[]).await;
        let listed = crate::lab::ok(&client, "folder_grants_list", serde_json::json!({})).await;
        for grant in listed["grants"].as_array().unwrap() {
            let hidden = grant["hidden"]
                .as_array()
                .expect("each folder says what it hides");
            assert!(hidden.iter().any(|p| p == ".env"), "{who}: {grant}");
        }
        for grant in ["proj", "gate", "outside"] {
            let out = shell_in(&client, grant, TRIES).await;
            let stdout = out["stdout"].as_str().unwrap();
            let all = format!("{stdout}{}", out["stderr"].as_str().unwrap());
            assert!(
                !all.contains("SECRET"),
                "{who} {grant}: a secret was read: {all}"
            );
            for tried in [
                "read .env",
                "read notes.txt",
                "read .ssh/id_ed25519",
                "read deploy/tls.pem",
                "read .npmrc",
                "read deep/a/b/.aws/credentials",
                "list .ssh",
                "list .aws",
                "moved",
            ] {
                assert!(
                    !stdout.contains(&format!("{tried}: 0")),
                    "{who} {grant}: {tried} succeeded: {all}"
                );
            }
            assert!(stdout.contains("TOKEN=example"), "{who} {grant}: {all}");
            assert!(stdout.contains("the project"), "{who} {grant}: {all}");
            assert!(stdout.contains("BEGIN CERTIFICATE"), "{who} {grant}: {all}");
        }
        // In the direct grant the rename itself went through: the cover went with the folder.
        assert!(
            lab.p("outside/moved/tls.pem").exists(),
            "{who}: the direct grant's folder was renamed"
        );
        let out = shell_in(&client, "keys", "cat known_hosts; ls -A .; echo listed").await;
        let all = format!("{}{}", out["stdout"], out["stderr"]);
        assert!(
            !all.contains("SECRET") && !all.contains("known_hosts\\n"),
            "{who}: {all}"
        );

        // Writing over a secret fails; writing a new one is held, never published.
        let out = shell(
            &client,
            "echo changed > .env; echo \"over: $?\"; echo '-----BEGIN PRIVATE KEY-----' > new.key; mkdir .gnupg; \
             echo NEW > .gnupg/x; echo done",
        )
        .await;
        let stdout = out["stdout"].as_str().unwrap();
        assert!(stdout.contains("done"), "{who}: {out}");
        assert!(
            !stdout.contains("over: 0"),
            "{who}: .env was overwritten: {out}"
        );
        let held = held_list(&out["changes"]["held"]);
        assert_eq!(
            held,
            triples(&[
                ("proj", ".gnupg", "hidden_path"),
                ("proj", "new.key", "hidden_path"),
            ]),
            "{who}: {out}"
        );
        let proj = lab.p("proj");
        assert_eq!(
            std::fs::read_to_string(proj.join(".env")).unwrap(),
            "SECRET-ENV\n",
            "{who}"
        );
        assert!(
            !proj.join("new.key").exists(),
            "{who}: a new key was published"
        );
        assert!(
            proj.join("deploy/tls.pem").exists(),
            "{who}: the rename was published"
        );

        // A secret the human adds between two commands of the same server is hidden from the
        // next one (what a search found is kept only while nothing in the folder changed).
        for round in 0..2 {
            let late = proj.join(format!("late{round}"));
            std::fs::create_dir_all(&late).unwrap();
            std::fs::write(
                late.join(".env.local"),
                "SECRET-LATE
",
            )
            .unwrap();
            lab.give();
            let out = shell(
                &client,
                &format!("cat late{round}/.env.local; echo \"rc: $?\""),
            )
            .await;
            let stdout = out["stdout"].as_str().unwrap();
            assert!(!stdout.contains("SECRET"), "{who}: {out}");
            assert!(!stdout.contains("rc: 0"), "{who}: {out}");
        }
    }
}

/// The human's own patterns: `--hide` hides more in one grant, `--unhide` shows what the list
/// would hide; both recorded, listed, and in force for the next command, patch and write.
#[tokio::test]
async fn the_human_hides_more_or_shows_a_secret_looking_file_per_grant() {
    let lab = Lab::new(rustix::process::geteuid().as_raw());
    let proj = lab.p("proj");
    std::fs::write(proj.join(".env"), "NOT_SECRET=1\n").unwrap();
    std::fs::create_dir_all(proj.join("data")).unwrap();
    std::fs::write(proj.join("data/app.sqlite"), "SECRET-DB\n").unwrap();
    lab.give();
    lab.grant_proj();
    let set = lab.cli(&[
        "grant",
        "set-hidden",
        "proj",
        "--hide",
        "*.sqlite",
        "--unhide",
        ".env",
        "--reason",
        "the .env holds no secret; the database does",
    ]);
    assert_eq!(set["hide"], serde_json::json!(["*.sqlite"]), "{set}");
    let client = lab.server(&[]).await;
    let listed = crate::lab::ok(&client, "folder_grants_list", serde_json::json!({})).await;
    let grant = &listed["grants"][0];
    assert!(
        grant["hidden"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == "*.sqlite"),
        "{grant}"
    );
    assert_eq!(grant["unhidden"], serde_json::json!([".env"]), "{grant}");
    let out = shell(
        &client,
        "cat .env; cat data/app.sqlite; echo \"db: $?\"; echo new > data/more.sqlite",
    )
    .await;
    let stdout = out["stdout"].as_str().unwrap();
    assert!(stdout.contains("NOT_SECRET=1"), "{out}");
    assert!(
        !stdout.contains("SECRET-DB") && !stdout.contains("db: 0"),
        "{out}"
    );
    assert_eq!(
        held_list(&out["changes"]["held"]),
        triples(&[("proj", "data/more.sqlite", "hidden_path")]),
        "{out}"
    );
    let diff = "--- a/.env\n+++ b/.env\n@@ -1 +1 @@\n-NOT_SECRET=1\n+NOT_SECRET=2\n";
    crate::lab::ok(
        &client,
        "folder_patch",
        serde_json::json!({"alias": "proj", "path": ".env", "diff": diff}),
    )
    .await;
    let records = safe_lanes_testkit::audit::records(&lab.p("state"));
    let set: Vec<_> = records
        .iter()
        .filter(|r| r["event"] == "grant.set_hidden")
        .collect();
    assert_eq!(set.len(), 1, "one record for the change: {records:?}");
    let log = lab.cli(&["grant", "log"]);
    let entry = log["changelog"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["action"] == "set_hidden")
        .expect("the changelog's entry");
    assert_eq!(entry["unhide"], serde_json::json!([".env"]), "{entry}");
    // A read-write grant that is itself a secret's folder: nothing in it is patched.
    let aws = lab.p("home/.aws");
    std::fs::create_dir_all(&aws).unwrap();
    std::fs::write(aws.join("credentials"), "[default]\nkey = SECRET-AWS\n").unwrap();
    lab.give();
    lab.grant("aws", "home/.aws", "read_write");
    let diff = "--- a/credentials\n+++ b/credentials\n@@ -1 +1 @@\n-[default]\n+[other]\n";
    let refused = crate::lab::call(
        &client,
        "folder_patch",
        serde_json::json!({"alias": "aws", "path": "credentials", "diff": diff}),
    )
    .await;
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    let text = format!("{refused:?}");
    assert!(text.contains("hidden_path"), "{text}");
    let out = lab.cli_fails(&[
        "grant",
        "add",
        "--alias",
        "more",
        "--path",
        lab.p("outside").to_str().unwrap(),
        "--access",
        "read_only",
        "--hide",
        "/abs",
        "--reason",
        "x",
    ]);
    assert_eq!(out["error"]["code"], "invalid_argument", "{out}");
    let listed = lab.cli(&["grant", "list"]);
    assert!(
        !listed["grants"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["alias"] == "more"),
        "no grant is left half made: {listed}"
    );
    for bad in ["/etc/passwd", "a/../b", ""] {
        let out = lab.cli_fails(&[
            "grant",
            "set-hidden",
            "proj",
            "--hide",
            bad,
            "--reason",
            "x",
        ]);
        assert_eq!(out["error"]["code"], "invalid_argument", "{bad}: {out}");
    }
}
