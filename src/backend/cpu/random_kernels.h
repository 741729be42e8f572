// Eager CPU normal fill (randn), built once per CPU capability
// (capability.h): the Philox blocks and the Box-Muller transform of
// kernels/random_ops.h computed a chunk of blocks at a time, in vector lanes.
#pragma once
#include <cstdint>

#include "backend/cpu/capability.h"
#include "core/tensor_impl.h"

namespace smelt::cpu {

/// out (contiguous, floating) = standard normals from Philox blocks `first`,
/// first + 1, ... of `seed`: element i is random::normal_element<T>(block
/// first + i / 2, i), bit for bit, on every capability and thread count.
using NormalFillFn = void (*)(const Tensor& out, uint64_t seed, uint64_t first);
SMELT_DECLARE_DISPATCH(NormalFillFn, normal_fill_stub);

}  // namespace smelt::cpu
