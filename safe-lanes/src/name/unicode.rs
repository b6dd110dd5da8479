//! Code point sets the name rules need for characters past ASCII, as compact tables: one
//! lookup of three small arrays instead of a binary search of the Unicode data.
//!
//! The arrays in `unicode_tables.rs` are generated from the Unicode crates this one depends
//! on (their versions are pinned by `Cargo.lock`); a test regenerates them and fails if the
//! file differs (run it with `SAFE_LANES_WRITE_UNICODE_TABLES=1` to rewrite the file).

/// A set of code points: 4,096-code-point pages of 64-bit masks, each level deduplicated.
pub(super) struct CodePointSet {
    /// For each page (`c >> 12`), its index in `pages`.
    pub(super) root: &'static [u8; 0x110],
    /// For each page, the index in `masks` of each of its 64 masks (`(c >> 6) & 63`).
    pub(super) pages: &'static [[u16; 64]],
    /// Bit `c & 63` of a mask is set when `c` is in the set.
    pub(super) masks: &'static [u64],
}

impl CodePointSet {
    #[inline(always)]
    pub(super) fn contains(&self, c: char) -> bool {
        let c = u32::from(c) as usize;
        let page = usize::from(self.root[c >> 12]);
        let mask = self.masks[usize::from(self.pages[page][(c >> 6) & 63])];
        mask >> (c & 63) & 1 != 0
    }
}

include!("unicode_tables.rs");
