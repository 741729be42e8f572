// Random ops that are not public API: the dropout mask.
#pragma once
#include "smelt/tensor.h"

namespace smelt::detail {

/// Bool tensor of `shape` on `device`: each element true with probability
/// `keep_prob` (independently), drawn from the global generator. Calls
/// note_random("bernoulli"). keep_prob must be in [0, 1] (Error otherwise).
/// Used by dropout: out = x * mask / keep_prob.
Tensor bernoulli_mask(const Shape& shape, double keep_prob, Device device = Device());

}  // namespace smelt::detail
