// Eager CPU indexing kernels (see index.h).
#include "backend/cpu/index.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/copy.h"
#include "backend/cpu/gather_rows.h"
#include "backend/cpu/loops.h"
#include "kernels/scalar_ops.h"

namespace smelt::cpu {

namespace {

/// The values of an int64 / int32 index tensor (any strides), as int64.
std::vector<int64_t> index_values(const Tensor& index) {
  const int64_t n = index.numel();
  std::vector<int64_t> v(static_cast<size_t>(n));
  if (n == 0) return v;
  // A contiguous int64 tensor over the vector's memory.
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::wrap(v.data(), v.size() * sizeof(int64_t), Device());
  impl->sizes = index.sizes();
  impl->strides = detail::contiguous_strides(index.sizes());
  impl->dtype = DType::Int64;
  copy_convert(Tensor(std::move(impl)), index);
  return v;
}

/// An index tensor's values as int64: read in place when they are contiguous
/// int64, else copied (index_values).
struct IndexData {
  std::vector<int64_t> copied;
  const int64_t* p = nullptr;
  explicit IndexData(const Tensor& index) {
    if (index.dtype() == DType::Int64 && index.is_contiguous()) {
      p = static_cast<const int64_t*>(index.data_ptr());
    } else {
      copied = index_values(index);
      p = copied.data();
    }
  }
};

int64_t prod(const Shape& s, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= s[i];
  return n;
}

/// The rows index_select copies from a contiguous input: output row j of the
/// pairs j = o * n + k in [0, outer * n) is input row o * size + idx[k];
/// rows of `row` bytes.
struct RowPairs {
  char* dst;
  const char* src;
  const int64_t* idx;
  int64_t outer, n, size, row, grain;
};

/// copy(d, s) for every pair of `p`, split across threads by p.grain. Pair j
/// is (j / n, j % n): divided once per range, then counted (two divisions
/// per row took 40% of embedding's 4096 rows of one float, at one thread: 23
/// us against PyTorch's 10). The loop's state is its own (by value): the
/// stores, through char*, could alias what it read by reference, which it
/// would then load again at every row (1-D rows of words: 157 -> 110 us).
/// With kPrefetch, the first `prefetch_bytes` of the row kAhead pairs on are
/// prefetched: that starts the reads of a random row, and the hardware
/// prefetcher follows the rest. Prefetching whole rows cost more than it
/// gained once rows are long (4096 random rows of 4 KiB out of cache, one
/// thread of a 2-core AMD EPYC: 1.81 ms whole, 1.58 none, 1.23 the first 256
/// bytes; 512 rows of 4 KiB in cache: 59.7 / 49.6 / 50.0 us; rows of 256
/// bytes to 1.5 KiB out of cache: within 3% of whole rows, 10-30% ahead of
/// none).
template <bool kPrefetch, class Copy>
void select_rows(const RowPairs& p, int64_t prefetch_bytes, const Copy& copy) {
  constexpr int64_t kAhead = 4;  // rows whose reads are started early
  parallel_for(0, p.outer * p.n, p.grain, [p, prefetch_bytes, copy](int64_t j0, int64_t j1) {
    static_cast<void>(prefetch_bytes);  // read with kPrefetch only
    int64_t o = j0 / p.n, k = j0 % p.n;
    int64_t oa = (j0 + kAhead) / p.n, ka = (j0 + kAhead) % p.n;
    for (int64_t j = j0; j < j1; ++j) {
      if constexpr (kPrefetch) {
        if (j + kAhead < j1) {
          const char* next = p.src + (oa * p.size + p.idx[ka]) * p.row;
          for (int64_t b = 0; b < prefetch_bytes; b += 64) __builtin_prefetch(next + b);
          if (++ka == p.n) {
            ka = 0;
            ++oa;
          }
        }
      }
      copy(p.dst + j * p.row, p.src + (o * p.size + p.idx[k]) * p.row);
      if (++k == p.n) {
        k = 0;
        ++o;
      }
    }
  });
}

}  // namespace

void index_select(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  if (out.numel() == 0) return;
  const IndexData index_data(index);
  const int64_t* idx = index_data.p;
  const int64_t n = index.numel();
  if (x.dim() == 0) {  // every index is 0: n copies of the one element
    const size_t isz = x.element_size();
    for (int64_t k = 0; k < n; ++k)
      std::memcpy(static_cast<char*>(out.data_ptr()) + k * isz, x.data_ptr(), isz);
    return;
  }
  const Shape& xs = x.sizes();
  const int64_t isz = static_cast<int64_t>(x.element_size());
  if (x.is_contiguous()) {
    const int64_t size = xs[dim];
    const int64_t outer = prod(xs, 0, dim);
    const int64_t row = prod(xs, dim + 1, xs.size()) * isz;
    const char* src = static_cast<const char*>(x.data_ptr());
    char* dst = static_cast<char*>(out.data_ptr());
    if (outer == 1 && row == isz) {
      // One element per row (a 1-D selection): gather's kernel over the
      // flattened tensors, its AVX-512 gathers (1-D index_select of 65536
      // floats, one thread: 230 us with a memcpy per element, 110 with
      // words, 54 through gather; PyTorch 43).
      const Tensor x1 = detail::make_view(x, {size}, {1}, x.storage_offset());
      const Tensor out1 = detail::make_view(out, {n}, {1}, out.storage_offset());
      gather_rows_stub(out1, x1, 0, idx, size);
      return;
    }
    const RowPairs pairs{dst, src, idx, outer, n, size, row, grain_for(row / isz)};
    // Rows of at most kSmallRow bytes (embeddings of a few values, a last
    // dim of a few elements) are copied inline as words, without a memcpy
    // call or the prefetch (65536 rows of 4 floats, one thread: 305 -> 184
    // us; PyTorch 218).
    constexpr int64_t kSmallRow = 32;
    if (row <= kSmallRow) {
      const auto by_words = [&](auto word) {
        using U = decltype(word);
        constexpr int64_t w = sizeof(U);
        select_rows<false>(pairs, 0, [words = row / w](char* d, const char* s) {
          for (int64_t q = 0; q < words; ++q) {
            U v;
            __builtin_memcpy(&v, s + q * w, sizeof(U));
            __builtin_memcpy(d + q * w, &v, sizeof(U));
          }
        });
      };
      if (row % 8 == 0) {
        by_words(uint64_t{});
      } else if (row % 4 == 0) {
        by_words(uint32_t{});
      } else if (row % 2 == 0) {
        by_words(uint16_t{});
      } else {
        by_words(uint8_t{});
      }
      return;
    }
    // Longer rows by memcpy, the first 256 bytes of the row kAhead on
    // prefetched (select_rows says why).
    constexpr int64_t kPrefetchBytes = 256;
    select_rows<true>(pairs, std::min(row, kPrefetchBytes), [row](char* d, const char* s) {
      std::memcpy(d, s, static_cast<size_t>(row));
    });
    return;
  }
  // Strided input: one strided copy per selected slice.
  Shape slice_sizes = xs;
  slice_sizes.erase(slice_sizes.begin() + dim);
  Shape xst = x.strides();
  xst.erase(xst.begin() + dim);
  Shape ost = out.strides();
  ost.erase(ost.begin() + dim);
  for (int64_t k = 0; k < n; ++k) {
    Tensor src =
        detail::make_view(x, slice_sizes, xst, x.storage_offset() + idx[k] * x.strides()[dim]);
    Tensor dst =
        detail::make_view(out, slice_sizes, ost, out.storage_offset() + k * out.strides()[dim]);
    copy_convert(dst, src);
  }
}

void gather(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const IndexData index_data(index);
  const int64_t* idx = index_data.p;
  const int64_t size = x.dim() == 0 ? 1 : x.sizes()[static_cast<size_t>(dim)];
  bool in_range = true;
  if (x.dim() == 0) {
    SMELT_DISPATCH_ALL(x.dtype(), "gather", [&] {
      const T* src = static_cast<const T*>(x.data_ptr());
      T* dst = static_cast<T*>(out.data_ptr());
      for (int64_t i = 0; i < n; ++i) {
        in_range &= idx[i] == 0;
        dst[i] = src[0];
      }
    });
  } else {
    in_range = gather_rows_stub(out, x, dim, idx, size);
  }
  if (in_range) return;
  // The first index out of range in element order.
  for (int64_t i = 0; i < n; ++i)
    SMELT_CHECK(idx[i] >= 0 && idx[i] < size,
                "gather: index {} is out of bounds for dimension {} with size {}", idx[i], dim,
                size);
}

void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  const int64_t n = index.numel();
  if (n == 0) return;
  const std::vector<int64_t> idx = index_values(index);
  const Shape& is = index.sizes();
  const int64_t ind = static_cast<int64_t>(is.size());
  SMELT_DISPATCH_ALL(out.dtype(), "scatter_add", [&] {
    const T* from = static_cast<const T*>(src.data_ptr());
    T* dst = static_cast<T*>(out.data_ptr());
    auto add_to = [](T& d, T v) { d = scalar::add<T>(d, v); };  // bool: or; integers wrap
    if (ind == 0) {                                             // a 0-dim out, index and src
      add_to(dst[0], from[0]);
      return;
    }
    const Shape& ost = out.strides();
    const Shape& sst = src.strides();
    std::vector<int64_t> pos(ind, 0);
    int64_t obase = 0, sbase = 0;  // offsets of pos in out (without dim `dim`) and in src
    for (int64_t i = 0; i < n; ++i) {
      add_to(dst[obase + idx[i] * ost[dim]], from[sbase + pos[dim] * sst[dim]]);
      for (int64_t k = ind - 1; k >= 0; --k) {  // odometer increment
        if (++pos[k] < is[k]) {
          if (k != dim) obase += ost[k], sbase += sst[k];
          break;
        }
        if (k != dim) obase -= (is[k] - 1) * ost[k], sbase -= (is[k] - 1) * sst[k];
        pos[k] = 0;
      }
    }
  });
}

void index_copy(const Tensor& out, const Tensor& index, const Tensor& src) {
  const std::vector<int64_t> rows = index_values(index);
  const Shape& s = out.sizes();
  const int64_t row = prod(s, 1, s.size()) * static_cast<int64_t>(out.element_size());
  char* dst = static_cast<char*>(out.data_ptr());
  const char* from = static_cast<const char*>(src.data_ptr());
  for (size_t j = 0; j < rows.size(); ++j)
    std::memcpy(dst + rows[j] * row, from + static_cast<int64_t>(j) * row, row);
}

void triangle_zero(const Tensor& out, int64_t diagonal, bool lower) {
  if (out.numel() == 0) return;
  const int64_t rows = out.sizes()[out.dim() - 2], cols = out.sizes()[out.dim() - 1];
  const int64_t batch = out.numel() / (rows * cols);
  SMELT_DISPATCH_ALL(out.dtype(), lower ? "tril" : "triu", [&] {
    T* p = static_cast<T*>(out.data_ptr());
    const T z = static_cast<T>(0.0f);
    // Row i keeps columns j with j - i <= diagonal (tril) or >= diagonal
    // (triu): one stretch of zeros per row, the rows split across threads
    // (a test per element, on one thread, took 1.5 ms of a 2048 x 1024
    // tril against PyTorch's 1.0).
    // i + shift clamped to [0, cols], without overflow for any shift.
    const auto edge_at = [rows, cols](int64_t i, int64_t shift) -> int64_t {
      if (shift >= cols) return cols;
      if (shift <= -rows) return 0;
      return std::clamp<int64_t>(i + shift, 0, cols);
    };
    parallel_for(0, batch * rows, grain_for(cols), [&](int64_t r0, int64_t r1) {
      for (int64_t br = r0; br < r1; ++br) {
        const int64_t i = br % rows;
        T* r = p + br * cols;
        // tril zeros [i + diagonal + 1, cols), triu zeros [0, i + diagonal).
        const int64_t edge =
            lower ? (diagonal >= cols ? cols : edge_at(i, diagonal + 1)) : edge_at(i, diagonal);
        if (lower) {
          std::fill(r + edge, r + cols, z);
        } else {
          std::fill(r, r + edge, z);
        }
      }
    });
  });
}

}  // namespace smelt::cpu
