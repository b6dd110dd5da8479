//! A handle on a running operation from another thread: stop it, and read a command's output
//! while it comes.
//!
//! A gateway hands a [`Control`] to an operation it may have to abandon (a call the client
//! cancelled, a background job the agent stops) and keeps a clone. [`Control::stop`] asks the
//! operation to end as soon as it can:
//!
//! - a child process ([`Confined::run_with`](crate::Confined::run_with)) has its whole process
//!   group killed within the watch period (100 ms), and its outcome says why in `stopped`;
//! - content being received ([`Control::reader`]) fails at its next read, so a lane that was
//!   saving it publishes nothing and leaves nothing behind.
//!
//! The output of a command is kept here, each stream up to the command's cap, so a caller can
//! read what is new since it last looked ([`Control::output_since`]) while the command runs.

use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::sync::lock;

/// A shared handle to stop an operation and to watch a command's output (module docs).
///
/// Cloning gives another handle on the same operation.
#[derive(Clone, Debug)]
pub struct Control {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    started: Instant,
    stop: Mutex<Option<String>>,
    output: Mutex<Streams>,
    /// Signalled (with `output` held) when output is kept, the process is spawned, or the
    /// output ends.
    changed: Condvar,
    spawned: AtomicBool,
}

/// What a command printed so far, each stream up to its cap.
#[derive(Clone, Debug, Default)]
pub(crate) struct Streams {
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: Vec<u8>,
    /// Whether output past a cap was dropped.
    pub(crate) truncated: bool,
    /// Whether the output ended: both pipes were read to their end, or the operation
    /// returned without starting a process.
    pub(crate) ended: bool,
    /// The latest bytes of each stream, kept past the cap too (at most [`LATEST`] each): what
    /// a person watching the command sees last.
    latest: [Vec<u8>; 2],
    /// Every byte the command printed, kept or not.
    seen: usize,
}

/// How much of each stream's latest output is kept for [`Control::tails`].
const LATEST: usize = 4096;

/// Which stream of a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout = 0,
    Stderr = 1,
}

/// How much of each stream a reader has seen (from [`Control::output_since`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mark {
    stdout: usize,
    stderr: usize,
}

/// What [`Control::wait_output`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    /// There is output past the mark.
    New,
    /// Nothing is past the mark and nothing more will come: the command's output ended (or
    /// the operation returned without starting one).
    Ended,
    /// The time given passed with neither.
    TimedOut,
}

/// Output that is new since a [`Mark`] (lossy UTF-8).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NewOutput {
    /// New standard output.
    pub stdout: String,
    /// New standard error.
    pub stderr: String,
    /// Whether output past a cap has been dropped (so far, in all).
    pub truncated: bool,
}

impl Default for Control {
    fn default() -> Self {
        Self::new()
    }
}

impl Control {
    /// A handle for an operation starting now.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                started: Instant::now(),
                stop: Mutex::new(None),
                output: Mutex::new(Streams::default()),
                changed: Condvar::new(),
                spawned: AtomicBool::new(false),
            }),
        }
    }

    /// Ask the operation to stop, saying why (the first reason given is kept).
    pub fn stop(&self, why: &str) {
        lock(&self.inner.stop).get_or_insert_with(|| why.to_owned());
    }

    /// Why the operation was asked to stop, if it was.
    pub fn stopped(&self) -> Option<String> {
        lock(&self.inner.stop).clone()
    }

    /// Time since the handle was made.
    pub fn elapsed(&self) -> Duration {
        self.inner.started.elapsed()
    }

    /// The output a command printed after `mark`, and the mark to give next time. A split
    /// multi-byte character is completed on the next call rather than shown broken.
    pub fn output_since(&self, mark: Mark) -> (NewOutput, Mark) {
        let output = lock(&self.inner.output);
        let (stdout, out_end) = text_since(&output.stdout, mark.stdout);
        let (stderr, err_end) = text_since(&output.stderr, mark.stderr);
        let new = NewOutput {
            stdout,
            stderr,
            truncated: output.truncated,
        };
        let next = Mark {
            stdout: out_end,
            stderr: err_end,
        };
        (new, next)
    }

    /// The last `max` bytes (at most 4 KiB) of each stream so far, past the cap too (lossy
    /// UTF-8), and how many bytes the command printed in all (which grows with every output).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn tails(&self, max: usize) -> (String, String, usize) {
        let output = lock(&self.inner.output);
        let end =
            |s: &[u8]| String::from_utf8_lossy(&s[s.len().saturating_sub(max)..]).into_owned();
        (
            end(&output.latest[Stream::Stdout as usize]),
            end(&output.latest[Stream::Stderr as usize]),
            output.seen,
        )
    }

    /// Wait, at most `timeout`, until there is output past `mark` or the output has ended:
    /// woken when it happens, so a caller copying a command's output as it comes learns of
    /// its end at once rather than at its next look.
    pub fn wait_output(&self, mark: Mark, timeout: Duration) -> Waited {
        let deadline = Instant::now().checked_add(timeout);
        let mut output = lock(&self.inner.output);
        loop {
            if whole_text_since(&output.stdout, mark.stdout)
                || whole_text_since(&output.stderr, mark.stderr)
            {
                return Waited::New;
            }
            if output.ended {
                return Waited::Ended;
            }
            let left = match deadline {
                Some(deadline) => deadline.saturating_duration_since(Instant::now()),
                // Too far to tell: a day at a time.
                None => Duration::from_secs(86_400),
            };
            if left.is_zero() {
                return Waited::TimedOut;
            }
            output = match self.inner.changed.wait_timeout(output, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// `reader`, failing at its next read once the operation is asked to stop (`io` error
    /// `"stopped: <why>"`): a lane saving the content then publishes nothing.
    pub fn reader<R: Read>(&self, reader: R) -> StopReader<R> {
        StopReader {
            control: self.clone(),
            reader,
        }
    }

    /// Whether the command has been started (its process exists, or existed).
    pub fn spawned(&self) -> bool {
        self.inner.spawned.load(Ordering::Acquire)
    }

    /// The command's process was started.
    pub(crate) fn set_spawned(&self) {
        let _output = lock(&self.inner.output);
        self.inner.spawned.store(true, Ordering::Release);
        self.inner.changed.notify_all();
    }

    /// Wait until the command's process was started or the output ended (the operation
    /// returned without starting one), whichever comes first.
    pub(crate) fn wait_spawned_or_ended(&self) {
        let mut output = lock(&self.inner.output);
        while !self.spawned() && !output.ended {
            output = match self.inner.changed.wait(output) {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            };
        }
    }

    /// No more output will come (both pipes ended, or no process was started); wakes
    /// [`Control::wait_output`]. Idempotent.
    pub(crate) fn end_output(&self) {
        lock(&self.inner.output).ended = true;
        self.inner.changed.notify_all();
    }

    /// Keep `bytes` of `stream`, up to `cap` bytes of that stream in all.
    pub(crate) fn keep(&self, stream: Stream, bytes: &[u8], cap: usize) {
        let mut output = lock(&self.inner.output);
        let kept = match stream {
            Stream::Stdout => &mut output.stdout,
            Stream::Stderr => &mut output.stderr,
        };
        let room = cap.saturating_sub(kept.len());
        kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
        output.truncated |= bytes.len() > room;
        let latest = &mut output.latest[stream as usize];
        latest.extend_from_slice(&bytes[bytes.len().saturating_sub(LATEST)..]);
        let over = latest.len().saturating_sub(LATEST);
        latest.drain(..over);
        output.seen += bytes.len();
        drop(output);
        self.inner.changed.notify_all();
    }

    /// A copy of everything kept of both streams (it stays readable by
    /// [`Control::output_since`] after the command ended).
    pub(crate) fn output(&self) -> Streams {
        lock(&self.inner.output).clone()
    }
}

/// A reader that fails once its [`Control`] is asked to stop (see [`Control::reader`]).
#[derive(Debug)]
pub struct StopReader<R> {
    control: Control,
    reader: R,
}

impl<R: Read> Read for StopReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(why) = self.control.stopped() {
            return Err(io::Error::other(format!("stopped: {why}")));
        }
        self.reader.read(buf)
    }
}

/// Whether [`text_since`] would give something: more than the start of a character whose
/// other bytes have not come yet.
fn whole_text_since(bytes: &[u8], from: usize) -> bool {
    let new = bytes.get(from..).unwrap_or_default();
    match std::str::from_utf8(new) {
        Ok(text) => !text.is_empty(),
        Err(e) => e.error_len().is_some() || e.valid_up_to() > 0,
    }
}

/// The text of `bytes[from..]` up to the last whole character, and where it ends.
fn text_since(bytes: &[u8], from: usize) -> (String, usize) {
    let new = bytes.get(from..).unwrap_or_default();
    let whole = match std::str::from_utf8(new) {
        Ok(_) => new.len(),
        // An incomplete character at the very end waits for its other bytes.
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => new.len(),
    };
    let text = String::from_utf8_lossy(&new[..whole]).into_owned();
    (text, from + whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: the latest output a person watching sees froze once a stream reached its
    /// cap (the kept part ends there); it follows the command past the cap.
    #[test]
    fn the_latest_output_follows_past_the_cap() {
        let control = Control::new();
        control.keep(Stream::Stdout, b"early\n", 10);
        control.keep(Stream::Stdout, b"later line\n", 10);
        control.keep(Stream::Stderr, b"oops\n", 10);
        let (stdout, stderr, seen) = control.tails(17);
        assert_eq!(
            (stdout.as_str(), stderr.as_str()),
            ("early\nlater line\n", "oops\n")
        );
        assert_eq!(seen, 22);
        control.keep(Stream::Stdout, &vec![b'x'; 3 * LATEST], 10);
        control.keep(Stream::Stdout, b"\nlast\n", 10);
        let (stdout, _, seen) = control.tails(8);
        assert_eq!(stdout, "xx\nlast\n");
        assert_eq!(seen, 22 + 3 * LATEST + 6);
        assert_eq!(
            control.output().stdout,
            b"early\nlate",
            "the kept part stays capped"
        );
    }

    #[test]
    fn new_output_is_read_once_and_a_split_character_waits_for_its_end() {
        let control = Control::new();
        control.keep(Stream::Stdout, b"one \xc3", 100);
        let (first, mark) = control.output_since(Mark::default());
        assert_eq!(first.stdout, "one ");
        control.keep(Stream::Stdout, b"\xa9 two", 100);
        control.keep(Stream::Stderr, b"warn", 100);
        let (second, mark) = control.output_since(mark);
        assert_eq!(
            (second.stdout.as_str(), second.stderr.as_str()),
            ("é two", "warn")
        );
        let (third, _) = control.output_since(mark);
        assert_eq!(third, NewOutput::default());
    }

    #[test]
    fn a_waiting_reader_is_woken_by_output_and_by_the_end() {
        let control = Control::new();
        let long = Duration::from_secs(600);
        assert_eq!(
            control.wait_output(Mark::default(), Duration::from_millis(1)),
            Waited::TimedOut
        );
        std::thread::scope(|s| {
            let writer = s.spawn(|| control.keep(Stream::Stderr, b"x", 100));
            assert_eq!(control.wait_output(Mark::default(), long), Waited::New);
            writer.join().unwrap();
        });
        let (_, mark) = control.output_since(Mark::default());
        // Half a character is not output yet: the reader is not woken for it.
        control.keep(Stream::Stdout, b"\xc3", 100);
        assert_eq!(
            control.wait_output(mark, Duration::from_millis(1)),
            Waited::TimedOut
        );
        std::thread::scope(|s| {
            let ender = s.spawn(|| control.end_output());
            assert_eq!(control.wait_output(mark, long), Waited::Ended);
            ender.join().unwrap();
        });
        // The end does not hide output not read yet.
        assert_eq!(control.wait_output(Mark::default(), long), Waited::New);
    }

    #[test]
    fn each_stream_is_capped_and_the_cut_is_reported() {
        let control = Control::new();
        control.keep(Stream::Stderr, b"abcdef", 4);
        control.keep(Stream::Stderr, b"gh", 4);
        let kept = control.output();
        assert_eq!(
            (kept.stderr.as_slice(), kept.truncated),
            (&b"abcd"[..], true)
        );
    }

    #[test]
    fn a_stopped_reader_fails_and_the_first_reason_is_kept() {
        let control = Control::new();
        let mut reader = control.reader(&b"content"[..]);
        let mut buf = [0u8; 3];
        assert_eq!(reader.read(&mut buf).unwrap(), 3);
        control.stop("cancelled by the client");
        control.stop("another reason");
        let err = reader.read(&mut buf).unwrap_err();
        assert_eq!(err.to_string(), "stopped: cancelled by the client");
        assert_eq!(
            control.stopped().as_deref(),
            Some("cancelled by the client")
        );
    }
}
