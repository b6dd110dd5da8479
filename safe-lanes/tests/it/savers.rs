//! The registry of savers (`<root>/.savers`): a new lane reads the lane for files a crash left
//! unrecorded only when a saver died, or when nothing is known; live savers are told apart
//! from dead ones; entries made and removed as the handles come and go.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use safe_lanes::DownloadLane;

use crate::util::{Fixture, mode, names};

/// `<root>/.savers`.
fn savers(fx: &Fixture) -> PathBuf {
    fx.root.path().join(".savers")
}

/// The savers' entries in the registry (its hidden `.known` file aside).
fn entries(fx: &Fixture) -> Vec<String> {
    let mut names = names(&savers(fx));
    names.retain(|n| !n.starts_with('.'));
    names
}

/// A file as a save that died between publishing and recording leaves it: marked.
fn plant_marked(fx: &Fixture, name: &str) -> PathBuf {
    let path = fx.root.downloads_path().join(name);
    std::fs::write(&path, "published, never recorded").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o1600)).unwrap();
    path
}

/// The names of the files recorded as recovered.
fn recovered(fx: &Fixture) -> Vec<String> {
    safe_lanes_testkit::audit::records(fx.root.path())
        .into_iter()
        .filter(|e| e["event"] == "download.recovered")
        .map(|e| e["file"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// A reader that notes what `dir` holds when first read (while the save is under way, before
/// it publishes), then yields one byte.
struct Peek<'p> {
    dir: &'p Path,
    seen: Option<Vec<String>>,
}

impl std::io::Read for Peek<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.seen.is_some() || buf.is_empty() {
            return Ok(0);
        }
        self.seen = Some(names(self.dir));
        buf[0] = b'x';
        Ok(1)
    }
}

/// A handle registers before its first save publishes and removes its entry when dropped;
/// with the registry present and no saver dead, the next lane does not read the lane: a
/// marked file nobody's crash explains is left as it is.
#[test]
pub(crate) fn a_clean_saver_leaves_nothing_and_the_next_lane_does_not_read_the_lane() {
    let fx = Fixture::new();
    let lane = DownloadLane::open(&fx.root).unwrap();
    let dir = savers(&fx);
    let mut peek = Peek {
        dir: &dir,
        seen: None,
    };
    lane.save("a.txt", &mut peek).unwrap();
    let seen = peek.seen.unwrap();
    assert_eq!(seen.len(), 2, "registered before publishing: {seen:?}");
    assert!(seen.contains(&".known".to_owned()), "{seen:?}");
    assert_eq!(mode(&dir), 0o700);
    drop(lane);
    assert!(entries(&fx).is_empty(), "the entry goes with the handle");

    let hand = plant_marked(&fx, "hand.txt");
    let lane = DownloadLane::open(&fx.root).unwrap();
    lane.save("b.txt", &b"b"[..]).unwrap();
    assert_eq!(lane.list().unwrap().len(), 3);
    assert_eq!(mode(&hand), 0o1600, "the lane was not read");
    assert!(recovered(&fx).is_empty());
}

/// An entry whose lock is free is a saver that died: the next lane reads the lane, records
/// what is marked, and removes the entry.
#[test]
pub(crate) fn a_dead_savers_entry_makes_the_next_lane_recover_and_is_removed() {
    let fx = Fixture::new();
    DownloadLane::open(&fx.root).unwrap().list().unwrap();
    let left = plant_marked(&fx, "left.txt");
    // What a saver killed while it held its entry leaves: the entry, unlocked.
    std::fs::write(savers(&fx).join("0123456789abcdef0123456789abcdef"), "").unwrap();
    let lane = DownloadLane::open(&fx.root).unwrap();
    assert_eq!(lane.list().unwrap().len(), 1);
    assert_eq!(mode(&left), 0o600);
    assert_eq!(recovered(&fx), ["left.txt"]);
    assert!(entries(&fx).is_empty(), "the dead saver's entry is removed");
}

/// A saver that is alive (another handle, here in the same process: a lock belongs to its
/// open file) is not taken for a dead one, so its files are not recorded twice.
#[test]
pub(crate) fn a_live_saver_is_not_taken_for_a_dead_one() {
    let fx = Fixture::new();
    DownloadLane::open(&fx.root).unwrap().list().unwrap();
    let live = DownloadLane::open(&fx.root).unwrap();
    live.save("a.txt", &b"a"[..]).unwrap();
    let in_flight = plant_marked(&fx, "in-flight.txt");
    let other = DownloadLane::open(&fx.root).unwrap();
    assert_eq!(other.list().unwrap().len(), 2);
    assert_eq!(mode(&in_flight), 0o1600, "not recovered under a live saver");
    assert_eq!(entries(&fx).len(), 1, "the live saver's entry stays");
    drop(live);
    assert!(entries(&fx).is_empty());
}

/// Without a registry (a root a previous version used, or one whose registry was removed), or
/// with one that no lane has read the lane for yet (its first handle was never used), nothing
/// is known: the next lane reads the lane, and says so in the registry.
#[test]
fn until_a_lane_has_read_the_lane_it_is_read() {
    let fx = Fixture::new();
    DownloadLane::open(&fx.root).unwrap().list().unwrap();
    for (case, forget) in [
        (
            "no registry",
            (|dir: &Path| std::fs::remove_dir_all(dir)) as fn(&Path) -> _,
        ),
        ("no `.known`", |dir: &Path| {
            std::fs::remove_file(dir.join(".known"))
        }),
    ] {
        forget(&savers(&fx)).unwrap();
        drop(DownloadLane::open(&fx.root).unwrap()); // makes the registry, never reads
        let left = plant_marked(&fx, &format!("{case}.txt"));
        let lane = DownloadLane::open(&fx.root).unwrap();
        lane.list().unwrap();
        assert_eq!(mode(&left), 0o600, "{case}");
        assert!(recovered(&fx).contains(&format!("{case}.txt")), "{case}");
        assert!(savers(&fx).join(".known").is_file(), "{case}");
    }
}

/// A registry others may write to, or one that is not a directory, refuses saving only: the
/// lane still lists, and `init` repairs it (the mode, or the entry moved aside).
#[test]
fn a_registry_that_is_not_private_refuses_saving_only_until_init_repairs_it() {
    let fx = Fixture::new();
    drop(DownloadLane::open(&fx.root).unwrap());
    std::fs::set_permissions(savers(&fx), std::fs::Permissions::from_mode(0o777)).unwrap();
    let lane = DownloadLane::open(&fx.root).unwrap();
    let refused = lane.save("a.txt", &b"a"[..]).unwrap_err();
    assert_eq!(refused.code(), safe_lanes::Code::InsecureRoot, "{refused}");
    assert!(refused.to_string().contains("safe-lanes init"), "{refused}");
    lane.list().expect("listing works");
    assert!(
        fx.root.broken().iter().any(|b| b.contains(".savers")),
        "doctor names it: {:?}",
        fx.root.broken()
    );
    let repaired = safe_lanes::StateRoot::init(fx.root.path()).unwrap();
    assert_eq!(mode(&savers(&fx)), 0o700, "`init` repairs it");
    DownloadLane::open(&repaired)
        .unwrap()
        .save("a.txt", &b"a"[..])
        .unwrap();
    let report = repaired.report().unwrap();
    assert!(
        report.iter().any(|d| d.path == savers(&fx) && d.private),
        "doctor shows it: {report:?}"
    );
    std::fs::remove_dir_all(savers(&fx)).unwrap();
    std::fs::write(savers(&fx), "not a directory").unwrap();
    let lane = DownloadLane::open(&fx.root).unwrap();
    let refused = lane.save("b.txt", &b"b"[..]).unwrap_err();
    assert_eq!(refused.code(), safe_lanes::Code::InsecureRoot, "{refused}");
    let repaired = safe_lanes::StateRoot::init(fx.root.path()).unwrap();
    assert!(
        repaired.repairs().iter().any(|r| r.contains(".savers")),
        "{:?}",
        repaired.repairs()
    );
    DownloadLane::open(&repaired)
        .unwrap()
        .save("b.txt", &b"b"[..])
        .unwrap();
}

/// Many dead savers (a crash storm): each handle holds a bounded number of their entries at
/// once, and the handles after it remove the rest; every file is recorded once.
#[test]
fn many_dead_savers_are_cleared_a_bounded_number_at_a_time() {
    let fx = Fixture::new();
    DownloadLane::open(&fx.root).unwrap().list().unwrap();
    for i in 0..100 {
        std::fs::write(savers(&fx).join(format!("{i:032x}")), "").unwrap();
    }
    plant_marked(&fx, "left.txt");
    let mut rounds = 0;
    while !entries(&fx).is_empty() {
        DownloadLane::open(&fx.root).unwrap().list().unwrap();
        rounds += 1;
        assert!(rounds <= 2, "{} left", entries(&fx).len());
    }
    assert_eq!(rounds, 2);
    assert_eq!(recovered(&fx), ["left.txt"]);
}

/// Savers in many threads, each handle making and removing its entry while new handles
/// judge the entries (and remove those they find abandoned): no save fails, none is taken
/// for a dead saver's, and nothing is left.
#[test]
pub(crate) fn savers_coming_and_going_in_parallel_never_lose_their_entry() {
    let fx = Fixture::new();
    DownloadLane::open(&fx.root).unwrap().list().unwrap();
    std::thread::scope(|s| {
        for t in 0..8 {
            let fx = &fx;
            s.spawn(move || {
                for i in 0..25 {
                    let lane = DownloadLane::open(&fx.root).unwrap();
                    lane.save(format!("t{t}-{i}.txt"), &b"x"[..]).unwrap();
                }
            });
        }
    });
    assert!(entries(&fx).is_empty());
    let lane = DownloadLane::open(&fx.root).unwrap();
    assert_eq!(lane.list().unwrap().len(), 200);
    assert!(
        recovered(&fx).is_empty(),
        "no live saver was taken for a dead one"
    );
}

/// A full disk: a save that cannot be written fails and leaves nothing, no entry of a dead
/// saver and nothing to recover; once there is room, the next process-like handle saves
/// without reading the lane. Needs a small tmpfs, so root (which CI is).
#[test]
fn a_full_disk_fails_a_save_and_leaves_nothing_to_recover() {
    let Some(disk) = crate::util::SmallDisk::mount("512k") else {
        return;
    };
    let root = safe_lanes::StateRoot::open(&disk.path.join("state")).unwrap();
    let lane = DownloadLane::open(&root).unwrap();
    lane.save("first.txt", &b"fits"[..]).unwrap();
    let filler = disk.fill();
    let refused = lane
        .save("big.bin", &vec![7u8; 256 * 1024][..])
        .unwrap_err();
    assert_eq!(refused.code(), safe_lanes::Code::Io, "{refused}");
    drop(lane);
    let savers = root.path().join(".savers");
    let mut left = names(&savers);
    left.retain(|n| !n.starts_with('.'));
    assert!(left.is_empty(), "no saver's entry left: {left:?}");
    assert_eq!(names(&root.downloads_path()), ["first.txt"]);
    std::fs::remove_file(filler).unwrap();
    let lane = DownloadLane::open(&root).unwrap();
    lane.save("second.txt", &b"room again"[..]).unwrap();
    assert_eq!(lane.list().unwrap().len(), 2);
    let log = std::fs::read_to_string(root.path().join("audit.jsonl")).unwrap();
    assert!(!log.contains("download.recovered"), "{log}");
    assert!(root.audit().verify().unwrap().is_intact());
}
