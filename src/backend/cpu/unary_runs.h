// Whole-run AVX-512 kernels of float exp (also of x - m, softmax's), sqrt, log,
// sin, cos, sigmoid, silu and pow with one exponent (x ** 2.5: unary in x),
// bit for bit the scalar functions (scalar::exp,
// scalar::sqrt, ...), in fewer instructions or calls than the loop the
// compiler makes of them. For the
// eager kernels built once per CPU capability (capability.h): include it only
// from their sources (it defines functions of the copy's namespace).
// Elsewhere (no AVX-512) the runs are the plain loops.
//
// exp: vmath::pw::exp16 (scalar::exp<float>'s bits in 15 vector
// instructions; piecewise_math.h) inline.
//
// sqrt: for 2^-96 <= x < +inf, y = rsqrt14(x) (relative error below 2^-14),
// g = x y and h = y / 2, one Goldschmidt step (t = 1/2 - g h, g += g t,
// h += h t: g within 2^-26 of sqrt(x) relatively, h of 1 / (2 sqrt(x))), then
// Markstein's correction g + (x - g^2) h with the residual exact (a fused
// multiply-add; from 2^-96 up it is a normal number), which rounds to the
// correctly rounded square root; vsqrtps for a vector with any other lane
// (zero, subnormals and the smallest normals, negatives, infinities, NaN).
// Seven multiply-adds that pipeline instead of vsqrtps, which a core issues
// once per several cycles: 0.14 against 0.22 ns per element (first-level
// cache, one thread of a Sapphire Rapids).
// Checked on all 2^32 float32 inputs against vsqrtps: no bit apart.
//
// sin, cos: vmath::pw::trig8 (the functions' own evaluation) inline, 32
// floats a step, instead of a call of the 16-lane function per vector.
//
// sigmoid: 1 / (1 + Exp16(-x)), the scalar function's operations with exp
// inline: 0.175 -> 0.144 ms for 2^19 floats (one thread of a 2-core AVX-512
// virtual machine).
//
// log: vmath::f32::log's operations; a vector of normal positive finite
// numbers only (one unsigned compare of the bits) skips the scaling of
// subnormals and the special cases, which leave such lanes alone: 0.34 ->
// 0.24-0.27 ns per element (as for sqrt). Checked on all 2^32 float32 inputs
// against f32::log: no bit apart.
#pragma once
#include <cmath>
#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "kernels/piecewise_math.h"
#include "kernels/scalar_ops.h"

namespace smelt::cpu::SMELT_CPU_CAP {

#if defined(__AVX512F__)
/// scalar::exp<float> of 16 lanes at once (exp_run's vector step), for
/// kernels that use the result in registers (attention's softmax sums it as
/// it stores it).
struct Exp16 {
  const __mmask16 kAll = 0xffff;  // the masked forms: GCC 12 warns of the others' undefined source
  // Constants of exp16's clamp and reduction, for variants (attention.cpp's).
  const __m512 log2e = _mm512_set1_ps(1.442695040888963407359924681001892137426645954152985934f);
  const __m512 lo = _mm512_set1_ps(-104.0f);

  inline __attribute__((always_inline)) __m512 operator()(__m512 x) const {
    return __builtin_bit_cast(__m512, vmath::pw::exp16(__builtin_bit_cast(vmath::pw::F16, x)));
  }

  /// e^a from the clamped a and q = a log2(e) rounded to the nearest integer:
  /// the steps after the rounding.
  inline __attribute__((always_inline)) __m512 from_reduced(__m512 a, __m512 q) const {
    namespace pw = vmath::pw;
    return __builtin_bit_cast(
        __m512, pw::exp16_reduced(__builtin_bit_cast(pw::F16, a), __builtin_bit_cast(pw::F16, q)));
  }
};
#endif

/// y[i] = scalar::exp<float>(x[i]) for i < n (y may be x).
inline void exp_run(float* y, const float* x, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const Exp16 exp16;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, exp16(_mm512_loadu_ps(x + i)));
#endif
  for (; i < n; ++i) y[i] = scalar::exp<float>(x[i]);
}

/// y[i] = scalar::exp<float>(x[i] - m) for i < n (y may be x): softmax's
/// exponentials of a row shifted by its max, Exp16 inline (a loop of
/// scalar::exp vectorizes through one call of the vector function per
/// vector: softmax of 512 x 1024 floats on 2 threads took 185 us where exp
/// alone takes 59).
inline void exp_shifted_run(float* y, const float* x, float m, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const Exp16 exp16;
  const __m512 mv = _mm512_set1_ps(m);
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv)));
#endif
  for (; i < n; ++i) y[i] = scalar::exp<float>(scalar::sub<float>(x[i], m));
}

/// y[i] = scalar::sigmoid<float>(x[i]) = 1 / (1 + exp(-x[i])), or with kSilu
/// scalar::silu<float>(x[i]) = x[i] / (1 + exp(-x[i])), for i < n (y may be
/// x): Exp16 inline in place of a call of the vector exp per vector (silu of
/// 512 x 1024 floats on 2 threads: 100 -> 70 us).
template <bool kSilu = false>
inline void sigmoid_run(float* y, const float* x, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const Exp16 exp16;
  const __m512 one = _mm512_set1_ps(1.0f), sign = _mm512_set1_ps(-0.0f);
  for (; i + 16 <= n; i += 16) {
    const __m512 a = _mm512_loadu_ps(x + i);
    const __m512 e = exp16(_mm512_xor_ps(a, sign));
    _mm512_storeu_ps(y + i, _mm512_div_ps(kSilu ? a : one, _mm512_add_ps(one, e)));
  }
#endif
  for (; i < n; ++i) y[i] = kSilu ? scalar::silu<float>(x[i]) : scalar::sigmoid<float>(x[i]);
}

/// y[i] = scalar::sqrt<float>(x[i]) (IEEE, correctly rounded) for i < n (y may be x).
inline void sqrt_run(float* y, const float* x, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  // x's bits minus 2^-96's, as unsigned: below +inf's minus 2^-96's exactly
  // for 2^-96 <= x < +inf.
  const __m512i lo_bits = _mm512_set1_epi32(0x0f800000);
  const __m512i range = _mm512_set1_epi32(0x7f800000 - 0x0f800000);
  const __m512 half = _mm512_set1_ps(0.5f);
  const __mmask16 kAll = 0xffff;
  for (; i + 16 <= n; i += 16) {
    const __m512 a = _mm512_loadu_ps(x + i);
    const __mmask16 in_range =
        _mm512_cmplt_epu32_mask(_mm512_sub_epi32(_mm512_castps_si512(a), lo_bits), range);
    __m512 r;
    if (__builtin_expect(in_range == 0xffff, 1)) {
      const __m512 e = _mm512_mask_rsqrt14_ps(a, kAll, a);
      __m512 g = _mm512_mul_ps(a, e), h = _mm512_mul_ps(half, e);
      const __m512 t = _mm512_fnmadd_ps(g, h, half);
      g = _mm512_fmadd_ps(g, t, g);
      h = _mm512_fmadd_ps(h, t, h);
      r = _mm512_fmadd_ps(_mm512_fnmadd_ps(g, g, a), h, g);
    } else {
      r = _mm512_mask_sqrt_ps(a, kAll, a);
    }
    _mm512_storeu_ps(y + i, r);
  }
#endif
  for (; i < n; ++i) y[i] = scalar::sqrt<float>(x[i]);
}

/// y[i] = scalar::log<float>(x[i]) (vmath::f32::log) for i < n (y may be x).
inline void log_run(float* y, const float* x, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  namespace f32 = ::smelt::vmath::f32;
  const __mmask16 kAll = 0xffff;  // the masked forms: GCC 12 warns of the others' undefined source
  // x's bits minus 2^-126's, as unsigned: below +inf's minus 2^-126's exactly
  // for normal positive finite x, where the scaling of subnormals and the
  // special cases leave the function's value alone (a * 1 is a, k - 0 is k).
  const __m512i lo_bits = _mm512_set1_epi32(0x00800000);
  const __m512i range = _mm512_set1_epi32(0x7f800000 - 0x00800000);
  const __m512i sqrt_half = _mm512_set1_epi32(0x3f3504f3);
  const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
  const __m512 ln2_hi = _mm512_set1_ps(0x1.62e3p-1f), ln2_lo = _mm512_set1_ps(0x1.2fefa2p-17f);
  // f32::log's value of a normal positive as (2^25 times a subnormal in the
  // lanes of sub).
  const auto body = [&](__m512 as, __mmask16 sub) {
    const __m512i ix = _mm512_castps_si512(as);
    const __m512i k = _mm512_mask_srai_epi32(ix, kAll, _mm512_sub_epi32(ix, sqrt_half), 23);
    const __m512 f = _mm512_sub_ps(
        _mm512_castsi512_ps(_mm512_sub_epi32(ix, _mm512_mask_slli_epi32(k, kAll, k, 23))), one);
    __m512 dk = _mm512_mask_cvtepi32_ps(as, kAll, k);
    if (sub != 0) dk = _mm512_mask_sub_ps(dk, sub, dk, _mm512_set1_ps(25.0f));
    const __m512 f2 = _mm512_mul_ps(f, f);
    const __m512 hfsq = _mm512_mul_ps(half, f2);
    __m512 p = _mm512_set1_ps(f32::kLogP[8]);
    for (int j = 7; j >= 0; --j) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(f32::kLogP[j]));
    const __m512 u = _mm512_fmadd_ps(_mm512_mul_ps(f2, f), p, _mm512_mul_ps(dk, ln2_lo));
    return _mm512_fmsub_ps(dk, ln2_hi, _mm512_sub_ps(_mm512_sub_ps(hfsq, u), f));
  };
  // A vector of normal positive finite numbers only (one unsigned compare of the bits).
  const auto normal = [&](__m512 a) {
    return _mm512_cmplt_epu32_mask(_mm512_sub_epi32(_mm512_castps_si512(a), lo_bits), range);
  };
  const auto one16 = [&](__m512 a) {
    if (__builtin_expect(normal(a) == kAll, 1)) return body(a, 0);
    // Subnormals scaled by 2^25; 0 -> -inf, negatives -> NaN, +inf and NaN
    // -> a + a (f32::log's steps and order, masked to their lanes).
    const __mmask16 sub = _mm512_cmp_ps_mask(a, _mm512_set1_ps(0x1p-126f), _CMP_LT_OQ);
    __m512 r = body(_mm512_mask_mul_ps(a, sub, a, _mm512_set1_ps(0x1p25f)), sub);
    r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_EQ_OQ),
                           _mm512_set1_ps(-__builtin_inff()));
    r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_LT_OQ),
                           _mm512_set1_ps(__builtin_nanf("")));
    return _mm512_mask_add_ps(
        r, _mm512_cmp_ps_mask(a, _mm512_set1_ps(__builtin_inff()), _CMP_NLT_UQ), a, a);
  };
  // Two vectors a step: 0.065 -> 0.062 ms for 2^19 floats on two threads
  // (one thread: 0.141 either way, the memory's pace).
  for (; i + 32 <= n; i += 32) {
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    __m512 ra, rb;
    if (__builtin_expect((normal(a) & normal(b)) == kAll, 1)) {
      ra = body(a, 0);
      rb = body(b, 0);
    } else {
      ra = one16(a);
      rb = one16(b);
    }
    _mm512_storeu_ps(y + i, ra);
    _mm512_storeu_ps(y + i + 16, rb);
  }
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, one16(_mm512_loadu_ps(x + i)));
#endif
  for (; i < n; ++i) y[i] = scalar::log<float>(x[i]);
}

#if defined(__AVX512F__)
/// The loop of trig_run and pow_run: 32 floats a step, each 8 widened from
/// memory (the conversion's memory form: no lane-crossing shuffle), evaluated
/// in double lanes by eval8(D8, unsigned char* flags) (which sets bits of
/// *flags for lanes it does not cover), narrowed and stored; a step where
/// outside16 flags a lane of either 16-float half (a nonzero mask), or eval8
/// flags one, takes scalar_fn(x[k]) for each of its 32 floats instead.
/// Returns how many floats it did (a multiple of 32); y may be x.
template <class Eval8, class Outside16, class ScalarFn>
inline int64_t widened_run32(float* y, const float* x, int64_t n, const Eval8& eval8,
                             const Outside16& outside16, const ScalarFn& scalar_fn) {
  namespace pw = ::smelt::vmath::pw;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    pw::D8 d[4];
    for (int h = 0; h < 4; ++h) {
      pw::F8 f;
      __builtin_memcpy(&f, x + i + 8 * h, sizeof f);
      d[h] = pw::widen8(f);
    }
    pw::F16 a, b;
    __builtin_memcpy(&a, x + i, sizeof a);
    __builtin_memcpy(&b, x + i + 16, sizeof b);
    unsigned out = static_cast<unsigned>(outside16(a)) | static_cast<unsigned>(outside16(b));
    pw::F8 r[4];
    for (int h = 0; h < 4; ++h) {
      unsigned char flags = 0;
      r[h] = pw::narrow8(eval8(d[h], &flags));
      out |= flags;
    }
    if (__builtin_expect(out != 0, 0)) {
      for (int64_t k = i; k < i + 32; ++k) y[k] = scalar_fn(x[k]);
      continue;
    }
    __builtin_memcpy(y + i, r, sizeof r);
  }
  return i;
}
#endif

/// y[i] = scalar::sin<float>(x[i]) (kCos false) or scalar::cos<float>(x[i])
/// (true) for i < n (y may be x): vmath::pw::trig8, the functions' own
/// evaluation, inline through widened_run32 (no lane-crossing shuffle: sin
/// 221 -> 207 us for 2^19 floats, one thread of a 2-core AMD EPYC); a step
/// with a lane outside the range (|x| > 2^31, infinities, NaN) calls the
/// functions.
template <bool kCos>
inline void trig_run(float* y, const float* x, int64_t n) {
  const auto f = [](float v) { return kCos ? scalar::cos<float>(v) : scalar::sin<float>(v); };
  int64_t i = 0;
#if defined(__AVX512F__)
  namespace pw = ::smelt::vmath::pw;
  i = widened_run32(
      y, x, n, [](pw::D8 d, unsigned char*) { return pw::trig8<kCos>(d); },
      [](pw::F16 v) { return pw::trig_big16(v); }, f);
#endif
  for (; i < n; ++i) y[i] = f(x[i]);
}

/// y[i] = scalar::pow<float>(x[i], e) for i < n (y may be x): where the
/// processor has AVX-512F (the function is vmath::pw::pow16 then),
/// vmath::pw::pow8 inline through widened_run32; a step with a lane pow8
/// does not cover (a base that is not a positive normal float, |e log2 x| >=
/// 1000) and an exponent that is not finite take the function (512x1024
/// floats ** 2.5, one thread of a 2-core AMD EPYC: 814 -> 626 us, against a
/// call of the 16-lane function per vector).
inline void pow_run(float* y, const float* x, float e, int64_t n) {
  const auto f = [e](float v) { return scalar::pow<float>(v, e); };
  int64_t i = 0;
#if defined(__AVX512F__)
  namespace pw = ::smelt::vmath::pw;
  if (::smelt_vm_piecewise() != 0 && std::isfinite(e)) {
    const pw::D8 ed = pw::D8{} + static_cast<double>(e);
    i = widened_run32(
        y, x, n, [ed](pw::D8 d, unsigned char* big) { return pw::pow8(d, ed, big); },
        [](pw::F16 v) { return pw::pow_base_out16(v); }, f);
  }
#endif
  for (; i < n; ++i) y[i] = f(x[i]);
}

#if defined(__AVX512F__)
/// scalar::gelu<float> of 16 lanes where float erf is the piecewise polynomial
/// (vmath::pw::erf16): its operations in its order, x 0.5 (1 + erf(x / sqrt(2)))
/// then - (x - x) (+inf -> NaN).
inline vmath::pw::F16 gelu16(vmath::pw::F16 a) {
  const float kAlpha = static_cast<float>(0.70710678118654752440);  // as scalar::gelu's
  const vmath::pw::F16 r = a * 0.5f * (1.0f + vmath::pw::erf16(a * kAlpha));
  return r - (a - a);
}
#endif

/// y[i] = scalar::gelu<float>(x[i]) for i < n (y may be x): one pass with the
/// piecewise erf inline where it is the function (AVX-512F), two vectors a
/// step, else the loop.
inline void gelu_run(float* y, const float* x, int64_t n) {
#if defined(__AVX512F__)
  if (::smelt_vm_piecewise() != 0) {
    // Two vectors a step: 9.6 -> 9.3 us for 32x1024 floats in
    // the second-level cache at one thread, a thread's share at 16 threads.
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      vmath::pw::F16 a, b;
      __builtin_memcpy(&a, x + i, sizeof a);
      __builtin_memcpy(&b, x + i + 16, sizeof b);
      const vmath::pw::F16 ya = gelu16(a), yb = gelu16(b);
      __builtin_memcpy(y + i, &ya, sizeof ya);
      __builtin_memcpy(y + i + 16, &yb, sizeof yb);
    }
    return vmath::pw::run16<gelu16>(y + i, x + i, n - i);
  }
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = scalar::gelu<float>(x[i]);
}

}  // namespace smelt::cpu::SMELT_CPU_CAP
