//! One page of the lane's listing, read without holding the lane (ADR 0022).
//!
//! A page is the `limit` smallest names after the cursor, in the listing's order: by name as
//! lossy UTF-8, then by its bytes (so two names that differ only in bytes that are not UTF-8
//! are both listed, in a fixed order). It is found in one read of the directory that keeps
//! at most `limit + 1` names in a bounded heap: memory and `lstat`s are those of the page,
//! whatever the size of the lane; nothing else is allocated per name.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::ffi::{OsStr, OsString};

use rustix::fs::FileType;

use super::PARTIAL_PREFIX;
use crate::beneath::Anchor;
use crate::error::Result;

/// A name in the listing's order (module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Key {
    lossy: String,
    pub(super) raw: OsString,
}

impl Key {
    pub(super) fn of(raw: &OsStr) -> Self {
        Self {
            lossy: raw.to_string_lossy().into_owned(),
            raw: raw.to_owned(),
        }
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        order(&self.lossy, &self.raw, &other.lossy, &other.raw)
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The listing's order of two names (module docs).
fn order(lossy: &str, raw: &OsStr, other_lossy: &str, other_raw: &OsStr) -> Ordering {
    lossy.cmp(other_lossy).then_with(|| raw.cmp(other_raw))
}

/// Whether a name read from the directory may be one of the lane's files: not a hidden
/// staging file, and a regular file unless the directory does not say.
fn may_be_listed(name: &OsStr, kind: Option<FileType>) -> bool {
    !name
        .as_encoded_bytes()
        .starts_with(PARTIAL_PREFIX.as_bytes())
        && kind.is_none_or(|k| k == FileType::RegularFile)
}

/// The `want` smallest names of `dir` after `from` (all names for `None`) that may be listed,
/// sorted, and whether they are all there are (fewer than `want` were found).
pub(super) fn smallest_after(
    dir: &Anchor,
    from: Option<&Key>,
    want: usize,
) -> Result<(Vec<Key>, bool)> {
    // A max-heap of the smallest names so far: its top is the first to give way.
    let mut kept: BinaryHeap<Key> = BinaryHeap::with_capacity(want.saturating_add(1).min(1 << 16));
    dir.each_name(|name, kind| {
        if !may_be_listed(name, kind) {
            return;
        }
        let lossy: Cow<'_, str> = name.to_string_lossy();
        if from.is_some_and(|f| order(&lossy, name, &f.lossy, &f.raw) != Ordering::Greater) {
            return;
        }
        if kept.len() >= want {
            match kept.peek() {
                Some(top) if order(&lossy, name, &top.lossy, &top.raw) == Ordering::Less => {
                    kept.pop();
                }
                _ => return,
            }
        }
        kept.push(Key {
            lossy: lossy.into_owned(),
            raw: name.to_owned(),
        });
    })?;
    let exhausted = kept.len() < want;
    Ok((kept.into_sorted_vec(), exhausted))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn the_order_is_by_lossy_name_then_by_bytes() {
        let a = Key::of(OsStr::from_bytes(b"a\xff"));
        let b = Key::of(OsStr::from_bytes(b"a\xfe"));
        let c = Key::of(OsStr::new("a\u{fffd}"));
        let z = Key::of(OsStr::new("b"));
        let mut keys = vec![z.clone(), a.clone(), c.clone(), b.clone()];
        keys.sort();
        // All three render as "a\u{fffd}"; then their bytes decide.
        assert_eq!(keys, vec![c, b, a, z]);
    }
}
