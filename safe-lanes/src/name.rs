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
//!
//! # How the rules are applied
//!
//! The rules above are the specification, and the unit tests apply them one at a time to
//! check every path of [`sanitize`] against them (property tests over bytes, Unicode and
//! biased alphabets). [`sanitize`] gets the same result with less work:
//!
//! - Rule 4 comes first, on the bytes: a separator is ASCII, never dropped, never part of an
//!   invalid sequence, and NFC joins nothing to it, so the last component of the hint is the
//!   last component of what rules 1–3 make of it (unless rule 2 empties it).
//! - One pass over the bytes, eight at a time while they are printable ASCII, finds that
//!   component and whether rules 1–6 leave it as it is: it holds only printable ASCII other
//!   than the reserved characters, single spaces, and characters past ASCII that are visible,
//!   not white space, not look-alikes and that NFC neither changes nor joins to anything.
//!   Such a component goes straight to rules 7–12, which look only at its ends, and is copied
//!   once, into the name. Most names are such names.
//! - Any other component is rewritten by rules 1, 2, 5 and 6 in one pass into a buffer on the
//!   stack, with NFC's quick check on the way; a combining mark after an ASCII letter (NFD
//!   Latin text) is composed there.
//! - What that pass leaves (invalid UTF-8, other text NFC changes, a last component that
//!   rule 2 empties, a component over 256 bytes) takes the rules one step at a time.
//! - Characters past ASCII are classified by two compact tables made from the Unicode crates
//!   (rule 2's characters; those NFC may change), after shortcuts for the Latin letters up to
//!   U+02FF; ASCII by a table of 256 bytes.
//! - A [`SafeName`] holds its text inline: making one never allocates.

use std::borrow::Cow;
use std::fmt;

use unicode_normalization::char::canonical_combining_class;
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};

mod unicode;

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
///
/// The name is held in place (it is at most [`MAX_NAME_BYTES`] bytes), so making one never
/// allocates; reading it as text checks that it is UTF-8, which it always is.
#[derive(Clone)]
pub struct SafeName {
    /// The name in `bytes[..len]`; zeros after it.
    bytes: [u8; MAX_NAME_BYTES],
    len: u8,
    /// Byte index of the extension's dot, 0 for none (a name never starts with a dot).
    dot: u8,
}

// The length and the dot's index fit a byte.
const _: () = assert!(MAX_NAME_BYTES <= u8::MAX as usize);

impl SafeName {
    /// What [`sanitize`] starts from: not a name yet.
    const EMPTY: SafeName = SafeName {
        bytes: [0; MAX_NAME_BYTES],
        len: 0,
        dot: 0,
    };

    /// Make this (an [`EMPTY`](Self::EMPTY) one) `_` (when `prefix`), then `stem` with the
    /// byte at `underscore` (a dot) made `_`, then `.ext`: UTF-8 pieces [`assemble`] has
    /// already fitted to [`MAX_NAME_BYTES`]. When they are all of `whole`, in order, `whole`
    /// is copied at once.
    ///
    /// Written in place, where the caller of [`sanitize`] keeps the name, rather than built
    /// and then copied there. Nothing here panics (a piece that did not fit would be left
    /// out, which `assemble` never lets happen).
    #[inline(always)]
    fn fill(
        &mut self,
        whole: &[u8],
        prefix: bool,
        stem: &[u8],
        underscore: Option<usize>,
        ext: Option<&[u8]>,
    ) {
        let len = usize::from(prefix) + stem.len() + ext.map_or(0, |e| e.len() + 1);
        let mut at = 0;
        let mut push = |piece: &[u8]| {
            if let Some(to) = self.bytes.get_mut(at..at + piece.len()) {
                copy_short(to, piece);
                at += piece.len();
            }
        };
        if whole.len() == len && !prefix && underscore.is_none() {
            // The pieces are `whole` itself (see `assemble`).
            push(whole);
        } else {
            if prefix {
                push(b"_");
            }
            push(stem);
            if let Some(ext) = ext {
                push(b".");
                push(ext);
            }
            if let Some(dot) = underscore.and_then(|u| self.bytes.get_mut(usize::from(prefix) + u))
            {
                *dot = b'_';
            }
        }
        // At most `MAX_NAME_BYTES`, which fits a byte.
        self.len = at as u8;
        self.dot = ext.map_or(0, |_| (usize::from(prefix) + stem.len()) as u8);
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    fn dot(&self) -> Option<usize> {
        (self.dot != 0).then_some(usize::from(self.dot))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        // Built from whole characters of UTF-8 pieces only.
        std::str::from_utf8(self.as_bytes()).expect("a SafeName is UTF-8")
    }

    /// The name without its extension.
    pub fn stem(&self) -> &str {
        let name = self.as_str();
        &name[..self.dot().unwrap_or(name.len())]
    }

    /// The extension without its dot, if the name has one.
    pub fn extension(&self) -> Option<&str> {
        let name = self.as_str();
        self.dot().map(|d| &name[d + 1..])
    }

    /// The `n`th collision variant, built from the stem: `stem (n).ext`, or `stem (n).tar.gz`
    /// for a compound extension of [`COMPOUND_EXTENSIONS`]; `n == 0` is the name itself.
    /// Always one component of at most 255 bytes.
    pub fn numbered(&self, n: u32) -> String {
        let name = self.as_str();
        if n == 0 {
            return name.to_owned();
        }
        let (before, after) = name.split_at(self.number_at());
        format!("{before} ({n}){after}")
    }

    /// Where a collision number goes: at the dot of a compound extension when the name ends
    /// with one after a stem that does not end with a dot or a space, else at the extension's
    /// dot, else at the end.
    fn number_at(&self) -> usize {
        let name = self.as_str();
        let Some(dot) = self.dot() else {
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

impl PartialEq for SafeName {
    fn eq(&self, other: &SafeName) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for SafeName {}

impl std::hash::Hash for SafeName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl PartialOrd for SafeName {
    fn partial_cmp(&self, other: &SafeName) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SafeName {
    /// The order of the names as text (UTF-8 byte order is code point order).
    fn cmp(&self, other: &SafeName) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl fmt::Display for SafeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for SafeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl AsRef<str> for SafeName {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

/// The ASCII characters of [`REPLACED`], as a table indexed by byte.
const ASCII_REPLACED: [bool; 128] = ascii_replaced();

/// The smallest non-ASCII character of [`REPLACED`]: a non-ASCII character below it is never
/// replaced, which spares most accented letters a search of the list.
const FIRST_NON_ASCII_REPLACED: char = first_non_ascii_replaced();

/// [`REPLACED`] in order, for a binary search.
const REPLACED_SORTED: [char; REPLACED.len()] = sorted(REPLACED);

/// What rules 1–6 do to a byte of a name, wherever it is: a table indexed by byte.
const BYTE_CLASS: [u8; 256] = byte_classes();

/// Printable ASCII other than the space, the separators and [`REPLACED`]: no rule before 7
/// changes it.
const PLAIN: u8 = 0;
/// The space: kept, unless it follows another one (rule 6).
const SPACE: u8 = 1;
/// `/` and `\` (rule 4).
const SEPARATOR: u8 = 2;
/// An ASCII character of [`REPLACED`] (rule 5).
const RESERVED: u8 = 3;
/// An ASCII control character, dropped (rule 2).
const CONTROL: u8 = 4;
/// A byte of a non-ASCII character.
const NON_ASCII: u8 = 5;

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

const fn sorted<const N: usize>(list: &[char]) -> [char; N] {
    let mut out = ['\0'; N];
    let mut i = 0;
    while i < N {
        // Insertion sort: shift the larger ones up, then place `list[i]`.
        let mut j = i;
        while j > 0 && (out[j - 1] as u32) > (list[i] as u32) {
            out[j] = out[j - 1];
            j -= 1;
        }
        out[j] = list[i];
        i += 1;
    }
    out
}

const fn byte_classes() -> [u8; 256] {
    let mut table = [NON_ASCII; 256];
    let mut b = 0;
    while b < 128 {
        table[b] = if b < 0x20 || b == 0x7f {
            CONTROL
        } else if b == b' ' as usize {
            SPACE
        } else if b == SEPARATORS[0] as usize || b == SEPARATORS[1] as usize {
            SEPARATOR
        } else if ASCII_REPLACED[b] {
            RESERVED
        } else {
            PLAIN
        };
        b += 1;
    }
    table
}

/// A sign, in a name hint, that whoever wrote it tried to reach outside the download lane or
/// to make a name read as another: the hint held a path separator, a `..` component, or
/// characters a screen hides (rule 2). The sanitizer defuses each; a screen shows the hint
/// beside the name it became, flagged with these, so the attempt is not lost with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AttackSign {
    /// A `/` or `\`: the hint named a path, not a name.
    Separator,
    /// A `..` component: the hint climbed out of a folder.
    DotDot,
    /// A character rule 2 drops (a control, bidi, zero-width, private-use or unassigned one)
    /// or a byte that is not UTF-8 (or U+FFFD, what such a byte becomes as text): the hint
    /// reads as something it is not.
    Hidden,
}

impl AttackSign {
    /// In words, for a screen: `a path separator`, `..`, `hidden characters`.
    pub fn words(self) -> &'static str {
        match self {
            AttackSign::Separator => "a path separator",
            AttackSign::DotDot => "`..`",
            AttackSign::Hidden => "hidden characters",
        }
    }
}

/// The [`AttackSign`]s of `hint`, in order, each once; none for a hint that is a plain name
/// (one whose spaces or reserved characters the sanitizer merely replaced).
///
/// ```
/// use safe_lanes::name::{AttackSign, attack_signs};
/// assert_eq!(attack_signs("../../.bashrc"), [AttackSign::Separator, AttackSign::DotDot]);
/// assert_eq!(attack_signs("invoice\u{202E}fdp.exe"), [AttackSign::Hidden]);
/// assert!(attack_signs("Q3 report: final?.pdf").is_empty());
/// assert_eq!(attack_signs(b"report\xff.pdf"), [AttackSign::Hidden]);
/// assert_eq!(attack_signs(String::from_utf8_lossy(b"report\xff.pdf").as_bytes()), [AttackSign::Hidden]);
/// ```
pub fn attack_signs(hint: impl AsRef<[u8]>) -> Vec<AttackSign> {
    let hint = hint.as_ref();
    let mut signs = Vec::new();
    if hint.iter().any(|b| b"/\\".contains(b)) {
        signs.push(AttackSign::Separator);
    }
    if hint.split(|b| b"/\\".contains(b)).any(|c| c == b"..") {
        signs.push(AttackSign::DotDot);
    }
    // U+FFFD too: it is what a byte that is not UTF-8 became in a record kept as text.
    let hidden = hint.utf8_chunks().any(|chunk| {
        !chunk.invalid().is_empty()
            || chunk
                .valid()
                .chars()
                .any(|c| is_invisible(c) || c == char::REPLACEMENT_CHARACTER)
    });
    if hidden {
        signs.push(AttackSign::Hidden);
    }
    signs
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
    let mut name = SafeName::EMPTY;
    sanitize_into(&mut name, hint.as_ref());
    name
}

/// [`sanitize`], writing the name into `out` (an [`EMPTY`](SafeName::EMPTY) one).
fn sanitize_into(out: &mut SafeName, hint: &[u8]) {
    match last_component(hint) {
        Component::Plain(name) => assemble(out, name),
        Component::Other(from) => {
            let mut flat = Flat::new();
            if flat.flatten(from) {
                flat.assemble(out);
            } else {
                sanitize_any(out, hint);
            }
        }
    }
}

/// The last component of a hint, found in one pass over its bytes.
enum Component<'a> {
    /// The last component, made only of [`PLAIN`] bytes, single spaces and characters past
    /// ASCII that are [plain](is_plain), which rules 1–6 leave as they are (UTF-8).
    Plain(&'a [u8]),
    /// The bytes from the start of the component holding the first byte that is not plain.
    Other(&'a [u8]),
}

/// Rule 4, first: the last component of `hint` (trailing separators aside), if it is plain.
///
/// Taking the component before rules 1–3 gives what taking it after them gives: the
/// separators are ASCII, never dropped and never part of an invalid sequence, and NFC joins
/// nothing to them (a test checks it), so the components of the text that rules 1–3 give are
/// those of the hint, each rewritten on its own. One exception: a last component that rule 2
/// empties, which [`Flat::flatten`] notices.
fn last_component(hint: &[u8]) -> Component<'_> {
    let end = hint
        .iter()
        .rposition(|&b| BYTE_CLASS[usize::from(b)] != SEPARATOR)
        .map_or(0, |i| i + 1);
    let hint = &hint[..end];
    let (mut start, mut i) = (0, 0);
    while let Some(skip) = first_not_plain(&hint[i..]) {
        i += skip;
        i += match BYTE_CLASS[usize::from(hint[i])] {
            // A space that does not follow another (rule 6 would merge them).
            SPACE if i == 0 || hint[i - 1] != b' ' => 1,
            SEPARATOR => {
                start = i + 1;
                1
            }
            NON_ASCII => match decode(&hint[i..]) {
                Some((c, len)) if is_plain(c) => len,
                _ => return Component::Other(&hint[start..]),
            },
            _ => return Component::Other(&hint[start..]),
        };
    }
    Component::Plain(&hint[start..])
}

/// A character past ASCII that no rule before 7 changes: visible, not replaced, not white
/// space, and one that NFC never changes or joins to what precedes it.
#[inline(always)]
fn is_plain(c: char) -> bool {
    if c < NFC_INERT_BELOW {
        // Below U+0300 the only white space past ASCII is U+0085 (a control) and U+00A0 (a
        // test checks it).
        return !is_invisible(c) && c != '\u{A0}' && !is_replaced(c);
    }
    !unicode::INVISIBLE.contains(c)
        && !unicode::NFC_SENSITIVE.contains(c)
        && !is_replaced(c)
        && !c.is_whitespace()
}

/// The index of the first byte of `bytes` that is not [`PLAIN`]: eight bytes at a time, their
/// classes or-ed together, since [`PLAIN`] is 0; the last eight (or fewer) bytes at once, too.
#[inline]
fn first_not_plain(bytes: &[u8]) -> Option<usize> {
    let any_not_plain = |chunk: &[u8]| {
        chunk
            .iter()
            .fold(PLAIN, |any, &b| any | BYTE_CLASS[usize::from(b)])
            != PLAIN
    };
    let mut plain = 0;
    for chunk in bytes.chunks_exact(8) {
        if any_not_plain(chunk) {
            break;
        }
        plain += 8;
    }
    let rest = &bytes[plain..];
    if rest.len() < 8 && !any_not_plain(&bytes[bytes.len().saturating_sub(8)..]) {
        return None;
    }
    rest.iter()
        .position(|&b| BYTE_CLASS[usize::from(b)] != PLAIN)
        .map(|i| plain + i)
}

/// `to[..from.len()] = from`, for the few bytes of a name: two copies of a fixed size that
/// overlap, cheaper than a call to copy any number of bytes.
#[inline(always)]
fn copy_short(to: &mut [u8], from: &[u8]) {
    let n = from.len();
    let to = &mut to[..n];
    if (16..=32).contains(&n) {
        to[..16].copy_from_slice(&from[..16]);
        to[n - 16..].copy_from_slice(&from[n - 16..]);
    } else if (8..16).contains(&n) {
        to[..8].copy_from_slice(&from[..8]);
        to[n - 8..].copy_from_slice(&from[n - 8..]);
    } else if (4..8).contains(&n) {
        to[..4].copy_from_slice(&from[..4]);
        to[n - 4..].copy_from_slice(&from[n - 4..]);
    } else if n < 4 {
        for (t, f) in to.iter_mut().zip(from) {
            *t = *f;
        }
    } else {
        to.copy_from_slice(from);
    }
}

/// The most bytes [`Flat::flatten`] writes; a longer component takes [`sanitize_any`].
const FLAT_BYTES: usize = 256;

/// Rules 2, 5 and 6 applied to the last component in one pass, when rule 3 leaves it as it is.
struct Flat {
    buf: [u8; FLAT_BYTES],
    len: usize,
    /// Where the first dot was written.
    first_dot: Option<usize>,
    /// Rule 2 dropped something before the first dot…
    dropped_before_dot: bool,
    /// …and something other than dashes and white space stands there (rule 7's exception).
    solid_before_dot: bool,
    /// Rule 2 kept something: the component is not empty.
    kept: bool,
    /// The last character written was a space.
    in_space: bool,
}

impl Flat {
    fn new() -> Flat {
        Flat {
            buf: [0; FLAT_BYTES],
            len: 0,
            first_dot: None,
            dropped_before_dot: false,
            solid_before_dot: false,
            kept: false,
            in_space: false,
        }
    }

    /// Rules 1, 2, 5 and 6 on `bytes` (a component and what follows it) in one pass; a
    /// separator starts over. `false` when rule 1 or 3 would change the last component (it is
    /// not UTF-8, or its NFC quick check is not "yes"), when the component is longer than
    /// [`FLAT_BYTES`] or when rule 2 empties it: [`sanitize_any`] takes those.
    fn flatten(&mut self, mut bytes: &[u8]) -> bool {
        // NFC's quick check (rule 3): the combining class of the last character kept…
        let mut last_class = 0;
        // …whether that character is a plain ASCII one, the last byte written…
        let mut after_ascii = false;
        // …and whether it was composed here, so that nothing NFC could join may follow it.
        let mut composed = false;
        loop {
            // A run of plain bytes, which no rule before 7 changes, written at once.
            let run = first_not_plain(bytes).unwrap_or(bytes.len());
            if run > 0 {
                if !self.push_plain(&bytes[..run]) {
                    return false;
                }
                (last_class, after_ascii, composed) = (0, true, false);
                bytes = &bytes[run..];
            }
            let Some(&b) = bytes.first() else {
                return self.kept;
            };
            let fits = if b.is_ascii() {
                bytes = &bytes[1..];
                match BYTE_CLASS[usize::from(b)] {
                    SEPARATOR => {
                        self.reset();
                        (last_class, after_ascii, composed) = (0, false, false);
                        true
                    }
                    CONTROL => {
                        self.drop_one();
                        true
                    }
                    SPACE => {
                        (last_class, after_ascii, composed) = (0, false, false);
                        self.push_space()
                    }
                    _ => {
                        (last_class, after_ascii, composed) = (0, false, false);
                        self.push(b"_", '_')
                    }
                }
            } else {
                let Some((c, len)) = decode(bytes) else {
                    return false;
                };
                let (encoded, rest) = bytes.split_at(len);
                bytes = rest;
                if is_invisible(c) {
                    self.drop_one();
                    continue;
                }
                if c < NFC_INERT_BELOW || !unicode::NFC_SENSITIVE.contains(c) {
                    last_class = 0;
                } else {
                    let class = canonical_combining_class(c);
                    match is_nfc_quick(std::iter::once(c)) {
                        // A combining mark right after the ASCII character it composes with:
                        // one character, when nothing NFC could join follows (see
                        // `compose_after_ascii`).
                        IsNormalized::Maybe if after_ascii && !composed && class != 0 => {
                            if !self.compose_after_ascii(c) {
                                return false;
                            }
                            (last_class, after_ascii, composed) = (0, false, true);
                            continue;
                        }
                        IsNormalized::Yes if !composed && (class == 0 || class >= last_class) => {
                            last_class = class;
                        }
                        _ => return false,
                    }
                }
                (after_ascii, composed) = (false, false);
                if c.is_whitespace() {
                    self.push_space()
                } else if is_replaced(c) {
                    self.push(b"_", '_')
                } else {
                    self.push(encoded, c)
                }
            };
            if !fits {
                return false;
            }
        }
    }

    /// Rule 3 for an ASCII character (the last byte written) followed by the combining mark
    /// `mark`: their canonical composition in its place; `false` when they have none, or when
    /// it is a character that a rule after NFC would change (none is: a test checks it).
    ///
    /// Neither has a decomposition (the ASCII character has none, and a combining mark that
    /// may combine with what precedes it has none either: a test checks it), so the two are
    /// their own canonical decomposition, and the composite is canonically equivalent to them.
    /// The composite is a starter that NFC keeps (quick check "yes"), and so is what came
    /// before, so the text is in NFC once the caller has checked that what follows is too: the
    /// result is the NFC form.
    fn compose_after_ascii(&mut self, mark: char) -> bool {
        let Some(&base) = self.buf[..self.len].last() else {
            return false;
        };
        let Some(composite) = unicode_normalization::char::compose(char::from(base), mark) else {
            return false;
        };
        if is_invisible(composite) || is_replaced(composite) || composite.is_whitespace() {
            return false;
        }
        self.len -= 1;
        self.push(composite.encode_utf8(&mut [0; 4]).as_bytes(), composite)
    }

    fn reset(&mut self) {
        self.len = 0;
        self.first_dot = None;
        self.dropped_before_dot = false;
        self.solid_before_dot = false;
        self.kept = false;
        self.in_space = false;
    }

    /// Write `piece`, which is `c` encoded; `false` when it does not fit.
    fn push(&mut self, piece: &[u8], c: char) -> bool {
        if self.first_dot.is_none() {
            if c == '.' {
                self.first_dot = Some(self.len);
            } else if c != '-' {
                self.solid_before_dot = true;
            }
        }
        self.kept = true;
        self.in_space = false;
        self.write(piece)
    }

    /// Write a run of [`PLAIN`] bytes; `false` when it does not fit.
    fn push_plain(&mut self, run: &[u8]) -> bool {
        if self.first_dot.is_none() {
            let before = match run.iter().position(|&b| b == b'.') {
                Some(dot) => {
                    self.first_dot = Some(self.len + dot);
                    &run[..dot]
                }
                None => run,
            };
            self.solid_before_dot |= before.iter().any(|&b| b != b'-');
        }
        self.kept = true;
        self.in_space = false;
        self.write(run)
    }

    /// White space (rule 6): one space for a run.
    fn push_space(&mut self) -> bool {
        self.kept = true;
        if self.in_space {
            return true;
        }
        self.in_space = true;
        self.write(b" ")
    }

    fn write(&mut self, piece: &[u8]) -> bool {
        let end = self.len + piece.len();
        if end > FLAT_BYTES {
            return false;
        }
        let to = &mut self.buf[self.len..end];
        if let [one] = piece {
            // Most pieces: cheaper than a call to copy them.
            to[0] = *one;
        } else {
            to.copy_from_slice(piece);
        }
        self.len = end;
        true
    }

    /// A character rule 2 drops.
    fn drop_one(&mut self) {
        if self.first_dot.is_none() {
            self.dropped_before_dot = true;
        }
    }

    /// Rule 7's exception, then rules 7–12.
    fn assemble(&self, out: &mut SafeName) {
        let text = &self.buf[..self.len];
        match self.first_dot {
            Some(dot) if self.dropped_before_dot && !self.solid_before_dot => {
                assemble(out, &[FALLBACK_STEM.as_bytes(), &text[dot..]].concat());
            }
            _ => assemble(out, text),
        }
    }
}

/// Characters below this one are all NFC starters that never combine with what precedes them
/// (combining class 0, quick check "yes"; a test checks it).
const NFC_INERT_BELOW: char = '\u{300}';

/// Every rule, in order, on any hint, one step at a time: for what the single pass of
/// [`Flat::flatten`] does not take (invalid UTF-8, text that NFC changes, a last component
/// that rule 2 empties, very long components).
fn sanitize_any(out: &mut SafeName, hint: &[u8]) {
    let decoded = String::from_utf8_lossy(hint);
    let visible = drop_invisible(&decoded);
    let stem_dropped = matches!(visible, Cow::Owned(_)) && stem_was_dropped(&decoded);
    let normalized = to_nfc(visible);
    let flat = flatten(last_text_component(&normalized));
    match flat.find('.') {
        Some(dot) if stem_dropped => {
            assemble(out, [FALLBACK_STEM, &flat[dot..]].concat().as_bytes());
        }
        _ => assemble(out, flat.as_bytes()),
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
fn last_text_component(text: &str) -> &str {
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

/// Rules 7–12 on a name that rules 1–6 have left (UTF-8): trimming, the stem and the
/// extension, the device prefix, truncation; the name is written once, into `out` (an
/// [`EMPTY`](SafeName::EMPTY) one).
fn assemble(out: &mut SafeName, name: &[u8]) {
    let name = trim(name);
    let (mut stem, ext) = stem_and_extension(name);
    let mut prefix = is_device_name(stem) || is_shell_file(stem, ext);
    let budget = MAX_NAME_BYTES - ext.map_or(0, |e| e.len() + 1) - usize::from(prefix);
    let mut underscore = None;
    if stem.len() > budget {
        (stem, underscore) = truncate(stem, budget, ext.is_none());
        if !has_alphanumeric(stem) {
            (stem, underscore, prefix) = (FALLBACK_STEM.as_bytes(), None, false);
        }
    }
    // The pieces are the trimmed name itself when the stem starts it and the extension
    // follows the stem's dot (nothing added or cut: `new` checks the length).
    let whole = match ext {
        _ if !same_start(stem, name) => &[][..],
        Some(ext)
            if !name
                .get(stem.len() + 1..)
                .is_some_and(|rest| same_start(ext, rest)) =>
        {
            &[]
        }
        _ => name,
    };
    out.fill(whole, prefix, stem, underscore, ext);
}

/// `piece` starts where `text` starts (it was cut from it).
#[inline(always)]
fn same_start(piece: &[u8], text: &[u8]) -> bool {
    piece.len() <= text.len() && std::ptr::eq(piece.as_ptr(), text.as_ptr())
}

/// Rule 7: without leading dots, dashes and spaces and trailing dots and spaces.
#[inline(always)]
fn trim(name: &[u8]) -> &[u8] {
    let start = name
        .iter()
        .position(|&b| !is_leading(b))
        .unwrap_or(name.len());
    trim_end(&name[start..])
}

/// Without trailing dots and spaces.
#[inline(always)]
fn trim_end(name: &[u8]) -> &[u8] {
    let end = name
        .iter()
        .rposition(|&b| !is_trailing(b))
        .map_or(0, |i| i + 1);
    &name[..end]
}

#[inline]
fn is_leading(b: u8) -> bool {
    LEADING.contains(&char::from(b))
}

#[inline]
fn is_trailing(b: u8) -> bool {
    TRAILING.contains(&char::from(b))
}

/// Rules 8–10: the stem and the extension of a trimmed name.
///
/// The extension is the text after the last dot when it is 1–16 letters or digits and the stem
/// before it is not empty; the stem loses trailing dots and spaces. A shortcut-like or
/// shell-namespace extension stays in the stem and the extension becomes [`SHORTCUT_SUFFIX`].
/// A stem with no letter or digit becomes [`FALLBACK_STEM`].
#[inline(always)]
fn stem_and_extension(name: &[u8]) -> (&[u8], Option<&[u8]>) {
    let (stem, ext) = match split_at_last_dot(name) {
        Some((_, tail)) if shell_acts_on(tail) => (name, Some(SHORTCUT_SUFFIX.as_bytes())),
        Some((before, tail)) => {
            let stem = trim_end(before);
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
        (FALLBACK_STEM.as_bytes(), ext)
    }
}

/// The most bytes after a name's last dot that can make an extension (16 characters of up to
/// four bytes) or a shortcut's extension.
const MAX_TAIL_BYTES: usize = 4 * MAX_EXTENSION_CHARS;

const _: () = assert!(max_len(SHORTCUT_EXTENSIONS) <= MAX_TAIL_BYTES);

/// `name` before and after its last dot, when what follows it can matter to rules 8 and 9:
/// at most [`MAX_TAIL_BYTES`], or anything in braces.
#[inline(always)]
fn split_at_last_dot(name: &[u8]) -> Option<(&[u8], &[u8])> {
    // A byte search: `.` is ASCII, so the bytes next to it are on character boundaries.
    let from = name.len().saturating_sub(MAX_TAIL_BYTES + 1);
    let dot = match name[from..].iter().rposition(|&b| b == b'.') {
        Some(dot) => from + dot,
        // A longer tail matters only in braces (rule 9).
        None if name.ends_with(b"}") => name.iter().rposition(|&b| b == b'.')?,
        None => return None,
    };
    Some((&name[..dot], &name[dot + 1..]))
}

/// The character `bytes` start with and its length, if they start with a well-formed UTF-8
/// sequence (no overlong form, no surrogate, nothing past U+10FFFF).
#[inline]
fn decode(bytes: &[u8]) -> Option<(char, usize)> {
    let lead = *bytes.first()?;
    let (len, bits, least) = match lead {
        0x00..=0x7F => return Some((char::from(lead), 1)),
        0xC2..=0xDF => (2, lead & 0x1F, 0x80),
        0xE0..=0xEF => (3, lead & 0x0F, 0x800),
        0xF0..=0xF4 => (4, lead & 0x07, 0x1_0000),
        _ => return None,
    };
    let mut code = u32::from(bits);
    for &b in bytes.get(1..len)? {
        if b & 0xC0 != 0x80 {
            return None;
        }
        code = (code << 6) | u32::from(b & 0x3F);
    }
    // `char::from_u32` refuses surrogates and what is past U+10FFFF.
    char::from_u32(code)
        .filter(|_| code >= least)
        .map(|c| (c, len))
}

/// The characters of `bytes`, which are UTF-8.
fn chars(mut bytes: &[u8]) -> impl Iterator<Item = char> + '_ {
    std::iter::from_fn(move || {
        let (c, len) = decode(bytes)?;
        bytes = &bytes[len..];
        Some(c)
    })
}

/// Characters that are invisible or that change how surrounding text displays (rule 2).
fn is_invisible(c: char) -> bool {
    // Shortcuts for ASCII, the Latin letters, IPA and the spacing modifiers up to U+02FF (a
    // test checks them against the categories): the C0 and C1 controls, DEL and the soft
    // hyphen. Past them, one look at a table made from the categories.
    if c < NFC_INERT_BELOW {
        return c.is_ascii_control() || ('\u{80}'..='\u{9F}').contains(&c) || c == '\u{AD}';
    }
    unicode::INVISIBLE.contains(c)
}

/// A character of [`REPLACED`].
fn is_replaced(c: char) -> bool {
    if c.is_ascii() {
        ASCII_REPLACED[c as usize]
    } else {
        c >= FIRST_NON_ASCII_REPLACED && REPLACED_SORTED.binary_search(&c).is_ok()
    }
}

/// Rule 8: 1–16 letters or digits.
#[inline(always)]
fn is_extension(ext: &[u8]) -> bool {
    match ext.iter().position(|b| !b.is_ascii_alphanumeric()) {
        None => (1..=MAX_EXTENSION_CHARS).contains(&ext.len()),
        // Not ASCII: count characters (rule 8 counts them, not bytes).
        Some(i) if !ext[i].is_ascii() => {
            let mut count = 0;
            let alphanumeric = chars(ext).all(|c| {
                count += 1;
                is_alphanumeric(c)
            });
            alphanumeric && (1..=MAX_EXTENSION_CHARS).contains(&count)
        }
        Some(_) => false,
    }
}

/// Rule 9: what follows a name's last dot makes the shell act on the file: a shortcut-like
/// extension, or one in braces (a shell namespace's CLSID, or anything else in braces).
#[inline(always)]
fn shell_acts_on(tail: &[u8]) -> bool {
    is_shortcut(tail) || is_braced(tail)
}

/// `{…}`: Windows reads an extension in braces as a CLSID.
#[inline(always)]
fn is_braced(tail: &[u8]) -> bool {
    tail.len() >= 2 && tail.starts_with(b"{") && tail.ends_with(b"}")
}

/// The signatures of the [`SHORTCUT_EXTENSIONS`], as a bit set: most extensions are told
/// apart from all of them by it alone.
const SHORTCUT_SIGNATURES: [u64; 16] = signatures(SHORTCUT_EXTENSIONS);

/// A hash of a tail's length and first two bytes, lowercased, below 1024.
#[inline(always)]
const fn signature(tail: &[u8]) -> usize {
    let first = if tail.is_empty() {
        0
    } else {
        tail[0].to_ascii_lowercase()
    };
    let second = if tail.len() < 2 {
        0
    } else {
        tail[1].to_ascii_lowercase()
    };
    (first as usize * 37 + second as usize * 11 + tail.len()) % 1024
}

const fn signatures(names: &[&str]) -> [u64; 16] {
    let mut set = [0; 16];
    let mut i = 0;
    while i < names.len() {
        let sig = signature(names[i].as_bytes());
        set[sig / 64] |= 1 << (sig % 64);
        i += 1;
    }
    set
}

#[inline(always)]
fn is_shortcut(ext: &[u8]) -> bool {
    let sig = signature(ext);
    SHORTCUT_SIGNATURES[sig / 64] & (1 << (sig % 64)) != 0
        && SHORTCUT_EXTENSIONS
            .iter()
            .any(|s| s.as_bytes().eq_ignore_ascii_case(ext))
}

/// Whether `stem` (UTF-8) has a letter or digit.
#[inline(always)]
fn has_alphanumeric(stem: &[u8]) -> bool {
    let mut i = 0;
    while let Some(&b) = stem.get(i) {
        if b.is_ascii() {
            if b.is_ascii_alphanumeric() {
                return true;
            }
            i += 1;
        } else {
            let Some((c, len)) = decode(&stem[i..]) else {
                return false;
            };
            if is_alphanumeric(c) {
                return true;
            }
            i += len;
        }
    }
    false
}

/// [`char::is_alphanumeric`], with the Latin letters up to U+024F told apart without a lookup
/// (a test checks them).
fn is_alphanumeric(c: char) -> bool {
    if c < '\u{250}' {
        matches!(c,
            'a'..='z' | 'A'..='Z' | '0'..='9'
            | '\u{AA}' | '\u{B2}' | '\u{B3}' | '\u{B5}' | '\u{B9}' | '\u{BA}'
            | '\u{BC}'..='\u{BE}' | '\u{C0}'..='\u{D6}' | '\u{D8}'..='\u{F6}' | '\u{F8}'..='\u{24F}')
    } else {
        c.is_alphanumeric()
    }
}

/// The most bytes of a [`DEVICE_NAMES`] entry, which bounds its characters.
const MAX_DEVICE_NAME_BYTES: usize = max_len(DEVICE_NAMES);

/// The first three letters of each of the [`DEVICE_NAMES`] (all ASCII), as little-endian
/// numbers.
const DEVICE_NAME_STARTS: [u32; DEVICE_NAMES.len()] = starts(DEVICE_NAMES);

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

/// The first three bytes of each of `names`, which all start with three lowercase ASCII
/// letters.
const fn starts<const N: usize>(names: &[&str]) -> [u32; N] {
    let mut starts = [0; N];
    let mut i = 0;
    while i < N {
        let [a, b, c, ..] = *names[i].as_bytes() else {
            panic!("a device name of fewer than three bytes");
        };
        assert!(a.is_ascii_lowercase() && b.is_ascii_lowercase() && c.is_ascii_lowercase());
        starts[i] = u32::from_le_bytes([a, b, c, 0]);
        i += 1;
    }
    starts
}

/// Windows treats `CON`, `con.txt`, `CON .tar.gz` all as the console device.
///
/// The stem up to its first dot, without trailing spaces, lowercased, is one of
/// [`DEVICE_NAMES`] (all lowercase). Lowercased character by character, which differs from
/// [`str::to_lowercase`] only for a final `Σ`, in no device name.
fn is_device_name(stem: &[u8]) -> bool {
    // Every device name starts with three ASCII letters, and no other character lowercases to
    // a letter that starts one (a test checks it): a look at three bytes rules out most stems.
    let [a, b, c, ..] = stem else {
        return false;
    };
    let start = u32::from_le_bytes([
        a.to_ascii_lowercase(),
        b.to_ascii_lowercase(),
        c.to_ascii_lowercase(),
        0,
    ]);
    if !DEVICE_NAME_STARTS.contains(&start) {
        return false;
    }
    // Lowercasing never makes fewer characters, and a device name has at most as many
    // characters as bytes, so a base of more than four bytes a character for each (and a
    // space, the most white space rule 6 leaves) is no device name.
    let longest = 4 * MAX_DEVICE_NAME_BYTES + 1;
    let mut base = match stem.iter().take(longest + 1).position(|&b| b == b'.') {
        Some(dot) => &stem[..dot],
        None if stem.len() <= longest => stem,
        None => return false,
    };
    while let [rest @ .., b' '] = base {
        base = rest;
    }
    if base.is_ascii() {
        // ASCII lowercasing is all of lowercasing here.
        return base.len() <= MAX_DEVICE_NAME_BYTES
            && DEVICE_NAMES
                .iter()
                .any(|d| d.as_bytes().eq_ignore_ascii_case(base));
    }
    let mut lower = ['\0'; MAX_DEVICE_NAME_BYTES];
    let mut len = 0;
    for c in chars(base).flat_map(char::to_lowercase) {
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
#[inline]
fn is_shell_file(stem: &[u8], ext: Option<&[u8]>) -> bool {
    ext.is_some_and(|ext| {
        SHELL_FILES.iter().any(|(s, e)| {
            // The lengths first: most names are told apart by them.
            (stem.len(), ext.len()) == (s.len(), e.len())
                && stem.eq_ignore_ascii_case(s.as_bytes())
                && ext.eq_ignore_ascii_case(e.as_bytes())
        })
    })
}

/// Rule 12: `stem` (UTF-8, longer than `budget`) cut to at most `budget` bytes on a character
/// boundary.
///
/// The cut stem loses trailing dots and spaces; in a name without extension, a dot that would
/// now introduce something extension-like is to become `_` (its index is returned), so the
/// name re-parses the same way (which keeps [`sanitize`] idempotent).
fn truncate(stem: &[u8], budget: usize, no_extension: bool) -> (&[u8], Option<usize>) {
    let mut cut = budget;
    // A byte that continues a character is `0b10xx_xxxx`.
    while stem[cut] & 0xC0 == 0x80 {
        cut -= 1;
    }
    let kept = trim_end(&stem[..cut]);
    let underscore = if no_extension {
        kept.iter().rposition(|&b| b == b'.').filter(|&dot| {
            let tail = &kept[dot + 1..];
            is_extension(tail) || shell_acts_on(tail)
        })
    } else {
        None
    };
    (kept, underscore)
}

#[cfg(test)]
mod tests;
