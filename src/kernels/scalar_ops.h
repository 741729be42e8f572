// smelt/kernels/scalar_ops.h — the scalar math of every pointwise op, written once.
// Included by the eager CPU kernels and embedded verbatim into JIT-generated code,
// so it includes only <cmath>, <cstdint>, <limits>, <type_traits>, smelt/half.h and
// vector_math.h (exp, log, sin, tanh, erf... through one implementation on every path).
//
// Convention: smelt::scalar::<functor><C>(operands..., extras...), where C is the
// op's compute type (opmath_type of its "dtype" attr: float for float16/bfloat16,
// otherwise the dtype's C++ type, bool for bool). Operands and extra arguments
// (alpha, replacement values, ...) are converted to C by the caller. Compare,
// isnan/isinf and logical functors return bool; all others return C. No functor
// has undefined behaviour for any input: integer arithmetic wraps (two's
// complement, computed in unsigned arithmetic) and integer division by zero
// returns 0 (the eager op raises an error before computing instead).
// Formulas follow PyTorch's CPU kernels (aten/src/ATen/native/cpu/*Kernel.cpp).
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/vector_math.h"
#include "smelt/half.h"

namespace smelt {
namespace scalar {

// ---------------------------------------------------------------- helpers --
template <class T>
inline constexpr bool is_bool_v = std::is_same_v<T, bool>;
template <class T>
inline constexpr bool is_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

/// Unsigned type at least as wide as `unsigned` in which T's arithmetic wraps
/// without integer promotion to (signed) int.
template <class T>
using wrap_uint_t =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <class T>
SMELT_HD T wrap_add(T a, T b) {
  using U = wrap_uint_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <class T>
SMELT_HD T wrap_sub(T a, T b) {
  using U = wrap_uint_t<T>;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}
template <class T>
SMELT_HD T wrap_mul(T a, T b) {
  using U = wrap_uint_t<T>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}
template <class T>
SMELT_HD bool is_negative(T a) {
  if constexpr (std::is_signed_v<T>) {
    return a < T(0);
  } else {
    return false;
  }
}
template <class T>
SMELT_HD bool is_nan(T a) {
  if constexpr (std::is_floating_point_v<T>) {
    return a != a;
  } else {
    return false;
  }
}

// ------------------------------------------------------------- conversion --
template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

/// Float -> int64 as x86-64's cvttsd2si/cvttss2si: truncation toward zero;
/// NaN and values outside [-2^63, 2^63) give INT64_MIN ("integer indefinite").
template <class F>
SMELT_HD int64_t float_to_int64(F v) {
  if (v >= F(-9223372036854775808.0) && v < F(9223372036854775808.0))
    return static_cast<int64_t>(v);
  return std::numeric_limits<int64_t>::min();
}
/// Float -> int32 as x86-64's 32-bit cvttss2si/cvttsd2si: truncation toward
/// zero; NaN and values whose truncation is outside int32 give INT32_MIN.
template <class F>
SMELT_HD int32_t float_to_int32(F v) {
  // F(-2147483649.0) is -2^31 in float: excluding it still gives INT32_MIN.
  if (v > F(-2147483649.0) && v < F(2147483648.0)) return static_cast<int32_t>(v);
  return std::numeric_limits<int32_t>::min();
}

#if !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
/// Integer (or bool) `v` as float / double, with the sign bit cleared unless v
/// is negative. A plain conversion gives the same value, but GCC (12, with
/// -fno-trapping-math and SSE4.1, as generated code is built) folds
/// (float)(int64_t)x into trunc(x), which keeps the sign of a zero (and it
/// drops a + 0.0 first, as a no-op on an integer's conversion): compiled
/// to_dtype(to_dtype(-0.3, int64), float32) was -0.0 where eager gives 0.0
/// (fuzz seed 16003, case 390: atan2 of it gave -pi against 0). The mask is
/// integer arithmetic on the result's bits, which that folding cannot see
/// through; it vectorizes.
/// Host code only: device code converts plainly (same bits).
template <class To, class From>
inline To int_to_floating(From v) {
  using Bits = std::conditional_t<sizeof(To) == sizeof(uint32_t), uint32_t, uint64_t>;
  static_assert(sizeof(To) == sizeof(Bits));
  To r = static_cast<To>(v);
  Bits b;
  std::memcpy(&b, &r, sizeof b);
  constexpr Bits kSign = Bits{1} << (sizeof(Bits) * 8 - 1);
  if constexpr (std::is_signed_v<From>) {
    b &= v < From(0) ? ~Bits{0} : ~kSign;
  } else {
    b &= ~kSign;
  }
  std::memcpy(&r, &b, sizeof r);
  return r;
}
#endif

/// Converts one value to type To: the single conversion between element types,
/// used by eager copies, pointwise loads/stores, fills and generated code.
/// - float16/bfloat16 go through float (both ways), as PyTorch converts them;
/// - to bool: v != 0 (NaN is true);
/// - floating -> integer, where C++ leaves out-of-range values undefined, gives
///   what PyTorch's CPU kernels give on x86-64 (c10::convert: static_cast, and
///   uint8 through int64): truncation toward zero, and for values out of range
///   int64: INT64_MIN for NaN, ±inf and |v| >= 2^63;
///   int32: INT32_MIN for NaN, ±inf and values outside int32;
///   int16, int8: the int32 result's low bits (3e9 -> 0, 70000.5 -> 4464 for int16);
///   uint8: the int64 result's low byte (-1.5 -> 255, 3e9 -> 0, NaN -> 0).
///   (PyTorch documents these conversions as undefined; CUDA saturates instead.)
/// - integer -> narrower integer wraps (two's complement);
/// - integer -> floating is +0.0 at 0, never -0.0 (int_to_floating).
template <class To, class From>
SMELT_HD To cast(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_half_v<From>) {
    return cast<To>(static_cast<float>(v));
  } else if constexpr (is_half_v<To>) {
    return To(cast<float>(v));
  } else if constexpr (is_bool_v<To>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && is_int_v<To>) {
    if constexpr (sizeof(To) == sizeof(int64_t) || !std::is_signed_v<To>) {
      return static_cast<To>(static_cast<uint64_t>(float_to_int64(v)));
    } else {
      return static_cast<To>(static_cast<uint32_t>(float_to_int32(v)));
    }
  } else if constexpr (std::is_floating_point_v<To> && !std::is_floating_point_v<From>) {
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
    return static_cast<To>(v);  // CUDA's conversion never gives -0.0
#else
    return int_to_floating<To>(v);
#endif
  } else {
    return static_cast<To>(v);
  }
}

// ------------------------------------------------------------------ unary --
template <class T>
SMELT_HD T identity(T a) {
  return a;
}
template <class T>
SMELT_HD T neg(T a) {
  if constexpr (std::is_floating_point_v<T>) {
    return -a;
  } else if constexpr (is_bool_v<T>) {
    return a;  // refused by the op (PyTorch has no bool negation)
  } else {
    return wrap_sub(T(0), a);
  }
}
template <class T>
SMELT_HD T abs(T a) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fabs(a);
  } else if constexpr (std::is_signed_v<T>) {
    return a < T(0) ? wrap_sub(T(0), a) : a;  // abs(INT_MIN) wraps to INT_MIN
  } else {
    return a;
  }
}
/// -1, 0 or 1; 0 for ±0 and (as PyTorch on the CPU) for NaN.
template <class T>
SMELT_HD T sign(T a) {
  if constexpr (is_bool_v<T>) {
    return a;
  } else {
    return static_cast<T>(static_cast<int>(T(0) < a) - static_cast<int>(is_negative(a)));
  }
}
template <class T>
SMELT_HD T exp(T a) {
  return vmath::exp(a);
}
template <class T>
SMELT_HD T exp2(T a) {
  return vmath::exp2(a);
}
template <class T>
SMELT_HD T expm1(T a) {
  return vmath::expm1(a);
}
template <class T>
SMELT_HD T log(T a) {
  return vmath::log(a);
}
template <class T>
SMELT_HD T log2(T a) {
  return vmath::log2(a);
}
template <class T>
SMELT_HD T log1p(T a) {
  return vmath::log1p(a);
}
template <class T>
SMELT_HD T sqrt(T a) {
  return std::sqrt(a);
}
template <class T>
SMELT_HD T rsqrt(T a) {
  return T(1) / std::sqrt(a);
}
template <class T>
SMELT_HD T reciprocal(T a) {
  return T(1) / a;
}
template <class T>
SMELT_HD T sin(T a) {
  return vmath::sin(a);
}
template <class T>
SMELT_HD T cos(T a) {
  return vmath::cos(a);
}
template <class T>
SMELT_HD T tan(T a) {
  return vmath::tan(a);
}
template <class T>
SMELT_HD T tanh(T a) {
  return vmath::tanh(a);
}
template <class T>
SMELT_HD T erf(T a) {
  return vmath::erf(a);
}
/// 1 / (1 + exp(-x)).
template <class T>
SMELT_HD T sigmoid(T a) {
  return T(1) / (T(1) + vmath::exp(-a));
}
/// max(x, 0); NaN and -0.0 pass through (as PyTorch's clamp_min(x, 0)).
template <class T>
SMELT_HD T relu(T a) {
  return is_negative(a) ? T(0) : a;
}
/// x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2))). In float (and so for float16 and
/// bfloat16) gelu(+inf) is NaN, as PyTorch's vectorized CPU kernel gives.
template <class T>
SMELT_HD T gelu(T a) {
  const T kAlpha = static_cast<T>(0.70710678118654752440);  // 1/sqrt(2)
  const T r = a * T(0.5) * (T(1) + vmath::erf(a * kAlpha));
  // +inf -> NaN without a branch, so that loops stay vectorized (the vector
  // erf): a - a is +0 for every finite a (r - 0 is r, -0.0 included), NaN for inf.
  if constexpr (std::is_same_v<T, float>) return r - (a - a);
  return r;
}
/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hendrycks & Gimpel 2016).
template <class T>
SMELT_HD T gelu_tanh(T a) {
  const T kBeta = static_cast<T>(0.79788456080286535588);  // sqrt(2/pi)
  const T kKappa = static_cast<T>(0.044715);
  T inner = kBeta * (a + kKappa * a * a * a);
  return T(0.5) * a * (T(1) + vmath::tanh(inner));
}
/// x * sigmoid(x) = x / (1 + exp(-x)).
template <class T>
SMELT_HD T silu(T a) {
  return a / (T(1) + vmath::exp(-a));
}
template <class T>
SMELT_HD T floor(T a) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::floor(a);
  } else {
    return a;
  }
}
template <class T>
SMELT_HD T ceil(T a) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::ceil(a);
  } else {
    return a;
  }
}
/// Round half to even (the default floating-point rounding mode).
template <class T>
SMELT_HD T round(T a) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::nearbyint(a);
  } else {
    return a;
  }
}
template <class T>
SMELT_HD T trunc(T a) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::trunc(a);
  } else {
    return a;
  }
}
template <class T>
SMELT_HD bool logical_not(T a) {
  return !static_cast<bool>(a);
}
template <class T>
SMELT_HD T bitwise_not(T a) {
  if constexpr (is_bool_v<T>) {
    return !a;
  } else {
    return static_cast<T>(~a);
  }
}
template <class T>
SMELT_HD bool isnan(T a) {
  return is_nan(a);
}
template <class T>
SMELT_HD bool isinf(T a) {
  if constexpr (std::is_floating_point_v<T>) {
    return a == std::numeric_limits<T>::infinity() || a == -std::numeric_limits<T>::infinity();
  } else {
    return false;
  }
}
/// NaN -> nan, +inf -> posinf, -inf -> neginf; integers and bool unchanged.
template <class T>
SMELT_HD T nan_to_num(T a, T nan, T posinf, T neginf) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return nan;
    if (a == std::numeric_limits<T>::infinity()) return posinf;
    if (a == -std::numeric_limits<T>::infinity()) return neginf;
  }
  return a;
}

// ----------------------------------------------------------------- binary --
template <class T>
SMELT_HD T add(T a, T b) {
  if constexpr (is_bool_v<T>) {
    return a || b;
  } else if constexpr (is_int_v<T>) {
    return wrap_add(a, b);
  } else {
    return a + b;
  }
}
template <class T>
SMELT_HD T mul(T a, T b) {
  if constexpr (is_bool_v<T>) {
    return a && b;
  } else if constexpr (is_int_v<T>) {
    return wrap_mul(a, b);
  } else {
    return a * b;
  }
}
/// a * b + c rounded once (IEEE fused multiply-add) for float or double.
template <class T>
SMELT_HD T fused_multiply_add(T a, T b, T c) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) {
    return __fmaf_rn(a, b, c);
  } else {
    return __fma_rn(a, b, c);
  }
#else
  if constexpr (std::is_same_v<T, float>) {
    return __builtin_fmaf(a, b, c);
  } else {
    return __builtin_fma(a, b, c);
  }
#endif
}
/// a + alpha * b: for floating types one fused multiply-add, as PyTorch's
/// add kernels compute it (vec::fmadd(b, alpha, a) on the CPU; a contracted
/// multiply-add on CUDA), so float32 results agree to the last bit; integers
/// wrap. (A float16 / bfloat16 alpha is rounded to that dtype by the op.)
template <class T>
SMELT_HD T add_alpha(T a, T b, T alpha) {
  if constexpr (std::is_floating_point_v<T>) {
    return fused_multiply_add(alpha, b, a);
  } else {
    return add(a, mul(alpha, b));
  }
}
template <class T>
SMELT_HD T sub(T a, T b) {
  if constexpr (is_bool_v<T>) {
    return a != b;  // refused by the op (PyTorch has no bool subtraction)
  } else if constexpr (is_int_v<T>) {
    return wrap_sub(a, b);
  } else {
    return a - b;
  }
}
/// a - alpha * b: PyTorch's add(a, b, -alpha), so for floating types one
/// fused multiply-add (add_alpha).
template <class T>
SMELT_HD T sub_alpha(T a, T b, T alpha) {
  if constexpr (std::is_floating_point_v<T>) {
    return fused_multiply_add(-alpha, b, a);
  } else {
    return sub(a, mul(alpha, b));
  }
}
/// True division (floating types only).
template <class T>
SMELT_HD T div(T a, T b) {
  return a / b;
}
/// Division rounded toward zero; integer INT_MIN / -1 wraps, x / 0 gives 0.
template <class T>
SMELT_HD T div_trunc(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::trunc(a / b);
  } else if constexpr (is_bool_v<T>) {
    return a;  // refused by the op
  } else {
    if (b == T(0)) return T(0);
    if constexpr (std::is_signed_v<T>) {
      if (b == T(-1)) return wrap_sub(T(0), a);
    }
    return static_cast<T>(a / b);
  }
}
/// Division rounded toward -inf (Python //).
template <class T>
SMELT_HD T div_floor(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (b == T(0)) return a / b;
    T mod = std::fmod(a, b);
    T q = (a - mod) / b;
    if (mod != T(0) && (b < T(0)) != (mod < T(0))) q -= T(1);
    if (q != T(0)) {
      T fq = std::floor(q);
      if (q - fq > T(0.5)) fq += T(1);
      return fq;
    }
    return std::copysign(T(0), a / b);
  } else if constexpr (is_bool_v<T>) {
    return a;  // refused by the op
  } else {
    if (b == T(0)) return T(0);
    if constexpr (std::is_signed_v<T>) {
      if (b == T(-1)) return wrap_sub(T(0), a);
      T q = static_cast<T>(a / b);
      T r = static_cast<T>(a % b);
      if (r != T(0) && ((a < T(0)) != (b < T(0)))) q = static_cast<T>(q - 1);
      return q;
    } else {
      return static_cast<T>(a / b);
    }
  }
}
/// `v` rounded to H (float16 / bfloat16) and back: what storing it as H gives.
template <class H, class T>
SMELT_HD T round_through(T v) {
  return cast<T>(cast<H>(v));
}
/// div_trunc and div_floor of float16 / bfloat16 tensors (H) by a tensor
/// divisor, computed in T (float) as PyTorch's CPU kernels do in that case
/// (checked against PyTorch 2.15 on 20,000 random pairs of each dtype, eager
/// and compiled): trunc of the quotient rounded to H (bfloat16 256 / -1.5 is
/// -171, as -170.67 rounds to -171 first), and c10's div_floor_floating with
/// each operation rounded to H. A divisor PyTorch takes as a scalar (a
/// number, one element, or expanded from one: ops/pointwise.h,
/// single_divisor) takes div_trunc / div_floor in float, rounded once.
template <class T, class H>
SMELT_HD T div_trunc_rounded(T a, T b) {
  return std::trunc(round_through<H>(a / b));
}
template <class T, class H>
SMELT_HD T div_floor_rounded(T a, T b) {
  if (b == T(0)) return a / b;
  const T mod = std::fmod(a, b);  // exact, so an H value already
  T q = round_through<H>(round_through<H>(a - mod) / b);
  if (mod != T(0) && (b < T(0)) != (mod < T(0))) q = round_through<H>(q - T(1));
  if (q != T(0)) {
    T fq = std::floor(q);
    if (round_through<H>(q - fq) > T(0.5)) fq = round_through<H>(fq + T(1));
    return fq;
  }
  return std::copysign(T(0), a / b);
}
template <class T>
SMELT_HD T div_trunc_float16(T a, T b) {
  return div_trunc_rounded<T, Half>(a, b);
}
template <class T>
SMELT_HD T div_trunc_bfloat16(T a, T b) {
  return div_trunc_rounded<T, BFloat16>(a, b);
}
template <class T>
SMELT_HD T div_floor_float16(T a, T b) {
  return div_floor_rounded<T, Half>(a, b);
}
template <class T>
SMELT_HD T div_floor_bfloat16(T a, T b) {
  return div_floor_rounded<T, BFloat16>(a, b);
}
/// Python modulo: the result has the sign of the divisor (NaN for float x % 0).
template <class T>
SMELT_HD T remainder(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    T mod = std::fmod(a, b);
    if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) mod += b;
    return mod;
  } else if constexpr (is_bool_v<T>) {
    return a;  // refused by the op
  } else {
    if (b == T(0)) return T(0);
    if constexpr (std::is_signed_v<T>) {
      if (b == T(-1)) return T(0);
      T r = static_cast<T>(a % b);
      if (r != T(0) && ((r < T(0)) != (b < T(0)))) r = static_cast<T>(r + b);
      return r;
    } else {
      return static_cast<T>(a % b);
    }
  }
}
/// C fmod: the result has the sign of the dividend.
template <class T>
SMELT_HD T fmod(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmod(a, b);
  } else if constexpr (is_bool_v<T>) {
    return a;  // refused by the op
  } else {
    if (b == T(0)) return T(0);
    if constexpr (std::is_signed_v<T>) {
      if (b == T(-1)) return T(0);
    }
    return static_cast<T>(a % b);
  }
}
/// Floating: vmath::pow (within 1 ulp, vectorized: float pow smelt's own on
/// AVX-512F, SLEEF's elsewhere and for the special values; C99's special
/// cases: pow(-0.0, 0.5) = +0.0, pow(-inf, 0.5) = +inf). Integers: exact power
/// by squaring (wrapping); a negative exponent gives 1 for base 1, ±1 for base
/// -1 (by the exponent's parity), else 0.
template <class T>
SMELT_HD T pow(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return vmath::pow(a, b);
  } else if constexpr (is_bool_v<T>) {
    return a || !b;  // refused by the op
  } else {
    if constexpr (std::is_signed_v<T>) {
      if (b < T(0)) {
        if (a == T(1)) return T(1);
        if (a == T(-1)) return (b & T(1)) ? T(-1) : T(1);
        return T(0);
      }
    }
    using U = wrap_uint_t<T>;
    U result = 1, base = static_cast<U>(a);
    auto e = static_cast<std::make_unsigned_t<T>>(b);
    while (e) {
      if (e & 1u) result = static_cast<U>(result * base);
      e = static_cast<decltype(e)>(e >> 1);
      base = static_cast<U>(base * base);
    }
    return static_cast<T>(result);
  }
}
/// NaN-propagating max / min.
template <class T>
SMELT_HD T maximum(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a > b ? a : b;
}
template <class T>
SMELT_HD T minimum(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a < b ? a : b;
}
/// NaN-ignoring max / min (C fmax / fmin): the other operand where one is NaN.
/// Equal operands (+0.0 and -0.0) give b, as x86's maxss/minss and PyTorch's
/// CPU kernels do; C leaves the sign of that zero unspecified, so std::fmax is
/// not used: inlined, vectorized and library versions disagree on it.
template <class T>
SMELT_HD T fmax(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return b;
    if (b != b) return a;
  }
  return a > b ? a : b;
}
template <class T>
SMELT_HD T fmin(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return b;
    if (b != b) return a;
  }
  return a < b ? a : b;
}
template <class T>
SMELT_HD T atan2(T a, T b) {
  return std::atan2(a, b);
}
template <class T>
SMELT_HD bool eq(T a, T b) {
  return a == b;
}
template <class T>
SMELT_HD bool ne(T a, T b) {
  return a != b;
}
template <class T>
SMELT_HD bool lt(T a, T b) {
  return a < b;
}
/// a <= b and a >= b. For floating types on the host these are the quiet
/// comparison builtins: GCC 12's relation oracle folds `x <= x` and `x >= x` to
/// true when both sides are one value (after loop peeling in -O3 code), which
/// is false for NaN; the builtins give the same IEEE result without that fold
/// (seen as compiled ge(x, x) -> amin true where eager gave false).
template <class T>
SMELT_HD bool le(T a, T b) {
#if defined(__GNUC__) && !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
  if constexpr (std::is_floating_point_v<T>) return __builtin_islessequal(a, b);
#endif
  return a <= b;
}
template <class T>
SMELT_HD bool gt(T a, T b) {
  return a > b;
}
template <class T>
SMELT_HD bool ge(T a, T b) {
#if defined(__GNUC__) && !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
  if constexpr (std::is_floating_point_v<T>) return __builtin_isgreaterequal(a, b);
#endif
  return a >= b;
}
template <class T>
SMELT_HD bool logical_and(T a, T b) {
  return static_cast<bool>(a) && static_cast<bool>(b);
}
template <class T>
SMELT_HD bool logical_or(T a, T b) {
  return static_cast<bool>(a) || static_cast<bool>(b);
}
template <class T>
SMELT_HD bool logical_xor(T a, T b) {
  return static_cast<bool>(a) != static_cast<bool>(b);
}
template <class T>
SMELT_HD T bitwise_and(T a, T b) {
  return static_cast<T>(a & b);
}
template <class T>
SMELT_HD T bitwise_or(T a, T b) {
  return static_cast<T>(a | b);
}
template <class T>
SMELT_HD T bitwise_xor(T a, T b) {
  return static_cast<T>(a ^ b);
}
/// max(x, lo), NaN-propagating.
template <class T>
SMELT_HD T clamp_min(T a, T lo) {
  return maximum(a, lo);
}
/// min(x, hi), NaN-propagating.
template <class T>
SMELT_HD T clamp_max(T a, T hi) {
  return minimum(a, hi);
}

// ---------------------------------------------------------------- ternary --
/// min(max(x, lo), hi): hi when lo > hi; NaN in any argument gives NaN.
/// minimum(maximum(a, lo), hi) bit for bit (the NaN taken first from a, then
/// lo, then hi; signed zeros as its comparisons leave them), written as the
/// two selects and then the NaN cases, so that a vectorized loop checks each
/// operand for NaN once (8 instead of about 20 AVX-512 instructions per
/// vector; 0.22 -> 0.15 ns per float in cache).
template <class T>
SMELT_HD T clamp(T a, T lo, T hi) {
  T r = a > lo ? a : lo;
  r = r < hi ? r : hi;
  if constexpr (std::is_floating_point_v<T>) {
    r = hi != hi ? hi : r;
    r = lo != lo ? lo : r;
    r = a != a ? a : r;
  }
  return r;
}
/// condition ? a : b (the condition arrives converted to T; nonzero is true).
template <class T>
SMELT_HD T where(T c, T a, T b) {
  return static_cast<bool>(c) ? a : b;
}
/// start + weight * (end - start), computed from the nearer end as PyTorch's
/// CPU kernel (lerp_vec) does: one fused multiply-add, coeff * diff + base
/// with (coeff, base) = (weight, start) where |weight| < 0.5, else
/// (weight - 1, end), rounded once (the unfused form differs in the last bit
/// in about a fifth of float32 results). T is float or double.
template <class T>
SMELT_HD T lerp(T start, T end, T weight) {
  const T diff = end - start;
  const bool small = std::fabs(weight) < T(0.5);
  const T coeff = small ? weight : weight - T(1);
  const T base = small ? start : end;
  return fused_multiply_add(coeff, diff, base);
}

}  // namespace scalar
}  // namespace smelt
