"""Scaled dot-product attention forward, bf16, [batch, heads, seq, head_dim].

Everything above the "torch" line needs only the standard library (the CPU
tests import it); torch is imported inside the functions that use it.

Candidate ABI (a shared library, C linkage):

    int attention_forward(const __nv_bfloat16* q, const __nv_bfloat16* k,
                          const __nv_bfloat16* v, __nv_bfloat16* o,
                          int batch, int heads, int seq_q, int seq_k, int head_dim,
                          int causal, float scale, cudaStream_t stream);

q, o: [batch, heads, seq_q, head_dim]; k, v: [batch, heads, seq_k, head_dim];
contiguous.  scale = 1/sqrt(head_dim).  Causal masking is top-left aligned
(query i sees keys 0..i), as torch's is_causal=True.  All work must be
enqueued on `stream`; return 0, or non-zero for an unsupported shape.
A Python (Triton) candidate exports attention_forward(q, k, v, o, causal, scale)
taking torch tensors and writing o, on torch's current stream.
"""
from __future__ import annotations

import math
import os
import random
import re
import sys
from dataclasses import dataclass

_HARNESS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _HARNESS not in sys.path:
    sys.path.insert(0, _HARNESS)
from gadfly_cuda import roofline  # noqa: E402

NAME = "attention"
DTYPE = "bfloat16"
ENTRY = "attention_forward"
HEAD_DIMS = (64, 128)      # the campaign's promise: every scenario and held-out variant uses one of these
BASELINE_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "baseline.cu")
# Libraries whose mapping into the candidate's process fails it (rule 26a), and
# kernel names that a Python candidate's trace must not show (rule 26c).
BANNED_LIBS = ("cublas", "cudnn", "cutlass", "cufft", "nvrtc", "nvjitlink")
BANNED_KERNELS = ("nvjet", "cublas", "cudnn", "cutlass", "xmma", "flash_fwd", "fmha", "pytorch_flash",
                  "efficient_attention", "gemm", "sm90_")
# Input regimes, drawn per (batch, head) inside every input tensor (rule 7:
# adversarial distributions, not one benign one):
#   peaky:   q ~ 2 N(0,1): logits with std ~2, each query attends to a few keys;
#   flat:    q ~ 0.3 N(0,1): near-uniform attention over all keys;
#   shifted: q = N - w, k = N + w for a per-head w ~ N(0,1)^d: every logit sits
#            near -sqrt(d) (-8 at d=64), so a key wrongly scored 0 (an unmasked
#            padding key, say) outweighs all real keys instead of hiding in the sum.
# v = N(0,1) + a per-(batch, head, column) offset ~ N(0,1): outputs are O(1),
# so absolute tolerances bite and a zero or scaled output cannot pass.
Q_STD = {"peaky": 2.0, "flat": 0.3}

SCENARIOS = [
    "b16_h16_s256_d64_full",
    "b8_h16_s512_d128_full",
    "b4_h16_s1024_d64_full",
    "b4_h16_s1024_d64_causal",
    "b2_h16_s2048_d128_full",
    "b2_h16_s2048_d128_causal",
    "b1_h16_s4096_d64_full",
    "b1_h16_s4096_d128_causal",
    "b1_h8_s8192_d128_causal",
    "b2_h12_s1000_d64_full",
    "b2_h12_s1000_d128_causal",
    "b1_h8_s2047_d128_full",
    "b4_h16_s333_d64_causal",
    "b2_h8_q512_k3000_d64_full",
]

_RE = re.compile(r"^b(\d+)_h(\d+)_(?:s(\d+)|q(\d+)_k(\d+))_d(\d+)_(full|causal)$")


@dataclass(frozen=True)
class Shape:
    batch: int
    heads: int
    seq_q: int
    seq_k: int
    head_dim: int
    causal: bool

    @property
    def scale(self) -> float:
        return 1.0 / math.sqrt(self.head_dim)


def parse(name: str) -> Shape:
    m = _RE.match(name)
    if not m:
        raise ValueError(f"scenario name {name!r} is not b<B>_h<H>_s<S>_d<D>_(full|causal) "
                         f"or b<B>_h<H>_q<Sq>_k<Sk>_d<D>_(full|causal)")
    b, h, s, sq, sk, d, mode = m.groups()
    seq_q, seq_k = (int(s), int(s)) if s else (int(sq), int(sk))
    shape = Shape(int(b), int(h), seq_q, seq_k, int(d), mode == "causal")
    if min(shape.batch, shape.heads, shape.seq_q, shape.seq_k, shape.head_dim) < 1:
        raise ValueError(f"scenario {name!r}: every dimension must be >= 1")
    if shape.causal and shape.seq_q != shape.seq_k:
        raise ValueError(f"scenario {name!r}: causal scenarios need seq_q == seq_k")
    return shape


def name(shape: Shape) -> str:
    seq = f"s{shape.seq_q}" if shape.seq_q == shape.seq_k else f"q{shape.seq_q}_k{shape.seq_k}"
    return f"b{shape.batch}_h{shape.heads}_{seq}_d{shape.head_dim}_{'causal' if shape.causal else 'full'}"


def variant(shape: Shape, rng: random.Random) -> Shape:
    """A held-out shape near the scenario (rule 7, trick 11): other batch and
    head counts, sequence lengths moved by 1..63 and never a multiple of 64,
    same head_dim and masking.  Drawn from the run's secret seed."""
    def move(s):
        for _ in range(100):
            t = s + rng.choice([-1, 1]) * rng.randint(1, 63)
            if t >= 17 and t % 64:
                return t
        return s + 1
    seq_q = move(shape.seq_q)
    seq_k = seq_q if shape.seq_q == shape.seq_k else move(shape.seq_k)
    return Shape(rng.randint(1, max(1, min(shape.batch, 3))), rng.randint(1, shape.heads), seq_q, seq_k,
                 shape.head_dim, shape.causal)


def flops(shape: Shape) -> float:
    return roofline.attention_flops(shape.batch, shape.heads, shape.seq_q, shape.seq_k, shape.head_dim,
                                    shape.causal)


def nbytes(shape: Shape) -> float:
    return roofline.attention_bytes(shape.batch, shape.heads, shape.seq_q, shape.seq_k, shape.head_dim, elem=2)


def buffers(shape: Shape) -> dict:
    """Name -> tensor shape; every buffer is bf16."""
    q = (shape.batch, shape.heads, shape.seq_q, shape.head_dim)
    kv = (shape.batch, shape.heads, shape.seq_k, shape.head_dim)
    return {"q": q, "k": kv, "v": kv, "o": q}


INPUTS = ("q", "k", "v")
OUTPUT = "o"
SO_ARGTYPES = ["ptr", "ptr", "ptr", "ptr", "int", "int", "int", "int", "int", "int", "float", "stream"]


def so_args(shape: Shape, ids: dict) -> list:
    return [{"t": "ptr", "buf": ids["q"]}, {"t": "ptr", "buf": ids["k"]}, {"t": "ptr", "buf": ids["v"]},
            {"t": "ptr", "buf": ids["o"]},
            {"t": "int", "v": shape.batch}, {"t": "int", "v": shape.heads}, {"t": "int", "v": shape.seq_q},
            {"t": "int", "v": shape.seq_k}, {"t": "int", "v": shape.head_dim},
            {"t": "int", "v": int(shape.causal)}, {"t": "float", "v": shape.scale}, {"t": "stream"}]


def py_args(shape: Shape, ids: dict) -> list:
    b = buffers(shape)
    t = [{"t": "tensor", "buf": ids[n], "shape": list(b[n]), "dtype": DTYPE} for n in ("q", "k", "v", "o")]
    return t + [{"t": "bool", "v": shape.causal}, {"t": "float", "v": shape.scale}]


def where(shape: Shape, flat: int) -> str:
    d = flat % shape.head_dim
    r = flat // shape.head_dim
    i = r % shape.seq_q
    r //= shape.seq_q
    h = r % shape.heads
    b = r // shape.heads
    return f"o[b={b}, h={h}, q={i}, d={d}]"


# ---------------------------------------------------------------- torch ----

def fill_inputs(t: dict, gen) -> None:
    """Fresh inputs, in place, from a torch.Generator (on the GPU); see the regimes above."""
    import torch
    q, k, v = t["q"], t["k"], t["v"]
    B, H, _, D = q.shape
    dev = q.device

    def randn(shape):
        return torch.randn(shape, generator=gen, device=dev, dtype=torch.float32)
    mode = torch.randint(0, 3, (B, H, 1, 1), generator=gen, device=dev)
    w = randn((B, H, 1, D))
    qn = randn(q.shape)
    qx = torch.where(mode == 0, Q_STD["peaky"] * qn, torch.where(mode == 1, Q_STD["flat"] * qn, qn - w))
    q.copy_(qx)
    del qn, qx
    kn = randn(k.shape)
    k.copy_(torch.where(mode == 2, kn + w, kn))
    del kn
    v.copy_(randn(v.shape) + randn((B, H, 1, D)))


def reference(t: dict, shape: Shape):
    """Working-precision reference: torch SDPA in bf16 (its default backend
    choice, the flash kernel for these shapes)."""
    import torch.nn.functional as F
    return F.scaled_dot_product_attention(t["q"], t["k"], t["v"], is_causal=shape.causal, scale=shape.scale)


def reference_hi(t: dict, shape: Shape, max_bytes: int = 1 << 30):
    """High-precision reference: the same bf16 inputs in fp32, exact fp32
    matmuls (TF32 off), softmax in fp32, computed in query chunks so the
    score matrix stays under max_bytes."""
    import torch
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        q = t["q"].float()
        k = t["k"].float()
        v = t["v"].float()
        B, H, Sq, D = q.shape
        Sk = k.shape[2]
        out = torch.empty((B, H, Sq, D), device=q.device, dtype=torch.float32)
        rows = max(1, min(Sq, max_bytes // max(1, B * H * Sk * 4)))
        kt = k.transpose(-1, -2)
        for s0 in range(0, Sq, rows):
            s1 = min(Sq, s0 + rows)
            sc = torch.matmul(q[:, :, s0:s1], kt).mul_(shape.scale)
            if shape.causal:
                qi = torch.arange(s0, s1, device=q.device).view(-1, 1)
                kj = torch.arange(Sk, device=q.device).view(1, -1)
                sc.masked_fill_(kj > qi, float("-inf"))
            p = torch.softmax(sc, dim=-1)
            out[:, :, s0:s1] = torch.matmul(p, v)
            del sc, p
        return out
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def compare_impl(t: dict, shape: Shape):
    """What compare_us times: torch's flash backend, or None when it cannot run the shape."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = t["q"], t["k"], t["v"]

    def run():
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=shape.causal, scale=shape.scale)
    try:
        run()
        torch.cuda.synchronize()
    except RuntimeError:
        return None
    return run
