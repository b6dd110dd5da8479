//! The upload deposit: content staged in `<root>/.uploads` for a command-line uploader.
//!
//! Some uploaders accept only a file path, and only one inside their working directory. The
//! deposit gives them exactly that and nothing more:
//!
//! 1. [`UploadDeposit::stage`] (bytes) or [`UploadDeposit::stage_source`] (a file that passed
//!    [`UploadSource`](crate::upload::UploadSource)) writes the content into a fresh private
//!    directory `.uploads/<random>/` (0700) as one 0600 file with an *inert* name
//!    (only `[A-Za-z0-9._-]`, from the sanitized hint's safe ASCII letters and
//!    its extension), so the path is never code wherever the uploader puts it;
//! 2. [`UploadDeposit::run`] runs the uploader with the deposit as its working directory and
//!    the staged path *relative to the deposit* (`<random>/<inert name>`) as the argument
//!    `{file}`; the name the human knows the content by (the sanitized hint) replaces
//!    `{name}`, shell-quoted where it stands inside a larger argument;
//! 3. the [`Staged`] guard erases the file and its directory when dropped: after success,
//!    failure, timeout, or a panic in the caller.
//!
//! Each staging directory is held (locked with `flock`) by the process using it. Opening a deposit
//! sweeps everything else at once: what a crash or a kill left, and anything put there by
//! hand.

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::actor::Actor;
use crate::beneath::Anchor;
use crate::child::{Limits, Outcome, run};
use crate::control::Control;
use crate::copy::copy_hashed;
use crate::error::{Error, Result, Shown};
use crate::fd::ReadAt;
use crate::held::{self, Held, Holder};
use crate::input::Name;
use crate::name::sanitize;
use crate::ongoing::Ongoing;
use crate::root::StateRoot;
use crate::upload::Opened;

/// The placeholder replaced by the staged file's path in the uploader's arguments: always a
/// whole argument.
pub(crate) const FILE_PLACEHOLDER: &str = "{file}";
/// The placeholder replaced by the content's human-facing name (the sanitized hint): the name
/// as it is when it is a whole argument, shell-quoted inside a larger one (`sh -c 'upload
/// --title {name} "$1"' sh {file}`).
pub(crate) const NAME_PLACEHOLDER: &str = "{name}";
/// The longest inert name's stem, in characters.
const MAX_INERT_STEM: usize = 100;

/// An uploader command: a program and its arguments, `{file}` standing for the staged file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uploader {
    program: OsString,
    args: Vec<OsString>,
    limits: Limits,
}

impl Uploader {
    /// `program args…`; where no argument is `{file}`, the staged path is appended.
    ///
    /// # Errors
    ///
    /// `invalid_argument` when `{file}` stands inside a larger argument (or in the program):
    /// the staged path is passed only as an argument of its own, so no template can make it
    /// part of a shell command line; `{name}` is the placeholder that may stand inside one.
    pub fn new(
        program: impl Into<OsString>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Result<Self> {
        let program = program.into();
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        let inside = |word: &OsString, whole_ok: bool| {
            let text = word.to_string_lossy();
            text.contains(FILE_PLACEHOLDER) && !(whole_ok && text == FILE_PLACEHOLDER)
        };
        if let Some(word) = std::iter::once(&program)
            .filter(|p| inside(p, false))
            .chain(args.iter().filter(|a| inside(a, true)))
            .next()
        {
            return Err(Error::InvalidArgument {
                what: Shown::text(&word.to_string_lossy()),
                why: "`{file}` must be a whole argument of the uploader (it is passed as one, \
                      never inside a shell command line); inside an argument, use `{name}`, \
                      which is shell-quoted there, or pass `{file}` to the shell as `\"$1\"`"
                    .into(),
            });
        }
        Ok(Self {
            program,
            args,
            limits: Limits::default(),
        })
    }

    /// Parse a command line template such as `gws drive files create --upload {file}` (shell
    /// quoting rules, no shell involved).
    ///
    /// # Errors
    ///
    /// `invalid_argument` when the template is empty or its quoting is unbalanced, and as
    /// [`Uploader::new`].
    pub fn parse(template: &str) -> Result<Self> {
        let words = shlex::split(template).filter(|w| !w.is_empty());
        let Some(mut words) = words else {
            return Err(Error::InvalidArgument {
                what: Shown::text(template),
                why: "not a command: empty, or unbalanced quotes".into(),
            });
        };
        let program = words.remove(0);
        Self::new(program, words)
    }

    /// Bound the uploader's run time and kept output.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The arguments with `{file}` replaced by `file` and `{name}` by `name` (quoted inside a
    /// larger argument).
    fn args_for(&self, file: &Path, name: &str) -> Vec<OsString> {
        let mut has_file = false;
        let quoted = shlex::try_quote(name).map_or_else(|_| "''".into(), |q| q.into_owned());
        let mut args: Vec<OsString> = self
            .args
            .iter()
            .map(|arg| {
                if arg.as_encoded_bytes() == FILE_PLACEHOLDER.as_bytes() {
                    has_file = true;
                    return file.as_os_str().to_owned();
                }
                if arg.as_encoded_bytes() == NAME_PLACEHOLDER.as_bytes() {
                    return name.into();
                }
                replace(arg, NAME_PLACEHOLDER.as_bytes(), quoted.as_bytes())
            })
            .collect();
        if !has_file {
            args.push(file.as_os_str().to_owned());
        }
        args
    }
}

/// `arg` with every `placeholder` replaced by `with`.
fn replace(arg: &OsString, placeholder: &[u8], with: &[u8]) -> OsString {
    let mut rest = arg.as_encoded_bytes();
    let mut out = Vec::with_capacity(rest.len());
    while let Some(at) = rest
        .windows(placeholder.len())
        .position(|w| w == placeholder)
    {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(with);
        rest = &rest[at + placeholder.len()..];
    }
    out.extend_from_slice(rest);
    std::os::unix::ffi::OsStringExt::from_vec(out)
}

/// The name a staged file gets: only `[A-Za-z0-9._-]`, never starting with `.` or `-` —
/// characters no shell, no option parser and no URL treats as anything but a name. It keeps
/// the sanitized name's ASCII letters, digits, `.`, `_` and `-` (each other run becomes one
/// `_`) and its extension when that is ASCII letters and digits; a name with no ASCII letter
/// or digit becomes `upload` (with the extension). The human-facing name stays what `{name}`
/// gives.
pub(crate) fn inert_name(name: &crate::name::SafeName) -> String {
    let name = name.as_str();
    let (stem, ext) = match name.rsplit_once('.') {
        Some((stem, ext))
            if !stem.is_empty()
                && !ext.is_empty()
                && ext.chars().all(|c| c.is_ascii_alphanumeric()) =>
        {
            (stem, Some(ext))
        }
        _ => (name, None),
    };
    let mut out = String::new();
    for c in stem.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let trimmed = out
        .trim_start_matches(['.', '-', '_'])
        .trim_end_matches(['.', '_']);
    let mut out: String = if trimmed.chars().any(|c| c.is_ascii_alphanumeric()) {
        trimmed.chars().take(MAX_INERT_STEM).collect()
    } else {
        "upload".to_owned()
    };
    let trimmed_len = out.trim_end_matches(['.', '_']).len();
    out.truncate(trimmed_len);
    if let Some(ext) = ext {
        out.push('.');
        out.push_str(ext);
    }
    out
}

/// The deposit of a state root.
#[derive(Debug)]
pub struct UploadDeposit {
    dir: Anchor,
    path: PathBuf,
    /// Uploads in flight: each recorded before its uploader runs (`crate::ongoing`).
    ongoing: Ongoing,
    /// Where refused content is recorded.
    audit: std::sync::Arc<crate::audit::AuditLog>,
    max_bytes: Option<u64>,
    actor: Actor,
}

/// A staged file; erased (with its private directory) when dropped.
#[derive(Debug)]
pub struct Staged<'d> {
    deposit: &'d UploadDeposit,
    /// Its directory, held ([`Held`]) while this lives: the lock says "in use" to a sweep in
    /// any process, and goes with this process if it dies.
    held: Held<Anchor>,
    /// The staged file's inert name ([`inert_name`]).
    inert: String,
    /// The human-facing name: the sanitized hint.
    name: String,
    bytes: u64,
    sha256: String,
}

/// The result of one upload.
#[derive(Clone, Debug, Serialize)]
pub struct Sent {
    /// The staged name the uploader was given, relative to the deposit (`<random>/<inert
    /// name>`, only `[A-Za-z0-9._/-]`).
    #[serde(serialize_with = "crate::lossy::path")]
    pub staged: PathBuf,
    /// The name the content goes by (the sanitized hint), which `{name}` became.
    pub name: String,
    /// Bytes staged.
    pub bytes: u64,
    /// SHA-256 of the staged content.
    pub sha256: String,
    /// How the uploader ended and what it printed.
    #[serde(flatten)]
    pub outcome: Outcome,
}

impl UploadDeposit {
    /// The deposit of `root`; sweeps what no live process holds (module documentation).
    ///
    /// # Errors
    ///
    /// `io` when the deposit descriptor cannot be duplicated.
    pub fn open(root: &StateRoot) -> Result<Self> {
        let ongoing = crate::ongoing::open(root.anchor(), root.path(), root.audit())?;
        // What a process that died mid-upload left: its record closed, its staging erased.
        ongoing.close_dead();
        let deposit = Self {
            dir: root.uploads()?.try_clone()?,
            path: root.uploads_path(),
            ongoing,
            audit: root.audit(),
            max_bytes: None,
            actor: Actor::Agent,
        };
        deposit.sweep_stale();
        Ok(deposit)
    }

    /// Refuse staged content larger than `max_bytes` (`too_large`, nothing kept).
    pub fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = Some(max_bytes);
        self
    }

    /// The actor recorded in the audit log ([`Actor::Agent`] by default).
    pub fn with_actor(mut self, actor: Actor) -> Self {
        self.actor = actor;
        self
    }

    /// The deposit directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stage what `reader` yields under a name derived from `hint`; a refusal is recorded
    /// as `upload.refused`.
    ///
    /// # Errors
    ///
    /// `too_large` past the cap; `invalid_argument` when `reader` fails with
    /// [`InvalidData`](std::io::ErrorKind::InvalidData) (content that is not what it claims,
    /// such as invalid base64); `io` otherwise; nothing is left in the deposit.
    ///
    /// # Security
    ///
    /// The hint is untrusted; it only becomes one sanitized name in a fresh private directory.
    pub fn stage(&self, hint: impl AsRef<[u8]>, reader: impl Read) -> Result<Staged<'_>> {
        let hint = hint.as_ref();
        self.stage_unrecorded(hint, reader).map_err(|e| {
            self.audit.refused(
                crate::audit::Operation::Upload,
                self.actor,
                &String::from_utf8_lossy(hint),
                e,
            )
        })
    }

    fn stage_unrecorded(&self, hint: &[u8], mut reader: impl Read) -> Result<Staged<'_>> {
        let name = sanitize(hint);
        let mut staged = Staged {
            deposit: self,
            held: Held::create_dir(&self.dir)?,
            inert: inert_name(&name),
            name: name.as_str().to_owned(),
            bytes: 0,
            sha256: String::new(),
        };
        let fd = staged
            .held
            .entry
            .create_new(Name::new(&staged.inert)?, 0o600)?;
        let copied = copy_hashed(&mut reader, fd.as_fd(), self.max_bytes, || Ok(()))?;
        staged.bytes = copied.bytes;
        staged.sha256 = copied.sha256;
        crate::crash::point("deposit.staged");
        Ok(staged)
    }

    /// Stage a copy of a source that passed the upload allowlist, under its own name.
    ///
    /// # Errors
    ///
    /// As [`UploadDeposit::stage`].
    pub fn stage_source(&self, source: &Opened) -> Result<Staged<'_>> {
        let hint = source
            .path
            .file_name()
            .map(|n| n.as_encoded_bytes().to_vec())
            .unwrap_or_default();
        self.stage(hint, ReadAt::new(source.file.as_fd()))
    }

    /// Run `uploader` on `staged` with the deposit as its working directory.
    ///
    /// # Errors
    ///
    /// `io` when the uploader cannot be started. A failing or timed-out uploader is not an
    /// error: see [`Outcome`].
    pub fn run(&self, staged: &Staged<'_>, uploader: &Uploader) -> Result<Outcome> {
        let relative = staged.relative();
        let mut command = Command::new(&uploader.program);
        command
            .args(uploader.args_for(&relative, &staged.name))
            .current_dir(&self.path);
        // It dies with this process, and at its timeout even if this process hangs.
        #[cfg(target_os = "linux")]
        crate::child::supervise::supervise(&mut command, uploader.limits.timeout);
        // Recorded before it runs: the content may leave the machine the moment it starts.
        let started = self.ongoing.start(
            "upload",
            self.actor,
            serde_json::json!({
                "uploader": uploader.program.to_string_lossy(),
                "staged": relative,
                "name": staged.name,
                "bytes": staged.bytes,
                "sha256": staged.sha256,
            }),
        )?;
        let mut outcome = match run(&mut command, uploader.limits, &Control::new(), None) {
            Ok(outcome) => outcome,
            Err(e) => {
                let error =
                    serde_json::json!({ "code": e.code(), "message": e.message().to_string() });
                let _ = started.end(serde_json::json!({ "error": error }));
                return Err(e);
            }
        };
        outcome.recorded = started
            .end(serde_json::json!({
                "exit_code": outcome.exit_code,
                "signal": outcome.signal,
                "timed_out": outcome.timed_out,
            }))
            .inspect_err(|e| tracing::warn!(error = %e, "could not record how an upload ended"))
            .is_ok();
        Ok(outcome)
    }

    /// Run `uploader` on `staged`, then erase it whatever happened.
    ///
    /// # Errors
    ///
    /// As [`UploadDeposit::run`]; the staged file is erased in every case.
    pub fn send(&self, staged: Staged<'_>, uploader: &Uploader) -> Result<Sent> {
        let outcome = self.run(&staged, uploader)?;
        crate::crash::point("deposit.sent");
        Ok(Sent {
            staged: staged.relative(),
            name: staged.name.clone(),
            bytes: staged.bytes,
            sha256: staged.sha256.clone(),
            outcome,
        })
    }

    /// Remove what no process is using. The deposit holds nothing but staging directories,
    /// each held ([`Held`]) by the process using it, and hidden ones being made; everything
    /// else goes at once: a staging directory whose process ended without erasing it (a
    /// crash), a hidden one older than an hour, and anything put there by hand.
    fn sweep_stale(&self) {
        let Ok(entries) = self.dir.entries() else {
            return;
        };
        for (name, st) in entries {
            let holder = held::holder(&self.dir, &name, &st);
            if matches!(holder, Holder::Live | Holder::Making | Holder::Unknown) {
                continue;
            }
            // An abandoned entry's lock is kept (in `holder`) until it is removed.
            let _ = Name::new(&name).and_then(|name| self.dir.remove_all(name));
            drop(holder);
            tracing::info!(entry = %Shown::bytes(name.as_encoded_bytes()), "swept a stale staged upload");
        }
    }
}

impl Staged<'_> {
    /// The staged file's path relative to the deposit: what `{file}` becomes.
    pub fn relative(&self) -> PathBuf {
        Path::new(&self.held.name).join(&self.inert)
    }

    /// The name the content goes by (the sanitized hint): what `{name}` becomes.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The staged file's absolute path.
    pub fn path(&self) -> PathBuf {
        self.deposit.path.join(self.relative())
    }

    /// Bytes staged.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// SHA-256 of the staged content.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }
}

impl Drop for Staged<'_> {
    fn drop(&mut self) {
        let removed = Name::new(&self.held.name).and_then(|dir| self.deposit.dir.remove_all(dir));
        if let Err(e) = removed {
            tracing::warn!(error = %e, "could not erase a staged upload");
        }
    }
}
