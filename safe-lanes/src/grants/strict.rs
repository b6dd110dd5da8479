//! Reading the manifest's JSON with every key of an object named once.
//!
//! `serde_json` keeps the last of two equal keys and drops the first without a word; for the
//! manifest that would mean a second `folder_access` hiding the first one's grants, which the
//! next write would then erase. [`parse`] is the one reader of manifest bytes: it refuses a
//! repeated key in any object, at any depth, and says which key and where.

use std::fmt;

use serde::Deserializer;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::error::Category;
use serde_json::{Map, Number, Value};

use crate::error::Shown;

/// `bytes` as one JSON value, refusing any object that names a key twice.
///
/// # Errors
///
/// Why the bytes are not such a value, in words (escaped: keys and messages may come from
/// anyone who wrote the file).
pub(super) fn parse(bytes: &[u8]) -> Result<Value, String> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Unique { at: &At::Top }
        .deserialize(&mut de)
        .and_then(|value| de.end().map(|()| value));
    value.map_err(|e| match e.classify() {
        // Only [`Unique`] reports data errors here: its message is already escaped.
        Category::Data => e.to_string(),
        Category::Io | Category::Syntax | Category::Eof => {
            format!("not valid JSON ({})", Shown::text(&e.to_string()))
        }
    })
}

/// Where in the document a value lies, for the message about a repeated key.
#[derive(Clone, Copy, Debug)]
enum At<'a> {
    Top,
    Key(&'a At<'a>, &'a str),
    Item(&'a At<'a>, usize),
}

impl At<'_> {
    /// The path to here: `folder_access[0].host`.
    fn path(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::Top => Ok(()),
            At::Key(At::Top, key) => f.write_str(Shown::text(key).as_str()),
            At::Key(outer, key) => {
                outer.path(f)?;
                write!(f, ".{}", Shown::text(key))
            }
            At::Item(outer, index) => {
                outer.path(f)?;
                write!(f, "[{index}]")
            }
        }
    }
}

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::Top => f.write_str("the top level"),
            _ => self.path(f),
        }
    }
}

/// A JSON value at `at`, built as `serde_json::Value` is, except that a repeated key is an
/// error. Nesting is bounded by the deserializer's recursion limit.
#[derive(Clone, Copy, Debug)]
struct Unique<'a> {
    at: &'a At<'a>,
}

impl<'de> DeserializeSeed<'de> for Unique<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Unique<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        // As `serde_json::Value` does: JSON has no NaN or infinity to hold.
        Ok(Number::from_f64(n).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Unique {
            at: &At::Item(self.at, items.len()),
        })? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format!(
                    "the key `{}` appears twice in {}",
                    Shown::text(&key),
                    self.at
                )));
            }
            let value = map.next_value_seed(Unique {
                at: &At::Key(self.at, &key),
            })?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_key_is_refused_with_where_it_is() {
        let cases = [
            (
                r#"{"a":1,"a":2}"#,
                "the key `a` appears twice in the top level",
            ),
            (
                r#"{"folder_access":[{"id":"x","host":"h","host":"h"}]}"#,
                "the key `host` appears twice in folder_access[0]",
            ),
            (
                r#"{"x":{"y":[[],[{"z":{},"z":{}}]]}}"#,
                "the key `z` appears twice in x.y[1][0]",
            ),
            (
                r#"{"a\u0007":{"\u0007":0,"\u0007":0}}"#,
                "`\\u{7}` appears twice in a\\u{7}",
            ),
        ];
        for (text, expected) in cases {
            let why = parse(text.as_bytes()).unwrap_err();
            assert!(why.contains(expected), "{text}: {why}");
        }
    }

    #[test]
    fn everything_else_reads_as_serde_json_reads_it() {
        let text = r#"{"a":[1,-2,2.5,1e300,18446744073709551615,null,true,"é\n"],"b":{"c":{}}}"#;
        let ours = parse(text.as_bytes()).unwrap();
        let theirs: Value = serde_json::from_str(text).unwrap();
        assert_eq!(ours, theirs);
        assert_eq!(
            serde_json::to_string(&ours).unwrap(),
            serde_json::to_string(&theirs).unwrap()
        );
        for bad in ["{", "[1,]", "{} x", "1e400", &"[".repeat(200)] {
            let why = parse(bad.as_bytes()).unwrap_err();
            assert!(why.starts_with("not valid JSON"), "{bad}: {why}");
        }
    }
}
