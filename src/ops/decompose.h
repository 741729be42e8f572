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

/// Runs composite `op` on real tensors by its backend's single fused kernel,
/// writing into `outs` (of the results' shapes and dtypes: contiguous, or a
/// permuted view of contiguous memory, Step::out_buffer), or
/// returns false where the backend has no such kernel for the case (the
/// caller then runs the decomposition). The compiler's fallback steps use it
/// to write straight into their buffers.
using WriteInto = bool (*)(const std::vector<Tensor>& inputs, const Attrs& attrs,
                           const std::vector<Tensor>& outs);
/// nullptr when `op` has no such kernel on any backend
/// (scaled_dot_product_attention has one).
WriteInto find_write_into(const std::string& op);

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

/// linear's bias added to its product while tracing: `product + bias` (add's
/// semantics) recorded with the attribute gemm_bias=true. The attribute tells
/// the compiler the sum stands for linear_bias_epilogue's single rounding, so
/// its scheduler folds the add into the GEMM's epilogue even where float16 /
/// bfloat16 intermediates otherwise round as eager stores them
/// (CompileOptions::round_intermediates). Eagerly it is a plain add.
Tensor add_gemm_bias(const Tensor& product, const Tensor& bias);

}  // namespace smelt::detail
