// smelt/kernels/pointwise_list.h — the eager pointwise kernels every backend
// provides: one line per scalar functor of scalar_ops.h with its number of
// tensor operands, its number of extra (attribute) arguments and the
// categories of compute type it is instantiated for. The CPU backend
// (src/backend/cpu/pointwise_*.cpp) and the CUDA backend
// (src/backend/cuda/pointwise_*.cu) both expand these lists, so the set of
// eager kernels is written once. Host and device; not embedded.
//
// Each list is an X-macro: SMELT_PW_<GROUP>(X) calls X(functor, arity, extra, set)
// once per functor. The groups only split the instantiations over several
// translation units (compile time); together they are the whole set.
#pragma once
#include <string_view>

namespace smelt::pw {

/// Compute-type categories (bit mask over the category of the compute type C).
enum : int { kB = 1, kI = 2, kF = 4, kIB = kI | kB, kIF = kI | kF, kAll = kB | kI | kF };

/// True for the functors whose second operand, where it is one element (a
/// one-element tensor, broadcast), enters at the opmath precision without the
/// rounding to a float16/bfloat16 compute dtype that other operands of
/// another dtype take (rounds_to_common): PyTorch's CPU mul and div kernels
/// read such an operand as original_scalar_value<opmath_t>, so bfloat16 x *
/// int16 tensor(257) multiplies by 257, not by bfloat16(257) = 256 (as
/// NumberRule::Opmath reads a number). Host code only.
inline bool unrounded_single_operand(std::string_view functor) {
  return functor == "mul" || functor == "div" || functor == "div_trunc" || functor == "div_floor";
}

}  // namespace smelt::pw

/// Unary functors over floating compute types (library math).
#define SMELT_PW_UNARY_FLOAT(X) \
  X(exp, 1, 0, kF)              \
  X(exp2, 1, 0, kF)             \
  X(expm1, 1, 0, kF)            \
  X(log, 1, 0, kF)              \
  X(log2, 1, 0, kF)             \
  X(log1p, 1, 0, kF)            \
  X(sqrt, 1, 0, kF)             \
  X(rsqrt, 1, 0, kF)            \
  X(reciprocal, 1, 0, kF)       \
  X(sin, 1, 0, kF)              \
  X(cos, 1, 0, kF)              \
  X(tan, 1, 0, kF)              \
  X(tanh, 1, 0, kF)             \
  X(sigmoid, 1, 0, kF)          \
  X(erf, 1, 0, kF)              \
  X(gelu, 1, 0, kF)             \
  X(gelu_tanh, 1, 0, kF)        \
  X(silu, 1, 0, kF)

/// The other unary functors (nan_to_num's extras: nan, posinf, neginf).
#define SMELT_PW_UNARY_OTHER(X) \
  X(neg, 1, 0, kIF)             \
  X(abs, 1, 0, kIF)             \
  X(sign, 1, 0, kAll)           \
  X(relu, 1, 0, kIF)            \
  X(floor, 1, 0, kIF)           \
  X(ceil, 1, 0, kIF)            \
  X(round, 1, 0, kIF)           \
  X(trunc, 1, 0, kIF)           \
  X(logical_not, 1, 0, kB)      \
  X(bitwise_not, 1, 0, kIB)     \
  X(isnan, 1, 0, kAll)          \
  X(isinf, 1, 0, kAll)          \
  X(nan_to_num, 1, 3, kAll)

/// Binary arithmetic (add_alpha / sub_alpha take alpha as their extra).
#define SMELT_PW_BINARY_ARITH(X)  \
  X(add, 2, 0, kAll)              \
  X(add_alpha, 2, 1, kAll)        \
  X(sub, 2, 0, kIF)               \
  X(sub_alpha, 2, 1, kIF)         \
  X(mul, 2, 0, kAll)              \
  X(div, 2, 0, kF)                \
  X(div_trunc, 2, 0, kIF)         \
  X(div_floor, 2, 0, kIF)         \
  X(div_trunc_float16, 2, 0, kF)  \
  X(div_trunc_bfloat16, 2, 0, kF) \
  X(div_floor_float16, 2, 0, kF)  \
  X(div_floor_bfloat16, 2, 0, kF) \
  X(remainder, 2, 0, kIF)         \
  X(fmod, 2, 0, kIF)              \
  X(pow, 2, 0, kIF)               \
  X(atan2, 2, 0, kF)

/// Binary min/max, comparisons, logical and bitwise functors.
#define SMELT_PW_BINARY_COMPARE(X) \
  X(maximum, 2, 0, kAll)           \
  X(minimum, 2, 0, kAll)           \
  X(fmax, 2, 0, kAll)              \
  X(fmin, 2, 0, kAll)              \
  X(eq, 2, 0, kAll)                \
  X(ne, 2, 0, kAll)                \
  X(lt, 2, 0, kAll)                \
  X(le, 2, 0, kAll)                \
  X(gt, 2, 0, kAll)                \
  X(ge, 2, 0, kAll)                \
  X(logical_and, 2, 0, kB)         \
  X(logical_or, 2, 0, kB)          \
  X(logical_xor, 2, 0, kB)         \
  X(bitwise_and, 2, 0, kIB)        \
  X(bitwise_or, 2, 0, kIB)         \
  X(bitwise_xor, 2, 0, kIB)

/// Clamps, where and lerp (two or three operands).
#define SMELT_PW_TERNARY(X) \
  X(clamp_min, 2, 0, kIF)   \
  X(clamp_max, 2, 0, kIF)   \
  X(where, 3, 0, kAll)      \
  X(clamp, 3, 0, kIF)       \
  X(lerp, 3, 0, kF)
