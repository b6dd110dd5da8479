"""The upload side through the package: the library's source table
(`safe-lanes/tests/it/upload.rs`: allowed roots, links between them, links out, the hard guard,
hard links, FIFOs), hostile path shapes, and the file object of `open()`, which reads the
descriptor that was checked and never the path again."""

import hashlib
import io
import os
import threading

import pytest

import safe_lanes

from conftest import code_of


class UploadWorld:
    """A state root with a token, three allowed roots (one listed through a symbolic link),
    and files outside."""

    def __init__(self, world):
        self.w = world
        p = world.p
        (p("state/token")).write_text("TOKEN")
        (p("state/.downloads/got.pdf")).write_text("received")
        (p("state/.uploads/staged.txt")).write_text("staged")
        for d in ("allowed1/sub", "allowed2", "real3", "allowed1_evil", "outside"):
            p(d).mkdir(parents=True)
        os.symlink(p("real3"), p("link-to-3"))
        files = {
            "allowed1/file.txt": "one",
            "allowed1/sub/x.txt": "x",
            "allowed1/new\nline.txt": "newline",
            "allowed2/other.txt": "two",
            "real3/doc.txt": "three",
            "allowed1_evil/file.txt": "evil",
            "outside/secret": "SECRET",
        }
        for rel, content in files.items():
            p(rel).write_text(content)
        os.symlink(p("allowed2/other.txt"), p("allowed1/to-other"))
        os.symlink("/etc", p("allowed1/etc-link"))
        os.symlink(p("outside/secret"), p("allowed1/secret-link"))
        os.symlink(p("nothing"), p("allowed1/dangling"))
        os.symlink(p("state/token"), p("allowed1/token-link"))
        os.symlink(p("allowed1/nothing"), p("allowed1/dangling-inside"))
        os.symlink("..", p("allowed1/up"))
        os.symlink("../file.txt", p("allowed1/sub/back"))
        os.symlink("sub", p("allowed1/to-sub"))
        os.symlink("loop", p("allowed1/loop"))
        os.link(p("state/token"), p("allowed1/token-hardlink"))
        os.mkfifo(p("allowed1/fifo"))
        roots = "# upload roots\n\n{}\n  {}  \n{}\nrelative/path\n{}\n{}\n".format(
            p("allowed1"), p("allowed2"), p("link-to-3"), p("missing"), p("allowed1/file.txt")
        )
        p("state/.upload-roots").write_text(roots)

    def source(self):
        return safe_lanes.UploadSource.load(self.w.root)

    def raw(self, rel):
        """`<tmp>/<rel>` as written: `.`, `..`, `//` and a trailing `/` kept (a `Path` would
        drop some)."""
        return f"{self.w.tmp}/{rel}"


ALLOWED = [
    ("allowed1/file.txt", "allowed1/file.txt", "allowed1"),
    ("allowed1/to-other", "allowed2/other.txt", "allowed2"),
    ("link-to-3/doc.txt", "real3/doc.txt", "real3"),
    ("allowed1/./sub/./x.txt", "allowed1/sub/x.txt", "allowed1"),
    ("allowed1//sub/../file.txt", "allowed1/file.txt", "allowed1"),
    ("allowed1/new\nline.txt", "allowed1/new\nline.txt", "allowed1"),
    ("state/.downloads/got.pdf", "state/.downloads/got.pdf", "state/.downloads"),
    ("allowed1/../allowed2/other.txt", "allowed2/other.txt", "allowed2"),
    ("allowed1/up/allowed2/other.txt", "allowed2/other.txt", "allowed2"),
    ("allowed1/sub/back", "allowed1/file.txt", "allowed1"),
    ("allowed1/to-sub/x.txt", "allowed1/sub/x.txt", "allowed1"),
    ("allowed1/etc-link/../file.txt", "allowed1/file.txt", "allowed1"),
]

REFUSED = [
    ("allowed1_evil/file.txt", "outside_allowlist"),
    ("outside/secret", "outside_allowlist"),
    ("allowed1/../outside/secret", "outside_allowlist"),
    ("allowed1/sub/../../outside/secret", "outside_allowlist"),
    ("allowed1/etc-link/passwd", "outside_allowlist"),
    ("allowed1/secret-link", "outside_allowlist"),
    ("allowed1/up/outside/secret", "outside_allowlist"),
    ("allowed1/dangling", "outside_allowlist"),
    ("allowed1/dangling-inside", "not_found"),
    ("allowed1/missing.txt", "not_found"),
    ("allowed1/file.txt/x", "not_found"),
    ("allowed1/loop", "symlink_escape"),
    ("state/token", "state_root"),
    ("state/.downloads/../token", "state_root"),
    ("allowed1/token-link", "outside_allowlist"),
    ("allowed1/token-hardlink", "hardlinked"),
    ("state/.uploads/staged.txt", "state_root"),
    ("state/.upload-roots", "state_root"),
    ("state/audit.jsonl", "state_root"),
    ("allowed1/fifo", "not_regular_file"),
    ("allowed1/sub", "not_regular_file"),
    ("allowed1", "not_regular_file"),
    ("allowed1/file.txt/", "not_regular_file"),
]


@pytest.fixture
def uw(world):
    return UploadWorld(world)


@pytest.mark.parametrize("rel,path,root", ALLOWED, ids=[a for a, _, _ in ALLOWED])
def test_an_allowed_source_resolves_to_its_canonical_path(uw, rel, path, root):
    p = uw.w.p
    source = uw.source().resolve(uw.raw(rel))
    content = p(path).read_bytes()
    assert (source.path, source.root) == (p(path), p(root))
    assert (source.bytes, source.sha256) == (len(content), hashlib.sha256(content).hexdigest())
    with uw.source().open(uw.raw(rel)) as f:
        assert f.read() == content
        assert f.path == p(path)


@pytest.mark.parametrize("rel,code", REFUSED, ids=[a for a, _ in REFUSED])
def test_a_hostile_source_is_refused_with_its_code(uw, rel, code):
    asked = uw.raw(rel)
    assert code_of(uw.source().resolve, asked) == code
    assert code_of(uw.source().open, asked) == code


def test_hostile_path_shapes_are_refused_before_any_lookup(uw):
    source = uw.source()
    cases = [
        ("allowed1/file.txt", "relative_path"),
        ("", "relative_path"),
        ("./file", "relative_path"),
        ("/" + "a" * 5000, "invalid_argument"),
        ("/tmp/x\0/etc/passwd", "nul_byte"),
        (f"/proc/self/root{uw.w.p('allowed1/file.txt')}", "outside_allowlist"),
        ("/proc/self/fd/0", "outside_allowlist"),
    ]
    for path, code in cases:
        with pytest.raises(safe_lanes.Refused) as raised:
            source.resolve(path)
        assert raised.value.code == code, path
        assert "\0" not in str(raised.value)


def test_a_message_never_carries_control_characters(uw):
    with pytest.raises(safe_lanes.Refused) as raised:
        uw.source().resolve("/outside/\x1b[31mred\u202e.txt")
    assert "\x1b" not in str(raised.value) and "\u202e" not in str(raised.value)


def test_the_file_object_reads_the_checked_descriptor_even_after_a_swap(uw):
    p = uw.w.p
    opened = uw.source().open(p("allowed1/file.txt"))
    assert isinstance(opened, io.RawIOBase) and isinstance(opened, safe_lanes.Opened)
    # Replacing the file after the check does not change what the handle reads.
    os.rename(p("outside/secret"), p("allowed1/file.txt"))
    with opened as f:
        assert f.read() == b"one"
        assert f.bytes == 3 and f.root == p("allowed1")
    assert opened.closed
    assert p("allowed1/file.txt").read_text() == "SECRET"


def test_the_file_object_is_an_ordinary_binary_file(uw):
    with uw.source().open(uw.w.p("allowed1/file.txt")) as f:
        assert f.readable() and not f.writable()
        assert f.read(1) == b"o"
        f.seek(0)
        assert hashlib.sha256(f.read()).hexdigest() == hashlib.sha256(b"one").hexdigest()
        with pytest.raises(io.UnsupportedOperation):
            f.write(b"x")


def test_a_fifo_is_refused_at_once(uw):
    done = []
    t = threading.Thread(target=lambda: done.append(code_of(uw.source().open, uw.w.p("allowed1/fifo"))))
    t.start()
    t.join(timeout=30)
    assert done == ["not_regular_file"]


def test_the_hard_guard_holds_when_the_allowlist_covers_the_state_root(world, monkeypatch):
    world.p("state/token").write_text("TOKEN")
    world.p("state/.downloads/ok.txt").write_text("ok")
    monkeypatch.setenv("SAFE_LANES_UPLOAD_ROOTS", str(world.tmp))
    source = safe_lanes.UploadSource.load(world.root)
    assert any(r["covers_state_root"] for r in source.roots)
    assert code_of(source.resolve, str(world.p("state/token"))) == "state_root"
    assert code_of(source.resolve, str(world.p("state/workflow.json"))) in ("state_root", "not_found")
    assert source.resolve(str(world.p("state/.downloads/ok.txt"))).bytes == 2


def test_ignored_entries_are_reported(uw):
    ignored = uw.source().ignored
    assert {i["why"] for i in ignored} >= {"not an absolute path", "missing, or not a directory"}


def test_refusals_and_resolutions_are_recorded_as_the_agent(uw):
    source = uw.source()
    source.resolve(str(uw.w.p("allowed1/file.txt")))
    code_of(source.resolve, str(uw.w.p("outside/secret")))
    records = uw.w.records()
    assert [r["actor"] for r in records if r["event"] == "upload.resolve"] == ["agent"]
    assert [r["actor"] for r in records if r["event"] == "upload.refused"] == ["agent"]


def test_a_swapped_directory_never_yields_a_handle_outside(uw):
    """A thread keeps swapping `allowed1/race` between a directory and a link to `outside`;
    every successful open reads the allowed file, never the secret."""
    p = uw.w.p
    p("allowed1/race").mkdir()
    p("allowed1/race/secret").write_text("allowed")
    os.symlink(p("outside"), p("allowed1/race-link"))
    stop = threading.Event()

    def swap():
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        AT_FDCWD, RENAME_EXCHANGE = -100, 2
        a, b = bytes(p("allowed1/race")), bytes(p("allowed1/race-link"))
        while not stop.is_set():
            libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)

    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        source = uw.source()
        allowed = 0
        for _ in range(2000):
            try:
                with source.open(p("allowed1/race/secret")) as f:
                    assert f.read() == b"allowed"
                    allowed += 1
            except safe_lanes.Refused as e:
                assert e.code in ("outside_allowlist", "not_found", "symlink_escape"), e
    finally:
        stop.set()
        swapper.join()
    assert allowed > 0
