//! The log's lines read without holding the log: backwards from its end, a block at a time
//! (for the newest entries), or forwards, one line at a time (for a summary). Either way the
//! memory is a block and a line, whatever the log's size; a line longer than [`MAX_LINE`]
//! (no record is) is passed over.

use std::io::{BufRead, BufReader};
use std::os::fd::{AsFd, OwnedFd};

use crate::error::{Error, Result};
use crate::fd::ReadAt;

/// How much is read at once, going backwards.
const BLOCK: u64 = 64 * 1024;
/// The longest line read; a longer one is passed over.
pub(super) const MAX_LINE: usize = 4 << 20;

/// The whole lines of the log that end at or before `end`, newest first, each with the offset
/// where it begins.
pub(super) struct Backwards {
    fd: OwnedFd,
    /// Where `buf` begins in the log.
    pos: u64,
    /// The bytes from `pos` to the end of the newest line not yet given.
    buf: Vec<u8>,
    /// Whether the line at the end of `buf` is one too long to give.
    skipping: bool,
}

impl Backwards {
    /// The lines of the log `fd` of `size` bytes; a last line without its newline (one being
    /// written, or cut short) is not one.
    pub(super) fn new(fd: OwnedFd, size: u64) -> Result<Self> {
        let mut lines = Self {
            fd,
            pos: size,
            buf: Vec::new(),
            skipping: false,
        };
        // Up to the last newline: what follows it is a line not yet whole, passed over.
        loop {
            if let Some(at) = lines.buf.iter().rposition(|&b| b == b'\n') {
                lines.buf.truncate(at + 1);
                return Ok(lines);
            }
            if lines.pos == 0 {
                lines.buf.clear();
                return Ok(lines);
            }
            lines.buf.clear();
            lines.read_before()?;
        }
    }

    /// Where the whole lines end: a line appended next begins there.
    pub(super) fn end(&self) -> u64 {
        self.pos + self.buf.len() as u64
    }

    /// Read the block before `pos` in front of `buf`.
    fn read_before(&mut self) -> Result<()> {
        let take = BLOCK.min(self.pos);
        let start = self.pos - take;
        let mut block = vec![0; take as usize];
        let mut got = 0;
        while got < block.len() {
            let n = rustix::io::pread(self.fd.as_fd(), &mut block[got..], start + got as u64)
                .map_err(|e| Error::io("pread", "audit.jsonl", e))?;
            if n == 0 {
                break;
            }
            got += n;
        }
        block.truncate(got);
        block.extend_from_slice(&self.buf);
        self.buf = block;
        self.pos = start;
        Ok(())
    }
}

impl Iterator for Backwards {
    type Item = Result<(u64, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.buf.is_empty() && self.pos == 0 {
                return None;
            }
            // `buf` ends with the newline of the line to give; its start is after the newline
            // before it.
            let body = self.buf.len().saturating_sub(1);
            if let Some(at) = self.buf[..body].iter().rposition(|&b| b == b'\n') {
                let line = self.buf[at + 1..body].to_vec();
                let offset = self.pos + at as u64 + 1;
                self.buf.truncate(at + 1);
                if std::mem::take(&mut self.skipping) {
                    continue;
                }
                return Some(Ok((offset, line)));
            }
            if self.pos == 0 {
                let line = self.buf[..body].to_vec();
                self.buf.clear();
                if std::mem::take(&mut self.skipping) {
                    return None;
                }
                return Some(Ok((0, line)));
            }
            if self.buf.len() > MAX_LINE {
                // A line longer than any record: pass it over, keeping only its newline to find
                // where it begins.
                self.skipping = true;
                self.buf = vec![b'\n'];
            }
            if let Err(e) = self.read_before() {
                return Some(Err(e));
            }
        }
    }
}

/// Each whole line of the log `fd` from `offset` on, with the offset where it begins, one at a
/// time.
pub(super) fn forwards(fd: OwnedFd, offset: u64) -> impl Iterator<Item = Result<(u64, Vec<u8>)>> {
    let mut reader = BufReader::with_capacity(BLOCK as usize, ReadAtOwned::new(fd, offset));
    let mut at = offset;
    std::iter::from_fn(move || {
        loop {
            let mut line = Vec::new();
            let n = match std::io::Read::take(&mut reader, MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut line)
            {
                Ok(n) => n,
                Err(e) => return Some(Err(Error::io("read", "audit.jsonl", e))),
            };
            if n == 0 {
                return None;
            }
            let start = at;
            at += n as u64;
            if line.last() != Some(&b'\n') {
                if n > MAX_LINE {
                    // Too long to be a record: pass over the rest of it.
                    let mut rest = Vec::new();
                    loop {
                        rest.clear();
                        match std::io::Read::take(&mut reader, BLOCK).read_until(b'\n', &mut rest) {
                            Ok(0) => return None,
                            Ok(m) => {
                                at += m as u64;
                                if rest.last() == Some(&b'\n') {
                                    break;
                                }
                            }
                            Err(e) => return Some(Err(Error::io("read", "audit.jsonl", e))),
                        }
                    }
                    continue;
                }
                // A last line not yet whole.
                return None;
            }
            line.pop();
            return Some(Ok((start, line)));
        }
    })
}

/// A positional reader owning its descriptor.
struct ReadAtOwned {
    fd: OwnedFd,
    offset: u64,
}

impl ReadAtOwned {
    fn new(fd: OwnedFd, offset: u64) -> Self {
        Self { fd, offset }
    }
}

impl std::io::Read for ReadAtOwned {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut reader = ReadAt::new(self.fd.as_fd());
        reader.skip(self.offset);
        let n = reader.read(buf)?;
        self.offset += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn log(text: &[u8]) -> (OwnedFd, u64) {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(text).unwrap();
        (OwnedFd::from(file), text.len() as u64)
    }

    fn backwards(text: &[u8]) -> Vec<(u64, String)> {
        let (fd, size) = log(text);
        Backwards::new(fd, size)
            .unwrap()
            .map(|l| {
                let (at, line) = l.unwrap();
                (at, String::from_utf8(line).unwrap())
            })
            .collect()
    }

    #[test]
    fn lines_come_newest_first_with_their_offsets() {
        assert_eq!(
            backwards(b"a\nbb\n\nccc\ntorn"),
            [
                (6, "ccc".into()),
                (5, "".into()),
                (2, "bb".into()),
                (0, "a".into())
            ]
        );
        assert!(backwards(b"").is_empty());
        assert!(backwards(b"no newline").is_empty());
        let many: String = (0..50_000).map(|n| format!("line {n}\n")).collect();
        let lines = backwards(many.as_bytes());
        assert_eq!(lines.len(), 50_000);
        assert_eq!(lines[0].1, "line 49999");
        assert_eq!(lines[49_999], (0, "line 0".into()));
        let (at, line) = &lines[1234];
        assert_eq!(&many[*at as usize..][..line.len()], line);
    }

    #[test]
    fn forwards_reads_whole_lines_only() {
        let (fd, _) = log(b"a\nbb\ntorn");
        let lines: Vec<(u64, Vec<u8>)> = forwards(fd, 0).map(Result::unwrap).collect();
        assert_eq!(lines, [(0, b"a".to_vec()), (2, b"bb".to_vec())]);
        let (fd, _) = log(b"a\nbb\nc\n");
        let lines: Vec<(u64, Vec<u8>)> = forwards(fd, 2).map(Result::unwrap).collect();
        assert_eq!(lines, [(2, b"bb".to_vec()), (5, b"c".to_vec())]);
    }

    #[test]
    fn a_line_longer_than_any_record_is_passed_over() {
        let mut text = b"first\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', MAX_LINE + 3 * BLOCK as usize));
        text.extend_from_slice(b"\nlast\n");
        let lines = backwards(&text);
        let sizes: Vec<usize> = lines.iter().map(|(_, l)| l.len()).collect();
        assert!(
            lines.len() == 2 && lines[0].1 == "last" && lines[1] == (0, "first".into()),
            "{sizes:?}"
        );
        let (fd, _) = log(&text);
        let lines: Vec<Vec<u8>> = forwards(fd, 0).map(|l| l.unwrap().1).collect();
        let sizes: Vec<usize> = lines.iter().map(Vec::len).collect();
        assert!(lines == [b"first".to_vec(), b"last".to_vec()], "{sizes:?}");
    }
}
