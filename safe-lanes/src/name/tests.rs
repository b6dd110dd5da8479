//! The fast path against the general one, the general one against the rules applied one step
//! at a time, and the shortcuts of the character predicates against what they stand for.

use super::*;
use proptest::prelude::*;

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
fn numbered_goes_before_a_compound_extension() {
    for (hint, first, second) in [
        ("test.tar.gz", "test (1).tar.gz", "test (2).tar.gz"),
        ("Backup.TAR.XZ", "Backup (1).TAR.XZ", "Backup (2).TAR.XZ"),
        ("src.tar.zst", "src (1).tar.zst", "src (2).tar.zst"),
        ("old.tar.Z", "old (1).tar.Z", "old (2).tar.Z"),
        // Not a compressed tar archive: the number goes before the last extension.
        ("photo.jpg.gz", "photo.jpg (1).gz", "photo.jpg (2).gz"),
        (
            "archive.tar.gz.pdf",
            "archive.tar.gz (1).pdf",
            "archive.tar.gz (2).pdf",
        ),
        ("data.tgz", "data (1).tgz", "data (2).tgz"),
        // No stem before the compound extension, or one ending with a space.
        (".tar.gz", "tar (1).gz", "tar (2).gz"),
        ("a .tar.gz", "a .tar (1).gz", "a .tar (2).gz"),
    ] {
        let name = sanitize(hint);
        assert_eq!(name.numbered(0), name.as_str(), "{hint:?}");
        assert_eq!(name.numbered(1), first, "{hint:?}");
        assert_eq!(name.numbered(2), second, "{hint:?}");
        assert_eq!(sanitize(first).as_str(), first, "a fixed point: {hint:?}");
    }
    // Compared without regard to ASCII case, one entry per compression.
    for compound in COMPOUND_EXTENSIONS {
        assert_eq!(*compound, compound.to_ascii_lowercase());
        let name = sanitize(format!("x.{}", compound.to_ascii_uppercase()));
        assert_eq!(
            name.numbered(7),
            format!("x (7).{}", compound.to_ascii_uppercase())
        );
    }
}

#[test]
fn a_numbered_name_of_the_longest_name_fits_255_bytes() {
    let name = sanitize("é".repeat(400) + ".tar");
    assert!(name.as_str().len() <= MAX_NAME_BYTES);
    assert!(name.numbered(u32::MAX).len() <= 255);
    let name = sanitize("a".repeat(MAX_NAME_BYTES - ".tar.lzma".len()) + ".tar.lzma");
    assert_eq!(name.as_str().len(), MAX_NAME_BYTES);
    assert!(name.numbered(u32::MAX).ends_with("a (4294967295).tar.lzma"));
    assert!(name.numbered(u32::MAX).len() <= 255);
}

/// The twelve rules of the module documentation, one step each, every intermediate result a
/// new `String`: the specification the faster [`sanitize`] is checked against.
fn by_the_rules(hint: &[u8]) -> SafeName {
    let decoded = String::from_utf8_lossy(hint);
    // `None` where rule 2 drops a character.
    let marked: Vec<Option<char>> = decoded
        .chars()
        .map(|c| (!invisible_by_category(c)).then_some(c))
        .collect();
    let visible: String = marked.iter().flatten().collect();
    let normalized: String = visible.nfc().collect();
    let last = normalized
        .rsplit(['/', '\\'])
        .find(|part| !part.is_empty())
        .unwrap_or_default();
    // Rule 7's exception, found in the marked text: the last component with something left
    // after rule 2, where only dropped characters, dashes and white space (at least one
    // dropped) come before the first dot.
    let stem_dropped = marked
        .split(|&c| c == Some('/') || c == Some('\\'))
        .rfind(|part| part.iter().any(Option::is_some))
        .and_then(|part| {
            let dot = part.iter().position(|&c| c == Some('.'))?;
            let before = &part[..dot];
            Some(
                before.iter().any(Option::is_none)
                    && before
                        .iter()
                        .flatten()
                        .all(|&c| c == '-' || c.is_whitespace()),
            )
        })
        .unwrap_or(false);
    let mut flat = String::new();
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
    if stem_dropped {
        let dot = flat.find('.').expect("the component has a dot");
        flat = format!("download{}", &flat[dot..]);
    }
    let trimmed = flat
        .trim_start_matches(['.', '-', ' '])
        .trim_end_matches(['.', ' ']);
    let (mut stem, mut ext) = split_extension(trimmed);
    if let Some((_, tail)) = trimmed.rsplit_once('.')
        && (is_shortcut(tail) || (tail.len() > 1 && tail.starts_with('{') && tail.ends_with('}')))
    {
        stem = trimmed.to_owned();
        ext = Some("download".to_owned());
    }
    if !has_alphanumeric(&stem) {
        stem = "download".to_owned();
    }
    let base = stem
        .split('.')
        .next()
        .unwrap_or_default()
        .trim_end_matches(' ');
    let whole = format!("{stem}.{}", ext.as_deref().unwrap_or_default()).to_lowercase();
    if DEVICE_NAMES.contains(&base.to_lowercase().as_str())
        || ["desktop.ini", "thumbs.db"].contains(&whole.as_str())
    {
        stem.insert(0, '_');
    }
    truncate_stem(&mut stem, ext.as_deref());
    if !has_alphanumeric(&stem) {
        stem = "download".to_owned();
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

fn invisible_by_category(c: char) -> bool {
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

/// Pieces that each touch a rule, ASCII only: dots, dashes, spaces, separators, reserved
/// characters, controls, device names, shortcut and ordinary extensions.
const ASCII_PIECES: &[&str] = &[
    "a",
    "Z",
    "7",
    "_",
    "$",
    "(",
    "'",
    "~",
    ".",
    "..",
    "-",
    " ",
    "  ",
    "con",
    "CON",
    "Nul",
    "aux",
    "prn",
    "lpt1",
    "COM9",
    "com",
    "conout$",
    "Clock$",
    "conin",
    ".lnk",
    ".LNK",
    ".url",
    ".desktop",
    ".appref-ms",
    ".library-ms",
    ".Local",
    ".txt",
    ".pdf",
    ".tar",
    ".gz",
    ".exe",
    ".0123456789abcdef",
    ".0123456789abcdefg",
    ".{",
    "}",
    ".{20D04FE0-3AEA-1069-A2D8-08002B30309D}",
    "download",
    "desktop",
    "Thumbs",
    ".ini",
    ".DB",
    "/",
    "\\",
    ":",
    "%",
    "*",
    "?",
    "\"",
    "<",
    ">",
    "|",
    "\t",
    "\n",
    "\r",
    "\x0b",
    "\x0c",
    "\x1b",
    "\x7f",
    "\0",
];

/// Non-ASCII pieces: NFD, combining marks, bidi and zero-width characters, other white space,
/// look-alikes, superscript digits, characters whose lowercase is special, private use,
/// noncharacters, emoji.
const UNICODE_PIECES: &[&str] = &[
    "é",
    "e\u{301}",
    "\u{301}",
    "\u{327}\u{301}",
    "\u{202E}",
    "\u{2066}",
    "\u{200B}",
    "\u{FEFF}",
    "\u{AD}",
    "\u{A0}",
    "\u{3000}",
    "\u{85}",
    "\u{2028}",
    "\u{2215}",
    "\u{FF0F}",
    "\u{FF3C}",
    "\u{A789}",
    "\u{FF0E}",
    "\u{B9}",
    "\u{B3}",
    "\u{212A}",
    "\u{130}",
    "\u{3A3}",
    "\u{E000}",
    "\u{FDD0}",
    "\u{FFFD}",
    "\u{1F389}",
    "\u{FF43}\u{FF4F}\u{FF4E}",
    "\u{C5}",
    "\u{212B}",
    "\u{1E9E}",
    "\u{10428}",
];

fn ascii_biased() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(ASCII_PIECES), 0..24).prop_map(|p| p.concat())
}

fn unicode_biased() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        prop::sample::select(ASCII_PIECES),
        prop::sample::select(UNICODE_PIECES)
    ];
    prop::collection::vec(piece, 0..24).prop_map(|p| p.concat())
}

/// A filler of `n` characters then a biased tail: names around the truncation budget.
fn long(tail: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    (
        0usize..=260,
        prop::sample::select(&["a", "é", ".", " ", "_"][..]),
        tail,
    )
        .prop_map(|(n, filler, tail)| filler.repeat(n) + &tail)
}

/// The fast path, when it applies, gives exactly what the general path gives.
fn fast_agrees(hint: &[u8]) -> Result<(), TestCaseError> {
    if let Some(fast) = fast_path(hint) {
        prop_assert_eq!(&fast, &sanitize_any(hint), "for {:?}", hint);
    }
    Ok(())
}

/// The fast path alone: `None` where it does not apply.
fn fast_path(hint: &[u8]) -> Option<SafeName> {
    as_plain_ascii(hint).map(|name| assemble(trim(name)))
}

/// `sanitize` (either path) gives exactly what the rules applied one by one give.
fn follows_the_rules(hint: &[u8]) -> Result<(), TestCaseError> {
    prop_assert_eq!(sanitize(hint), by_the_rules(hint), "for {:?}", hint);
    prop_assert_eq!(sanitize_any(hint), by_the_rules(hint), "for {:?}", hint);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn fast_path_agrees_on_any_ascii(hint in "[\\x00-\\x7f]{0,300}") {
        fast_agrees(hint.as_bytes())?;
        follows_the_rules(hint.as_bytes())?;
    }

    #[test]
    fn fast_path_agrees_on_printable_ascii(hint in "[ -~]{0,260}") {
        fast_agrees(hint.as_bytes())?;
        follows_the_rules(hint.as_bytes())?;
    }

    #[test]
    fn fast_path_agrees_on_a_biased_alphabet(hint in ascii_biased()) {
        fast_agrees(hint.as_bytes())?;
        follows_the_rules(hint.as_bytes())?;
    }

    #[test]
    fn fast_path_agrees_around_the_length_limit(hint in long(ascii_biased())) {
        fast_agrees(hint.as_bytes())?;
        follows_the_rules(hint.as_bytes())?;
    }

    #[test]
    fn any_bytes_follow_the_rules(hint in proptest::collection::vec(any::<u8>(), 0..300)) {
        fast_agrees(&hint)?;
        follows_the_rules(&hint)?;
    }

    #[test]
    fn any_unicode_follows_the_rules(hint in "\\PC{0,300}") {
        fast_agrees(hint.as_bytes())?;
        follows_the_rules(hint.as_bytes())?;
    }

    #[test]
    fn a_biased_unicode_alphabet_follows_the_rules(hint in unicode_biased()) {
        fast_agrees(hint.as_bytes())?;
        follows_the_rules(hint.as_bytes())?;
    }

    #[test]
    fn long_unicode_follows_the_rules(hint in long(unicode_biased())) {
        fast_agrees(hint.as_bytes())?;
        follows_the_rules(hint.as_bytes())?;
    }
}

#[test]
fn ordinary_ascii_names_take_the_fast_path_unchanged() {
    for hint in [
        "report.pdf",
        "Quarterly Report (final).docx",
        "IMG_20261130_101500.jpg",
        "invoice-2026-11.pdf",
        "photo 2024-01-01.jpg",
        "archive.tar.gz",
        "README",
        "a.b-c",
        "CONSOLE.txt",
        "name.verylongextension123",
    ] {
        let fast = fast_path(hint.as_bytes());
        assert_eq!(fast.as_ref().map(SafeName::as_str), Some(hint), "{hint:?}");
        assert_eq!(fast, Some(by_the_rules(hint.as_bytes())), "{hint:?}");
    }
}

#[test]
fn plain_ascii_names_that_rules_7_to_12_change_take_the_fast_path() {
    for (hint, expected) in [
        ("", "download"),
        (".hidden", "hidden"),
        ("-rf", "rf"),
        (" x.", "x"),
        ("a. .txt", "a.txt"),
        ("CON .txt", "_CON.txt"),
        ("evil.lnk", "evil.lnk.download"),
        ("___.pdf", "download.pdf"),
    ] {
        let fast = fast_path(hint.as_bytes());
        assert_eq!(
            fast.as_ref().map(SafeName::as_str),
            Some(expected),
            "{hint:?}"
        );
    }
    let long = "a".repeat(MAX_NAME_BYTES + 1);
    let fast = fast_path(long.as_bytes()).map(|name| name.as_str().len());
    assert_eq!(fast, Some(MAX_NAME_BYTES));
}

/// Names that rules 1–6 change, and any non-ASCII name.
#[test]
fn names_rules_1_to_6_change_and_non_ascii_names_never_take_the_fast_path() {
    for hint in [
        "a  b",
        "a/b",
        "a\\b",
        "what?.txt",
        "100%.txt",
        "tab\there",
        "new\nline",
        "del\u{7f}",
        "\0nul",
        "résumé.pdf",
        "e\u{301}te\u{301}.txt",
        "invoice\u{202E}fdp.exe",
        "a\u{2215}b",
        "a\u{A0}b",
        "a \u{3000}b",
        "\u{E000}x",
    ] {
        assert_eq!(fast_path(hint.as_bytes()), None, "{hint:?}");
    }
    assert_eq!(fast_path(b"\xff"), None);
}

#[test]
fn the_latin_shortcut_of_is_invisible_is_the_category() {
    for c in ('\0'..='\u{17F}').chain(['\u{180}', '\u{202E}', '\u{E000}']) {
        assert_eq!(is_invisible(c), invisible_by_category(c), "{c:?}");
    }
}

#[test]
fn the_shortcuts_of_is_replaced_are_the_list() {
    for c in (0..=u32::from(char::MAX)).filter_map(char::from_u32) {
        assert_eq!(is_replaced(c), REPLACED.contains(&c), "{c:?}");
    }
}

#[test]
fn plain_ascii_is_printable_and_neither_a_separator_nor_replaced() {
    for b in 0..=u8::MAX {
        let c = char::from(b);
        let plain = (c.is_ascii_graphic() || c == ' ')
            && !['/', '\\'].contains(&c)
            && !REPLACED.contains(&c);
        assert_eq!(PLAIN_ASCII[usize::from(b)], plain, "{c:?}");
    }
}

#[test]
fn device_names_are_found_without_allocating_as_by_lowercasing() {
    let mut bases: Vec<String> = DEVICE_NAMES.iter().map(|d| d.to_uppercase()).collect();
    bases.extend(DEVICE_NAMES.iter().map(|d| (*d).to_owned()));
    bases.extend(
        [
            "CoN",
            "CON ",
            "con.txt",
            "Com\u{B9}.x",
            "\u{212A}on",
            "conİn$",
            "CONOUTΣ",
        ]
        .map(str::to_owned),
    );
    for base in bases {
        let stem = base
            .split('.')
            .next()
            .unwrap_or_default()
            .trim_end_matches(' ');
        let by_lowercase = DEVICE_NAMES.contains(&stem.to_lowercase().as_str());
        assert_eq!(is_device_name(&base), by_lowercase, "{base:?}");
    }
}

/// What rule 7's exception relies on ([`stem_was_dropped`] looks at the text before NFC): NFC
/// joins nothing to a dot, a separator, a dash or white space, and white space stays white
/// space.
#[test]
fn nfc_joins_nothing_to_dots_separators_dashes_and_white_space() {
    use unicode_normalization::char::canonical_combining_class;
    let all = || (0..=u32::from(char::MAX)).filter_map(char::from_u32);
    let joiners: Vec<char> = all()
        .filter(|&c| {
            canonical_combining_class(c) != 0
                || is_nfc_quick(std::iter::once(c)) != IsNormalized::Yes
        })
        .collect();
    let bases = ['.', '/', '\\', '-']
        .into_iter()
        .chain(all().filter(|c| c.is_whitespace()));
    for base in bases {
        for &joiner in &joiners {
            let nfc: Vec<char> = [base, joiner].into_iter().nfc().collect();
            let alone: Vec<char> = std::iter::once(joiner).nfc().collect();
            let kept = nfc[0] == base || (base.is_whitespace() && nfc[0].is_whitespace());
            assert!(
                kept && nfc[1..] == alone,
                "{base:?} {joiner:?} gives {nfc:?}"
            );
        }
    }
}
