// SMELT_DISPATCH_ALL: a switch over every dtype binding `T` to its C++ element
// type, for code that handles tensors of any dtype (eager kernels, tests).
#pragma once
#include <cstdint>

#include "smelt/dtype.h"
#include "smelt/error.h"

/// Switch over every dtype, binding `T` to the C++ element type.
#define SMELT_DISPATCH_ALL(dtype, NAME, ...)                   \
  [&] {                                                        \
    switch (dtype) {                                           \
      case ::smelt::DType::Bool: {                             \
        using T = bool;                                        \
        return __VA_ARGS__();                                  \
      }                                                        \
      case ::smelt::DType::UInt8: {                            \
        using T = uint8_t;                                     \
        return __VA_ARGS__();                                  \
      }                                                        \
      case ::smelt::DType::Int8: {                             \
        using T = int8_t;                                      \
        return __VA_ARGS__();                                  \
      }                                                        \
      case ::smelt::DType::Int16: {                            \
        using T = int16_t;                                     \
        return __VA_ARGS__();                                  \
      }                                                        \
      case ::smelt::DType::Int32: {                            \
        using T = int32_t;                                     \
        return __VA_ARGS__();                                  \
      }                                                        \
      case ::smelt::DType::Int64: {                            \
        using T = int64_t;                                     \
        return __VA_ARGS__();                                  \
      }                                                        \
      case ::smelt::DType::Float16: {                          \
        using T = ::smelt::Half;                               \
        return __VA_ARGS__();                                  \
      }                                                        \
      case ::smelt::DType::BFloat16: {                         \
        using T = ::smelt::BFloat16;                           \
        return __VA_ARGS__();                                  \
      }                                                        \
      case ::smelt::DType::Float32: {                          \
        using T = float;                                       \
        return __VA_ARGS__();                                  \
      }                                                        \
      case ::smelt::DType::Float64: {                          \
        using T = double;                                      \
        return __VA_ARGS__();                                  \
      }                                                        \
    }                                                          \
    SMELT_INTERNAL_ASSERT(false, "{}: unhandled dtype", NAME); \
  }()
