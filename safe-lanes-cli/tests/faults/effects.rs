//! Effects outside the library — an uploader, a confined command — when the process running
//! them is killed or its client goes: the effect stops with its owner, its start was recorded
//! before it began, and it has exactly one end (its own, or `ended_unknown` written by the
//! next process).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::server::Server;
use crate::{Lab, lane};

/// Longer than the effects below run had they not been stopped, so a survivor shows.
const OUTLIVE: Duration = Duration::from_secs(4);

/// A shell command that, `seconds` from now, writes a mark to `mark`: an effect that shows
/// whether the process survived its owner.
fn marks_later(mark: &Path, seconds: u32) -> String {
    format!("sleep {seconds}; echo sent > '{}'", mark.display())
}

/// The first record's id for the start `event`, and that there is exactly one such start;
/// then that the next process closed it: no end of its own, one `ended_unknown`.
fn closed_as_unknown(lab: &Lab, op: &str, id: &Value) {
    assert_eq!(lab.count(&format!("{op}.start"), id), 1, "one start");
    assert_eq!(lab.count(&format!("{op}.end"), id), 0, "no end of its own");
    assert_eq!(
        lab.count(&format!("{op}.ended_unknown"), id),
        1,
        "closed once by the next process: {:?}",
        lab.records()
    );
}

#[test]
fn a_killed_upload_send_takes_its_uploader_with_it_and_is_closed_as_unknown() {
    let lab = Lab::new();
    let path = lab.saved("out.txt", b"to send");
    let mark = lab.tmp.path().join("sent");
    let script = marks_later(&mark, 2);
    let mut sending = lab.spawn(
        &[
            "upload", "send", &path, "--", "sh", "-c", &script, "sh", "{file}",
        ],
        None,
        b"",
    );
    let start = lab.wait_for("upload.start");
    sending.kill().unwrap();
    let _ = sending.wait();
    std::thread::sleep(OUTLIVE);
    assert!(!mark.exists(), "the uploader outlived its owner");
    // The next upload closes the dead one's start and erases its staging.
    let (signal, sent) = lab.run(&["upload", "send", &path, "--", "cat", "{file}"], None, b"");
    assert_eq!(signal, None);
    assert_eq!(sent["stdout"], "to send", "{sent}");
    assert!(
        lane(&lab.root().join(".uploads")).is_empty(),
        "no staging left"
    );
    closed_as_unknown(&lab, "upload", &start["id"]);
}

/// Staged plaintext a killed upload left does not wait for the next upload: any command that
/// opens the state root (here `download list`), or a server's start, erases it.
#[test]
fn content_a_killed_upload_staged_is_erased_by_the_next_process_of_any_kind() {
    for next in ["a command", "a server"] {
        let lab = Lab::new();
        let path = lab.saved("out.txt", b"to send");
        let mut sending = lab.spawn(
            &[
                "upload", "send", &path, "--", "sh", "-c", "sleep 30", "sh", "{file}",
            ],
            None,
            b"",
        );
        lab.wait_for("upload.start");
        let uploads = lab.root().join(".uploads");
        assert_eq!(lane(&uploads).len(), 1, "staged while it runs");
        sending.kill().unwrap();
        let _ = sending.wait();
        assert_eq!(lane(&uploads).len(), 1, "{next}: left by the kill");
        match next {
            "a command" => {
                let (signal, _) = lab.run(&["download", "list"], None, b"");
                assert_eq!(signal, None);
            }
            _ => {
                let mut server = Server::start(&lab, &[], Stdio::null());
                server.call(1, "folder_grants_list", json!({}));
                server.kill();
            }
        }
        assert!(lane(&uploads).is_empty(), "{next}: no staged content left");
    }
}

/// The first of two uploads: its content staged and its uploader waiting, by a command or by a
/// server, until the returned guard is dropped.
enum First {
    Command(std::process::Child),
    Server(Server),
}

impl First {
    fn start(lab: &Lab, by_server: bool) -> Self {
        let first = if by_server {
            let mut server = Server::start(
                lab,
                &["--uploader", "sh -c 'sleep 20' sh {file}"],
                Stdio::null(),
            );
            let content = json!({"filename": "secret.txt", "text": "the first upload"});
            server.call(1, "upload_content", content);
            Self::Server(server)
        } else {
            let secret = lab.saved("secret.txt", b"the first upload");
            let uploader = ["sh", "-c", "sleep 20", "sh", "{file}"];
            let mut args = vec!["upload", "send", &secret, "--"];
            args.extend(uploader);
            Self::Command(lab.spawn(&args, None, b""))
        };
        lab.wait_for("upload.start");
        first
    }
}

impl Drop for First {
    fn drop(&mut self) {
        match self {
            Self::Command(child) => {
                let _ = child.kill();
                let _ = child.wait();
            }
            Self::Server(server) => server.kill(),
        }
    }
}

/// Two uploads at once — two `upload send`s, one of them and a server, two servers — on one
/// state root: the second uploader lists the deposit and reads every staged file it can reach
/// while the first one's content is staged, and finds only its own.
#[test]
fn two_uploads_at_once_cannot_see_each_other() {
    const SPY: &str =
        "ls -a ..; echo ---; cat ../*/in/* 2>&1; cat /proc/self/cwd/../*/in/* 2>&1; true";
    for (first_by_server, second_by_server) in [(false, false), (false, true), (true, true)] {
        let how = format!("first by a server: {first_by_server}, second: {second_by_server}");
        let lab = Lab::new();
        lab.run(&["init"], None, b"");
        let uploads = lab.root().join(".uploads");
        let first = First::start(&lab, first_by_server);
        let seen = if second_by_server {
            let spy = format!("sh -c '{SPY}' sh {{file}}");
            let mut second = Server::start(&lab, &["--uploader", &spy], Stdio::null());
            let content = json!({"filename": "mine.txt", "text": "mine"});
            second.call(1, "upload_content", content);
            let answer = second.answer(1);
            second.kill();
            answer["result"]["structuredContent"].clone()
        } else {
            let mine = lab.saved("mine.txt", b"mine");
            let args = [
                "upload", "send", &mine, "--", "sh", "-c", SPY, "sh", "{file}",
            ];
            let (signal, sent) = lab.run(&args, None, b"");
            assert_eq!(signal, None);
            sent
        };
        drop(first);
        let stdout = seen["stdout"]
            .as_str()
            .unwrap_or_else(|| panic!("{how}: {seen}"));
        let (listed, read) = stdout.split_once("---\n").unwrap();
        let listed: Vec<&str> = listed.lines().filter(|l| !l.starts_with('.')).collect();
        assert_eq!(listed.len(), 1, "{how}: only its own directory: {stdout}");
        assert_eq!(read.matches("mine").count(), 2, "{how}: {stdout}");
        assert!(!read.contains("the first upload"), "{how}: {stdout}");
        assert!(lane(&uploads).len() <= 1, "{how}");
    }
}

/// The uploader's timeout is the library's, not its caller's: with `upload send` stopped
/// (`SIGSTOP`, a hung gateway), the uploader is still killed a second after its timeout.
#[test]
fn an_uploader_is_killed_at_its_timeout_even_when_its_owner_hangs() {
    let lab = Lab::new();
    let path = lab.saved("out.txt", b"to send");
    let mark = lab.tmp.path().join("sent");
    // Killed a second after its one-second timeout, a second before it would write.
    let script = marks_later(&mark, 3);
    let mut sending = lab.spawn(
        &[
            "upload",
            "send",
            &path,
            "--timeout",
            "1",
            "--",
            "sh",
            "-c",
            &script,
            "sh",
            "{file}",
        ],
        None,
        b"",
    );
    lab.wait_for("upload.start");
    let pid = rustix::process::Pid::from_child(&sending);
    rustix::process::kill_process(pid, rustix::process::Signal::STOP).unwrap();
    std::thread::sleep(OUTLIVE);
    let survived = mark.exists();
    rustix::process::kill_process(pid, rustix::process::Signal::CONT).unwrap();
    let _ = sending.wait();
    assert!(
        !survived,
        "the uploader ran past its timeout while its owner hung"
    );
}

#[test]
fn a_killed_server_takes_its_uploader_with_it_and_is_closed_as_unknown() {
    let lab = Lab::new();
    lab.run(&["init"], None, b"");
    let mark = lab.tmp.path().join("sent");
    let uploader = format!("sh -c \"{}\" sh {{file}}", marks_later(&mark, 2));
    let mut server = Server::start(&lab, &["--uploader", &uploader], Stdio::null());
    server.call(
        1,
        "upload_content",
        json!({"filename": "report.txt", "text": "the content"}),
    );
    let start = lab.wait_for("upload.start");
    server.kill();
    std::thread::sleep(OUTLIVE);
    assert!(!mark.exists(), "the uploader outlived the server");
    let path = lab.saved("next.txt", b"next");
    let (signal, _) = lab.run(&["upload", "send", &path, "--", "cat", "{file}"], None, b"");
    assert_eq!(signal, None);
    assert!(
        lane(&lab.root().join(".uploads")).is_empty(),
        "no staging left"
    );
    closed_as_unknown(&lab, "upload", &start["id"]);
}

#[test]
fn a_server_killed_mid_command_stops_it_and_is_closed_as_unknown() {
    let lab = Lab::new();
    let work = lab.grant("work", "read_write");
    let mut server = Server::start(&lab, &[], Stdio::null());
    let command = "sleep 2; echo done > \"$WORKFLOW_FOLDER_WORK/mark\"";
    server.call(1, "shell_exec", json!({"command": command}));
    let start = lab.wait_for("exec.start");
    assert_eq!(start["args"][1], command, "{start}");
    server.kill();
    std::thread::sleep(OUTLIVE);
    assert!(
        !Path::new(&work).join("mark").exists(),
        "the command outlived the server"
    );
    let (signal, ran) = lab.run(&["exec", "--", "true"], None, b"");
    assert_eq!((signal, &ran["exit_code"]), (None, &json!(0)), "{ran}");
    closed_as_unknown(&lab, "exec", &start["id"]);
}

/// A client that goes away (its end of stdin closed) while a command runs in the foreground
/// and another in the background: the server stops both, records how, and exits.
#[test]
fn a_client_that_disconnects_mid_command_leaves_each_command_stopped_and_recorded() {
    let lab = Lab::new();
    lab.grant("work", "read_write");
    let mut server = Server::start(&lab, &[], Stdio::null());
    server.call(
        1,
        "shell_exec",
        json!({"command": "sleep 60", "background": true}),
    );
    let job = server.answer(1);
    let job = &job["result"]["structuredContent"];
    assert_eq!(job["status"], "running", "{job}");
    server.call(2, "shell_exec", json!({"command": "sleep 61"}));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while lab
        .records()
        .iter()
        .filter(|r| r["event"] == "exec.start")
        .count()
        < 2
    {
        assert!(
            std::time::Instant::now() < deadline,
            "both commands started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    server.close();
    let status = server.wait();
    assert!(status.success(), "the server ends normally: {status:?}");
    let records = lab.records();
    let starts: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "exec.start")
        .collect();
    assert_eq!(starts.len(), 2);
    for start in starts {
        let ends: Vec<&Value> = records
            .iter()
            .filter(|r| r["event"] == "exec.end" && r["id"] == start["id"])
            .collect();
        assert_eq!(ends.len(), 1, "one end for {start}: {records:?}");
        assert!(
            ends[0]["stopped"].is_string(),
            "stopped, and why: {}",
            ends[0]
        );
    }
}
