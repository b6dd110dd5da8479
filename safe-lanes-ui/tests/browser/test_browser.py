"""The approval page in a real browser: headless Chromium driven through WebDriver (Selenium,
with Debian's chromium-driver), against the real `safe-lanes ui`, with the agent's side played
by the official Python MCP client against the real `safe-lanes-mcp`.

Run by scripts/test (which installs Chromium and its driver when they are missing):
    SAFE_LANES_MCP=target/debug/safe-lanes-mcp SAFE_LANES_CLI=target/debug/safe-lanes \
        .venv/bin/python -m unittest discover -s safe-lanes-ui/tests/browser

Every test saves screenshots of what it saw under <target>/ui-screenshots/.
"""

import json
import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

SERVER = os.path.abspath(os.environ.get("SAFE_LANES_MCP", "target/debug/safe-lanes-mcp"))
CLI = os.path.abspath(os.environ.get("SAFE_LANES_CLI", "target/debug/safe-lanes"))
CHROMIUM = os.environ.get("CHROMIUM", shutil.which("chromium") or "/usr/bin/chromium")
DRIVER = os.environ.get("CHROMEDRIVER", shutil.which("chromedriver") or "/usr/bin/chromedriver")
SHOTS = Path(os.environ.get("CARGO_TARGET_DIR", "target")).resolve() / "ui-screenshots"
WAIT = 20  # seconds: how long a step may take before the test says it never happened


class Page(unittest.TestCase):
    """A state root with a home folder, `safe-lanes ui` serving it, and a signed-in browser."""

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.home = self.tmp / "home"
        for folder in ["docs", "projects/alpha", "projects/beta", "notes"]:
            (self.home / folder).mkdir(parents=True)
        self.root = self.tmp / "state"
        self.env = {"PATH": os.environ.get("PATH", ""), "HOME": str(self.home), "RUST_LOG": "error"}
        self.cli("init")
        self.server = subprocess.Popen(
            [CLI, "--root", str(self.root), "--json", "ui", "--idle", "10m"],
            stdout=subprocess.PIPE, env=self.env, text=True,
        )
        self.addCleanup(self.server.stdout.close)
        self.addCleanup(self.server.wait)
        self.addCleanup(self.server.kill)
        self.url = json.loads(self.server.stdout.readline())["url"]
        self.browser = self.start_browser()
        self.addCleanup(self.browser.quit)
        self.browser.get(self.url)
        self.wait_for(By.ID, "requests-h")
        self.shot_number = 0

    def start_browser(self):
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        profile = self.tmp / "profile"
        for argument in ["--headless=new", "--disable-gpu", "--window-size=1280,1000",
                         "--disable-dev-shm-usage", f"--user-data-dir={profile}"]:
            options.add_argument(argument)
        if os.geteuid() == 0:
            options.add_argument("--no-sandbox")  # Chromium's own sandbox refuses to run as root
        return webdriver.Chrome(options=options, service=Service(executable_path=DRIVER))

    # --- the two other sides -------------------------------------------------------------

    def cli(self, *args):
        out = subprocess.run([CLI, "--root", str(self.root), "--json", *args],
                             capture_output=True, env=self.env, check=True)
        return json.loads(out.stdout)

    def agent(self, tool, arguments):
        """One MCP tool call by the agent: its structured result."""
        async def call():
            params = StdioServerParameters(command=SERVER, args=["--root", str(self.root)], env=self.env)
            with open(os.devnull, "w") as devnull:
                async with stdio_client(params, errlog=devnull) as (read, write):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        result = await session.call_tool(tool, arguments)
                        self.assertFalse(result.is_error, f"{tool}: {result}")
                        return result.structured_content
        return anyio.run(call)

    def request(self, alias, access, reason, path=None):
        arguments = {"alias": alias, "access": access, "reason": reason}
        if path is not None:
            arguments["path"] = str(path)
        return self.agent("folder_access_request", arguments)["request"]["id"]

    # --- the browser ---------------------------------------------------------------------

    def wait_for(self, by, what, condition=EC.visibility_of_element_located):
        return WebDriverWait(self.browser, WAIT).until(condition((by, what)))

    def flash(self):
        return self.wait_for(By.ID, "flash").text

    def shot(self, step, whole=False):
        """A screenshot of the window (with `whole`, of the whole page)."""
        SHOTS.mkdir(parents=True, exist_ok=True)
        if whole:
            height = self.browser.execute_script("return document.documentElement.scrollHeight")
            self.browser.set_window_size(1280, max(600, min(int(height), 4000)))
        self.shot_number += 1
        name = f"{self.id().split('.')[-1]}-{self.shot_number:02}-{step}.png"
        self.assertTrue(self.browser.save_screenshot(str(SHOTS / name)), name)

    def grants(self):
        return {g["alias"]: g for g in self.cli("grant", "list")["grants"]}


class Approvals(Page):
    def test_an_agents_request_approved_in_the_browser_is_a_grant(self):
        docs = (self.home / "docs").resolve()
        rid = self.request("docs", "read_only", "to read the design notes", docs)
        card = self.wait_for(By.ID, rid)
        self.assertIn("new grant `docs` read_only at", card.text)
        self.assertIn("to read the design notes", card.find_element(By.CSS_SELECTOR, "blockquote").text)
        self.shot("request")
        self.browser.find_element(By.ID, f"{rid}-approve").click()
        self.assertIn("Approved", self.flash())
        self.shot("approved")
        grant = self.grants()["docs"]
        self.assertEqual((grant["path"], grant["access"]), (str(docs), "read_only"))

    def test_a_denial_with_a_reason_reaches_the_agent(self):
        rid = self.request("notes", "read_write", "to tidy up", self.home / "notes")
        self.wait_for(By.ID, f"{rid}-deny-reason").send_keys("not the notes, please")
        self.shot("deny")
        self.browser.find_element(By.ID, f"{rid}-deny").click()
        self.assertIn("Denied", self.flash())
        listed = self.agent("folder_grants_list", {})
        outcome = next(o for o in listed["outcomes"] if o["id"] == rid)
        self.assertEqual((outcome["status"], outcome["decision"]), ("denied", "not the notes, please"))
        self.assertEqual(listed["grants"], [])

    def test_a_pathless_request_is_approved_by_picking_a_folder(self):
        rid = self.request("alpha", "read_write", "to build the alpha project")
        self.wait_for(By.ID, f"{rid}-pick").click()
        here = self.wait_for(By.ID, "here")
        self.assertEqual(here.text, str(self.home.resolve()))
        folders = [a.text for a in self.browser.find_elements(By.CSS_SELECTOR, ".folders a.open")]
        self.assertEqual(folders, ["▸ docs", "▸ notes", "▸ projects"])
        self.shot("picker-home")
        self.browser.find_element(By.LINK_TEXT, "▸ projects").click()
        self.wait_for(By.XPATH, f"//code[@id='here' and text()='{self.home.resolve() / 'projects'}']")
        self.browser.find_element(By.LINK_TEXT, "▸ alpha").click()
        self.wait_for(By.XPATH, f"//code[@id='here' and text()='{self.home.resolve() / 'projects/alpha'}']")
        self.shot("picker-alpha")
        self.browser.find_element(By.ID, "choose-here").click()
        chosen = self.wait_for(By.ID, f"{rid}-path")
        self.assertEqual(chosen.get_attribute("value"), str(self.home.resolve() / "projects/alpha"))
        self.shot("chosen")
        self.browser.find_element(By.ID, f"{rid}-approve").click()
        self.assertIn("Approved", self.flash())
        grant = self.grants()["alpha"]
        self.assertEqual((grant["path"], grant["access"]),
                         (str(self.home.resolve() / "projects/alpha"), "read_write"))

    def test_a_stale_pages_approve_is_refused(self):
        docs = self.home / "docs"
        rid = self.request("docs", "read_only", "only to read", docs)
        note = self.wait_for(By.ID, f"{rid}-approve-reason")
        note.send_keys("fine")  # the human is mid-way through the form …
        self.request("docs", "read_write", "actually, to write", docs)  # … when the agent re-files
        self.wait_for(By.ID, "changed")  # the page says it is out of date, and keeps the form
        self.shot("stale")
        self.browser.find_element(By.ID, f"{rid}-approve").click()
        said = self.flash()
        self.assertIn("Nothing was approved", said)
        self.assertIn("changed since the page was shown", said)
        self.shot("refused")
        self.assertEqual(self.grants(), {})
        # The new version is shown now, for what it is.
        self.assertIn("read_write", self.browser.find_element(By.CSS_SELECTOR, "article.request h2").text)


class Live(Page):
    def test_the_page_follows_the_manifest_without_a_reload(self):
        self.browser.execute_script("window.notReloaded = true")
        self.cli("grant", "add", "--alias", "docs", "--path", str(self.home / "docs"),
                 "--access", "read_only", "--reason", "test")
        row = self.wait_for(By.ID, "grant-docs")
        self.assertIn("read_only", row.text)
        rid = self.request("notes", "read_only", "from another process", self.home / "notes")
        self.wait_for(By.ID, rid)
        self.assertTrue(self.browser.execute_script("return window.notReloaded === true"))
        self.assertGreaterEqual(int(self.browser.execute_script("return document.body.dataset.updates")), 2)
        self.shot("live")


class Screens(Page):
    def test_every_page_is_labelled_keyboard_reachable_and_shown(self):
        self.cli("grant", "add", "--alias", "docs", "--path", str(self.home / "docs"),
                 "--access", "read_write", "--reason", "test")
        self.request("notes", "read_only", "to read your notes\nfor the weekly summary",
                     self.home / "notes")
        self.request("projects", "read_write", "to run the tests")
        for page, ready in [("/", "requests-h"), ("/pick?access=read_only", "here"),
                            ("/changelog", "main"), ("/audit", "chain"), ("/uploads", "main")]:
            self.browser.get(self.url.split("/session")[0] + page)
            self.wait_for(By.ID, ready)
            unlabelled = self.browser.execute_script("""
                return [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
                  .filter(e => e.labels.length === 0 && !e.closest('label')
                          && !e.getAttribute('aria-label'))
                  .map(e => e.outerHTML);""")
            self.assertEqual(unlabelled, [], page)
            self.shot(page.strip("/").split("?")[0] or "overview", whole=True)
        # From the top, Tab reaches the skip link first, with a visible focus ring.
        self.browser.set_window_size(1280, 1000)
        self.browser.get(self.url.split("/session")[0] + "/")
        self.wait_for(By.ID, "requests-h")
        body = self.browser.find_element(By.TAG_NAME, "body")
        body.send_keys(Keys.TAB)
        focused = self.browser.switch_to.active_element
        self.assertEqual(focused.text, "Skip to content")
        outline = self.browser.execute_script(
            "return getComputedStyle(document.activeElement).outlineStyle")
        self.assertNotEqual(outline, "none")
        # Every action is reachable by keyboard alone: Tab until the first Approve button.
        for _ in range(60):
            focused = self.browser.switch_to.active_element
            if focused.text == "Approve":
                break
            focused.send_keys(Keys.TAB)
        self.assertEqual(self.browser.switch_to.active_element.text, "Approve")


if __name__ == "__main__":
    unittest.main()
