// The bounds check of index tensors shared by the eager indexing ops
// (index_select, gather, scatter_add in movement.cpp; embedding in
// nn_functional.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "smelt/tensor.h"

namespace smelt::detail {

/// Raises smelt::Error with `message(v)` for the first index v (in element
/// order) of `index` outside [0, size). CPU indices only: a traced index has
/// no values, and CUDA kernels check theirs (raised at the next
/// synchronization). A contiguous int64 or int32 index is read in place, its
/// minimum and maximum first (one pass, no copy); the ordered search for the
/// culprit runs only when one is out of range.
void check_indices(const Tensor& index, int64_t size,
                   const std::function<std::string(int64_t)>& message);

}  // namespace smelt::detail
