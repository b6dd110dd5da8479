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
//! 2. [`UploadDeposit::run`] runs the uploader with that private directory as its working
//!    directory and the staged file (`in/<inert name>`: the directory holds nothing else) as
//!    the argument `{file}`; the name the human
//!    knows the content by (the hint's own name, less hidden characters) replaces `{name}` as it is, and `{name:json}`
//!    escaped for a JSON string. No shell reads the arguments, so nothing is quoted; where a
//!    program of the template runs code it is handed (`sh -c`, `python -c`, a script), the
//!    placeholders may stand only after that code ([`Uploader::new`]);
//! 3. on Linux the uploader sees only its own upload: in a mount namespace of its own the
//!    deposit is covered by an empty, read-only `tmpfs` holding only its private directory, at
//!    the same path, locked by a user namespace around it (even a root uploader cannot
//!    unmount it). Two uploads running at once, from one process or two, cannot list or read
//!    each other's staged files;
//! 4. the [`Staged`] guard erases the file and its directory when dropped: after success,
//!    failure, timeout, or a panic in the caller.
//!
//! Each staging directory is held (locked with `flock`) by the process using it. Every process
//! that opens the state root sweeps everything else at once (`sweep`): what a crash or a
//! kill left, and anything put there by hand.

use std::io::Read;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::actor::Actor;
use crate::beneath::{Anchor, Symlinks};
use crate::child::{Outcome, run};
use crate::control::Control;
use crate::copy::copy_hashed;
#[cfg(target_os = "linux")]
use crate::error::Error;
use crate::error::{Result, Shown};
use crate::fd::ReadAt;
use crate::held::{self, Held, Holder};
use crate::input::Name;
use crate::name::sanitize;
use crate::ongoing::Ongoing;
use crate::root::StateRoot;
use crate::upload::Opened;

mod uploader;

pub use uploader::Uploader;

/// The longest inert name's stem, in characters.
const MAX_INERT_STEM: usize = 100;
/// The folder of an upload's own directory that holds its staged file.
const STAGED_DIR: &str = "in";

/// The name the content goes by, which `{name}` becomes: the hint's last component as it is
/// (quotes, backslashes, any script), less the characters a screen hides or acts on
/// ([`is_hidden`](crate::error::is_hidden)), white space at either end and leading dashes (a
/// whole argument `{name}` is never taken for an option); `None` when that leaves no name
/// (empty, `.`, `..`) or one longer than 255 bytes, or the hint is not UTF-8, where the
/// sanitized name is used instead.
fn human_name(hint: &[u8]) -> Option<String> {
    let last = hint.rsplit(|&b| b == b'/').next()?;
    let name: String = std::str::from_utf8(last)
        .ok()?
        .chars()
        .filter(|&c| !crate::error::is_hidden(c))
        .collect();
    let name = name
        .trim_start_matches(|c: char| c == '-' || c.is_whitespace())
        .trim_end();
    (!matches!(name, "" | "." | "..") && name.len() <= 255).then(|| name.to_owned())
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
    /// The human-facing name (`human_name`).
    name: String,
    /// The file it is a copy of, for a source from the allowlist ([`UploadDeposit::stage_source`]);
    /// `None` for content the agent handed over.
    source: Option<PathBuf>,
    bytes: u64,
    sha256: String,
}

/// The result of one upload.
#[derive(Clone, Debug, Serialize)]
pub struct Sent {
    /// The staged file, relative to the deposit (`<random>/<inert name>`, only
    /// `[A-Za-z0-9._/-]`): the uploader ran in `<random>` and was given `<inert name>`.
    #[serde(serialize_with = "crate::lossy::path")]
    pub staged: PathBuf,
    /// The name the content goes by (the hint's own name, less characters a screen hides and
    /// leading dashes), which `{name}` became.
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
        sweep(&deposit.dir);
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
        let sanitized = sanitize(hint);
        let mut staged = Staged {
            deposit: self,
            held: Held::create_dir(&self.dir)?,
            inert: inert_name(&sanitized),
            name: human_name(hint).unwrap_or_else(|| sanitized.as_str().to_owned()),
            source: None,
            bytes: 0,
            sha256: String::new(),
        };
        // The uploader's working directory holds only `in/`: no name the agent chose sits where
        // a tool looks for its own files (`json.py` for `python -m`, a `Makefile`, a
        // `pyproject.toml`).
        staged
            .held
            .entry
            .create_dir(Name::new(STAGED_DIR)?, 0o700)?;
        let fd = staged
            .held
            .entry
            .open_dir(Name::new(STAGED_DIR)?.as_rel(), Symlinks::Deny)?
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
        let mut staged = self.stage(hint, ReadAt::new(source.file.as_fd()))?;
        staged.source = Some(source.path.clone());
        Ok(staged)
    }

    /// Run `uploader` on `staged`, in its upload's own directory and (on Linux) its own view of
    /// the deposit.
    ///
    /// # Errors
    ///
    /// `io` when the uploader cannot be started; `sandbox_unavailable` when its own view of
    /// the deposit cannot be made (the kernel or a container refuses the namespaces). A
    /// failing or timed-out uploader is not an error: see [`Outcome`].
    pub fn run(&self, staged: &Staged<'_>, uploader: &Uploader) -> Result<Outcome> {
        let relative = staged.relative();
        let mut command = Command::new(uploader.program());
        command
            .args(uploader.args_for(&staged.in_own_dir(), &staged.name))
            .current_dir(self.path.join(&staged.held.name));
        // It sees only its own upload in the deposit; it dies with this process, and at its
        // timeout even if this process hangs.
        #[cfg(target_os = "linux")]
        crate::child::supervise::supervise(
            &mut command,
            uploader.limits().timeout,
            Some(self.view_of(staged)?),
        );
        // Recorded before it runs: the content may leave the machine the moment it starts.
        let started = self.ongoing.start(
            "upload",
            self.actor,
            serde_json::json!({
                "uploader": uploader.program().to_string_lossy(),
                "staged": relative,
                "name": staged.name,
                "source": staged.source.as_deref().map(|p| p.to_string_lossy()),
                "bytes": staged.bytes,
                "sha256": staged.sha256,
                "timeout_s": uploader.limits().timeout.as_secs(),
            }),
        )?;
        let began = std::time::Instant::now();
        let mut outcome = match run(&mut command, uploader.limits(), &Control::new(), None) {
            Ok(outcome) => outcome,
            Err(e) => {
                #[cfg(target_os = "linux")]
                let e = match &e {
                    Error::Io {
                        call: "spawn",
                        error,
                        ..
                    } => crate::child::supervise::view_failed(error).map_or(e, |error| {
                        Error::SandboxUnavailable {
                            why: format!(
                                "the uploader could not be started in its own view of the \
                                 deposit (mount and user namespaces): {error}"
                            ),
                        }
                    }),
                    _ => e,
                };
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
                "duration_ms": crate::ongoing::millis(began.elapsed()),
            }))
            .inspect_err(|e| tracing::warn!(error = %e, "could not record how an upload ended"))
            .is_ok();
        Ok(outcome)
    }

    /// What the uploader of `staged` is shown of the deposit: only `staged`'s own directory.
    #[cfg(target_os = "linux")]
    fn view_of(&self, staged: &Staged<'_>) -> Result<crate::child::supervise::DepositView> {
        let identity = |fd: &Anchor| fd.stat().map(|st| (st.st_dev, st.st_ino));
        let c_string = |bytes: &[u8]| {
            std::ffi::CString::new(bytes)
                .map_err(|e| Error::io("path", Shown::bytes(bytes), std::io::Error::other(e)))
        };
        let uid = rustix::process::geteuid().as_raw();
        let gid = rustix::process::getegid().as_raw();
        let maps = (
            format!("{uid} {uid} 1").into_bytes(),
            format!("{gid} {gid} 1").into_bytes(),
        );
        Ok(crate::child::supervise::DepositView {
            deposit: (
                c_string(self.path.as_os_str().as_encoded_bytes())?,
                identity(&self.dir)?,
            ),
            own: (
                c_string(staged.held.name.as_bytes())?,
                identity(&staged.held.entry)?,
            ),
            maps,
            privileged: rustix::process::geteuid().is_root(),
        })
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
}

/// Remove from the deposit `dir` what no process is using. The deposit holds nothing but
/// staging directories, each held ([`Held`]) by the process using it, and hidden ones being
/// made; everything else goes at once: a staging directory whose process ended without erasing
/// it (a crash), a hidden one older than an hour, and anything put there by hand. Every
/// process that opens the state root runs it ([`StateRoot::open`]), so staged content a crash
/// left does not wait for the next upload.
pub(crate) fn sweep(dir: &Anchor) {
    let Ok(entries) = dir.entries() else {
        return;
    };
    for (name, st) in entries {
        let holder = held::holder(dir, &name, &st);
        if matches!(holder, Holder::Live | Holder::Making | Holder::Unknown) {
            continue;
        }
        // An abandoned entry's lock is kept (in `holder`) until it is removed.
        if Name::new(&name)
            .and_then(|name| dir.remove_all(name))
            .is_ok()
        {
            tracing::info!(entry = %Shown::bytes(name.as_encoded_bytes()), "swept a stale staged upload");
        }
        drop(holder);
    }
}

impl Staged<'_> {
    /// The staged file's path relative to the deposit (`<random>/in/<inert name>`); the
    /// uploader runs in `<random>` and `{file}` becomes `in/<inert name>`.
    pub fn relative(&self) -> PathBuf {
        Path::new(&self.held.name).join(self.in_own_dir())
    }

    /// The staged file's path relative to its upload's own directory: what `{file}` becomes.
    fn in_own_dir(&self) -> PathBuf {
        Path::new(STAGED_DIR).join(&self.inert)
    }

    /// The name the content goes by (the hint's own name, less characters a screen hides and
    /// leading dashes): what `{name}` becomes.
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
