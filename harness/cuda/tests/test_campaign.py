"""The example campaign's spec agrees with the harness (no GPU needed)."""
import os
import shlex
import unittest

import _paths

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None


@unittest.skipIf(tomllib is None, "tomllib needs Python >= 3.11")
class CampaignTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(_paths.EXAMPLE, "campaign.toml"), "rb") as f:
            cls.spec = tomllib.load(f)
        with open(os.path.join(_paths.EXAMPLE, "campaign-initial.toml"), "rb") as f:
            cls.initial = tomllib.load(f)
        cls.P = _paths.load_attention()

    def test_keys_the_core_reads(self):
        s = self.spec
        for k in ("name", "workspace", "goal"):
            self.assertTrue(s.get(k), k)
        self.assertEqual(set(s) - {"name", "workspace", "goal", "architecture", "domains", "comparison", "harness",
                                   "constraints", "predicate", "questions", "moments", "agent", "beam"}, set())
        h = s["harness"]
        self.assertEqual(set(h) - {"build", "run", "timeout_s", "scenarios", "protected", "candidate", "sandbox",
                                   "tags", "fresh_inputs"}, set())
        self.assertIn("{results}", h["run"])
        # The grader draws fresh inputs from its own secret seed at every run,
        # so the run command passes no {seed} and says why.
        self.assertTrue("{seed}" in h["run"] or h.get("fresh_inputs") is True)
        self.assertIn("harness/**", h["protected"])
        self.assertLessEqual(h["timeout_s"], 3600)
        self.assertEqual(s["predicate"]["correct"], True)
        self.assertGreaterEqual(s["predicate"]["min_speedup"], 1.0)
        self.assertIn(s["questions"]["mode"], ("autonomous", "human", "audit"))

    def test_the_study_goal_and_the_easier_one(self):
        # campaign.toml: at least the comparison (the flash backend the harness
        # times as compare_us) on every scenario; campaign-initial.toml: the
        # same campaign held only to the initial kernel.
        p = self.spec["predicate"]
        self.assertGreaterEqual(p["min_compare_speedup"], 1.0)
        self.assertEqual(set(p) - {"correct", "min_speedup", "min_geomean_speedup", "min_compare_speedup",
                                   "min_compare_geomean", "scenarios"}, set())
        q = self.initial["predicate"]
        self.assertNotIn("min_compare_speedup", q)
        self.assertNotIn("min_compare_geomean", q)
        self.assertNotEqual(self.initial["name"], self.spec["name"])
        self.assertEqual(self.initial["harness"], self.spec["harness"])
        self.assertEqual(self.initial["constraints"], self.spec["constraints"])

    def test_scenarios_are_the_problems(self):
        self.assertEqual(self.spec["harness"]["scenarios"], self.P.SCENARIOS)

    def test_commands_name_real_files_and_the_checked_binary(self):
        build = shlex.split(self.spec["harness"]["build"])
        run = shlex.split(self.spec["harness"]["run"])
        ws_harness = os.path.join(_paths.REPO, "harness")  # copied to workspace/harness by setup.sh
        for argv in (build, run):
            self.assertEqual(argv[:2], ["python3", "-I"])    # isolated mode: no cwd or PYTHONPATH on sys.path
            self.assertTrue(argv[2].startswith("harness/cuda/"))
            self.assertTrue(os.path.isfile(os.path.join(ws_harness, argv[2][len("harness/"):])), argv[2])
        self.assertEqual(build[build.index("--out") + 1], self.spec["constraints"]["binary"])
        self.assertEqual(run[run.index("--candidate") + 1], self.spec["constraints"]["binary"])
        self.assertEqual(build[build.index("--baseline-out") + 1], run[run.index("--baseline") + 1])
        base_src = build[build.index("--baseline") + 1]
        self.assertTrue(base_src.startswith("harness/"))     # protected
        self.assertTrue(os.path.isfile(os.path.join(ws_harness, base_src[len("harness/"):])))
        for b in ("cutlass", "cute::", "cublas", "cudnn"):
            self.assertIn(b, self.spec["constraints"]["banned_symbols"])

    def test_initial_kernel_is_the_protected_baseline(self):
        with open(self.P.BASELINE_SOURCE, "rb") as f:
            base = f.read()
        with open(os.path.join(_paths.EXAMPLE, "workspace", "kernel", "attention.cu"), "rb") as f:
            self.assertEqual(f.read(), base)
        with open(os.path.join(_paths.HARNESS, "exploits", "common.cuh")) as f:
            common = f.read()
        kernel = base.decode().split("#include <math.h>\n", 1)[1].split('extern "C"')[0]
        self.assertIn(kernel.strip(), common)

    def test_prepared_candidates_exist(self):
        c = os.path.join(_paths.EXAMPLE, "candidates")
        for n in ("good.cu", "wrong.cu", "cheat_cache.cu", "cheat_side_stream.cu", "triton_good.py"):
            self.assertTrue(os.path.isfile(os.path.join(c, n)), n)


if __name__ == "__main__":
    unittest.main()
