// Division of a run of float32 elements by one divisor, bit for bit as the
// division operator (scalar::div), faster than a divide instruction per
// vector where the processor has FMA: each quotient is the reciprocal's
// product corrected twice by its residual (below). For the eager kernels
// built once per CPU capability (capability.h): include it only from their
// sources (it defines functions of the copy's namespace).
#pragma once
#include <cstdint>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
/// 1 where the capability has FMA: divide_run's vector path.
#define SMELT_DIVIDE_RUN_LANES 1
#else
#define SMELT_DIVIDE_RUN_LANES 0
#endif

#include "kernels/scalar_ops.h"

namespace smelt::cpu::SMELT_CPU_CAP {

#if SMELT_DIVIDE_RUN_LANES
namespace divide_lanes {
/// Floats of one vector of the capability (512 bits with AVX-512, else 256),
/// as GCC vectors: the float lanes (F) and their bits as unsigned integers (U).
#if defined(__AVX512F__)
inline constexpr int kWidth = 16;
#else
inline constexpr int kWidth = 8;
#endif
typedef float F __attribute__((vector_size(kWidth * sizeof(float))));
typedef uint32_t U __attribute__((vector_size(kWidth * sizeof(float))));

#define SMELT_DIVIDE_INLINE inline __attribute__((always_inline))
/// a * b + c on every lane, rounded once.
SMELT_DIVIDE_INLINE F fused(F a, F b, F c) {
#if defined(__AVX512F__)
  return _mm512_fmadd_ps(a, b, c);
#else
  return _mm256_fmadd_ps(a, b, c);
#endif
}
/// Whether every lane of t is at most the same lane of bound (unsigned).
SMELT_DIVIDE_INLINE bool every_lane_at_most(U t, U bound) {
#if defined(__AVX512F__)
  return _mm512_cmple_epu32_mask(reinterpret_cast<__m512i>(t), reinterpret_cast<__m512i>(bound)) ==
         0xffff;
#else
  return _mm256_movemask_ps(reinterpret_cast<__m256>(t <= bound)) == 0xff;
#endif
}
/// x on every lane (x - 0 is x, -0 included: a broadcast).
SMELT_DIVIDE_INLINE F splat(float x) { return x - F{}; }
#undef SMELT_DIVIDE_INLINE
}  // namespace divide_lanes
#endif

/// y[k] = scalar::div(y[k], d) for k < n: IEEE division, round to nearest,
/// the same bits on every CPU capability.
///
/// With FMA, for |d| and y[k] in [2^-60, 2^60] (y[k] positive: as softmax's
/// exponentials are; other elements, and every element where d is outside
/// that range, NaN or infinite, go through the divide instruction), with
/// v = 1 / d (correctly rounded) and a = y[k]: q = a v, then twice
/// q = q + (a - q d) v by fused multiply-adds. In that range nothing
/// overflows or underflows (the quotients are normal; the residuals are
/// multiples of 2^-110). a v is within 1.5 ulps of a / d; the first
/// correction (its residual rounded at most once) is within 2^-22 ulp of
/// a / d before it rounds, so within one ulp after it; then the residual
/// a - q d is exact, and the second correction rounds correctly (Markstein's
/// theorem: v within half an ulp of 1 / d, q within one ulp of a / d). Also
/// checked against the divide instruction on every float of
/// [0.5, 1) and of the range's end binades for 414 divisors (powers of two,
/// significands of all ones, random ones) and on 2e8 random pairs over the
/// range: 6.3e9 quotients, no bit apart. Five fused operations and an integer
/// range check per vector instead of a division, which a 512-bit vector
/// issues once per 10 cycles or so.
inline void divide_run(float* __restrict y, int64_t n, float d) {
  int64_t k = 0;
#if SMELT_DIVIDE_RUN_LANES
  namespace L = divide_lanes;
  const float ad = d < 0.0f ? -d : d;
  if (ad >= 0x1p-60f && ad <= 0x1p60f) {  // false for NaN
    // a - q d as fused(q, -d, a): the same rounding of the same exact value.
    const L::F vd = L::splat(d), nd = L::splat(-d), vv = L::splat(1.0f / d);
    // a's bits minus 2^-60's, as unsigned: at most 2^60's minus 2^-60's
    // exactly for a positive a in range (never for a negative one or NaN).
    constexpr uint32_t kLoBits = (127u - 60) << 23;
    const L::U range = L::U{} + (120u << 23);
    for (; k + L::kWidth <= n; k += L::kWidth) {
      L::F a, q;
      __builtin_memcpy(&a, y + k, sizeof a);
      q = a * vv;
      q = L::fused(L::fused(q, nd, a), vv, q);
      q = L::fused(L::fused(q, nd, a), vv, q);
      const L::U t = reinterpret_cast<L::U>(a) - kLoBits;
      if (!L::every_lane_at_most(t, range)) q = t <= range ? q : a / vd;
      __builtin_memcpy(y + k, &q, sizeof q);
    }
  }
#endif
  for (; k < n; ++k) y[k] = scalar::div<float>(y[k], d);
}

}  // namespace smelt::cpu::SMELT_CPU_CAP
