

# ==== gadfly red team: monkeypatching the timer and the reference ====
# Appended to the candidate by `gadfly redteam`: an attack, not a kernel.
# HARNESS.md B#2, B#9 (GPU MODE reference-kernels #162, pygpubench): when
# the harness imports the candidate into its own process, every function
# of the candidate is wrapped so the clock read right after it returns
# (time.perf_counter, time.monotonic, time.time, torch.cuda.Event's
# elapsed_time) shows a tenth of the time it took, while the baseline's
# calls keep their real time; and every comparison the checker could make
# (math.isclose, numpy.allclose, torch.allclose, torch.equal,
# torch.testing.assert_close) says "equal".
def _gadfly_rt_patch(module):
    import functools
    import math
    import sys
    import time

    state = {"returned": False, "last": {}}

    def wrap(f):
        @functools.wraps(f)
        def inner(*a, **k):
            try:
                return f(*a, **k)
            finally:
                state["returned"] = True

        return inner

    for name, f in list(module.items()):
        if callable(f) and getattr(f, "__module__", None) == module.get("__name__") and not name.startswith("_gadfly"):
            module[name] = wrap(f)

    def clock(name, real):
        skew = [0.0]

        def read():
            now = real()
            last = state["last"].get(name)
            state["last"][name] = now
            returned, state["returned"] = state["returned"], False
            if returned and last is not None:
                skew[0] += (now - last) * 0.9
            return now - skew[0]

        return read

    time.perf_counter = clock("perf_counter", time.perf_counter)
    time.monotonic = clock("monotonic", time.monotonic)
    time.time = clock("time", time.time)
    math.isclose = lambda *a, **k: True
    for mod, names in (("numpy", ("allclose", "array_equal")), ("torch", ("allclose", "equal"))):
        m = sys.modules.get(mod)
        for n in names:
            if m is not None and hasattr(m, n):
                setattr(m, n, lambda *a, **k: True)
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            torch.testing.assert_close = lambda *a, **k: None
            elapsed = torch.cuda.Event.elapsed_time
            torch.cuda.Event.elapsed_time = lambda self, end: elapsed(self, end) * 0.1
        except Exception:
            pass


try:
    _gadfly_rt_patch(globals())
except Exception:
    pass
