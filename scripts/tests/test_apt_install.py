"""scripts/apt-install against a stand-in apt-get: it waits for a held package lock, saying
so, and gives up after its bound naming the lock; another failure is reported at once.

Run by scripts/test:  python3 -m unittest discover -s scripts/tests
"""

import os
import subprocess
import tempfile
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "apt-install"
LOCKED = "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)"


class AptInstall(unittest.TestCase):
    def run_with(self, locked_calls, wait_s, failure=None):
        """apt-install zsh, with an apt-get that finds the lock held `locked_calls` times."""
        bin_dir = Path(tempfile.mkdtemp())
        calls = bin_dir / "calls"
        fake = bin_dir / "apt-get"
        fake.write_text(f"""#!/bin/sh
echo "$*" >> {calls}
n=$(wc -l < {calls})
if [ "$n" -le {locked_calls} ]; then echo "{LOCKED}" >&2; exit 100; fi
{f'echo "{failure}" >&2; exit 100' if failure else 'exit 0'}
""")
        fake.chmod(0o755)
        env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}",
                   SAFE_LANES_APT_WAIT=str(wait_s), SAFE_LANES_APT_RETRY="0.2")
        done = subprocess.run([str(SCRIPT), "zsh"], capture_output=True, text=True, env=env)
        return done, calls.read_text().splitlines()

    def test_a_held_lock_is_waited_for_and_said(self):
        done, calls = self.run_with(locked_calls=3, wait_s=30)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stderr.count("another apt-get holds the package lock"), 1, done.stderr)
        self.assertIn("at most 30 s", done.stderr)
        self.assertEqual(len(calls), 5, calls)  # update three times locked, then update, install
        self.assertTrue(calls[-1].endswith("install -y -qq --no-install-recommends zsh"), calls)
        self.assertIn("DPkg::Lock::Timeout=30", calls[-1])

    def test_a_lock_held_past_the_bound_fails_naming_it(self):
        done, _ = self.run_with(locked_calls=1000, wait_s=1)
        self.assertEqual(done.returncode, 1)
        self.assertIn("still held after 1 s", done.stderr)
        self.assertIn("Could not get lock", done.stderr)

    def test_another_failure_is_not_waited_for(self):
        done, calls = self.run_with(locked_calls=0, wait_s=30, failure="E: Unable to locate package zsh")
        self.assertEqual(done.returncode, 1)
        self.assertIn("Unable to locate package", done.stderr)
        self.assertNotIn("waiting", done.stderr)
        self.assertEqual(len(calls), 1)


if __name__ == "__main__":
    unittest.main()
