// convert_contiguous: d[i] = scalar::cast<D>(x[i]) over a contiguous run,
// float <-> float16 through F16C where the capability has it (the same bits
// as Half's conversions, NaNs included), every other pair as the plain loop
// the compiler vectorizes. For the eager kernels built once per CPU
// capability (capability.h): the converting copy (copy.cpp) and the
// pointwise kernels' block loads and stores (pointwise.cpp). Include it only
// from their sources (it defines functions of the copy's namespace).
#pragma once
#include <cstdint>
#include <type_traits>

#include "kernels/scalar_ops.h"

#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>
#endif

#ifndef SMELT_CPU_CAP
#error "convert_run.h is for the kernel sources built once per CPU capability (capability.h)"
#endif

namespace smelt::cpu::SMELT_CPU_CAP {

#if defined(__AVX2__) && defined(__F16C__)
/// 8 floats -> float16 as Half::from_float: vcvtps2ph rounds to nearest even;
/// a NaN becomes the canonical sign | 0x7e00.
inline __m128i float_to_half8(__m256 f) {
  const __m128i h = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
  const __m128i nan16 =
      _mm_packs_epi32(_mm256_castsi256_si128(nan), _mm256_extractf128_si256(nan, 1));
  const __m128i canon = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16(static_cast<short>(0x8000))),
                                     _mm_set1_epi16(0x7e00));
  return _mm_blendv_epi8(h, canon, nan16);
}
/// 8 float16 -> floats as Half::to_float: vcvtph2ps, except that a NaN keeps
/// its payload as is (the instruction would quiet a signaling NaN).
inline __m256 half8_to_float(__m128i h) {
  const __m256 f = _mm256_cvtph_ps(h);
  const __m256i h32 = _mm256_cvtepu16_epi32(h);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(h32, _mm256_set1_epi32(0x7fff)),
                                         _mm256_set1_epi32(0x7c00));
  const __m256i bits = _mm256_or_si256(
      _mm256_slli_epi32(_mm256_and_si256(h32, _mm256_set1_epi32(0x8000)), 16),
      _mm256_or_si256(_mm256_set1_epi32(0x7f800000),
                      _mm256_slli_epi32(_mm256_and_si256(h32, _mm256_set1_epi32(0x3ff)), 13)));
  return _mm256_blendv_ps(f, _mm256_castsi256_ps(bits), _mm256_castsi256_ps(nan));
}
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
/// 16 floats -> float16, as float_to_half8 (a NaN becomes sign | 0x7e00).
inline __m256i float_to_half16(__m512 f) {
  // The zero-masked form: GCC 12 warns that _mm512_cvtps_ph's undefined
  // pass-through may be used uninitialized (all 16 lanes are written).
  const __m256i h =
      _mm512_maskz_cvtps_ph(__mmask16(0xffff), f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __mmask16 nan = _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
  const __m256i canon =
      _mm256_or_si256(_mm256_and_si256(h, _mm256_set1_epi16(static_cast<short>(0x8000))),
                      _mm256_set1_epi16(0x7e00));
  return _mm256_mask_blend_epi16(nan, h, canon);
}
#endif

/// d[i] = cast<D>(x[i]) over n contiguous elements.
template <class D, class S>
void convert_contiguous(D* __restrict d, const S* __restrict x, int64_t n) {
  int64_t i = 0;
#if defined(__AVX2__) && defined(__F16C__)
  if constexpr (std::is_same_v<D, Half> && std::is_same_v<S, float>) {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
    for (; i + 16 <= n; i += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i),
                          float_to_half16(_mm512_loadu_ps(x + i)));
#endif
    for (; i + 8 <= n; i += 8)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), float_to_half8(_mm256_loadu_ps(x + i)));
  } else if constexpr (std::is_same_v<D, float> && std::is_same_v<S, Half>) {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(d + i,
                       half8_to_float(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  }
#endif
  for (; i < n; ++i) d[i] = scalar::cast<D>(x[i]);
}

}  // namespace smelt::cpu::SMELT_CPU_CAP
