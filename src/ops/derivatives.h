// Backward formulas too long to sit inline in their op-table entry (reductions,
// views, data movement, matmul and the nn composites), and the helpers the
// formulas share. Each is the derivative of exactly one op, referenced from
// that op's entry in op_table.cpp; all are written with the public ops (see
// DerivativeFn), following PyTorch's derivatives.yaml / FunctionsManual.cpp.
#pragma once
#include <vector>

#include "ops/op_table.h"

namespace smelt::detail {

using Grads = std::vector<Tensor>;

// ---- helpers ------------------------------------------------------------------
/// Sums `g` over the dims that broadcasting added or expanded so that it has
/// `shape` (PyTorch's at::sum_to); `g` itself when it has it already.
Tensor sum_to(const Tensor& g, const Shape& shape);
/// The gradient of a reduction over `dims` (keepdim or not) brought back to the
/// input's `sizes`: the reduced dims re-inserted, then expanded.
Tensor unreduce(const Tensor& g, const Shape& sizes, const std::vector<int64_t>& dims,
                bool keepdim);
/// A tensor of `sizes` that is zero except for `g` at [start : start + step * len : step]
/// along `dim` (the derivative of slice / narrow), built from pad and reshape.
Tensor slice_backward(const Tensor& g, const Shape& sizes, int64_t dim, int64_t start,
                      int64_t step);

// ---- pointwise ------------------------------------------------------------------
Grads gelu_backward(const GradContext& c);
Grads pow_backward(const GradContext& c);
Grads maximum_backward(const GradContext& c);
Grads minimum_backward(const GradContext& c);
Grads fmax_backward(const GradContext& c);
Grads fmin_backward(const GradContext& c);
Grads clamp_backward(const GradContext& c);
Grads clamp_min_backward(const GradContext& c);
Grads clamp_max_backward(const GradContext& c);

// ---- reductions -------------------------------------------------------------------
Grads sum_backward(const GradContext& c);
Grads mean_backward(const GradContext& c);
Grads prod_backward(const GradContext& c);
/// amax / amin: the gradient shared evenly between tied extremes.
Grads amax_amin_backward(const GradContext& c);
/// max / min along a dim: the gradient goes to the element the index output names.
Grads max_min_dim_backward(const GradContext& c);
Grads var_backward(const GradContext& c);
Grads std_backward(const GradContext& c);
Grads var_mean_backward(const GradContext& c);
Grads logsumexp_backward(const GradContext& c);
Grads cumsum_backward(const GradContext& c);

// ---- views ----------------------------------------------------------------------------
/// view, reshape, squeeze, unsqueeze, flatten: the gradient reshaped to the input's shape.
Grads reshape_backward(const GradContext& c);
Grads permute_backward(const GradContext& c);
Grads transpose_backward(const GradContext& c);
Grads t_backward(const GradContext& c);
Grads expand_backward(const GradContext& c);
Grads narrow_backward(const GradContext& c);
Grads slice_view_backward(const GradContext& c);
Grads select_backward(const GradContext& c);

// ---- data movement ----------------------------------------------------------------------
Grads index_select_backward(const GradContext& c);
Grads gather_backward(const GradContext& c);
Grads scatter_add_backward(const GradContext& c);
Grads cat_backward(const GradContext& c);
Grads stack_backward(const GradContext& c);
Grads pad_backward(const GradContext& c);
Grads tril_backward(const GradContext& c);
Grads triu_backward(const GradContext& c);
Grads masked_fill_backward(const GradContext& c);
Grads embedding_backward(const GradContext& c);
Grads index_put_backward(const GradContext& c);

// ---- matmul and nn composites ------------------------------------------------------------
Grads matmul_backward(const GradContext& c);
Grads linear_backward(const GradContext& c);
Grads softmax_backward(const GradContext& c);
Grads log_softmax_backward(const GradContext& c);
Grads layer_norm_backward(const GradContext& c);
Grads rms_norm_backward(const GradContext& c);
Grads mse_loss_backward(const GradContext& c);

}  // namespace smelt::detail
