"""End-to-end tests of safe-lanes-mcp with the official Python MCP client (PyPI `mcp`).

Run by scripts/test in its virtual environment:
    SAFE_LANES_MCP=target/debug/safe-lanes-mcp SAFE_LANES_CLI=target/debug/safe-lanes \
        .venv/bin/python -m unittest discover -s safe-lanes-mcp/tests/python
"""

import base64
import hashlib
import json
import shlex
import os
import re
import shutil
import subprocess
import tempfile
import threading
import unittest
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
from mcp import ClientSession, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

SERVER = os.environ.get("SAFE_LANES_MCP", "target/debug/safe-lanes-mcp")
CLI = os.environ.get("SAFE_LANES_CLI", "target/debug/safe-lanes")

# renameat2(RENAME_EXCHANGE) through libc, for the swap race.
import ctypes

_libc = ctypes.CDLL(None, use_errno=True)
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def exchange(a: Path, b: Path) -> None:
    if _libc.renameat2(_AT_FDCWD, bytes(a), _AT_FDCWD, bytes(b), _RENAME_EXCHANGE) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# Every refusal code of the contract (the client suites share it).
CODES = set(json.loads((Path(__file__).parent.parent / "contract.json").read_text())["codes"])


def wire(message):
    """A message on the wire as plain JSON (an exception from the transport as its text)."""
    if isinstance(message, Exception):
        return {"exception": repr(message)}
    return message.message.model_dump(by_alias=True, mode="json", exclude_none=True)


class World:
    """A temporary state root and folders, a running server, and the CLI for the human.

    Used as `async with World(self, [...]) as w:` inside a test, so that the client's task
    groups are entered and left by the same task. `manifest` is written to
    `<root>/workflow.json` before the server starts. Every message between client and server
    is kept, as JSON, in `sent` and `received`; every successful structuredContent in
    `successes`, by tool.
    """

    def __init__(self, test, extra_args=(), manifest=None, root=None):
        self.test = test
        self.extra_args = list(extra_args)
        self.manifest = manifest
        self.shared_root = root

    async def __aenter__(self):
        self.tmp = Path(tempfile.mkdtemp())
        for d in ["proj", "docs", "share", "outside"]:
            (self.tmp / d).mkdir()
        self.root = self.shared_root or self.tmp / "state"
        if self.manifest is not None:
            self.root.mkdir(mode=0o700)
            (self.root / "workflow.json").write_text(self.manifest)
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(self.tmp), "RUST_LOG": "error"}
        params = StdioServerParameters(
            command=os.path.abspath(SERVER),
            args=["--root", str(self.root), *self.extra_args],
            env=env,
        )
        self.sent, self.received, self.successes = [], [], {}
        self.stack = AsyncExitStack()
        try:
            read, write = await self.stack.enter_async_context(
                stdio_client(params, errlog=self.stack.enter_context(open(os.devnull, "w")))
            )
            # Relay both ways through streams of our own, keeping a copy of every message.
            to_server, from_session = anyio.create_memory_object_stream(0)
            to_session, from_server = anyio.create_memory_object_stream(0)

            async def upstream():
                async with from_session:
                    async for message in from_session:
                        self.sent.append(wire(message))
                        await write.send(message)

            async def downstream():
                async with to_session:
                    async for message in read:
                        self.received.append(wire(message))
                        await to_session.send(message)

            relay = await self.stack.enter_async_context(anyio.create_task_group())
            self.stack.callback(relay.cancel_scope.cancel)
            relay.start_soon(upstream)
            relay.start_soon(downstream)
            self.session = await self.stack.enter_async_context(
                ClientSession(from_server, to_server)
            )
            self.initialized = await self.session.initialize()
        except BaseException:
            await self.stack.aclose()
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        return self

    async def __aexit__(self, *exc):
        await self.stack.aclose()
        shutil.rmtree(self.tmp, ignore_errors=True)

    async def ok(self, tool, args, **options):
        result = await self.session.call_tool(tool, args, **options)
        self.test.assertFalse(result.is_error, f"{tool} {args}: {result}")
        structured = result.structured_content
        self.test.assertIsInstance(structured, dict, f"{tool}: no structuredContent")
        self.test.assertEqual(result.content[0].type, "text")
        self.test.assertEqual(
            json.loads(result.content[0].text), structured, f"{tool}: the text is not the same JSON"
        )
        self.successes.setdefault(tool, []).append(structured)
        return structured

    async def refusal(self, tool, args, **options):
        """A refusal *result*: `isError`, one text `"<code>: <message>"`, no structuredContent,
        and the code again in `_meta["safe-lanes/code"]`. Returns `(code, message)`."""
        try:
            result = await self.session.call_tool(tool, args, **options)
        except MCPError as e:
            self.test.fail(f"{tool} {args}: a JSON-RPC error {e.code} ({e}) instead of a result")
        self.test.assertTrue(result.is_error, f"{tool} {args}: {result}")
        self.test.assertIsNone(result.structured_content, f"{tool}: a refusal has no structuredContent")
        self.test.assertEqual(len(result.content), 1, result)
        self.test.assertEqual(result.content[0].type, "text", result)
        found = re.fullmatch(r"([a-z_]+): (.+)", result.content[0].text, re.DOTALL)
        self.test.assertIsNotNone(found, f"{tool}: not '<code>: <message>': {result.content[0].text!r}")
        code, message = found.groups()
        self.test.assertIn(code, CODES)
        self.test.assertEqual((result.meta or {}).get("safe-lanes/code"), code, f"{tool}: _meta: {result}")
        return code, message

    async def refused(self, tool, args, **options):
        """The code of a refusal result."""
        return (await self.refusal(tool, args, **options))[0]

    def cli(self, *args):
        out = subprocess.run(
            [os.path.abspath(CLI), "--root", str(self.root), "--json", *args],
            capture_output=True,
            check=True,
        )
        return json.loads(out.stdout)

    def grant(self, alias, path, access):
        return self.cli("grant", "add", "--alias", alias, "--path", str(path), "--access", access)


class Downloads(unittest.IsolatedAsyncioTestCase):
    async def test_tools_are_the_contract(self):
        async with World(self) as w:
            tools = (await w.session.list_tools()).tools
            self.assertEqual(
                sorted(t.name for t in tools),
                ["download_save", "downloads_list", "folder_access_request", "folder_grants_list",
                 "folder_patch", "shell_exec", "shell_job_status", "shell_job_stop", "upload_resolve"],
            )

    async def test_save_and_list(self):
        async with World(self) as w:
            saved = await w.ok("download_save", {"filename": "../../.bashrc", "text": "echo hi"})
            self.assertEqual(saved["name"], "bashrc")
            self.assertEqual(saved["sha256"], sha256(b"echo hi"))
            self.assertTrue(saved["path"].startswith(str(w.root / ".downloads")))
            listed = await w.ok("downloads_list", {})
            self.assertEqual([f["name"] for f in listed["files"]], ["bashrc"])

    async def test_five_mebibytes_of_base64(self):
        async with World(self) as w:
            data = os.urandom(5 << 20)
            saved = await w.ok(
                "download_save", {"filename": "big.bin", "base64": base64.b64encode(data).decode()}
            )
            self.assertEqual(saved["bytes"], len(data))
            self.assertEqual(saved["sha256"], sha256(data))
            self.assertEqual(Path(saved["path"]).read_bytes(), data)

    async def test_too_large_leaves_nothing(self):
        async with World(self, ["--max-bytes", "10"]) as w:
            code = await w.refused("download_save", {"filename": "a", "text": "0123456789A"})
            self.assertEqual(code, "too_large")
            self.assertEqual(list((w.root / ".downloads").iterdir()), [])


class Malformed(unittest.IsolatedAsyncioTestCase):
    async def test_malformed_calls_get_results_and_the_server_keeps_serving(self):
        async with World(self) as w:
            async def still_serving():
                await w.ok("downloads_list", {})

            # Not a tool call of a known tool: a JSON-RPC error.
            with self.assertRaises(MCPError) as raised:
                await w.session.call_tool("read_file", {"path": "/etc/passwd"})
            self.assertEqual(raised.exception.code, -32602)
            await still_serving()
            # Bad arguments of a known tool: an invalid_argument result.
            for tool, args in [
                ("download_save", {"filename": "a", "text": "x", "base64": "eA=="}),
                ("download_save", {"filename": "a"}),
                ("download_save", {"filename": "a", "base64": "not base64!"}),
                ("download_save", {"filename": 42, "text": "x"}),
                ("upload_resolve", {}),
                ("shell_exec", {"command": ["ls"]}),
            ]:
                self.assertEqual(await w.refused(tool, args), "invalid_argument", f"{tool} {args}")
                await still_serving()
            self.assertEqual(await w.refused("upload_resolve", {"path": "/tmp/a\x00b"}), "nul_byte")
            await still_serving()


class Upload(unittest.IsolatedAsyncioTestCase):
    async def test_resolve(self):
        async with World(self) as w:
            saved = await w.ok("download_save", {"filename": "r.pdf", "text": "%PDF"})
            resolved = await w.ok("upload_resolve", {"path": saved["path"]})
            self.assertEqual(resolved["sha256"], saved["sha256"])
            (w.tmp / "outside" / "key").write_text("KEY")
            (w.root / "token").write_text("TOKEN")
            cases = [
                (str(w.tmp / "outside" / "key"), "outside_allowlist"),
                (str(w.root / "token"), "state_root"),
                ("relative", "relative_path"),
            ]
            for path, code in cases:
                self.assertEqual(await w.refused("upload_resolve", {"path": path}), code)

    async def test_swap_race_never_resolves_outside(self):
        async with World(self) as w:
            share, outside = w.tmp / "share", w.tmp / "outside"
            (share / "swap").mkdir()
            (share / "swap" / "file").write_text("inside")
            (outside / "file").write_text("outside")
            (share / "swaplink").symlink_to(outside)
            (w.root / ".upload-roots").write_text(f"{share}\n")
            stop = threading.Event()
            swaps = [0]

            def swapper():
                while not stop.is_set():
                    exchange(share / "swap", share / "swaplink")
                    swaps[0] += 1

            thread = threading.Thread(target=swapper)
            thread.start()
            inside = refused = escaped = 0
            try:
                for _ in range(2000):
                    result = await w.session.call_tool(
                        "upload_resolve", {"path": str(share / "swap" / "file")}
                    )
                    if result.is_error:
                        refused += 1
                        continue
                    found = result.structured_content
                    if found["sha256"] == sha256(b"outside") or not found["path"].startswith(str(share)):
                        escaped += 1
                    else:
                        inside += 1
            finally:
                stop.set()
                thread.join()
            self.assertEqual(escaped, 0)
            self.assertGreater(swaps[0], 100)
            self.assertGreater(inside, 0)
            self.assertGreater(refused, 0)

    async def test_upload_file_and_content(self):
        outbox = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, outbox, ignore_errors=True)
        seen = Path(outbox) / "seen"
        uploader = f"/bin/sh -c 'cat \"$1\" > {seen}; echo done' sh {{file}}"
        async with World(self, ["--uploader", uploader]) as w:
            names = sorted(t.name for t in (await w.session.list_tools()).tools)
            self.assertIn("upload_file", names)
            self.assertIn("upload_content", names)
            saved = await w.ok("download_save", {"filename": "a.txt", "text": "lane"})
            sent = await w.ok("upload_file", {"path": saved["path"]})
            self.assertEqual(sent["stdout"], "done\n")
            self.assertEqual(seen.read_text(), "lane")
            await w.ok("upload_content", {"filename": "n.md", "text": "# hi"})
            self.assertEqual(seen.read_text(), "# hi")
            self.assertEqual(list((w.root / ".uploads").iterdir()), [])
            self.assertEqual(await w.refused("upload_file", {"path": "/etc/passwd"}), "outside_allowlist")


class Folders(unittest.IsolatedAsyncioTestCase):
    async def test_request_is_inert_until_approved_through_the_cli(self):
        async with World(self) as w:
            (w.tmp / "docs" / "spec.md").write_text("the spec")
            asked = await w.ok(
                "folder_access_request",
                {"alias": "docs", "access": "read_only", "reason": "read it", "path": str(w.tmp / "docs")},
            )
            self.assertEqual(asked["status"], "pending")
            request_id = asked["request"]["id"]
            self.assertIn(f"grant approve {request_id}", asked["approve_with"])
            code = await w.refused("shell_exec", {"command": "cat spec.md", "cwd": "docs"})
            self.assertEqual(code, "unknown_alias")
            code = await w.refused("folder_access_request", {"alias": "Bad", "access": "read_only", "reason": "r"})
            # Refused by the schema's pattern or by the library: either code names it.
            self.assertIn(code, {"invalid_alias", "invalid_argument"})
            # The line the agent hands over spells the change out, so it runs without a terminal.
            line = shlex.split(asked["approve_with"])
            w.cli(*line[line.index("grant"):])
            read = await w.ok("shell_exec", {"command": "cat spec.md", "cwd": "docs"})
            self.assertEqual(read["stdout"], "the spec")
            listed = await w.ok("folder_grants_list", {})
            self.assertEqual(listed["grants"][0]["alias"], "docs")
            self.assertEqual(listed["grants"][0]["env"], "WORKFLOW_FOLDER_DOCS")
            self.assertEqual(listed["requests"], [])

    async def test_revoked_through_the_cli_mid_session(self):
        async with World(self) as w:
            proj = w.tmp / "proj"
            w.cli("grant", "add", "--alias", "proj", "--path", str(proj), "--access", "read_write")
            (proj / "a.txt").write_text("one\ntwo\n")
            diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"
            patched = await w.ok("folder_patch", {"alias": "proj", "path": "a.txt", "diff": diff})
            self.assertEqual(patched["change"], "modified")
            self.assertEqual((proj / "a.txt").read_text(), "one\nTWO\n")
            code = await w.refused("folder_patch", {"alias": "proj", "path": "a.txt", "diff": diff})
            self.assertEqual(code, "patch_rejected")
            w.cli("grant", "revoke", "proj")
            back = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-TWO\n+two\n"
            code = await w.refused("folder_patch", {"alias": "proj", "path": "a.txt", "diff": back})
            self.assertEqual(code, "revoked")
            denied = await w.ok("shell_exec", {"command": f"echo x > {proj}/c.txt"})
            self.assertNotEqual(denied["exit_code"], 0)
            self.assertFalse((proj / "c.txt").exists())


if __name__ == "__main__":
    unittest.main()
