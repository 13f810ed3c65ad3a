import math
import unittest

import _paths  # noqa: F401
from gadfly_cuda import tolerance


def st(n_bad=0, n_nonfinite=0, max_abs=1e-3, numel=100):
    return {"numel": numel, "n_bad": n_bad, "n_nonfinite": n_nonfinite, "max_abs": max_abs,
            "where": "o[b=0, h=0, q=1, d=2]", "got": 0.5, "expected": 0.25, "where_nonfinite": "o[b=0, h=0, q=0, d=0]"}


class ToleranceTest(unittest.TestCase):
    def test_table(self):
        self.assertEqual(tolerance.tolerance_for("bfloat16"), (1e-2, 1e-2))
        self.assertEqual(tolerance.tolerance_for("float32"), (1e-4, 1e-4))
        with self.assertRaises(KeyError):
            tolerance.tolerance_for("int8")

    def test_pass(self):
        ok, why = tolerance.judge(st(), st(max_abs=2e-3), "bfloat16", ref_err_hi=2e-3, base_err_hi=1e-3)
        self.assertTrue(ok)
        self.assertIsNone(why)
        self.assertTrue(tolerance.judge(st(), None, "bfloat16")[0])

    def test_nonfinite_first(self):
        ok, why = tolerance.judge(st(n_nonfinite=3, n_bad=3, max_abs=math.inf), st(n_nonfinite=3, max_abs=math.inf),
                                  "bfloat16", 1e-3, 1e-3)
        self.assertFalse(ok)
        self.assertIn("3 non-finite values", why)
        self.assertIn("NaN poison", why)

    def test_mismatch_names_the_oracle_and_numbers(self):
        ok, why = tolerance.judge(st(), st(n_bad=7, max_abs=0.25), "bfloat16", 1e-3, 1e-3)
        self.assertFalse(ok)
        self.assertIn("7 of 100 elements differ from the high-precision (fp32) reference", why)
        self.assertIn("atol=0.01, rtol=0.01", why)
        self.assertIn("got 0.5, expected 0.25", why)
        ok, why = tolerance.judge(st(n_bad=2, max_abs=0.1), None, "bfloat16")
        self.assertIn("differ from the reference", why)

    def test_precision_guard(self):
        # within atol/rtol but 10x the error of the reference implementations
        ok, why = tolerance.judge(st(), st(max_abs=0.009), "bfloat16", ref_err_hi=9e-4, base_err_hi=5e-4)
        self.assertFalse(ok)
        self.assertIn("precision", why)
        # the floor keeps tiny reference errors from making the guard absurd
        ok, _ = tolerance.judge(st(), st(max_abs=1.5e-3), "bfloat16", ref_err_hi=1e-5, base_err_hi=1e-5)
        self.assertTrue(ok)
        # unknown reference errors: no guard
        self.assertTrue(tolerance.judge(st(), st(max_abs=0.009), "bfloat16")[0])


if __name__ == "__main__":
    unittest.main()
