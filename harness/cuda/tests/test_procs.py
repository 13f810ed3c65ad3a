import os
import subprocess
import sys
import unittest

import _paths  # noqa: F401
from gadfly_cuda import procs


@unittest.skipUnless(os.path.isdir("/proc/self/task"), "needs Linux /proc")
class ProcsTest(unittest.TestCase):
    def test_escaped_grandchild_is_found_and_killed(self):
        # Run in a helper process that becomes a subreaper, so this test
        # process's own children are left alone.
        code = r'''
import os, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from gadfly_cuda import procs
assert procs.become_subreaper()
# a child that double-forks a setsid'd sleeper and exits at once
subprocess.run([sys.executable, "-c",
    "import os,time\nif os.fork()==0:\n os.setsid()\n if os.fork()==0:\n  os.execv('/bin/sleep',['sleep','30'])\n os._exit(0)\nos._exit(0)"])
time.sleep(0.3)
kids = procs.descendants()
assert any(procs.comm(p) == "sleep" for p in kids), kids
killed = procs.kill_descendants()
assert killed, "nothing killed"
time.sleep(0.1)
assert not [p for p in procs.descendants() if not procs.is_zombie(p)], procs.descendants()
print("ok")
'''
        out = subprocess.run([sys.executable, "-c", code, _paths.HARNESS], capture_output=True, text=True, timeout=60)
        self.assertEqual(out.stdout.strip(), "ok", out.stderr)

    def test_threads_and_maps(self):
        self.assertGreaterEqual(procs.thread_count(os.getpid()), 1)
        self.assertEqual(procs.thread_count(2 ** 22 + 12345), -1)
        maps = procs.mapped_files(os.getpid())
        self.assertTrue(any("python" in m or "libc" in m for m in maps), maps)
        self.assertTrue(procs.banned_mappings(os.getpid(), ["libc", "python"]))
        self.assertEqual(procs.banned_mappings(os.getpid(), ["libcublas-not-here"]), [])


if __name__ == "__main__":
    unittest.main()
