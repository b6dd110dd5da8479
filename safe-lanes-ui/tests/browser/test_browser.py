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
import threading
import time
import unittest
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
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

    def press(self, button):
        """Click a form's button, and wait for the page it was on to be replaced by the answer
        (every form of the page posts and gets a new page), so what is read next is the answer's."""
        page = self.browser.find_element(By.TAG_NAME, "html")
        button.click()

        def replaced(_):
            try:
                page.is_enabled()
                return False
            except StaleElementReferenceException:
                return True
            except WebDriverException as e:
                # Asked in the middle of the navigation, Chromium may answer that the node
                # left its document rather than that it is stale: it was replaced all the same.
                if "does not belong to the document" in str(e):
                    return True
                raise

        WebDriverWait(self.browser, WAIT).until(replaced)

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
    def confirm(self, rid, note):
        """The review step: the note (required), then the confirmation."""
        self.wait_for(By.ID, f"{rid}-approve-reason").send_keys(note)
        self.press(self.browser.find_element(By.ID, f"{rid}-confirm"))

    def test_an_agents_request_approved_in_the_browser_is_a_grant(self):
        docs = (self.home / "docs").resolve()
        rid = self.request("docs", "read_only", "to read the design notes", docs)
        card = self.wait_for(By.ID, rid)
        self.assertIn("new grant docs read_only at", card.text)
        self.assertIn("to read the design notes", card.find_element(By.CSS_SELECTOR, "blockquote").text)
        self.shot("request")
        # Step one: the review, which changes nothing.
        self.browser.find_element(By.ID, f"{rid}-approve").click()
        self.assertIn("no grant → read_only", self.wait_for(By.ID, "review-change").text)
        self.assertEqual(self.wait_for(By.ID, "review-path").text, str(docs))
        self.assertIn("nothing in it can be created, changed", self.wait_for(By.ID, "review-allows").text)
        self.assertIn("0 files and folders", self.wait_for(By.ID, "review-size").text)
        self.assertEqual(self.grants(), {})
        # Without a note the browser does not send it.
        self.browser.find_element(By.ID, f"{rid}-confirm").click()
        self.assertEqual(self.browser.find_elements(By.ID, "flash"), [])
        self.assertEqual(self.grants(), {})
        self.shot("review", whole=True)
        self.confirm(rid, "the notes are public anyway")
        self.assertIn("Approved", self.flash())
        self.shot("approved")
        grant = self.grants()["docs"]
        self.assertEqual((grant["path"], grant["access"]), (str(docs), "read_only"))
        reasons = [c["reason"] for c in self.cli("grant", "log")["changelog"]]
        self.assertEqual(reasons[-1], "the notes are public anyway")

    def test_a_denial_with_a_reason_reaches_the_agent(self):
        rid = self.request("notes", "read_write", "to tidy up", self.home / "notes")
        self.wait_for(By.ID, f"{rid}-deny-reason").send_keys("not the notes, please")
        self.shot("deny")
        self.press(self.browser.find_element(By.ID, f"{rid}-deny"))
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
        self.assertIn("may read, create, change, rename and delete", self.wait_for(By.ID, "review-allows").text)
        # A read-write folder's review says that what the human's tools act on waits for them.
        self.assertIn("git state", self.wait_for(By.ID, "review-allows").text)
        self.assertIn("waits for you", self.wait_for(By.ID, "review-allows").text)
        self.confirm(rid, "the alpha build")
        self.assertIn("Approved", self.flash())
        grant = self.grants()["alpha"]
        self.assertEqual((grant["path"], grant["access"]),
                         (str(self.home.resolve() / "projects/alpha"), "read_write"))

    def test_a_stale_pages_approve_is_refused(self):
        docs = self.home / "docs"
        rid = self.request("docs", "read_only", "only to read", docs)
        self.wait_for(By.ID, f"{rid}-approve").click()
        note = self.wait_for(By.ID, f"{rid}-approve-reason")
        note.send_keys("fine")  # the human is mid-way through the review …
        self.request("docs", "read_write", "actually, to write", docs)  # … when the agent re-files
        self.shot("stale")
        self.press(self.browser.find_element(By.ID, f"{rid}-confirm"))
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
                            ("/changelog", "main"), ("/audit", "chain"), ("/downloads", "main"),
                            ("/running", "running-h"),
                            ("/uploads", "main"), ("/changes", "held-h")]:
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
            if focused.text == "Review and approve…":
                break
            focused.send_keys(Keys.TAB)
        self.assertEqual(self.browser.switch_to.active_element.text, "Review and approve…")


if __name__ == "__main__":
    unittest.main()


class Judging(Page):
    """What the page shows before the human decides, and the views of what happened."""

    def test_warnings_are_the_librarys_and_shown_before_confirming(self):
        ssh = self.home / ".ssh"
        ssh.mkdir()
        (ssh / "id_ed25519").write_text("PRIVATE KEY")
        rid = self.request("keys", "read_only", "to check the config", ssh)
        self.wait_for(By.ID, f"{rid}-approve").click()
        warnings = self.wait_for(By.ID, "review-warnings").text
        self.assertIn("Credentials", warnings)
        self.assertIn("SSH keys", warnings)
        self.shot("credentials", whole=True)
        self.browser.find_element(By.ID, "review-back").click()
        # A look-alike name: Cyrillic letters among Latin ones, spelled out.
        lookalike = self.home / "d\u043ecs"
        lookalike.mkdir()
        rid = self.request("lookalike", "read_only", "the docs", lookalike)
        self.wait_for(By.ID, f"{rid}-approve").click()
        warnings = self.wait_for(By.ID, "review-warnings").text
        self.assertIn("look-alike", warnings)
        self.assertIn("\\u{43e}", warnings)
        self.shot("look-alike", whole=True)
        # The home folder itself.
        self.browser.find_element(By.ID, "review-back").click()
        rid = self.request("home", "read_only", "everything", self.home)
        self.wait_for(By.ID, f"{rid}-approve").click()
        self.assertIn("A home folder", self.wait_for(By.ID, "review-warnings").text)

    def test_a_request_that_cannot_be_approved_offers_no_approve_anywhere(self):
        """A request for a folder holding the home folder and the state root: its card warns
        and says why it cannot be approved, with no approve button; its review (reached by
        its address) has no form that confirms; the request stays pending, deniable."""
        everything = self.tmp.resolve()
        rid = self.request("everything", "read_only", "to look around", everything)
        self.browser.refresh()
        card = self.wait_for(By.ID, rid)
        self.assertIn("Holds the home folder", card.find_element(By.ID, f"{rid}-warnings").text)
        refused = card.find_element(By.ID, f"{rid}-refused").text
        self.assertIn("Cannot be approved as it stands", refused)
        self.assertIn("state root", refused)
        self.assertEqual(self.browser.find_elements(By.ID, f"{rid}-approve"), [])
        self.assertTrue(card.find_element(By.ID, f"{rid}-deny").is_displayed())
        # Its heading without backticks, its time local with the offset, as on every tab.
        self.assertTrue(card.find_element(By.TAG_NAME, "h2").text.startswith(
            "new grant everything read_only at"))
        self.assertRegex(card.text, r"Filed\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d\d:\d\d by")
        self.shot("cannot-approve", whole=True)
        base = self.url.split("/session")[0]
        self.browser.get(f"{base}/review?request={rid}")
        self.assertIn("state root", self.wait_for(By.ID, "review-refused").text)
        self.assertEqual(self.browser.find_elements(By.CSS_SELECTOR, "form.confirm"), [])
        self.assertEqual(self.browser.find_elements(By.ID, f"{rid}-confirm"), [])
        self.browser.find_element(By.ID, "review-back").click()
        deny = self.wait_for(By.ID, f"{rid}-deny-reason")
        deny.send_keys("not the whole disk")
        self.press(self.browser.find_element(By.ID, f"{rid}-deny"))
        self.assertEqual(self.cli("grant", "list")["requests"], [])

    def test_a_grant_is_widened_from_the_page_in_two_steps(self):
        docs = (self.home / "docs").resolve()
        self.cli("grant", "add", "--alias", "docs", "--path", str(docs), "--access", "read_only",
                 "--reason", "reading")
        self.browser.refresh()
        row = self.wait_for(By.ID, "grant-docs")
        row.find_element(By.TAG_NAME, "summary").click()
        self.wait_for(By.ID, "widen-docs").click()
        change = self.wait_for(By.ID, "review-change").text
        self.assertIn("read_only → read_write", change)
        self.assertIn("gives the agent more", change)
        self.assertEqual(self.grants()["docs"]["access"], "read_only")
        self.shot("widen", whole=True)
        self.wait_for(By.ID, "widen-docs-approve-reason").send_keys("the agent edits the docs now")
        self.press(self.browser.find_element(By.ID, "widen-docs-confirm"))
        self.assertIn("Widened", self.flash())
        self.assertEqual(self.grants()["docs"]["access"], "read_write")
        last = self.cli("grant", "log")["changelog"][-1]
        self.assertEqual((last["from"], last["access"], last["reason"]),
                         ("read_only", "read_write", "the agent edits the docs now"))

    def test_the_audit_tab_shows_what_was_done_and_refused(self):
        hostile = self.tmp / "x\x1b[31mred\nfake"
        for path in [str(hostile), "/etc/hostname"]:
            subprocess.run([CLI, "--root", str(self.root), "upload", "check", path],
                           capture_output=True, env=self.env)
        self.cli("grant", "add", "--alias", "docs", "--path", str(self.home / "docs"),
                 "--access", "read_only", "--reason", "reading")
        base = self.url.split("/session")[0]
        self.browser.get(base + "/audit")
        rows = self.wait_for(By.ID, "records").find_elements(By.CSS_SELECTOR, "tbody tr")
        self.assertEqual(rows[0].find_elements(By.TAG_NAME, "td")[3].text, "grant.add")
        refused = self.browser.find_elements(By.CSS_SELECTOR, "#records tr.refused")
        self.assertEqual(len(refused), 2)
        self.assertIn("\\u{1b}[31mred\\nfake", refused[1].text)
        self.assertIn("upload", self.wait_for(By.ID, "summary").text)
        self.shot("audit", whole=True)
        self.browser.find_element(By.ID, "only-refused").click()
        self.browser.find_element(By.ID, "filter-go").click()
        self.wait_for(By.ID, "records")
        events = [r.find_elements(By.TAG_NAME, "td")[3].text
                  for r in self.browser.find_elements(By.CSS_SELECTOR, "#records tbody tr")]
        self.assertEqual(events, ["upload.refused", "upload.refused"])

    def test_the_audit_tab_says_each_effect_in_words(self):
        """A command, a patch, a hostile save and an upload, each said in words in a column
        that fits the window; the name the agent asked for flagged on the Audit and Downloads
        tabs."""
        site = self.home / "projects/alpha"
        (site / "a.txt").write_text("hi\n")
        self.cli("grant", "add", "--alias", "alpha", "--path", str(site), "--access", "read_write",
                 "--reason", "the site")
        self.agent("shell_exec", {"command": "echo 'it''s'", "cwd": "alpha"})
        self.agent("folder_patch", {"alias": "alpha", "path": "a.txt",
                                    "diff": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-hi\n+ho\n"})
        self.agent("download_save", {"filename": "../../.bash\u202erc", "text": "x"})
        (self.root / ".upload-roots").write_text(f"{site}\n")
        subprocess.run([CLI, "--root", str(self.root), "upload", "send", str(site / "a.txt"),
                        "--", "/bin/true", "{file}"], capture_output=True, env=self.env, check=True)
        base = self.url.split("/session")[0]
        self.browser.get(base + "/audit")
        rows = self.wait_for(By.ID, "records").find_elements(By.CSS_SELECTOR, "tbody tr")
        said = {}
        for row in rows:
            cells = row.find_elements(By.TAG_NAME, "td")
            said[cells[3].text] = cells[5]
        command = r"""`/bin/sh -c 'echo '\''it'\'''\''s'\'''` in alpha"""
        self.assertIn(f"ran {command}, timeout 1 min", said["exec.start"].text)
        self.assertIn(f"{command}: exit 0 after ", said["exec.end"].text)
        self.assertIn("modified a.txt in alpha (1 hunk)", said["patch.apply"].text)
        self.assertIn("with `/bin/true`: exit 0 after", said["upload.end"].text)
        save = said["download.save"]
        self.assertIn(r"the agent asked for $'../../.bash\xe2\x80\xaerc'", save.text)
        warning = save.find_element(By.CSS_SELECTOR, ".warning")
        self.assertIn("a path separator, `..` and hidden characters", warning.text)
        width = self.browser.execute_script("return document.documentElement.clientWidth")
        for cell in said.values():
            self.assertLessEqual(cell.rect["x"] + cell.rect["width"], width,
                                 f"the words fit the window: {cell.text}")
        self.shot("audit-words", whole=True)
        self.browser.get(base + "/downloads")
        table = self.wait_for(By.ID, "downloads")
        flagged = table.find_element(By.CSS_SELECTOR, "tr.flagged")
        self.assertIn("bashrc", flagged.text)
        self.assertIn(r"$'../../.bash\xe2\x80\xaerc'", flagged.text)
        self.assertIn("a sign of an attack", flagged.find_element(By.CSS_SELECTOR, ".warning").text)
        self.shot("downloads-flagged", whole=True)

    def test_the_downloads_tab_lists_the_lane(self):
        out = subprocess.run([CLI, "--root", str(self.root), "--json", "download", "save",
                              "--name", "report.pdf"], input=b"%PDF", capture_output=True,
                             env=self.env, check=True)
        saved = json.loads(out.stdout)
        self.browser.get(self.url.split("/session")[0] + "/downloads")
        table = self.wait_for(By.ID, "downloads").text
        self.assertIn("report.pdf", table)
        self.assertIn(saved["sha256"], table)
        self.shot("downloads", whole=True)

    def test_a_download_is_previewed_and_removed_with_a_reason(self):
        png = bytes.fromhex(
            "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
            "1f15c4890000000d49444154789c6360f8cf00000301010018dd8db40000000049454e44ae426082")
        subprocess.run([CLI, "--root", str(self.root), "download", "save", "--name", "dot.png"],
                       input=png, capture_output=True, env=self.env, check=True)
        base = self.url.split("/session")[0]
        self.browser.get(base + "/downloads")
        view = self.wait_for(By.ID, "view-1")
        self.browser.get(view.get_attribute("href"))
        image = self.wait_for(By.TAG_NAME, "img")
        self.assertEqual(self.browser.execute_script("return arguments[0].naturalWidth", image), 1)
        self.browser.get(base + "/downloads")
        self.wait_for(By.ID, "remove-open-1").click()
        self.wait_for(By.ID, "remove-reason-1").send_keys("not needed any more")
        self.press(self.browser.find_element(By.ID, "remove-1"))
        self.assertIn("Removed dot.png", self.flash())
        self.wait_for(By.ID, "no-files")
        removed = json.loads(subprocess.run(
            [CLI, "--root", str(self.root), "--json", "audit", "show", "--op", "download.remove"],
            capture_output=True, env=self.env, check=True, text=True).stdout)
        self.assertEqual((removed["reason"], removed["subject"]), ("not needed any more", "dot.png"))

    def test_the_changelog_is_readable_and_paged(self):
        docs = self.home / "docs"
        self.cli("grant", "add", "--alias", "docs", "--path", str(docs), "--access", "read_only",
                 "--reason", "first line\nsecond line")
        for n in range(25):
            self.cli("grant", "set-access", "docs", "read_write", "--reason", f"write {n}")
            self.cli("grant", "set-access", "docs", "read_only", "--reason", f"read {n}")
        base = self.url.split("/session")[0]
        self.browser.get(base + "/changelog")
        self.assertEqual(self.wait_for(By.ID, "page-of").text, "page 1 of 2")
        first = self.browser.find_element(By.CSS_SELECTOR, "table.changelog tbody tr")
        cells = first.find_elements(By.TAG_NAME, "td")
        self.assertRegex(cells[0].text, r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d\d:\d\d$")
        self.assertRegex(cells[5].text, r"^\S+ \(uid:\d+\)$")
        self.browser.find_element(By.ID, "older").click()
        self.assertEqual(self.wait_for(By.ID, "page-of").text, "page 2 of 2")
        last = self.browser.find_elements(By.CSS_SELECTOR, "table.changelog tbody tr")[-1]
        reason = last.find_elements(By.TAG_NAME, "td")[6]
        self.assertEqual([p.text for p in reason.find_elements(By.TAG_NAME, "p")],
                         ["first line", "second line"])
        self.shot("changelog", whole=True)

    def test_upload_roots_are_managed_from_the_page(self):
        share = (self.tmp / "share").resolve()
        share.mkdir()
        base = self.url.split("/session")[0]
        self.browser.get(base + "/uploads")
        self.wait_for(By.ID, "allow-path").send_keys("/")
        self.browser.find_element(By.ID, "allow-reason").send_keys("everything")
        self.press(self.browser.find_element(By.ID, "allow-go"))
        said = self.flash()
        self.assertIn("Nothing was changed (invalid_argument)", said)
        self.assertIn("the whole file system", said)
        self.wait_for(By.ID, "allow-path").send_keys(str(share))
        self.browser.find_element(By.ID, "allow-reason").send_keys("the slides")
        self.press(self.browser.find_element(By.ID, "allow-go"))
        self.assertIn(f"Allowed: {share}", self.flash())
        self.assertEqual((self.root / ".upload-roots").read_text(), f"{share}\n")
        self.shot("uploads", whole=True)
        row = next(r for r in self.browser.find_elements(By.CSS_SELECTOR, "table.roots tbody tr")
                   if str(share) in r.text)
        row.find_element(By.TAG_NAME, "summary").click()
        row.find_element(By.CSS_SELECTOR, "input[name=reason]").send_keys("sent")
        self.press(row.find_element(By.CSS_SELECTOR, "button.danger"))
        self.assertIn(f"No longer allowed: {share}", self.flash())
        self.assertEqual((self.root / ".upload-roots").read_text(), "")
        events = [json.loads(l)["event"] for l in (self.root / "audit.jsonl").read_text().splitlines()]
        self.assertEqual([e for e in events if e.startswith("upload_roots.")],
                         ["upload_roots.add", "upload_roots.remove"])


class Running(Page):
    """The agent's running commands, seen and stopped by the human."""

    def test_a_background_job_is_seen_running_and_stopped_by_the_human(self):
        site = self.home / "projects/alpha"
        self.cli("grant", "add", "--alias", "alpha", "--path", str(site), "--access",
                 "read_only", "--reason", "the site")
        started, finished, report = threading.Event(), threading.Event(), {}

        async def agent():
            params = StdioServerParameters(command=SERVER, args=["--root", str(self.root)],
                                           env=self.env)
            with open(os.devnull, "w") as devnull:
                async with stdio_client(params, errlog=devnull) as (read, write):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        ran = await session.call_tool("shell_exec", {
                            "command": "echo building; echo 'step 2 of 9'; sleep 300",
                            "cwd": "alpha", "background": True})
                        job = ran.structured_content["job_id"]
                        started.set()
                        for _ in range(4 * WAIT):
                            polled = await session.call_tool(
                                "shell_job_status", {"job_id": job, "wait_s": 1})
                            if polled.structured_content["status"] == "finished":
                                report.update(polled.structured_content)
                                break
                        finished.set()

        thread = threading.Thread(target=lambda: anyio.run(agent), daemon=True)
        thread.start()
        self.addCleanup(thread.join, WAIT)
        self.assertTrue(started.wait(WAIT), "the job started")
        base = self.url.split("/session")[0]
        # Its output is kept for the human once a second: look until it shows.
        for _ in range(4 * WAIT):
            self.browser.get(base + "/running")
            shown = self.browser.find_elements(By.CSS_SELECTOR, ".job pre.stdout")
            if shown and "step 2 of 9" in shown[0].text:
                break
            time.sleep(0.25)
        card = self.wait_for(By.CSS_SELECTOR, "article.job")
        heading = card.find_element(By.CSS_SELECTOR, "h2").text
        self.assertTrue(heading.startswith("/bin/sh -c 'echo building; echo"), heading)
        self.assertIn("alpha", card.text)
        self.assertIn("agent", card.text)
        self.assertEqual(card.find_element(By.CSS_SELECTOR, "pre.stdout").text,
                         "building\nstep 2 of 9")
        self.shot("running", whole=True)
        job = card.get_attribute("id").removeprefix("job-")
        self.browser.find_element(By.ID, f"job-{job}-stop").click()  # no reason: not sent
        self.assertTrue(self.browser.execute_script(
            "return document.getElementById(arguments[0]).validity.valueMissing",
            f"job-{job}-reason"))
        self.browser.find_element(By.ID, f"job-{job}-reason").send_keys("it hangs")
        self.press(self.browser.find_element(By.ID, f"job-{job}-stop"))
        self.assertIn("Stopping", self.flash())
        self.assertTrue(finished.wait(WAIT), "the agent saw it end")
        self.assertEqual(report["stopped"], "stopped by the human")
        self.browser.get(base + "/running")
        self.wait_for(By.ID, "no-jobs")
        stops = [json.loads(line) for line in subprocess.run(
            [CLI, "--root", str(self.root), "--json", "audit", "show", "--op", "exec.stop"],
            capture_output=True, env=self.env, check=True, text=True).stdout.splitlines()]
        self.assertEqual([s["reason"] for s in stops], ["it hangs"])


class Held(Page):
    """The changes a confined command wrote that the library held for the human, reviewed
    and confirmed in two steps."""

    def test_a_held_change_is_reviewed_ticked_confirmed_and_applied(self):
        proj = (self.home / "projects/alpha").resolve()
        self.cli("grant", "add", "--alias", "alpha", "--path", str(proj), "--access", "read_write",
                 "--reason", "the alpha build")
        done = self.agent("shell_exec", {
            "command": "mkdir .claude && echo '{}' > .claude/settings.json"
                       " && printf '# notes\\nsecond line\\n' > CLAUDE.md && echo ok > fine.txt",
            "cwd": "alpha", "timeout_s": 60,
        })
        self.assertEqual(done["exit_code"], 0, done)
        changes = done["changes"]
        set_id = changes["set"]
        self.assertEqual(sorted((h["path"], h["why"]) for h in changes["held"]),
                         [(".claude", "agent_config"), ("CLAUDE.md", "agent_config")])
        self.assertTrue((proj / "fine.txt").exists(), "published at once")
        self.assertFalse((proj / "CLAUDE.md").exists(), "held, not in the folder")
        # The overview counts the set and leads to the tab.
        self.browser.refresh()
        self.assertEqual(self.wait_for(By.ID, "held-count").text, "1")
        self.wait_for(By.ID, "nav-changes").click()
        card = self.wait_for(By.ID, set_id)
        self.assertIn("alpha:CLAUDE.md", card.text)
        self.assertIn("agent_config", card.text)
        self.shot("held-list", whole=True)
        # Step one: the review, which changes nothing.
        card.find_element(By.ID, f"{set_id}-review").click()
        digest = self.wait_for(By.ID, "held-digest").text
        self.assertEqual(digest, self.cli("changes", "show", set_id)["digest"])
        tick = self.browser.find_element(By.CSS_SELECTOR, "input[name=path][value='CLAUDE.md']")
        article = tick.find_element(By.XPATH, "ancestor::article")
        diff = article.find_element(By.CSS_SELECTOR, "pre.diff").text
        self.assertIn("+# notes\n+second line", diff)
        self.assertIn("agent_config", article.find_element(By.CSS_SELECTOR, ".warnings").text)
        self.shot("held-review", whole=True)
        tick.click()
        self.press(self.browser.find_element(By.ID, "held-apply-selected"))
        # Step two: exactly what is applied, what stays held, and the reason.
        chosen = self.wait_for(By.ID, "held-chosen").text
        self.assertIn("alpha:CLAUDE.md", chosen)
        self.assertNotIn("alpha:.claude", chosen)
        self.assertIn("alpha:.claude", self.browser.find_element(By.ID, "held-kept").text)
        self.assertEqual(self.browser.find_element(By.ID, "held-digest").text, digest)
        # Without a reason the browser does not send it.
        self.browser.find_element(By.ID, "held-confirm").click()
        self.assertEqual(self.browser.find_elements(By.ID, "flash"), [])
        self.assertFalse((proj / "CLAUDE.md").exists())
        self.shot("held-confirm", whole=True)
        self.browser.find_element(By.ID, "held-reason").send_keys("the notes are fine")
        self.press(self.browser.find_element(By.ID, "held-confirm"))
        said = self.flash()
        self.assertIn(f"Applied 1 change of change set {set_id}: CLAUDE.md", said)
        self.shot("held-applied", whole=True)
        self.assertEqual((proj / "CLAUDE.md").read_text(), "# notes\nsecond line\n")
        self.assertFalse((proj / ".claude").exists(), "not ticked, still held")
        sets = self.cli("changes")["sets"]
        self.assertEqual([[h["path"] for h in s["held"]] for s in sets], [[".claude"]])
        card = self.wait_for(By.ID, set_id)
        self.assertNotIn("alpha:CLAUDE.md", card.text)
        records = [json.loads(l) for l in (self.root / "audit.jsonl").read_text().splitlines()]
        applied = [r for r in records if r["event"] == "change.applied"]
        self.assertEqual(len(applied), 1)
        self.assertIn("the notes are fine", json.dumps(applied[0]))
