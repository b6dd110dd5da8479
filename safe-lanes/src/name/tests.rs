//! Each path of `sanitize` (the plain one, the one-pass one, the step-by-step one) against
//! the rules applied one at a time, and the shortcuts of the character predicates and tables
//! against what they stand for.

use super::*;
use proptest::prelude::*;
use unicode_properties::{GeneralCategory as G, UnicodeGeneralCategory};

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
        && shell_acts_on_by_the_list(tail)
    {
        stem = trimmed.to_owned();
        ext = Some("download".to_owned());
    }
    if !stem.chars().any(char::is_alphanumeric) {
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
    // Rule 12: cut on a character boundary, trailing dots and spaces dropped, and in a name
    // without extension a dot that now introduces something extension-like made `_`.
    let budget = MAX_NAME_BYTES - ext.as_ref().map_or(0, |e| e.len() + 1);
    if stem.len() > budget {
        let mut cut = budget;
        while !stem.is_char_boundary(cut) {
            cut -= 1;
        }
        stem.truncate(cut);
        stem.truncate(stem.trim_end_matches(['.', ' ']).len());
        if ext.is_none()
            && let Some(dot) = stem.rfind('.')
            && (is_extension_by_the_rule(&stem[dot + 1..])
                || shell_acts_on_by_the_list(&stem[dot + 1..]))
        {
            stem.replace_range(dot..=dot, "_");
        }
    }
    if !stem.chars().any(char::is_alphanumeric) {
        stem = "download".to_owned();
    }
    made(|out| {
        out.fill(
            b"",
            false,
            stem.as_bytes(),
            None,
            ext.as_deref().map(str::as_bytes),
        )
    })
}

/// The name `make` writes into an empty one.
fn made(make: impl FnOnce(&mut SafeName)) -> SafeName {
    let mut name = SafeName::EMPTY;
    make(&mut name);
    name
}

/// Rule 8's extension: 1–16 letters or digits.
fn is_extension_by_the_rule(ext: &str) -> bool {
    (1..=MAX_EXTENSION_CHARS).contains(&ext.chars().count())
        && ext.chars().all(char::is_alphanumeric)
}

/// Rule 9: a shortcut's extension from the list, or one in braces.
fn shell_acts_on_by_the_list(tail: &str) -> bool {
    SHORTCUT_EXTENSIONS
        .iter()
        .any(|s| s.eq_ignore_ascii_case(tail))
        || (tail.len() > 1 && tail.starts_with('{') && tail.ends_with('}'))
}

/// `(stem, extension)`: the extension is the text after the last dot when it is 1–16 letters or
/// digits and the stem before it is not empty. The stem loses trailing dots and spaces.
fn split_extension(name: &str) -> (String, Option<String>) {
    if let Some((stem, ext)) = name.rsplit_once('.') {
        let stem = stem.trim_end_matches(['.', ' ']);
        if is_extension_by_the_rule(ext) && !stem.is_empty() {
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
    "\u{301}\u{327}",
    "\u{316}",
    "<\u{338}",
    "\u{2223}\u{338}",
    "\u{1100}\u{1161}\u{11A8}",
    "\u{AC00}\u{11A8}",
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

/// The plain path alone: `None` where it does not apply.
fn plain_path(hint: &[u8]) -> Option<SafeName> {
    match last_component(hint) {
        Component::Plain(name) => Some(made(|out| assemble(out, name))),
        Component::Other(_) => None,
    }
}

/// The one-pass path alone: `None` for a plain name and for what it leaves to
/// [`sanitize_any`].
fn one_pass_path(hint: &[u8]) -> Option<SafeName> {
    match last_component(hint) {
        Component::Plain(_) => None,
        Component::Other(from) => {
            let mut flat = Flat::new();
            flat.flatten(from).then(|| made(|out| flat.assemble(out)))
        }
    }
}

/// Every path that applies, and `sanitize`, give exactly what the rules applied one by one
/// give.
fn follows_the_rules(hint: &[u8]) -> Result<(), TestCaseError> {
    let expected = by_the_rules(hint);
    if let Some(plain) = plain_path(hint) {
        prop_assert_eq!(&plain, &expected, "plain path, for {:?}", hint);
    }
    if let Some(one_pass) = one_pass_path(hint) {
        prop_assert_eq!(&one_pass, &expected, "one-pass path, for {:?}", hint);
    }
    let step_by_step = made(|out| sanitize_any(out, hint));
    prop_assert_eq!(&step_by_step, &expected, "step by step, for {:?}", hint);
    prop_assert_eq!(&sanitize(hint), &expected, "for {:?}", hint);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn any_ascii_follows_the_rules(hint in "[\\x00-\\x7f]{0,300}") {
        follows_the_rules(hint.as_bytes())?;
    }

    #[test]
    fn printable_ascii_follows_the_rules(hint in "[ -~]{0,260}") {
        follows_the_rules(hint.as_bytes())?;
    }

    #[test]
    fn a_biased_ascii_alphabet_follows_the_rules(hint in ascii_biased()) {
        follows_the_rules(hint.as_bytes())?;
    }

    #[test]
    fn ascii_around_the_length_limit_follows_the_rules(hint in long(ascii_biased())) {
        follows_the_rules(hint.as_bytes())?;
    }

    #[test]
    fn any_bytes_follow_the_rules(hint in proptest::collection::vec(any::<u8>(), 0..300)) {
        follows_the_rules(&hint)?;
    }

    #[test]
    fn any_unicode_follows_the_rules(hint in "\\PC{0,300}") {
        follows_the_rules(hint.as_bytes())?;
    }

    #[test]
    fn a_biased_unicode_alphabet_follows_the_rules(hint in unicode_biased()) {
        follows_the_rules(hint.as_bytes())?;
    }

    #[test]
    fn long_unicode_follows_the_rules(hint in long(unicode_biased())) {
        follows_the_rules(hint.as_bytes())?;
    }
}

#[test]
fn ordinary_names_take_the_plain_path_unchanged() {
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
        "résumé.pdf",
        "\u{DC}bersicht.txt",
        "簡単簡単簡単",
        "\u{1F389} party",
        "caf\u{E9} \u{C5}ngstr\u{F6}m.txt",
    ] {
        let plain = plain_path(hint.as_bytes());
        assert_eq!(plain.as_ref().map(SafeName::as_str), Some(hint), "{hint:?}");
        assert_eq!(plain, Some(by_the_rules(hint.as_bytes())), "{hint:?}");
    }
}

#[test]
fn plain_ascii_names_that_rules_4_and_7_to_12_change_take_the_plain_path() {
    for (hint, expected) in [
        ("", "download"),
        (".hidden", "hidden"),
        ("-rf", "rf"),
        (" x.", "x"),
        ("a. .txt", "a.txt"),
        ("CON .txt", "_CON.txt"),
        ("evil.lnk", "evil.lnk.download"),
        ("___.pdf", "download.pdf"),
        ("a/b", "b"),
        ("a\\b", "b"),
        ("../../.bashrc", "bashrc"),
        ("..\\..\\Windows\\System32\\evil.dll", "evil.dll"),
        ("dir/", "dir"),
        ("/", "download"),
    ] {
        let plain = plain_path(hint.as_bytes());
        assert_eq!(
            plain.as_ref().map(SafeName::as_str),
            Some(expected),
            "{hint:?}"
        );
    }
    let long = "a".repeat(MAX_NAME_BYTES + 1);
    let plain = plain_path(long.as_bytes()).map(|name| name.as_str().len());
    assert_eq!(plain, Some(MAX_NAME_BYTES));
}

/// Names that rules 1, 2, 5 or 6 change take the one-pass path, unless NFC changes them.
#[test]
fn names_rules_2_5_and_6_change_take_the_one_pass_path() {
    for (hint, expected) in [
        ("a  b", "a b"),
        ("what?.txt", "what_.txt"),
        ("100%.txt", "100_.txt"),
        ("tab\there", "tabhere"),
        ("new\nline", "newline"),
        ("del\u{7f}", "del"),
        ("\0nul", "_nul"),
        ("invoice\u{202E}fdp.exe", "invoicefdp.exe"),
        ("a\u{2215}b", "a_b"),
        ("a\u{A0}b", "a b"),
        ("a \u{3000}b", "a b"),
        ("\u{E000}x", "x"),
        ("\u{1b}[31mred\u{1b}[0m.txt", "[31mred[0m.txt"),
        ("a<b>c|d\"e*f:g%h.txt", "a_b_c_d_e_f_g_h.txt"),
        ("dir/\u{202E}.pdf", "download.pdf"),
        // NFD after ASCII letters, composed on the way.
        ("e\u{301}te\u{301}.txt", "\u{E9}t\u{E9}.txt"),
        ("A\u{30A}ngstr\u{F6}m", "\u{C5}ngstr\u{F6}m"),
        ("e\u{200B}\u{301}", "\u{E9}"),
        ("x=\u{338}", "x\u{2260}"),
    ] {
        let one_pass = one_pass_path(hint.as_bytes());
        assert_eq!(plain_path(hint.as_bytes()), None, "{hint:?}");
        assert_eq!(
            one_pass.as_ref().map(SafeName::as_str),
            Some(expected),
            "{hint:?}"
        );
    }
}

/// What the one pass leaves to the rules applied step by step.
#[test]
fn nfd_invalid_utf8_emptied_and_long_components_take_the_step_by_step_path() {
    for hint in [
        "e\u{301}\u{301}".as_bytes(),
        "e\u{301}\u{327}".as_bytes(),
        "\u{E9}\u{327}".as_bytes(),
        "\u{212B}".as_bytes(),
        "a\u{327}\u{301}\u{316}".as_bytes(),
        "<\u{338}".as_bytes(),
        b"\xff.txt",
        "name/\u{202E}".as_bytes(),
        "name/\u{200B}\u{200B}".as_bytes(),
    ] {
        assert_eq!(plain_path(hint), None, "{hint:?}");
        assert_eq!(one_pass_path(hint), None, "{hint:?}");
    }
    let long = "\u{e9}".repeat(FLAT_BYTES / 2 + 1);
    assert_eq!(one_pass_path(long.as_bytes()), None);
    assert_eq!(
        sanitize(long.as_bytes()).as_str(),
        "\u{e9}".repeat(MAX_NAME_BYTES / 2)
    );
}

#[test]
fn the_shortcut_of_is_invisible_below_u0300_is_the_category() {
    for c in ('\0'..NFC_INERT_BELOW).chain(['\u{300}', '\u{202E}', '\u{E000}']) {
        assert_eq!(is_invisible(c), invisible_by_category(c), "{c:?}");
    }
}

/// What the one pass assumes of the characters below [`NFC_INERT_BELOW`].
#[test]
fn characters_below_u0300_are_nfc_starters_that_never_combine_backwards() {
    use unicode_normalization::char::canonical_combining_class;
    for c in '\0'..NFC_INERT_BELOW {
        assert_eq!(canonical_combining_class(c), 0, "{c:?}");
        assert_eq!(is_nfc_quick(std::iter::once(c)), IsNormalized::Yes, "{c:?}");
    }
}

#[test]
fn the_shortcuts_of_is_replaced_are_the_list() {
    for c in (0..=u32::from(char::MAX)).filter_map(char::from_u32) {
        assert_eq!(is_replaced(c), REPLACED.contains(&c), "{c:?}");
    }
}

#[test]
fn the_byte_classes_are_the_rules_of_each_byte() {
    for b in 0..=u8::MAX {
        let c = char::from(b);
        let class = if !b.is_ascii() {
            NON_ASCII
        } else if c.is_ascii_control() {
            CONTROL
        } else if c == ' ' {
            SPACE
        } else if ['/', '\\'].contains(&c) {
            SEPARATOR
        } else if REPLACED.contains(&c) {
            RESERVED
        } else {
            PLAIN
        };
        assert_eq!(BYTE_CLASS[usize::from(b)], class, "{c:?}");
    }
}

#[test]
fn the_sorted_replaced_characters_are_the_list() {
    assert!(REPLACED_SORTED.windows(2).all(|w| w[0] < w[1]));
    let mut list = REPLACED.to_vec();
    list.sort_unstable();
    assert_eq!(list, REPLACED_SORTED);
}

#[test]
fn the_shortcuts_of_the_extension_and_shortcut_checks_are_the_rules() {
    let tails = [
        "",
        "a",
        "pdf",
        "PDF",
        "docx",
        "lnk",
        "LnK",
        "l\u{e9}",
        "\u{e9}t\u{e9}",
        "x-y",
        "a b",
        "0123456789abcdef",
        "0123456789abcdefg",
        "\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}",
        "\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}",
        "appref-ms",
        "SearchConnector-ms",
        "desktop",
        "desktops",
        "\u{2460}",
        "\u{1D7CE}",
    ];
    for tail in tails.into_iter().chain(SHORTCUT_EXTENSIONS.iter().copied()) {
        let upper = tail.to_uppercase();
        for tail in [tail, upper.as_str()] {
            let bytes = tail.as_bytes();
            assert_eq!(
                is_extension(bytes),
                is_extension_by_the_rule(tail),
                "{tail:?}"
            );
            assert_eq!(
                shell_acts_on(bytes),
                shell_acts_on_by_the_list(tail),
                "{tail:?}"
            );
        }
    }
    for stem in [
        "",
        "_",
        "a",
        "__a",
        "_\u{e9}",
        "_\u{2014}",
        "\u{1F389}x",
        "\u{1F389}",
    ] {
        assert_eq!(
            has_alphanumeric(stem.as_bytes()),
            stem.chars().any(char::is_alphanumeric),
            "{stem:?}"
        );
    }
}

#[test]
fn the_latin_shortcut_of_is_alphanumeric_is_the_standard_one() {
    for c in '\0'..='\u{300}' {
        assert_eq!(is_alphanumeric(c), c.is_alphanumeric(), "{c:?}");
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
        assert_eq!(is_device_name(base.as_bytes()), by_lowercase, "{base:?}");
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

/// `decode` accepts exactly what `std::str::from_utf8` accepts, up to the first error.
fn decodes_as_std(bytes: &[u8]) -> Result<(), TestCaseError> {
    let valid_up_to = match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(e) => e.valid_up_to(),
    };
    let text = std::str::from_utf8(&bytes[..valid_up_to]).expect("valid up to there");
    let mut rest = bytes;
    for expected in text.chars() {
        let decoded = decode(rest);
        prop_assert_eq!(
            decoded,
            Some((expected, expected.len_utf8())),
            "in {:?}",
            bytes
        );
        rest = &rest[expected.len_utf8()..];
    }
    if !rest.is_empty() {
        prop_assert_eq!(decode(rest), None, "in {:?}", bytes);
    }
    Ok(())
}

#[test]
fn decode_accepts_the_well_formed_sequences_of_up_to_three_bytes_and_no_others() {
    for a in 0..=u8::MAX {
        decodes_as_std(&[a]).unwrap();
        for b in 0..=u8::MAX {
            decodes_as_std(&[a, b]).unwrap();
            if (0xE0..=0xF4).contains(&a) {
                for c in [0x00, 0x7F, 0x80, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF] {
                    decodes_as_std(&[a, b, c]).unwrap();
                    decodes_as_std(&[a, b, c, 0x80]).unwrap();
                    decodes_as_std(&[a, b, c, 0xC0]).unwrap();
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn decode_agrees_with_std_on_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
        decodes_as_std(&bytes)?;
    }

    #[test]
    fn decode_agrees_with_std_on_any_unicode(text in "\\PC{0,16}") {
        decodes_as_std(text.as_bytes())?;
    }
}

/// What `is_device_name` assumes: no character but ASCII lowercases to one of the first three
/// letters of a device name.
#[test]
fn only_ascii_lowercases_to_the_start_of_a_device_name() {
    let letters: Vec<char> = DEVICE_NAMES
        .iter()
        .flat_map(|d| d.chars().take(3))
        .collect();
    for c in (0x80..=u32::from(char::MAX)).filter_map(char::from_u32) {
        assert!(!c.to_lowercase().any(|l| letters.contains(&l)), "{c:?}");
    }
}

/// The source of `unicode_tables.rs`, generated from the Unicode crates.
fn unicode_tables_source() -> String {
    use std::collections::HashMap;
    use std::fmt::Write;
    use unicode_normalization::char::canonical_combining_class;
    fn set(name: &str, doc: &str, contains: impl Fn(char) -> bool) -> String {
        let (mut masks, mut mask_at) = (Vec::new(), HashMap::new());
        let (mut pages, mut page_at) = (Vec::<Vec<u16>>::new(), HashMap::new());
        let mut root = Vec::new();
        for page in 0..0x110u32 {
            let mut indices = Vec::new();
            for chunk in 0..64u32 {
                let mut mask = 0u64;
                for bit in 0..64u32 {
                    let c = char::from_u32(page << 12 | chunk << 6 | bit);
                    // Surrogates are no `char`; they count as in the set, which never matters.
                    if c.is_none_or(&contains) {
                        mask |= 1 << bit;
                    }
                }
                let index = *mask_at.entry(mask).or_insert_with(|| {
                    masks.push(mask);
                    masks.len() - 1
                });
                indices.push(u16::try_from(index).expect("fewer than 65,536 masks"));
            }
            let index = *page_at.entry(indices.clone()).or_insert_with(|| {
                pages.push(indices);
                pages.len() - 1
            });
            root.push(u8::try_from(index).expect("fewer than 256 pages"));
        }
        let mut out = format!("{doc}\npub(super) static {name}: CodePointSet = CodePointSet {{\n");
        out += "    root: &[\n";
        for line in root.chunks(16) {
            let items: Vec<String> = line.iter().map(u8::to_string).collect();
            writeln!(out, "        {},", items.join(", ")).unwrap();
        }
        out += "    ],\n    pages: &[\n";
        for page in &pages {
            out += "        [\n";
            for line in page.chunks(16) {
                let items: Vec<String> = line.iter().map(u16::to_string).collect();
                writeln!(out, "            {},", items.join(", ")).unwrap();
            }
            out += "        ],\n";
        }
        out += "    ],\n    masks: &[\n";
        for line in masks.chunks(4) {
            let items: Vec<String> = line.iter().map(|m| format!("0x{m:016x}")).collect();
            writeln!(out, "        {},", items.join(", ")).unwrap();
        }
        out += "    ],\n};\n";
        out
    }
    let mut out = String::from(
        "// Generated by `name::tests::the_unicode_tables_are_generated_from_the_unicode_crates`\n\
         // from unicode-properties (general categories) and unicode-normalization (combining\n\
         // classes, NFC quick check). Do not edit.\n\n",
    );
    out += &set(
        "INVISIBLE",
        "/// Rule 2's characters: controls, format characters, line and paragraph separators,\n\
         /// private use, surrogates and unassigned code points.",
        invisible_by_category,
    );
    out += "\n";
    out += &set(
        "NFC_SENSITIVE",
        "/// Characters NFC may change or join to what precedes them: a combining class other\n\
         /// than 0, or a quick check other than \"yes\".",
        |c| {
            canonical_combining_class(c) != 0
                || is_nfc_quick(std::iter::once(c)) != IsNormalized::Yes
        },
    );
    out
}

#[test]
fn the_unicode_tables_are_generated_from_the_unicode_crates() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/name/unicode_tables.rs");
    let generated = unicode_tables_source();
    if std::env::var_os("SAFE_LANES_WRITE_UNICODE_TABLES").is_some() {
        std::fs::write(path, &generated).unwrap();
    }
    let checked_in = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{path} is not what the Unicode crates give: run this test with \
         SAFE_LANES_WRITE_UNICODE_TABLES=1"
    );
}

#[test]
fn the_unicode_tables_hold_every_code_point_as_the_unicode_crates_do() {
    use unicode_normalization::char::canonical_combining_class;
    for c in (0..=u32::from(char::MAX)).filter_map(char::from_u32) {
        assert_eq!(
            unicode::INVISIBLE.contains(c),
            invisible_by_category(c),
            "{c:?}"
        );
        let sensitive = canonical_combining_class(c) != 0
            || is_nfc_quick(std::iter::once(c)) != IsNormalized::Yes;
        assert_eq!(unicode::NFC_SENSITIVE.contains(c), sensitive, "{c:?}");
    }
}

/// What `Flat::compose_after_ascii` relies on: a combining mark (class other than 0) that may
/// combine with what precedes it has no decomposition, and what it composes with an ASCII
/// character is a character NFC keeps and no later rule changes.
#[test]
fn marks_after_ascii_compose_into_characters_nfc_keeps() {
    use unicode_normalization::char::{canonical_combining_class, compose, decompose_canonical};
    let all = || (0..=u32::from(char::MAX)).filter_map(char::from_u32);
    let maybe = |c: char| is_nfc_quick(std::iter::once(c)) == IsNormalized::Maybe;
    let mut composed = 0;
    for mark in all().filter(|&c| maybe(c) && canonical_combining_class(c) != 0) {
        let mut decomposition = Vec::new();
        decompose_canonical(mark, |d| decomposition.push(d));
        assert_eq!(decomposition, [mark], "{mark:?}");
        for base in (0..0x80u8).map(char::from) {
            let Some(composite) = compose(base, mark) else {
                continue;
            };
            composed += 1;
            assert_eq!(canonical_combining_class(composite), 0, "{composite:?}");
            assert_eq!(
                is_nfc_quick(std::iter::once(composite)),
                IsNormalized::Yes,
                "{composite:?}"
            );
            let nfc: String = [base, mark].into_iter().nfc().collect();
            assert_eq!(nfc, composite.to_string());
            assert!(!is_invisible(composite) && !is_replaced(composite));
            assert!(!composite.is_whitespace());
        }
    }
    assert!(composed > 100, "{composed}");
}

#[test]
fn the_shortcut_of_is_plain_below_u0300_is_the_rules() {
    use unicode_normalization::char::canonical_combining_class;
    for c in (0x80..=u32::from(char::MAX)).filter_map(char::from_u32) {
        let nfc_sensitive = canonical_combining_class(c) != 0
            || is_nfc_quick(std::iter::once(c)) != IsNormalized::Yes;
        let plain = !invisible_by_category(c)
            && !REPLACED.contains(&c)
            && !c.is_whitespace()
            && !nfc_sensitive;
        assert_eq!(is_plain(c), plain, "{c:?}");
    }
}
