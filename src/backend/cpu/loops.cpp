// Eager CPU loop machinery (see loops.h): coalescing and strided row iteration.
#include "backend/cpu/loops.h"

#include <omp.h>

#include <algorithm>
#include <limits>

namespace smelt::cpu {

std::vector<int64_t> broadcast_byte_strides(const Tensor& t, const Shape& out_shape) {
  const int64_t nd = static_cast<int64_t>(out_shape.size());
  const int64_t td = t.dim();
  const int64_t isz = static_cast<int64_t>(t.element_size());
  std::vector<int64_t> s(nd, 0);
  for (int64_t i = 0; i < td; ++i) {
    int64_t od = nd - td + i;
    s[od] = t.sizes()[i] == 1 ? 0 : t.strides()[i] * isz;
  }
  return s;
}

Coalesced coalesce(const Shape& shape_in, const std::vector<std::vector<int64_t>>& strides) {
  const size_t nops = strides.size();
  Coalesced c;
  Shape& shape = c.shape;
  std::vector<std::vector<int64_t>>& st = c.strides;
  st.resize(nops);
  // Drop size-1 dims, then coalesce adjacent dims that are contiguous for every operand.
  for (size_t d = 0; d < shape_in.size(); ++d) {
    if (shape_in[d] == 1) continue;
    shape.push_back(shape_in[d]);
    for (size_t k = 0; k < nops; ++k) st[k].push_back(strides[k][d]);
  }
  if (shape.empty()) {
    shape.push_back(1);
    for (size_t k = 0; k < nops; ++k) st[k].push_back(0);
  }
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d > 0; --d) {
    bool mergeable = true;
    for (size_t k = 0; k < nops; ++k)
      if (st[k][d - 1] != st[k][d] * shape[d]) mergeable = false;
    if (!mergeable) continue;
    shape[d - 1] *= shape[d];
    shape.erase(shape.begin() + d);
    for (size_t k = 0; k < nops; ++k) {
      st[k][d - 1] = st[k][d];
      st[k].erase(st[k].begin() + d);
    }
  }
  return c;
}

void for_each_row(const Shape& shape_in, std::vector<char*> ptrs,
                  std::vector<std::vector<int64_t>> strides, const RowFn& row) {
  const size_t nops = ptrs.size();
  int64_t numel = 1;
  for (auto d : shape_in) numel *= d;
  if (numel == 0) return;
  // Named references rather than a structured binding: the OpenMP region
  // below captures them (which Clang before 16 does not allow of bindings).
  const Coalesced coalesced = coalesce(shape_in, strides);
  const Shape& shape = coalesced.shape;
  const std::vector<std::vector<int64_t>>& st = coalesced.strides;
  const int64_t nd = static_cast<int64_t>(shape.size());
  const int64_t inner = shape[nd - 1];
  const int64_t rows = numel / inner;
  std::vector<int64_t> inner_strides(nops);
  for (size_t k = 0; k < nops; ++k) inner_strides[k] = st[k][nd - 1];
  const bool parallel = numel >= kParallelGrain && omp_get_max_threads() > 1;

  if (rows == 1) {  // one long row: split it across threads
    const int64_t nthreads = parallel ? omp_get_max_threads() : 1;
    const int64_t chunk = (inner + nthreads - 1) / nthreads;
#pragma omp parallel for num_threads(nthreads) schedule(static) if (parallel)
    for (int64_t c = 0; c < nthreads; ++c) {
      int64_t begin = c * chunk, end = std::min(inner, begin + chunk);
      if (begin >= end) continue;
      std::vector<char*> p(nops);
      for (size_t k = 0; k < nops; ++k) p[k] = ptrs[k] + begin * inner_strides[k];
      row(p.data(), inner_strides.data(), end - begin);
    }
    return;
  }
#pragma omp parallel if (parallel)
  {
    std::vector<char*> p(nops);
    std::vector<int64_t> idx(nd, 0);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t rem = r;
      for (size_t k = 0; k < nops; ++k) p[k] = ptrs[k];
      for (int64_t d = nd - 2; d >= 0; --d) {
        int64_t i = rem % shape[d];
        rem /= shape[d];
        for (size_t k = 0; k < nops; ++k) p[k] += i * st[k][d];
      }
      row(p.data(), inner_strides.data(), inner);
    }
  }
}

}  // namespace smelt::cpu
