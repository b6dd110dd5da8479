//! The grant rules, each in one place: where a grant may point ([`Rules::placement`]), how two
//! grants may overlap ([`overlap`]), and whether a stored grant can be used on this host now
//! ([`Rules::usable`], [`still_at_path`]).
//!
//! Making a grant, listing grants and building a session's snapshot all decide through these
//! functions, so the three can never disagree; the verdict is a typed [`Unusable`], turned into
//! an [`Error`] in one place ([`Unusable::error`]).

use std::path::{Path, PathBuf};

use super::Kind;
use super::model::{Access, Alias, Grant};
use crate::beneath::{self, Anchor};
use crate::error::{Error, Shown};
use crate::input::AbsPath;

/// Why a grant cannot be made, or a stored grant cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Unusable {
    /// It is `/`, or covers (or lies inside) the state root, or contains the manifest.
    Placement {
        /// Which of those.
        why: &'static str,
    },
    /// It is the same folder as another grant, or a read-only grant inside a read-write one
    /// (which the sandbox could not keep read-only).
    Overlap {
        /// The other grant.
        other: Alias,
        /// The other grant's folder.
        other_path: PathBuf,
        /// How they overlap.
        why: &'static str,
    },
    /// It was approved on another host.
    OtherHost {
        /// That host.
        host: String,
    },
    /// It was approved on another machine (a manifest copied or restored here, even under the
    /// same host name). The human can adopt it here.
    OtherMachine {
        /// The grant.
        alias: Alias,
        /// The host name it was approved under.
        host: String,
    },
    /// It names no host (another tool wrote it): nothing says it was approved for this one.
    /// The human can adopt it here.
    NoHost {
        /// The grant.
        alias: Alias,
    },
    /// Its folder does not open at the path it names: missing, moved, or a component replaced
    /// by a symbolic link.
    Missing {
        /// What opening it said.
        why: String,
    },
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unusable::Placement { why } => f.write_str(why),
            Unusable::Overlap {
                other,
                other_path,
                why,
            } => write!(f, "{why} `{other}` ({})", Shown::path(other_path)),
            Unusable::OtherHost { host } => write!(f, "approved on host `{}`", Shown::text(host)),
            Unusable::OtherMachine { alias, host } => write!(
                f,
                "approved on another machine (host `{}`); adopt it on this one with \
                 `safe-lanes grant adopt {alias}`",
                Shown::text(host)
            ),
            Unusable::NoHost { alias } => write!(
                f,
                "it was approved without a host; adopt it on this host with \
                 `safe-lanes grant adopt {alias}`"
            ),
            Unusable::Missing { why } => f.write_str(why),
        }
    }
}

impl Unusable {
    /// The refusal for using the grant `alias` at `path`: `unavailable_on_host` for another
    /// host or none, `not_found` for a folder that is not at its path, `invalid_manifest` for a
    /// stored grant that breaks a rule (one that was edited in, or whose surroundings moved).
    pub(crate) fn error(&self, alias: &Alias, path: &Path) -> Error {
        match self {
            Unusable::OtherHost { host } => Error::UnavailableOnHost {
                alias: Shown::text(alias.as_str()),
                host: Shown::text(host),
            },
            Unusable::OtherMachine { alias, host } => Error::UnavailableOnHost {
                alias: Shown::text(alias.as_str()),
                host: Shown::text(&format!(
                    "another machine named `{host}`; adopt it here with `safe-lanes grant adopt \
                     {alias}`"
                )),
            },
            Unusable::NoHost { alias } => Error::UnavailableOnHost {
                alias: Shown::text(alias.as_str()),
                host: Shown::text(&format!(
                    "(none recorded; adopt it here with `safe-lanes grant adopt {alias}`)"
                )),
            },
            Unusable::Missing { .. } => Error::NotFound {
                path: Shown::path(path),
                why: "the granted folder is not at its path on this host".into(),
            },
            Unusable::Placement { .. } | Unusable::Overlap { .. } => Error::InvalidManifest {
                path: Shown::text(alias.as_str()),
                why: format!("this grant is not used: {self}"),
            },
        }
    }

    /// The refusal for *making* a grant at `path` that breaks a rule: `state_root` or
    /// `overlapping_grant`.
    pub(crate) fn refusal(&self, path: &Path) -> Error {
        match self {
            Unusable::Overlap {
                other,
                other_path,
                why,
            } => Error::OverlappingGrant {
                path: Shown::path(path),
                why,
                other: Shown::text(other.as_str()),
                other_path: Shown::path(other_path),
            },
            Unusable::Placement { why } => Error::StateRoot {
                path: Shown::path(path),
                why,
            },
            _ => Error::StateRoot {
                path: Shown::path(path),
                why: "it cannot be granted here",
            },
        }
    }
}

/// The places no grant may cover, and this host.
#[derive(Debug)]
pub(crate) struct Rules<'a> {
    pub(crate) state_root: &'a Path,
    pub(crate) manifest: &'a Path,
    pub(crate) host: &'a str,
    pub(crate) machine: &'a str,
}

impl Rules<'_> {
    /// A grant's folder (canonical) may not be `/`, the state root, inside it or an ancestor of
    /// it, nor contain the manifest: any of those would hand the agent the gateway's tokens or
    /// its own grants.
    pub(crate) fn placement(&self, folder: &Path) -> Result<(), Unusable> {
        let why = if folder == Path::new("/") {
            "it grants `/`"
        } else if folder.starts_with(self.state_root) || self.state_root.starts_with(folder) {
            "it covers the safe-lanes state root"
        } else if self.manifest.starts_with(folder) {
            "it contains the grants manifest"
        } else {
            return Ok(());
        };
        Err(Unusable::Placement { why })
    }

    /// Whether the stored `grant` (one of `all`) can be used on this host now, and if so its
    /// folder, opened by its canonical path without following any link and confirmed to be at
    /// that path.
    pub(crate) fn usable(&self, grant: &Grant, all: &[Grant]) -> Result<Anchor, Unusable> {
        self.placement(&grant.path)?;
        if grant.toolchain.kind.access(Some(grant.access)).is_err() {
            return Err(Unusable::Placement {
                why: "a tool is read-only and a cache read-write, and this entry says otherwise",
            });
        }
        overlap(grant, all)?;
        self.this_host(grant)?;
        let folder = AbsPath::new(&grant.path)
            .and_then(Anchor::open_canonical)
            .map_err(|e| Unusable::Missing { why: e.to_string() })?;
        still_at_path(&folder, &grant.path)?;
        Ok(folder)
    }

    /// A grant is usable only on the host it was approved on, and one that names no host
    /// nowhere.
    fn this_host(&self, grant: &Grant) -> Result<(), Unusable> {
        match (&grant.machine, &grant.host) {
            (Some(machine), _) if machine == self.machine => Ok(()),
            (Some(_), host) => Err(Unusable::OtherMachine {
                alias: grant.alias.clone(),
                host: host.clone().unwrap_or_default(),
            }),
            // Written before machines were told apart: bound by its host name alone.
            (None, Some(host)) if host == self.host => Ok(()),
            (None, Some(host)) => Err(Unusable::OtherHost { host: host.clone() }),
            (None, None) => Err(Unusable::NoHost {
                alias: grant.alias.clone(),
            }),
        }
    }
}

/// A grant may not name the same folder as another, nor be read-only inside a read-write
/// grant. `grant` is checked against every other member of `all` (by id).
pub(crate) fn overlap(grant: &Grant, all: &[Grant]) -> Result<(), Unusable> {
    first_clash(grant, all, false)
}

/// [`overlap`] seen from `changed`, a grant being made or changed (a member of `all`): it is
/// checked against every other member in both directions, so the verdict always names the
/// grant that was there before, never `changed` itself.
pub(crate) fn collision(changed: &Grant, all: &[Grant]) -> Result<(), Unusable> {
    first_clash(changed, all, true)
}

/// [`collision`] for a grant not made yet: a folder `path` with `access`, checked against
/// every member of `all` in both directions, as making it would be.
pub(crate) fn collision_new(path: &Path, access: Access, all: &[Grant]) -> Result<(), Unusable> {
    collision_new_of(path, access, Kind::Folder, all)
}

/// [`collision_new`] for a grant of `kind`.
pub(crate) fn collision_new_of(
    path: &Path,
    access: Access,
    kind: Kind,
    all: &[Grant],
) -> Result<(), Unusable> {
    clash_with((path, access, kind), all.iter(), true)
}

/// The first member of `all` (other than `grant`) that `grant` may not stand beside.
fn first_clash(grant: &Grant, all: &[Grant], both_ways: bool) -> Result<(), Unusable> {
    let others = all.iter().filter(|o| o.id != grant.id);
    let folder = (grant.path.as_path(), grant.access, grant.toolchain.kind);
    clash_with(folder, others, both_ways)
}

/// The first of `others` that a grant of `folder` (path, access and kind) may not stand beside.
fn clash_with<'a>(
    folder: (&Path, Access, Kind),
    others: impl Iterator<Item = &'a Grant>,
    both_ways: bool,
) -> Result<(), Unusable> {
    for other in others {
        if let Some(why) = clash(folder, other, both_ways) {
            return Err(Unusable::Overlap {
                other: other.alias.clone(),
                other_path: other.path.clone(),
                why,
            });
        }
    }
    Ok(())
}

/// Why a grant of `folder` (path, access and kind) may not stand beside `other`: the same
/// folder, a read-only grant inside a read-write one (with `both_ways`, also `other` read-only
/// inside it), or a tool or a cache on either side of a read-write folder, one inside the
/// other: a read-write folder is shown to a command as a layer of its own (ADR 0027), which
/// can neither hold another grant's mount nor lie in one.
fn clash(
    (path, access, kind): (&Path, Access, Kind),
    other: &Grant,
    both_ways: bool,
) -> Option<&'static str> {
    let read_only_inside = |inner: (&Path, Access), outer: (&Path, Access)| {
        inner.1 == Access::ReadOnly && outer.1 == Access::ReadWrite && inner.0.starts_with(outer.0)
    };
    let layered = |access: Access, kind: Kind| access == Access::ReadWrite && kind == Kind::Folder;
    let nested = path.starts_with(&other.path) || other.path.starts_with(path);
    let other_folder = (other.path.as_path(), other.access);
    if other.path == path {
        Some("this folder is already granted as")
    } else if read_only_inside((path, access), other_folder) {
        Some("a read-only grant cannot lie inside the read-write grant")
    } else if both_ways && read_only_inside(other_folder, (path, access)) {
        Some("a read-write grant cannot contain the read-only grant")
    } else if nested && kind != Kind::Folder && layered(other.access, other.toolchain.kind) {
        Some("a tool or a cache cannot lie inside, or hold, the read-write grant")
    } else if nested && layered(access, kind) && other.toolchain.kind != Kind::Folder {
        Some("a read-write grant cannot lie inside, or hold, the tool or cache")
    } else {
        None
    }
}

/// The folder an open grant holds must still be at the path the grant names: a folder moved
/// away (or a path that now leads elsewhere) is not the folder the human approved.
pub(crate) fn still_at_path(folder: &Anchor, path: &Path) -> Result<(), Unusable> {
    match beneath::location_of(folder.as_fd()) {
        Ok(real) if real == path => Ok(()),
        Ok(_) | Err(_) => Err(Unusable::Missing {
            why: "its folder is no longer at the path it names".to_owned(),
        }),
    }
}
