// Eager CPU loop machinery (see loops.h): coalescing and strided row iteration.
#include "backend/cpu/loops.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
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

bool is_trailing_block(const Shape& in, const Shape& out) {
  size_t lead = 0;
  while (lead < in.size() && in[lead] == 1) ++lead;
  const size_t n = in.size() - lead;
  if (n > out.size()) return false;
  return std::equal(in.begin() + static_cast<std::ptrdiff_t>(lead), in.end(),
                    out.end() - static_cast<std::ptrdiff_t>(n));
}

char* RowBlockCopy::away_from_stores(char* block, int64_t bytes, const char* dst,
                                     int64_t row_bytes) {
  constexpr int64_t kPage = 4096, kWindow = 512, kMaxBytes = int64_t{64} << 10;
  const auto offset = [](const char* p) {
    return static_cast<int64_t>(reinterpret_cast<uintptr_t>(p) % kPage);
  };
  if (row_bytes % kPage != 0 || bytes > kMaxBytes) return block;
  const int64_t trail = ((offset(dst) - offset(block)) % kPage + kPage) % kPage;
  if (trail >= kWindow) return block;
  buf_.resize(static_cast<size_t>(bytes + kPage));
  // The address in buf_ whose page offset is the rows' plus half a page.
  const int64_t want = (offset(dst) + kPage / 2) % kPage;
  char* copy = buf_.data() + ((want - offset(buf_.data())) % kPage + kPage) % kPage;
  std::memcpy(copy, block, static_cast<size_t>(bytes));
  return copy;
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
  const Coalesced coalesced = coalesce(shape_in, strides);
  const Shape& shape = coalesced.shape;
  const std::vector<std::vector<int64_t>>& st = coalesced.strides;
  const int64_t nd = static_cast<int64_t>(shape.size());
  const int64_t inner = shape[nd - 1];
  const int64_t rows = numel / inner;
  // Operand pointers and inner strides in small arrays on the stack of each
  // range (no heap allocation per row or per thread).
  constexpr size_t kStack = 8;
  std::array<int64_t, kStack> inner_small{};
  std::vector<int64_t> inner_big(nops > kStack ? nops : 0);
  int64_t* inner_strides = nops > kStack ? inner_big.data() : inner_small.data();
  for (size_t k = 0; k < nops; ++k) inner_strides[k] = st[k][nd - 1];

  if (rows == 1) {  // one long row: split it
    parallel_for(0, inner, kParallelGrain, [&](int64_t begin, int64_t end) {
      std::array<char*, kStack> small;
      std::vector<char*> big(nops > kStack ? nops : 0);
      char** p = nops > kStack ? big.data() : small.data();
      for (size_t k = 0; k < nops; ++k) p[k] = ptrs[k] + begin * inner_strides[k];
      row(p, inner_strides, end - begin);
    });
    return;
  }
  parallel_for(0, rows, grain_for(inner), [&](int64_t r0, int64_t r1) {
    std::array<char*, kStack> small;
    std::vector<char*> big(nops > kStack ? nops : 0);
    char** p = nops > kStack ? big.data() : small.data();
    // The outer index of row r0, decomposed once; then counted up row by row
    // (two divisions per outer dim and row took a third of a permuted copy
    // of 32 x 128 x 64 floats: rows of 64, one thread).
    std::array<int64_t, kStack> idx_small{};
    std::vector<int64_t> idx_big(nd > static_cast<int64_t>(kStack) ? nd : 0);
    int64_t* idx = nd > static_cast<int64_t>(kStack) ? idx_big.data() : idx_small.data();
    int64_t rem = r0;
    for (size_t k = 0; k < nops; ++k) p[k] = ptrs[k];
    for (int64_t d = nd - 2; d >= 0; --d) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
      for (size_t k = 0; k < nops; ++k) p[k] += idx[d] * st[k][d];
    }
    for (int64_t r = r0; r < r1; ++r) {
      row(p, inner_strides, inner);
      for (int64_t d = nd - 2; d >= 0; --d) {  // the next row: carry through the outer dims
        for (size_t k = 0; k < nops; ++k) p[k] += st[k][d];
        if (++idx[d] < shape[d]) break;
        for (size_t k = 0; k < nops; ++k) p[k] -= st[k][d] * shape[d];
        idx[d] = 0;
      }
    }
  });
}

}  // namespace smelt::cpu
