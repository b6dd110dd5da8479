//! The tools' arguments and results, as the model sees them (JSON Schema from the doc
//! comments).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use safe_lanes::grants::{ALIAS_PATTERN, MAX_ALIAS_LEN};

use crate::content::{ContentReader, Source};
use crate::reply::{Failure, invalid};
use crate::spill::Spilled;

/// Content given inline, as text or as base64 (exactly one: the descriptions say so, and the
/// server refuses anything else with `invalid_argument`). The rule is not a root `oneOf`:
/// model providers refuse a tool whose schema has one (ADR 0021).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Content {
    /// The name the file should have. Only a hint: it is sanitized to one safe file name.
    pub(crate) filename: String,
    /// The content as UTF-8 text. Give exactly one of `text` and `base64`.
    pub(crate) text: Option<String>,
    /// The content as standard base64 (for binary files). Give exactly one of `text` and
    /// `base64`.
    pub(crate) base64: Option<String>,
}

impl Content {
    /// The file name hint and the content as a reader; `invalid_argument` when not exactly one
    /// form is given. A long string the transport left in the request line ([`Spilled`], at
    /// `arguments.text` or `arguments.base64`) is read where it lies.
    pub(crate) fn into_reader(
        self,
        spilled: Option<&Spilled>,
    ) -> Result<(String, ContentReader), Failure> {
        let source = |field: &str, value: String| match spilled {
            Some(s) if value.is_empty() && s.path() == ["params", "arguments", field] => {
                Source::Spilled(s.clone())
            }
            _ => Source::Argument(value),
        };
        let reader = match (self.text, self.base64) {
            (Some(text), None) => ContentReader::text(source("text", text)),
            (None, Some(b64)) => ContentReader::base64(source("base64", b64)),
            _ => return Err(invalid("give exactly one of `text` and `base64`")),
        };
        Ok((self.filename, reader))
    }
}

/// An integer argument from `MIN` to `MAX`: the schema states the range and parsing enforces
/// it, so the two cannot disagree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(try_from = "i64", into = "u64")]
pub(crate) struct Bounded<const MIN: u64, const MAX: u64>(pub(crate) u64);

impl<const MIN: u64, const MAX: u64> TryFrom<i64> for Bounded<MIN, MAX> {
    type Error = String;

    fn try_from(value: i64) -> Result<Self, String> {
        u64::try_from(value)
            .ok()
            .filter(|v| (MIN..=MAX).contains(v))
            .map(Self)
            .ok_or_else(|| format!("{value} is not an integer from {MIN} to {MAX}"))
    }
}

impl<const MIN: u64, const MAX: u64> From<Bounded<MIN, MAX>> for u64 {
    fn from(value: Bounded<MIN, MAX>) -> Self {
        value.0
    }
}

impl<const MIN: u64, const MAX: u64> JsonSchema for Bounded<MIN, MAX> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("Integer_{MIN}_to_{MAX}").into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "integer", "minimum": MIN, "maximum": MAX })
    }
}

/// No arguments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Nothing {}

/// Seconds a command may run: 1 to 600.
pub(crate) type TimeoutSeconds = Bounded<1, 600>;
/// Files in one page of `downloads_list`: 1 to 1,000.
pub(crate) type PageLimit = Bounded<1, 1000>;
/// Seconds a job poll may wait for the job to finish: 0 to 30.
pub(crate) type WaitSeconds = Bounded<0, 30>;

fn default_timeout() -> TimeoutSeconds {
    Bounded(60)
}

fn default_limit() -> PageLimit {
    Bounded(100)
}

/// A page of the download folder.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DownloadsPage {
    /// Where to continue: the `next_cursor` of the previous page (omit for the first page).
    pub(crate) cursor: Option<String>,
    /// The most files to list.
    #[serde(default = "default_limit")]
    pub(crate) limit: PageLimit,
}

/// A file to fetch into the download folder.
#[cfg(target_os = "linux")]
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FetchUrl {
    /// The absolute `https` URL of the file (`http` only if the user allowed it).
    pub(crate) url: String,
    /// The name the file should have. Only a hint, sanitized like any name; without it, the
    /// name the server gives or the URL's last segment.
    pub(crate) filename: Option<String>,
}

/// A local file.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SourcePath {
    /// The absolute path of the file.
    pub(crate) path: String,
}

/// A request for access to a folder.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AccessRequest {
    /// The alias to use for the folder: lowercase letters, digits, `_` and `-`, starting with a
    /// letter or digit, at most 48 characters. To widen a granted folder, its alias or its `id`.
    #[schemars(extend("pattern" = ALIAS_PATTERN, "maxLength" = MAX_ALIAS_LEN))]
    pub(crate) alias: String,
    /// `read_only` (read, list and run) or `read_write` (also create, modify, rename and
    /// delete).
    pub(crate) access: AccessName,
    /// Why access is needed, in words the human will read before deciding.
    pub(crate) reason: String,
    /// The exact absolute folder, only if the user named it; otherwise the human picks it.
    pub(crate) path: Option<String>,
    /// `folder` (the default), or `tool` to ask for a toolchain's folder (read and run only;
    /// `access` must be `read_only`) or `cache` for a folder a toolchain writes downloads to
    /// (`access` must be `read_write`), as `shell_exec` commands need them.
    pub(crate) kind: Option<KindName>,
    /// For a tool or a cache: the environment variables to set to its path in `shell_exec`
    /// (as `CARGO_HOME`).
    #[serde(default)]
    pub(crate) vars: Vec<String>,
    /// For a tool: its programs' folder, relative to it (as `bin`), to put on `PATH`.
    pub(crate) bin: Option<String>,
}

/// What kind of grant is asked for.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(inline)]
pub(crate) enum KindName {
    Folder,
    Tool,
    Cache,
}

impl From<KindName> for safe_lanes::grants::Kind {
    fn from(k: KindName) -> Self {
        match k {
            KindName::Folder => Self::Folder,
            KindName::Tool => Self::Tool,
            KindName::Cache => Self::Cache,
        }
    }
}

/// The access a grant gives.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(inline)]
pub(crate) enum AccessName {
    ReadOnly,
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
#[serde(deny_unknown_fields)]
pub(crate) struct FolderPatch {
    /// The alias (or the `id`) of a read-write folder grant.
    #[schemars(extend("pattern" = ALIAS_PATTERN, "maxLength" = MAX_ALIAS_LEN))]
    pub(crate) alias: String,
    /// The file, relative to the granted folder (no `..`, no symbolic links).
    pub(crate) path: String,
    /// A unified diff of that one file (`--- /dev/null` creates it, `+++ /dev/null` deletes it).
    pub(crate) diff: String,
}

/// A shell command.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ShellCommand {
    /// The command, run by `/bin/sh -c`.
    pub(crate) command: String,
    /// The alias (or the `id`) of a granted folder to start in (default: a private scratch
    /// directory).
    #[schemars(extend("pattern" = ALIAS_PATTERN, "maxLength" = MAX_ALIAS_LEN))]
    pub(crate) cwd: Option<String>,
    /// Seconds before the command and everything it started are killed.
    #[serde(default = "default_timeout")]
    pub(crate) timeout_s: TimeoutSeconds,
    /// Run in the background: answer at once with a `job_id`, then follow the job with
    /// `shell_job_status` and stop it with `shell_job_stop`. For commands that may take
    /// longer than the client waits for an answer.
    #[serde(default)]
    pub(crate) background: bool,
}

/// A background job.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobRef {
    /// The `job_id` that `shell_exec` returned.
    pub(crate) job_id: String,
}

/// A poll of a background job.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobPoll {
    /// The `job_id` that `shell_exec` returned.
    pub(crate) job_id: String,
    /// Wait up to this many seconds for the job to finish before answering (0: answer now).
    #[serde(default)]
    pub(crate) wait_s: WaitSeconds,
}

impl Default for WaitSeconds {
    fn default() -> Self {
        Bounded(0)
    }
}
