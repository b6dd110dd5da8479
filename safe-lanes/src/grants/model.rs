//! The grant model: aliases, access modes, grants, pending requests and changelog entries.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use super::toolchain::{Kind, Toolchain};
use crate::error::{Error, Result, Shown};

/// The longest alias, in bytes.
pub const MAX_ALIAS_LEN: usize = 48;
/// The alias rule of [`Alias::new`] as a regular expression, for argument schemas (the length
/// bound is [`MAX_ALIAS_LEN`]). A test checks the two agree.
pub const ALIAS_PATTERN: &str = "^[a-z0-9][a-z0-9_-]*$";
/// The prefix of every grant's environment key.
pub(crate) const ENV_PREFIX: &str = "WORKFLOW_FOLDER_";
/// The longest reason kept, in characters (longer reasons are cut).
pub const MAX_REASON_CHARS: usize = 1000;

/// For a text newtype `$name(String)` whose `$name::new(&str) -> Result<Self>` is the only
/// way in: `as_str`, `Display`, and the two conversions its serde attributes name
/// (`try_from = "String"` goes through `new`, so a hand-edited manifest is checked too).
macro_rules! checked_text {
    ($name:ident) => {
        impl $name {
            /// The checked text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = $crate::error::Error;
            fn try_from(text: String) -> $crate::error::Result<Self> {
                $name::new(&text)
            }
        }

        impl From<$name> for String {
            fn from(checked: $name) -> String {
                checked.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}
pub(crate) use checked_text;

/// A grant alias: `[a-z0-9][a-z0-9_-]{0,47}`.
///
/// Holding an `Alias` means the text follows these rules; its environment key
/// (`WORKFLOW_FOLDER_<ALIAS uppercased, - → _>`) is therefore a valid variable name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Alias(String);

impl Alias {
    /// Check `text` against the alias rules.
    ///
    /// # Errors
    ///
    /// `invalid_alias`, saying which rule was broken.
    pub fn new(text: &str) -> Result<Self> {
        let why = if text.is_empty() {
            Some("an alias cannot be empty")
        } else if text.len() > MAX_ALIAS_LEN {
            Some("an alias has at most 48 characters")
        } else if !text.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit()) {
            Some("an alias starts with a lowercase letter or a digit")
        } else if !text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        {
            Some("an alias holds only lowercase letters, digits, `_` and `-`")
        } else {
            None
        };
        match why {
            Some(why) => Err(Error::InvalidAlias {
                alias: Shown::text(text),
                why,
            }),
            None => Ok(Self(text.to_owned())),
        }
    }

    /// The environment variable naming the granted folder in confined commands:
    /// `WORKFLOW_FOLDER_` + the alias uppercased with `-` as `_`. Two aliases with the same key
    /// (`rts-source`, `rts_source`) cannot both be granted.
    pub fn env_key(&self) -> String {
        let mut key = String::from(ENV_PREFIX);
        key.extend(self.0.chars().map(|c| {
            if c == '-' {
                '_'
            } else {
                c.to_ascii_uppercase()
            }
        }));
        key
    }
}

checked_text!(Alias);

/// How much a grant allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Read, list and execute.
    ReadOnly,
    /// Everything, including create, write, rename and delete.
    ReadWrite,
}

impl Access {
    /// The stable name (`read_only`, `read_write`).
    pub fn as_str(self) -> &'static str {
        match self {
            Access::ReadOnly => "read_only",
            Access::ReadWrite => "read_write",
        }
    }

    /// Parse `read_only` or `read_write`.
    ///
    /// # Errors
    ///
    /// `invalid_manifest` for anything else.
    pub fn parse(text: &str) -> Result<Self> {
        match text {
            "read_only" => Ok(Access::ReadOnly),
            "read_write" => Ok(Access::ReadWrite),
            other => Err(Error::InvalidManifest {
                path: Shown::text("access"),
                why: format!("`{}` is not read_only or read_write", Shown::text(other)),
            }),
        }
    }

    /// Parse `read_only` or `read_write` given as an argument (by a gateway's caller, not
    /// read from the manifest).
    ///
    /// # Errors
    ///
    /// `invalid_argument` for anything else.
    pub fn from_argument(text: &str) -> Result<Self> {
        Self::parse(text).map_err(|_| Error::InvalidArgument {
            what: Shown::text(text),
            why: "`access`: not read_only or read_write".into(),
        })
    }

    /// Whether changing a grant from this access to `to` gives the agent more (read-only to
    /// read-write): such a change needs a reason.
    pub fn is_raised_to(self, to: Access) -> bool {
        self < to
    }

    /// Whether this access allows `want`.
    pub fn allows(self, want: Want) -> bool {
        match want {
            Want::Read => true,
            Want::Write => self == Access::ReadWrite,
        }
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an operation needs from a grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// Reading.
    Read,
    /// Writing (create, modify, rename, delete).
    Write,
}

/// An approved folder grant, as stored in the manifest's `folder_access`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// Stable random identifier (`folder_…`).
    pub id: String,
    /// The unique alias agents use.
    pub alias: Alias,
    /// The canonical absolute path of the folder on `host`.
    pub path: PathBuf,
    /// What the grant allows.
    pub access: Access,
    /// When it was approved (RFC 3339); absent for a grant written without one (by another
    /// tool) until it is adopted ([`Grants::adopt`](super::Grants::adopt)).
    #[serde(
        default,
        deserialize_with = "non_empty",
        skip_serializing_if = "Option::is_none"
    )]
    pub created_at: Option<String>,
    /// The host it was approved on; elsewhere it is unavailable. A grant without one is
    /// unavailable everywhere until the human adopts it on a host.
    #[serde(
        default,
        deserialize_with = "non_empty",
        skip_serializing_if = "Option::is_none"
    )]
    pub host: Option<String>,
    /// The identity of the machine it was approved on (a digest of its `/etc/machine-id`):
    /// on another machine — a manifest copied or restored there, even under the same host
    /// name — it is unavailable until the human adopts it there. Absent in grants written
    /// before machines were told apart, which are bound by `host` alone.
    #[serde(
        default,
        deserialize_with = "non_empty",
        skip_serializing_if = "Option::is_none"
    )]
    pub machine: Option<String>,
    /// What it is for besides its folder: a tool or a cache, with their variables and bin
    /// folder (nothing, for a plain folder).
    #[serde(flatten)]
    pub toolchain: Toolchain,
    /// The protected paths the human lifted for this grant (ADR 0016): each,
    /// relative to the folder, lifts every protected path equal to it or inside it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_protected: Vec<LiftedPath>,
    /// Patterns the human hides in this grant beside the library's default list of secrets
    /// ([`crate::hidden`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hide: Vec<String>,
    /// Patterns the human shows in it although the default list hides them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unhide: Vec<String>,
    /// For a read-write folder: confined commands write it directly, without a layer of their
    /// own, so nothing they write waits for the human (ADR 0027). Every listing warns of it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub direct: bool,
    /// The keys of the grant's entry in the manifest that are not ours, as they were.
    #[serde(flatten, skip_serializing)]
    pub other_keys: OtherKeys,
}

/// A path inside a grant whose protection the human lifted ([`Grant::allow_protected`]):
/// relative, normalized (no `.`, `..` or empty components, no trailing `/`), UTF-8 without
/// control characters, at most [`PATH_MAX`](crate::input::PATH_MAX) bytes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct LiftedPath(String);

impl LiftedPath {
    /// Check `text` as a path to lift.
    ///
    /// # Errors
    ///
    /// `invalid_argument`, saying which rule was broken.
    pub fn new(text: &str) -> Result<Self> {
        let why = if text.is_empty() {
            Some("an empty path")
        } else if text.len() > crate::input::PATH_MAX {
            Some("longer than PATH_MAX")
        } else if text.starts_with('/') {
            Some("a path relative to the grant's folder, not an absolute one")
        } else if text.chars().any(char::is_control) {
            Some("a path without control characters")
        } else if text
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
        {
            Some("a normalized path: no `.`, `..` or empty components, no trailing `/`")
        } else {
            None
        };
        match why {
            Some(why) => Err(Error::InvalidArgument {
                what: Shown::text(text),
                why: format!("--allow-protected takes {why}"),
            }),
            None => Ok(Self(text.to_owned())),
        }
    }

    /// The path, relative to the grant's folder.
    pub fn as_path(&self) -> &std::path::Path {
        std::path::Path::new(&self.0)
    }
}

checked_text!(LiftedPath);

/// A pending request for a new or wider grant, as stored in `folder_access_requests`. It grants
/// nothing until the human approves it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Stable random identifier (`req_…`).
    pub id: String,
    /// The alias asked for.
    pub alias: Alias,
    /// The access asked for.
    pub access: Access,
    /// Why, in the requester's words.
    pub reason: String,
    /// The exact folder proposed, when the requester named one; the human may approve another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// When it was (last) requested (RFC 3339).
    pub requested_at: String,
    /// Who asked: the side, and the agent's client as it named itself (`agent (name 1.2)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_by: Option<String>,
    /// What is asked for besides a folder: a tool or a cache, with their variables and bin
    /// folder (nothing, for a plain folder).
    #[serde(flatten)]
    pub toolchain: Toolchain,
    /// The keys of the request's entry in the manifest that are not ours, as they were.
    #[serde(flatten, skip_serializing)]
    pub other_keys: OtherKeys,
}

/// What a changelog entry records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// A grant was added.
    Add,
    /// A grant's access was changed.
    SetAccess,
    /// A grant was revoked.
    Revoke,
    /// A request was filed or updated.
    Request,
    /// A request was approved.
    Approve,
    /// A request was denied.
    Deny,
    /// A grant approved without a host was adopted on this one.
    Adopt,
    /// Protected paths of a grant were lifted or protected again.
    Protect,
    /// A read-write grant was made direct (written without a layer), or layered again.
    Direct,
    /// The human's own hidden paths of a grant were set (what it hides beside the default
    /// list, and what of it it shows).
    SetHidden,
}

impl Action {
    /// The snake_case name, as in JSON (`add`, `set_access`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Add => "add",
            Action::SetAccess => "set_access",
            Action::Revoke => "revoke",
            Action::Request => "request",
            Action::Approve => "approve",
            Action::Deny => "deny",
            Action::Adopt => "adopt",
            Action::Protect => "protect",
            Action::Direct => "direct",
            Action::SetHidden => "set_hidden",
        }
    }

    /// Whether the human makes this change (every action but a request, which an agent
    /// files): such a change must give a reason.
    pub fn is_humans(self) -> bool {
        self != Action::Request
    }

    /// The change in words, for messages (`addition of a grant`, …).
    pub fn described(self) -> &'static str {
        match self {
            Action::Add => "addition of a grant",
            Action::SetAccess => "change of access",
            Action::Revoke => "revocation",
            Action::Request => "request",
            Action::Approve => "approval",
            Action::Deny => "denial",
            Action::Adopt => "adoption",
            Action::Protect => "change of protected paths",
            Action::Direct => "change of how commands write it",
            Action::SetHidden => "change of hidden paths",
        }
    }

    /// The audit event name (`grant.add`, …).
    pub fn event(self) -> &'static str {
        match self {
            Action::Add => "grant.add",
            Action::SetAccess => "grant.set_access",
            Action::Revoke => "grant.revoke",
            Action::Request => "grant.request",
            Action::Approve => "grant.approve",
            Action::Deny => "grant.deny",
            Action::Adopt => "grant.adopt",
            Action::Protect => "grant.protect",
            Action::Direct => "grant.direct",
            Action::SetHidden => "grant.set_hidden",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of the manifest's `folder_access_changelog`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// When (RFC 3339).
    pub at: String,
    /// What happened.
    pub action: Action,
    /// Who did it (the OS user for the CLI, `agent` for requests from the MCP server).
    pub actor: String,
    /// Why, if given.
    #[serde(default)]
    pub reason: String,
    /// The alias concerned.
    pub alias: Alias,
    /// The grant concerned, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_id: Option<String>,
    /// The request concerned, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The folder concerned, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// The access before the change, if it changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Access>,
    /// The access after the change (or asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<Access>,
    /// The kind of grant concerned, when it is not a folder.
    #[serde(default, skip_serializing_if = "Kind::is_folder")]
    pub kind: Kind,
    /// The protected paths lifted by the change, when it lifted or restored any: the grant's
    /// whole list afterwards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_protected: Option<Vec<LiftedPath>>,
    /// Whether the grant is direct after the change, when it made it direct or layered again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct: Option<bool>,
    /// The grant's own hidden patterns after the change, when it set them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hide: Option<Vec<String>>,
    /// The patterns it shows after the change, when it set them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unhide: Option<Vec<String>>,
    /// The keys of the entry in the manifest that are not ours, as they were.
    #[serde(flatten, skip_serializing)]
    pub other_keys: OtherKeys,
}

/// The keys of one manifest entry (a grant, a request, a changelog entry) that safe-lanes
/// does not know, with their values exactly as read. They are written back after the entry's
/// own keys and never in place of one of them; they appear nowhere else (listings, audit
/// records), so a key written by another tool cannot pose as one of ours.
pub(crate) type OtherKeys = Map<String, Value>;

/// The entries of the manifest's lists, with the keys they keep for other tools.
pub(crate) trait Entry: Serialize {
    /// The keys that are not ours.
    fn other_keys(&self) -> &OtherKeys;
}

impl Entry for Grant {
    fn other_keys(&self) -> &OtherKeys {
        &self.other_keys
    }
}

impl Request {
    /// The reason as the human reads it: one line per line the requester wrote (stored with
    /// its newlines escaped, or not), each escaped for display ([`Shown::text`]), so no text
    /// in it can pass for anything but the requester's words.
    pub fn reason_lines(&self) -> Vec<String> {
        self.reason
            .split('\n')
            .flat_map(|line| line.split("\\n"))
            .map(|line| Shown::text(line).to_string())
            .collect()
    }
}

impl Entry for Request {
    fn other_keys(&self) -> &OtherKeys {
        &self.other_keys
    }
}

impl Entry for Change {
    fn other_keys(&self) -> &OtherKeys {
        &self.other_keys
    }
}

/// An optional text in which `null` and `""` both mean absent (earlier versions wrote `""`
/// for a grant's missing host and time).
fn non_empty<'de, D: Deserializer<'de>>(de: D) -> std::result::Result<Option<String>, D::Error> {
    Ok(Option::<String>::deserialize(de)?.filter(|text| !text.is_empty()))
}

/// A reason (or actor) as it is stored: the text as given, trimmed, without NUL characters
/// (which no C string or terminal line can carry), and cut to [`MAX_REASON_CHARS`].
///
/// It is *not* escaped: the manifest is JSON, which escapes control characters itself, and
/// whoever prints a reason escapes it once, with [`Shown`]. Cleaning twice changes nothing.
pub(crate) fn clean_reason(reason: &str) -> String {
    reason
        .trim()
        .chars()
        .filter(|&c| c != '\0')
        .take(MAX_REASON_CHARS)
        .collect::<String>()
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alias_rules() {
        for ok in ["a", "rts-source", "rts_source", "0day", &"x".repeat(48)] {
            assert!(Alias::new(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "_a",
            "A",
            "rts source",
            "a/b",
            "..",
            "é",
            &"x".repeat(49),
            "a\0",
        ] {
            assert_eq!(
                Alias::new(bad).unwrap_err().code(),
                crate::error::Code::InvalidAlias,
                "{bad:?}"
            );
        }
    }

    proptest::proptest! {
        /// The schema pattern and the check agree on every string of alias-like characters.
        #[test]
        fn the_alias_pattern_states_the_alias_rule(text in "[a-zA-Z0-9_ ./é-]{0,50}") {
            let pattern = regex::Regex::new(ALIAS_PATTERN).unwrap();
            let by_pattern = pattern.is_match(&text) && text.len() <= MAX_ALIAS_LEN;
            proptest::prop_assert_eq!(Alias::new(&text).is_ok(), by_pattern, "{:?}", text);
        }
    }

    #[test]
    fn env_keys_collide_across_dash_and_underscore() {
        let a = Alias::new("rts-source").unwrap();
        let b = Alias::new("rts_source").unwrap();
        assert_eq!(a.env_key(), "WORKFLOW_FOLDER_RTS_SOURCE");
        assert_eq!(a.env_key(), b.env_key());
    }
}
