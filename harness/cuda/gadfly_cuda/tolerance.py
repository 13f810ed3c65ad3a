"""Tolerances per dtype and the correctness verdict from error statistics.

The elementwise comparison itself runs on the GPU (grader.compare); what it
returns is a plain dict, and this module, which needs only the standard
library, turns the dicts into a verdict and a reason with numbers.
"""
from __future__ import annotations

import math

# (atol, rtol); |out - ref| <= atol + rtol * |ref| elementwise.
# bf16/fp16 1e-2 and fp32 1e-4 follow KernelBench's get_tolerance_for_precision.
TOLERANCES = {
    "bfloat16": (1e-2, 1e-2),
    "float16": (1e-2, 1e-2),
    "float32": (1e-4, 1e-4),
    "float64": (1e-8, 1e-8),
}
# [ours] precision guard: the candidate's error against the high-precision
# reference may be at most GUARD_FACTOR times the larger of the errors of the
# working-precision reference and of the initial kernel (plus a floor), so a
# silent precision downgrade that still fits the loose atol/rtol is caught.
GUARD_FACTOR = 4.0
GUARD_FLOOR = {"bfloat16": 2e-3, "float16": 5e-4, "float32": 1e-6, "float64": 1e-12}


def tolerance_for(dtype: str) -> tuple[float, float]:
    try:
        return TOLERANCES[dtype]
    except KeyError:
        raise KeyError(f"no tolerance defined for dtype {dtype}") from None


def _fmt(x):
    if x is None:
        return "n/a"
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    return f"{x:.4g}"


def describe_mismatch(stats: dict, against: str, atol: float, rtol: float) -> str:
    return (f"{stats['n_bad']} of {stats['numel']} elements differ from the {against} by more than "
            f"atol+rtol*|ref| (atol={atol:g}, rtol={rtol:g}); max |diff| {_fmt(stats['max_abs'])}; worst at "
            f"{stats.get('where', '?')}: got {_fmt(stats.get('got'))}, expected {_fmt(stats.get('expected'))}")


def judge(vs_ref: dict, vs_hi: dict | None, dtype: str, ref_err_hi: float | None = None,
          base_err_hi: float | None = None) -> tuple[bool, str | None]:
    """Verdict for one call.

    vs_ref / vs_hi: dicts from grader.compare with keys numel, n_nonfinite
    (output non-finite where the reference is finite), n_bad (tolerance
    violations), max_abs, where, got, expected.  vs_hi may be None (timed
    re-checks compare with the working-precision reference only).
    ref_err_hi / base_err_hi: max |ref - hi| and max |initial - hi| on the
    same inputs, for the precision guard.
    """
    atol, rtol = tolerance_for(dtype)
    for stats, against in ((vs_hi, "high-precision (fp32) reference"), (vs_ref, "reference")):
        if stats is None:
            continue
        if stats["n_nonfinite"]:
            return False, (f"output has {stats['n_nonfinite']} non-finite values where the {against} is finite "
                           f"(first at {stats.get('where_nonfinite', '?')}); an element never written keeps the "
                           f"NaN poison")
    for stats, against in ((vs_hi, "high-precision (fp32) reference"), (vs_ref, "reference")):
        if stats is None:
            continue
        if stats["n_bad"]:
            return False, describe_mismatch(stats, against, atol, rtol)
    if vs_hi is not None:
        known = [e for e in (ref_err_hi, base_err_hi) if e is not None and math.isfinite(e)]
        if known:
            limit = max(GUARD_FACTOR * max(known), GUARD_FLOOR.get(dtype, 0.0))
            if vs_hi["max_abs"] > limit:
                return False, (f"precision: max error vs the fp32 reference {_fmt(vs_hi['max_abs'])} exceeds "
                               f"{GUARD_FACTOR:g}x the larger of the reference's {_fmt(ref_err_hi)} and the initial "
                               f"kernel's {_fmt(base_err_hi)} (limit {_fmt(limit)})")
    return True, None
