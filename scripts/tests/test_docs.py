"""The command blocks of README.md and docs/*.md run as written.

Every shell block (```sh, ```bash, or a transcript whose first line is `$ …`) is marked on
the line before it, so none is skipped unseen:

    <!-- runnable -->                       run it
    <!-- runnable; needs: ~/src/site ~/x --> make these folders first, as a reader would
    <!-- runnable; first: COMMAND -->       run COMMAND first (what the text says came before)
    <!-- not run: why -->                   say why not (a server that waits, a benchmark)

A runnable block runs in a world of its own: a fresh home folder (so the default state root,
`~/.local/state/safe-lanes`, is fresh too), the repository as the working directory, `safe-lanes`
and `safe-lanes-mcp` on PATH as `cargo install` would put them (this checkout's debug builds,
or SAFE_LANES_CLI / SAFE_LANES_MCP), on a pseudo-terminal (`script`), as a person types it.
A ```sh block runs as one `bash -e -o pipefail` script and must succeed. In a transcript, each
`$ ` line runs in turn and must succeed unless the next line is `$ echo $?` with its number;
each output line the block shows that holds no `…` must be printed; `/home/u` is read as the
home folder, in commands and output.

Run by scripts/test (after the Rust suites have built the binaries):
    python3 -m unittest discover -s scripts/tests
"""

import os
import re
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
CLI = Path(os.environ.get("SAFE_LANES_CLI") or TARGET / "debug/safe-lanes").resolve()
MCP = Path(os.environ.get("SAFE_LANES_MCP") or TARGET / "debug/safe-lanes-mcp").resolve()

BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
MARK = re.compile(r"<!-- (runnable(?:; [a-z]+: [^;]*?)*|not run: .*?) -->\n$")


def documents():
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def blocks(doc):
    """Each shell block of `doc`: (line, language, text, mark, its options)."""
    text = doc.read_text()
    for m in BLOCK.finditer(text):
        lang, body = m.group(1), m.group(2)
        shell = lang in ("sh", "bash", "console", "shell") or (
            lang in ("", "text") and body.startswith("$ "))
        if not shell:
            continue
        before = text[: m.start()]
        line = before.count("\n") + 1
        last = before[before.rstrip("\n").rfind("\n") + 1:]
        mark = MARK.search(last)
        if not mark:
            yield line, lang, body, None, {}
            continue
        if mark.group(1).startswith("not run"):
            yield line, lang, body, "not run", {}
            continue
        _, *options = mark.group(1).split("; ")
        yield line, lang, body, "runnable", dict(o.split(": ", 1) for o in options)


class World:
    """A fresh home folder and the binaries on PATH."""

    def __init__(self, options):
        self.tmp = Path(tempfile.mkdtemp())
        self.home = self.tmp / "home"
        self.home.mkdir()
        bin_dir = self.tmp / "bin"
        bin_dir.mkdir()
        for name, built in [("safe-lanes", CLI), ("safe-lanes-mcp", MCP)]:
            (bin_dir / name).symlink_to(built)
        for folder in options.get("needs", "").split():
            (self.home / folder.removeprefix("~/")).mkdir(parents=True, exist_ok=True)
        real_home = Path.home()
        self.env = {
            "HOME": str(self.home),
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "CARGO_HOME": os.environ.get("CARGO_HOME", str(real_home / ".cargo")),
            "RUSTUP_HOME": os.environ.get("RUSTUP_HOME", str(real_home / ".rustup")),
            "TERM": "dumb",
            "LANG": "C.UTF-8",
        }
        if "CARGO_TARGET_DIR" in os.environ:
            self.env["CARGO_TARGET_DIR"] = os.environ["CARGO_TARGET_DIR"]

    def run(self, script):
        """`script` in bash on a pseudo-terminal: its status and what it printed."""
        path = self.tmp / "block.sh"
        path.write_text(script)
        done = subprocess.run(
            ["script", "-qefc", f"bash -e -o pipefail {path}", "/dev/null"],
            cwd=REPO, env=self.env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
            timeout=600)
        return done.returncode, done.stdout.replace("\r\n", "\n")

    def close(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def transcript(body):
    """A transcript's steps: (command, the output it shows, the status it shows)."""
    steps = []
    for line in body.splitlines():
        if line.startswith("$ echo $?") and steps:
            steps[-1][2] = None
        elif line.startswith("$ "):
            steps.append([line[2:], [], 0])
        elif steps and steps[-1][2] is None and line.strip().isdigit():
            steps[-1][2] = int(line.strip())
        elif steps:
            steps[-1][1].append(line)
    return steps


class Docs(unittest.TestCase):
    def test_every_shell_block_is_marked(self):
        unmarked = [f"{doc.relative_to(REPO)}:{line}"
                    for doc in documents() for line, _, _, mark, _ in blocks(doc) if not mark]
        self.assertEqual(unmarked, [], "shell blocks with neither <!-- runnable --> nor "
                                       "<!-- not run: why --> on the line before")

    def test_every_runnable_block_runs_as_written(self):
        ran = 0
        for doc in documents():
            for line, lang, body, mark, options in blocks(doc):
                if mark != "runnable":
                    continue
                where = f"{doc.relative_to(REPO)}:{line}"
                with self.subTest(block=where):
                    world = World(options)
                    try:
                        if "first" in options:
                            status, printed = world.run(options["first"] + "\n")
                            self.assertEqual(status, 0, f"{where}: first:\n{printed}")
                        self.run_block(world, lang, body, where)
                    finally:
                        world.close()
                    ran += 1
        self.assertGreater(ran, 5, "the docs mark their command blocks runnable")

    def run_block(self, world, lang, body, where):
        if not body.startswith("$ "):
            status, printed = world.run(body)
            self.assertEqual(status, 0, f"{where} failed:\n{printed}")
            return
        for command, shown, expected in transcript(body):
            command = command.replace("/home/u", str(world.home))
            status, printed = world.run(command + "\n")
            self.assertEqual(status, expected, f"{where}: `{command}`:\n{printed}")
            for line in shown:
                if "…" in line or not line.strip():
                    continue
                line = line.replace("/home/u", str(world.home))
                self.assertIn(line, printed, f"{where}: `{command}` printed:\n{printed}")


if __name__ == "__main__":
    unittest.main()
