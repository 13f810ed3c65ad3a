"""Candidate "triton_good": a FlashAttention-style forward in Triton (the
evaluator's Python path).  attention_forward(q, k, v, o, causal, scale) writes
o on torch's current stream; q, o: [B, H, Sq, D], k, v: [B, H, Sk, D], bf16."""
import triton
import triton.language as tl


@triton.jit
def _attn_fwd(Q, K, V, O, qk_scale, Sq, Sk, H,
              sqb, sqh, sqs, skb, skh, sks, svb, svh, svs, sob, soh, sos,
              CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    q = tl.load(Q + b * sqb + h * sqh + offs_m[:, None] * sqs + offs_d[None, :], mask=offs_m[:, None] < Sq, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    hi = Sk
    if CAUSAL:
        hi = tl.minimum(Sk, (pid_m + 1) * BLOCK_M)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K + b * skb + h * skh + cols[None, :] * sks + offs_d[:, None], mask=cols[None, :] < Sk, other=0.0)
        qk = tl.dot(q, k) * qk_scale
        valid = cols[None, :] < Sk
        if CAUSAL:
            valid = valid & (offs_m[:, None] >= cols[None, :])
        qk = tl.where(valid, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(V + b * svb + h * svh + cols[:, None] * svs + offs_d[None, :], mask=cols[:, None] < Sk, other=0.0)
        acc = tl.dot(p.to(tl.bfloat16), v, acc)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(O + b * sob + h * soh + offs_m[:, None] * sos + offs_d[None, :], acc.to(tl.bfloat16),
             mask=offs_m[:, None] < Sq)


def attention_forward(q, k, v, o, causal, scale):
    B, H, Sq, D = q.shape
    Sk = k.shape[2]
    block_m = 128 if D <= 64 else 64
    grid = (triton.cdiv(Sq, block_m), B * H)
    _attn_fwd[grid](q, k, v, o, scale * 1.4426950408889634, Sq, Sk, H,
                    q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
                    v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
                    CAUSAL=bool(causal), BLOCK_M=block_m, BLOCK_N=64, D=D,
                    num_warps=4 if D <= 64 else 8, num_stages=2)
    return 0
