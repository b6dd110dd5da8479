//! Choosing a folder to grant: what a folder picker on the human's side shows, each folder
//! with whether a new grant could be placed there — decided by the rules that making the grant
//! applies ([`Rules::placement`], [`storable`], [`rules::collision_new`]), never by a copy of
//! them.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use rustix::fs::FileType;
use serde::Serialize;

use super::rules::{self, Rules};
use super::{Access, Grant, Grants, storable};
use crate::beneath::{self, Ambient, Anchor};
use crate::error::{Result, Shown};
use crate::input::AbsPath;

/// The most sub-folders one listing holds; a folder with more says it was cut short.
pub const MAX_FOLDER_CHOICES: usize = 2000;

/// One sub-folder in a [`Folders`] listing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FolderChoice {
    /// Its name, as shown (escaped when it is not plain text).
    pub name: String,
    /// Its path: the listed folder's canonical path joined with the name.
    pub path: PathBuf,
    /// Why a grant may not be placed here, or `None` when it may.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// The sub-folders of one folder, for a folder picker: directories only (a symbolic link is
/// never listed), sorted by name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Folders {
    /// The listed folder, canonical.
    pub path: PathBuf,
    /// Its parent, or `None` at `/`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<PathBuf>,
    /// Why a grant may not be placed at the listed folder itself, or `None` when it may.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// Its sub-folders, at most [`MAX_FOLDER_CHOICES`].
    pub folders: Vec<FolderChoice>,
    /// Whether sub-folders were left out to keep to [`MAX_FOLDER_CHOICES`].
    pub truncated: bool,
}

impl Grants {
    /// The sub-folders of `dir` (the human's choice, opened following links and listed at its
    /// canonical path), each with whether a new grant with `access` could be placed there now:
    /// not `/`, the state root, inside it or an ancestor of it, not a folder holding the
    /// manifest, not the folder of another grant or a read-only folder inside a read-write
    /// one — the checks [`Grants::add`] makes, by the same functions.
    ///
    /// # Errors
    ///
    /// `relative_path`, `nul_byte`, `not_found` when `dir` is not a directory,
    /// `invalid_manifest`, `io`.
    pub fn folders(&self, dir: &Path, access: Access) -> Result<Folders> {
        AbsPath::new(dir)?;
        let anchor = Anchor::open_ambient(dir, Ambient::because("a folder the human browses"))?;
        let path = beneath::location_of(anchor.as_fd())?;
        let (_, doc) = self.manifest().load()?;
        let verdict = |p: &Path| refusal(&self.rules(), p, access, &doc.grants);
        let mut names: Vec<_> = anchor
            .entries()?
            .into_iter()
            .filter(|(_, stat)| FileType::from_raw_mode(stat.st_mode) == FileType::Directory)
            .map(|(name, _)| name)
            .collect();
        names.sort();
        let truncated = names.len() > MAX_FOLDER_CHOICES;
        let folders = names
            .iter()
            .take(MAX_FOLDER_CHOICES)
            .map(|name| choice(&path, name, &verdict))
            .collect();
        Ok(Folders {
            refused: verdict(&path),
            parent: path.parent().map(Path::to_path_buf),
            path,
            folders,
            truncated,
        })
    }
}

impl Grants {
    /// Why a new grant of the canonical folder `path` with `access` would be refused now, by
    /// the checks [`Grants::add`] makes; `None` when it would not (or the manifest cannot be
    /// read, which making it would say).
    pub(crate) fn placement_refusal(&self, path: &Path, access: Access) -> Option<String> {
        let (_, doc) = self.manifest().load().ok()?;
        refusal(&self.rules(), path, access, &doc.grants)
    }
}

fn choice(dir: &Path, name: &OsStr, verdict: &impl Fn(&Path) -> Option<String>) -> FolderChoice {
    let path = dir.join(name);
    FolderChoice {
        name: Shown::path(Path::new(name)).to_string(),
        refused: verdict(&path),
        path,
    }
}

/// Why a new grant of the canonical folder `path` with `access` would be refused beside
/// `grants`, in the order making it checks.
fn refusal(rules: &Rules<'_>, path: &Path, access: Access, grants: &[Grant]) -> Option<String> {
    if let Err(why) = rules.placement(path) {
        return Some(why.to_string());
    }
    if let Err(e) = storable(path) {
        return Some(e.to_string());
    }
    rules::collision_new(path, access, grants)
        .err()
        .map(|why| why.to_string())
}
