//! Long string arguments kept where they were read.
//!
//! The content of a large `download_save` arrives as one JSON string, the base64 of the file,
//! inside one request line. Parsed the usual way it would be held twice (the line, and the
//! string copied out of it) and decoded into a third buffer. Instead, before a long line is
//! parsed, its longest plain string — one a parser would copy byte for byte: no escape, no
//! control character, valid UTF-8 — is lifted out: the JSON around it, which is small, is
//! parsed with an empty string in its place, and the line itself travels with the request as
//! a [`Spilled`] (in the request's extensions), naming where the string was. A tool that takes
//! content reads it from there in chunks ([`crate::params::Content::into_reader`]), so the line is
//! the only full-size copy the server ever holds.
//!
//! This changes how a line is parsed, never what it means: a lifted string is exactly the
//! string a parser would have produced, and a tool that does not look for it sees the empty
//! string, which every content argument refuses or treats as empty.

use std::ops::Range;
use std::sync::Arc;

/// Lines shorter than this are parsed as they are.
pub(crate) const LIFT_AT: usize = 1 << 20;

/// A string lifted out of its request line, and where it was.
#[derive(Clone, Debug)]
pub(crate) struct Spilled {
    line: Arc<Vec<u8>>,
    string: Range<usize>,
    path: Vec<String>,
}

impl Spilled {
    /// The object keys leading to the string, from the top of the message
    /// (`["params", "arguments", "base64"]`).
    pub(crate) fn path(&self) -> &[String] {
        &self.path
    }

    /// The string's bytes: exactly the string a JSON parser would have produced.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.line[self.string.clone()]
    }
}

/// `line` to parse, and the string lifted out of it when the line is long and holds a plain
/// string long enough to be worth it.
pub(crate) fn lift(line: Vec<u8>) -> (Vec<u8>, Option<Spilled>) {
    if line.len() < LIFT_AT {
        return (line, None);
    }
    let Some((string, path)) = longest_plain_string(&line) else {
        return (line, None);
    };
    if string.len() < LIFT_AT / 2 {
        return (line, None);
    }
    let mut rest = Vec::with_capacity(line.len() - string.len());
    rest.extend_from_slice(&line[..string.start]);
    rest.extend_from_slice(&line[string.end..]);
    let spilled = Spilled {
        line: Arc::new(line),
        string,
        path,
    };
    (rest, Some(spilled))
}

/// Where a JSON text's longest plain string member value lies (between its quotes), and the
/// keys leading to it. `None` when the text has none, or is not well-formed enough to say
/// (the parser then reports it as it is).
fn longest_plain_string(json: &[u8]) -> Option<(Range<usize>, Vec<String>)> {
    let mut scan = Scan::default();
    let mut best: Option<(Range<usize>, Vec<String>)> = None;
    let mut at = 0;
    while at < json.len() {
        match json[at] {
            b'"' => {
                let end = string_end(json, at + 1)?;
                let range = at + 1..end;
                if scan.expects_key() {
                    scan.key = Some(String::from_utf8_lossy(&json[range]).into_owned());
                } else if scan.in_object_value()
                    && best.as_ref().is_none_or(|(b, _)| range.len() > b.len())
                    && is_plain(&json[range.clone()])
                {
                    best = Some((range, scan.path()));
                }
                at = end + 1;
                continue;
            }
            b'{' => scan.open(Container::Object),
            b'[' => scan.open(Container::Array),
            b'}' | b']' => scan.close()?,
            b':' => scan.colon(),
            b',' => scan.comma(),
            _ => {}
        }
        at += 1;
    }
    best
}

/// The index of the quote that ends the string whose content starts at `from`.
fn string_end(json: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    loop {
        let quote_or_escape = json[at..].iter().position(|&b| b == b'"' || b == b'\\')?;
        at += quote_or_escape;
        if json[at] == b'"' {
            return Some(at);
        }
        at += 2;
        if at > json.len() {
            return None;
        }
    }
}

/// A string a JSON parser copies byte for byte: no escape, no control character, UTF-8.
fn is_plain(content: &[u8]) -> bool {
    !content.iter().any(|&b| b == b'\\' || b < 0x20) && std::str::from_utf8(content).is_ok()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Container {
    Object,
    Array,
}

/// Where a scan stands: the open containers, with the key of each open object member.
#[derive(Debug, Default)]
struct Scan {
    open: Vec<(Container, Option<String>)>,
    /// The last key read in the innermost object, and whether its colon was read.
    key: Option<String>,
    after_colon: bool,
}

impl Scan {
    fn expects_key(&self) -> bool {
        matches!(self.open.last(), Some((Container::Object, _))) && !self.after_colon
    }

    fn in_object_value(&self) -> bool {
        matches!(self.open.last(), Some((Container::Object, _))) && self.after_colon
    }

    fn open(&mut self, container: Container) {
        self.open.push((container, self.key.take()));
        self.after_colon = false;
    }

    fn close(&mut self) -> Option<()> {
        let (_, key) = self.open.pop()?;
        self.key = key;
        // Back in the enclosing object, the member's value has been read.
        self.after_colon = matches!(self.open.last(), Some((Container::Object, _)));
        Some(())
    }

    fn colon(&mut self) {
        self.after_colon = true;
    }

    fn comma(&mut self) {
        self.after_colon = false;
        self.key = None;
    }

    /// The keys leading to the current member's value.
    fn path(&self) -> Vec<String> {
        let enclosing = self.open.iter().filter_map(|(_, key)| key.clone());
        enclosing.chain(self.key.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn long(n: usize) -> String {
        "QUJD".repeat(n / 4)
    }

    #[test]
    fn a_short_line_is_left_alone() {
        let line = br#"{"params":{"arguments":{"base64":"QUJD"}}}"#.to_vec();
        let (rest, spilled) = lift(line.clone());
        assert_eq!(rest, line);
        assert!(spilled.is_none());
    }

    #[test]
    fn the_longest_plain_string_is_lifted_with_its_path_and_the_rest_parses_the_same() {
        let b64 = long(LIFT_AT);
        let message = json!({
            "jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "download_save", "_meta": {"note": "x\"y", "list": [1, {"a": "b"}]},
                       "arguments": {"filename": "a.bin", "base64": b64}},
        });
        let (rest, spilled) = lift(serde_json::to_vec(&message).unwrap());
        let spilled = spilled.expect("lifted");
        assert_eq!(spilled.path(), ["params", "arguments", "base64"]);
        assert_eq!(spilled.bytes(), b64.as_bytes());
        let mut parsed: Value = serde_json::from_slice(&rest).unwrap();
        assert_eq!(parsed["params"]["arguments"]["base64"], "");
        parsed["params"]["arguments"]["base64"] = Value::String(b64);
        assert_eq!(parsed, message);
    }

    #[test]
    fn strings_a_parser_would_change_are_never_lifted() {
        for s in [
            format!("{}\\n", long(LIFT_AT)),
            format!("{}\u{1}", long(LIFT_AT)),
        ] {
            let line = serde_json::to_vec(&json!({"params": {"arguments": {"text": s}}})).unwrap();
            let (rest, spilled) = lift(line.clone());
            assert!(spilled.is_none(), "{}", &s[s.len() - 4..]);
            assert_eq!(rest, line);
        }
        // Invalid UTF-8 inside a string: left for the parser to refuse.
        let mut line = br#"{"params":{"arguments":{"text":""#.to_vec();
        line.extend(std::iter::repeat_n(0xff, LIFT_AT));
        line.extend(br#""}}}"#);
        assert!(lift(line).1.is_none());
    }

    #[test]
    fn strings_in_arrays_and_keys_are_not_member_values() {
        let key = long(LIFT_AT);
        let line =
            serde_json::to_vec(&json!({"params": {"arguments": {key: 1, "a": [long(LIFT_AT)]}}}))
                .unwrap();
        let (rest, spilled) = lift(line.clone());
        assert!(spilled.is_none());
        assert_eq!(rest, line);
    }

    #[test]
    fn malformed_lines_are_left_to_the_parser() {
        for line in [
            format!(r#"{{"a":"{}"#, long(LIFT_AT)),
            format!(r#"]]]{{"a":"{}"}}"#, long(LIFT_AT)),
        ] {
            let (rest, spilled) = lift(line.clone().into_bytes());
            assert!(spilled.is_none() || serde_json::from_slice::<Value>(&rest).is_err());
        }
    }
}
