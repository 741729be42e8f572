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
// tanh cost 5-10 times its exp (and its log 1.13 times the one below). On a
// processor with AVX-512F, float tanh and erf are piecewise polynomials
// evaluated with 16-lane table lookups (piecewise_math.h: within 0.83 / 0.58
// ulp of the exact value; smelt_vm_tanhf / smelt_vm_erff, simd-declared,
// pick them once from the hardware, vector_math_impl.h, so the scalar
// function, every vector width, eager and JIT give the same bits); elsewhere
// they are f32::tanh / f32::erf (erf: on the GPU too). Host code computes those and log here,
// with IEEE operations only (no contraction:
// -ffp-contract=off; each explicit fmaf rounds once), as plain inline code
// that GCC vectorizes in any vector width with the same bits:
//  * erf: in float arithmetic with fused multiply-adds (fmaf: one rounding,
//    so the same bits wherever it runs; an instruction where the code is built
//    for FMA, as the eager AVX2 / AVX-512 kernels and JIT code on such a
//    processor are, else libm's fmaf: slower, the same bits). On |x|:
//    |x| < 1: fmaf(x, C_hi, x * (C_lo + t * R(t))), t = x^2, C = 2 / sqrt(pi)
//    as the float pair C_hi + C_lo: the leading product exact inside the
//    fused multiply-add, one rounding of the sum; R of degree 6 (10
//    instructions; the former pair arithmetic on x * C and t's rounding
//    error, with inputs below 2^-80 scaled by 2^64, took 20: erf 0.41 ->
//    0.32-0.35 ns and gelu 0.49 -> 0.40 ns per element, AVX-512, first-level
//    cache, one thread);
//    1 <= |x| < 3.93: 1 - Q((|x| - 2.465) / 1.465), Q of degree 15 (erfc);
//    1 above; the sign of x last. R, Q: least-squares fits on Chebyshev
//    nodes (mpmath references) with float coefficients fitted one at a time
//    (absolute errors of t R(t) < 2e-10, of Q < 6e-10);
//  * tanh: in float arithmetic with fused multiply-adds as well, no
//    division: x + x t P(t) (t = x^2, P of degree 5) for |x| < 0.625, above
//    1 - 2w / (1 + w), w = e^(-2|x|) = 2^k (1 + expm1(r)), evaluated as
//    (1 - 2^(k+1)) + 2^k (-2 expm1(r) + (1 + expm1(r)) w R(w)) with R(w) a
//    polynomial for 2 / (1 + w) (see f32::tanh). (The former ones: a
//    division and float pairs, 1.2 times as long; before them (1 - e) /
//    (1 + e) in double arithmetic, 2.6 times.)
//  * log: after fdlibm's logf (Sun Microsystems 1993, as FreeBSD's e_logf.c):
//    x = 2^k m, m in [sqrt(2)/2, sqrt(2)), f = m - 1,
//    log x = k ln2_hi + (f - (f^2/2 - (f^3 P(f) + k ln2_lo))), P of degree 8
//    in place of fdlibm's s = f / (2 + f) and R(s^2) (no division: 1.1 times
//    faster), with fused multiply-adds where they round once.
// Checked over every float32 against glibc's double erf / tanh / log rounded to
// float: never more than 1 ulp away (erf differs from that correctly rounded
// value for 0.385% of all 2^32 inputs: 0.28% at |x| < 2^-118, where x (C_lo
// + t R(t)) rounds to the subnormal grid first, 0.10% above (the former
// erf: 0.17%, 0.11% above); at most 1.49 ulp from the exact value (at |x| =
// 1.0375, from 1 - Q as before), 0.94 ulp below 2^-126); tanh for 0.065%,
// at most 0.84 ulp from the exact value; log for 0.63%, at most 0.83 ulp);
// NaN propagates, signed zeros and infinities as C's. (The former erf in double arithmetic took
// twice the time: 0.77 -> 0.35 ms for 2^19 floats on AVX-512.)
//
// float sin and cos on a processor with AVX2 and FMA (the FMA family) are
// smelt's own as well (vector_math_impl.h, SMELT_VM_TRIG, with the one
// evaluation SMELT_VM_TRIG_BODY of piecewise_math.h, which the eager kernels
// inline too: SLEEF's u10 sinf works in float pairs, 50 instructions a
// vector), computed in double lanes
// with fused multiply-adds (an instruction everywhere it runs):
// n = rint(x / pi), r = x - n pi (cos, of a = |x|: n = floor(a / pi),
// r = (n + 1/2) pi - a, the floor one fused multiply-add rounded toward
// -inf with AVX-512, rounded to nearest and corrected elsewhere) with pi as
// two doubles (the first step exact), sin r = r (1 + s P(s)), s = r^2, P of
// degree 3 (least-squares fit on Chebyshev nodes of |r| <= pi/2, relative
// error < 7.5e-9), the sign from n's parity, one rounding to float; for
// |x| <= 2^31 (above, infinities and NaN: SLEEF's finz u10). Checked on all
// 2^32 float32: the scalar, 4-, 8- and 16-lane functions and the eager
// kernel give the same bits, never more than 1 ulp from glibc's double
// sin / cos rounded to float, at most 0.62 ulp from the exact value (cosl /
// sinl) for |x| <= 2^31. Eager, 2^19 floats, one thread of a 2-core AMD
// EPYC: sin 207 / cos 221 us against SLEEF's finz 271 / 357 (before cos's
// floor reduction, on a Sapphire Rapids in the first-level cache: 0.42 / 0.47
// ns per element against SLEEF's 0.51 / 0.65). The no-FMA family keeps
// SLEEF's cinz.
//
// float exp's 16-lane variant of the FMA family (the one the JIT's loops call
// on AVX-512) is piecewise_math.h's exp16, which the eager kernels inline:
// SLEEF's finz operations in 15 instructions instead of 25, the same bits
// (checked on all 2^32 inputs). Compiled exp of 2^19 floats, one thread of a
// 2-core AMD EPYC: 150 -> 123 us (eager: 101).
//
// float pow on a processor with AVX-512F and FMA is smelt's own too
// (piecewise_math.h's pow16, vector_math_impl.h): log2 x from a 16-entry
// table and a polynomial, 2^(y log2 x) from another, in double lanes, rounded
// to float once (the correctly rounded value but within 2^-9 ulp of a tie;
// checked against glibc's double pow rounded on 1.3 billion random pairs:
// never more than 1 ulp apart); lanes of a base that is not a positive normal
// float, of an exponent that is not finite, or of |y log2 x| >= 1000 take
// SLEEF's finz u10 (C99's special cases). Every width and the scalar function
// through the same 16-lane evaluation, so the same bits. Eager x ** 2.5 of
// 512x1024 floats, one thread of a 2-core AMD EPYC: 1.239 ms with SLEEF's,
// 0.814 through the 16-lane function, 0.626 with eager's whole-block kernel
// (backend/cpu/unary_runs.h's pow_run).
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

namespace smelt {
namespace vmath {
namespace f32 {

/// float c ? a : b without a branch (see pick): a select on the GPU, through
/// the bits on the host.
SMELT_HD float pickf(bool c, float a, float b) {
#if defined(__CUDA_ARCH__)
  return c ? a : b;
#else
  uint32_t ua, ub;
  std::memcpy(&ua, &a, sizeof ua);
  std::memcpy(&ub, &b, sizeof ub);
  const uint32_t m = uint32_t{0} - static_cast<uint32_t>(c);
  const uint32_t r = (ua & m) | (ub & ~m);
  float f;
  std::memcpy(&f, &r, sizeof f);
  return f;
#endif
}
/// |mag| with the sign of s (float).
SMELT_HD float with_signf(float mag, float s) {
#if defined(__CUDA_ARCH__)
  return ::copysignf(mag, s);
#else
  uint32_t um, us;
  std::memcpy(&um, &mag, sizeof um);
  std::memcpy(&us, &s, sizeof us);
  const uint32_t r = (um & 0x7fffffffu) | (us & 0x80000000u);
  float f;
  std::memcpy(&f, &r, sizeof f);
  return f;
#endif
}

/// float erf (see the file comment), on the host and on the GPU alike: both
/// branches evaluated and one picked (no divergence), every multiply-add an
/// explicit fused one (__fmaf_rn on the GPU), so the bits do not depend on
/// contraction (NVRTC builds generated code with --fmad=false, under which
/// CUDA's own erff took 3 times as long as its eager kernel: 34 against 11 us
/// over 6.3 M bfloat16 elements on an H200).
SMELT_HD float erf(float a) {
  // |x| < 1: R(t) of x * C + x * t * R(t); C = 2 / sqrt(pi) as hi + lo.
  constexpr float kErfC[2] = {1.128379225730896f, -5.8635382771399236e-08f};
  constexpr float kErfSmall[7] = {-0.37612637877464294f,   0.11283773183822632f,
                                  -0.0268649160861969f,    0.005219669546931982f,
                                  -0.0008465343853458762f, 0.00011136778630316257f,
                                  -9.314076123700943e-06f};
  // erfc on 1 <= x < 3.93, in s = (x - 2.465) * 2 / 2.93.
  constexpr float kErfcBig[16] = {
      0.0004902342334389687f, -0.003796827746555209f,   0.013711221516132355f,
      -0.030293593183159828f, 0.04488890990614891f,     -0.04533180966973305f,
      0.028880296275019646f,  -0.00666274968534708f,    -0.007281175348907709f,
      0.008721635676920414f,  -0.00349102052859962f,    -0.0009557169978506863f,
      0.0016751644434407353f, -0.00044284851173870265f, -0.0002240134635940194f,
      0.00011232063843635842f};
#if defined(__CUDA_ARCH__)
#define SMELT_VM_FMAF(x, y, z) __fmaf_rn(x, y, z)
  const float ax = ::fabsf(a);
#else
#define SMELT_VM_FMAF(x, y, z) __builtin_fmaf(x, y, z)
  const float ax = __builtin_fabsf(a);
#endif
  // |x| < 1: x C_hi + x (C_lo + t R(t)), t = x^2, in one rounding of the
  // exact x C_hi (a fused multiply-add).
  const float t = ax * ax;
  float r = kErfSmall[6];
#if defined(__CUDA_ARCH__)
#pragma unroll
#elif !defined(__CUDACC__)  // nvcc's host pass knows neither pragma
#pragma GCC unroll 8
#endif
  for (int j = 5; j >= 0; --j) r = SMELT_VM_FMAF(r, t, kErfSmall[j]);
  const float small = SMELT_VM_FMAF(ax, kErfC[0], ax * SMELT_VM_FMAF(t, r, kErfC[1]));
  // 1 <= |x| < 3.93: 1 - erfc.
  const float sb = (ax - 2.465f) * 0.68259385665529f;
  float q = kErfcBig[15];
#if defined(__CUDA_ARCH__)
#pragma unroll
#elif !defined(__CUDACC__)
#pragma GCC unroll 16
#endif
  for (int j = 14; j >= 0; --j) q = SMELT_VM_FMAF(q, sb, kErfcBig[j]);
#undef SMELT_VM_FMAF
  const float big = pickf(!(ax >= 3.93f), 1.0f - q, 1.0f);  // NaN stays NaN
  return with_signf(pickf(ax < 1.0f, small, big), a);
}

}  // namespace f32
}  // namespace vmath
}  // namespace smelt

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
SMELT_VM_DECLARE(tanh)
SMELT_VM_DECLARE(erf)
SMELT_VM_DECLARE2(pow)
/// Nonzero when float tanh and erf are the AVX-512F piecewise polynomials
/// (piecewise_math.h), decided once from the hardware.
int smelt_vm_piecewise() noexcept;
/// y[i] = smelt_vm_tanhf(x[i]) / smelt_vm_erff(x[i]) for i < n (y may be x);
/// only where smelt_vm_piecewise().
void smelt_vm_own_tanhf_n(float* y, const float* x, int64_t n) noexcept;
void smelt_vm_own_erff_n(float* y, const float* x, int64_t n) noexcept;
}
#undef SMELT_VM_DECLARE2
#undef SMELT_VM_DECLARE
#undef SMELT_VM_DECLARE_D

namespace smelt {
namespace vmath {
/// float tanh and log of the host (see the file comment; erf is above).
namespace f32 {

/// tanh, |x| < 0.625: x + x t P(t), t = x^2 (P of degree 5).
inline constexpr float kTanhSmall[6] = {-0.3333333134651184f,   0.13333220779895782f,
                                        -0.05394819378852844f,  0.0217070784419775f,
                                        -0.008190729655325413f, 0.00215356913395226f};
/// tanh, |x| >= 0.625: expm1(r) = r + r^2 Q(r) on |r| <= ln2 / 2 (Q of degree 4).
inline constexpr float kTanhExpm1[5] = {0.49999988079071045f, 0.166665181517601f,
                                        0.041669655591249466f, 0.00836896151304245f,
                                        0.0013744814787060022f};
/// tanh, |x| >= 0.625: R(w) ~ 2 / (1 + w) on 0 <= w <= e^-1.25 (degree 5; weighted by w^2,
/// the factor its error enters the result with).
inline constexpr float kTanhRecip[6] = {1.9999891519546509f, -1.9994802474975586f,
                                        1.990540862083435f,  -1.9133206605911255f,
                                        1.561340570449829f,  -0.7488121390342712f};

inline float tanh(float a) {
  const float ax = __builtin_fabsf(a);
  // |x| < 0.625: the odd polynomial.
  const float t = ax * ax;
  float p = kTanhSmall[5];
#ifndef __CUDACC__
#pragma GCC unroll 8
#endif
  for (int j = 4; j >= 0; --j) p = __builtin_fmaf(p, t, kTanhSmall[j]);
  const float small = __builtin_fmaf(ax * t, p, ax);
  // Above: 1 - 2 w / (1 + w), w = e^y, y = -2|x| (-20 below -20: the result
  // rounds to 1 from 9.02 on; NaN stays NaN). w = m (1 + s), m = 2^k,
  // y = k ln2 + r (Cody-Waite, ln2 as hi + lo), s = expm1(r). With
  // 2 / (1 + w) = R(w) and 2 w = 2 m (1 + s):
  //   1 - 2 w / (1 + w) = (1 - 2m) + m (-2s + (1 + s) w R(w)),
  // where 1 - 2m is exact (2^-25 <= m <= 1/4; below, the result is within
  // an ulp of 1) and the bracket is small, so its rounding errors enter
  // scaled by m: no division, within 0.84 ulp.
  const float y = pickf(-2.0f * ax < -20.0f, -20.0f, -2.0f * ax);
  const float kShift = 0x1.8p23f;  // adding it rounds to an integer
  const float k = __builtin_fmaf(y, 1.44269504088896341f, kShift) - kShift;
  // 2^k: k + 127 in the low bits of k + (kShift + 127), shifted into the exponent.
  const float m = half_detail::bits_float(half_detail::float_bits(k + (kShift + 127.0f)) << 23);
  float r = __builtin_fmaf(k, -0x1.62e4p-1f, y);
  r = __builtin_fmaf(k, -0x1.7f7d1cp-20f, r);
  float q = kTanhExpm1[4];
#ifndef __CUDACC__
#pragma GCC unroll 8
#endif
  for (int j = 3; j >= 0; --j) q = __builtin_fmaf(q, r, kTanhExpm1[j]);
  const float s = __builtin_fmaf(r * r, q, r);
  const float w = __builtin_fmaf(m, s, m);
  float rw = kTanhRecip[5];
#ifndef __CUDACC__
#pragma GCC unroll 8
#endif
  for (int j = 4; j >= 0; --j) rw = __builtin_fmaf(rw, w, kTanhRecip[j]);
  const float u = w * rw;                          // 2 w / (1 + w)
  const float c = __builtin_fmaf(s, u - 2.0f, u);  // -2s + (1 + s) u
  const float big = __builtin_fmaf(m, c, __builtin_fmaf(-2.0f, m, 1.0f));
  return with_signf(pickf(ax < 0.625f, small, big), a);
}

/// log(1 + f) = f - f^2 / 2 + f^3 P(f) on sqrt(2)/2 - 1 <= f < sqrt(2) - 1 (P of
/// degree 8; relative error of the sum < 2^-30).
inline constexpr float kLogP[9] = {
    0.3333331048488617f,   -0.25000014901161194f, 0.20002226531505585f,
    -0.16667726635932922f, 0.1421755999326706f,   -0.12409740686416626f,
    0.11905451864004135f,  -0.11655238270759583f, 0.06684166193008423f};

inline float log(float a) {
  // Subnormals scaled by 2^25 (zero and negatives are replaced at the end).
  const bool sub = a < 0x1p-126f;
  const uint32_t ix = half_detail::float_bits(a * pickf(sub, 0x1p25f, 1.0f));
  // x = 2^k m, m in [sqrt(2)/2, sqrt(2)): k from the bits above sqrt(2)/2's.
  const int32_t k = static_cast<int32_t>(ix - 0x3f3504f3u) >> 23;
  const float f = half_detail::bits_float(ix - (static_cast<uint32_t>(k) << 23)) - 1.0f;
  const float dk = static_cast<float>(k) - pickf(sub, 25.0f, 0.0f);
  const float f2 = f * f;
  const float hfsq = 0.5f * f2;
  float p = kLogP[8];
#ifndef __CUDACC__
#pragma GCC unroll 8
#endif
  for (int j = 7; j >= 0; --j) p = __builtin_fmaf(p, f, kLogP[j]);
  // k ln2_hi + (f - (hfsq - (f^3 P(f) + k ln2_lo))), ln2 = hi + lo.
  float y = __builtin_fmaf(dk, 0x1.62e3p-1f,
                           -((hfsq - __builtin_fmaf(f2 * f, p, dk * 0x1.2fefa2p-17f)) - f));
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
SMELT_HD float erf(float a) { return f32::erf(a); }  // see f32::erf
SMELT_HD double erf(double a) { return ::erf(a); }
#else
SMELT_HD float log(float a) { return f32::log(a); }
SMELT_HD double log(double a) { return ::smelt_vm_log(a); }
SMELT_HD float tanh(float a) { return ::smelt_vm_tanhf(a); }
SMELT_HD double tanh(double a) { return ::smelt_vm_tanh(a); }
SMELT_HD float erf(float a) { return ::smelt_vm_erff(a); }
SMELT_HD double erf(double a) { return ::smelt_vm_erf(a); }
/// y[i] = tanh(x[i]) / erf(x[i]) for i < n (y may be x): the whole run in one
/// call where the functions are the piecewise polynomials, else f32's inline
/// code in a loop the compiler vectorizes (the same bits as tanh / erf).
inline void tanh_n(float* y, const float* x, int64_t n) {
  if (::smelt_vm_piecewise() != 0) return ::smelt_vm_own_tanhf_n(y, x, n);
  for (int64_t i = 0; i < n; ++i) y[i] = f32::tanh(x[i]);
}
inline void erf_n(float* y, const float* x, int64_t n) {
  if (::smelt_vm_piecewise() != 0) return ::smelt_vm_own_erff_n(y, x, n);
  for (int64_t i = 0; i < n; ++i) y[i] = f32::erf(x[i]);
}
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
