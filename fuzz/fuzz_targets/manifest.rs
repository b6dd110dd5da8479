//! Arbitrary bytes as a manifest never panic, and an accepted manifest round-trips: writing it
//! back and reading it again gives the same document.

#![no_main]

use libfuzzer_sys::fuzz_target;
use safe_lanes::grants::Document;

fuzz_target!(|data: &[u8]| {
    let Ok(doc) = Document::parse(data) else {
        return;
    };
    let written = doc.to_json().expect("a parsed manifest can be written");
    let again = Document::parse(&written).expect("a written manifest parses");
    assert_eq!(again.grants, doc.grants);
    assert_eq!(again.requests, doc.requests);
    assert_eq!(again.changelog, doc.changelog);
    assert_eq!(again.to_value().unwrap(), doc.to_value().unwrap());
    assert_eq!(again.to_json().unwrap(), written, "writing is stable");
});
