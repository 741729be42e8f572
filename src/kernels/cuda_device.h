// smelt/kernels/cuda_device.h — the device-side helpers of generated CUDA
// kernels (src/compiler/codegen/cuda_dialect.cpp), embedded into every CUDA
// translation unit after scalar_ops.h and reduce_ops.h: the combination of the
// partial accumulators of the threads that share a row of a reduction (warp
// shuffles, then shared memory across warps; deterministic: a fixed tree for a
// given launch configuration), every thread getting the row's result. Any
// accumulator of reduce_ops.h is combined with its own combine(), field by
// field through the shuffles (an arg-reduction's value and index); Welford's
// partials, shifted sums (reduce::ShiftedWelford), are moved to one shift per
// row and added. Compiled by NVRTC only.
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

/// The bfloat16 bits of the N floats `f`, for a vector's stores (the CUDA
/// dialect stages them, CudaDialect::staged_store_lane): on sm_80 and later
/// the hardware's cvt.rn.bf16.f32 (round to nearest even, subnormals kept:
/// float_to_bf16's bits, except that a NaN becomes the canonical one; ptxas
/// converts two per instruction), elsewhere float_to_bf16.
template <int N>
__device__ __forceinline__ void floats_to_bf16(const float (&f)[N], uint16_t (&h)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) {
#if __CUDA_ARCH__ >= 800
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h[k]) : "f"(f[k]));
#else
    h[k] = float_to_bf16(f[k]);
#endif
  }
}

/// True when one of the N floats `f` is a NaN (floats_to_bf16's results are
/// then stored again by float_to_bf16, which keeps a NaN's sign and payload).
template <int N>
__device__ __forceinline__ bool any_nan(const float (&f)[N]) {
  bool nan = false;
#pragma unroll
  for (int k = 0; k < N; ++k) nan |= f[k] != f[k];
  return nan;
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

/// A row's two sums around one shift (the addition row_reduce below makes of
/// reduce::ShiftedWelford partials).
template <class A>
struct RowSums {
  A s1;
  A s2;
};
template <class A>
struct AddRowSums {
  using acc_t = RowSums<A>;
  static __device__ __forceinline__ acc_t combine(acc_t a, acc_t b) {
    return acc_t{a.s1 + b.s1, a.s2 + b.s2};
  }
};

/// The combination of Welford partials kept as shifted sums
/// (reduce::ShiftedWelford, each thread's around its own first element, in
/// float L or Op's value type A; Op = reduce::Welford<A>) over a row of
/// `count` elements (each stepped by one of its threads), with the layouts and
/// guarantees of the row_reduce above: every thread moves its sums to the
/// shift of its row's first thread (lane 0) in A (ShiftedWelford::rebase),
/// the row adds them (two sums per level, not Welford's combine of a count,
/// a mean and m2; the eager layer_norm kernel's sums around the row's first
/// element), and the total becomes Welford's accumulator. layer_norm of
/// 16384 x 4096 bfloat16 on the H200: 102.4 -> 73.2 us (95% of copy
/// bandwidth), with one 128-thread row per block.
template <class Op, int R, int P, bool kOuter, class L>
__device__ __forceinline__ typename Op::acc_t row_reduce(const reduce::ShiftedSums<L>& v, int lane,
                                                         int64_t count) {
  using A = typename Op::value_t;
  L c0 = v.shift;
  if constexpr (R > 1) {
    if constexpr (!kOuter && R <= 32) {
      c0 = shfl(c0, static_cast<int>(threadIdx.x % 32) - lane);
    } else {
      __shared__ L shifts[P];
      const int row =
          kOuter ? static_cast<int>(threadIdx.x) % P : static_cast<int>(threadIdx.x) / R;
      if (lane == 0) shifts[row] = c0;
      __syncthreads();
      c0 = shifts[row];
      // row_reduce below synchronizes the block before it returns, so no
      // thread writes `shifts` again before every thread has read it.
    }
  }
  const reduce::ShiftedSums<A> mine = reduce::ShiftedWelford<L>::rebase(v, static_cast<A>(c0));
  const RowSums<A> row =
      row_reduce<AddRowSums<A>, R, P, kOuter>(RowSums<A>{mine.s1, mine.s2}, lane);
  return reduce::ShiftedWelford<A>::welford(
      reduce::ShiftedSums<A>{mine.shift, row.s1, row.s2, count});
}

}  // namespace smelt::device

#endif
