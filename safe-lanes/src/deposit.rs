//! The upload deposit: content staged in `<root>/.uploads` for a command-line uploader.
//!
//! Some uploaders accept only a file path, and only one inside their working directory. The
//! deposit gives them exactly that and nothing more:
//!
//! 1. [`UploadDeposit::stage`] (bytes) or [`UploadDeposit::stage_source`] (a file that passed
//!    [`UploadSource`](crate::upload::UploadSource)) writes the content into a fresh private
//!    directory `.uploads/<random>/` (0700) as one 0600 file named after the sanitized hint;
//! 2. [`UploadDeposit::run`] runs the uploader with the deposit as its working directory and
//!    the staged path *relative to the deposit* in place of `{file}` in its arguments;
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
use std::sync::Arc;

use serde::Serialize;

use crate::actor::Actor;
use crate::audit::AuditLog;
use crate::beneath::Anchor;
use crate::child::{Limits, Outcome, run};
use crate::control::Control;
use crate::copy::copy_hashed;
use crate::error::{Error, Result, Shown};
use crate::fd::ReadAt;
use crate::held::{self, Held, Holder};
use crate::input::Name;
use crate::name::sanitize;
use crate::root::StateRoot;
use crate::upload::Opened;

/// The placeholder replaced by the staged file's path in the uploader's arguments.
pub const FILE_PLACEHOLDER: &str = "{file}";

/// An uploader command: a program and its arguments, `{file}` standing for the staged file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uploader {
    program: OsString,
    args: Vec<OsString>,
    limits: Limits,
}

impl Uploader {
    /// `program args…`; where no argument contains `{file}`, the staged path is appended.
    pub fn new(
        program: impl Into<OsString>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Self {
        Self {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            limits: Limits::default(),
        }
    }

    /// Parse a command line template such as `gws drive files create --upload {file}` (shell
    /// quoting rules, no shell involved).
    ///
    /// # Errors
    ///
    /// `invalid_argument` when the template is empty or its quoting is unbalanced.
    pub fn parse(template: &str) -> Result<Self> {
        let words = shlex::split(template).filter(|w| !w.is_empty());
        let Some(mut words) = words else {
            return Err(Error::InvalidArgument {
                what: Shown::text(template),
                why: "not a command: empty, or unbalanced quotes".into(),
            });
        };
        let program = words.remove(0);
        Ok(Self::new(program, words))
    }

    /// Bound the uploader's run time and kept output.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The arguments with `{file}` replaced by `file`.
    fn args_for(&self, file: &Path) -> Vec<OsString> {
        let file = file.as_os_str();
        let mut replaced = false;
        let mut args: Vec<OsString> = self
            .args
            .iter()
            .map(|arg| {
                let text = arg.as_encoded_bytes();
                if !arg.to_string_lossy().contains(FILE_PLACEHOLDER) {
                    return arg.clone();
                }
                replaced = true;
                let mut out = Vec::with_capacity(text.len());
                let mut rest = text;
                while let Some(at) = find(rest, FILE_PLACEHOLDER.as_bytes()) {
                    out.extend_from_slice(&rest[..at]);
                    out.extend_from_slice(file.as_encoded_bytes());
                    rest = &rest[at + FILE_PLACEHOLDER.len()..];
                }
                out.extend_from_slice(rest);
                std::os::unix::ffi::OsStringExt::from_vec(out)
            })
            .collect();
        if !replaced {
            args.push(file.to_owned());
        }
        args
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The deposit of a state root.
#[derive(Debug)]
pub struct UploadDeposit {
    dir: Anchor,
    path: PathBuf,
    audit: Arc<AuditLog>,
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
    name: String,
    bytes: u64,
    sha256: String,
}

/// The result of one upload.
#[derive(Clone, Debug, Serialize)]
pub struct Sent {
    /// The staged name the uploader was given, relative to the deposit.
    #[serde(serialize_with = "crate::lossy::path")]
    pub staged: PathBuf,
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
        let deposit = Self {
            dir: root.uploads().try_clone()?,
            path: root.uploads_path(),
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

    /// Stage what `reader` yields under a name derived from `hint`.
    ///
    /// # Errors
    ///
    /// `too_large` past the cap, `io` otherwise; nothing is left in the deposit.
    ///
    /// # Security
    ///
    /// The hint is untrusted; it only becomes one sanitized name in a fresh private directory.
    pub fn stage(&self, hint: impl AsRef<[u8]>, mut reader: impl Read) -> Result<Staged<'_>> {
        let name = sanitize(hint).as_str().to_owned();
        let mut staged = Staged {
            deposit: self,
            held: Held::create_dir(&self.dir)?,
            name,
            bytes: 0,
            sha256: String::new(),
        };
        let fd = staged
            .held
            .entry
            .create_new(Name::new(&staged.name)?, 0o600)?;
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
            .args(uploader.args_for(&relative))
            .current_dir(&self.path);
        let outcome = run(&mut command, uploader.limits, &Control::new(), None)?;
        self.audit.append(
            "upload.run",
            self.actor,
            serde_json::json!({
                "uploader": uploader.program.to_string_lossy(),
                "staged": relative,
                "bytes": staged.bytes,
                "sha256": staged.sha256,
                "exit_code": outcome.exit_code,
                "timed_out": outcome.timed_out,
            }),
        )?;
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
        Path::new(&self.held.name).join(&self.name)
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
