// smelt/kernels/cuda_device.h — the device-side helpers of generated CUDA
// kernels (src/compiler/codegen/cuda_dialect.cpp), embedded into every CUDA
// translation unit after scalar_ops.h and reduce_ops.h: the value a thread's
// partial of a Welford reduction (shifted sums) enters the combination with, and
// the combination of the partial accumulators of the threads that share a row of
// a reduction (warp shuffles, then shared memory across warps; deterministic:
// a fixed tree for a given launch configuration), every thread getting the
// row's result. Any accumulator of reduce_ops.h is combined with its own
// combine(), field by field through the shuffles (Welford's count, mean and
// m2; an arg-reduction's value and index). The combination is compiled by
// NVRTC only (reduce::ShiftedWelford, the partial, lives in reduce_ops.h).
#pragma once

#include "kernels/reduce_ops.h"

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)

namespace smelt::device {

/// float16 / bfloat16 elements, which generated kernels keep as their bits
/// (uint16_t: loads and stores of neighbouring elements then merge into
/// vector accesses, which they do not for a struct), <-> float. bfloat16:
/// smelt/half.h's conversions, branch-free (the same bits, NaN included);
/// float16: libdevice's (round to nearest even, subnormals kept: the values
/// of smelt/half.h, NaN payloads aside).
extern "C" __device__ unsigned short __nv_float2half_rn(float);
extern "C" __device__ float __nv_half2float(unsigned short);
__device__ __forceinline__ float f16_to_float(uint16_t h) { return __nv_half2float(h); }
__device__ __forceinline__ float bf16_to_float(uint16_t h) {
  return __uint_as_float(static_cast<unsigned>(h) << 16);
}
__device__ __forceinline__ uint16_t float_to_f16(float f) { return __nv_float2half_rn(f); }
__device__ __forceinline__ uint16_t float_to_bf16(float f) {
  // Integer arithmetic, not the hardware's cvt.rn.bf16.f32: inline assembly
  // keeps NVVM from merging neighbouring 16-bit stores into one vector store
  // (8 st.global.u16 instead of one st.global.v4.u32: the compiled bfloat16
  // layer_norm ran 3x slower).
  const unsigned u = __float_as_uint(f);
  return static_cast<uint16_t>(
      (u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/// `v` (any trivially copyable type) moved across the warp 32 bits at a time
/// by `move` (a __shfl_*_sync of one word).
template <class T, class Move>
__device__ __forceinline__ T shuffle_words(const T& v, const Move& move) {
  constexpr int kWords = (static_cast<int>(sizeof(T)) + 3) / 4;
  unsigned w[kWords] = {};
  memcpy(w, &v, sizeof(T));
#pragma unroll
  for (int k = 0; k < kWords; ++k) w[k] = move(w[k]);
  T r;
  memcpy(&r, w, sizeof(T));
  return r;
}

/// `v` from the lane `offset` lanes up (__shfl_down_sync over the whole warp).
template <class T>
__device__ __forceinline__ T shfl_down(const T& v, unsigned offset) {
  return shuffle_words(v,
                       [offset](unsigned w) { return __shfl_down_sync(0xffffffffu, w, offset); });
}

/// `v` of lane `src` of the warp (__shfl_sync).
template <class T>
__device__ __forceinline__ T shfl(const T& v, int src) {
  return shuffle_words(v, [src](unsigned w) { return __shfl_sync(0xffffffffu, w, src); });
}

/// The value a thread's partial accumulator enters the combination with
/// (reduce::ShiftedWelford's sums become Welford's accumulator; every other
/// accumulator is its own).
template <class Op, class T>
__device__ __forceinline__ typename Op::acc_t partial_value(const T& v) {
  return v;
}
template <class Op, class L>
__device__ __forceinline__ typename Op::acc_t partial_value(const reduce::ShiftedSums<L>& v) {
  // Sums kept in a narrower type L (a persistent row's few float elements
  // per thread) are widened before the division and the subtraction.
  using A = typename Op::value_t;
  return reduce::ShiftedWelford<A>::welford(reduce::ShiftedSums<A>{
      static_cast<A>(v.shift), static_cast<A>(v.s1), static_cast<A>(v.s2), v.count});
}

/// The combination of the partials `v` of the R threads of each row of a
/// block of R * P threads (R a power of two; `lane` in [0, R) is the thread's
/// place in its row). Inner layout: a row's threads are consecutive
/// (threadIdx.x = row * R + lane). Outer layout: the rows' threads interleave
/// (threadIdx.x = lane * P + row), so neighbouring threads read neighbouring
/// rows. Every thread of the block must call it (it synchronizes the block
/// when a row spans warps, and always in the outer layout); every thread gets
/// its row's result.
template <class Op, int R, int P, bool kOuter>
__device__ __forceinline__ typename Op::acc_t row_reduce(typename Op::acc_t v, int lane) {
  using acc_t = typename Op::acc_t;
  if constexpr (R == 1) {
    return v;
  } else if constexpr (kOuter) {
    __shared__ acc_t part[R * P];
    const int row = static_cast<int>(threadIdx.x) % P;
    part[threadIdx.x] = v;
    __syncthreads();
#pragma unroll
    for (int s = R / 2; s > 0; s /= 2) {
      if (lane < s)
        part[lane * P + row] = Op::combine(part[lane * P + row], part[(lane + s) * P + row]);
      __syncthreads();
    }
    v = part[row];
    __syncthreads();  // the next combination of this type reuses `part`
    return v;
  } else if constexpr (R <= 32) {
#pragma unroll
    for (int off = R / 2; off > 0; off /= 2) v = Op::combine(v, shfl_down(v, off));
    // The row's first lane holds the result: every lane takes that one.
    return shfl(v, static_cast<int>(threadIdx.x % 32) - lane);
  } else {
    constexpr int kWarps = R / 32;  // warps per row
    __shared__ acc_t part[P * kWarps];
    __shared__ acc_t result[P];
#pragma unroll
    for (int off = 16; off > 0; off /= 2) v = Op::combine(v, shfl_down(v, off));
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    const int row = static_cast<int>(threadIdx.x) / R;
    if (lane == 0) {
      acc_t a = part[row * kWarps];
      for (int k = 1; k < kWarps; ++k) a = Op::combine(a, part[row * kWarps + k]);
      result[row] = a;
    }
    __syncthreads();
    v = result[row];
    __syncthreads();  // the next combination of this type reuses `part` and `result`
    return v;
  }
}

}  // namespace smelt::device

#endif
