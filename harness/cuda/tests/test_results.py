import json
import math
import os
import tempfile
import unittest

import _paths  # noqa: F401
from gadfly_cuda import results


class ResultsTest(unittest.TestCase):
    def test_non_finite_numbers_become_null(self):
        r = results.make_record("a", True, 10.0, 20.0, max_abs_err_ref=math.nan, max_abs_err_hi=math.inf,
                                cv=-math.inf, notes=["x", math.nan], nested={"k": math.nan})
        line = results.dumps(r)
        obj = json.loads(line)
        self.assertIsNone(obj["max_abs_err_ref"])
        self.assertIsNone(obj["max_abs_err_hi"])
        self.assertIsNone(obj["cv"])
        self.assertEqual(obj["notes"], ["x", None])
        self.assertIsNone(obj["nested"]["k"])
        self.assertNotIn("NaN", line)
        self.assertNotIn("Infinity", line)

    def test_required_fields_and_reason(self):
        r = results.make_record("s", False, 5.0, 7.0, reason="trial 1: output has 3 non-finite values")
        self.assertEqual(list(r)[:4], ["scenario", "correct", "time_us", "baseline_us"])
        self.assertEqual(r["reason"], "trial 1: output has 3 non-finite values")
        self.assertEqual(results.validate_line(results.dumps(r)), [])
        r2 = results.make_record("s", False, 5.0, 7.0)
        self.assertIn("no reason", r2["reason"])

    def test_untimed_candidate_gets_a_valid_positive_time(self):
        for t in (None, math.nan, 0.0, -1.0):
            r = results.make_record("s", False, t, 7.0, reason="crashed")
            self.assertEqual(r["time_us"], results.NOT_TIMED_US)
            self.assertEqual(results.validate_line(results.dumps(r)), [])
        with self.assertRaises(ValueError):
            results.make_record("s", True, None, 7.0)

    def test_bad_baseline_or_name_is_a_harness_error(self):
        for b in (None, 0.0, math.nan, -3.0):
            with self.assertRaises(ValueError):
                results.make_record("s", True, 1.0, b)
        with self.assertRaises(ValueError):
            results.make_record("", True, 1.0, 2.0)

    def test_none_extras_are_omitted(self):
        r = results.make_record("s", True, 1.0, 2.0, compare_us=None, bound_us=0.5)
        self.assertNotIn("compare_us", r)
        self.assertEqual(r["bound_us"], 0.5)

    def test_write_lines_is_atomic_and_parsable(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "sub", "results.jsonl")
            recs = [results.make_record(f"s{i}", i % 2 == 0, 1.0 + i, 2.0, reason=None if i % 2 == 0 else "bad")
                    for i in range(4)]
            results.write_lines(path, recs)
            with open(path) as f:
                lines = f.read().splitlines()
            self.assertEqual(len(lines), 4)
            for line in lines:
                self.assertEqual(results.validate_line(line), [])
            self.assertEqual([n for n in os.listdir(os.path.dirname(path)) if n.startswith(".results-")], [])

    def test_validate_line_catches_what_the_core_rejects(self):
        self.assertTrue(results.validate_line('{"scenario":"a","correct":true,"time_us":0,"baseline_us":1}'))
        self.assertTrue(results.validate_line('{"scenario":"a","time_us":1,"baseline_us":1}'))
        self.assertTrue(results.validate_line('{"scenario":"a","correct":false,"time_us":1,"baseline_us":1}'))
        self.assertTrue(results.validate_line("[1]"))
        self.assertTrue(results.validate_line("not json"))


if __name__ == "__main__":
    unittest.main()
