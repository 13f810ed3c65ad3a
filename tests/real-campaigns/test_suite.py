#!/usr/bin/env python3
"""How suite.py labels a replay's stops, on replay reports written here:
python3 -m unittest tests/real-campaigns/test_suite.py"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import suite  # noqa: E402


def evaluated(i, g, lo, hi, incorrect=False):
    return {"what": "evaluated", "evaluation": i, "holds": True, "geomean_speedup": g, "geomean_interval": [lo, hi],
            "failing": [], "failures": [], "cached": False, "incorrect": incorrect}


def stop(i, decision, reason=""):
    return {"what": "stop", "decision": decision, "evaluation": i, "reason": reason}


def report(*did):
    return {"steps": [{"did": [d]} for d in did], "summary": {}}


class RegressedStopsTest(unittest.TestCase):
    def test_a_stop_on_a_tree_slower_beyond_noise_is_regressed_and_counted_when_let_through(self):
        r = report(evaluated(1, 2.0, 1.95, 2.05), evaluated(2, 1.5, 1.45, 1.55), stop(2, "allow"))
        f = suite.replay_facts(r)
        self.assertEqual((f["regressed_stops"], f["regressed_allowed"]), (1, 1))

    def test_blocked_once_naming_the_better_tree_then_allowed_is_not_let_through_without_the_question(self):
        told = suite.SLOWER_THAN_BEST + " this tree measures 1.5x while evaluation 1 measured 2.0x"
        r = report(evaluated(1, 2.0, 1.95, 2.05), evaluated(2, 1.5, 1.45, 1.55), stop(2, "block", told),
                   stop(2, "allow"))
        f = suite.replay_facts(r)
        self.assertEqual((f["regressed_stops"], f["regressed_allowed"]), (2, 0))

    def test_overlapping_figures_and_a_wrong_best_are_no_regression(self):
        inside = report(evaluated(1, 2.0, 1.9, 2.1), evaluated(2, 1.95, 1.85, 2.05), stop(2, "allow"))
        self.assertEqual(suite.replay_facts(inside)["regressed_stops"], 0)
        wrong = report(evaluated(1, 9.0, 8.9, 9.1, incorrect=True), evaluated(2, 1.5, 1.45, 1.55), stop(2, "allow"))
        self.assertEqual(suite.replay_facts(wrong)["regressed_stops"], 0)


if __name__ == "__main__":
    unittest.main()
