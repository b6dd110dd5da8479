//! What a root gateway's commands may not see: the files and directories under `/etc` that
//! others may not read, found by a search of the tree and covered in the sandbox by empty
//! nodes. A command of a gateway running as root is root in its sandbox, and owner
//! permissions admit root without a capability.
//!
//! The search is made again whenever what it found may have changed (ADR 0025): a process
//! keeps what it found only while an `inotify` watch of every directory searched says nothing
//! in them was made, removed, moved or changed mode since, and for at most [`KEPT_FOR`]. A
//! process's first search is not watched (the CLI runs one command a process and pays for no
//! watch); its second is, and is kept.

use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::fs::{FileType, Stat};

use crate::beneath::{Anchor, Symlinks, TreeWatch};
use crate::error::{Code, Error, Result};
use crate::input::{Name, RelPath};

/// What is covered: `(path, is a directory)`.
pub(super) type Masked = Arc<[(PathBuf, bool)]>;

/// Where the system keeps what only root may read (`/etc/shadow`, `/etc/ssl/private`…). The
/// rest of the system set holds programs and libraries meant for every user.
pub(super) const MASKED_HIERARCHY: &str = "/etc";

/// How deep the search looks; a directory at this depth is covered whole.
const MASK_DEPTH: usize = 8;

/// How many entries the search looks at, at most; past it, each entry not looked at is
/// covered whole.
const MASK_ENTRIES: usize = 20_000;

/// What a search covers: the one question it asks of each directory and file it looks at.
pub(super) trait Judge {
    /// Whether the directory at `rel` (below the top; empty for the top), whose status is
    /// `st`, is covered whole (and not searched).
    fn dir(&self, rel: &Path, st: &Stat) -> bool;
    /// Whether the regular file `name` of `dir`, at `rel`, whose status is `st`, is covered.
    fn file(&self, rel: &Path, st: &Stat, dir: &Anchor, name: Name<'_>) -> bool;
    /// Whether a regular file at `rel` may be covered at all: when not, its status is not
    /// even read.
    fn may_cover_file(&self, _rel: &Path) -> bool {
        true
    }
}

/// What others may not read ([`current`]): a directory without `o+rx`, a file without `o+r`.
struct OwnerOnly;

impl Judge for OwnerOnly {
    fn dir(&self, _: &Path, st: &Stat) -> bool {
        others(st) & 0o5 != 0o5
    }

    fn file(&self, _: &Path, st: &Stat, _: &Anchor, _: Name<'_>) -> bool {
        others(st) & 0o4 == 0
    }
}

/// The longest a search is kept, however quiet its watch: what `inotify` cannot see (a mode
/// changed through a hard link outside the tree, a mount over a path in it) waits no longer.
const KEPT_FOR: Duration = Duration::from_secs(60);

/// What [`MASKED_HIERARCHY`] is in the system set the sandbox shows.
pub(super) enum Top<'a> {
    /// A directory: the set's own descriptor of it.
    Dir(BorrowedFd<'a>),
    /// A symbolic link (to a directory the sandbox may show through another path).
    Link,
    /// Nothing: there is nothing to cover.
    Absent,
}

/// What the commands of this process may not see, now: nothing unless the process runs as
/// root.
///
/// # Errors
///
/// `sandbox_unavailable` as root when [`MASKED_HIERARCHY`] is a symbolic link: what it leads
/// to could be shown through another path of the system set, uncovered.
pub(super) fn current(top: Top<'_>) -> Result<Masked> {
    static ROOT_ONLY: Masks = Masks::of(MASKED_HIERARCHY, KEPT_FOR);
    static NOTHING: std::sync::OnceLock<Masked> = std::sync::OnceLock::new();
    let nothing = || Arc::clone(NOTHING.get_or_init(|| Arc::from(Vec::new())));
    if !rustix::process::geteuid().is_root() {
        return Ok(nothing());
    }
    match top {
        Top::Dir(top) => Ok(ROOT_ONLY.current(top)),
        Top::Absent => Ok(nothing()),
        Top::Link => Err(Error::SandboxUnavailable {
            why: format!(
                "as root, a command would see what only root may read under {MASKED_HIERARCHY}, \
                 and {MASKED_HIERARCHY} is a symbolic link here, whose target cannot be covered; \
                 run the gateway as an ordinary user"
            ),
        }),
    }
}

/// The owner-only part of one tree, kept while a watch says it did not change.
struct Masks {
    /// The tree's path, as the sandbox shows it: what the covers are mounted on.
    top: &'static str,
    /// The longest a search is kept ([`KEPT_FOR`]).
    kept_for: Duration,
    found: Mutex<Option<Found>>,
}

/// One search: what it found, the watch of what it read (none for a process's first, or for
/// one an error cut short), and when it was made.
struct Found {
    masked: Masked,
    watch: Option<TreeWatch>,
    at: Instant,
}

impl Masks {
    const fn of(top: &'static str, kept_for: Duration) -> Self {
        Self {
            top,
            kept_for,
            found: Mutex::new(None),
        }
    }

    /// What the last search found, if its watch says nothing changed since (and it is not
    /// older than `kept_for`); else what a new search of `dir` finds, watched unless it is
    /// this process's first.
    fn current(&self, dir: BorrowedFd<'_>) -> Masked {
        let mut found = crate::sync::lock(&self.found);
        kept_or_searched(&mut found, (self.kept_for, TreeWatch::new), |watch| {
            Search::of(
                &OwnerOnly,
                dir,
                Path::new(self.top),
                (MASK_DEPTH, MASK_ENTRIES),
                watch,
            )
        })
    }
}

/// What `found` kept, if its watch says nothing changed since (and it is not older than
/// `kept_for`); else what `search` finds now, watched unless it is the first search here.
fn kept_or_searched<'j>(
    found: &mut Option<Found>,
    (kept_for, watch): (Duration, fn() -> Option<TreeWatch>),
    search: impl FnOnce(Option<TreeWatch>) -> Search<'j>,
) -> Masked {
    if let Some(kept) = found.as_ref()
        && kept.at.elapsed() < kept_for
        && kept.watch.as_ref().is_some_and(|w| !w.changed())
    {
        return Arc::clone(&kept.masked);
    }
    let watch = if found.is_some() { watch() } else { None };
    let search = search(watch);
    let watch = search.watch.filter(|_| !search.cut_short);
    // The same covers as before keep the layouts made with them.
    let masked = match found.take() {
        Some(kept) if *kept.masked == *search.out => kept.masked,
        _ => search.out.into(),
    };
    *found = Some(Found {
        masked: Arc::clone(&masked),
        watch,
        at: Instant::now(),
    });
    masked
}

/// How deep the search of a grant for its hidden paths looks (a directory this deep is
/// covered whole).
const HIDDEN_DEPTH: usize = 32;

/// How many entries the search of one grant looks at, at most (past it, what is not looked at
/// is covered whole).
const HIDDEN_ENTRIES: usize = 200_000;

/// What a grant hides ([`crate::hidden`]): a hidden directory whole; a hidden file, or one a
/// row hides for what it holds when it holds it (or cannot be read to tell). Paths are judged
/// whole, the grant's own names included (`.kube/config` in a grant of `~/.kube`).
struct Secrets<'h> {
    hidden: &'h crate::hidden::Hidden,
    top: &'h Path,
    /// Whether the folder itself lies in a hidden directory (then any name may be hidden).
    inside_hidden: bool,
}

impl Judge for Secrets<'_> {
    fn may_cover_file(&self, rel: &Path) -> bool {
        let name = rel.file_name().map_or(&[][..], |n| n.as_encoded_bytes());
        (self.inside_hidden || self.hidden.may_hide_file_named(name))
            && self
                .hidden
                .hides_below(self.top, rel, crate::hidden::Kind::Other)
                .is_some()
    }

    fn dir(&self, rel: &Path, _: &Stat) -> bool {
        !rel.as_os_str().is_empty()
            && self
                .hidden
                .hides_below(self.top, rel, crate::hidden::Kind::Dir)
                .is_some()
    }

    fn file(&self, rel: &Path, _: &Stat, dir: &Anchor, name: Name<'_>) -> bool {
        let hidden = self
            .hidden
            .hides_below(self.top, rel, crate::hidden::Kind::Other);
        let Some(hidden) = hidden else {
            return false;
        };
        if !hidden.needs_content() {
            return true;
        }
        let opened = dir.open_own_file(name, rustix::fs::OFlags::RDONLY, rustix::fs::Mode::empty());
        match opened {
            Ok(crate::beneath::OwnFile::Open(fd)) => hidden.holds(std::os::fd::AsFd::as_fd(&fd)),
            _ => true,
        }
    }
}

/// The hidden paths (`hidden`) of the grant whose folder is `folder`, at `path`, that are there
/// now, each `(path, is a directory)`: what the last search of it found while a watch says
/// nothing in it changed (and for at most [`KEPT_FOR`]), else a new search.
pub(super) fn hidden_in(
    folder: BorrowedFd<'_>,
    path: &Path,
    hidden: &crate::hidden::Hidden,
) -> Result<Masked> {
    static FOUND: Mutex<Vec<(HiddenKey, Option<Found>)>> = Mutex::new(Vec::new());
    // A grant that is itself hidden (`~/.ssh`, or a folder inside `~/.aws`), with nothing
    // shown in it, is covered whole.
    if hidden.hides_whole(path) {
        return Ok(Arc::from(vec![(path.to_path_buf(), true)]));
    }
    let st = rustix::fs::fstat(folder).map_err(|e| Error::io("fstat", path, e))?;
    let key = (
        crate::beneath::stat_identity(&st),
        path.to_path_buf(),
        hidden.patterns(),
        hidden.unhidden().to_vec(),
    );
    let mut all = crate::sync::lock(&FOUND);
    let at = match all.iter().position(|(k, _)| *k == key) {
        Some(at) => at,
        None => {
            // The grants of one process are few; past that, the oldest search is forgotten.
            if all.len() >= KEPT_GRANTS {
                all.remove(0);
            }
            all.push((key, None));
            all.len() - 1
        }
    };
    let judge = Secrets {
        hidden,
        top: path,
        inside_hidden: crate::hidden::Hidden::default()
            .hides(path, crate::hidden::Kind::Dir)
            .is_some(),
    };
    let watch = (
        KEPT_FOR,
        TreeWatch::seeing_writes as fn() -> Option<TreeWatch>,
    );
    Ok(kept_or_searched(&mut all[at].1, watch, |watch| {
        Search::of(&judge, folder, path, (HIDDEN_DEPTH, HIDDEN_ENTRIES), watch)
    }))
}

/// The most grants whose search a process keeps.
const KEPT_GRANTS: usize = 64;

/// A grant's folder (its identity and path) and what it hides.
type HiddenKey = ((u64, u64), PathBuf, Vec<String>, Vec<String>);

/// A search of a tree for what others may not read: files without `o+r`, directories without
/// `o+rx` (not searched further). Those are the owner's — root's — alone, and a command of a
/// gateway running as root would own them.
///
/// It fails closed: what it cannot look at is covered whole — a directory it cannot open, list
/// or finish (in place of what was found under it), an entry it cannot `lstat` (other than one
/// removed meanwhile), a directory [`MASK_DEPTH`] deep, every entry past the [`MASK_ENTRIES`]
/// budget. What is never seen is never left readable.
///
/// Only files and directories are `lstat`ed: an entry the directory says is anything else (a
/// symbolic link above all, most of `/etc` on a Debian system) is neither covered nor
/// followed. The search goes depth first and holds one directory open per level: a process
/// that opens more descriptors than its table holds while other threads run waits for the
/// kernel to grow it (an RCU grace period, milliseconds).
struct Search<'j> {
    /// What it covers.
    judge: &'j dyn Judge,
    /// The top's path: what each path is judged relative to.
    top: PathBuf,
    /// How deep it looks; a directory this deep is covered whole.
    depth: usize,
    /// What is covered so far.
    out: Vec<(PathBuf, bool)>,
    /// Entries it may still look at.
    budget: usize,
    /// Each directory is added to it before it is read.
    watch: Option<TreeWatch>,
    /// An error made it cover what it could not look at: right for this command, but not to
    /// be kept (the next command searches again).
    cut_short: bool,
    /// The budget ran out: what was not looked at is covered.
    over_budget: bool,
}

impl<'j> Search<'j> {
    /// A search of the tree at `dir` (the descriptor of its top, at `path`) for what `judge`
    /// covers, no deeper than `depth`, looking at no more than `budget` entries, each
    /// directory added to `watch`.
    fn of(
        judge: &'j dyn Judge,
        dir: BorrowedFd<'_>,
        path: &Path,
        (depth, budget): (usize, usize),
        watch: Option<TreeWatch>,
    ) -> Self {
        let mut search = Self {
            judge,
            top: path.to_path_buf(),
            depth,
            out: Vec::new(),
            budget,
            watch,
            cut_short: false,
            over_budget: false,
        };
        search.tree(dir, path);
        if search.over_budget {
            tracing::warn!(
                entries = budget,
                path = %path.display(),
                "a search for what commands may not see stopped at its budget; what it did not \
                 look at is covered"
            );
        }
        search
    }
}

impl Search<'_> {
    /// The path of `child` below the top.
    fn rel<'p>(&self, child: &'p Path) -> &'p Path {
        child.strip_prefix(&self.top).unwrap_or(child)
    }

    /// Search the directory `dir` (the descriptor of the tree's top, at `path`).
    fn tree(&mut self, dir: BorrowedFd<'_>, path: &Path) {
        let opened = dir
            .try_clone_to_owned()
            .map_err(|e| crate::error::Error::io("dup", path, e))
            .and_then(|fd| Anchor::new(fd).open_dir(RelPath::here(), Symlinks::Deny));
        let finished = match opened {
            Ok(top) => {
                // Its own mode is one of the things watched.
                if let Some(watch) = self.watch.as_mut() {
                    watch.add(&top);
                }
                match top.stat() {
                    Ok(st) if self.judge.dir(Path::new(""), &st) => false,
                    Ok(_) => {
                        let mark = self.out.len();
                        let finished = self.dir(top, path, 0);
                        if !finished {
                            self.out.truncate(mark);
                        }
                        finished
                    }
                    Err(_) => self.cut(),
                }
            }
            Err(_) => self.cut(),
        };
        if !finished {
            self.out.push((path.to_path_buf(), true));
        }
    }

    /// Search the directory `anchor` (at `path`, `depth` below the top; opened for this search
    /// alone, so listed through its own descriptor). Whether it was finished: when not, the
    /// caller covers `path` whole.
    fn dir(&mut self, mut anchor: Anchor, path: &Path, depth: usize) -> bool {
        if let Some(watch) = self.watch.as_mut() {
            watch.add(&anchor);
        }
        let mut names = Vec::new();
        let listed = anchor.each_name_unshared(|name, kind| {
            if matches!(
                kind,
                None | Some(FileType::RegularFile | FileType::Directory)
            ) {
                names.push((name.to_owned(), kind));
            }
        });
        if listed.is_err() {
            return self.cut();
        }
        for (name, kind) in &names {
            // A name the directory listed is always one name.
            let Ok(name) = Name::new(name) else {
                return self.cut();
            };
            let child = path.join(name.as_os_str());
            let Some(left) = self.budget.checked_sub(1) else {
                self.past_budget(&anchor, name, *kind, child);
                continue;
            };
            self.budget = left;
            if *kind == Some(FileType::RegularFile) && !self.judge.may_cover_file(self.rel(&child))
            {
                continue;
            }
            match anchor.stat_entry(name) {
                Ok(st) => self.entry(&anchor, name, &st, child, depth),
                // Removed since it was listed: nothing to cover.
                Err(e) if e.code() == Code::NotFound => {}
                Err(_) => {
                    self.cut();
                    self.out.push((child, *kind == Some(FileType::Directory)));
                }
            }
        }
        true
    }

    /// Look at the entry `name` of `anchor` (at `child`), whose `lstat` is `st`.
    fn entry(&mut self, anchor: &Anchor, name: Name<'_>, st: &Stat, child: PathBuf, depth: usize) {
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory if self.judge.dir(self.rel(&child), st) => {
                self.out.push((child, true));
            }
            FileType::Directory => {
                let mark = self.out.len();
                let finished = depth + 1 < self.depth && self.sub(anchor, name, st, &child, depth);
                if !finished {
                    self.out.truncate(mark);
                    self.out.push((child, true));
                }
            }
            FileType::RegularFile if self.judge.file(self.rel(&child), st, anchor, name) => {
                self.out.push((child, false));
            }
            _ => {}
        }
    }

    /// Search the directory `name` of `anchor`, the one its `lstat` `st` saw. Whether it was
    /// finished.
    fn sub(
        &mut self,
        anchor: &Anchor,
        name: Name<'_>,
        st: &Stat,
        child: &Path,
        depth: usize,
    ) -> bool {
        match anchor.open_dir(name.as_rel(), Symlinks::Deny) {
            // The directory the `lstat` saw, not one put in its place since, and still
            // searchable by others (its mode as opened, not as it was).
            Ok(sub) => match sub.stat() {
                Ok(now) if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) => self.cut(),
                Ok(now) if self.judge.dir(self.rel(child), &now) => false,
                Ok(_) => self.dir(sub, child, depth + 1),
                Err(_) => self.cut(),
            },
            // Removed, or replaced since its `lstat`: look at what is there now, once.
            Err(_) => match anchor.stat_entry(name) {
                Err(e) if e.code() == Code::NotFound => true,
                Ok(now) if FileType::from_raw_mode(now.st_mode) != FileType::Directory => {
                    self.entry(anchor, name, &now, child.to_path_buf(), depth);
                    true
                }
                _ => self.cut(),
            },
        }
    }

    /// Cover `name` of `anchor` (at `child`), which the budget leaves unlooked at, by its
    /// kind (a directory whole, a file as a file): beyond the budget only its kind is learnt.
    fn past_budget(
        &mut self,
        anchor: &Anchor,
        name: Name<'_>,
        kind: Option<FileType>,
        child: PathBuf,
    ) {
        let kind = kind.or_else(|| {
            anchor
                .stat_entry(name)
                .ok()
                .map(|st| FileType::from_raw_mode(st.st_mode))
        });
        match kind {
            Some(FileType::Directory) => self.out.push((child, true)),
            Some(FileType::RegularFile) => self.out.push((child, false)),
            // Not even its kind could be learnt: covered as a file, and not kept.
            None => {
                self.cut();
                self.out.push((child, false));
            }
            Some(_) => {}
        }
        self.over_budget = true;
    }

    /// An error stopped a part of the search: that part is covered whole, and the search is
    /// not kept. Always `false` (the part was not finished).
    fn cut(&mut self) -> bool {
        self.cut_short = true;
        false
    }
}

/// The permission bits `st` gives others.
fn others(st: &Stat) -> u32 {
    st.st_mode & 0o7
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A tree of the test's own, its top searchable by others as `/etc` is.
    fn tree() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        set(tmp.path(), 0o755);
        tmp
    }

    fn set(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A search of `top` with a budget of `budget` entries and no watch.
    fn searched(top: &Path, budget: usize) -> Search<'static> {
        let dir = std::fs::File::open(top).unwrap();
        Search::of(&OwnerOnly, dir.as_fd(), top, (MASK_DEPTH, budget), None)
    }

    /// The search finds every file others may not read and every directory others may not
    /// search (and does not go into it), however many reads of a directory its names take;
    /// it follows no symbolic link.
    #[test]
    fn the_owner_only_search_finds_what_others_may_not_read_in_large_directories_too() {
        use std::os::unix::fs::symlink;
        let tmp = tree();
        let top = tmp.path();
        // A directory whose names take many reads of 8 KiB, the secret ones among the last.
        let wide = top.join("wide");
        std::fs::create_dir(&wide).unwrap();
        let long = "n".repeat(200);
        for i in 0..400 {
            std::fs::write(wide.join(format!("{long}-{i:03}")), "x").unwrap();
        }
        std::fs::write(wide.join("zz-secret"), "x").unwrap();
        set(&wide.join("zz-secret"), 0o640);
        set(&wide.join(format!("{long}-399")), 0o600);
        // A closed directory: listed, not searched.
        std::fs::create_dir_all(top.join("private/inner")).unwrap();
        std::fs::write(top.join("private/inner/key"), "x").unwrap();
        set(&top.join("private"), 0o710);
        // Deep down, open all the way.
        std::fs::create_dir_all(top.join("a/b/c")).unwrap();
        std::fs::write(top.join("a/b/c/token"), "x").unwrap();
        set(&top.join("a/b/c/token"), 0o600);
        std::fs::write(top.join("a/b/open"), "x").unwrap();
        set(&top.join("a/b/open"), 0o644);
        // A link to a secret elsewhere is not followed.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("elsewhere"), "x").unwrap();
        set(&outside.path().join("elsewhere"), 0o600);
        symlink(outside.path(), top.join("link")).unwrap();

        let search = searched(top, MASK_ENTRIES);
        assert!(!search.cut_short && !search.over_budget);
        let mut found = search.out;
        found.sort();
        let mut expected = vec![
            (top.join("a/b/c/token"), false),
            (top.join("private"), true),
            (wide.join(format!("{long}-399")), false),
            (wide.join("zz-secret"), false),
        ];
        expected.sort();
        assert_eq!(found, expected);
    }

    /// What the search does not look at is covered: a directory at the depth limit whole,
    /// every entry past the budget by its kind, a top others may not search whole.
    #[test]
    fn the_owner_only_search_covers_what_it_does_not_look_at() {
        let tmp = tree();
        let top = tmp.path();
        // Open all the way down, one level past the limit, with a secret at the bottom.
        let mut deep = top.to_path_buf();
        for level in 0..=MASK_DEPTH {
            deep.push(format!("d{level}"));
        }
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("secret"), "x").unwrap();
        set(&deep.join("secret"), 0o600);
        let mut at_limit = top.to_path_buf();
        for level in 0..MASK_DEPTH {
            at_limit.push(format!("d{level}"));
        }
        assert_eq!(searched(top, MASK_ENTRIES).out, vec![(at_limit, true)]);

        // A top others may not search: covered whole, unsearched.
        set(top, 0o711);
        assert_eq!(
            searched(top, MASK_ENTRIES).out,
            vec![(top.to_path_buf(), true)]
        );

        // A budget spent part of the way: what was not looked at is covered (whichever order
        // the directory lists its names in), never left out.
        let tmp = tree();
        let top = tmp.path();
        let mut secrets = Vec::new();
        for dir in ["big", "other"] {
            std::fs::create_dir(top.join(dir)).unwrap();
            for i in 0..25 {
                let file = top.join(dir).join(format!("f{i}"));
                std::fs::write(&file, "x").unwrap();
                set(&file, 0o600);
                secrets.push(file);
            }
        }
        let covered = |found: &[(PathBuf, bool)], secret: &Path| {
            found
                .iter()
                .any(|(p, dir)| p == secret || (*dir && secret.starts_with(p)))
        };
        for budget in [0, 1, 10, 26, 30, 51] {
            let search = searched(top, budget);
            assert!(search.over_budget && !search.cut_short, "budget {budget}");
            let found = search.out;
            assert!(
                secrets.iter().all(|s| covered(&found, s)),
                "budget {budget}: {found:?}"
            );
            // The top is never covered, and a directory looked at in full is not covered whole.
            assert!(!found.iter().any(|(p, _)| p == top), "budget {budget}");
            let whole = ["big", "other"]
                .iter()
                .filter(|d| found.contains(&(top.join(d), true)))
                .count();
            let expected = match budget {
                // Neither entered: both covered whole.
                0 => 2,
                // The first entered, the second reached with nothing left.
                1 | 10 | 26 => 1,
                // Both entered.
                _ => 0,
            };
            assert_eq!(whole, expected, "budget {budget}: {found:?}");
            // Nothing is listed under what is hidden whole.
            for (p, _) in &found {
                assert!(
                    !found
                        .iter()
                        .any(|(q, dir)| *dir && q != p && p.starts_with(q)),
                    "budget {budget}: {found:?}"
                );
            }
        }
        // With the budget to finish, each file is listed and nothing is covered whole.
        let search = searched(top, 52);
        assert!(!search.over_budget);
        let mut found = search.out;
        found.sort();
        secrets.sort();
        assert_eq!(
            found,
            secrets.into_iter().map(|s| (s, false)).collect::<Vec<_>>()
        );
    }

    /// A file made owner-only after a search is covered for the next command, and one opened
    /// up again is no longer; what did not change is not searched again once watched.
    #[test]
    fn what_is_found_is_kept_only_while_nothing_changed() {
        let tmp = tree();
        let top: &'static str = Box::leak(tmp.path().to_str().unwrap().to_owned().into_boxed_str());
        let dir = std::fs::File::open(tmp.path()).unwrap();
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        let file = tmp.path().join("sub/key");
        std::fs::write(&file, "x").unwrap();
        set(&file, 0o644);
        let masks = Masks::of(top, KEPT_FOR);
        // When the kept search was made, and whether it is watched.
        let made = || {
            let found = crate::sync::lock(&masks.found);
            let found = found.as_ref().unwrap();
            (found.at, found.watch.is_some())
        };
        let current = || masks.current(dir.as_fd());
        // The first search is not watched: the second is made again, and watched.
        assert!(current().is_empty());
        let (first, watched) = made();
        assert!(!watched);
        assert!(current().is_empty());
        let (second, watched) = made();
        assert!(second > first && watched);
        // Nothing changed: kept.
        let kept = current();
        assert_eq!(made().0, second);
        // Made owner-only: found at once.
        set(&file, 0o600);
        assert_eq!(&*current(), &[(file.clone(), false)]);
        // Opened up again: no longer covered.
        set(&file, 0o644);
        let open = current();
        assert!(open.is_empty());
        // A change that changes no cover: searched again, and the same value handed out (the
        // layouts made with it are kept).
        let before = made().0;
        set(&file, 0o644);
        assert!(Arc::ptr_eq(&current(), &open));
        assert!(made().0 > before);
        drop(kept);
        // A new owner-only file, deeper down.
        std::fs::create_dir(tmp.path().join("sub/deeper")).unwrap();
        current();
        let before = made().0;
        let secret = tmp.path().join("sub/deeper/secret");
        std::fs::write(&secret, "x").unwrap();
        set(&secret, 0o600);
        assert_eq!(&*current(), &[(secret, false)]);
        assert!(made().0 > before);
    }

    /// A watched search is kept no longer than its time, however quiet its watch.
    #[test]
    fn a_kept_search_expires() {
        let tmp = tree();
        let top: &'static str = Box::leak(tmp.path().to_str().unwrap().to_owned().into_boxed_str());
        let dir = std::fs::File::open(tmp.path()).unwrap();
        let masks = Masks::of(top, Duration::ZERO);
        let at = || crate::sync::lock(&masks.found).as_ref().unwrap().at;
        let mut last = None;
        for _ in 0..4 {
            masks.current(dir.as_fd());
            assert!(Some(at()) > last, "kept past its time");
            last = Some(at());
        }
    }

    /// A search an error cut short covers what it could not read and is not kept: the next
    /// command searches again.
    #[test]
    fn a_search_cut_short_is_not_kept() {
        let tmp = tree();
        let top: &'static str = Box::leak(tmp.path().to_str().unwrap().to_owned().into_boxed_str());
        // A descriptor that is not a directory's: the top cannot be opened as one.
        let not_a_dir = tempfile::tempfile().unwrap();
        let masks = Masks::of(top, KEPT_FOR);
        for _ in 0..3 {
            let before = crate::sync::lock(&masks.found).as_ref().map(|f| f.at);
            assert_eq!(
                &*masks.current(not_a_dir.as_fd()),
                &[(tmp.path().to_path_buf(), true)]
            );
            let found = crate::sync::lock(&masks.found);
            let found = found.as_ref().unwrap();
            assert!(found.watch.is_none(), "kept after an error");
            assert!(Some(found.at) > before);
        }
    }
}
