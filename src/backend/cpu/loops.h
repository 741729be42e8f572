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
/// at::parallel_for: min(threads, ceil((end - begin) / grain)) contiguous
/// ranges, one per thread; on this thread alone, without entering OpenMP (no
/// team, no wake-ups), when that is one range or this is already inside a
/// parallel region.
///
/// The region always asks for the whole team and leaves the threads past the
/// last range idle. A `num_threads` clause below the previous region's team
/// makes libgomp end the pool's surplus threads, and the next full-width
/// region (oneDNN's GEMMs, generated kernels) creates them again: one
/// pthread_create per thread at every alternation, which made eager MLP steps
/// 9x slower at 16 threads than at 2. ATen's OpenMP parallel_for avoids the
/// clause for the same reason.
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
  const int64_t chunk = (n + nt - 1) / nt;
#pragma omp parallel
  {
    const int64_t team = omp_get_num_threads();
    for (int64_t c = omp_get_thread_num(); c < nt; c += team) {
      const int64_t b = begin + c * chunk, e = std::min(end, b + chunk);
      if (b < e) f(b, e);
    }
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
/// are split across threads by parallel_for's grain rule. `row` reads ptrs and
/// leaves them as they are (the loop moves them on to the next row).
using RowFn = std::function<void(char** ptrs, const int64_t* strides, int64_t n)>;
void for_each_row(const Shape& shape, std::vector<char*> ptrs,
                  std::vector<std::vector<int64_t>> byte_strides, const RowFn& row);

/// True when `in` (leading size-1 dims aside) equals the last dims of `out`:
/// a contiguous `in` then repeats along a contiguous output with period
/// numel(in) (a bias row of x + b).
bool is_trailing_block(const Shape& in, const Shape& out);

/// The block a loop re-reads for every row it writes (a bias row), moved away
/// from the rows' stores when they would stall its loads. A load whose address
/// matches, in its low 12 bits, a store still in flight waits for that store
/// ("4K aliasing": Intel's optimization manual, 3.6.8.2; AMD Zen behaves
/// alike), and a loop writing rows that start at one page offset hits it on
/// every vector when the block's page offset trails the rows' by 0-256 bytes:
/// x + b over 512 x 1024 floats took 25% longer on a Zen 4 at 2 threads.
class RowBlockCopy {
 public:
  /// `block` itself, or a copy of its `bytes` bytes placed half a page from
  /// the stores, when rows of `row_bytes` (a multiple of 4 KiB) written from
  /// `dst` on would trail it by less than 512 bytes modulo 4 KiB; the copy
  /// lives as long as this object, until its next call (one object per block).
  char* away_from_stores(char* block, int64_t bytes, const char* dst, int64_t row_bytes);

 private:
  std::vector<char> buf_;
};

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
