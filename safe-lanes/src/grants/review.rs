//! A change to the grants as the human judges it before confirming: from what to what, the
//! folder (its size, whether it is a repository), what the access lets the agent do in plain
//! words, and the warnings of [`crate::risk`].
//!
//! Every screen shows a [`Review`] as it is: the command line prints it above its question,
//! the page on the step that confirms. Computing it changes nothing; the change itself is
//! still made, and checked, by [`Grants::approve_seen`], [`Grants::add`] or
//! [`Grants::set_access`].

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::proposal::{Proposal, Proposed};
use super::{Access, Alias, Grants, Kind};
use crate::beneath::{self, Ambient, Anchor};
use crate::error::{Result, Shown};
use crate::input::AbsPath;
use crate::risk::{self, FolderFacts, Warning};

/// A change to the grants, as the human judges it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Review {
    /// The grant.
    pub alias: Alias,
    /// What it is for (a folder, a tool, a cache).
    pub kind: Kind,
    /// The folder, canonical when it could be opened; `None` while the human has not chosen
    /// one for a request that names none.
    #[serde(serialize_with = "crate::lossy::option_path")]
    pub path: Option<PathBuf>,
    /// The access it has now; `None` for a new grant.
    pub from: Option<Access>,
    /// The access it would have.
    pub to: Access,
    /// Whether the change gives the agent more than it has: a new grant, or a raised access.
    pub widens: bool,
    /// What the access lets confined commands, and so the agent, do there, in words.
    pub allows: &'static str,
    /// The folder looked at: its size, whether it is a repository, its warnings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folder: Option<FolderFacts>,
    /// Every warning about the folder (those of `folder`, or of its path alone when it could
    /// not be opened), most serious first.
    pub warnings: Vec<Warning>,
    /// Why the change would be refused as it stands (the folder is not where the request
    /// says, cannot be opened, or breaks a grant rule), if it would.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// Whether it can be approved as it stands: what every screen follows before it offers
    /// to approve.
    pub standing: Standing,
}

/// Whether a change can be approved as it stands: the one answer every screen follows. A
/// screen offers to approve only a change that is [`Standing::Approvable`]; it asks for the
/// folder first when it is [`Standing::NeedsFolder`]; it shows why, and offers only to deny,
/// when it is [`Standing::Refused`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "why")]
pub enum Standing {
    /// Approving it would succeed now.
    Approvable,
    /// The request names no folder: the human chooses one, and the change is judged again.
    NeedsFolder,
    /// Approving it would be refused, and why (the message of the refusal
    /// [`Grants::approvable`] gives).
    Refused(String),
}

impl Standing {
    /// Whether a screen may offer to approve it as it is.
    pub fn is_approvable(&self) -> bool {
        matches!(self, Standing::Approvable)
    }
}

/// A pending request at a glance, for a list: whether it can be approved as it stands, and
/// the warnings its folder's path gives (nothing is measured: [`Grants::review_proposal`] is
/// the whole review).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Glance {
    /// Whether it can be approved as it stands.
    pub standing: Standing,
    /// The warnings of its folder's path, most serious first.
    pub warnings: Vec<Warning>,
}

/// What a grant of `kind` with `access` lets confined commands do, in words.
pub fn allows(kind: Kind, access: Access) -> &'static str {
    match (kind, access) {
        (Kind::Tool, _) => {
            "confined commands may read this folder and run its programs (its bin folder first \
             on PATH); nothing in it can be changed, and its credentials files are shown empty"
        }
        (Kind::Cache, _) => {
            "confined commands may read this folder and write to it, but what they write goes \
             to a private layer in the state root: the folder itself is never changed"
        }
        (Kind::Folder, Access::ReadOnly) => {
            "confined commands, and so the agent, may read, list and run everything in this \
             folder; nothing in it can be created, changed, renamed or removed"
        }
        (Kind::Folder, Access::ReadWrite) => {
            "confined commands, and so the agent, may read, create, change, rename and delete \
             anything in this folder, and the agent may patch its files; each command's changes \
             land when it ends, except what your own tools would act on (git state, tools' and \
             agent hosts' configuration, start-up files, links out of the folder), which waits \
             for you in `safe-lanes changes`"
        }
    }
}

/// What a review is of, before the folder is looked at.
struct Planned<'a> {
    alias: &'a Alias,
    kind: Kind,
    path: Option<&'a Path>,
    from: Option<Access>,
    to: Access,
    /// The path must already be canonical (a folder a request proposes).
    exact: bool,
}

impl Grants {
    /// The review of approving the proposal `p`, with the folder `chosen` by the human for a
    /// request that names none. Its [`standing`](Review::standing) and
    /// [`refused`](Review::refused) are [`Grants::approvable`]'s answer.
    pub fn review_proposal(&self, p: &Proposal, chosen: Option<&Path>) -> Review {
        let (alias, to, proposed) = p.change.target();
        let (kind, from) = match &p.change {
            Proposed::New { kind, .. } => (*kind, None),
            Proposed::Change { from, .. } => (self.kind_of(alias).unwrap_or_default(), Some(*from)),
        };
        // The folder approving would grant: the human's choice, else the one proposed (as
        // `Grants::approve` takes them).
        let folder = chosen.or(proposed);
        let mut review = self.review(Planned {
            alias,
            kind,
            path: folder,
            from,
            to,
            exact: chosen.is_none()
                && proposed.is_some()
                && matches!(p.change, Proposed::New { .. }),
        });
        review.standing = self.standing(p, chosen);
        review.refused = match &review.standing {
            Standing::Refused(why) => Some(why.clone()),
            _ => None,
        };
        review
    }

    /// The proposal `p` at a glance, with the folder `chosen` for a request that names none:
    /// its folder is judged as written (nothing the agent named is opened); the review judges
    /// it whole.
    pub fn glance(&self, p: &Proposal, chosen: Option<&Path>) -> Glance {
        let (_, _, proposed) = p.change.target();
        let home = crate::accounts::own_home();
        let warnings = proposed
            .or(chosen)
            .map(|path| risk::path_warnings(path, home.as_deref()))
            .unwrap_or_default();
        let (_, _, proposed) = p.change.target();
        let standing = match (proposed, chosen) {
            (None, None) if matches!(p.change, Proposed::New { .. }) => Standing::NeedsFolder,
            (_, Some(_)) => self.standing(p, chosen),
            _ => match self.approvable_as_written(&p.request.id) {
                Ok(()) => Standing::Approvable,
                Err(e) => Standing::Refused(e.message().to_string()),
            },
        };
        Glance { standing, warnings }
    }

    /// Whether the proposal `p` can be approved as it stands ([`Grants::approvable`]).
    fn standing(&self, p: &Proposal, chosen: Option<&Path>) -> Standing {
        let (_, _, proposed) = p.change.target();
        let new = matches!(p.change, Proposed::New { .. });
        if new && proposed.is_none() && chosen.is_none() {
            return Standing::NeedsFolder;
        }
        match self.approvable(&p.request.id, chosen) {
            Ok(()) => Standing::Approvable,
            Err(e) => Standing::Refused(e.message().to_string()),
        }
    }

    /// The review of adding the grant `alias` of `kind` for the folder `path` with `access`
    /// (the human's own path, opened following links).
    ///
    /// # Errors
    ///
    /// `invalid_alias`.
    pub fn review_add(
        &self,
        alias: &str,
        path: &Path,
        kind: Kind,
        access: Access,
    ) -> Result<Review> {
        let alias = Alias::new(alias)?;
        Ok(self.review(Planned {
            alias: &alias,
            kind,
            path: Some(path),
            from: None,
            to: access,
            exact: false,
        }))
    }

    /// The review of changing the access of the grant `alias` to `access`.
    ///
    /// # Errors
    ///
    /// `invalid_alias`, `unknown_alias`, `invalid_manifest`, `io`.
    pub fn review_set_access(&self, alias: &str, access: Access) -> Result<Review> {
        let alias = Alias::new(alias)?;
        let (_, doc) = self.manifest().load()?;
        let grant = super::find(&doc, &alias)?;
        Ok(self.review(Planned {
            alias: &alias,
            kind: grant.toolchain.kind,
            path: Some(&grant.path),
            from: Some(grant.access),
            to: access,
            exact: true,
        }))
    }

    fn review(&self, plan: Planned<'_>) -> Review {
        let widens = plan.from.is_none_or(|from| from.is_raised_to(plan.to));
        let mut review = Review {
            alias: plan.alias.clone(),
            kind: plan.kind,
            path: plan.path.map(Path::to_path_buf),
            from: plan.from,
            to: plan.to,
            widens,
            allows: allows(plan.kind, plan.to),
            folder: None,
            warnings: Vec::new(),
            refused: None,
            standing: Standing::NeedsFolder,
        };
        let Some(path) = plan.path else {
            return review;
        };
        let home = crate::accounts::own_home();
        let opened = AbsPath::new(path).and_then(|_| {
            let dir = Anchor::open_ambient(path, Ambient::because("a folder the human judges"))?;
            let canonical = beneath::location_of(dir.as_fd())?;
            Ok((dir, canonical))
        });
        let (dir, canonical) = match opened {
            Ok(opened) => opened,
            Err(e) => {
                review.warnings = risk::path_warnings(path, home.as_deref());
                review.refused = Some(e.to_string());
                review.standing = Standing::Refused(e.to_string());
                return review;
            }
        };
        if plan.exact && canonical != path {
            review.refused = Some(format!(
                "{} leads elsewhere through a symbolic link or `..` (to {}): approve it with the \
                 folder named explicitly",
                Shown::path(path),
                Shown::path(&canonical)
            ));
        } else if plan.from.is_none() {
            review.refused = self.placement_refusal(&canonical, plan.to);
        }
        let mut facts = risk::facts(&dir, &canonical, home.as_deref());
        if !plan.kind.is_folder() {
            // Toolchains live in hidden folders (`~/.cargo`): that is where they are, not a
            // risk of its own.
            facts.warnings.retain(|w| w.risk != risk::Risk::Hidden);
        }
        review.warnings = facts.warnings.clone();
        review.path = Some(canonical.clone());
        review.folder = Some(facts);
        review.standing = match &review.refused {
            Some(why) => Standing::Refused(why.clone()),
            None => Standing::Approvable,
        };
        review
    }

    /// The kind of the grant `alias`, if it exists.
    fn kind_of(&self, alias: &Alias) -> Option<Kind> {
        let (_, doc) = self.manifest().load().ok()?;
        super::find(&doc, alias).ok().map(|g| g.toolchain.kind)
    }
}
