//! The upload deposit: what the uploader sees, and that the deposit is empty afterwards in
//! every outcome.

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::time::{Duration, SystemTime};

use safe_lanes::{Code, Limits, UploadDeposit, UploadSource, Uploader};

use crate::util::{Fixture, dies_soon, names};

/// An uploader that records its working directory, the mode of the file it was given, and the
/// file's content, into `report` (the staged path arrives as `$1`, never inside the script).
fn recording_uploader(report: &std::path::Path) -> Uploader {
    let script = format!(
        "pwd > '{r}'; stat -c %a \"$1\" >> '{r}'; cat \"$1\" >> '{r}'; printf 'uploaded %s' \"$1\"",
        r = report.display()
    );
    Uploader::new("/bin/sh", ["-c", script.as_str(), "sh", "{file}"]).unwrap()
}

#[test]
pub(crate) fn the_uploader_runs_in_the_deposit_on_a_private_copy_and_it_is_erased() {
    let fx = Fixture::new();
    let deposit = UploadDeposit::open(&fx.root).unwrap();
    let report = fx.path("report.txt");
    let staged = deposit
        .stage("../../notes.md", &b"# Notes\nhello"[..])
        .unwrap();
    assert_eq!(staged.relative().file_name().unwrap(), "notes.md");
    assert!(staged.path().starts_with(deposit.path()));
    let sent = deposit.send(staged, &recording_uploader(&report)).unwrap();
    assert!(sent.outcome.success(), "{:?}", sent.outcome);
    let seen = std::fs::read_to_string(&report).unwrap();
    let mut lines = seen.lines();
    let own = fx
        .root
        .uploads_path()
        .join(sent.staged.parent().unwrap().parent().unwrap());
    assert_eq!(
        lines.next(),
        Some(own.to_str().unwrap()),
        "its own directory"
    );
    assert_eq!(lines.next(), Some("600"));
    assert_eq!(lines.collect::<Vec<_>>().join("\n"), "# Notes\nhello");
    assert_eq!(sent.outcome.stdout, "uploaded in/notes.md");
    assert!(sent.staged.is_relative());
    assert!(
        names(&fx.root.uploads_path()).is_empty(),
        "the deposit is empty afterwards"
    );
}

#[test]
pub(crate) fn a_failing_uploader_still_leaves_the_deposit_empty() {
    let fx = Fixture::new();
    let deposit = UploadDeposit::open(&fx.root).unwrap();
    let staged = deposit.stage("a.txt", &b"a"[..]).unwrap();
    let failing =
        Uploader::new("/bin/sh", ["-c", "echo nope >&2; exit 3", "sh", "{file}"]).unwrap();
    let sent = deposit.send(staged, &failing).unwrap();
    assert_eq!(sent.outcome.exit_code, Some(3));
    assert_eq!(sent.outcome.stderr, "nope\n");
    assert!(!sent.outcome.success());
    assert!(names(&fx.root.uploads_path()).is_empty());
}

#[test]
pub(crate) fn an_uploader_killed_by_the_timeout_leaves_the_deposit_empty() {
    let fx = Fixture::new();
    let deposit = UploadDeposit::open(&fx.root).unwrap();
    let staged = deposit.stage("a.txt", &b"a"[..]).unwrap();
    let pid_file = fx.path("bg.pid");
    let script = format!("sleep 30 & echo $! > '{}'; sleep 30", pid_file.display());
    let slow = Uploader::new("/bin/sh", ["-c", script.as_str(), "sh", "{file}"])
        .unwrap()
        .with_limits(Limits {
            timeout: Duration::from_millis(300),
            max_output: 1024,
        });
    let sent = deposit.send(staged, &slow).unwrap();
    assert!(sent.outcome.timed_out);
    assert_eq!(sent.outcome.signal, Some(9));
    assert!(names(&fx.root.uploads_path()).is_empty());
    // The uploader's background child went with its process group.
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(dies_soon(pid), "background child {pid} survived");
}

#[test]
pub(crate) fn a_panic_in_the_caller_leaves_the_deposit_empty() {
    let fx = Fixture::new();
    let deposit = UploadDeposit::open(&fx.root).unwrap();
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let staged = deposit.stage("a.txt", &b"a"[..]).unwrap();
        assert!(staged.path().exists());
        panic!("the caller fails between staging and uploading");
    }));
    assert!(result.is_err());
    assert!(names(&fx.root.uploads_path()).is_empty());
}

#[test]
fn a_missing_uploader_is_an_io_error_and_leaves_nothing() {
    // Not the view's failure: the program's.
    let fx = Fixture::new();
    let deposit = UploadDeposit::open(&fx.root).unwrap();
    let staged = deposit.stage("a.txt", &b"a"[..]).unwrap();
    let err = deposit
        .send(
            staged,
            &Uploader::new("/nonexistent/uploader", ["{file}"]).unwrap(),
        )
        .unwrap_err();
    assert_eq!(err.code(), Code::Io);
    assert!(names(&fx.root.uploads_path()).is_empty());
}

#[test]
pub(crate) fn staging_past_the_cap_is_refused_and_leaves_nothing() {
    let fx = Fixture::new();
    let deposit = UploadDeposit::open(&fx.root).unwrap().with_max_bytes(4);
    let err = deposit.stage("a.txt", &b"12345"[..]).unwrap_err();
    assert_eq!(err.code(), Code::TooLarge);
    assert!(names(&fx.root.uploads_path()).is_empty());
}

/// An endless source, like a file that keeps growing while it is copied, counting what is read
/// from it.
struct Endless {
    read: u64,
}

impl std::io::Read for Endless {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        buf.fill(b'x');
        self.read += buf.len() as u64;
        Ok(buf.len())
    }
}

/// Regression: the copy read whole chunks (up to 256 KiB) past the cap before it refused.
/// Staging reads at most one byte past the cap, whatever the cap and however long the source
/// goes on.
#[test]
fn staging_reads_no_more_than_one_byte_past_the_cap() {
    let fx = Fixture::new();
    for cap in [0, 1, 1000, 100_000, 5 << 20] {
        let deposit = UploadDeposit::open(&fx.root).unwrap().with_max_bytes(cap);
        let mut source = Endless { read: 0 };
        let err = deposit.stage("a.txt", &mut source).unwrap_err();
        assert_eq!(err.code(), Code::TooLarge);
        assert_eq!(source.read, cap + 1, "cap {cap}");
        assert!(names(&fx.root.uploads_path()).is_empty());
    }
    // At exactly the cap, the copy succeeds.
    let deposit = UploadDeposit::open(&fx.root).unwrap().with_max_bytes(3);
    assert_eq!(deposit.stage("a.txt", &b"abc"[..]).unwrap().bytes(), 3);
}

/// A source that was small when it was checked and grew before it was copied is refused at the
/// cap, and the deposit keeps nothing.
#[test]
fn a_source_that_grew_after_its_check_is_refused_at_the_cap() {
    use std::io::Write;
    let fx = Fixture::new();
    let lane = safe_lanes::DownloadLane::open(&fx.root).unwrap();
    let saved = lane.save("log.txt", &b"small"[..]).unwrap();
    let source = UploadSource::load_with(&fx.root, |_| None).unwrap();
    let opened = source.open(&saved.path).unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&saved.path)
        .unwrap()
        .write_all(&vec![b'x'; 1 << 20])
        .unwrap();
    let deposit = UploadDeposit::open(&fx.root).unwrap().with_max_bytes(1000);
    let err = deposit.stage_source(&opened).unwrap_err();
    assert_eq!(err.code(), Code::TooLarge);
    assert!(names(&fx.root.uploads_path()).is_empty());
}

#[test]
pub(crate) fn a_resolved_source_is_staged_as_an_exact_copy() {
    let fx = Fixture::new();
    let lane = safe_lanes::DownloadLane::open(&fx.root).unwrap();
    let saved = lane.save("attachment.pdf", &b"%PDF-1.7 ..."[..]).unwrap();
    let source = UploadSource::load_with(&fx.root, |_| None).unwrap();
    let opened = source.open(&saved.path).unwrap();
    let deposit = UploadDeposit::open(&fx.root).unwrap();
    let staged = deposit.stage_source(&opened).unwrap();
    assert_eq!(staged.relative().file_name().unwrap(), "attachment.pdf");
    assert_eq!(staged.sha256(), saved.sha256);
    assert_eq!(std::fs::read(staged.path()).unwrap(), b"%PDF-1.7 ...");
    drop(staged);
    assert!(names(&fx.root.uploads_path()).is_empty());
}

#[test]
fn the_file_placeholder_is_a_whole_argument_appended_when_absent() {
    let fx = Fixture::new();
    let deposit = UploadDeposit::open(&fx.root).unwrap();
    let staged = deposit.stage("a b.txt", &b"x"[..]).unwrap();
    let echo = Uploader::parse("/bin/echo --upload {file} 'two words'").unwrap();
    let out = deposit.run(&staged, &echo).unwrap();
    let rel = staged.relative();
    let rel = rel
        .strip_prefix(rel.parent().unwrap().parent().unwrap())
        .unwrap();
    let rel = rel.to_str().unwrap();
    assert_eq!(out.stdout, format!("--upload {rel} two words\n"));
    let plain = Uploader::parse("/bin/echo").unwrap();
    assert_eq!(
        deposit.run(&staged, &plain).unwrap().stdout,
        format!("{rel}\n")
    );
    for bad in [
        "  ",
        "echo 'unbalanced",
        "/bin/echo --upload={file}",
        "sh -c 'echo uploading {file}'",
        "/bin/{file}",
        "/bin/echo {file}{file}",
    ] {
        let refused = Uploader::parse(bad).unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{bad}");
    }
    let refused = Uploader::parse("sh -c 'up {file}'").unwrap_err();
    assert!(refused.to_string().contains("whole argument"), "{refused}");
    assert!(refused.to_string().contains("\"$1\""), "{refused}");
}

/// The staged file's name is inert whatever the hint; the human-facing name is what `{name}`
/// becomes, as it is, and only ever as an argument of a shell's script, never inside it.
#[test]
fn staged_names_are_inert_and_the_human_facing_name_is_never_code() {
    let fx = Fixture::new();
    let deposit = UploadDeposit::open(&fx.root).unwrap();
    let marker = fx.tmp.path().join("X");
    let inert = |name: &str| {
        name.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    };
    for (hint, expected) in [
        ("report$(cd;touch X)x.pdf", "report_cd_touch_X_x.pdf"),
        ("`touch X`.txt", "touch_X.txt"),
        ("a b.txt", "a_b.txt"),
        ("日本語.pdf", "upload.pdf"),
        ("'; rm -rf ~; '.sh", "rm_-rf.sh"),
        ("notes.md", "notes.md"),
        ("x.tar.gz", "x.tar.gz"),
        ("-rf", "rf"),
        ("€", "download"),
    ] {
        let staged = deposit.stage(hint, &b"x"[..]).unwrap();
        let name = staged
            .relative()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        assert_eq!(name, expected, "{hint}");
        assert!(inert(&name), "{hint}: {name}");
        let relative = staged.relative();
        let dir = relative.parent().unwrap();
        assert_eq!(dir.file_name().unwrap(), "in", "{}", relative.display());
        let own = dir.parent().unwrap().to_str().unwrap();
        assert!(own.chars().all(|c| c.is_ascii_hexdigit()), "{own}");
        // A shell-wrapping template: the name and the file are the script's `$1` and `$2`.
        let template = format!(
            "/bin/sh -c 'cd {}; echo uploading \"$1\" from \"$2\"' sh {{name}} {{file}}",
            fx.tmp.path().display()
        );
        let uploader = Uploader::parse(&template).unwrap();
        let out = deposit.run(&staged, &uploader).unwrap();
        assert_eq!(out.exit_code, Some(0), "{out:?}");
        assert_eq!(
            out.stdout,
            format!("uploading {} from in/{name}\n", staged.name()),
            "{hint}"
        );
        assert!(!marker.exists(), "{hint} ran as code");
        // Inside an argument of a program that is no shell, the name is as it is.
        let echo = Uploader::parse("/bin/echo --title=[{name}]").unwrap();
        assert_eq!(
            deposit.run(&staged, &echo).unwrap().stdout,
            format!("--title=[{}] in/{name}\n", staged.name())
        );
    }
}

/// A template whose program runs code it is handed may carry the name only in arguments after
/// that code; every other place is refused at configuration.
#[test]
fn a_name_inside_code_is_refused_when_the_uploader_is_configured() {
    for bad in [
        "sh -c 'upload --title {name} \"$1\"' sh {file}",
        "bash -lc 'gws upload --json \"{\\\"name\\\": \\\"{name:json}\\\"}\"'",
        "/usr/bin/env sh -c 'up {name}'",
        "env -i PATH=/bin dash -ec 'up {name}'",
        "env -S 'sh -c up' {name}",
        "busybox sh -c 'up {name}'",
        "zsh -c {name}",
        "fish -c {name}x",
        "sh {name}",
        "sh -e {name} {file}",
        "python3 {name}",
        "python3 -m {name}",
        "python3 -W {name} up.py",
        "bash -o {name} up.sh",
        "bash -s {name}",
        "python3 - {name}",
        "python3 -c 'import sys; print(\"{name}\")'",
        "perl -e 'print \"{name:json}\"'",
        "node -e {name}",
        "{name} {file}",
        "/bin/{name:json}",
        // Options the rule does not know, in front of the code: it fails closed.
        "perl -I lib -e 'print \"{name}\"'",
        "ruby -C /tmp -e 'p \"{name}\"'",
        "node --input-type module -e '{name}'",
        "python3 --check-hash-based-pycs never -c '{name}'",
        "fish --init-command x -c 'echo {name}'",
        // Code given twice.
        "perl -e '1;' -e 'print \"{name}\"'",
        "node -e x -e 'console.log(\"{name}\")'",
        // What `env`, `busybox` and other wrappers run.
        "env -iS \"sh -c 'echo {name}'\"",
        "env {name} {file}",
        "busybox {name} {file}",
        "timeout 60 sh -c 'echo {name}'",
        "sudo -u x bash -c 'echo {name}'",
        "xargs sh -c 'echo {name}'",
        "mywrapper --quiet sh -c 'echo {name}'",
        // Remote and other code runners; versions of interpreters.
        "ssh host up {name}",
        "rsync {file} 'host:inbox/{name}'",
        "python3.13t -c '{name}'",
        "pypy3 -c '{name}'",
        "bash5 -c '{name}'",
        "jq '.name = \"{name}\"'",
        "sed 's/x/{name}/e' f",
        "awk '{print \"{name}\"}'",
        "deno eval '{name}'",
        // The staged content as the script.
        "sh {file}",
        "python3 {file}",
        "busybox sh {file}",
    ] {
        let refused = Uploader::parse(bad).unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{bad}");
    }
    // What a name may not carry: the characters a screen hides, a path, a leading dash.
    let fx = Fixture::new();
    let deposit = UploadDeposit::open(&fx.root).unwrap();
    for (hint, name) in [
        ("../../etc/Q3\u{202e}fdp.exe", "Q3fdp.exe"),
        ("--delete-all", "delete-all"),
        ("- -rf", "rf"),
        ("-\u{2003}-x", "x"),
        ("a\u{200b}\nb.txt", "ab.txt"),
        ("..", "download"),
    ] {
        assert_eq!(
            deposit.stage(hint, &b"x"[..]).unwrap().name(),
            name,
            "{hint}"
        );
    }
    for good in [
        "sh -c 'up --title \"$1\" \"$2\"' sh {name} {file}",
        "env LANG=C bash -ec 'up \"$@\"' up {name:json} {file}",
        "python3 -c 'import sys; print(sys.argv[1])' {name}",
        "bash script.sh --title={name} {file}",
        "python3.12 -W ignore gws.py --json '{\"name\": \"{name:json}\"}' {file}",
        "node -r tracing up.js {name}",
        "gws drive files create --json '{\"name\": \"{name:json}\"}' --upload {file}",
        "rclone copyto {file} 'remote:inbox/{name}'",
        "jq -n '{name: $ARGS.positional[0]}' --args {name}",
        "timeout 60 sh -c 'up \"$1\"' sh {file}",
        "curl -T {file} 'https://drive.example/upload?name={name}'",
    ] {
        Uploader::parse(good).unwrap_or_else(|e| panic!("{good}: {e}"));
    }
}

/// `{name:json}` is the name escaped for a JSON string, so a program parsing the JSON
/// argument receives the name exactly.
#[test]
fn a_json_argument_carries_the_name_exactly() {
    let fx = Fixture::new();
    let deposit = UploadDeposit::open(&fx.root).unwrap();
    let uploader = Uploader::parse(
        "python3 -c 'import json, sys; print(json.loads(sys.argv[2])[\"name\"], end=\"\")' \
         --json '{\"name\": \"{name:json}\"}' {file}",
    )
    .unwrap();
    for hint in [
        "Q3 summary.md",
        "Thomas's report.md",
        "say \"hi\" \\ {there}.txt",
        "Überweisung für Zoë – 日本.pdf",
    ] {
        let staged = deposit.stage(hint, &b"x"[..]).unwrap();
        assert_eq!(staged.name(), hint, "the name is kept as it is");
        let out = deposit.run(&staged, &uploader).unwrap();
        assert_eq!(out.stdout, hint, "{out:?}");
    }
}

/// Two uploads at once: neither uploader can list or read the other's staged file, nor see
/// anything else the deposit holds, even after trying to unmount what covers it; each sees its
/// own.
#[test]
fn an_uploader_sees_only_its_own_upload() {
    let fx = Fixture::new();
    let deposit = UploadDeposit::open(&fx.root).unwrap();
    let mine = deposit.stage("mine.txt", &b"mine"[..]).unwrap();
    let other = deposit
        .stage("secret.txt", &b"the other upload"[..])
        .unwrap();
    let other_path = other.path();
    let spy = Uploader::new(
        "/bin/sh",
        [
            "-c",
            "umount -l .. 2>/dev/null; umount -l \"$3\" 2>/dev/null; \
             ls -a ..; echo ---; ls -a . in; echo ---; cat \"$2\"; echo; cat \"$1\" 2>&1; \
             cat ../*/in/* 2>&1; true",
            "sh",
            other_path.to_str().unwrap(),
            "{file}",
            deposit.path().to_str().unwrap(),
        ],
    )
    .unwrap();
    // Even a root uploader, with every capability in its namespaces, cannot unmount its view.
    assert!(
        ["/usr/bin/umount", "/bin/umount"]
            .iter()
            .any(|p| Path::new(p).exists()),
        "the test needs umount"
    );
    let out = deposit.run(&mine, &spy).unwrap();
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    let (parent, rest) = out.stdout.split_once("---\n").unwrap();
    let (own, rest) = rest.split_once("---\n").unwrap();
    let own_dir = mine
        .relative()
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        parent
            .lines()
            .filter(|l| !l.starts_with('.'))
            .collect::<Vec<_>>(),
        [own_dir.as_str()]
    );
    assert_eq!(
        own.lines()
            .filter(|l| !l.starts_with('.') && !l.is_empty())
            .collect::<Vec<_>>(),
        ["in", "in:", "mine.txt"],
        "its own directory holds `in/`, and `in/` its staged file"
    );
    assert!(rest.starts_with("mine\n"), "{rest}");
    assert!(rest.contains("No such file"), "{rest}");
    assert!(!rest.contains("the other upload"), "{rest}");
    assert!(other_path.exists(), "the other upload is untouched");
    assert_eq!(std::fs::read(&other_path).unwrap(), b"the other upload");
}

#[test]
pub(crate) fn stale_staged_entries_are_swept_when_a_deposit_opens() {
    let fx = Fixture::new();
    let uploads = fx.root.uploads_path();
    let old_dir = uploads.join("0123456789abcdef0123456789abcdef");
    std::fs::create_dir(&old_dir).unwrap();
    std::fs::write(old_dir.join("leftover.txt"), "from a crash").unwrap();
    std::fs::write(uploads.join("old-file"), "old").unwrap();
    std::fs::write(uploads.join("recent-file"), "put here by hand").unwrap();
    let recent_dir = uploads.join("fedcba9876543210fedcba9876543210");
    std::fs::create_dir(&recent_dir).unwrap();
    std::fs::write(recent_dir.join("leftover.txt"), "from a crash a minute ago").unwrap();
    std::fs::create_dir(uploads.join(".being-made")).unwrap();
    std::fs::create_dir(uploads.join(".made-long-ago")).unwrap();
    let two_hours_ago = SystemTime::now() - Duration::from_secs(7200);
    for p in [
        "0123456789abcdef0123456789abcdef",
        "old-file",
        ".made-long-ago",
    ] {
        std::fs::File::open(uploads.join(p))
            .unwrap()
            .set_modified(two_hours_ago)
            .unwrap();
    }
    let live = UploadDeposit::open(&fx.root).unwrap();
    assert_eq!(
        names(&uploads),
        [".being-made"],
        "only a hidden directory being made stays"
    );
    let staged = live.stage("in-use.txt", &b"staged"[..]).unwrap();
    let _another = UploadDeposit::open(&fx.root).unwrap();
    assert!(staged.path().exists(), "a staging directory in use is kept");
}
