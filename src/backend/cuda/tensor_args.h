// From tensors to the plain kernel arguments of kernel_args.h (host code):
// an elementwise iteration space over an output and its broadcast inputs,
// with size-1 dims dropped, dims ordered by the output's strides (innermost =
// smallest) and neighbours that are contiguous for every operand merged, as
// PyTorch's TensorIterator does. Inputs on the CPU (0-dim: wrapped numbers and
// PyTorch's CPU-scalar exception) become host values.
#pragma once
#include <vector>

#include "backend/cuda/kernel_args.h"
#include "smelt/tensor.h"

namespace smelt::cuda::impl {

/// Fills args.geom, args.out (`out`, any strides) and args.in[0..inputs) (each
/// broadcast to out's shape); args.nin = inputs.size() (at most 3). Error when
/// the shape needs more than kMaxDims dims after merging.
void make_elementwise(const Tensor& out, const std::vector<Tensor>& inputs, PointwiseArgs& args);

/// A host value holding the element of a 0-dim CPU tensor.
HostValue host_value(const Tensor& t);

}  // namespace smelt::cuda::impl
