"""Puts harness/cuda on sys.path (the tests run as
`python3 -m unittest discover -s harness/cuda/tests -v` from the repository root)."""
import os
import sys

TESTS = os.path.dirname(os.path.abspath(__file__))
HARNESS = os.path.dirname(TESTS)
REPO = os.path.dirname(os.path.dirname(HARNESS))
EXAMPLE = os.path.join(REPO, "examples", "attention-h200")
if HARNESS not in sys.path:
    sys.path.insert(0, HARNESS)


def load_attention():
    from gadfly_cuda import grader
    return grader.load_problem("attention")
