#!/usr/bin/env python3
"""gadfly's CUDA/Triton evaluator; see README.md.  Run with `python3 -I`."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gadfly_cuda.grader import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
