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
  // Every eager elementwise op comes here: no heap memory unless out has more
  // than kStackDims dims.
  const int nops = 1 + static_cast<int>(inputs.size());
  SMELT_INTERNAL_ASSERT(inputs.size() <= 3, "CUDA elementwise: at most 3 inputs");
  const Shape& shape = out.sizes();
  const int64_t nd = static_cast<int64_t>(shape.size());
  constexpr int64_t kStackDims = 32;
  constexpr int64_t kArrays = 10;  // st (4), dims, msz, mst (4)
  int64_t stack[kArrays * kStackDims];
  std::vector<int64_t> heap;
  int64_t* scratch = stack;
  if (nd > kStackDims) {
    heap.resize(static_cast<size_t>(kArrays * nd));
    scratch = heap.data();
  }
  // Byte strides of every operand over out's dims (0 where broadcast):
  // st[k * nd + d].
  int64_t* st = scratch;
  std::fill(st, st + nops * nd, int64_t{0});
  for (int k = 0; k < nops; ++k) {
    const Tensor& t = k == 0 ? out : inputs[static_cast<size_t>(k - 1)];
    if (k > 0 && t.device().is_cpu()) continue;  // host value
    const int64_t isz = static_cast<int64_t>(t.element_size());
    const Shape& sizes = t.sizes();
    const Shape& strides = t.strides();
    const int64_t tdim = static_cast<int64_t>(sizes.size());
    const int64_t off = nd - tdim;
    for (int64_t d = 0; d < tdim; ++d)
      if (sizes[static_cast<size_t>(d)] != 1)
        st[k * nd + off + d] = strides[static_cast<size_t>(d)] * isz;
  }
  // Dims of size > 1, ordered so that the innermost has the smallest output
  // stride (ties: the first input's); the sort is stable (insertion), so a
  // contiguous output keeps row-major order.
  int64_t* dims = scratch + 4 * nd;
  int64_t ndims = 0;
  for (int64_t d = 0; d < nd; ++d)
    if (shape[static_cast<size_t>(d)] != 1) dims[ndims++] = d;
  auto key = [&](int64_t d) {
    return std::pair(std::llabs(st[d]), nops > 1 ? std::llabs(st[nd + d]) : int64_t{0});
  };
  for (int64_t i = 1; i < ndims; ++i) {
    const int64_t d = dims[i];
    int64_t j = i;
    for (; j > 0 && key(dims[j - 1]) < key(d); --j) dims[j] = dims[j - 1];
    dims[j] = d;
  }
  // Merge neighbours contiguous for every operand (outer d0 with inner d1):
  // sizes msz[m], strides mst[k * nd + m].
  int64_t* msz = scratch + 5 * nd;
  int64_t* mst = scratch + 6 * nd;
  int64_t merged = 0;
  for (int64_t i = 0; i < ndims; ++i) {
    const int64_t d = dims[i];
    const int64_t size = shape[static_cast<size_t>(d)];
    bool merge = merged > 0;
    for (int k = 0; merge && k < nops; ++k)
      merge = mst[k * nd + merged - 1] == st[k * nd + d] * size;
    if (merge) {
      msz[merged - 1] *= size;
      for (int k = 0; k < nops; ++k) mst[k * nd + merged - 1] = st[k * nd + d];
    } else {
      msz[merged] = size;
      for (int k = 0; k < nops; ++k) mst[k * nd + merged] = st[k * nd + d];
      ++merged;
    }
  }
  SMELT_CHECK(merged <= kMaxDims,
              "CUDA: an elementwise kernel over shape {} needs {} dims after merging; at most {} "
              "are supported; make the tensors contiguous first",
              detail::shape_str(shape), merged, kMaxDims);
  if (merged == 0) {  // one element (or a 0-dim tensor)
    a.geom.sizes[0] = detail::shape_numel(shape);
    for (int k = 0; k < nops; ++k) (k == 0 ? a.out : a.in[k - 1]).strides[0] = 0;
    merged = 1;
  } else {
    for (int64_t m = 0; m < merged; ++m) {
      a.geom.sizes[m] = msz[m];
      for (int k = 0; k < nops; ++k) (k == 0 ? a.out : a.in[k - 1]).strides[m] = mst[k * nd + m];
    }
  }
  a.geom.ndim = static_cast<int>(merged);
  a.geom.numel = detail::shape_numel(shape);
  auto fill = [&](Operand& o, const Tensor& t, int k) {
    o.dtype = t.dtype();
    o.unrounded = t.is_wrapped_number();
    if (k > 0 && t.device().is_cpu()) {
      o.host = true;
      o.value = host_value(t);
      o.data = nullptr;
    } else {
      o.host = false;
      o.data = static_cast<char*>(t.data_ptr());
    }
  };
  fill(a.out, out, 0);
  a.nin = nops - 1;
  for (int k = 1; k < nops; ++k) fill(a.in[k - 1], inputs[static_cast<size_t>(k - 1)], k);
}

}  // namespace smelt::cuda::impl
