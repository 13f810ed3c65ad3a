#!/usr/bin/env python3
"""The grader: the one process that writes the results. It never imports,
loads or links candidate code. The baseline and the candidate each run in a
runner process of their own, fed through a shared file, and every call is
timed here, with this process's clock. README.md says how; gadfly's
docs/HARNESS.md says why.

    python3 -I harness/grader.py --seed SEED --out RESULTS.jsonl
"""
import argparse, ctypes, json, math, mmap, os, random, select, shutil, signal, statistics, subprocess, sys, tempfile, time
from array import array
from operator import sub

# ---- the task: edit this block for another kernel -----------------------------
SCENARIOS = {"n16384": 16384, "n32768": 32768, "n65536": 65536}
IN_LEN = lambda n: n                      # doubles the grader writes for one call of size n: x
OUT_LEN = lambda n: n                     # doubles the kernel writes back: y
TOL = lambda n: n * n * 2.0**-50          # |error| of any order of summing n terms in (0, 1]; float32 is far out
BASELINE = [os.path.abspath("build/baseline")]    # harness/runner.cu + harness/reference.cu (harness/Makefile)
CANDIDATE = [os.path.abspath("build/candidate")]  # harness/runner.cu + kernel/*.cu
BUDGET_S, CALL_TIMEOUT_S = 240, 20  # the whole run (keep it below [harness] timeout_s); one call
FILL_S, BLOCKS = 0.5, 4  # timed rounds fill about FILL_S of baseline time, in BLOCKS pairs of fresh processes
KEEP_ENV = ("PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES")  # all the runners get besides HOME and LC_ALL
PIN_CPU = max(os.sched_getaffinity(0))  # both sides (and the grader) on one CPU; None lets a kernel use them all
# ---------------------------------------------------------------------------------
NAN = b"\0\0\0\0\0\0\xf8\x7f"
MASKS = {}
LIBC = ctypes.CDLL(None, use_errno=True)


class Bad(Exception):
    """Fails the scenario with this reason."""


def draw(key, count):
    """`count` doubles in +-[1, 2) drawn from the seed, this run's secret salt and `key` (one key per call)."""
    b = random.Random(f"{SEED}/{SALT}/{key}").randbytes(8 * count)
    if count not in MASKS:  # keep sign and mantissa bits, set the exponent of 1.0: all 64-bit lanes at once
        MASKS[count] = (int.from_bytes((b"\xff" * 6 + b"\x0f\x80") * count, "little"),
                        int.from_bytes((b"\0" * 6 + b"\xf0\x3f") * count, "little"))
    keep, one = MASKS[count]
    return ((int.from_bytes(b, "little") & keep) | one).to_bytes(8 * count, "little")


def descendants():
    """Every process below this one (the grader is a child subreaper: orphans land here)."""
    kids = {}
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/stat") as f:
                kids.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(d))
        except (OSError, ValueError, IndexError):
            pass
    todo, found = [os.getpid()], []
    while todo:
        below = kids.get(todo.pop(), [])
        found, todo = found + below, todo + below
    return found


def kill_all():
    """SIGKILLs and reaps every process below the grader, until none is left."""
    for _ in range(500):
        left = descendants()
        if not left:
            return
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        time.sleep(0.002)


def sched(pid):
    return os.getpriority(os.PRIO_PROCESS, pid), os.sched_getscheduler(pid), sorted(os.sched_getaffinity(pid))


def no_capabilities():
    """Runs in a runner between fork and exec. Without CAP_SYS_PTRACE the candidate cannot read or trace the
    grader (not dumpable); a process run as root, in a user namespace too (gadfly's sandbox), has it unless
    dropped: empty the bounding set, then every set, so that exec grants none back."""
    LIBC.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    for cap in range(64):
        LIBC.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP (fails harmlessly without CAP_SETPCAP: then there are none)
    LIBC.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL
    if LIBC.capset((ctypes.c_uint32 * 2)(0x20080522, 0), (ctypes.c_uint32 * 6)()) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def died(st):
    return f"killed by {signal.strsignal(os.WTERMSIG(st))}" if os.WIFSIGNALED(st) else f"exit status {os.WEXITSTATUS(st)}"


class Runner:
    """One runner process, stopped (SIGSTOP) whenever it is not inside one of its calls."""

    def __init__(self, who, cmd, cap, work):
        self.who, self.buf, self.dir = who, b"", tempfile.mkdtemp(prefix=who, dir=work)
        fd = os.memfd_create(who)  # the call's inputs and outputs: shared memory with no name to open
        os.ftruncate(fd, cap)
        self.mm = mmap.mmap(fd, cap)
        env = {k: os.environ[k] for k in KEEP_ENV if k in os.environ}
        env.update(HOME=self.dir, LC_ALL="C")
        self.p = subprocess.Popen(cmd + [str(fd)], cwd=self.dir, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  pass_fds=(fd,), preexec_fn=no_capabilities)
        os.close(fd)
        self.pid, self.w, self.r = self.p.pid, self.p.stdin.fileno(), self.p.stdout.fileno()
        if self.answer(60) != "ready":
            raise Bad(f"the {who}'s runner did not start properly (its log is above)")
        with open(f"/proc/{self.pid}/status") as f:
            if any(l.startswith("Cap") and int(l.split()[1], 16) for l in f if not l.startswith("CapBnd")):
                raise Bad(f"the {who}'s process kept capabilities: it could read or trace the grader")
        self.stop()
        self.sched = sched(self.pid)

    def answer(self, timeout):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.r], [], [], left)[0]:
                raise Bad(f"the {self.who} did not answer within {timeout} s")
            chunk = os.read(self.r, 65536)
            if not chunk:
                raise Bad(f"the {self.who}'s process ended ({self.ended()})")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode("utf-8", "replace")

    def ended(self):
        for _ in range(200):
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return died(st)
            time.sleep(0.005)
        return "it closed its answer pipe"

    def stop(self):
        os.kill(self.pid, signal.SIGSTOP)
        st = os.waitpid(self.pid, os.WUNTRACED)[1]
        if not os.WIFSTOPPED(st):
            raise Bad(f"the {self.who}'s process ended ({died(st)})")


    def call(self, n, data):
        """One call on fresh inputs: (the output's bytes, the round trip in us, by this process's clock)."""
        k, m = len(data), 8 * OUT_LEN(n)
        self.mm[:k] = data
        self.mm[k:k + m] = NAN * OUT_LEN(n)  # poisoned: an output not written is NaN
        nonce = os.urandom(8).hex()
        t0 = time.perf_counter()
        os.kill(self.pid, signal.SIGCONT)
        try:
            os.write(self.w, f"{nonce} {n} {OUT_LEN(n)}\n".encode())
        except BrokenPipeError:
            raise Bad(f"the {self.who}'s process ended ({self.ended()})") from None
        line = self.answer(CALL_TIMEOUT_S)
        t = time.perf_counter() - t0
        self.stop()  # its threads too: nothing runs on after the answer
        if line != nonce + " ok":
            raise Bad(f"the {self.who} failed: " + (line[len(nonce) + 1:] if line.startswith(nonce) else f"answer out of turn {line[:80]!r}"))
        return self.mm[k:k + m], t * 1e6


def compare(outs, n, what):
    o, ref = array("d", outs["candidate"]), array("d", outs["baseline"])
    if not math.isfinite(sum(map(abs, ref))):
        raise Bad(f"{what} (n={n}): the baseline's output is not finite (a harness bug)")
    if not math.isfinite(sum(map(abs, o))):
        raise Bad(f"{what} (n={n}): the output has NaN or Inf, or was not written")
    e = max(map(abs, map(sub, o, ref)))
    if not e <= TOL(n):
        raise Bad(f"{what} (n={n}): max |out - ref| = {e:.3g} > tolerance {TOL(n):.3g}")
    return e


def scenario(name, n):
    MASKS.clear()
    rng = random.Random(f"{SEED}/{SALT}/{name}/held-out")
    hold = n - 1 - rng.randrange(1, max(2, n // 8)) | 1  # smaller (so within TOL(n)), odd, never listed
    while hold in SCENARIOS.values():
        hold -= 2
    r = {"scenario": name, "correct": False, "time_us": 1.0, "baseline_us": 1.0, "tolerance": TOL(n), "held_out": hold}
    tc, tb, errs, work = [], [], [0.0], tempfile.mkdtemp(prefix="grader-")
    cap = 8 * max(IN_LEN(m) + OUT_LEN(m) for m in (n, hold))

    def round_(base, cand, m, cand_first, what):  # both sides on the same fresh inputs, the output checked
        data, outs, ts = draw(f"{name}/{what}", IN_LEN(m)), {}, {}
        for side in (cand, base) if cand_first else (base, cand):
            if side is base and (sched(base.pid) != base.sched or sched(0) != MY_SCHED):
                raise Bad("the baseline's or the grader's scheduling (nice, policy, CPUs) was changed during the run")
            try:
                outs[side.who], ts[side.who] = side.call(m, data)
            except Bad as e:
                raise Bad(f"{what} (n={m}): {e}") from None
            if set(descendants()) - {base.pid, cand.pid}:
                raise Bad(f"{what}: the candidate started a process that outlives its call")
        errs.append(compare(outs, m, what))
        return ts["candidate"], ts["baseline"]

    try:
        per_block = 1
        for blk in range(BLOCKS):  # fresh processes per block: no one lucky memory layout decides the figure
            base = Runner("baseline", BASELINE, cap, work)  # started before any candidate code runs
            cand = Runner("candidate", CANDIDATE, cap, work)
            if blk == 0:
                b0 = round_(base, cand, n, True, "first call")[1]
                round_(base, cand, hold, False, "held-out size")
                per_block = max(5, min(15, int(FILL_S * 1e6 / b0 / BLOCKS)))
            round_(base, cand, n, blk % 2 == 0, f"warm-up {blk}")
            for i in range(per_block):
                if time.monotonic() > DEADLINE:
                    raise Bad(f"out of time: the run's budget of {BUDGET_S} s is spent")
                c, b = round_(base, cand, n, (blk + i) % 2 == 0, f"timed call {blk}.{i}")  # A B, B A, ...
                tc.append(c)
                tb.append(b)
            kill_all()
        r["correct"] = True
    except Bad as e:
        r["reason"] = str(e)
    except Exception as e:  # a bug of this grader: still a line, and never a pass
        r["reason"] = f"grader error: {type(e).__name__}: {e}"
    finally:
        kill_all()
        shutil.rmtree(work, ignore_errors=True)
    r["max_abs_err_ref"] = max(errs)
    if tc:
        r.update(time_us=statistics.median(tc), baseline_us=statistics.median(tb), samples=len(tc), cv=cv(tc), baseline_cv=cv(tb))
    return r


def cv(ts):
    """The coefficient of variation, estimated robustly (1.4826 MAD / median: stdev / mean for normal noise), so
    that one stalled sample on a busy machine does not widen the figure's interval as much as it would the stdev."""
    m = statistics.median(ts)
    return 1.4826 * statistics.median(abs(t - m) for t in ts) / m


def main():
    global SEED, SALT, DEADLINE, MY_SCHED
    if "GRADER_OUT" not in os.environ:  # first start: take --seed and --out off this process's command line
        ap = argparse.ArgumentParser()
        ap.add_argument("--seed", type=int, required=True)
        ap.add_argument("--out", required=True)
        a = ap.parse_args()
        env = {k: v for k, v in os.environ.items() if not k.startswith("GADFLY_")}
        env.update(GRADER_SEED=str(a.seed), GRADER_OUT=os.path.abspath(a.out))
        os.execve(sys.executable, [sys.executable, "-I", "-B", os.path.abspath(__file__)], env)
    LIBC.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no process of this user without capabilities reads its memory
    LIBC.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: whatever the candidate leaves behind becomes a child here
    SEED, out = os.environ.pop("GRADER_SEED"), os.environ.pop("GRADER_OUT")
    SALT = os.environ.pop("GRADER_SALT", "") or os.urandom(16).hex()  # a seed that leaks elsewhere still predicts nothing
    if PIN_CPU is not None:  # inherited by both runners: the same CPU, the same load on a busy machine
        os.sched_setaffinity(0, {PIN_CPU})
    DEADLINE, MY_SCHED = time.monotonic() + BUDGET_S, sched(0)
    lines = [scenario(name, n) for name, n in SCENARIOS.items()]
    kill_all()  # nothing of the candidate's is alive when the results are written
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(out), prefix=".grader-")
    with os.fdopen(fd, "w") as f:
        f.writelines(json.dumps(r, allow_nan=False) + "\n" for r in lines)
    os.chmod(tmp, 0o644)
    os.replace(tmp, out)  # whatever was put at the path is replaced, never followed
    for r in lines:
        print(f"{r['scenario']:<10} {'correct' if r['correct'] else 'WRONG':<8} time {r['time_us']:10.1f} us  baseline "
              f"{r['baseline_us']:10.1f} us  speedup {r['baseline_us'] / r['time_us']:6.3f}  samples {r.get('samples', 0):<3}"
              f" cv {r.get('cv', 0):.3f}  err {r['max_abs_err_ref']:.2g} <= {r['tolerance']:.2g}  {r.get('reason', '')}")
    print(f"inputs: GRADER_SALT={SALT} with seed {SEED} draws them again", file=sys.stderr)


if __name__ == "__main__":
    main()
