#include "smelt/dtype.h"

#include "smelt/error.h"

namespace smelt {

size_t itemsize(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
    case DType::Int8: return 1;
    case DType::Int16:
    case DType::Float16:
    case DType::BFloat16: return 2;
    case DType::Int32:
    case DType::Float32: return 4;
    case DType::Int64:
    case DType::Float64: return 8;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  static constexpr std::string_view names[] = {"bool",    "uint8",    "int8",    "int16",
                                               "int32",   "int64",    "float16", "bfloat16",
                                               "float32", "float64"};
  return names[static_cast<int>(t)];
}

std::string_view dtype_ctype(DType t) {
  static constexpr std::string_view names[] = {
      "bool",        "uint8_t",         "int8_t", "int16_t", "int32_t",
      "int64_t",     "smelt::Half", "smelt::BFloat16", "float", "double"};
  return names[static_cast<int>(t)];
}

DType dtype_from_name(std::string_view n) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (dtype_name(static_cast<DType>(i)) == n) return static_cast<DType>(i);
  if (n == "float") return DType::Float32;
  if (n == "double") return DType::Float64;
  if (n == "half") return DType::Float16;
  if (n == "long") return DType::Int64;
  if (n == "int") return DType::Int32;
  SMELT_CHECK(false,
              "dtype: unknown dtype name '{}'; use one of bool, uint8, int8, int16, int32, int64, "
              "float16, bfloat16, float32, float64",
              n);
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // PyTorch's promotion table (c10/core/ScalarType.cpp) for the types smelt has.
  constexpr DType b1 = DType::Bool, u1 = DType::UInt8, i1 = DType::Int8, i2 = DType::Int16,
                  i4 = DType::Int32, i8 = DType::Int64, f2 = DType::Float16,
                  bf = DType::BFloat16, f4 = DType::Float32, f8 = DType::Float64;
  static constexpr DType table[kNumDTypes][kNumDTypes] = {
      /*        b1  u1  i1  i2  i4  i8  f2  bf  f4  f8 */
      /* b1 */ {b1, u1, i1, i2, i4, i8, f2, bf, f4, f8},
      /* u1 */ {u1, u1, i2, i2, i4, i8, f2, bf, f4, f8},
      /* i1 */ {i1, i2, i1, i2, i4, i8, f2, bf, f4, f8},
      /* i2 */ {i2, i2, i2, i2, i4, i8, f2, bf, f4, f8},
      /* i4 */ {i4, i4, i4, i4, i4, i8, f2, bf, f4, f8},
      /* i8 */ {i8, i8, i8, i8, i8, i8, f2, bf, f4, f8},
      /* f2 */ {f2, f2, f2, f2, f2, f2, f2, f4, f4, f8},
      /* bf */ {bf, bf, bf, bf, bf, bf, f4, bf, f4, f8},
      /* f4 */ {f4, f4, f4, f4, f4, f4, f4, f4, f4, f8},
      /* f8 */ {f8, f8, f8, f8, f8, f8, f8, f8, f8, f8},
  };
  return table[static_cast<int>(a)][static_cast<int>(b)];
}

DType default_dtype() { return DType::Float32; }

}  // namespace smelt
