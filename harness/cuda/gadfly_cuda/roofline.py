"""Speed-of-light arithmetic (HARNESS.md section C), standard library only.

``bound_us = max(FLOPs / peak_flops, bytes / peak_bandwidth)``, with the
datasheet's dense peaks (never the sparse figure).  A measured time below it
is physically impossible: the harness rejects it.  Utilisation against the
*measured achievable* ceilings gives the REVIEW flags.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Device:
    name: str
    peak_flops: dict          # dtype name -> dense tensor-core FLOP/s
    peak_bw: float            # HBM bytes/s (read + write)
    achievable_flops: dict    # measured, for REVIEW flags
    achievable_bw: float
    source: str


# Dense peaks (SXM parts).  H200 = H100 compute with 4.8 TB/s HBM3e.
# Achievable figures for the H200 were measured on this workplace's machines
# (HARNESS.md [demo]: 1 GiB device copy 4.26 TB/s; cuBLAS bf16 8192^3 788 TFLOP/s).
_H_COMPUTE = {"bfloat16": 989.4e12, "float16": 989.4e12, "float8": 1978.9e12, "tf32": 494.7e12,
              "float32": 66.9e12, "float64": 66.9e12}
DEVICES = {
    "h200": Device("H200", _H_COMPUTE, 4.8e12, {"bfloat16": 788e12, "float16": 788e12}, 4.26e12,
                   "datasheet dense peaks; achievable measured here (HARNESS.md [demo])"),
    "h100 sxm": Device("H100 SXM", _H_COMPUTE, 3.35e12, {}, 0.0, "datasheet dense peaks"),
    "h100 pcie": Device("H100 PCIe", {"bfloat16": 756.5e12, "float16": 756.5e12, "float32": 51.2e12}, 2.0e12, {},
                        0.0, "datasheet dense peaks"),
    "h100": Device("H100 SXM", _H_COMPUTE, 3.35e12, {}, 0.0, "datasheet dense peaks (assumed SXM)"),
    "a100": Device("A100", {"bfloat16": 312e12, "float16": 312e12, "tf32": 156e12, "float32": 19.5e12}, 2.039e12,
                   {}, 0.0, "datasheet dense peaks (80 GB SXM)"),
}


def device_for(name: str) -> Device | None:
    """Finds the table entry for a CUDA device name such as 'NVIDIA H200'."""
    n = name.lower()
    for key in ("h200", "h100 pcie", "h100 sxm", "h100", "a100"):
        if key in n:
            return DEVICES[key]
    return None


def achievable(dev: Device, dtype: str):
    """(flops, bw) ceilings for the REVIEW flags: measured where known, else 85% of peak."""
    f = dev.achievable_flops.get(dtype) or 0.85 * dev.peak_flops.get(dtype, 0.0)
    b = dev.achievable_bw or 0.85 * dev.peak_bw
    return f, b


def bound_us(flops: float, nbytes: float, dev: Device, dtype: str) -> float:
    peak_f = dev.peak_flops.get(dtype)
    if not peak_f:
        raise KeyError(f"no peak FLOP/s for dtype {dtype} on {dev.name}")
    return max(flops / peak_f, nbytes / dev.peak_bw) * 1e6


def attention_pairs(seq_q: int, seq_k: int, causal: bool) -> int:
    """(query, key) pairs that are computed.  Causal masking is top-left
    aligned, as in torch's scaled_dot_product_attention(is_causal=True):
    query i sees keys 0..i."""
    if not causal:
        return seq_q * seq_k
    full = min(seq_q, seq_k)           # rows 0..full-1 see i+1 keys
    pairs = full * (full + 1) // 2
    pairs += max(0, seq_q - seq_k) * seq_k  # later rows see every key
    return pairs


def attention_flops(b: int, h: int, seq_q: int, seq_k: int, d: int, causal: bool, d_v: int | None = None) -> float:
    """Forward FLOPs: 2*d per pair for Q K^T and 2*d_v per pair for P V
    (FlashAttention's benchmark formula 4*B*H*Sq*Sk*D, halved, up to the
    diagonal, when causal).  Softmax FLOPs are not counted."""
    d_v = d if d_v is None else d_v
    return float(b * h * attention_pairs(seq_q, seq_k, causal) * (2 * d + 2 * d_v))


def attention_bytes(b: int, h: int, seq_q: int, seq_k: int, d: int, elem: int = 2, d_v: int | None = None,
                    h_kv: int | None = None) -> float:
    """Compulsory traffic: Q, K, V read once, O written once (no LSE output)."""
    d_v = d if d_v is None else d_v
    h_kv = h if h_kv is None else h_kv
    return float(elem * (b * h * seq_q * d + b * h_kv * seq_k * (d + d_v) + b * h * seq_q * d_v))


def flags(time_us: float, baseline_us: float, flops: float, nbytes: float, dev: Device, dtype: str,
          bound: float) -> tuple[str | None, list[str]]:
    """Returns (reject_reason or None, notes).  REJECT below the bound; REVIEW
    above 90% of the measured achievable ceilings or a speedup over 10x; NOTE
    a speedup over 2x."""
    notes: list[str] = []
    if not (time_us > 0):
        return "no positive time", notes
    if time_us < bound:
        return (f"time {time_us:.2f} us is below the speed-of-light bound {bound:.2f} us "
                f"({flops / 1e9:.3g} GFLOP, {nbytes / 1e6:.3g} MB): the measurement was fooled"), notes
    af, ab = achievable(dev, dtype)
    util_f = flops / (time_us * 1e-6) / af if af else 0.0
    util_b = nbytes / (time_us * 1e-6) / ab if ab else 0.0
    if util_f > 0.9:
        notes.append(f"REVIEW: {flops / (time_us * 1e-6) / 1e12:.0f} TFLOP/s is {util_f:.0%} of the measured "
                     f"achievable {af / 1e12:.0f}")
    if util_b > 0.9:
        notes.append(f"REVIEW: {nbytes / (time_us * 1e-6) / 1e12:.2f} TB/s is {util_b:.0%} of the measured "
                     f"achievable {ab / 1e12:.2f}")
    sp = baseline_us / time_us
    if sp > 10:
        notes.append(f"REVIEW: speedup {sp:.1f}x over the initial kernel (> 10x)")
    elif sp > 2:
        notes.append(f"NOTE: speedup {sp:.1f}x over the initial kernel (> 2x)")
    return None, notes
