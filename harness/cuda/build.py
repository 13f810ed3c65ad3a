#!/usr/bin/env python3
"""Builds the candidate and the initial kernel in one step (run with `python3 -I`).

    python3 -I harness/cuda/build.py --src kernel --out build/kernel.so \
        --baseline harness/cuda/problems/attention/baseline.cu --baseline-out build/baseline.so

Both are compiled with the same nvcc flags (-O3, sm_90a on Hopper), in
parallel.  The candidate's library is cached by content (nvcc version, flags,
sources, headers); the baseline is always compiled from the protected copy.
ptxas's register and shared-memory report goes to OUT.log.
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gadfly_cuda import buildlib  # noqa: E402


def compile_cmd(nvcc, flags, sources, out):
    return [nvcc] + flags + ["-o", out] + sources


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--src", required=True, help="folder of .cu/.cuh files (or one .cu file): the candidate")
    p.add_argument("--out", required=True)
    p.add_argument("--baseline", help="the protected initial kernel (.cu)")
    p.add_argument("--baseline-out")
    p.add_argument("--arch", help="sm_90a, sm_80, ... (default: detected; GADFLY_CUDA_ARCH overrides)")
    p.add_argument("--cache", help="cache folder (default $GADFLY_CUDA_CACHE or ~/.cache/gadfly-cuda)")
    p.add_argument("--no-cache", action="store_true")
    p.add_argument("--banned", help="comma-separated extra source tokens to refuse")
    p.add_argument("--no-source-check", action="store_true", help="(exploit suite only) skip the source scan")
    a = p.parse_args(argv)

    t0 = time.time()
    nvcc = buildlib.find_nvcc()
    if not nvcc:
        print("build: nvcc not found (set CUDA_HOME or PATH)", file=sys.stderr)
        return 2
    sources, headers = buildlib.collect(a.src)
    if not sources:
        print(f"build: no .cu files in {a.src}", file=sys.stderr)
        return 1
    if not a.no_source_check:
        banned = list(buildlib.DEFAULT_BANNED_SOURCE) + [t for t in (a.banned or "").split(",") if t]
        hits = buildlib.scan_sources(sources + headers, banned)
        if hits:
            print("build: refused, the candidate's sources contain banned text:\n  " + "\n  ".join(hits[:20]),
                  file=sys.stderr)
            return 1
    arch = a.arch or buildlib.detect_arch()
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    inc = [a.src] if os.path.isdir(a.src) else [os.path.dirname(a.src) or "."]
    flags = buildlib.nvcc_flags(arch, inc)
    for o in (a.out, a.baseline_out):
        if o:
            os.makedirs(os.path.dirname(os.path.abspath(o)), exist_ok=True)

    jobs = []
    if a.baseline:
        bflags = buildlib.nvcc_flags(arch)
        if os.path.exists(a.baseline_out):
            os.unlink(a.baseline_out)
        blog = open(a.baseline_out + ".log", "w")
        jobs.append(("baseline", subprocess.Popen(compile_cmd(nvcc, bflags, [a.baseline], a.baseline_out),
                                                  stdout=blog, stderr=subprocess.STDOUT), a.baseline_out + ".log"))
    cache_dir = None if a.no_cache else (a.cache or buildlib.default_cache_dir())
    key = buildlib.cache_key(version, flags, sources + headers)
    hit = False
    if os.path.exists(a.out):
        os.unlink(a.out)
    if cache_dir:
        hit = buildlib.cache_get(cache_dir, key, a.out)
    if not hit:
        clog = open(a.out + ".log", "w")
        jobs.append(("candidate", subprocess.Popen(compile_cmd(nvcc, flags, sources, a.out), stdout=clog,
                                                   stderr=subprocess.STDOUT), a.out + ".log"))
    failed = False
    for name, proc, logp in jobs:
        rc = proc.wait()
        if rc != 0:
            failed = True
            with open(logp) as f:
                print(f"build: {name} failed (nvcc exit {rc}):\n{f.read()[-6000:]}", file=sys.stderr)
    if failed:
        return 1
    if cache_dir and not hit:
        buildlib.cache_put(cache_dir, key, a.out)
    print(f"build: {a.out} ({'cache hit' if hit else 'compiled'}, {arch}, {version})"
          + (f" and {a.baseline_out}" if a.baseline else "") + f" in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
