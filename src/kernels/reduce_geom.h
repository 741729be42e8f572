// smelt/kernels/reduce_geom.h — the geometry of a reduction over a strided
// tensor: which dims are kept and which reduced (size-1 dims dropped, dims
// contiguous in memory merged), the sequence in which a row's elements are
// visited, and which order of reduce_ops.h combines them. The eager CPU
// kernels (src/backend/cpu/reduce.cpp) run it over the input's real strides;
// the compiler (src/compiler/lower/loop_ir.cpp) over the strides the same
// input has in eager mode, so that generated code visits and combines a row
// exactly as eager does. Host only (not embedded in generated code).
#pragma once
#include <cstdint>
#include <vector>

#include "smelt/tensor.h"

namespace smelt::reduce {

/// Kept / reduced dims of a reduction, after dropping size-1 dims and coalescing.
struct ReduceGeom {
  int64_t n_out = 1;  // output elements
  int64_t n_red = 1;  // reduced elements per output
  // kept dims (row-major order of the output): sizes, input strides, output strides
  Shape out_sizes, out_in_strides, out_out_strides;
  // reduced dims (outermost first, merged): sizes, input strides (elements)
  Shape red_sizes, red_strides;
  /// The input's reduced dims of size > 1 in visiting order, outermost first
  /// (before merging): a row's elements are visited row-major over them.
  std::vector<int64_t> red_dims;
  /// The kept dim (index into out_sizes) innermost in memory, whose stride is
  /// below every reduced stride: the row is combined in ColumnOrder (eager
  /// reduces neighbouring outputs side by side); -1: InnerOrder.
  int64_t column = -1;

  /// Elements of one run (InnerOrder): the innermost merged reduced dim (1 when
  /// no reduced dim has size > 1).
  int64_t run() const { return red_sizes.empty() ? 1 : red_sizes.back(); }
  /// A run is contiguous in memory (InnerOrder uses lanes only then).
  bool run_contiguous() const { return !red_strides.empty() && red_strides.back() == 1; }
};

/// The geometry of reducing `dims` (sorted, non-negative) of a tensor of
/// `sizes` and `strides`. Reduced dims are visited by decreasing |stride|
/// (innermost = smallest stride, stable for equal strides) unless
/// `keep_order`: then row-major, so that an element's linear index is its flat
/// index over the reduced dims, as argmax reports it.
ReduceGeom make_reduce_geom(const Shape& sizes, const Shape& strides,
                            const std::vector<int64_t>& dims, bool keep_order);

}  // namespace smelt::reduce
