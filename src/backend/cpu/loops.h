// Eager CPU loop machinery: broadcasting strided iteration with dimension
// coalescing and OpenMP across cores for large tensors (for_each_row, which
// every eager pointwise kernel is built on).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "core/dtype_dispatch.h"
#include "core/tensor_impl.h"
#include "kernels/scalar_ops.h"
#include "smelt/scalar.h"

namespace smelt::cpu {

/// Elements below which a kernel runs on one thread.
inline constexpr int64_t kParallelGrain = 32768;

/// An iteration space with size-1 dims dropped and neighbouring dims merged
/// where they are contiguous for every operand (at least one dim; a single
/// element is shape {1}); strides[k] are operand k's byte strides.
struct Coalesced {
  Shape shape;
  std::vector<std::vector<int64_t>> strides;
};
Coalesced coalesce(const Shape& shape, const std::vector<std::vector<int64_t>>& byte_strides);

/// Calls `row(ptrs, strides, n)` for every innermost row of `shape`, where
/// ptrs[k] points at operand k's first element of the row and strides[k] is its
/// byte stride along the row. Dims are coalesced first; rows are split across
/// OpenMP threads when numel >= kParallelGrain.
using RowFn = std::function<void(char** ptrs, const int64_t* strides, int64_t n)>;
void for_each_row(const Shape& shape, std::vector<char*> ptrs,
                  std::vector<std::vector<int64_t>> byte_strides, const RowFn& row);

/// Byte strides of `t` as seen from an output of `out_shape` (0 along broadcast dims).
std::vector<int64_t> broadcast_byte_strides(const Tensor& t, const Shape& out_shape);

/// `s` converted to element type T by scalar::cast, the conversion every copy uses
/// (float -> integer as PyTorch on x86-64; float16/bfloat16 through float).
template <class T>
T scalar_to(const Scalar& s) {
  if (s.is_floating()) return scalar::cast<T>(s.to_double());
  if (s.is_bool()) return scalar::cast<T>(s.to_int() != 0);
  return scalar::cast<T>(s.to_int());
}

}  // namespace smelt::cpu
