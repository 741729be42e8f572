// Decompositions of composite ops into primitive ops, for the compiler's
// "decompose" pass. A decomposition is ordinary tensor code: called with tracer
// tensors it records the primitive ops it uses. The node's inputs and attrs are
// exactly those its op recorded through run_op (optional tensor inputs are
// absent from `inputs`; the attrs say which are present).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ops/dispatch.h"

namespace smelt::detail {

using Decomposition =
    std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs, const Attrs& attrs)>;

/// nullptr when `op` has no decomposition (it is a primitive).
const Decomposition* find_decomposition(const std::string& op);

}  // namespace smelt::detail
