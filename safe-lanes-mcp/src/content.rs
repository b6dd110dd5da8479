//! Content given inline to a tool, read as a stream: text as it is, base64 decoded a chunk
//! at a time, never into a second full-size buffer — from the argument, or from where the
//! transport left a long one ([`Spilled`]).

use std::io::{self, Read};
use std::sync::{Arc, OnceLock};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::reply::Failure;
use crate::spill::Spilled;

/// Base64 input decoded per read (a multiple of 4).
const CHUNK: usize = 64 << 10;

/// Where the string's bytes are.
#[derive(Debug)]
pub(crate) enum Source {
    /// Parsed with the request.
    Argument(String),
    /// Left in the request line by the transport.
    Spilled(Spilled),
}

impl Source {
    fn bytes(&self) -> &[u8] {
        match self {
            Source::Argument(text) => text.as_bytes(),
            Source::Spilled(spilled) => spilled.bytes(),
        }
    }
}

/// The content's bytes, as a [`Read`].
#[derive(Debug)]
pub(crate) struct ContentReader {
    source: Source,
    /// The part of the source still to read (for base64, trimmed of white space).
    at: usize,
    end: usize,
    /// Decoded bytes not yet read, for base64.
    decoded: Option<Vec<u8>>,
    taken: usize,
    invalid: Arc<OnceLock<String>>,
}

impl ContentReader {
    /// The text as it is.
    pub(crate) fn text(source: Source) -> Self {
        let end = source.bytes().len();
        Self::new(source, 0, end, None)
    }

    /// Standard base64, with white space around it ignored.
    pub(crate) fn base64(source: Source) -> Self {
        let bytes = source.bytes();
        let text = std::str::from_utf8(bytes).unwrap_or_default();
        let trimmed = text.trim();
        let at = trimmed.as_ptr() as usize - text.as_ptr() as usize;
        let end = at + trimmed.len();
        Self::new(source, at, end, Some(Vec::with_capacity(CHUNK / 4 * 3)))
    }

    fn new(source: Source, at: usize, end: usize, decoded: Option<Vec<u8>>) -> Self {
        Self {
            source,
            at,
            end,
            decoded,
            taken: 0,
            invalid: Arc::default(),
        }
    }

    /// Where the reason is kept when the base64 turns out not to be valid: reading then
    /// fails, and the tool answers `invalid_argument` with this reason instead.
    pub(crate) fn invalid(&self) -> Arc<OnceLock<String>> {
        Arc::clone(&self.invalid)
    }

    /// Decode the next chunk into `decoded`.
    fn refill(&mut self) -> io::Result<()> {
        let start = self.at;
        let stop = (start + CHUNK).min(self.end);
        let Some(decoded) = self.decoded.as_mut() else {
            return Ok(());
        };
        let input = &self.source.bytes()[start..stop];
        decoded.resize(base64::decoded_len_estimate(input.len()), 0);
        match STANDARD.decode_slice(input, decoded) {
            Ok(n) => decoded.truncate(n),
            Err(e) => {
                decoded.clear();
                let offset = start - self.start_of_text();
                let why = format!("`base64`: not valid base64: {}", shifted(e, offset));
                let _ = self.invalid.set(why.clone());
                return Err(io::Error::new(io::ErrorKind::InvalidData, why));
            }
        }
        self.at = stop;
        self.taken = 0;
        Ok(())
    }

    /// Where the trimmed base64 starts in the source.
    fn start_of_text(&self) -> usize {
        let text = std::str::from_utf8(self.source.bytes()).unwrap_or_default();
        text.len() - text.trim_start().len()
    }
}

/// `result`, unless the content turned out not to be valid base64 (`invalid`, from
/// [`ContentReader::invalid`]): then `invalid_argument` saying why.
pub(crate) fn or_invalid<T>(
    result: Result<T, Failure>,
    invalid: &OnceLock<String>,
) -> Result<T, Failure> {
    match invalid.get() {
        Some(why) => Err(crate::reply::invalid(why)),
        None => result,
    }
}

/// `e` with its offsets counted from the start of the whole input rather than of a chunk.
fn shifted(e: base64::DecodeSliceError, by: usize) -> String {
    use base64::DecodeError::{InvalidByte, InvalidLastSymbol};
    match e {
        base64::DecodeSliceError::DecodeError(InvalidByte(at, byte)) => {
            InvalidByte(at + by, byte).to_string()
        }
        base64::DecodeSliceError::DecodeError(InvalidLastSymbol(at, byte)) => {
            InvalidLastSymbol(at + by, byte).to_string()
        }
        other => other.to_string(),
    }
}

impl Read for ContentReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.decoded.is_none() {
            let rest = &self.source.bytes()[self.at..self.end];
            let n = rest.len().min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            self.at += n;
            return Ok(n);
        }
        while self.decoded.as_ref().is_some_and(|d| self.taken == d.len()) && self.at < self.end {
            self.refill()?;
        }
        let Some(decoded) = &self.decoded else {
            return Ok(0);
        };
        let rest = &decoded[self.taken..];
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.taken += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(mut reader: ContentReader) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        reader.read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn base64_read_in_chunks_is_the_whole_decode() {
        for len in [
            0,
            1,
            2,
            3,
            CHUNK / 4 * 3 - 1,
            CHUNK / 4 * 3,
            CHUNK / 4 * 3 + 1,
            3 * CHUNK + 7,
        ] {
            let data: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let text = format!("  {}\n", STANDARD.encode(&data));
            let reader = ContentReader::base64(Source::Argument(text));
            assert_eq!(read_all(reader).unwrap(), data, "{len}");
        }
    }

    #[test]
    fn invalid_base64_fails_the_read_and_says_where_as_the_whole_decode_would() {
        let mut text = STANDARD.encode(vec![7u8; 2 * CHUNK]);
        let at = CHUNK + 5;
        text.replace_range(at..at + 1, "*");
        let whole = STANDARD.decode(&text).unwrap_err().to_string();
        let reader = ContentReader::base64(Source::Argument(format!(" {text}")));
        let invalid = reader.invalid();
        assert!(read_all(reader).is_err());
        let why = invalid.get().expect("the reason is kept");
        assert_eq!(why, &format!("`base64`: not valid base64: {whole}"));
    }

    #[test]
    fn text_is_read_as_it_is() {
        let reader = ContentReader::text(Source::Argument("héllo\n".into()));
        assert_eq!(read_all(reader).unwrap(), "héllo\n".as_bytes());
    }
}
