// Eager CPU loop machinery: the one grain rule of every eager CPU loop
// (parallel_for: OpenMP across cores only for large work, as ATen's
// at::parallel_for with at::internal::GRAIN_SIZE), and broadcasting strided
// iteration with dimension coalescing (for_each_row, which every eager
// pointwise kernel is built on).
#pragma once
#include <omp.h>

#include <algorithm>
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

/// Elements below which a kernel runs on one thread (ATen's
/// at::internal::GRAIN_SIZE).
inline constexpr int64_t kParallelGrain = 32768;

/// Iterations of a loop whose iterations each cost `work` elements that make
/// one grain: the `grain` argument of parallel_for for such a loop.
inline int64_t grain_for(int64_t work) {
  return std::max<int64_t>(1, (kParallelGrain + work - 1) / std::max<int64_t>(work, 1));
}

/// Calls f(b, e) on disjoint ranges [b, e) covering [begin, end), as
/// at::parallel_for: one contiguous range per thread on min(threads,
/// ceil((end - begin) / grain)) threads; on this thread alone, without
/// entering OpenMP (no team, no wake-ups), when that is one thread or this is
/// already inside a parallel region.
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t tasks = (n + grain - 1) / grain;
  const int64_t nt =
      tasks <= 1 || omp_get_level() > 0 ? 1 : std::min<int64_t>(omp_get_max_threads(), tasks);
  if (nt <= 1) {
    f(begin, end);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    const int64_t t = omp_get_thread_num(), team = omp_get_num_threads();
    const int64_t chunk = (n + team - 1) / team;
    const int64_t b = begin + t * chunk, e = std::min(end, b + chunk);
    if (b < e) f(b, e);
  }
}

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
/// byte stride along the row. Dims are coalesced first; rows (or one long row)
/// are split across threads by parallel_for's grain rule.
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
