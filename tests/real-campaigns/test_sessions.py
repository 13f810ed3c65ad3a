#!/usr/bin/env python3
"""The patterns of sessions.py on short fragments written here (nothing
of the corpus is copied): python3 -m unittest tests/real-campaigns/test_sessions.py"""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sessions  # noqa: E402

# A benchmark of the older problems: every variant per shape, then the totals.
VARIANTS = """\
some warning from the compiler
shape=0 variant=eager tflops=1.000 gbps=10.000 ms=2.000
shape=0 variant=compiled tflops=1.100 gbps=11.000 ms=1.800
shape=0 variant=solution tflops=4.000 gbps=40.000 ms=0.500
shape=0 solution_peak_fraction=0.2000
shape=1 variant=eager tflops=1.000 gbps=10.000 ms=3.000
shape=1 variant=solution tflops=2.000 gbps=20.000 ms=1.500
shape=1 solution_peak_fraction=0.1000
peak_fraction: 0.1414
RESULT: LOW
"""

# The decode benchmark: one line per context length, solution and baseline.
DECODE = """\
shape ctx=512: solution 2.000 ms/tok (500 tok/s) | baseline 8.000 ms/tok | speedup 4.00x
shape ctx=4096: solution 4.000 ms/tok (250 tok/s) | baseline 10.000 ms/tok | speedup 2.50x
peak_fraction: 3.1623
RESULT: OK
"""


class KernelRunsTest(unittest.TestCase):
    def test_variant_lines_give_one_evaluation_against_eager(self):
        runs = sessions.KernelRuns()
        runs.feed(3, "PASS\n")
        runs.feed(5, VARIANTS)
        found, counts = runs.evaluations()
        self.assertEqual(len(found), 1)
        index, scenarios = found[0]
        self.assertEqual(index, 5)
        self.assertEqual(scenarios, [("shape=0", True, 500.0, 2000.0), ("shape=1", True, 1500.0, 3000.0)])
        self.assertEqual(counts["correct_unknown"], 0)

    def test_filtered_run_takes_the_eager_time_printed_before(self):
        runs = sessions.KernelRuns()
        runs.feed(1, VARIANTS)
        only_solution = "\n".join(l for l in VARIANTS.splitlines() if "eager" not in l)
        runs.feed(2, "FAIL: shape 1 off by a lot\n" + only_solution)
        found, _ = runs.evaluations()
        self.assertEqual(len(found), 2)
        self.assertEqual(found[1][1][0], ("shape=0", False, 500.0, 2000.0))

    def test_decode_lines_and_output_split_over_two_results(self):
        runs = sessions.KernelRuns()
        first, rest = DECODE.split("\n", 1)
        runs.feed(7, first + "\n")
        runs.feed(8, rest)
        found, counts = runs.evaluations()
        self.assertEqual(len(found), 1)
        self.assertEqual(found[0][0], 8)
        self.assertEqual(found[0][1], [("ctx=512", True, 2000.0, 8000.0), ("ctx=4096", True, 4000.0, 10000.0)])
        self.assertEqual(counts["correct_unknown"], 1)  # no check printed: counted correct

    def test_a_run_missing_a_shape_is_partial(self):
        runs = sessions.KernelRuns()
        runs.feed(1, DECODE)
        runs.feed(2, DECODE)
        runs.feed(3, DECODE.split("\n", 1)[1])  # ctx=512 cut off
        found, counts = runs.evaluations()
        self.assertEqual(len(found), 2)
        self.assertEqual(counts["partial"], 1)

    def test_a_shape_seen_again_starts_a_new_run(self):
        runs = sessions.KernelRuns()
        no_end = "\n".join(l for l in DECODE.splitlines() if l.startswith("shape"))
        runs.feed(1, no_end)
        runs.feed(2, no_end)
        found, _ = runs.evaluations()
        self.assertEqual([i for i, _ in found], [1, 2])

    def test_tool_output_as_a_python_list(self):
        text = "[{'type': 'input_text', 'text': 'done\\nshape ctx=512: solution 1.0 ms/tok | baseline 2.0 ms/tok\\n'}]"
        self.assertIn("\nshape ctx=512: solution", sessions.tool_text(text))
        self.assertTrue(sessions.KB_DECODE.search(sessions.tool_text(text)))


class OtherFormatsTest(unittest.TestCase):
    def test_vsla_gpu_section_only(self):
        text = ("Suite header\n\n== CPU BENCHMARKS\n----\n\n  vector_add:\n    Size 64... 3.0μs\n\n"
                "== GPU BENCHMARKS\n----\n\n  vector_add:\n    Size 64... 5.5μs\n    Size 128... 6.0μs\n\n"
                "  matrix_multiply:\n    Size 64... 9.0μs\n")
        self.assertEqual(sessions.vsla_scenarios(text),
                         {"vector_add/64": 5.5, "vector_add/128": 6.0, "matrix_multiply/64": 9.0})

    def test_report_cycles_and_correctness(self):
        for text, cycles in [("Ran the tests. `CYCLES: 12,345` in every run.", "12,345"),
                             ("- Speed tests failed with cycles reported at **2500** (slower).", "2500"),
                             ("- **Observed cycles:** `3100` for the default sizes.", "3100")]:
            self.assertEqual(sessions.YB_CYCLES.search(text)["cycles"], cycles)
        self.assertIsNone(sessions.YB_CYCLES.search("this saves 12 cycles per round"))
        self.assertEqual(sessions.YB_CORRECT.search("- Correctness test: **failed**")["verdict"], "failed")

    def test_reports_in_task_order_with_an_evaluation_each(self):
        with tempfile.TemporaryDirectory() as d:
            reports = os.path.join(d, "docs", "reports")
            os.makedirs(reports)
            for name, body in [("task_10_report.md", "CYCLES: 900\nCorrectness: passed"),
                               ("task_2_report.md", "CYCLES: 1000"),
                               ("task_3_report.md", "no measurement here")]:
                with open(os.path.join(reports, name), "w") as f:
                    f.write(body)
            steps, facts = sessions.yibinlong_session(sessions.Path(d))
        self.assertEqual(facts["evaluations"], 2)
        times = [s["scenarios"][0]["time_us"] for s in steps if s["kind"] == "evaluation"]
        self.assertEqual(times, [1000.0, 900.0])

    def test_spec_names_the_architecture_or_the_device(self):
        spec = sessions.spec_text("x", ["shape=0"], {"architecture": "hopper"})
        self.assertIn('architecture = "hopper"', spec)
        self.assertIn('scenarios = ["shape=0"]', spec)
        self.assertIn('device = "gpu"', sessions.spec_text("x", ["a"], {"device": "gpu"}))


if __name__ == "__main__":
    unittest.main()
