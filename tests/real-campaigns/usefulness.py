#!/usr/bin/env python3
"""A blind usefulness sample of the questions gadfly delivered while
replaying the real campaigns of MANIFEST.tsv, for a reviewer who never saw
gadfly's code.

    python3 tests/real-campaigns/suite.py --gadfly target/debug/gadfly --out /tmp/suite-out
    python3 tests/real-campaigns/usefulness.py /tmp/suite-out [--gadfly target/debug/gadfly] [--n 40] [--seed 46]
    python3 tests/real-campaigns/usefulness.py --tally ANSWERS.json

The suite's output directory holds each log's timeline and spec; each is
replayed again as suite.py does (autonomous, seed 1) to read the delivered
questions. 40 are drawn with a fixed seed: 2 from every source first, the
rest uniformly from all the others. usefulness/sample.md shows, for each,
the log's metric and direction, the last experiment rows the agent had
finished when the question reached it, the moment in plain words and the
question (its first line without the ", seen by DETECTOR" note);
usefulness/key.json says where each came from. --tally reads the
reviewer's {"1": {"useful": true, "why": "..."}, ...} and prints the
useful share overall, by moment kind, detector and source.
"""

import argparse
import collections
import glob
import json
import os
import random
import re
import subprocess
import sys

DEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "usefulness")
ROWS = 8
SEEN_BY = re.compile(r", seen by [^)]*\)")

INTRO = """# Blind usefulness sample

Each section below is a point in a real optimisation campaign that an AI agent ran
and published as an experiment log (one row per experiment: the figure it measured,
the status it recorded, its own description). At that point an automated supervisor
sent the agent the question shown. Judge, for each, whether asking that question
there was useful: likely to make the agent do something better next (find a real
problem, test an assumption that matters, change direction sensibly), given what the
log shows so far. Not whether it is well worded.

- Only rows the agent had finished when the question reached it are shown; nothing
  after. The question arrived together with the result of the agent's next experiment.
- In a question's first line, figures like `1.214x` are the campaign's figure relative
  to its first experiment, oriented so that higher is better (for a lower-is-better
  metric: first / current). "Scenario" there means the metric.
- Each question is verbatim but for one internal note removed from its first line.

Answer as JSON: `{"1": {"useful": true, "why": "..."}, "2": ...}`.
"""


def field(text, name):
    m = re.search(r"(?:^| )" + re.escape(name) + r"=(\S*)", text)
    return m.group(1) if m else None


def experiments(timeline):
    """One dict per experiment of the timeline (its lines are the report's steps)."""
    out, header = [], timeline[0]
    for step, e in enumerate(timeline):
        if e["kind"] == "tool_call" and e.get("tool") == "experiment":
            out.append({"n": len(out) + 1, "id": e["text"], "desc": "", "desc_step": step, "valid": False})
        elif not out:
            continue
        elif e["kind"] == "tool_result":
            x = out[-1]
            x["figure"] = field(e["text"], header["metric"]) or "-"
            x["status"] = field(e["text"], "status") or field(e["text"], "correctness") or "-"
        elif e["kind"] == "evaluation":
            sc = e.get("scenarios") or []
            out[-1]["valid"], out[-1]["desc_step"] = bool(sc and sc[0].get("correct")), step
        elif e["kind"] == "assistant_text":
            out[-1]["desc"], out[-1]["desc_step"] = e["text"], step
    return out


def plain(m, exps):
    """The moment in plain words."""
    kind, quote = m["moment"], m.get("quote")
    ev = m.get("evaluations") or []
    if kind == "start":
        return "the campaign starts; no experiment has run yet"
    if kind == "plateau":
        span = f"#{ev[0]} to #{ev[-1]}" if ev else "the last experiments"
        if "is unknown" in m["detail"]:
            return f"no gain: none of the last {len(ev)} experiments ({span}) produced a valid figure"
        return f"no gain: none of the last {len(ev)} experiments ({span}) beat the best figure before them by 1% or more"
    if quote is not None:
        said = {"correctness_dismissal": "brushing aside a failure or a correctness problem",
                "suspicious_gain": "claiming a large gain",
                "limit_claim": "claiming that a limit or an optimum was reached"}.get(kind, kind.replace("_", " "))
        n = next((x["n"] for x in exps if x["desc_step"] == m.get("message_step")), None)
        return f"the supervisor read the agent's note{f' on experiment #{n}' if n else ''} as {said}: \"{quote}\""
    if kind == "suspicious_gain":
        return f"a sudden large gain: experiment #{ev[-1]} beat the best before it by a factor of 1.5 or more"
    if kind == "correctness_dismissal":
        return f"experiment #{ev[-1]} failed (no valid result) right after #{ev[0]} had passed"
    return kind.replace("_", " ")


def collect(outdir, gadfly):
    qs = []
    for tl in sorted(glob.glob(os.path.join(outdir, "*.timeline.jsonl"))):
        name = tl[: -len(".timeline.jsonl")]
        r = subprocess.run([gadfly, "replay", tl, "--spec", name + ".toml", "--mode", "autonomous", "--seed", "1",
                            "--json"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"gadfly replay {tl} failed:\n{r.stderr}")
        report = json.loads(r.stdout)
        timeline = [json.loads(l) for l in open(tl)]
        exps = experiments(timeline)
        owner, path = os.path.basename(name).split("__", 1)
        columns = open(name).readline().strip().split("\t")
        camp = {"source": f"{owner.replace('+', '/')}:{path}", "metric": timeline[0]["metric"],
                "objective": timeline[0]["objective"], "where": timeline[0].get("where"), "columns": columns}
        moments = {}
        for s in report["steps"]:
            for d in s["did"]:
                if d["what"] == "moment" and d.get("question"):
                    moments[d["question"]["id"]] = dict(d, step=s["step"])
                elif d["what"] == "delivered" and d["question"]["source"] != "human":
                    m = moments[d["question"]["id"]]
                    qs.append({"camp": camp, "exps": exps, "moment": m, "step": s["step"], "q": d["question"]})
    return qs


def draw(qs, n, seed):
    rng = random.Random(seed)
    by = collections.defaultdict(list)
    for i, q in enumerate(qs):
        by[q["camp"]["source"]].append(i)
    picked = [i for src in sorted(by) for i in rng.sample(by[src], min(2, len(by[src])))]
    rest = [i for i in range(len(qs)) if i not in picked]
    picked += rng.sample(rest, min(n - len(picked), len(rest)))
    rng.shuffle(picked)
    return [qs[i] for i in picked]


def section(k, q):
    c, m = q["camp"], q["moment"]
    done = [x for x in q["exps"] if x["desc_step"] < q["step"]]
    lower = c["objective"] == "min"
    better = min if lower else max
    valid = [x for x in done if x["valid"]]
    lines = [f"## {k}", "",
             f"**Campaign:** `{c['source']}`" + (" (rows with " + ", ".join(f"{k}={v}" for k, v in c["where"].items()) + ")" if c["where"] else "") +
             f". Metric: `{c['metric']}`, {'lower' if lower else 'higher'} is better. "
             f"The log records: {', '.join(c['columns'])}.", ""]
    if done:
        first = done[0]
        lines.append(f"**First experiment:** #1 `{first['id']}`: {c['metric']} {first['figure']} — {first['desc']}")
        if valid:
            b = better(valid, key=lambda x: float(x["figure"]))
            lines.append(f"**Best valid so far:** #{b['n']}: {c['metric']} {b['figure']}")
        lines += ["", f"**Last {min(ROWS, len(done))} of {len(done)} finished experiments:**", ""]
        for x in done[-ROWS:]:
            d = x["desc"] if len(x["desc"]) <= 300 or x["desc_step"] == m.get("message_step") else x["desc"][:300] + "…"
            lines.append(f"- #{x['n']} `{x['id']}`: {c['metric']} {x['figure']}, status {x['status']}"
                         f"{'' if x['valid'] else ' (no valid figure)'} — {d}")
    lines += ["", f"**Moment:** {plain(m, q['exps'])}", "", "**Question:**", ""]
    lines += ["> " + l for l in SEEN_BY.sub(")", q["q"]["text"], count=1).split("\n")]
    return "\n".join(lines) + "\n"


def tally(answers, key):
    ans, key = json.load(open(answers)), json.load(open(key))
    print(f"useful: {sum(1 for k in key if ans.get(k, {}).get('useful'))}/{len(key)} "
          f"(answered {sum(1 for k in key if k in ans)})")
    for by in ("moment", "detector", "source"):
        groups = collections.defaultdict(list)
        for k, v in key.items():
            groups[v[by]].append(bool(ans.get(k, {}).get("useful")))
        print(f"\n| {by} | useful | of | share |\n|---|---:|---:|---:|")
        for g, u in sorted(groups.items()):
            print(f"| {g} | {sum(u)} | {len(u)} | {100 * sum(u) / len(u):.0f}% |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", help="suite.py's --out directory")
    ap.add_argument("--gadfly", default="target/debug/gadfly")
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--seed", type=int, default=46)
    ap.add_argument("--dest", default=DEST)
    ap.add_argument("--tally", metavar="ANSWERS.json")
    ap.add_argument("--tag", default="", help="name the sample and key sample-TAG.md and key-TAG.json (one per reading)")
    args = ap.parse_args()
    suffix = f"-{args.tag}" if args.tag else ""
    if args.tally:
        return tally(args.tally, os.path.join(args.dest, f"key{suffix}.json"))
    if not args.out:
        ap.error("the suite's output directory is needed")
    qs = collect(args.out, args.gadfly)
    for by in ("source", "moment"):
        c = collections.Counter(q["camp"]["source"] if by == "source" else q["moment"]["moment"] for q in qs)
        print(f"delivered by {by}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())) + f" (all {len(qs)})")
    asked = collections.Counter((q["camp"]["source"], q["q"]["source"]) for q in qs)
    print(f"distinct (source, entry) pairs: {len(asked)}; asked again in the same campaign: "
          f"{sum(v - 1 for v in asked.values())}")
    sample = draw(qs, args.n, args.seed)
    os.makedirs(args.dest, exist_ok=True)
    with open(os.path.join(args.dest, f"sample{suffix}.md"), "w") as f:
        f.write(INTRO + "".join("\n" + section(k, q) for k, q in enumerate(sample, 1)))
    key = {str(k): {"source": q["camp"]["source"], "step": q["step"], "moment_step": q["moment"]["step"],
                    "evaluation_count": q["moment"]["evaluation_count"], "moment": q["moment"]["moment"],
                    "detector": q["moment"]["detector"], "entry": q["q"]["source"], "question_id": q["q"]["id"],
                    "text": q["q"]["text"]} for k, q in enumerate(sample, 1)}
    with open(os.path.join(args.dest, f"key{suffix}.json"), "w") as f:
        json.dump(key, f, indent=1, ensure_ascii=False)
    print(f"wrote {len(sample)} questions to {args.dest}/sample{suffix}.md and key{suffix}.json")


if __name__ == "__main__":
    main()
