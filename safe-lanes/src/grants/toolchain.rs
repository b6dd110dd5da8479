//! Tools and caches: grants that let a confined command use a per-user toolchain.
//!
//! A toolchain installed for one user (rustup and cargo in `~/.cargo`, nvm, pyenv, uv, Go)
//! lives in the user's home, which a confined command never sees. The human can approve its
//! folders as grants of two more kinds, under every rule of a folder grant (canonical path,
//! never `/`, the state root or an ancestor of it, so never all of `$HOME`; overlaps; host;
//! changelog and audit; revocation stops running commands):
//!
//! - a **tool** is read and execute only; its `bin` folder is put first on the command's
//!   `PATH`, and the variables it names (`CARGO_HOME`, `RUSTUP_HOME`, `NVM_DIR`) are set to
//!   its path;
//! - a **cache** is read-write; the variables it names (`npm_config_cache`, `PIP_CACHE_DIR`)
//!   are set to its path.

use std::fmt;
use std::path::{Component, Path};

use serde::{Deserialize, Serialize};

use super::model::{Access, ENV_PREFIX, checked_text};
use crate::error::{Error, Result, Shown};

/// What a grant is for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A folder to work in, with the access the human chose.
    #[default]
    Folder,
    /// A toolchain: read and execute only.
    Tool,
    /// A cache a toolchain writes: read-write.
    Cache,
}

/// Files a tool never shows a confined command, directly in its folder: the registry and
/// account tokens toolchains keep beside their programs (cargo's `credentials.toml`, and
/// `credentials` before it, in `CARGO_HOME`; a `.netrc`, `.npmrc`, `.pypirc` or
/// `.git-credentials` wherever a tool's folder holds one). Each one present when a command
/// starts is covered by an empty, read-only file: its name stays, its content is not there.
pub const HIDDEN_IN_TOOLS: &[&str] = &[
    "credentials.toml",
    "credentials",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
];

impl Kind {
    /// The snake_case name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Folder => "folder",
            Kind::Tool => "tool",
            Kind::Cache => "cache",
        }
    }

    /// Whether it is a plain folder grant.
    pub fn is_folder(&self) -> bool {
        *self == Kind::Folder
    }

    /// The files a grant of this kind never shows a confined command: for a tool,
    /// [`HIDDEN_IN_TOOLS`]; none for a folder or a cache.
    pub fn hidden(self) -> &'static [&'static str] {
        match self {
            Kind::Tool => HIDDEN_IN_TOOLS,
            Kind::Folder | Kind::Cache => &[],
        }
    }

    /// The access every grant of this kind has, when the kind fixes it.
    pub fn fixed_access(self) -> Option<Access> {
        match self {
            Kind::Folder => None,
            Kind::Tool => Some(Access::ReadOnly),
            Kind::Cache => Some(Access::ReadWrite),
        }
    }

    /// The access a grant of this kind has: the kind's own, or `chosen` for a folder.
    ///
    /// # Errors
    ///
    /// `invalid_argument` when `chosen` is not the kind's access, or a folder has none.
    pub fn access(self, chosen: Option<Access>) -> Result<Access> {
        let refuse = |why: String| {
            Err(Error::InvalidArgument {
                what: Shown::text(self.as_str()),
                why,
            })
        };
        match (self.fixed_access(), chosen) {
            (Some(fixed), Some(chosen)) if fixed != chosen => {
                refuse(format!("a {self} is always {fixed}"))
            }
            (Some(fixed), _) => Ok(fixed),
            (None, Some(chosen)) => Ok(chosen),
            (None, None) => {
                refuse("a folder grant needs an access: read_only or read_write".into())
            }
        }
    }

    /// Parse `folder`, `tool` or `cache`.
    ///
    /// # Errors
    ///
    /// `invalid_argument` for anything else.
    pub fn parse(text: &str) -> Result<Self> {
        match text {
            "folder" => Ok(Kind::Folder),
            "tool" => Ok(Kind::Tool),
            "cache" => Ok(Kind::Cache),
            _ => Err(Error::InvalidArgument {
                what: Shown::text(text),
                why: "a kind is `folder`, `tool` or `cache`".into(),
            }),
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A variable a tool or cache sets to its path in confined commands: `[A-Z][A-Z0-9_]*` (or
/// lowercase, as npm's `npm_config_cache`), at most 64 characters, and none the sandbox sets
/// itself or that changes how programs are loaded (`PATH`, `HOME`, `TMPDIR`, `LANG`,
/// `WORKFLOW_FOLDER_*`, `LD_*`, `DYLD_*`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct VarName(String);

/// The variables no tool or cache may set.
const RESERVED_VARS: &[&str] = &["PATH", "HOME", "TMPDIR", "LANG", "SHELL", "USER", "IFS"];

impl VarName {
    /// Check `text` against the rules.
    ///
    /// # Errors
    ///
    /// `invalid_argument`, saying which rule was broken.
    pub fn new(text: &str) -> Result<Self> {
        let upper = text.to_ascii_uppercase();
        let why = if text.is_empty() || text.len() > 64 {
            Some("a variable name has 1 to 64 characters")
        } else if !text.starts_with(|c: char| c.is_ascii_alphabetic())
            || !text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            Some("a variable name is a letter, then letters, digits and `_`")
        } else if RESERVED_VARS.contains(&upper.as_str())
            || upper.starts_with(ENV_PREFIX)
            || upper.starts_with("LD_")
            || upper.starts_with("DYLD_")
        {
            Some("the sandbox sets this variable itself, or it changes how programs load")
        } else {
            None
        };
        checked(text, why).map(Self)
    }
}

checked_text!(VarName);

/// The folder inside a tool that holds its programs (`bin`, or `.` for the tool's folder
/// itself): relative, plain components only (no `..` or root), UTF-8 without control
/// characters or `:`, at most 255 bytes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ToolBin(String);

impl ToolBin {
    /// Check `text` against the rules.
    ///
    /// # Errors
    ///
    /// `invalid_argument`, saying which rule was broken.
    pub fn new(text: &str) -> Result<Self> {
        // `.` is the tool's folder itself (a folder of programs, as `~/.local/bin`).
        let plain = text == "."
            || Path::new(text)
                .components()
                .all(|c| matches!(c, Component::Normal(_)));
        let why = if text.is_empty() || text.len() > 255 {
            Some("a tool's bin folder has 1 to 255 bytes")
        } else if !plain || text.ends_with('/') || text.contains("//") {
            Some(
                "a tool's bin folder is a relative path of plain names (no `.`, `..` or `/` first)",
            )
        } else if text.chars().any(|c| c.is_control() || c == ':') {
            Some("a tool's bin folder holds no control characters and no `:`")
        } else {
            None
        };
        checked(text, why).map(Self)
    }
}

checked_text!(ToolBin);

/// `text`, owned, when no rule was broken (`why` is `None`); else `invalid_argument` saying why.
fn checked(text: &str, why: Option<&'static str>) -> Result<String> {
    match why {
        Some(why) => Err(Error::InvalidArgument {
            what: Shown::text(text),
            why: why.into(),
        }),
        None => Ok(text.to_owned()),
    }
}

/// What a grant adds to confined commands besides its folder: its kind, the variables set to
/// its path, and for a tool the folder put on `PATH`. A plain folder grant has none. In the
/// manifest (and a listing) its keys are the grant's or request's own (`kind`, `vars`,
/// `bin`), each left out when it says nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Toolchain {
    /// The kind: a folder (the default, not written), a tool or a cache.
    #[serde(default, skip_serializing_if = "Kind::is_folder")]
    pub kind: Kind,
    /// For a tool or a cache: the variables set to the grant's path in confined commands.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vars: Vec<VarName>,
    /// For a tool: its programs' folder, put first on confined commands' `PATH`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bin: Option<ToolBin>,
}

impl Toolchain {
    /// A plain folder grant.
    pub fn folder() -> Self {
        Self::default()
    }

    /// The toolchain of `kind` setting the variables named `vars`, with the programs folder
    /// `bin`: each checked ([`VarName::new`], [`ToolBin::new`]).
    ///
    /// # Errors
    ///
    /// `invalid_argument` for a name or folder that breaks its rule.
    pub fn parse(kind: Kind, vars: &[String], bin: Option<&str>) -> Result<Self> {
        Ok(Self {
            kind,
            vars: vars
                .iter()
                .map(|v| VarName::new(v))
                .collect::<Result<_>>()?,
            bin: bin.map(ToolBin::new).transpose()?,
        })
    }

    /// The access a grant of this toolchain has: the kind's, or `chosen` for a folder.
    ///
    /// # Errors
    ///
    /// `invalid_argument` when `chosen` is not the kind's access, when a folder names
    /// variables or a bin folder, when a cache names a bin folder, or when a variable is
    /// named twice.
    pub fn access(&self, chosen: Option<Access>) -> Result<Access> {
        let refuse = |why: &str| {
            Err(Error::InvalidArgument {
                what: Shown::text(self.kind.as_str()),
                why: why.into(),
            })
        };
        if self.kind == Kind::Folder && (!self.vars.is_empty() || self.bin.is_some()) {
            return refuse("only a tool or a cache sets variables or a bin folder");
        }
        if self.kind == Kind::Cache && self.bin.is_some() {
            return refuse("a cache has no bin folder: only a tool's programs go on PATH");
        }
        let mut seen = std::collections::HashSet::new();
        if !self
            .vars
            .iter()
            .all(|v| seen.insert(v.as_str().to_ascii_uppercase()))
        {
            return refuse("a variable is named twice");
        }
        self.kind.access(chosen)
    }
}

/// Give `grant` (a new grant whose access [`Toolchain::access`] chose) its kind, variables
/// and bin folder, unless another of `others` already sets one of the variables.
pub(super) fn attach(
    grant: &mut super::Grant,
    toolchain: Toolchain,
    others: &[super::Grant],
) -> Result<()> {
    let taken = |v: &VarName| {
        others.iter().find(|g| {
            g.toolchain
                .vars
                .iter()
                .any(|o| o.as_str().eq_ignore_ascii_case(v.as_str()))
        })
    };
    if let Some((var, other)) = toolchain.vars.iter().find_map(|v| taken(v).map(|o| (v, o))) {
        return Err(Error::InvalidArgument {
            what: Shown::text(var.as_str()),
            why: format!("the grant `{}` already sets this variable", other.alias),
        });
    }
    if toolchain.bin.is_some() && grant.path.as_os_str().as_encoded_bytes().contains(&b':') {
        return Err(Error::InvalidArgument {
            what: Shown::path(&grant.path),
            why: "a tool whose path holds `:` cannot be put on PATH".into(),
        });
    }
    grant.toolchain = toolchain;
    super::rules::collision(grant, others).map_err(|why| why.refusal(&grant.path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variable_names_that_would_change_the_sandbox_are_refused() {
        for ok in [
            "CARGO_HOME",
            "RUSTUP_HOME",
            "npm_config_cache",
            "GOPATH",
            "A",
        ] {
            assert!(VarName::new(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "1A",
            "A-B",
            "A B",
            "PATH",
            "path",
            "HOME",
            "TMPDIR",
            "LANG",
            "IFS",
            "LD_PRELOAD",
            "ld_library_path",
            "DYLD_INSERT_LIBRARIES",
            "WORKFLOW_FOLDER_DOCS",
            &"A".repeat(65),
        ] {
            assert!(VarName::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_bin_folder_is_a_plain_relative_path() {
        for ok in ["bin", "shims", "versions/node/v20.11.0/bin", "."] {
            assert!(ToolBin::new(ok).is_ok(), "{ok}");
        }
        for bad in [
            "", "/bin", "../bin", "bin/..", "./bin", "a:b", "bin/", "a//b", "a\nb",
        ] {
            assert!(ToolBin::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_kind_fixes_the_access_and_what_may_be_added() {
        let var = |v: &str| VarName::new(v).unwrap();
        let bin = Some(ToolBin::new("bin").unwrap());
        let of = |kind, vars: Vec<VarName>, bin: Option<ToolBin>| Toolchain { kind, vars, bin };
        let tool = of(Kind::Tool, vec![var("CARGO_HOME")], bin.clone());
        assert_eq!(tool.access(None).unwrap(), Access::ReadOnly);
        assert_eq!(
            tool.access(Some(Access::ReadOnly)).unwrap(),
            Access::ReadOnly
        );
        assert!(tool.access(Some(Access::ReadWrite)).is_err());
        let cache = of(Kind::Cache, vec![var("PIP_CACHE_DIR")], None);
        assert_eq!(cache.access(None).unwrap(), Access::ReadWrite);
        assert!(cache.access(Some(Access::ReadOnly)).is_err());
        assert!(of(Kind::Cache, vec![], bin.clone()).access(None).is_err());
        assert!(
            of(Kind::Folder, vec![var("X")], None)
                .access(Some(Access::ReadOnly))
                .is_err()
        );
        assert!(
            of(Kind::Folder, vec![], bin)
                .access(Some(Access::ReadOnly))
                .is_err()
        );
        assert!(of(Kind::Folder, vec![], None).access(None).is_err());
        let twice = of(Kind::Tool, vec![var("GOPATH"), var("gopath")], None);
        assert!(twice.access(None).is_err());
    }
}
