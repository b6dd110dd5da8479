//! Long content arguments kept where they were read.
//!
//! The content of a large `download_save` arrives as one JSON string, the base64 of the file,
//! inside one request line. Parsed the usual way it would be held twice (the line, and the
//! string copied out of it) and decoded into a third buffer. Instead, before a long line is
//! parsed, its content string is lifted out: the JSON around it, which is small, is parsed
//! with an empty string in its place, and the line itself travels with the request as a
//! [`Spilled`] (in the request's extensions), naming where the string was. A tool that takes
//! content reads it from there in chunks ([`crate::params::Content::into_reader`]), so the line is
//! the only full-size copy the server ever holds.
//!
//! This changes how a line is parsed, never what it means (ADR 0014). Only one string is ever
//! lifted: the `text` or `base64` member of `params.arguments` of a `tools/call` of a tool that
//! takes content ([`CONTENT_TOOLS`]), at exactly that path, and only when it is plain (one a
//! parser copies byte for byte: no escape, no control character, valid UTF-8). A line in which
//! any object has the same key twice, or any key is spelled with an escape, is parsed as it
//! is — whichever of two duplicates a parser keeps, or what `"te\u0078t"` names, is then the
//! parser's to say, not this scan's.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;

/// Lines shorter than this are parsed as they are.
pub(crate) const LIFT_AT: usize = 1 << 20;

/// The tools whose content argument may be lifted.
pub(crate) const CONTENT_TOOLS: [&str; 2] = ["download_save", "upload_content"];

/// The content arguments, under `params.arguments`.
const CONTENT_KEYS: [&str; 2] = ["text", "base64"];

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

/// `line` to parse, and the string lifted out of it when the line is long and holds a content
/// argument long enough to be worth it.
pub(crate) fn lift(line: Vec<u8>) -> (Vec<u8>, Option<Spilled>) {
    if line.len() < LIFT_AT {
        return (line, None);
    }
    let Some((string, path)) = content_string(&line) else {
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

/// Where a request's one content argument lies (between its quotes), with its path: a
/// `tools/call` of a [`CONTENT_TOOLS`] tool whose `params.arguments` holds exactly one plain
/// [`CONTENT_KEYS`] string. `None` otherwise, and whenever the text has a duplicate or escaped
/// key anywhere, or is not well-formed enough to say (the parser then reads it as it is).
fn content_string(json: &[u8]) -> Option<(Range<usize>, Vec<String>)> {
    let mut scan = Scan::default();
    let mut content: Option<(Range<usize>, Vec<String>)> = None;
    let mut candidates = 0;
    let (mut method, mut tool) = (None, None);
    let mut at = 0;
    while at < json.len() {
        match json[at] {
            b'"' => {
                let end = string_end(json, at + 1)?;
                let range = at + 1..end;
                let text = &json[range.clone()];
                if scan.expects_key() {
                    // A key spelled with an escape, or one its object holds already: what it
                    // names is the parser's to say.
                    if text.contains(&b'\\') || !scan.new_key(text) {
                        return None;
                    }
                } else if scan.in_object_value() {
                    let path = scan.path();
                    let keys: Vec<&str> = path.iter().map(String::as_str).collect();
                    match keys.as_slice() {
                        ["method"] => method = Some(text),
                        ["params", "name"] => tool = Some(text),
                        ["params", "arguments", key] if CONTENT_KEYS.contains(key) => {
                            candidates += 1;
                            if is_plain(text) {
                                content = Some((range, path));
                            }
                        }
                        _ => {}
                    }
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
    let content_tool = tool.is_some_and(|t| CONTENT_TOOLS.iter().any(|c| c.as_bytes() == t));
    let call = method == Some(b"tools/call".as_slice());
    (call && content_tool && candidates == 1 && scan.open.is_empty())
        .then_some(content)
        .flatten()
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

/// Where a scan stands: the open containers, with the key of each open object member and
/// the keys each open object has held so far.
#[derive(Debug, Default)]
struct Scan {
    open: Vec<(Container, Option<String>, HashSet<Vec<u8>>)>,
    /// The last key read in the innermost object, and whether its colon was read.
    key: Option<String>,
    after_colon: bool,
}

impl Scan {
    fn expects_key(&self) -> bool {
        matches!(self.open.last(), Some((Container::Object, _, _))) && !self.after_colon
    }

    fn in_object_value(&self) -> bool {
        matches!(self.open.last(), Some((Container::Object, _, _))) && self.after_colon
    }

    /// Take `key` as the innermost object's next key; `false` when it held it already.
    fn new_key(&mut self, key: &[u8]) -> bool {
        let Some((_, _, keys)) = self.open.last_mut() else {
            return false;
        };
        if !keys.insert(key.to_vec()) {
            return false;
        }
        self.key = Some(String::from_utf8_lossy(key).into_owned());
        true
    }

    fn open(&mut self, container: Container) {
        self.open.push((container, self.key.take(), HashSet::new()));
        self.after_colon = false;
    }

    fn close(&mut self) -> Option<()> {
        let (_, key, _) = self.open.pop()?;
        self.key = key;
        // Back in the enclosing object, the member's value has been read.
        self.after_colon = matches!(self.open.last(), Some((Container::Object, _, _)));
        Some(())
    }

    fn colon(&mut self) {
        self.after_colon = true;
    }

    fn comma(&mut self) {
        self.after_colon = false;
        self.key = None;
    }

    /// The keys leading to the current member's value (an array on the way makes it no
    /// member of the path's objects: `None` keys stand for it).
    fn path(&self) -> Vec<String> {
        let in_arrays = self.open.iter().any(|(c, _, _)| *c == Container::Array);
        let enclosing = self.open.iter().skip(1).map(|(_, key, _)| key.clone());
        let mut out: Vec<String> = enclosing.chain([self.key.clone()]).flatten().collect();
        if in_arrays {
            // Never one of the paths looked for.
            out.insert(0, "[]".to_owned());
        }
        out
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

    /// A request line of `method`, tool `name` and the `arguments` members as spelled.
    fn request(method: &str, name: &str, members: &[(&str, String)]) -> Vec<u8> {
        let members: Vec<String> = members
            .iter()
            .map(|(key, value)| format!("\"{key}\":{}", serde_json::to_string(value).unwrap()))
            .collect();
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{{"name":"{name}","arguments":{{{}}}}}}}"#,
            members.join(",")
        )
        .into_bytes()
    }

    #[test]
    fn only_a_content_tools_content_argument_is_lifted() {
        let big = long(LIFT_AT);
        for (name, key, lifted) in [
            ("download_save", "base64", true),
            ("upload_content", "text", true),
            ("download_save", "filename", false),
            ("shell_exec", "command", false),
            ("folder_access_request", "reason", false),
            ("shell_exec", "text", false),
        ] {
            let line = request("tools/call", name, &[(key, big.clone())]);
            let (_, spilled) = lift(line);
            assert_eq!(spilled.is_some(), lifted, "{name} {key}");
        }
        // Not a tool call, or both content arguments at once: parsed as it is.
        assert!(
            lift(request("x/call", "download_save", &[("text", big.clone())]))
                .1
                .is_none()
        );
        let both = [("text", big.clone()), ("base64", big.clone())];
        assert!(
            lift(request("tools/call", "download_save", &both))
                .1
                .is_none()
        );
    }

    #[test]
    fn a_duplicate_or_escaped_key_anywhere_leaves_the_line_to_the_parser() {
        let big = long(LIFT_AT);
        let twice = [("text", big.clone()), ("text", String::new())];
        assert!(
            lift(request("tools/call", "download_save", &twice))
                .1
                .is_none()
        );
        let escaped = [("te\\u0078t", big.clone())];
        assert!(
            lift(request("tools/call", "download_save", &escaped))
                .1
                .is_none()
        );
        let other = [
            ("text", big.clone()),
            ("filename", "a".into()),
            ("filename", "b".into()),
        ];
        assert!(
            lift(request("tools/call", "download_save", &other))
                .1
                .is_none()
        );
        // A duplicate in another object of the line counts too.
        let mut line = request("tools/call", "download_save", &[("text", big)]);
        line.pop();
        line.extend_from_slice(br#","id":2}"#);
        assert!(lift(line).1.is_none());
    }

    /// The standard parse of a line, and the lifted parse with the lifted string put back,
    /// read the same request; a line the parser refuses is refused either way.
    fn same_meaning(line: Vec<u8>) -> std::result::Result<(), String> {
        let normal = serde_json::from_slice::<Value>(&line);
        let (rest, spilled) = lift(line.clone());
        let Some(spilled) = spilled else {
            return if rest == line {
                Ok(())
            } else {
                Err("changed unlifted".into())
            };
        };
        let mut lifted: Value = match serde_json::from_slice(&rest) {
            Ok(v) => v,
            Err(_) if normal.is_err() => return Ok(()),
            Err(e) => return Err(format!("the rest does not parse: {e}")),
        };
        let normal = normal.map_err(|e| format!("lifted from a line a parser refuses: {e}"))?;
        let mut at = &mut lifted;
        for key in spilled.path() {
            at = &mut at[key.as_str()];
        }
        if at != &Value::String(String::new()) {
            return Err("the lifted place is not an empty string".into());
        }
        *at = Value::String(String::from_utf8(spilled.bytes().to_vec()).unwrap());
        if lifted == normal {
            Ok(())
        } else {
            Err("different requests".into())
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        #[test]
        fn the_lifted_and_the_standard_parse_read_the_same_request(
            method in proptest::sample::select(vec!["tools/call", "tools/list", "tools\\/call"]),
            name in proptest::sample::select(vec!["download_save", "upload_content", "shell_exec", "d\\u006fwnload_save"]),
            members in proptest::collection::vec(
                (
                    proptest::sample::select(vec!["text", "base64", "filename", "te\\u0078t", "b\\u0061se64", "command"]),
                    proptest::sample::select(vec![0usize, 3, LIFT_AT / 2 + 7, LIFT_AT + 1]),
                    proptest::sample::select(vec!["QUJD", "a\nb", "é", "\u{1}"]),
                ),
                0..4,
            ),
            tail in proptest::sample::select(vec!["", r#","id":9"#, r#","extra":{"text":"x"}"#, "]"]),
        ) {
            let members: Vec<(&str, String)> = members
                .iter()
                .map(|(k, n, unit)| (*k, unit.repeat(n / unit.len().max(1) + usize::from(*n > 0))))
                .collect();
            let mut line = request(method, name, &members);
            if !tail.is_empty() {
                line.pop();
                line.extend_from_slice(tail.as_bytes());
                line.push(b'}');
            }
            proptest::prop_assert_eq!(same_meaning(line), Ok(()));
        }
    }

    #[test]
    fn strings_a_parser_would_change_are_never_lifted() {
        for s in [
            format!("{}\\n", long(LIFT_AT)),
            format!("{}\u{1}", long(LIFT_AT)),
        ] {
            let line = serde_json::to_vec(&json!({"method": "tools/call", "params": {"name": "download_save", "arguments": {"text": s}}})).unwrap();
            let (rest, spilled) = lift(line.clone());
            assert!(spilled.is_none(), "{}", &s[s.len() - 4..]);
            assert_eq!(rest, line);
        }
        // Invalid UTF-8 inside a string: left for the parser to refuse.
        let mut line =
            br#"{"method":"tools/call","params":{"name":"download_save","arguments":{"text":""#
                .to_vec();
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
