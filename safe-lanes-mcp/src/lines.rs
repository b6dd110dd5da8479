//! Input split into lines of bounded length, fed in chunks as they are read.
//!
//! A line is kept in memory only up to the limit: past it, what was kept is dropped (after
//! looking for the request id in it, [`crate::prefix`]) and the rest is skipped up to the
//! newline, so no line is ever held whole past the limit.

use serde_json::Value;

/// One line of input.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A line within the limit, without its newline.
    Whole(Vec<u8>),
    /// A line past the limit, with the request id its first part shows (or `null`).
    TooLong(Value),
}

/// Splits chunks of input into [`Line`]s of at most `max` bytes.
#[derive(Debug)]
pub(crate) struct Lines {
    max: usize,
    /// The start of the current line, up to `max` bytes.
    kept: Vec<u8>,
    /// Inside a line past the limit: the id to answer it with, once its end is read.
    skipping: Option<Value>,
}

impl Lines {
    /// Lines of at most `max` bytes (not counting the newline).
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max,
            kept: Vec::new(),
            skipping: None,
        }
    }

    /// Take in `chunk`, handing each line it completes to `line`.
    pub(crate) fn feed(&mut self, mut chunk: &[u8], line: &mut impl FnMut(Line)) {
        while !chunk.is_empty() {
            let newline = chunk.iter().position(|&b| b == b'\n');
            if self.skipping.is_some() {
                match newline {
                    Some(at) => {
                        chunk = &chunk[at + 1..];
                        line(Line::TooLong(self.skipping.take().unwrap_or(Value::Null)));
                    }
                    None => return,
                }
                continue;
            }
            let end = newline.unwrap_or(chunk.len());
            let room = self.max.saturating_sub(self.kept.len());
            if end > room {
                // Past the limit: keep what fits to find the id, then skip the rest.
                self.kept.extend_from_slice(&chunk[..room]);
                let id = crate::prefix::request_id(&self.kept).unwrap_or(Value::Null);
                self.kept = Vec::new();
                self.skipping = Some(id);
                chunk = &chunk[room..];
                continue;
            }
            self.kept.extend_from_slice(&chunk[..end]);
            match newline {
                Some(at) => {
                    chunk = &chunk[at + 1..];
                    line(Line::Whole(std::mem::take(&mut self.kept)));
                }
                None => return,
            }
        }
    }

    /// The input ended: the last line, if it had no newline.
    pub(crate) fn finish(self, line: &mut impl FnMut(Line)) {
        if let Some(id) = self.skipping {
            line(Line::TooLong(id));
        } else if !self.kept.is_empty() {
            line(Line::Whole(self.kept));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn split(max: usize, chunks: &[&[u8]]) -> Vec<Line> {
        let mut lines = Lines::new(max);
        let mut out = Vec::new();
        for chunk in chunks {
            lines.feed(chunk, &mut |l| out.push(l));
        }
        lines.finish(&mut |l| out.push(l));
        out
    }

    #[test]
    fn lines_are_split_across_chunks_and_the_limit_is_exact() {
        let whole = |s: &str| Line::Whole(s.as_bytes().to_vec());
        assert_eq!(
            split(5, &[b"ab", b"c\nde", b"\n\nxyz"]),
            [whole("abc"), whole("de"), whole(""), whole("xyz")]
        );
        assert_eq!(split(5, &[b"12345\n"]), [whole("12345")], "at the limit");
        assert_eq!(
            split(5, &[b"123456\nok\n"]),
            [Line::TooLong(Value::Null), whole("ok")],
            "one byte over"
        );
    }

    #[test]
    fn a_long_line_is_skipped_in_pieces_and_answered_with_its_id() {
        let head = br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"text":""#;
        let mut chunks: Vec<&[u8]> = vec![head];
        let filler = [b'x'; 100];
        chunks.extend(std::iter::repeat_n(&filler[..], 50));
        chunks.push(b"\"}}\n{\"id\":6}\n");
        let lines = split(200, &chunks);
        assert_eq!(
            lines,
            [
                Line::TooLong(json!(5)),
                Line::Whole(br#"{"id":6}"#.to_vec())
            ]
        );
        assert_eq!(
            split(3, &[b"abcdef"]),
            [Line::TooLong(Value::Null)],
            "at the end"
        );
    }
}
