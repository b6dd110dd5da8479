"""What the suites of the Python package share: state roots in temporary folders, the audit log
read back, the two users of the hostile runs, and a Python any of them can run."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import safe_lanes
from safe_lanes.human import Grants

#: The unprivileged user of the second hostile run.
NOBODY = 65534


def users():
    """The users of the hostile runs: this process's, and `nobody` (this one again when this
    process is not root and cannot switch users)."""
    me = os.geteuid()
    return [me, NOBODY if me == 0 else me]


class World:
    """A temporary folder with a state root at `<tmp>/state`."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.root = safe_lanes.StateRoot.open(tmp / "state")

    def p(self, rel: str) -> Path:
        return self.tmp / rel

    def layout(self, dirs=(), files=()):
        for d in dirs:
            self.p(d).mkdir(parents=True, exist_ok=True)
        for f, content in files:
            data = content.encode() if isinstance(content, str) else content
            self.p(f).write_bytes(data)

    def grants(self) -> Grants:
        return Grants(self.root)

    def records(self):
        """Every record of the audit log."""
        path = self.root.path / "audit.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line]


@pytest.fixture
def world(tmp_path):
    return World(tmp_path)


def code_of(call, *args, **kwargs):
    """The code `call` raised (it must raise `safe_lanes.Error`)."""
    with pytest.raises(safe_lanes.Error) as raised:
        call(*args, **kwargs)
    return raised.value.code


def me_human():
    return f"uid:{os.geteuid()}"


class UserDir:
    """A temporary folder (0755) owned by `uid`, with sub-folders `dirs` (theirs too)."""

    def __init__(self, uid: int, dirs=()):
        self.uid = uid
        self.gid = os.getegid() if uid == os.geteuid() else uid
        self.path = Path(tempfile.mkdtemp(prefix="safe-lanes-py-"))
        os.chmod(self.path, 0o755)
        self.give(self.path)
        for d in dirs:
            (self.path / d).mkdir(parents=True)
            self.give(self.path / d)

    def p(self, rel: str) -> Path:
        return self.path / rel

    def give(self, path: Path):
        os.lchown(path, self.uid, self.gid)

    def write(self, rel: str, content: str):
        self.p(rel).write_text(content)
        self.give(self.p(rel))

    def cleanup(self):
        shutil.rmtree(self.path, ignore_errors=True)


_INTERPRETER = {}
_PACKAGE_COPY = []


def package_dir_for(uid: int) -> str:
    """A folder holding this package that `uid` can read: where it is installed, or, for
    another user, a copy in a temporary folder (the venv may live under a home others cannot
    enter)."""
    installed = Path(safe_lanes.__file__).resolve().parent
    if uid == os.geteuid():
        return str(installed.parent)
    if not _PACKAGE_COPY:
        copy = Path(tempfile.mkdtemp(prefix="safe-lanes-py-package-"))
        os.chmod(copy, 0o755)
        shutil.copytree(installed, copy / "safe_lanes", ignore=shutil.ignore_patterns("__pycache__"))
        for path in [copy / "safe_lanes", *(copy / "safe_lanes").rglob("*")]:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        _PACKAGE_COPY.append(str(copy))
    return _PACKAGE_COPY[0]


def interpreter_for(uid: int) -> str:
    """A Python `uid` can run that imports this package (this one, or the system's)."""
    if uid in _INTERPRETER:
        return _INTERPRETER[uid]
    candidates = [sys.executable, os.path.realpath(sys.executable), "/usr/bin/python3", "/usr/local/bin/python3"]
    for python in candidates:
        if not os.path.exists(python):
            continue
        try:
            probe = run_python_as(uid, "import safe_lanes", python=python, check=False)
        except PermissionError:
            continue
        if probe.returncode == 0:
            _INTERPRETER[uid] = python
            return python
    pytest.fail(f"no Python that uid {uid} can run imports safe_lanes (tried {candidates})")


def run_python_as(uid: int, code: str, *, python=None, cwd=None, env=None, check=True, timeout=120):
    """Run `code` with Python as `uid` (this package importable), its environment cleared but
    for `env`; the completed process."""
    python = python or interpreter_for(uid)
    full_env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": package_dir_for(uid), "LANG": "C.UTF-8"}
    full_env.update(env or {})
    kwargs = {}
    if uid != os.geteuid():
        kwargs = {"user": uid, "group": uid, "extra_groups": []}
    done = subprocess.run(
        [python, "-c", code],
        cwd=cwd or "/",
        env=full_env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"uid {uid}: exit {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done


@pytest.fixture(scope="session", autouse=True)
def _remove_the_package_copy():
    yield
    for copy in _PACKAGE_COPY:
        shutil.rmtree(copy, ignore_errors=True)
