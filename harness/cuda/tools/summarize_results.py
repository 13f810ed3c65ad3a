#!/usr/bin/env python3
"""Summarises a validation run (h200_validate.sh output) as Markdown tables and
noise.json.  Standard library only.

    python3 harness/cuda/tools/summarize_results.py harness/cuda/results/run4 > harness/cuda/results/run4/SUMMARY.md
"""
import glob
import json
import math
import os
import statistics as st
import sys


def load(path):
    with open(path) as f:
        return {r["scenario"]: r for r in (json.loads(line) for line in f if line.strip())}


def main(d):
    out = []
    p = lambda *a: out.append(" ".join(str(x) for x in a))  # noqa: E731
    good = load(os.path.join(d, "good.jsonl"))
    repeats = [good] + [load(f) for f in sorted(glob.glob(os.path.join(d, "noise_good_*.jsonl")))]
    initial = load(os.path.join(d, "initial.jsonl"))
    others = {n: load(os.path.join(d, n + ".jsonl")) for n in ("wrong", "cheat_cache", "cheat_side_stream",
                                                               "triton_good") if os.path.exists(os.path.join(d, n + ".jsonl"))}
    p("## Good candidate (CUDA, WMMA) vs the initial kernel\n")
    p("| scenario | initial us | good us | speedup | flash (compare) us | bound us | samples | cv | triton us |")
    p("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    sps = []
    for s, r in good.items():
        t = others.get("triton_good", {}).get(s, {})
        sps.append(r["speedup"])
        p(f"| {s} | {r['baseline_us']:.1f} | {r['time_us']:.1f} | {r['speedup']:.2f} | {r.get('compare_us') or float('nan'):.1f} "
          f"| {r['bound_us']:.1f} | {r['samples']} | {r['cv']:.3f} | {t.get('time_us', float('nan')):.1f} |")
    p(f"\ngeometric mean speedup {math.exp(sum(map(math.log, sps)) / len(sps)):.2f}x; every scenario correct: "
      f"{all(r['correct'] for r in good.values())}\n")

    p(f"## Timing noise: {len(repeats)} evaluations of the same kernel (good), fresh processes and buffers each\n")
    p("| scenario | median us (min..max over runs) | spread of median time | spread of speedup |")
    p("|---|---|---:|---:|")
    noise = {}
    for s in good:
        t = [r[s]["time_us"] for r in repeats]
        sp = [r[s]["speedup"] for r in repeats]
        spread = (max(t) - min(t)) / st.median(t)
        sspread = (max(sp) - min(sp)) / st.median(sp)
        noise[s] = {"time_us": t, "speedup": sp, "time_spread": spread, "speedup_spread": sspread}
        p(f"| {s} | {st.median(t):.1f} ({min(t):.1f}..{max(t):.1f}) | {spread:.2%} | {sspread:.2%} |")
    worst = max(v["time_spread"] for v in noise.values())
    p(f"\nworst spread of the median time: {worst:.2%} (target < 2%); "
      f"worst spread of the speedup: {max(v['speedup_spread'] for v in noise.values()):.2%}\n")
    with open(os.path.join(d, "noise.json"), "w") as f:
        json.dump({"runs": len(repeats), "worst_time_spread": worst, "scenarios": noise}, f, indent=1)

    p("## The initial kernel against itself (A/B bias)\n")
    devs = [r["speedup"] - 1 for r in initial.values()]
    p(f"speedups {min(r['speedup'] for r in initial.values()):.3f}..{max(r['speedup'] for r in initial.values()):.3f} "
      f"over {len(initial)} scenarios (largest deviation from 1: {max(map(abs, devs)):.2%}); all correct: "
      f"{all(r['correct'] for r in initial.values())}\n")

    p("## Harness overhead per scenario (good candidate)\n")
    p("| scenario | wall s | overhead s (wall minus device time of all calls) | per-call round trip beyond device time us |")
    p("|---|---:|---:|---:|")
    for s, r in good.items():
        p(f"| {s} | {r['wall_s']:.2f} | {r['overhead_s']:.2f} | {r['call_overhead_us']:.0f} |")
    p(f"\ntotal wall {sum(r['wall_s'] for r in good.values()):.1f} s, of which overhead "
      f"{sum(r['overhead_s'] for r in good.values()):.1f} s\n")

    for name, res in others.items():
        if name == "triton_good":
            continue
        p(f"## {name}\n")
        bad = [s for s, r in res.items() if not r["correct"]]
        p(f"{len(bad)} of {len(res)} scenarios fail; passes: {[s for s in res if s not in bad] or 'none'}\n")
        for s in bad:
            p(f"- {s}: {res[s]['reason'][:260]}")
        p("")
    ex = os.path.join(d, "exploits", "exploits.json")
    if os.path.exists(ex):
        with open(ex) as f:
            e = json.load(f)
        p(f"## Exploit suite: {e['passed']} of {e['count']} as expected (scenarios {e['scenarios']})\n")
        p("| exploit | trick (HARNESS.md B) | expected | outcome | first reason |")
        p("|---|---|---|---|---|")
        for r in e["exploits"]:
            first = next((x.get("reason") for x in r["results"] if x.get("reason")), "") or "all correct"
            p(f"| {r['exploit']} | {r['trick']} | {r['expect']} | {'as expected' if r['ok'] else r['why']} | "
              f"{first[:150]} |")
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1])
