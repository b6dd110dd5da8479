//! Reduce an untrusted name hint to one safe base name.
//!
//! A file name chosen by an e-mail sender or a prompt-injected agent must never become a path,
//! a hidden file, an option, a device, a shortcut that runs something, or a name that displays
//! as something else. [`sanitize`] maps *any* byte string to a [`SafeName`] that is none of
//! these. The rules are applied identically on every OS, so a name that is safe here is safe
//! when the file is later copied to Windows or macOS.
//!
//! # Rules, in order
//!
//! 1. Lossy UTF-8 decoding (invalid bytes become U+FFFD).
//! 2. Drop invisible characters: controls (C0, C1, DEL), format characters (bidi embeddings and
//!    overrides U+202A–U+202E, isolates U+2066–U+2069, zero-width characters, U+FEFF, soft
//!    hyphen…), line and paragraph separators, private-use, surrogate and unassigned code
//!    points (which include the noncharacters).
//! 3. NFC normalization.
//! 4. Keep the last non-empty component for both `/` and `\`.
//! 5. Replace `: * ? " < > | %` and look-alikes of them and of the separators (U+2215, U+2044,
//!    U+FF0F, U+29F8, U+A789, U+FF1A, the fullwidth forms, …) with `_`.
//! 6. Collapse every run of white space to one ASCII space.
//! 7. Strip leading `.`, `-` and spaces and trailing `.` and spaces: never hidden, never
//!    option-like, never a Windows "trailing dot" alias. A dot that rule 2 made leading is not
//!    stripped: when all that stood before the first dot of the component was characters
//!    rule 2 dropped, dashes and white space (at least one dropped), that text becomes the stem
//!    `download`, so `"\u{378}\u{40001}.mp3"` keeps its extension as `download.mp3` (as
//!    `___.mp3` does).
//! 8. Split off the extension: the text after the last `.`, when it is 1–16 letters or digits.
//!    The stem loses trailing dots and spaces.
//! 9. A shortcut-like extension (`lnk`, `url`, `desktop`, `webloc`, `scf`, `local`, …) or a
//!    shell-namespace one (the text after the last dot in braces, `{…}`: a CLSID as in
//!    `My Computer.{20D04FE0-3AEA-1069-A2D8-08002B30309D}`, or anything else in braces) gets
//!    `.download` appended, so no file manager treats the file as a launcher, and the Windows
//!    shell neither takes it for one of its namespace folders nor picks its handler by CLSID.
//! 10. A stem with no letter or digit becomes `download`.
//! 11. A Windows device name (`CON`, `PRN`, `AUX`, `NUL`, `COM0`–`COM9`, `LPT0`–`LPT9`, the
//!     superscript-digit forms, `CONIN$`, `CONOUT$`, `CLOCK$`), with any extension, gets a `_`
//!     prefix; so does a name the Windows shell reads as its own, `desktop.ini` or
//!     `thumbs.db` (in any case), so a copied file never sets how Explorer shows a folder.
//! 12. Truncate to [`MAX_NAME_BYTES`] on a character boundary, keeping the extension whole,
//!     which leaves room for a collision suffix ` (N)` within the 255-byte limit of Linux file
//!     systems.
//!
//! The result is never empty, and `sanitize(sanitize(x)) == sanitize(x)` for every `x`
//! (checked by property tests and a fuzz target).
//!
//! # Collision names
//!
//! [`SafeName::numbered`] builds the names a download takes when its name is taken: ` (n)`
//! goes before the extension (`report (1).pdf`), or before a compound extension of
//! [`COMPOUND_EXTENSIONS`], a compressed tar archive's (`test (1).tar.gz`, never
//! `test.tar (1).gz`), when what comes before it is a stem that does not end with a dot or a
//! space.

use std::borrow::Cow;
use std::fmt;

use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};
use unicode_properties::{GeneralCategory as G, UnicodeGeneralCategory};

/// The largest [`SafeName`] in bytes. With a collision suffix ` (4294967295)` (13 bytes) a
/// numbered name still fits the 255-byte name limit.
pub const MAX_NAME_BYTES: usize = 240;

/// The most characters an extension may have to be kept through truncation.
const MAX_EXTENSION_CHARS: usize = 16;

/// The name a stem without any letter or digit becomes.
const FALLBACK_STEM: &str = "download";

/// Compound extensions, compared without regard to ASCII case, that a collision number goes
/// before as a whole: a tar archive and its compression. The only list of them.
pub const COMPOUND_EXTENSIONS: &[&str] = &[
    "tar.gz", "tar.bz2", "tar.bz", "tar.xz", "tar.zst", "tar.lz", "tar.lz4", "tar.lzma", "tar.lzo",
    "tar.z", "tar.br",
];

/// The extension appended to a name whose own extension is a shortcut's or a namespace's.
const SHORTCUT_SUFFIX: &str = "download";

/// What a name may not start with (rule 7).
const LEADING: [char; 3] = ['.', '-', ' '];

/// What a name, and a stem before its extension, may not end with (rules 7 and 8).
const TRAILING: [char; 2] = ['.', ' '];

/// The path separators of rule 4.
const SEPARATORS: [char; 2] = ['/', '\\'];

/// Characters replaced by `_`: the reserved ones of Windows (and `%`), plus characters that
/// look like a separator or one of them.
const REPLACED: &[char] = &[
    ':', '*', '?', '"', '<', '>', '|', '%',        //
    '\u{2215}', // DIVISION SLASH
    '\u{2044}', // FRACTION SLASH
    '\u{FF0F}', // FULLWIDTH SOLIDUS
    '\u{29F8}', // BIG SOLIDUS
    '\u{29F9}', // BIG REVERSE SOLIDUS
    '\u{2216}', // SET MINUS
    '\u{FE68}', // SMALL REVERSE SOLIDUS
    '\u{FF3C}', // FULLWIDTH REVERSE SOLIDUS
    '\u{2F03}', // KANGXI RADICAL SLASH
    '\u{A789}', // MODIFIER LETTER COLON
    '\u{FF1A}', // FULLWIDTH COLON
    '\u{2236}', // RATIO
    '\u{FE55}', // SMALL COLON
    '\u{FE13}', // PRESENTATION FORM FOR VERTICAL COLON
    '\u{0589}', // ARMENIAN FULL STOP
    '\u{05C3}', // HEBREW PUNCTUATION SOF PASUQ
    '\u{FF0A}', // FULLWIDTH ASTERISK
    '\u{FF1F}', // FULLWIDTH QUESTION MARK
    '\u{FF02}', // FULLWIDTH QUOTATION MARK
    '\u{FF1C}', // FULLWIDTH LESS-THAN SIGN
    '\u{FF1E}', // FULLWIDTH GREATER-THAN SIGN
    '\u{FF5C}', // FULLWIDTH VERTICAL LINE
    '\u{FF05}', // FULLWIDTH PERCENT SIGN
    '\u{2223}', // DIVIDES
    '\u{01C0}', // LATIN LETTER DENTAL CLICK
];

/// Extensions that make a file manager or the OS treat a file as a launcher or a redirect.
const SHORTCUT_EXTENSIONS: &[&str] = &[
    "lnk",
    "url",
    "desktop",
    "webloc",
    "inetloc",
    "fileloc",
    "scf",
    "local",
    "pif",
    "website",
    "appref-ms",
    "glk",
    "library-ms",
    "searchconnector-ms",
    "settingcontent-ms",
    "directory",
];

/// Windows device names, compared case-insensitively with the stem up to its first dot.
const DEVICE_NAMES: &[&str] = &[
    "con", "prn", "aux", "nul", "conin$", "conout$", "clock$", "com0", "com1", "com2", "com3",
    "com4", "com5", "com6", "com7", "com8", "com9", "com¹", "com²", "com³", "lpt0", "lpt1", "lpt2",
    "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8", "lpt9", "lpt¹", "lpt²", "lpt³",
];

/// Whole names (stem, extension) the Windows shell reads as its own files, compared without
/// regard to ASCII case: a folder's display settings, and its thumbnail cache.
const SHELL_FILES: &[(&str, &str)] = &[("desktop", "ini"), ("thumbs", "db")];

/// A single, safe file name produced by [`sanitize`].
///
/// Guarantees: non-empty, at most [`MAX_NAME_BYTES`] bytes, NFC, one path component (no `/`,
/// `\`, or look-alike), no control/format/bidi/zero-width character, not hidden, not
/// option-like, no trailing dot or space, not a Windows device name, not a shortcut, and a
/// fixed point of [`sanitize`].
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SafeName {
    name: String,
    /// Byte index of the extension's dot, if the name has an extension.
    dot: Option<usize>,
}

impl SafeName {
    /// The name.
    pub fn as_str(&self) -> &str {
        &self.name
    }

    /// The name without its extension.
    pub fn stem(&self) -> &str {
        &self.name[..self.dot.unwrap_or(self.name.len())]
    }

    /// The extension without its dot, if the name has one.
    pub fn extension(&self) -> Option<&str> {
        self.dot.map(|d| &self.name[d + 1..])
    }

    /// The `n`th collision variant, built from the stem: `stem (n).ext`, or `stem (n).tar.gz`
    /// for a compound extension of [`COMPOUND_EXTENSIONS`]; `n == 0` is the name itself.
    /// Always one component of at most 255 bytes.
    pub fn numbered(&self, n: u32) -> String {
        if n == 0 {
            return self.name.clone();
        }
        let (before, after) = self.name.split_at(self.number_at());
        format!("{before} ({n}){after}")
    }

    /// Where a collision number goes: at the dot of a compound extension when the name ends
    /// with one after a stem that does not end with a dot or a space, else at the extension's
    /// dot, else at the end.
    fn number_at(&self) -> usize {
        let name = self.name.as_str();
        let Some(dot) = self.dot else {
            return name.len();
        };
        COMPOUND_EXTENSIONS
            .iter()
            .find_map(|compound| {
                let at = name.len().checked_sub(compound.len() + 1)?;
                let stem = name.get(..at)?;
                let compound_here = name.as_bytes()[at] == b'.'
                    && name[at + 1..].eq_ignore_ascii_case(compound)
                    && !stem.is_empty()
                    && !stem.ends_with(TRAILING);
                compound_here.then_some(at)
            })
            .unwrap_or(dot)
    }
}

impl fmt::Display for SafeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl fmt::Debug for SafeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.name, f)
    }
}

impl AsRef<str> for SafeName {
    fn as_ref(&self) -> &str {
        &self.name
    }
}

/// The ASCII characters of [`REPLACED`], as a table indexed by byte.
const ASCII_REPLACED: [bool; 128] = ascii_replaced();

/// The smallest non-ASCII character of [`REPLACED`]: a non-ASCII character below it is never
/// replaced, which spares most accented letters a search of the list.
const FIRST_NON_ASCII_REPLACED: char = first_non_ascii_replaced();

/// Bytes that no rule changes wherever they appear in an ASCII name: printable ASCII other
/// than the separators and [`REPLACED`]. (Where they appear still matters: see
/// [`as_plain_ascii`].)
const PLAIN_ASCII: [bool; 256] = plain_ascii();

const fn ascii_replaced() -> [bool; 128] {
    let mut table = [false; 128];
    let mut i = 0;
    while i < REPLACED.len() {
        if REPLACED[i].is_ascii() {
            table[REPLACED[i] as usize] = true;
        }
        i += 1;
    }
    table
}

const fn first_non_ascii_replaced() -> char {
    let mut first = char::MAX;
    let mut i = 0;
    while i < REPLACED.len() {
        if !REPLACED[i].is_ascii() && (REPLACED[i] as u32) < (first as u32) {
            first = REPLACED[i];
        }
        i += 1;
    }
    first
}

const fn plain_ascii() -> [bool; 256] {
    let mut table = [false; 256];
    let mut b = b' ';
    while b <= b'~' {
        let is_separator = b as char == SEPARATORS[0] || b as char == SEPARATORS[1];
        table[b as usize] = !is_separator && !ASCII_REPLACED[b as usize];
        b += 1;
    }
    table
}

/// Reduce any name hint to a [`SafeName`] (see the module documentation for the rules).
///
/// Total and deterministic: every input gives a name, and the same name on every OS.
///
/// # Security
///
/// The hint is untrusted; the result carries every guarantee listed on [`SafeName`].
///
/// ```
/// use safe_lanes::sanitize;
/// assert_eq!(sanitize("../../.bashrc").as_str(), "bashrc");
/// assert_eq!(sanitize("invoice\u{202E}fdp.exe").as_str(), "invoicefdp.exe");
/// assert_eq!(sanitize("CON.txt").as_str(), "_CON.txt");
/// assert_eq!(sanitize("evil.desktop").as_str(), "evil.desktop.download");
/// ```
pub fn sanitize(hint: impl AsRef<[u8]>) -> SafeName {
    let hint = hint.as_ref();
    match as_plain_ascii(hint) {
        Some(name) => assemble(trim(name)),
        None => sanitize_any(hint),
    }
}

/// `hint` as text when it has only [`PLAIN_ASCII`] bytes and no two spaces in a row.
///
/// Rules 1–6 leave such a hint as it is: it is valid UTF-8 with nothing invisible, ASCII is
/// NFC, it has no separator (so it is its own last component, or empty), nothing to replace,
/// and its only white space is single spaces. [`sanitize`] then goes straight to rule 7,
/// without decoding, normalizing or copying; a property test checks that this gives what
/// [`sanitize_any`] gives.
fn as_plain_ascii(hint: &[u8]) -> Option<&str> {
    let mut after_space = false;
    let plain = hint.iter().all(|&b| {
        let plain = PLAIN_ASCII[usize::from(b)] && !(after_space && b == b' ');
        after_space = b == b' ';
        plain
    });
    if plain {
        std::str::from_utf8(hint).ok()
    } else {
        None
    }
}

/// Every rule, in order, on any hint.
fn sanitize_any(hint: &[u8]) -> SafeName {
    let decoded = String::from_utf8_lossy(hint);
    let visible = drop_invisible(&decoded);
    let stem_dropped = matches!(visible, Cow::Owned(_)) && stem_was_dropped(&decoded);
    let normalized = to_nfc(visible);
    let flat = flatten(last_component(&normalized));
    match flat.find('.') {
        Some(dot) if stem_dropped => assemble(trim(&[FALLBACK_STEM, &flat[dot..]].concat())),
        _ => assemble(trim(&flat)),
    }
}

/// Rule 7's exception, on the text before rule 2: in the last component that rule 2 leaves
/// non-empty, all that comes before the first dot is characters rule 2 drops, dashes and white
/// space, at least one of them dropped.
///
/// Rules 3–6 change none of this (NFC composes nothing with a dot, a separator, a dash or
/// white space, and white space stays white space), so the condition holds of the text those
/// rules give exactly when it holds here.
fn stem_was_dropped(text: &str) -> bool {
    let Some(component) = text
        .rsplit(SEPARATORS)
        .find(|part| part.chars().any(|c| !is_invisible(c)))
    else {
        return false;
    };
    let Some((before, _)) = component.split_once('.') else {
        return false;
    };
    let mut dropped = false;
    let only_dropped_dashes_and_spaces = before.chars().all(|c| {
        let invisible = is_invisible(c);
        dropped |= invisible;
        invisible || c == '-' || c.is_whitespace()
    });
    only_dropped_dashes_and_spaces && dropped
}

/// Rule 4: the last non-empty component for both separators, or `""`.
fn last_component(text: &str) -> &str {
    // The separators are ASCII, so a byte next to one is on a character boundary.
    let is_separator = |b: &u8| SEPARATORS.contains(&char::from(*b));
    let bytes = text.as_bytes();
    let end = bytes
        .iter()
        .rposition(|b| !is_separator(b))
        .map_or(0, |i| i + 1);
    let start = bytes[..end]
        .iter()
        .rposition(is_separator)
        .map_or(0, |i| i + 1);
    &text[start..end]
}

/// Rule 7: without leading dots, dashes and spaces and trailing dots and spaces.
fn trim(name: &str) -> &str {
    name.trim_start_matches(LEADING).trim_end_matches(TRAILING)
}

/// Rule 2: `text` without its invisible characters, borrowed when it has none.
fn drop_invisible(text: &str) -> Cow<'_, str> {
    let first = if text.is_ascii() {
        text.bytes().position(|b| b.is_ascii_control())
    } else {
        text.find(is_invisible)
    };
    let Some(first) = first else {
        return Cow::Borrowed(text);
    };
    let mut visible = String::with_capacity(text.len());
    visible.push_str(&text[..first]);
    let rest = &text[first..];
    // The first character of `rest` is invisible.
    let after = rest.chars().next().map_or(0, char::len_utf8);
    visible.extend(rest[after..].chars().filter(|&c| !is_invisible(c)));
    Cow::Owned(visible)
}

/// Rule 3: `text` in NFC, unchanged when it is already (ASCII always is).
fn to_nfc(text: Cow<'_, str>) -> Cow<'_, str> {
    if text.is_ascii() || is_nfc_quick(text.chars()) == IsNormalized::Yes {
        text
    } else {
        let mut nfc = String::with_capacity(text.len());
        nfc.extend(text.nfc());
        Cow::Owned(nfc)
    }
}

/// Rules 5 and 6: reserved characters and look-alikes become `_`, each run of white space one
/// ASCII space. Borrowed when nothing changes.
fn flatten(text: &str) -> Cow<'_, str> {
    let mut in_space = false;
    let first_change = text.find(|c: char| {
        let space = c.is_whitespace();
        let change = is_replaced(c) || (space && (c != ' ' || in_space));
        in_space = space;
        change
    });
    let Some(first) = first_change else {
        return Cow::Borrowed(text);
    };
    // Up to `first` the text is its own flattening, and its only white space is `' '`.
    let mut flat = String::with_capacity(text.len());
    flat.push_str(&text[..first]);
    let mut in_space = flat.ends_with(' ');
    for c in text[first..].chars() {
        if c.is_whitespace() {
            if !in_space {
                flat.push(' ');
            }
            in_space = true;
        } else {
            flat.push(if is_replaced(c) { '_' } else { c });
            in_space = false;
        }
    }
    Cow::Owned(flat)
}

/// Rules 8–12 on a trimmed name: the stem and the extension, the device prefix, truncation.
/// The name is built in one allocation.
fn assemble(trimmed: &str) -> SafeName {
    let (stem, ext) = stem_and_extension(trimmed);
    let device = is_device_name(stem) || is_shell_file(stem, ext);
    let ext_len = ext.map_or(0, |e| e.len() + 1);
    // Room for the device prefix and the whole stem, which truncation then shortens.
    let mut name = String::with_capacity(1 + stem.len() + ext_len);
    if device {
        name.push('_');
    }
    name.push_str(stem);
    truncate_stem(&mut name, ext);
    if !has_alphanumeric(&name) {
        name.clear();
        name.push_str(FALLBACK_STEM);
    }
    let dot = ext.map(|ext| {
        let dot = name.len();
        name.push('.');
        name.push_str(ext);
        dot
    });
    SafeName { name, dot }
}

/// Rules 8–10: the stem and the extension of a trimmed name.
///
/// The extension is the text after the last dot when it is 1–16 letters or digits and the stem
/// before it is not empty; the stem loses trailing dots and spaces. A shortcut-like or
/// shell-namespace extension stays in the stem and the extension becomes [`SHORTCUT_SUFFIX`].
/// A stem with no letter or digit becomes [`FALLBACK_STEM`].
fn stem_and_extension(name: &str) -> (&str, Option<&str>) {
    let (stem, ext) = match split_at_last_dot(name) {
        Some((_, tail)) if shell_acts_on(tail) => (name, Some(SHORTCUT_SUFFIX)),
        Some((before, tail)) => {
            let stem = before.trim_end_matches(TRAILING);
            if is_extension(tail) && !stem.is_empty() {
                (stem, Some(tail))
            } else {
                (name, None)
            }
        }
        None => (name, None),
    };
    if has_alphanumeric(stem) {
        (stem, ext)
    } else {
        (FALLBACK_STEM, ext)
    }
}

/// `name` before and after its last dot, if it has one.
fn split_at_last_dot(name: &str) -> Option<(&str, &str)> {
    // A byte search: `.` is ASCII, so the bytes next to it are on character boundaries.
    let dot = name.bytes().rposition(|b| b == b'.')?;
    Some((&name[..dot], &name[dot + 1..]))
}

/// Characters that are invisible or that change how surrounding text displays.
fn is_invisible(c: char) -> bool {
    // Shortcuts for ASCII and the Latin letters up to U+017F (a test checks them against the
    // categories): the C0 and C1 controls, DEL and the soft hyphen.
    if c <= '\u{17F}' {
        return c.is_ascii_control() || ('\u{80}'..='\u{9F}').contains(&c) || c == '\u{AD}';
    }
    matches!(
        c.general_category(),
        G::Control
            | G::Format
            | G::LineSeparator
            | G::ParagraphSeparator
            | G::PrivateUse
            | G::Surrogate
            | G::Unassigned
    )
}

/// A character of [`REPLACED`].
fn is_replaced(c: char) -> bool {
    if c.is_ascii() {
        ASCII_REPLACED[c as usize]
    } else {
        c >= FIRST_NON_ASCII_REPLACED && REPLACED.contains(&c)
    }
}

fn is_extension(ext: &str) -> bool {
    let mut count = 0;
    let alphanumeric = ext.chars().all(|c| {
        count += 1;
        c.is_alphanumeric()
    });
    alphanumeric && (1..=MAX_EXTENSION_CHARS).contains(&count)
}

/// Rule 9: what follows a name's last dot makes the shell act on the file: a shortcut-like
/// extension, or one in braces (a shell namespace's CLSID, or anything else in braces).
fn shell_acts_on(tail: &str) -> bool {
    is_shortcut(tail) || is_braced(tail)
}

/// `{…}`: Windows reads an extension in braces as a CLSID.
fn is_braced(tail: &str) -> bool {
    tail.len() >= 2 && tail.starts_with('{') && tail.ends_with('}')
}

/// The first characters of the [`SHORTCUT_EXTENSIONS`], as a bit set.
const SHORTCUT_INITIALS: u128 = initials(SHORTCUT_EXTENSIONS);

fn is_shortcut(ext: &str) -> bool {
    // A look at the first character spares most extensions the comparisons.
    let initial = ext.bytes().next().map(|b| b.to_ascii_lowercase());
    initial.is_some_and(|b| b.is_ascii() && SHORTCUT_INITIALS & (1 << b) != 0)
        && SHORTCUT_EXTENSIONS
            .iter()
            .any(|s| s.eq_ignore_ascii_case(ext))
}

fn has_alphanumeric(stem: &str) -> bool {
    stem.chars().any(char::is_alphanumeric)
}

/// The most bytes of a [`DEVICE_NAMES`] entry, which bounds its characters.
const MAX_DEVICE_NAME_BYTES: usize = max_len(DEVICE_NAMES);

/// The first characters of the [`DEVICE_NAMES`] (all ASCII), as a bit set.
const DEVICE_NAME_INITIALS: u128 = initials(DEVICE_NAMES);

const fn max_len(names: &[&str]) -> usize {
    let mut max = 0;
    let mut i = 0;
    while i < names.len() {
        if names[i].len() > max {
            max = names[i].len();
        }
        i += 1;
    }
    max
}

/// The set of the first bytes of `names`, which all start with lowercase ASCII.
const fn initials(names: &[&str]) -> u128 {
    let mut set = 0;
    let mut i = 0;
    while i < names.len() {
        let first = names[i].as_bytes()[0];
        assert!(first.is_ascii() && !first.is_ascii_uppercase());
        set |= 1 << first;
        i += 1;
    }
    set
}

/// Windows treats `CON`, `con.txt`, `CON .tar.gz` all as the console device.
///
/// The stem up to its first dot, without trailing spaces, lowercased, is one of
/// [`DEVICE_NAMES`] (all lowercase). Lowercased character by character, which differs from
/// [`str::to_lowercase`] only for a final `Σ`, in no device name.
fn is_device_name(stem: &str) -> bool {
    let up_to_dot = stem.bytes().position(|b| b == b'.').unwrap_or(stem.len());
    let base = stem[..up_to_dot].trim_end_matches(' ');
    let initial = match base.chars().next() {
        Some(c) if c.is_ascii() => c.to_ascii_lowercase(),
        Some(c) => c.to_lowercase().next().unwrap_or(c),
        None => return false,
    };
    if !(initial.is_ascii() && DEVICE_NAME_INITIALS & (1 << u32::from(initial)) != 0) {
        return false;
    }
    if base.is_ascii() {
        // ASCII lowercasing is all of lowercasing here.
        return DEVICE_NAMES.iter().any(|d| d.eq_ignore_ascii_case(base));
    }
    // Lowercasing never makes fewer characters, and a device name has at most as many
    // characters as bytes: a longer base is no device name.
    let mut lower = ['\0'; MAX_DEVICE_NAME_BYTES];
    let mut len = 0;
    for c in base.chars().flat_map(char::to_lowercase) {
        if len == lower.len() {
            return false;
        }
        lower[len] = c;
        len += 1;
    }
    let lower = &lower[..len];
    DEVICE_NAMES
        .iter()
        .any(|d| d.chars().eq(lower.iter().copied()))
}

/// Rule 11: `stem.ext` is one of the [`SHELL_FILES`].
fn is_shell_file(stem: &str, ext: Option<&str>) -> bool {
    ext.is_some_and(|ext| {
        SHELL_FILES
            .iter()
            .any(|(s, e)| stem.eq_ignore_ascii_case(s) && ext.eq_ignore_ascii_case(e))
    })
}

/// Shorten `stem` on a character boundary so that `stem.ext` fits [`MAX_NAME_BYTES`].
///
/// The cut stem loses trailing dots and spaces; when there is no extension, a dot that would
/// now introduce something extension-like becomes `_`, so the name re-parses the same way
/// (which keeps [`sanitize`] idempotent).
fn truncate_stem(stem: &mut String, ext: Option<&str>) {
    let budget = MAX_NAME_BYTES - ext.map_or(0, |e| e.len() + 1);
    if stem.len() <= budget {
        return;
    }
    let mut cut = budget;
    while !stem.is_char_boundary(cut) {
        cut -= 1;
    }
    stem.truncate(cut);
    let kept = stem.trim_end_matches(TRAILING).len();
    stem.truncate(kept);
    if ext.is_none()
        && let Some(dot) = stem.rfind('.')
        && (is_extension(&stem[dot + 1..]) || shell_acts_on(&stem[dot + 1..]))
    {
        stem.replace_range(dot..=dot, "_");
    }
}

#[cfg(test)]
mod tests;
