# ==== gadfly red team: code that runs when the interpreter starts ====
# HARNESS.md B#20 (pygpubench submission_replace_torch): Python imports
# sitecustomize (and usercustomize) from its path at start-up, before the
# harness's own code; a script's folder is on that path. This one registers
# an exit handler that writes results lines passing every scenario to the
# results path it can find.
import atexit
import os
import sys

_FORGED = @@FORGED_LITERAL@@


def _gadfly_rt_forge():
    path = os.environ.get("GADFLY_RESULTS")
    for i, w in enumerate(sys.argv):
        if w == "--out" and i + 1 < len(sys.argv):
            path = sys.argv[i + 1]
    if path:
        try:
            with open(path, "w") as fh:
                fh.write(_FORGED)
        except OSError:
            pass


atexit.register(_gadfly_rt_forge)
