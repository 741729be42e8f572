// Fused CUDA kernels of softmax, log_softmax and layer_norm over contiguous
// rows (Backend::fused_softmax / fused_layer_norm): one block per row, which
// reads the row three times (the second and third reads come from L1/L2) and
// writes it once, instead of the decomposition's chain of kernels with float32
// intermediates. The formulas are the decomposition's (ops/decompositions.cpp),
// computed with the same scalar functors and accumulators in opmath; only the
// order of the row sums differs.
#include "backend/cuda/kernels.h"
#include "backend/cuda/reduce.cuh"

namespace smelt::cuda::impl {

namespace {

namespace r = ::smelt::reduce;

template <class T>
using opmath_t = std::conditional_t<scalar::is_half_v<T>, float, T>;

/// Calls f(i, value as C) for this thread's elements of a row of n elements:
/// 16-byte vector loads when `vec`, one element at a time otherwise.
template <class T, class C, class F>
__device__ __forceinline__ void for_row(const T* row, int64_t n, bool vec, const F& f) {
  constexpr int VEC = 16 / static_cast<int>(sizeof(T));
  if (vec) {
    for (int64_t i = static_cast<int64_t>(threadIdx.x) * VEC; i < n;
         i += static_cast<int64_t>(blockDim.x) * VEC) {
      const red::Vec<T, VEC> v = *reinterpret_cast<const red::Vec<T, VEC>*>(row + i);
#pragma unroll
      for (int j = 0; j < VEC; ++j) f(i + j, scalar::cast<C>(v.v[j]));
    }
    return;
  }
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) f(i, scalar::cast<C>(row[i]));
}

template <class T>
__global__ void softmax_kernel(const T* x, T* out, int64_t rows, int64_t n, bool log, bool vec) {
  using C = opmath_t<T>;
  __shared__ alignas(16) unsigned char raw[sizeof(C) * 32];
  C* scratch = reinterpret_cast<C*>(raw);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    T* yr = out + row * n;
    C m = r::Max<C>::init();
    for_row<T, C>(xr, n, vec, [&](int64_t, C v) { m = r::Max<C>::step(m, v); });
    m = red::block_allreduce<r::Max<C>>(m, scratch);
    C s = C(0);
    for_row<T, C>(xr, n, vec, [&](int64_t, C v) { s = s + scalar::exp<C>(scalar::sub<C>(v, m)); });
    s = red::block_allreduce<r::Sum<C>>(s, scratch);
    const C log_s = scalar::log<C>(s);
    for_row<T, C>(xr, n, vec, [&](int64_t i, C v) {
      const C shifted = scalar::sub<C>(v, m);
      yr[i] = scalar::cast<T>(log ? scalar::sub<C>(shifted, log_s)
                                  : scalar::div<C>(scalar::exp<C>(shifted), s));
    });
  }
}

template <class T>
__global__ void layer_norm_kernel(const T* x, T* out, int64_t rows, int64_t n, const T* w,
                                  const T* b, double eps, bool vec) {
  using C = opmath_t<T>;
  __shared__ alignas(16) unsigned char raw[sizeof(double) * 32];
  double* scratch = reinterpret_cast<double*>(raw);
  const C eps_c = scalar::cast<C>(eps);  // the wrapped number, converted as add() does
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    T* yr = out + row * n;
    // mean and biased variance in double (the decomposition's Welford in
    // double), rounded to opmath as var_mean's outputs are.
    double sum = 0;
    for_row<T, C>(xr, n, vec, [&](int64_t, C v) { sum += static_cast<double>(v); });
    const double mean_d =
        red::block_allreduce<r::Sum<double>>(sum, scratch) / static_cast<double>(n);
    double m2 = 0;
    for_row<T, C>(xr, n, vec, [&](int64_t, C v) {
      const double d = static_cast<double>(v) - mean_d;
      m2 += d * d;
    });
    const double var_d = red::block_allreduce<r::Sum<double>>(m2, scratch) / static_cast<double>(n);
    const C mean = static_cast<C>(mean_d), var = static_cast<C>(var_d);
    const C rstd = scalar::rsqrt<C>(scalar::add<C>(var, eps_c));
    for_row<T, C>(xr, n, vec, [&](int64_t i, C v) {
      C y = scalar::mul<C>(scalar::sub<C>(v, mean), rstd);
      if (w) y = scalar::mul<C>(y, scalar::cast<C>(w[i]));
      if (b) y = scalar::add<C>(y, scalar::cast<C>(b[i]));
      yr[i] = scalar::cast<T>(y);
    });
  }
}

/// Threads per row: enough for one vector per thread, 32 to 512.
int threads_for(int64_t n, int vec) {
  int t = 32;
  while (t < 512 && static_cast<int64_t>(t) * vec < n) t *= 2;
  return t;
}

unsigned rows_grid(int64_t rows) {
  return static_cast<unsigned>(rows < (int64_t{1} << 30) ? rows : (int64_t{1} << 30));
}

template <class T>
bool vectorizable(const void* x, const void* out, int64_t n) {
  constexpr int VEC = 16 / static_cast<int>(sizeof(T));
  return n % VEC == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(out) % 16 == 0;
}

}  // namespace

void launch_softmax(const void* x, void* out, DType dtype, int64_t rows, int64_t n, bool log,
                    cudaStream_t stream) {
  if (rows == 0 || n == 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || scalar::is_half_v<T>) {
      const bool vec = vectorizable<T>(x, out, n);
      const int threads = threads_for(n, vec ? 16 / static_cast<int>(sizeof(T)) : 1);
      softmax_kernel<T><<<rows_grid(rows), threads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<T*>(out), rows, n, log, vec);
      SMELT_CUDA_CHECK_LAUNCH();
    }
  });
}

void launch_layer_norm(const void* x, void* out, DType dtype, int64_t rows, int64_t n,
                       const void* weight, const void* bias, double eps, cudaStream_t stream) {
  if (rows == 0 || n == 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || scalar::is_half_v<T>) {
      const bool vec = vectorizable<T>(x, out, n);
      const int threads = threads_for(n, vec ? 16 / static_cast<int>(sizeof(T)) : 1);
      layer_norm_kernel<T><<<rows_grid(rows), threads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<T*>(out), rows, n, static_cast<const T*>(weight),
          static_cast<const T*>(bias), eps, vec);
      SMELT_CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace smelt::cuda::impl
