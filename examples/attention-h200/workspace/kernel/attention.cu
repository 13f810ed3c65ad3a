// Initial kernel of the attention-h200 campaign: scaled dot-product attention
// forward, bf16 in and out, fp32 arithmetic, one warp per query row, online
// softmax, keys and values read straight from global memory (no tiling, no
// shared memory, no tensor cores).
//
// This file is the protected baseline (harness/cuda/problems/attention/baseline.cu)
// and must stay byte-identical to the workspace's initial kernel/attention.cu.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <math.h>

template <int DPL>  // head_dim / 32: elements of a row held by each lane
__global__ void __launch_bounds__(128) attention_naive(const __nv_bfloat16* __restrict__ q,
                                                       const __nv_bfloat16* __restrict__ k,
                                                       const __nv_bfloat16* __restrict__ v,
                                                       __nv_bfloat16* __restrict__ o, int seq_q, int seq_k,
                                                       int causal, float scale) {
  constexpr int D = DPL * 32;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = blockIdx.x * (blockDim.x >> 5) + warp;
  const long bh = blockIdx.y;
  if (row >= seq_q) return;
  const __nv_bfloat16* qr = q + (bh * seq_q + row) * D + lane * DPL;
  const __nv_bfloat16* kb = k + bh * (long)seq_k * D + lane * DPL;
  const __nv_bfloat16* vb = v + bh * (long)seq_k * D + lane * DPL;
  float qv[DPL], acc[DPL];
#pragma unroll
  for (int i = 0; i < DPL; ++i) {
    qv[i] = __bfloat162float(qr[i]) * scale;
    acc[i] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  const int kend = causal ? min(seq_k, row + 1) : seq_k;  // top-left causal: query i sees keys 0..i
  for (int j = 0; j < kend; ++j) {
    const __nv_bfloat16* kr = kb + (long)j * D;
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < DPL; ++i) s += qv[i] * __bfloat162float(kr[i]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    const float mn = fmaxf(m, s);
    const float corr = __expf(m - mn);
    const float p = __expf(s - mn);
    l = l * corr + p;
    const __nv_bfloat16* vr = vb + (long)j * D;
#pragma unroll
    for (int i = 0; i < DPL; ++i) acc[i] = acc[i] * corr + p * __bfloat162float(vr[i]);
    m = mn;
  }
  __nv_bfloat16* orow = o + (bh * seq_q + row) * D + lane * DPL;
  const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
  for (int i = 0; i < DPL; ++i) orow[i] = __float2bfloat16(acc[i] * inv);
}

template <int DPL>
static int launch(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* o,
                  int batch, int heads, int seq_q, int seq_k, int causal, float scale, cudaStream_t stream) {
  const dim3 block(128);
  const dim3 grid((seq_q + 3) / 4, batch * heads);
  attention_naive<DPL><<<grid, block, 0, stream>>>(q, k, v, o, seq_q, seq_k, causal, scale);
  return (int)cudaGetLastError();
}

// q, o: [batch, heads, seq_q, head_dim]; k, v: [batch, heads, seq_k, head_dim]; contiguous bf16.
// Returns 0, or non-zero for an unsupported shape or a launch error.
extern "C" int attention_forward(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                 __nv_bfloat16* o, int batch, int heads, int seq_q, int seq_k, int head_dim,
                                 int causal, float scale, cudaStream_t stream) {
  if (batch < 1 || heads < 1 || seq_q < 1 || seq_k < 1 || (long)batch * heads > 65535) return 1;
  switch (head_dim) {
    case 32: return launch<1>(q, k, v, o, batch, heads, seq_q, seq_k, causal, scale, stream);
    case 64: return launch<2>(q, k, v, o, batch, heads, seq_q, seq_k, causal, scale, stream);
    case 96: return launch<3>(q, k, v, o, batch, heads, seq_q, seq_k, causal, scale, stream);
    case 128: return launch<4>(q, k, v, o, batch, heads, seq_q, seq_k, causal, scale, stream);
    default: return 2;
  }
}
