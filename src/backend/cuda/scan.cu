// The CUDA cumsum: an inclusive prefix sum along one dim, accumulating in
// reduce::accumulate_t<AccRule::Scan> of the output dtype (double for float32, as the
// CPU). Short lines (<= 64 elements) take one thread each and add in order,
// exactly as the CPU; longer lines take one block each, which scans chunks of
// kThreads * kItems elements (each thread its kItems in order, then a warp-
// shuffle scan of the thread totals and one across warps) carrying the total
// from chunk to chunk.
#include "backend/cuda/kernels.h"
#include "backend/cuda/loops.cuh"
#include "kernels/reduce_ops.h"

namespace smelt::cuda::impl {

namespace {

namespace r = ::smelt::reduce;

constexpr int kThreads = 256;
constexpr int kItems = 4;
constexpr int64_t kShortLine = 64;

/// Element offsets of line l's first element in x and out.
__device__ __forceinline__ void line_offsets(const ScanArgs& a, int64_t l, int64_t& xo,
                                             int64_t& oo) {
  xo = 0;
  oo = 0;
  for (int d = a.other_ndim - 1; d >= 0; --d) {
    const int64_t q = l / a.other_sizes[d];
    const int64_t i = l - q * a.other_sizes[d];
    l = q;
    xo += i * a.other_x_strides[d];
    oo += i * a.other_out_strides[d];
  }
}

template <class T>
__device__ __forceinline__ T shfl_up(T v, int delta) {
  constexpr int W = (sizeof(T) + 3) / 4;
  int w[W];
  memcpy(w, &v, sizeof(T));
#pragma unroll
  for (int i = 0; i < W; ++i) w[i] = __shfl_up_sync(0xffffffffu, w[i], delta);
  T out;
  memcpy(&out, w, sizeof(T));
  return out;
}

template <class T, class D, class A>
__global__ void __launch_bounds__(kThreads) short_scan_kernel(const ScanArgs a) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t l = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; l < a.lines;
       l += step) {
    int64_t xo, oo;
    line_offsets(a, l, xo, oo);
    const T* x = reinterpret_cast<const T*>(a.x) + xo;
    D* out = reinterpret_cast<D*>(a.out) + oo;
    A acc = A(0);
    for (int64_t k = 0; k < a.len; ++k) {
      acc = r::wrap_add(acc, r::to_acc<A>(x[k * a.x_stride]));
      out[k * a.out_stride] = scalar::cast<D>(acc);
    }
  }
}

template <class T, class D, class A>
__global__ void __launch_bounds__(kThreads) block_scan_kernel(const ScanArgs a) {
  __shared__ A warp_total[kThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t l = blockIdx.x; l < a.lines; l += gridDim.x) {
    int64_t xo, oo;
    line_offsets(a, l, xo, oo);
    const T* x = reinterpret_cast<const T*>(a.x) + xo;
    D* out = reinterpret_cast<D*>(a.out) + oo;
    A carry = A(0);
    for (int64_t c0 = 0; c0 < a.len; c0 += int64_t{kThreads} * kItems) {
      const int64_t i0 = c0 + static_cast<int64_t>(threadIdx.x) * kItems;
      A v[kItems];
      A run = A(0);
#pragma unroll
      for (int j = 0; j < kItems; ++j) {
        const int64_t i = i0 + j;
        run = r::wrap_add(run, i < a.len ? r::to_acc<A>(x[i * a.x_stride]) : A(0));
        v[j] = run;
      }
      // Inclusive scan of the thread totals within the warp, then across warps.
      A incl = run;
#pragma unroll
      for (int d = 1; d < 32; d *= 2) {
        const A up = shfl_up(incl, d);
        if (lane >= d) incl = r::wrap_add(incl, up);
      }
      if (lane == 31) warp_total[warp] = incl;
      __syncthreads();
      A before = A(0), chunk = A(0);
      for (int w = 0; w < kThreads / 32; ++w) {
        if (w < warp) before = r::wrap_add(before, warp_total[w]);
        chunk = r::wrap_add(chunk, warp_total[w]);
      }
      A in_warp = shfl_up(incl, 1);  // the warp's exclusive prefix of this thread
      if (lane == 0) in_warp = A(0);
      const A excl = r::wrap_add(r::wrap_add(carry, before), in_warp);
#pragma unroll
      for (int j = 0; j < kItems; ++j) {
        const int64_t i = i0 + j;
        if (i < a.len) out[i * a.out_stride] = scalar::cast<D>(r::wrap_add(excl, v[j]));
      }
      carry = r::wrap_add(carry, chunk);
      __syncthreads();
    }
  }
}

}  // namespace

void launch_cumsum(const ScanArgs& a) {
  if (a.lines == 0 || a.len == 0) return;
  dispatch_dtype(a.x_dtype, [&](auto xtag) {
    using T = typename decltype(xtag)::type;
    auto go = [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      using A = r::accumulate_t<r::AccRule::Scan, D>;
      if (a.len <= kShortLine) {
        short_scan_kernel<T, D, A><<<grid_for(a.lines, kThreads), kThreads, 0, a.stream>>>(a);
      } else {
        const unsigned grid = static_cast<unsigned>(a.lines < 65535 * 16 ? a.lines : 65535 * 16);
        block_scan_kernel<T, D, A><<<grid, kThreads, 0, a.stream>>>(a);
      }
      SMELT_CUDA_CHECK_LAUNCH();
    };
    if (a.out_dtype == a.x_dtype) {
      go(TypeTag<T>{});
    } else if constexpr (std::is_integral_v<T>) {
      go(TypeTag<int64_t>{});
    }
  });
}

}  // namespace smelt::cuda::impl
