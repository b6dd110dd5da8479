"""The package as installed: its stubs and `py.typed`, stubs for every public name, one
exception hierarchy with stable codes, `harden()`, and the agent's module apart from the
human's."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import safe_lanes
import safe_lanes.human

from conftest import code_of

PACKAGE = Path(safe_lanes.__file__).resolve().parent


def stub_names(stub: Path):
    tree = ast.parse(stub.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_the_wheel_carries_its_stubs_and_py_typed():
    assert (PACKAGE / "py.typed").is_file()
    for module, stub in [(safe_lanes, "__init__.pyi"), (safe_lanes.human, "human.pyi")]:
        names = stub_names(PACKAGE / stub)
        missing = [n for n in module.__all__ if n not in names]
        assert missing == [], (stub, missing)


def test_every_public_class_and_function_has_a_docstring():
    for module in (safe_lanes, safe_lanes.human):
        for name in module.__all__:
            assert (getattr(module, name).__doc__ or "").strip(), f"{module.__name__}.{name}"


def test_one_exception_hierarchy_with_the_stable_code(world):
    assert issubclass(safe_lanes.Refused, safe_lanes.Error) and issubclass(safe_lanes.Failed, safe_lanes.Error)
    assert issubclass(safe_lanes.Error, Exception)
    lane = safe_lanes.DownloadLane(world.root, max_bytes=1)
    with pytest.raises(safe_lanes.Refused) as refused:
        lane.save("a", b"xx")
    e = refused.value
    assert (e.code, str(e)) == ("too_large", f"too_large: {e.message}")

    def failing():
        yield b"x"
        raise OSError("the connection broke")

    with pytest.raises(safe_lanes.Failed) as failed:
        lane.save("b", failing())
    assert failed.value.code == "io" and isinstance(failed.value.__cause__, OSError)
    assert os.listdir(world.root.downloads) == []


def test_harden_makes_the_process_undumpable_and_turns_core_files_off():
    code = """
import ctypes, json, resource, safe_lanes
h = safe_lanes.harden()
libc = ctypes.CDLL(None)
print(json.dumps({"report": h.to_dict(), "dumpable": libc.prctl(3, 0, 0, 0, 0),
                  "core": list(resource.getrlimit(resource.RLIMIT_CORE))}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    out = json.loads(done.stdout)
    assert out["dumpable"] == 0 and out["core"] == [0, 0], out
    assert out["report"]["not_dumpable"] and out["report"]["no_core_files"]
    assert out["report"]["running_as_root"] == (os.geteuid() == 0)


def test_the_agents_module_does_not_load_the_humans():
    code = "import sys, safe_lanes; print('safe_lanes.human' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
    assert not any(hasattr(safe_lanes, n) for n in ("Grants", "Grant", "Proposal", "HeldChanges", "SetReview"))


def test_sanitize_is_the_librarys(world):
    assert safe_lanes.sanitize("../../.bashrc") == "bashrc"
    saved = safe_lanes.DownloadLane(world.root).save("../../.bashrc", b"x")
    assert saved.name == safe_lanes.sanitize("../../.bashrc")
    assert code_of(safe_lanes.DownloadLane(world.root, max_bytes=0).save, "a", b"x") == "too_large"
