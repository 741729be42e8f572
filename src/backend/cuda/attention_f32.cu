// Fused scaled dot-product attention for float32 (Backend::fused_attention):
// softmax(q k^T * scale [causal] [+ mask]) v in one kernel, the scores never
// written to memory. The tensor-core kernel of attention.cu takes float16 /
// bfloat16 only; this one computes in float32 on the CUDA cores, so that a
// float32 model (BERT's, MiniLM's) keeps its attention one kernel instead of
// two batched GEMMs, a softmax and the head-view copies between them.
//
// The algorithm is FlashAttention's online softmax (Dao et al., "FlashAttention:
// Fast and Memory-Efficient Exact Attention with IO-Awareness", 2022; Milakov &
// Gimelshein, "Online normalizer calculation for softmax", 2018): each thread
// owns one query row, keeps q and its output accumulator in registers, and
// walks the keys, kKeys at a time staged in shared memory (every thread of a
// warp reads the same key: broadcasts, no bank conflicts). A chunk of kChunk
// scores is formed at once (independent dot products for the pipelines), then
// the running maximum and sum of exponentials are updated and the accumulator
// rescaled once per chunk. Each score is scaled (and masked) before the
// maximum, so any scale is exact, zero and negative ones included.
// Exponentials are exp2f of the scores in base-2 units. A row whose every
// score is -inf gives zeros under a mask or the causal triangle (the
// decomposition's safe softmax) and NaN without one (softmax's); NaN and
// infinities propagate as there.
#include <cstdint>

#include "backend/cuda/attention_mask.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"

namespace smelt::cuda::impl {

namespace {

constexpr int kThreads = 128;  // query rows per block: one per thread
constexpr int kKeys = 64;      // keys staged per step
constexpr int kChunk = 16;     // scores formed before each softmax update

template <int D, bool CAUSAL, bool MASKED>
__global__ void __launch_bounds__(kThreads) attention_f32_kernel(AttentionArgs a) {
  __shared__ __align__(16) float k_s[kKeys * D];
  __shared__ __align__(16) float v_s[kKeys * D];
  // The longest causal blocks (the last query rows) start first.
  const int q_tile = CAUSAL ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : blockIdx.x;
  const int row0 = q_tile * kThreads;
  const int row = row0 + static_cast<int>(threadIdx.x);
  const bool live = row < a.L;
  const int64_t bh = blockIdx.y, b = bh / a.heads, h = bh % a.heads;
  const float* k = static_cast<const float*>(a.k) + b * a.k_stride[0] + h * a.k_stride[1];
  const float* v = static_cast<const float*>(a.v) + b * a.v_stride[0] + h * a.v_stride[1];
  const float scale_log2 = a.scale * kLog2e;

  float q[D], acc[D];
  {
    const float* qr = static_cast<const float*>(a.q) + b * a.q_stride[0] + h * a.q_stride[1] +
                      static_cast<int64_t>(live ? row : 0) * a.q_stride[2];
#pragma unroll
    for (int d = 0; d < D; ++d) {
      q[d] = live ? qr[d] : 0.f;
      acc[d] = 0.f;
    }
  }
  const char* mask_row = MASKED ? mask_row_of(a, b, h, row) : nullptr;
  float m = -INFINITY, l = 0.f;  // running max (base-2 units) and sum of exponentials
  // Keys past the block's last row are masked for every row of it (causal).
  const int key_end = CAUSAL ? min(a.S, row0 + kThreads) : a.S;

  for (int key0 = 0; key0 < key_end; key0 += kKeys) {
    const int keys = min(kKeys, key_end - key0);
    __syncthreads();  // every thread is done with the previous keys
    // Keys past `keys` are zeros (their scores are masked below).
    for (int i = threadIdx.x; i < kKeys * D; i += kThreads) {
      const int j = i / D, d = i % D;
      const bool in = j < keys;
      k_s[i] = in ? k[static_cast<int64_t>(key0 + j) * a.k_stride[2] + d] : 0.f;
      v_s[i] = in ? v[static_cast<int64_t>(key0 + j) * a.v_stride[2] + d] : 0.f;
    }
    __syncthreads();
    for (int c0 = 0; c0 < keys; c0 += kChunk) {
      float s[kChunk];
#pragma unroll
      for (int j = 0; j < kChunk; ++j) s[j] = 0.f;
#pragma unroll
      for (int d = 0; d < D; d += 4) {
#pragma unroll
        for (int j = 0; j < kChunk; ++j) {
          const float4 kv = *reinterpret_cast<const float4*>(&k_s[(c0 + j) * D + d]);
          s[j] = fmaf(q[d], kv.x, s[j]);
          s[j] = fmaf(q[d + 1], kv.y, s[j]);
          s[j] = fmaf(q[d + 2], kv.z, s[j]);
          s[j] = fmaf(q[d + 3], kv.w, s[j]);
        }
      }
      float mx = m;
#pragma unroll
      for (int j = 0; j < kChunk; ++j) {
        const int key = key0 + c0 + j;
        if (c0 + j >= keys || (CAUSAL && key > row)) {
          s[j] = -INFINITY;
        } else if constexpr (MASKED) {
          s[j] = masked_score(a, s[j] * scale_log2, mask_row, key);
        } else {
          s[j] *= scale_log2;
        }
        mx = fmaxf(mx, s[j]);
      }
      // While every key so far is masked the max stays -inf: exponentials of 0.
      const float base = mx == -INFINITY ? 0.f : mx;
      const float rescale = exp2f(m - base);
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < kChunk; ++j) {
        s[j] = exp2f(s[j] - base);
        sum += s[j];
      }
      l = l * rescale + sum;
      m = mx;
#pragma unroll
      for (int d = 0; d < D; ++d) acc[d] *= rescale;
#pragma unroll
      for (int j = 0; j < kChunk; ++j) {
#pragma unroll
        for (int d = 0; d < D; d += 4) {
          const float4 vv = *reinterpret_cast<const float4*>(&v_s[(c0 + j) * D + d]);
          acc[d] = fmaf(s[j], vv.x, acc[d]);
          acc[d + 1] = fmaf(s[j], vv.y, acc[d + 1]);
          acc[d + 2] = fmaf(s[j], vv.z, acc[d + 2]);
          acc[d + 3] = fmaf(s[j], vv.w, acc[d + 3]);
        }
      }
    }
  }
  if (!live) return;
  const float inv = l > 0.f ? 1.f / l : empty_row_factor<(MASKED || CAUSAL)>();
  float* out = static_cast<float*>(a.out) + b * a.o_stride[0] + h * a.o_stride[1] +
               static_cast<int64_t>(row) * a.o_stride[2];
#pragma unroll
  for (int d = 0; d < D; ++d) out[d] = acc[d] * inv;
}

template <int D, bool CAUSAL, bool MASKED>
void launch_kernel(const AttentionArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((a.L + kThreads - 1) / kThreads),
                  static_cast<unsigned>(a.batch * a.heads));
  attention_f32_kernel<D, CAUSAL, MASKED><<<grid, kThreads, 0, stream>>>(a);
}

template <int D>
void launch_for(const AttentionArgs& a, bool causal, cudaStream_t stream) {
  const bool masked = a.mask_kind != AttentionMask::None;
  if (causal)
    masked ? launch_kernel<D, true, true>(a, stream) : launch_kernel<D, true, false>(a, stream);
  else
    masked ? launch_kernel<D, false, true>(a, stream) : launch_kernel<D, false, false>(a, stream);
}

}  // namespace

bool attention_f32_supported(DType dtype, int64_t head_dim) {
  return dtype == DType::Float32 && (head_dim == 32 || head_dim == 64);
}

void launch_attention_f32(const AttentionArgs& a, bool causal, cudaStream_t stream) {
  if (a.L == 0 || a.batch * a.heads == 0) return;
  if (a.head_dim == 64)
    launch_for<64>(a, causal, stream);
  else
    launch_for<32>(a, causal, stream);
  SMELT_CUDA_CHECK_LAUNCH();
}

}  // namespace smelt::cuda::impl
