"""The evaluator: one command that judges a candidate against the initial kernel.

    python3 -I harness/cuda/evaluate.py --problem attention \
        --candidate build/kernel.so --baseline build/baseline.so --out RESULTS.jsonl

This process (the grader) never loads candidate code.  It starts two runner
processes (gadfly_cuda/runner.py), one for the candidate and one for the
initial kernel, shares input/output buffers with each through CUDA IPC,
generates fresh inputs from a secret seed before every call, poisons the
output with NaN, asks the runner to time one call, and checks the output in
its own process against a working-precision and a high-precision reference
that the runner never sees.  See harness/cuda/README.md for the method.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import math
import os
import random
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

from gadfly_cuda import cotenant, procs, protocol, results, roofline, stats, tolerance
from gadfly_cuda.stats import StopRule

HERE = os.path.dirname(os.path.abspath(__file__))
HARNESS_DIR = os.path.dirname(HERE)
RUNNER = os.path.join(HERE, "runner.py")
MIB2 = 2 << 20
BF16_NAN = 0x7FC0
# Checks on timing (see README "Cross-checks").
BUSY_LIMIT_US = 30.0        # device activity after the end event, beyond the null-call gap
BUSY_LIMIT_FRAC = 0.10      # ... or this fraction of the median time, whichever is larger
HOST_LIMIT_US = 50.0        # runner's host time around the timed region not covered by the events,
HOST_LIMIT_FRAC = 0.10      #   beyond the baseline's
TRIP_LIMIT_US = 300.0       # the grader's own round trip (noisier, but out of the candidate's reach)
TRIP_LIMIT_FRAC = 0.5
N_SETS = 4                  # exchange buffer sets per scenario, shared by both runners, picked at random per call
KEEP_ENV = ("PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "LANG", "LC_ALL",
            "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "CUDA_MODULE_LOADING")


class HarnessError(RuntimeError):
    """Something the candidate cannot cause went wrong: exit non-zero."""


class CandidateFailure(RuntimeError):
    """The runner died, hung, or broke the protocol."""
    hung = False   # True when it did not answer in time: a timing-derived failure


class CallError(RuntimeError):
    def __init__(self, msg, cuda=False):
        super().__init__(msg)
        self.cuda = cuda


def log(*a):
    print("[gadfly-cuda]", *a, file=sys.stderr, flush=True)


def load_problem(spec: str):
    path = spec
    if not spec.endswith(".py"):
        path = os.path.join(HARNESS_DIR, "problems", spec, "problem.py")
    if not os.path.isfile(path):
        raise HarnessError(f"problem {spec!r}: {path} not found")
    s = importlib.util.spec_from_file_location(f"gadfly_problem_{os.path.basename(os.path.dirname(path))}", path)
    mod = importlib.util.module_from_spec(s)
    sys.modules[s.name] = mod
    s.loader.exec_module(mod)
    return mod


def derive_seed(secret: int, *parts) -> int:
    h = hashlib.blake2b(digest_size=8)
    h.update(str(secret).encode())
    for p in parts:
        h.update(b"\x00" + str(p).encode())
    return int.from_bytes(h.digest(), "little") & ((1 << 63) - 1)


def scrubbed_env(tmp: str) -> dict:
    env = {k: os.environ[k] for k in KEEP_ENV if k in os.environ}
    env.update(HOME=tmp, TMPDIR=tmp, TRITON_CACHE_DIR=os.path.join(tmp, "triton"), PYTHONDONTWRITEBYTECODE="1",
               PYTHONUNBUFFERED="1")
    return env


def log_tail(path: str, n: int = 600) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode(errors="replace").strip().replace("\n", " | ")
    except OSError:
        return ""


# ---------------------------------------------------------------------------
class RunnerProc:
    """The grader's handle on one runner process."""

    def __init__(self, role, kind, lib, problem, flush_bytes):
        self.role, self.kind, self.lib, self.problem, self.flush_bytes = role, kind, lib, problem, flush_bytes
        self.proc = None
        self.pid = None
        self.pids_ever = set()   # every runner of this role, for the co-tenant check (the driver may list one for a moment after it is gone)
        self.opened = set()

    def start(self):
        self.tmp = tempfile.mkdtemp(prefix=f"gadfly-{self.role}-")
        self.log_path = os.path.join(self.tmp, "runner.log")
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        cmd = [sys.executable, "-I", RUNNER, "--req-fd", str(req_r), "--resp-fd", str(resp_w)]
        if self.role == "baseline":
            cmd.append("--no-dump")
        with open(self.log_path, "wb") as logf:
            self.proc = subprocess.Popen(cmd, cwd=self.tmp, env=scrubbed_env(self.tmp), stdin=subprocess.DEVNULL,
                                         stdout=logf, stderr=subprocess.STDOUT, pass_fds=(req_r, resp_w),
                                         close_fds=True)
        os.close(req_r)
        os.close(resp_w)
        self.req_w, self.resp_r = req_w, resp_r
        self.pid = self.proc.pid
        self.pids_ever.add(self.pid)
        self.opened = set()
        self.request("hello", timeout=120)
        info = self.request("init", timeout=300, kind=self.kind, lib=os.path.abspath(self.lib),
                            entry=self.problem.ENTRY, argtypes=self.problem.SO_ARGTYPES,
                            flush_bytes=self.flush_bytes)
        self.threads_after_load = info["threads"]
        self.threads_before_load = info["threads_before_load"]
        return info

    def request(self, op, timeout=None, **kw):
        nonce = secrets.token_hex(8)
        try:
            protocol.send(self.req_w, dict(op=op, nonce=nonce, **kw))
            m = protocol.recv(self.resp_r, timeout)
        except (EOFError, TimeoutError, BrokenPipeError, protocol.ProtocolError, OSError) as e:
            what = "hung" if isinstance(e, TimeoutError) else "died"
            code = self.proc.poll() if self.proc else None
            self.kill()
            err = HarnessError if self.role == "baseline" else CandidateFailure
            exc = err(f"the {self.role} process {what} during '{op}' ({e}; exit status {code}); "
                      f"its last output: {log_tail(self.log_path) or '(none)'}")
            exc.hung = isinstance(e, TimeoutError)
            raise exc from None
        if m.get("nonce") != nonce or m.get("op") != op:
            self.kill()
            err = HarnessError if self.role == "baseline" else CandidateFailure
            raise err(f"the {self.role} process answered out of sequence")
        if not m.get("ok"):
            if self.role == "baseline":
                raise HarnessError(f"the baseline process failed during '{op}': {m.get('error')}")
            raise CallError(m.get("error", "unknown error"), cuda=bool(m.get("cuda")))
        return m

    def open(self, exch):
        for bid, (ptr, nbytes, handle) in exch.raw.items():
            if bid not in self.opened:
                self.request("open", timeout=60, id=bid, handle=handle, nbytes=nbytes)
                self.opened.add(bid)

    def close(self, exch):
        for bid in exch.raw:
            if bid in self.opened:
                self.opened.discard(bid)
                try:
                    self.request("close", timeout=60, id=bid)
                except (CallError, CandidateFailure, HarnessError):
                    pass

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.kill()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for fd in ("req_w", "resp_r"):
            try:
                os.close(getattr(self, fd))
            except (OSError, AttributeError):
                pass
            setattr(self, fd, -1)

    def stop(self):
        if self.alive():
            try:
                protocol.send(self.req_w, {"op": "exit", "nonce": "x"})
                self.proc.wait(timeout=10)
            except Exception:
                pass
        self.kill()
        shutil.rmtree(getattr(self, "tmp", ""), ignore_errors=True)


class Exchange:
    """Buffers for one shape: raw cuMemAlloc allocations (each rounded up to
    2 MiB, so an IPC handle exposes nothing else), shared with one runner."""

    _next = 0

    def __init__(self, drv, torch, problem, shape):
        self.drv = drv
        self.t = {}
        self.raw = {}
        self.ids = {}
        for name, dims in problem.buffers(shape).items():
            numel = 1
            for d in dims:
                numel *= d
            nbytes = numel * 2
            alloc = max(MIB2, (nbytes + MIB2 - 1) // MIB2 * MIB2)
            ptr = drv.alloc(alloc)
            Exchange._next += 1
            bid = f"b{Exchange._next}"
            self.raw[bid] = (ptr, alloc, drv.ipc_handle(ptr).hex())
            self.ids[name] = bid
            self.t[name] = _view(torch, ptr, nbytes).view(torch.bfloat16).view(*dims)

    def free(self):
        self.t.clear()
        for ptr, _, _ in self.raw.values():
            try:
                self.drv.free(ptr)
            except Exception:
                pass
        self.raw.clear()


def _ratios(r):
    """The error-to-tolerance ratios of one checked call (both references)."""
    return [st["max_ratio"] for st in (r.get("vs_ref"), r.get("vs_hi")) if st and st.get("max_ratio") is not None]


class _CAI:
    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 3, "strides": None, "stream": None}


def _view(torch, ptr, nbytes):
    return torch.as_tensor(_CAI(ptr, nbytes), device="cuda")


def compare_tensors(torch, out, ref, where, dtype):
    """Elementwise |out - ref| <= atol + rtol*|ref|, NaN/Inf mismatches counted
    apart; returns the plain dict that tolerance.judge reads."""
    atol, rtol = tolerance.tolerance_for(dtype)
    o = out.float().flatten()
    r = ref.float().flatten()
    if o.shape != r.shape:
        return {"numel": r.numel(), "n_nonfinite": 0, "n_bad": r.numel(), "max_abs": math.inf,
                "where": f"shape {tuple(out.shape)} vs {tuple(ref.shape)}", "got": None, "expected": None}
    fin_r = torch.isfinite(r)
    fin_o = torch.isfinite(o)
    nonfin = fin_r & ~fin_o
    both = fin_r & fin_o
    diff = torch.where(both, (o - r).abs(), torch.zeros_like(o))
    allowed = atol + rtol * r.abs()
    excess = diff - allowed
    excess = torch.where(nonfin, torch.full_like(excess, math.inf), excess)
    n_nonfinite = int(nonfin.sum())
    idx = int(torch.argmax(excess))
    # the largest |diff| / (atol + rtol*|ref|): at most 1 when every element
    # is within tolerance; the core cross-checks "correct" against it
    ratio = float((diff / allowed).max()) if n_nonfinite == 0 else math.inf
    st = {"numel": o.numel(), "n_nonfinite": n_nonfinite, "n_bad": int((excess > 0).sum()),
          "max_abs": float(diff.max()) if n_nonfinite == 0 else math.inf, "max_ratio": ratio,
          "where": where(idx), "got": float(o[idx]), "expected": float(r[idx])}
    if n_nonfinite:
        st["where_nonfinite"] = where(int(torch.nonzero(nonfin)[0]))
    return st


# ---------------------------------------------------------------------------
class Grader:
    def __init__(self, a):
        self.a = a
        self.problem = load_problem(a.problem)
        self.scenarios = a.scenarios.split(",") if a.scenarios else list(self.problem.SCENARIOS)
        for s in self.scenarios:
            self.problem.parse(s)
        if a.seed is not None:
            self.secret, self.seed_mode = int(a.seed), "fixed (--seed)"
        else:
            self.secret, self.seed_mode = secrets.randbits(62), "secret"
        self.rng = random.Random(derive_seed(self.secret, "order"))
        self.kind = "py" if a.candidate.endswith(".py") else "so"
        for p in (a.candidate, a.baseline):
            if not os.path.isfile(p):
                raise HarnessError(f"{p} does not exist (did the build step run?)")
        self.rule = StopRule(min_samples=a.min_samples, max_samples=a.max_samples, target_rel_sem=a.target_rel_sem,
                             min_time_s=a.min_time_s, max_wall_s=a.max_wall_s)
        self.t0 = time.monotonic()
        self.sticky = None

    # -- setup ---------------------------------------------------------------
    def setup(self):
        try:
            import torch
        except ImportError as e:
            raise HarnessError(f"torch is needed: {e}")
        if not torch.cuda.is_available():
            raise HarnessError("no CUDA device is visible")
        self.torch = torch
        torch.cuda.init()
        torch.zeros(1, device="cuda")
        from gadfly_cuda.cudadrv import Driver
        self.drv = Driver(0)
        self.dev_name = self.drv.name()
        self.l2 = self.drv.attribute("l2_bytes")
        self.flush_bytes = max(256 << 20, 2 * self.l2)
        self.device = roofline.device_for(self.dev_name)
        if self.device is None:
            raise HarnessError(f"no peak figures for {self.dev_name!r} in gadfly_cuda/roofline.py")
        self.flush_buf = torch.empty(self.flush_bytes // 4, dtype=torch.int32, device="cuda")
        self.stream = torch.cuda.Stream()
        self.base = RunnerProc("baseline", "so", self.a.baseline, self.problem, self.flush_bytes)
        self.cand = RunnerProc("candidate", self.kind, self.a.candidate, self.problem, self.flush_bytes)
        self.base.start()
        self.cand_start_error = None
        self._start_candidate()
        # Who else uses the device (README "Co-tenants"): read before, between
        # and after each scenario's timed calls.  The device's settings are
        # read, never changed.
        self.bus_id = self.drv.pci_bus_id()
        self.watch = cotenant.Watch(self.bus_id, self._own_processes)
        self.compute_mode = self.watch.compute_mode()
        log(f"device {self.dev_name} at {self.bus_id}: compute mode {self.compute_mode}; co-tenant check: "
            f"{self.watch.describe()}")
        if self.watch.source is None:
            log("WARNING: the co-tenant check is unavailable; every line says so in cotenant_check")

    def _own_processes(self):
        """(own PIDs, PIDs sure to hold a context now, how many of ours hold the device):
        the grader, its runners past and present, its descendants, with NSpid aliases."""
        me = os.getpid()
        desc = [p for p in procs.descendants() if not procs.is_zombie(p)]
        own = {me, *desc, *self.base.pids_ever, *self.cand.pids_ever}
        for p in [me] + desc:
            own.update(cotenant.nspids(p))
        holders = {me} | {r.pid for r in (self.cand, self.base) if r.alive()}
        expected = len(holders) + sum(1 for p in desc if p not in holders and cotenant.holds_nvidia_device(p))
        return own, holders, expected

    def _start_candidate(self):
        try:
            self.cand.start()
            self.cand_start_error = None
        except (CandidateFailure, CallError) as e:
            self.cand.kill()
            self.cand_start_error = f"the candidate could not be loaded: {str(e)[-1500:]}"

    # -- one call --------------------------------------------------------------
    def call(self, runner, ex, shape, seed, check, hi=False, trace=False, timeout=120.0):
        """Fresh inputs, NaN-poisoned output, one timed call, optional checks.
        Returns a dict with the timing and, when checked, the comparison."""
        torch, P = self.torch, self.problem
        gen = torch.Generator(device="cuda")
        gen.manual_seed(seed)
        P.fill_inputs(ex.t, gen)
        ex.t[P.OUTPUT].view(torch.int16).fill_(BF16_NAN)
        pristine = {n: ex.t[n].clone() for n in P.INPUTS} if check else None
        torch.cuda.synchronize()
        args = P.py_args(shape, ex.ids) if runner.kind == "py" else P.so_args(shape, ex.ids)
        t0 = time.perf_counter()
        m = runner.request("call", timeout=timeout, args=args, trace=trace)
        rt_ms = (time.perf_counter() - t0) * 1e3
        r = {"ms": m["ms"], "ms_sync": m["ms_sync"], "rt_ms": rt_ms, "rc": m["rc"], "region_ms": m["region_ms"],
             "threads": procs.thread_count(runner.pid), "kernels": m.get("kernels")}
        if check:
            torch.cuda.synchronize()
            r["changed"] = [n for n in P.INPUTS if not torch.equal(ex.t[n], pristine[n])]
            ref = P.reference(pristine, shape)
            r["vs_ref"] = self.compare(ex.t[P.OUTPUT], ref, shape)
            if hi:
                href = P.reference_hi(pristine, shape)
                r["vs_hi"] = self.compare(ex.t[P.OUTPUT], href, shape)
                r["ref_err_hi"] = float((ref.float() - href).abs().max())
                del href
            del ref, pristine
        return r

    def compare(self, out, ref, shape):
        return compare_tensors(self.torch, out, ref, lambda i: self.problem.where(shape, i), self.problem.DTYPE)

    def compare_once(self, fns, sets, ks, shape, seed, i):
        """One compare_us sample in a timing round: fresh inputs in the round's
        buffer set, the same flush and events as time_parent; None where the
        comparison cannot run the shape."""
        torch, P = self.torch, self.problem
        gen = torch.Generator(device="cuda")
        gen.manual_seed(seed)
        P.fill_inputs(sets[ks].t, gen)
        torch.cuda.synchronize()
        if ks not in fns:
            fns[ks] = P.compare_impl(sets[ks].t, shape)
        fn = fns[ks]
        if fn is None:
            return None
        s = self.stream
        if not hasattr(self, "_cmp_ev"):
            self._cmp_ev = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        start, end = self._cmp_ev
        with torch.cuda.stream(s):
            self.flush_buf.fill_(i & 0x7FFFFFFF)
            start.record(s)
            fn()
            end.record(s)
        end.synchronize()
        torch.cuda.synchronize()
        return start.elapsed_time(end)

    def time_parent(self, fn, max_wall):
        """compare_us: times fn in this process with the same flush and events."""
        torch = self.torch
        s = self.stream
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        samples = []
        t0 = time.monotonic()
        rule = StopRule(self.rule.min_samples, self.rule.max_samples, self.rule.target_rel_sem, self.rule.min_time_s,
                        max_wall)
        with torch.cuda.stream(s):
            for _ in range(3):
                fn()
            i = 0
            while True:
                i += 1
                self.flush_buf.fill_(i)
                start.record(s)
                fn()
                end.record(s)
                end.synchronize()
                samples.append(start.elapsed_time(end) * 1e3)
                stop, _, _ = rule.check([samples], time.monotonic() - t0)
                if stop:
                    break
        torch.cuda.synchronize()
        return samples

    # -- one scenario --------------------------------------------------------
    def scenario(self, sc, wall_cap):
        torch, P = self.torch, self.problem
        shape = P.parse(sc)
        t_start = time.monotonic()
        dtype = P.DTYPE
        atol, rtol = tolerance.tolerance_for(dtype)
        fail = None
        notes = []
        c_samples, b_samples = [], []
        c_calls, b_calls = [], []
        kernel_ms = 0.0
        err_ref, err_hi, tol_ratio = [], [], []
        variant_name = None
        trial_ms = []
        gap_null = None
        exs = []
        fail_timing = False     # the failure comes from a timing check, which a co-tenant can trip
        r_samples = []          # compare_us, timed in the same rounds
        cmp_fns = {}
        converged, why = False, "not timed"

        def new_ex(s):
            e = Exchange(self.drv, torch, P, s)
            exs.append(e)
            return e

        def seed(*parts):
            return derive_seed(self.secret, sc, *parts)

        if not self.cand.alive():
            self._start_candidate()
        # Both runners map the same buffers (same physical placement, so the
        # A/B comparison is fair); each call takes one of N_SETS at random.
        sets = [new_ex(shape) for _ in range(N_SETS)]
        for e in sets:
            self.base.open(e)
        base_ex = sets[0]
        watch = self.watch.scenario()   # first read of the device's processes: before any call
        try:
            if self.cand_start_error:
                raise CandidateFailure(self.cand_start_error)
            if self.sticky:
                raise CandidateFailure(self.sticky)
            for e in sets:
                self.cand.open(e)
            cand_ex = sets
            # null calls: the device-sync latency with no work, for the busy check
            nulls = []
            for _ in range(5):
                m = self.cand.request("null", timeout=60)
                nulls.append((m["ms_sync"] - m["ms"]) * 1e3)
            gap_null = stats.median(nulls)

            # 1. correctness trials: fresh seeds, both references, precision guard
            b = self.call(self.base, base_ex, shape, seed("base-trial"), check=True, hi=True, timeout=300)
            base_ok, base_why = tolerance.judge(b["vs_ref"], b["vs_hi"], dtype)
            if b["rc"] != 0 or not base_ok:
                raise HarnessError(f"the initial kernel fails {sc} (rc {b['rc']}): {base_why}")
            base_err_hi = b["vs_hi"]["max_abs"]
            b_calls.append(b)
            kernel_ms += b["ms"]
            for t in range(self.a.trials):
                r = self.call(self.cand, cand_ex[t % N_SETS], shape, seed("trial", t), check=True, hi=True,
                              trace=(t == 0 and self.kind == "py"), timeout=300)
                kernel_ms += r["ms"]
                trial_ms.append(r["ms"] * 1e3)
                c_calls.append(r)
                err_ref.append(r["vs_ref"]["max_abs"])
                err_hi.append(r["vs_hi"]["max_abs"])
                tol_ratio.extend(_ratios(r))
                fail = self.judge_call(r, base_err_hi, f"trial {t + 1}")
                if fail:
                    break
                if r.get("kernels") is not None:
                    bad = [k for k in r["kernels"] if any(p in k.lower() for p in P.BANNED_KERNELS)]
                    if bad:
                        fail = f"banned kernels ran in the candidate's call: {', '.join(bad[:5])}"
                        break
                    notes.append(f"kernels: {', '.join(r['kernels'][:8])}")

            # 2. a held-out variant of the shape, drawn from the secret seed
            if not fail and self.a.variants:
                vshape = P.variant(shape, random.Random(seed("variant")))
                variant_name = P.name(vshape)
                vex = new_ex(vshape)
                self.cand.open(vex)
                r = self.call(self.cand, vex, vshape, seed("variant-call"), check=True, hi=True, timeout=300)
                kernel_ms += r["ms"]
                fail = self.judge_call(r, None, f"held-out variant {variant_name}")
                self.cand.close(vex)

            watch.poll("after the correctness trials", force=False)

            # 3. timing: interleaved rounds in random order, fresh inputs each
            #    call, every candidate output re-checked against the reference.
            #    The comparison (compare_us) is timed in the same rounds, so
            #    load from outside falls on all three alike.
            est_c = stats.median(trial_ms) if trial_ms else 1000.0
            est_b = b["ms"] * 1e3
            call_timeout = min(300.0, max(20.0, 50 * max(est_c, est_b) * 1e-6))
            if not fail:
                warm = max(2, min(20, math.ceil(25e3 / max(1.0, max(est_c, est_b)))))
                i = 0
                while True:
                    i += 1
                    if watch.poll(f"between timing rounds (before round {i})", force=False):
                        # another process uses the device: the timing cannot be
                        # trusted, so stop here (the outputs checked so far stand)
                        converged, why = False, f"stopped at round {i}: another process used the device"
                        break
                    order = [("c", self.cand), ("b", self.base)]
                    if self.a.compare:
                        order.append(("r", None))
                    self.rng.shuffle(order)
                    ks = self.rng.randrange(N_SETS)   # paired: both sides use the same buffers this round
                    for side, runner in order:
                        if side == "r":
                            ms = self.compare_once(cmp_fns, sets, ks, shape, seed("compare", i), i)
                            if ms is not None:
                                kernel_ms += ms
                                if i > warm:
                                    r_samples.append(ms * 1e3)
                            continue
                        if side == "c":
                            r = self.call(runner, sets[ks], shape, seed("timed", i),
                                          check=True, timeout=call_timeout)
                            c_calls.append(r)
                            err_ref.append(r["vs_ref"]["max_abs"])
                            tol_ratio.extend(_ratios(r))
                            f = self.judge_call(r, None, f"timed call {i}" if i > warm else f"warm-up call {i}")
                            if f:
                                fail = f
                                break
                            if i > warm:
                                c_samples.append(r["ms"] * 1e3)
                        else:
                            r = self.call(runner, sets[ks], shape, seed("base", i),
                                          check=False, timeout=call_timeout)
                            b_calls.append(r)
                            if i > warm:
                                b_samples.append(r["ms"] * 1e3)
                        kernel_ms += r["ms"]
                    if fail:
                        break
                    if i > warm:
                        stop, converged, why = self.rule.check([c_samples, b_samples], time.monotonic() - t_start)
                        if self.rule.max_wall_s > wall_cap and time.monotonic() - t_start >= wall_cap and \
                                len(c_samples) >= 3:
                            stop, converged, why = True, False, f"run budget share {wall_cap:.0f} s reached"
                        if stop:
                            break
            if fail or not c_samples:
                # Incorrect (or stopped early on a shared device): the trial
                # times stand for the candidate, and a few baseline calls give
                # baseline_us; no full timing.
                c_samples = c_samples or trial_ms
                while len(b_samples) < 3:
                    r = self.call(self.base, base_ex, shape, seed("base-short", len(b_samples)), check=False,
                                  timeout=call_timeout)
                    kernel_ms += r["ms"]
                    b_samples.append(r["ms"] * 1e3)
                if fail or not watch.shared():
                    converged, why = False, "not timed in full (incorrect)"
            else:
                fail = self.cross_checks(c_calls, b_calls, gap_null, c_samples)
                fail_timing = fail is not None
        except CandidateFailure as e:
            fail = str(e)
            fail_timing = e.hung   # it did not answer in time: a timing verdict
            converged, why = False, "candidate failed"
            self.cand.kill()
        except CallError as e:
            fail = f"the candidate's call raised: {str(e)[-1500:]}"
            converged, why = False, "candidate failed"
            if e.cuda or self.kind == "py":
                self.cand.kill()   # a CUDA error is sticky: the next scenario gets a fresh process
        finally:
            if not c_samples:
                c_samples = list(trial_ms)
            for e in exs:
                if self.cand.alive():
                    self.cand.close(e)
                self.base.close(e)
            torch.cuda.synchronize()
            for e in exs:
                e.free()
        # the baseline must be measurable, whatever the candidate did
        while len(b_samples) < 3:
            try:
                ex = Exchange(self.drv, torch, P, shape)
                self.base.open(ex)
                r = self.call(self.base, ex, shape, seed("base-late", len(b_samples)), check=False, timeout=300)
                b_samples.append(r["ms"] * 1e3)
                kernel_ms += r["ms"]
                self.base.close(ex)
                ex.free()
            except CallError as e:
                raise HarnessError(f"the initial kernel failed on {sc}: {e}")
        watch.finish()   # last read, and the driver's busy samples over the whole scenario

        # process hygiene: other processes (the grader is a subreaper, so even
        # double-forked, setsid'd ones are its descendants), banned libraries
        runners = {self.cand.pid, self.base.pid}
        kids = [p for p in procs.descendants() if p not in runners and not procs.is_zombie(p)]
        if kids:
            self.sticky = self.sticky or ("the candidate's process started other processes: " +
                                          ", ".join(f"{p} ({procs.comm(p)})" for p in kids[:5]))
        for p in kids:
            try:
                os.kill(p, 9)
            except OSError:
                pass
        if self.kind == "so" and self.cand.alive():
            own = os.path.realpath(self.a.candidate)
            hits = [h for h in procs.banned_mappings(self.cand.pid, P.BANNED_LIBS) if os.path.realpath(h) != own]
            if hits:
                self.sticky = self.sticky or f"banned libraries mapped into the candidate's process: {', '.join(hits[:4])}"
        if self.sticky and not (fail and fail.startswith(self.sticky)):
            fail = self.sticky   # a property of the candidate: it fails every scenario from here on
            fail_timing = False

        # Another process used the device during this scenario: a verdict
        # drawn from timing is void ("cannot tell"), not the candidate's
        # fault; a failed output check stands (a wrong output is wrong
        # whoever shares the device).  The speed-of-light floor below stays:
        # a co-tenant can only make a call slower, never faster than the floor.
        fail, cannot_tell, voided = cotenant.void_timing(fail, fail_timing, watch.cannot_tell())
        if cannot_tell:
            log(f"{sc}: cannot tell: {cannot_tell}" + (f" (voided: {voided[:200]})" if voided else ""))

        time_us = stats.median(c_samples) if c_samples else None
        base_us = stats.median(b_samples)
        bound = roofline.bound_us(P.flops(shape), P.nbytes(shape), self.device, dtype)
        if time_us is not None and not fail:
            reject, fl = roofline.flags(time_us, base_us, P.flops(shape), P.nbytes(shape), self.device, dtype, bound)
            notes.extend(fl)
            if reject:
                fail = reject
                cannot_tell = None   # faster than the floor: no co-tenant makes a call faster
        compare_us = stats.median(r_samples) if r_samples else None
        if self.a.compare and not r_samples and not watch.shared():
            # not timed in the rounds (the scenario failed before them): alone, as before
            ex = Exchange(self.drv, torch, P, shape)
            gen = torch.Generator(device="cuda")
            gen.manual_seed(seed("compare"))
            P.fill_inputs(ex.t, gen)
            fn = P.compare_impl(ex.t, shape)
            if fn is not None:
                cs = self.time_parent(fn, min(self.rule.max_wall_s, wall_cap))
                compare_us = stats.median(cs)
                kernel_ms += sum(cs) * 1e-3
            torch.cuda.synchronize()
            ex.free()
        wall = time.monotonic() - t_start
        cs_ = stats.summarize(c_samples)
        bs_ = stats.summarize(b_samples)
        c_rt = [c["rt_ms"] - c["ms"] for c in c_calls]
        rec = results.make_record(
            sc, fail is None, time_us, base_us, reason=fail,
            max_abs_err_ref=max(err_ref) if err_ref else None,
            max_abs_err_hi=max(err_hi) if err_hi else None,
            tolerance=atol, compare_us=compare_us, bound_us=bound, samples=cs_.n,
            cv=cs_.cv if cs_.n > 1 else None,
            rtol=rtol, max_tol_ratio=max(tol_ratio) if tol_ratio else None,
            speedup=(base_us / time_us) if time_us else None,
            baseline_samples=bs_.n, baseline_cv=bs_.cv if bs_.n > 1 else None,
            rel_sem=cs_.rel_sem if cs_.n > 1 else None, baseline_rel_sem=bs_.rel_sem if bs_.n > 1 else None,
            converged=converged, stop=why,
            min_us=cs_.min, q1_us=cs_.q1, q3_us=cs_.q3,
            variant=variant_name, trials=self.a.trials,
            wall_s=wall, overhead_s=max(0.0, wall - kernel_ms * 1e-3),
            call_overhead_us=stats.median(c_rt) * 1e3 if c_rt else None,
            host_gap_us=[self._host_gap(c_calls, "region_ms"), self._host_gap(b_calls, "region_ms")],
            trip_gap_us=[self._host_gap(c_calls, "rt_ms"), self._host_gap(b_calls, "rt_ms")],
            busy_gap_us=self._gap(c_calls, gap_null),
            threads=[c_calls[-1]["threads"] if c_calls else None, procs.thread_count(self.base.pid)],
            notes=notes or None,
            compare_samples=len(r_samples) or None,
            cannot_tell=cannot_tell, voided=voided,
            cotenant_check=watch.check(self.watch.unavailable),
        )
        return rec

    @staticmethod
    def _host_gap(calls, key):
        g = [(c[key] - c["ms_sync"]) * 1e3 for c in calls[-50:]]
        return stats.median(g) if g else None

    def _gap(self, calls, gap_null):
        g = [(c["ms_sync"] - c["ms"]) * 1e3 for c in calls]
        if not g or gap_null is None:
            return None
        return stats.median(g) - gap_null

    def judge_call(self, r, base_err_hi, label):
        if r["rc"] != 0:
            return f"{label}: attention_forward returned {r['rc']} (unsupported shape or launch error)"
        if r.get("changed"):
            return f"{label}: the call modified its inputs ({', '.join(r['changed'])}); inputs are read-only"
        if self.kind == "so" and r["threads"] > self.base_threads():
            return (f"{label}: the candidate's process has {r['threads']} threads, the initial kernel's "
                    f"{self.base_threads()}: a host thread can launch work outside the timed region")
        ok, why = tolerance.judge(r["vs_ref"], r.get("vs_hi"), self.problem.DTYPE, r.get("ref_err_hi"),
                                  base_err_hi)
        if not ok:
            return f"{label}: {why}"
        return None

    def base_threads(self):
        n = procs.thread_count(self.base.pid)
        self._base_threads = max(getattr(self, "_base_threads", 0), n)
        return self._base_threads

    def cross_checks(self, c_calls, b_calls, gap_null, c_samples):
        """Timing cross-checks; returns a failure reason or None."""
        med = stats.median(c_samples)
        timed = c_calls[-len(c_samples):] if c_samples else c_calls
        gaps = [(c["ms_sync"] - c["ms"]) * 1e3 - gap_null for c in timed]
        limit = max(BUSY_LIMIT_US, BUSY_LIMIT_FRAC * med)
        late = sum(1 for g in gaps if g > limit)
        if stats.median(gaps) > limit or late > 0.25 * len(gaps):
            return (f"work continued after the timed region: the device was busy a median {stats.median(gaps):.1f} us "
                    f"(in {late} of {len(gaps)} calls more than {limit:.1f} us) after the end event, beyond the "
                    f"{gap_null:.1f} us of an empty call; enqueue all work on the stream the harness passes")
        btimed = b_calls[-len(timed):]
        for key, lim_us, lim_frac, what in (
                ("region_ms", HOST_LIMIT_US, HOST_LIMIT_FRAC, "the runner's host clock around the timed region"),
                ("rt_ms", TRIP_LIMIT_US, TRIP_LIMIT_FRAC, "the grader's round trip")):
            oc = stats.median([(c[key] - c["ms_sync"]) * 1e3 for c in timed])
            ob = stats.median([(c[key] - c["ms_sync"]) * 1e3 for c in btimed])
            lim = max(lim_us, lim_frac * med)
            if oc - ob > lim:
                return (f"the events miss host time: {what} exceeds the event time by a median {oc:.1f} us, the "
                        f"initial kernel's by {ob:.1f} us (limit {lim:.1f} us more); the timer may have been "
                        f"tampered with")
        return None

    # -- the run -------------------------------------------------------------
    def run(self):
        self.setup()
        recs = []
        budget = self.a.budget_s
        for i, sc in enumerate(self.scenarios):
            left = budget - (time.monotonic() - self.t0)
            share = max(5.0, left / (len(self.scenarios) - i) * 0.8)
            log(f"{sc} ...")
            rec = self.scenario(sc, share)
            log(f"{sc}: correct={rec['correct']} time_us={rec['time_us']:.2f} baseline_us={rec['baseline_us']:.2f} "
                f"compare_us={rec.get('compare_us')} samples={rec.get('samples')} cv={rec.get('cv')}"
                + ("" if rec["correct"] else f" reason={rec['reason'][:300]}")
                + (f" CANNOT TELL: {rec['cannot_tell'][:300]}" if rec.get("cannot_tell") else ""))
            recs.append(rec)
        return recs

    def close(self):
        for r in (getattr(self, "cand", None), getattr(self, "base", None)):
            if r is not None:
                r.stop()


def gpu_state():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,"
                              "temperature.gpu,power.draw,clocks_event_reasons.active",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        return out.stdout.strip()
    except Exception as e:
        return f"nvidia-smi failed: {e}"


def parse_args(argv):
    p = argparse.ArgumentParser(prog="evaluate.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--problem", default="attention", help="a name under harness/cuda/problems or a problem.py path")
    p.add_argument("--candidate", required=True, help="the candidate: a .so (C ABI) or a .py (Triton/PyTorch)")
    p.add_argument("--baseline", required=True, help="the initial kernel, built from the protected copy")
    p.add_argument("--out", required=True, help="results file (JSON lines, one per scenario)")
    p.add_argument("--summary", help="also write a run summary (JSON) here")
    p.add_argument("--scenarios", help="comma-separated subset (default: all of the problem's)")
    p.add_argument("--seed", type=int, help="fixed public seed (default: a secret one per run)")
    p.add_argument("--trials", type=int, default=3, help="correctness trials with fresh seeds (default 3)")
    p.add_argument("--no-variants", dest="variants", action="store_false", help="skip the held-out shape")
    p.add_argument("--no-compare", dest="compare", action="store_false", help="skip timing the comparison")
    p.add_argument("--min-samples", type=int, default=10)
    p.add_argument("--max-samples", type=int, default=400)
    p.add_argument("--target-rel-sem", type=float, default=0.01, help="stop at this relative SEM (default 1%%)")
    p.add_argument("--min-time-s", type=float, default=0.1, help="least summed kernel time per side")
    p.add_argument("--max-wall-s", type=float, default=45.0, help="wall-time cap of one scenario's timing")
    p.add_argument("--budget-s", type=float, default=780.0, help="whole-run budget shared among scenarios")
    return p.parse_args(argv)


def main(argv=None) -> int:
    a = parse_args(argv)
    procs.become_subreaper()
    t0 = time.time()
    g = None
    recs = []
    code = 0
    err = None
    try:
        g = Grader(a)
        recs = g.run()
    except HarnessError as e:
        err = str(e)
        code = 2
    except Exception:
        err = traceback.format_exc()
        code = 2
    finally:
        if g is not None:
            g.close()
        killed = procs.kill_descendants()
    if err:
        log("harness error:", err)
    # Written last, after every process the candidate could have started is gone.
    if recs or code == 0:
        results.write_lines(a.out, recs)
    summary = {
        "harness": "gadfly-cuda", "exit": code, "error": err, "wall_s": time.time() - t0,
        "candidate": a.candidate, "kind": getattr(g, "kind", None), "seed_mode": getattr(g, "seed_mode", None),
        "seed": getattr(g, "secret", None) if code == 0 else None,
        "device": getattr(g, "dev_name", None), "l2_bytes": getattr(g, "l2", None),
        "flush_bytes": getattr(g, "flush_bytes", None), "gpu_state_end": gpu_state(),
        "pci_bus_id": getattr(g, "bus_id", None), "compute_mode": getattr(g, "compute_mode", None),
        "cotenant_source": g.watch.describe() if getattr(g, "watch", None) else None,
        "cannot_tell": [r["scenario"] for r in recs if r.get("cannot_tell")],
        "torch": getattr(getattr(g, "torch", None), "__version__", None),
        "killed_leftover_processes": killed,
        "scenarios": [{k: r.get(k) for k in ("scenario", "correct", "time_us", "baseline_us", "speedup", "wall_s",
                                             "overhead_s", "call_overhead_us", "samples", "cv", "converged",
                                             "cannot_tell", "cotenant_check")}
                      for r in recs],
    }
    if recs:
        sp = [r["speedup"] for r in recs if r.get("speedup")]
        summary["geomean_speedup"] = math.exp(sum(math.log(s) for s in sp) / len(sp)) if sp else None
        summary["overhead_s_total"] = sum(r.get("overhead_s", 0) for r in recs)
    if a.summary:
        with open(a.summary, "w") as f:
            json.dump(results.finite(summary), f, indent=1)
    log("summary:", json.dumps(results.finite({k: summary[k] for k in ("exit", "wall_s", "device", "geomean_speedup")
                                               if k in summary})))
    return code
