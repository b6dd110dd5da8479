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

/// Cases from the tests of other download-naming code, each with the name `sanitize` gives:
/// `hint => name`.
///
/// The hints come from the test suites of Firefox, Chromium and sanitize-filename, group by
/// group as described; their code is not copied. Their own answers differ where their rules
/// do: they replace with `_` what is dropped here (controls, format characters), keep every
/// path component (only the last is kept here), keep a space before an extension, or add an
/// extension from a MIME type. The answers here follow the rules of `safe_lanes::name`; a
/// comment names the rule a case needed.
const PORTED: &[(&str, &str)] = &[
    // Firefox, the name sanitizer of its downloads module: reserved characters, runs of
    // slashes and backslashes, leading and trailing white space and dots, white space around
    // dots, bidi controls, colons, shortcut extensions (some followed by a newline).
    (
        "A:*?|\"\"<<>>;,+=[]B][=+,;>><<\"\"|?*:C",
        "A__________;,+=[]B][=+,;__________C",
    ),
    (" :: Website :: ", "__ Website __"),
    ("* Website!", "_ Website!"),
    ("Website | Page!", "Website _ Page!"),
    ("Directory Listing: /a/b/", "b"),
    ("\\ \\\\Website\\/Page// /", "download"),
    ("  Website  ", "Website"),
    (". . Website . Page . .", "Website . Page"),
    (" File . txt ", "File . txt"),
    // Rule 7's exception: dropped controls, then white space, then the dot.
    (
        "\u{c}\n\r\t\u{b}\0\u{1f}\u{7f}\u{80}\u{9f}\u{a0} . txt",
        "download. txt",
    ),
    (
        "\u{1680}\u{180e}\u{2000}\u{2008}\u{200a} . txt",
        "download. txt",
    ),
    (
        "\u{2028}\u{2029}\u{202f}\u{205f}\u{3000}\u{feff} . txt",
        "download. txt",
    ),
    ("1. First", "1. First"),
    ("1 . First", "1 . First"),
    ("2. Two. 3rd", "2. Two. 3rd"),
    (".", "download"),
    ("..", "download"),
    (" ", "download"),
    (" . ", "download"),
    (
        "\u{200e} \u{202b}\u{202c}\u{202d}\u{202e}test\u{7f}\u{200f}",
        "test",
    ),
    ("AB\u{7f}\u{202a}\u{7f}\u{202a}\u{7f}CD", "ABCD"),
    ("foo:bar", "foo_bar"),
    ("foo :  bar", "foo _ bar"),
    ("thing.lnk", "thing.lnk.download"),
    ("thing.lnk\n", "thing.lnk.download"),
    ("thing.URl", "thing.URl.download"),
    ("thing.URl  \n", "thing.URl.download"),
    ("thing  and more   .URl", "thing and more .URl.download"),
    ("thing.local|", "thing.local_"),
    ("thing.lo|cal", "thing.lo_cal"),
    ("thing.local/*\"", "download"),
    ("thing.desktoP", "thing.desktoP.download"),
    ("thing.desktoP  \n", "thing.desktoP.download"),
    // Firefox, its MIME service's check of a name before saving: white space (no-break
    // spaces, the Mongolian vowel separator), separators, reserved characters, bidi marks,
    // CJK, accented and emoji names, private-use characters, shortcut extensions followed by
    // white space or controls.
    ("basicfile.png", "basicfile.png"),
    ("  whitespace.png  ", "whitespace.png"),
    (" .whitespaceanddots.png...", "whitespaceanddots.png"),
    (
        "  \u{a0} \u{a0} extrawhitespace.png  \u{a0} \u{a0} ",
        "extrawhitespace.png",
    ),
    (
        "  filename  with  whitespace.png  ",
        "filename with whitespace.png",
    ),
    ("\\path.png", "path.png"),
    ("\\path*and/$?~file.png", "$_~file.png"),
    (" \u{180e} whit\u{180e}e.png \u{180e}", "white.png"),
    ("簡単簡単簡単", "簡単簡単簡単"),
    (" happy\u{61c}\u{2069}.png", "happy.png"),
    ("café.png", "café.png"),
    // Rule 7's exception: private-use characters are dropped, the extension stays.
    ("\u{100001}\u{100002}.png", "download.png"),
    ("  first  .png  ", "first.png"),
    ("thi/*rd.jpeg", "_rd.jpeg"),
    ("f*\\ourth  file.jpg", "ourth file.jpg"),
    ("f*\\ift  h.jpe*\\g", "g"),
    ("sixth.j  pe/*g", "_g"),
    (".png", "png"),
    (".butterpecan.icecream", "butterpecan.icecream"),
    ("test_ﾃｽﾄ_T\u{83}E\\S\u{83}T.png", "ST.png"),
    ("test_ﾃｽﾄ_T\u{83}E\\S\u{83}T.pﾃ\u{83}ng", "ST.pﾃng"),
    ("test\u{1F600}", "test\u{1F600}"),
    ("test\u{1F600}\u{1F600}", "test\u{1F600}\u{1F600}"),
    ("video.ogg", "video.ogg"),
    ("filename.LNK", "filename.LNK.download"),
    ("filename.local", "filename.local.download"),
    ("filename.url", "filename.url.download"),
    ("filename.URl", "filename.URl.download"),
    ("filename.scf", "filename.scf.download"),
    ("filename.sCF", "filename.sCF.download"),
    ("filename.lnk\n", "filename.lnk.download"),
    ("filename.lnk\n  ", "filename.lnk.download"),
    ("filename.\n\t  lnk", "filename. lnk"),
    (
        "filename.local\u{180e}\u{180e}\u{180e}",
        "filename.local.download",
    ),
    ("filename.desktop", "filename.desktop.download"),
    ("filename.DESKTOP\n", "filename.DESKTOP.download"),
    // Chromium, the file-name tests of its network stack: names taken from a
    // Content-Disposition header or a URL (as decoded), its safe-name step (device names,
    // shortcut and namespace extensions, the shell's own files), and the base names it calls
    // safe or unsafe to write.
    ("bar.htm", "bar.htm"),
    ("google.com", "google.com"),
    ("con.htm", "_con.htm"),
    ("lpt1.htm", "_lpt1.htm"),
    ("con", "_con"),
    // Rule 9, namespace extensions.
    (
        "harmless.{not-really-this-may-be-a-guid}",
        "harmless.{not-really-this-may-be-a-guid}.download",
    ),
    ("harmless.{mismatched-", "harmless.{mismatched-"),
    ("harmless.local", "harmless.local.download"),
    ("harmless.lnk", "harmless.lnk.download"),
    (".test.html", "test.html"),
    (".test", "test"),
    ("..test", "test"),
    ("../../../../././../a_file_name.txt", "a_file_name.txt"),
    ("dir1/dir2/a_file_name.txt", "a_file_name.txt"),
    (
        "..\\..\\..\\..\\.\\.\\..\\a_file_name.txt",
        "a_file_name.txt",
    ),
    ("dir1\\dir2\\a_file_name.txt", "a_file_name.txt"),
    ("<blink>Hello kitty</blink>", "blink_"),
    ("2.avi", "2.avi"),
    ("foo/../bar.jpg", "bar.jpg"),
    ("foo\0bar.jpg", "foobar.jpg"),
    ("my-cat", "my-cat"),
    ("my-cat.jpg", "my-cat.jpg"),
    ("evil.exe ", "evil.exe"),
    ("evil.exe.", "evil.exe"),
    ("evil.exe.  .  .", "evil.exe"),
    ("evil.", "evil"),
    (". . . . .", "download"),
    ("meh.exe\u{a0}", "meh.exe"),
    ("...", "download"),
    ("COM1", "_COM1"),
    ("COM4.txt", "_COM4.txt"),
    ("lpt1.TXT", "_lpt1.TXT"),
    ("clock$.txt", "_clock$.txt"),
    ("mycom1.foo", "mycom1.foo"),
    ("Setup.exe.local", "Setup.exe.local.download"),
    ("Setup.exe.local.local", "Setup.exe.local.local.download"),
    ("Setup.exe.lnk", "Setup.exe.lnk.download"),
    // Rule 11, the shell's own files.
    ("Desktop.ini", "_Desktop.ini"),
    ("Thumbs.db", "_Thumbs.db"),
    ("foo.tar.gz", "foo.tar.gz"),
    ("foo.tgz", "foo.tgz"),
    ("blank.reg", "blank.reg"),
    ("bar.tar", "bar.tar"),
    ("bar.bogus", "bar.bogus"),
    ("예술 예술.jpg", "예술 예술.jpg"),
    ("café.png", "café.png"),
    (
        "V\u{fd}vojov\u{e1} psychologie.doc",
        "V\u{fd}vojov\u{e1} psychologie.doc",
    ),
    ("test 123", "test 123"),
    ("a", "a"),
    ("a.txt", "a.txt"),
    ("a b.txt", "a b.txt"),
    ("a-b.txt", "a-b.txt"),
    ("My Computer", "My Computer"),
    ("", "download"),
    ("con.zip", "_con.zip"),
    ("NUL", "_NUL"),
    ("NUL.zip", "_NUL.zip"),
    (".a", "a"),
    ("a.", "a"),
    ("a\"a", "a_a"),
    ("a<a", "a_a"),
    ("a>a", "a_a"),
    ("a?a", "a_a"),
    ("a/", "a"),
    ("a\\", "a"),
    ("a ", "a"),
    ("a . .", "a"),
    (" Computer", "Computer"),
    ("My Computer.{a}", "My Computer.{a}.download"),
    (
        "My Computer.{20D04FE0-3AEA-1069-A2D8-08002B30309D}",
        "My Computer.{20D04FE0-3AEA-1069-A2D8-08002B30309D}.download",
    ),
    ("a\\a", "a"),
    // sanitize-filename's own tests (its port of the Node package's list, with Windows rules
    // on): reserved and control characters, paths, dots, device names with superscript
    // digits and compound extensions.
    (
        "the quick brown fox jumped over the lazy dog",
        "the quick brown fox jumped over the lazy dog",
    ),
    ("résumé", "résumé"),
    ("hello\0world", "helloworld"),
    ("hello\nworld", "helloworld"),
    ("semi;colon.js", "semi;colon.js"),
    (";leading-semi.js", ";leading-semi.js"),
    ("slash\\.js", "js"),
    ("slash/.js", "js"),
    ("col:on.js", "col_on.js"),
    ("star*.js", "star_.js"),
    ("question?.js", "question_.js"),
    ("quote\".js", "quote_.js"),
    ("singlequote'.js", "singlequote'.js"),
    ("brack<e>ts.js", "brack_e_ts.js"),
    ("p|pes.js", "p_pes.js"),
    ("plus+.js", "plus+.js"),
    ("'five and six<seven'.js", "'five and six_seven'.js"),
    (" space at front", "space at front"),
    ("space at end ", "space at end"),
    (".period", "period"),
    ("period.", "period"),
    ("relative/path/to/some/dir", "dir"),
    ("/abs/path/to/some/dir", "dir"),
    ("~/.\0notssh/authorized_keys", "authorized_keys"),
    ("h?w", "h_w"),
    ("h/w", "w"),
    ("h*w", "h_w"),
    ("./", "download"),
    ("../", "download"),
    ("/..", "download"),
    ("/../", "download"),
    ("*.|.", "download"),
    ("./foobar", "foobar"),
    ("../foobar", "foobar"),
    ("../../foobar", "foobar"),
    ("./././foobar", "foobar"),
    ("|*.what", "download.what"),
    ("LPT9.asdf", "_LPT9.asdf"),
    ("foobar...", "foobar"),
    ("COM\u{b9}", "_COM\u{b9}"),
    ("com\u{b2}", "_com\u{b2}"),
    ("LPT\u{b3}.txt", "_LPT\u{b3}.txt"),
    ("lpt\u{b9}.tar.gz", "_lpt\u{b9}.tar.gz"),
];

/// Collision names from the same suites: `hint => the name of its first duplicate`.
///
/// Firefox numbers a duplicate `name(1).ext`, Chromium `name (1).ext`, and both keep some
/// double extensions whole: Firefox a short extension (one to three letters or digits) before
/// `gz`, `bz2` or `Z`, Chromium one of up to four before `gz`, `z`, `bz2`, `bz`, …, and
/// `user.js`. Here only a tar archive's compound extensions are kept whole (the rule of
/// `SafeName::numbered`), so `base.ext.gz`, `foo.user.js` and `photo.jpg.gz` are numbered
/// before their last extension, unlike in those browsers.
const PORTED_NUMBERED: &[(&str, &str)] = &[
    // Firefox, the unique-file and base-name tests of its downloads module.
    ("test.txt", "test (1).txt"),
    ("test.tar.gz", "test (1).tar.gz"),
    ("base", "base (1)"),
    ("base.ext", "base (1).ext"),
    ("base.application", "base (1).application"),
    ("base.base.Bz2", "base.base (1).Bz2"),
    ("base.ext.gz", "base.ext (1).gz"),
    // Chromium, the double extensions of its path type, which its duplicate names keep.
    ("foo.tar.gz", "foo (1).tar.gz"),
    ("foo.tar.bz2", "foo (1).tar.bz2"),
    ("foo.tar.Z", "foo (1).tar.Z"),
    ("foo.user.js", "foo.user (1).js"),
    ("photo.jpg.gz", "photo.jpg (1).gz"),
];

#[test]
fn ported_cases_become_the_expected_names() {
    let mut failures = Vec::new();
    for &(hint, expected) in PORTED {
        let got = sanitize(hint);
        if got.as_str() != expected {
            failures.push(format!(
                "{hint:?}: expected {expected:?}, got {:?}",
                got.as_str()
            ));
        }
        assert_eq!(sanitize(got.as_str()), got, "idempotent for {hint:?}");
    }
    for &(hint, expected) in PORTED_NUMBERED {
        let got = sanitize(hint).numbered(1);
        if got != expected {
            failures.push(format!(
                "{hint:?} numbered: expected {expected:?}, got {got:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The long names of the same suites (Firefox's MIME service and unique-file tests): cut to
/// [`MAX_NAME_BYTES`] on a character boundary, the extension kept.
#[test]
fn ported_long_names_are_cut_keeping_the_extension() {
    let budget = MAX_NAME_BYTES - ".png".len();
    let cut = |text: String| {
        let mut end = budget;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text[..end].to_owned() + ".png"
    };
    for stem in [
        "12345678".repeat(31) + "abcdefgh",
        "簡単".repeat(41),
        "a".to_owned() + &"簡単".repeat(42),
        "café".repeat(51),
    ] {
        let name = sanitize(stem.clone() + ".png");
        assert_eq!(name.as_str(), cut(stem), "{name:?}");
    }
    assert_eq!(
        sanitize("noextensionfile".repeat(17)).as_str(),
        "noextensionfile".repeat(16)
    );
    assert_eq!(
        sanitize("noextensionfile".repeat(16) + "noextensionfil.").as_str(),
        "noextensionfile".repeat(16)
    );
    assert_eq!(
        sanitize("T".repeat(255) + ".txt").as_str(),
        "T".repeat(MAX_NAME_BYTES - 4) + ".txt"
    );
    // Private-use characters only, then the extension (rule 7's exception).
    assert_eq!(
        sanitize("\u{100001}\u{100002}".repeat(32) + ".png").as_str(),
        "download.png"
    );
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
