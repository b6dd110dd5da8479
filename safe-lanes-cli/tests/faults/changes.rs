//! Change sets when the process publishing them dies: at each named step of a publish, and by
//! `SIGKILL` at random instants of commands and publishes. Whatever it reached, the folder
//! holds every file whole — the human's version or the command's, never a part — and nothing
//! the command did not publish; the next process finishes the publish (or holds an
//! interrupted set whole); each set has exactly one record; the log verifies.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::Lab;

const SIGABRT: i32 = 6;

/// What a command writes in the grant, big enough that a partial write would show: each new
/// file holds its own name many times over.
const WRITES: &str = r#"
    for i in 1 2 3 4 5 6; do
        yes "new-$i" | head -c 300000 > "new-$i"
    done
    mkdir -p tree/a/b && yes tree | head -c 100000 > tree/a/b/leaf
    yes edited | head -c 300000 > edit.txt
    rm gone.txt
    mkdir -p .claude && echo '{}' > .claude/settings.json
"#;

/// The grant `work`, with the files the command edits and removes.
fn lab_with_work() -> (Lab, String) {
    let lab = Lab::new();
    lab.run(&["init"], None, b"");
    let work = lab.grant("work", "read_write");
    std::fs::write(Path::new(&work).join("edit.txt"), "the human's version\n").unwrap();
    std::fs::write(Path::new(&work).join("gone.txt"), "to be removed\n").unwrap();
    (lab, work)
}

/// Every file under `dir` (relative), with its content.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                pending.push(path);
            } else {
                let rel = path.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// Whether `content` is what the command writes to `name` (whole), or the human's version.
fn whole(name: &str, content: &[u8]) -> bool {
    let repeated = |word: &str, len: usize| {
        content.len() == len
            && content
                .chunks(word.len() + 1)
                .all(|c| word.as_bytes().starts_with(&c[..c.len().min(word.len())]))
    };
    match name {
        "edit.txt" => content == b"the human's version\n" || repeated("edited", 300_000),
        "gone.txt" => content == b"to be removed\n",
        "tree/a/b/leaf" => repeated("tree", 100_000),
        n if n.starts_with("new-") => repeated(n, 300_000),
        _ => false,
    }
}

/// Every file in the folder is whole and is the human's or one the command publishes (the
/// held `.claude/` never is).
fn folder_is_whole(work: &str, when: &str) {
    for (name, content) in files(Path::new(work)) {
        assert!(
            whole(&name, &content),
            "{when}: {name} is not whole ({} bytes)",
            content.len()
        );
    }
}

/// The set ids named by the log's command starts.
fn sets(lab: &Lab) -> Vec<String> {
    lab.records()
        .iter()
        .filter(|r| r["event"] == "exec.start")
        .filter_map(|r| r["changes"].as_str().map(str::to_owned))
        .collect()
}

/// How many records decide set `id` (`change.published` or `change.held`).
fn decisions(lab: &Lab, id: &str) -> usize {
    let id = Value::from(id);
    lab.count("change.published", &id) + lab.count("change.held", &id)
}

/// The next process finishes what a dead one left, and every invariant holds.
fn check(lab: &Lab, work: &str, when: &str) {
    let (signal, listed) = lab.run(&["changes"], None, b"");
    assert_eq!(signal, None, "{when}: the next process runs: {listed}");
    folder_is_whole(work, when);
    assert!(
        !Path::new(work).join(".claude").exists(),
        "{when}: a held path reached the folder"
    );
    for id in sets(lab) {
        assert!(
            decisions(lab, &id) <= 1,
            "{when}: {id} has more than one record"
        );
    }
    for entry in std::fs::read_dir(lab.root().join("changes")).unwrap() {
        let set = entry.unwrap().path();
        assert!(
            !set.join("journal.json").exists(),
            "{when}: {} was left unfinished",
            set.display()
        );
    }
    let (_, verified) = lab.run(&["audit", "verify"], None, b"");
    assert_eq!(verified["intact"], true, "{when}: {verified}");
}

/// Run the command of [`WRITES`] in a fresh lab, dying at `point`: the lab and the folder, or
/// `None` when the command ended without reaching it.
fn crash_at(point: &str) -> Option<(Lab, String)> {
    let (lab, work) = lab_with_work();
    let args = ["exec", "--cwd", "work", "--", "/bin/sh", "-c", WRITES];
    let (signal, out) = lab.run(&args, Some(point), b"");
    match signal {
        Some(SIGABRT) => Some((lab, work)),
        None => None,
        other => panic!("{point}: {other:?} {out}"),
    }
}

/// After a crash at `point` and the next process: everything published, the settings held,
/// one record.
fn finished(lab: &Lab, work: &str, point: &str) {
    folder_is_whole(work, point);
    check(lab, work, point);
    let now = files(Path::new(work));
    assert!(!now.contains_key("gone.txt"), "{point}: {:?}", now.keys());
    assert!(now["edit.txt"].starts_with(b"edited"), "{point}");
    assert!(
        now.contains_key("new-6") && now.contains_key("tree/a/b/leaf"),
        "{point}"
    );
    let ids = sets(lab);
    assert_eq!(ids.len(), 1, "{point}");
    assert_eq!(
        lab.count("change.held", &Value::from(ids[0].as_str())),
        1,
        "{point}"
    );
    let (_, listed) = lab.run(&["changes"], None, b"");
    let held: Vec<&str> = listed["sets"][0]["held"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["path"].as_str().unwrap())
        .collect();
    assert_eq!(held, [".claude"], "{point}: {listed}");
}

#[test]
fn a_crash_at_each_step_of_a_publish_is_finished_by_the_next_process() {
    for point in [
        "change.journal-written",
        "change.before-record",
        "change.after-record",
    ] {
        let (lab, work) = crash_at(point).unwrap_or_else(|| panic!("{point} was not reached"));
        finished(&lab, &work, point);
    }
    // After each step of the journal, as many as it has.
    let mut steps = 0;
    while let Some((lab, work)) = crash_at(&format!("change.op-{steps}")) {
        finished(&lab, &work, &format!("change.op-{steps}"));
        steps += 1;
    }
    // One move out of the layer, one per new or rewritten entry, the removal.
    assert!(steps >= 9, "only {steps} steps were crashed at");
}

/// `SIGKILL` at random instants of commands and their publishes: whatever each reached, the
/// folder is whole, each set has at most one record and none is left unfinished, and the log
/// verifies. A set killed before it was decided is held whole (`interrupted`), never published.
#[test]
fn a_kill_storm_of_commands_leaves_every_file_whole_and_one_record_per_set() {
    let (lab, work) = lab_with_work();
    let mut killed = 0;
    for i in 0..30u64 {
        // Each command begins from the human's files again.
        std::fs::write(Path::new(&work).join("edit.txt"), "the human's version\n").unwrap();
        std::fs::write(Path::new(&work).join("gone.txt"), "to be removed\n").unwrap();
        // Its writes spread over a quarter of a second, then a publish of a few milliseconds.
        let slow = format!("sleep 0.1; {WRITES}; sleep 0.1");
        let args = [
            "exec",
            "--cwd",
            "work",
            "--",
            "/bin/sh",
            "-c",
            slow.as_str(),
        ];
        let mut child = lab.spawn(&args, None, b"");
        // A pseudo-random instant: before it runs, during its writes, during its publish, or
        // after it ended.
        let wait = (i * 7919) % 400;
        std::thread::sleep(Duration::from_millis(wait));
        if child.kill().is_ok() {
            killed += 1;
        }
        let _ = child.wait();
        folder_is_whole(&work, &format!("kill {i} after {wait} ms"));
    }
    assert!(killed > 0, "some commands were killed");
    check(&lab, &work, "after the storm");
    // The storm hit both sides: commands cut before their changes were decided (held whole),
    // and commands that were decided (whether their publish was cut or not).
    let records = lab.records();
    let decided = |interrupted: bool| {
        records
            .iter()
            .filter(|r| r["event"] == "change.held" || r["event"] == "change.published")
            .filter(|r| r["interrupted"] == interrupted)
            .count()
    };
    assert!(
        decided(true) > 0,
        "no command was killed before its changes were decided"
    );
    assert!(decided(false) > 0, "no command's changes were decided");
    // Every set that wrote anything was decided exactly once (published, held, or held whole).
    let (_, listed) = lab.run(&["changes"], None, b"");
    let waiting: Vec<&str> = listed["sets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    for id in sets(&lab) {
        let decided = decisions(&lab, &id);
        let left = lab.root().join("changes").join(&id).exists();
        assert!(
            decided == 1 || !left,
            "{id}: {decided} records, its set {}",
            if left { "still there" } else { "gone" }
        );
        if left {
            assert!(
                waiting.contains(&id.as_str()),
                "{id} is left but not listed: {listed}"
            );
        }
    }
}
