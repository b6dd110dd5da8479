//! `sanitize`: a table of hostile hints with their expected names, and property tests of the
//! invariants every name holds.

use proptest::prelude::*;
use safe_lanes::name::MAX_NAME_BYTES;
use safe_lanes::sanitize;
use unicode_normalization::is_nfc;
use unicode_properties::{GeneralCategory as G, UnicodeGeneralCategory};

/// `hint => expected name`.
const TABLE: &[(&str, &str)] = &[
    // Traversal with both separators, absolute paths, dots.
    ("../../.bashrc", "bashrc"),
    ("..\\..\\Windows\\System32\\evil.dll", "evil.dll"),
    ("/etc/passwd", "passwd"),
    ("C:\\Users\\x\\report.pdf", "report.pdf"),
    ("~/.ssh/id_rsa", "id_rsa"),
    (".git/config", "config"),
    ("a/b/", "b"),
    ("../", "download"),
    ("", "download"),
    (".", "download"),
    ("..", "download"),
    ("...", "download"),
    ("/", "download"),
    ("\\", "download"),
    // Hidden, option-like, trailing dots and spaces.
    (".hidden", "hidden"),
    ("-rf", "rf"),
    ("--help.txt", "help.txt"),
    (" - .x", "x"),
    ("name. . .", "name"),
    ("report.pdf.", "report.pdf"),
    ("report.pdf   ", "report.pdf"),
    ("   spaced    out   .txt", "spaced out.txt"),
    ("a\u{00A0}\u{3000}b", "a b"),
    // Bidi overrides, zero-width and other format characters.
    ("invoice\u{202E}fdp.exe", "invoicefdp.exe"),
    ("photo\u{202E}gpj.scr", "photogpj.scr"),
    ("x\u{2066}y\u{2069}.txt", "xy.txt"),
    ("a\u{200B}b\u{200D}c.txt", "abc.txt"),
    ("\u{FEFF}bom.txt", "bom.txt"),
    ("soft\u{00AD}hyphen", "softhyphen"),
    ("\u{202E}", "download"),
    ("file\u{2028}name\u{2029}", "filename"),
    // NFD input becomes NFC.
    ("e\u{0301}te\u{0301}.txt", "\u{00E9}t\u{00E9}.txt"),
    ("Ame\u{0301}lie", "Am\u{00E9}lie"),
    // Windows device names, with extensions, superscripts and padding.
    ("CON", "_CON"),
    ("con.txt", "_con.txt"),
    ("NUL.tar.gz", "_NUL.tar.gz"),
    ("COM1", "_COM1"),
    ("lpt9.log", "_lpt9.log"),
    ("COM\u{00B9}.txt", "_COM\u{00B9}.txt"),
    ("LPT\u{00B3}", "_LPT\u{00B3}"),
    ("CONIN$", "_CONIN$"),
    ("clock$.x", "_clock$.x"),
    ("CON .txt", "_CON.txt"),
    ("\u{0000}nul.txt", "_nul.txt"),
    ("CONSOLE.txt", "CONSOLE.txt"),
    // The Windows shell's own files.
    ("desktop.ini", "_desktop.ini"),
    ("Desktop.INI", "_Desktop.INI"),
    ("desktop .ini", "_desktop.ini"),
    ("Thumbs.db", "_Thumbs.db"),
    ("desktop.ini.txt", "desktop.ini.txt"),
    ("my desktop.ini", "my desktop.ini"),
    ("COM10", "COM10"),
    // Shortcut-like extensions.
    ("evil.lnk", "evil.lnk.download"),
    ("site.URL", "site.URL.download"),
    ("app.desktop", "app.desktop.download"),
    ("x.webloc", "x.webloc.download"),
    ("explorer.scf", "explorer.scf.download"),
    ("app.exe.local", "app.exe.local.download"),
    ("a.appref-ms", "a.appref-ms.download"),
    ("CON.lnk", "_CON.lnk.download"),
    // Shell-namespace extensions: a CLSID, or anything in braces.
    (
        "My Computer.{20D04FE0-3AEA-1069-A2D8-08002B30309D}",
        "My Computer.{20D04FE0-3AEA-1069-A2D8-08002B30309D}.download",
    ),
    ("harmless.{not-a-guid}", "harmless.{not-a-guid}.download"),
    ("x.{}", "x.{}.download"),
    ("CON.{x}", "_CON.{x}.download"),
    ("harmless.{mismatched-", "harmless.{mismatched-"),
    ("a.{b}.txt", "a.{b}.txt"),
    ("{no-dot}", "{no-dot}"),
    // Reserved characters and look-alikes of separators and colons.
    ("what?.txt", "what_.txt"),
    ("a<b>c|d\"e*f:g%h.txt", "a_b_c_d_e_f_g_h.txt"),
    ("100%.txt", "100_.txt"),
    ("file:Zone.Identifier", "file_Zone.Identifier"),
    ("a\u{2215}b.txt", "a_b.txt"),
    ("a\u{2044}b", "a_b"),
    ("a\u{FF0F}b", "a_b"),
    ("a\u{29F8}b", "a_b"),
    ("C\u{A789}evil", "C_evil"),
    ("x\u{FF1A}y", "x_y"),
    ("..\u{2215}..\u{2215}etc", "_.._etc"),
    // Control characters and ANSI escapes.
    ("\u{1b}[31mred\u{1b}[0m.txt", "[31mred[0m.txt"),
    ("bell\u{07}.txt", "bell.txt"),
    ("new\nline.txt", "newline.txt"),
    ("tab\there.txt", "tabhere.txt"),
    ("del\u{7f}\u{85}c1.txt", "delc1.txt"),
    // Stems without a letter or digit.
    ("___", "download"),
    ("___.pdf", "download.pdf"),
    ("\u{1F389}\u{1F389}.png", "download.png"),
    // A stem rule 2 empties keeps its place: the extension stays an extension.
    ("\u{378}\u{40001}.mp3", "download.mp3"),
    ("\u{202E}.pdf", "download.pdf"),
    ("\u{200B} -.tar.gz", "download.tar.gz"),
    ("\u{1b}.lnk", "download.lnk.download"),
    ("dir/\u{FEFF}.txt", "download.txt"),
    // …but only when all that stood before the first dot was dropped, dashes or spaces.
    (".\u{202E}.mp3", "mp3"),
    ("\u{202E}/.mp3", "mp3"),
    ("\u{202E}-rf.sh", "rf.sh"),
    // Private use, noncharacters.
    ("\u{E000}private.txt", "private.txt"),
    ("\u{FFFF}nonchar\u{FDD0}.txt", "nonchar.txt"),
    // Ordinary names pass through.
    ("archive.tar.gz", "archive.tar.gz"),
    (
        "Quarterly Report (final).docx",
        "Quarterly Report (final).docx",
    ),
    ("name.verylongextension123", "name.verylongextension123"),
    ("report", "report"),
];

#[test]
fn hostile_hints_become_the_expected_names() {
    assert!(TABLE.len() >= 60, "the table covers at least 60 hints");
    let mut failures = Vec::new();
    for &(hint, expected) in TABLE {
        let got = sanitize(hint);
        if got.as_str() != expected {
            failures.push(format!(
                "{hint:?}: expected {expected:?}, got {:?}",
                got.as_str()
            ));
        }
        assert_eq!(sanitize(got.as_str()), got, "idempotent for {hint:?}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn invalid_utf8_is_decoded_lossily() {
    assert_eq!(sanitize(b"\xff\xfe.txt").as_str(), "download.txt");
    assert_eq!(sanitize(b"ok\xffname.txt").as_str(), "ok\u{FFFD}name.txt");
}

#[test]
fn long_names_are_truncated_keeping_the_extension() {
    assert_eq!(
        sanitize("a".repeat(300)).as_str(),
        "a".repeat(MAX_NAME_BYTES)
    );
    assert_eq!(
        sanitize("a".repeat(300) + ".pdf").as_str(),
        "a".repeat(MAX_NAME_BYTES - 4) + ".pdf"
    );
    // The `.exe` in the middle is cut, never the real extension.
    assert_eq!(
        sanitize("y".repeat(250) + ".exe.pdf").as_str(),
        "y".repeat(MAX_NAME_BYTES - 4) + ".pdf"
    );
    // Multi-byte characters are cut on a character boundary.
    let accented = sanitize("\u{e9}".repeat(200) + ".txt");
    assert_eq!(
        accented.as_str(),
        "\u{e9}".repeat((MAX_NAME_BYTES - 4) / 2) + ".txt"
    );
    // A cut that would leave a fake extension (`.lnk`) at the end turns its dot into `_`.
    let tricky = sanitize(format!(
        "{}.lnk{}",
        "b".repeat(MAX_NAME_BYTES - 4),
        "!".repeat(40)
    ));
    assert_eq!(
        tricky.as_str(),
        format!("{}_lnk", "b".repeat(MAX_NAME_BYTES - 4))
    );
    assert_eq!(sanitize(tricky.as_str()), tricky);
    // So does a cut that would leave a namespace extension (`.{x}`).
    let braced = sanitize(format!(
        "{}.{{x}}{}",
        "b".repeat(MAX_NAME_BYTES - 4),
        "!".repeat(40)
    ));
    assert_eq!(
        braced.as_str(),
        format!("{}_{{x}}", "b".repeat(MAX_NAME_BYTES - 4))
    );
    assert_eq!(sanitize(braced.as_str()), braced);
}

fn is_device(name: &str) -> bool {
    let base = name
        .split('.')
        .next()
        .unwrap_or_default()
        .trim_end()
        .to_lowercase();
    let digits = [
        "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "\u{b9}", "\u{b2}", "\u{b3}",
    ];
    ["con", "prn", "aux", "nul", "conin$", "conout$", "clock$"].contains(&base.as_str())
        || ["com", "lpt"]
            .iter()
            .any(|p| digits.iter().any(|d| base == format!("{p}{d}")))
}

/// Every invariant a sanitized name holds, as one check.
fn check_invariants(input: &[u8]) -> Result<(), TestCaseError> {
    let name = sanitize(input);
    let s = name.as_str();
    prop_assert!(!s.is_empty());
    prop_assert!(s.len() <= MAX_NAME_BYTES && s.len() <= 255);
    prop_assert!(is_nfc(s), "not NFC: {s:?}");
    for c in s.chars() {
        prop_assert!(!"/\\:*?\"<>|%".contains(c), "reserved {c:?} in {s:?}");
        prop_assert!(
            !matches!(
                c.general_category(),
                G::Control
                    | G::Format
                    | G::LineSeparator
                    | G::ParagraphSeparator
                    | G::PrivateUse
                    | G::Surrogate
                    | G::Unassigned
            ),
            "invisible {c:?} in {s:?}"
        );
    }
    prop_assert!(!s.starts_with(['.', '-', ' ']), "leading in {s:?}");
    prop_assert!(!s.ends_with(['.', ' ']), "trailing in {s:?}");
    prop_assert!(!is_device(s), "device name {s:?}");
    let lower = s.to_lowercase();
    prop_assert!(
        lower != "desktop.ini" && lower != "thumbs.db",
        "shell file {s:?}"
    );
    prop_assert!(s.chars().any(char::is_alphanumeric));
    if let Some((_, tail)) = s.rsplit_once('.') {
        prop_assert!(
            !(tail.starts_with('{') && tail.ends_with('}')),
            "namespace extension in {s:?}"
        );
    }
    prop_assert_eq!(&sanitize(s), &name, "not idempotent");
    let oracle = sanitize_filename::OptionsForCheck {
        windows: true,
        truncate: true,
    };
    prop_assert!(
        sanitize_filename::is_sanitized_with_options(s, oracle),
        "sanitize-filename rejects {:?}",
        s
    );
    prop_assert!(name.numbered(u32::MAX).len() <= 255);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn any_bytes_give_a_safe_name(input in proptest::collection::vec(any::<u8>(), 0..400)) {
        check_invariants(&input)?;
    }

    #[test]
    fn any_unicode_gives_a_safe_name(input in "\\PC{0,300}") {
        check_invariants(input.as_bytes())?;
    }

    #[test]
    fn hostile_alphabet_gives_a_safe_name(
        input in "[./\\\\ \\-:*?\"<>|%\u{202E}\u{200B}\u{FEFF}\u{2215}\u{FF0F}aCoNl1\u{301}e\u{B9}${}]{0,64}"
    ) {
        check_invariants(input.as_bytes())?;
    }

    #[test]
    fn short_extensions_are_kept(
        stem in "[^/\\\\]{0,300}",
        ext in "[a-z0-9]{1,8}",
    ) {
        prop_assume!(!["lnk", "url", "scf", "pif", "glk", "local", "desktop", "webloc", "inetloc",
            "fileloc", "website"]
            .contains(&ext.as_str()));
        let name = sanitize(format!("a{stem}.{ext}"));
        prop_assert_eq!(name.extension(), Some(ext.as_str()));
        let suffix = format!(".{ext}");
        prop_assert!(name.as_str().ends_with(&suffix));
    }
}
