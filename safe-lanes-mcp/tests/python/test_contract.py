"""The MCP contract of safe-lanes-mcp, end to end with the official Python MCP client.

Tools and schemas, a success and a refusal per tool, argument errors, cancellation, progress,
background jobs, paging and the degraded start. Run like test_e2e.py (it uses its World).
"""

import base64
import json
import os
import shutil
import tempfile
import time
import unittest
from pathlib import Path
from typing import Any, Literal

import anyio
from jsonschema import Draft202012Validator
from mcp import MCPError, types

from test_e2e import World, sha256

# The contract the client suites share.
CONTRACT = json.loads((Path(__file__).parent.parent / "contract.json").read_text())
TOOLS = sorted(CONTRACT["tools"])
UPLOAD_TOOLS = set(CONTRACT["upload_tools"])
HINTS = ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"]

# A job call must answer at once: every one has this read timeout.
QUICK = 3.0

# The keywords of JSON Schema 2020-12 (core, applicator, unevaluated, validation, format
# annotation, content, meta-data). Anything else in a schema is an unknown keyword.
KEYWORDS = {
    "$schema", "$id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary",
    "$comment", "$defs",
    "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "prefixItems",
    "items", "contains", "properties", "patternProperties", "additionalProperties",
    "propertyNames", "unevaluatedItems", "unevaluatedProperties",
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
    "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
    "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties", "required",
    "dependentRequired",
    "format", "contentEncoding", "contentMediaType", "contentSchema",
    "title", "description", "default", "deprecated", "readOnly", "writeOnly", "examples",
}
# The formats the contract's schemas need: none. A format outside this set is an error, as in
# Ajv's strict mode with no format added.
FORMATS: set[str] = set()


def schema_problems(schema: Any, at: str = "#") -> list[str]:
    """Unknown keywords and formats anywhere in `schema`, the strict check of Ajv."""
    problems = []
    if isinstance(schema, bool):
        return problems
    if not isinstance(schema, dict):
        return [f"{at}: not a schema"]
    for key, value in schema.items():
        if key not in KEYWORDS:
            problems.append(f"{at}: unknown keyword {key!r}")
        elif key == "format" and value not in FORMATS:
            problems.append(f"{at}: unknown format {value!r}")
        elif key in ("properties", "patternProperties", "$defs", "dependentSchemas"):
            for name, sub in value.items():
                problems += schema_problems(sub, f"{at}/{key}/{name}")
        elif key in ("allOf", "anyOf", "oneOf", "prefixItems"):
            for i, sub in enumerate(value):
                problems += schema_problems(sub, f"{at}/{key}/{i}")
        elif key in ("not", "if", "then", "else", "items", "contains", "additionalProperties",
                     "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema"):
            problems += schema_problems(value, f"{at}/{key}")
    return problems


def processes_with(text: str) -> list[int]:
    """The processes (other than this one) whose command line contains `text`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if text.encode() in cmdline.replace(b"\0", b" "):
            found.append(int(entry))
    return found


async def wait_for(check, seconds: float):
    """Poll `check` (sync or async) every 0.1 s until truthy or `seconds` pass; its last value."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if hasattr(value, "__await__"):
            value = await value
        if value or time.monotonic() >= deadline:
            return value
        await anyio.sleep(0.1)


def marker() -> str:
    return f"{os.getpid() % 1000}{int.from_bytes(os.urandom(3), 'big') % 100000}"


UPLOADER = "/bin/sh -c 'cat \"$1\" > {seen}; echo done' sh {{file}}"


class Tools(unittest.IsolatedAsyncioTestCase):
    async def test_the_tools_with_and_without_an_uploader(self):
        async with World(self, ["--uploader", "true {file}"]) as w:
            names = sorted(t.name for t in (await w.session.list_tools()).tools)
            self.assertEqual(names, TOOLS)
        async with World(self) as w:
            names = sorted(t.name for t in (await w.session.list_tools()).tools)
            self.assertEqual(names, [t for t in TOOLS if t not in UPLOAD_TOOLS])

    async def test_titles_annotations_and_strict_standard_schemas(self):
        async with World(self, ["--uploader", "true {file}"]) as w:
            tools = {t.name: t for t in (await w.session.list_tools()).tools}
            for name in TOOLS:
                tool = tools.get(name)
                with self.subTest(tool=name, check="listed"):
                    self.assertIsNotNone(tool, f"{name} is not listed")
                if tool is None:
                    continue
                with self.subTest(tool=name, check="title and annotations"):
                    self.assertIsInstance(tool.title, str)
                    self.assertTrue(tool.title)
                    self.assertIsNotNone(tool.annotations)
                    hints = tool.annotations.model_dump(by_alias=True)
                    for hint in HINTS:
                        self.assertIsInstance(hints.get(hint), bool, f"{name}: annotations.{hint}")
                with self.subTest(tool=name, check="inputSchema"):
                    schema = tool.input_schema
                    Draft202012Validator.check_schema(schema)
                    self.assertEqual(schema.get("type"), "object")
                    self.assertIs(schema.get("additionalProperties"), False)
                    self.assertEqual(schema_problems(schema), [])
                with self.subTest(tool=name, check="outputSchema"):
                    schema = tool.output_schema
                    self.assertIsInstance(schema, dict, f"{name} has no outputSchema")
                    Draft202012Validator.check_schema(schema)
                    self.assertEqual(schema.get("type"), "object")
                    self.assertEqual(schema_problems(schema), [])


class EveryToolSucceeds(unittest.IsolatedAsyncioTestCase):
    async def test_every_tool_succeeds_and_matches_its_output_schema(self):
        # The uploader copies what it gets here, outside the world (which is made at start).
        outbox = Path(tempfile.mkdtemp())
        seen = outbox / "seen"
        try:
            async with World(self, ["--uploader", UPLOADER.format(seen=seen)]) as w:
                await self.every_tool(w, seen)
                tools = {t.name: t for t in (await w.session.list_tools()).tools}
                for name in TOOLS:
                    with self.subTest(tool=name, check="every success matches the outputSchema"):
                        results = w.successes.get(name, [])
                        self.assertTrue(results, f"no successful {name} call was recorded")
                        self.assertIn(name, tools, f"{name} is not listed")
                        schema = tools[name].output_schema
                        self.assertIsInstance(schema, dict, f"{name} has no outputSchema")
                        validator = Draft202012Validator(schema)
                        for result in results:
                            errors = [e.message for e in validator.iter_errors(result)]
                            self.assertEqual(errors, [], f"{name}: {result}")
        finally:
            shutil.rmtree(outbox, ignore_errors=True)

    async def every_tool(self, w, seen):
        proj = w.tmp / "proj"
        w.grant("proj", proj, "read_write")
        with self.subTest(tool="download_save"):
            saved = await w.ok("download_save", {"filename": "../../.bashrc", "text": "echo hi"})
            self.assertEqual(saved["name"], "bashrc")
            self.assertEqual(saved["bytes"], 7)
            self.assertEqual(saved["sha256"], sha256(b"echo hi"))
            self.assertEqual(Path(saved["path"]).parent, w.root / ".downloads")
            data = bytes([0, 1, 2, 254, 255])
            binary = await w.ok("download_save", {"filename": "b.bin", "base64": base64.b64encode(data).decode()})
            self.assertEqual((binary["bytes"], binary["sha256"]), (5, sha256(data)))
            self.assertEqual(Path(binary["path"]).read_bytes(), data)
        with self.subTest(tool="downloads_list"):
            listed = await w.ok("downloads_list", {})
            self.assertEqual(sorted(f["name"] for f in listed["files"]), ["b.bin", "bashrc"])
            entry = next(f for f in listed["files"] if f["name"] == "bashrc")
            self.assertEqual((entry["path"], entry["bytes"]), (saved["path"], 7))
            self.assertIsInstance(entry["modified"], str)
            self.assertNotIn("next_cursor", listed)
        with self.subTest(tool="upload_resolve"):
            resolved = await w.ok("upload_resolve", {"path": saved["path"]})
            self.assertEqual(resolved, {
                "path": saved["path"], "root": str(w.root / ".downloads"), "bytes": 7, "sha256": saved["sha256"],
            })
        with self.subTest(tool="upload_file"):
            sent = await w.ok("upload_file", {"path": saved["path"]})
            self.assertEqual(sent["source"], {"path": saved["path"], "bytes": 7, "sha256": saved["sha256"]})
            self.assertEqual((sent["exit_code"], sent["stdout"], sent["stderr"]), (0, "done\n", ""))
            self.assertEqual(seen.read_text(), "echo hi")
        with self.subTest(tool="upload_content"):
            sent = await w.ok("upload_content", {"filename": "n.md", "text": "# hi"})
            self.assertEqual(sent["source"], {"path": None, "bytes": 4, "sha256": sha256(b"# hi")})
            self.assertEqual((sent["exit_code"], sent["stdout"]), (0, "done\n"))
            self.assertEqual(seen.read_text(), "# hi")
            self.assertEqual(list((w.root / ".uploads").iterdir()), [])
        with self.subTest(tool="folder_grants_list"):
            listed = await w.ok("folder_grants_list", {})
            grant_id = listed["grants"][0]["id"]
            self.assertRegex(grant_id, r"^folder_[0-9a-f]{16}$")
            # The secrets a folder hides: the library's list (ADR 0031).
            hidden = listed["grants"][0].pop("hidden")
            self.assertIn(".env", hidden)
            self.assertIn(".ssh/", hidden)
            self.assertEqual(listed, {
                "grants": [{
                    "alias": "proj", "id": grant_id, "path": str(proj.resolve()), "access": "read_write",
                    "env": "WORKFLOW_FOLDER_PROJ", "available": True, "unavailable": None,
                }],
                "requests": [],
            })
        with self.subTest(tool="folder_access_request"):
            docs = w.tmp / "docs"
            asked = await w.ok("folder_access_request", {
                "alias": "docs", "access": "read_only", "reason": "read the spec", "path": str(docs),
            })
            self.assertEqual(asked["status"], "pending")
            request = asked["request"]
            self.assertTrue(request["id"].startswith("req_"))
            self.assertEqual(
                (request["alias"], request["access"], request["reason"], request["path"]),
                ("docs", "read_only", "read the spec", str(docs)),
            )
            self.assertIsInstance(request["requested_at"], str)
            self.assertIn(f"grant approve {request['id']}", asked["approve_with"])
        with self.subTest(tool="folder_patch"):
            create = "--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n"
            modify = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"
            delete = "--- a/notes.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-one\n-TWO\n"
            created = await w.ok("folder_patch", {"alias": "proj", "path": "notes.txt", "diff": create})
            self.assertEqual(created, {
                "path": str(proj.resolve() / "notes.txt"), "change": "created", "hunks": 1, "bytes": 8,
                "held": False,
            })
            modified = await w.ok("folder_patch", {"alias": "proj", "path": "notes.txt", "diff": modify})
            self.assertEqual((modified["change"], modified["hunks"]), ("modified", 1))
            self.assertEqual((proj / "notes.txt").read_text(), "one\nTWO\n")
            deleted = await w.ok("folder_patch", {"alias": "proj", "path": "notes.txt", "diff": delete})
            self.assertEqual(deleted["change"], "deleted")
            self.assertFalse((proj / "notes.txt").exists())
        with self.subTest(tool="shell_exec"):
            (proj / "in.txt").write_text("lane\n")
            done = await w.ok("shell_exec", {
                "command": 'cat in.txt; echo oops >&2; echo "$WORKFLOW_FOLDER_PROJ"; exit 4',
                "cwd": "proj", "timeout_s": 30,
            })
            self.assertEqual(done["status"], "finished")
            self.assertIsNone(done.get("job_id"))
            self.assertIsInstance(done["elapsed_s"], (int, float))
            self.assertEqual(done["exit_code"], 4)
            self.assertIsNone(done["signal"])
            self.assertEqual(done["stdout"], f"lane\n{proj.resolve()}\n")
            self.assertEqual(done["stderr"], "oops\n")
            self.assertEqual((done["timed_out"], done["truncated"], done["stopped"]), (False, False, None))
            # It wrote nothing: nothing published, nothing held.
            self.assertEqual(done["changes"], {"published": 0, "held": [], "set": None})
        with self.subTest(tool="shell_job_status"):
            job = await w.ok("shell_exec", {"command": "echo one; sleep 1; echo two", "background": True},
                             read_timeout_seconds=QUICK)
            self.assertEqual(job["status"], "running")
            self.assertIsInstance(job["job_id"], str)
            self.assertIsNone(job["exit_code"])
            stdout = job["stdout"]

            async def poll():
                nonlocal stdout
                polled = await w.ok("shell_job_status", {"job_id": job["job_id"], "wait_s": 1},
                                    read_timeout_seconds=QUICK)
                self.assertEqual(polled["job_id"], job["job_id"])
                stdout += polled["stdout"]
                return polled if polled["status"] == "finished" else None

            last = await wait_for(poll, 10)
            self.assertIsNotNone(last, "the job did not finish")
            self.assertEqual(last["exit_code"], 0)
            self.assertEqual(stdout, "one\ntwo\n")
            self.assertEqual(await w.refused("shell_job_status", {"job_id": job["job_id"]}), "not_found")
        with self.subTest(tool="shell_job_stop"):
            job = await w.ok("shell_exec", {"command": "sleep 30", "background": True}, read_timeout_seconds=QUICK)
            stopped = await w.ok("shell_job_stop", {"job_id": job["job_id"]}, read_timeout_seconds=QUICK)
            self.assertEqual((stopped["status"], stopped["job_id"]), ("finished", job["job_id"]))
            self.assertIsInstance(stopped["stopped"], str)
            self.assertTrue(stopped["stopped"])


class Refusals(unittest.IsolatedAsyncioTestCase):
    async def test_at_least_one_refusal_per_tool_as_a_result_with_the_code(self):
        outbox = Path(tempfile.mkdtemp())
        try:
            uploader = UPLOADER.format(seen=outbox / "seen")
            async with World(self, ["--uploader", uploader, "--max-bytes", "1000"]) as w:
                await self.refusals(w, outbox / "seen")
        finally:
            shutil.rmtree(outbox, ignore_errors=True)

    async def refusals(self, w, seen):
        proj, docs, share, outside = (w.tmp / d for d in ["proj", "docs", "share", "outside"])
        w.grant("proj", proj, "read_write")
        w.grant("docs", docs, "read_only")
        (w.root / ".upload-roots").write_text(f"{share}\n")

        async def expect(code, tool, args):
            self.assertEqual(await w.refused(tool, args), code, f"{tool} {args}")

        with self.subTest(tool="download_save"):
            await expect("too_large", "download_save", {"filename": "big", "text": "x" * 1001})
            self.assertEqual(list((w.root / ".downloads").iterdir()), [])
        with self.subTest(tool="downloads_list"):
            await expect("invalid_argument", "downloads_list", {"limit": 0})
        with self.subTest(tool="upload_resolve"):
            (outside / "key").write_text("KEY")
            (w.root / "token").write_text("TOKEN")
            (share / "sub").mkdir()
            (share / "one").write_text("1")
            os.link(share / "one", share / "two")
            for path, code in [
                ("relative/file", "relative_path"),
                ("/tmp/a\x00b", "nul_byte"),
                (str(share / "missing"), "not_found"),
                (str(outside / "key"), "outside_allowlist"),
                (str(w.root / "token"), "state_root"),
                (str(share / "sub"), "not_regular_file"),
                (str(share / "one"), "hardlinked"),
            ]:
                await expect(code, "upload_resolve", {"path": path})
        with self.subTest(tool="upload_file"):
            await expect("outside_allowlist", "upload_file", {"path": "/etc/passwd"})
            (share / "big").write_text("x" * 1001)
            await expect("too_large", "upload_file", {"path": str(share / "big")})
            self.assertFalse(seen.exists(), "the uploader never ran")
        with self.subTest(tool="upload_content"):
            await expect("too_large", "upload_content", {"filename": "big", "text": "x" * 1001})
            self.assertFalse(seen.exists(), "the uploader never ran")
        with self.subTest(tool="folder_grants_list"):
            await expect("invalid_argument", "folder_grants_list", {"alias": "proj"})
        with self.subTest(tool="folder_access_request"):
            await expect("relative_path", "folder_access_request",
                         {"alias": "other", "access": "read_only", "reason": "r", "path": "relative/dir"})
            code, message = await w.refusal("folder_access_request",
                                            {"alias": "Bad", "access": "read_only", "reason": "r"})
            # The schema's pattern and the library both reject the alias; either code names it.
            self.assertIn(code, {"invalid_alias", "invalid_argument"})
            self.assertRegex(message, "alias|Bad")
        with self.subTest(tool="folder_patch"):
            (proj / "a.txt").write_text("one\ntwo\n")
            (docs / "a.txt").write_text("one\ntwo\n")
            diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"
            wrong = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-three\n+THREE\n"
            await expect("unknown_alias", "folder_patch", {"alias": "nope", "path": "a.txt", "diff": diff})
            await expect("read_only", "folder_patch", {"alias": "docs", "path": "a.txt", "diff": diff})
            await expect("traversal", "folder_patch", {"alias": "proj", "path": "../docs/a.txt", "diff": diff})
            await expect("absolute_path", "folder_patch",
                         {"alias": "proj", "path": str(proj / "a.txt"), "diff": diff})
            await expect("patch_rejected", "folder_patch", {"alias": "proj", "path": "a.txt", "diff": wrong})
            self.assertEqual((proj / "a.txt").read_text(), "one\ntwo\n")
            self.assertEqual((docs / "a.txt").read_text(), "one\ntwo\n")
        with self.subTest(tool="shell_exec"):
            await expect("unknown_alias", "shell_exec", {"command": "ls", "cwd": "nope"})
            w.grant("gone", share, "read_only")
            w.cli("grant", "revoke", "gone", "--reason", "test")
            await expect("revoked", "shell_exec", {"command": "ls", "cwd": "gone"})
        with self.subTest(tool="shell_job_status"):
            await expect("not_found", "shell_job_status", {"job_id": "job_does_not_exist"})
        with self.subTest(tool="shell_job_stop"):
            await expect("not_found", "shell_job_stop", {"job_id": "job_does_not_exist"})

    async def test_a_failing_uploader_is_an_io_refusal(self):
        async with World(self, ["--uploader", "/bin/sh -c 'echo no way >&2; exit 7' sh {file}"]) as w:
            code, message = await w.refusal("upload_content", {"filename": "n.md", "text": "# hi"})
            self.assertEqual(code, "io")
            self.assertIn("no way", message)
            uploads = w.root / ".uploads"
            self.assertEqual(list(uploads.iterdir()) if uploads.exists() else [], [], "the staged copy is erased")


class ArgumentErrors(unittest.IsolatedAsyncioTestCase):
    CASES = [
        ("an unknown field", "shell_exec", {"command": "true", "timeout": 1}, "timeout"),
        ("an unknown field, tool without arguments", "folder_grants_list", {"verbose": True}, "verbose"),
        ("a wrong type", "download_save", {"filename": 42, "text": "x"}, "filename"),
        ("a wrong type", "shell_exec", {"command": ["ls"]}, "command"),
        ("a missing field", "upload_resolve", {}, "path"),
        ("a missing field", "folder_patch", {"alias": "proj", "path": "a.txt"}, "diff"),
        ("text and base64 together", "download_save", {"filename": "a", "text": "x", "base64": "eA=="}, "base64"),
        ("neither text nor base64", "download_save", {"filename": "a"}, "base64"),
        ("text and base64 together", "upload_content", {"filename": "a", "text": "x", "base64": "eA=="}, "base64"),
        ("invalid base64", "download_save", {"filename": "a", "base64": "not base64!"}, "base64"),
        ("invalid base64", "upload_content", {"filename": "a", "base64": "not base64!"}, "base64"),
        ('access "rw"', "folder_access_request", {"alias": "docs", "access": "rw", "reason": "r"}, "access"),
        ("timeout_s -1", "shell_exec", {"command": "true", "timeout_s": -1}, "timeout_s"),
        ("timeout_s 0", "shell_exec", {"command": "true", "timeout_s": 0}, "timeout_s"),
        ("timeout_s 601", "shell_exec", {"command": "true", "timeout_s": 601}, "timeout_s"),
        ("timeout_s 1.5", "shell_exec", {"command": "true", "timeout_s": 1.5}, "timeout_s"),
        ('background "yes"', "shell_exec", {"command": "true", "background": "yes"}, "background"),
        ("limit 0", "downloads_list", {"limit": 0}, "limit"),
        ("limit 1001", "downloads_list", {"limit": 1001}, "limit"),
        ("wait_s 31", "shell_job_status", {"job_id": "job_x", "wait_s": 31}, "wait_s"),
        ("a missing job_id", "shell_job_stop", {}, "job_id"),
    ]

    async def test_bad_arguments_are_invalid_argument_results_naming_the_field(self):
        outbox = Path(tempfile.mkdtemp())
        try:
            async with World(self, ["--uploader", UPLOADER.format(seen=outbox / "seen")]) as w:
                w.grant("proj", w.tmp / "proj", "read_write")
                for what, tool, args, field in self.CASES:
                    with self.subTest(tool=tool, case=what):
                        code, message = await w.refusal(tool, args)
                        self.assertEqual(code, "invalid_argument", message)
                        self.assertIn(field, message)
                    # The server keeps serving.
                    await w.ok("downloads_list", {})
                self.assertEqual(list((w.root / ".downloads").iterdir()), [])
                self.assertFalse((outbox / "seen").exists())
        finally:
            shutil.rmtree(outbox, ignore_errors=True)


class NopeRequest(types.Request[types.RequestParams | None, Literal["safe-lanes/nope"]]):
    method: Literal["safe-lanes/nope"] = "safe-lanes/nope"
    params: types.RequestParams | None = None


class JsonRpcErrors(unittest.IsolatedAsyncioTestCase):
    async def test_only_outside_tool_calls(self):
        async with World(self) as w:
            with self.assertRaises(MCPError) as raised:
                await w.session.call_tool("read_file", {"path": "/etc/passwd"})
            self.assertEqual(raised.exception.code, -32602)
            with self.assertRaises(MCPError) as raised:
                await w.session.send_request(NopeRequest(), types.EmptyResult)
            self.assertEqual(raised.exception.code, -32601)
            await w.ok("downloads_list", {})


class Degrade(unittest.IsolatedAsyncioTestCase):
    async def test_an_invalid_manifest_at_start(self):
        async with World(self, ["--uploader", "true {file}"], manifest="{ not json") as w:
            saved = await w.ok("download_save", {"filename": "a.txt", "text": "lane"})
            self.assertEqual(Path(saved["path"]).read_text(), "lane")
            listed = await w.ok("downloads_list", {})
            self.assertEqual([f["name"] for f in listed["files"]], ["a.txt"])
            await w.ok("upload_resolve", {"path": saved["path"]})
            await w.ok("upload_file", {"path": saved["path"]})
            await w.ok("upload_content", {"filename": "b.txt", "text": "more"})
            for tool, args in [
                ("folder_grants_list", {}),
                ("folder_access_request", {"alias": "docs", "access": "read_only", "reason": "r"}),
                ("folder_patch", {"alias": "proj", "path": "a.txt",
                                  "diff": "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+x\n"}),
                ("shell_exec", {"command": "true", "cwd": "proj"}),
            ]:
                self.assertEqual(await w.refused(tool, args), "invalid_manifest", tool)
            self.assertEqual((w.root / "workflow.json").read_text(), "{ not json", "left untouched")


class Cancellation(unittest.IsolatedAsyncioTestCase):
    async def test_a_cancelled_shell_exec_stops_its_process_group_and_writes_nothing_after(self):
        async with World(self) as w:
            proj = w.tmp / "proj"
            w.grant("proj", proj, "read_write")
            # Direct, so that a write of the command's shows in the folder while it runs (a
            # layered grant would publish it only when the command ends): the test watches
            # the folder from outside for a write after the cancellation.
            w.cli("grant", "set-access", "proj", "read_write", "--direct", "--reason", "test")
            mark = marker()
            # Without a cancellation the file appears after 3 s and the shell lives 30 s more.
            command = f'sleep 3; touch "$WORKFLOW_FOLDER_PROJ/late"; sleep 30.{mark}'
            started = time.monotonic()
            # Leaving the cancel scope cancels the call: the client sends notifications/cancelled.
            with anyio.move_on_after(1.0) as scope:
                await w.session.call_tool("shell_exec", {"command": command, "cwd": "proj"})
            self.assertTrue(scope.cancelled_caught, "the call ended by itself")
            self.assertTrue(processes_with(mark), "the command was not running at the cancel")
            calls = [m for m in w.sent if m.get("method") == "tools/call"]

            def cancels():
                return [m for m in w.sent if m.get("method") == "notifications/cancelled"]

            # The relay records a message once it passed it on: give it a moment.
            self.assertTrue(await wait_for(cancels, 2), "the client sent no notifications/cancelled")
            self.assertEqual(len(cancels()), 1)
            self.assertEqual(cancels()[0]["params"]["requestId"], calls[-1]["id"])

            gone = await wait_for(lambda: not processes_with(mark), 5)
            self.assertTrue(gone, f"still running after the cancel: {processes_with(mark)}")
            await anyio.sleep(max(0.0, 5.0 - (time.monotonic() - started)))
            self.assertFalse((proj / "late").exists(), "the command wrote after its cancellation")
            answers = [m for m in w.received if m.get("id") == calls[-1]["id"]]
            self.assertEqual(answers, [], "the server answered the cancelled request")
            after = await w.ok("shell_exec", {"command": "echo still here"}, read_timeout_seconds=QUICK)
            self.assertEqual(after["stdout"], "still here\n")


class ChangeSets(unittest.IsolatedAsyncioTestCase):
    async def test_held_changes_reach_the_client_as_the_contract_says(self):
        async with World(self) as w:
            proj = w.tmp / "proj"
            (proj / ".claude").mkdir()
            w.grant("proj", proj, "read_write")
            schemas = {t.name: t.output_schema for t in (await w.session.list_tools()).tools}

            def valid(tool, result):
                errors = [e.message for e in Draft202012Validator(schemas[tool]).iter_errors(result)]
                self.assertEqual(errors, [], f"{tool}: {result}")

            done = await w.ok("shell_exec", {
                "command": "echo '{\"mcpServers\": {}}' > .mcp.json && echo fine > notes.txt",
                "cwd": "proj", "timeout_s": 30,
            })
            valid("shell_exec", done)
            self.assertEqual(done["exit_code"], 0, done)
            changes = done["changes"]
            self.assertEqual(changes["published"], 1, changes)
            self.assertEqual(changes["held"], [{"path": ".mcp.json", "why": "agent_config", "grant": "proj"}])
            self.assertRegex(changes["set"], r"^set_[0-9a-f]{16}$")
            self.assertIn(changes["set"], changes["note"])
            self.assertFalse((proj / ".mcp.json").exists(), "a held change reached the folder")
            self.assertEqual((proj / "notes.txt").read_text(), "fine\n")

            settings = "--- /dev/null\n+++ b/.claude/settings.json\n@@ -0,0 +1 @@\n+{}\n"
            patched = await w.ok("folder_patch", {"alias": "proj", "path": ".claude/settings.json", "diff": settings})
            valid("folder_patch", patched)
            self.assertRegex(patched.get("set", ""), r"^set_[0-9a-f]{16}$")
            self.assertEqual(patched, {
                "path": str(proj.resolve() / ".claude" / "settings.json"), "change": "created", "hunks": 1,
                "bytes": 3, "held": True, "set": patched["set"], "why": "agent_config",
            })
            self.assertEqual(list((proj / ".claude").iterdir()), [], "a held patch reached the folder")
            # The human's side lists both sets, as the results named them.
            listed = {s["id"]: [(h["path"], h["why"]) for h in s["held"]] for s in w.cli("changes", "list")["sets"]}
            self.assertEqual(listed, {
                changes["set"]: [(".mcp.json", "agent_config")],
                patched["set"]: [(".claude/settings.json", "agent_config")],
            })


class Progress(unittest.IsolatedAsyncioTestCase):
    async def test_a_long_foreground_shell_exec_reports_progress(self):
        async with World(self) as w:
            seen = []

            async def on_progress(progress, total, message):
                seen.append((progress, total, message))

            done = await w.ok("shell_exec", {"command": "echo begun; sleep 7; echo done"},
                              progress_callback=on_progress, read_timeout_seconds=30)
            self.assertEqual(done["stdout"], "begun\ndone\n")
            self.assertGreaterEqual(len(seen), 1, "no progress notification arrived")
            self.assertEqual(done["status"], "finished")
            for progress, _total, message in seen:
                self.assertGreater(progress, 0)
                self.assertLessEqual(progress, done["elapsed_s"] + 1)
                self.assertIsInstance(message, str)
            self.assertEqual([p for p, _, _ in seen], sorted({p for p, _, _ in seen}), "not increasing")
            token = next(m for m in w.sent if m.get("method") == "tools/call")["params"]["_meta"]["progressToken"]
            notes = [m for m in w.received if m.get("method") == "notifications/progress"]
            self.assertTrue(all(m["params"]["progressToken"] == token for m in notes), notes)


class BackgroundJobs(unittest.IsolatedAsyncioTestCase):
    async def test_a_job_outlives_its_request_timeout_and_polls_return_new_output(self):
        async with World(self) as w:
            started = time.monotonic()
            job = await w.ok("shell_exec", {
                "command": "echo start; sleep 4; echo middle; sleep 4; echo end >&2; echo end; exit 3",
                "background": True,
            }, read_timeout_seconds=QUICK)
            self.assertEqual(job["status"], "running")
            self.assertIsInstance(job["job_id"], str)
            self.assertIsNone(job["exit_code"])
            stdout, stderr, polls, last = job["stdout"], job["stderr"], 0, None
            while time.monotonic() - started < 30:
                last = await w.ok("shell_job_status", {"job_id": job["job_id"], "wait_s": 2},
                                  read_timeout_seconds=QUICK)
                polls += 1
                self.assertEqual(last["job_id"], job["job_id"])
                stdout += last["stdout"]
                stderr += last["stderr"]
                if last["status"] == "finished":
                    break
                self.assertEqual(last["status"], "running")
                self.assertIsNone(last["exit_code"])
            self.assertEqual(last["status"], "finished", "the job never finished")
            self.assertGreater(time.monotonic() - started, QUICK, "the job outlived one request timeout")
            self.assertGreaterEqual(polls, 2)
            self.assertEqual((last["exit_code"], last["signal"], last["timed_out"]), (3, None, False))
            self.assertEqual(stdout, "start\nmiddle\nend\n")
            self.assertEqual(stderr, "end\n")
            self.assertGreaterEqual(last["elapsed_s"], 7)
            self.assertEqual(await w.refused("shell_job_status", {"job_id": job["job_id"]}), "not_found")

    async def test_shell_job_stop_ends_a_job_and_its_processes(self):
        async with World(self) as w:
            mark = marker()
            keep = await w.ok("shell_exec", {"command": "sleep 1; echo kept", "background": True},
                              read_timeout_seconds=QUICK)
            job = await w.ok("shell_exec", {"command": f"sleep 30.{mark}", "background": True},
                             read_timeout_seconds=QUICK)
            self.assertTrue(await wait_for(lambda: processes_with(mark), 3), "the job never started")
            stopped = await w.ok("shell_job_stop", {"job_id": job["job_id"]}, read_timeout_seconds=QUICK)
            self.assertEqual((stopped["status"], stopped["job_id"]), ("finished", job["job_id"]))
            self.assertIsInstance(stopped["stopped"], str)
            self.assertTrue(stopped["stopped"])
            self.assertTrue(await wait_for(lambda: not processes_with(mark), 5), "the stopped job still runs")
            # Afterwards the job is either forgotten or reported finished, never running.
            after = await w.session.call_tool("shell_job_status", {"job_id": job["job_id"]},
                                              read_timeout_seconds=QUICK)
            if after.is_error:
                self.assertEqual((after.meta or {}).get("safe-lanes/code"), "not_found", after)
            else:
                self.assertEqual(after.structured_content["status"], "finished")
            other = await w.ok("shell_job_status", {"job_id": keep["job_id"], "wait_s": 2},
                               read_timeout_seconds=QUICK)
            self.assertEqual((other["status"], other["exit_code"]), ("finished", 0))
            self.assertEqual(keep["stdout"] + other["stdout"], "kept\n")

    async def test_at_most_eight_jobs_at_once(self):
        async with World(self) as w:
            mark = marker()
            jobs = []
            for _ in range(8):
                job = await w.ok("shell_exec", {"command": f"sleep 30.{mark}", "background": True},
                                 read_timeout_seconds=QUICK)
                self.assertEqual(job["status"], "running")
                jobs.append(job["job_id"])
            self.assertEqual(len(set(jobs)), 8)
            code = await w.refused("shell_exec", {"command": "true", "background": True},
                                   read_timeout_seconds=QUICK)
            self.assertEqual(code, "too_many_jobs")
            fg = await w.ok("shell_exec", {"command": "echo fg"}, read_timeout_seconds=QUICK)
            self.assertEqual(fg["stdout"], "fg\n")
            await w.ok("shell_job_stop", {"job_id": jobs.pop()}, read_timeout_seconds=QUICK)
            ninth = await w.ok("shell_exec", {"command": f"sleep 30.{mark}", "background": True},
                               read_timeout_seconds=QUICK)
            self.assertEqual(ninth["status"], "running")
            jobs.append(ninth["job_id"])
            for job_id in jobs:
                await w.ok("shell_job_stop", {"job_id": job_id}, read_timeout_seconds=QUICK)
            self.assertTrue(await wait_for(lambda: not processes_with(mark), 5), "stopped jobs still run")

    async def test_a_job_is_stopped_when_its_grant_is_revoked(self):
        async with World(self) as w:
            w.grant("proj", w.tmp / "proj", "read_write")
            mark = marker()
            job = await w.ok("shell_exec", {"command": f"sleep 30.{mark}", "cwd": "proj", "background": True},
                             read_timeout_seconds=QUICK)
            self.assertTrue(await wait_for(lambda: processes_with(mark), 3), "the job never started")
            w.cli("grant", "revoke", "proj", "--reason", "test")

            async def finished():
                polled = await w.ok("shell_job_status", {"job_id": job["job_id"], "wait_s": 1},
                                    read_timeout_seconds=QUICK)
                return polled if polled["status"] == "finished" else None

            last = await wait_for(finished, 8)
            self.assertIsNotNone(last, "the job was not stopped")
            self.assertIsInstance(last["stopped"], str)
            self.assertTrue(last["stopped"])
            self.assertEqual(processes_with(mark), [])

    async def test_jobs_are_stopped_when_the_server_exits(self):
        mark = marker()
        async with World(self) as w:
            await w.ok("shell_exec", {"command": f"sleep 30.{mark}", "background": True},
                       read_timeout_seconds=QUICK)
            self.assertTrue(await wait_for(lambda: processes_with(mark), 3), "the job never started")
        self.assertTrue(await wait_for(lambda: not processes_with(mark), 5), "the job outlived the server")


class Paging(unittest.IsolatedAsyncioTestCase):
    async def test_downloads_list_pages_with_limit_and_next_cursor(self):
        async with World(self) as w:
            names = ["a.txt", "b.txt", "c.txt", "d.txt", "e.txt"]
            for name in names:
                await w.ok("download_save", {"filename": name, "text": name})
            everything = await w.ok("downloads_list", {})
            self.assertEqual(sorted(f["name"] for f in everything["files"]), names)
            self.assertNotIn("next_cursor", everything)
            pages, cursor = [], None
            while True:
                args = {"limit": 2} if cursor is None else {"limit": 2, "cursor": cursor}
                page = await w.ok("downloads_list", args)
                pages.append([f["name"] for f in page["files"]])
                self.assertLessEqual(len(page["files"]), 2)
                if "next_cursor" not in page:
                    break
                self.assertIsInstance(page["next_cursor"], str)
                self.assertLess(len(pages), 5, "paging does not end")
                cursor = page["next_cursor"]
            self.assertEqual([len(p) for p in pages], [2, 2, 1])
            self.assertEqual(sorted(n for p in pages for n in p), names, "every file exactly once")
            exact = await w.ok("downloads_list", {"limit": 5})
            self.assertEqual(len(exact["files"]), 5)
            self.assertNotIn("next_cursor", exact)
            self.assertEqual(len((await w.ok("downloads_list", {"limit": 1000}))["files"]), 5)
            self.assertEqual(await w.refused("downloads_list", {"limit": 0}), "invalid_argument")
            self.assertEqual(await w.refused("downloads_list", {"limit": 1001}), "invalid_argument")


if __name__ == "__main__":
    unittest.main()
