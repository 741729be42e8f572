// smelt/kernels/vector_math.h — the transcendental functions of scalar_ops.h
// (exp, exp2, expm1, log, log2, log1p, sin, cos, tan, tanh, erf, pow), one
// implementation for every CPU code path.
//
// Why: a loop the C++ compiler vectorizes calls a SIMD variant of a math
// function, its scalar remainder calls the scalar one. With glibc's libm and
// libmvec these differ by an ulp or more, so one element's value depended on
// where it sat in a loop, and compiled kernels (which recompute an inlined
// producer in several passes or kernels) disagreed with eager and with
// themselves (layer_norm of a row of equal values gave 1.9e-5 instead of 0).
// Here every path computes SLEEF's deterministic functions of one family
// (u10 = at most 1.0 ulp of error), which give bit-identical results in
// scalar code and in every vector width (SSE2, AVX, AVX2, AVX-512): the FMA
// family ("finz") on a processor with AVX2 and FMA, 25-40% faster, else the
// no-FMA one ("cinz"); the processor decides, once (vector_math_impl.h), so
// that results on one machine never depend on the code path. (Checked: finz
// scalar, 4-lane and 8-lane give the same bits on 44 million float inputs
// and 67 million double inputs of each function.)
// Source: SLEEF 3.5 (https://sleef.org), "deterministic" variants (PR #204).
//
// float erf, tanh and log are the exception: SLEEF's deterministic erf and
// tanh cost 5-10 times its exp (and its log 1.13 times the one below), so host
// code computes them here, with IEEE operations only (no contraction:
// -ffp-contract=off; each explicit fmaf rounds once), as plain inline code
// that GCC vectorizes in any vector width with the same bits:
//  * erf: in float arithmetic with fused multiply-adds (fmaf: one rounding,
//    so the same bits wherever it runs; an instruction where the code is built
//    for FMA, as the eager AVX2 / AVX-512 kernels and JIT code on such a
//    processor are, else libm's fmaf: slower, the same bits). On |x|:
//    |x| < 1: x * C + x * (t * R(t)), t = x^2 (with its rounding error), x * C
//    as a float pair (C = 2 / sqrt(pi) as hi + lo; inputs below 2^-80 scaled
//    by 2^64 first so that the pair stays exact), R of degree 6;
//    1 <= |x| < 3.93: 1 - Q((|x| - 2.465) / 1.465), Q of degree 15 (erfc);
//    1 above; the sign of x last. R, Q: least-squares fits on Chebyshev
//    nodes (mpmath references) with float coefficients fitted one at a time
//    (absolute errors of t R(t) < 2e-10, of Q < 6e-10);
//  * tanh: in float arithmetic with fused multiply-adds as well:
//    x + x t P(t) (t = x^2, P of degree 4) for |x| < 0.55, above
//    1 - 2 / (1 + e^(2|x|)) with e^(2|x|) = 2^k (1 + expm1(r)) and the sum,
//    quotient and difference carried as float pairs where they round (see
//    f32::tanh). (The former one, (1 - e) / (1 + e) in double arithmetic,
//    took 2.6 times as long: 0.97 -> 0.37 ms for 2^19 floats on AVX-512.)
//  * log: fdlibm's logf (Sun Microsystems 1993, as FreeBSD's e_logf.c):
//    x = 2^k m, m in [sqrt(2)/2, sqrt(2)), f = m - 1, s = f / (2 + f),
//    log x = k ln2_hi + (f - (f^2/2 - (s (f^2/2 + R(s^2)) + k ln2_lo))),
//    R of degree 4, with fused multiply-adds where they round once (0.34 ->
//    0.30 ms for 2^19 floats against SLEEF's u10 log on AVX-512).
// Checked over every float32 against glibc's double erf / tanh / log rounded to
// float: never more than 1 ulp away (erf differs from that correctly rounded
// value for 0.33% of inputs, most of them subnormal (the scaled pair rounds
// twice); tanh for 0.07%, at most 0.73 ulp from the exact value; log for
// 0.6%, at most 0.83 ulp); NaN propagates, signed zeros and infinities as
// C's. (The former erf in double arithmetic took twice the time: 0.77 ->
// 0.35 ms for 2^19 floats on AVX-512.)
//
// Host code calls smelt_vm_<name>f / smelt_vm_<name> (float / double). On
// GCC for x86-64 they are declared `simd`, so loops calling them vectorize
// through the variants vector_math_impl.h defines under the x86-64 vector
// function ABI names (_ZGV{b,c,d,e}N<lanes>v_<name>). CUDA device code calls
// CUDA's own math functions. Embedded verbatim into JIT code like scalar_ops.h.
#pragma once

#include <cstdint>
#include <cstring>

#include "smelt/half.h"

#if !defined(__CUDA_ARCH__)
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define SMELT_VM_DECL __attribute__((simd("notinbranch"), const, nothrow))
#else
#define SMELT_VM_DECL
#endif
#define SMELT_VM_DECLARE_D(name) SMELT_VM_DECL double smelt_vm_##name(double) noexcept;
#define SMELT_VM_DECLARE(name)                            \
  SMELT_VM_DECL float smelt_vm_##name##f(float) noexcept; \
  SMELT_VM_DECLARE_D(name)
#define SMELT_VM_DECLARE2(name)                                  \
  SMELT_VM_DECL float smelt_vm_##name##f(float, float) noexcept; \
  SMELT_VM_DECL double smelt_vm_##name(double, double) noexcept;
extern "C" {
SMELT_VM_DECLARE(exp)
SMELT_VM_DECLARE(exp2)
SMELT_VM_DECLARE(expm1)
SMELT_VM_DECLARE_D(log)
SMELT_VM_DECLARE(log2)
SMELT_VM_DECLARE(log1p)
SMELT_VM_DECLARE(sin)
SMELT_VM_DECLARE(cos)
SMELT_VM_DECLARE(tan)
SMELT_VM_DECLARE_D(tanh)
SMELT_VM_DECLARE_D(erf)
SMELT_VM_DECLARE2(pow)
}
#undef SMELT_VM_DECLARE2
#undef SMELT_VM_DECLARE
#undef SMELT_VM_DECLARE_D

namespace smelt {
namespace vmath {
/// float erf and tanh of the host (see the file comment).
namespace f32 {

/// erf, |x| < 1: R(t) of x * C + x * t * R(t); C = 2 / sqrt(pi) as hi + lo.
inline constexpr float kErfC[2] = {1.128379225730896f, -5.8635382771399236e-08f};
inline constexpr float kErfSmall[7] = {
    -0.37612637877464294f,   0.11283773183822632f,    -0.0268649160861969f,   0.005219669546931982f,
    -0.0008465343853458762f, 0.00011136778630316257f, -9.314076123700943e-06f};
/// erfc on 1 <= x < 3.93, in s = (x - 2.465) * 2 / 2.93.
inline constexpr float kErfcBig[16] = {
    0.0004902342334389687f, -0.003796827746555209f,   0.013711221516132355f,
    -0.030293593183159828f, 0.04488890990614891f,     -0.04533180966973305f,
    0.028880296275019646f,  -0.00666274968534708f,    -0.007281175348907709f,
    0.008721635676920414f,  -0.00349102052859962f,    -0.0009557169978506863f,
    0.0016751644434407353f, -0.00044284851173870265f, -0.0002240134635940194f,
    0.00011232063843635842f};

/// float c ? a : b through the bits (see pick).
inline float pickf(bool c, float a, float b) {
  uint32_t ua, ub;
  std::memcpy(&ua, &a, sizeof ua);
  std::memcpy(&ub, &b, sizeof ub);
  const uint32_t m = uint32_t{0} - static_cast<uint32_t>(c);
  const uint32_t r = (ua & m) | (ub & ~m);
  float f;
  std::memcpy(&f, &r, sizeof f);
  return f;
}
/// |mag| with the sign of s (float).
inline float with_signf(float mag, float s) {
  uint32_t um, us;
  std::memcpy(&um, &mag, sizeof um);
  std::memcpy(&us, &s, sizeof us);
  const uint32_t r = (um & 0x7fffffffu) | (us & 0x80000000u);
  float f;
  std::memcpy(&f, &r, sizeof f);
  return f;
}

inline float erf(float a) {
  const float ax = __builtin_fabsf(a);
  // |x| < 1: x C as the pair p + e (exact: fmaf gives the product's rounding
  // error), plus x (t + tl) R(t) with t + tl = x^2 exactly.
  const float t = ax * ax;
  const float tl = __builtin_fmaf(ax, ax, -t);
  float r = kErfSmall[6];
#ifndef __CUDACC__  // nvcc's front end (which reads this host code too) has no such pragma
#pragma GCC unroll 8
#endif
  for (int j = 5; j >= 0; --j) r = __builtin_fmaf(r, t, kErfSmall[j]);
  const bool tiny = ax < 0x1p-80f;  // the pair's error term would underflow
  const float as = ax * pickf(tiny, 0x1p64f, 1.0f);
  const float p = as * kErfC[0];
  const float e = __builtin_fmaf(as, kErfC[0], -p);
  const float u = __builtin_fmaf(t, r, tl * kErfSmall[0]);
  const float lo = __builtin_fmaf(as, u, __builtin_fmaf(as, kErfC[1], e));
  const float small = (p + lo) * pickf(tiny, 0x1p-64f, 1.0f);
  // 1 <= |x| < 3.93: 1 - erfc.
  const float sb = (ax - 2.465f) * 0.68259385665529f;
  float q = kErfcBig[15];
#ifndef __CUDACC__
#pragma GCC unroll 16
#endif
  for (int j = 14; j >= 0; --j) q = __builtin_fmaf(q, sb, kErfcBig[j]);
  const float big = pickf(!(ax >= 3.93f), 1.0f - q, 1.0f);  // NaN stays NaN
  return with_signf(pickf(ax < 1.0f, small, big), a);
}

/// tanh, |x| < 0.55: x + x t P(t), t = x^2 (least-squares fit of degree 4 on
/// Chebyshev nodes, float coefficients fitted one at a time; relative error
/// of the real polynomial < 2^-29.6).
inline constexpr float kTanhSmall[5] = {-0.33333319425582886f, 0.13332641124725342f,
                                        -0.053857505321502686f, 0.021091347560286522f,
                                        -0.006300163920968771f};

inline float tanh(float a) {
  const float ax = __builtin_fabsf(a);
  // |x| < 0.55: the odd polynomial.
  const float t = ax * ax;
  float p = kTanhSmall[4];
#ifndef __CUDACC__
#pragma GCC unroll 8
#endif
  for (int j = 3; j >= 0; --j) p = __builtin_fmaf(p, t, kTanhSmall[j]);
  const float small = __builtin_fmaf(ax * t, p, ax);
  // Above: 1 - 2 / D, D = 1 + e^y, y = 2|x| (20 above 10: the result rounds to
  // 1 from 9.02 on; NaN stays NaN); e^y = m (1 + s), m = 2^k, y = k ln2 + r
  // (Cody-Waite, ln2 as hi + lo), s = expm1(r) by its Taylor polynomial of
  // degree 7 (|r| <= ln2 / 2). D as the pair dh + dl (dl: dh's rounding
  // error, by fma), 2 / D as qh + ql (ql from the exact remainder of qh), and
  // 1 - qh - ql with 1 - qh's rounding error (Fast2Sum): float operations
  // only, yet within 0.73 ulp.
  const float y = pickf(ax > 10.0f, 20.0f, 2.0f * ax);
  const float kShift = 0x1.8p23f;  // adding it rounds to an integer
  const float k = __builtin_fmaf(y, 1.44269504088896341f, kShift) - kShift;
  // 2^k: k + 127 in the low bits of k + (kShift + 127), shifted into the exponent.
  const float m = half_detail::bits_float(half_detail::float_bits(k + (kShift + 127.0f)) << 23);
  float r = __builtin_fmaf(k, -0x1.62e4p-1f, y);
  r = __builtin_fmaf(k, -0x1.7f7d1cp-20f, r);
  float q = 1.0f / 5040.0f;
  q = __builtin_fmaf(q, r, 1.0f / 720.0f);
  q = __builtin_fmaf(q, r, 1.0f / 120.0f);
  q = __builtin_fmaf(q, r, 1.0f / 24.0f);
  q = __builtin_fmaf(q, r, 1.0f / 6.0f);
  q = __builtin_fmaf(q, r, 0.5f);
  const float s = __builtin_fmaf(r * r, q, r);
  const float one_m = 1.0f + m;
  const float dh = __builtin_fmaf(m, s, one_m);
  const float dl = __builtin_fmaf(m, s, one_m - dh);
  const float qh = 2.0f / dh;
  const float rem = __builtin_fmaf(-qh, dh, 2.0f);
  const float ql = __builtin_fmaf(-qh, dl, rem) * (0.5f * qh);
  const float u = 1.0f - qh;
  const float big = u + (((1.0f - u) - qh) - ql);
  return with_signf(pickf(ax < 0.55f, small, big), a);
}

/// log's R(s^2) = Lg1 z + Lg2 z^2 + Lg3 z^3 + Lg4 z^4 (z = s^2), fdlibm's
/// float coefficients (|error of log(1+s) - log(1-s)| / s < 2^-34.24).
inline constexpr float kLogLg[4] = {0x1.555554p-1f, 0x1.999c26p-2f, 0x1.23d3dcp-2f, 0x1.f13c4cp-3f};

inline float log(float a) {
  // Subnormals scaled by 2^25 (zero and negatives are replaced at the end).
  const bool sub = a < 0x1p-126f;
  const uint32_t ix = half_detail::float_bits(a * pickf(sub, 0x1p25f, 1.0f));
  // x = 2^k m, m in [sqrt(2)/2, sqrt(2)): k from the bits above sqrt(2)/2's.
  const int32_t k = static_cast<int32_t>(ix - 0x3f3504f3u) >> 23;
  const float f = half_detail::bits_float(ix - (static_cast<uint32_t>(k) << 23)) - 1.0f;
  const float dk = static_cast<float>(k) - pickf(sub, 25.0f, 0.0f);
  const float s = f / (2.0f + f);
  const float z = s * s, w = z * z;
  const float r =
      z * __builtin_fmaf(w, kLogLg[2], kLogLg[0]) + w * __builtin_fmaf(w, kLogLg[3], kLogLg[1]);
  const float hfsq = 0.5f * f * f;
  // k ln2_hi + (f - (hfsq - (s (hfsq + R) + k ln2_lo))), ln2 = hi + lo.
  float y = __builtin_fmaf(dk, 0x1.62e3p-1f,
                           -((hfsq - __builtin_fmaf(s, hfsq + r, dk * 0x1.2fefa2p-17f)) - f));
  y = pickf(a == 0.0f, -__builtin_inff(), y);
  y = pickf(a < 0.0f, __builtin_nanf(""), y);
  return pickf(!(a < __builtin_inff()), a + a, y);  // +inf and NaN
}

}  // namespace f32
}  // namespace vmath
}  // namespace smelt
#endif

namespace smelt {
namespace vmath {

#if defined(__CUDA_ARCH__)
#define SMELT_VM_FUNCTION(name)                         \
  SMELT_HD float name(float a) { return ::name##f(a); } \
  SMELT_HD double name(double a) { return ::name(a); }
#else
#define SMELT_VM_FUNCTION(name)                                    \
  SMELT_HD float name(float a) { return ::smelt_vm_##name##f(a); } \
  SMELT_HD double name(double a) { return ::smelt_vm_##name(a); }
#endif
SMELT_VM_FUNCTION(exp)
SMELT_VM_FUNCTION(exp2)
SMELT_VM_FUNCTION(expm1)
SMELT_VM_FUNCTION(log2)
SMELT_VM_FUNCTION(log1p)
SMELT_VM_FUNCTION(sin)
SMELT_VM_FUNCTION(cos)
SMELT_VM_FUNCTION(tan)
#if defined(__CUDA_ARCH__)
SMELT_VM_FUNCTION(log)
SMELT_VM_FUNCTION(tanh)
SMELT_VM_FUNCTION(erf)
#else
SMELT_HD float log(float a) { return f32::log(a); }
SMELT_HD double log(double a) { return ::smelt_vm_log(a); }
SMELT_HD float tanh(float a) { return f32::tanh(a); }
SMELT_HD double tanh(double a) { return ::smelt_vm_tanh(a); }
SMELT_HD float erf(float a) { return f32::erf(a); }
SMELT_HD double erf(double a) { return ::smelt_vm_erf(a); }
#endif
#undef SMELT_VM_FUNCTION

/// a^b (C99's special cases: pow(-0, 0.5) = +0, pow(-inf, 0.5) = +inf,
/// pow(1, NaN) = pow(NaN, 0) = 1, a negative base with an integral exponent).
#if defined(__CUDA_ARCH__)
SMELT_HD float pow(float a, float b) { return ::powf(a, b); }
SMELT_HD double pow(double a, double b) { return ::pow(a, b); }
#else
SMELT_HD float pow(float a, float b) { return ::smelt_vm_powf(a, b); }
SMELT_HD double pow(double a, double b) { return ::smelt_vm_pow(a, b); }
#endif

}  // namespace vmath
}  // namespace smelt
