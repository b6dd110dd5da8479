"""Threads: many threads on one lane and on one desk lose and double nothing, a confined
command or a background job is stopped from another thread, and a blocking call (a save of
256 MiB) releases the GIL so that the gateway's other threads keep running."""

import hashlib
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import safe_lanes

from conftest import code_of

THREADS = 8


def on_threads(work, count=THREADS):
    """`work(i)` on `count` threads released at once; their results, in order."""
    barrier = threading.Barrier(count)

    def started(i):
        barrier.wait()
        return work(i)

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(started, range(count)))


def test_many_threads_on_one_lane_each_get_a_file_of_their_own(world):
    lane = safe_lanes.DownloadLane(world.root)
    per_thread = 20

    def work(t):
        saves = []
        for i in range(per_thread):
            data = f"thread {t} file {i}\n".encode() * 50
            saves.append((lane.save("../report.pdf", data), data))
        return saves

    saves = [s for batch in on_threads(work) for s in batch]
    names = [saved.name for saved, _ in saves]
    assert len(set(names)) == THREADS * per_thread
    assert sorted(os.listdir(world.root.downloads)) == sorted(names)
    for saved, data in saves:
        assert saved.path.read_bytes() == data
        assert saved.sha256 == hashlib.sha256(data).hexdigest()
    recorded = [r for r in world.records() if r["event"] == "download.save"]
    assert len(recorded) == THREADS * per_thread
    listed = [e.name for e in lane.list(limit=1000).files]
    assert sorted(listed) == sorted(names)


@pytest.fixture
def desk_world(world):
    world.layout(dirs=["proj"])
    for t in range(THREADS):
        world.p(f"proj/f{t}.txt").write_text("one\ntwo\n")
    world.grants().add("proj", world.p("proj"), "read_write", reason="the threads")
    return world


def test_many_threads_on_one_desk(desk_world):
    w = desk_world
    desk = safe_lanes.AgentDesk(w.root)
    if not safe_lanes.sandbox_support().available:
        pytest.fail(f"confined commands need every layer: {safe_lanes.sandbox_support().problem}")

    def work(t):
        saved = desk.save(f"t{t}.txt", f"from {t}".encode())
        patch = f"--- a/f{t}.txt\n+++ b/f{t}.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+thread {t}\n"
        patched = desk.apply_patch("proj", f"f{t}.txt", patch)
        listed = [g.alias for g in desk.grants().grants]
        ran = desk.run(f"cat f{t}.txt", cwd="proj", timeout=60)
        refused = code_of(desk.apply_patch, "proj", "../outside.txt", patch)
        return saved, patched, listed, ran, refused

    results = on_threads(work)
    for t, (saved, patched, listed, ran, refused) in enumerate(results):
        assert saved.path.read_bytes() == f"from {t}".encode()
        assert patched.change == "modified"
        assert listed == ["proj"]
        assert ran.success and ran.stdout == f"one\nthread {t}\n", ran.to_dict()
        assert refused == "traversal"
        assert w.p(f"proj/f{t}.txt").read_text() == f"one\nthread {t}\n"
    events = [r["event"] for r in w.records()]
    assert events.count("download.save") == THREADS and events.count("patch.apply") == THREADS


def test_a_command_is_stopped_from_another_thread(desk_world):
    desk = safe_lanes.AgentDesk(desk_world.root)
    control = safe_lanes.Control()

    def stop_once_it_runs():
        while "started" not in control.output()[0]:
            time.sleep(0.01)
        control.stop("the client cancelled")

    stopper = threading.Thread(target=stop_once_it_runs)
    stopper.start()
    report = desk.run("echo started; sleep 600", cwd="proj", timeout=900, control=control)
    stopper.join()
    assert report.status == "finished" and report.stopped == "the client cancelled", report.to_dict()
    assert report.stdout == "started\n" and not report.timed_out


def test_a_background_job_is_stopped_while_another_thread_waits_for_it(desk_world):
    desk = safe_lanes.AgentDesk(desk_world.root)
    job = desk.run_background("echo started; sleep 600", cwd="proj")
    assert job.job_id and job.status == "running"
    answers = {}

    def answer(name, call, *args):
        try:
            answers[name] = call(*args)
        except safe_lanes.Error as e:
            answers[name] = e.code

    waiter = threading.Thread(target=answer, args=("waiter", desk.job_status, job.job_id, 120.0))
    waiter.start()
    answer("stopper", desk.job_stop, job.job_id)
    waiter.join()
    # The job's end is reported once, to whichever asked first; the other is told it is gone.
    reports = [a for a in answers.values() if not isinstance(a, str)]
    assert sorted(a for a in answers.values() if isinstance(a, str)) == ["not_found"], answers
    [last] = reports
    assert last.status == "finished" and last.stopped == "stopped by the agent", last.to_dict()
    assert code_of(desk.job_status, job.job_id) == "not_found"


@pytest.fixture
def no_forced_switches():
    """No switch of the GIL forced by the interpreter for the test: another thread runs only
    while this one has released the GIL itself."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    yield
    sys.setswitchinterval(before)


def test_a_save_of_256_mib_lets_other_threads_run(world, no_forced_switches):
    data = os.urandom(1 << 16) * 4096  # 256 MiB
    lane = safe_lanes.DownloadLane(world.root, max_bytes=len(data))
    ticks = [0]
    running = threading.Event()
    done = threading.Event()

    def other_thread():
        running.set()
        while not done.is_set():
            ticks[0] += 1
            # Gives the GIL back: the saving thread can always take it again.
            time.sleep(0)

    other = threading.Thread(target=other_thread)
    other.start()
    running.wait()
    before = ticks[0]
    saved = lane.save("big.bin", data)
    during = ticks[0] - before
    done.set()
    other.join()
    assert saved.bytes == len(data) and saved.sha256 == hashlib.sha256(data).hexdigest()
    # Without the GIL released, the other thread could not have run at all during the save.
    assert during > 0
