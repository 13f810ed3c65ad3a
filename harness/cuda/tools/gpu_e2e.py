#!/usr/bin/env python3
"""The attention campaign end to end on a GPU: the real daemon, the real
campaigns, the real Stop hook, the real CUDA harness.  Run it on an H100/H200
whenever the harness, the results contract or the predicate changes; its
output is committed under harness/cuda/results/ (see the README there).

    python3 harness/cuda/tools/gpu_e2e.py --gadfly target/release/gadfly --out /tmp/e2e

What it does, in a copy of examples/attention-h200 (setup.sh DEST):
  1. starts `gadfly serve` on a private data dir and port;
  2. creates both campaigns on the same workspace: campaign-initial.toml
     (faster than the initial kernel) and campaign.toml (the study's goal:
     at least the comparison, torch's flash backend, on every scenario);
  3. plays an agent: puts each kernel in workspace/kernel/attention.cu and
     tries to stop through `gadfly hook claude-code stop` with the campaign's
     hook token (what an agent has) and the daemon's key pinned, and reads the
     verdict with `gadfly eval`;
  4. asserts: the initial, wrong and cheating kernels are blocked; the good
     kernel is allowed under the initial-kernel goal and blocked under the
     comparison goal, the block naming every scenario with both ratios.
Exit status 0 only when every expectation holds.  Everything it saw goes to
OUT/e2e.log (human-readable) and OUT/e2e.json (every decision and verdict).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EXAMPLE = os.path.join(REPO, "examples", "attention-h200")


class Run:
    def __init__(self, args):
        self.args = args
        self.gadfly = os.path.abspath(args.gadfly)
        os.makedirs(args.out, exist_ok=True)
        self.log_file = open(os.path.join(args.out, "e2e.log"), "w")
        self.record = {"steps": [], "checks": []}
        self.failed = []

    def log(self, *parts):
        line = " ".join(str(p) for p in parts)
        print(line, flush=True)
        self.log_file.write(line + "\n")
        self.log_file.flush()

    def sh(self, argv, ok=(0,), **kw):
        self.log("$", " ".join(argv))
        out = subprocess.run(argv, capture_output=True, text=True, **kw)
        if out.returncode not in ok:
            self.log(out.stdout[-4000:], out.stderr[-4000:])
            raise SystemExit(f"{argv[0]} failed with {out.returncode}")
        return out.stdout

    def check(self, what, ok, detail=""):
        self.record["checks"].append({"check": what, "ok": bool(ok), "detail": detail})
        self.log(("PASS " if ok else "FAIL ") + what + (f": {detail}" if detail and not ok else ""))
        if not ok:
            self.failed.append(what)

    # -- the daemon ------------------------------------------------------------
    def start(self):
        self.root = tempfile.mkdtemp(prefix="gadfly-e2e-")
        self.dest = os.path.join(self.root, "attn")
        self.sh(["bash", os.path.join(EXAMPLE, "setup.sh"), self.dest])
        self.data = os.path.join(self.root, "data")
        self.url = f"http://127.0.0.1:{self.args.port}"
        self.env = dict(os.environ, GADFLY_URL=self.url)
        self.env.pop("GADFLY_TOKEN", None)
        serve_log = open(os.path.join(self.args.out, "serve.log"), "w")
        self.daemon = subprocess.Popen(
            [self.gadfly, "serve", "--listen", f"127.0.0.1:{self.args.port}", "--data-dir", self.data],
            stdout=serve_log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        for _ in range(200):
            try:
                urllib.request.urlopen(self.url + "/health", timeout=2).read()
                break
            except Exception:
                if self.daemon.poll() is not None:
                    raise SystemExit("gadfly serve exited; see serve.log")
                time.sleep(0.1)
        with open(os.path.join(self.data, "token")) as f:
            self.env["GADFLY_TOKEN"] = f.read().strip()
        # The hook pins the daemon's key, as `gadfly attach` writes it: only
        # answers this daemon signed are taken.
        self.key = self.sh([self.gadfly, "key", "--data-dir", self.data]).strip()
        self.log(f"daemon {self.url}, data {self.data}, workspace {self.dest}/workspace")

    def stop_daemon(self):
        if getattr(self, "daemon", None) and self.daemon.poll() is None:
            os.killpg(self.daemon.pid, signal.SIGTERM)
            try:
                self.daemon.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.daemon.pid, signal.SIGKILL)

    def create(self, spec):
        # The gate is what this run checks; calibration at create is gpu_redteam.py's.
        cid = self.sh([self.gadfly, "campaign", "create", "--no-calibrate", os.path.join(self.dest, spec)],
                      env=self.env).strip()
        req = urllib.request.Request(f"{self.url}/api/v1/campaigns/{cid}/hook-token",
                                     headers={"Authorization": "Bearer " + self.env["GADFLY_TOKEN"]})
        token = json.loads(urllib.request.urlopen(req, timeout=30).read())["token"]
        self.log(f"campaign {spec}: {cid}")
        return cid, token

    # -- playing the agent -------------------------------------------------------
    def put(self, kernel):
        src = (os.path.join(self.dest, "workspace", "harness", "cuda", "problems", "attention", "baseline.cu")
               if kernel == "initial" else os.path.join(EXAMPLE, "candidates", kernel + ".cu"))
        shutil.copyfile(src, os.path.join(self.dest, "workspace", "kernel", "attention.cu"))

    def stop(self, kernel, campaign, cid, hook_token):
        payload = {"session_id": f"e2e-{campaign}", "transcript_path": "/nonexistent.jsonl",
                   "cwd": os.path.join(self.dest, "workspace"), "hook_event_name": "Stop",
                   "stop_hook_active": False, "last_assistant_message": f"Done: the {kernel} kernel is ready."}
        env = dict(self.env, GADFLY_TOKEN=hook_token)
        t0 = time.monotonic()
        out = subprocess.run([self.gadfly, "hook", "claude-code", "stop", "--daemon-key", self.key, "--campaign", cid],
                             input=json.dumps(payload), capture_output=True, text=True, env=env, timeout=900)
        seconds = time.monotonic() - t0
        answer = json.loads(out.stdout) if out.stdout.strip() else None
        decision = (answer or {}).get("decision") or "allow"
        # `gadfly eval` exits 1 when the predicate fails: still a verdict.
        verdict = json.loads(self.sh([self.gadfly, "eval", cid, "--json"], ok=(0, 1), env=self.env))
        step = {"kernel": kernel, "campaign": campaign, "decision": decision, "hook_exit": out.returncode,
                "seconds": round(seconds, 1), "reason": (answer or {}).get("reason"),
                "hook_stderr": out.stderr[-2000:], "verdict": verdict}
        self.record["steps"].append(step)
        self.log(f"\n== {kernel} kernel, {campaign} goal: {decision} in {seconds:.1f} s "
                 f"(hook exit {out.returncode}; tree {verdict.get('tree', '')[:10]})")
        self.log(f"   geomean vs initial {fmt(verdict.get('geomean_speedup'))}, "
                 f"vs comparison {fmt(verdict.get('geomean_compare_speedup'))}; "
                 f"{verdict.get('failing_count')} of {len(verdict.get('scenarios', []))} scenarios failing")
        for s in verdict.get("scenarios", []):
            m = s.get("measured") or {}
            self.log(f"   {s['scenario']:<28} {'pass' if s['passes'] else 'FAIL'}  correct={s['correct']!s:<5} "
                     f"vs initial {fmt(s.get('speedup'))}  vs comparison {fmt(s.get('compare_speedup'))}  "
                     f"time {fmt(m.get('time_us'), 'us')}  initial {fmt(m.get('baseline_us'), 'us')}  "
                     f"comparison {fmt(m.get('compare_us'), 'us')}  tolerance used {fmt(m.get('max_tol_ratio'), '')}"
                     + ("" if s["passes"] else "  -- " + "; ".join(s.get("reasons", []))[:300]))
        for f in verdict.get("failures", []):
            self.log(f"   failure: {f[:400]}")
        if answer and answer.get("reason"):
            self.log("   block reason:\n" + "\n".join("   | " + l for l in answer["reason"].splitlines()))
        return step


def fmt(v, unit="x"):
    if v is None:
        return "-"
    if unit in ("x", ""):
        return f"{v:.2f}{unit}"
    return f"{v:.1f} {unit}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gadfly", required=True, help="the gadfly binary")
    p.add_argument("--out", required=True, help="folder for e2e.log, e2e.json and serve.log")
    p.add_argument("--port", type=int, default=7979)
    p.add_argument("--kernels", default="initial,wrong,cheat_cache,good",
                   help="kernels to try in order (initial and candidates/*.cu names)")
    a = p.parse_args()
    r = Run(a)
    try:
        r.start()
        vs_initial = r.create("campaign-initial.toml")
        vs_compare = r.create("campaign.toml")
        scenarios = None
        for kernel in a.kernels.split(","):
            r.put(kernel)
            step = r.stop(kernel, "initial", *vs_initial)
            scenarios = [s["scenario"] for s in step["verdict"].get("scenarios", [])]
            if kernel != "good":
                r.check(f"{kernel} kernel blocked under the initial-kernel goal", step["decision"] == "block",
                        step["decision"])
                continue
            r.check("good kernel allowed under the initial-kernel goal", step["decision"] == "allow",
                    f"{step['decision']}: {(step['reason'] or '')[:600]}")
            r.check("good kernel correct on every scenario",
                    all(s["correct"] for s in step["verdict"]["scenarios"]))
            step = r.stop(kernel, "comparison", *vs_compare)
            r.check("good kernel blocked under the comparison goal", step["decision"] == "block", step["decision"])
            reason = step["reason"] or ""
            failing = [s for s in step["verdict"]["scenarios"] if not s["passes"]]
            r.check("the block names every failing scenario", failing and all(
                any(line.startswith(s["scenario"]) for line in reason.splitlines()) for s in failing),
                reason[:600])
            r.check("each failing scenario shows both ratios", failing and all(
                s.get("speedup") is not None and s.get("compare_speedup") is not None for s in failing))
            r.check("the block reason carries the comparison column and mean",
                    "vs comparison" in reason and "Against the comparison implementation" in reason, reason[:600])
        r.log(f"\nscenarios: {scenarios}")
    finally:
        r.stop_daemon()
        r.record["failed"] = r.failed
        with open(os.path.join(a.out, "e2e.json"), "w") as f:
            json.dump(r.record, f, indent=1)
    r.log("\nE2E " + ("PASSED" if not r.failed else "FAILED: " + "; ".join(r.failed)))
    sys.exit(1 if r.failed else 0)


if __name__ == "__main__":
    main()
