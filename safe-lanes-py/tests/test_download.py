"""The download lane through the package: what a save takes (bytes, file objects, iterables,
streamed), what it never does (replace, leave a partial file, follow a planted link), its cap,
its listing, its records (as the agent), and stopping it from another thread."""

import hashlib
import io
import os
import stat
import threading

import pytest

import safe_lanes

from conftest import code_of


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_save_returns_its_path_name_size_and_digest(world):
    lane = safe_lanes.DownloadLane(world.root)
    saved = lane.save("report.pdf", b"%PDF-1.7")
    assert saved.path == world.root.downloads / "report.pdf"
    assert (saved.name, saved.bytes, saved.sha256) == ("report.pdf", 8, sha(b"%PDF-1.7"))
    assert saved.recorded
    assert stat.S_IMODE(saved.path.stat().st_mode) == 0o600
    assert saved.to_dict() == {
        "path": str(saved.path),
        "name": "report.pdf",
        "bytes": 8,
        "sha256": sha(b"%PDF-1.7"),
        "recorded": True,
    }


@pytest.mark.parametrize(
    "make",
    [
        lambda data: data,
        lambda data: bytearray(data),
        lambda data: memoryview(data),
        lambda data: io.BytesIO(data),
        lambda data: io.BufferedReader(io.BytesIO(data)),
        lambda data: [data[:3], b"", data[3:10], data[10:]],
        lambda data: (data[i : i + 7] for i in range(0, len(data), 7)),
        lambda data: iter([memoryview(data)]),
    ],
    ids=["bytes", "bytearray", "memoryview", "BytesIO", "BufferedReader", "list", "generator", "memoryview-items"],
)
def test_every_kind_of_content_is_saved_whole(world, make):
    data = bytes(range(256)) * 33
    saved = safe_lanes.DownloadLane(world.root).save("x.bin", make(data))
    assert saved.path.read_bytes() == data
    assert (saved.bytes, saved.sha256) == (len(data), sha(data))


def test_a_real_file_is_streamed(world, tmp_path):
    big = tmp_path / "big.bin"
    data = os.urandom(3 << 20)
    big.write_bytes(data)
    with open(big, "rb") as f:
        saved = safe_lanes.DownloadLane(world.root).save("big.bin", f)
    assert saved.sha256 == sha(data)


def test_an_iterable_is_never_held_whole(world):
    """Chunks are pulled one at a time: a generator sees the lane consume each chunk before it
    makes the next (the lane never asks for everything first)."""
    pulled = []

    def chunks():
        for i in range(64):
            pulled.append(i)
            yield bytes([i]) * 65536

    saved = safe_lanes.DownloadLane(world.root).save("s.bin", chunks())
    assert saved.bytes == 64 * 65536
    assert pulled == list(range(64))


def test_text_and_other_types_are_refused_before_anything_is_written(world):
    lane = safe_lanes.DownloadLane(world.root)
    for bad in ["text", 42, None, object(), io.StringIO("text")]:
        with pytest.raises(TypeError):
            lane.save("x.txt", bad)
    with pytest.raises(TypeError):
        lane.save("x.txt", [b"ok", "text"])
    assert os.listdir(world.root.downloads) == []


def test_an_exception_of_the_content_fails_the_save_and_leaves_nothing(world):
    def failing():
        yield b"partial"
        raise ValueError("the mail server went away")

    lane = safe_lanes.DownloadLane(world.root)
    with pytest.raises(safe_lanes.Failed) as raised:
        lane.save("x.txt", failing())
    assert raised.value.code == "io"
    assert isinstance(raised.value.__cause__, ValueError)
    assert "the mail server went away" in raised.value.message
    assert os.listdir(world.root.downloads) == []


def test_an_interrupt_while_pulling_content_is_raised_as_itself(world):
    def interrupted():
        yield b"x"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        safe_lanes.DownloadLane(world.root).save("x.txt", interrupted())
    assert os.listdir(world.root.downloads) == []


def test_nothing_is_ever_replaced(world):
    lane = safe_lanes.DownloadLane(world.root)
    names = [lane.save("same.txt", str(i).encode()).name for i in range(4)]
    assert names == ["same.txt", "same (1).txt", "same (2).txt", "same (3).txt"]
    assert (world.root.downloads / "same.txt").read_bytes() == b"0"


def test_planted_links_fifos_and_directories_are_collisions_never_written_through(world):
    dl = world.root.downloads
    victim = world.p("victim")
    victim.write_text("keep")
    os.symlink(victim, dl / "a.txt")
    os.mkfifo(dl / "b.txt")
    (dl / "c.txt").mkdir()
    lane = safe_lanes.DownloadLane(world.root)
    assert [lane.save(n, b"new").name for n in ("a.txt", "b.txt", "c.txt")] == [
        "a (1).txt",
        "b (1).txt",
        "c (1).txt",
    ]
    assert victim.read_text() == "keep"


def test_the_cap_refuses_and_leaves_nothing(world):
    lane = safe_lanes.DownloadLane(world.root, max_bytes=10)
    assert lane.save("ok.txt", b"0123456789").bytes == 10
    for data in (b"x" * 11, iter([b"x" * 6, b"y" * 6]), io.BytesIO(b"z" * 100)):
        assert code_of(lane.save, "big.txt", data) == "too_large"
    assert os.listdir(world.root.downloads) == ["ok.txt"]


def test_a_durable_lane_saves_the_same(world):
    saved = safe_lanes.DownloadLane(world.root, durable=True).save("d.txt", b"durable")
    assert saved.path.read_bytes() == b"durable"


def test_a_listing_pages_with_cursors_and_refuses_a_forged_one(world):
    lane = safe_lanes.DownloadLane(world.root)
    for i in range(7):
        lane.save(f"f{i}.txt", b"x" * i)
    seen, cursor = [], None
    while True:
        page = lane.list(cursor=cursor, limit=3)
        assert page.path == str(world.root.downloads)
        seen += [(e.name, e.bytes) for e in page.files]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [(f"f{i}.txt", i) for i in range(7)]
    entry = lane.list().files[0]
    assert entry.raw_name == b"f0.txt" and entry.path == world.root.downloads / "f0.txt"
    assert code_of(lane.list, cursor="not-a-cursor") == "invalid_argument"


def test_saves_and_refusals_are_recorded_as_the_agent(world):
    lane = safe_lanes.DownloadLane(world.root, max_bytes=1)
    lane.save("a", b"x")
    code_of(lane.save, "b", b"xx")
    records = world.records()
    saves = [r for r in records if r["event"] == "download.save"]
    refused = [r for r in records if r["event"] == "download.refused"]
    assert [r["actor"] for r in saves] == ["agent"]
    assert [r["actor"] for r in refused] == ["agent"]


def test_a_control_stops_a_save_from_another_thread(world):
    control = safe_lanes.Control()
    started = threading.Event()

    def endless():
        while True:
            started.set()
            yield b"x" * 65536

    stopper = threading.Thread(target=lambda: (started.wait(), control.stop("the client cancelled")))
    stopper.start()
    lane = safe_lanes.DownloadLane(world.root)
    with pytest.raises(safe_lanes.Failed) as raised:
        lane.save("endless.bin", endless(), control=control)
    stopper.join()
    assert "the client cancelled" in raised.value.message
    assert control.stopped == "the client cancelled"
    assert os.listdir(world.root.downloads) == []


def test_an_insecure_root_is_refused(tmp_path):
    root = tmp_path / "open"
    root.mkdir(mode=0o777)
    os.chmod(root, 0o777)
    assert code_of(safe_lanes.StateRoot.open, root) == "insecure_root"


def test_the_root_is_resolved_as_the_cli_resolves_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SAFE_LANES_ROOT", str(tmp_path / "from-env"))
    assert safe_lanes.StateRoot.open().path == tmp_path / "from-env"
    monkeypatch.delenv("SAFE_LANES_ROOT")
    monkeypatch.setenv("GWSA_ROOT", str(tmp_path / "gwsa"))
    assert safe_lanes.StateRoot.open().path == tmp_path / "gwsa"
    assert safe_lanes.StateRoot.open(tmp_path / "given").path == tmp_path / "given"
    monkeypatch.delenv("GWSA_ROOT")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert safe_lanes.StateRoot.open().path == tmp_path / "xdg" / "safe-lanes"
