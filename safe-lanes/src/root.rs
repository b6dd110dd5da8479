//! The state root: where the lanes, the manifest and the audit log live.
//!
//! ```text
//! <root>/               0700, owned by the current user
//! <root>/.downloads/    0700  received files, each 0600
//! <root>/.uploads/      0700  transient files staged for an uploader
//! <root>/.upload-roots  written by the human only
//! <root>/workflow.json  default grants manifest
//! <root>/audit.jsonl    append-only, hash-chained decision log
//! ```
//!
//! The root is found by [`RootLocation::resolve`] and opened by [`StateRoot::open`], which
//! creates what is missing with mode 0700 and refuses (`insecure_root`) a root or lane that
//! another user owns or that others may write to: such a directory could be swapped or
//! filled by someone else, and nothing built on it would be safe. [`StateRoot::init`] (the
//! human's `init`) first sets the user's own root and lanes to 0700 instead.
//!
//! Opening writes nothing that exists already, so a read-only root (a read-only mount, a
//! root of mode 0500) opens, and what only reads it works.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{FileType, Stat};

use crate::audit::AuditLog;
use crate::beneath::{self, Ambient, Anchor, Symlinks};
use crate::error::{Error, Result, Shown};
use crate::input::{Name, RelPath};

/// The download lane's directory name under the root.
pub(crate) const DOWNLOADS_DIR: &str = ".downloads";
/// The upload deposit's directory name under the root.
pub(crate) const UPLOADS_DIR: &str = ".uploads";
/// The human-written upload allowlist file under the root.
pub(crate) const UPLOAD_ROOTS_FILE: &str = ".upload-roots";
/// The default grants manifest under the root.
pub(crate) const MANIFEST_FILE: &str = "workflow.json";
/// The audit log under the root.
pub(crate) const AUDIT_FILE: &str = "audit.jsonl";
/// Name of the download lane's registry of savers (see [`crate::download`], "Crash recovery").
pub(crate) const SAVERS_DIR: &str = ".savers";
/// Name of the registry of effects in flight: commands and uploads whose end is not recorded
/// yet (`crate::ongoing`).
pub(crate) const ONGOING_DIR: &str = ".ongoing";
/// Name of the directory holding each cache grant's private layer (`caches/<alias>/`).
pub(crate) const CACHES_DIR: &str = "caches";
/// Name of the directory of change sets: what confined commands and patches changed in
/// read-write grants, until published or decided by the human ([`crate::changes`]).
pub(crate) const CHANGES_DIR: &str = "changes";

/// The mode of the root and of each lane.
const DIR_MODE: u32 = 0o700;
/// Why the state root is opened by path: it is the one the human chose (`--root`, the
/// environment, or the default under their home).
const CHOSEN: Ambient = Ambient::because("the state root the human chose");

/// Where the state root location came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RootOrigin {
    /// The `--root` flag (or an explicit path from an embedding program).
    Flag,
    /// The `SAFE_LANES_ROOT` environment variable.
    SafeLanesRoot,
    /// The `GWSA_ROOT` environment variable (compatibility).
    GwsaRoot,
    /// `$XDG_STATE_HOME/safe-lanes`.
    XdgStateHome,
    /// `~/.local/state/safe-lanes`.
    Home,
}

impl RootOrigin {
    /// The snake_case name, as in JSON (`flag`, `safe_lanes_root`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            RootOrigin::Flag => "flag",
            RootOrigin::SafeLanesRoot => "safe_lanes_root",
            RootOrigin::GwsaRoot => "gwsa_root",
            RootOrigin::XdgStateHome => "xdg_state_home",
            RootOrigin::Home => "home",
        }
    }
}

impl std::fmt::Display for RootOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A state root path and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootLocation {
    /// The absolute path of the root.
    pub path: PathBuf,
    /// Which setting chose it.
    pub origin: RootOrigin,
}

impl RootLocation {
    /// Resolve the root from `flag`, else `SAFE_LANES_ROOT`, else `GWSA_ROOT`, else
    /// `$XDG_STATE_HOME/safe-lanes`, else `~/.local/state/safe-lanes`.
    ///
    /// Empty variables are ignored; a relative `XDG_STATE_HOME` is ignored (as the XDG
    /// specification requires); a relative flag or root variable is made absolute against the
    /// current directory.
    ///
    /// # Errors
    ///
    /// `not_configured` when no setting applies and `HOME` is unset.
    pub fn resolve(flag: Option<&Path>) -> Result<Self> {
        Self::resolve_with(flag, |key| std::env::var_os(key))
    }

    /// [`RootLocation::resolve`] with an explicit environment lookup.
    ///
    /// # Errors
    ///
    /// As [`RootLocation::resolve`].
    pub fn resolve_with(
        flag: Option<&Path>,
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Self> {
        let chosen = match flag {
            Some(flag) => Some(Self::absolute(flag.to_path_buf(), RootOrigin::Flag)?),
            None => Self::named_with(env)?.into_iter().next(),
        };
        chosen.ok_or_else(|| Error::NotConfigured {
            what: "the state root",
            why: "no --root, SAFE_LANES_ROOT, GWSA_ROOT, XDG_STATE_HOME or HOME is set".into(),
        })
    }

    /// Every state root the environment and the defaults name, in the order
    /// [`RootLocation::resolve`] tries them: `SAFE_LANES_ROOT`, `GWSA_ROOT`,
    /// `$XDG_STATE_HOME/safe-lanes`, `~/.local/state/safe-lanes` (each that is set, with the
    /// rules of [`RootLocation::resolve`]). Whichever is in use, the others may hold another
    /// gateway's tokens: the upload hard guard covers them all
    /// ([`UploadSource`](crate::UploadSource)).
    ///
    /// # Errors
    ///
    /// `io` when a relative root variable cannot be made absolute.
    pub fn named_with(env: impl Fn(&str) -> Option<OsString>) -> Result<Vec<Self>> {
        let var = |key: &str| env(key).filter(|v| !v.is_empty()).map(PathBuf::from);
        let named = [
            var("SAFE_LANES_ROOT").map(|p| (p, RootOrigin::SafeLanesRoot)),
            var("GWSA_ROOT").map(|p| (p, RootOrigin::GwsaRoot)),
            var("XDG_STATE_HOME")
                .filter(|p| p.is_absolute())
                .map(|p| (p.join("safe-lanes"), RootOrigin::XdgStateHome)),
            var("HOME").map(|home| (home.join(".local/state/safe-lanes"), RootOrigin::Home)),
        ];
        named
            .into_iter()
            .flatten()
            .map(|(path, origin)| Self::absolute(path, origin))
            .collect()
    }

    /// `path`, made absolute against the current directory, as chosen by `origin`.
    fn absolute(path: PathBuf, origin: RootOrigin) -> Result<Self> {
        let path = std::path::absolute(&path).map_err(|e| Error::io("absolute", &path, e))?;
        Ok(Self { path, origin })
    }
}

/// The open, verified state root with its two lanes.
///
/// Holding a `StateRoot` means: the root exists, is a directory owned by the current user,
/// not writable by group or others, and is held open by descriptor, so later operations
/// cannot be redirected by renaming or replacing it. Each lane either passed the same checks
/// and is held open too, or is known broken: then only what uses it (saving, listing,
/// staging) is refused, with `insecure_root`, until `safe-lanes init` repairs it.
#[derive(Debug)]
pub struct StateRoot {
    path: PathBuf,
    anchor: Anchor,
    downloads: Lane,
    uploads: Lane,
    audit: Arc<AuditLog>,
    /// What [`StateRoot::init`] repaired, each said in a sentence.
    repairs: Vec<String>,
}

impl StateRoot {
    /// Open the root at `path`, creating it and its parents (the root itself with mode 0700)
    /// and the two lanes (0700) when missing. A lane that is owned by another user, writable
    /// by group or others, or not a real directory (a symbolic link, a file) is kept as
    /// broken: what uses it is refused with `insecure_root` ([`StateRoot::broken`] says why).
    ///
    /// # Errors
    ///
    /// `insecure_root` when the root is owned by another user or writable by group or others;
    /// `io` when it cannot be created or opened.
    pub fn open(path: &Path) -> Result<Self> {
        Self::open_with(path, Modes::Check)
    }

    /// Open the root at `path` as [`StateRoot::open`] does, repairing what the current user
    /// may (the human's `init`): the root and each private directory the user owns are set to
    /// mode 0700, so one others could write to is repaired rather than refused; anything else
    /// standing where a private directory belongs (a file, a FIFO, a directory of another
    /// user's) is moved aside untouched and a link removed, and the directory made; a witness
    /// (`audit.head`) that is not a regular file is replaced. [`StateRoot::repairs`] says
    /// what was done.
    ///
    /// # Errors
    ///
    /// As [`StateRoot::open`], except for modes; and `insecure_root` when a root others could
    /// write to holds an entry another user owns; `io` when `fchmod` fails.
    ///
    /// # Security
    ///
    /// Each mode is set through the descriptor whose owner was just checked, never by path,
    /// and never on a directory another user owns (a root stays `insecure_root`, anything
    /// inside it is moved aside, not changed). The root is
    /// made private before anything in it is trusted: what others may have planted in it
    /// while they could write to it (a manifest, an upload allowlist) is refused by owner.
    pub fn init(path: &Path) -> Result<Self> {
        Self::open_with(path, Modes::Repair)
    }

    fn open_with(path: &Path, modes: Modes) -> Result<Self> {
        if !path.exists() {
            beneath::create_dir_all(path, DIR_MODE, CHOSEN)?;
        }
        let anchor = Anchor::open_ambient(path, CHOSEN).map_err(|e| match e.code() {
            crate::error::Code::Io => e,
            _ => insecure(path, format!("not a usable directory ({e})")),
        })?;
        let mut repairs = Vec::new();
        if secure(&anchor, path, modes, &mut repairs)? {
            refuse_planted(&anchor, path)?;
        }
        let path = beneath::location_of(anchor.as_fd()).unwrap_or_else(|_| path.to_path_buf());
        if modes == Modes::Repair {
            for name in PRIVATE_DIRS {
                repairs.extend(repair_dir_entry(&anchor, name)?);
            }
            repairs.extend(crate::legacy::clear_placeholders(&anchor)?);
        }

        let downloads = Lane::open(&anchor, &path, DOWNLOADS_DIR, modes.inside(), &mut repairs)?;
        let uploads = Lane::open(&anchor, &path, UPLOADS_DIR, modes.inside(), &mut repairs)?;
        // Staged content a crashed upload left is erased by whoever opens the root next.
        if let Lane::Open(deposit) = &uploads {
            crate::deposit::sweep(deposit);
        }
        // The library's other private directories (the registries, the caches' layers) are
        // made by what uses them; `init` repairs their modes when they exist.
        if modes == Modes::Repair {
            for name in &PRIVATE_DIRS[2..] {
                if anchor.stat_entry(Name::new(name)?).is_ok() {
                    open_lane(&anchor, &path, name, modes, &mut repairs)?;
                }
            }
        }
        if modes != Modes::Repair {
            for repair in &repairs {
                tracing::warn!("{repair}");
            }
        }
        let mut audit = AuditLog::open(&anchor, &path, AUDIT_FILE)?;
        if modes == Modes::Repair && audit.problem().is_some() {
            // Read before anything moves: the line the earlier log had reached.
            let witnessed = crate::audit::witnessed(&anchor);
            let earlier = match anchor.stat_entry_if_any(Name::new(AUDIT_FILE)?)? {
                Some(st) if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile => {
                    Some(set_aside(&anchor, AUDIT_FILE, &st)?)
                }
                // Repaired by another process meanwhile: its log is not touched.
                Some(_) => None,
                None => Some(format!("nothing stood where {AUDIT_FILE} belongs")),
            };
            if let Some(earlier) = earlier
                && AuditLog::start_again(&anchor, AUDIT_FILE, &earlier, witnessed)?
            {
                repairs.push(format!(
                    "{earlier}, and started a new audit log whose first record says so"
                ));
            }
            audit = AuditLog::open(&anchor, &path, AUDIT_FILE)?;
        }
        let audit = Arc::new(audit);
        if modes == Modes::Repair && audit.repair_witness(&anchor)? {
            repairs.push(
                "replaced the audit log's witness (audit.head), which was not a regular file, \
                 with one recording the log's last line"
                    .to_owned(),
            );
        }
        Ok(Self {
            path,
            anchor,
            downloads,
            uploads,
            audit,
            repairs,
        })
    }

    /// Every broken piece of the root, each said in a sentence with what it disables (for
    /// `doctor`): a private directory that is not a directory of this user's, or that others
    /// may change, and an audit witness that cannot be written. `safe-lanes init` repairs what
    /// the current user owns.
    pub fn broken(&self) -> Vec<String> {
        let mut out: Vec<String> = [&self.downloads, &self.uploads]
            .into_iter()
            .filter_map(Lane::problem)
            .collect();
        for name in &PRIVATE_DIRS[2..] {
            let Ok(st) = self.anchor.stat_entry(match Name::new(name) {
                Ok(n) => n,
                Err(_) => continue,
            }) else {
                continue;
            };
            let what = match *name {
                SAVERS_DIR => "saving downloads",
                CHANGES_DIR => "confined commands in read-write grants, and held changes",
                ONGOING_DIR => "confined commands and uploads",
                _ => "confined commands that see a cache",
            };
            let path = self.path.join(name);
            let problem = if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
                Some(format!("it is {}", beneath::kind_of(&st)))
            } else {
                foreign_owner(&st)
                    .or_else(|| (st.st_mode & 0o022 != 0).then(|| "others may write to it".into()))
            };
            if let Some(problem) = problem {
                out.push(format!(
                    "{}: {problem}: {what} is refused until `safe-lanes init` repairs it",
                    Shown::path(&path)
                ));
            }
        }
        if let Some(why) = self.audit.problem() {
            out.push(format!(
                "{why}: every recorded operation (saves, uploads, commands, patches, grant \
                 changes and requests) is refused until `safe-lanes init` moves it aside and \
                 starts a new log"
            ));
        }
        if let Some(why) = self.audit.witness_problem().filter(|_| !self.read_only()) {
            out.push(format!(
                "{why}; meanwhile records are appended without it, and lines cut from the end of \
                 the log would not show"
            ));
        }
        out
    }

    /// Whether the root cannot be written (its log is read-only).
    fn read_only(&self) -> bool {
        self.audit
            .witness_problem()
            .is_some_and(|why| why.contains("read-only"))
    }

    /// What opening repaired, each said in a sentence: all that [`StateRoot::init`] did, and
    /// for [`StateRoot::open`] a lane that others could read made private (the root itself
    /// is left to `init`).
    pub fn repairs(&self) -> &[String] {
        &self.repairs
    }

    /// Resolve the location (see [`RootLocation::resolve`]) and open it.
    ///
    /// # Errors
    ///
    /// As [`RootLocation::resolve`] and [`StateRoot::open`].
    pub fn open_default(flag: Option<&Path>) -> Result<Self> {
        Self::open(&RootLocation::resolve(flag)?.path)
    }

    /// Set the root and both lanes to exactly mode 0700 (what [`StateRoot::init`] does as it
    /// opens them).
    ///
    /// # Errors
    ///
    /// `io` when `fchmod` fails.
    pub fn tighten(&self) -> Result<()> {
        for (anchor, path) in [
            (&self.anchor, self.path.clone()),
            (self.downloads()?, self.downloads_path()),
            (self.uploads()?, self.uploads_path()),
        ] {
            secure(anchor, &path, Modes::Repair, &mut Vec::new())?;
        }
        Ok(())
    }

    /// Another handle on the same open root: its descriptors duplicated (never opened again by
    /// path), its audit log shared. For a gateway that hands one root to several owners (a
    /// desk and a lane, each wanting its own `StateRoot`).
    ///
    /// # Errors
    ///
    /// `io` when the descriptor table is full.
    pub fn try_clone(&self) -> Result<Self> {
        Ok(Self {
            path: self.path.clone(),
            anchor: self.anchor.try_clone()?,
            downloads: self.downloads.try_clone()?,
            uploads: self.uploads.try_clone()?,
            audit: Arc::clone(&self.audit),
            repairs: self.repairs.clone(),
        })
    }

    /// The canonical path of the root.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The root directory descriptor (the library's own: nothing outside it may open files
    /// in the state root).
    pub(crate) fn anchor(&self) -> &Anchor {
        &self.anchor
    }

    /// The `.downloads` lane descriptor.
    ///
    /// # Errors
    ///
    /// `insecure_root` when the lane is broken (see [`StateRoot`]).
    pub(crate) fn downloads(&self) -> Result<&Anchor> {
        self.downloads.anchor()
    }

    /// The `.uploads` deposit descriptor.
    ///
    /// # Errors
    ///
    /// `insecure_root` when the deposit is broken (see [`StateRoot`]).
    pub(crate) fn uploads(&self) -> Result<&Anchor> {
        self.uploads.anchor()
    }

    /// `<root>/.savers`, opened (and created when missing) as a lane is.
    pub(crate) fn savers(&self) -> Result<Anchor> {
        private_dir(&self.anchor, &self.path, SAVERS_DIR)
    }

    /// The audit log (`<root>/audit.jsonl`), shared by everything opened from this root.
    pub fn audit(&self) -> Arc<AuditLog> {
        Arc::clone(&self.audit)
    }

    /// `<root>/.downloads`.
    pub fn downloads_path(&self) -> PathBuf {
        self.path.join(DOWNLOADS_DIR)
    }

    /// `<root>/.uploads`.
    pub fn uploads_path(&self) -> PathBuf {
        self.path.join(UPLOADS_DIR)
    }

    /// `<root>/workflow.json`, the default manifest.
    pub fn default_manifest(&self) -> PathBuf {
        self.path.join(MANIFEST_FILE)
    }

    /// The mode bits and owner of the root, each lane and the registry of savers, for `doctor`.
    ///
    /// # Errors
    ///
    /// `io` when `fstat` fails.
    pub fn report(&self) -> Result<Vec<DirReport>> {
        // The other private directories, where what uses them made them.
        let made: Vec<(&str, Anchor)> = PRIVATE_DIRS[2..]
            .iter()
            .filter_map(|name| {
                let dir = self
                    .anchor
                    .open_dir(RelPath::new(name).ok()?, Symlinks::Deny);
                Some((*name, dir.ok()?))
            })
            .collect();
        let lanes = [DOWNLOADS_DIR, UPLOADS_DIR]
            .into_iter()
            .zip([&self.downloads, &self.uploads])
            .filter_map(|(name, lane)| Some((name, lane.anchor().ok()?)));
        std::iter::once((".", &self.anchor))
            .chain(lanes)
            .chain(made.iter().map(|(name, anchor)| (*name, anchor)))
            .map(|(name, anchor)| {
                let st = anchor.stat()?;
                Ok(DirReport {
                    path: if name == "." {
                        self.path.clone()
                    } else {
                        self.path.join(name)
                    },
                    mode: beneath::permissions(&st),
                    uid: st.st_uid,
                    private: st.st_mode & 0o077 == 0,
                })
            })
            .collect()
    }
}

/// One directory's ownership and mode, as `doctor` shows it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DirReport {
    /// The directory.
    #[serde(serialize_with = "crate::lossy::path")]
    pub path: PathBuf,
    /// Its permission bits (shown in octal, `"0700"`, in JSON).
    #[serde(serialize_with = "octal")]
    pub mode: u32,
    /// Its owner.
    pub uid: u32,
    /// Whether group and others have no access at all (mode 0700 or stricter).
    pub private: bool,
}

fn octal<S: serde::Serializer>(mode: &u32, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{mode:04o}"))
}

/// What opening does with a root or lane whose mode is not 0700.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Modes {
    /// Leave it; refuse it if others may write to it ([`StateRoot::open`], for the root).
    Check,
    /// As `Check`, after taking away what others may read or enter where the current user
    /// owns it and the file system lets the mode change ([`StateRoot::open`], for the lanes
    /// and the library's other private directories).
    Tighten,
    /// Set it to 0700 first when the current user owns it ([`StateRoot::init`]).
    Repair,
}

impl Modes {
    /// How the root's own directories are opened when the root is opened this way.
    fn inside(self) -> Self {
        match self {
            Self::Check => Self::Tighten,
            other => other,
        }
    }
}

/// Open the lane `name` beneath `root`, creating it only when it is missing (so a read-only
/// root whose lanes exist is not written), and check it as [`secure`] does.
fn open_lane(
    root: &Anchor,
    root_path: &Path,
    name: &str,
    modes: Modes,
    repairs: &mut Vec<String>,
) -> Result<Anchor> {
    let lane_path = root_path.join(name);
    let open = || root.open_dir(RelPath::new(name)?, Symlinks::Deny);
    let lane = match open() {
        Err(Error::NotFound { .. }) => {
            match root.create_dir(Name::new(name)?, DIR_MODE) {
                Err(e) if e.raw_os_error() != Some(rustix::io::Errno::EXIST.raw_os_error()) => {
                    return Err(e);
                }
                _ => {}
            }
            open()
        }
        opened => opened,
    }
    .map_err(|e| match e.code() {
        crate::error::Code::Io => e,
        _ => insecure(&lane_path, format!("not a real directory ({e})")),
    })?;
    secure(&lane, &lane_path, modes, repairs)?;
    Ok(lane)
}

/// A lane of the root: open and checked, or why not (said again by each use).
#[derive(Debug)]
enum Lane {
    Open(Anchor),
    Broken { path: PathBuf, why: String },
}

impl Lane {
    /// Open (making it when missing) and check the lane `name`; one that fails the checks is
    /// kept as broken when the root is only opened, and refused when it is being repaired.
    ///
    /// # Errors
    ///
    /// `io`; `insecure_root` in [`Modes::Repair`].
    fn open(
        root: &Anchor,
        root_path: &Path,
        name: &str,
        modes: Modes,
        repairs: &mut Vec<String>,
    ) -> Result<Self> {
        match open_lane(root, root_path, name, modes, repairs) {
            Ok(anchor) => Ok(Self::Open(anchor)),
            Err(Error::InsecureRoot { why, .. }) if modes != Modes::Repair => Ok(Self::Broken {
                path: root_path.join(name),
                why,
            }),
            Err(e) => Err(e),
        }
    }

    /// The same lane, its descriptor duplicated.
    fn try_clone(&self) -> Result<Self> {
        Ok(match self {
            Self::Open(anchor) => Self::Open(anchor.try_clone()?),
            Self::Broken { path, why } => Self::Broken {
                path: path.clone(),
                why: why.clone(),
            },
        })
    }

    fn anchor(&self) -> Result<&Anchor> {
        match self {
            Self::Open(anchor) => Ok(anchor),
            Self::Broken { path, why } => Err(insecure(path, why.clone())),
        }
    }

    /// For `doctor`: what is wrong and what it disables.
    fn problem(&self) -> Option<String> {
        match self {
            Self::Open(_) => None,
            Self::Broken { path, why } => Some(format!(
                "{}: {why}: what uses it is refused until `safe-lanes init` repairs it",
                Shown::path(path)
            )),
        }
    }
}

/// The state root's private directories: the two lanes, then the registries, the change sets
/// and the caches' layers (made by what uses them).
const PRIVATE_DIRS: [&str; 6] = [
    DOWNLOADS_DIR,
    UPLOADS_DIR,
    SAVERS_DIR,
    CHANGES_DIR,
    ONGOING_DIR,
    CACHES_DIR,
];

/// For `init`: something of the current user's standing where the private directory `name`
/// belongs — a file, a link, a FIFO (planted, or left by an old version) — is moved aside
/// (`<name>.broken-<random>`, nothing lost; a link is removed), so the directory can be made.
/// So is a directory another user owns: the root is the current user's, so its entries are
/// theirs to rename, and the library never uses what another user can change. What was done,
/// if anything.
pub(crate) fn repair_dir_entry(root: &Anchor, name: &str) -> Result<Option<String>> {
    let st = match root.stat_entry(Name::new(name)?) {
        Ok(st) => st,
        Err(Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let kind = FileType::from_raw_mode(st.st_mode);
    let foreign = foreign_owner(&st);
    if kind == FileType::Directory && foreign.is_none() {
        return Ok(None);
    }
    set_aside(root, name, &st).map(|done| Some(format!("{done}, and made the directory")))
}

/// Take what stands at `name` in `root` (whose status is `st`) out of the way, untouched: a
/// symbolic link is removed (saying where it pointed), anything else renamed to
/// `<name>.broken-<random>` beside it. What was done, in words.
///
/// # Errors
///
/// `io` when it cannot be removed or renamed.
pub(crate) fn set_aside(root: &Anchor, name: &str, st: &Stat) -> Result<String> {
    if FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
        let target = root.read_link(Name::new(name)?)?.unwrap_or_default();
        root.remove_file(Name::new(name)?)?;
        return Ok(format!(
            "removed the symbolic link (to {}) that stood where {name} belongs",
            Shown::path(Path::new(std::ffi::OsStr::from_bytes(&target)))
        ));
    }
    let aside = format!("{name}.broken-{}", crate::random::random_hex());
    root.rename_new(Name::new(name)?, Name::new(&aside)?)?;
    let what = match foreign_owner(st) {
        Some(owner) => format!("{} ({owner})", beneath::kind_of(st)),
        None => beneath::kind_of(st).to_string(),
    };
    Ok(format!(
        "moved {what} that stood where {name} belongs aside to {aside}"
    ))
}

/// The private directory `name` of the state root `root` (at `root_path`), made (0700) when
/// missing and checked as a lane is: the sandbox's own places in the root.
///
/// # Errors
///
/// `insecure_root` when it is not a private directory of the current user; `io`.
pub(crate) fn private_dir(root: &Anchor, root_path: &Path, name: &str) -> Result<Anchor> {
    let mut repairs = Vec::new();
    let dir = open_lane(root, root_path, name, Modes::Tighten, &mut repairs)?;
    for repair in repairs {
        tracing::warn!("{repair}");
    }
    Ok(dir)
}

/// Check the directory `dir` (at `path`) with [`check_private`], after making it private
/// where the current user owns it: under [`Modes::Repair`] it is set to 0700; under
/// [`Modes::Tighten`] one that others may read or enter but not write to loses those bits
/// (0755 becomes 0700, 0555 becomes 0500) when the file system lets the mode change (one that
/// does not — read-only, or without Unix modes — is left as it is, with a warning). Each
/// change is said in `repairs`. Whether it was open to others' writes before.
fn secure(dir: &Anchor, path: &Path, modes: Modes, repairs: &mut Vec<String>) -> Result<bool> {
    let st = dir.stat()?;
    let writable_by_others = st.st_mode & 0o022 != 0;
    let before = beneath::permissions(&st);
    let wanted = match modes {
        Modes::Repair => DIR_MODE,
        Modes::Tighten if !writable_by_others => before & 0o700,
        Modes::Tighten | Modes::Check => before,
    };
    if wanted == before || check_owned(path, &st).is_err() {
        check_private(path, &st)?;
        return Ok(writable_by_others);
    }
    match rustix::fs::fchmod(dir, beneath::mode_bits(wanted)) {
        Ok(()) => repairs.push(format!(
            "set {} from mode {before:04o} to {wanted:04o}: only its owner may use it",
            Shown::path(path)
        )),
        Err(e) if modes == Modes::Tighten => {
            tracing::warn!(
                path = %Shown::path(path),
                error = %e,
                "others may read this private directory, and its mode cannot be changed here"
            );
        }
        Err(e) => return Err(Error::io("fchmod", path, e)),
    }
    check_private(path, &dir.stat()?)?;
    Ok(writable_by_others)
}

/// Refuse a directory another user owns or others may write to.
fn check_private(path: &Path, st: &Stat) -> Result<()> {
    check_owned(path, st)?;
    if st.st_mode & 0o022 != 0 {
        return Err(insecure(
            path,
            format!(
                "mode {:04o} lets group or others write; `safe-lanes init` sets it to 0700",
                beneath::permissions(st)
            ),
        ));
    }
    Ok(())
}

/// Refuse anything but a directory the current user owns.
fn check_owned(path: &Path, st: &Stat) -> Result<()> {
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return Err(insecure(path, "not a directory".to_owned()));
    }
    match foreign_owner(st) {
        Some(why) => Err(insecure(path, why)),
        None => Ok(()),
    }
}

/// Why `st` is not the current user's, if it is not.
fn foreign_owner(st: &Stat) -> Option<String> {
    let me = rustix::process::geteuid().as_raw();
    (st.st_uid != me).then(|| {
        format!(
            "owned by uid {}, not by the current user (uid {me})",
            st.st_uid
        )
    })
}

/// Refuse a root that others could write to until now if it holds an entry another user
/// owns: it may have been planted while the root was open (a manifest that grants folders,
/// an upload allowlist). Called once the root is private, so nothing can be added after.
fn refuse_planted(root: &Anchor, path: &Path) -> Result<()> {
    for (name, st) in root.entries()? {
        if let Some(why) = foreign_owner(&st) {
            let why = format!(
                "{why}, in a state root others could write to: remove it if it is not yours"
            );
            return Err(insecure(&path.join(name), why));
        }
    }
    Ok(())
}

fn insecure(path: &Path, why: String) -> Error {
    Error::InsecureRoot {
        path: Shown::path(path),
        why,
    }
}
