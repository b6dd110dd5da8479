//! Finding the per-user toolchains of a home folder, and the tool and cache grants that would
//! let confined commands use them: what `doctor` proposes, and what a command that cannot find
//! its program is told.
//!
//! Only what is there is proposed (a folder that does not exist is left out), and each
//! proposal is a grant like any other: the human runs the command, and every rule of a grant
//! applies when they do.

use std::path::{Path, PathBuf};

use rustix::fs::FileType;
use serde::Serialize;

use super::proposal::quote;
use super::toolchain::{Kind, Toolchain};
use crate::beneath::{Ambient, Anchor, Symlinks};
use crate::error::Shown;
use crate::input::{Name, RelPath};

/// A toolchain found in a home folder.
#[derive(Clone, Debug, Serialize)]
pub struct FoundToolchain {
    /// A short name (`rust`, `node`, `python`, `uv`, `go`, `local`).
    pub name: &'static str,
    /// What it is, in words.
    pub what: &'static str,
    /// The grants that would let confined commands use it.
    pub grants: Vec<Suggested>,
}

/// One tool or cache grant a toolchain needs.
#[derive(Clone, Debug, Serialize)]
pub struct Suggested {
    /// The alias it would have.
    pub alias: String,
    /// The folder.
    pub path: PathBuf,
    /// Tool or cache.
    pub kind: Kind,
    /// The variables set to its path.
    pub vars: Vec<String>,
    /// A tool's programs folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bin: Option<String>,
    /// What approving it exposes to confined commands, in words.
    pub exposes: String,
}

impl Suggested {
    /// The grant's extras, as [`Grants::add_with`](super::Grants::add_with) takes them.
    ///
    /// # Errors
    ///
    /// `invalid_argument` if a suggested variable or bin folder breaks a rule (none does).
    pub fn toolchain(&self) -> crate::Result<Toolchain> {
        Toolchain::parse(self.kind, &self.vars, self.bin.as_deref())
    }

    /// The command line that approves it, for the state root `root` (and the manifest
    /// `manifest` when it is not the default), every path quoted for a POSIX shell, with the
    /// reason the changelog keeps.
    pub fn command(&self, root: &Path, manifest: Option<&Path>) -> String {
        let mut line = format!("safe-lanes --root {}", quote(root));
        if let Some(manifest) = manifest {
            line.push_str(&format!(" --manifest {}", quote(manifest)));
        }
        line.push_str(&format!(
            " grant add --alias {} --path {} --kind {}",
            self.alias,
            quote(&self.path),
            self.kind
        ));
        if let Some(bin) = &self.bin {
            line.push_str(&format!(" --bin {}", quote(Path::new(bin))));
        }
        for var in &self.vars {
            line.push_str(&format!(" --var {var}"));
        }
        // Every change of the human's says why; this one says what it is for.
        line.push_str(" --reason 'let confined commands use this toolchain'");
        line
    }
}

/// One grant to propose when `relative` (in the home folder) is a directory.
struct Rule {
    relative: &'static str,
    alias: &'static str,
    kind: Kind,
    vars: &'static [&'static str],
    bin: Option<&'static str>,
    exposes: &'static str,
}

/// A toolchain: found when `marker` exists in the home folder.
struct Known {
    name: &'static str,
    what: &'static str,
    marker: &'static str,
    rules: &'static [Rule],
}

const fn tool(
    relative: &'static str,
    alias: &'static str,
    vars: &'static [&'static str],
    bin: Option<&'static str>,
    exposes: &'static str,
) -> Rule {
    Rule {
        relative,
        alias,
        kind: Kind::Tool,
        vars,
        bin,
        exposes,
    }
}

const fn cache(
    relative: &'static str,
    alias: &'static str,
    vars: &'static [&'static str],
    exposes: &'static str,
) -> Rule {
    Rule {
        relative,
        alias,
        kind: Kind::Cache,
        vars,
        bin: None,
        exposes,
    }
}

/// The toolchains looked for.
const KNOWN: &[Known] = &[
    Known {
        name: "rust",
        what: "rustup and cargo",
        marker: ".cargo/bin/cargo",
        rules: &[
            tool(
                ".cargo",
                "rust-cargo",
                &["CARGO_HOME"],
                Some("bin"),
                "cargo's home read-only (its programs on PATH and its config; its credentials shown empty)",
            ),
            tool(
                ".rustup",
                "rust-rustup",
                &["RUSTUP_HOME"],
                None,
                "the installed Rust toolchains, read-only",
            ),
            cache(
                ".cargo/registry",
                "rust-registry",
                &[],
                "the crates cargo downloaded, read-write for confined commands (what they write stays in the state root)",
            ),
            cache(
                ".cargo/git",
                "rust-git",
                &[],
                "the git dependencies cargo fetched, read-write for confined commands (what they write stays in the state root)",
            ),
        ],
    },
    Known {
        name: "node",
        what: "nvm and the Node.js versions it installed",
        marker: ".nvm/nvm.sh",
        rules: &[
            tool(
                ".nvm",
                "node-nvm",
                &["NVM_DIR"],
                None,
                "every Node.js version nvm installed, read-only",
            ),
            cache(
                ".npm",
                "node-npm-cache",
                &["npm_config_cache"],
                "npm's download cache, read-write for confined commands (what they write stays in the state root)",
            ),
        ],
    },
    Known {
        name: "python",
        what: "pyenv and the Python versions it installed",
        marker: ".pyenv/bin/pyenv",
        rules: &[
            tool(
                ".pyenv",
                "python-pyenv",
                &["PYENV_ROOT"],
                Some("shims"),
                "every Python version pyenv installed, read-only",
            ),
            cache(
                ".cache/pip",
                "python-pip-cache",
                &["PIP_CACHE_DIR"],
                "pip's download cache, read-write for confined commands (what they write stays in the state root)",
            ),
        ],
    },
    Known {
        name: "uv",
        what: "uv and the Pythons it manages",
        marker: ".local/share/uv/python",
        rules: &[
            tool(
                ".local/share/uv/python",
                "uv-python",
                &["UV_PYTHON_INSTALL_DIR"],
                None,
                "the Pythons uv installed, read-only",
            ),
            cache(
                ".cache/uv",
                "uv-cache",
                &["UV_CACHE_DIR"],
                "uv's cache, read-write for confined commands (what they write stays in the state root)",
            ),
        ],
    },
    Known {
        name: "go",
        what: "Go's module cache and installed programs",
        marker: "go/pkg/mod",
        rules: &[
            cache(
                "go",
                "go-path",
                &["GOPATH"],
                "GOPATH (modules and installed programs), read-write for confined commands (what they write stays in the state root)",
            ),
            cache(
                ".cache/go-build",
                "go-build-cache",
                &["GOCACHE"],
                "Go's build cache, read-write for confined commands (what they write stays in the state root)",
            ),
        ],
    },
    Known {
        name: "local",
        what: "programs installed for this user in ~/.local/bin",
        marker: ".local/bin",
        rules: &[tool(
            ".local/bin",
            "local-bin",
            &[],
            Some("."),
            "every program in ~/.local/bin, read-only",
        )],
    },
];

/// What is in a home folder, looked at through the primitive: the home opened as the human's
/// (following links to it), everything below it without following any link.
struct Home(Option<Anchor>);

impl Home {
    fn open(home: &Path) -> Self {
        let why = Ambient::because("the human's home folder, for their toolchains");
        Self(Anchor::open_ambient(home, why).ok())
    }

    /// What `relative` (plain names below the home) is, if it is there.
    fn kind(&self, relative: &Path) -> Option<FileType> {
        let home = self.0.as_ref()?;
        let name = Name::new(relative.file_name()?).ok()?;
        let parent = relative.parent().filter(|p| !p.as_os_str().is_empty());
        let stat = match parent {
            None => home.stat_entry(name),
            Some(parent) => home
                .open_dir(RelPath::new(parent).ok()?, Symlinks::Deny)
                .and_then(|dir| dir.stat_entry(name)),
        };
        stat.ok().map(|st| FileType::from_raw_mode(st.st_mode))
    }
}

/// The known per-user toolchains installed in `home`, each with the grants that would let
/// confined commands use it (only those whose folders exist).
pub fn detect(home: &Path) -> Vec<FoundToolchain> {
    let there = Home::open(home);
    let is_dir = |relative: &str| there.kind(Path::new(relative)) == Some(FileType::Directory);
    KNOWN
        .iter()
        .filter(|k| there.kind(Path::new(k.marker)).is_some())
        .map(|k| FoundToolchain {
            name: k.name,
            what: k.what,
            grants: k
                .rules
                .iter()
                .filter(|r| is_dir(r.relative))
                .map(|r| Suggested {
                    alias: r.alias.to_owned(),
                    path: home.join(r.relative),
                    kind: r.kind,
                    vars: r.vars.iter().map(|v| (*v).to_owned()).collect(),
                    bin: r.bin.map(str::to_owned),
                    exposes: r.exposes.to_owned(),
                })
                .collect(),
        })
        .collect()
}

/// The toolchain of `home` whose programs folder holds `program` (a plain name), and that
/// folder.
pub fn providing(home: &Path, program: &str) -> Option<(FoundToolchain, PathBuf)> {
    let there = Home::open(home);
    detect(home).into_iter().find_map(|found| {
        let bin = found.grants.iter().find_map(|g| {
            let relative = g.path.strip_prefix(home).ok()?.join(g.bin.as_deref()?);
            there.kind(&relative.join(program))?;
            Some(g.path.join(g.bin.as_deref()?))
        })?;
        Some((found, bin))
    })
}

/// Why `program` (a plain name) cannot be found in a sandbox, naming the approval that is
/// missing: the toolchain of the gateway's home (`$HOME`) that has it and the tool grants
/// that would let it in (as `safe-lanes doctor` proposes them), or what a sandbox holds.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn not_in_sandbox(program: &str) -> String {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    match home.and_then(|home| providing(&home, program)) {
        Some((toolchain, bin)) => {
            let tools: Vec<&str> = toolchain
                .grants
                .iter()
                .filter(|g| g.kind == Kind::Tool)
                .map(|g| g.alias.as_str())
                .collect();
            format!(
                "the program is not in the sandbox: it is in {} ({}), which no tool grant lets \
                 in; the tool {} {} would (`safe-lanes doctor` prints the commands; an agent \
                 asks with `folder_access_request` and `kind: tool`)",
                Shown::path(&bin),
                toolchain.what,
                if tools.len() == 1 { "grant" } else { "grants" },
                tools.join(" and "),
            )
        }
        None => "the program is not in the sandbox, which holds /usr, /bin, /lib*, /etc, the \
                 granted folders and the approved tools only; a toolchain installed for one \
                 user must be approved as a tool (`safe-lanes doctor` proposes the commands)"
            .to_owned(),
    }
}

/// The program a shell said it could not find, in its last such line: `sh: 1: cargo: not
/// found` (dash), `bash: line 1: cargo: command not found`, `zsh: command not found: cargo`.
/// Only a plain name (no `/`): a path that is missing is the command's own business.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn not_found_in(stderr: &str) -> Option<&str> {
    stderr.lines().rev().find_map(|line| {
        let name = if let Some(rest) = line
            .strip_suffix(": command not found")
            .or_else(|| line.strip_suffix(": not found"))
        {
            rest.rsplit(": ").next()?
        } else {
            line.split_once("command not found: ")?.1
        };
        let plain = !name.is_empty()
            && name.len() <= 255
            && !name.contains('/')
            && !name
                .chars()
                .any(|c| c.is_whitespace() || crate::error::is_hidden(c));
        plain.then_some(name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_a_shell_could_not_find_is_read_from_what_it_said() {
        assert_eq!(not_found_in("sh: 1: cargo: not found\n"), Some("cargo"));
        assert_eq!(
            not_found_in("bash: line 1: npm: command not found"),
            Some("npm")
        );
        assert_eq!(not_found_in("bash: go: command not found"), Some("go"));
        assert_eq!(not_found_in("zsh: command not found: uv"), Some("uv"));
        assert_eq!(
            not_found_in("a\nsh: 1: x: not found\nsh: 2: y: not found"),
            Some("y")
        );
        assert_eq!(not_found_in("sh: 1: /opt/x: not found"), None, "a path");
        assert_eq!(not_found_in("sh: 1: a b: not found"), None);
        assert_eq!(
            not_found_in("sh: 1: car\u{202e}go: not found"),
            None,
            "a hidden character"
        );
        assert_eq!(not_found_in("error: everything is fine"), None);
    }

    /// Every toolchain known, installed in a fake home: each is found, each suggested grant is
    /// one the rules accept with a command that names it, and a program in a toolchain's bin
    /// folder is traced to it.
    #[test]
    fn every_known_toolchain_is_found_and_each_suggestion_keeps_the_rules() {
        let home = tempfile::tempdir().unwrap();
        for known in KNOWN {
            for rule in known.rules {
                std::fs::create_dir_all(home.path().join(rule.relative)).unwrap();
            }
            let marker = home.path().join(known.marker);
            std::fs::create_dir_all(marker.parent().unwrap()).unwrap();
            if !marker.exists() {
                std::fs::write(&marker, "").unwrap();
            }
        }
        let found = detect(home.path());
        let names: Vec<_> = found.iter().map(|f| f.name).collect();
        assert_eq!(names, KNOWN.iter().map(|k| k.name).collect::<Vec<_>>());
        for f in &found {
            assert!(!f.grants.is_empty(), "{}", f.name);
            for g in &f.grants {
                let toolchain = g.toolchain().unwrap_or_else(|e| panic!("{}: {e}", g.alias));
                assert_eq!(
                    toolchain.access(None).unwrap(),
                    g.kind.fixed_access().unwrap()
                );
                crate::grants::Alias::new(&g.alias).unwrap();
                let command = g.command(Path::new("/r o"), None);
                let start = "safe-lanes --root '/r o' grant add --alias ";
                assert!(command.starts_with(start), "{command}");
                assert!(command.contains(&format!("--kind {}", g.kind)), "{command}");
            }
        }
        let (toolchain, bin) = providing(home.path(), "cargo").expect("cargo is found");
        assert_eq!(
            (toolchain.name, bin),
            ("rust", home.path().join(".cargo/bin"))
        );
        assert!(providing(home.path(), "no-such-program").is_none());
    }
}
