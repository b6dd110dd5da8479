//! Every sanitized name satisfies the name invariants, and sanitizing is idempotent.

#![no_main]

use libfuzzer_sys::fuzz_target;
use safe_lanes::name::MAX_NAME_BYTES;
use safe_lanes::sanitize;

fuzz_target!(|data: &[u8]| {
    let name = sanitize(data);
    let s = name.as_str();
    assert!(!s.is_empty());
    assert!(s.len() <= MAX_NAME_BYTES);
    assert!(!s.contains(['/', '\\', ':', '*', '?', '"', '<', '>', '|', '%', '\0']));
    assert!(!s.starts_with(['.', '-', ' ']));
    assert!(!s.ends_with(['.', ' ']));
    assert!(!s.chars().any(char::is_control));
    assert_eq!(sanitize(s), name, "idempotent");
    assert!(name.numbered(u32::MAX).len() <= 255);
});
