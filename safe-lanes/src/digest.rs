//! SHA-256 digests in lowercase hexadecimal: content hashes, the audit log's chain, digests of
//! what the human was shown, and random names.
//!
//! A leaf: it depends on nothing else in the crate, so any module may use it.

use sha2::{Digest, Sha256};

/// Lowercase hexadecimal, two digits a byte.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

/// SHA-256 of `data`, in lowercase hex.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// The SHA-256 of everything `hasher` was given, in lowercase hex.
pub(crate) fn finish_hex(hasher: Sha256) -> String {
    hex(&hasher.finalize())
}
