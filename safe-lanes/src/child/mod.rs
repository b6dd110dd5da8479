//! Running a child process with a timeout and capped output.
//!
//! Used for the uploader of the deposit and for confined commands. The child gets its own
//! process group; when it exits, times out or its caller gives up, the whole group is killed,
//! so nothing it started in the background outlives it (a child that leaves the group with
//! `setsid` is beyond this; confined commands are also bounded by their sandbox).

#[cfg(target_os = "linux")]
pub(crate) mod supervise;

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};
use serde::Serialize;

use crate::control::{Control, Stream};
use crate::error::{Error, Result};

/// Bounds on a child process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time before the process group is killed.
    pub timeout: Duration,
    /// Bytes kept of each of stdout and stderr; the rest is read and dropped.
    pub max_output: usize,
}

impl Default for Limits {
    /// Two minutes and 1 MiB per stream.
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(120),
            max_output: 1 << 20,
        }
    }
}

/// How a child process ended and what it printed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// The exit code, or `None` when the process was killed by a signal.
    pub exit_code: Option<i32>,
    /// The signal that killed it, if any.
    pub signal: Option<i32>,
    /// Standard output (lossy UTF-8), at most [`Limits::max_output`] bytes of it.
    pub stdout: String,
    /// Standard error (lossy UTF-8), at most [`Limits::max_output`] bytes of it.
    pub stderr: String,
    /// Whether the timeout killed it.
    pub timed_out: bool,
    /// Whether output beyond the cap was dropped.
    pub truncated: bool,
    /// Why the process was stopped before it ended on its own (other than the timeout), such
    /// as a revoked grant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// Whether how it ended is in the audit log (its start always is, recorded before it ran;
    /// an end that could not be recorded is recorded by the next process as
    /// `ended_unknown`).
    pub recorded: bool,
}

impl Outcome {
    /// Whether the process exited with status 0 on its own.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && self.stopped.is_none()
    }
}

/// A check run while the process runs: `Some(why)` stops it.
pub(crate) type Watch<'w> = &'w (dyn Fn() -> Option<String> + Sync);

/// How often a stop and `watch` (a running command's grants compared with the manifest) are
/// checked.
pub(crate) const WATCH_INTERVAL: Duration = Duration::from_millis(100);

/// Spawn `command` (stdin from `/dev/null`, stdout and stderr captured into `control`, in a
/// new process group), wait at most `limits.timeout` — every 100 ms stopping the process when
/// `control` was asked to stop or `watch` (if given) says so — and kill its process group when
/// it is done.
///
/// All of it happens on the calling thread: one `poll` waits on both pipes and, on Linux, on
/// a process descriptor that becomes readable when the child exits, so its end is noticed
/// when it happens, with no thread to wake.
pub(crate) fn run(
    command: &mut Command,
    limits: Limits,
    control: &Control,
    watch: Option<Watch<'_>>,
) -> Result<Outcome> {
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| Error::io("spawn", program.as_str(), e))?;
    control.set_spawned();
    let group = Pid::from_child(&child);
    let mut pipes = Pipes::new(&mut child, limits.max_output);
    let stopped = || control.stopped().or_else(|| watch.and_then(|w| w()));
    let exit = exit_descriptor(&child);
    let exit = exit.as_ref().map(AsFd::as_fd);
    let (status, ended) = wait_for(
        &mut child,
        exit,
        &mut pipes,
        control,
        limits.timeout,
        &stopped,
    );
    // Whatever the child left running in its group goes with it.
    let _ = rustix::process::kill_process_group(group, Signal::KILL);
    let status = status.map_err(|e| Error::io("wait", program.as_str(), e))?;
    pipes.drain(control);
    control.end_output();
    let kept = control.output();
    Ok(Outcome {
        exit_code: status.code(),
        signal: status.signal(),
        stdout: String::from_utf8_lossy(&kept.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&kept.stderr).into_owned(),
        timed_out: ended == Ended::TimedOut,
        truncated: kept.truncated,
        stopped: match ended {
            Ended::Stopped(why) => Some(why),
            _ => None,
        },
        recorded: false,
    })
}

/// Why the wait ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// The process exited (or was killed) on its own.
    Exited,
    /// The timeout killed it.
    TimedOut,
    /// `watch` stopped it.
    Stopped(String),
}

/// How often the exit of a child is looked for where no process descriptor tells of it
/// (not Linux, or `pidfd_open` refused) and both its pipes have ended.
const EXIT_POLL: Duration = Duration::from_millis(10);

/// Wait for `child`, reading its pipes meanwhile; kill its group at `timeout`, or when
/// `stopped` gives a reason (asked every [`WATCH_INTERVAL`]). `exit`, when there is one,
/// becomes readable when the child exits ([`exit_descriptor`]); without it, once both pipes
/// ended, the exit is looked for every [`EXIT_POLL`].
fn wait_for(
    child: &mut Child,
    exit: Option<BorrowedFd<'_>>,
    pipes: &mut Pipes,
    control: &Control,
    timeout: Duration,
    stopped: Watch<'_>,
) -> (std::io::Result<ExitStatus>, Ended) {
    let group = Pid::from_child(child);
    // A timeout too large to add is as good as none (about 30 years is plenty).
    let now = Instant::now();
    let deadline = now
        .checked_add(timeout)
        .or_else(|| now.checked_add(Duration::from_secs(1 << 30)))
        .unwrap_or(now);
    let mut next_watch = now + WATCH_INTERVAL;
    let killed = |ended: Ended, child: &mut Child| {
        let _ = rustix::process::kill_process_group(group, Signal::KILL);
        (child.wait(), ended)
    };
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return (Ok(status), Ended::Exited),
            Ok(None) => {}
            Err(e) => return (Err(e), Ended::Exited),
        }
        let now = Instant::now();
        if now >= deadline {
            return killed(Ended::TimedOut, child);
        }
        if now >= next_watch {
            if let Some(why) = stopped() {
                return killed(Ended::Stopped(why), child);
            }
            next_watch = now + WATCH_INTERVAL;
        }
        let mut wait = deadline.min(next_watch).saturating_duration_since(now);
        if exit.is_none() && pipes.ended() {
            wait = wait.min(EXIT_POLL);
        }
        pipes.read_ready(control, exit, Some(wait));
    }
}

/// A descriptor that becomes readable when `child` exits (`pidfd_open`; Linux 5.3), or `None`
/// where there is none.
fn exit_descriptor(child: &Child) -> Option<OwnedFd> {
    #[cfg(target_os = "linux")]
    {
        rustix::process::pidfd_open(Pid::from_child(child), rustix::process::PidfdFlags::empty())
            .ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = child;
        None
    }
}

/// How long the pipes may stay open after the process group was killed (by a process that
/// left the group): after that, what was read so far is taken and the rest is not waited for.
const PIPE_GRACE: Duration = Duration::from_millis(500);

/// The child's stdout and stderr, each until it ends, read into a [`Control`] (at most `cap`
/// bytes kept of each, the rest read and dropped).
struct Pipes {
    open: Vec<(Stream, OwnedFd)>,
    buf: Vec<u8>,
    cap: usize,
}

impl Pipes {
    /// Take `child`'s captured stdout and stderr.
    fn new(child: &mut Child, cap: usize) -> Self {
        let stdout = child
            .stdout
            .take()
            .map(|p| (Stream::Stdout, OwnedFd::from(p)));
        let stderr = child
            .stderr
            .take()
            .map(|p| (Stream::Stderr, OwnedFd::from(p)));
        Self {
            open: stdout.into_iter().chain(stderr).collect(),
            buf: vec![0; 64 << 10],
            cap,
        }
    }

    /// Whether both pipes have ended.
    fn ended(&self) -> bool {
        self.open.is_empty()
    }

    /// Wait at most `timeout` (`None`: as long as it takes) for a pipe to be readable or
    /// `also` to be, and read once from each pipe that is; a pipe that ended (or failed) is
    /// closed.
    fn read_ready(
        &mut self,
        control: &Control,
        also: Option<BorrowedFd<'_>>,
        timeout: Option<Duration>,
    ) {
        use rustix::event::{PollFd, PollFlags, Timespec};
        let mut fds: Vec<PollFd<'_>> = self
            .open
            .iter()
            .map(|(_, fd)| PollFd::new(fd, PollFlags::IN))
            .chain(also.map(|fd| PollFd::from_borrowed_fd(fd, PollFlags::IN)))
            .collect();
        let timeout = timeout.map(|t| Timespec {
            tv_sec: i64::try_from(t.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(t.subsec_nanos()),
        });
        if rustix::event::poll(&mut fds, timeout.as_ref()).is_err() {
            return;
        }
        let ready: Vec<bool> = fds.iter().map(|fd| !fd.revents().is_empty()).collect();
        drop(fds);
        let mut index = 0;
        self.open.retain(|(stream, fd)| {
            let was_ready = ready[index];
            index += 1;
            if !was_ready {
                return true;
            }
            match rustix::io::read(fd, &mut self.buf[..]) {
                Ok(0) => false,
                Ok(n) => {
                    control.keep(*stream, &self.buf[..n], self.cap);
                    true
                }
                Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => true,
                Err(_) => false,
            }
        });
    }

    /// Read both pipes to their end, or until [`PIPE_GRACE`] passed (what was read is kept).
    fn drain(&mut self, control: &Control) {
        let until = Instant::now() + PIPE_GRACE;
        while !self.ended() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            self.read_ready(control, None, Some(left));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spawned(script: &str) -> Child {
        Command::new("/bin/sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("spawn /bin/sh")
    }

    /// A child that closes its pipes long before it exits is seen exiting, with and without a
    /// descriptor telling of its exit (where there is none: not Linux, or `pidfd_open`
    /// refused): its status comes back, not the timeout's.
    #[test]
    fn an_exit_after_the_pipes_closed_is_seen_with_or_without_a_process_descriptor() {
        for with_descriptor in [true, false] {
            let mut child = spawned("echo out; exec >&- 2>&-; sleep 0.3; exit 3");
            let exit = exit_descriptor(&child);
            assert!(exit.is_some(), "Linux 5.3 has pidfd_open");
            let exit = exit.as_ref().filter(|_| with_descriptor).map(AsFd::as_fd);
            let control = Control::new();
            let mut pipes = Pipes::new(&mut child, 100);
            let never = || None;
            let (status, ended) = wait_for(
                &mut child,
                exit,
                &mut pipes,
                &control,
                Duration::from_secs(60),
                &never,
            );
            assert_eq!(ended, Ended::Exited, "with a descriptor: {with_descriptor}");
            assert_eq!(status.expect("status").code(), Some(3));
            assert!(pipes.ended());
            assert_eq!(control.output().stdout, b"out\n");
        }
    }

    /// Output many times a pipe's capacity is read while the child writes it (the child does
    /// not block on a full pipe), kept up to the cap, and the rest counted as truncated.
    #[test]
    fn output_beyond_a_pipe_and_the_cap_is_read_as_it_comes_and_truncated() {
        let mut command = Command::new("/bin/sh");
        command.args([
            "-c",
            "head -c 1048576 /dev/zero; head -c 300000 /dev/zero >&2",
        ]);
        let limits = Limits {
            timeout: Duration::from_secs(60),
            max_output: 200_000,
        };
        let control = Control::new();
        let out = run(&mut command, limits, &control, None).expect("run");
        assert_eq!(out.exit_code, Some(0));
        assert!(!out.timed_out);
        assert!(out.truncated);
        assert_eq!(out.stdout.len(), 200_000);
        assert_eq!(out.stderr.len(), 200_000);
    }

    /// The timeout kills the whole group, also when the child's pipes stay open.
    #[test]
    fn the_timeout_kills_the_group() {
        let mut command = Command::new("/bin/sh");
        command.args(["-c", "sleep 30 & sleep 30"]);
        let limits = Limits {
            timeout: Duration::from_millis(300),
            max_output: 100,
        };
        let out = run(&mut command, limits, &Control::new(), None).expect("run");
        assert!(out.timed_out);
        assert_eq!(out.signal, Some(libc::SIGKILL));
    }
}
