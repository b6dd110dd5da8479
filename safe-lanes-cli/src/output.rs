//! Printing results and errors, and choosing the exit status.

use std::io::Write;
use std::process::ExitCode;

use serde_json::{Value, json};

/// What a command produced.
#[derive(Debug)]
pub(crate) struct Report {
    /// The `--json` form.
    pub(crate) json: Value,
    /// The human form.
    pub(crate) text: String,
    /// Whether the command ran but failed (a failing uploader or command): exit status 1.
    pub(crate) failed: bool,
    /// Whether the `--json` form is JSON lines: each element of the `json` array on its own
    /// line (`audit show`).
    pub(crate) json_lines: bool,
}

impl Report {
    pub(crate) fn ok(json: Value, text: impl Into<String>) -> Self {
        Self {
            json,
            text: text.into(),
            failed: false,
            json_lines: false,
        }
    }

    /// A result whose `--json` form is one JSON object per line.
    pub(crate) fn lines(objects: Vec<Value>, text: impl Into<String>) -> Self {
        Self {
            json_lines: true,
            ..Self::ok(Value::Array(objects), text)
        }
    }
}

/// An effect whose audit record could not be written (a full disk): what the terminal says.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Unrecorded {
    /// A grant change: its record waits beside the manifest.
    Change,
    /// A saved file: it stays marked, to be recorded as recovered.
    Save,
    /// How a command or an upload ended (its start is recorded).
    End,
}

impl Unrecorded {
    /// The warning line (with its leading newline) when `recorded` is false; empty otherwise.
    pub(crate) fn warning(self, recorded: bool) -> String {
        if recorded {
            return String::new();
        }
        let what = match self {
            Self::Change => {
                "the change was made, but its record could not be written to the audit log yet \
                 (is the disk full?); it is kept beside the manifest and written with the next \
                 change, and `safe-lanes audit verify` reports it meanwhile"
            }
            Self::Save => {
                "the file was saved, but its record could not be written to the audit log yet \
                 (is the disk full?); the next save or listing that can write the log records it"
            }
            Self::End => {
                "how it ended could not be written to the audit log (is the disk full?); its \
                 start is there, and the next command or upload records it as ended, how unknown"
            }
        };
        format!("\nwarning: {what}")
    }
}

/// A path for JSON output (JSON strings are Unicode; invalid UTF-8 becomes U+FFFD).
pub(crate) fn path(p: &std::path::Path) -> String {
    p.to_string_lossy().into_owned()
}

const EXIT_FAILURE: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_REFUSED: u8 = 3;

/// Report a command line that does not parse: with `--json`, one
/// `{"error":{"code":"invalid_argument","message":…}}` on stdout; without, clap's own text on
/// stderr. Exit status 2 either way. `--help` and `--version` print as clap prints them.
pub(crate) fn usage(err: &clap::Error, json: bool) -> ExitCode {
    use clap::error::ErrorKind;
    if !json
        || matches!(
            err.kind(),
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
        )
    {
        let _ = err.print();
        return ExitCode::from(match err.exit_code() {
            0 => 0,
            _ => EXIT_USAGE,
        });
    }
    // clap's first paragraph, on one line: what is wrong and, on the lines after, which
    // arguments (`the following required arguments were not provided: --name <HINT>`).
    let rendered = err.render().to_string();
    let paragraph: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .skip_while(|line| line.is_empty())
        .take_while(|line| !line.is_empty() && !line.starts_with("Usage:"))
        .collect();
    let joined = paragraph.join(" ");
    let message = match joined.strip_prefix("error: ").unwrap_or(&joined) {
        "" => "the command line does not parse",
        message => message,
    };
    let message = safe_lanes::Shown::message(message).to_string();
    let error = json!({ "error": { "code": "invalid_argument", "message": message } });
    let _ = writeln!(std::io::stdout().lock(), "{error}");
    ExitCode::from(EXIT_USAGE)
}

/// Print the result (or the error) and turn it into the exit status.
pub(crate) fn finish(result: anyhow::Result<Report>, json: bool) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match result {
        Ok(report) => {
            let written = if json && report.json_lines {
                report
                    .json
                    .as_array()
                    .into_iter()
                    .flatten()
                    .try_for_each(|object| writeln!(stdout, "{object}"))
            } else if json {
                writeln!(stdout, "{}", report.json)
            } else if report.text.is_empty() {
                Ok(())
            } else {
                writeln!(stdout, "{}", report.text.trim_end())
            };
            if written.is_err() || report.failed {
                ExitCode::from(EXIT_FAILURE)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(err) => {
            let (code, refused) = match err.downcast_ref::<safe_lanes::Error>() {
                Some(e) => (e.code().as_str(), e.code().is_refusal()),
                None => ("io", false),
            };
            // Each cause once: the library's without its code, which is shown apart.
            let chain: Vec<String> = err
                .chain()
                .map(|cause| match cause.downcast_ref::<safe_lanes::Error>() {
                    Some(e) => e.message().to_string(),
                    None => cause.to_string(),
                })
                .collect();
            let message = safe_lanes::Shown::message(&chain.join(": ")).to_string();
            if json {
                let _ = writeln!(
                    stdout,
                    "{}",
                    json!({ "error": { "code": code, "message": message } })
                );
            } else {
                let _ = writeln!(std::io::stderr(), "safe-lanes: {code}: {message}");
            }
            ExitCode::from(if refused { EXIT_REFUSED } else { EXIT_FAILURE })
        }
    }
}
