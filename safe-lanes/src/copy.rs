//! Streaming copy into an open file, counting and hashing (SHA-256) on the way.
//!
//! Small inputs are hashed inline. Once an input passes [`PIPELINE_AFTER`] bytes, hashing
//! moves to a second thread that reads back what was just written (from the page cache, with
//! `pread`) while this thread keeps reading and writing, and then runs the caller's `finish`
//! step (the `fsync` of a durable save) while the hash catches up. A large save therefore takes
//! about as long as the slower of "write + fsync" and "hash", not their sum, and holds no more
//! than one chunk in memory.

use std::io::{self, Read};
use std::os::fd::BorrowedFd;
use std::sync::{Condvar, Mutex};

use sha2::{Digest, Sha256};

use crate::beneath::shown_fd;
use crate::digest::finish_hex;
use crate::error::{Error, Result, Shown};

/// The largest read/write chunk.
const CHUNK: usize = 256 * 1024;
/// The first read buffer: a 4 KiB save should not zero 256 KiB.
const FIRST_CHUNK: usize = 16 * 1024;
/// Inputs larger than this are hashed on a second thread.
const PIPELINE_AFTER: u64 = 4 * 1024 * 1024;

/// What a copy produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Copied {
    /// Bytes written.
    pub(crate) bytes: u64,
    /// Lowercase hex SHA-256 of the bytes.
    pub(crate) sha256: String,
}

/// Copy all of `reader` into `out` (open for reading and writing, at offset 0), refusing
/// (`too_large`) as soon as more than `cap` bytes arrive, then run `finish` (for example an
/// `fsync`) before returning. On error, what was written stays in `out`: callers write into a
/// file that has no name yet and drop it.
///
/// With a cap, no more than `cap + 1` bytes are ever read from `reader` (the extra byte proves
/// the input too large) and no more than `cap` written, however long the input goes on: a
/// source file that grows while it is copied costs at most the cap.
pub(crate) fn copy_hashed(
    reader: &mut dyn Read,
    out: BorrowedFd<'_>,
    cap: Option<u64>,
    finish: impl FnOnce() -> Result<()>,
) -> Result<Copied> {
    let mut hasher = Sha256::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; FIRST_CHUNK];
    loop {
        let want = room(buf.len(), total, cap);
        let n = fill(reader, &mut buf[..want])?;
        if n == 0 {
            finish()?;
            return Ok(Copied {
                bytes: total,
                sha256: finish_hex(hasher),
            });
        }
        total += n as u64;
        check_cap(total, cap)?;
        write_all(out, &buf[..n])?;
        hasher.update(&buf[..n]);
        if total > PIPELINE_AFTER {
            buf.resize(CHUNK, 0);
            return read_back(reader, out, cap, finish, hasher, total, buf);
        }
        if n == buf.len() && buf.len() < CHUNK {
            buf.resize(buf.len() * 2, 0);
        }
    }
}

/// How far the writer has got, shared with the hashing thread.
struct Progress {
    state: Mutex<(u64, Phase)>,
    changed: Condvar,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Writing,
    Done,
    Failed,
}

impl Progress {
    fn set(&self, written: u64, phase: Phase) {
        *crate::sync::lock(&self.state) = (written, phase);
        self.changed.notify_one();
    }

    /// Wait until more than `hashed` bytes are written or writing has ended.
    fn wait_beyond(&self, hashed: u64) -> (u64, Phase) {
        let guard = crate::sync::lock(&self.state);
        let guard = self
            .changed
            .wait_while(guard, |(written, phase)| {
                *written <= hashed && *phase == Phase::Writing
            })
            .unwrap_or_else(|p| p.into_inner());
        *guard
    }
}

/// The rest of a large copy: this thread reads, writes and finishes; a scoped thread hashes
/// what is already on disk.
fn read_back(
    reader: &mut dyn Read,
    out: BorrowedFd<'_>,
    cap: Option<u64>,
    finish: impl FnOnce() -> Result<()>,
    hasher: Sha256,
    mut total: u64,
    mut buf: Vec<u8>,
) -> Result<Copied> {
    let progress = Progress {
        state: Mutex::new((total, Phase::Writing)),
        changed: Condvar::new(),
    };
    let hashed_from = total;
    std::thread::scope(|scope| {
        let worker = scope.spawn(|| hash_written(out, &progress, hasher, hashed_from));
        let written = (|| {
            loop {
                let want = room(buf.len(), total, cap);
                let n = fill(reader, &mut buf[..want])?;
                if n == 0 {
                    break;
                }
                total += n as u64;
                check_cap(total, cap)?;
                write_all(out, &buf[..n])?;
                progress.set(total, Phase::Writing);
            }
            progress.set(total, Phase::Done);
            finish()
        })();
        if written.is_err() {
            progress.set(total, Phase::Failed);
        }
        let hashed = worker.join().unwrap_or_else(|_| {
            Err(Error::io(
                "hash",
                shown_fd(out),
                io::Error::other("hashing panicked"),
            ))
        });
        written?;
        Ok(Copied {
            bytes: total,
            sha256: finish_hex(hashed?),
        })
    })
}

/// Hash `out` from `from` onwards, following the writer's progress.
fn hash_written(
    out: BorrowedFd<'_>,
    progress: &Progress,
    mut hasher: Sha256,
    from: u64,
) -> Result<Sha256> {
    let mut buf = vec![0u8; CHUNK];
    let mut hashed = from;
    loop {
        let (written, phase) = progress.wait_beyond(hashed);
        match phase {
            Phase::Failed => return Ok(hasher),
            Phase::Done if hashed >= written => return Ok(hasher),
            _ => {}
        }
        let want = (written - hashed).min(CHUNK as u64) as usize;
        let n = loop {
            match rustix::io::pread(out, &mut buf[..want], hashed) {
                Err(rustix::io::Errno::INTR) => continue,
                other => break other.map_err(|e| Error::io("pread", shown_fd(out), e))?,
            }
        };
        if n == 0 {
            return Err(Error::io(
                "pread",
                shown_fd(out),
                io::Error::other("the file shrank while it was written"),
            ));
        }
        hasher.update(&buf[..n]);
        hashed += n as u64;
    }
}

fn write_all(out: BorrowedFd<'_>, bytes: &[u8]) -> Result<()> {
    crate::fd::write_all(out, bytes).map_err(|e| Error::io("write", shown_fd(out), e))
}

/// How much of a buffer of `len` bytes the next read may fill, `total` bytes in: never past
/// `cap + 1` bytes in all.
fn room(len: usize, total: u64, cap: Option<u64>) -> usize {
    match cap {
        Some(limit) => {
            let left = limit.saturating_add(1).saturating_sub(total);
            usize::try_from(left).map_or(len, |left| left.min(len))
        }
        None => len,
    }
}

fn check_cap(total: u64, cap: Option<u64>) -> Result<()> {
    match cap {
        Some(limit) if total > limit => Err(Error::TooLarge {
            what: "the content, in bytes,",
            limit,
        }),
        _ => Ok(()),
    }
}

/// Read until `buf` is full or the input ends; returns the bytes read.
fn fill(reader: &mut dyn Read, buf: &mut [u8]) -> Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(received(e)),
        }
    }
    Ok(filled)
}

/// The error of a reader that failed: `io`, unless the reader carries a library error in its
/// `io::Error` (a fetch's `fetch_failed` when the transfer breaks), which passes unchanged.
fn received(e: io::Error) -> Error {
    const WHAT: &str = "the content being received";
    if !e.get_ref().is_some_and(|inner| inner.is::<Error>()) {
        // The input is not what it claims to be (invalid base64 from an adapter): a
        // refusal of the content, recorded as such, not a failure of the system.
        if e.kind() == io::ErrorKind::InvalidData {
            return Error::InvalidArgument {
                what: Shown::text("the content"),
                why: Shown::message(&e.to_string()).as_str().to_owned(),
            };
        }
        return Error::io("read", WHAT, e);
    }
    match e.into_inner().map(|inner| inner.downcast::<Error>()) {
        Some(Ok(carried)) => *carried,
        _ => Error::io("read", WHAT, io::Error::other("the reader failed")),
    }
}

/// Hash everything `reader` yields (for files that are only read, such as upload sources).
pub(crate) fn sha256_of(reader: &mut dyn Read) -> Result<Copied> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = fill(reader, &mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        total += n as u64;
    }
    Ok(Copied {
        bytes: total,
        sha256: finish_hex(hasher),
    })
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Seek};
    use std::os::fd::AsFd;

    use super::*;

    /// A reader that hands out its bytes in reads of uneven sizes (1 byte to a little over a
    /// chunk), as a socket or a pipe does.
    struct Uneven<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Uneven<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.step = (self.step * 7 + 13) % (CHUNK + 4096) + 1;
            let n = self.step.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn content(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i % 251) as u8 ^ (i >> 17) as u8)
            .collect()
    }

    /// Sizes around the point where hashing moves to the second thread and around the chunk
    /// size: the file holds the input and the hash is the input's.
    #[test]
    fn every_size_is_written_and_hashed_whole_inline_or_pipelined() {
        let limit = PIPELINE_AFTER as usize;
        for len in [
            0,
            1,
            limit,
            limit + 1,
            limit + CHUNK - 1,
            limit + CHUNK * 3 + 17,
            24 << 20,
        ] {
            let data = content(len);
            let mut file = tempfile::tempfile().unwrap();
            let mut reader = Uneven {
                data: &data,
                step: len,
            };
            let copied = copy_hashed(&mut reader, file.as_fd(), None, || Ok(())).unwrap();
            assert_eq!(copied.bytes, len as u64, "{len}");
            assert_eq!(copied.sha256, crate::digest::sha256_hex(&data), "{len}");
            let mut back = Vec::new();
            file.rewind().unwrap();
            file.read_to_end(&mut back).unwrap();
            assert!(back == data, "the file holds the input ({len} bytes)");
        }
    }
}
