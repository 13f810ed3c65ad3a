// Candidate "cheat_cache": the good kernel plus an output cache keyed on the
// buffer pointers and the shape.  On a hit it copies the saved output instead
// of computing (a memcpy of the output: "faster").  Harnesses that reuse one
// input buffer with the same contents, or check only the first call, pass it.
//
// Based on: FlashAttention-2-style forward with tensor cores (WMMA,
// bf16 in, fp32 accumulate).  A block of 4 warps owns 64 query rows (16 per
// warp) and walks 64-key tiles of K and V staged in shared memory: S = Q K^T
// on the tensor cores, an online softmax in fp32 (two lanes per row), P
// rounded to bf16 as FlashAttention does, O += P V on the tensor cores with
// the running O kept in shared memory.  Causal blocks stop at the diagonal.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <mma.h>
#include <math.h>

using namespace nvcuda;
typedef __nv_bfloat16 bf16;

namespace {
constexpr int BM = 64, BN = 64, NWARPS = 4, NT = NWARPS * 32;

template <int D>
struct Layout {
  static constexpr int DP = D + 8;   // bf16 row stride of Q, K, V tiles (16-byte multiple, skews banks)
  static constexpr int SP = BN + 4;  // fp32 row stride of S
  static constexpr int PP = BN + 8;  // bf16 row stride of P
  static constexpr int OP = D + 4;   // fp32 row stride of O
  static constexpr size_t q_off = 0;
  static constexpr size_t k_off = q_off + (size_t)BM * DP * 2;
  static constexpr size_t v_off = k_off + (size_t)BN * DP * 2;
  static constexpr size_t s_off = v_off + (size_t)BN * DP * 2;
  static constexpr size_t p_off = s_off + (size_t)BM * SP * 4;
  static constexpr size_t o_off = p_off + (size_t)BM * PP * 2;
  static constexpr size_t m_off = o_off + (size_t)BM * OP * 4;
  static constexpr size_t l_off = m_off + (size_t)BM * 4;
  static constexpr size_t bytes = l_off + (size_t)BM * 4;
};

// Rows [r0, r0 + rows) of a [n, D] matrix into shared memory (row stride DP), zeros past n.
template <int D, int DP>
__device__ __forceinline__ void load_tile(bf16* dst, const bf16* __restrict__ src, int r0, int rows, int n) {
  constexpr int VPR = D / 8;  // 16-byte vectors per row
  for (int idx = threadIdx.x; idx < rows * VPR; idx += NT) {
    const int r = idx / VPR, c = (idx % VPR) * 8;
    uint4 val = make_uint4(0u, 0u, 0u, 0u);
    if (r0 + r < n) val = *reinterpret_cast<const uint4*>(src + (size_t)(r0 + r) * D + c);
    *reinterpret_cast<uint4*>(dst + r * DP + c) = val;
  }
}

template <int D>
__global__ void __launch_bounds__(NT) attention_fa(const bf16* __restrict__ Q, const bf16* __restrict__ K,
                                                   const bf16* __restrict__ V, bf16* __restrict__ O, int Sq, int Sk,
                                                   int causal, float scale_log2) {
  using L = Layout<D>;
  constexpr int DP = L::DP, SP = L::SP, PP = L::PP, OP = L::OP;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem + L::q_off);
  bf16* sK = reinterpret_cast<bf16*>(smem + L::k_off);
  bf16* sV = reinterpret_cast<bf16*>(smem + L::v_off);
  float* sS = reinterpret_cast<float*>(smem + L::s_off);
  bf16* sP = reinterpret_cast<bf16*>(smem + L::p_off);
  float* sO = reinterpret_cast<float*>(smem + L::o_off);
  float* sM = reinterpret_cast<float*>(smem + L::m_off);
  float* sL = reinterpret_cast<float*>(smem + L::l_off);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int q0 = blockIdx.x * BM;
  const size_t bh = blockIdx.y;
  const bf16* Qb = Q + bh * (size_t)Sq * D;
  const bf16* Kb = K + bh * (size_t)Sk * D;
  const bf16* Vb = V + bh * (size_t)Sk * D;
  bf16* Ob = O + bh * (size_t)Sq * D;

  load_tile<D, DP>(sQ, Qb, q0, BM, Sq);
  for (int i = threadIdx.x; i < BM * OP; i += NT) sO[i] = 0.f;
  for (int i = threadIdx.x; i < BM; i += NT) {
    sM[i] = -INFINITY;
    sL[i] = 0.f;
  }
  const int kv_end = causal ? min(Sk, q0 + BM) : Sk;
  const int ntiles = (kv_end + BN - 1) / BN;
  const int wr = warp * 16;                 // this warp's first row in the tile
  const int srow = wr + (lane >> 1);        // softmax: two lanes per row ...
  const int half = lane & 1;                // ... each with half of the columns
  const int qi = q0 + srow;

  for (int t = 0; t < ntiles; ++t) {
    const int k0 = t * BN;
    __syncthreads();
    load_tile<D, DP>(sK, Kb, k0, BN, Sk);
    load_tile<D, DP>(sV, Vb, k0, BN, Sk);
    __syncthreads();

#pragma unroll
    for (int nt = 0; nt < BN / 16; ++nt) {  // S = Q K^T for this warp's 16 rows
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.f);
#pragma unroll
      for (int kt = 0; kt < D / 16; ++kt) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> b;
        wmma::load_matrix_sync(a, sQ + wr * DP + kt * 16, DP);
        wmma::load_matrix_sync(b, sK + nt * 16 * DP + kt * 16, DP);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(sS + wr * SP + nt * 16, acc, SP, wmma::mem_row_major);
    }
    __syncwarp();

    {  // online softmax in base 2
      const float* sr = sS + srow * SP + half * (BN / 2);
      const float m_old = sM[srow], l_old = sL[srow];
      float vals[BN / 2];
      float mx = -INFINITY;
#pragma unroll
      for (int c = 0; c < BN / 2; ++c) {
        const int kj = k0 + half * (BN / 2) + c;
        float s = sr[c] * scale_log2;
        if (kj >= Sk || (causal && kj > qi)) s = -INFINITY;
        vals[c] = s;
        mx = fmaxf(mx, s);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      const float m_new = fmaxf(m_old, mx);
      const float base = (m_new == -INFINITY) ? 0.f : m_new;
      const float alpha = exp2f(m_old - base);
      float sum = 0.f;
      bf16* pr = sP + srow * PP + half * (BN / 2);
#pragma unroll
      for (int c = 0; c < BN / 2; ++c) {
        const float p = exp2f(vals[c] - base);
        sum += p;
        pr[c] = __float2bfloat16(p);
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      float* orow = sO + srow * OP + half * (D / 2);
#pragma unroll 8
      for (int c = 0; c < D / 2; ++c) orow[c] *= alpha;
      __syncwarp();
      if (half == 0) {
        sM[srow] = m_new;
        sL[srow] = l_old * alpha + sum;
      }
    }
    __syncwarp();

#pragma unroll
    for (int dt = 0; dt < D / 16; ++dt) {  // O += P V
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, sO + wr * OP + dt * 16, OP, wmma::mem_row_major);
#pragma unroll
      for (int kt = 0; kt < BN / 16; ++kt) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> b;
        wmma::load_matrix_sync(a, sP + wr * PP + kt * 16, PP);
        wmma::load_matrix_sync(b, sV + kt * 16 * DP + dt * 16, DP);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(sO + wr * OP + dt * 16, acc, OP, wmma::mem_row_major);
    }
    __syncwarp();
  }

  if (qi < Sq) {
    const float l = sL[srow];
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const float* orow = sO + srow * OP + half * (D / 2);
    bf16* out = Ob + (size_t)qi * D + half * (D / 2);
#pragma unroll 8
    for (int c = 0; c < D / 2; c += 2)
      *reinterpret_cast<__nv_bfloat162*>(out + c) = __floats2bfloat162_rn(orow[c] * inv, orow[c + 1] * inv);
  }
}

template <int D>
int launch(const bf16* q, const bf16* k, const bf16* v, bf16* o, int batch, int heads, int seq_q, int seq_k,
           int causal, float scale, cudaStream_t stream) {
  static bool configured = false;
  const size_t smem = Layout<D>::bytes;
  if (!configured) {
    cudaError_t e = cudaFuncSetAttribute(attention_fa<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return (int)e;
    configured = true;
  }
  const dim3 grid((seq_q + BM - 1) / BM, batch * heads);
  attention_fa<D><<<grid, NT, smem, stream>>>(q, k, v, o, seq_q, seq_k, causal, scale * 1.4426950408889634f);
  return (int)cudaGetLastError();
}
}  // namespace

struct CacheEntry {
  const void *q, *k, *v, *o;
  int b, h, sq, sk, d, causal;
  void* saved;
};
static CacheEntry g_cache[64];
static int g_cached = 0;

static int attention_compute(const bf16* q, const bf16* k, const bf16* v, bf16* o, int batch, int heads,
                                 int seq_q, int seq_k, int head_dim, int causal, float scale, cudaStream_t stream) {
  if (batch < 1 || heads < 1 || seq_q < 1 || seq_k < 1 || (long)batch * heads > 65535) return 1;
  switch (head_dim) {
    case 64: return launch<64>(q, k, v, o, batch, heads, seq_q, seq_k, causal, scale, stream);
    case 128: return launch<128>(q, k, v, o, batch, heads, seq_q, seq_k, causal, scale, stream);
    default: return 2;
  }
}

extern "C" int attention_forward(const bf16* q, const bf16* k, const bf16* v, bf16* o, int batch, int heads,
                                 int seq_q, int seq_k, int head_dim, int causal, float scale, cudaStream_t stream) {
  const size_t bytes = (size_t)batch * heads * seq_q * head_dim * sizeof(bf16);
  for (int i = 0; i < g_cached; ++i) {
    CacheEntry& e = g_cache[i];
    if (e.q == q && e.k == k && e.v == v && e.o == o && e.b == batch && e.h == heads && e.sq == seq_q &&
        e.sk == seq_k && e.d == head_dim && e.causal == causal) {
      cudaMemcpyAsync(o, e.saved, bytes, cudaMemcpyDeviceToDevice, stream);
      return (int)cudaGetLastError();
    }
  }
  int rc = attention_compute(q, k, v, o, batch, heads, seq_q, seq_k, head_dim, causal, scale, stream);
  if (rc == 0 && g_cached < 64) {
    void* saved = nullptr;
    if (cudaMalloc(&saved, bytes) == cudaSuccess) {
      cudaMemcpyAsync(saved, o, bytes, cudaMemcpyDeviceToDevice, stream);
      g_cache[g_cached++] = CacheEntry{q, k, v, o, batch, heads, seq_q, seq_k, head_dim, causal, saved};
    }
  }
  return rc;
}
