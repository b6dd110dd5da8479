//! Running a child process with a timeout and capped output.
//!
//! Used for the uploader of the deposit and for confined commands. The child gets its own
//! process group; when it exits, times out or its caller gives up, the whole group is killed,
//! so nothing it started in the background outlives it (a child that leaves the group with
//! `setsid` is beyond this; confined commands are also bounded by their sandbox).

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};
use serde::Serialize;

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
}

impl Outcome {
    /// Whether the process exited with status 0 on its own.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && self.stopped.is_none()
    }
}

/// A check run while the process runs: `Some(why)` stops it.
pub(crate) type Watch<'w> = &'w (dyn Fn() -> Option<String> + Sync);

/// How often `watch` is called.
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// Spawn `command` (stdin from `/dev/null`, stdout and stderr captured, in a new process
/// group), wait at most `limits.timeout` — calling `watch` every 100 ms, if given, and stopping
/// the process when it says so — and kill its process group when it is done.
pub(crate) fn run(
    command: &mut Command,
    limits: Limits,
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
    let group = Pid::from_child(&child);
    let stdout = capture(child.stdout.take(), limits.max_output);
    let stderr = capture(child.stderr.take(), limits.max_output);
    let (status, ended) = wait_for(&mut child, limits.timeout, watch);
    // Whatever the child left running in its group goes with it.
    let _ = rustix::process::kill_process_group(group, Signal::KILL);
    let status = status.map_err(|e| Error::io("wait", program.as_str(), e))?;
    let (stdout, out_cut) = stdout.take();
    let (stderr, err_cut) = stderr.take();
    Ok(Outcome {
        exit_code: status.code(),
        signal: status.signal(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        timed_out: ended == Ended::TimedOut,
        truncated: out_cut || err_cut,
        stopped: match ended {
            Ended::Stopped(why) => Some(why),
            _ => None,
        },
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

/// Wait for `child`; kill its group at `timeout`, or when `watch` says so.
fn wait_for(
    child: &mut Child,
    timeout: Duration,
    watch: Option<Watch<'_>>,
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
        // A watchdog kills the group at the deadline or on `watch`, unless the child is done.
        let watchdog = scope.spawn(move || {
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let wait = if watch.is_some() {
                    left.min(WATCH_EVERY)
                } else {
                    left
                };
                match done_rx.recv_timeout(wait) {
                    Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() >= deadline => {
                        let _ = rustix::process::kill_process_group(group, Signal::KILL);
                        return Ended::TimedOut;
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        if let Some(why) = watch.and_then(|w| w()) {
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

/// A pipe being read on its own thread.
struct Capture {
    kept: Arc<Mutex<(Vec<u8>, bool)>>,
    eof: mpsc::Receiver<()>,
}

impl Capture {
    /// What was read (and whether some was dropped), once the pipe ended or the grace passed.
    fn take(self) -> (Vec<u8>, bool) {
        let _ = self.eof.recv_timeout(PIPE_GRACE);
        std::mem::take(&mut *self.kept.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Read a pipe to its end on a thread, keeping at most `cap` bytes.
fn capture<R: Read + Send + 'static>(pipe: Option<R>, cap: usize) -> Capture {
    let kept = Arc::new(Mutex::new((Vec::new(), false)));
    let (eof_tx, eof) = mpsc::channel();
    let shared = Arc::clone(&kept);
    std::thread::spawn(move || {
        if let Some(mut pipe) = pipe {
            let mut buf = [0u8; 8192];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let mut kept = shared.lock().unwrap_or_else(|p| p.into_inner());
                        let room = cap.saturating_sub(kept.0.len());
                        kept.0.extend_from_slice(&buf[..n.min(room)]);
                        kept.1 |= n > room;
                    }
                }
            }
        }
        let _ = eof_tx.send(());
    });
    Capture { kept, eof }
}
