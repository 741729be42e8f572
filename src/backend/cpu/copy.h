// The eager CPU converting copy behind Backend::copy, to(dtype), contiguous(),
// cat and the index kernels: dst[i] = scalar::cast<DstT>(src[i]) with src
// broadcast to dst's shape, dst any non-overlapping strided view. Built once
// per CPU capability (copy.cpp, see capability.h).
#pragma once
#include <vector>

#include "backend/cpu/capability.h"
#include "core/tensor_impl.h"

namespace smelt::cpu {

using CopyFn = void (*)(const Tensor& dst, const Tensor& src);
SMELT_DECLARE_DISPATCH(CopyFn, copy_stub);

using CatFn = bool (*)(const Tensor& out, const std::vector<Tensor>& inputs, int64_t dim);
SMELT_DECLARE_DISPATCH(CatFn, cat_stub);

/// Backend::cat for a contiguous out and contiguous inputs of its dtype,
/// where out has at least two rows before `dim`: one parallel pass over those
/// rows, each thread writing its rows front to back from every input's block
/// in turn (PyTorch's CPU cat does likewise). False (nothing written)
/// otherwise: cat along dim 0 is then one parallel memcpy per input.
inline bool cat_contiguous(const Tensor& out, const std::vector<Tensor>& inputs, int64_t dim) {
  return cat_stub(out, inputs, dim);
}

/// Strided, converting copy: dst[i] = (DstT)src[i] with src broadcast to dst's
/// shape; dst may be any strided view (src and dst may not overlap).
inline void copy_convert(const Tensor& dst, const Tensor& src) { copy_stub(dst, src); }

}  // namespace smelt::cpu
