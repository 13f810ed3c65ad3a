"""GPU tests: build the initial kernel and evaluate it against itself on one
scenario.  Skipped, with a printed notice, where torch, a CUDA device or nvcc
is missing (as in CI)."""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

import _paths


def _why_skip():
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    try:
        import torch
        if not torch.cuda.is_available():
            return "no CUDA device"
    except Exception as e:  # pragma: no cover
        return f"torch failed to import: {e}"
    sys.path.insert(0, _paths.HARNESS)
    from gadfly_cuda import buildlib
    if buildlib.find_nvcc() is None:
        return "nvcc not found"
    return None


SKIP = _why_skip()
if SKIP:
    print(f"\nNOTICE: GPU tests skipped ({SKIP}); run them on a GPU machine.", file=sys.stderr)


@unittest.skipIf(SKIP, f"GPU tests skipped: {SKIP}")
class GpuEvaluationTest(unittest.TestCase):
    def test_initial_kernel_against_itself(self):
        base = os.path.join(_paths.HARNESS, "problems", "attention", "baseline.cu")
        with tempfile.TemporaryDirectory() as d:
            so = os.path.join(d, "kernel.so")
            b = os.path.join(d, "baseline.so")
            subprocess.run([sys.executable, "-I", os.path.join(_paths.HARNESS, "build.py"), "--src", base,
                            "--out", so, "--baseline", base, "--baseline-out", b, "--no-cache"], check=True)
            out = os.path.join(d, "r.jsonl")
            p = subprocess.run([sys.executable, "-I", os.path.join(_paths.HARNESS, "evaluate.py"), "--candidate", so,
                                "--baseline", b, "--out", out, "--scenarios", "b4_h16_s333_d64_causal",
                                "--min-samples", "5", "--no-compare"], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr[-3000:])
            with open(out) as f:
                recs = [json.loads(line) for line in f]
            self.assertEqual(len(recs), 1)
            self.assertTrue(recs[0]["correct"], recs[0])
            self.assertGreater(recs[0]["time_us"], recs[0]["bound_us"])
            self.assertLess(abs(recs[0]["time_us"] / recs[0]["baseline_us"] - 1), 0.2)


if __name__ == "__main__":
    unittest.main()
