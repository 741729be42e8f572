// smelt/dtype.h — element types, PyTorch's type-promotion lattice.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "smelt/half.h"

namespace smelt {

/// Element type of a tensor. Names and promotion follow PyTorch.
enum class DType : uint8_t {
  Bool,
  UInt8,
  Int8,
  Int16,
  Int32,
  Int64,
  Float16,
  BFloat16,
  Float32,
  Float64,
};
inline constexpr int kNumDTypes = 10;

// PyTorch-style short names: smelt::float32, smelt::int64, ...
inline constexpr DType kBool = DType::Bool;
inline constexpr DType bool_ = DType::Bool;
inline constexpr DType uint8 = DType::UInt8;
inline constexpr DType int8 = DType::Int8;
inline constexpr DType int16 = DType::Int16;
inline constexpr DType int32 = DType::Int32;
inline constexpr DType int64 = DType::Int64;
inline constexpr DType float16 = DType::Float16;
inline constexpr DType bfloat16 = DType::BFloat16;
inline constexpr DType float32 = DType::Float32;
inline constexpr DType float64 = DType::Float64;

/// Bytes per element.
size_t itemsize(DType t);
/// "float32", "int64", ... (PyTorch's names without the "torch." prefix).
std::string_view dtype_name(DType t);
/// Parses a name produced by dtype_name (also "float", "double", "half", "long",
/// "int", "bool"); throws Error for an unknown name.
DType dtype_from_name(std::string_view name);
/// C++ type name used by generated code ("float", "int64_t", "smelt::Half", ...).
std::string_view dtype_ctype(DType t);

inline bool is_floating(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}
inline bool is_integral(DType t, bool include_bool = false) {
  return (t != DType::Bool || include_bool) && !is_floating(t);
}
/// True for types that hold negative values (every type but bool and uint8).
inline bool is_signed(DType t) { return t != DType::Bool && t != DType::UInt8; }

/// PyTorch's promote_types: the smallest type both a and b convert to
/// (bool < integers < floats; uint8 with int8 -> int16; float16 with bfloat16 -> float32).
DType promote_types(DType a, DType b);

/// The type that arithmetic on `t` is done in: float for float16/bfloat16
/// ("opmath" in PyTorch), `t` otherwise.
inline DType opmath_type(DType t) {
  return (t == DType::Float16 || t == DType::BFloat16) ? DType::Float32 : t;
}

/// True when an operand of dtype `from` in arithmetic on `common` must be
/// rounded to `common` before it enters the opmath computation: PyTorch casts
/// every tensor operand to the common dtype first, so int16 257 + bfloat16 0.5
/// is bfloat16(257) = 256 plus 0.5, which rounds to 256, not 258. That changes
/// values only where `common` is float16/bfloat16 (opmath float32) and
/// `from` holds values it cannot represent (not bool, int8 or uint8).
/// Wrapped numbers are not operands of this kind: the op's NumberRule has
/// already converted them (ops/numbers.h).
inline bool rounds_to_common(DType from, DType common) {
  return (common == DType::Float16 || common == DType::BFloat16) && from != common &&
         from != DType::Bool && from != DType::Int8 && from != DType::UInt8;
}

/// Default floating dtype for factories and int->float promotion (float32).
DType default_dtype();

/// Maps a C++ element type to its DType (bool, uint8_t, ..., Half, BFloat16, double).
template <class T>
struct dtype_of;
template <>
struct dtype_of<bool> {
  static constexpr DType value = DType::Bool;
};
template <>
struct dtype_of<uint8_t> {
  static constexpr DType value = DType::UInt8;
};
template <>
struct dtype_of<int8_t> {
  static constexpr DType value = DType::Int8;
};
template <>
struct dtype_of<int16_t> {
  static constexpr DType value = DType::Int16;
};
template <>
struct dtype_of<int32_t> {
  static constexpr DType value = DType::Int32;
};
template <>
struct dtype_of<int64_t> {
  static constexpr DType value = DType::Int64;
};
template <>
struct dtype_of<Half> {
  static constexpr DType value = DType::Float16;
};
template <>
struct dtype_of<BFloat16> {
  static constexpr DType value = DType::BFloat16;
};
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::Float32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::Float64;
};

}  // namespace smelt
