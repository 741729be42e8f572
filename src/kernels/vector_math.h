// smelt/kernels/vector_math.h — the transcendental functions of scalar_ops.h
// (exp, exp2, expm1, log, log2, log1p, sin, cos, tan, tanh, erf), one
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
// float erf and tanh are the exception: SLEEF's deterministic ones cost 5-10
// times its exp, so host code computes them here, in double arithmetic with
// IEEE operations only (no libm call, no FMA: -ffp-contract=off), as plain
// inline code that GCC vectorizes in any vector width with the same bits:
//  * erf: x * P(x^2) for |x| < 2, 1 - Q((|x| - 2.965) / 0.965) for
//    2 <= |x| < 3.93 (erfc), +-1 above; P of degree 10, Q of degree 11,
//    least-squares fits of erf(x)/x (relative error < 7e-10) and erfc (absolute
//    error < 5e-10) on Chebyshev nodes (mpmath references). Q (at most 0.0047)
//    is evaluated in float arithmetic, on twice the lanes of double: its
//    absolute error, about 3e-9, is a twentieth of the result's ulp;
//  * tanh: x (1 - x^2/3 + 2x^4/15 - 17x^6/315) for |x| < 0.04 (Taylor),
//    (1 - e) / (1 + e) with e = exp(-2|x|) (argument clamped at -80) above,
//    exp by Cody-Waite reduction and a degree-11 Taylor polynomial.
// Checked over every float32 against glibc's double erf / tanh rounded to
// float: never more than 1 ulp away (erf differs from that correctly rounded
// value for 0.15% of inputs, tanh for 2 inputs; with Q in float, erf on
// 0.5 <= |x| < 4 differs for 0.60% instead of 0.51%); NaN propagates, signed
// zeros and infinities as C's.
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
extern "C" {
SMELT_VM_DECLARE(exp)
SMELT_VM_DECLARE(exp2)
SMELT_VM_DECLARE(expm1)
SMELT_VM_DECLARE(log)
SMELT_VM_DECLARE(log2)
SMELT_VM_DECLARE(log1p)
SMELT_VM_DECLARE(sin)
SMELT_VM_DECLARE(cos)
SMELT_VM_DECLARE(tan)
SMELT_VM_DECLARE_D(tanh)
SMELT_VM_DECLARE_D(erf)
}
#undef SMELT_VM_DECLARE
#undef SMELT_VM_DECLARE_D

namespace smelt {
namespace vmath {
/// float erf and tanh of the host (see the file comment).
namespace f32 {

inline uint64_t bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}
inline double from_bits(uint64_t u) {
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
}
/// c ? a : b through the bits: GCC keeps this a select, which vectorizes,
/// where it turns `c ? a : b` back into branches around the operands'
/// arithmetic (which it may not compute unconditionally under -ftrapping-math).
inline double pick(bool c, double a, double b) {
  const uint64_t m = uint64_t{0} - static_cast<uint64_t>(c);
  return from_bits((bits(a) & m) | (bits(b) & ~m));
}
inline double abs(double a) { return from_bits(bits(a) & 0x7fffffffffffffffULL); }
/// |mag| with the sign of s.
inline double with_sign(double mag, double s) {
  return from_bits((bits(mag) & 0x7fffffffffffffffULL) | (bits(s) & 0x8000000000000000ULL));
}

/// e^y for y in [-708, 0] (NaN for NaN): y = k ln2 + r, |r| <= ln2 / 2.
inline double exp_nonpositive(double y) {
  const double kShift = 0x1.8p52;  // adding it rounds to an integer
  const double k = (y * 1.4426950408889634 + kShift) - kShift;
  const double r = (y - k * 0x1.62e42fee00000p-1) - k * 0x1.a39ef35793c76p-33;
  double p = 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  // 2^k: k + 1023 in the low bits of k + (kShift + 1023), shifted into the exponent.
  return p * from_bits(bits(k + (kShift + 1023.0)) << 52);
}

inline constexpr double kErfSmall[11] = {
    1.1283791668315348,      -0.37612636149223139,    0.11283761659637533,
    -0.026864957264578684,   0.0052214862769342126,   -0.0008518391739247372,
    0.00011828514273670314,  -1.3798260814985015e-05, 1.2722632982735361e-06,
    -8.0736191068972007e-08, 2.5614353642706944e-09};
inline constexpr double kErfcLarge[12] = {
    2.7511988671909936e-05,  -0.00016557612850236092, 0.00047372349127320046,
    -0.00085232690236587477, 0.0010726139685096599,   -0.0009887122864408464,
    0.00067529710480606589,  -0.000335327022418758,   0.00010763621931725133,
    -3.7636244709664069e-06, -1.7901275083250121e-05, 6.8522577590034214e-06};

inline float erf(float a) {
  const double x = a, ax = abs(x);
  const double t = x * x;
  double p = kErfSmall[10];
  for (int j = 9; j >= 0; --j) p = p * t + kErfSmall[j];
  // Q in float (see the file comment).
  const float s = (__builtin_fabsf(a) - 2.965f) * (1.0f / 0.965f);
  float qf = static_cast<float>(kErfcLarge[11]);
  for (int j = 10; j >= 0; --j) qf = qf * s + static_cast<float>(kErfcLarge[j]);
  const double q = qf;
  const double big = pick(!(ax >= 3.93), 1.0 - q, 1.0);  // NaN stays NaN
  return static_cast<float>(pick(ax < 2.0, x * p, with_sign(big, x)));
}

inline float tanh(float a) {
  const double x = a, ax = abs(x), x2 = x * x;
  const double small = x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0))));
  const double y = -2.0 * ax;
  const double e = exp_nonpositive(pick(y < -80.0, -80.0, y));
  const double big = with_sign((1.0 - e) / (1.0 + e), x);
  return static_cast<float>(pick(ax < 0.04, small, big));
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
SMELT_VM_FUNCTION(log)
SMELT_VM_FUNCTION(log2)
SMELT_VM_FUNCTION(log1p)
SMELT_VM_FUNCTION(sin)
SMELT_VM_FUNCTION(cos)
SMELT_VM_FUNCTION(tan)
#if defined(__CUDA_ARCH__)
SMELT_VM_FUNCTION(tanh)
SMELT_VM_FUNCTION(erf)
#else
SMELT_HD float tanh(float a) { return f32::tanh(a); }
SMELT_HD double tanh(double a) { return ::smelt_vm_tanh(a); }
SMELT_HD float erf(float a) { return f32::erf(a); }
SMELT_HD double erf(double a) { return ::smelt_vm_erf(a); }
#endif
#undef SMELT_VM_FUNCTION

}  // namespace vmath
}  // namespace smelt
