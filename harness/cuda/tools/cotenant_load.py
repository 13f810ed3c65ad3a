#!/usr/bin/env python3
"""A co-tenant for the co-tenant check: another process that keeps the GPU busy
with bf16 matrix products (torch) until killed or --seconds pass.

    python3 harness/cuda/tools/cotenant_load.py --ready /tmp/ready [--n 8192] [--seconds 300]

Writes its PID to --ready once its first products have run, so a script can
start an evaluation only when the device is really shared.
"""
import argparse
import os
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--ready", required=True)
p.add_argument("--n", type=int, default=8192)
p.add_argument("--seconds", type=float, default=300.0)
a = p.parse_args()
x = torch.randn(a.n, a.n, device="cuda", dtype=torch.bfloat16)
y = torch.randn(a.n, a.n, device="cuda", dtype=torch.bfloat16)
t0 = time.monotonic()
k = 0
while time.monotonic() - t0 < a.seconds:
    for _ in range(8):
        z = x @ y
    torch.cuda.synchronize()
    k += 8
    if k == 8:
        with open(a.ready, "w") as f:
            f.write(str(os.getpid()))
print(f"cotenant_load: {k} products of {a.n}^3 in {time.monotonic() - t0:.1f} s", flush=True)
