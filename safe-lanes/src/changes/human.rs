//! The human's side of held changes: list the sets, review one (each change shown, with a
//! diff for text, the rule's warnings, and a digest of all that was shown), apply exactly what
//! was shown, or discard it.

use std::io::Read;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::FileType;
use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::finish::recover;
use super::journal::{self, Journal, Op, Pending, Tree};
use super::rule::{After, Change, Rule, Verdict};
use super::scan::{Fingerprint, kind_of, lstat_rel};
use super::set::{HELD_DIR, OpenSet, State, Store};
use super::{ChangeWord, HeldEntry, Why};
use crate::beneath::{Anchor, Symlinks, permissions};
use crate::error::{Error, Result, Shown};
use crate::grants::{Grants, Session};
use crate::input::RelPath;

/// The most of a text file shown in a diff.
const MAX_DIFF_BYTES: u64 = 256 << 10;
/// The most lines of both sides together that are diffed: the diff's cost grows with their
/// product when they share little (a larger change is shown by its size and SHA-256).
const MAX_DIFF_LINES: usize = 5_000;
/// The most entries of a held directory listed in a review.
const MAX_LISTED: usize = 200;

/// The held changes of a state root, for the human.
#[derive(Debug)]
pub struct HeldChanges {
    session: Session,
}

/// A held change set, as `safe-lanes changes` lists it.
#[derive(Clone, Debug, Serialize)]
pub struct HeldSet {
    /// Its id (`set_…`).
    pub id: String,
    /// The first grant it changed (most sets have one).
    pub grant: String,
    /// Every grant it changed.
    pub grants: Vec<String>,
    /// `exec` (a confined command) or `patch`.
    pub origin: String,
    /// The command, or the patched file.
    pub command: String,
    /// When it began (RFC 3339).
    pub started: String,
    /// Who asked (the agent).
    pub actor: String,
    /// The held changes.
    pub held: Vec<HeldView>,
}

/// One held change, as a listing shows it.
#[derive(Clone, Debug, Serialize)]
pub struct HeldView {
    /// The grant's alias.
    pub grant: String,
    /// The path, relative to the grant's folder, escaped whole (a hidden character as
    /// `\u{…}`, a byte that is not UTF-8 as `\x..`, a backslash as `\\`): what `apply`'s
    /// paths name it by.
    pub path: String,
    /// `created`, `modified`, `deleted`, `mode` or `link`.
    pub change: ChangeWord,
    /// Why it is held.
    pub why: Why,
    /// What exactly, in words.
    pub what: String,
}

/// A held change set, reviewed: everything `changes apply` would do, and its digest.
#[derive(Clone, Debug, Serialize)]
pub struct SetReview {
    /// The set as listed.
    #[serde(flatten)]
    pub set: HeldSet,
    /// Each held change in full.
    pub changes: Vec<ChangeReview>,
    /// The SHA-256 of everything shown (each change's new content and the folder's entry it
    /// replaces): `changes apply` applies only while it is still the same.
    pub digest: String,
}

/// One held change in full.
#[derive(Clone, Debug, Serialize)]
pub struct ChangeReview {
    /// As listed.
    #[serde(flatten)]
    pub held: HeldView,
    /// What the path would be: `file`, `directory`, `link`, or `absent` (a removal).
    pub kind: &'static str,
    /// What the folder has there now: `file`, `directory`, `link`, `other` or `absent`.
    pub current: &'static str,
    /// Its permission bits (octal), for a file or a directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Its size, for a file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Its SHA-256, for a file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Its target, for a link (escaped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// What it holds, for a directory (at most 200 paths, escaped).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub entries: Vec<String>,
    /// The unified diff from the folder's file to this one, when both are text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// What the library warns of, were it applied now (the rule's verdict).
    pub warnings: Vec<String>,
}

/// What applying or discarding did.
#[derive(Clone, Debug, Serialize)]
pub struct Decided {
    /// The set.
    pub id: String,
    /// The changes now in the folder (applied) or gone (discarded).
    pub paths: Vec<String>,
    /// Changes that met a conflict and stay held.
    pub still_held: Vec<HeldView>,
    /// Whether the decision is in the audit log.
    pub recorded: bool,
}

impl HeldChanges {
    /// The held changes of the grants `grants` (the human's side), after finishing what dead
    /// processes left.
    ///
    /// # Errors
    ///
    /// `insecure_root`, `io`.
    pub fn open(grants: Arc<Grants>) -> Result<Self> {
        let session = grants.session();
        recover(session.grants().changes()?, &session);
        Ok(Self { session })
    }

    fn store(&self) -> Result<&Store> {
        self.session.grants().changes()
    }

    /// The sets waiting for the human, oldest first.
    ///
    /// # Errors
    ///
    /// `io`.
    pub fn list(&self) -> Result<Vec<HeldSet>> {
        let store = self.store()?;
        let mut out = Vec::new();
        for (id, state) in store.states()? {
            if state != State::Waiting && state != State::Interrupted {
                continue;
            }
            let Ok(set) = store.take(&id) else { continue };
            // One set that cannot be read (its files hand-edited, or too large) does not hide
            // the others; `show` names its error.
            match listed(&set) {
                Ok(listed) => out.push(listed),
                Err(e) => tracing::warn!(set = %id, error = %e, "a change set cannot be listed"),
            }
        }
        Ok(out)
    }

    /// Review the set `id`: each change in full, and the digest `apply` asks for.
    ///
    /// # Errors
    ///
    /// `not_found`; `invalid_argument` while it is being worked on; `io`.
    pub fn show(&self, id: &str) -> Result<SetReview> {
        let set = self.store()?.take(id)?;
        self.review(&set)
    }

    fn review(&self, set: &OpenSet) -> Result<SetReview> {
        let listed = listed(set)?;
        let snapshot = self.session.snapshot()?;
        let mut changes = Vec::new();
        let mut digest = Sha256::new();
        for h in set.held()? {
            let layer = &set.meta.layers[h.layer];
            let grant = snapshot.grants.iter().find(|g| g.id == layer.grant);
            let folder = grant
                .filter(|g| g.path == layer.path)
                .and_then(|g| g.folder().ok());
            let held_root = held_root(set, h.layer)?;
            let review = review_one(
                &h,
                held_root.as_ref(),
                folder,
                &layer.path,
                grant.map(super::finish::lifted).unwrap_or_default(),
                &mut digest,
            )?;
            changes.push(review);
        }
        Ok(SetReview {
            set: listed,
            changes,
            digest: crate::digest::finish_hex(digest),
        })
    }

    /// Apply the changes of set `id` that were shown with `digest` — those at `paths` (as
    /// listed), or all of them — as the human (`actor`) decided for `reason`.
    ///
    /// # Errors
    ///
    /// `invalid_argument` without a reason, or when the set or the folder changed since it
    /// was shown (the digest differs: show it again); `not_found` for a path it does not
    /// hold; `revoked` or `unknown_alias` when its grant is gone; `io`.
    pub fn apply(
        &self,
        id: &str,
        paths: &[String],
        digest: &str,
        reason: &str,
        actor: &str,
    ) -> Result<Decided> {
        let reason = needs_reason(reason)?;
        let set = self.store()?.take(id)?;
        waiting(&set)?;
        let review = self.review(&set)?;
        check_digest(id, &review.digest, digest)?;
        let held = set.held()?;
        let chosen = choose(&held, paths)?;
        let snapshot = self.session.snapshot()?;
        let mut folders = Vec::new();
        for layer in &set.meta.layers {
            let grant = super::finish::layer_grant(&snapshot, layer)?;
            folders.push(Some(grant.folder()?.try_clone()?));
        }
        let mut ops = Vec::new();
        for (i, h) in held.iter().enumerate().filter(|(i, _)| chosen.contains(i)) {
            let Some(Some(folder)) = folders.get(h.layer) else {
                continue;
            };
            let current = lstat_rel(folder, &h.path)?.map(|st| Fingerprint::of(&st));
            let held_root = held_root(&set, h.layer)?;
            let source = match &held_root {
                Some(root) => lstat_rel(root, &h.path)?,
                None => None,
            };
            match (h.change, source, current) {
                (ChangeWord::Deleted, _, Some(before)) => ops.push(Op::Delete {
                    layer: h.layer,
                    path: h.path.clone(),
                    before,
                    trash: i,
                    change: h.change,
                }),
                (ChangeWord::Deleted, _, None) => {}
                (ChangeWord::Mode, _, Some(before)) => {
                    if let Some(mode) = h.mode {
                        ops.push(Op::Mode {
                            layer: h.layer,
                            path: h.path.clone(),
                            mode,
                            before,
                            change: h.change,
                        });
                    }
                }
                (_, Some(st), current) if kind_of(&st) != super::rule::Kind::Other => {
                    if current.is_some()
                        && lstat_rel(folder, &h.path)?
                            .is_some_and(|now| kind_of(&now) == super::rule::Kind::Dir)
                    {
                        return Err(Error::InvalidArgument {
                            what: Shown::path(&h.path),
                            why: "the folder has a directory there, which applying this would \
                                  replace whole: move it aside first, or discard the change"
                                .into(),
                        });
                    }
                    let source = Fingerprint::of(&st);
                    ops.push(match current {
                        None => Op::Create {
                            from: Tree::Held,
                            layer: h.layer,
                            path: h.path.clone(),
                            entry: source,
                            change: h.change,
                        },
                        Some(before) => Op::Replace {
                            from: Tree::Held,
                            layer: h.layer,
                            path: h.path.clone(),
                            entry: source,
                            before,
                            change: h.change,
                        },
                    });
                    ops.push(Op::Forget {
                        layer: h.layer,
                        path: h.path.clone(),
                    });
                }
                _ => {}
            }
        }
        let remaining: Vec<HeldEntry> = held
            .iter()
            .enumerate()
            .filter(|(i, _)| !chosen.contains(i))
            .map(|(_, h)| h.clone())
            .collect();
        let applied: Vec<String> = chosen
            .iter()
            .map(|&i| held[i].path.to_string_lossy().into_owned())
            .collect();
        let journal = Journal {
            ops,
            ends_set: remaining.is_empty(),
            held: remaining,
            record: Pending {
                event: "change.applied".into(),
                actor: actor.to_owned(),
                fields: json!({
                    "id": id, "paths": applied, "digest": review.digest, "reason": reason,
                }),
            },
            offset: set.audit().end()?,
        };
        set.write_journal(&journal)?;
        let ran = journal::run(&set, &journal, &folders)?;
        let still: Vec<HeldView> = ran.late.iter().map(view).collect();
        Ok(Decided {
            id: id.to_owned(),
            paths: applied
                .into_iter()
                .filter(|p| !still.iter().any(|s| &s.path == p))
                .collect(),
            still_held: still,
            recorded: ran.recorded,
        })
    }

    /// Discard set `id` whole, as the human (`actor`) decided for `reason`: nothing of it
    /// reaches the folder. With `digest`, only while the set is still what was shown with it
    /// (a screen that showed it first); without, whatever it holds (the human named it).
    ///
    /// # Errors
    ///
    /// `invalid_argument` without a reason, or with a digest that no longer holds;
    /// `not_found`; `io`.
    pub fn discard(
        &self,
        id: &str,
        digest: Option<&str>,
        reason: &str,
        actor: &str,
    ) -> Result<Decided> {
        let reason = needs_reason(reason)?;
        let set = self.store()?.take(id)?;
        waiting(&set)?;
        if let Some(digest) = digest {
            check_digest(id, &self.review(&set)?.digest, digest)?;
        }
        let held = set.held()?;
        let paths: Vec<String> = held
            .iter()
            .map(|h| h.path.to_string_lossy().into_owned())
            .collect();
        let journal = Journal {
            ops: Vec::new(),
            held: Vec::new(),
            record: Pending {
                event: "change.discarded".into(),
                actor: actor.to_owned(),
                fields: json!({ "id": id, "paths": paths, "reason": reason }),
            },
            offset: set.audit().end()?,
            ends_set: true,
        };
        set.write_journal(&journal)?;
        let ran = journal::run(&set, &journal, &[])?;
        Ok(Decided {
            id: id.to_owned(),
            paths,
            still_held: Vec::new(),
            recorded: ran.recorded,
        })
    }
}

/// Refuse a decision on set `id` made on what was shown with `given`, when what it shows now
/// has the digest `now`.
fn check_digest(id: &str, now: &str, given: &str) -> Result<()> {
    if now == given.trim() {
        return Ok(());
    }
    Err(Error::InvalidArgument {
        what: Shown::text(given),
        why: format!(
            "change set {id} or the folder changed since it was shown: show it again, and \
             decide on what you see"
        ),
    })
}

/// Refuse to decide on `set` unless its held changes wait for the human: a set whose publish
/// a dead process left unfinished is finished by its journal, never overwritten by a decision.
fn waiting(set: &OpenSet) -> Result<()> {
    match set.state() {
        State::Waiting => Ok(()),
        _ => Err(Error::InvalidArgument {
            what: Shown::text(&set.meta.id),
            why: "this change set is not waiting for a decision: its publish is not finished \
                  (the next gateway or `safe-lanes changes` finishes it once its grant is back)"
                .into(),
        }),
    }
}

/// A human decision's reason, cleaned; an empty one is refused.
fn needs_reason(reason: &str) -> Result<String> {
    let reason = crate::grants::clean_reason(reason);
    if reason.is_empty() {
        return Err(Error::InvalidArgument {
            what: Shown::text("--reason"),
            why: "every decision on held changes needs a reason, for the record".into(),
        });
    }
    Ok(reason)
}

/// The indexes of `held` that `paths` name (all, when none is named). A path is as listed,
/// or `ALIAS:PATH` to name the grant where the set holds the same path in two.
fn choose(held: &[HeldEntry], paths: &[String]) -> Result<Vec<usize>> {
    if paths.is_empty() {
        return Ok((0..held.len()).collect());
    }
    let mut out = Vec::new();
    for p in paths {
        // As listed (escaped whole), or the path itself.
        let matching = |grant: Option<&str>, path: &str| -> Vec<usize> {
            let path = path.trim_start_matches("./");
            (0..held.len())
                .filter(|&i| {
                    let h = &held[i];
                    (h.path == Path::new(path) || Shown::whole_path(&h.path).as_str() == path)
                        && grant.is_none_or(|g| h.grant == g)
                })
                .collect()
        };
        let mut found = matching(None, p);
        if found.is_empty()
            && let Some((grant, path)) = p.split_once(':')
        {
            found = matching(Some(grant), path);
        }
        match found.as_slice() {
            [i] => {
                if !out.contains(i) {
                    out.push(*i);
                }
            }
            [] => {
                return Err(Error::NotFound {
                    path: Shown::text(p),
                    why: "the change set holds no change at this path".into(),
                });
            }
            _ => {
                return Err(Error::InvalidArgument {
                    what: Shown::text(p),
                    why: "the change set holds this path in more than one grant: name the \
                          grant too, as ALIAS:PATH"
                        .into(),
                });
            }
        }
    }
    Ok(out)
}

fn view(h: &HeldEntry) -> HeldView {
    HeldView {
        grant: h.grant.clone(),
        path: Shown::whole_path(&h.path).to_string(),
        change: h.change,
        why: h.why,
        what: h.what.clone(),
    }
}

/// The set as a listing shows it.
fn listed(set: &OpenSet) -> Result<HeldSet> {
    let meta = &set.meta;
    let grants: Vec<String> = meta.layers.iter().map(|l| l.alias.clone()).collect();
    let held: Vec<HeldView> = if set.state() == State::Interrupted {
        vec![HeldView {
            grant: grants.first().cloned().unwrap_or_default(),
            path: String::new(),
            change: ChangeWord::Modified,
            why: Why::Interrupted,
            what: "not yet read: its gateway died; the next process holds it whole".into(),
        }]
    } else {
        set.held()?.iter().map(view).collect()
    };
    Ok(HeldSet {
        id: meta.id.clone(),
        grant: grants.first().cloned().unwrap_or_default(),
        grants,
        origin: meta.origin.op.clone(),
        command: Shown::message(&meta.origin.command).to_string(),
        started: meta.started.clone(),
        actor: meta.origin.actor.clone(),
        held,
    })
}

/// `held/<layer>` of `set`, if it has one.
fn held_root(set: &OpenSet, layer: usize) -> Result<Option<Anchor>> {
    let rel = Path::new(HELD_DIR).join(layer.to_string());
    match set.dir().open_dir(RelPath::new(&rel)?, Symlinks::Deny) {
        Ok(dir) => Ok(Some(dir)),
        Err(Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// One held change in full, its part of the digest added to `digest`.
fn review_one(
    h: &HeldEntry,
    held: Option<&Anchor>,
    folder: Option<&Anchor>,
    grant: &Path,
    lifted: Vec<PathBuf>,
    digest: &mut Sha256,
) -> Result<ChangeReview> {
    let entry = match held {
        Some(root) if h.change != ChangeWord::Deleted => lstat_rel(root, &h.path)?,
        _ => None,
    };
    let current = match folder {
        Some(f) => lstat_rel(f, &h.path)?,
        None => None,
    };
    digest.update(format!("{}\0", h.layer));
    digest.update(h.path.as_os_str().as_encoded_bytes());
    digest.update(format!("\0{}\0{}\0", h.change.as_str(), h.why.as_str()));
    let mut review = ChangeReview {
        held: view(h),
        kind: "absent",
        current: current.as_ref().map_or("absent", |st| kind_word(st)),
        mode: h.mode.map(|m| format!("{m:04o}")),
        bytes: None,
        sha256: None,
        target: None,
        entries: Vec::new(),
        diff: None,
        warnings: Vec::new(),
    };
    match &current {
        Some(st) => {
            let f = Fingerprint::of(st);
            digest.update(format!(
                "now {} {} {} {}.{}\0",
                f.dev, f.ino, f.size, f.mtime.0, f.mtime.1
            ));
        }
        None => digest.update(b"now absent\0"),
    }
    if let (Some(root), Some(st)) = (held, &entry) {
        review.kind = kind_word(st);
        review.mode = Some(format!("{:04o}", permissions(st)));
        digest.update(format!("mode {:o}\0", permissions(st)));
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => {
                let (bytes, sha) = hash_file(root, &h.path)?;
                digest.update(format!("file {bytes} {sha}\0"));
                review.bytes = Some(bytes);
                review.sha256 = Some(sha);
                review.diff = text_diff(folder, root, &h.path, current.as_ref());
            }
            FileType::Symlink => {
                let target = link_target(root, &h.path)?;
                digest.update(b"link ");
                digest.update(&target);
                digest.update(b"\0");
                review.target = Some(Shown::bytes(&target).to_string());
            }
            FileType::Directory => {
                let dir = root.open_dir(RelPath::new(&h.path)?, Symlinks::Deny)?;
                review.entries = hash_tree(&dir, digest)?;
            }
            _ => digest.update(b"other\0"),
        }
    }
    // What the rule says of it now.
    let rule = Rule::for_grant(grant, &lifted);
    let target;
    let after = match (&entry, h.change) {
        (_, ChangeWord::Deleted) => After::Gone,
        (Some(st), _) => match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => After::Dir,
            FileType::Symlink => {
                target = held
                    .map(|r| link_target(r, &h.path))
                    .transpose()?
                    .unwrap_or_default();
                After::Link { target: &target }
            }
            FileType::RegularFile => After::File {
                mode: permissions(st),
            },
            _ => After::Special,
        },
        (None, _) => After::Dir,
    };
    if let (Some(folder), Some(held)) = (folder, held) {
        let facts = super::scan::LayerFacts::new(held, folder);
        if let Verdict::Hold(why, what) = rule.judge(
            &Change {
                path: &h.path,
                after,
                meanwhile: false,
            },
            &facts,
        ) {
            review.warnings.push(format!("{why}: {what}"));
        }
    }
    if h.why == Why::Conflict {
        review
            .warnings
            .push("conflict: the folder's version is newer than the one the command saw".into());
    }
    Ok(review)
}

fn kind_word(st: &rustix::fs::Stat) -> &'static str {
    match kind_of(st) {
        super::rule::Kind::File => "file",
        super::rule::Kind::Dir => "directory",
        super::rule::Kind::Link => "link",
        super::rule::Kind::Other => "other",
    }
}

fn link_target(root: &Anchor, path: &Path) -> Result<Vec<u8>> {
    let parent = path.parent().unwrap_or(Path::new(""));
    let dir = if parent.as_os_str().is_empty() {
        root.try_clone()?
    } else {
        root.open_dir(RelPath::new(parent)?, Symlinks::Deny)?
    };
    let name = crate::input::Name::new(path.file_name().unwrap_or_default())?;
    Ok(dir.read_link(name)?.unwrap_or_default())
}

/// The size and SHA-256 of the file `path` beneath `root`.
fn hash_file(root: &Anchor, path: &Path) -> Result<(u64, String)> {
    let fd = root.open_read(RelPath::new(path)?, Symlinks::Deny)?;
    let mut hasher = Sha256::new();
    let mut reader = crate::fd::ReadAt::new(fd.as_fd());
    let mut buf = vec![0u8; 64 << 10];
    let mut total = 0u64;
    loop {
        let n = reader
            .read(&mut buf)
            .map_err(|e| Error::io("read", Shown::path(path), e))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&buf[..n]);
    }
    Ok((total, crate::digest::finish_hex(hasher)))
}

/// Every entry below `dir`, its kind, mode and content hashed into `digest`; the first
/// [`MAX_LISTED`] paths returned.
fn hash_tree(dir: &Anchor, digest: &mut Sha256) -> Result<Vec<String>> {
    let mut listed = Vec::new();
    // Directories still to read, by path: one is open at a time.
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let sub = match rel.as_os_str().is_empty() {
            true => dir.try_clone()?,
            false => dir.open_dir(RelPath::new(&rel)?, Symlinks::Deny)?,
        };
        let mut entries = sub.entries()?;
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, st) in entries {
            let path = rel.join(&name);
            if listed.len() < MAX_LISTED {
                listed.push(Shown::path(&path).to_string());
            }
            digest.update(path.as_os_str().as_encoded_bytes());
            digest.update(format!("\0{:o}\0", st.st_mode));
            match FileType::from_raw_mode(st.st_mode) {
                FileType::RegularFile => {
                    let (bytes, sha) = hash_file(dir, &path)?;
                    digest.update(format!("{bytes} {sha}\0"));
                }
                FileType::Symlink => digest.update(link_target(dir, &path)?),
                FileType::Directory => pending.push(path),
                _ => {}
            }
        }
    }
    Ok(listed)
}

/// The diff from the folder's file at `path` (or nothing) to the held one, when both are UTF-8
/// text of at most [`MAX_DIFF_BYTES`] and [`MAX_DIFF_LINES`] together.
fn text_diff(
    folder: Option<&Anchor>,
    held: &Anchor,
    path: &Path,
    current: Option<&rustix::fs::Stat>,
) -> Option<String> {
    let read = |root: &Anchor| -> Option<String> {
        let fd = root
            .open_read(RelPath::new(path).ok()?, Symlinks::Deny)
            .ok()?;
        let mut bytes = Vec::new();
        crate::fd::ReadAt::new(fd.as_fd())
            .take(MAX_DIFF_BYTES + 1)
            .read_to_end(&mut bytes)
            .ok()?;
        if bytes.len() as u64 > MAX_DIFF_BYTES {
            return None;
        }
        String::from_utf8(bytes).ok()
    };
    let new = read(held)?;
    let old = match (folder, current) {
        (Some(f), Some(st)) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {
            read(f)?
        }
        (_, None) => String::new(),
        _ => return None,
    };
    if old.lines().count() + new.lines().count() > MAX_DIFF_LINES {
        return None;
    }
    let patch = diffy::create_patch(&old, &new).to_string();
    // Each line escaped as a message is (nothing hidden, nothing shortened), its tabs kept.
    let shown = |line: &str| {
        line.split('\t')
            .map(|part| Shown::message(part).to_string())
            .collect::<Vec<_>>()
            .join("\t")
    };
    Some(patch.lines().map(shown).collect::<Vec<_>>().join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(grant: &str, layer: usize, path: &str) -> HeldEntry {
        HeldEntry {
            grant: grant.into(),
            layer,
            path: path.into(),
            change: ChangeWord::Created,
            why: Why::ToolConfig,
            what: String::new(),
            mode: None,
        }
    }

    #[test]
    fn a_path_held_in_two_grants_is_named_with_its_grant() {
        let held = [
            entry("p", 0, ".envrc"),
            entry("q", 1, ".envrc"),
            entry("p", 0, "x"),
            entry("p", 0, "a\u{202e}b/CLAUDE.md"),
        ];
        let all = |paths: &[&str]| {
            choose(
                &held,
                &paths.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            )
        };
        assert_eq!(all(&[]).unwrap(), [0, 1, 2, 3]);
        assert_eq!(all(&["x", "./x"]).unwrap(), [2]);
        // As the listing shows it, escaped, and as it is.
        assert_eq!(all(&["a\\u{202e}b/CLAUDE.md"]).unwrap(), [3]);
        assert_eq!(all(&["a\u{202e}b/CLAUDE.md"]).unwrap(), [3]);
        assert_eq!(all(&["q:.envrc"]).unwrap(), [1]);
        assert_eq!(all(&["p:.envrc", "x"]).unwrap(), [0, 2]);
        assert_eq!(
            all(&[".envrc"]).unwrap_err().code().as_str(),
            "invalid_argument"
        );
        for missing in ["y", "r:.envrc", "q:x", ""] {
            assert_eq!(
                all(&[missing]).unwrap_err().code().as_str(),
                "not_found",
                "{missing}"
            );
        }
    }
}
