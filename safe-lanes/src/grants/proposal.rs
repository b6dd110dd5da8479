//! What approving a request would change: shown to the human, and bound to their approval.
//!
//! A request names an alias, an access and perhaps a folder; what approving it does depends
//! also on the grants as they are (a new grant, or a wider access for an existing one at its
//! folder). [`Proposal`] is that change, described for a human, with a digest over it. An
//! approval spelled out ([`Seen`]: the alias, the access, the folder, the digest as shown) is
//! refused when the request or the grant it changes is no longer what was shown, so a pasted
//! approve line is itself the description of what it approves.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::model::{Access, Alias, Grant, Request};
use super::toolchain::{Kind, ToolBin, VarName};
use crate::error::{Error, Result, Shown};

/// The change approving a request makes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Proposed {
    /// A new grant; without a folder, the human chooses it when approving.
    New {
        /// The alias granted.
        alias: Alias,
        /// Its access.
        access: Access,
        /// The folder the request proposes, if any.
        path: Option<PathBuf>,
        /// A tool or a cache (absent for a folder).
        #[serde(rename = "grant_kind", skip_serializing_if = "Kind::is_folder")]
        kind: Kind,
        /// The variables a tool or a cache sets to its path.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        vars: Vec<VarName>,
        /// A tool's programs folder, put on `PATH`.
        #[serde(skip_serializing_if = "Option::is_none")]
        bin: Option<ToolBin>,
    },
    /// An existing grant's access changes (at its own folder).
    Change {
        /// The grant.
        alias: Alias,
        /// Its folder, which does not change.
        path: PathBuf,
        /// The access it has.
        from: Access,
        /// The access it would have.
        to: Access,
    },
}

impl Proposed {
    /// What approving `request` changes, with the grants `grants` as they are.
    pub fn of(request: &Request, grants: &[Grant]) -> Self {
        match grants.iter().find(|g| g.alias == request.alias) {
            Some(existing) => Proposed::Change {
                alias: existing.alias.clone(),
                path: existing.path.clone(),
                from: existing.access,
                to: request.access,
            },
            None => Proposed::New {
                alias: request.alias.clone(),
                access: request.access,
                path: request.path.clone(),
                kind: request.toolchain.kind,
                vars: request.toolchain.vars.clone(),
                bin: request.toolchain.bin.clone(),
            },
        }
    }

    /// What approving grants, as an approval spells it out: the alias, the access it gets, and
    /// the folder (the proposed one, the existing grant's, or `None` when the human chooses).
    pub fn target(&self) -> (&Alias, Access, Option<&Path>) {
        match self {
            Proposed::New {
                alias,
                access,
                path,
                ..
            } => (alias, *access, path.as_deref()),
            Proposed::Change {
                alias, path, to, ..
            } => (alias, *to, Some(path.as_path())),
        }
    }

    /// Whether approving raises an existing grant's access ([`Access::is_raised_to`]).
    pub fn raises_access(&self) -> bool {
        matches!(self, Proposed::Change { from, to, .. } if from.is_raised_to(*to))
    }

    /// One line for the human, every string escaped: ``new grant `docs` read_only at /x`` or
    /// `` `docs`: read_only → read_write at /x``.
    pub fn describe(&self) -> String {
        self.described("`")
    }

    /// [`Proposed::describe`] for a page, which shows names in its own type, not in
    /// backticks: ``new grant docs read_only at /x``.
    pub fn headline(&self) -> String {
        self.described("")
    }

    /// The line, with names (an alias, a program folder) between `mark`s.
    fn described(&self, mark: &str) -> String {
        match self {
            Proposed::New {
                alias,
                access,
                path,
                kind,
                vars,
                bin,
            } => {
                let at = path.as_ref().map_or_else(
                    || "(no folder proposed: you choose it)".to_owned(),
                    |p| format!("at {}", Shown::path(p)),
                );
                let what = match kind {
                    Kind::Folder => "grant",
                    Kind::Tool => "tool",
                    Kind::Cache => "cache",
                };
                let mut line = format!(
                    "new {what} {mark}{}{mark} {access} {at}",
                    Shown::text(alias.as_str())
                );
                if let Some(bin) = bin {
                    line.push_str(&format!(
                        "; its {mark}{}{mark} on PATH",
                        Shown::text(bin.as_str())
                    ));
                }
                for var in vars {
                    line.push_str(&format!("; sets {var}"));
                }
                line
            }
            Proposed::Change {
                alias,
                path,
                from,
                to,
            } => format!(
                "{mark}{}{mark}: {from} → {to} at {}",
                Shown::text(alias.as_str()),
                Shown::path(path)
            ),
        }
    }
}

/// A pending request and what approving it changes now.
#[derive(Clone, Debug, Serialize)]
pub struct Proposal {
    /// The request.
    pub request: Request,
    /// The change approving it makes.
    pub change: Proposed,
    /// A short digest over the request's id and the change (16 hex digits).
    pub digest: String,
}

impl Proposal {
    /// The proposal of `request`, with the grants `grants` as they are.
    pub fn of(request: &Request, grants: &[Grant]) -> Self {
        let change = Proposed::of(request, grants);
        let text = serde_json::json!({ "request": &request.id, "change": &change }).to_string();
        let digest = crate::digest::sha256_hex(text.as_bytes())[..16].to_owned();
        Self {
            request: request.clone(),
            change,
            digest,
        }
    }
}

impl Proposal {
    /// The command that approves exactly this change, for the state root `root` (and the
    /// manifest `manifest` when it is not the default): what the agent hands the human, and
    /// what `grant show` prints. Run on a terminal, it still shows the change and asks.
    pub fn approve_command(&self, root: &Path, manifest: Option<&Path>) -> String {
        let (alias, access, path) = self.change.target();
        let mut line = format!("safe-lanes --root {}", quote(root));
        if let Some(manifest) = manifest {
            line.push_str(&format!(" --manifest {}", quote(manifest)));
        }
        line.push_str(&format!(
            " grant approve {} --alias {alias} --access {access} --path {} --digest {}",
            self.request.id,
            path.map_or_else(|| "/absolute/folder/you/choose".to_owned(), quote),
            self.digest
        ));
        line
    }
}

/// `path` quoted for a POSIX shell when it needs to be: the one rule every command line the
/// library prints for the human follows. A path that holds a character a screen hides or acts
/// on (a control, bidi or zero-width character: [`is_hidden`](crate::error::is_hidden)), or
/// bytes that are not UTF-8, is written as `$'…'` with each such character escaped byte by
/// byte (`\xe2\x80\xae`, `\x1b`, read the same in every locale), so the printed line holds
/// none of them raw and the shell still reads the very path (in bash, zsh and ksh, the shells
/// people type into; not in dash); any other path that needs quoting is written in single
/// quotes.
pub(crate) fn quote(path: &Path) -> String {
    let bytes = path.as_os_str().as_encoded_bytes();
    let plain = |b: &u8| b.is_ascii_alphanumeric() || b"/._-+=:@".contains(b);
    if !bytes.is_empty() && bytes.iter().all(plain) {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let hidden = bytes.utf8_chunks().any(|chunk| {
        !chunk.invalid().is_empty() || chunk.valid().chars().any(crate::error::is_hidden)
    });
    if !hidden {
        return format!(
            "'{}'",
            String::from_utf8_lossy(bytes).replace('\'', r"'\''")
        );
    }
    let mut out = String::from("$'");
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str(r"\\"),
                '\'' => out.push_str(r"\'"),
                // Byte by byte: `\u` is read by the locale, `\x` the same in every one.
                c if crate::error::is_hidden(c) => {
                    let mut utf8 = [0; 4];
                    for b in c.encode_utf8(&mut utf8).bytes() {
                        out.push_str(&format!("\\x{b:02x}"));
                    }
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.push('\'');
    out
}

/// An approval spelled out, as the human saw the change: it must still be the change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// The alias.
    pub alias: Alias,
    /// The access it gets.
    pub access: Access,
    /// The folder: the proposed one, the existing grant's, or the one the human chose.
    pub path: Option<PathBuf>,
    /// The digest shown, if given.
    pub digest: Option<String>,
}

impl Seen {
    /// Refuse unless `proposal` (with the folder `chosen` by the human, if any) is what this
    /// approval spells out.
    ///
    /// # Errors
    ///
    /// `invalid_argument` saying what the request would change now.
    pub(crate) fn check(&self, proposal: &Proposal, chosen: Option<&PathBuf>) -> Result<()> {
        let (alias, access, path) = match &proposal.change {
            Proposed::New {
                alias,
                access,
                path,
                ..
            } => (alias, *access, chosen.or(path.as_ref())),
            Proposed::Change {
                alias, to, path, ..
            } => (alias, *to, Some(path)),
        };
        let digest_ok = self.digest.as_ref().is_none_or(|d| *d == proposal.digest);
        let path_ok = self.path.is_none() || self.path.as_ref() == path;
        if self.alias == *alias && self.access == access && path_ok && digest_ok {
            return Ok(());
        }
        Err(Error::InvalidArgument {
            what: Shown::text(&proposal.request.id),
            why: format!(
                "this approval does not describe the change the request makes now: {} (digest \
                 {}); look at it with `safe-lanes grant show {}`",
                proposal.change.describe(),
                proposal.digest,
                proposal.request.id
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStrExt;

    use super::*;

    /// What bash makes of `word`: the bytes of its one argument.
    fn as_bash_reads(word: &str) -> Vec<u8> {
        // In the C locale too: nothing the line holds depends on it.
        let out = std::process::Command::new("bash")
            .env("LC_ALL", "C")
            .arg("-c")
            .arg(format!("printf %s {word}"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{word}: {out:?}");
        out.stdout
    }

    /// A printed path holds no character a screen hides, and the shell reads it back exactly.
    #[test]
    fn a_quoted_path_hides_nothing_and_reads_back_exactly() {
        let paths: [&[u8]; 8] = [
            b"/home/u/docs",
            b"/home/u/it's here",
            "/home/u/invoice\u{202e}fdp.exe".as_bytes(),
            "/home/u/zero\u{200b}width and 'quote' \\ back".as_bytes(),
            b"/home/u/esc\x1b[31mred\nline\ttab",
            b"/home/u/not-utf8-\xff\xfe",
            "/home/u/tag\u{e0001}c1\u{85}".as_bytes(),
            "/home/u/Zoë – 日本".as_bytes(),
        ];
        for raw in paths {
            let path = Path::new(std::ffi::OsStr::from_bytes(raw));
            let quoted = quote(path);
            assert!(
                !quoted.chars().any(crate::error::is_hidden),
                "{quoted:?} holds a hidden character"
            );
            assert_eq!(as_bash_reads(&quoted), raw, "{quoted}");
        }
        assert_eq!(quote(Path::new("/home/u/docs")), "/home/u/docs");
        assert_eq!(quote(Path::new("/a b")), "'/a b'");
    }
}
