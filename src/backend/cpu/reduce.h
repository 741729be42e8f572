// Eager CPU reductions: one generic strided reduction loop over the accumulator
// structs of src/kernels/reduce_ops.h, and the kernels of the reduction ops
// built on it.
//
// The loop (reduce_loop):
//  * splits the input's dims into kept (output) dims and reduced dims, drops
//    size-1 dims and coalesces adjacent dims that are contiguous in memory;
//    reduced dims are ordered by decreasing stride (innermost = smallest stride)
//    except for indexed reductions (argmax...), which keep the row-major order
//    that defines the index;
//  * "inner" schedule (a reduced dim is innermost in memory): each output walks
//    its reduced elements; contiguous runs of cheap ops use 8 independent
//    lanes (vectorizable);
//  * "outer" schedule (a kept dim is innermost in memory, e.g. sum over dim 0 of
//    a row-major matrix): blocks of neighbouring outputs are accumulated
//    together, reading rows of memory in order;
//  * elements are accumulated in chunks that are combine()d through a small
//    cascade (16-ary tree), so float sums err like a pairwise sum, not a
//    sequential one;
//  * OpenMP over outputs when the work is large; when there are fewer outputs
//    than threads, the reduced range of each output is split into per-thread
//    partials merged with combine() in order.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor_impl.h"

namespace smelt::cpu {

/// Kept / reduced dims of a reduction, after dropping size-1 dims and coalescing.
struct ReduceGeom {
  int64_t n_out = 1;  // output elements
  int64_t n_red = 1;  // reduced elements per output
  // kept dims (row-major order of the output): sizes, input strides, output strides
  Shape out_sizes, out_in_strides, out_out_strides;
  // reduced dims (outermost first): sizes, input strides (elements)
  Shape red_sizes, red_strides;
};

/// `dims` sorted, non-negative; `keep_order`: leave reduced dims in row-major
/// order (the linear index of an element is then its flat index over the
/// reduced dims, as argmax reports it).
ReduceGeom make_reduce_geom(const Shape& sizes, const Shape& strides,
                            const std::vector<int64_t>& dims, bool keep_order);

// ---- kernels (inputs: any strides; outputs: fresh contiguous tensors) ----

/// out = sum over dims; out.dtype() gives the accumulate type (x converted to
/// out's dtype first when they differ in kind, see reduce.cpp).
void sum_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out);
/// out = sum / count (x already in out's dtype, floating).
void mean_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out);
void prod_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out);
/// amax / amin (x.dtype() == out.dtype()).
void minmax_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out,
                   bool is_max);
/// max/min with indices, argmax/argmin: `values` may be undefined.
void arg_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& values,
                const Tensor& indices, bool is_max);
/// var (or std when take_sqrt) and, when defined, mean.
void var_kernel(const Tensor& x, const std::vector<int64_t>& dims, double correction,
                bool take_sqrt, const Tensor& var, const Tensor& mean);
/// any / all; out bool or uint8.
void anyall_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out,
                   bool is_any);
/// Inclusive prefix sum along dim (out: x's shape, any accumulate dtype).
void cumsum_kernel(const Tensor& x, int64_t dim, const Tensor& out);

}  // namespace smelt::cpu
