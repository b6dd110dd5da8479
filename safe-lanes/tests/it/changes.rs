//! Change sets: a confined command's writes to a read-write grant go to a layer of its own and
//! reach the folder when it ends — all of them but what the one rule holds for the human.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use safe_lanes::changes::{HeldChanges, Why};
use safe_lanes::confine::landlock_support;
use safe_lanes::{Access, Confined, ConfinedOutcome, Grants, Session};
use serde_json::Value;

use crate::util::{Fixture, Granted, grant_all};

struct World {
    fx: Fixture,
    grants: Arc<Grants>,
}

impl World {
    /// A state root and one read-write grant `proj` on `<tmp>/proj` (a git repository with one
    /// commit), `files` in it.
    fn new(files: &[(&str, &str)]) -> Self {
        let support = landlock_support();
        assert!(
            support.fully_enforced,
            "this suite needs Landlock: {support:?}"
        );
        let fx = Fixture::new();
        let dirs: Vec<String> = files
            .iter()
            .filter_map(|(f, _)| Path::new(f).parent())
            .map(|d| d.to_string_lossy().into_owned())
            .chain(["proj".to_owned()])
            .collect();
        let dirs: Vec<&str> = dirs.iter().map(String::as_str).collect();
        fx.layout(&dirs, files);
        let grants = fx.grants();
        grant_all(
            &fx,
            &grants,
            &[("proj", "proj", Granted::Live(Access::ReadWrite))],
        );
        Self { fx, grants }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.fx.path(rel)
    }

    fn session(&self) -> Session {
        self.grants.session()
    }

    /// Run `script` with `sh -c` in `proj`.
    fn run(&self, script: &str) -> ConfinedOutcome {
        run_in(&self.session(), script)
    }

    /// Run `script`, which must succeed.
    fn ok(&self, script: &str) -> ConfinedOutcome {
        let out = self.run(script);
        assert_eq!(out.outcome.exit_code, Some(0), "{script}: {out:?}");
        out
    }

    fn held(&self) -> HeldChanges {
        HeldChanges::open(Arc::clone(&self.grants)).unwrap()
    }

    fn records(&self, event: &str) -> Vec<Value> {
        safe_lanes_testkit::audit::records(self.fx.root.path())
            .into_iter()
            .filter(|r| r["event"] == event)
            .collect()
    }

    /// `git ARGS` in `proj`, unconfined, as the human.
    fn git(&self, args: &[&str]) -> String {
        git_in(&self.p("proj"), args)
    }
}

/// `git ARGS` in `dir`, unconfined, as the human.
fn git_in(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Human")
        .env("GIT_AUTHOR_EMAIL", "h@example.org")
        .env("GIT_COMMITTER_NAME", "Human")
        .env("GIT_COMMITTER_EMAIL", "h@example.org")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// What `out` held, each path with its reason.
fn held_of(out: &ConfinedOutcome) -> Vec<(String, Why)> {
    out.changes
        .held
        .iter()
        .map(|h| (h.path.clone(), h.why))
        .collect()
}

fn run_in(session: &Session, script: &str) -> ConfinedOutcome {
    Confined::shell(script)
        .cwd(safe_lanes::Alias::new("proj").unwrap())
        .run(session)
        .unwrap()
}

#[test]
fn ordinary_work_lands_in_the_folder_when_the_command_ends() {
    let w = World::new(&[
        ("proj/keep.txt", "keep\n"),
        ("proj/edit.txt", "one\n"),
        ("proj/gone.txt", "gone\n"),
        ("proj/moved.txt", "moved\n"),
        ("proj/old/a", "a"),
        ("proj/old/b/c", "c"),
        ("proj/replaced/x", "x"),
    ]);
    let out = w.ok(
        "echo two >> edit.txt && rm gone.txt && mv moved.txt renamed.txt \
         && mkdir -p new/deep && echo n > new/deep/n && rm -r old \
         && rm -r replaced && mkdir replaced && echo y > replaced/y \
         && printf '#!/bin/sh\\necho run\\n' > tool.sh && chmod 755 tool.sh \
         && ln -s keep.txt link && touch -d 2001-02-03 keep.txt",
    );
    assert!(out.changes.held.is_empty(), "{:?}", out.changes);
    assert_eq!(out.changes.set, None);
    assert!(out.changes.published >= 8, "{:?}", out.changes);
    let read = |rel: &str| std::fs::read_to_string(w.p(rel)).unwrap();
    assert_eq!(read("proj/edit.txt"), "one\ntwo\n");
    assert!(!w.p("proj/gone.txt").exists());
    assert!(!w.p("proj/moved.txt").exists());
    assert_eq!(read("proj/renamed.txt"), "moved\n");
    assert_eq!(read("proj/new/deep/n"), "n\n");
    assert!(!w.p("proj/old").exists());
    assert!(!w.p("proj/replaced/x").exists());
    assert_eq!(read("proj/replaced/y"), "y\n");
    let tool = std::fs::metadata(w.p("proj/tool.sh")).unwrap();
    assert_eq!(tool.permissions().mode() & 0o777, 0o755);
    assert_eq!(
        std::fs::read_link(w.p("proj/link")).unwrap(),
        Path::new("keep.txt")
    );
    let keep = std::fs::metadata(w.p("proj/keep.txt")).unwrap();
    assert_eq!(
        keep.mtime(),
        981_158_400,
        "the mtime the command set is kept"
    );
    // One record for the set, and nothing left in the state root.
    let published = w.records("change.published");
    assert_eq!(published.len(), 1, "{published:?}");
    assert_eq!(w.records("change.held").len(), 0);
    let sets = std::fs::read_dir(w.fx.root.path().join("changes"))
        .unwrap()
        .count();
    assert_eq!(sets, 0, "a set with nothing held is gone");
    assert!(w.held().list().unwrap().is_empty());
}

#[test]
fn nothing_reaches_the_folder_while_the_command_runs() {
    let w = World::new(&[]);
    let session = w.session();
    let running = std::thread::spawn(move || run_in(&session, "echo x > early && sleep 1"));
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        !w.p("proj/early").exists(),
        "written while the command runs"
    );
    let out = running.join().unwrap();
    assert_eq!(out.outcome.exit_code, Some(0));
    assert!(w.p("proj/early").exists(), "published when it ended");
}

#[test]
fn a_command_that_writes_nothing_leaves_no_set_and_no_record() {
    let w = World::new(&[("proj/a", "a")]);
    let out = w.ok("cat a >/dev/null");
    assert_eq!(out.changes.published, 0);
    assert!(w.records("change.published").is_empty());
    assert_eq!(
        std::fs::read_dir(w.fx.root.path().join("changes"))
            .unwrap()
            .count(),
        0
    );
}

#[test]
fn what_the_humans_tools_act_on_is_held_then_applied_as_shown() {
    let w = World::new(&[("proj/README", "hello\n")]);
    w.git(&["init", "-q"]);
    let out = w.ok(
        "git config core.fsmonitor 'touch /tmp/x' && printf '#!/bin/sh\\n' > .git/hooks/pre-commit \
         && mkdir -p .claude && echo '{}' > .claude/settings.json && ln -s /etc/passwd log \
         && mkdir -p a/b && echo x > a/b/AGENTS.md && echo fine > fine.txt",
    );
    let held = held_of(&out);
    assert_eq!(
        held,
        [
            (".claude".to_owned(), Why::AgentConfig),
            (".git/config".to_owned(), Why::GitState),
            (".git/hooks/pre-commit".to_owned(), Why::GitState),
            ("a/b/AGENTS.md".to_owned(), Why::AgentConfig),
            ("log".to_owned(), Why::LinkOutside),
        ]
    );
    let set = out.changes.set.clone().expect("a held set");
    assert!(out.changes.note.as_deref().unwrap().contains(&set));
    // The published part landed; the held part did not.
    assert!(w.p("proj/fine.txt").exists() && w.p("proj/a/b").is_dir());
    for held in [".claude", ".git/hooks/pre-commit", "a/b/AGENTS.md", "log"] {
        assert!(
            std::fs::symlink_metadata(w.p("proj").join(held)).is_err(),
            "{held}"
        );
    }
    assert!(!w.git(&["config", "--list"]).contains("fsmonitor"));
    assert_eq!(w.records("change.held").len(), 1);
    // The human reviews, then applies one change exactly as shown.
    let held = w.held();
    let listed = held.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, set);
    let review = held.show(&set).unwrap();
    let config = review
        .changes
        .iter()
        .find(|c| c.held.path == ".git/config")
        .unwrap();
    assert!(
        config
            .diff
            .as_deref()
            .unwrap()
            .contains("+\tfsmonitor = touch /tmp/x"),
        "{config:?}"
    );
    assert!(
        config.warnings.iter().any(|w| w.contains("core.fsmonitor")),
        "{config:?}"
    );
    let refused = held.apply(&set, &[], "not-the-digest", "ok", "uid:0");
    assert_eq!(refused.unwrap_err().code().as_str(), "invalid_argument");
    let done = held
        .apply(
            &set,
            &["a/b/AGENTS.md".into()],
            &review.digest,
            "the notes are fine",
            "uid:0",
        )
        .unwrap();
    assert_eq!(done.paths, ["a/b/AGENTS.md"]);
    assert_eq!(
        std::fs::read_to_string(w.p("proj/a/b/AGENTS.md")).unwrap(),
        "x\n"
    );
    // The digest was of what was shown: after a change, the old one applies nothing.
    let stale = held.apply(&set, &[], &review.digest, "all", "uid:0");
    assert_eq!(stale.unwrap_err().code().as_str(), "invalid_argument");
    let discarded = held.discard(&set, None, "not these", "uid:0").unwrap();
    assert_eq!(discarded.paths.len(), 4);
    assert!(held.list().unwrap().is_empty());
    assert!(!w.git(&["config", "--list"]).contains("fsmonitor"));
    assert_eq!(w.records("change.applied").len(), 1);
    assert_eq!(w.records("change.discarded").len(), 1);
    let missing = held.show(&set).unwrap_err();
    assert_eq!(missing.code().as_str(), "not_found");
}

#[test]
fn a_decision_needs_a_reason() {
    let w = World::new(&[]);
    let out = w.ok("echo '{}' > .mcp.json");
    let set = out.changes.set.unwrap();
    let held = w.held();
    let digest = held.show(&set).unwrap().digest;
    for reason in ["", "  \n"] {
        let e = held.apply(&set, &[], &digest, reason, "uid:0").unwrap_err();
        assert_eq!(e.code().as_str(), "invalid_argument");
        let e = held.discard(&set, None, reason, "uid:0").unwrap_err();
        assert_eq!(e.code().as_str(), "invalid_argument");
    }
    let e = held
        .apply(&set, &["other".into()], &digest, "r", "uid:0")
        .unwrap_err();
    assert_eq!(e.code().as_str(), "not_found");
    assert!(!w.p("proj/.mcp.json").exists());
}

#[test]
fn a_repository_the_command_makes_lands_when_it_is_inert() {
    let w = World::new(&[]);
    let out = w.ok(
        "set -e; export GIT_AUTHOR_NAME=A GIT_AUTHOR_EMAIL=a@x GIT_COMMITTER_NAME=A \
         GIT_COMMITTER_EMAIL=a@x; mkdir lib && cd lib && git init -q -b main && echo code > lib.rs \
         && git add lib.rs && git commit -qm first && git branch other && git checkout -q other \
         && echo more >> lib.rs && git commit -qam second && git checkout -q main \
         && git merge -q other",
    );
    assert!(out.changes.held.is_empty(), "{:?}", out.changes);
    let log = std::process::Command::new("git")
        .args(["log", "--format=%s"])
        .current_dir(w.p("proj/lib"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&log.stdout), "second\nfirst\n");
}

#[test]
fn the_humans_edit_made_while_the_command_runs_is_never_overwritten() {
    let w = World::new(&[("proj/shared.txt", "base\n"), ("proj/other.txt", "o\n")]);
    let session = w.session();
    let running = std::thread::spawn(move || {
        run_in(
            &session,
            "sleep 1; echo agent >> shared.txt; echo agent >> other.txt",
        )
    });
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(w.p("proj/shared.txt"), "the human's edit\n").unwrap();
    let out = running.join().unwrap();
    assert_eq!(out.outcome.exit_code, Some(0));
    assert_eq!(
        std::fs::read_to_string(w.p("proj/shared.txt")).unwrap(),
        "the human's edit\n"
    );
    assert_eq!(
        std::fs::read_to_string(w.p("proj/other.txt")).unwrap(),
        "o\nagent\n"
    );
    let held: Vec<_> = out
        .changes
        .held
        .iter()
        .map(|h| (h.path.as_str(), h.why))
        .collect();
    assert_eq!(held, [("shared.txt", Why::Conflict)]);
}

#[test]
fn two_commands_on_one_grant_each_publish_their_own() {
    let w = World::new(&[("proj/both.txt", "0\n")]);
    let (a, b) = (w.session(), w.session());
    let first =
        std::thread::spawn(move || run_in(&a, "echo a > a.txt; sleep 0.5; echo a >> both.txt"));
    let second =
        std::thread::spawn(move || run_in(&b, "echo b > b.txt; sleep 0.5; echo b >> both.txt"));
    let (first, second) = (first.join().unwrap(), second.join().unwrap());
    assert!(w.p("proj/a.txt").exists() && w.p("proj/b.txt").exists());
    // Each began from "0": the one published second found the first's version, and holds its
    // own as a conflict instead of overwriting it.
    let both = std::fs::read_to_string(w.p("proj/both.txt")).unwrap();
    assert!(both == "0\na\n" || both == "0\nb\n", "{both}");
    let conflicts = [&first, &second]
        .iter()
        .filter(|o| o.changes.held.iter().any(|h| h.why == Why::Conflict))
        .count();
    assert_eq!(conflicts, 1, "{first:?} {second:?}");
}

#[test]
fn a_new_file_is_published_by_a_rename_not_a_copy() {
    let w = World::new(&[]);
    let out = w.ok("head -c 67108864 /dev/zero > big && stat -c %i big");
    let inside: u64 = out.outcome.stdout.trim().parse().unwrap();
    let published = std::fs::metadata(w.p("proj/big")).unwrap();
    assert_eq!(published.len(), 64 << 20);
    assert_eq!(
        published.ino(),
        inside,
        "the layer's very inode is in the folder"
    );
}

#[test]
fn a_direct_grant_is_written_at_once_and_holds_nothing() {
    let w = World::new(&[]);
    w.grants
        .set_direct("proj", true, "a network file system", "uid:0")
        .unwrap();
    let out = w.ok("mkdir .claude && echo '{}' > .claude/settings.json");
    assert_eq!(out.changes, Default::default());
    assert!(w.p("proj/.claude/settings.json").exists());
    w.grants.set_direct("proj", false, "back", "uid:0").unwrap();
    let out = w.ok("echo x > CLAUDE.md");
    assert_eq!(out.changes.held.len(), 1);
    let ro = w
        .grants
        .set_access("proj", Access::ReadOnly, "r", "uid:0")
        .unwrap();
    assert!(!ro.direct);
    let refused = w.grants.set_direct("proj", true, "r", "uid:0").unwrap_err();
    assert_eq!(refused.code().as_str(), "invalid_argument");
}

#[test]
fn a_tool_or_cache_never_lies_inside_a_read_write_grant_nor_holds_one() {
    let w = World::new(&[]);
    w.fx.layout(&["proj/sub", "toolbox/inner"], &[]);
    let sub = w.p("proj/sub");
    let kind = |k| safe_lanes::grants::Toolchain::parse(k, &[], None).unwrap();
    use safe_lanes::grants::Kind;
    for k in [Kind::Tool, Kind::Cache] {
        let e = w
            .grants
            .add_with("inner", &sub, None, kind(k), "r", "uid:0")
            .unwrap_err();
        assert_eq!(e.code().as_str(), "overlapping_grant", "{k:?}");
    }
    w.grants
        .add_with(
            "toolbox",
            &w.p("toolbox"),
            None,
            kind(Kind::Tool),
            "r",
            "uid:0",
        )
        .unwrap();
    let e = w
        .grants
        .add(
            "inner",
            &w.p("toolbox/inner"),
            Access::ReadWrite,
            "r",
            "uid:0",
        )
        .unwrap_err();
    assert_eq!(e.code().as_str(), "overlapping_grant");
    w.grants
        .add(
            "reader",
            &w.p("toolbox/inner"),
            Access::ReadOnly,
            "r",
            "uid:0",
        )
        .unwrap();
}

#[test]
fn what_the_human_lifted_is_published() {
    let w = World::new(&[]);
    w.grants
        .set_protection(
            "proj",
            &[safe_lanes::grants::LiftedPath::new(".vscode").unwrap()],
            &[],
            "the agent keeps the editor settings",
            "uid:0",
        )
        .unwrap();
    let out = w.ok("mkdir .vscode && echo '{}' > .vscode/settings.json && echo '{}' > .mcp.json");
    let held: Vec<_> = out.changes.held.iter().map(|h| h.path.as_str()).collect();
    assert_eq!(held, [".mcp.json"]);
    assert!(w.p("proj/.vscode/settings.json").exists());
}

#[test]
fn what_a_command_wrote_before_its_grant_was_revoked_is_held_not_published() {
    let w = World::new(&[]);
    let session = w.session();
    let running = std::thread::spawn(move || {
        run_in(&session, "echo early > early.txt; touch started; sleep 30")
    });
    // The layer is the only place its writes are until it ends.
    let sets = w.fx.root.path().join("changes");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !std::fs::read_dir(&sets)
        .into_iter()
        .flatten()
        .flatten()
        .any(|s| s.path().join("layers/0/upper/started").exists())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never wrote"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    w.grants.revoke("proj", "stop it", "uid:0").unwrap();
    let out = running.join().unwrap();
    assert!(
        out.outcome
            .stopped
            .as_deref()
            .unwrap_or("")
            .contains("revoked"),
        "{out:?}"
    );
    assert!(
        !w.p("proj/early.txt").exists(),
        "nothing is published into a revoked grant"
    );
    assert_eq!(out.changes.published, 0, "{:?}", out.changes);
    let whys: Vec<Why> = out.changes.held.iter().map(|h| h.why).collect();
    assert_eq!(whys, [Why::Revoked, Why::Revoked], "{:?}", out.changes);
}

#[test]
fn a_file_in_place_of_a_folder_takes_nothing_below_it_unjudged() {
    let w = World::new(&[("proj/vendor/lib/a.txt", "a\n")]);
    // A repository below the folder the command replaces with a file.
    std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(w.p("proj/vendor/lib"))
        .status()
        .unwrap();
    let out = w.ok("rm -rf vendor/lib && echo plain > vendor/lib");
    let held = held_of(&out);
    assert_eq!(held, [("vendor/lib".to_owned(), Why::GitState)]);
    // The folder's tree is whole, its repository with it.
    assert!(w.p("proj/vendor/lib/.git/HEAD").is_file());
    assert_eq!(
        std::fs::read_to_string(w.p("proj/vendor/lib/a.txt")).unwrap(),
        "a\n"
    );
    // Without a repository below it, the same change is published, the tree gone with it.
    let w = World::new(&[("proj/vendor/lib/a.txt", "a\n")]);
    let out = w.ok("rm -rf vendor/lib && echo plain > vendor/lib");
    assert!(out.changes.held.is_empty(), "{:?}", out.changes);
    assert_eq!(
        std::fs::read_to_string(w.p("proj/vendor/lib")).unwrap(),
        "plain\n"
    );
}

#[test]
fn applying_never_replaces_a_folder_the_human_made_meanwhile() {
    let w = World::new(&[("proj/README", "hello\n")]);
    let out = w.ok("echo '{}' > .mcp.json");
    let set = out.changes.set.clone().expect("a held set");
    // The human makes a folder where the held file would go.
    std::fs::create_dir(w.p("proj/.mcp.json")).unwrap();
    std::fs::write(w.p("proj/.mcp.json/mine"), "mine\n").unwrap();
    let held = w.held();
    let review = held.show(&set).unwrap();
    let refused = held.apply(&set, &[], &review.digest, "ok", "uid:0");
    assert_eq!(
        refused.unwrap_err().code().as_str(),
        "invalid_argument",
        "the folder's directory stays"
    );
    assert_eq!(
        std::fs::read_to_string(w.p("proj/.mcp.json/mine")).unwrap(),
        "mine\n"
    );
    assert_eq!(held.list().unwrap().len(), 1, "still held");
    assert!(w.records("change.applied").is_empty());
}

#[test]
fn a_grant_inside_a_repository_holds_what_its_configuration_points_git_at() {
    let fx = Fixture::new();
    fx.layout(&["repo", "repo/scripts"], &[("repo/README", "hello\n")]);
    let repo = fx.path("repo");
    let git = |args: &[&str]| git_in(&repo, args);
    git(&["init", "-q"]);
    git(&["config", "core.hooksPath", "scripts/hooks"]);
    let grants = fx.grants();
    grant_all(
        &fx,
        &grants,
        &[("proj", "repo/scripts", Granted::Live(Access::ReadWrite))],
    );
    let marker = fx.path("ran");
    let out = run_in(
        &grants.session(),
        &format!(
            "mkdir hooks && printf '#!/bin/sh\\ntouch {}\\n' > hooks/pre-commit \
             && chmod +x hooks/pre-commit && echo ok > build.sh",
            marker.display()
        ),
    );
    assert_eq!(out.outcome.exit_code, Some(0), "{out:?}");
    let held = held_of(&out);
    assert_eq!(held, [("hooks".to_owned(), Why::GitState)]);
    assert!(fx.path("repo/scripts/build.sh").is_file());
    // The human's commit runs no hook of the agent's.
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "mine"]);
    assert!(!marker.exists(), "the agent's hook ran");
}
