"""The grader: never imports the candidate. For each scenario it draws the
inputs from the seed, runs the reference and the candidate in processes of
their own (interleaved, the order alternating), checks the candidate's
output against the reference's and writes one results line."""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = {"n1500": 1500, "n3000": 3000}
ROUNDS = 3
TOLERANCE = 1e-9


def run(module, inputs, d, tag):
    out = os.path.join(d, tag + ".json")
    p = subprocess.run([sys.executable, os.path.join(HERE, "runner.py"), module, inputs, out],
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        return None, "exit %d: %s" % (p.returncode, p.stderr.strip()[-300:])
    return json.load(open(out)), None


def cv(xs):
    m = statistics.mean(xs)
    return statistics.pstdev(xs) / m if m > 0 else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    candidate = os.path.abspath(os.path.join("kernel", "kernel.py"))
    reference = os.path.join(HERE, "reference.py")
    lines = []
    for name, n in SCENARIOS.items():
        rng = random.Random(a.seed * 7919 + n)
        xs = [rng.uniform(-1.0, 1.0) for _ in range(n)]
        line = {"scenario": name, "correct": False}
        with tempfile.TemporaryDirectory() as d:
            inputs = os.path.join(d, "in.json")
            json.dump(xs, open(inputs, "w"))
            ref_times, cand_times, ref_out, cand_out, error = [], [], None, None, None
            for r in range(ROUNDS):
                order = [("ref", reference), ("cand", candidate)]
                if r % 2:
                    order.reverse()
                for tag, module in order:
                    got, err = run(module, inputs, d, tag)
                    if err:
                        error = error or "%s: %s" % (tag, err)
                        continue
                    if tag == "ref":
                        ref_times += got["times"]
                        ref_out = got["out"]
                    else:
                        cand_times += got["times"]
                        cand_out = got["out"]
        if error or ref_out is None or cand_out is None:
            line["error"] = error or "no output"
        else:
            err = max((abs(p - q) for p, q in zip(ref_out, cand_out)), default=0.0)
            ok = len(cand_out) == len(ref_out) and err <= TOLERANCE
            line.update({
                "correct": ok,
                "max_abs_err_ref": err,
                "tolerance": TOLERANCE,
                "time_us": statistics.median(cand_times) * 1e6,
                "baseline_us": statistics.median(ref_times) * 1e6,
                "samples": len(cand_times),
                "cv": cv(cand_times),
                "baseline_cv": cv(ref_times),
            })
            if not ok:
                line["error"] = "max abs error %.3g beyond %.3g" % (err, TOLERANCE)
        lines.append(line)
    with open(a.out, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")


main()
