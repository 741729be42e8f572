// Calling an op by name: the golden-case runner (`smelt golden`) and the JIT
// compiler (for graph nodes it does not generate code for) both go through
// call_op. Each entry only unpacks arguments and calls the public function of
// include/smelt/ops.h; no op logic lives here.
#pragma once
#include <string>
#include <vector>

#include "ops/dispatch.h"

namespace smelt::detail {

/// Calls the public op `op` (PyTorch's name) on positional tensor `inputs` (wrapped-number 0-dim
/// tensors, TensorImpl::wrapped_number=true, stand for Python numbers) with keyword `attrs`
/// (PyTorch's argument names). Returns all outputs (max/min with dim: values, indices; var_mean:
/// var, mean; split/chunk: pieces).
///
/// Accepted forms: "dim" as int64 or list; "dtype" as DType or a dtype name; numbers as bool,
/// int64, double or Scalar; optional arguments absent. Optional tensor inputs (bias, weight,
/// attn_mask...) are taken in PyTorch's order from the remaining inputs, or placed by the
/// recorded flags "has_<name>". Also accepts the op-table spellings "div_trunc"/"div_floor"
/// and the in-place ops (copy_, fill_, zero_, masked_fill_, index_put_), which write into
/// inputs[0] and return it.
/// Throws Error for an unknown op, a missing or mistyped argument, an unknown argument name, or
/// whatever the op itself raises.
std::vector<Tensor> call_op(const std::string& op, const std::vector<Tensor>& inputs,
                            const Attrs& attrs);

/// True when call_op knows `op`.
bool has_call_op(const std::string& op);

/// The keyword arguments call_op accepts for `op` (PyTorch's names; the has_<input>
/// flags are accepted besides); empty for an unknown op.
std::vector<std::string> call_op_attrs(const std::string& op);

/// Every op name call_op accepts, sorted.
std::vector<std::string> call_op_names();

/// A 0-dim CPU tensor holding `v`, marked as a wrapped number (dtype bool, int64 or float64 by
/// the value's kind), as PyTorch makes from a Python number.
Tensor wrapped_scalar(const Scalar& v);

}  // namespace smelt::detail
