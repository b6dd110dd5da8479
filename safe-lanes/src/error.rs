//! The one error type of the library, and its stable codes.
//!
//! Every refusal and failure is an [`Error`]. Its [`Code`] is a stable, snake_case string
//! shared by the CLI (`{"error":{"code":…}}`, exit status 3 for refusals) and the MCP server
//! (`"<code>: <message>"`). Codes are a public contract: they are only ever added, never
//! renamed or removed.
//!
//! Messages name what was refused and why. Anything that came from outside (a path, a file
//! name, an alias) is rendered through [`Shown`], which escapes control, format and
//! separator characters, so a message can never carry a terminal escape sequence or a
//! right-to-left override into a log or a model's context.

use std::fmt;
use std::io;
use std::path::Path;

use serde::Serialize;

/// Declares [`Code`] from one table — each code once, with its stable name and its meaning —
/// together with [`Code::ALL`], [`Code::as_str`] and [`Error::code`]. Every code must have an
/// [`Error`] variant of the same name; the compiler checks it.
macro_rules! codes {
    ($($(#[doc = $doc:literal])+ $code:ident = $name:literal,)+) => {
        /// The stable, machine-readable code of an [`Error`].
        ///
        /// The string form ([`Code::as_str`], and the `serde` form) is part of the public
        /// contract of the CLI and the MCP server.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
        #[serde(rename_all = "snake_case")]
        #[non_exhaustive]
        pub enum Code {
            $($(#[doc = $doc])+ $code,)+
        }

        impl Code {
            /// Every code, in declaration order.
            pub const ALL: &'static [Code] = &[$(Code::$code,)+];

            /// The stable snake_case name of the code.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Code::$code => $name,)+
                }
            }
        }

        impl Error {
            /// The stable code of this error.
            pub fn code(&self) -> Code {
                match self {
                    $(Error::$code { .. } => Code::$code,)+
                }
            }
        }
    };
}

codes! {
    /// A `..` that would climb out of the folder a path is relative to, or a `.`, `..` (or a
    /// `/` in one name) where only a plain path or a single name is accepted.
    Traversal = "traversal",
    /// An absolute path was given where a relative one is required.
    AbsolutePath = "absolute_path",
    /// A relative path was given where an absolute one is required.
    RelativePath = "relative_path",
    /// The input contains a NUL byte.
    NulByte = "nul_byte",
    /// The path does not lie inside any allowed folder.
    OutsideAllowlist = "outside_allowlist",
    /// The path lies inside the state root, which is never a valid source or grant.
    StateRoot = "state_root",
    /// A symbolic link leads outside the folder, or a link was met where none is allowed.
    SymlinkEscape = "symlink_escape",
    /// The path names something other than a regular file.
    NotRegularFile = "not_regular_file",
    /// The file has more than one hard link.
    Hardlinked = "hardlinked",
    /// No such file, folder, alias or request.
    NotFound = "not_found",
    /// No grant has this alias.
    UnknownAlias = "unknown_alias",
    /// A write was asked for under a read-only grant.
    ReadOnly = "read_only",
    /// The grant was revoked.
    Revoked = "revoked",
    /// The grant was approved on another host.
    UnavailableOnHost = "unavailable_on_host",
    /// The alias does not follow the alias rules.
    InvalidAlias = "invalid_alias",
    /// The alias, or its environment key, is already used by another grant.
    AliasTaken = "alias_taken",
    /// The grant would overlap another one in a way the OS sandbox cannot enforce.
    OverlappingGrant = "overlapping_grant",
    /// The content is larger than the configured cap.
    TooLarge = "too_large",
    /// The state root or a lane is owned by another user or writable by others.
    InsecureRoot = "insecure_root",
    /// The OS sandbox is missing or could only be partly enforced.
    SandboxUnavailable = "sandbox_unavailable",
    /// A patch does not apply exactly.
    PatchRejected = "patch_rejected",
    /// An argument is malformed, out of range or missing (a bad template, a path too long, a
    /// request approved without the folder it needs).
    InvalidArgument = "invalid_argument",
    /// Something the operation needs is not set up (no uploader, no home directory).
    NotConfigured = "not_configured",
    /// The manifest is not valid JSON or breaks a grant rule; it was left untouched.
    InvalidManifest = "invalid_manifest",
    /// As many background commands as allowed are running already.
    TooManyJobs = "too_many_jobs",
    /// The lanes have no backend on this operating system (Windows): nothing was opened.
    UnsupportedPlatform = "unsupported_platform",
    /// A write to a protected path inside a read-write grant (`.git/config`, `.git/hooks/`,
    /// start-up files …): something the human's own tools would run later.
    ProtectedPath = "protected_path",
    /// The SSRF guard refused a fetch: its URL (a scheme other than `https`, credentials, a
    /// host spelled as a number, a host off the allowlist), an address its host resolved to
    /// (loopback, private, link-local, metadata …), or a redirect to any of these.
    AddressRefused = "address_refused",
    /// A fetch failed on the way: the remote answered an error status, or the transfer broke
    /// or timed out. An operational failure, like `io`, not a refusal.
    FetchFailed = "fetch_failed",
    /// An upload source (or a file to patch) on a pseudo-filesystem (`proc`, `sysfs`,
    /// `cgroup` …) or a device node: a view of the kernel or of a process, never data.
    PseudoFile = "pseudo_file",
    /// A path the grant or upload root hides: a secret (`.env`, a private key, `.ssh/` …) on
    /// the library's default list or the human's own, which no agent operation reads or writes.
    HiddenPath = "hidden_path",
    /// An operating-system call failed for a reason that is not a refusal.
    Io = "io",
}

impl Code {
    /// Whether the code means "the input was refused" rather than "the operation failed".
    ///
    /// Everything but [`Code::Io`] and [`Code::FetchFailed`] is a refusal: the CLI exits with
    /// status 3 for refusals and 1 for operational failures.
    pub const fn is_refusal(self) -> bool {
        !matches!(self, Code::Io | Code::FetchFailed)
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Text that came from outside, made safe to print.
///
/// Control characters (C0, C1, DEL), Unicode format characters (bidi overrides, zero-width
/// characters, BOM), line and paragraph separators are written as `\u{…}` escapes; invalid
/// UTF-8 bytes as `\x..`. Long input is shortened to its first and last characters with `…`
/// in between, so one hostile argument cannot flood a log line.
#[derive(Clone, PartialEq, Eq)]
pub struct Shown(String);

impl Shown {
    /// The number of characters kept from the start and from the end of long input.
    const KEEP: usize = 120;

    /// Render raw bytes (invalid UTF-8 is escaped byte by byte).
    pub fn bytes(raw: &[u8]) -> Self {
        Shown(shorten(escaped(raw)))
    }

    /// Render a path whole: escaped as [`Shown::path`] does, never shortened. Two paths
    /// never render alike (a backslash is escaped too), so the rendering names the path: a
    /// screen can show it, and the human can hand it back to say which one.
    pub fn whole_path(path: &Path) -> Self {
        Shown(escaped(path.as_os_str().as_encoded_bytes()))
    }

    /// Render a string.
    pub fn text(raw: &str) -> Self {
        Self::bytes(raw.as_bytes())
    }

    /// Render a message made of text already shown (an error's message, with the context a
    /// program put around it): what would be hidden on a screen (control and format
    /// characters, line and paragraph separators) is escaped as [`Shown::text`] does, but a
    /// backslash is kept and nothing is shortened, so text [`Shown::text`] rendered passes
    /// unchanged: nothing is escaped twice.
    pub fn message(raw: &str) -> Self {
        let mut out = String::with_capacity(raw.len());
        for c in raw.chars() {
            if c == '\\' {
                out.push(c);
            } else {
                push_escaped(&mut out, c);
            }
        }
        Shown(out)
    }

    /// Render a path.
    pub fn path(path: &Path) -> Self {
        Self::bytes(path.as_os_str().as_encoded_bytes())
    }

    /// The escaped text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// `raw` with what would be hidden escaped: see [`Shown`].
fn escaped(raw: &[u8]) -> String {
    let mut out = String::new();
    for chunk in raw.utf8_chunks() {
        for c in chunk.valid().chars() {
            push_escaped(&mut out, c);
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Whether a screen would hide `c` or act on it: a control, format (bidi, zero-width),
/// line or paragraph separator, or surrogate character, and the other characters Unicode
/// says to draw as nothing (`Default_Ignorable_Code_Point`: the combining grapheme joiner,
/// the Hangul fillers, variation selectors …). [`Shown`] escapes these; elsewhere they are
/// kept out of names shown to people.
pub(crate) fn is_hidden(c: char) -> bool {
    use unicode_properties::{GeneralCategory as G, UnicodeGeneralCategory};
    matches!(
        c.general_category(),
        G::Control | G::Format | G::LineSeparator | G::ParagraphSeparator | G::Surrogate
    ) || matches!(
        c,
        '\u{034F}'
            | '\u{115F}'..='\u{1160}'
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FFA0}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

fn push_escaped(out: &mut String, c: char) {
    if is_hidden(c) || c == '\\' {
        out.extend(c.escape_default());
    } else {
        out.push(c);
    }
}

fn shorten(s: String) -> String {
    let count = s.chars().count();
    if count <= 2 * Shown::KEEP + 1 {
        return s;
    }
    let head: String = s.chars().take(Shown::KEEP).collect();
    let tail: String = s.chars().skip(count - Shown::KEEP).collect();
    format!("{head}…{tail}")
}

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`", self.0)
    }
}

impl From<&str> for Shown {
    fn from(s: &str) -> Self {
        Shown::text(s)
    }
}

impl From<&Path> for Shown {
    fn from(p: &Path) -> Self {
        Shown::path(p)
    }
}

impl From<&std::path::PathBuf> for Shown {
    fn from(p: &std::path::PathBuf) -> Self {
        Shown::path(p)
    }
}

impl From<&String> for Shown {
    fn from(s: &String) -> Self {
        Shown::text(s)
    }
}

/// The result type of this library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong, each with a stable [`Code`].
///
/// Every variant but [`Error::Io`] and [`Error::FetchFailed`] is a refusal of the input:
/// nothing was changed on disk.
///
/// `Display` is `<code>: <message>`, as the agent is shown it; [`Error::message`] is the
/// message alone. No variant has a [`source`](std::error::Error::source): the OS error of
/// [`Error::Io`] is part of the message, so that error-chain printers show it once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A `..` that would leave the folder, or a `.` or `..` where none is accepted.
    #[error("{}: {path}: {why}", self.code().as_str())]
    Traversal {
        /// The refused path.
        path: Shown,
        /// Which rule it breaks.
        why: &'static str,
    },
    /// An absolute path where a relative one is required.
    #[error("{}: {path}: an absolute path was given where a path relative to the folder is required", self.code().as_str())]
    AbsolutePath {
        /// The refused path.
        path: Shown,
    },
    /// A relative path where an absolute one is required.
    #[error("{}: {path}: a relative path was given where an absolute path is required", self.code().as_str())]
    RelativePath {
        /// The refused path.
        path: Shown,
    },
    /// A NUL byte in the input.
    #[error("{}: {input}: contains a NUL byte", self.code().as_str())]
    NulByte {
        /// The refused input.
        input: Shown,
    },
    /// Outside every allowed folder.
    #[error("{}: {path}: not inside any allowed upload root (the human allows a folder with `safe-lanes upload roots add FOLDER`)", self.code().as_str())]
    OutsideAllowlist {
        /// The refused path, as the caller gave it (never where a link led).
        path: Shown,
    },
    /// Inside the state root, or (for a grant) covering it.
    #[error("{}: {path}: {why}", self.code().as_str())]
    StateRoot {
        /// The refused path.
        path: Shown,
        /// How it meets the state root.
        why: &'static str,
    },
    /// A symbolic link leads outside, or a link was met where none is allowed.
    #[error("{}: {path}: {why}", self.code().as_str())]
    SymlinkEscape {
        /// The refused path.
        path: Shown,
        /// Which link rule was broken.
        why: &'static str,
    },
    /// Not a regular file.
    #[error("{}: {path}: is {kind}, not a regular file", self.code().as_str())]
    NotRegularFile {
        /// The refused path.
        path: Shown,
        /// What it is instead ("a directory", "a FIFO", …).
        kind: &'static str,
    },
    /// More than one hard link.
    #[error("{}: {path}: has {links} hard links; only a file with exactly one link is accepted", self.code().as_str())]
    Hardlinked {
        /// The refused path.
        path: Shown,
        /// Its link count.
        links: u64,
    },
    /// Nothing at the path.
    #[error("{}: {path}: {why}", self.code().as_str())]
    NotFound {
        /// The path that was looked up.
        path: Shown,
        /// Why it could not be found.
        why: std::borrow::Cow<'static, str>,
    },
    /// No grant has this alias.
    #[error("{}: {alias}: no folder grant has this alias", self.code().as_str())]
    UnknownAlias {
        /// The alias asked for.
        alias: Shown,
    },
    /// A write under a read-only grant.
    #[error("{}: {alias}: the folder is granted read-only", self.code().as_str())]
    ReadOnly {
        /// The alias of the grant.
        alias: Shown,
    },
    /// The grant was revoked.
    #[error("{}: {alias}: the grant was revoked", self.code().as_str())]
    Revoked {
        /// The alias of the grant.
        alias: Shown,
    },
    /// The grant belongs to another host.
    #[error("{}: {alias}: the grant was approved on host {host}, not on this one", self.code().as_str())]
    UnavailableOnHost {
        /// The alias of the grant.
        alias: Shown,
        /// The host the grant was approved on.
        host: Shown,
    },
    /// The alias breaks the alias rules.
    #[error("{}: {alias}: {why}", self.code().as_str())]
    InvalidAlias {
        /// The refused alias.
        alias: Shown,
        /// Which rule it breaks.
        why: &'static str,
    },
    /// The alias or its environment key is taken.
    #[error("{}: {alias}: {why}", self.code().as_str())]
    AliasTaken {
        /// The refused alias.
        alias: Shown,
        /// By what.
        why: String,
    },
    /// An overlap the sandbox could not enforce.
    #[error("{}: {path}: {why} `{other}` ({other_path})", self.code().as_str())]
    OverlappingGrant {
        /// The refused folder.
        path: Shown,
        /// Why the overlap is refused.
        why: &'static str,
        /// The alias of the existing grant it overlaps.
        other: Shown,
        /// The folder of the existing grant it overlaps.
        other_path: Shown,
    },
    /// More than a cap allows.
    #[error("{}: {what} exceeds the cap of {limit}; nothing was kept", self.code().as_str())]
    TooLarge {
        /// What is capped ("content, in bytes", "pending requests", …).
        what: &'static str,
        /// The cap.
        limit: u64,
    },
    /// The state root or a lane is not private to the current user.
    #[error("{}: {path}: {why}", self.code().as_str())]
    InsecureRoot {
        /// The root or lane.
        path: Shown,
        /// What is wrong with it.
        why: String,
    },
    /// The library has no backend for this operating system.
    #[error("{}: safe-lanes does not run on {platform}: {why}; nothing was opened", self.code().as_str())]
    UnsupportedPlatform {
        /// The operating system (`std::env::consts::OS`).
        platform: &'static str,
        /// What is missing there.
        why: &'static str,
    },
    /// No full OS sandbox on this host.
    #[error("{}: the OS sandbox is unavailable: {why}; nothing was run", self.code().as_str())]
    SandboxUnavailable {
        /// What is missing.
        why: String,
    },
    /// A patch that does not apply exactly.
    #[error("{}: patch rejected: {why}", self.code().as_str())]
    PatchRejected {
        /// Which hunk failed and why.
        why: String,
    },
    /// The manifest is unreadable or breaks a rule.
    #[error("{}: {path}: invalid manifest: {why}; it was left untouched", self.code().as_str())]
    InvalidManifest {
        /// The manifest file.
        path: Shown,
        /// What is wrong with it.
        why: String,
    },
    /// As many background commands as allowed are running already.
    #[error("{}: {limit} background commands are running already; wait for one or stop one", self.code().as_str())]
    TooManyJobs {
        /// The most background commands at once.
        limit: usize,
    },
    /// A path the human's own tools run later, kept read-only inside a read-write grant.
    #[error("{}: {path} is protected: {why}", self.code().as_str())]
    ProtectedPath {
        /// The protected path (escaped).
        path: Shown,
        /// Why, and how the human may lift it.
        why: String,
    },
    /// The SSRF guard refused where a fetch would go.
    #[error("{}: {url}: {why}; nothing was fetched", self.code().as_str())]
    AddressRefused {
        /// The URL refused (the redirect's target, for a redirect), escaped.
        url: Shown,
        /// Which rule refused it (escaped where it quotes the remote).
        why: Shown,
    },
    /// The remote answered an error, or the transfer broke or timed out.
    #[error("{}: {url}: {why}; nothing was kept", self.code().as_str())]
    FetchFailed {
        /// The URL being fetched when it failed, escaped.
        url: Shown,
        /// What went wrong (escaped).
        why: Shown,
    },
    /// On a pseudo-filesystem, or a device node.
    #[error("{}: {path}: is {what}, a view of the kernel or of a process, not a file of data", self.code().as_str())]
    PseudoFile {
        /// The refused path, as the caller gave it.
        path: Shown,
        /// What it is (`on proc`, `a character device` …).
        what: String,
    },
    /// A hidden path: a secret no agent operation reads or writes.
    #[error(
        "{}: {path} is hidden ({pattern}: {what}); only the human may lift it",
        self.code().as_str()
    )]
    HiddenPath {
        /// The path (escaped).
        path: Shown,
        /// The pattern that hides it.
        pattern: Shown,
        /// What the pattern hides, in words.
        what: &'static str,
    },
    /// An argument is malformed, out of range, or missing something it needs.
    #[error("{}: {what}: {why}", self.code().as_str())]
    InvalidArgument {
        /// The argument (escaped).
        what: Shown,
        /// What is wrong with it.
        why: String,
    },
    /// Something the operation needs is not set up.
    #[error("{}: {what} is not configured: {why}", self.code().as_str())]
    NotConfigured {
        /// What is missing.
        what: &'static str,
        /// How to set it up.
        why: String,
    },
    /// An operating-system call failed.
    ///
    /// The OS error is part of the message and deliberately not exposed as
    /// [`std::error::Error::source`], so that error-chain printers show it once.
    #[error("{}: {call} {arg}: {error}", self.code().as_str())]
    Io {
        /// The system call or operation.
        call: &'static str,
        /// Its main argument.
        arg: Shown,
        /// The OS error.
        error: io::Error,
    },
}

/// An error's message without its code ([`Error::message`]).
#[derive(Debug)]
pub struct Message<'a>(&'a Error);

impl fmt::Display for Message<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The text is written once, on each variant; `Error`'s `Display` is `<code>: <message>`.
        let whole = self.0.to_string();
        let message = whole
            .strip_prefix(self.0.code().as_str())
            .and_then(|rest| rest.strip_prefix(": "))
            .unwrap_or(&whole);
        f.write_str(message)
    }
}

impl Error {
    /// What went wrong, without the code (for a caller that shows the code apart, as the
    /// CLI's `{"error":{"code":…,"message":…}}` does).
    pub fn message(&self) -> Message<'_> {
        Message(self)
    }

    /// An operating-system failure of `call` on `arg`.
    pub fn io(call: &'static str, arg: impl Into<Shown>, source: impl Into<io::Error>) -> Self {
        Error::Io {
            call,
            arg: arg.into(),
            error: source.into(),
        }
    }

    /// The underlying OS error number, for [`Error::Io`].
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            Error::Io { error, .. } => error.raw_os_error(),
            _ => None,
        }
    }
}
