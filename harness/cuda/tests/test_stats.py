import math
import unittest

import _paths  # noqa: F401
from gadfly_cuda import stats


class StatsTest(unittest.TestCase):
    def test_basic(self):
        xs = [3.0, 1.0, 2.0, 4.0]
        self.assertEqual(stats.median(xs), 2.5)
        self.assertEqual(stats.median([5.0, 1.0, 3.0]), 3.0)
        self.assertAlmostEqual(stats.quantile(xs, 0.25), 1.75)
        self.assertAlmostEqual(stats.stdev([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]), 2.138089935299395)
        self.assertTrue(math.isnan(stats.stdev([1.0])))
        self.assertTrue(math.isinf(stats.rel_sem([1.0])))
        xs = [100.0, 101.0, 99.0, 100.0]
        self.assertAlmostEqual(stats.rel_sem(xs), stats.stdev(xs) / 2 / 100.0)

    def test_summary(self):
        s = stats.summarize([10.0, 12.0, 11.0])
        self.assertEqual((s.n, s.median, s.min, s.max), (3, 11.0, 10.0, 12.0))
        self.assertEqual(stats.summarize([]).n, 0)

    def test_stop_rule(self):
        rule = stats.StopRule(min_samples=10, max_samples=50, target_rel_sem=0.01, min_time_s=0.001, max_wall_s=5)
        steady = [100.0] * 9
        self.assertFalse(rule.check([steady, steady], 0.1)[0])          # too few samples
        stop, conv, _ = rule.check([[100.0] * 10, [200.0] * 10], 0.1)
        self.assertTrue(stop and conv)
        noisy = [100.0, 300.0] * 10
        stop, conv, _ = rule.check([noisy, [100.0] * 20], 0.1)
        self.assertFalse(stop)                                          # 1% not reached yet
        stop, conv, why = rule.check([noisy * 3, [100.0] * 60], 0.1)
        self.assertTrue(stop and not conv and "cap" in why)             # sample cap
        stop, conv, why = rule.check([noisy, [100.0] * 20], 6.0)
        self.assertTrue(stop and not conv and "wall" in why)            # wall cap
        slow_rule = stats.StopRule(min_samples=3, max_samples=50, target_rel_sem=0.5, min_time_s=1.0, max_wall_s=60)
        self.assertFalse(slow_rule.check([[10.0] * 5], 0.1)[0])         # 50 us summed < 1 s


if __name__ == "__main__":
    unittest.main()
