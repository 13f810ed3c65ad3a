#!/usr/bin/env python3
"""The qr-cpu harness's A-versus-A check, outside gadfly: the initial
kernel (examples/qr-cpu/workspace/kernel/qr.c) measured against itself,
RUNS times with seeds 1..RUNS, per scenario; the same rule as `gadfly
calibrate` (src/calibration.rs): a scenario is BIASED when the mean of its
log speedups is further from 0 than Student's t (95%, two-sided) times their
standard error over the runs, and than the predicate's 1% floor.

    python3 harness/cpu/tools/a_vs_a.py [--runs 5] [--harness harness/cpu] [--label NAME] [--json OUT]

It builds a throwaway workspace (the example's Makefile and kernel, the
harness folder given) with make, so two harness versions can be compared on
one machine in one sitting (issue 47: the baseline compiled into qrbench
measured the same kernel at 0.91x).
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228]


def t95(df):
    return T95[df - 1] if 1 <= df <= len(T95) else 2.0


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--harness", default=os.path.join(ROOT, "harness/cpu"))
    ap.add_argument("--makefile", default=os.path.join(ROOT, "examples/qr-cpu/workspace/Makefile"))
    ap.add_argument("--label", default="")
    ap.add_argument("--json")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="a-vs-a-")
    try:
        shutil.copytree(os.path.join(ROOT, "examples/qr-cpu/workspace/kernel"), os.path.join(work, "kernel"))
        shutil.copy(a.makefile, os.path.join(work, "Makefile"))
        shutil.copytree(a.harness, os.path.join(work, "harness/cpu"), ignore=shutil.ignore_patterns("tests", "tools"))
        subprocess.run(["make", "-s"], cwd=work, check=True)
        logs = {}
        for seed in range(1, a.runs + 1):
            out = os.path.join(work, "r%d.jsonl" % seed)
            subprocess.run(["build/qrbench", "--lib", "build/libkernel.so", "--seed", str(seed), "--out", out],
                           cwd=work, check=True, stdout=subprocess.DEVNULL)
            for line in open(out):
                r = json.loads(line)
                if not r.get("correct"):
                    print("run %d: %s incorrect against itself" % (seed, r["scenario"]), file=sys.stderr)
                    continue
                logs.setdefault(r["scenario"], []).append(math.log(r["baseline_us"] / r["time_us"]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = []
    print("A against A%s, %d runs" % (" (" + a.label + ")" if a.label else "", a.runs))
    print("%-16s %8s %9s %9s %9s  %s" % ("scenario", "bias", "min", "max", "spread", "verdict"))
    for name, xs in logs.items():
        n = len(xs)
        mean = sum(xs) / n
        spread = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
        biased = abs(mean) > max(t95(n - 1) * spread / math.sqrt(n), 0.01) if n > 1 else False
        rows.append({"scenario": name, "runs": n, "bias": math.exp(mean), "min": math.exp(min(xs)),
                     "max": math.exp(max(xs)), "spread": spread, "biased": biased})
        print("%-16s %7.3fx %8.3fx %8.3fx %8.2f%%  %s" % (name, math.exp(mean), math.exp(min(xs)), math.exp(max(xs)),
                                                      spread * 100, "BIASED" if biased else "within noise"))
    geo = math.exp(sum(math.log(r["bias"]) for r in rows) / len(rows)) if rows else float("nan")
    nb = sum(r["biased"] for r in rows)
    print("geomean %.3fx; %d of %d scenarios biased" % (geo, nb, len(rows)))
    if a.json:
        json.dump({"label": a.label, "runs": a.runs, "geomean": geo, "scenarios": rows}, open(a.json, "w"), indent=1)
    return 1 if nb else 0


sys.exit(main())
