//! One page of the lane's listing, read without holding the lane (ADR 0022).
//!
//! A page is the `limit` smallest names after the cursor, in the listing's order: by name as
//! lossy UTF-8, then by its bytes (so two names that differ only in bytes that are not UTF-8
//! are both listed, in a fixed order).
//!
//! A single page is found in one read of the directory that keeps at most `limit + 1` names
//! in a bounded heap ([`smallest_after`]): memory and `lstat`s are those of the page. A handle
//! that serves more than one page (a walk of the lane) also watches the directory for changes
//! ([`Listing`], Linux): while no name was made, removed or moved there by any process, the
//! names it read last, sorted, stay valid, and a page is a binary search and its own `lstat`s,
//! whatever the size of the lane. Any change drops them, and the next page reads the directory
//! again; the directory stays the only truth.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::Mutex;

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

/// The most names a handle keeps between pages (about 40 bytes each); a larger lane is read
/// for every page.
const MAX_KEPT: usize = 1 << 20;

/// The lane's names, kept sorted between the pages of one handle while its directory has not
/// changed (module docs).
#[derive(Debug, Default)]
pub(super) struct Listing {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Pages served so far: the watch is made at the second (never for a single page).
    pages: u64,
    #[cfg(target_os = "linux")]
    watch: Option<crate::beneath::NameWatch>,
    /// The names as of the last read, while no change was reported since.
    kept: Option<Names>,
}

impl Listing {
    /// [`smallest_after`], from the names kept when the directory has not changed since they
    /// were read.
    pub(super) fn smallest_after(
        &self,
        dir: &Anchor,
        from: Option<&Key>,
        want: usize,
    ) -> Result<(Vec<Key>, bool)> {
        let mut state = crate::sync::lock(&self.state);
        state.pages += 1;
        if !state.unchanged(dir) {
            state.kept = None;
            return smallest_after(dir, from, want);
        }
        if state.kept.is_none() {
            state.kept = Names::read(dir)?;
        }
        match &state.kept {
            Some(names) => Ok(names.after(from, want)),
            None => smallest_after(dir, from, want),
        }
    }
}

impl State {
    /// Whether the directory is watched, and nothing changed in it since the last look.
    #[cfg(target_os = "linux")]
    fn unchanged(&mut self, dir: &Anchor) -> bool {
        match &self.watch {
            Some(watch) => !watch.changed(),
            None if self.pages >= 2 => {
                // Made before the directory is read for the names kept, so that any change
                // after that read is reported.
                self.watch = crate::beneath::NameWatch::new(dir);
                self.watch.is_some()
            }
            None => false,
        }
    }

    /// Nothing is watched here: every page reads the directory.
    #[cfg(not(target_os = "linux"))]
    fn unchanged(&mut self, _dir: &Anchor) -> bool {
        false
    }
}

/// Every name of a directory that may be listed, in the listing's order: their bytes in one
/// buffer, and where each is.
#[derive(Debug)]
struct Names {
    bytes: Vec<u8>,
    /// In the listing's order.
    spans: Vec<Span>,
}

/// Where a name's bytes are, and its lossy UTF-8 form (the same bytes when it is UTF-8).
#[derive(Clone, Copy, Debug)]
struct Span {
    raw: (u32, u32),
    lossy: (u32, u32),
}

impl Names {
    /// The names of `dir`, sorted; `None` for a lane too large to keep ([`MAX_KEPT`]).
    fn read(dir: &Anchor) -> Result<Option<Self>> {
        let mut names = Self {
            bytes: Vec::new(),
            spans: Vec::new(),
        };
        let mut fits = true;
        dir.each_name(|name, kind| {
            if fits && may_be_listed(name, kind) {
                fits = names.push(name);
            }
        })?;
        if !fits {
            return Ok(None);
        }
        let Names { bytes, spans } = &mut names;
        bytes.shrink_to_fit();
        spans.shrink_to_fit();
        spans.sort_unstable_by(|a, b| {
            let (a_lossy, a_raw) = (slice(bytes, a.lossy), slice(bytes, a.raw));
            let (b_lossy, b_raw) = (slice(bytes, b.lossy), slice(bytes, b.raw));
            a_lossy.cmp(b_lossy).then_with(|| a_raw.cmp(b_raw))
        });
        Ok(Some(names))
    }

    /// Add `name`; `false` when the lane is too large to keep.
    fn push(&mut self, name: &OsStr) -> bool {
        let raw = name.as_bytes();
        let lossy: Cow<'_, str> = name.to_string_lossy();
        let extra = if matches!(lossy, Cow::Owned(_)) {
            lossy.len()
        } else {
            0
        };
        let end = self.bytes.len() + raw.len() + extra;
        if self.spans.len() >= MAX_KEPT || u32::try_from(end).is_err() {
            return false;
        }
        // Both fit in a `u32`: `end` does.
        let at = |start: usize, len: usize| (start as u32, len as u32);
        let raw_span = at(self.bytes.len(), raw.len());
        self.bytes.extend_from_slice(raw);
        let lossy_span = if extra == 0 {
            raw_span
        } else {
            let span = at(self.bytes.len(), lossy.len());
            self.bytes.extend_from_slice(lossy.as_bytes());
            span
        };
        self.spans.push(Span {
            raw: raw_span,
            lossy: lossy_span,
        });
        true
    }

    /// The `want` first names after `from`, and whether they are all there are.
    fn after(&self, from: Option<&Key>, want: usize) -> (Vec<Key>, bool) {
        let start = from.map_or(0, |f| {
            self.spans.partition_point(|s| {
                let (lossy, raw) = (slice(&self.bytes, s.lossy), slice(&self.bytes, s.raw));
                lossy
                    .cmp(f.lossy.as_bytes())
                    .then_with(|| raw.cmp(f.raw.as_bytes()))
                    != Ordering::Greater
            })
        });
        let keys: Vec<Key> = self.spans[start..]
            .iter()
            .take(want)
            .map(|s| Key {
                // A lossy form is UTF-8 by construction.
                lossy: String::from_utf8_lossy(slice(&self.bytes, s.lossy)).into_owned(),
                raw: OsStr::from_bytes(slice(&self.bytes, s.raw)).to_owned(),
            })
            .collect();
        let exhausted = keys.len() < want;
        (keys, exhausted)
    }
}

fn slice(bytes: &[u8], (start, len): (u32, u32)) -> &[u8] {
    &bytes[start as usize..start as usize + len as usize]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Names from pieces that collide once made lossy (`\xfe`, `\xff` and U+FFFD itself).
    fn name() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            Just(b"a".to_vec()),
            Just(b"b".to_vec()),
            Just(vec![0xfe]),
            Just(vec![0xff]),
            Just("\u{fffd}".as_bytes().to_vec()),
            Just(b".txt".to_vec()),
        ];
        prop::collection::vec(piece, 1..4).prop_map(|p| p.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// The names kept give every page the one read of the directory gives.
        #[test]
        fn kept_names_page_as_one_read_does(
            names in prop::collection::btree_set(name(), 0..24),
            cursor in prop::option::of(name()),
            want in 1usize..6,
        ) {
            let tmp = tempfile::tempdir().unwrap();
            for n in &names {
                std::fs::write(tmp.path().join(OsStr::from_bytes(n)), b"x").unwrap();
            }
            let why = crate::beneath::Ambient::because("a test's own directory");
            let dir = Anchor::open_ambient(tmp.path(), why).unwrap();
            let from = cursor.as_deref().map(|c| Key::of(OsStr::from_bytes(c)));
            let kept = Names::read(&dir).unwrap().unwrap();
            prop_assert_eq!(kept.after(from.as_ref(), want), smallest_after(&dir, from.as_ref(), want).unwrap());
        }
    }

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
