"""Loaded by schemathesis (SCHEMATHESIS_HOOKS) before it fuzzes gadfly's API.

Hypothesis describes the lambdas in its strategies by parsing their source
with `ast.parse`. On CPython 3.11 that parse can raise
`SystemError: AST constructor recursion depth mismatch` when it runs deep in
the stack (a CPython bug, gh-106905), and schemathesis then reports the
operation as an error of its own although no request failed. The
description is only text for reports: when it cannot be computed, the lambda
is described as `lambda ...: <unknown>`, as hypothesis itself does when the
source cannot be found. Nothing else is changed; a failed check or a 5xx
still fails the run.
"""

import inspect

from hypothesis.internal import lambda_sources

_describe = lambda_sources._lambda_description


def _described_or_unknown(f, *args, **kwargs):
    try:
        return _describe(f, *args, **kwargs)
    except (SystemError, RecursionError):
        try:
            params = str(inspect.signature(f))[1:-1]
        except (TypeError, ValueError):
            params = ""
        return f"lambda {params}: <unknown>" if params else "lambda: <unknown>"


lambda_sources._lambda_description = _described_or_unknown
