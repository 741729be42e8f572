// The eager CPU converting copy behind Backend::copy, to(dtype), contiguous(),
// cat and the index kernels: dst[i] = scalar::cast<DstT>(src[i]) with src
// broadcast to dst's shape, dst any non-overlapping strided view. Built once
// per CPU capability (copy.cpp, see capability.h).
#pragma once
#include "backend/cpu/capability.h"
#include "core/tensor_impl.h"

namespace smelt::cpu {

using CopyFn = void (*)(const Tensor& dst, const Tensor& src);
SMELT_DECLARE_DISPATCH(CopyFn, copy_stub);

/// Strided, converting copy: dst[i] = (DstT)src[i] with src broadcast to dst's
/// shape; dst may be any strided view (src and dst may not overlap).
inline void copy_convert(const Tensor& dst, const Tensor& src) { copy_stub(dst, src); }

}  // namespace smelt::cpu
