// The CPU's fused scaled_dot_product_attention (Backend::fused_attention) for
// float32: per (batch, head), blocks of query rows against every key, the
// scores of a block kept in a per-thread buffer (a few rows of S floats, in
// L1/L2) instead of a [B, H, L, S] tensor in memory, with the decomposition's
// numerics (src/ops/decompositions.cpp, sdpa_decomp): scores q.k summed in
// float32 (fused multiply-adds, in another order than a GEMM's), times the
// scale; the mask (bool: false -> -inf; float32: added) and the causal
// triangle (key j > query i: -inf); softmax's exp(s - max), summed in 16
// lanes; those times v summed in float32 and multiplied by 1 / sum at the
// end (as FlashAttention and the CUDA kernel normalize: one division and Ev
// products per row instead of S divisions; the sum is at least 1, so each
// result is within an ulp or two of dividing first); a row whose every score is
// -inf gives zeros under a mask or the causal triangle (PyTorch's
// _safe_softmax, as the decomposition applies it: zero probabilities, whose
// product with a v holding inf or NaN is NaN) and NaN without one
// (softmax's). Memory: k^T and v packed per (batch, head); the next
// batch's (or task's) q, k and v prefetched into L2 a share before each tile;
// outputs of 4 MiB and more written with non-temporal stores (AVX-512).
// Built once per CPU capability.
#pragma once
#include <cstdint>

#include "backend/attention.h"
#include "backend/cpu/capability.h"

namespace smelt::cpu {

/// One call: q [B, H, L, E], k [B, H, S, E], v [B, H, S, Ev], out [B, H, L, Ev]
/// float32, each with its last dim contiguous; strides in elements for the
/// batch, head and sequence dims. S > 0. mask.data null: no mask; else bool
/// or float32 (AttentionMaskView).
struct AttentionCall {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;
  int64_t batch = 0, heads = 0, L = 0, S = 0, E = 0, Ev = 0;
  int64_t q_stride[3] = {}, k_stride[3] = {}, v_stride[3] = {}, o_stride[3] = {};
  float scale = 1.f;
  bool causal = false;
  backend::AttentionMaskView mask;
};

using AttentionFn = void (*)(const AttentionCall& call);
SMELT_DECLARE_DISPATCH(AttentionFn, attention_stub);

}  // namespace smelt::cpu
