//! The rule as tables: a folder made of a few entries before and after, one change, the
//! verdict. Every class of [`CLASSES`] is hit by at least one case.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::*;

/// A folder in memory: each path's kind and, for files, content; before and after.
#[derive(Default)]
struct Folder {
    before: BTreeMap<PathBuf, (Kind, Vec<u8>)>,
    after: BTreeMap<PathBuf, (Kind, Vec<u8>)>,
}

impl Folder {
    /// A folder where each of `before` exists as written (`dir/` a directory, `name=text` a
    /// file with that text, `name->` a link, else an empty file); after the command, the same
    /// plus `after`.
    fn new(before: &[&str], after: &[&str]) -> Self {
        let mut f = Folder::default();
        for spec in before {
            let (path, entry) = parse(spec);
            add_parents(&mut f.before, &path);
            f.after.insert(path.clone(), entry.clone());
            add_parents(&mut f.after, &path);
            f.before.insert(path, entry);
        }
        for spec in after {
            let (path, entry) = parse(spec);
            add_parents(&mut f.after, &path);
            f.after.insert(path, entry);
        }
        f
    }
}

fn parse(spec: &str) -> (PathBuf, (Kind, Vec<u8>)) {
    if let Some(dir) = spec.strip_suffix('/') {
        (dir.into(), (Kind::Dir, Vec::new()))
    } else if let Some(link) = spec.strip_suffix("->") {
        (link.into(), (Kind::Link, Vec::new()))
    } else if let Some((path, text)) = spec.split_once('=') {
        (path.into(), (Kind::File, text.as_bytes().to_vec()))
    } else {
        (spec.into(), (Kind::File, Vec::new()))
    }
}

fn add_parents(map: &mut BTreeMap<PathBuf, (Kind, Vec<u8>)>, path: &Path) {
    for parent in path.ancestors().skip(1) {
        if !parent.as_os_str().is_empty() {
            map.entry(parent.into()).or_insert((Kind::Dir, Vec::new()));
        }
    }
}

impl Facts for Folder {
    fn before(&self, rel: &Path) -> Option<Kind> {
        self.before.get(rel).map(|e| e.0)
    }
    fn after(&self, rel: &Path) -> Option<Kind> {
        self.after.get(rel).map(|e| e.0)
    }
    fn before_bytes(&self, rel: &Path) -> Option<Vec<u8>> {
        self.before
            .get(rel)
            .filter(|e| e.0 == Kind::File)
            .map(|e| e.1.clone())
    }
    fn after_bytes(&self, rel: &Path) -> Option<Vec<u8>> {
        self.after
            .get(rel)
            .filter(|e| e.0 == Kind::File)
            .map(|e| e.1.clone())
    }
}

const GRANT: &str = "/home/u/proj";

/// What a case expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Publish,
    Hold(Why),
    Drop,
}

/// One case: a folder before, what the command left after, the change, the verdict.
struct Case {
    before: &'static [&'static str],
    after: &'static [&'static str],
    path: &'static str,
    change: After<'static>,
    want: Want,
}

const FILE: After<'static> = After::File { mode: 0o644 };
const DIR: After<'static> = After::Dir;
const GONE: After<'static> = After::Gone;

const fn case(
    before: &'static [&'static str],
    after: &'static [&'static str],
    path: &'static str,
    change: After<'static>,
    want: Want,
) -> Case {
    Case {
        before,
        after,
        path,
        change,
        want,
    }
}

const fn link(target: &'static str) -> After<'static> {
    After::Link {
        target: target.as_bytes(),
    }
}

use Want::{Drop, Hold, Publish};

const GIT: &[&str] = &[
    ".git/HEAD",
    ".git/objects/",
    ".git/refs/heads/",
    ".git/hooks/",
    ".git/config=[core]\n\tbare = false\n",
];
const INIT: &str = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n";

/// The cases, grouped by what they show.
const CASES: &[Case] = &[
    // Ordinary work is published.
    case(&[], &["src/main.rs"], "src/main.rs", FILE, Publish),
    case(&["Makefile"], &[], "Makefile", FILE, Publish),
    case(&[], &["package.json"], "package.json", FILE, Publish),
    case(&[], &["build.rs"], "build.rs", FILE, Publish),
    case(&["old.txt"], &[], "old.txt", GONE, Publish),
    case(&[], &["target/"], "target", DIR, Publish),
    case(
        &[],
        &["bin/tool"],
        "bin/tool",
        After::File { mode: 0o755 },
        Publish,
    ),
    case(&[], &["l->"], "l", link("src/main.rs"), Publish),
    case(&[], &["sub/l->"], "sub/l", link("../README"), Publish),
    case(&[], &["l->"], "l", link("/home/u/proj/x"), Publish),
    case(
        &[],
        &["venv/bin/python3->"],
        "venv/bin/python3",
        link("/usr/bin/python3"),
        Publish,
    ),
    case(&[], &["null->"], "null", link("/dev/null"), Publish),
    case(&[], &["a/b/l->"], "a/b/l", link("../../../proj/x"), Publish),
    case(&[], &[".gitignore"], ".gitignore", FILE, Publish),
    case(&[], &[".env.example"], ".env.example", FILE, Publish),
    case(&[], &["docs/notes.md"], "docs/notes.md", FILE, Publish),
    // A held name in another case: the same file where case is ignored.
    case(
        &[],
        &["docs/claude.md"],
        "docs/claude.md",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(
        &[],
        &[".GIT/config=[core]\n\tfsmonitor = x\n"],
        ".GIT/config",
        FILE,
        Hold(Why::GitState),
    ),
    case(
        &[],
        &[".VSCode/tasks.json"],
        ".VSCode/tasks.json",
        FILE,
        Hold(Why::EditorConfig),
    ),
    // Dropped.
    case(&[], &["fifo"], "fifo", After::Special, Drop),
    case(&[], &["suid"], "suid", After::File { mode: 0o4755 }, Drop),
    case(&[], &["sgid"], "sgid", After::File { mode: 0o2755 }, Drop),
    // Conflict wins over everything but dropping (see `the_humans_edit_is_a_conflict`).
    // Git state, at any depth, in repositories old and new.
    case(
        GIT,
        &[".git/hooks/pre-commit"],
        ".git/hooks/pre-commit",
        FILE,
        Hold(Why::GitState),
    ),
    case(
        GIT,
        &[".git/hooks/pre-commit.sample"],
        ".git/hooks/pre-commit.sample",
        FILE,
        Publish,
    ),
    case(GIT, &[], ".git/hooks", DIR, Publish),
    case(
        GIT,
        &[".git/objects/ab/cdef"],
        ".git/objects/ab/cdef",
        FILE,
        Publish,
    ),
    case(
        GIT,
        &[".git/refs/heads/main"],
        ".git/refs/heads/main",
        FILE,
        Publish,
    ),
    case(GIT, &[".git/logs/HEAD"], ".git/logs/HEAD", FILE, Publish),
    case(GIT, &[".git/index"], ".git/index", FILE, Publish),
    case(GIT, &[".git/index.lock"], ".git/index.lock", FILE, Publish),
    case(
        GIT,
        &[".git/COMMIT_EDITMSG"],
        ".git/COMMIT_EDITMSG",
        FILE,
        Publish,
    ),
    case(
        GIT,
        &[".git/packed-refs"],
        ".git/packed-refs",
        FILE,
        Publish,
    ),
    case(
        GIT,
        &[".git/objects/info/alternates"],
        ".git/objects/info/alternates",
        FILE,
        Hold(Why::GitState),
    ),
    case(
        GIT,
        &[".git/objects/info/packs"],
        ".git/objects/info/packs",
        FILE,
        Publish,
    ),
    case(
        GIT,
        &[".git/info/attributes"],
        ".git/info/attributes",
        FILE,
        Hold(Why::GitState),
    ),
    case(
        GIT,
        &[".git/info/exclude=# git ls-files\n\n# *.o\n"],
        ".git/info/exclude",
        FILE,
        Publish,
    ),
    case(
        GIT,
        &[".git/info/exclude=secret\n"],
        ".git/info/exclude",
        FILE,
        Hold(Why::GitState),
    ),
    case(
        GIT,
        &[".git/commondir=.\n"],
        ".git/commondir",
        FILE,
        Hold(Why::GitState),
    ),
    case(
        GIT,
        &[".git/config.worktree"],
        ".git/config.worktree",
        FILE,
        Hold(Why::GitState),
    ),
    case(
        GIT,
        &[".git/rebase-merge/git-rebase-todo"],
        ".git/rebase-merge/git-rebase-todo",
        FILE,
        Hold(Why::GitState),
    ),
    case(
        GIT,
        &[".git/rebase-merge/"],
        ".git/rebase-merge",
        DIR,
        Hold(Why::GitState),
    ),
    case(
        GIT,
        &[".git/sequencer/todo"],
        ".git/sequencer/todo",
        FILE,
        Hold(Why::GitState),
    ),
    case(
        GIT,
        &[".git/hooks/x->"],
        ".git/hooks/x",
        link("/bin/sh"),
        Hold(Why::GitState),
    ),
    case(
        GIT,
        &[".git/config=[core]\n\tbare = false\n\tfsmonitor = touch /tmp/x\n"],
        ".git/config",
        FILE,
        Hold(Why::GitState),
    ),
    case(
        GIT,
        &[".git/config=[core]\n\tbare = false\n[user]\n\tname = A\n"],
        ".git/config",
        FILE,
        Publish,
    ),
    case(GIT, &[], ".git/config", GONE, Hold(Why::GitState)),
    case(
        GIT,
        &[".git/hooks/pre-push"],
        ".git/hooks/pre-push",
        GONE,
        Hold(Why::GitState),
    ),
    // A repository two folders down, and one the command made.
    case(
        &["a/b/.git/HEAD", "a/b/.git/objects/", "a/b/.git/refs/"],
        &["a/b/.git/hooks/post-checkout"],
        "a/b/.git/hooks/post-checkout",
        FILE,
        Hold(Why::GitState),
    ),
    case(
        &[],
        &[
            "new/.git/HEAD",
            "new/.git/objects/",
            "new/.git/refs/",
            "new/.git/config=[core]\n\tbare = false\n",
        ],
        "new/.git/config",
        FILE,
        Publish,
    ),
    case(
        &[],
        &[
            "new/.git/HEAD",
            "new/.git/objects/",
            "new/.git/refs/",
            "new/.git/config=[core]\n\tsshCommand = sh\n",
        ],
        "new/.git/config",
        FILE,
        Hold(Why::GitState),
    ),
    case(
        &[],
        &["new/.git/hooks/pre-commit"],
        "new/.git/hooks/pre-commit",
        FILE,
        Hold(Why::GitState),
    ),
    case(&[], &["new/.git/"], "new/.git", DIR, Publish),
    // A bare repository, the modules of submodules, linked worktrees.
    case(
        &["srv.git/HEAD", "srv.git/objects/", "srv.git/refs/"],
        &["srv.git/hooks/post-receive"],
        "srv.git/hooks/post-receive",
        FILE,
        Hold(Why::GitState),
    ),
    case(
        &["srv.git/HEAD", "srv.git/objects/", "srv.git/refs/"],
        &["srv.git/refs/heads/x"],
        "srv.git/refs/heads/x",
        FILE,
        Publish,
    ),
    // A folder of the human's (its `config` and hooks published earlier as plain files) that
    // this command makes a bare repository: what makes it one is held.
    case(
        &[
            "src/config=[core]\n\tfsmonitor = touch /tmp/x\n",
            "src/hooks/x",
        ],
        &["src/HEAD", "src/objects/", "src/refs/"],
        "src/HEAD",
        FILE,
        Hold(Why::GitState),
    ),
    case(
        &[
            "src/config=[core]\n\tfsmonitor = touch /tmp/x\n",
            "src/objects/",
            "src/refs/",
        ],
        &["src/HEAD"],
        "src/HEAD",
        FILE,
        Hold(Why::GitState),
    ),
    // A new folder made a bare repository is judged as one (its configuration, its hooks).
    case(
        &[],
        &["new.git/HEAD", "new.git/objects/", "new.git/refs/"],
        "new.git/HEAD",
        FILE,
        Publish,
    ),
    case(
        GIT,
        &[
            ".git/modules/lib/HEAD",
            ".git/modules/lib/objects/",
            ".git/modules/lib/refs/",
            ".git/modules/lib/config=[core]\n\tpager = sh\n",
        ],
        ".git/modules/lib/config",
        FILE,
        Hold(Why::GitState),
    ),
    case(
        GIT,
        &[
            ".git/modules/lib/HEAD",
            ".git/modules/lib/objects/",
            ".git/modules/lib/refs/",
            ".git/modules/lib/objects/x",
        ],
        ".git/modules/lib/objects/x",
        FILE,
        Publish,
    ),
    case(
        GIT,
        &[
            ".git/worktrees/w/HEAD",
            ".git/worktrees/w/commondir=../..\n",
            ".git/worktrees/w/index",
        ],
        ".git/worktrees/w/index",
        FILE,
        Publish,
    ),
    case(
        GIT,
        &[
            ".git/worktrees/w/HEAD",
            ".git/worktrees/w/commondir=../..\n",
        ],
        ".git/worktrees/w/commondir",
        FILE,
        Hold(Why::GitState),
    ),
    case(
        GIT,
        &[
            ".git/worktrees/w/HEAD",
            ".git/worktrees/w/commondir=../..\n",
            ".git/worktrees/w/gitdir",
        ],
        ".git/worktrees/w/gitdir",
        FILE,
        Hold(Why::GitState),
    ),
    // A fake git directory inside hooks does not make a hook data.
    case(
        GIT,
        &[
            ".git/hooks/HEAD",
            ".git/hooks/objects/",
            ".git/hooks/refs/",
            ".git/hooks/post-commit",
        ],
        ".git/hooks/post-commit",
        FILE,
        Hold(Why::GitState),
    ),
    // Pointers to git directories, and submodules.
    case(
        &[],
        &["sub/.git=gitdir: ../evil\n"],
        "sub/.git",
        FILE,
        Hold(Why::GitState),
    ),
    case(
        &[],
        &["sub/.git->"],
        "sub/.git",
        link("../evil"),
        Hold(Why::GitState),
    ),
    case(
        &[],
        &[".gitmodules"],
        ".gitmodules",
        FILE,
        Hold(Why::GitState),
    ),
    // What the human's configuration points git at.
    case(
        &[
            ".git/HEAD",
            ".git/objects/",
            ".git/refs/",
            ".git/config=[core]\n\thooksPath = .husky-hooks\n",
        ],
        &[".husky-hooks/pre-commit"],
        ".husky-hooks/pre-commit",
        FILE,
        Hold(Why::GitState),
    ),
    case(
        &[
            ".git/HEAD",
            ".git/objects/",
            ".git/refs/",
            ".git/config=[alias]\n\tt = !./scripts/t.sh\n",
        ],
        &["scripts/t.sh"],
        "scripts/t.sh",
        FILE,
        Hold(Why::GitState),
    ),
    case(
        &[
            ".git/HEAD",
            ".git/objects/",
            ".git/refs/",
            ".git/config=[include]\n\tpath = ../shared.gitconfig\n",
        ],
        &["shared.gitconfig"],
        "shared.gitconfig",
        FILE,
        Hold(Why::GitState),
    ),
    case(
        &[
            "sub/.git=gitdir: ../.git/modules/sub\n",
            ".git/modules/sub/config=[core]\n\tfsmonitor = ./fsm.sh\n",
        ],
        &["sub/fsm.sh"],
        "sub/fsm.sh",
        FILE,
        Hold(Why::GitState),
    ),
    case(
        &[
            ".git/HEAD",
            ".git/objects/",
            ".git/refs/",
            ".git/config=[alias]\n\tt = !./scripts/t.sh\n",
        ],
        &["scripts/other.sh"],
        "scripts/other.sh",
        FILE,
        Publish,
    ),
    // Tools.
    case(
        &[],
        &["a/b/.cargo/config.toml"],
        "a/b/.cargo/config.toml",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &[".cargo/config"],
        ".cargo/config",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &["rust-toolchain.toml"],
        "rust-toolchain.toml",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &["rust-toolchain"],
        "rust-toolchain",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &["web/.npmrc"],
        "web/.npmrc",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(&[], &[".yarnrc"], ".yarnrc", FILE, Hold(Why::ToolConfig)),
    case(
        &[],
        &[".yarnrc.yml"],
        ".yarnrc.yml",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &[".yarn/releases/yarn.cjs"],
        ".yarn/releases/yarn.cjs",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &[".yarn/plugins/p.cjs"],
        ".yarn/plugins/p.cjs",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &[".pnpmfile.cjs"],
        ".pnpmfile.cjs",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &[".pnpmfile.mjs"],
        ".pnpmfile.mjs",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &["bunfig.toml"],
        "bunfig.toml",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &[".pre-commit-config.yaml"],
        ".pre-commit-config.yaml",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &[".husky/pre-commit"],
        ".husky/pre-commit",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &["lefthook.yml"],
        "lefthook.yml",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &[".lefthook.yml"],
        ".lefthook.yml",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &["lefthook-local.yml"],
        "lefthook-local.yml",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &[".lefthook-local.yml"],
        ".lefthook-local.yml",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &[".mise.toml"],
        ".mise.toml",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &["mise.toml"],
        "mise.toml",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &[".mise.local.toml"],
        ".mise.local.toml",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &["mise.local.toml"],
        "mise.local.toml",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &[".mise/tasks/x"],
        ".mise/tasks/x",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &[".tool-versions"],
        ".tool-versions",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(&[], &[".envrc"], ".envrc", FILE, Hold(Why::ToolConfig)),
    case(
        &[],
        &[".envrc.local"],
        ".envrc.local",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(&[], &[".env"], ".env", FILE, Hold(Why::ToolConfig)),
    case(
        &[],
        &[".env.local"],
        ".env.local",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &[".direnv/x"],
        ".direnv/x",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(&[], &[".hg/hgrc"], ".hg/hgrc", FILE, Hold(Why::ToolConfig)),
    case(&[], &[".pdbrc"], ".pdbrc", FILE, Hold(Why::ToolConfig)),
    case(&[], &[".pryrc"], ".pryrc", FILE, Hold(Why::ToolConfig)),
    case(&[], &[".irbrc"], ".irbrc", FILE, Hold(Why::ToolConfig)),
    case(
        &[],
        &["gradle/wrapper/gradle-wrapper.properties"],
        "gradle/wrapper/gradle-wrapper.properties",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &[".mvn/jvm.config"],
        ".mvn/jvm.config",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(
        &[],
        &[".bundle/config"],
        ".bundle/config",
        FILE,
        Hold(Why::ToolConfig),
    ),
    case(&[], &["pip.conf"], "pip.conf", FILE, Hold(Why::ToolConfig)),
    // Agent hosts.
    case(
        &[],
        &[".claude/settings.json"],
        ".claude/settings.json",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(&[], &[".claude/"], ".claude", DIR, Hold(Why::AgentConfig)),
    case(
        &[],
        &[".mcp.json"],
        ".mcp.json",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(
        &[],
        &[".gemini/settings.json"],
        ".gemini/settings.json",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(
        &[],
        &[".codex/config.toml"],
        ".codex/config.toml",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(
        &[],
        &[".agents/skills/x"],
        ".agents/skills/x",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(
        &[],
        &[".cursor/rules"],
        ".cursor/rules",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(
        &[],
        &[".cursorrules"],
        ".cursorrules",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(
        &[],
        &[".windsurf/x"],
        ".windsurf/x",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(
        &[],
        &[".windsurfrules"],
        ".windsurfrules",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(
        &[],
        &[".clinerules"],
        ".clinerules",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(&[], &[".roo/x"], ".roo/x", FILE, Hold(Why::AgentConfig)),
    case(
        &[],
        &[".roomodes"],
        ".roomodes",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(
        &[],
        &[".continue/x"],
        ".continue/x",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(
        &[],
        &[".aider.conf.yml"],
        ".aider.conf.yml",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(
        &[],
        &[".github/copilot-instructions.md"],
        ".github/copilot-instructions.md",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(
        &[],
        &[".github/instructions/x.md"],
        ".github/instructions/x.md",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(
        &[],
        &[".github/prompts/x.md"],
        ".github/prompts/x.md",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(
        &[],
        &[".github/workflows/ci.yml"],
        ".github/workflows/ci.yml",
        FILE,
        Publish,
    ),
    case(
        &[],
        &[".amazonq/x"],
        ".amazonq/x",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(&[], &[".junie/x"], ".junie/x", FILE, Hold(Why::AgentConfig)),
    case(&[], &[".kiro/x"], ".kiro/x", FILE, Hold(Why::AgentConfig)),
    case(
        &[],
        &[".opencode/x"],
        ".opencode/x",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(
        &[],
        &["opencode.json"],
        "opencode.json",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(
        &[],
        &[".goosehints"],
        ".goosehints",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(&[], &[".rules"], ".rules", FILE, Hold(Why::AgentConfig)),
    case(
        &[],
        &["CLAUDE.md"],
        "CLAUDE.md",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(
        &[],
        &["deep/er/CLAUDE.local.md"],
        "deep/er/CLAUDE.local.md",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(
        &[],
        &["AGENTS.md"],
        "AGENTS.md",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(
        &[],
        &["AGENTS.override.md"],
        "AGENTS.override.md",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(&[], &["AGENT.md"], "AGENT.md", FILE, Hold(Why::AgentConfig)),
    case(
        &[],
        &["GEMINI.md"],
        "GEMINI.md",
        FILE,
        Hold(Why::AgentConfig),
    ),
    case(
        &["CLAUDE.md"],
        &[],
        "CLAUDE.md",
        GONE,
        Hold(Why::AgentConfig),
    ),
    // Editors.
    case(
        &[],
        &["sub/.vscode/tasks.json"],
        "sub/.vscode/tasks.json",
        FILE,
        Hold(Why::EditorConfig),
    ),
    case(
        &[],
        &["x.code-workspace"],
        "x.code-workspace",
        FILE,
        Hold(Why::EditorConfig),
    ),
    case(
        &[],
        &[".idea/workspace.xml"],
        ".idea/workspace.xml",
        FILE,
        Hold(Why::EditorConfig),
    ),
    case(
        &[],
        &[".zed/tasks.json"],
        ".zed/tasks.json",
        FILE,
        Hold(Why::EditorConfig),
    ),
    case(
        &[],
        &[".devcontainer/devcontainer.json"],
        ".devcontainer/devcontainer.json",
        FILE,
        Hold(Why::EditorConfig),
    ),
    case(
        &[],
        &[".devcontainer.json"],
        ".devcontainer.json",
        FILE,
        Hold(Why::EditorConfig),
    ),
    case(
        &[],
        &[".fleet/x"],
        ".fleet/x",
        FILE,
        Hold(Why::EditorConfig),
    ),
    case(
        &[],
        &[".theia/x"],
        ".theia/x",
        FILE,
        Hold(Why::EditorConfig),
    ),
    case(
        &[],
        &[".helix/x"],
        ".helix/x",
        FILE,
        Hold(Why::EditorConfig),
    ),
    case(
        &[],
        &[".nvim.lua"],
        ".nvim.lua",
        FILE,
        Hold(Why::EditorConfig),
    ),
    case(&[], &[".nvimrc"], ".nvimrc", FILE, Hold(Why::EditorConfig)),
    case(&[], &[".exrc"], ".exrc", FILE, Hold(Why::EditorConfig)),
    case(
        &[],
        &["p.sublime-project"],
        "p.sublime-project",
        FILE,
        Hold(Why::EditorConfig),
    ),
    // An environment that existed before, and one the command made.
    case(
        &["venv/pyvenv.cfg", "venv/bin/python"],
        &["venv/lib/python3.11/site-packages/evil.pth"],
        "venv/lib/python3.11/site-packages/evil.pth",
        FILE,
        Hold(Why::StartUp),
    ),
    case(
        &["venv/pyvenv.cfg"],
        &["venv/bin/activate"],
        "venv/bin/activate",
        FILE,
        Hold(Why::StartUp),
    ),
    case(
        &["venv/pyvenv.cfg"],
        &["venv/bin/ls"],
        "venv/bin/ls",
        FILE,
        Hold(Why::StartUp),
    ),
    case(
        &["venv/pyvenv.cfg"],
        &[],
        "venv/pyvenv.cfg",
        FILE,
        Hold(Why::StartUp),
    ),
    case(
        &["venv/pyvenv.cfg"],
        &["venv/lib/python3.11/site-packages/sitecustomize.py"],
        "venv/lib/python3.11/site-packages/sitecustomize.py",
        FILE,
        Hold(Why::StartUp),
    ),
    case(
        &["venv/pyvenv.cfg"],
        &["venv/etc/jupyter/jupyter_server_config.py"],
        "venv/etc/jupyter/jupyter_server_config.py",
        FILE,
        Hold(Why::StartUp),
    ),
    case(
        &["venv/pyvenv.cfg"],
        &["venv/share/jupyter/kernels/k/kernel.json"],
        "venv/share/jupyter/kernels/k/kernel.json",
        FILE,
        Hold(Why::StartUp),
    ),
    case(
        &["venv/pyvenv.cfg"],
        &["venv/lib/python3.11/site-packages/pkg/__init__.py"],
        "venv/lib/python3.11/site-packages/pkg/__init__.py",
        FILE,
        Publish,
    ),
    case(
        &[],
        &[
            "venv/pyvenv.cfg",
            "venv/bin/activate",
            "venv/lib/python3.11/site-packages/d.pth",
        ],
        "venv/lib/python3.11/site-packages/d.pth",
        FILE,
        Publish,
    ),
    case(
        &[],
        &["venv/pyvenv.cfg", "venv/bin/activate"],
        "venv/bin/activate",
        FILE,
        Publish,
    ),
    // Links out of the grant.
    case(
        &[],
        &["build.log->"],
        "build.log",
        link("/home/u/.bashrc"),
        Hold(Why::LinkOutside),
    ),
    case(
        &[],
        &["up->"],
        "up",
        link("../../.ssh/authorized_keys"),
        Hold(Why::LinkOutside),
    ),
    case(&[], &["empty->"], "empty", link(""), Hold(Why::LinkOutside)),
    case(
        &["ext->"],
        &["x->"],
        "x",
        link("ext/../etc/passwd"),
        Hold(Why::LinkOutside),
    ),
    case(
        &[],
        &["x->"],
        "x",
        link("/etc/passwd"),
        Hold(Why::LinkOutside),
    ),
    // Through a link of the grant, written as an absolute path under it: `lnk -> .` makes
    // `lnk/..` the grant's parent, whatever the text folds to.
    case(
        &[],
        &["lnk->", "y->"],
        "y",
        link("/home/u/proj/lnk/../.bashrc"),
        Hold(Why::LinkOutside),
    ),
    // Out of the grant and back into it, then through a link.
    case(
        &["lnk->"],
        &["y->"],
        "y",
        link("../proj/lnk/../.bashrc"),
        Hold(Why::LinkOutside),
    ),
    // Out and back in without a link on the way: inside.
    case(&["sub/"], &["y->"], "y", link("../proj/sub/file"), Publish),
    // A relative link into the system's hierarchies, through the grant's parents.
    case(
        &[],
        &["v/bin/python3->"],
        "v/bin/python3",
        link("../../../../../usr/bin/python3"),
        Publish,
    ),
    // A link through a link to the grant's own folder, at the end: the link itself is judged
    // where it points.
    case(&["lnk->"], &["y->"], "y", link("lnk"), Publish),
    // Secrets on the list of hidden paths, made, changed or removed: held (an `.env` as what
    // an `.envrc` loads, the class that names it first).
    case(&[], &[".env"], ".env", FILE, Hold(Why::ToolConfig)),
    case(
        &[],
        &["app/prod.pem=-----BEGIN PRIVATE KEY-----\n"],
        "app/prod.pem",
        FILE,
        Hold(Why::HiddenPath),
    ),
    // A certificate is public: a CA bundle is the project's (or its environment's) own.
    case(
        &[],
        &["v/certifi/cacert.pem=-----BEGIN CERTIFICATE-----\n"],
        "v/certifi/cacert.pem",
        FILE,
        Publish,
    ),
    case(
        &["deploy/tls.key=-----BEGIN EC PRIVATE KEY-----\n"],
        &[],
        "deploy/tls.key",
        GONE,
        Hold(Why::HiddenPath),
    ),
    case(&[], &[".aws/"], ".aws", DIR, Hold(Why::HiddenPath)),
    case(
        &[],
        &[".aws/credentials"],
        ".aws/credentials",
        FILE,
        Hold(Why::HiddenPath),
    ),
    case(
        &[],
        &["credentials.json"],
        "credentials.json",
        FILE,
        Hold(Why::HiddenPath),
    ),
    // Their examples, and names that only look alike, are the project's own.
    case(&[], &[".env.example"], ".env.example", FILE, Publish),
    case(&[], &["id_generator.py"], "id_generator.py", FILE, Publish),
];

fn verdict_of(c: &Case, home: Option<PathBuf>, lifted: &[PathBuf]) -> Verdict {
    let folder = Folder::new(c.before, c.after);
    let rule = Rule::new(Path::new(GRANT), home, lifted);
    rule.judge(
        &Change {
            path: Path::new(c.path),
            after: c.change,
            meanwhile: false,
        },
        &folder,
    )
}

fn want_of(v: &Verdict) -> Want {
    match v {
        Verdict::Publish => Want::Publish,
        Verdict::Hold(why, _) => Want::Hold(*why),
        Verdict::Drop(_) => Want::Drop,
    }
}

#[test]
fn every_case_gets_its_verdict() {
    let mut wrong = Vec::new();
    for c in CASES {
        let got = verdict_of(c, None, &[]);
        if want_of(&got) != c.want {
            wrong.push(format!(
                "{} ({:?}): got {got:?}, want {:?}",
                c.path, c.change, c.want
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every row of the table is shown by a case: the class each held case matched.
#[test]
fn every_class_of_the_table_has_a_case() {
    let mut hit = BTreeSet::new();
    for c in CASES {
        let folder = Folder::new(c.before, c.after);
        let rule = Rule::new(Path::new(GRANT), None, &[]);
        let change = Change {
            path: Path::new(c.path),
            after: c.change,
            meanwhile: false,
        };
        let names: Vec<&[u8]> = change
            .path
            .components()
            .map(|c| c.as_os_str().as_encoded_bytes())
            .collect();
        if let Some(i) = CLASSES
            .iter()
            .position(|class| rule.matches(class, &change, &names, &folder).is_some())
        {
            hit.insert(i);
        }
    }
    // The home folder's row needs a home: the case of `a_home_folders_start_up_is_held`.
    let home = CLASSES
        .iter()
        .position(|c| matches!(c.matcher, Matcher::HomeStartUp))
        .unwrap();
    hit.insert(home);
    let missing: Vec<_> = (0..CLASSES.len())
        .filter(|i| !hit.contains(i))
        .map(|i| CLASSES[i].what)
        .collect();
    assert!(missing.is_empty(), "classes without a case: {missing:?}");
}

#[test]
fn a_homes_start_up_is_held_and_its_other_folders_are_not() {
    let cases = [
        ("", ".bashrc", Want::Hold(Why::StartUp)),
        ("", ".bash_aliases", Want::Hold(Why::StartUp)),
        ("", ".config/git/config", Want::Hold(Why::StartUp)),
        ("", ".config/autostart/x.desktop", Want::Hold(Why::StartUp)),
        (
            "",
            ".config/systemd/user/x.service",
            Want::Hold(Why::StartUp),
        ),
        ("", ".config/fish/config.fish", Want::Hold(Why::StartUp)),
        ("", ".local/bin/ls", Want::Hold(Why::StartUp)),
        (
            "",
            ".local/lib/python3.11/site-packages/x.pth",
            Want::Hold(Why::StartUp),
        ),
        ("", ".ssh/authorized_keys", Want::Hold(Why::StartUp)),
        ("", ".inputrc", Want::Hold(Why::StartUp)),
        ("", "bin/ls", Want::Hold(Why::StartUp)),
        ("", "Documents/notes.txt", Want::Publish),
        ("src", "site/index.html", Want::Publish),
        ("src", ".bashrc", Want::Publish),
        (".config", "git/config", Want::Hold(Why::StartUp)),
    ];
    for (prefix, path, want) in cases {
        let c = Case {
            before: &[],
            after: &[],
            path,
            change: FILE,
            want,
        };
        let got = verdict_of(&c, Some(PathBuf::from(prefix)), &[]);
        assert_eq!(want_of(&got), want, "{prefix:?} {path}: {got:?}");
    }
}

#[test]
fn the_humans_edit_is_a_conflict_whatever_the_path() {
    let folder = Folder::new(&["src/a.rs"], &[]);
    let rule = Rule::new(Path::new(GRANT), None, &[]);
    for path in ["src/a.rs", ".git/objects/x", "README"] {
        let got = rule.judge(
            &Change {
                path: Path::new(path),
                after: FILE,
                meanwhile: true,
            },
            &folder,
        );
        assert_eq!(want_of(&got), Want::Hold(Why::Conflict), "{path}");
    }
    // Dropping comes first: a set-id file is never created, not even held.
    let got = rule.judge(
        &Change {
            path: Path::new("x"),
            after: After::File { mode: 0o4755 },
            meanwhile: true,
        },
        &folder,
    );
    assert_eq!(want_of(&got), Want::Drop);
}

#[test]
fn what_the_human_lifted_is_published_but_links_out_never_are() {
    let lifted = [PathBuf::from(".vscode"), PathBuf::from(".git/hooks")];
    for (path, change, want) in [
        (".vscode/settings.json", FILE, Want::Publish),
        (".git/hooks/pre-commit", FILE, Want::Publish),
        (".git/config", GONE, Want::Hold(Why::GitState)),
        (
            ".vscode/l",
            link("/home/u/.bashrc"),
            Want::Hold(Why::LinkOutside),
        ),
    ] {
        let c = Case {
            before: GIT,
            after: &[],
            path,
            change,
            want,
        };
        let got = verdict_of(&c, None, &lifted);
        assert_eq!(want_of(&got), want, "{path}: {got:?}");
    }
}

#[test]
fn a_held_configuration_says_what_it_sets() {
    let c = &Case {
        before: GIT,
        after: &[".git/config=[core]\n\tbare = false\n\tfsmonitor = x\n"],
        path: ".git/config",
        change: FILE,
        want: Want::Hold(Why::GitState),
    };
    let Verdict::Hold(_, what) = verdict_of(c, None, &[]) else {
        panic!("held")
    };
    assert!(what.contains("core.fsmonitor"), "{what}");
    let init = Folder::new(&[], &[]);
    assert!(gitconfig::not_inert(b"", INIT.as_bytes()).is_none());
    drop(init);
}

#[test]
fn the_home_prefix_is_where_a_grant_lies_in_a_home() {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    if let Some(home) = home.filter(|h| h.is_absolute() && h != Path::new("/")) {
        assert_eq!(home_prefix(&home), Some(PathBuf::new()));
        assert_eq!(
            home_prefix(&home.join("src/x")),
            Some(PathBuf::from("src/x"))
        );
    }
    assert_eq!(home_prefix(Path::new("/nonexistent-top/x")), None);
}

/// docs/threat-model.md holds the table: every class, by what it holds, with its reason word.
#[test]
fn the_threat_model_documents_every_class() {
    let doc = include_str!("../../../../docs/threat-model.md");
    for class in CLASSES {
        let row = doc
            .lines()
            .find(|l| l.contains(&format!("| {} |", class.what)))
            .unwrap_or_else(|| panic!("no row for {:?}", class.what));
        assert!(row.starts_with(&format!("| `{}` |", class.why)), "{row}");
    }
}

#[test]
fn a_grant_inside_a_git_directory_a_worktree_or_an_environment_is_judged_as_part_of_it() {
    use crate::changes::around::Around;
    let folder = Folder::new(
        &[],
        &["pre-commit", "pre-commit.sample", "hooks/pre-commit"],
    );
    let judge = |around: Around, path: &str| {
        let rule = Rule::new(Path::new(GRANT), None, &[]).around(around);
        let change = Change {
            path: Path::new(path),
            after: FILE,
            meanwhile: false,
        };
        match rule.judge(&change, &folder) {
            Verdict::Publish => Want::Publish,
            Verdict::Hold(why, _) => Want::Hold(why),
            Verdict::Drop(_) => Want::Drop,
        }
    };
    // The grant is `repo/.git/hooks`.
    let in_git_dir = || Around {
        git_dir: Some("hooks".into()),
        ..Around::default()
    };
    assert_eq!(judge(in_git_dir(), "pre-commit"), Want::Hold(Why::GitState));
    assert_eq!(judge(in_git_dir(), "pre-commit.sample"), Want::Publish);
    // The grant is `repo/scripts`, and the repository's `core.hooksPath` is `scripts/hooks`.
    let named = || Around {
        named: vec!["hooks".into()],
        ..Around::default()
    };
    assert_eq!(
        judge(named(), "hooks/pre-commit"),
        Want::Hold(Why::GitState)
    );
    assert_eq!(judge(named(), "pre-commit"), Want::Publish);
    // The grant is an environment's `site-packages`.
    let env = || Around {
        environment: Some("lib/python3.12/site-packages".into()),
        ..Around::default()
    };
    assert_eq!(judge(env(), "evil.pth"), Want::Hold(Why::StartUp));
    assert_eq!(judge(env(), "pkg/mod.py"), Want::Publish);
    // Nothing around: the same paths are the grant's own.
    assert_eq!(judge(Around::default(), "pre-commit"), Want::Publish);
    assert_eq!(judge(Around::default(), "evil.pth"), Want::Publish);
}
