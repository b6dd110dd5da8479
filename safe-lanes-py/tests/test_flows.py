"""The three flows of the gateways safe-lanes was made for, end to end through the package:

1. an e-mail attachment with a hostile name lands in the download lane;
2. a file the agent names is checked against the human's upload roots, staged in the deposit
   from the checked descriptor, and uploaded by the broker's own tool run with `cwd` = the
   deposit; the staged copy is erased;
3. the human grants a folder, the agent runs a confined command in it and patches a file, and
   nothing outside the grant is reachable.
"""

import hashlib
import os
import subprocess
import sys

import pytest

import safe_lanes
from safe_lanes.human import Grants

from conftest import code_of


def test_an_attachment_lands_in_the_download_lane(world):
    lane = safe_lanes.DownloadLane(world.root, max_bytes=1 << 20)
    attachment = b"%PDF-1.7 the invoice"
    # What a mail parser hands over: a name written by the sender.
    saved = lane.save("../../.ssh/authorized_keys\u202efdp.pdf", iter([attachment[:5], attachment[5:]]))
    assert saved.path.parent == world.root.downloads
    assert saved.path.read_bytes() == attachment
    assert "/" not in saved.name and "\u202e" not in saved.name and not saved.name.startswith(".")
    assert not (world.tmp / ".ssh").exists()
    again = lane.save("../../.ssh/authorized_keys\u202efdp.pdf", attachment)
    assert again.path != saved.path and saved.path.read_bytes() == attachment
    assert [e.name for e in lane.list().files] == sorted([saved.name, again.name])
    assert code_of(lane.save, "huge.bin", b"x" * ((1 << 20) + 1)) == "too_large"
    assert sorted(os.listdir(world.root.downloads)) == sorted([saved.name, again.name])


UPLOADER = """\
import os, sys
# The broker's tool: it uploads a file named relative to its working directory, nothing else.
path = os.path.realpath(sys.argv[1])
if not path.startswith(os.getcwd() + os.sep):
    sys.exit("refusing a path outside the deposit")
with open(path, "rb") as f, open(sys.argv[2], "ab") as sent:
    sent.write(f.read())
"""


def test_an_allowlisted_source_is_staged_and_uploaded_by_the_broker(world):
    world.layout(
        dirs=["home/reports", "home/.ssh"],
        files=[("home/reports/q3.pdf", b"%PDF q3"), ("home/.ssh/id_ed25519", b"PRIVATE KEY")],
    )
    # The human's allowlist (`safe-lanes upload roots add`).
    (world.root.path / ".upload-roots").write_text(f"{world.p('home/reports')}\n")
    tool = world.p("uploader.py")
    tool.write_text(UPLOADER)
    sent = world.p("sent.bin")

    def broker(agent_path):
        """The broker: check the agent's path, stage the checked file, run the tool in the deposit."""
        source = safe_lanes.UploadSource.load(world.root)
        deposit = safe_lanes.UploadDeposit(world.root)
        with source.open(agent_path) as opened, deposit.stage_source(opened) as staged:
            done = subprocess.run(
                [sys.executable, str(tool), staged.file, str(sent)],
                cwd=staged.deposit,
                capture_output=True,
                text=True,
            )
            assert done.returncode == 0, done.stderr
            return staged

    staged = broker(str(world.p("home/reports/q3.pdf")))
    assert sent.read_bytes() == b"%PDF q3"
    assert staged.sha256 == hashlib.sha256(b"%PDF q3").hexdigest()
    assert staged.erased and os.listdir(world.root.uploads) == []
    # What a prompt injection asks for instead.
    for hostile, code in [
        (str(world.p("home/.ssh/id_ed25519")), "outside_allowlist"),
        (str(world.p("home/reports/../.ssh/id_ed25519")), "outside_allowlist"),
        ("reports/q3.pdf", "relative_path"),
        (str(world.root.path / "workflow.json"), "state_root"),
    ]:
        assert code_of(broker, hostile) == code, hostile
    assert sent.read_bytes() == b"%PDF q3" and os.listdir(world.root.uploads) == []


def test_a_folder_grant_a_confined_command_and_a_patch(world):
    if not safe_lanes.sandbox_support().available:
        pytest.fail(f"confined commands need every layer: {safe_lanes.sandbox_support().problem}")
    world.layout(
        dirs=["site", "secrets"],
        files=[("site/index.html", "<h1>Hello</h1>\n<p>old</p>\n"), ("secrets/token", "TOKEN")],
    )
    # The human's side, in its own process in a real gateway.
    Grants(world.root).add("site", world.p("site"), "read_write", reason="the website")
    desk = safe_lanes.AgentDesk(world.root, client="the gateway")
    [grant] = desk.grants().grants
    assert (grant.alias, grant.access, grant.env) == ("site", "read_write", "WORKFLOW_FOLDER_SITE")

    ran = desk.run("cat index.html", cwd="site")
    assert ran.success and ran.stdout == "<h1>Hello</h1>\n<p>old</p>\n", ran.to_dict()
    patch = "--- a/index.html\n+++ b/index.html\n@@ -1,2 +1,2 @@\n <h1>Hello</h1>\n-<p>old</p>\n+<p>new</p>\n"
    patched = desk.apply_patch("site", "index.html", patch)
    assert (patched.change, patched.hunks) == ("modified", 1)
    ran = desk.run(["sh", "-c", 'grep -c new "$WORKFLOW_FOLDER_SITE/index.html"'], cwd="site")
    assert ran.stdout == "1\n", ran.to_dict()

    escaped = desk.run(f"cat {world.p('secrets/token')}; echo x > {world.p('secrets/planted')}", cwd="site")
    assert not escaped.success and "TOKEN" not in escaped.stdout
    assert not world.p("secrets/planted").exists()
    assert code_of(desk.apply_patch, "site", "../secrets/token", patch) == "traversal"
    # More access is only ever asked for; the human decides.
    asked = desk.request_access("secrets", "read_only", "to read the token", path=str(world.p("secrets")))
    assert asked.status == "pending" and [g.alias for g in desk.grants().grants] == ["site"]
    events = [(r["event"], r["actor"]) for r in world.records()]
    assert ("patch.apply", "agent") in events and ("grant.add", f"uid:{os.geteuid()}") in events
