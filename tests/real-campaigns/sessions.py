#!/usr/bin/env python3
"""Real agent sessions of the shared corpus as gadfly replay timelines
(issue 46 item 7): the optimisation sessions whose transcripts show the
benchmark's output, so that the real-campaign suite (suite.py) measures
gadfly's judgment on whole sessions (the agent's words, its tool calls and
results, its evaluations) as well as on experiment logs.

    python3 tests/real-campaigns/sessions.py [--corpus DIR] [--gadfly BIN] [--out DIR] [--json]

prints, per session, the evaluations found (and writes each timeline and
its spec to --out); suite.py --sessions replays them. The corpus
(default ../shared/corpus beside the repository; its README.md gives the
provenance and formats) is read, never copied: nothing of it is in this
repository. The HTML and markup are read with tests/moments/corpus.py.

Sources and how an evaluation is found in each (one pattern per format,
the constants below; what a pattern cannot see is left out, never guessed):

- mixed-agents-infatoshi-kernelbench.com: 40 HTML pages, one autonomous
  run each (a problem directory with reference.py, check.py and
  benchmark.py; the agent writes solution.py). Every `div.event` becomes a
  step: an assistant's `div.body` is `assistant_text` (the last one, the
  run's final message, is the `stop`), its `div.tool-call` / `div.tool`
  a `tool_call`, a tool event a `tool_result`, a user event `human`.
  The benchmark prints one line per shape and variant: `KB_VARIANT`
  (`shape=N variant=eager|solution ... ms=T`, the older problems) or
  `KB_DECODE` (`shape ctx=N: solution T ms/tok ... | baseline B ms/tok`,
  the decode megakernel), and ends with `peak_fraction:` or `RESULT:`
  (`KB_END`). A run is an evaluation when it ends, or when a shape
  already measured appears again (a new run). Output split over several
  tool results (a process polled for its output) is joined. Each shape is
  a scenario: `time_us` the solution's time, `baseline_us` the
  reference's (the PyTorch eager variant, or the printed baseline): the
  eager time of the same output, else the latest printed before, else
  the first printed after (the reference does not change during a run;
  agents often filter the benchmark to the solution's lines). Correct is
  check.py's verdict (`CHECK`: a line `PASS`, or one starting `FAIL`) in
  the same output, else the latest before, else the first after; with
  none at all, correct (counted in `correct_unknown`). The page has no
  clock per event: `t` spreads the events evenly over the run's
  `elapsed_seconds` (its result.json), an approximation of the cadence.
  The pages cut long tool output ("... (N more chars)"), and agents filter
  the benchmark's lines (`| grep`, `| tail`): the session's scenarios are
  its most frequent set of shapes; a run that lacks one of them is left
  out (`partial`), one with more keeps only those; a run cut before its
  first shape is not seen. Harness:
  `architecture` from the GPU that nvidia-smi printed in the run (some
  runs went to an H100 or a B200), else the GPU the prompt names.
- claude-code-vsla: Claude Code JSONL, imported by `gadfly replay import
  claude-code` (real timestamps, turns and stops); an evaluation is added
  after each tool result that holds the library's own benchmark suite
  (`VSLA_SECTION` CPU/GPU sections, `VSLA_OP` operation headers,
  `VSLA_SIZE` `Size N... Tμs` lines): one scenario per GPU operation and
  size, against the first evaluation's time of that scenario (the suite
  prints no reference of the same operation: cuBLAS and cuFFT lines carry
  no time), correct (the suite prints no correctness). The GPU is an RTX
  4060 Laptop (Ada), a family gadfly has no name for: `device = "gpu"`.
- mixed-agents-yibinlong-anthropic_performance_take_home: agent-written
  reports, no turns. `docs/reports/task_<n>_report.md` in task order, 300
  s apart (no clock): each report is `assistant_text`, with an evaluation
  when it states the cycle count (`YB_CYCLES`), `time_us` the cycles
  against the take-home's starting point of 147734 cycles as
  `baseline_us` (the reports quote it), correct unless the report says
  the correctness test failed (`YB_CORRECT`). A simulated VLIW machine:
  no architecture, no device.

A session with fewer than 3 evaluations is skipped and named, with the
count. Each timeline's spec: `optimizes = "kernel"`, the scenarios found,
`min_speedup = 1.0` against `baseline_us` (the reference where the output
prints one: kernelbench, yibinlong; the first evaluation for vsla).

Standard library only (Python 3.11).
"""

import argparse
import ast
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "moments"))
import corpus  # noqa: E402  (tests/moments/corpus.py: HTML tree and text)

MIN_EVALUATIONS = 3
DEFAULT_CORPUS = HERE.parents[1].parent / "shared" / "corpus"

KERNELBENCH = "mixed-agents-infatoshi-kernelbench.com"
VSLA = "claude-code-vsla"
YIBINLONG = "mixed-agents-yibinlong-anthropic_performance_take_home"

# ---------------------------------------------------------------- patterns --
# kernelbench benchmark.py: `shape=0 variant=solution tflops=.. gbps=.. ms=0.413`
KB_VARIANT = re.compile(
    r"^shape=(?P<shape>\d+) variant=(?P<variant>eager|solution)\s+tflops=\S+\s+gbps=\S+\s+ms=(?P<ms>\d+(?:\.\d+)?)\b",
    re.M)
# the decode megakernel's benchmark: `shape ctx=2048: solution 1.181 ms/tok (846 tok/s) | baseline 5.745 ms/tok | ...`
KB_DECODE = re.compile(
    r"^shape (?P<shape>ctx=\d+): solution (?P<ms>\d+(?:\.\d+)?) ms/tok\b[^|\n]*\| baseline (?P<base>\d+(?:\.\d+)?) ms/tok",
    re.M)
# the last lines of a benchmark run
KB_END = re.compile(r"^(?:peak_fraction: \d|RESULT: [A-Z])", re.M)
# check.py (and the agents' own correctness scripts) print PASS, or FAIL: why
CHECK = re.compile(r"^\s*(?P<verdict>PASS|FAIL)(?::.*|\s*)$", re.M)
# nvidia-smi's device line, or a prompt's target
GPU = re.compile(r"NVIDIA (?P<gpu>H100|H200|B200|B300|GB200|A100|RTX PRO 6000)|(?P<prompt>RTX PRO 6000|H100|B200)")
ARCHITECTURE = {"H100": "hopper", "H200": "hopper", "B200": "blackwell", "B300": "blackwell",
                "GB200": "blackwell", "A100": "ampere", "RTX PRO 6000": "blackwell"}
ELAPSED = re.compile(r'"elapsed_seconds":\s*(\d+(?:\.\d+)?)')

# vsla's bench suite: sections, operations, one line per size
VSLA_SECTION = re.compile(r"^\S*\s*(?P<where>CPU|GPU) BENCHMARKS\s*$")
VSLA_OP = re.compile(r"^  (?P<op>\w+):\s*$")
VSLA_SIZE = re.compile(r"^    Size (?P<size>\d+)\.\.\. (?P<us>\d+(?:\.\d+)?)μs\s*$")

# yibinlong's task reports: `CYCLES: 2637`, "cycles reported at **2177**", "Observed cycles:** `2660`"
YB_CYCLES = re.compile(r"(?i)\bcycles(?::|\s+reported\s+at)[*`\s]*(?P<cycles>\d[\d,]{2,})")
YB_CORRECT = re.compile(r"(?i)\bcorrectness(?:\s+tests?)?:?[*\s]*(?P<verdict>passed|failed)")
YB_BASELINE_CYCLES = 147734


# ----------------------------------------------------------------- helpers --

def step(t, kind, **kw):
    return {"t": round(t, 3), "kind": kind, **kw}


def evaluation(t, scenarios):
    return step(t, "evaluation", scenarios=[
        {"scenario": name, "correct": ok, "time_us": round(time_us, 4), "baseline_us": round(base_us, 4)}
        for name, ok, time_us, base_us in scenarios])


def tool_text(text):
    """Some harnesses print a tool's output as a Python list of
    `{'type': 'input_text', 'text': ...}` items (escaped newlines): the text."""
    s = text.strip()
    if s.startswith("[{") and "'text'" in s:
        try:
            items = ast.literal_eval(s)
            return "\n".join(i.get("text", "") for i in items if isinstance(i, dict))
        except (ValueError, SyntaxError):
            return s.replace("\\n", "\n")
    return text


def top_events(root):
    """The page's div.event elements that are not inside another event."""
    out = []

    def walk(node):
        for c in node.children:
            if isinstance(c, corpus.Node):
                if c.tag == "div" and "event" in c.classes:
                    out.append(c)
                else:
                    walk(c)

    walk(root)
    return out


def find(node, cls):
    return [n for n in node.iter() if cls in n.classes]


# ------------------------------------------------------ kernelbench runs --

class KernelRuns:
    """Benchmark runs of one kernelbench session, fed tool outputs in order."""

    def __init__(self):
        self.pending = {}  # shape -> [solution ms, baseline ms or None]
        self.pending_at = None
        self.pending_check = None
        self.runs = []  # (step index, {shape: [ms, base]}, check verdict in the output)
        self.eager = collections.defaultdict(list)  # shape -> [(index, ms)]
        self.checks = []  # (index, correct)

    def flush(self):
        if self.pending:
            self.runs.append((self.pending_at, self.pending, self.pending_check))
        self.pending, self.pending_at, self.pending_check = {}, None, None

    def feed(self, index, text):
        verdicts = [m["verdict"] for m in CHECK.finditer(text)]
        check = None
        if verdicts:
            check = "FAIL" not in verdicts
            self.checks.append((index, check))
        lines = []
        for m in KB_VARIANT.finditer(text):
            lines.append((m.start(), f"shape={m['shape']}", m["variant"], float(m["ms"]), None))
        for m in KB_DECODE.finditer(text):
            lines.append((m.start(), m["shape"], "solution", float(m["ms"]), float(m["base"])))
        ends = [m.start() for m in KB_END.finditer(text)]
        for pos, shape, variant, ms, base in sorted(lines):
            while ends and ends[0] < pos:  # a run ended before this line
                ends.pop(0)
                self.flush()
            if variant == "eager":
                self.eager[shape].append((index, ms))
                if shape in self.pending and self.pending[shape][1] is None:
                    self.pending[shape][1] = ms
                continue
            if shape in self.pending:  # the same shape again: a new run
                self.flush()
            if not self.pending:
                self.pending_at = index
            self.pending[shape] = [ms, base]
            if check is not None:
                self.pending_check = check
            # an eager line printed just before the solution's, in this output
            if base is None:
                before = [e for e in self.eager[shape] if e[0] == index]
                if before:
                    self.pending[shape][1] = before[-1][1]
        if ends and self.pending:
            if check is not None:
                self.pending_check = check
            self.pending_at = index
            self.flush()

    def nearest(self, series, index):
        """The latest value at or before index, else the first after."""
        before = [v for i, v in series if i <= index]
        if before:
            return before[-1]
        after = [v for i, v in series if i > index]
        return after[0] if after else None

    def evaluations(self):
        """([(index, [(name, correct, time_us, baseline_us)])], counts)."""
        self.flush()
        counts = collections.Counter()
        sets = collections.Counter(frozenset(s) for _, s, _ in self.runs)
        full = max(sets, key=lambda k: (sets[k], len(k))) if sets else frozenset()
        out = []
        for index, shapes, check in self.runs:
            if not full <= set(shapes):
                counts["partial"] += 1
                continue
            shapes = {k: v for k, v in shapes.items() if k in full}
            ok = check if check is not None else self.nearest(self.checks, index)
            if ok is None:
                counts["correct_unknown"] += 1
                ok = True
            scenarios = []
            for name in sorted(shapes, key=lambda s: (len(s), s)):
                ms, base = shapes[name]
                if base is None:
                    base = self.nearest(self.eager[name], index)
                if base is None:
                    counts["no_reference"] += 1
                    break
                scenarios.append((name, ok, ms * 1000, base * 1000))
            else:
                out.append((index, scenarios))
        return out, counts


def kernelbench_session(path):
    """A kernelbench HTML page: (timeline steps, facts)."""
    root = corpus.parse_html(path)
    events = top_events(root)
    # the run's result.json, outside the timeline (a tool output may show another run's)
    m = ELAPSED.search(corpus.html_text(root, skip=lambda n: n.tag == "div" and "event" in n.classes))
    elapsed = float(m.group(1)) if m else 10.0 * len(events)
    per = elapsed / max(len(events), 1)
    steps, runs, gpus, prompt_gpu = [], KernelRuns(), collections.Counter(), None
    at = {}  # tool output index -> position in steps
    for i, ev in enumerate(events):
        t = i * per
        role = ev.attrs.get("data-role")
        if role == "user":
            text = corpus.html_text(ev, skip=lambda n: "role" in n.classes)
            if text:
                steps.append(step(t, "human", text=text))
                if prompt_gpu is None:
                    for g in GPU.finditer(text):
                        prompt_gpu = g["gpu"] or g["prompt"]
                        break
        elif role == "assistant":
            for b in ev.kids("body"):
                text = corpus.html_text(b)
                if text:
                    steps.append(step(t, "assistant_text", text=text))
            for call in [n for n in ev.children if isinstance(n, corpus.Node)
                         and ("tool-call" in n.classes or "tool" in n.classes)]:
                names = find(call, "name") + find(call, "nm")
                tool = corpus.html_text(names[0]) if names else "tool"
                text = corpus.html_text(call, skip=lambda n: "name" in n.classes or "nm" in n.classes
                                        or n.tag == "summary")
                text = re.sub(r"^\[\]\s*", "", text)
                steps.append(step(t, "tool_call", tool=tool or "tool", text=text))
        elif role == "tool":
            text = tool_text(corpus.html_text(ev, skip=lambda n: "role" in n.classes or n.tag == "summary"))
            steps.append(step(t, "tool_result", text=text))
            at[i] = len(steps)
            for g in GPU.finditer(text):
                if g["gpu"]:
                    gpus[g["gpu"]] += 1
            runs.feed(i, text)
    found, counts = runs.evaluations()
    # each evaluation goes right after the tool result that ended its run
    for index, scenarios in reversed(found):
        steps.insert(at[index], evaluation(index * per, scenarios))
    last = max((k for k, s in enumerate(steps) if s["kind"] == "assistant_text"), default=None)
    if last is not None and last > max((k for k, s in enumerate(steps) if s["kind"] == "evaluation"), default=-1):
        steps[last]["kind"] = "stop"
    gpu = gpus.most_common(1)[0][0] if gpus else prompt_gpu
    facts = {"evaluations": len(found), "architecture": ARCHITECTURE.get(gpu), "gpu": gpu, "elapsed_found": bool(m),
             "baseline": "reference (PyTorch eager, or the printed baseline)", "clock": "interpolated",
             "elapsed_seconds": elapsed, **counts}
    return steps, facts


# ------------------------------------------------------------- vsla runs --

def vsla_scenarios(text):
    """The GPU section of one output of vsla's bench suite: {name: μs}."""
    where, op, out = None, None, {}
    for line in text.splitlines():
        if m := VSLA_SECTION.match(line):
            where, op = m["where"], None
        elif m := VSLA_OP.match(line):
            op = m["op"]
        elif (m := VSLA_SIZE.match(line)) and where == "GPU" and op:
            out[f"{op}/{m['size']}"] = float(m["us"])
    return out


def vsla_session(path, gadfly):
    """A vsla Claude Code session, imported by gadfly, with evaluations added."""
    r = subprocess.run([gadfly, "replay", "import", "claude-code", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{gadfly} replay import claude-code {path} failed ({r.returncode}): {r.stderr.strip()}")
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    header, steps = lines[0], lines[1:]
    measured = []
    for k, s in enumerate(steps):
        if s["kind"] == "tool_result":
            found = vsla_scenarios(s.get("text", ""))
            if found:
                measured.append((k, found))
    counts = collections.Counter()
    sets = collections.Counter(frozenset(f) for _, f in measured)
    full = max(sets, key=lambda k: (sets[k], len(k))) if sets else frozenset()
    first, kept = None, []
    for k, found in measured:
        if not full <= set(found):
            counts["partial"] += 1
            continue
        found = {k: v for k, v in found.items() if k in full}
        first = first or found
        kept.append((k, [(n, True, found[n], first[n]) for n in sorted(found)]))
    for k, scenarios in reversed(kept):
        steps.insert(k + 1, evaluation(steps[k]["t"], scenarios))
    facts = {"evaluations": len(kept), "architecture": None, "device": "gpu", "gpu": "RTX 4060 Laptop",
             "baseline": "first evaluation", "clock": "recorded", **counts}
    return steps, facts, header


# ------------------------------------------------------- yibinlong reports --

def yibinlong_session(folder):
    reports = sorted((folder / "docs" / "reports").glob("task_*_report.md"),
                     key=lambda p: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", p.name)])
    steps, n = [], 0
    for k, p in enumerate(reports):
        text = p.read_text(encoding="utf-8")
        t = k * 300.0
        steps.append(step(t, "assistant_text", text=text.strip()))
        m = YB_CYCLES.search(text)
        if m:
            c = YB_CORRECT.search(text)
            ok = not (c and c["verdict"].lower() == "failed")
            steps.append(evaluation(t, [("cycles", ok, float(m["cycles"].replace(",", "")), YB_BASELINE_CYCLES)]))
            n += 1
    facts = {"evaluations": n, "architecture": None, "baseline": f"the starting point, {YB_BASELINE_CYCLES} cycles",
             "clock": "none (300 s apart)", "reports": len(reports)}
    return steps, facts


# ------------------------------------------------------------------ specs --

def spec_text(name, scenarios, facts, extra=""):
    lines = [f'name = "{name}"', 'workspace = "."', 'goal = "a faster kernel than the reference on every scenario"',
             'optimizes = "kernel"']
    if facts.get("architecture"):
        lines.append(f'architecture = "{facts["architecture"]}"')
    elif facts.get("device"):
        lines.append(f'device = "{facts["device"]}"')
    lines += ["", "[harness]", 'run = "true {results}"', f"scenarios = {json.dumps(scenarios)}", "",
              "[predicate]", "min_speedup = 1.0", "", "[questions]", "withhold = 0", ""]
    return "\n".join(lines) + extra


def scenario_names(steps):
    names = []
    for s in steps:
        for sc in s.get("scenarios", []) if s["kind"] == "evaluation" else []:
            if sc["scenario"] not in names:
                names.append(sc["scenario"])
    return names


def sessions(corpus_dir, gadfly=None):
    """Yield (source, header, steps, facts) for every chosen corpus session."""
    corpus_dir = Path(corpus_dir)
    kb = corpus_dir / KERNELBENCH
    for p in sorted(kb.glob("*.html")):
        steps, facts = kernelbench_session(p)
        header = {"v": 1, "kind": "header", "source": "kernelbench-html", "clock": "interpolated",
                  "file": f"{KERNELBENCH}/{p.name}"}
        yield f"corpus:{KERNELBENCH}/{p.name}", header, steps, facts
    if gadfly:
        for p in sorted((corpus_dir / VSLA).glob("*.jsonl")):
            steps, facts, header = vsla_session(p, gadfly)
            header["file"] = f"{VSLA}/{p.name}"
            yield f"corpus:{VSLA}/{p.name}", header, steps, facts
    yb = corpus_dir / YIBINLONG
    if yb.is_dir():
        steps, facts = yibinlong_session(yb)
        header = {"v": 1, "kind": "header", "source": "agent-reports", "clock": "none", "file": f"{YIBINLONG}/docs/reports"}
        yield f"corpus:{YIBINLONG}/docs/reports", header, steps, facts


def write(out, source, header, steps, facts, extra=""):
    """Write one session's timeline and spec; return their paths."""
    name = re.sub(r"[^\w.-]+", "_", source.removeprefix("corpus:"))
    tl = os.path.join(out, name + ".timeline.jsonl")
    with open(tl, "w", encoding="utf-8") as f:
        for obj in [header] + steps:
            f.write(json.dumps(obj, ensure_ascii=False) + "\n")
    spec = os.path.join(out, name + ".toml")
    scenarios = scenario_names(steps) or ["none"]
    with open(spec, "w", encoding="utf-8") as f:
        f.write(spec_text(name[:60], scenarios, facts, extra))
    return tl, spec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    ap.add_argument("--gadfly", help="needed for the Claude Code sessions (vsla), imported by gadfly")
    ap.add_argument("--out")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="gadfly-sessions-")
    os.makedirs(out, exist_ok=True)
    rows = []
    for source, header, steps, facts in sessions(args.corpus, args.gadfly):
        kept = facts["evaluations"] >= MIN_EVALUATIONS
        if kept:
            facts["timeline"], facts["spec"] = write(out, source, header, steps, facts)
        rows.append({"source": source, "kept": kept, **facts})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    for r in rows:
        more = ", ".join(f"{k} {r[k]}" for k in ("partial", "correct_unknown", "no_reference") if r.get(k))
        print(f"{'kept ' if r['kept'] else 'SKIP '} {r['evaluations']:3d} evaluations  {r['source']}"
              f"  [{r.get('gpu') or '-'}{'; ' + more if more else ''}]")
    kept = [r for r in rows if r["kept"]]
    print(f"{len(rows)} sessions, {len(kept)} kept with {sum(r['evaluations'] for r in kept)} evaluations; "
          f"skipped (fewer than {MIN_EVALUATIONS}): {len(rows) - len(kept)}; written to {out}")


if __name__ == "__main__":
    main()
