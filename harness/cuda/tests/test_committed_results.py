"""The raw H200 results committed under harness/cuda/results/ stay valid
against the results contract, and say what the README says they say."""
import glob
import json
import os
import unittest

import _paths
from gadfly_cuda import results

RUN = os.path.join(_paths.HARNESS, "results", "run4")


def _reject(token):
    raise ValueError(f"non-finite JSON value {token}")


@unittest.skipUnless(os.path.isdir(RUN), "no committed results")
class CommittedResultsTest(unittest.TestCase):
    def load(self, name):
        with open(os.path.join(RUN, name + ".jsonl")) as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
        for line in lines:
            self.assertEqual(results.validate_line(line), [], (name, line[:200]))
        return {json.loads(line)["scenario"]: json.loads(line) for line in lines}

    def test_every_results_file_follows_the_contract(self):
        files = glob.glob(os.path.join(RUN, "*.jsonl")) + glob.glob(os.path.join(RUN, "exploits", "*.jsonl"))
        self.assertGreater(len(files), 20)
        for f in files:
            with open(f) as fh:
                for line in fh:
                    if line.strip():
                        self.assertEqual(results.validate_line(line), [], f)
                        json.loads(line, parse_constant=_reject)   # no NaN/Infinity values

    def test_verdicts(self):
        P = _paths.load_attention()
        good, initial = self.load("good"), self.load("initial")
        self.assertEqual(list(good), P.SCENARIOS)
        self.assertTrue(all(r["correct"] and r["speedup"] > 1 for r in good.values()))
        self.assertTrue(all(r["correct"] and abs(r["speedup"] - 1) < 0.02 for r in initial.values()))
        wrong = self.load("wrong")
        self.assertEqual({s for s, r in wrong.items() if r["correct"]}, {s for s in P.SCENARIOS if P.parse(s).causal})
        for name in ("cheat_cache", "cheat_side_stream"):
            self.assertFalse(any(r["correct"] for r in self.load(name).values()), name)
        with open(os.path.join(RUN, "exploits", "exploits.json")) as f:
            ex = json.load(f)
        self.assertEqual(ex["passed"], ex["count"])
        with open(os.path.join(RUN, "noise.json")) as f:
            self.assertLess(json.load(f)["worst_time_spread"], 0.02)


COTENANT = os.path.join(_paths.HARNESS, "results", "cotenant")


@unittest.skipUnless(os.path.isfile(os.path.join(COTENANT, "initial_shared.jsonl")), "no committed co-tenant run")
class CommittedCotenantTest(unittest.TestCase):
    """results/cotenant/: the initial kernel alone, and beside another process's matrix products."""

    def load(self, name):
        with open(os.path.join(COTENANT, name + ".jsonl")) as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
        for line in lines:
            self.assertEqual(results.validate_line(line), [], (name, line[:200]))
        return [json.loads(line) for line in lines]

    def test_alone_every_scenario_is_judged(self):
        for r in self.load("initial_alone"):
            self.assertTrue(r["correct"], r)
            self.assertNotIn("cannot_tell", r)
            self.assertTrue(r["cotenant_check"].startswith("ok:"), r["cotenant_check"])

    def test_shared_no_scenario_is_judged_on_timing(self):
        with open(os.path.join(COTENANT, "cotenant_load_shared.log")) as f:
            pid = f.read().split("co-tenant PID ")[1].split()[0]
        for r in self.load("initial_shared"):
            self.assertTrue(r["correct"], r)   # the initial kernel's outputs are right
            self.assertIn(f"PID {pid} ", r["cannot_tell"])
            self.assertTrue(r["cotenant_check"].startswith("shared:"), r["cotenant_check"])


if __name__ == "__main__":
    unittest.main()
