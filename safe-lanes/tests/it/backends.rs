//! Every escape table on every resolution backend, and the two backends against each other.
//!
//! The library opens most of its anchors itself (a grant's folder by its canonical path, the
//! upload side's allowed roots, the lanes), so a table of grant or patch cases cannot choose a
//! backend by hand. Each table is written once, in the module of its area, against the backend
//! anchors get by default; [`on_each_backend!`] runs it again with this thread's default forced
//! to each backend in turn ([`force_backend`]). The setting is per thread: the tests running
//! beside these on other threads keep [`Backend::Auto`].
//!
//! Every table asserts the exact code of each refusal, so passing on both backends means the
//! same refusal on both. The last test compares the backends directly, without expectations, on
//! every short path over the primitive's tree.
//!
//! macOS has neither `openat2` nor `O_TMPFILE`: there, every anchor walks and every new file is
//! published under a hidden name by an exclusive rename. [`on_the_macos_paths!`] runs the lane
//! and upload cases again with this thread forced onto both ([`force_backend`] and
//! [`force_publishing`]), as `lanes_on_the_walk_backend_with_rename_publish::<area>::<case>`, so
//! the code macOS runs is exercised on every Linux run.

use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};
use safe_lanes::beneath::{
    Anchor, Backend, Publishing, Symlinks, force_backend, force_publishing, identity, publishing,
};
use safe_lanes::input::{AbsPath, RelPath};
use safe_lanes::{Access, Code, Grants, StateRoot};

use crate::util::rel;

/// Test fixtures are opened by their paths.
const FIXTURE: safe_lanes::beneath::Ambient =
    safe_lanes::beneath::Ambient::because("a test fixture");

/// The backends every table runs on.
pub(crate) const BACKENDS: [Backend; 2] = [Backend::Openat2, Backend::Walk];

/// The backend an anchor created now, on this thread, gets (for failure messages).
pub(crate) fn default_backend() -> Backend {
    Anchor::open_ambient(Path::new("/"), FIXTURE)
        .unwrap()
        .backend()
}

/// `area: table;` → a module `area` with one test per backend (`area::openat2`,
/// `area::walk`), each running `table()` with this thread's default backend forced.
macro_rules! on_each_backend {
    ($($area:ident: $table:path;)*) => {$(
        mod $area {
            use safe_lanes::beneath::{Backend, force_backend};

            #[test]
            fn openat2() {
                let _forced = force_backend(Backend::Openat2);
                $table();
            }

            #[test]
            fn walk() {
                let _forced = force_backend(Backend::Walk);
                $table();
            }
        }
    )*};
}

on_each_backend! {
    primitive: crate::beneath::escape_table;
    upload: crate::upload::the_source_table_holds;
    grants: crate::grants::resolution_inside_a_grant_refuses_every_escape;
    patch: crate::patch::every_refusal_leaves_everything_unchanged;
}

/// Run `case` with this thread forced onto the walk and onto `publishing`.
pub(crate) fn on_the_walk_publishing_by(publishing: Publishing, case: fn()) {
    let _walk = force_backend(Backend::Walk);
    let _publishing = force_publishing(publishing);
    case();
}

/// `module, publishing; area: [case, …];` → `module::area::case`, one test per case, each
/// running `crate::area::case` on the walk with `publishing` forced.
macro_rules! on_the_walk_publishing_by {
    ($module:ident, $publishing:ident; $($area:ident: [$($case:ident),* $(,)?];)*) => {
        mod $module {
            $(mod $area {
                $(#[test]
                fn $case() {
                    crate::backends::on_the_walk_publishing_by(
                        safe_lanes::beneath::Publishing::$publishing,
                        crate::$area::$case,
                    );
                })*
            })*
        }
    };
}

// The paths macOS takes: the component walk, and new files published under a hidden name by
// an exclusive rename.
on_the_walk_publishing_by! {
    lanes_on_the_walk_backend_with_rename_publish, Rename;
    download: [
        a_save_lands_in_the_lane_private_and_intact,
        the_same_hint_three_times_gives_three_files,
        a_compressed_tar_archive_is_numbered_before_its_compound_extension,
        sixty_four_threads_saving_one_hint_give_sixty_four_intact_files,
        two_lanes_in_parallel_like_two_processes_never_overwrite,
        planted_links_directories_and_fifos_are_collisions_never_written_through,
        a_failing_reader_leaves_nothing_behind,
        the_size_cap_refuses_and_leaves_nothing_behind,
        a_new_lane_finds_a_free_number_among_many_existing_copies,
        list_shows_regular_files_only_and_prune_removes_old_ones,
        every_save_is_audited,
        stale_hidden_staging_files_are_swept_before_hidden_staging,
        a_stopped_save_leaves_nothing_in_the_lane,
        prune_matches_raw_names_never_their_lossy_form,
        remove_file_if_leaves_a_file_swapped_into_the_name_alone,
    ];
    deposit: [
        the_uploader_runs_in_the_deposit_on_a_private_copy_and_it_is_erased,
        a_failing_uploader_still_leaves_the_deposit_empty,
        an_uploader_killed_by_the_timeout_leaves_the_deposit_empty,
        a_panic_in_the_caller_leaves_the_deposit_empty,
        staging_past_the_cap_is_refused_and_leaves_nothing,
        a_resolved_source_is_staged_as_an_exact_copy,
        stale_staged_entries_are_swept_when_a_deposit_opens,
    ];
    upload: [
        the_source_table_holds,
        hostile_path_shapes_are_refused_before_any_lookup,
        a_fifo_is_refused_at_once,
        the_handle_is_the_file_that_was_checked,
        roots_and_ignored_entries_are_reported,
        the_hard_guard_holds_when_the_allowlist_covers_the_state_root,
        refusals_and_resolutions_are_audited,
    ];
    savers: [
        a_clean_saver_leaves_nothing_and_the_next_lane_does_not_read_the_lane,
        a_dead_savers_entry_makes_the_next_lane_recover_and_is_removed,
        a_live_saver_is_not_taken_for_a_dead_one,
        savers_coming_and_going_in_parallel_never_lose_their_entry,
    ];
    beneath: [escape_table];
    grants: [resolution_inside_a_grant_refuses_every_escape];
    patch: [every_refusal_leaves_everything_unchanged];
}

// Where the filesystem has no exclusive rename, a file is published by `link` + `unlink`
// (a directory cannot be, so the deposit is not run here).
on_the_walk_publishing_by! {
    lanes_on_the_walk_backend_with_link_unlink_publish, RenameByLink;
    download: [
        a_save_lands_in_the_lane_private_and_intact,
        the_same_hint_three_times_gives_three_files,
        a_compressed_tar_archive_is_numbered_before_its_compound_extension,
        sixty_four_threads_saving_one_hint_give_sixty_four_intact_files,
        two_lanes_in_parallel_like_two_processes_never_overwrite,
        planted_links_directories_and_fifos_are_collisions_never_written_through,
        a_failing_reader_leaves_nothing_behind,
        a_new_lane_finds_a_free_number_among_many_existing_copies,
        every_save_is_audited,
        a_stopped_save_leaves_nothing_in_the_lane,
    ];
    savers: [
        a_clean_saver_leaves_nothing_and_the_next_lane_does_not_read_the_lane,
        a_dead_savers_entry_makes_the_next_lane_recover_and_is_removed,
        a_live_saver_is_not_taken_for_a_dead_one,
        savers_coming_and_going_in_parallel_never_lose_their_entry,
    ];
    patch: [every_refusal_leaves_everything_unchanged];
}

/// A reader that, when first read, notes the names in `dir` (what a save in progress has
/// put there), then yields one byte.
struct Peek {
    dir: PathBuf,
    seen: Option<Vec<String>>,
}

impl std::io::Read for Peek {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.seen.is_some() || buf.is_empty() {
            return Ok(0);
        }
        let names = std::fs::read_dir(&self.dir)?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<std::io::Result<Vec<_>>>()?;
        self.seen = Some(names);
        buf[0] = b'x';
        Ok(1)
    }
}

/// What a save opened on this thread had added to the lane while it was being written.
fn names_while_saving(root: &StateRoot) -> Vec<String> {
    let before = crate::util::names(&root.downloads_path());
    let lane = safe_lanes::DownloadLane::open(root).unwrap();
    let mut peek = Peek {
        dir: root.downloads_path(),
        seen: None,
    };
    lane.save("file.txt", &mut peek).unwrap();
    let mut added = peek.seen.unwrap();
    added.retain(|name| !before.contains(name));
    added
}

/// The publishing switch reaches the lanes this thread opens (an unnamed file leaves no name
/// while it is written; a renamed one is a hidden `.partial-*` name), and no other thread.
#[test]
fn a_forced_publishing_reaches_the_lanes_this_thread_opens_only() {
    let tmp = tempfile::tempdir().unwrap();
    let root = StateRoot::open(&tmp.path().join("state")).unwrap();
    assert_eq!(
        publishing(),
        Publishing::Link,
        "Linux links unnamed files by default"
    );
    assert_eq!(names_while_saving(&root), Vec::<String>::new());
    {
        let _rename = force_publishing(Publishing::Rename);
        assert_eq!(publishing(), Publishing::Rename);
        let seen = names_while_saving(&root);
        assert!(
            matches!(seen.as_slice(), [one] if one.starts_with(".partial-")),
            "{seen:?}"
        );
        let elsewhere = std::thread::spawn(publishing).join().unwrap();
        assert_eq!(elsewhere, Publishing::Link, "another thread is not forced");
    }
    assert_eq!(
        publishing(),
        Publishing::Link,
        "the guard restored the default"
    );
}

/// Forced onto the `link` + `unlink` fallback, `rename_new` links and then unlinks: the file
/// ends with its new name and one link, and a directory (which cannot be linked) stays where
/// it was, whereas the exclusive rename moves it.
#[test]
fn the_link_unlink_fallback_leaves_one_name_with_one_link_and_cannot_move_a_directory() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("file"), "content").unwrap();
    std::fs::create_dir(tmp.path().join("dir")).unwrap();
    let name = |n: &'static str| safe_lanes::input::Name::new(n).unwrap();
    {
        let _link = force_publishing(Publishing::RenameByLink);
        let anchor = Anchor::open_ambient(tmp.path(), FIXTURE).unwrap();
        anchor.rename_new(name("file"), name("published")).unwrap();
        let refused = anchor.rename_new(name("dir"), name("moved")).unwrap_err();
        assert_eq!(refused.code(), Code::Io, "{refused}");
        std::fs::write(tmp.path().join("taken"), "other").unwrap();
        let taken = anchor
            .rename_new(name("published"), name("taken"))
            .unwrap_err();
        assert_eq!(
            taken.raw_os_error(),
            Some(rustix::io::Errno::EXIST.raw_os_error())
        );
    }
    let published = std::fs::symlink_metadata(tmp.path().join("published")).unwrap();
    assert_eq!(published.nlink(), 1);
    assert_eq!(std::fs::read(tmp.path().join("taken")).unwrap(), b"other");
    assert_eq!(
        crate::util::names(tmp.path()),
        ["dir", "published", "taken"],
        "no second name is left, nothing replaced"
    );
    let anchor = Anchor::open_ambient(tmp.path(), FIXTURE).unwrap();
    anchor.rename_new(name("dir"), name("moved")).unwrap();
    assert!(
        tmp.path().join("moved").is_dir(),
        "the exclusive rename moves it"
    );
}

/// The switch reaches every anchor the library opens on this thread (so the tables above do
/// run on the backend they are named after), and no other thread.
#[test]
fn a_forced_backend_reaches_the_anchors_the_library_opens_on_this_thread_only() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("folder/sub")).unwrap();
    let folder = tmp.path().join("folder").canonicalize().unwrap();
    assert_eq!(default_backend(), Backend::Auto);
    for backend in BACKENDS {
        let forced = force_backend(backend);
        let anchor = Anchor::open_ambient(tmp.path(), FIXTURE).unwrap();
        assert_eq!(anchor.backend(), backend, "open_ambient");
        assert_eq!(
            Anchor::open_canonical(AbsPath::new(&folder).unwrap())
                .unwrap()
                .backend(),
            backend,
            "open_canonical"
        );
        assert_eq!(
            anchor
                .open_dir(rel("folder/sub"), Symlinks::Deny)
                .unwrap()
                .backend(),
            backend,
            "open_dir keeps its parent's backend"
        );
        let root = StateRoot::open(&tmp.path().join(format!("state-{backend:?}"))).unwrap();
        let grants = Arc::new(Grants::open(&root, None).unwrap());
        grants
            .add("folder", &folder, Access::ReadWrite, "", "test")
            .unwrap();
        let snapshot = grants.session().snapshot().unwrap();
        assert_eq!(
            snapshot.grants[0].folder().unwrap().backend(),
            backend,
            "a grant's folder"
        );
        let elsewhere = std::thread::spawn(default_backend).join().unwrap();
        assert_eq!(elsewhere, Backend::Auto, "another thread is not forced");
        {
            let _inner = force_backend(Backend::Auto);
            assert_eq!(default_backend(), Backend::Auto, "a nested force");
        }
        assert_eq!(default_backend(), backend, "the nested guard restored it");
        drop(forced);
        assert_eq!(default_backend(), Backend::Auto, "the guard restored Auto");
    }
}

/// What one lookup gave: the file it opened, or the refusal.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Opened((u64, u64)),
    Refused(Code),
}

const FLAGS: [OFlags; 3] = [
    OFlags::RDONLY.union(OFlags::NONBLOCK),
    OFlags::RDONLY.union(OFlags::DIRECTORY),
    OFlags::PATH,
];
const POLICIES: [Symlinks; 2] = [Symlinks::Beneath, Symlinks::Deny];

fn lookup(anchor: &Anchor, path: &Path, flags: OFlags, symlinks: Symlinks) -> Outcome {
    match RelPath::new(path).and_then(|p| anchor.open(p, flags, Mode::empty(), symlinks)) {
        Ok(fd) => Outcome::Opened(identity(fd.as_fd()).unwrap()),
        Err(e) => Outcome::Refused(e.code()),
    }
}

/// Every path of up to three components over the names of the primitive's tree (files,
/// directories, links of every kind, `.`, `..`, a missing name), with and without a trailing
/// slash, opened for reading, as a directory and as `O_PATH`, under both link policies: the
/// backends open the same file or give the same refusal.
#[test]
fn the_backends_agree_on_every_short_path() {
    let t = crate::beneath::tree();
    let mut names: Vec<Vec<u8>> = vec![b".".to_vec(), b"..".to_vec(), b"missing".to_vec()];
    for dir in [
        PathBuf::new(),
        PathBuf::from("dir"),
        PathBuf::from("dir/sub"),
    ] {
        for entry in std::fs::read_dir(t.base.join(&dir)).unwrap() {
            let name = entry.unwrap().file_name().as_bytes().to_vec();
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    let mut paths: Vec<Vec<u8>> = names.clone();
    let mut last = names.clone();
    for _ in 1..3 {
        last = last
            .iter()
            .flat_map(|p| names.iter().map(move |n| [&p[..], b"/", n].concat()))
            .collect();
        paths.extend(last.iter().cloned());
    }
    let slashed: Vec<Vec<u8>> = paths.iter().map(|p| [&p[..], b"/"].concat()).collect();
    paths.extend(slashed);

    let anchors = BACKENDS.map(|b| {
        Anchor::open_ambient(&t.base, FIXTURE)
            .unwrap()
            .into_backend(b)
    });
    let (mut opened, mut differ) = (0usize, Vec::new());
    for path in &paths {
        let path = Path::new(std::ffi::OsStr::from_bytes(path));
        for (flags, symlinks) in FLAGS.into_iter().flat_map(|f| POLICIES.map(|s| (f, s))) {
            let [a, b] = [&anchors[0], &anchors[1]].map(|a| lookup(a, path, flags, symlinks));
            if a != b {
                differ.push(format!(
                    "{flags:?} {symlinks:?} {path:?}: {a:?} by openat2, {b:?} by the walk"
                ));
            } else if matches!(a, Outcome::Opened(_)) {
                opened += 1;
            }
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
    let lookups = paths.len() * FLAGS.len() * POLICIES.len();
    assert!(
        opened > 500 && opened < lookups,
        "both opens and refusals were compared ({opened} of {lookups} opened)"
    );
}

/// Regression (found when the patch table first ran on the walk): for a last component that is
/// a symbolic link, `O_DIRECTORY | O_NOFOLLOW` fails with `ENOTDIR`, not `ELOOP`, so the walk
/// neither followed a link to a directory nor refused a link as a link.
#[test]
fn a_directory_wanted_through_a_last_link_is_followed_or_refused_as_a_link() {
    let t = crate::beneath::tree();
    let dir = std::fs::metadata(t.base.join("dir")).unwrap();
    for backend in BACKENDS {
        let anchor = Anchor::open_ambient(&t.base, FIXTURE)
            .unwrap()
            .into_backend(backend);
        let opened = anchor.open_dir(rel("link_dir"), Symlinks::Beneath);
        assert_eq!(
            identity(opened.unwrap().as_fd()).unwrap(),
            (dir.dev(), dir.ino()),
            "{backend:?}"
        );
        for (path, symlinks) in [
            ("link_dir", Symlinks::Deny),
            ("link_up", Symlinks::Beneath),
            ("dir/link_parent", Symlinks::Deny),
        ] {
            let err = anchor.open_dir(rel(path), symlinks).unwrap_err();
            assert_eq!(
                err.code(),
                Code::SymlinkEscape,
                "{backend:?} {symlinks:?} {path}"
            );
        }
        let err = anchor
            .open_dir(rel("file.txt"), Symlinks::Beneath)
            .unwrap_err();
        assert_eq!(
            err.code(),
            Code::NotFound,
            "{backend:?}: a file is not a directory"
        );
    }
}

/// Regression (found with the `backends` fuzz target, on a hand-made input): a relative path
/// longer than the kernel takes was refused by openat2 (`ENAMETOOLONG`) but opened by the walk,
/// which passes the kernel one component at a time. At the limit both open it; one byte over,
/// [`RelPath`] refuses it, so neither backend ever sees it.
#[test]
fn a_path_longer_than_path_max_is_refused_before_either_backend() {
    let t = crate::beneath::tree();
    let file = std::fs::metadata(t.base.join("file.txt")).unwrap();
    // `.` then slashes then `file.txt`: `len` bytes that name file.txt.
    let path = |len: usize| format!(".{}file.txt", "/".repeat(len - 9));
    for backend in BACKENDS {
        let anchor = Anchor::open_ambient(&t.base, FIXTURE)
            .unwrap()
            .into_backend(backend);
        let at_limit = anchor
            .open_read(rel(&path(4095)), Symlinks::Beneath)
            .unwrap();
        assert_eq!(
            identity(at_limit.as_fd()).unwrap(),
            (file.dev(), file.ino()),
            "{backend:?}"
        );
        let err = RelPath::new(&path(4096))
            .and_then(|p| anchor.open_read(p, Symlinks::Beneath))
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{backend:?}: {err}");
    }
}
