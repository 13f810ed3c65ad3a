#!/usr/bin/env python3
"""`gadfly redteam` on the attention campaign, on a GPU (issue #36): the CUDA
harness's exploit suite (harness/cuda/exploits, mapped by redteam/cuda/*.toml)
run as gadfly's red-team battery, each exploit in a throwaway copy of the
workspace through the campaign's own evaluation pipeline (snapshot, candidate
allow-list, pristine harness, build.py, evaluate.py, banned symbols,
predicate).  Run it on an H100/H200 with nvcc and PyTorch:

    cargo build --release --locked
    python3 harness/cuda/tools/gpu_redteam.py --gadfly target/release/gadfly --out /tmp/redteam-gpu

What it does, in a copy of examples/attention-h200 (setup.sh DEST):
  1. cuts campaign-initial.toml (faster than the initial kernel) to the two
     scenarios run_all.py uses and its short timing (--min-samples 5
     --max-samples 40 --min-time-s 0.02 --max-wall-s 10 --no-compare), and
     raises the bars (1.5x each scenario, 2x geomean) so that the unchanged
     initial kernel, the control, fails the predicate whatever the noise;
     every exploit that works clears them by far (--full keeps the spec's
     scenarios and timing);
  2. starts `gadfly serve` on a private data dir and port, creates the campaign
     (which calibrates the harness: OUT/calibration.txt);
  3. runs `gadfly redteam ID --json` and writes OUT/redteam.json (the report),
     OUT/redteam.md (the table) and OUT/serve.log.
Exit status: gadfly redteam's: 0 when every applicable attack held, 1 when one
broke the harness, 2 when the battery could not judge it (or this script failed).
Each held exploit is also compared with the reason run_all.py expects
(`expected_reason` in the report); a mismatch is listed, not a failure.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EXAMPLE = os.path.join(REPO, "examples", "attention-h200")
SCENARIOS = "b16_h16_s256_d64_full,b2_h12_s1000_d64_full"
TIMING = "--min-samples 5 --max-samples 40 --min-time-s 0.02 --max-wall-s 10 --no-compare"


def cut_spec(path: str, scenarios: str) -> None:
    """The short form of the campaign (see the module's doc)."""
    text = open(path).read()
    names = ", ".join(f'"{s}"' for s in scenarios.split(","))
    text = re.sub(r"scenarios = \[[^\]]*\]", f"scenarios = [{names}]", text, count=1, flags=re.S)
    text = re.sub(r'^(run = ".*?)"$', lambda m: f'{m.group(1)} --scenarios {scenarios} {TIMING}"', text, count=1,
                  flags=re.M)
    text = re.sub(r"^min_speedup = .*$", "min_speedup = 1.5", text, count=1, flags=re.M)
    if re.search(r"^min_geomean_speedup = ", text, flags=re.M):
        text = re.sub(r"^min_geomean_speedup = .*$", "min_geomean_speedup = 2.0", text, count=1, flags=re.M)
    else:
        text = text.replace("min_speedup = 1.5", "min_speedup = 1.5\nmin_geomean_speedup = 2.0", 1)
    open(path, "w").write(text)


def table(report: dict) -> str:
    lines = [f"red team of {report['campaign']} ({report['campaign_name']}), battery {report['battery']}: "
             f"{report['held']} held, {report['broken']} BROKEN, {report['not_applicable']} not applicable, "
             f"status {report['status']}" + (f" ({report['error']})" if report.get("error") else "")]
    control = report.get("control") or {}
    lines.append(f"control (the initial kernel): predicate {'holds' if control.get('holds') else 'fails'}, "
                 f"geomean {control.get('geomean_speedup')}")
    lines.append("")
    lines.append("| attack | result | caught by | expected reason | evidence |")
    lines.append("|---|---|---|---|---|")
    for a in report["attacks"]:
        if a["result"] == "not_applicable":
            continue
        what = (a.get("reason") or a.get("why") or "").replace("|", "/")[:200]
        exp = {True: "yes", False: "NO", None: "-"}[a.get("expected_reason")]
        lines.append(f"| {a['name']} | {a['result']} | {a.get('by', '-')} | {exp} | {what} |")
    skipped = [a["name"] for a in report["attacks"] if a["result"] == "not_applicable"]
    lines.append("")
    lines.append(f"not applicable ({len(skipped)}): {', '.join(skipped)}")
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gadfly", required=True, help="the gadfly binary")
    p.add_argument("--out", required=True, help="folder for redteam.json, redteam.md and serve.log")
    p.add_argument("--port", type=int, default=7981)
    p.add_argument("--spec", default="campaign-initial.toml", help="which of the example's campaigns")
    p.add_argument("--scenarios", default=SCENARIOS, help="the scenarios of the cut spec")
    p.add_argument("--full", action="store_true", help="keep the spec's scenarios, timing and bars")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    gadfly = os.path.abspath(a.gadfly)
    root = tempfile.mkdtemp(prefix="gadfly-redteam-")
    dest = os.path.join(root, "attn")
    subprocess.run(["bash", os.path.join(EXAMPLE, "setup.sh"), dest], check=True, capture_output=True)
    spec = os.path.join(dest, a.spec)
    if not a.full:
        cut_spec(spec, a.scenarios)
    data = os.path.join(root, "data")
    url = f"http://127.0.0.1:{a.port}"
    env = dict(os.environ, GADFLY_URL=url)
    env.pop("GADFLY_TOKEN", None)
    serve_log = open(os.path.join(a.out, "serve.log"), "w")
    daemon = subprocess.Popen([gadfly, "serve", "--listen", f"127.0.0.1:{a.port}", "--data-dir", data],
                              stdout=serve_log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(url + "/health", timeout=2).read()
                break
            except Exception:
                if daemon.poll() is not None:
                    print("gadfly serve exited; see serve.log", file=sys.stderr)
                    return 2
                time.sleep(0.1)
        with open(os.path.join(data, "token")) as f:
            env["GADFLY_TOKEN"] = f.read().strip()
        # `campaign create` calibrates the harness first (the initial kernel
        # against itself, [calibration] runs times): kept as calibration.txt.
        t0 = time.monotonic()
        created = subprocess.run([gadfly, "campaign", "create", spec], env=env, check=True, capture_output=True,
                                 text=True)
        cid = created.stdout.strip()
        with open(os.path.join(a.out, "calibration.txt"), "w") as f:
            f.write(created.stderr + f"{time.monotonic() - t0:.0f} s\n")
        print(created.stderr, flush=True)
        print(f"campaign {cid} ({a.spec}, {'full' if a.full else 'scenarios ' + a.scenarios}); the battery runs...",
              flush=True)
        t0 = time.monotonic()
        out = subprocess.run([gadfly, "redteam", cid, "--json"], env=env, capture_output=True, text=True)
        sys.stderr.write(out.stderr)
        if not out.stdout.strip():
            print(f"gadfly redteam printed no report (exit {out.returncode})", file=sys.stderr)
            return 2
        report = json.loads(out.stdout)
        with open(os.path.join(a.out, "redteam.json"), "w") as f:
            json.dump(report, f, indent=1)
        text = table(report) + f"\n{time.monotonic() - t0:.0f} s; exit {out.returncode}\n"
        with open(os.path.join(a.out, "redteam.md"), "w") as f:
            f.write(text)
        print(text)
        cuda = [x for x in report["attacks"] if x["source"].startswith("redteam/cuda/")]
        mismatched = [x["name"] for x in cuda if x.get("expected_reason") is False]
        if mismatched:
            print("held, but not for the reason run_all.py expects: " + ", ".join(mismatched))
        return out.returncode
    finally:
        if daemon.poll() is None:
            os.killpg(daemon.pid, signal.SIGTERM)
            try:
                daemon.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(daemon.pid, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
