//! The request id at the start of a line too long to read whole.
//!
//! A line over the limit is never buffered whole, so it cannot be parsed. Its answer should
//! still carry the request's id, so the client's request is answered rather than left waiting:
//! the id is looked for in the part that was read, as a member of the top-level object
//! (`{"jsonrpc":"2.0","id":7,"method":…`). Members before it are skipped without being
//! interpreted; an id that comes after the part read, or a prefix that is not the start of a
//! JSON object, gives none.

use serde_json::Value;

/// The top-level `"id"` of the JSON object `prefix` starts, when it is in `prefix` and is a
/// number or a string.
pub(crate) fn request_id(prefix: &[u8]) -> Option<Value> {
    let mut at = skip_space(prefix, 0);
    if prefix.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    loop {
        at = skip_space(prefix, at);
        let key_end = string_end(prefix, at)?;
        let key = &prefix[at..key_end];
        at = skip_space(prefix, key_end);
        if prefix.get(at) != Some(&b':') {
            return None;
        }
        at = skip_space(prefix, at + 1);
        let value_end = value_end(prefix, at)?;
        if key == b"\"id\"" {
            return serde_json::from_slice::<Value>(&prefix[at..value_end])
                .ok()
                .filter(|id| id.is_number() || id.is_string());
        }
        at = skip_space(prefix, value_end);
        match prefix.get(at) {
            Some(b',') => at += 1,
            _ => return None,
        }
    }
}

fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// Where the string starting at `at` ends (just past its closing quote).
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let mut i = at + 1;
    loop {
        match bytes.get(i)? {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
}

/// Where the value starting at `at` ends: a string, an object or array (by nesting, strings
/// skipped), or a bare literal or number.
fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => string_end(bytes, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            loop {
                match bytes.get(i)? {
                    b'"' => {
                        i = string_end(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let len = bytes[at..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace())?;
            Some(at + len)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_top_level_id_is_found_in_a_prefix() {
        let cases: [(&str, Option<Value>); 8] = [
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"#,
                Some(json!(7)),
            ),
            (r#" { "id" : "a\"b" , "x"#, Some(json!("a\"b"))),
            (
                r#"{"jsonrpc":"2.0","method":"m","params":{"id":1,"s":"}{"},"id":42,"#,
                Some(json!(42)),
            ),
            (
                r#"{"jsonrpc":"2.0","method":"tools/call","params":{"text":"xxxx"#,
                None,
            ),
            (r#"{"id":null,"#, None),
            (r#"{"id":{"a":1},"#, None),
            (r#"["id",1]"#, None),
            (r#"{"id":12"#, None),
        ];
        for (prefix, id) in cases {
            assert_eq!(request_id(prefix.as_bytes()), id, "{prefix}");
        }
    }
}
