"""The example gateway (`examples/gateway.py`), served over stdio and driven through the official
Python MCP SDK's client, as an agent host would: each tool once, the names a drive uploader
receives, and refusals arriving as tool errors with their codes."""

import base64
import json
import os
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import safe_lanes
from safe_lanes.human import Grants

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "gateway.py"

#: A stand-in for `gws drive files create --json '{"name": …}' --upload FILE`: it parses its
#: `--json` argument, reads the file, and appends what it received to the log `seen.jsonl`.
GWS = textwrap.dedent(
    """
    import argparse, json, os, sys
    parser = argparse.ArgumentParser()
    parser.add_argument("words", nargs="*")
    parser.add_argument("--json", required=True)
    parser.add_argument("--upload", required=True)
    args = parser.parse_args()
    metadata = json.loads(args.json)
    with open(args.upload, "rb") as f:
        content = f.read().decode()
    with open(sys.argv[0] + ".seen.jsonl", "a") as log:
        log.write(json.dumps({"name": metadata["name"], "content": content, "cwd_entries": sorted(os.listdir(".."))}) + "\\n")
    print("uploaded", metadata["name"])
    """
)


def seen(gws: Path):
    return [json.loads(line) for line in Path(str(gws) + ".seen.jsonl").read_text().splitlines()]


async def call(session, tool, args):
    result = await session.call_tool(tool, args)
    text = result.content[0].text if result.content else ""
    return result, text


async def ok(session, tool, args):
    result, text = await call(session, tool, args)
    assert not result.is_error, f"{tool} {args}: {text}"
    assert isinstance(result.structured_content, dict), f"{tool}: {result}"
    return result.structured_content


async def refused(session, tool, args):
    """The code of a refusal, checked to arrive as the library's own server sends it."""
    result, text = await call(session, tool, args)
    assert result.is_error, f"{tool} {args}: not refused: {text}"
    code = (result.meta or {}).get("safe-lanes/code")
    assert code, f"{tool}: no code in _meta: {result}"
    assert text.startswith(f"{code}: ") and len(text) > len(code) + 2, text
    return code


def test_the_example_gateway_through_the_sdk_client(tmp_path):
    root = tmp_path / "state"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "spec.md").write_text("the spec")
    gws = tmp_path / "gws.py"
    gws.write_text(GWS)
    uploader = f"{sys.executable} {gws} drive files create --json '{{\"name\": \"{{name:json}}\"}}' --upload {{file}}"
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(EXAMPLE), "--root", str(root), "--uploader", uploader, "--max-bytes", "4096"],
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)},
    )

    async def session_run():
        async with stdio_client(params, errlog=open(os.devnull, "w")) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = {t.name for t in (await session.list_tools()).tools}
                assert tools == {
                    "gmail_attachment_get",
                    "drive_upload",
                    "drive_upload_content",
                    "folder_grants_list",
                    "folder_access_request",
                    "shell_exec",
                }

                # An attachment lands in the lane under a safe name, whatever the name asked.
                saved = await ok(
                    session,
                    "gmail_attachment_get",
                    {"filename": "../../.bashrc", "content_base64": base64.b64encode(b"attached").decode()},
                )
                assert Path(saved["path"]).parent == root / ".downloads"
                assert Path(saved["path"]).read_bytes() == b"attached"
                assert await refused(session, "gmail_attachment_get", {"filename": "a", "content_base64": "%%"}) == "invalid_argument"
                assert await refused(session, "gmail_attachment_get", {"filename": "a", "content_base64": "A" * 8192}) == "too_large"

                # Uploads: the uploader gets each name exactly, through its JSON argument.
                sent = await ok(session, "drive_upload", {"path": saved["path"]})
                assert sent["exit_code"] == 0, sent
                names = ["Q3 summary.md", "Thomas's report.md", 'say "hi" \\ there.md', "Überweisung für Zoë – 日本.md"]
                for name in names:
                    sent = await ok(session, "drive_upload_content", {"filename": name, "text": f"about {name}"})
                    assert sent["stdout"] == f"uploaded {name}\n", sent
                uploads = seen(gws)
                assert [u["name"] for u in uploads] == [saved["name"], *names]
                assert [u["content"] for u in uploads] == ["attached", *[f"about {n}" for n in names]]
                assert all(len(u["cwd_entries"]) == 1 for u in uploads), "each uploader sees only its own upload"
                assert await refused(session, "drive_upload", {"path": "/etc/passwd"}) == "outside_allowlist"
                assert await refused(session, "drive_upload", {"path": "relative.txt"}) == "relative_path"

                # Folders: nothing until the human approves what the agent asked for.
                assert await refused(session, "shell_exec", {"command": "cat spec.md", "cwd": "docs"}) == "unknown_alias"
                asked = await ok(
                    session,
                    "folder_access_request",
                    {"alias": "docs", "access": "read_only", "reason": "read the spec", "path": str(docs)},
                )
                assert asked["status"] == "pending" and "grant approve" in asked["approve_with"]
                assert await refused(session, "folder_access_request", {"alias": "Bad Alias", "access": "read_only", "reason": "r"}) in {
                    "invalid_alias",
                    "invalid_argument",
                }
                grants = Grants(safe_lanes.StateRoot.open(root))
                proposal = grants.proposal(asked["request"]["id"])
                grants.approve(
                    proposal.request.id,
                    alias=proposal.alias,
                    access=proposal.access,
                    path=proposal.path,
                    digest=proposal.digest,
                    reason="the agent reads the spec",
                )
                listed = await ok(session, "folder_grants_list", {})
                assert [g["alias"] for g in listed["grants"]] == ["docs"]
                ran = await ok(session, "shell_exec", {"command": "cat spec.md; touch x", "cwd": "docs"})
                assert ran["stdout"] == "the spec", ran
                assert ran["exit_code"] != 0, "a read-only grant refuses the write"
                assert not (docs / "x").exists()

    anyio.run(session_run)


def test_a_refusal_in_any_tool_keeps_its_code_and_message():
    """`tool_errors` on a plain and an async tool: a `safe_lanes.Error` becomes the error result,
    anything else is left to the SDK."""
    from safe_lanes.mcp import CODE_META_KEY, tool_errors

    @tool_errors
    def plain(path: str) -> dict:
        raise safe_lanes.Refused("outside_allowlist", f"{path}: not allowed")

    @tool_errors
    async def later(path: str) -> dict:
        raise safe_lanes.Failed("io", f"read {path}: no space left")

    @tool_errors
    def crash() -> dict:
        raise KeyError("inner")

    result = plain("/etc/passwd")
    assert result.is_error and result.meta == {CODE_META_KEY: "outside_allowlist"}
    assert result.content[0].text == "outside_allowlist: /etc/passwd: not allowed"
    result = anyio.run(later, "x")
    assert result.is_error and result.meta[CODE_META_KEY] == "io"
    with pytest.raises(KeyError):
        crash()
    assert plain.__name__ == "plain" and "path" in plain.__annotations__
