// Elementwise iteration spaces from tensors (tensor_args.h).
#include "backend/cuda/tensor_args.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "core/tensor_impl.h"
#include "smelt/error.h"

namespace smelt::cuda::impl {

HostValue host_value(const Tensor& t) {
  SMELT_INTERNAL_ASSERT(t.device().is_cpu() && t.numel() == 1,
                        "CUDA kernel: a host operand must be a one-element CPU tensor");
  return HostValue::of(t.dtype(), t.data_ptr(), t.element_size());
}

void make_elementwise(const Tensor& out, const std::vector<Tensor>& inputs, PointwiseArgs& a) {
  const int nops = 1 + static_cast<int>(inputs.size());
  SMELT_INTERNAL_ASSERT(inputs.size() <= 3, "CUDA elementwise: at most 3 inputs");
  const Shape& shape = out.sizes();
  const int64_t nd = static_cast<int64_t>(shape.size());
  // Byte strides of every operand over out's dims (0 where broadcast).
  std::vector<std::vector<int64_t>> st(static_cast<size_t>(nops), std::vector<int64_t>(nd, 0));
  for (int k = 0; k < nops; ++k) {
    const Tensor& t = k == 0 ? out : inputs[static_cast<size_t>(k - 1)];
    if (k > 0 && t.device().is_cpu()) continue;  // host value
    const int64_t isz = static_cast<int64_t>(t.element_size());
    const int64_t off = nd - t.dim();
    for (int64_t d = 0; d < t.dim(); ++d)
      if (t.sizes()[d] != 1) st[k][off + d] = t.strides()[d] * isz;
  }
  // Dims of size > 1, ordered so that the innermost has the smallest output
  // stride (ties: the first input's); the stable sort keeps row-major order
  // for a contiguous output.
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < nd; ++d)
    if (shape[d] != 1) dims.push_back(d);
  auto key = [&](int64_t d) {
    return std::pair(std::llabs(st[0][d]), nops > 1 ? std::llabs(st[1][d]) : int64_t{0});
  };
  std::stable_sort(dims.begin(), dims.end(), [&](int64_t x, int64_t y) { return key(x) > key(y); });
  // Merge neighbours contiguous for every operand (outer d0 with inner d1).
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> mst(static_cast<size_t>(nops));
  for (int64_t d : dims) {
    const bool merge = !sizes.empty() && [&] {
      for (int k = 0; k < nops; ++k)
        if (mst[k].back() != st[k][d] * shape[d]) return false;
      return true;
    }();
    if (merge) {
      sizes.back() *= shape[d];
      for (int k = 0; k < nops; ++k) mst[k].back() = st[k][d];
    } else {
      sizes.push_back(shape[d]);
      for (int k = 0; k < nops; ++k) mst[k].push_back(st[k][d]);
    }
  }
  if (sizes.empty()) {  // one element (or a 0-dim tensor)
    sizes.push_back(detail::shape_numel(shape));
    for (int k = 0; k < nops; ++k) mst[k].push_back(0);
  }
  SMELT_CHECK(static_cast<int>(sizes.size()) <= kMaxDims,
              "CUDA: an elementwise kernel over shape {} needs {} dims after merging; at most {} "
              "are supported; make the tensors contiguous first",
              detail::shape_str(shape), sizes.size(), kMaxDims);
  a.geom.ndim = static_cast<int>(sizes.size());
  a.geom.numel = detail::shape_numel(shape);
  for (int d = 0; d < a.geom.ndim; ++d) a.geom.sizes[d] = sizes[static_cast<size_t>(d)];
  auto fill = [&](Operand& o, const Tensor& t, int k) {
    o.dtype = t.dtype();
    if (k > 0 && t.device().is_cpu()) {
      o.host = true;
      o.value = host_value(t);
      o.data = nullptr;
    } else {
      o.host = false;
      o.data = static_cast<char*>(t.data_ptr());
    }
    for (int d = 0; d < a.geom.ndim; ++d) o.strides[d] = mst[k][static_cast<size_t>(d)];
  };
  fill(a.out, out, 0);
  a.nin = nops - 1;
  for (int k = 1; k < nops; ++k) fill(a.in[k - 1], inputs[static_cast<size_t>(k - 1)], k);
}

}  // namespace smelt::cuda::impl
