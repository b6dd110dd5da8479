//! What a root gateway's commands may not see: the files and directories under `/etc` that
//! others may not read, found by a search of the tree and covered in the sandbox by empty
//! nodes. A command of a gateway running as root is root in its sandbox, and owner
//! permissions admit root without a capability.
//!
//! The search is made again whenever what it found may have changed: a process keeps what it
//! found only while an `inotify` watch of every directory searched says nothing in them was
//! made, removed, moved or changed mode since. A process's first search is not watched (the
//! CLI runs one command a process and pays for no watch); its second is, and is kept.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustix::fs::FileType;

use crate::beneath::{Ambient, Anchor, Symlinks, TreeWatch};
use crate::error::Code;
use crate::input::Name;

/// What is covered: `(path, is a directory)`.
pub(super) type Masked = Arc<[(PathBuf, bool)]>;

/// What the commands of this process may not see, now: nothing unless the process runs as
/// root.
pub(super) fn current() -> Masked {
    static ROOT_ONLY: Masks = Masks::of(MASKED_HIERARCHY);
    static NOTHING: std::sync::OnceLock<Masked> = std::sync::OnceLock::new();
    if rustix::process::geteuid().is_root() {
        ROOT_ONLY.current()
    } else {
        Arc::clone(NOTHING.get_or_init(|| Arc::from(Vec::new())))
    }
}

/// The owner-only part of one tree, kept while a watch says it did not change.
struct Masks {
    top: &'static str,
    found: Mutex<Option<Found>>,
}

/// One search: what it found, and the watch of what it read (none for a process's first).
struct Found {
    masked: Masked,
    watch: Option<TreeWatch>,
}

impl Masks {
    const fn of(top: &'static str) -> Self {
        Self {
            top,
            found: Mutex::new(None),
        }
    }

    /// What the last search found, if a watch says nothing changed since; else what a new
    /// search finds (watched, unless it is this process's first).
    fn current(&self) -> Masked {
        let mut found = crate::sync::lock(&self.found);
        if let Some(kept) = found.as_ref()
            && kept.watch.as_ref().is_some_and(|w| !w.changed())
        {
            return Arc::clone(&kept.masked);
        }
        let mut watch = if found.is_some() {
            TreeWatch::new()
        } else {
            None
        };
        let mut masked = Vec::new();
        owner_only(Path::new(self.top), &mut masked, watch.as_mut());
        let masked: Masked = masked.into();
        *found = Some(Found {
            masked: Arc::clone(&masked),
            watch,
        });
        masked
    }
}

/// Where the system keeps what only root may read (`/etc/shadow`, `/etc/ssl/private`…). The
/// rest of the system set holds programs and libraries meant for every user.
const MASKED_HIERARCHY: &str = "/etc";

/// How deep [`owner_only`] looks; a directory at this depth is hidden whole.
const MASK_DEPTH: usize = 8;

/// How many entries [`owner_only`] looks at, at most; the directories it could not finish are
/// hidden whole.
const MASK_ENTRIES: usize = 20_000;

/// Add to `out` what in `dir` (searched [`MASK_DEPTH`] deep) others may not read: files
/// without `o+r`, directories without `o+rx` (not searched further). Those are the owner's —
/// root's — alone, and a command of a gateway running as root would own them.
///
/// The search fails closed: a directory it cannot finish — one it cannot open or list, an
/// entry it cannot `lstat` (other than one removed meanwhile), a directory [`MASK_DEPTH`] deep,
/// the [`MASK_ENTRIES`] budget spent — is hidden whole, in place of what was found under it.
/// What is never seen is never left readable; `dir` itself is hidden when it cannot be
/// finished.
///
/// Only files and directories are `lstat`ed: an entry the directory says is anything else (a
/// symbolic link above all, most of `/etc` on a Debian system) is neither masked nor followed.
/// The search goes depth first and holds one directory open per level: a process that opens
/// more descriptors than its table holds while other threads run waits for the kernel to grow
/// it (an RCU grace period, milliseconds).
///
/// With a `watch`, each directory is added to it before it is read.
fn owner_only(dir: &Path, out: &mut Vec<(PathBuf, bool)>, watch: Option<&mut TreeWatch>) {
    owner_only_within(dir, MASK_ENTRIES, out, watch);
}

/// [`owner_only`] with a budget of `entries`.
fn owner_only_within(
    dir: &Path,
    entries: usize,
    out: &mut Vec<(PathBuf, bool)>,
    watch: Option<&mut TreeWatch>,
) {
    let why = Ambient::because("the system set, searched for what only root may read");
    let anchor = match Anchor::open_ambient(dir, why) {
        Ok(anchor) => anchor,
        // No such directory: nothing there to hide.
        Err(e) if e.code() == Code::NotFound => return,
        Err(_) => {
            out.push((dir.to_path_buf(), true));
            return;
        }
    };
    let mut budget = entries;
    let mark = out.len();
    if !owner_only_in(anchor, dir, 0, &mut budget, out, watch) {
        out.truncate(mark);
        out.push((dir.to_path_buf(), true));
    }
}

/// [`owner_only`] in the directory `anchor` (at `path`, `depth` below the top; opened for this
/// search alone, so listed through its own descriptor), looking at most at `budget` more
/// entries. Whether every entry was looked at: when not, the caller hides `path` whole.
fn owner_only_in(
    mut anchor: Anchor,
    path: &Path,
    depth: usize,
    budget: &mut usize,
    out: &mut Vec<(PathBuf, bool)>,
    mut watch: Option<&mut TreeWatch>,
) -> bool {
    if let Some(watch) = watch.as_deref_mut() {
        watch.add(&anchor);
    }
    let mut names = Vec::new();
    let listed = anchor.each_name_unshared(|name, kind| {
        if matches!(
            kind,
            None | Some(FileType::RegularFile | FileType::Directory)
        ) {
            names.push(name.to_owned());
        }
    });
    if listed.is_err() {
        return false;
    }
    for name in &names {
        let Some(left) = budget.checked_sub(1) else {
            return false;
        };
        *budget = left;
        // A name the directory listed is always one name.
        let Ok(name) = Name::new(name) else {
            return false;
        };
        let stat = match anchor.stat_entry(name) {
            Ok(stat) => stat,
            // Removed since it was listed: nothing to hide.
            Err(e) if e.code() == Code::NotFound => continue,
            Err(_) => return false,
        };
        let others = stat.st_mode & 0o7;
        let child = path.join(name.as_os_str());
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory if others & 0o5 != 0o5 => out.push((child, true)),
            FileType::Directory => {
                let mark = out.len();
                let searched = depth + 1 < MASK_DEPTH
                    && match anchor.open_dir(name.as_rel(), Symlinks::Deny) {
                        Ok(sub) => {
                            owner_only_in(sub, &child, depth + 1, budget, out, watch.as_deref_mut())
                        }
                        // Removed, or replaced by a link or a file, since its `lstat`: what
                        // is there now is this directory's entry, seen as such in the sandbox.
                        Err(e) => {
                            matches!(e.code(), Code::NotFound | Code::SymlinkEscape)
                        }
                    };
                if !searched {
                    out.truncate(mark);
                    out.push((child, true));
                }
            }
            FileType::RegularFile if others & 0o4 == 0 => out.push((child, false)),
            _ => {}
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The search finds every file others may not read and every directory others may not
    /// search (and does not go into it), however many reads of a directory its names take;
    /// it follows no symbolic link.
    #[test]
    fn the_owner_only_search_finds_what_others_may_not_read_in_large_directories_too() {
        use std::os::unix::fs::{PermissionsExt, symlink};
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path();
        let set = |path: &Path, mode: u32| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
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

        let mut found = Vec::new();
        owner_only(top, &mut found, None);
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

    /// What the search cannot finish is hidden whole: a directory at the depth limit, and
    /// every directory still open when the budget runs out (up to the top), in place of what
    /// was found under it.
    #[test]
    fn the_owner_only_search_hides_whole_what_it_cannot_finish() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path();
        // Open all the way down, one level past the limit, with a secret at the bottom.
        let mut deep = top.to_path_buf();
        for level in 0..=MASK_DEPTH {
            deep.push(format!("d{level}"));
        }
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("secret"), "x").unwrap();
        std::fs::set_permissions(deep.join("secret"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        let mut at_limit = top.to_path_buf();
        for level in 0..MASK_DEPTH {
            at_limit.push(format!("d{level}"));
        }
        let mut found = Vec::new();
        owner_only(top, &mut found, None);
        assert_eq!(found, vec![(at_limit, true)]);

        // A budget spent inside `big`: what was not looked at is hidden with the directories
        // left unfinished (whichever order the directory lists them in), never left out.
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path();
        let mut secrets = Vec::new();
        for dir in ["big", "other"] {
            std::fs::create_dir(top.join(dir)).unwrap();
            for i in 0..25 {
                let file = top.join(dir).join(format!("f{i}"));
                std::fs::write(&file, "x").unwrap();
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
                secrets.push(file);
            }
        }
        let covered = |found: &[(PathBuf, bool)], secret: &Path| {
            found
                .iter()
                .any(|(p, dir)| p == secret || (*dir && secret.starts_with(p)))
        };
        for budget in [0, 1, 10, 26, 30] {
            let mut found = Vec::new();
            owner_only_within(top, budget, &mut found, None);
            assert!(
                secrets.iter().all(|s| covered(&found, s)),
                "budget {budget}: {found:?}"
            );
            assert!(found.iter().any(|(_, dir)| *dir), "budget {budget}");
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
        // With the budget to finish, each file is listed and nothing is hidden whole.
        let mut found = Vec::new();
        owner_only_within(top, 52, &mut found, None);
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
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let top: &'static str = Box::leak(tmp.path().to_str().unwrap().to_owned().into_boxed_str());
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        let file = tmp.path().join("sub/key");
        std::fs::write(&file, "x").unwrap();
        let set = |mode: u32| {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        set(0o644);
        let masks = Masks::of(top);
        // The first search is not watched: the second is made again, and watched.
        let first = masks.current();
        assert!(first.is_empty());
        let second = masks.current();
        assert!(!Arc::ptr_eq(&first, &second));
        // Nothing changed: kept.
        let third = masks.current();
        assert!(Arc::ptr_eq(&second, &third));
        // Made owner-only: found at once.
        set(0o600);
        assert_eq!(&*masks.current(), &[(file.clone(), false)]);
        // Opened up again: no longer covered.
        set(0o644);
        assert!(masks.current().is_empty());
        // A new owner-only file, deeper down.
        std::fs::create_dir(tmp.path().join("sub/deeper")).unwrap();
        let kept = masks.current();
        let secret = tmp.path().join("sub/deeper/secret");
        std::fs::write(&secret, "x").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        let now = masks.current();
        assert!(!Arc::ptr_eq(&kept, &now));
        assert_eq!(&*now, &[(secret, false)]);
    }
}
