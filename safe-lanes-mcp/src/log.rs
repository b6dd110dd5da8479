//! Diagnostics that never hold up a tool call.
//!
//! A host captures the server's stderr through a pipe it may read slowly, or a log file on a
//! disk that may be full. A write to either can block or fail, and a tool call must not wait
//! for it. So every log line goes into a bounded queue, written to stderr by a thread of its
//! own; a line that finds the queue full is dropped and counted, and so is one the writer
//! could not write. When writing works again, the next line is preceded by one saying how
//! many were lost.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

/// Lines queued at most before new ones are dropped.
const QUEUE: usize = 1024;

/// The writer every log line goes through: cheap to clone, never blocks.
#[derive(Clone, Debug)]
pub(crate) struct Log {
    queue: SyncSender<Vec<u8>>,
    dropped: Arc<AtomicU64>,
}

impl Log {
    /// Start the thread that writes the queue to `out` (stderr).
    pub(crate) fn start(out: impl Write + Send + 'static) -> Self {
        let (queue, lines) = sync_channel(QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&dropped);
        let spawned = std::thread::Builder::new()
            .name("log".into())
            .spawn(move || write_lines(out, &lines, &counter));
        if spawned.is_err() {
            // No writer: every line is dropped (and counted), nothing waits.
            dropped.fetch_add(1, Ordering::Relaxed);
        }
        Self { queue, dropped }
    }

    /// Queue `line` (a whole line, newline included), or drop it when the queue is full.
    pub(crate) fn line(&self, line: Vec<u8>) {
        match self.queue.try_send(line) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// How many lines were dropped and not yet reported.
    #[cfg(test)]
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

fn write_lines(mut out: impl Write, lines: &Receiver<Vec<u8>>, dropped: &AtomicU64) {
    for line in lines {
        let lost = dropped.swap(0, Ordering::Relaxed);
        if lost > 0 {
            let note = format!(
                "safe-lanes-mcp: {lost} log line(s) were dropped: stderr was not taking them\n"
            );
            if out.write_all(note.as_bytes()).is_err() {
                dropped.fetch_add(lost, Ordering::Relaxed);
            }
        }
        if out.write_all(&line).and_then(|()| out.flush()).is_err() {
            dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A `tracing` writer for one event: collects it, then queues it whole.
#[derive(Debug)]
pub(crate) struct Event {
    log: Log,
    buf: Vec<u8>,
}

impl Write for Event {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if !self.buf.is_empty() {
            self.log.line(std::mem::take(&mut self.buf));
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Log {
    type Writer = Event;

    fn make_writer(&'a self) -> Event {
        Event {
            log: self.clone(),
            buf: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that blocks until told to go on, then takes everything.
    struct Stuck {
        go: std::sync::mpsc::Receiver<bool>,
        out: Arc<std::sync::Mutex<Vec<u8>>>,
    }

    impl Write for Stuck {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            match self.go.recv() {
                Ok(true) => {
                    self.out.lock().unwrap().extend_from_slice(bytes);
                    Ok(bytes.len())
                }
                _ => Err(std::io::ErrorKind::StorageFull.into()),
            }
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stuck_stderr_never_blocks_and_the_lost_lines_are_reported() {
        let (go, wait) = std::sync::mpsc::channel();
        let out = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = Log::start(Stuck {
            go: wait,
            out: Arc::clone(&out),
        });
        let started = std::time::Instant::now();
        let mut logged = 0u64;
        for i in 0..QUEUE * 3 {
            log.line(format!("line {i}\n").into_bytes());
            logged += 1;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "never waited"
        );
        // Writing works again: what was queued is written, the loss said first.
        for _ in 0..QUEUE * 8 {
            let _ = go.send(true);
        }
        let text = || String::from_utf8_lossy(&out.lock().unwrap()).into_owned();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !text().contains("after") {
            assert!(std::time::Instant::now() < deadline, "the queue drains");
            // Queued once the writer has made room.
            log.line(b"after\n".to_vec());
            logged += 1;
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        drop(go);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let text = text();
        assert!(text.contains("log line(s) were dropped"), "{text}");
        // Every line logged was written, or counted as dropped.
        let written = text
            .lines()
            .filter(|l| l.starts_with("line ") || *l == "after")
            .count() as u64;
        let reported: u64 = text
            .lines()
            .filter_map(|l| l.strip_prefix("safe-lanes-mcp: "))
            .filter_map(|l| l.split(' ').next()?.parse::<u64>().ok())
            .sum();
        assert!(written < logged, "{written} of {logged}");
        assert_eq!(written + reported + log.dropped(), logged, "{text}");
    }
}
