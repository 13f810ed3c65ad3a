"""Compiling candidates: one nvcc step, a content-addressed cache, a source scan.

Standard library only.  The candidate's shared library is cached under a key
made of the nvcc version, the flags and every source and header byte; the
initial kernel (baseline) is compiled afresh on every build and never taken
from the cache, which the agent could write to.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile

SOURCE_EXT = (".cu",)
HEADER_EXT = (".cuh", ".h", ".hpp", ".inl")
# Second layer behind the core's symbol check (HARNESS.md rule 25): text that a
# kernel for this campaign has no reason to contain.  Matched case-insensitively.
DEFAULT_BANNED_SOURCE = ("cublas", "cudnn", "cutlass", "cute::", "dlopen", "dlsym", "nvrtc", "cumoduleload",
                         "culibraryload", "cudalibraryload", "<torch/", "aten/")


def find_nvcc() -> str | None:
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            p = os.path.join(os.environ[env], "bin", "nvcc")
            if os.path.isfile(p):
                return p
    p = shutil.which("nvcc")
    if p:
        return p
    for p in ("/usr/local/cuda/bin/nvcc",):
        if os.path.isfile(p):
            return p
    return None


def detect_arch() -> str:
    """sm_90a on Hopper (wgmma needs the 'a' target), sm_XY elsewhere; sm_90a when nothing answers."""
    env = os.environ.get("GADFLY_CUDA_ARCH")
    if env:
        return env
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout.split()
        if out:
            major, minor = out[0].strip().split(".")
            cc = f"{major}{minor}"
            return f"sm_{cc}a" if cc == "90" else f"sm_{cc}"
    except Exception:
        pass
    return "sm_90a"


def gencode(arch: str) -> str:
    m = re.fullmatch(r"sm_(\d+)(a?)", arch)
    if not m:
        raise ValueError(f"arch {arch!r} is not sm_XY or sm_XYa")
    cc = m.group(1) + m.group(2)
    return f"-gencode=arch=compute_{cc},code=sm_{cc}"


def nvcc_flags(arch: str, include_dirs=()) -> list[str]:
    flags = ["-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "-lineinfo", "-Xptxas", "-v", gencode(arch)]
    for d in include_dirs:
        flags += ["-I", d]
    return flags


def collect(src: str) -> tuple[list[str], list[str]]:
    """(sources, headers) of a folder, or a single .cu file, sorted."""
    if os.path.isfile(src):
        return [src], []
    if not os.path.isdir(src):
        raise FileNotFoundError(f"{src} does not exist")
    names = sorted(os.listdir(src))
    sources = [os.path.join(src, n) for n in names if n.endswith(SOURCE_EXT)]
    headers = [os.path.join(src, n) for n in names if n.endswith(HEADER_EXT)]
    return sources, headers


def scan_sources(paths, banned=DEFAULT_BANNED_SOURCE) -> list[str]:
    """Lines that contain a banned token: 'file:line: token'."""
    hits = []
    for p in paths:
        with open(p, encoding="utf-8", errors="replace") as f:
            for i, line in enumerate(f, 1):
                low = line.lower()
                for tok in banned:
                    if tok.lower() in low:
                        hits.append(f"{p}:{i}: `{tok}`")
    return hits


def file_digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cache_key(nvcc_version: str, flags, files) -> str:
    payload = {"nvcc": nvcc_version, "flags": list(flags),
               "files": [(os.path.basename(p), file_digest(p)) for p in sorted(files, key=os.path.basename)]}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def default_cache_dir() -> str:
    base = os.environ.get("GADFLY_CUDA_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "gadfly-cuda")
    return base


def cache_get(cache_dir: str, key: str, out: str) -> bool:
    p = os.path.join(cache_dir, key + ".so")
    if os.path.isfile(p):
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        tmp = out + ".tmp"
        shutil.copyfile(p, tmp)
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)
        return True
    return False


def cache_put(cache_dir: str, key: str, built: str) -> None:
    try:
        os.makedirs(cache_dir, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache_dir, suffix=".part")
        os.close(fd)
        shutil.copyfile(built, tmp)
        os.replace(tmp, os.path.join(cache_dir, key + ".so"))
    except OSError:
        pass
