// gather's inner loop (index.cpp's gather), built once per CPU capability
// (gather_rows.cpp, see capability.h): AVX-512 gathers eight elements of a
// contiguous row per instruction where the processor has them.
#pragma once
#include <cstdint>

#include "backend/cpu/capability.h"
#include "core/tensor_impl.h"

namespace smelt::cpu {

/// out[r, j] = x[row r's offset + idx[r, j] * x.stride(dim)] (rows along the
/// index's last dim), as gather computes it: index `is` shape, x's strides
/// `xst`; every index checked against `size` (x's size along dim) as it is
/// read, an index out of range reading element 0 instead. True when every
/// index was in range (gather then raises on the first one that was not).
using GatherRowsFn = bool (*)(const Tensor& out, const Tensor& x, int64_t dim, const int64_t* idx,
                              int64_t size);
SMELT_DECLARE_DISPATCH(GatherRowsFn, gather_rows_stub);

}  // namespace smelt::cpu
