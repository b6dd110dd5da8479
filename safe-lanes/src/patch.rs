//! Apply a unified diff to one file beneath a read-write grant, strictly and atomically.
//!
//! [`apply_patch`] is how an agent edits a granted folder without a generic "write file" tool:
//!
//! - the grant must be read-write (`read_only`), current (`unknown_alias`, `revoked`) and
//!   available here (`unavailable_on_host`); a pending request grants nothing;
//! - the target is a relative path resolved through the confinement primitive with *no*
//!   symbolic link allowed at any component or at the target (`symlink_escape`), no `..` out
//!   (`traversal`), no absolute path (`absolute_path`), no NUL (`nul_byte`);
//! - the target must be a regular file (`not_regular_file`) with one link (`hardlinked`), UTF-8
//!   text of at most [`MAX_FILE_BYTES`];
//! - the diff must describe exactly one text file: binary patches, renames, copies, mode-only
//!   changes and multi-file diffs are `patch_rejected`;
//! - the file the diff says it changes must be the target: the name after `+++` (after `---`
//!   for a deletion), without git's `a/` or `b/`, and the target must be one the other's
//!   last components — a diff made above the grant (`b/src/x.rs` for the target `x.rs` of a
//!   grant on `src/`) or in a folder below it (`b/x.rs` for `src/x.rs`) names it, `b/y.rs`
//!   or `b/tests/x.rs` does not; the name after `---` of a change is free (`diff -u x.orig
//!   x`). A diff written for another file is `patch_rejected`, so what is recorded as
//!   patched is what the diff says it changes;
//! - every hunk must match exactly (context lines included; a hunk may sit at another line
//!   than it says, but never with fuzz), else `patch_rejected` names the failing hunk and the
//!   file is untouched;
//! - hunks apply in the order they are given, each below the lines the previous one matched;
//!   where a hunk matches at several lines, the one nearest to the line its header names wins
//!   (the earlier one on a tie);
//! - finding where the hunks apply costs at most [`MAX_MATCH_WORK`] line comparisons; a diff
//!   that needs more is `patch_rejected`, the file untouched (see *Cost* below);
//! - `--- /dev/null` creates the file (never over an existing one); `+++ /dev/null` deletes it
//!   (only if the patch removes all of its content);
//! - the result is written to a temporary file in the same directory, `fsync`ed, and renamed
//!   over the target, keeping its mode; a reader sees the old file or the new one, never a mix.
//!
//! # Cost
//!
//! The diff is untrusted, so applying it must cost little whatever it says. The file's lines
//! are indexed once (each distinct line gets a number, and each number the sorted list of
//! lines where it occurs). A hunk is then tried only where its *rarest* line (the line of its
//! old side that occurs least often in the file) sits, nearest position first; a hunk with a
//! line the file does not have is refused without trying any position. An ordinary patch
//! therefore costs about one comparison per line of the file and of the diff, and a diff whose
//! context never matches costs no more than reading it: a 240 KB such diff against a 320 KB
//! file is refused in milliseconds.
//!
//! What indexing cannot make cheap is a hunk made only of lines that occur everywhere (a file
//! of blank lines, a diff of blank context ending in a line that never follows them): every
//! position almost matches. The comparisons spent on positions where a hunk turns out not to
//! match count against [`MAX_MATCH_WORK`]; past it the patch is refused with `patch_rejected`
//! and a message that says so, after some tens of milliseconds of CPU at most. Such a refusal
//! is final for that diff: a hunk with more distinctive context lines, or the edit split into
//! smaller patches, applies. There is no cancellation flag: the bound already ends every call
//! quickly, whatever the diff.

use std::collections::HashMap;
use std::io::Read;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use diffy::patch_set::{FileMode, FileOperation, ParseOptions, PatchKind, PatchSet};
use diffy::{Hunk, Line};
use rustix::fs::{Mode, OFlags};
use serde::Serialize;

use crate::beneath::{Anchor, Publish, Symlinks};
use crate::changes::patch::Patching;
use crate::changes::rule::Verdict;
use crate::error::{Error, Result, Shown};
use crate::grants::{Alias, Session, Want};
use crate::input::{Name, RelPath};

/// The largest file a patch may read or produce.
pub const MAX_FILE_BYTES: u64 = 16 << 20;
/// The most line comparisons one patch may spend on positions where a hunk does not match.
///
/// Guarantee: besides one lookup and at most one successful comparison per line of its hunks,
/// [`apply_patch`] compares at most this many lines (plus the length of one hunk) before it
/// answers; a diff that needs more is refused with `patch_rejected` and the file is unchanged.
/// An ordinary patch wastes next to nothing, so the bound only refuses diffs whose hunks
/// consist of lines that occur almost everywhere in the file and still fail to match near
/// where they say. See the module documentation, *Cost*.
pub const MAX_MATCH_WORK: u64 = 1 << 25;
/// The mode of a file a patch creates.
const NEW_FILE_MODE: u32 = 0o644;

/// What a patch did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum FileChange {
    /// An existing file was rewritten.
    Modified,
    /// A new file was created.
    Created,
    /// The file was deleted.
    Deleted,
}

impl FileChange {
    /// The word for it, as in JSON: `modified`, `created`, `deleted`.
    pub fn as_str(self) -> &'static str {
        match self {
            FileChange::Modified => "modified",
            FileChange::Created => "created",
            FileChange::Deleted => "deleted",
        }
    }
}

/// The result of [`apply_patch`].
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct Patched {
    /// The file, inside the granted folder.
    #[serde(serialize_with = "crate::lossy::path")]
    pub path: PathBuf,
    /// What happened to it.
    pub change: FileChange,
    /// Hunks applied.
    pub hunks: usize,
    /// Its size afterwards.
    pub bytes: u64,
    /// Whether the change was held for the human instead of made: the path is one the
    /// human's own tools act on (git state, a tool's or an agent host's configuration …).
    pub held: bool,
    /// The change set holding it, when held (`safe-lanes changes show <set>`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set: Option<String>,
    /// Why it is held, when held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<crate::changes::Why>,
}

/// Apply `diff` to `file` (relative to the grant `alias`) in `session`.
///
/// # Errors
///
/// See the module documentation; `io` for system failures. On every error the target and its
/// directory are unchanged.
///
/// # Security
///
/// `file` and `diff` are untrusted and checked here, a refusal recorded in the audit log; the
/// agent's alias was checked when it became an [`Alias`] (by [`Session::alias`], which
/// records its refusal the same way).
pub fn apply_patch(session: &Session, alias: &Alias, file: &Path, diff: &str) -> Result<Patched> {
    apply(session, alias, file, diff).map_err(|e| {
        session.refused(
            crate::audit::Operation::Patch,
            &format!("{alias}:{}", file.to_string_lossy()),
            e,
        )
    })
}

fn apply(session: &Session, alias: &Alias, file: &Path, diff: &str) -> Result<Patched> {
    let snapshot = session.snapshot()?;
    let grant = snapshot.folder(alias, Want::Write)?;
    let (parent, name) = split_target(file)?;
    // A hidden path is refused by its name before anything is opened; one hidden for what it
    // holds (a token in `.npmrc`), by what it holds before or after.
    let hidden = grant
        .hidden()
        .hides_below(&grant.path, file, crate::hidden::Kind::Other);
    if let Some(hidden) = hidden.as_ref().filter(|h| !h.needs_content()) {
        return Err(hidden.refusal(file));
    }
    let dir = grant.folder()?.open_dir(parent, Symlinks::Deny)?;
    let edit = parse(diff)?;
    let current = read_target(&dir, name, file)?;
    // Refused before the hunks are tried, so whether they match says nothing of the secret.
    if let Some(hidden) = hidden.as_ref().filter(|h| {
        current
            .as_ref()
            .is_some_and(|c| h.holds_bytes(c.text.as_bytes()))
    }) {
        return Err(hidden.refusal(file));
    }
    let base = base_text(&edit.op, current.as_ref(), file)?;
    names_the_target(edit.changes.as_deref(), file)?;
    let mut work = Work::default();
    let patched = apply_hunks(base, edit.patch.hunks(), MAX_MATCH_WORK, &mut work)
        .map_err(|miss| rejected(miss.describe(file)))?;
    if let Some(hidden) = hidden.filter(|h| h.holds_bytes(patched.as_bytes())) {
        return Err(hidden.refusal(file));
    }
    let mode = current.as_ref().map_or(NEW_FILE_MODE, |c| c.mode);
    let patching = match edit.op {
        Op::Delete => {
            if !patched.is_empty() {
                return Err(rejected(
                    "the patch deletes the file but leaves content in it".into(),
                ));
            }
            Patching::Remove
        }
        _ => Patching::Write {
            text: patched.as_bytes(),
            mode,
        },
    };
    let change = match (&edit.op, &current) {
        (Op::Delete, _) => FileChange::Deleted,
        (_, None) => FileChange::Created,
        (_, Some(_)) => FileChange::Modified,
    };
    let mut report = Patched {
        path: path_clean::clean(grant.path.join(file)),
        change,
        hunks: edit.patch.hunks().len(),
        bytes: match change {
            FileChange::Deleted => 0,
            _ => patched.len() as u64,
        },
        held: false,
        set: None,
        why: None,
    };
    // The one rule over what an agent leaves in a folder decides, as for a command's changes.
    let relative: PathBuf = file
        .components()
        .filter(|c| matches!(c, std::path::Component::Normal(_)))
        .collect();
    match crate::changes::patch::verdict(grant, &relative, patching)? {
        Verdict::Publish => {}
        Verdict::Hold(why, what) => {
            let held = (why, what.into_owned());
            let summary = crate::changes::patch::hold(session, grant, &relative, patching, held)?;
            report.held = true;
            report.set = summary.set;
            report.why = Some(why);
            return Ok(report);
        }
        Verdict::Drop(_) => {
            return Err(rejected(
                "the file has a set-user-id or set-group-id bit, which nothing an agent writes \
                 may carry"
                    .into(),
            ));
        }
    }
    publish(&dir, name, &edit.op, &patched, current.as_ref())?;
    session.record(
        "patch.apply",
        serde_json::json!({ "alias": alias, "file": relative.to_string_lossy(), "result": &report }),
    )?;
    Ok(report)
}

/// The text the hunks apply to: the file's, or nothing for a file the patch creates.
fn base_text<'c>(op: &Op, current: Option<&'c Current>, file: &Path) -> Result<&'c str> {
    match (op, current) {
        (Op::Create, Some(_)) => Err(rejected(format!(
            "{} already exists; the patch creates it",
            Shown::path(file)
        ))),
        (Op::Create, None) => Ok(""),
        (_, None) => Err(Error::NotFound {
            path: Shown::path(file),
            why: "no such file to patch".into(),
        }),
        (_, Some(existing)) => Ok(&existing.text),
    }
}

/// Make the change on disk: remove the file, or write the patched text under its name.
fn publish(
    dir: &Anchor,
    name: Name<'_>,
    op: &Op,
    patched: &str,
    current: Option<&Current>,
) -> Result<FileChange> {
    match op {
        Op::Delete => {
            if !patched.is_empty() {
                return Err(rejected(
                    "the patch deletes the file but leaves content in it".into(),
                ));
            }
            dir.remove_file(name)?;
            dir.sync()?;
            Ok(FileChange::Deleted)
        }
        Op::Create => {
            write_beside(dir, name, patched, NEW_FILE_MODE, Publish::New)?;
            Ok(FileChange::Created)
        }
        Op::Modify => {
            let mode = current.map_or(NEW_FILE_MODE, |c| c.mode);
            write_beside(dir, name, patched, mode, Publish::Replace)?;
            Ok(FileChange::Modified)
        }
    }
}

/// Why the hunks could not be applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Miss {
    /// Hunk number `.0` (from 1) matches nowhere below the previous hunk.
    NoMatch(usize),
    /// Hunk number `.0` says it goes above the lines the previous hunk changed.
    OutOfOrder(usize),
    /// The search passed [`MAX_MATCH_WORK`] (or the given budget) while placing hunk `.0`.
    TooMuchWork(usize),
    /// The file has more lines than positions are counted with.
    TooManyLines,
}

impl Miss {
    /// The refusal's message, naming the file.
    fn describe(self, file: &Path) -> String {
        let file = Shown::path(file);
        match self {
            Miss::NoMatch(1) => format!("hunk #1: its lines do not match {file}"),
            Miss::NoMatch(n) => format!(
                "hunk #{n}: its lines do not match {file} below hunk #{}",
                n - 1
            ),
            Miss::OutOfOrder(n) => format!(
                "hunk #{n} goes above hunk #{}: hunks must come in file order",
                n - 1
            ),
            Miss::TooMuchWork(n) => format!(
                "hunk #{n}: finding where it applies in {file} would take more than \
                 {MAX_MATCH_WORK} line comparisons (its lines occur almost everywhere); give it \
                 more distinctive context lines, or split the patch"
            ),
            Miss::TooManyLines => format!("{file} has too many lines to patch"),
        }
    }
}

/// The lines of a text, each numbered by its content, and where each content occurs.
struct Index<'t> {
    /// The lines, each with its `\n` (the last one may lack it).
    lines: Vec<&'t str>,
    /// The number of each line's content.
    ids: Vec<u32>,
    /// The number of each content.
    by_text: HashMap<&'t str, u32>,
    /// The positions of content `k` are `at[starts[k]..starts[k + 1]]`, ascending.
    starts: Vec<u32>,
    at: Vec<u32>,
}

impl<'t> Index<'t> {
    /// Index `text` in one pass (and one over its lines).
    fn new(text: &'t str) -> std::result::Result<Self, Miss> {
        // Lines as diffs count them: each ends after its `\n`; the last one may lack it.
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        if u32::try_from(lines.len()).is_err() {
            return Err(Miss::TooManyLines);
        }
        let mut by_text: HashMap<&str, u32> = HashMap::new();
        let mut counts: Vec<u32> = Vec::new();
        let ids: Vec<u32> = lines
            .iter()
            .map(|&line| {
                let fresh = counts.len() as u32;
                let id = *by_text.entry(line).or_insert(fresh);
                if id == fresh {
                    counts.push(0);
                }
                counts[id as usize] += 1;
                id
            })
            .collect();
        let mut starts = Vec::with_capacity(counts.len() + 1);
        let mut sum = 0u32;
        starts.push(0);
        for count in counts {
            sum += count;
            starts.push(sum);
        }
        let mut next = starts.clone();
        let mut at = vec![0u32; lines.len()];
        for (pos, &id) in ids.iter().enumerate() {
            let slot = &mut next[id as usize];
            at[*slot as usize] = pos as u32;
            *slot += 1;
        }
        Ok(Self {
            lines,
            ids,
            by_text,
            starts,
            at,
        })
    }

    /// The number of `line`'s content, if the text has it.
    fn id(&self, line: &str) -> Option<u32> {
        self.by_text.get(line).copied()
    }

    /// Where content `id` occurs, ascending.
    fn positions(&self, id: u32) -> &[u32] {
        let k = id as usize;
        &self.at[self.starts[k] as usize..self.starts[k + 1] as usize]
    }
}

/// The work a patch cost, counted in lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Work {
    /// Every index lookup and line comparison.
    pub(crate) lines: u64,
    /// The comparisons spent on positions where a hunk did not match: what the budget bounds.
    pub(crate) wasted: u64,
}

/// Apply `hunks` to `base` exactly, in order, refusing once more than `budget` comparisons were
/// spent on positions that did not match (the work is added to `work`, which tests read).
///
/// The text is rebuilt in one pass: the lines between hunks are copied, each hunk's old side is
/// replaced by its new side. Nothing is written anywhere.
pub(crate) fn apply_hunks(
    base: &str,
    hunks: &[Hunk<'_, str>],
    budget: u64,
    work: &mut Work,
) -> std::result::Result<String, Miss> {
    let index = Index::new(base)?;
    let total = index.lines.len();
    let mut out = String::with_capacity(base.len());
    // Lines of `base` already copied or replaced.
    let mut done = 0usize;
    // Lines the applied hunks added, minus those they removed.
    let mut shift = 0i64;
    for (i, hunk) in hunks.iter().enumerate() {
        let number = i + 1;
        let old: Vec<Option<u32>> = hunk
            .lines()
            .iter()
            .filter_map(|line| match line {
                Line::Context(text) | Line::Delete(text) => Some(index.id(text)),
                Line::Insert(_) => None,
            })
            .collect();
        // The header names a line of the file as patched so far (clamped to its end); in
        // the file as it was, that is `shift` lines earlier.
        let named = i64::try_from(hunk.new_range().start().saturating_sub(1)).unwrap_or(i64::MAX);
        let expected = named.min(total as i64 + shift) - shift;
        let start =
            place(&index, &old, expected, done, budget, work).map_err(|miss| match miss {
                Place::Nowhere => Miss::NoMatch(number),
                Place::Above => Miss::OutOfOrder(number),
                Place::TooMuchWork => Miss::TooMuchWork(number),
            })?;
        out.extend(index.lines[done..start].iter().copied());
        let mut added = 0i64;
        for line in hunk.lines() {
            match line {
                Line::Context(text) | Line::Insert(text) => {
                    out.push_str(text);
                    added += 1;
                }
                Line::Delete(_) => {}
            }
        }
        done = start + old.len();
        shift += added - old.len() as i64;
    }
    out.extend(index.lines[done..].iter().copied());
    Ok(out)
}

/// Why a hunk found no place.
enum Place {
    Nowhere,
    Above,
    TooMuchWork,
}

/// Where the lines `old` (as content numbers; `None` for a line the file lacks) sit in the
/// file at or below line `from`, nearest to `expected` (the earlier on a tie).
fn place(
    index: &Index<'_>,
    old: &[Option<u32>],
    expected: i64,
    from: usize,
    budget: u64,
    work: &mut Work,
) -> std::result::Result<usize, Place> {
    let total = index.lines.len();
    if old.is_empty() {
        // Only added lines: the header alone says where, never above the previous hunk.
        return match usize::try_from(expected) {
            Ok(at) if at >= from => Ok(at.min(total)),
            _ => Err(Place::Above),
        };
    }
    let len = old.len();
    if len > total - from {
        return Err(Place::Nowhere);
    }
    let (k, seen) = rarest(index, old, work)?;
    // A start `p` puts the rarest line at `p + k`; keep the starts that fit in `from..=total - len`.
    let lowest = from + k;
    let highest = total - len + k;
    let seen = &seen[seen.partition_point(|&q| (q as usize) < lowest)
        ..seen.partition_point(|&q| (q as usize) <= highest)];
    for start in nearest_first(seen, k, expected) {
        let here = &index.ids[start..start + len];
        let mut compared = 0;
        let same = old.iter().zip(here).all(|(want, have)| {
            compared += 1;
            *want == Some(*have)
        });
        work.lines += compared;
        if same {
            return Ok(start);
        }
        work.wasted += compared;
        if work.wasted > budget {
            return Err(Place::TooMuchWork);
        }
    }
    Err(Place::Nowhere)
}

/// The rarest line of the hunk's `old` lines: its offset in the hunk and the file's positions
/// of it. A line the file lacks rules out every position.
fn rarest<'i>(
    index: &'i Index<'_>,
    old: &[Option<u32>],
    work: &mut Work,
) -> std::result::Result<(usize, &'i [u32]), Place> {
    let mut rarest: Option<(usize, &[u32])> = None;
    for (k, id) in old.iter().enumerate() {
        work.lines += 1;
        let Some(id) = *id else {
            return Err(Place::Nowhere);
        };
        let seen = index.positions(id);
        if rarest.is_none_or(|(_, best)| seen.len() < best.len()) {
            rarest = Some((k, seen));
        }
    }
    rarest.ok_or(Place::Nowhere)
}

/// The hunk starts that put its line `k` at the (sorted) positions `seen`, nearest to
/// `expected` first: starts below it are tried downwards, the others upwards, a tie going
/// below.
fn nearest_first(seen: &[u32], k: usize, expected: i64) -> impl Iterator<Item = usize> + '_ {
    let start = move |q: u32| q as i64 - k as i64;
    let split = seen.partition_point(|&q| start(q) < expected);
    let (mut below, mut above) = (split, split);
    std::iter::from_fn(move || {
        let take_below = match (below.checked_sub(1), seen.get(above)) {
            (None, None) => return None,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(b), Some(&a)) => expected - start(seen[b]) <= start(a) - expected,
        };
        let q = if take_below {
            below -= 1;
            seen[below]
        } else {
            above += 1;
            seen[above - 1]
        };
        Some(q as usize - k)
    })
}

/// What the diff does to its one file.
enum Op {
    Create,
    Modify,
    Delete,
}

struct Edit<'d> {
    op: Op,
    patch: diffy::Patch<'d, str>,
    /// The file the diff says it changes: the name after `+++`, or after `---` for a deletion.
    changes: Option<String>,
}

/// Parse a diff that changes exactly one text file.
fn parse(diff: &str) -> Result<Edit<'_>> {
    // Git's extended format (renames, modes, binary markers) when it has git headers.
    let options = if diff.lines().any(|l| l.starts_with("diff --git ")) {
        ParseOptions::gitdiff()
    } else {
        ParseOptions::unidiff()
    };
    let files = PatchSet::parse(diff, options)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| {
            rejected(format!(
                "not a unified diff: {}",
                Shown::text(&e.to_string())
            ))
        })?;
    let [file] = <[_; 1]>::try_from(files).map_err(|files: Vec<_>| {
        rejected(format!(
            "the diff must change exactly one file; it changes {}",
            files.len()
        ))
    })?;
    if [file.old_mode(), file.new_mode()]
        .into_iter()
        .flatten()
        .any(|m| matches!(m, FileMode::Symlink | FileMode::Gitlink))
    {
        return Err(rejected(
            "symbolic links and submodules are not patched".into(),
        ));
    }
    let changes = match file.operation() {
        FileOperation::Create(name) | FileOperation::Delete(name) => Some(name.to_string()),
        FileOperation::Modify { modified, .. } => Some(modified.to_string()),
        FileOperation::Rename { .. } | FileOperation::Copy { .. } => None,
    };
    let op = match file.operation() {
        FileOperation::Create(_) => Op::Create,
        FileOperation::Delete(_) => Op::Delete,
        FileOperation::Modify { .. } => Op::Modify,
        FileOperation::Rename { .. } | FileOperation::Copy { .. } => {
            return Err(rejected("renames and copies are not patched".into()));
        }
    };
    let patch = match file.into_patch() {
        PatchKind::Text(patch) => patch,
        PatchKind::Binary(_) => return Err(rejected("binary patches are not applied".into())),
    };
    if patch.hunks().is_empty() {
        return Err(rejected("the diff has no hunks".into()));
    }
    Ok(Edit { op, patch, changes })
}

/// Refuse a diff for another file than `target`: the file it says it changes (`name`, the one
/// after `+++`, or after `---` for a deletion), as written or without git's `a/` or `b/`, and
/// the target must be one the other's last components.
fn names_the_target(name: Option<&str>, target: &Path) -> Result<()> {
    let Some(name) = name else {
        return Ok(());
    };
    // A diff is text: a name that is not UTF-8 is written in it as its lossy form.
    let target_text = target.to_string_lossy();
    let wanted: Vec<&[u8]> = target_text
        .as_bytes()
        .split(|&b| b == b'/')
        .filter(|part| !part.is_empty() && *part != b".")
        .collect();
    let named: Vec<&[u8]> = name
        .as_bytes()
        .split(|&b| b == b'/')
        .filter(|part| !part.is_empty() && *part != b".")
        .collect();
    let unprefixed = match named.split_first() {
        Some((first, rest)) if !rest.is_empty() && matches!(*first, b"a" | b"b") => rest,
        _ => &named[..],
    };
    let names_it = [&named[..], unprefixed]
        .into_iter()
        .any(|n| !n.is_empty() && (n.ends_with(&wanted) || wanted.ends_with(n)));
    if !names_it {
        return Err(rejected(format!(
            "the diff is for {}, not for {}: a patch changes only the file it is given",
            Shown::text(name),
            Shown::path(target)
        )));
    }
    Ok(())
}

/// The target's directory (relative to the grant) and its name.
fn split_target(file: &Path) -> Result<(RelPath<'_>, Name<'_>)> {
    let bytes = RelPath::without_parents(file)?
        .as_path()
        .as_os_str()
        .as_encoded_bytes();
    match (file.parent(), file.file_name()) {
        (Some(parent), Some(name)) if !bytes.ends_with(b"/") => {
            Ok((RelPath::without_parents(parent)?, Name::new(name)?))
        }
        _ => Err(Error::NotRegularFile {
            path: Shown::path(file),
            kind: "a directory",
        }),
    }
}

struct Current {
    text: String,
    mode: u32,
}

/// The target's content and mode, or `None` when it does not exist.
fn read_target(dir: &Anchor, name: Name<'_>, shown: &Path) -> Result<Option<Current>> {
    let fd = match dir.open(
        name.as_rel(),
        OFlags::RDONLY | OFlags::NONBLOCK,
        Mode::empty(),
        Symlinks::Deny,
    ) {
        Ok(fd) => fd,
        Err(Error::NotFound { .. }) => return Ok(None),
        Err(Error::SymlinkEscape { .. }) => {
            return Err(Error::SymlinkEscape {
                path: Shown::path(shown),
                why: "the target is a symbolic link, which is never patched",
            });
        }
        Err(e) => return Err(e),
    };
    let st = crate::beneath::data_file(fd.as_fd(), shown)?;
    if st.st_size as u64 > MAX_FILE_BYTES {
        return Err(Error::TooLarge {
            what: "the file, in bytes,",
            limit: MAX_FILE_BYTES,
        });
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io("read", shown, e))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| rejected(format!("{} is not UTF-8 text", Shown::path(shown))))?;
    Ok(Some(Current {
        text,
        mode: crate::beneath::permissions(&st),
    }))
}

/// Write `text` as `name` in `dir` atomically ([`Anchor::write_file`]), refusing a file that is
/// too large; with [`Publish::New`], a file that appeared meanwhile is a rejection.
fn write_beside(
    dir: &Anchor,
    name: Name<'_>,
    text: &str,
    mode: u32,
    publish: Publish,
) -> Result<()> {
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(Error::TooLarge {
            what: "the file, in bytes,",
            limit: MAX_FILE_BYTES,
        });
    }
    dir.write_file(name, text.as_bytes(), mode, publish)
        .map_err(|e| match e.raw_os_error() {
            Some(errno) if errno == rustix::io::Errno::EXIST.raw_os_error() => {
                rejected("the file appeared while the patch was applied".into())
            }
            _ => e,
        })
}

fn rejected(why: String) -> Error {
    Error::PatchRejected { why }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Apply `diff` to `base` with `budget`; the outcome and the work it cost.
    fn run(base: &str, diff: &str, budget: u64) -> (std::result::Result<String, Miss>, Work) {
        let patch = diffy::Patch::from_str(diff).unwrap();
        let mut work = Work::default();
        let out = apply_hunks(base, patch.hunks(), budget, &mut work);
        (out, work)
    }

    fn line_count(text: &str) -> u64 {
        text.lines().count() as u64
    }

    /// `hunks` hunks of `context` blank-ish context lines each, ending in a line the file lacks.
    fn never_matching(hunks: usize, context: usize) -> String {
        let mut diff = String::from("--- a/f\n+++ b/f\n");
        for h in 0..hunks {
            let at = h * (context + 1) + 1;
            diff.push_str(&format!("@@ -{at},{n} +{at},{n} @@\n", n = context + 1));
            diff.push_str(&" a\n".repeat(context));
            diff.push_str("-zz\n+yy\n");
        }
        diff
    }

    /// The case: a 240 KB diff whose context never matches, against a 320 KB file of
    /// lines that are all alike. A search that tries every position (as the previous
    /// implementation did) compares about 160,000 × 1,000 lines; this one never compares more
    /// lines than the file and the diff have.
    #[test]
    fn a_diff_whose_context_never_matches_costs_work_linear_in_its_size() {
        let file = "a\n".repeat(160_000);
        for diff in [never_matching(80, 999), never_matching(1, 79_999)] {
            assert!(diff.len() >= 240_000, "{}", diff.len());
            let (out, work) = run(&file, &diff, MAX_MATCH_WORK);
            assert_eq!(out, Err(Miss::NoMatch(1)));
            assert!(
                work.lines <= line_count(&file) + line_count(&diff),
                "{work:?} for {} lines of diff",
                line_count(&diff)
            );
            assert_eq!(work.wasted, 0);
        }
    }

    /// Hunks whose lines all occur in the file, once each, in an order the file never has:
    /// each hunk is tried at one position only.
    #[test]
    fn distinct_lines_in_the_wrong_order_cost_one_try() {
        let file: String = (0..40_000).map(|i| format!("line {i}\n")).collect();
        let mut diff = String::from("--- a/f\n+++ b/f\n@@ -1,1000 +1,1000 @@\n");
        for i in (0..999).rev() {
            diff.push_str(&format!(" line {i}\n"));
        }
        diff.push_str("-line 5000\n+x\n");
        let (out, work) = run(&file, &diff, MAX_MATCH_WORK);
        assert_eq!(out, Err(Miss::NoMatch(1)));
        assert!(work.lines <= 1000 + 1000, "{work:?}");
    }

    /// Many hunks that all apply: the work stays about one lookup and one comparison per line
    /// of the hunks, however many hunks there are.
    #[test]
    fn many_hunks_that_apply_cost_work_linear_in_their_size() {
        let old: String = (0..40_000).map(|i| format!("line {}\n", i % 97)).collect();
        let new: String = old
            .lines()
            .enumerate()
            .map(|(i, l)| {
                if i % 20 == 0 {
                    format!("edited {i}\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        let diff = diffy::create_patch(&old, &new).to_string();
        let (out, work) = run(&old, &diff, MAX_MATCH_WORK);
        assert_eq!(out.as_deref(), Ok(new.as_str()));
        assert!(work.lines <= 2 * line_count(&diff), "{work:?}");
    }

    /// A hunk made of lines that occur everywhere and that matches only at the far end: every
    /// position almost matches, so placing it takes about 80,000 × 602 comparisons. That is
    /// refused within the bound; given an unbounded budget, the same hunk applies.
    #[test]
    fn a_hunk_that_needs_more_than_the_bound_is_refused_within_it() {
        let file = format!("{}a\na\n", "a\nb\n".repeat(80_000));
        let diff = format!(
            "--- a/f\n+++ b/f\n@@ -1,602 +1,602 @@\n{} a\n-a\n+c\n",
            " a\n b\n".repeat(300)
        );
        let (out, work) = run(&file, &diff, MAX_MATCH_WORK);
        assert_eq!(out, Err(Miss::TooMuchWork(1)));
        assert!(work.wasted > MAX_MATCH_WORK);
        assert!(work.wasted <= MAX_MATCH_WORK + 602, "{work:?}");
        let (out, work) = run(&file, &diff, u64::MAX);
        assert_eq!(out.unwrap(), format!("{}a\nc\n", "a\nb\n".repeat(80_000)));
        assert!(
            work.wasted > MAX_MATCH_WORK,
            "the bound was needed: {work:?}"
        );
    }

    /// The nearest position wins, the earlier one on a tie, and never one above the previous
    /// hunk.
    #[test]
    fn the_nearest_position_below_the_previous_hunk_wins() {
        let base = "x\nk\nx\nk\nx\n";
        // The header says line 3 (index 2): the `k`s at 1 and 3 are equally near; 1 wins.
        let (out, _) = run(base, "--- a/f\n+++ b/f\n@@ -3 +3 @@\n-k\n+K\n", u64::MAX);
        assert_eq!(out.unwrap(), "x\nK\nx\nk\nx\n");
        // The second hunk's nearest matches are equally far above and below; the one above
        // lies above the first hunk, so the one below wins (`diffy::apply` took the one above,
        // putting the file's lines out of order).
        let base = "k\na\nb\nc\nd\ne\nk\n";
        let two = "--- a/f\n+++ b/f\n@@ -2 +2 @@\n-a\n+A\n@@ -4 +4 @@\n-k\n+K\n";
        assert_eq!(run(base, two, u64::MAX).0.unwrap(), "k\nA\nb\nc\nd\ne\nK\n");
        let patch = diffy::Patch::from_str(two).unwrap();
        assert_eq!(diffy::apply(base, &patch).unwrap(), "K\nA\nb\nc\nd\ne\nk\n");
        // A hunk of added lines only goes where its header says, clamped to the end...
        let base = "a\nb\nc\nd\n";
        let (out, _) = run(base, "--- a/f\n+++ b/f\n@@ -9,0 +10 @@\n+e\n", u64::MAX);
        assert_eq!(out.unwrap(), "a\nb\nc\nd\ne\n");
        // ... and never above the lines of the hunk before it, found lower than it said.
        let above = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-c\n+C\n@@ -2,0 +3 @@\n+z\n";
        assert_eq!(run(base, above, u64::MAX).0, Err(Miss::OutOfOrder(2)));
    }

    #[test]
    fn a_last_line_without_newline_is_its_own_line() {
        let (out, _) = run(
            "a\nb",
            "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n",
            u64::MAX,
        );
        assert_eq!(out.unwrap(), "a\nb\n");
        // `b` with a newline is another line than `b` without one.
        let (out, _) = run(
            "a\nb\n",
            "--- a/f\n+++ b/f\n@@ -2 +2 @@\n-b\n\\ No newline at end of file\n+c\n",
            u64::MAX,
        );
        assert_eq!(out, Err(Miss::NoMatch(1)));
        assert_eq!(
            run("", "--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+n\n", 0)
                .0
                .unwrap(),
            "n\n"
        );
    }

    proptest! {
        /// A diff made from two texts turns the first into the second, also when the file has
        /// gained lines above and below since, and it agrees with `diffy::apply`.
        #[test]
        fn a_diff_applies_to_its_own_text_at_any_offset(
            old in proptest::collection::vec(0u8..6, 0..60),
            new in proptest::collection::vec(0u8..6, 0..60),
            above in 0usize..5,
            below in 0usize..5,
        ) {
            let text = |v: &[u8]| -> String { v.iter().map(|b| format!("l{b}\n")).collect() };
            let (old, new) = (text(&old), text(&new));
            let diff = diffy::create_patch(&old, &new);
            prop_assume!(!diff.hunks().is_empty());
            // A hunk with no old lines has nothing to find; its header alone places it.
            prop_assume!(!old.is_empty() || above == 0);
            let (head, tail) = ("head\n".repeat(above), "tail\n".repeat(below));
            let base = format!("{head}{old}{tail}");
            let mut work = Work::default();
            let out = apply_hunks(&base, diff.hunks(), MAX_MATCH_WORK, &mut work);
            let want = format!("{head}{new}{tail}");
            prop_assert_eq!(out.as_deref(), Ok(want.as_str()));
            prop_assert_eq!(diffy::apply(&base, &diff).unwrap(), want);
        }
    }
}
