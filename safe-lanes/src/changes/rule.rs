//! The one rule over what a confined command (or a patch) changed in a read-write grant:
//! each changed path is **published** into the folder, **held** for the human, or **dropped**.
//!
//! [`Rule::judge`] is the only place this is decided. It looks at one change — a path
//! relative to the grant, what it became ([`After`]), and whether the human changed it while
//! the command ran — and at the facts of the folder around it ([`Facts`]: what was there
//! before, what the command left). It is used by the publishing of every confined command's
//! layer and by `folder_patch`, and nothing else decides.
//!
//! In order:
//!
//! 1. **Dropped**, never created: a device node, a FIFO, a socket, a file with a set-user-id
//!    or set-group-id bit.
//! 2. **Held as `conflict`**: a path the human changed in the folder while the command ran.
//!    The human's edit is never overwritten.
//! 3. **Held by class** ([`CLASSES`], the table below, first match): git state at any depth,
//!    what tools, agent hosts and editors act on without being asked to run it, a home
//!    folder's start-up files, an existing environment's start-up files, links that leave the
//!    grant. A class the human lifted for the grant (`--allow-protected PATH`, everything
//!    equal to or inside PATH) is published instead, except `link_outside`.
//! 4. **Held as `hidden_path`**: a secret on the library's list of hidden paths
//!    ([`crate::hidden`]) that no class above names (`.env`, `*.pem`, `.aws/` …).
//! 5. Everything else is **published**: the project's own code and the build code the human
//!    runs knowingly (`Makefile`, `package.json` scripts, `build.rs`, `pyproject.toml`), which
//!    is the agent's work to review like any other.
//!
//! A directory that is held holds everything below it; a deletion is judged by the path it
//! removes, so removing git state or a hook is held too.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use serde::{Deserialize, Serialize};

use super::around::Around;
use super::gitconfig;
use crate::error::Shown;

/// Why a change waits for the human: a stable word, as results and listings show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Why {
    /// Git's own state: configuration, hooks, pointers to git directories, rebase and
    /// sequencer state, alternates, a path the repository's configuration points git at.
    GitState,
    /// A tool's configuration that makes it run code nobody asked it to run (`.cargo/config`,
    /// `.npmrc`, `.envrc`, `.pre-commit-config.yaml`, `rust-toolchain.toml` …).
    ToolConfig,
    /// An agent host's project settings or standing instructions (`.claude/`, `.mcp.json`,
    /// `CLAUDE.md`, `AGENTS.md`, `GEMINI.md` …).
    AgentConfig,
    /// An editor's or IDE's project settings (`.vscode/`, `.idea/`, `*.code-workspace`,
    /// `.devcontainer/` …).
    EditorConfig,
    /// A start-up file: a home folder's (`.bashrc`, `.config/`, `.ssh/`, `bin/` …) or an
    /// environment's that existed before the command (a virtual environment's `.pth` files,
    /// `bin/activate`, its existing programs).
    StartUp,
    /// A symbolic link that points outside the grant.
    LinkOutside,
    /// A secret on the library's list of hidden paths (`.env`, a private key, `.aws/` …,
    /// [`crate::hidden`]): nothing an agent writes there reaches the folder unseen.
    HiddenPath,
    /// The human changed this path in the folder while the command ran.
    Conflict,
    /// The command's gateway ended before it decided (killed, or the machine stopped): what
    /// the command left is held whole.
    Interrupted,
    /// The grant was revoked, narrowed or moved while the command ran: nothing of what it left
    /// is published, all of it is held.
    Revoked,
}

impl Why {
    /// The word, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Why::GitState => "git_state",
            Why::ToolConfig => "tool_config",
            Why::AgentConfig => "agent_config",
            Why::EditorConfig => "editor_config",
            Why::StartUp => "start_up",
            Why::LinkOutside => "link_outside",
            Why::HiddenPath => "hidden_path",
            Why::Conflict => "conflict",
            Why::Interrupted => "interrupted",
            Why::Revoked => "revoked",
        }
    }
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a change is dropped rather than created.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Dropped {
    /// A file with a set-user-id or set-group-id bit.
    SetId,
    /// A device node, a FIFO or a socket.
    Special,
}

/// What the rule decides for one change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Into the folder.
    Publish,
    /// For the human, with the reason word and what exactly (for `changes show`).
    Hold(Why, Cow<'static, str>),
    /// Never created.
    Drop(Dropped),
}

/// What a changed path became.
#[derive(Clone, Copy, Debug)]
pub(crate) enum After<'a> {
    /// A regular file with this mode.
    File { mode: u32 },
    /// A directory.
    Dir,
    /// A symbolic link to `target`.
    Link { target: &'a [u8] },
    /// A device node, a FIFO or a socket.
    Special,
    /// Removed.
    Gone,
}

/// One change to judge.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Change<'a> {
    /// Relative to the grant's folder, normal (no `.`, `..` or empty components).
    pub(crate) path: &'a Path,
    /// What it became.
    pub(crate) after: After<'a>,
    /// Whether the human changed it in the folder while the command ran.
    pub(crate) meanwhile: bool,
}

/// What kind of entry a path is, as [`Facts`] see it (links never followed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Link,
    /// Anything else.
    Other,
}

/// What the rule may look at around a change: the folder before the command (as it is, but
/// for the command's changes) and after it (the command's view: its changes over the folder).
/// Paths are relative to the grant's folder; nothing is followed. A path that cannot be looked
/// at is [`Kind::Other`], never absent: what is unknown only adds caution.
pub(crate) trait Facts {
    /// What `rel` was before the command.
    fn before(&self, rel: &Path) -> Option<Kind>;
    /// What `rel` is after it.
    fn after(&self, rel: &Path) -> Option<Kind>;
    /// The content of the regular file `rel` before the command, if it is one of at most
    /// [`MAX_READ`] bytes that can be read (`None` otherwise: the rule then holds what it
    /// cannot judge without it).
    fn before_bytes(&self, rel: &Path) -> Option<Vec<u8>>;
    /// The content of the regular file `rel` after it, likewise.
    fn after_bytes(&self, rel: &Path) -> Option<Vec<u8>>;
}

/// The most of a file the rule reads (a git configuration, a pointer file).
pub(crate) const MAX_READ: u64 = 1 << 20;

/// One class of held changes: a row of the table.
#[derive(Debug)]
pub(crate) struct Class {
    /// The reason word.
    pub(crate) why: Why,
    /// What it holds, in words.
    pub(crate) what: &'static str,
    /// How a path is found to be in it.
    pub(crate) matcher: Matcher,
    /// Whether the human can lift it for a grant (`--allow-protected`).
    pub(crate) liftable: bool,
}

/// How a [`Class`] recognizes a path.
#[derive(Debug)]
pub(crate) enum Matcher {
    /// These names in a row, anywhere in the path (the path is one of them, or inside).
    Names(&'static [Seg]),
    /// Inside a git directory, other than what git only stores ([`in_git_dir`]).
    InGitDir,
    /// A `.git` that is not a directory (a pointer to a git directory, or a link).
    GitPointer,
    /// A path a repository's configuration (as the human left it) points git at:
    /// `core.hooksPath`, `core.fsmonitor`, `include.path`, an alias running `./x.sh` …
    NamedByGitConfig,
    /// Inside a home folder: a hidden entry at its top, or `bin/` (on `PATH` once it exists).
    HomeStartUp,
    /// Inside a Python environment that existed before (its `pyvenv.cfg` was there): its
    /// configuration, `.pth` files, `sitecustomize`, its programs (`bin/`, first on `PATH` once
    /// activated), `etc/` and Jupyter's kernels.
    EnvironmentStartUp,
    /// A symbolic link whose target leaves the grant (other than into the system's read-only
    /// hierarchies), or passes through another link on its way.
    LinkOutside,
}

/// How one path component is matched.
#[derive(Debug)]
pub(crate) enum Seg {
    /// Exactly this name.
    Is(&'static str),
    /// A name ending with this.
    Ends(&'static str),
    /// A name starting with this, other than the listed names.
    StartsExcept(&'static str, &'static [&'static str]),
}

impl Seg {
    /// Whether `name` matches, in any case of ASCII letters: a folder on a file system that
    /// ignores case (macOS's, a case-folding directory) gives `claude.md` to the tool that
    /// reads `CLAUDE.md`, and holding one more name costs nothing.
    fn matches(&self, name: &[u8]) -> bool {
        let is = |a: &[u8], b: &str| a.eq_ignore_ascii_case(b.as_bytes());
        match self {
            Seg::Is(s) => is(name, s),
            Seg::Ends(s) => name.len() > s.len() && is(&name[name.len() - s.len()..], s),
            Seg::StartsExcept(s, except) => {
                name.len() >= s.len()
                    && is(&name[..s.len()], s)
                    && !except.iter().any(|e| is(name, e))
            }
        }
    }
}

use Seg::{Ends, Is, StartsExcept};

const fn class(why: Why, what: &'static str, matcher: Matcher) -> Class {
    Class {
        why,
        what,
        matcher,
        liftable: true,
    }
}

const fn names(why: Why, what: &'static str, segs: &'static [Seg]) -> Class {
    class(why, what, Matcher::Names(segs))
}

/// The env-file names that are templates, not loaded by anything.
const ENV_TEMPLATES: &[&str] = &[".env.example", ".env.sample", ".env.template", ".env.dist"];

/// The held classes, in the order they are tried (docs/threat-model.md documents each with
/// the threat it closes).
pub(crate) const CLASSES: &[Class] = &[
    // Git state, at any depth, whoever made the repository.
    class(
        Why::GitState,
        "inside a git directory: its configuration (unless every entry changed is inert), hooks \
         git runs, info/, commondir, config.worktree, rebase and sequencer state, alternates",
        Matcher::InGitDir,
    ),
    class(
        Why::GitState,
        "a .git that is not a directory: a pointer to a git directory",
        Matcher::GitPointer,
    ),
    names(
        Why::GitState,
        "submodules' definitions",
        &[Is(".gitmodules")],
    ),
    class(
        Why::GitState,
        "a path the repository's configuration points git at (core.hooksPath, core.fsmonitor, \
         include.path, an alias running a script of the folder)",
        Matcher::NamedByGitConfig,
    ),
    // A home folder, and environments that existed before.
    class(
        Why::StartUp,
        "a home folder's start-up: its hidden files and folders (.bashrc, .profile, .config/, \
         .local/, .ssh/ …) and bin/",
        Matcher::HomeStartUp,
    ),
    class(
        Why::StartUp,
        "an existing Python environment's start-up: pyvenv.cfg, .pth files, sitecustomize, \
         usercustomize, bin/ (first on PATH once activated), etc/, share/jupyter/",
        Matcher::EnvironmentStartUp,
    ),
    // Tools that run code from their configuration.
    names(
        Why::ToolConfig,
        "cargo's configuration (rustc-wrapper, runners, aliases)",
        &[Is(".cargo"), Is("config.toml")],
    ),
    names(
        Why::ToolConfig,
        "cargo's configuration (old name)",
        &[Is(".cargo"), Is("config")],
    ),
    names(
        Why::ToolConfig,
        "rustup's toolchain choice (a path runs a toolchain of its own)",
        &[Is("rust-toolchain.toml")],
    ),
    names(
        Why::ToolConfig,
        "rustup's toolchain choice (old name)",
        &[Is("rust-toolchain")],
    ),
    names(
        Why::ToolConfig,
        "npm's configuration (script-shell, node-options, registries)",
        &[Is(".npmrc")],
    ),
    names(
        Why::ToolConfig,
        "Yarn 1's configuration (yarn-path)",
        &[Is(".yarnrc")],
    ),
    names(
        Why::ToolConfig,
        "Yarn's configuration (yarnPath, plugins)",
        &[Is(".yarnrc.yml")],
    ),
    names(
        Why::ToolConfig,
        "the Yarn release a yarnPath runs",
        &[Is(".yarn"), Is("releases")],
    ),
    names(
        Why::ToolConfig,
        "Yarn plugins",
        &[Is(".yarn"), Is("plugins")],
    ),
    names(
        Why::ToolConfig,
        "pnpm's install hooks",
        &[Is(".pnpmfile.cjs")],
    ),
    names(
        Why::ToolConfig,
        "pnpm's install hooks",
        &[Is(".pnpmfile.mjs")],
    ),
    names(
        Why::ToolConfig,
        "Bun's configuration (preload scripts)",
        &[Is("bunfig.toml")],
    ),
    names(
        Why::ToolConfig,
        "pre-commit's hooks",
        &[Is(".pre-commit-config.yaml")],
    ),
    names(Why::ToolConfig, "husky's hooks", &[Is(".husky")]),
    names(Why::ToolConfig, "lefthook's hooks", &[Is("lefthook.yml")]),
    names(Why::ToolConfig, "lefthook's hooks", &[Is(".lefthook.yml")]),
    names(
        Why::ToolConfig,
        "lefthook's hooks",
        &[Is("lefthook-local.yml")],
    ),
    names(
        Why::ToolConfig,
        "lefthook's hooks",
        &[Is(".lefthook-local.yml")],
    ),
    names(
        Why::ToolConfig,
        "mise's configuration (tasks, hooks, env)",
        &[Is(".mise.toml")],
    ),
    names(Why::ToolConfig, "mise's configuration", &[Is("mise.toml")]),
    names(
        Why::ToolConfig,
        "mise's configuration",
        &[Is(".mise.local.toml")],
    ),
    names(
        Why::ToolConfig,
        "mise's configuration",
        &[Is("mise.local.toml")],
    ),
    names(Why::ToolConfig, "mise's configuration", &[Is(".mise")]),
    names(
        Why::ToolConfig,
        "asdf's and mise's tool choice (plugins)",
        &[Is(".tool-versions")],
    ),
    names(
        Why::ToolConfig,
        "direnv's .envrc and the files like it",
        &[StartsExcept(".envrc", &[])],
    ),
    names(
        Why::ToolConfig,
        "an .env file an .envrc loads",
        &[Is(".env")],
    ),
    names(
        Why::ToolConfig,
        "an .env file an .envrc loads",
        &[StartsExcept(".env.", ENV_TEMPLATES)],
    ),
    names(Why::ToolConfig, "direnv's own folder", &[Is(".direnv")]),
    names(
        Why::ToolConfig,
        "Mercurial's configuration (hooks)",
        &[Is(".hg"), Is("hgrc")],
    ),
    names(Why::ToolConfig, "pdb's start-up commands", &[Is(".pdbrc")]),
    names(Why::ToolConfig, "pry's start-up file", &[Is(".pryrc")]),
    names(Why::ToolConfig, "irb's start-up file", &[Is(".irbrc")]),
    names(
        Why::ToolConfig,
        "the Gradle wrapper (the distribution it downloads and runs)",
        &[Is("gradle"), Is("wrapper")],
    ),
    names(
        Why::ToolConfig,
        "Maven's configuration (JVM options, extensions, wrapper)",
        &[Is(".mvn")],
    ),
    names(
        Why::ToolConfig,
        "Bundler's configuration",
        &[Is(".bundle"), Is("config")],
    ),
    names(
        Why::ToolConfig,
        "pip's configuration (index, options)",
        &[Is("pip.conf")],
    ),
    // Agent hosts: settings with hooks and servers, and standing instructions.
    names(
        Why::AgentConfig,
        "Claude Code's project settings (hooks, commands, agents)",
        &[Is(".claude")],
    ),
    names(
        Why::AgentConfig,
        "MCP servers an agent host starts",
        &[Is(".mcp.json")],
    ),
    names(
        Why::AgentConfig,
        "Gemini CLI's project settings",
        &[Is(".gemini")],
    ),
    names(
        Why::AgentConfig,
        "Codex's project settings",
        &[Is(".codex")],
    ),
    names(
        Why::AgentConfig,
        "agents' shared settings and skills",
        &[Is(".agents")],
    ),
    names(
        Why::AgentConfig,
        "Cursor's project settings",
        &[Is(".cursor")],
    ),
    names(Why::AgentConfig, "Cursor's rules", &[Is(".cursorrules")]),
    names(
        Why::AgentConfig,
        "Windsurf's project settings",
        &[Is(".windsurf")],
    ),
    names(
        Why::AgentConfig,
        "Windsurf's rules",
        &[Is(".windsurfrules")],
    ),
    names(Why::AgentConfig, "Cline's rules", &[Is(".clinerules")]),
    names(Why::AgentConfig, "Roo's project settings", &[Is(".roo")]),
    names(Why::AgentConfig, "Roo's modes", &[Is(".roomodes")]),
    names(
        Why::AgentConfig,
        "Continue's project settings",
        &[Is(".continue")],
    ),
    names(
        Why::AgentConfig,
        "aider's configuration",
        &[Is(".aider.conf.yml")],
    ),
    names(
        Why::AgentConfig,
        "Copilot's instructions",
        &[Is(".github"), Is("copilot-instructions.md")],
    ),
    names(
        Why::AgentConfig,
        "Copilot's instructions",
        &[Is(".github"), Is("instructions")],
    ),
    names(
        Why::AgentConfig,
        "Copilot's prompts",
        &[Is(".github"), Is("prompts")],
    ),
    names(
        Why::AgentConfig,
        "Amazon Q's project settings",
        &[Is(".amazonq")],
    ),
    names(
        Why::AgentConfig,
        "Junie's project settings",
        &[Is(".junie")],
    ),
    names(Why::AgentConfig, "Kiro's project settings", &[Is(".kiro")]),
    names(
        Why::AgentConfig,
        "opencode's project settings",
        &[Is(".opencode")],
    ),
    names(
        Why::AgentConfig,
        "opencode's configuration",
        &[Is("opencode.json")],
    ),
    names(Why::AgentConfig, "goose's hints", &[Is(".goosehints")]),
    names(Why::AgentConfig, "Zed's agent rules", &[Is(".rules")]),
    names(
        Why::AgentConfig,
        "standing instructions to Claude",
        &[Is("CLAUDE.md")],
    ),
    names(
        Why::AgentConfig,
        "standing instructions to Claude",
        &[Is("CLAUDE.local.md")],
    ),
    names(
        Why::AgentConfig,
        "standing instructions to agents",
        &[Is("AGENTS.md")],
    ),
    names(
        Why::AgentConfig,
        "standing instructions to agents",
        &[Is("AGENTS.override.md")],
    ),
    names(
        Why::AgentConfig,
        "standing instructions to agents",
        &[Is("AGENT.md")],
    ),
    names(
        Why::AgentConfig,
        "standing instructions to Gemini",
        &[Is("GEMINI.md")],
    ),
    // Editors and IDEs: tasks that run on opening a folder, settings naming programs.
    names(
        Why::EditorConfig,
        "VS Code's settings and tasks",
        &[Is(".vscode")],
    ),
    names(
        Why::EditorConfig,
        "a VS Code workspace",
        &[Ends(".code-workspace")],
    ),
    names(
        Why::EditorConfig,
        "JetBrains IDEs' project settings",
        &[Is(".idea")],
    ),
    names(
        Why::EditorConfig,
        "Zed's project settings and tasks",
        &[Is(".zed")],
    ),
    names(
        Why::EditorConfig,
        "a dev container (initializeCommand runs on the host)",
        &[Is(".devcontainer")],
    ),
    names(
        Why::EditorConfig,
        "a dev container",
        &[Is(".devcontainer.json")],
    ),
    names(
        Why::EditorConfig,
        "Fleet's project settings",
        &[Is(".fleet")],
    ),
    names(
        Why::EditorConfig,
        "Theia's project settings",
        &[Is(".theia")],
    ),
    names(
        Why::EditorConfig,
        "Helix's project settings",
        &[Is(".helix")],
    ),
    names(
        Why::EditorConfig,
        "Neovim's project start-up (exrc)",
        &[Is(".nvim.lua")],
    ),
    names(
        Why::EditorConfig,
        "Neovim's project start-up (exrc)",
        &[Is(".nvimrc")],
    ),
    names(
        Why::EditorConfig,
        "Vim's project start-up (exrc)",
        &[Is(".exrc")],
    ),
    names(
        Why::EditorConfig,
        "a Sublime Text project (build systems)",
        &[Ends(".sublime-project")],
    ),
    // Links: what the human's `>` or editor would follow out of the folder.
    Class {
        why: Why::LinkOutside,
        what: "a symbolic link whose target leaves the grant",
        matcher: Matcher::LinkOutside,
        liftable: false,
    },
];

/// What git only stores in a git directory: data, never instructions. Entries are paths
/// inside the git directory; `*` is any one name, a trailing `/**` anything below.
const GIT_DATA: &[&str] = &[
    "HEAD",
    "ORIG_HEAD",
    "FETCH_HEAD",
    "MERGE_HEAD",
    "MERGE_MODE",
    "MERGE_MSG",
    "AUTO_MERGE",
    "COMMIT_EDITMSG",
    "SQUASH_MSG",
    "TAG_EDITMSG",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "REBASE_HEAD",
    "index",
    "packed-refs",
    "shallow",
    "description",
    "gitk.cache",
    "gc.pid",
    "gc.log",
    "objects/**",
    "refs/**",
    "logs/**",
    "rr-cache/**",
    "lfs/**",
    "branches/**",
    "hooks",
    "info",
    "modules",
    "worktrees",
    "worktrees/*",
];

/// Git's lock files (`index.lock`, `HEAD.lock`): transient, and what they hold is data.
const GIT_LOCK_SUFFIX: &str = ".lock";

/// The rule for one grant. It keeps what it learned about the folder's directories (which are
/// git directories, which environments existed, what each repository's configuration names)
/// for the changes judged after.
#[derive(Debug)]
pub(crate) struct Rule<'g> {
    /// The grant's folder, absolute (for links and the configuration's absolute paths).
    grant: &'g Path,
    /// Where the grant lies in a home folder (empty: it is one), if it does.
    home: Option<PathBuf>,
    /// The paths the human lifted for the grant.
    lifted: &'g [PathBuf],
    /// What lies above the grant's folder.
    around: Around,
    /// What the grant hides ([`crate::hidden`]).
    hidden: crate::hidden::Hidden,
    known: RefCell<Known>,
}

#[derive(Debug, Default)]
struct Known {
    git_dir: HashMap<PathBuf, bool>,
    was_git_dir: HashMap<PathBuf, bool>,
    environment: HashMap<PathBuf, bool>,
    /// Each repository's top (the folder holding its `.git`, before the command), with the
    /// paths its configuration names (relative to the grant).
    named: HashMap<PathBuf, Option<Rc<[PathBuf]>>>,
}

impl<'g> Rule<'g> {
    /// The rule for the grant whose folder is `grant` (canonical), lying in a home folder at
    /// `home` (see [`home_prefix`]), with the paths the human lifted for it.
    pub(crate) fn new(grant: &'g Path, home: Option<PathBuf>, lifted: &'g [PathBuf]) -> Self {
        Self {
            grant,
            home,
            lifted,
            around: Around::default(),
            hidden: crate::hidden::Hidden::default(),
            known: RefCell::new(Known::default()),
        }
    }

    /// The rule for the grant whose folder is `grant` (canonical), with the paths the human
    /// lifted for it: where it lies in a home folder, and what lies above it (a git directory,
    /// a working tree, a Python environment), looked at now.
    pub(crate) fn for_grant(grant: &'g Path, lifted: &'g [PathBuf]) -> Self {
        Self::new(grant, home_prefix(grant), lifted).around(Around::of(grant))
    }

    /// The same rule, knowing what lies above the grant's folder.
    pub(crate) fn around(self, around: Around) -> Self {
        Self { around, ..self }
    }

    /// The same rule for a grant that hides `hidden` (the library's list, by default).
    pub(crate) fn hiding(self, hidden: crate::hidden::Hidden) -> Self {
        Self { hidden, ..self }
    }

    /// Judge `change` with the facts of the folder (module docs).
    pub(crate) fn judge(&self, change: &Change<'_>, facts: &dyn Facts) -> Verdict {
        match change.after {
            After::Special => return Verdict::Drop(Dropped::Special),
            After::File { mode } if mode & 0o6000 != 0 => return Verdict::Drop(Dropped::SetId),
            _ => {}
        }
        if change.meanwhile {
            return Verdict::Hold(
                Why::Conflict,
                "the human changed it in the folder while the command ran".into(),
            );
        }
        let lifted = self.lifted.iter().any(|l| change.path.starts_with(l));
        // The path's names, read once for every row of the table.
        let names: Vec<&[u8]> = change
            .path
            .components()
            .map(|c| c.as_os_str().as_encoded_bytes())
            .collect();
        for class in CLASSES {
            if lifted && class.liftable {
                continue;
            }
            if let Some(what) = self.matches(class, change, &names, facts) {
                return Verdict::Hold(class.why, what);
            }
        }
        // A secret the classes above do not name (an `.npmrc` is a tool's configuration
        // there); one a row hides for what it holds (a private key in a `*.pem`), when it
        // holds it before or after.
        // A side that is a file whose content cannot be read (too large, unreadable) counts
        // as holding it.
        let side = |kind: Option<Kind>, bytes: Option<Vec<u8>>, h: &crate::hidden::Matched| {
            kind == Some(Kind::File) && bytes.is_none_or(|b| h.holds_bytes(&b))
        };
        let holds = |h: &crate::hidden::Matched| {
            !h.needs_content()
                || side(
                    facts.before(change.path),
                    facts.before_bytes(change.path),
                    h,
                )
                || side(facts.after(change.path), facts.after_bytes(change.path), h)
        };
        let kind = match change.after {
            After::Dir => crate::hidden::Kind::Dir,
            _ => crate::hidden::Kind::Other,
        };
        if let Some(hidden) = self
            .hidden
            .hides_below(self.grant, change.path, kind)
            .filter(holds)
        {
            return Verdict::Hold(Why::HiddenPath, hidden.what.into());
        }
        Verdict::Publish
    }

    /// Whether `change` is in `class`, and then what it is.
    fn matches(
        &self,
        class: &Class,
        change: &Change<'_>,
        names: &[&[u8]],
        facts: &dyn Facts,
    ) -> Option<Cow<'static, str>> {
        let path = change.path;
        let found = match &class.matcher {
            Matcher::Names(segs) => names_match(names, segs),
            Matcher::InGitDir => return self.in_git_dir(change, facts),
            Matcher::GitPointer => {
                path.file_name().is_some_and(is_dot_git)
                    && !matches!(change.after, After::Dir)
                    && !(matches!(change.after, After::Gone)
                        && facts.before(path) == Some(Kind::Dir))
            }
            Matcher::NamedByGitConfig => self.named_by_git_config(path, facts),
            Matcher::HomeStartUp => self.home.as_ref().is_some_and(|home| {
                let at = home.join(path);
                at.iter()
                    .next()
                    .is_some_and(|top| top.as_encoded_bytes().starts_with(b".") || top == "bin")
            }),
            Matcher::EnvironmentStartUp => self.environment_start_up(path, facts),
            Matcher::LinkOutside => match change.after {
                After::Link { target } => !self.link_is_harmless(path, target, facts),
                _ => false,
            },
        };
        found.then_some(Cow::Borrowed(class.what))
    }

    /// The git-directory class: the innermost git directory the path lies in, and the path
    /// inside it, judged against [`GIT_DATA`] (with a configuration judged by what it
    /// changed, and `info/exclude` holding only comments).
    fn in_git_dir(&self, change: &Change<'_>, facts: &dyn Facts) -> Option<Cow<'static, str>> {
        let path = change.path;
        let rel: Cow<'_, Path> = match ancestors(path).find(|dir| self.is_git_dir(dir, facts)) {
            Some(inner) => {
                // A folder of the human's that the command makes a repository (its `HEAD`,
                // `objects` and `refs` added): what it held was judged as plain files, never
                // as git's.
                if facts.before(inner) == Some(Kind::Dir) && !self.was_git_dir(inner, facts) {
                    return Some(
                        "inside a folder that this change makes a repository of: what the \
                         folder held was never judged as git's (a configuration, hooks)"
                            .into(),
                    );
                }
                Cow::Borrowed(path.strip_prefix(inner).ok()?)
            }
            // The grant itself lies in a git directory.
            None => Cow::Owned(self.around.git_dir.as_ref()?.join(path)),
        };
        let rel: &Path = &rel;
        if rel == Path::new("config") {
            let unreadable = || Some("a git configuration that cannot be read whole".into());
            let before = match facts.before(path) {
                None => Vec::new(),
                Some(_) => match facts.before_bytes(path) {
                    Some(bytes) => bytes,
                    None => return unreadable(),
                },
            };
            return match change.after {
                After::File { .. } => match facts.after_bytes(path) {
                    Some(after) => gitconfig::not_inert(&before, &after)
                        .map(|why| format!("a git configuration: {why}").into()),
                    None => unreadable(),
                },
                _ => Some("a git configuration removed or replaced".into()),
            };
        }
        if rel == Path::new("info/exclude")
            && matches!(change.after, After::File { .. })
            && facts
                .after_bytes(path)
                .is_some_and(|text| only_comments(&text))
        {
            return None;
        }
        let name = rel.file_name()?.as_encoded_bytes();
        if rel.parent() == Some(Path::new("hooks")) {
            return (!name.ends_with(b".sample"))
                .then_some("a hook git runs (only *.sample hooks are inert)".into());
        }
        if name.ends_with(GIT_LOCK_SUFFIX.as_bytes()) && rel.components().count() == 1 {
            return None;
        }
        if matches!(change.after, After::Link { .. }) {
            return Some("a symbolic link inside a git directory".into());
        }
        // `objects/info/` holds git's indexes of its packs, and the alternates: other object
        // stores git reads as its own.
        let objects_info = Path::new("objects/info");
        let in_objects_info = rel.starts_with(objects_info) && rel != objects_info;
        let index_of_packs = ["packs", "commit-graph", "commit-graphs"]
            .iter()
            .any(|n| rel.starts_with(objects_info.join(n)));
        let names: Vec<&[u8]> = rel
            .components()
            .map(|c| c.as_os_str().as_encoded_bytes())
            .collect();
        let data = GIT_DATA
            .iter()
            .any(|pattern| git_data_matches(pattern, &names))
            && (!in_objects_info || index_of_packs);
        (!data).then(|| {
            format!(
                "{} inside a git directory, which git reads as instructions or state",
                Shown::path(rel)
            )
            .into()
        })
    }

    /// Whether the directory `dir` is a git directory: named `.git`, or holding `HEAD` and
    /// either `objects` and `refs` (a repository, bare or a submodule's) or `commondir` (a
    /// linked worktree's), before or after the command.
    fn is_git_dir(&self, dir: &Path, facts: &dyn Facts) -> bool {
        if let Some(known) = self.known.borrow().git_dir.get(dir) {
            return *known;
        }
        let git = git_dir_by(dir, |rel| facts.after(rel).or_else(|| facts.before(rel)));
        self.known
            .borrow_mut()
            .git_dir
            .insert(dir.to_path_buf(), git);
        git
    }

    /// Whether the directory `dir` was a git directory before the command.
    fn was_git_dir(&self, dir: &Path, facts: &dyn Facts) -> bool {
        if let Some(known) = self.known.borrow().was_git_dir.get(dir) {
            return *known;
        }
        let git = git_dir_by(dir, |rel| facts.before(rel));
        self.known
            .borrow_mut()
            .was_git_dir
            .insert(dir.to_path_buf(), git);
        git
    }

    /// Whether `path` is (or lies inside) a path that the configuration of a repository it
    /// lies in — as the human left it, before the command — points git at.
    fn named_by_git_config(&self, path: &Path, facts: &dyn Facts) -> bool {
        // A repository whose working tree holds the grant.
        if self.around.named.iter().any(|n| path.starts_with(n)) {
            return true;
        }
        ancestors(path).any(|top| {
            self.named_in(top, facts)
                .is_some_and(|named| named.iter().any(|n| path.starts_with(n)))
        })
    }

    /// The paths the configuration of the repository whose top is `top` names (`None`: no
    /// repository there).
    fn named_in(&self, top: &Path, facts: &dyn Facts) -> Option<Rc<[PathBuf]>> {
        if let Some(known) = self.known.borrow().named.get(top) {
            return known.clone();
        }
        let dot_git = top.join(".git");
        let git_dir = match facts.before(&dot_git) {
            Some(Kind::Dir) => Some(dot_git),
            Some(Kind::File) => facts
                .before_bytes(&dot_git)
                .and_then(|text| pointer(&text))
                .and_then(|target| self.inside(top, &target)),
            _ => None,
        };
        let named = git_dir.map(|git_dir| {
            let config = facts
                .before_bytes(&git_dir.join("config"))
                .unwrap_or_default();
            let entries = gitconfig::parse(&config).unwrap_or_default();
            let mut named = Vec::new();
            for word in gitconfig::named_paths(&entries) {
                // Relative to where git runs it (the working tree) and to the file that
                // includes it (the git directory): both are held.
                named.extend(self.inside(top, Path::new(&word)));
                named.extend(self.inside(&git_dir, Path::new(&word)));
            }
            named.into()
        });
        self.known
            .borrow_mut()
            .named
            .insert(top.to_path_buf(), named.clone());
        named
    }

    /// Whether `path` lies in a Python environment that existed before the command, in a
    /// place of it that runs at the interpreter's start.
    fn environment_start_up(&self, path: &Path, facts: &dyn Facts) -> bool {
        let rel: Cow<'_, Path> = match ancestors(path).find(|dir| self.is_environment(dir, facts)) {
            Some(env) => match path.strip_prefix(env) {
                Ok(rel) => Cow::Borrowed(rel),
                Err(_) => return false,
            },
            // The grant itself lies in an environment.
            None => match &self.around.environment {
                Some(prefix) => Cow::Owned(prefix.join(path)),
                None => return false,
            },
        };
        let rel: &Path = &rel;
        let name = rel
            .file_name()
            .map(|n| n.as_encoded_bytes())
            .unwrap_or_default();
        let top = rel.components().next().map(|c| c.as_os_str());
        rel == Path::new("pyvenv.cfg")
            || name.ends_with(b".pth")
            || name == b"sitecustomize.py"
            || name == b"usercustomize.py"
            || top.is_some_and(|t| t == "etc" || t == "bin" || t == "Scripts")
            || rel.starts_with("share/jupyter")
    }

    fn is_environment(&self, dir: &Path, facts: &dyn Facts) -> bool {
        if let Some(known) = self.known.borrow().environment.get(dir) {
            return *known;
        }
        let env = facts.before(&dir.join("pyvenv.cfg")) == Some(Kind::File);
        self.known
            .borrow_mut()
            .environment
            .insert(dir.to_path_buf(), env);
        env
    }

    /// Whether the link at `path` to `target` is one the human's tools may follow: into the
    /// grant, or into the system's read-only hierarchies ([`SYSTEM_TARGETS`]), walked as the
    /// kernel walks it from the link's folder. A target that passes through a link of the
    /// grant on its way (`ext -> /usr`, then `ext/../etc/passwd`; `lnk -> .`, then
    /// `/home/u/proj/lnk/../.bashrc`) goes where that link says, which a reading of the text
    /// cannot tell: not one. So does a walk that leaves the grant and comes back into it.
    fn link_is_harmless(&self, path: &Path, target: &[u8], facts: &dyn Facts) -> bool {
        /// Where the walk is: in the grant (relative to it), or outside it (absolute).
        enum At {
            Inside(PathBuf),
            Outside(PathBuf),
        }
        let target = Path::new(std::ffi::OsStr::from_bytes(target));
        if target.as_os_str().is_empty() {
            return false;
        }
        let link = |rel: &Path| {
            facts.after(rel) == Some(Kind::Link) || facts.before(rel) == Some(Kind::Link)
        };
        let mut at = match target.is_absolute() {
            true => At::Outside(PathBuf::from("/")),
            false => At::Inside(path.parent().unwrap_or(Path::new("")).to_path_buf()),
        };
        let mut components = target.components().peekable();
        while let Some(c) = components.next() {
            let last = components.peek().is_none();
            at = match (at, c) {
                (At::Inside(mut rel), Component::Normal(n)) => {
                    rel.push(n);
                    if !last && link(&rel) {
                        return false;
                    }
                    At::Inside(rel)
                }
                (At::Inside(mut rel), Component::ParentDir) => match rel.pop() {
                    true => At::Inside(rel),
                    false => At::Outside(self.grant.parent().unwrap_or(Path::new("/")).into()),
                },
                (At::Outside(mut abs), Component::Normal(n)) => {
                    abs.push(n);
                    match abs.strip_prefix(self.grant) {
                        // Back in the grant: the rest is walked as inside it.
                        Ok(rel) => At::Inside(rel.to_path_buf()),
                        Err(_) => At::Outside(abs),
                    }
                }
                (At::Outside(mut abs), Component::ParentDir) => {
                    abs.pop();
                    At::Outside(abs)
                }
                (at, _) => at,
            };
        }
        match at {
            At::Inside(_) => true,
            At::Outside(abs) => SYSTEM_TARGETS.iter().any(|system| abs.starts_with(system)),
        }
    }

    /// `target` (as written in a file or link at `base`, relative to the grant) as a path
    /// relative to the grant, when it stays inside it: absolute targets under the grant's
    /// folder, relative ones joined to `base`, `..` folded as written.
    fn inside(&self, base: &Path, target: &Path) -> Option<PathBuf> {
        let joined = if target.is_absolute() {
            target.strip_prefix(self.grant).ok()?.to_path_buf()
        } else {
            base.join(target)
        };
        let mut out = PathBuf::new();
        for c in joined.components() {
            match c {
                Component::Normal(n) => out.push(n),
                Component::ParentDir => {
                    if !out.pop() {
                        return None;
                    }
                }
                Component::CurDir => {}
                Component::RootDir | Component::Prefix(_) => return None,
            }
        }
        Some(out)
    }
}

use std::os::unix::ffi::OsStrExt;

/// Where a link leaving the grant may point: the system's read-only hierarchies (what the
/// sandbox shows read-only; a virtual environment's `bin/python3 -> /usr/bin/python3`) and
/// `/dev/null`.
const SYSTEM_TARGETS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/dev/null",
];

/// Whether `name` is `.git`, in any case of its letters (where case is ignored, `.GIT` is it).
fn is_dot_git(name: &std::ffi::OsStr) -> bool {
    name.as_encoded_bytes().eq_ignore_ascii_case(b".git")
}

/// Whether the directory `dir` is a git directory, by what `kind` says of the paths in it
/// ([`Rule::is_git_dir`]).
fn git_dir_by(dir: &Path, kind: impl Fn(&Path) -> Option<Kind>) -> bool {
    let is_dir = kind(dir) == Some(Kind::Dir) || dir.as_os_str().is_empty();
    is_dir
        && (dir.file_name().is_some_and(is_dot_git)
            || (kind(&dir.join("HEAD")).is_some()
                && ((kind(&dir.join("objects")) == Some(Kind::Dir)
                    && kind(&dir.join("refs")) == Some(Kind::Dir))
                    || kind(&dir.join("commondir")).is_some())))
}

/// Every directory `path` lies in, innermost first, the grant's folder (`""`) last.
fn ancestors(path: &Path) -> impl Iterator<Item = &Path> {
    path.ancestors().skip(1)
}

/// Whether `segs` match a run of `names` (a path's components).
fn names_match(names: &[&[u8]], segs: &[Seg]) -> bool {
    names
        .windows(segs.len())
        .any(|run| run.iter().zip(segs).all(|(name, seg)| seg.matches(name)))
}

/// Whether the path inside a git directory whose names are `have` is matched by the
/// [`GIT_DATA`] entry `pattern`.
fn git_data_matches(pattern: &str, have: &[&[u8]]) -> bool {
    let (pattern, below) = match pattern.strip_suffix("/**") {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let mut have = have.iter();
    for want in pattern.split('/') {
        match have.next() {
            Some(name) if want == "*" || want.as_bytes() == *name => {}
            _ => return false,
        }
    }
    below || have.next().is_none()
}

/// What a `.git` pointer file names after `gitdir: ` (git's reading: the rest of the text
/// without its line end).
pub(super) fn pointer(text: &[u8]) -> Option<PathBuf> {
    let rest = text.strip_prefix(b"gitdir: ")?;
    let end = rest
        .iter()
        .position(|b| *b == b'\n' || *b == b'\r' || *b == 0)
        .unwrap_or(rest.len());
    let rest = &rest[..end];
    (!rest.is_empty()).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(rest)))
}

/// Whether `text` holds nothing but blank lines and `#` comments (git's template of
/// `info/exclude`).
fn only_comments(text: &[u8]) -> bool {
    text.split(|b| *b == b'\n').all(|line| {
        let line = line.trim_ascii();
        line.is_empty() || line.starts_with(b"#")
    })
}

/// Where `grant` (canonical) lies in a home folder — the process's `$HOME` or a person's
/// home in `/etc/passwd` — as a path relative to it (empty when it is one), if it does.
pub(crate) fn home_prefix(grant: &Path) -> Option<PathBuf> {
    crate::accounts::people_homes()
        .into_iter()
        .filter_map(|home| grant.strip_prefix(&home).ok().map(Path::to_path_buf))
        .min_by_key(|rest| rest.components().count())
}

#[cfg(test)]
mod tests;
