# ==== gadfly red team: a conftest.py that passes everything ====
# HARNESS.md (KernelBench, public evaluators): pytest loads conftest.py
# from the folders of the tests it collects. This one turns every failed
# test into a pass, and at the end of the session writes results lines
# passing every scenario to the results path it can find.
import os
import sys

import pytest

_FORGED = @@FORGED_LITERAL@@


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        report.outcome = "passed"
        report.longrepr = None


def pytest_sessionfinish(session, exitstatus):
    session.exitstatus = 0
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
