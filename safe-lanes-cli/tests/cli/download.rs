//! `download save | list | prune`.

use crate::util::{Env, tree};

#[test]
fn save_prints_the_contract_json() {
    let env = Env::new();
    let run = env.run(
        &["--json", "download", "save", "--name", "../../.bashrc"],
        b"payload",
    );
    assert_eq!(run.status, 0, "{run:?}");
    let json = run.json();
    assert_eq!(json["name"], "bashrc");
    assert_eq!(json["bytes"], 7);
    assert_eq!(
        json["sha256"],
        "239f59ed55e737c77147cf55ad0c1b030b6d7ee748a7426952f9b852d5a935e5"
    );
    let path = json["path"].as_str().unwrap();
    assert_eq!(
        std::path::Path::new(path),
        env.root().join(".downloads/bashrc")
    );
    assert_eq!(std::fs::read(path).unwrap(), b"payload");
}

#[test]
fn save_reads_a_file_argument_and_dash_as_stdin() {
    let env = Env::new();
    let input = env.tmp.path().join("input.txt");
    std::fs::write(&input, "from file").unwrap();
    let run = env.run(
        &[
            "--json",
            "download",
            "save",
            "--name",
            "a.txt",
            input.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(
        std::fs::read_to_string(run.json()["path"].as_str().unwrap()).unwrap(),
        "from file"
    );
    let run = env.run(
        &["--json", "download", "save", "--name", "a.txt", "-"],
        b"from stdin",
    );
    assert_eq!(run.json()["name"], "a (1).txt");
}

#[test]
fn hostile_names_write_nothing_outside_the_lane() {
    let env = Env::new();
    let hints = [
        "../../../../../../tmp/evil",
        "/etc/cron.d/evil",
        "~/.bashrc",
        "..\\..\\evil.bat",
        ".bashrc",
        ".config/autostart/x.desktop",
        "-rf",
        "CON",
        "x\u{202E}fdp.exe",
        "..",
        "",
    ];
    // Once with --root, once with the default root under HOME.
    for with_root in [true, false] {
        for hint in hints {
            let run = if with_root {
                env.run(&["--json", "download", "save", "--name", hint], b"x")
            } else {
                env.run_raw(&["--json", "download", "save", "--name", hint], b"x")
            };
            assert_eq!(run.status, 0, "{hint:?}: {run:?}");
        }
    }
    assert!(
        tree(&env.cwd()).is_empty(),
        "nothing in the working directory"
    );
    let home = tree(&env.home());
    assert!(
        home.iter().all(|p| p.starts_with(".local")),
        "only the default state root under HOME: {home:?}"
    );
    for root in [env.root(), env.home().join(".local/state/safe-lanes")] {
        let files = tree(&root.join(".downloads"));
        assert_eq!(files.len(), hints.len(), "{files:?}");
        assert!(
            files
                .iter()
                .all(|f| !f.contains('/') && !f.starts_with('.')),
            "{files:?}"
        );
    }
    let outside: Vec<_> = tree(env.tmp.path())
        .into_iter()
        .filter(|p| !p.starts_with("state") && !p.starts_with("home") && p != "cwd")
        .collect();
    assert!(outside.is_empty(), "{outside:?}");
}

#[test]
fn a_size_cap_breach_is_refused_with_exit_3() {
    let env = Env::new();
    let run = env.run(
        &[
            "--json",
            "download",
            "save",
            "--name",
            "big",
            "--max-bytes",
            "3",
        ],
        b"four",
    );
    assert_eq!(run.status, 3);
    assert_eq!(run.code(), "too_large");
    assert!(tree(&env.root().join(".downloads")).is_empty());
}

#[test]
fn an_unreadable_input_file_is_an_operational_failure() {
    let env = Env::new();
    let run = env.run(
        &[
            "--json",
            "download",
            "save",
            "--name",
            "x",
            "/nonexistent/input",
        ],
        b"",
    );
    assert_eq!(run.status, 1, "{run:?}");
    assert_eq!(run.code(), "io");
}

#[test]
fn list_and_prune() {
    let env = Env::new();
    for name in ["b.txt", "a.txt"] {
        assert_eq!(
            env.run(&["download", "save", "--name", name], b"x").status,
            0
        );
    }
    let run = env.run(&["--json", "download", "list"], b"");
    let names: Vec<_> = run.json()["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["a.txt", "b.txt"]);
    let old = env.root().join(".downloads/a.txt");
    std::fs::File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(40 * 86_400))
        .unwrap();
    let run = env.run(
        &["--json", "download", "prune", "--older-than", "30days"],
        b"",
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.json()["removed"][0]["name"], "a.txt");
    assert!(!old.exists());
    let text = env.run(&["download", "prune", "--older-than", "1h"], b"");
    assert_eq!(text.stdout.trim(), "nothing to remove");
    let bad = env.run(&["download", "prune", "--older-than", "soon"], b"");
    assert_eq!(bad.status, 2, "a usage error");
}
