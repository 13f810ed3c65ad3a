"""The results contract: one JSON object per scenario per line.

Every number written is finite; NaN and infinities become ``null`` (the core's
parser would reject them, and "NaN" is not JSON).  The file is written to a
temporary name in the same folder and renamed into place, so a reader (or a
process that kept the old file open) never sees a half-written file.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from typing import Any, Iterable

REQUIRED = ("scenario", "correct", "time_us", "baseline_us")
OPTIONAL = (
    "max_abs_err_ref",
    "max_abs_err_hi",
    "tolerance",
    "rtol",
    "max_tol_ratio",
    "compare_us",
    "bound_us",
    "samples",
    "cv",
    "reason",
    "cannot_tell",
)
# `cannot_tell` (a string, present only when the harness could not judge the
# scenario's timing): another process used the device during the scenario's
# timed calls, so the timing and every verdict drawn from it are void.  The
# scenario does not pass, and it is not the candidate's fault.  `correct` is
# then true when every output check passed (a failed output check is written
# as before, without `cannot_tell`: a wrong output is wrong whoever shares the
# device).  `voided` holds the timing check's failure that was set aside, if
# any; `cotenant_check` says on every line whether the device's processes
# could be read at all ("ok: ...", "shared: ...", "unavailable: ...").
# Written when the candidate could not be timed at all (it crashed or never
# returned): a positive, finite number, so the line stays valid and the
# scenario fails on `correct` with its reason, and on speed as well.
NOT_TIMED_US = 1.0e9


def finite(value: Any) -> Any:
    """Recursively replaces non-finite floats with None (JSON null)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, int):
        return value
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    if hasattr(value, "item"):  # numpy / torch scalars
        return finite(value.item())
    return value


def make_record(scenario: str, correct: bool, time_us: float | None, baseline_us: float,
                reason: str | None = None, **extra: Any) -> dict:
    """Builds one result line.  ``time_us`` None (not timed) becomes NOT_TIMED_US."""
    if not scenario:
        raise ValueError("empty scenario name")
    if baseline_us is None or not math.isfinite(baseline_us) or baseline_us <= 0:
        raise ValueError(f"baseline_us must be positive and finite, got {baseline_us!r}")
    t = NOT_TIMED_US if time_us is None or not math.isfinite(time_us) or time_us <= 0 else float(time_us)
    rec: dict[str, Any] = {
        "scenario": scenario,
        "correct": bool(correct),
        "time_us": t,
        "baseline_us": float(baseline_us),
    }
    if not correct:
        rec["reason"] = reason or "incorrect (no reason recorded)"
    elif reason:
        rec["reason"] = reason
    if t == NOT_TIMED_US and correct and not extra.get("cannot_tell"):
        raise ValueError("a correct scenario must have been timed")
    ct = extra.get("cannot_tell")
    if ct is not None and not (isinstance(ct, str) and ct.strip()):
        raise ValueError(f"cannot_tell must be a non-empty string, got {ct!r}")
    for k, v in extra.items():
        if v is not None:
            rec[k] = v
    return finite(rec)


def dumps(record: dict) -> str:
    return json.dumps(finite(record), allow_nan=False, separators=(",", ":"), sort_keys=False)


def write_lines(path: str, records: Iterable[dict]) -> None:
    """Writes all records atomically (temp file in the same folder, then rename)."""
    path = os.path.abspath(path)
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".results-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for r in records:
                f.write(dumps(r) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def validate_line(line: str) -> list[str]:
    """Checks one line against the contract the way the core does; returns problems."""
    problems = []
    try:
        obj = json.loads(line)
    except ValueError as e:
        return [f"not JSON: {e}"]
    if not isinstance(obj, dict):
        return ["not an object"]
    for k in REQUIRED:
        if k not in obj:
            problems.append(f"missing {k}")
    if not isinstance(obj.get("correct"), bool):
        problems.append("correct is not a bool")
    for k in ("time_us", "baseline_us"):
        v = obj.get(k)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
            problems.append(f"{k} must be a positive number, got {v!r}")
    if obj.get("correct") is False and not obj.get("reason"):
        problems.append("incorrect without a reason")
    if "cannot_tell" in obj and not (isinstance(obj["cannot_tell"], str) and obj["cannot_tell"].strip()):
        problems.append("cannot_tell must be a non-empty string")
    return problems
