// Decompositions of composite ops into primitive ops, for the compiler's
// "decompose" pass and for eager execution. A decomposition is ordinary tensor
// code: called with tracer tensors it records the primitive ops it uses, called
// with real tensors it computes the result eagerly. So each composite op is
// defined exactly once, by its decomposition (src/ops/decompositions.cpp).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ops/dispatch.h"

namespace smelt::detail {

/// `inputs` are the op's tensor inputs in order (absent optional tensors are
/// left out; the attrs say which are present, e.g. has_bias=true).
using Decomposition =
    std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs, const Attrs& attrs)>;

/// nullptr when `op` has no decomposition (it is a primitive).
const Decomposition* find_decomposition(const std::string& op);

/// Runs composite op `op`: while tracing, records a single node `op` whose
/// outputs have the metadata `outs` (the compiler's decompose pass expands it
/// later, so graphs show the op the user called); otherwise runs the
/// decomposition eagerly and returns its results. Under autograd, a composite
/// whose op-table entry has a derivative records one node (the decomposition
/// runs with grad mode off); the others record their primitives. Internal error
/// if `op` has no decomposition.
std::vector<Tensor> run_composite(const std::string& op, const std::vector<Tensor>& inputs,
                                  const Attrs& attrs, const std::vector<OutMeta>& outs);

/// linear's eager product with its bias: x @ weight_t + bias as one GEMM whose
/// epilogue adds the bias to the float32 accumulator before the single
/// rounding to x's dtype (PyTorch's addmm with a 1-D bias, cuBLASLt's
/// CUBLASLT_EPILOGUE_BIAS; src/ops/matmul.cpp). x: [..., in]; weight_t:
/// [in, out] (any strides); bias: [out], contiguous, of x's dtype and device.
/// Real tensors only (callers keep matmul + add while tracing, where fusion
/// forms the epilogue itself); records no autograd history of its own.
Tensor linear_bias_epilogue(const Tensor& x, const Tensor& weight_t, const Tensor& bias);

}  // namespace smelt::detail
