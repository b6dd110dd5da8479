//! Patching a file beneath a read-write grant: exact application, atomic writes, and every
//! refusal leaving the target and everything outside unchanged.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use safe_lanes::patch::FileChange;
use safe_lanes::{Access, Alias, Code, Grants, apply_patch};

use crate::util::{Fixture, Granted, grant_all, mkfifo};

struct World {
    fx: Fixture,
    grants: Arc<Grants>,
}

fn lines(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

impl World {
    fn new() -> Self {
        let fx = Fixture::new();
        let (hundred, three) = (lines(100), lines(3));
        fx.layout(
            &["rw/src", "ro", "outside", "pending"],
            &[
                ("rw/src/lib.rs", &hundred),
                ("ro/notes.txt", &three),
                ("outside/victim.txt", &three),
                ("pending/notes.txt", &three),
            ],
        );
        let grants = fx.grants();
        grant_all(
            &fx,
            &grants,
            &[
                ("rw", "rw", Granted::Live(Access::ReadWrite)),
                ("ro", "ro", Granted::Live(Access::ReadOnly)),
                ("gone", "outside", Granted::Revoked),
                ("pending", "pending", Granted::Pending),
            ],
        );
        Self { fx, grants }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.fx.path(rel)
    }

    fn apply(
        &self,
        alias: &str,
        file: &str,
        diff: &str,
    ) -> safe_lanes::Result<safe_lanes::Patched> {
        let session = self.grants.agent().session();
        let alias = session.alias(safe_lanes::audit::Operation::Patch, alias)?;
        apply_patch(&session, &alias, Path::new(file), diff)
    }

    /// Every file of the world with its content.
    fn snapshot(&self) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out = Vec::new();
        let mut stack = vec![self.fx.tmp.path().to_path_buf()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let e = e.unwrap();
                let t = e.file_type().unwrap();
                if t.is_dir() {
                    if e.file_name() != "state" {
                        stack.push(e.path());
                    }
                } else if t.is_file() {
                    out.push((e.path(), std::fs::read(e.path()).unwrap()));
                } else {
                    out.push((e.path(), Vec::new()));
                }
            }
        }
        out.sort();
        out
    }
}

/// The diff from `old` to `new`, made as git makes it for `file` (`--- a/file`, `+++ b/file`).
fn diff(file: &str, old: &str, new: &str) -> String {
    diffy::DiffOptions::new()
        .set_original_filename(format!("a/{file}"))
        .set_modified_filename(format!("b/{file}"))
        .create_patch(old, new)
        .to_string()
}

#[test]
fn a_multi_hunk_patch_applies_at_shifted_offsets_and_keeps_the_mode() {
    let w = World::new();
    let target = w.p("rw/src/lib.rs");
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
    // The diff is made against the file as it was; since then, five lines were added on top.
    let original = lines(100);
    let edited = original
        .replace("line 10\n", "line ten\n")
        .replace("line 90\n", "line ninety\nline ninety-one-bis\n");
    let patch = diff("src/lib.rs", &original, &edited);
    let shifted = format!("{}{original}", "header\n".repeat(5));
    std::fs::write(&target, &shifted).unwrap();
    let done = w.apply("rw", "src/lib.rs", &patch).unwrap();
    assert_eq!((done.change, done.hunks), (FileChange::Modified, 2));
    assert_eq!(done.path, target);
    let now = std::fs::read_to_string(&target).unwrap();
    assert_eq!(now, format!("{}{edited}", "header\n".repeat(5)));
    assert_eq!(done.bytes, now.len() as u64);
    assert_eq!(
        std::fs::metadata(&target).unwrap().permissions().mode() & 0o777,
        0o640
    );
    let leftovers: Vec<_> = std::fs::read_dir(w.p("rw/src"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, ["lib.rs"], "no temporary file left");
}

#[test]
fn a_stale_patch_is_refused_and_changes_nothing() {
    let w = World::new();
    let original = lines(100);
    let patch = diff(
        "src/lib.rs",
        &original,
        &original.replace("line 50\n", "line fifty\n"),
    );
    w.apply("rw", "src/lib.rs", &patch).unwrap();
    let before = w.snapshot();
    // Applied already: the old lines are gone.
    let err = w.apply("rw", "src/lib.rs", &patch).unwrap_err();
    assert_eq!(err.code(), Code::PatchRejected);
    assert!(err.to_string().contains("hunk #1"), "{err}");
    // The context changed under the patch.
    let other = diff(
        "src/lib.rs",
        &original,
        &original.replace("line 51\n", "line fifty-one\n"),
    );
    std::fs::write(
        w.p("rw/src/lib.rs"),
        original.replace("line 52\n", "changed\n"),
    )
    .unwrap();
    let before_context = w.snapshot();
    assert_eq!(
        w.apply("rw", "src/lib.rs", &other).unwrap_err().code(),
        Code::PatchRejected
    );
    assert_eq!(w.snapshot(), before_context);
    assert_ne!(before, before_context);
}

#[test]
fn create_and_delete_through_dev_null() {
    let w = World::new();
    let create = "--- /dev/null\n+++ b/src/new.rs\n@@ -0,0 +1,2 @@\n+fn a() {}\n+fn b() {}\n";
    let done = w.apply("rw", "src/new.rs", create).unwrap();
    assert_eq!((done.change, done.hunks), (FileChange::Created, 1));
    assert_eq!(
        std::fs::read_to_string(w.p("rw/src/new.rs")).unwrap(),
        "fn a() {}\nfn b() {}\n"
    );
    // Creating over an existing file is refused.
    assert_eq!(
        w.apply("rw", "src/new.rs", create).unwrap_err().code(),
        Code::PatchRejected
    );
    let delete = "--- a/src/new.rs\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-fn a() {}\n-fn b() {}\n";
    let done = w.apply("rw", "src/new.rs", delete).unwrap();
    assert_eq!(done.change, FileChange::Deleted);
    assert!(!w.p("rw/src/new.rs").exists());
    assert_eq!(
        w.apply("rw", "src/new.rs", delete).unwrap_err().code(),
        Code::NotFound
    );
}

#[test]
pub(crate) fn every_refusal_leaves_everything_unchanged() {
    let w = World::new();
    symlink(w.p("outside"), w.p("rw/link-dir")).unwrap();
    symlink(w.p("outside/victim.txt"), w.p("rw/link-file")).unwrap();
    std::fs::hard_link(w.p("outside/victim.txt"), w.p("rw/hardlink.txt")).unwrap();
    mkfifo(&w.p("rw/fifo"));
    std::fs::write(w.p("rw/blob.bin"), [0xff, 0xfe, 0x00, 0x01]).unwrap();
    let three = lines(3);
    // The edit, made for the file it is applied to (`None` in the table).
    let edit = |file: &str| diff(file, &three, &three.replace("line 2\n", "pwned\n"));
    let binary =
        "diff --git a/x b/x\nindex 0000001..0000002 100644\nBinary files a/x and b/x differ\n";
    let two_files = format!("{}{}", edit("src/lib.rs"), diff("src/b.rs", "a\n", "b\n"));
    let hundred = lines(100);
    let for_main = diff(
        "src/main.rs",
        &hundred,
        &hundred.replace("line 7\n", "seven\n"),
    );
    let before = w.snapshot();
    let cases: &[(&str, &str, Option<&str>, Code)] = &[
        ("ro", "notes.txt", None, Code::ReadOnly),
        ("nope", "notes.txt", None, Code::UnknownAlias),
        ("Bad!", "notes.txt", None, Code::InvalidAlias),
        ("gone", "victim.txt", None, Code::Revoked),
        ("pending", "notes.txt", None, Code::UnknownAlias),
        ("rw", "../outside/victim.txt", None, Code::Traversal),
        ("rw", "src/../../outside/victim.txt", None, Code::Traversal),
        ("rw", "/etc/passwd", None, Code::AbsolutePath),
        ("rw", "link-dir/victim.txt", None, Code::SymlinkEscape),
        ("rw", "link-file", None, Code::SymlinkEscape),
        ("rw", "hardlink.txt", None, Code::Hardlinked),
        ("rw", "fifo", None, Code::NotRegularFile),
        ("rw", "src", None, Code::NotRegularFile),
        ("rw", "src/", None, Code::NotRegularFile),
        ("rw", "blob.bin", None, Code::PatchRejected),
        ("rw", "hardlink.txt", Some(binary), Code::PatchRejected),
        ("rw", "src/lib.rs", Some(&two_files), Code::PatchRejected),
        // Its hunks would apply to the target, but it is a diff of another file.
        ("rw", "src/lib.rs", Some(&for_main), Code::PatchRejected),
        (
            "rw",
            "src/lib.rs",
            Some("this is not a diff"),
            Code::PatchRejected,
        ),
        ("rw", "src/lib.rs", Some(""), Code::PatchRejected),
        ("rw", "src/lib\0.rs", None, Code::NulByte),
        ("rw", "missing/x.txt", None, Code::NotFound),
    ];
    for &(alias, file, patch, code) in cases {
        let patch = patch.map_or_else(|| edit(file), str::to_owned);
        let err = w.apply(alias, file, &patch).unwrap_err();
        assert_eq!(err.code(), code, "{alias} {file:?}: {err}");
        assert_eq!(w.snapshot(), before, "{alias} {file:?} changed something");
    }
    // The rejections say why.
    let why = |patch: &str, file: &str| w.apply("rw", file, patch).unwrap_err().to_string();
    assert!(
        why(binary, "src/lib.rs").contains("binary"),
        "{}",
        why(binary, "src/lib.rs")
    );
    assert!(why(&two_files, "src/lib.rs").contains("exactly one file"));
    assert!(why(&edit("blob.bin"), "blob.bin").contains("UTF-8"));
    assert!(why(&for_main, "src/lib.rs").contains("src/main.rs"));
}

#[test]
fn every_patch_is_audited() {
    let w = World::new();
    let original = lines(100);
    w.apply(
        "rw",
        "src/lib.rs",
        &diff(
            "src/lib.rs",
            &original,
            &original.replace("line 1\n", "one\n"),
        ),
    )
    .unwrap();
    let last = || -> serde_json::Value {
        let log = std::fs::read_to_string(w.p("state/audit.jsonl")).unwrap();
        serde_json::from_str(log.lines().last().unwrap()).unwrap()
    };
    assert_eq!(last()["event"], "patch.apply");
    assert_eq!(
        last()["actor"],
        "agent",
        "the agent's session records the agent"
    );
    assert_eq!(last()["result"]["hunks"], 1);
    // The human's own session (the CLI's `patch`) records the human, by user id.
    let edited = original.replace("line 1\n", "one\n");
    apply_patch(
        &w.grants.session(),
        &Alias::new("rw").unwrap(),
        Path::new("src/lib.rs"),
        &diff("src/lib.rs", &edited, &edited.replace("line 2\n", "two\n")),
    )
    .unwrap();
    assert_eq!(
        last()["actor"],
        format!("uid:{}", rustix::process::geteuid().as_raw())
    );
}

/// Regression (found by the `patch` fuzz target): a target name that is not UTF-8 made the
/// audit record panic while serializing the result.
#[test]
fn a_target_name_that_is_not_utf8_is_patched_and_reported() {
    use std::os::unix::ffi::OsStrExt;
    let w = World::new();
    let name = std::ffi::OsStr::from_bytes(b"new\xb6.txt");
    // A diff is text: it names the file by its lossy form.
    let create = "--- /dev/null\n+++ b/new\u{FFFD}.txt\n@@ -0,0 +1 @@\n+hi\n";
    let rw = Alias::new("rw").unwrap();
    let done = apply_patch(&w.grants.session(), &rw, Path::new(name), create).unwrap();
    assert_eq!(std::fs::read(w.p("rw").join(name)).unwrap(), b"hi\n");
    let json = serde_json::to_value(&done).unwrap();
    assert!(json["path"].as_str().unwrap().ends_with("new\u{FFFD}.txt"));
}

/// The hostile case: a 240 KB diff of many hunks whose context never matches, against a
/// 320 KB file whose lines are all alike. It is refused without changing anything. (The work it
/// costs is counted by the unit tests of `patch`: no more lines than the file and the diff
/// have, where trying every position cost some 160,000 × 1,000 comparisons.)
#[test]
fn a_large_diff_whose_context_never_matches_is_refused_and_changes_nothing() {
    let w = World::new();
    std::fs::write(w.p("rw/src/lib.rs"), "a\n".repeat(160_000)).unwrap();
    let mut patch = String::from("--- a/src/lib.rs\n+++ b/src/lib.rs\n");
    for h in 0..80 {
        let at = h * 1000 + 1;
        patch.push_str(&format!("@@ -{at},1000 +{at},1000 @@\n"));
        patch.push_str(&" a\n".repeat(999));
        patch.push_str("-zz\n+yy\n");
    }
    assert!(patch.len() > 240_000);
    let before = w.snapshot();
    let err = w.apply("rw", "src/lib.rs", &patch).unwrap_err();
    assert_eq!(err.code(), Code::PatchRejected);
    assert!(err.to_string().contains("hunk #1"), "{err}");
    assert_eq!(w.snapshot(), before);
}

/// Regression: a hunk of lines that occur everywhere, which matches only at the far end of
/// the file, made the search compare about 80,000 × 602 lines before it applied. Placing it
/// needs more than `MAX_MATCH_WORK` comparisons, so it is refused, saying why, and nothing
/// changes.
#[test]
fn a_patch_that_needs_more_than_the_work_bound_is_refused_and_changes_nothing() {
    let w = World::new();
    let file = format!("{}a\na\n", "a\nb\n".repeat(80_000));
    std::fs::write(w.p("rw/src/lib.rs"), &file).unwrap();
    let patch = format!(
        "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,602 +1,602 @@\n{} a\n-a\n+c\n",
        " a\n b\n".repeat(300)
    );
    let before = w.snapshot();
    let err = w.apply("rw", "src/lib.rs", &patch).unwrap_err();
    assert_eq!(err.code(), Code::PatchRejected);
    let message = err.to_string();
    assert!(
        message.contains("hunk #1")
            && message.contains(&safe_lanes::patch::MAX_MATCH_WORK.to_string())
            && message.contains("line comparisons"),
        "{message}"
    );
    assert_eq!(w.snapshot(), before);
}

/// Each hunk finds its own offset: lines were added above the first hunk and between the
/// second and the third since the diff was made.
#[test]
fn hunks_apply_at_offsets_of_their_own() {
    let w = World::new();
    let original = lines(100);
    let edited = original
        .replace("line 10\n", "line ten\n")
        .replace("line 50\n", "line fifty\n")
        .replace("line 90\n", "")
        .replace("line 91\n", "line 91\nline 91-bis\n");
    let patch = diff("src/lib.rs", &original, &edited);
    let insert =
        |text: &str, after: &str, extra: &str| text.replace(after, &format!("{after}{extra}"));
    let drifted = insert(
        &format!("{}{original}", "top\n".repeat(3)),
        "line 70\n",
        &"middle\n".repeat(7),
    );
    std::fs::write(w.p("rw/src/lib.rs"), &drifted).unwrap();
    let done = w.apply("rw", "src/lib.rs", &patch).unwrap();
    assert_eq!((done.change, done.hunks), (FileChange::Modified, 3));
    let want = insert(
        &format!("{}{edited}", "top\n".repeat(3)),
        "line 70\n",
        &"middle\n".repeat(7),
    );
    assert_eq!(std::fs::read_to_string(w.p("rw/src/lib.rs")).unwrap(), want);
}

/// Regression: a diff whose header names another file (`+++ b/src/main.rs`) was applied to
/// the target. The file a diff says it changes must be the target; one made above the grant
/// or in a folder below it names it too, and a `---` name of a backup is free.
#[test]
fn a_diff_for_another_file_is_refused_and_the_targets_other_spellings_apply() {
    let w = World::new();
    let original = lines(100);
    let hunk = "@@ -7 +7 @@\n-line 7\n+seven\n";
    let before = w.snapshot();
    for (old, new) in [
        ("a/src/main.rs", "b/src/main.rs"),
        ("a/src/lib.rs", "b/src/main.rs"),
        ("a/src/lib.rs", "b/tests/lib.rs"),
        ("original", "modified"),
    ] {
        let patch = format!("--- {old}\n+++ {new}\n{hunk}");
        let err = w.apply("rw", "src/lib.rs", &patch).unwrap_err();
        assert_eq!(err.code(), Code::PatchRejected, "{new}: {err}");
        assert!(err.to_string().contains(new), "{err}");
        assert_eq!(w.snapshot(), before, "{new}");
    }
    let mut expected = original.clone();
    for (i, (old, new)) in [
        ("a/src/lib.rs", "b/src/lib.rs"),
        ("a/project/src/lib.rs", "b/project/src/lib.rs"),
        ("lib.rs", "lib.rs"),
        ("src/lib.rs.orig", "src/lib.rs"),
    ]
    .into_iter()
    .enumerate()
    {
        let line = format!("line {}\n", 10 + i);
        let changed = format!("changed {}\n", 10 + i);
        let patch = format!(
            "--- {old}\n+++ {new}\n@@ -{} +{} @@\n-{line}+{changed}",
            10 + i,
            10 + i
        );
        w.apply("rw", "src/lib.rs", &patch)
            .unwrap_or_else(|e| panic!("{new}: {e}"));
        expected = expected.replace(&line, &changed);
    }
    assert_eq!(
        std::fs::read_to_string(w.p("rw/src/lib.rs")).unwrap(),
        expected
    );
}
