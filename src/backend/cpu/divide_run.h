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
#endif

#include "kernels/scalar_ops.h"

namespace smelt::cpu::SMELT_CPU_CAP {

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
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
  const float ad = d < 0.0f ? -d : d;
  if (ad >= 0x1p-60f && ad <= 0x1p60f) {  // false for NaN
    const float v = 1.0f / d;
    // a's bits minus 2^-60's, as unsigned: at most 2^60's minus 2^-60's
    // exactly for a positive a in range (never for a negative one or NaN).
    constexpr int32_t kLoBits = (127 - 60) << 23, kRange = 120 << 23;
#if defined(__AVX512F__)
    const __m512 vd = _mm512_set1_ps(d), vv = _mm512_set1_ps(v);
    const __m512i lo = _mm512_set1_epi32(kLoBits), range = _mm512_set1_epi32(kRange);
    for (; k + 16 <= n; k += 16) {
      const __m512 a = _mm512_loadu_ps(y + k);
      __m512 q = _mm512_mul_ps(a, vv);
      __m512 r = _mm512_fnmadd_ps(q, vd, a);
      q = _mm512_fmadd_ps(r, vv, q);
      r = _mm512_fnmadd_ps(q, vd, a);
      q = _mm512_fmadd_ps(r, vv, q);
      const __mmask16 ok =
          _mm512_cmple_epu32_mask(_mm512_sub_epi32(_mm512_castps_si512(a), lo), range);
      if (ok != 0xffff) q = _mm512_mask_div_ps(q, static_cast<__mmask16>(~ok), a, vd);
      _mm512_storeu_ps(y + k, q);
    }
#else
    const __m256 vd = _mm256_set1_ps(d), vv = _mm256_set1_ps(v);
    const __m256i lo = _mm256_set1_epi32(kLoBits), range = _mm256_set1_epi32(kRange);
    for (; k + 8 <= n; k += 8) {
      const __m256 a = _mm256_loadu_ps(y + k);
      __m256 q = _mm256_mul_ps(a, vv);
      __m256 r = _mm256_fnmadd_ps(q, vd, a);
      q = _mm256_fmadd_ps(r, vv, q);
      r = _mm256_fnmadd_ps(q, vd, a);
      q = _mm256_fmadd_ps(r, vv, q);
      const __m256i t = _mm256_sub_epi32(_mm256_castps_si256(a), lo);
      const __m256 ok = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_min_epu32(t, range), t));
      if (_mm256_movemask_ps(ok) != 0xff) q = _mm256_blendv_ps(_mm256_div_ps(a, vd), q, ok);
      _mm256_storeu_ps(y + k, q);
    }
#endif
  }
#endif
  for (; k < n; ++k) y[k] = scalar::div<float>(y[k], d);
}

}  // namespace smelt::cpu::SMELT_CPU_CAP
