"""Names: the library's table of hostile hints (`safe-lanes/tests/it/name.rs`), through
`sanitize` and through real saves in the lane and the desk, and the invariants every name
holds, over random hints."""

import os
import random
import unicodedata

import pytest

import safe_lanes

MAX_NAME_BYTES = 240

#: `hint => expected name`, as the library's own table.
TABLE = [
    # Traversal with both separators, absolute paths, dots.
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
    # Hidden, option-like, trailing dots and spaces.
    (".hidden", "hidden"),
    ("-rf", "rf"),
    ("--help.txt", "help.txt"),
    (" - .x", "x"),
    ("name. . .", "name"),
    ("report.pdf.", "report.pdf"),
    ("report.pdf   ", "report.pdf"),
    ("   spaced    out   .txt", "spaced out.txt"),
    ("a\u00a0\u3000b", "a b"),
    # Bidi overrides, zero-width and other format characters.
    ("invoice\u202efdp.exe", "invoicefdp.exe"),
    ("photo\u202egpj.scr", "photogpj.scr"),
    ("x\u2066y\u2069.txt", "xy.txt"),
    ("a\u200bb\u200dc.txt", "abc.txt"),
    ("\ufeffbom.txt", "bom.txt"),
    ("soft\u00adhyphen", "softhyphen"),
    ("\u202e", "download"),
    ("file\u2028name\u2029", "filename"),
    # NFD input becomes NFC.
    ("e\u0301te\u0301.txt", "\u00e9t\u00e9.txt"),
    ("Ame\u0301lie", "Am\u00e9lie"),
    # Windows device names, with extensions, superscripts and padding.
    ("CON", "_CON"),
    ("con.txt", "_con.txt"),
    ("NUL.tar.gz", "_NUL.tar.gz"),
    ("COM1", "_COM1"),
    ("lpt9.log", "_lpt9.log"),
    ("COM\u00b9.txt", "_COM\u00b9.txt"),
    ("LPT\u00b3", "_LPT\u00b3"),
    ("CONIN$", "_CONIN$"),
    ("clock$.x", "_clock$.x"),
    ("CON .txt", "_CON.txt"),
    ("\u0000nul.txt", "_nul.txt"),
    ("CONSOLE.txt", "CONSOLE.txt"),
    ("COM10", "COM10"),
    # Shortcut-like extensions.
    ("evil.lnk", "evil.lnk.download"),
    ("site.URL", "site.URL.download"),
    ("app.desktop", "app.desktop.download"),
    ("x.webloc", "x.webloc.download"),
    ("explorer.scf", "explorer.scf.download"),
    ("app.exe.local", "app.exe.local.download"),
    ("a.appref-ms", "a.appref-ms.download"),
    ("CON.lnk", "_CON.lnk.download"),
    # Reserved characters and look-alikes of separators and colons.
    ("what?.txt", "what_.txt"),
    ("a<b>c|d\"e*f:g%h.txt", "a_b_c_d_e_f_g_h.txt"),
    ("100%.txt", "100_.txt"),
    ("file:Zone.Identifier", "file_Zone.Identifier"),
    ("a\u2215b.txt", "a_b.txt"),
    ("a\u2044b", "a_b"),
    ("a\uff0fb", "a_b"),
    ("a\u29f8b", "a_b"),
    ("C\ua789evil", "C_evil"),
    ("x\uff1ay", "x_y"),
    ("..\u2215..\u2215etc", "_.._etc"),
    # Control characters and ANSI escapes.
    ("\u001b[31mred\u001b[0m.txt", "[31mred[0m.txt"),
    ("bell\u0007.txt", "bell.txt"),
    ("new\nline.txt", "newline.txt"),
    ("tab\there.txt", "tabhere.txt"),
    ("del\u007f\u0085c1.txt", "delc1.txt"),
    # Stems without a letter or digit.
    ("___", "download"),
    ("___.pdf", "download.pdf"),
    ("\U0001f389\U0001f389.png", "download.png"),
    # Private use, noncharacters.
    ("\ue000private.txt", "private.txt"),
    ("\uffffnonchar\ufdd0.txt", "nonchar.txt"),
    # Ordinary names pass through.
    ("archive.tar.gz", "archive.tar.gz"),
    ("Quarterly Report (final).docx", "Quarterly Report (final).docx"),
    ("name.verylongextension123", "name.verylongextension123"),
    ("report", "report"),]


def test_the_table_is_the_librarys():
    assert len(TABLE) >= 60


@pytest.mark.parametrize("hint,expected", TABLE)
def test_hostile_hints_become_the_expected_names(hint, expected):
    got = safe_lanes.sanitize(hint)
    assert got == expected
    assert safe_lanes.sanitize(got) == got, "idempotent"


def test_invalid_utf8_is_decoded_lossily():
    assert safe_lanes.sanitize(b"\xff\xfe.txt") == "download.txt"
    assert safe_lanes.sanitize(b"ok\xffname.txt") == "ok\ufffdname.txt"


def test_long_names_are_truncated_keeping_the_extension():
    assert safe_lanes.sanitize("a" * 300) == "a" * MAX_NAME_BYTES
    assert safe_lanes.sanitize("a" * 300 + ".pdf") == "a" * (MAX_NAME_BYTES - 4) + ".pdf"
    assert safe_lanes.sanitize("y" * 250 + ".exe.pdf") == "y" * (MAX_NAME_BYTES - 4) + ".pdf"
    accented = safe_lanes.sanitize("\u00e9" * 200 + ".txt")
    assert accented == "\u00e9" * ((MAX_NAME_BYTES - 4) // 2) + ".txt"


def test_every_hostile_hint_saved_lands_in_the_lane_under_its_name(world):
    lane = safe_lanes.DownloadLane(world.root)
    for hint, expected in TABLE:
        saved = lane.save(hint, hint.encode("utf-8", "surrogatepass"))
        assert saved.path.parent == world.root.downloads
        stem, dot, ext = expected.rpartition(".")
        # The first of a name is the name; later ones are numbered from its stem.
        assert saved.name == expected or saved.name.startswith((stem or expected) + " ("), (hint, saved.name)
        assert saved.path.read_bytes() == hint.encode("utf-8", "surrogatepass")
    # Nothing but files of the lane, none hidden, nothing outside it.
    names = os.listdir(world.root.downloads)
    assert len(names) == len(TABLE)
    assert not [n for n in names if n.startswith((".", "-"))]
    assert sorted(os.listdir(world.tmp)) == ["state"]


def test_the_desk_saves_under_the_same_names(world):
    desk = safe_lanes.AgentDesk(world.root)
    assert desk.save("../../.bashrc", b"echo pwned").name == "bashrc"
    assert desk.save("invoice\u202efdp.exe", b"x").name == "invoicefdp.exe"
    assert desk.save(b"\xff\xfe.txt", b"x").name == "download.txt"
    assert desk.save("CON.lnk", b"x").name == "_CON.lnk.download"


def _random_hint(rng):
    alphabet = (
        "abcXYZ019 ._-/\\:*?\"<>|%~$"
        "\u202e\u2066\u200b\ufeff\u00ad\u2028\u2215\u2044\uff0f\u29f8\ua789\uff1a"
        "\u0301\u00e9\u00b9\U0001f389\ue000\ufdd0\x00\x07\x1b\n\t\x7f\x85"
    )
    words = ["CON", "lpt1", ".lnk", ".desktop", "..", ".", "-rf", ".git", "NUL.tar.gz"]
    parts = []
    for _ in range(rng.randint(0, 12)):
        parts.append(rng.choice(words) if rng.random() < 0.2 else rng.choice(alphabet) * rng.randint(1, 3))
    return "".join(parts) * rng.choice([1, 1, 1, 40])


def test_every_name_keeps_the_invariants():
    rng = random.Random(20261202)
    devices = {"con", "prn", "aux", "nul", "conin$", "conout$", "clock$"} | {
        f"{p}{d}" for p in ("com", "lpt") for d in "0123456789\u00b9\u00b2\u00b3"
    }
    for _ in range(3000):
        hint = _random_hint(rng)
        name = safe_lanes.sanitize(hint)
        assert name, hint
        assert len(name.encode()) <= MAX_NAME_BYTES, hint
        assert unicodedata.is_normalized("NFC", name), hint
        assert not set(name) & set('/\\:*?"<>|%'), (hint, name)
        for c in name:
            assert unicodedata.category(c) not in ("Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"), (hint, name)
        assert not name.startswith((".", "-", " ")), (hint, name)
        assert not name.endswith((".", " ")), (hint, name)
        assert name.split(".")[0].rstrip().lower() not in devices, (hint, name)
        assert safe_lanes.sanitize(name) == name, (hint, name)
