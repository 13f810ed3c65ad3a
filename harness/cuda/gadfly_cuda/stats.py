"""Sample statistics and the stopping rule (standard library only)."""
from __future__ import annotations

import math
from dataclasses import dataclass


def median(xs):
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return math.nan
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def quantile(xs, q):
    """Linear-interpolated quantile (numpy's default), q in [0, 1]."""
    s = sorted(xs)
    if not s:
        return math.nan
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def mean(xs):
    return sum(xs) / len(xs) if xs else math.nan


def stdev(xs):
    """Sample standard deviation (Bessel-corrected); nan below 2 samples."""
    n = len(xs)
    if n < 2:
        return math.nan
    m = mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))


def cv(xs):
    m = mean(xs)
    return stdev(xs) / m if xs and m > 0 else math.nan


def rel_sem(xs):
    """Relative standard error of the mean: std / sqrt(n) / mean."""
    n = len(xs)
    m = mean(xs)
    if n < 2 or not m > 0:
        return math.inf
    return stdev(xs) / math.sqrt(n) / m


@dataclass
class Summary:
    n: int
    median: float
    mean: float
    min: float
    max: float
    q1: float
    q3: float
    cv: float
    rel_sem: float

    def as_dict(self):
        return {
            "n": self.n, "median": self.median, "mean": self.mean, "min": self.min, "max": self.max,
            "q1": self.q1, "q3": self.q3, "cv": self.cv, "rel_sem": self.rel_sem,
        }


def summarize(xs) -> Summary:
    xs = list(xs)
    if not xs:
        nan = math.nan
        return Summary(0, nan, nan, nan, nan, nan, nan, nan, math.inf)
    return Summary(len(xs), median(xs), mean(xs), min(xs), max(xs), quantile(xs, 0.25), quantile(xs, 0.75),
                   cv(xs), rel_sem(xs))


@dataclass
class StopRule:
    """Stop when every side has >= min_samples and >= min_time_s of summed time
    and a relative SEM <= target, or when a cap is reached.  Whether the target
    was met is reported (``converged``), never assumed."""
    min_samples: int = 10
    max_samples: int = 400
    target_rel_sem: float = 0.01
    min_time_s: float = 0.1
    max_wall_s: float = 45.0

    def check(self, samples_us: list[list[float]], wall_s: float):
        """samples_us: one list of times (microseconds) per side.
        Returns (stop: bool, converged: bool, why: str)."""
        n_min = min(len(s) for s in samples_us)
        ok_n = n_min >= self.min_samples
        # enough summed time, or, for very short kernels, five times the sample floor
        ok_t = all(sum(s) * 1e-6 >= self.min_time_s or len(s) >= 5 * self.min_samples for s in samples_us)
        ok_sem = all(rel_sem(s) <= self.target_rel_sem for s in samples_us)
        if ok_n and ok_t and ok_sem:
            return True, True, "relative SEM target met"
        if n_min >= self.max_samples:
            return True, False, f"sample cap {self.max_samples} reached"
        if wall_s >= self.max_wall_s and n_min >= min(3, self.min_samples):
            return True, False, f"wall-time cap {self.max_wall_s:.0f} s reached"
        return False, False, ""
