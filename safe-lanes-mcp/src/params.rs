//! The tools' arguments and results, as the model sees them (JSON Schema from the doc
//! comments).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::reply::{Failure, malformed};

/// Content given inline, as text or as base64.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct Content {
    /// The name the file should have. Only a hint: it is sanitized to one safe file name.
    pub(crate) filename: String,
    /// The content as UTF-8 text. Give exactly one of `text` and `base64`.
    pub(crate) text: Option<String>,
    /// The content as standard base64 (for binary files). Give exactly one of `text` and `base64`.
    pub(crate) base64: Option<String>,
}

impl Content {
    /// The bytes, or a JSON-RPC error when not exactly one form is given or base64 is invalid.
    pub(crate) fn bytes(&self) -> Result<Vec<u8>, Failure> {
        use base64::Engine as _;
        match (&self.text, &self.base64) {
            (Some(text), None) => Ok(text.as_bytes().to_vec()),
            (None, Some(b64)) => base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .map_err(|e| malformed(&format!("`base64` is not valid base64: {e}"))),
            _ => Err(malformed("give exactly one of `text` and `base64`")),
        }
    }
}

/// No arguments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub(crate) struct Nothing {}

/// A local file.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct SourcePath {
    /// The absolute path of the file.
    pub(crate) path: String,
}

/// A request for access to a folder.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct AccessRequest {
    /// The alias to use for the folder: lowercase letters, digits, `_` and `-`, starting with a
    /// letter or digit, at most 48 characters.
    pub(crate) alias: String,
    /// `read_only` or `read_write`.
    pub(crate) access: AccessName,
    /// Why access is needed, in words the human will read before deciding.
    pub(crate) reason: String,
    /// The exact absolute folder, only if the user named it; otherwise the human picks it.
    pub(crate) path: Option<String>,
}

/// The access a grant gives.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum AccessName {
    /// Read, list and run.
    ReadOnly,
    /// Read, create, modify, rename and delete.
    ReadWrite,
}

impl From<AccessName> for safe_lanes::Access {
    fn from(a: AccessName) -> Self {
        match a {
            AccessName::ReadOnly => safe_lanes::Access::ReadOnly,
            AccessName::ReadWrite => safe_lanes::Access::ReadWrite,
        }
    }
}

/// A patch for one file in a granted folder.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct FolderPatch {
    /// The alias of a read-write folder grant.
    pub(crate) alias: String,
    /// The file, relative to the granted folder (no `..`, no symbolic links).
    pub(crate) path: String,
    /// A unified diff of that one file (`--- /dev/null` creates it, `+++ /dev/null` deletes it).
    pub(crate) diff: String,
}

/// A shell command.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ShellCommand {
    /// The command, run by `/bin/sh -c`.
    pub(crate) command: String,
    /// The alias of a granted folder to start in (default: a private scratch directory).
    pub(crate) cwd: Option<String>,
    /// Seconds before the command and everything it started are killed (default 60, at most
    /// 600).
    pub(crate) timeout_s: Option<u64>,
}

/// A file saved in the download lane.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SavedFile {
    /// Where it was saved.
    pub(crate) path: String,
    /// Its name in the download lane.
    pub(crate) name: String,
    /// Its size.
    pub(crate) bytes: u64,
    /// Its SHA-256, hex.
    pub(crate) sha256: String,
}

/// The download lane's files.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Downloads {
    /// The files, by name.
    pub(crate) files: Vec<DownloadedFile>,
}

/// One file of the download lane.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct DownloadedFile {
    /// Its name.
    pub(crate) name: String,
    /// Its absolute path.
    pub(crate) path: String,
    /// Its size.
    pub(crate) bytes: u64,
    /// Last modified (RFC 3339).
    pub(crate) modified: String,
}

/// A file that may be uploaded.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ResolvedSource {
    /// Its canonical path.
    pub(crate) path: String,
    /// The allowed folder it is in.
    pub(crate) root: String,
    /// Its size.
    pub(crate) bytes: u64,
    /// Its SHA-256, hex.
    pub(crate) sha256: String,
}

/// What the uploader did.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Uploaded {
    /// What was uploaded.
    pub(crate) source: UploadedContent,
    /// The uploader's exit code.
    pub(crate) exit_code: Option<i32>,
    /// What it printed.
    pub(crate) stdout: String,
    /// What it printed on stderr.
    pub(crate) stderr: String,
}

/// The content an uploader received.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct UploadedContent {
    /// The source file, when a file was uploaded.
    pub(crate) path: Option<String>,
    /// Its size.
    pub(crate) bytes: u64,
    /// Its SHA-256, hex.
    pub(crate) sha256: String,
}

/// The folder grants.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct GrantsList {
    /// Approved folders.
    pub(crate) grants: Vec<GrantInfo>,
    /// Requests waiting for the human.
    pub(crate) requests: Vec<RequestInfo>,
}

/// One approved folder.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct GrantInfo {
    /// Its alias.
    pub(crate) alias: String,
    /// Its absolute path.
    pub(crate) path: String,
    /// `read_only` or `read_write`.
    pub(crate) access: String,
    /// The environment variable holding its path in `shell_exec`.
    pub(crate) env: String,
    /// Whether it can be used on this host now.
    pub(crate) available: bool,
    /// Why not, when it cannot.
    pub(crate) unavailable: Option<String>,
}

/// A pending request.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RequestInfo {
    /// Its id.
    pub(crate) id: String,
    /// The alias asked for.
    pub(crate) alias: String,
    /// The access asked for.
    pub(crate) access: String,
    /// Why.
    pub(crate) reason: String,
    /// The folder proposed, if any.
    pub(crate) path: Option<String>,
    /// When (RFC 3339).
    pub(crate) requested_at: String,
}

/// A request filed for the human.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Requested {
    /// The request, pending until the human decides.
    pub(crate) request: RequestInfo,
    /// Always `pending`: nothing is granted until the human approves.
    pub(crate) status: String,
    /// The command the human runs to approve it.
    pub(crate) approve_with: String,
}

/// What a patch did.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Patched {
    /// The file.
    pub(crate) path: String,
    /// `modified`, `created` or `deleted`.
    pub(crate) change: String,
    /// Hunks applied.
    pub(crate) hunks: usize,
    /// Its size afterwards.
    pub(crate) bytes: u64,
}

/// How a shell command ended.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ShellResult {
    /// Its exit code (none when killed by a signal).
    pub(crate) exit_code: Option<i32>,
    /// The signal that killed it, if any.
    pub(crate) signal: Option<i32>,
    /// Standard output (capped).
    pub(crate) stdout: String,
    /// Standard error (capped).
    pub(crate) stderr: String,
    /// Whether the timeout killed it.
    pub(crate) timed_out: bool,
    /// Whether output was cut at the cap.
    pub(crate) truncated: bool,
    /// Why it was stopped early (a revoked or narrowed grant), if it was.
    pub(crate) stopped: Option<String>,
}
