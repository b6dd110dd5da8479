//! Running a child process with a timeout and capped output.
//!
//! Used for the uploader of the deposit and for confined commands. The child gets its own
//! process group; when it exits, times out or its caller gives up, the whole group is killed,
//! so nothing it started in the background outlives it (a child that leaves the group with
//! `setsid` is beyond this; confined commands are also bounded by their sandbox).

#[cfg(target_os = "linux")]
pub(crate) mod supervise;

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
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
    let cap = limits.max_output;
    let stdout = capture(child.stdout.take(), control, Stream::Stdout, cap);
    let stderr = capture(child.stderr.take(), control, Stream::Stderr, cap);
    let stopped = || control.stopped().or_else(|| watch.and_then(|w| w()));
    let (status, ended) = wait_for(&mut child, limits.timeout, &stopped);
    // Whatever the child left running in its group goes with it.
    let _ = rustix::process::kill_process_group(group, Signal::KILL);
    let status = status.map_err(|e| Error::io("wait", program.as_str(), e))?;
    stdout.wait();
    stderr.wait();
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

/// Wait for `child`; kill its group at `timeout`, or when `stopped` gives a reason.
fn wait_for(
    child: &mut Child,
    timeout: Duration,
    stopped: Watch<'_>,
) -> (std::io::Result<ExitStatus>, Ended) {
    let group = Pid::from_child(child);
    let (done_tx, done_rx) = mpsc::channel::<()>();
    // A timeout too large to add is as good as none (about 30 years is plenty).
    let now = Instant::now();
    let deadline = now
        .checked_add(timeout)
        .or_else(|| now.checked_add(Duration::from_secs(1 << 30)))
        .unwrap_or(now);
    std::thread::scope(|scope| {
        // A watchdog kills the group at the deadline or when stopped, unless the child is done.
        let watchdog = scope.spawn(move || {
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match done_rx.recv_timeout(left.min(WATCH_INTERVAL)) {
                    Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() >= deadline => {
                        let _ = rustix::process::kill_process_group(group, Signal::KILL);
                        return Ended::TimedOut;
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        if let Some(why) = stopped() {
                            let _ = rustix::process::kill_process_group(group, Signal::KILL);
                            return Ended::Stopped(why);
                        }
                    }
                    _ => return Ended::Exited,
                }
            }
        });
        let status = child.wait();
        let _ = done_tx.send(());
        (status, watchdog.join().unwrap_or(Ended::Exited))
    })
}

/// How long the pipes may stay open after the process group was killed (by a process that
/// left the group): after that, what was read so far is taken and the reader is abandoned.
const PIPE_GRACE: Duration = Duration::from_millis(500);

/// A pipe being read on its own thread into a [`Control`].
struct Capture {
    eof: mpsc::Receiver<()>,
}

impl Capture {
    /// Wait until the pipe ended, or the grace passed (what was read so far is kept).
    fn wait(self) {
        let _ = self.eof.recv_timeout(PIPE_GRACE);
    }
}

/// Read a pipe to its end on a thread, keeping at most `cap` bytes of it in `control`.
fn capture<R: Read + Send + 'static>(
    pipe: Option<R>,
    control: &Control,
    stream: Stream,
    cap: usize,
) -> Capture {
    let (eof_tx, eof) = mpsc::channel();
    let control = control.clone();
    std::thread::spawn(move || {
        if let Some(mut pipe) = pipe {
            let mut buf = [0u8; 8192];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => control.keep(stream, &buf[..n], cap),
                }
            }
        }
        let _ = eof_tx.send(());
    });
    Capture { eof }
}
