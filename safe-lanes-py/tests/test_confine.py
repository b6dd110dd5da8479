"""Confined commands through the package, as root and as an ordinary user (`nobody`; the same
user twice when the suite does not run as root): every layer is there, a read-write grant is
writable, a read-only grant is readable and unchangeable, and nothing else — the state root,
the folder outside, a link out of the grant, the system — can be read or changed. The
library's table (`safe-lanes/tests/it/confine.rs`, the CLI's `hostile.rs`), run by a gateway
process of that user."""

import json
import os

import pytest

import safe_lanes

from conftest import UserDir, run_python_as, users

LAYERS = ["namespaces", "system set and the grants only", "no capabilities", "Landlock ABI", "seccomp"]


def test_every_layer_of_the_sandbox_is_available_on_this_kernel():
    support = safe_lanes.sandbox_support()
    assert support.available and support.problem is None, support.to_dict()
    for layer in LAYERS:
        assert any(layer in held for held in support.layers), (layer, support.layers)


def attempt(name, attack):
    """A shell line that prints `held: NAME` when `attack` fails and `THROUGH: NAME` when it works."""
    return f"if {attack} >/dev/null 2>&1; then echo 'THROUGH: {name}'; else echo 'held: {name}'; fi\n"


ATTACKS = "".join(
    [
        attempt("read outside", 'cat "$OUTSIDE/secret"'),
        attempt("list outside", 'ls "$OUTSIDE"'),
        attempt("stat outside", 'stat "$OUTSIDE/secret"'),
        attempt("write outside", 'echo x > "$OUTSIDE/planted"'),
        attempt("read through a link out", "cat ./link-out/secret"),
        attempt("write through a link out", "echo x > ./link-out/planted"),
        attempt("write read-only", 'echo x >> "$WORKFLOW_FOLDER_DOCS/readme"'),
        attempt("create in read-only", 'echo x > "$WORKFLOW_FOLDER_DOCS/new"'),
        attempt("remove read-only", 'rm -f "$WORKFLOW_FOLDER_DOCS/readme"'),
        attempt("chmod read-only", 'chmod 777 "$WORKFLOW_FOLDER_DOCS/readme"'),
        attempt("utime read-only", 'touch -d 2001-01-01 "$WORKFLOW_FOLDER_DOCS/readme"'),
        attempt("read the manifest", 'cat "$STATE/workflow.json"'),
        attempt("read the audit log", 'cat "$STATE/audit.jsonl"'),
        attempt("list the state root", 'ls "$STATE"'),
        attempt("write the state root", 'echo x > "$STATE/planted"'),
        attempt("write the system", "echo x > /etc/planted"),
        attempt("write the root", "mkdir /planted"),
        attempt("read /etc/shadow", "cat /etc/shadow"),
        attempt("chmod system", "chmod 600 /etc/hostname"),
        attempt("sethostname", "hostname evil"),
        attempt("mknod a terminal", "mknod ./tty c 4 1"),
    ]
)

ALLOWED = (
    'echo made > ./made && cat ./made && cat "$WORKFLOW_FOLDER_DOCS/readme" && echo && '
    "ls /usr/bin >/dev/null && echo system-readable"
)

#: Run by the lab's user: the human's grants, then the agent's commands, as a gateway would.
GATEWAY = r"""
import json, os, safe_lanes
from safe_lanes.human import Grants
lab = os.environ["LAB"]
root = safe_lanes.StateRoot.open(lab + "/state")
grants = Grants(root)
grants.add("proj", lab + "/proj", "read_write", reason="the lab")
grants.add("docs", lab + "/docs", "read_only", reason="the lab")
desk = safe_lanes.AgentDesk(root)
env = "export OUTSIDE={}/outside STATE={}/state\n".format(lab, lab)
out = {
    "uid": os.geteuid(),
    "allowed": desk.run(env + os.environ["ALLOWED"], cwd="proj").to_dict(),
    "attacks": desk.run(env + os.environ["ATTACKS"], cwd="proj").to_dict(),
}
print(json.dumps(out))
"""


@pytest.fixture(params=users(), ids=lambda uid: f"uid{uid}")
def lab(request):
    uid = request.param
    lab = UserDir(uid, dirs=["home", "proj", "docs", "outside"])
    lab.write("docs/readme", "read only")
    lab.write("outside/secret", "secret")
    os.symlink(lab.p("outside"), lab.p("proj/link-out"))
    lab.give(lab.p("proj/link-out"))
    yield lab
    lab.cleanup()


def test_a_gateways_commands_reach_their_grants_and_nothing_else(lab):
    readme = lab.p("docs/readme")
    before = os.stat(readme)
    done = run_python_as(
        lab.uid,
        GATEWAY,
        cwd=lab.p("home"),
        env={"LAB": str(lab.path), "HOME": str(lab.p("home")), "ALLOWED": ALLOWED, "ATTACKS": ATTACKS},
    )
    out = json.loads(done.stdout)
    assert out["uid"] == lab.uid
    allowed = out["allowed"]
    assert allowed["exit_code"] == 0, allowed
    assert allowed["stdout"] == "made\nread only\nsystem-readable\n", allowed
    attacks = out["attacks"]
    lines = attacks["stdout"].splitlines()
    assert len(lines) == ATTACKS.count("\n"), attacks
    assert [line for line in lines if not line.startswith("held")] == [], attacks
    assert lab.p("proj/made").read_text() == "made\n"
    after = os.stat(readme)
    assert (after.st_mode, after.st_mtime_ns, after.st_size) == (before.st_mode, before.st_mtime_ns, before.st_size)
    assert readme.read_text() == "read only"
    assert sorted(os.listdir(lab.p("outside"))) == ["secret"]
    assert sorted(os.listdir(lab.p("docs"))) == ["readme"]
    assert not os.path.exists("/planted") and not os.path.exists("/etc/planted")
    assert not lab.p("state/planted").exists()
