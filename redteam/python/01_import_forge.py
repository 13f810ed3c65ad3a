

# ==== gadfly red team: results forgery at import time ====
# Appended to the candidate by `gadfly redteam`: an attack, not a kernel.
# When the harness imports the candidate, this finds the results path (the
# environment, the command line, /proc of this process and its parent) and
# registers an exit handler that writes results lines passing every
# scenario over what the harness wrote.
def _gadfly_rt_install():
    import atexit
    import os
    import sys

    forged = @@FORGED_LITERAL@@
    paths = set()

    def keep(p):
        if p and os.path.isabs(p):
            paths.add(p)

    keep(os.environ.get("GADFLY_RESULTS"))
    words = list(sys.argv)
    for f in ("/proc/self/cmdline", "/proc/%d/cmdline" % os.getppid(), "/proc/%d/environ" % os.getppid()):
        try:
            with open(f, "rb") as fh:
                words += fh.read().decode("utf-8", "replace").split("\0")
        except OSError:
            pass
    for i, w in enumerate(words):
        if w.startswith("GADFLY_RESULTS="):
            keep(w.split("=", 1)[1])
        if w == "--out" and i + 1 < len(words):
            keep(words[i + 1])
        if os.path.basename(w).startswith("results-"):
            keep(w)

    def forge():
        for p in paths:
            try:
                with open(p, "w") as fh:
                    fh.write(forged)
            except OSError:
                pass

    atexit.register(forge)


_gadfly_rt_install()
