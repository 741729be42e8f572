// Eager CPU reductions: one generic strided reduction loop over the accumulator
// structs of src/kernels/reduce_ops.h, and the kernels of the reduction ops
// built on it.
//
// The loop (reduce_loop):
//  * takes the geometry of src/kernels/reduce_geom.h: kept and reduced dims,
//    size-1 dims dropped, dims contiguous in memory coalesced, reduced dims
//    ordered by decreasing stride (innermost = smallest stride) except for
//    indexed reductions (argmax...), which keep the row-major order that
//    defines the index;
//  * "inner" schedule (a reduced dim is innermost in memory): each output walks
//    its reduced elements in InnerOrder (src/kernels/reduce_ops.h: chunks,
//    8 independent lanes over contiguous runs of cheap ops, a cascade of
//    partials, so float sums err like a pairwise sum);
//  * "outer" schedule (a kept dim is innermost in memory, e.g. sum over dim 0 of
//    a row-major matrix): blocks of neighbouring outputs are accumulated
//    together, reading rows of memory in order, each in ColumnOrder;
//  * OpenMP over outputs (or blocks of columns) when the work is large; a
//    reduction of fewer than 8 long rows (reduce::row_splits) cuts each row
//    into per-thread stretches merged with combine() in order, as compiled
//    code cuts them.
// Generated code combines a row reduced by one thread through the same order
// structs, so compiled reductions equal these bit for bit.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/cpu/capability.h"
#include "core/tensor_impl.h"
#include "kernels/reduce_geom.h"

namespace smelt::cpu {

// ---- kernels (inputs: any strides; outputs: fresh contiguous tensors) ----
// Built once per CPU capability (reduce.cpp, see capability.h).

using ReduceFn = void (*)(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out);
using MinMaxFn = void (*)(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out,
                          bool is_max);
using ArgReduceFn = void (*)(const Tensor& x, const std::vector<int64_t>& dims,
                             const Tensor& values, const Tensor& indices, bool is_max);
using VarFn = void (*)(const Tensor& x, const std::vector<int64_t>& dims, double correction,
                       bool take_sqrt, const Tensor& var, const Tensor& mean);
using CumsumFn = void (*)(const Tensor& x, int64_t dim, const Tensor& out);
SMELT_DECLARE_DISPATCH(ReduceFn, sum_stub);
SMELT_DECLARE_DISPATCH(ReduceFn, mean_stub);
SMELT_DECLARE_DISPATCH(ReduceFn, prod_stub);
SMELT_DECLARE_DISPATCH(MinMaxFn, minmax_stub);
SMELT_DECLARE_DISPATCH(MinMaxFn, anyall_stub);
SMELT_DECLARE_DISPATCH(ArgReduceFn, arg_stub);
SMELT_DECLARE_DISPATCH(VarFn, var_stub);
SMELT_DECLARE_DISPATCH(CumsumFn, cumsum_stub);

/// out = sum over dims; out.dtype() gives the accumulate type (x converted to
/// out's dtype first when they differ in kind, see reduce.cpp).
inline void sum_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out) {
  sum_stub(x, dims, out);
}
/// out = sum / count (x already in out's dtype, floating).
inline void mean_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out) {
  mean_stub(x, dims, out);
}
inline void prod_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out) {
  prod_stub(x, dims, out);
}
/// amax / amin (x.dtype() == out.dtype()).
inline void minmax_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out,
                          bool is_max) {
  minmax_stub(x, dims, out, is_max);
}
/// max/min with indices, argmax/argmin: `values` may be undefined.
inline void arg_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& values,
                       const Tensor& indices, bool is_max) {
  arg_stub(x, dims, values, indices, is_max);
}
/// var (or std when take_sqrt) and, when defined, mean.
inline void var_kernel(const Tensor& x, const std::vector<int64_t>& dims, double correction,
                       bool take_sqrt, const Tensor& var, const Tensor& mean) {
  var_stub(x, dims, correction, take_sqrt, var, mean);
}
/// any (is_any) / all; out bool or uint8.
inline void anyall_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out,
                          bool is_any) {
  anyall_stub(x, dims, out, is_any);
}
/// Inclusive prefix sum along dim (out: x's shape, any accumulate dtype).
inline void cumsum_kernel(const Tensor& x, int64_t dim, const Tensor& out) {
  cumsum_stub(x, dim, out);
}

}  // namespace smelt::cpu
