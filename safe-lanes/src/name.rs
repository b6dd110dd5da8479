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
//!    option-like, never a Windows "trailing dot" alias.
//! 8. Split off the extension: the text after the last `.`, when it is 1–16 letters or digits.
//!    The stem loses trailing dots and spaces.
//! 9. A shortcut-like extension (`lnk`, `url`, `desktop`, `webloc`, `scf`, `local`, …) gets
//!    `.download` appended, so no file manager treats the file as a launcher.
//! 10. A stem with no letter or digit becomes `download`.
//! 11. A Windows device name (`CON`, `PRN`, `AUX`, `NUL`, `COM0`–`COM9`, `LPT0`–`LPT9`, the
//!     superscript-digit forms, `CONIN$`, `CONOUT$`, `CLOCK$`), with any extension, gets a `_`
//!     prefix.
//! 12. Truncate to [`MAX_NAME_BYTES`] on a character boundary, keeping the extension whole,
//!     which leaves room for a collision suffix ` (N)` within the 255-byte limit of Linux file
//!     systems.
//!
//! The result is never empty, and `sanitize(sanitize(x)) == sanitize(x)` for every `x`
//! (checked by property tests and a fuzz target).

use std::fmt;

use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategory as G, UnicodeGeneralCategory};

/// The largest [`SafeName`] in bytes. With a collision suffix ` (4294967295)` (13 bytes) a
/// numbered name still fits the 255-byte name limit.
pub const MAX_NAME_BYTES: usize = 240;

/// The most characters an extension may have to be kept through truncation.
const MAX_EXTENSION_CHARS: usize = 16;

/// The name a stem without any letter or digit becomes.
const FALLBACK_STEM: &str = "download";

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

    /// The `n`th collision variant, built from the stem: `stem (n).ext`; `n == 0` is the name
    /// itself. Always one component of at most 255 bytes.
    pub fn numbered(&self, n: u32) -> String {
        if n == 0 {
            return self.name.clone();
        }
        match self.extension() {
            Some(ext) => format!("{} ({n}).{ext}", self.stem()),
            None => format!("{} ({n})", self.stem()),
        }
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
    let decoded = String::from_utf8_lossy(hint.as_ref());
    let visible: String = decoded.chars().filter(|&c| !is_invisible(c)).collect();
    let normalized: String = visible.nfc().collect();
    let last = normalized
        .rsplit(['/', '\\'])
        .find(|part| !part.is_empty())
        .unwrap_or_default();

    let mut flat = String::with_capacity(last.len());
    let mut in_space = false;
    for c in last.chars() {
        if c.is_whitespace() {
            if !in_space {
                flat.push(' ');
            }
            in_space = true;
        } else {
            flat.push(if REPLACED.contains(&c) { '_' } else { c });
            in_space = false;
        }
    }
    let trimmed = flat
        .trim_start_matches(['.', '-', ' '])
        .trim_end_matches(['.', ' ']);

    let (mut stem, mut ext) = split_extension(trimmed);
    if let Some(tail) = trimmed.rsplit_once('.').map(|(_, tail)| tail)
        && is_shortcut(tail)
    {
        stem = trimmed.to_owned();
        ext = Some("download".to_owned());
    }
    if !has_alphanumeric(&stem) {
        stem = FALLBACK_STEM.to_owned();
    }
    if is_device_name(&stem) {
        stem.insert(0, '_');
    }
    truncate_stem(&mut stem, ext.as_deref());
    if !has_alphanumeric(&stem) {
        stem = FALLBACK_STEM.to_owned();
    }
    match ext {
        Some(ext) => SafeName {
            dot: Some(stem.len()),
            name: format!("{stem}.{ext}"),
        },
        None => SafeName {
            name: stem,
            dot: None,
        },
    }
}

/// Characters that are invisible or that change how surrounding text displays.
fn is_invisible(c: char) -> bool {
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

/// `(stem, extension)`: the extension is the text after the last dot when it is 1–16 letters or
/// digits and the stem before it is not empty. The stem loses trailing dots and spaces.
fn split_extension(name: &str) -> (String, Option<String>) {
    if let Some((stem, ext)) = name.rsplit_once('.') {
        let stem = stem.trim_end_matches(['.', ' ']);
        if is_extension(ext) && !stem.is_empty() {
            return (stem.to_owned(), Some(ext.to_owned()));
        }
    }
    (name.to_owned(), None)
}

fn is_extension(ext: &str) -> bool {
    let count = ext.chars().count();
    (1..=MAX_EXTENSION_CHARS).contains(&count) && ext.chars().all(char::is_alphanumeric)
}

fn is_shortcut(ext: &str) -> bool {
    SHORTCUT_EXTENSIONS
        .iter()
        .any(|s| s.eq_ignore_ascii_case(ext))
}

fn has_alphanumeric(stem: &str) -> bool {
    stem.chars().any(char::is_alphanumeric)
}

/// Windows treats `CON`, `con.txt`, `CON .tar.gz` all as the console device.
fn is_device_name(stem: &str) -> bool {
    let base = stem
        .split('.')
        .next()
        .unwrap_or_default()
        .trim_end_matches(' ');
    let lower = base.to_lowercase();
    DEVICE_NAMES.contains(&lower.as_str())
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
    let kept = stem.trim_end_matches(['.', ' ']).len();
    stem.truncate(kept);
    if ext.is_none()
        && let Some(dot) = stem.rfind('.')
        && (is_extension(&stem[dot + 1..]) || is_shortcut(&stem[dot + 1..]))
    {
        stem.replace_range(dot..=dot, "_");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_keeps_the_extension_after_the_suffix() {
        let name = sanitize("report.final.pdf");
        assert_eq!(name.stem(), "report.final");
        assert_eq!(name.extension(), Some("pdf"));
        assert_eq!(name.numbered(0), "report.final.pdf");
        assert_eq!(name.numbered(3), "report.final (3).pdf");
        assert_eq!(sanitize("README").numbered(2), "README (2)");
    }

    #[test]
    fn a_numbered_name_of_the_longest_name_fits_255_bytes() {
        let name = sanitize("é".repeat(400) + ".tar");
        assert!(name.as_str().len() <= MAX_NAME_BYTES);
        assert!(name.numbered(u32::MAX).len() <= 255);
    }
}
