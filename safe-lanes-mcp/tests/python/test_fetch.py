"""download_fetch, ids and instructions through the official Python MCP client (PyPI `mcp`).

A fetch that succeeds needs a server the SSRF guard admits: the library's own suite runs one on
loopback with its test-only allowance, which no flag of the server reaches. Here: the tool is
offered only with --fetch, and no spelling of an address of this machine gets through.
"""

import json
import unittest
from pathlib import Path

from test_e2e import World

FETCH_TOOLS = json.loads((Path(__file__).parent.parent / "contract.json").read_text())["fetch_tools"]


class Fetch(unittest.IsolatedAsyncioTestCase):
    async def test_offered_only_with_fetch(self):
        async with World(self) as w:
            names = {t.name for t in (await w.session.list_tools()).tools}
            self.assertFalse(names & set(FETCH_TOOLS))
        async with World(self, ["--fetch"]) as w:
            tools = {t.name: t for t in (await w.session.list_tools()).tools}
            self.assertIn("download_fetch", tools)
            self.assertEqual(tools["download_fetch"].input_schema["required"], ["url"])
            self.assertTrue(tools["download_fetch"].annotations.open_world_hint)

    async def test_addresses_of_this_machine_are_refused_and_nothing_is_saved(self):
        async with World(self, ["--fetch", "--fetch-http"]) as w:
            for url in [
                "https://127.0.0.1/report.pdf",
                "https://[::ffff:127.0.0.1]/report.pdf",
                "https://2130706433/report.pdf",
                "https://0177.0.0.1/report.pdf",
                "https://0x7f000001/report.pdf",
                "http://169.254.169.254/latest/meta-data/iam/",
                "http://172.16.0.1/",
                "http://[::]/",
            ]:
                with self.subTest(url=url):
                    code = await w.refused("download_fetch", {"url": url, "filename": "r.pdf"})
                    self.assertEqual(code, "address_refused")
            listed = await w.ok("downloads_list", {})
            self.assertEqual(listed["files"], [])
            self.assertEqual(list((w.root / ".downloads").iterdir()), [])

    async def test_plain_http_needs_the_humans_flag(self):
        async with World(self, ["--fetch"]) as w:
            code, message = await w.refusal("download_fetch", {"url": "http://example.com/a.pdf"})
            self.assertEqual(code, "address_refused")
            self.assertIn("http", message)


class Grants(unittest.IsolatedAsyncioTestCase):
    async def test_instructions_name_the_grants_and_ids_stand_for_aliases(self):
        async with World(self) as w:
            self.assertIn("No folder is granted to you yet.", w.initialized.instructions)
            added = w.cli(
                "grant", "add", "--alias", "proj", "--path", str(w.tmp / "proj"),
                "--access", "read_write", "--reason", "the project",
            )
            async with World(self, root=w.root) as again:
                text = again.initialized.instructions
                self.assertIn(f"`proj` ({added['id']}, read_write)", text)
                self.assertIn("folder_grants_list", text)
                diff = "--- /dev/null\n+++ b/by-id.txt\n@@ -0,0 +1 @@\n+by id\n"
                await again.ok(
                    "folder_patch", {"alias": added["id"], "path": "by-id.txt", "diff": diff}
                )
                self.assertEqual((w.tmp / "proj" / "by-id.txt").read_text(), "by id\n")


if __name__ == "__main__":
    unittest.main()
