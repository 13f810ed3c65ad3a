#!/usr/bin/env python3
"""The real-campaign replay suite (issue 46): gadfly's judgment measured on
experiment logs nobody here wrote (MANIFEST.tsv), against what really
happened next in each log.

    python3 tests/real-campaigns/suite.py --gadfly target/debug/gadfly \
        [--mirrors /work/.mirror | --logs DIR] [--out DIR] [--json] [--hold-out N,N] [--spec-extra TOML] \
        [--sessions [--corpus DIR]]

What happened is labelled from the log alone, by the rules below, before
gadfly's replay is read; gadfly's side is `gadfly replay` of the log (the
daemon's own decision code, default spec, autonomous mode, seed 1).

- A plateau is a run of at least 5 consecutive experiments after the last
  one that raised the best figure by 1% or more, none of them raising it
  by 1%. It recovered when a later experiment raised the best by 1%. It is
  caught when gadfly raised a `plateau` moment on one of its experiments;
  "first signal" is the experiment count into the plateau at which it did.
- A jump is a `suspicious_gain` moment of the `geomean_jump` detector. It
  is "from below the baseline" when the best before it was below the first
  experiment's figure (a naive start being fixed, not a suspicious gain).
- A flip at the bar: two consecutive correct experiments judged one meeting
  the bar and the other missing it beyond noise (`min_speedup = 1.0` against
  the first experiment) while their figures' intervals overlap (of a
  session with several scenarios, the geometric means', unless the miss is
  a scenario's own, beyond noise: that scenario's intervals cannot overlap
  between a pass and a miss). "Within
  noise" counts the experiments whose interval straddles the bar (neither:
  the daemon measures such a tree again, a replay cannot); "parity" counts
  consecutive experiments both within 3% of the bar whose decisions differ
  (the issue's own measure: allow 1.000x, block 0.994x, allow 1.000x).
- A self-escalation: a `moment.escalated` with no question of that moment
  delivered before it; a duplicate: two questions queued for one moment at
  one step.
- A contradicted question: a delivered question that speaks of several
  scenarios in a campaign that has one (every log; a session with one),
  or one whose words are NVIDIA's (`NVIDIA`) in a campaign known not to
  run on an NVIDIA GPU (no log says; of the sessions, the take-home's
  simulated VLIW machine).
- Regressed stops: these logs have no stop attempts (n/a); the gate's rule
  is tested in tests/noise.rs. In the corpus sessions (--sessions), a stop
  judged on an evaluation whose interval lies wholly below the best
  correct evaluation's before it is regressed; it is let through without
  the question when allowed with no earlier block of that evaluation
  naming the better tree (test_suite.py).

Sources named by --hold-out (1-based rows of the manifest) were not looked
at while tuning and are reported apart.

--sessions (off by default: the logs' tables stay as they were, and the
corpus need not be there) adds the real agent sessions of the shared
corpus that optimise a kernel and show its benchmark's output
(sessions.py: the kernelbench runs, vsla's Claude Code sessions, the
take-home's task reports), one row per session, source
`corpus:<folder>/<file>`, in a table of their own, with the stops judged
and blocked. Each is replayed by the same code as a log (`measure`), its
figure the geometric mean over its scenarios (shapes) of the reference's
time over the candidate's, and its spec says `optimizes = "kernel"`, the
session's architecture where it shows one, and `min_speedup = 1.0`
against the reference the benchmark printed (PyTorch eager, the
decode benchmark's baseline, the take-home's starting point), or against
the first evaluation where none is printed (vsla). A session with fewer
than 3 evaluations found is skipped and named with its count. None of
them was looked at while tuning. Nothing here is a test: the
figures are what closing notes quote, with this command.
"""

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sweep import SPEC, manifest, read_log, run  # noqa: E402
import sessions  # noqa: E402

GAIN = 0.01
PLATEAU = 5
# The words that open gadfly's block of a stop on a slower tree
# (src/evaluation.rs SLOWER_THAN_BEST).
SLOWER_THAN_BEST = "slower than the campaign's best:"
NVIDIA = re.compile(r"\b(CUDA|PTX|SASS|NVIDIA|nvcc|Nsight|ncu|nsys|cuBLAS|CUTLASS|tensor cores?|warps?|wgmma|TMA)\b")
SEVERAL = re.compile(r"(^|[^{])\bscenarios\b|\bother scenario|\bsmall(est)? scenarios|\bworst-performing", re.I)


def figures(timeline):
    """The objective of each evaluation (the baseline's time over the
    candidate's, the geometric mean over its scenarios: higher is better),
    and whether it was correct (every scenario). A log's evaluation has one
    scenario; a corpus session's may have several (one per shape)."""
    out = []
    for line in timeline.splitlines():
        step = json.loads(line)
        if step.get("kind") != "evaluation":
            continue
        sc = step["scenarios"]
        if not sc:
            out.append((None, False))
            continue
        ratio = math.exp(sum(math.log(s["baseline_us"] / s["time_us"]) for s in sc) / len(sc))
        out.append((ratio, all(bool(s["correct"]) for s in sc)))
    return out


def plateaus(series):
    """Labelled plateaus: (first evaluation index, length, recovered)."""
    best, since, runs, out = None, None, 0, []
    for i, (f, ok) in enumerate(series):
        if f is None or not ok:
            if best is not None:
                runs += 1
            continue
        if best is None:
            best, since, runs = f, i, 0
            continue
        if f >= best * (1 + GAIN):
            if runs >= PLATEAU:
                out.append([since + 1, runs, True])
            best, since, runs = f, i, 0
        else:
            best = max(best, f)
            runs += 1
    if runs >= PLATEAU:
        out.append([since + 1, runs, False])
    return out


def replay_facts(report, one_scenario=True, nvidia=None):
    """What gadfly did, by evaluation index (0-based, in order).
    `one_scenario`: the campaign has one scenario (a question about
    several is contradicted); `nvidia`: False when the campaign is known
    not to run on an NVIDIA GPU (a question in NVIDIA's words is
    contradicted), None when nothing says."""
    ev_index = -1
    plateau_at, jumps, holds, intervals = [], [], [], []
    # Regressed stops: a stop judged on an evaluation measurably slower
    # (intervals apart) than the best correct one before it; allowed
    # "without the question" when no earlier stop on that evaluation was
    # blocked naming the better tree.
    evals, told, regressed, regressed_allowed = {}, set(), 0, 0
    escalations, self_escalated, duplicates, contradicted, delivered_moments = 0, 0, 0, [], set()
    for step in report["steps"]:
        queued_here = []
        for d in step["did"]:
            w = d["what"]
            if w == "evaluated" and d.get("evaluation") is not None:
                iv = d.get("geomean_interval")
                if d.get("geomean_speedup") is not None and not d.get("incorrect") and iv and len(iv) == 2:
                    evals[d["evaluation"]] = (d["geomean_speedup"], iv[0], iv[1])
            if w == "stop" and d.get("evaluation") in evals:
                e = d["evaluation"]
                before = [v for k, v in evals.items() if k < e]
                best = max(before, key=lambda v: v[0]) if before else None
                if best is not None and evals[e][2] < best[1]:
                    regressed += 1
                    if d["decision"] == "allow" and e not in told:
                        regressed_allowed += 1
                if d["decision"] == "block" and SLOWER_THAN_BEST in d.get("reason", ""):
                    told.add(e)
            if w == "evaluated" and not d.get("cached"):
                ev_index += 1
                within = any(r.startswith("within noise:") for f in d["failing"] for r in f["reasons"]) or any(
                    f.startswith("within noise:") for f in d["failures"])
                holds.append((d["holds"], d["incorrect"], within, d.get("geomean_speedup"),
                              bool(d["failing"]) and not one_scenario))
                intervals.append(d.get("geomean_interval"))
            elif w == "moment" and d["moment"] == "plateau" and d["detector"] == "plateau":
                plateau_at.append(ev_index)
            elif w == "moment" and d["detector"] == "geomean_jump":
                jumps.append(ev_index)
            elif w == "queued":
                queued_here.append(d["question"].get("moment"))
            elif w == "delivered":
                q = d["question"]
                delivered_moments.add(q.get("moment"))
                body = q["text"].split("\n", 1)[-1]
                if q["source"] != "human" and ((one_scenario and SEVERAL.search(body))
                                               or (nvidia is False and NVIDIA.search(body))):
                    contradicted.append(q["source"])
            elif w == "escalated":
                escalations += 1
                if d["moment"] not in delivered_moments:
                    self_escalated += 1
        duplicates += len(queued_here) - len(set(queued_here))
    summary = report.get("summary", {})
    return {
        "regressed_stops": regressed,
        "regressed_allowed": regressed_allowed,
        "stops": summary.get("stops", 0) if isinstance(summary.get("stops"), int) else 0,
        "blocked": summary.get("blocked", 0) if isinstance(summary.get("blocked"), int) else 0,
        "plateau_at": plateau_at,
        "jumps": jumps,
        "holds": holds,
        "intervals": intervals,
        "escalations": escalations,
        "self_escalated": self_escalated,
        "duplicates": duplicates,
        "contradicted": contradicted,
    }


def flips(holds, intervals):
    """(flips, within noise, parity alternations), see the docstring."""
    n, parity = 0, 0
    for i in range(1, len(holds)):
        (ha, ia_wrong, wa, ga, sa), (hb, ib_wrong, wb, gb, sb) = holds[i - 1], holds[i]
        if ia_wrong or ib_wrong or ha == hb:
            continue
        a, b = intervals[i - 1], intervals[i]
        # Of several scenarios, one that fails its own bar beyond noise
        # decides (it cannot overlap the same scenario passing its bar
        # beyond noise); the geometric means overlapping is no flip then.
        on_scenarios = sb if ha else sa
        if not (wa or wb) and not on_scenarios and a and b and a[0] <= b[1] and b[0] <= a[1]:
            n += 1
        if ga and gb and abs(ga - 1) <= 0.03 and abs(gb - 1) <= 0.03:
            parity += 1
    return n, sum(1 for h in holds if h[2]), parity


def log_timeline(row, text, args, out, i):
    """A manifest log, imported by gadfly: (source, timeline text, timeline
    path, spec path)."""
    name = f"{row['repo'].replace('/', '+')}__{row['path'].replace('/', '_')}"
    log = os.path.join(out, name)
    open(log, "w").write(text)
    cmd = [args.gadfly, "replay", "import", "experiments", log, "--metric", row["metric"]]
    if row["objective"] == "max":
        cmd.append("--maximize")
    if row["where"] != "-":
        cmd += ["--where", row["where"]]
    timeline = run(cmd).stdout
    tl = os.path.join(out, name + ".timeline.jsonl")
    open(tl, "w").write(timeline)
    spec = os.path.join(out, name + ".toml")
    open(spec, "w").write(SPEC.format(name=f"log-{i}", metric=row["metric"], optimizes=row.get("optimizes", "kernel"), withhold=0) + args.spec_extra.replace("\\n", "\n"))
    return f"{row['repo']}:{row['path']}", timeline, tl, spec


def measure(source, timeline, tl, spec, args, one_scenario=True, nvidia=None):
    """Replays a timeline under its spec and labels what happened in it:
    one row of the table (shared by the logs and the corpus sessions)."""
    report = json.loads(run([args.gadfly, "replay", tl, "--spec", spec, "--mode", "autonomous", "--seed", "1",
                             "--json"]).stdout)
    series = figures(timeline)
    facts = replay_facts(report, one_scenario, nvidia)
    labelled = plateaus(series)
    caught, first = 0, []
    for start, length, _ in labelled:
        hits = [k for k in facts["plateau_at"] if start <= k < start + length]
        if hits:
            caught += 1
            first.append(hits[0] - start + 1)
    bar = flips(facts["holds"], facts["intervals"])
    base = series[0][0] if series and series[0][0] else None
    below = 0
    for k in facts["jumps"]:
        before = [f for f, ok in series[:k] if f is not None and ok]
        if base and before and max(before) < base:
            below += 1
    return {
        "source": source,
        "evaluations": len(series),
        "plateaus": len(labelled),
        "recovered": sum(1 for p in labelled if p[2]),
        "caught": caught,
        "first_signal_median": statistics.median(first) if first else None,
        "first_signal_max": max(first) if first else None,
        "plateau_moments": len(facts["plateau_at"]),
        "jumps": len(facts["jumps"]),
        "jumps_from_below": below,
        "flips": bar[0],
        "within_noise": bar[1],
        "parity": bar[2],
        "escalations": facts["escalations"],
        "self_escalated": facts["self_escalated"],
        "duplicates": facts["duplicates"],
        "contradicted": len(facts["contradicted"]),
        "stops": facts["stops"],
        "blocked": facts["blocked"],
        "regressed_stops": facts["regressed_stops"],
        "regressed_allowed": facts["regressed_allowed"],
    }


def corpus_sessions(args, out):
    """The corpus sessions of sessions.py, measured: (rows, skipped)."""
    rows, skipped = [], []
    folder = os.path.join(out, "sessions")
    os.makedirs(folder, exist_ok=True)
    for source, header, steps, facts in sessions.sessions(args.corpus, args.gadfly):
        if facts["evaluations"] < sessions.MIN_EVALUATIONS:
            skipped.append(f"{source} ({facts['evaluations']})")
            continue
        extra = args.spec_extra.replace("\\n", "\n")
        tl, spec = sessions.write(folder, source, header, steps, facts, extra)
        timeline = open(tl, encoding="utf-8").read()
        one = len(sessions.scenario_names(steps)) == 1
        nvidia = False if source.startswith(f"corpus:{sessions.YIBINLONG}") else True
        row = measure(source, timeline, tl, spec, args, one_scenario=one, nvidia=nvidia)
        row.update({k: facts[k] for k in ("gpu", "architecture", "baseline", "clock", "partial", "correct_unknown")
                    if facts.get(k) is not None})
        rows.append(row)
    return rows, skipped


def table(rows, title, stops=False):
    """Prints the rows and their totals; `stops`: the sources have stops
    (the corpus sessions), shown in two more columns."""
    cols = ["evals", "plateaus", "caught", "1st@", "recov", "jumps", "<base", "flips", "noise", "parity", "self-esc",
            "dup", "contra"] + (["stops", "blocked", "regress", "reg-ok"] if stops else [])
    width = max([58] + [len(r["source"]) for r in rows])
    print(f"\n{title}")
    print(f"{'source':{width}s} " + " ".join(f"{c:>8s}" for c in cols))
    tot = {k: 0 for k in ["evaluations", "plateaus", "caught", "recovered", "jumps", "jumps_from_below", "flips",
                          "within_noise", "parity", "self_escalated", "duplicates", "contradicted", "stops",
                          "blocked", "regressed_stops", "regressed_allowed"]}
    firsts = []
    for r in rows:
        for k in tot:
            tot[k] += r[k]
        if r["first_signal_median"] is not None:
            firsts.append(r["first_signal_median"])
        vals = [r["evaluations"], r["plateaus"], r["caught"], r["first_signal_median"] or "-", r["recovered"],
                r["jumps"], r["jumps_from_below"], r["flips"], r["within_noise"], r["parity"], r["self_escalated"],
                r["duplicates"], r["contradicted"]] + (
                    [r["stops"], r["blocked"], r["regressed_stops"], r["regressed_allowed"]] if stops else [])
        print(f"{r['source'][:width]:{width}s} " + " ".join(f"{str(v):>8s}" for v in vals))
    share = f"{tot['caught']}/{tot['plateaus']}" + (f" ({100 * tot['caught'] / tot['plateaus']:.0f}%)"
                                                     if tot["plateaus"] else "")
    tail = (f"stops judged {tot['stops']}, blocked {tot['blocked']}; regressed stops {tot['regressed_stops']} "
            f"(on a tree measurably slower than the best before it), allowed without the question "
            f"{tot['regressed_allowed']}" if stops
            else "regressed stops n/a (no stops in these logs)")
    print(f"all: {tot['evaluations']} evaluations; plateaus caught {share}, first signal at run "
          f"{statistics.median(firsts) if firsts else '-'} (median of the sources' medians); jumps {tot['jumps']}, "
          f"from below the baseline {tot['jumps_from_below']}; flips at the bar {tot['flips']} (within noise "
          f"{tot['within_noise']}, parity alternations {tot['parity']}); self-escalations "
          f"{tot['self_escalated']}; duplicate questions {tot['duplicates']}; contradicted questions "
          f"{tot['contradicted']}; {tail}")
    return tot


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gadfly", default="target/debug/gadfly")
    ap.add_argument("--mirrors", default="/work/.mirror")
    ap.add_argument("--logs")
    ap.add_argument("--out")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--hold-out", default="", help="1-based manifest rows reported apart (not used for tuning)")
    ap.add_argument("--spec-extra", default="", help="TOML appended to each spec, e.g. '[moments]\\nplateau_evaluations = 8'")
    ap.add_argument("--sessions", action="store_true",
                    help="also replay the corpus's GPU-kernel sessions (sessions.py), reported in a table of their own")
    ap.add_argument("--corpus", default=str(sessions.DEFAULT_CORPUS), help="the shared corpus (with --sessions)")
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="gadfly-suite-")
    os.makedirs(out, exist_ok=True)
    held = {int(x) for x in args.hold_out.split(",") if x.strip()}
    tuned, held_rows, skipped = [], [], []
    for i, row in enumerate(manifest(), start=1):
        text = read_log(row, args)
        if text is None:
            skipped.append(f"{row['repo']}:{row['path']}@{row['commit'][:7]}")
            continue
        r = measure(*log_timeline(row, text, args, out, i), args)
        (held_rows if i in held else tuned).append(r)
    session_rows, session_skipped = corpus_sessions(args, out) if args.sessions else ([], [])
    if args.json:
        result = {"tuned": tuned, "held_out": held_rows, "skipped": skipped}
        if args.sessions:
            result.update({"sessions": session_rows, "sessions_skipped": session_skipped})
        print(json.dumps(result, indent=2))
        return
    table(tuned, "sources looked at while building (tuning)")
    if held_rows:
        table(held_rows, "held-out sources (never looked at while building)")
    if skipped:
        print("skipped (no log: fetch the repository first): " + ", ".join(skipped))
    if args.sessions:
        table(session_rows, "corpus sessions (sessions.py; never looked at while tuning)", stops=True)
        if session_skipped:
            print(f"sessions skipped (fewer than {sessions.MIN_EVALUATIONS} evaluations found): "
                  + ", ".join(session_skipped))


if __name__ == "__main__":
    main()
