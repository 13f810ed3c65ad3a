#!/usr/bin/env python3
"""Replays the real optimization campaigns of MANIFEST.tsv through gadfly
and prints what gadfly would have asked: moments by kind, questions by
moment and bank group, how many name their evidence, withheld moments, and
`gadfly bank stats --replay` over every replay (the uplift rows).

    python3 tests/real-campaigns/sweep.py --gadfly target/debug/gadfly \
        [--mirrors /work/.mirror | --logs DIR] [--seeds 8] [--withhold 0.25] \
        [--out DIR] [--json]

Each log is read at the commit the manifest names from a mirror of its
repository (`--mirrors`: OWNER+NAME/repo, a bare git directory, as the
session tool `fetch` leaves it), or from `--logs DIR/OWNER+NAME/PATH`.
A log that is not there is skipped and named. Nothing here is a test: the
figures are what the closing notes quote, with this command.
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

SPEC = """name = "{name}"
workspace = "."
goal = "a better {metric} than the first experiment"
optimizes = "{optimizes}"

[harness]
run = "true {{results}}"
scenarios = ["{metric}"]

[predicate]
min_speedup = 1.0

[questions]
withhold = {withhold}
"""


def manifest():
    rows = []
    with open(os.path.join(HERE, "MANIFEST.tsv")) as f:
        lines = [l.rstrip("\n") for l in f if l.strip() and not l.startswith("#")]
    header = lines[0].split("\t")
    for l in lines[1:]:
        rows.append(dict(zip(header, l.split("\t"))))
    return rows


def read_log(row, args):
    owner_name = row["repo"].replace("/", "+")
    if args.logs:
        p = os.path.join(args.logs, owner_name, row["path"])
        return open(p).read() if os.path.exists(p) else None
    git = os.path.join(args.mirrors, owner_name, "repo")
    r = subprocess.run(["git", "--git-dir", git, "show", f"{row['commit']}:{row['path']}"],
                       capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}")
    return r


def names_evidence(text):
    return text.startswith("About ") or text.startswith("You wrote: ")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gadfly", default="target/debug/gadfly")
    ap.add_argument("--mirrors", default="/work/.mirror")
    ap.add_argument("--logs")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--withhold", type=float, default=0.25)
    ap.add_argument("--out")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="gadfly-sweep-")
    os.makedirs(out, exist_ok=True)

    moments = collections.Counter()
    groups = collections.defaultdict(set)
    asked = collections.Counter()
    unnamed = []
    withheld = 0
    per_log = []
    reports = []
    skipped = []
    for i, row in enumerate(manifest()):
        text = read_log(row, args)
        name = f"{row['repo'].replace('/', '+')}__{row['path'].replace('/', '_')}"
        if text is None:
            skipped.append(f"{row['repo']}:{row['path']}@{row['commit'][:7]}")
            continue
        log = os.path.join(out, name)
        open(log, "w").write(text)
        cmd = [args.gadfly, "replay", "import", "experiments", log, "--metric", row["metric"]]
        if row["objective"] == "max":
            cmd.append("--maximize")
        if row["where"] != "-":
            cmd += ["--where", row["where"]]
        timeline = os.path.join(out, name + ".timeline.jsonl")
        r = run(cmd)
        open(timeline, "w").write(r.stdout)
        spec = os.path.join(out, name + ".toml")
        open(spec, "w").write(SPEC.format(name=f"log-{i}", metric=row["metric"], optimizes=row.get("optimizes", "kernel"), withhold=args.withhold))
        evaluations = sum(1 for l in r.stdout.splitlines() if '"kind":"evaluation"' in l.replace(" ", ""))
        here = collections.Counter()
        for seed in range(1, args.seeds + 1):
            report = os.path.join(out, f"{name}.seed{seed}.json")
            r = run([args.gadfly, "replay", timeline, "--spec", spec, "--mode", "autonomous", "--seed", str(seed), "--json"])
            open(report, "w").write(r.stdout)
            reports.append(report)
            rep = json.loads(r.stdout)
            for step in rep["steps"]:
                for d in step["did"]:
                    if d["what"] == "moment":
                        moments[d["moment"]] += 1
                        here[d["moment"]] += 1
                        if d["outcome"] == "withheld":
                            withheld += 1
                    if d["what"] == "delivered":
                        q = d["question"]
                        m = q.get("moment") or "?"
                        if q["source"] == "human":
                            continue
                        asked[m] += 1
                        groups[m].add(q["source"].rsplit("-", 1)[0])
                        if m != "start" and not names_evidence(q["text"]):
                            unnamed.append((name, seed, m, q["text"][:120]))
        per_log.append({"log": f"{row['repo']}:{row['path']}", "evaluations": evaluations,
                        "moments_per_seed": {k: v / args.seeds for k, v in sorted(here.items())}})

    stats = run([args.gadfly, "bank", "stats", "--json"] + [a for r in reports for a in ("--replay", r)])
    stats_text = run([args.gadfly, "bank", "stats"] + [a for r in reports for a in ("--replay", r)]).stdout
    total = sum(v for k, v in asked.items() if k != "start")
    summary = {
        "logs": len(per_log), "skipped": skipped, "seeds": args.seeds, "withhold": args.withhold,
        "per_log": per_log, "moments": dict(moments), "withheld": withheld,
        "asked_by_moment": dict(asked), "groups_by_moment": {k: sorted(v) for k, v in groups.items()},
        "asked_not_start": total, "unnamed": len(unnamed), "unnamed_examples": unnamed[:5],
        "uplift": json.loads(stats.stdout).get("uplift", []), "out": out,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(f"{len(per_log)} logs replayed under {args.seeds} seeds, withhold {args.withhold} (files in {out})")
    for s in skipped:
        print(f"  skipped (not found): {s}")
    for p in per_log:
        print(f"  {p['log']}: {p['evaluations']} evaluations, moments per seed {p['moments_per_seed']}")
    print(f"moments: {dict(moments)}; withheld: {withheld}")
    for m in sorted(asked):
        print(f"  {m}: {asked[m]} questions from {len(groups[m])} groups: {', '.join(sorted(groups[m]))}")
    print(f"questions past the start: {total}; naming no evidence: {len(unnamed)}")
    for u in unnamed[:5]:
        print(f"  unnamed: {u}")
    print(stats_text)


if __name__ == "__main__":
    main()
