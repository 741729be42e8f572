// An attn_mask's term of one score, shared by the fused attention kernels
// (attention.cu, attention_f32.cu): in base-2 exponent units, since the
// kernels compute softmax as 2^(x log2(e) - max).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/kernels.h"

namespace smelt::cuda::impl {

/// log2(e): scores times this are exponents of 2.
inline constexpr float kLog2e = 1.4426950408889634f;

/// The term the mask adds to the score of `key` in the mask row at `row`
/// (bytes; AttentionArgs::mask_stride[3] elements apart): -inf where a bool
/// mask is false (0 where true), else the mask's value times log2(e).
__device__ __forceinline__ float mask_term(const AttentionArgs& a, const char* row, int key) {
  const char* p = row + key * a.mask_stride[3] * a.mask_itemsize;
  switch (a.mask_kind) {
    case AttentionMask::Bool:
      return *reinterpret_cast<const bool*>(p) ? 0.f : -INFINITY;
    case AttentionMask::Float16:
      return __half2float(*reinterpret_cast<const __half*>(p)) * kLog2e;
    case AttentionMask::BFloat16:
      return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(p)) * kLog2e;
    default:
      return *reinterpret_cast<const float*>(p) * kLog2e;
  }
}

/// A scaled score (base-2 units) under the mask at `key` of the mask row at
/// `row`: -inf where a bool mask is false (replaced, as the decomposition's
/// where: a NaN or infinite score there stays out of the row), else the score
/// plus the mask term (added, as the decomposition's add).
__device__ __forceinline__ float masked_score(const AttentionArgs& a, float score, const char* row,
                                              int key) {
  const float t = mask_term(a, row, key);
  return a.mask_kind == AttentionMask::Bool && t == -INFINITY ? -INFINITY : score + t;
}

/// What 1 / sum becomes for a row whose exponentials are all 0 (every score
/// -inf): 0 under a mask or the causal triangle (zeros, the decomposition's
/// safe softmax), NaN without one (softmax's 0 / 0).
template <bool MASKED_OR_CAUSAL>
__device__ __forceinline__ float empty_row_factor() {
  return MASKED_OR_CAUSAL ? 0.f : __int_as_float(0x7fc00000);
}

/// The mask row of query `row` (clamped to L - 1) of head (b, h), as bytes.
__device__ __forceinline__ const char* mask_row_of(const AttentionArgs& a, int64_t b, int64_t h,
                                                   int row) {
  return static_cast<const char*>(a.mask) +
         (b * a.mask_stride[0] + h * a.mask_stride[1] + min(row, a.L - 1) * a.mask_stride[2]) *
             a.mask_itemsize;
}

}  // namespace smelt::cuda::impl
