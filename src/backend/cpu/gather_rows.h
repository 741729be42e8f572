// gather's inner loop (index.cpp's gather), built once per CPU capability
// (gather_rows.cpp, see capability.h): AVX-512 gathers eight elements of a
// contiguous row per instruction where the processor has them.
#pragma once
#include <cstdint>

#include "backend/cpu/capability.h"
#include "core/tensor_impl.h"

namespace smelt::cpu {

/// gather(x, dim, index) into out (contiguous, the index's shape) with `idx`
/// the index's values (contiguous int64): along out's last dim, row by row,
/// out[.., j] = x[.., idx[.., j] along dim, ..] at any strides of x. Every
/// index is checked against `size` (x's size along dim) as it is read, an
/// index out of range reading element 0 instead. True when every index was in
/// range (gather then raises on the first one that was not).
using GatherRowsFn = bool (*)(const Tensor& out, const Tensor& x, int64_t dim, const int64_t* idx,
                              int64_t size);
SMELT_DECLARE_DISPATCH(GatherRowsFn, gather_rows_stub);

}  // namespace smelt::cpu
