#!/usr/bin/env bash
# Runs every benchmark (`cargo bench`, arguments passed on) and ends with one
# table: each goal of BENCHMARKS.md, the figure measured in this run, and
# whether it is met. The verdicts are the benches' own (benches/support/
# goals.rs), computed from what they measured; nothing here is asserted.
#
#   benches/all.sh                     # everything (13 minutes on a 2-core VM)
#   benches/all.sh --bench overhead    # one bench, its goals only
#   BENCH_GOALS_OUT=goals.md benches/all.sh   # also keep the table
set -euo pipefail
cd "$(dirname "$0")/.."

goals=$(mktemp)
trap 'rm -f "$goals"' EXIT
status=0
BENCH_GOALS="$goals" cargo bench "$@" || status=$?

python3 - "$goals" "${BENCH_GOALS_OUT:-}" <<'EOF'
import datetime, json, os, sys

path, out = sys.argv[1], sys.argv[2]
rows = []
with open(path) as f:
    for n, line in enumerate(f, 1):
        line = line.strip()
        if not line:
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as e:
            print(f"{path}:{n}: not a JSON line ({e}): {line[:80]}", file=sys.stderr)

cpu = "unknown CPU"
try:
    with open("/proc/cpuinfo") as f:
        cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
except (OSError, StopIteration):
    pass
when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
head = f"Every goal, as this run measured it ({when}; {cpu}, {os.cpu_count()} cores)"
verdict = {True: "met", False: "**NOT MET**", None: "(no goal set)"}
lines = [head, "", "| bench | goal | measured | verdict |", "|---|---|---|---|"]
for r in rows:
    cell = lambda s: str(s).replace("|", "\\|")
    goal = cell(r["goal"]) + (" (a stricter reading than the goal's)" if r.get("stricter") else "")
    lines.append(f"| {cell(r.get('bench'))} | {goal} | {cell(r['measured'])} | {verdict[r.get('met')]} |")
judged = [r for r in rows if r.get("met") is not None and not r.get("stricter")]
missed = [r for r in judged if not r["met"]]
strict = [r for r in rows if r.get("stricter")]
lines.append("")
lines.append(f"{len(judged) - len(missed)} of {len(judged)} goals met" + (f"; not met: {'; '.join(r['goal'] for r in missed)}" if missed else ""))
if strict:
    lines.append(f"stricter readings: {sum(1 for r in strict if r['met'])} of {len(strict)} met")
text = "\n".join(lines)
print("\n" + text)
if out:
    with open(out, "w") as f:
        f.write(text + "\n")
EOF
exit "$status"
