//! Approvals bind to the change the human was shown: `grant show`, a pasted line refused when
//! the change is no longer what it says, and `grant approve` / `grant review` on a real
//! pseudo-terminal (through `script`).

use std::io::Write;
use std::process::{Command, Stdio};

use crate::util::Env;

fn world() -> Env {
    let env = Env::new();
    for d in ["docs", "other", "new"] {
        std::fs::create_dir(env.tmp.path().join(d)).unwrap();
    }
    env
}

fn path(env: &Env, dir: &str) -> String {
    env.tmp.path().join(dir).display().to_string()
}

/// `grant request` as the agent files it; the request id.
fn request(env: &Env, alias: &str, access: &str, dir: Option<&str>, reason: &str) -> String {
    let mut args = vec![
        "--json", "grant", "request", "--alias", alias, "--access", access,
    ];
    args.extend(["--reason", reason]);
    let folder = dir.map(|d| path(env, d));
    if let Some(folder) = &folder {
        args.extend(["--path", folder.as_str()]);
    }
    let run = env.run(&args, b"");
    assert_eq!(run.status, 0, "{run:?}");
    run.json()["id"].as_str().unwrap().to_owned()
}

/// The words of an approve line after `safe-lanes --root R`.
fn approve_args(line: &str) -> Vec<String> {
    line[line.find("grant approve").unwrap()..]
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Grant `docs` read-only, as the human; its folder.
fn grant_docs_read_only(env: &Env) -> String {
    let docs = path(env, "docs");
    let add = [
        "grant",
        "add",
        "--reason",
        "test",
        "--alias",
        "docs",
        "--path",
        &docs,
        "--access",
        "read_only",
    ];
    assert_eq!(env.run(&add, b"").status, 0);
    docs
}

/// `--json` and the words of the approve line `grant show` prints for `id`.
fn shown_approve(env: &Env, id: &str) -> Vec<String> {
    let shown = env.run(&["--json", "grant", "show", id], b"").json();
    let mut args = vec!["--json".to_owned()];
    args.extend(approve_args(shown["approve_with"].as_str().unwrap()));
    args
}

#[test]
fn show_spells_out_a_widening_and_quotes_the_reason_on_its_own_lines() {
    let env = world();
    let docs = grant_docs_read_only(&env);
    let reason = "fix typos\nreviewed and approved by security: /tmp/share";
    let id = request(&env, "docs", "read_write", None, reason);
    let shown = env.run(&["grant", "show", &id], b"");
    assert_eq!(shown.status, 0, "{shown:?}");
    let text = &shown.stdout;
    assert!(
        text.contains(&format!(
            "change:  `docs`: read_only → read_write at {docs}"
        )),
        "{text}"
    );
    // The reason is quoted, line by line, after the change: it cannot pose as a path.
    assert!(
        text.contains("    | fix typos\n    | reviewed and approved by security: /tmp/share"),
        "{text}"
    );
    assert!(text.find("change:").unwrap() < text.find("reason:").unwrap());
    let json = env.run(&["--json", "grant", "show", &id], b"").json();
    assert_eq!(json["change"]["kind"], "change");
    assert_eq!(
        (json["change"]["from"].clone(), json["change"]["to"].clone()),
        ("read_only".into(), "read_write".into())
    );
    assert!(
        json["approve_with"]
            .as_str()
            .unwrap()
            .contains("--alias docs --access read_write")
    );
}

#[test]
fn a_pasted_line_is_refused_when_the_change_is_no_longer_what_it_says() {
    let env = world();
    let (docs, other) = (path(&env, "docs"), path(&env, "other"));
    let add = |dir: &str| {
        [
            "grant",
            "add",
            "--reason",
            "test",
            "--alias",
            "docs",
            "--path",
            dir,
            "--access",
            "read_only",
        ]
        .map(str::to_owned)
    };
    assert_eq!(
        env.run(&add(&docs).each_ref().map(String::as_str), b"")
            .status,
        0
    );
    let id = request(&env, "docs", "read_write", None, "edit the docs");
    let args = shown_approve(&env, &id);
    // Meanwhile `docs` now names another folder: the same request would widen that one.
    assert_eq!(
        env.run(&["grant", "revoke", "--reason", "test", "docs"], b"")
            .status,
        0
    );
    assert_eq!(
        env.run(&add(&other).each_ref().map(String::as_str), b"")
            .status,
        0
    );
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.extend(["--reason", "edits"]);
    let run = env.run(&args, b"");
    assert_eq!(
        (run.status, run.code()),
        (3, "invalid_argument".to_owned()),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("does not describe the change"),
        "{}",
        run.stdout
    );
    let list = env.run(&["--json", "grant", "list"], b"").json();
    assert_eq!(
        list["grants"][0]["access"], "read_only",
        "nothing was widened"
    );
    // Spelled out without a terminal but wrong: refused too.
    let wrong = [
        "--json",
        "grant",
        "approve",
        "--reason",
        "test",
        &id,
        "--alias",
        "docs",
        "--access",
        "read_only",
    ];
    assert_eq!(env.run(&wrong, b"").code(), "invalid_argument");
}

/// Ctrl-D as the terminal receives it: the end of input for the question being asked.
const CTRL_D: &str = "\u{4}";

/// Run `safe-lanes --root R ARGS` on a pseudo-terminal (`script`), typing `input`.
fn on_a_terminal(env: &Env, args: &[&str], input: &str) -> (i32, String) {
    let mut command = format!(
        "{} --root {}",
        env!("CARGO_BIN_EXE_safe-lanes"),
        env.root().display()
    );
    for arg in args {
        command.push(' ');
        command.push_str(arg);
    }
    let mut child = Command::new("script")
        .args(["-qefc", &command, "/dev/null"])
        .env("HOME", env.home())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script (util-linux) runs a command on a pseudo-terminal");
    let mut stdin = child.stdin.take().unwrap();
    for line in input.lines() {
        // One answer at a time, as a person types; Ctrl-D (EOT) alone, as a key.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let typed = if line == CTRL_D {
            CTRL_D.to_owned()
        } else {
            format!("{line}\n")
        };
        if stdin.write_all(typed.as_bytes()).is_err() {
            // It ended without asking more: what it printed says why.
            break;
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn on_a_terminal_approve_shows_the_change_and_asks() {
    let env = world();
    let id = request(&env, "docs", "read_only", Some("docs"), "read the spec");
    let (status, screen) = on_a_terminal(&env, &["grant", "approve", &id], "n");
    assert_eq!(status, 0, "{screen}");
    assert!(
        screen.contains(&format!(
            "new grant `docs` read_only at {}",
            path(&env, "docs")
        )),
        "{screen}"
    );
    assert!(screen.contains("Approve this change? [y/N]"), "{screen}");
    assert!(screen.contains("not approved"), "{screen}");
    let (status, screen) = on_a_terminal(&env, &["grant", "approve", &id], "y\nread the spec");
    assert_eq!(status, 0, "{screen}");
    assert!(screen.contains("approved docs read_only"), "{screen}");
}

#[test]
fn review_approves_and_denies_on_a_terminal() {
    let env = world();
    let first = request(&env, "docs", "read_only", Some("docs"), "read the spec");
    let second = request(&env, "other", "read_write", Some("other"), "scratch space");
    let third = request(&env, "new", "read_only", None, "a folder you pick");
    let new = path(&env, "new");
    // Approve the first, deny the second with a reason, approve the third choosing its folder.
    let input = format!("a\nlooks right\nd\nnot needed\na\n{new}\nok\n");
    let (status, screen) = on_a_terminal(&env, &["grant", "review"], &input);
    assert_eq!(status, 0, "{screen}");
    assert!(screen.contains("approved 2, denied 1"), "{screen}");
    let list = env.run(&["--json", "grant", "list"], b"").json();
    let aliases: Vec<&str> = list["grants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["alias"].as_str().unwrap())
        .collect();
    assert_eq!(aliases, ["docs", "new"]);
    assert!(list["requests"].as_array().unwrap().is_empty());
    let log = env.run(&["--json", "grant", "log"], b"").json();
    let denied = log["changelog"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["action"] == "deny")
        .unwrap();
    assert_eq!(denied["reason"], "not needed");
    let _ = (first, second, third);
}

/// Regression: in `grant review`, an empty reason, a folder typed as `~/…` or a relative one
/// ended the review with an error and never showed the remaining requests; `approve`, `yes`
/// or `x` silently skipped; there was no "n of N", no result after each decision, and with
/// nothing pending it said `approved 0, denied 0`. Every question now asks again, Ctrl-D
/// skips the current request only, and the review ends with a summary, exit 0.
#[test]
fn review_cannot_be_derailed() {
    let env = world();
    std::fs::create_dir(env.home().join("assets")).unwrap();
    request(&env, "docs", "read_only", Some("docs"), "read the spec");
    let other = request(&env, "other", "read_write", Some("other"), "scratch space");
    request(&env, "assets", "read_only", None, "a folder you pick");
    let input = [
        // 1 of 3: two answers it does not take, then the word; an empty reason, then one.
        "x",
        "yes",
        "approve",
        "",
        "the spec is needed",
        // 2 of 3: Ctrl-D at the question skips this request only.
        CTRL_D,
        // 3 of 3: a relative folder, then one typed from the home folder; a reason.
        "a",
        "assets",
        "~/assets",
        "",
        "its pictures",
    ]
    .join("\n");
    let (status, screen) = on_a_terminal(&env, &["grant", "review"], &input);
    assert_eq!(status, 0, "{screen}");
    for said in [
        "(1 of 3) request",
        "(2 of 3) request",
        "(3 of 3) request",
        "please answer a (approve), d (deny), s (skip) or q (quit)",
        "a reason is needed",
        "(1 of 3) approved docs read_only",
        &format!("(2 of 3) skipped (end of input): {other} stays pending"),
        "that folder cannot be granted: relative_path",
        "(3 of 3) approved assets read_only",
        "reviewed 3: approved 2, denied 0, left pending 1",
    ] {
        assert!(screen.contains(said), "{said:?} not in {screen}");
    }
    assert_eq!(
        screen.matches("please answer a (approve)").count(),
        2,
        "`x` and `yes` are asked again, `approve` is taken: {screen}"
    );
    let list = env.run(&["--json", "grant", "list"], b"").json();
    let granted: Vec<(&str, &str)> = list["grants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["alias"].as_str().unwrap(), g["path"].as_str().unwrap()))
        .collect();
    let assets = env.home().join("assets").display().to_string();
    assert_eq!(
        granted,
        [
            ("docs", path(&env, "docs").as_str()),
            ("assets", assets.as_str())
        ]
    );
    let log = env.run(&["--json", "grant", "log"], b"").json();
    let reasons: Vec<&str> = log["changelog"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["action"] == "approve")
        .map(|c| c["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["the spec is needed", "its pictures"]);

    // The one left: denied, its empty reason asked again.
    let (status, screen) = on_a_terminal(&env, &["grant", "review"], "d\n\nnot needed");
    assert_eq!(status, 0, "{screen}");
    assert!(screen.contains("(1 of 1) request"), "{screen}");
    assert!(screen.contains("a reason is needed"), "{screen}");
    assert!(
        screen.contains(&format!("(1 of 1) denied {other}")),
        "{screen}"
    );
    // Nothing pending: said as `grant requests` says it.
    let (status, screen) = on_a_terminal(&env, &["grant", "review"], "");
    assert_eq!(status, 0, "{screen}");
    assert!(screen.contains("no pending requests"), "{screen}");
    assert!(!screen.contains("approved 0"), "{screen}");
}

#[test]
fn review_needs_a_terminal() {
    let env = world();
    request(&env, "docs", "read_only", Some("docs"), "r");
    let run = env.run(&["--json", "grant", "review"], b"");
    assert_eq!(
        (run.status, run.code()),
        (3, "invalid_argument".to_owned()),
        "{run:?}"
    );
}

/// Regression: an approval that widened access recorded no `from`, and `--actor` was free
/// text that could pass for the agent. The changelog now says from what to what, and who by
/// the side's type (`uid:N`), with `--actor` only a name added to it.
#[test]
fn the_changelog_says_from_what_to_what_and_which_side() {
    let env = world();
    grant_docs_read_only(&env);
    let id = request(&env, "docs", "read_write", None, "edit");
    let mut args = shown_approve(&env, &id);
    args.extend([
        "--actor".to_owned(),
        "agent".to_owned(),
        "--reason".to_owned(),
        "ok".to_owned(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(env.run(&args, b"").status, 0);
    let log = env.run(&["--json", "grant", "log"], b"").json();
    let approved = log["changelog"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(approved["action"], "approve");
    assert_eq!(
        (approved["from"].clone(), approved["access"].clone()),
        ("read_only".into(), "read_write".into())
    );
    let actor = approved["actor"].as_str().unwrap();
    assert!(
        actor.starts_with("uid:") && actor.ends_with("(agent)"),
        "{actor}"
    );
    // Regression: the text said `uid:0` where the audit log says `root (uid:0)`: both name
    // the account as `audit show` does.
    let text = env.run(&["grant", "log"], b"").stdout;
    let audit = env
        .run(&["audit", "show", "--op", "grant.approve"], b"")
        .stdout;
    let shown = audit.split("  ").nth(1).expect("the actor column");
    assert!(
        text.lines()
            .last()
            .unwrap()
            .contains(&format!("by {shown}")),
        "{text}\n{audit}"
    );
}

/// Approving needs a reason (raising a grant's access included): refused without one, asked
/// for on a terminal.
#[test]
fn raising_a_grants_access_needs_a_reason() {
    let env = world();
    grant_docs_read_only(&env);
    let id = request(&env, "docs", "read_write", None, "edit");
    let args = shown_approve(&env, &id);
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = env.run(&words, b"");
    assert_eq!(
        (run.status, run.code()),
        (3, "invalid_argument".to_owned()),
        "{run:?}"
    );
    assert!(run.stdout.contains("gives no reason"), "{}", run.stdout);
    let (status, screen) =
        on_a_terminal(&env, &["grant", "approve", &id], "y\nthe agent fixes typos");
    assert_eq!(status, 0, "{screen}");
    assert!(screen.contains("reason (for the changelog)"), "{screen}");
    let log = env.run(&["--json", "grant", "log"], b"").json();
    let last = log["changelog"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["reason"], "the agent fixes typos");
}

/// Regression: add, revoke, deny, adopt and approve recorded `reason: ""`. Without a
/// terminal a change needs `--reason` (refused `invalid_argument`, nothing changed); on a
/// terminal it is asked for, again until one is typed.
#[test]
fn every_change_needs_a_reason_asked_on_a_terminal() {
    let env = world();
    let docs = path(&env, "docs");
    let add = [
        "--json",
        "grant",
        "add",
        "--alias",
        "docs",
        "--path",
        &docs,
        "--access",
        "read_only",
    ];
    let run = env.run(&add, b"");
    assert_eq!(
        (run.status, run.code()),
        (3, "invalid_argument".into()),
        "{run:?}"
    );
    assert!(run.stdout.contains("--reason"), "it says how: {run:?}");
    let list = env.run(&["--json", "grant", "list"], b"").json();
    assert!(list["grants"].as_array().unwrap().is_empty());
    let id = request(&env, "other", "read_only", Some("other"), "r");
    let deny = env.run(&["--json", "grant", "deny", &id], b"");
    assert_eq!(deny.code(), "invalid_argument", "{deny:?}");

    // On a terminal: asked, an empty answer asked again (after the confirmation a folder
    // with warnings gets: a temporary folder is a hidden one).
    let (status, screen) = on_a_terminal(
        &env,
        &[
            "grant",
            "add",
            "--alias",
            "docs",
            "--path",
            &docs,
            "--access",
            "read_only",
        ],
        "y\n\nthe spec lives there",
    );
    assert_eq!(status, 0, "{screen}");
    assert!(screen.contains("Grant this folder? [y/N]"), "{screen}");
    assert!(screen.contains("reason (for the changelog): "), "{screen}");
    assert!(screen.contains("a reason is needed"), "{screen}");
    let (status, screen) = on_a_terminal(&env, &["grant", "revoke", "docs"], "done with it");
    assert_eq!(status, 0, "{screen}");
    let log = env.run(&["--json", "grant", "log"], b"").json();
    let reasons: Vec<(&str, &str)> = log["changelog"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["action"] != "request")
        .map(|c| (c["action"].as_str().unwrap(), c["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        reasons,
        [("add", "the spec lives there"), ("revoke", "done with it")]
    );
}

/// Regression: a request for `~/.ssh` was shown, and approved, without a word. The library's
/// warnings are printed with the request (and are in its JSON): a place credentials are kept,
/// a folder holding one, the home folder, a look-alike name spelled out.
#[test]
fn requests_show_the_librarys_warnings() {
    let env = world();
    let home = env.home();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(home.join("work/.aws")).unwrap();
    std::fs::create_dir(home.join("d\u{43e}cs")).unwrap();
    let cases = [
        (home.join(".ssh"), "credentials", "SSH keys"),
        (home.join("work"), "credentials", "AWS credentials"),
        (home.clone(), "home", "is a home folder"),
        (
            home.join("d\u{43e}cs"),
            "look_alike",
            "mixes Latin and Cyrillic",
        ),
    ];
    for (n, (folder, risk, says)) in cases.iter().enumerate() {
        let alias = format!("f{n}");
        let args = [
            "--json",
            "grant",
            "request",
            "--alias",
            &alias,
            "--access",
            "read_only",
            "--reason",
            "r",
            "--path",
            folder.to_str().unwrap(),
        ];
        let run = env.run(&args, b"");
        assert_eq!(run.status, 0, "{run:?}");
        let id = run.json()["id"].as_str().unwrap().to_owned();
        let shown = env.run(&["grant", "show", &id], b"");
        assert!(
            shown.stdout.contains("  warning: "),
            "{folder:?}: {shown:?}"
        );
        assert!(shown.stdout.contains(says), "{folder:?}: {shown:?}");
        let json = env.run(&["--json", "grant", "show", &id], b"").json();
        let risks: Vec<&str> = json["review"]["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["risk"].as_str().unwrap())
            .collect();
        assert!(risks.contains(risk), "{folder:?}: {risks:?}");
    }
    let lookalike = env.run(&["grant", "requests"], b"").stdout;
    assert!(
        lookalike.contains(r"spelled out: ") && lookalike.contains(r"d\u{43e}cs"),
        "{lookalike}"
    );
}

/// The approve line of a request whose folder hides characters (a right-to-left override, a
/// zero-width space, an isolate; control characters are refused outright): printed by `grant requests` and handed to the agent, it holds
/// none of them raw, and run as printed in a shell without a terminal, plus the reason the
/// docs say to add, it approves that very folder.
#[test]
fn a_hostile_folders_approve_line_hides_nothing_and_works_as_printed() {
    let env = world();
    let hostile = "inv\u{202e}fdp.exe\u{200b} x'y\u{2066}";
    let folder = env.tmp.path().join(hostile);
    std::fs::create_dir(&folder).unwrap();
    request(&env, "docs", "read_only", Some(hostile), "read it");
    let hidden = |text: &str| {
        text.chars().any(|c| {
            (c.is_control() && c != '\n')
                || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
    };
    let text = env.run(&["grant", "requests"], b"");
    assert_eq!(text.status, 0, "{text:?}");
    assert!(!hidden(&text.stdout), "{:?}", text.stdout);
    let listed = env.run(&["--json", "grant", "requests"], b"");
    let line = text
        .stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("approve: "))
        .unwrap()
        .to_owned();
    assert!(!hidden(&line), "{line:?}");
    assert!(line.contains("$'"), "{line}");
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_safe-lanes"));
    // The human's shell: `$'…'` is bash's, zsh's and ksh's (not dash's).
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("{line} --reason 'the agent reads it'"))
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", binary.parent().unwrap().display()),
        )
        .env("HOME", env.home())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{line}: {out:?}");
    let grants = env.run(&["--json", "grant", "list"], b"").json();
    assert_eq!(
        grants["grants"][0]["path"].as_str().unwrap(),
        folder.to_str().unwrap(),
        "{grants} after {listed:?}"
    );
}

/// Regression: a request that cannot be approved (its folder holds the home folder and the
/// state root) asked yes/no and a reason on a terminal, then failed; `grant review` asked for a
/// reason, then left it pending. Now `grant approve` shows why and stops with the refusal's
/// code before asking anything, and `grant review` offers only to deny or skip it.
#[test]
fn a_request_that_cannot_be_approved_is_never_offered_for_approval() {
    let env = world();
    let id = request(&env, "all", "read_only", Some(""), "everything");
    let (status, screen) = on_a_terminal(&env, &["grant", "approve", &id], "y\nplease");
    assert_eq!(status, 3, "a refusal's exit status: {screen}");
    assert!(screen.contains("refused as it stands:"), "{screen}");
    assert!(
        screen.contains("state_root"),
        "the refusal's code: {screen}"
    );
    assert!(!screen.contains("Approve this change?"), "{screen}");
    assert!(!screen.contains("reason (for the changelog)"), "{screen}");

    let (status, screen) = on_a_terminal(&env, &["grant", "review"], "a\ns");
    assert_eq!(status, 0, "{screen}");
    assert!(
        screen.contains("cannot be approved as it stands"),
        "{screen}"
    );
    assert!(screen.contains("[d]eny, [s]kip, [q]uit?"), "{screen}");
    assert!(!screen.contains("[a]pprove"), "{screen}");
    assert!(
        screen.contains("please answer d (deny), s (skip) or q (quit)"),
        "{screen}"
    );
    assert!(
        screen.contains("approved 0, denied 0, left pending 1"),
        "{screen}"
    );
    // The JSON review says so too.
    let shown = env.run(&["--json", "grant", "show", &id], b"").json();
    assert_eq!(shown["review"]["standing"]["state"], "refused", "{shown}");
}

/// Regression: `grant approve` on a terminal, for a request that names no folder, asked yes/no
/// and a reason, then refused for want of a folder. It now asks for the folder first.
#[test]
fn a_pathless_request_asks_for_its_folder_on_a_terminal() {
    let env = world();
    let id = request(&env, "new", "read_only", None, "a folder you pick");
    let new = path(&env, "new");
    let input = format!("{}/missing\n{new}\ny\nthe new folder", new);
    let (status, screen) = on_a_terminal(&env, &["grant", "approve", &id], &input);
    assert_eq!(status, 0, "{screen}");
    assert!(screen.contains("folder to grant"), "{screen}");
    assert!(screen.contains("that folder cannot be granted"), "{screen}");
    assert!(
        screen.contains(&format!("approved new read_only {new}")),
        "{screen}"
    );
}
