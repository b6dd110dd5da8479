//! What `Protection::scan` finds in a read-write grant's folder. The table runs on both
//! resolution backends.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use super::{Placeholder, Protection, State};
use crate::beneath::{Ambient, Anchor, Backend, force_backend};

/// A folder holding a repository at its top (with a submodule and a linked worktree), a
/// repository directly inside it, a checkout whose `.git` is a pointer file, and a folder that
/// is no repository.
fn folder() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let p = |rel: &str| tmp.path().join(rel);
    for dir in [
        ".git/hooks",
        ".git/objects",
        ".git/modules/vendor/lib/hooks",
        ".git/worktrees/feature",
        "inner/.git/hooks",
        "inner/.git/info",
        "pointed/git-dir/objects",
        "pointed/work",
        "plain/deeper/.git",
        ".vscode",
    ] {
        std::fs::create_dir_all(p(dir)).unwrap();
    }
    for (file, text) in [
        (".git/config", "[core]\n"),
        (".git/HEAD", "ref: refs/heads/main\n"),
        (".git/modules/vendor/lib/HEAD", "ref: refs/heads/main\n"),
        (".git/worktrees/feature/commondir", "../..\n"),
        ("inner/.git/config", "[core]\n"),
        ("pointed/work/.git", "gitdir: ../git-dir\n"),
        ("pointed/git-dir/commondir", "../../.git\n"),
        (".bashrc", "echo hi\n"),
        (".envrc", "export A=1\n"),
    ] {
        std::fs::write(p(file), text).unwrap();
    }
    tmp
}

fn scan(dir: &Path, home: bool, lifted: &[&str]) -> Protection {
    let anchor = Anchor::open_ambient(dir, Ambient::because("a test's folder")).unwrap();
    let lifted: Vec<PathBuf> = lifted.iter().map(PathBuf::from).collect();
    Protection::scan(&anchor, home, &lifted).unwrap()
}

fn state_of(p: &Protection, rel: &str) -> Option<State> {
    p.entries()
        .iter()
        .find(|e| e.path == Path::new(rel))
        .map(|e| e.state)
}

const EMPTY: Placeholder = Placeholder::File(b"");
const COMMON: Placeholder = Placeholder::File(b".\n");

/// `case: path => state` for the folder of [`folder`], run on each backend.
#[test]
fn the_protection_table_holds_on_both_backends() {
    for backend in [Backend::Openat2, Backend::Walk] {
        let _forced = force_backend(backend);
        the_protection_table_holds();
    }
}

fn the_protection_table_holds() {
    let tmp = folder();
    let found = scan(tmp.path(), false, &[]);
    let missing_dir = Some(State::Missing(Placeholder::Dir));
    for (rel, expected) in [
        // The grant's top.
        (".envrc", Some(State::File)),
        (".vscode", Some(State::Dir)),
        (".idea", missing_dir),
        (".bashrc", Some(State::File)),
        // Missing start-up files outside a home folder: nothing to protect.
        (".profile", None),
        (".zshrc", None),
        // The repository at the top.
        (".gitmodules", missing_dir),
        (".git/config", Some(State::File)),
        (".git/hooks", Some(State::Dir)),
        (".git/info", missing_dir),
        (".git/commondir", Some(State::Missing(COMMON))),
        (".git/config.worktree", Some(State::Missing(EMPTY))),
        // Its submodule's git directory (a name of two components) and linked worktree.
        (
            ".git/modules/vendor/lib/config",
            Some(State::Missing(EMPTY)),
        ),
        (".git/modules/vendor/lib/hooks", Some(State::Dir)),
        (".git/worktrees/feature/commondir", Some(State::File)),
        (".git/worktrees/feature/hooks", missing_dir),
        // A repository directly inside the grant.
        ("inner/.gitmodules", missing_dir),
        ("inner/.git/config", Some(State::File)),
        ("inner/.git/info", Some(State::Dir)),
        // A checkout with a pointer file: the file, the git directory it names, and the common
        // directory that one names (the top repository's, already there).
        ("pointed/work/.git", None),
        ("pointed/.git", None),
        // Deeper than one level: not looked at.
        ("plain/deeper/.git/config", None),
        // Objects, refs and the like stay writable.
        (".git/objects", None),
        (".git/HEAD", None),
    ] {
        assert_eq!(state_of(&found, rel), expected, "{rel}: {found:#?}");
    }
    // Pins: every directory on the way to a protected path, and every git directory.
    let pins = found.pins();
    for pin in [
        ".git",
        ".git/modules",
        ".git/modules/vendor",
        ".git/modules/vendor/lib",
        ".git/worktrees/feature",
        "inner",
        "inner/.git",
    ] {
        assert!(pins.contains(Path::new(pin)), "{pin}: {pins:?}");
    }
    for not in ["", "plain", ".git/objects", ".git/hooks"] {
        assert!(!pins.contains(Path::new(not)), "{not}: {pins:?}");
    }

    // What a patch may write.
    for (rel, refused) in [
        (".git/config", true),
        (".git/HEAD", true),
        (".git/objects/ab/cdef", true),
        ("./.git//config", true),
        (".git/modules/vendor/lib/config", true),
        (".envrc", true),
        (".vscode/settings.json", true),
        (".idea/workspace.xml", true),
        ("inner/.git/hooks/pre-commit", true),
        ("inner/.gitmodules", true),
        (".gitmodules", true),
        ("src/main.rs", false),
        (".gitignore", false),
        ("inner/src/lib.rs", false),
        (".github/workflows/ci.yml", false),
        ("plain/deeper/.git/config", false),
    ] {
        let refusal = found.refusal(Path::new(rel), &[], "site");
        assert_eq!(refusal.is_some(), refused, "{rel}: {refusal:?}");
        if let Some(e) = refusal {
            assert_eq!(e.code(), crate::Code::ProtectedPath, "{rel}");
            assert!(e.to_string().contains("--allow-protected"), "{e}");
        }
    }

    // A home folder: the missing start-up files get placeholders too.
    let home = scan(tmp.path(), true, &[]);
    assert_eq!(state_of(&home, ".profile"), missing_dir);
    assert_eq!(state_of(&home, ".gitconfig"), missing_dir);

    // Lifted paths, and everything inside them, are left out; a patch may write them.
    let lifted = scan(tmp.path(), false, &[".vscode", ".git/hooks", "inner"]);
    assert_eq!(state_of(&lifted, ".vscode"), None);
    assert_eq!(state_of(&lifted, ".git/hooks"), None);
    assert_eq!(state_of(&lifted, "inner/.git/config"), None);
    assert_eq!(state_of(&lifted, ".git/config"), Some(State::File));
    let lifts = [PathBuf::from(".vscode")];
    assert!(
        lifted
            .refusal(Path::new(".vscode/settings.json"), &lifts, "site")
            .is_none()
    );
}

#[test]
fn a_pointer_file_protects_the_git_directory_it_names() {
    let tmp = tempfile::tempdir().unwrap();
    let p = |rel: &str| tmp.path().join(rel);
    for dir in ["work", "store/repo.git/hooks"] {
        std::fs::create_dir_all(p(dir)).unwrap();
    }
    std::fs::write(p("work/.git"), "gitdir: ../store/repo.git\n").unwrap();
    std::fs::write(p("store/repo.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    // The grant is `tmp`: `work` is a checkout directly inside it.
    let found = scan(tmp.path(), false, &[]);
    assert_eq!(state_of(&found, "work/.git"), Some(State::File));
    assert_eq!(state_of(&found, "store/repo.git/hooks"), Some(State::Dir));
    assert_eq!(
        state_of(&found, "store/repo.git/config"),
        Some(State::Missing(EMPTY))
    );
    assert!(found.pins().contains(Path::new("store/repo.git")));
    // A pointer leading out of the grant protects nothing outside it (and fails nothing).
    std::fs::write(p("work/.git"), "gitdir: ../../../../elsewhere\n").unwrap();
    let found = scan(tmp.path(), false, &[]);
    assert_eq!(state_of(&found, "work/.git"), Some(State::File));
    assert!(found.entries().iter().all(|e| !e.path.starts_with("..")));
}

#[test]
fn a_bare_repository_is_protected_as_a_git_directory() {
    let tmp = tempfile::tempdir().unwrap();
    for dir in ["site.git/objects", "site.git/refs", "site.git/hooks"] {
        std::fs::create_dir_all(tmp.path().join(dir)).unwrap();
    }
    std::fs::write(tmp.path().join("site.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    let found = scan(tmp.path(), false, &[]);
    assert_eq!(state_of(&found, "site.git/hooks"), Some(State::Dir));
    assert_eq!(
        state_of(&found, "site.git/config"),
        Some(State::Missing(EMPTY))
    );
    assert!(found.pins().contains(Path::new("site.git")));
    // The grant itself a bare repository.
    let found = scan(&tmp.path().join("site.git"), false, &[]);
    assert_eq!(state_of(&found, "hooks"), Some(State::Dir));
}

#[test]
fn a_protected_path_that_is_a_link_is_reported_as_one() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join(".git")).unwrap();
    symlink("/tmp", tmp.path().join(".git/hooks")).unwrap();
    symlink("elsewhere", tmp.path().join(".envrc")).unwrap();
    let found = scan(tmp.path(), false, &[]);
    assert_eq!(state_of(&found, ".git/hooks"), Some(State::Link));
    assert_eq!(state_of(&found, ".envrc"), Some(State::Link));
    // `.git` itself a link: reported, not followed.
    let other = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(other.path().join("real/hooks")).unwrap();
    symlink(other.path().join("real"), other.path().join(".git")).unwrap();
    let found = scan(other.path(), false, &[]);
    assert_eq!(state_of(&found, ".git"), Some(State::Link));
    assert_eq!(state_of(&found, ".git/hooks"), None);
}

#[test]
fn a_modules_tree_too_large_to_look_at_is_refused_not_half_protected() {
    let tmp = tempfile::tempdir().unwrap();
    let modules = tmp.path().join(".git/modules");
    std::fs::create_dir_all(&modules).unwrap();
    for i in 0..20_001 {
        std::fs::create_dir(modules.join(format!("m{i}"))).unwrap();
    }
    let anchor = Anchor::open_ambient(tmp.path(), Ambient::because("a test's folder")).unwrap();
    let refused = Protection::scan(&anchor, false, &[]).unwrap_err();
    assert_eq!(refused.code(), crate::Code::SandboxUnavailable, "{refused}");
}
