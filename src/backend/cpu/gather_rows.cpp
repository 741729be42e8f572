// gather's rows (gather_rows.h). Built once per CPU capability.
#include "backend/cpu/gather_rows.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "backend/cpu/loops.h"
#include "core/dtype_dispatch.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace smelt::cpu::SMELT_CPU_CAP {

namespace {

#if defined(__AVX512F__)
/// d[j] = row[ok ? ix[j] : 0] for j < len - len % 8, eight at a time (vpgatherqd /
/// vpgatherqq move the elements' bits, whatever their type); clears `in` when
/// an index is out of range. Returns the number of elements done.
template <class T>
int64_t gather_run8(T* __restrict d, const T* row, const int64_t* __restrict ix, int64_t len,
                    uint64_t usize, bool& in) {
  const __m512i lim = _mm512_set1_epi64(static_cast<long long>(usize));
  __mmask8 all = 0xff;
  int64_t j = 0;
  for (; j + 8 <= len; j += 8) {
    __m512i v = _mm512_loadu_si512(ix + j);
    const __mmask8 ok = _mm512_cmplt_epu64_mask(v, lim);
    all &= ok;
    v = _mm512_maskz_mov_epi64(ok, v);
    // The masked forms, all lanes on: the plain ones warn in GCC 12
    // (-Wmaybe-uninitialized on their undefined pass-through).
    if constexpr (sizeof(T) == 4) {
      const __m256i g = _mm512_mask_i64gather_epi32(_mm256_setzero_si256(), 0xff, v, row, 4);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + j), g);
    } else {
      _mm512_storeu_si512(d + j,
                          _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), 0xff, v, row, 8));
    }
  }
  in &= all == 0xff;
  return j;
}
#endif

template <class T>
bool gather_rows_typed(const Tensor& out, const Tensor& x, int64_t dim, const int64_t* idx,
                       int64_t size) {
  const Shape& is = out.sizes();  // gather's output has the index's shape
  const Shape& xst = x.strides();
  const T* src = static_cast<const T*>(x.data_ptr());
  T* dst = static_cast<T*>(out.data_ptr());
  const int64_t last = static_cast<int64_t>(is.size()) - 1, len = is[last];
  const int64_t rows = out.numel() / len;
  const int64_t s_dim = xst[dim], s_last = dim == last ? 0 : xst[last];
  const uint64_t usize = static_cast<uint64_t>(size);
  std::atomic<bool> all_in{true};
  // Each row in `pieces` stretches of at least a grain, so that few long rows
  // (a 1-D gather, index_select of a 1-D tensor) still use every thread: one
  // row of 2^20 floats took as long at 2 threads as at 1.
  const int64_t pieces = rows >= omp_get_max_threads()
                             ? 1
                             : std::clamp<int64_t>(len / kParallelGrain, 1, omp_get_max_threads());
  parallel_for(0, rows * pieces, grain_for(len / pieces), [&](int64_t p0, int64_t p1) {
    bool in = true;
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t r = p / pieces, q = p % pieces;
      const int64_t j0 = len * q / pieces, j1 = len * (q + 1) / pieces;
      int64_t rem = r, base = 0;
      for (int64_t k = last - 1; k >= 0; --k) {
        const int64_t i = rem % is[k];
        rem /= is[k];
        if (k != dim) base += i * xst[k];
      }
      const int64_t* __restrict ix = idx + r * len + j0;
      T* __restrict d = dst + r * len + j0;
      const T* __restrict row = src + base;
      const int64_t n = j1 - j0;
      if (s_last == 0 && s_dim == 1) {  // along a contiguous last dim: a plain gather
        int64_t j = 0;
#if defined(__AVX512F__)
        if constexpr (sizeof(T) == 4 || sizeof(T) == 8) j = gather_run8(d, row, ix, n, usize, in);
#endif
        for (; j < n; ++j) {
          const bool ok = static_cast<uint64_t>(ix[j]) < usize;
          in &= ok;
          d[j] = row[ok ? ix[j] : 0];
        }
      } else {
        for (int64_t j = 0; j < n; ++j) {
          const bool ok = static_cast<uint64_t>(ix[j]) < usize;
          in &= ok;
          d[j] = row[(j0 + j) * s_last + (ok ? ix[j] : 0) * s_dim];
        }
      }
    }
    if (!in) all_in.store(false, std::memory_order_relaxed);
  });
  return all_in.load();
}

bool gather_rows_kernel(const Tensor& out, const Tensor& x, int64_t dim, const int64_t* idx,
                        int64_t size) {
  bool in_range = true;
  SMELT_DISPATCH_ALL(x.dtype(), "gather",
                     [&] { in_range = gather_rows_typed<T>(out, x, dim, idx, size); });
  return in_range;
}

}  // namespace

}  // namespace smelt::cpu::SMELT_CPU_CAP

SMELT_REGISTER_DISPATCH(gather_rows_stub, &::smelt::cpu::SMELT_CPU_CAP::gather_rows_kernel);
