"""The deposit through the package: staging as a context manager that erases whatever
happens, inert names for hostile ones, the broker's run with `cwd` = the deposit, `send` with
an uploader, uploader templates, and the cap."""

import hashlib
import os
import re
import subprocess
import sys

import pytest

import safe_lanes

from conftest import code_of


def deposit_entries(world):
    return os.listdir(world.root.uploads)


def test_a_staged_file_exists_in_the_block_and_is_erased_after_it(world):
    deposit = safe_lanes.UploadDeposit(world.root)
    with deposit.stage(data=b"# notes", name="notes.md") as staged:
        assert staged.deposit == world.root.uploads == deposit.path
        assert staged.path == staged.deposit / staged.file
        assert staged.path.read_bytes() == b"# notes"
        assert (staged.name, staged.bytes) == ("notes.md", 7)
        assert staged.sha256 == hashlib.sha256(b"# notes").hexdigest()
        assert oct(staged.path.stat().st_mode & 0o777) == "0o600"
        assert not staged.erased
    assert staged.erased and not staged.path.exists()
    assert deposit_entries(world) == []


def test_an_exception_in_the_block_erases_it_too(world):
    deposit = safe_lanes.UploadDeposit(world.root)
    with pytest.raises(RuntimeError):
        with deposit.stage(data=iter([b"a", b"b"]), name="x.txt") as staged:
            path = staged.path
            raise RuntimeError("the broker died")
    assert not path.exists() and deposit_entries(world) == []


def test_a_staged_file_not_used_in_with_is_erased_when_collected(world):
    deposit = safe_lanes.UploadDeposit(world.root)
    staged = deposit.stage(data=b"x", name="x.txt")
    path = staged.path
    assert path.exists()
    del staged
    assert not path.exists()


@pytest.mark.parametrize(
    "hint",
    ["../../.bashrc", "$(rm -rf ~).md", "-rf --no-preserve-root", "a b;c|d&e.txt", "\u202eexe.txt", "CON", ""],
)
def test_a_hostile_name_becomes_an_inert_file_name(world, hint):
    with safe_lanes.UploadDeposit(world.root).stage(data=b"x", name=hint) as staged:
        assert re.fullmatch(r"[A-Za-z0-9._/-]+", staged.file), staged.file
        assert not os.path.basename(staged.file).startswith((".", "-"))
        assert staged.path.parent.name == "in" and staged.path.parent.parent.parent == world.root.uploads


def test_the_broker_runs_its_uploader_in_the_deposit(world, tmp_path):
    """ADR-0003's pattern: the gateway stages, the broker runs the tool with `cwd` = the
    deposit and the staged file's relative name; the tool refuses paths outside its cwd."""
    tool = tmp_path / "tool.py"
    tool.write_text(
        "import os, sys\n"
        "path = os.path.realpath(sys.argv[1])\n"
        "if not path.startswith(os.getcwd() + os.sep):\n"
        "    sys.exit('outside the current directory')\n"
        "print(open(path).read())\n"
    )
    deposit = safe_lanes.UploadDeposit(world.root)
    with deposit.stage(data=b"# Quarterly report\n", name="report.md") as staged:
        done = subprocess.run(
            [sys.executable, str(tool), staged.file], cwd=staged.deposit, capture_output=True, text=True
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "# Quarterly report\n\n"
    assert deposit_entries(world) == []


def test_send_runs_the_uploader_and_erases(world):
    deposit = safe_lanes.UploadDeposit(world.root)
    staged = deposit.stage(data=b"payload", name="p.txt")
    sent = deposit.send(staged, safe_lanes.Uploader("cat {file}"))
    assert sent.success and sent.stdout == "payload" and sent.exit_code == 0
    assert sent.recorded and (sent.name, sent.bytes) == ("p.txt", 7)
    assert staged.erased and deposit_entries(world) == []
    with pytest.raises(ValueError):
        deposit.send(staged, safe_lanes.Uploader("cat {file}"))


def test_a_failing_uploader_is_reported_and_its_file_erased(world):
    deposit = safe_lanes.UploadDeposit(world.root)
    sent = deposit.send(deposit.stage(data=b"x", name="x"), safe_lanes.Uploader(["sh", "-c", "echo no >&2; exit 3"]))
    assert not sent.success and sent.exit_code == 3 and sent.stderr == "no\n"
    assert deposit_entries(world) == []


def test_an_uploader_that_outlives_its_timeout_is_killed(world):
    deposit = safe_lanes.UploadDeposit(world.root)
    sent = deposit.send(deposit.stage(data=b"x", name="x"), safe_lanes.Uploader("sh -c 'sleep 30' sh {file}", timeout=0.5))
    assert sent.timed_out and not sent.success


def test_uploader_templates_keep_the_file_a_whole_argument(world):
    assert code_of(safe_lanes.Uploader, "sh -c 'upload {file}'") == "invalid_argument"
    assert code_of(safe_lanes.Uploader, "") == "invalid_argument"
    assert code_of(safe_lanes.Uploader, "echo 'unbalanced") == "invalid_argument"
    with pytest.raises(TypeError):
        safe_lanes.Uploader(42)
    # A received name never stands in a shell's script: only after it, as its argument.
    assert code_of(safe_lanes.Uploader, "sh -c 'echo {name}'") == "invalid_argument"
    deposit = safe_lanes.UploadDeposit(world.root)
    sent = deposit.send(deposit.stage(data=b"x", name="it's mine.txt"), safe_lanes.Uploader("sh -c 'echo \"$1\"' sh {name}"))
    assert sent.stdout == "it's mine.txt\n"
    # `{name:json}` for a JSON argument, `{name}` as it is where no shell reads it.
    gws = ["python3", "-c", "import json, sys; print(json.loads(sys.argv[2])['name'], sys.argv[3])", "--json", '{"name": "{name:json}"}', "{file}"]
    sent = deposit.send(deposit.stage(data=b"x", name='Thomas\'s "Q3" summary.md'), safe_lanes.Uploader(gws))
    assert sent.stdout == 'Thomas\'s "Q3" summary.md in/' + sent.staged.name + "\n", sent.stdout


def test_a_checked_source_is_staged_from_its_descriptor(world):
    lane = safe_lanes.DownloadLane(world.root)
    saved = lane.save("report.pdf", b"%PDF-original")
    opened = safe_lanes.UploadSource.load(world.root).open(saved.path)
    opened.read(4)  # what the gateway read does not change what is staged
    os.rename(saved.path, world.p("moved"))
    (world.root.downloads / "report.pdf").write_bytes(b"swapped")
    deposit = safe_lanes.UploadDeposit(world.root)
    with deposit.stage_source(opened) as staged:
        assert staged.path.read_bytes() == b"%PDF-original"
        assert staged.name == "report.pdf"
    opened.close()
    with pytest.raises(TypeError):
        deposit.stage_source(open(world.p("moved"), "rb"))


def test_the_cap_refuses_and_leaves_nothing(world):
    deposit = safe_lanes.UploadDeposit(world.root, max_bytes=4)
    assert code_of(deposit.stage, data=b"12345", name="x") == "too_large"
    assert deposit_entries(world) == []


def test_staging_is_recorded_and_an_upload_recorded_before_it_runs(world):
    deposit = safe_lanes.UploadDeposit(world.root)
    deposit.send(deposit.stage(data=b"x", name="x"), safe_lanes.Uploader("true"))
    events = [(r["event"], r["actor"]) for r in world.records()]
    assert ("upload.start", "agent") in events and ("upload.end", "agent") in events
    assert events.index(("upload.start", "agent")) < events.index(("upload.end", "agent"))
