// Fused CUDA kernels of softmax, log_softmax and layer_norm over contiguous
// rows (Backend::fused_softmax / fused_layer_norm): one block per row, which
// reads the row once into registers where it fits (up to 8 vectors of 16 bytes
// per thread of 128), else three times (the second and third reads come from
// L1/L2), and writes it once, instead of the decomposition's chain of kernels
// with float32 intermediates. The formulas are the decomposition's (ops/decompositions.cpp),
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

// ---- rows held in registers ------------------------------------------------
// Rows of n <= kRowThreads * VEC * NV elements (VEC per 16-byte vector; 8192
// bfloat16, 4096 float32 at NV = 8), 16-byte aligned: 128 threads per row, each
// holding NV vectors, so the row is read from memory once.

constexpr int kRowThreads = 128;

template <class T>
inline constexpr int kVec = 16 / static_cast<int>(sizeof(T));

/// Loads this thread's NV vectors of row `xr` (n elements) as C; `have[k]`
/// tells which exist.
template <class T, class C, int NV>
__device__ __forceinline__ void load_row(const T* xr, int64_t n, C (&v)[NV][kVec<T>],
                                         bool (&have)[NV]) {
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int64_t i = (static_cast<int64_t>(k) * kRowThreads + threadIdx.x) * kVec<T>;
    have[k] = i < n;
    if (have[k]) {
      const red::Vec<T, kVec<T>> raw = *reinterpret_cast<const red::Vec<T, kVec<T>>*>(xr + i);
#pragma unroll
      for (int j = 0; j < kVec<T>; ++j) v[k][j] = scalar::cast<C>(raw.v[j]);
    }
  }
}

template <class T, int NV>
__global__ void __launch_bounds__(kRowThreads)
    softmax_regs_kernel(const T* x, T* out, int64_t rows, int64_t n, bool log) {
  using C = opmath_t<T>;
  constexpr int VEC = kVec<T>;
  __shared__ alignas(16) unsigned char raw[sizeof(C) * 32];
  C* scratch = reinterpret_cast<C*>(raw);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    C v[NV][VEC];
    bool have[NV];
    load_row<T, C, NV>(x + row * n, n, v, have);
    C m = r::Max<C>::init();
#pragma unroll
    for (int k = 0; k < NV; ++k)
      if (have[k])
#pragma unroll
        for (int j = 0; j < VEC; ++j) m = r::Max<C>::step(m, v[k][j]);
    m = red::block_allreduce<r::Max<C>>(m, scratch);
    C s = C(0);
#pragma unroll
    for (int k = 0; k < NV; ++k)
      if (have[k])
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          v[k][j] = scalar::sub<C>(v[k][j], m);  // shifted
          s = s + scalar::exp<C>(v[k][j]);
        }
    s = red::block_allreduce<r::Sum<C>>(s, scratch);
    const C log_s = scalar::log<C>(s);
    T* yr = out + row * n;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (!have[k]) continue;
      red::Vec<T, VEC> o;
#pragma unroll
      for (int j = 0; j < VEC; ++j)
        o.v[j] = scalar::cast<T>(log ? scalar::sub<C>(v[k][j], log_s)
                                     : scalar::div<C>(scalar::exp<C>(v[k][j]), s));
      *reinterpret_cast<red::Vec<T, VEC>*>(
          yr + (static_cast<int64_t>(k) * kRowThreads + threadIdx.x) * VEC) = o;
    }
  }
}

template <class T, int NV>
__global__ void __launch_bounds__(kRowThreads)
    layer_norm_regs_kernel(const T* x, T* out, int64_t rows, int64_t n, const T* w, const T* b,
                           double eps) {
  using C = opmath_t<T>;
  constexpr int VEC = kVec<T>;
  __shared__ alignas(16) unsigned char raw[sizeof(double) * 32];
  double* scratch = reinterpret_cast<double*>(raw);
  const C eps_c = scalar::cast<C>(eps);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    C v[NV][VEC];
    bool have[NV];
    load_row<T, C, NV>(x + row * n, n, v, have);
    double sum = 0;
#pragma unroll
    for (int k = 0; k < NV; ++k)
      if (have[k])
#pragma unroll
        for (int j = 0; j < VEC; ++j) sum += static_cast<double>(v[k][j]);
    const double mean_d =
        red::block_allreduce<r::Sum<double>>(sum, scratch) / static_cast<double>(n);
    double m2 = 0;
#pragma unroll
    for (int k = 0; k < NV; ++k)
      if (have[k])
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const double d = static_cast<double>(v[k][j]) - mean_d;
          m2 += d * d;
        }
    const double var_d = red::block_allreduce<r::Sum<double>>(m2, scratch) / static_cast<double>(n);
    const C mean = static_cast<C>(mean_d), var = static_cast<C>(var_d);
    const C rstd = scalar::rsqrt<C>(scalar::add<C>(var, eps_c));
    T* yr = out + row * n;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (!have[k]) continue;
      const int64_t i0 = (static_cast<int64_t>(k) * kRowThreads + threadIdx.x) * VEC;
      red::Vec<T, VEC> o;
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        C y = scalar::mul<C>(scalar::sub<C>(v[k][j], mean), rstd);
        if (w) y = scalar::mul<C>(y, scalar::cast<C>(w[i0 + j]));
        if (b) y = scalar::add<C>(y, scalar::cast<C>(b[i0 + j]));
        o.v[j] = scalar::cast<T>(y);
      }
      *reinterpret_cast<red::Vec<T, VEC>*>(yr + i0) = o;
    }
  }
}

/// Vectors per thread of the register kernels for rows of n elements (1, 2,
/// 4 or 8), or 0 when a row does not fit.
template <class T>
int regs_nv(int64_t n) {
  const int64_t per = static_cast<int64_t>(kRowThreads) * kVec<T>;
  for (int nv = 1; nv <= 8; nv *= 2)
    if (n <= per * nv) return nv;
  return 0;
}

/// Calls g(std::integral_constant<int, NV>{}) for nv in {1, 2, 4, 8}.
template <class G>
void with_nv(int nv, const G& g) {
  switch (nv) {
    case 1:
      return g(std::integral_constant<int, 1>{});
    case 2:
      return g(std::integral_constant<int, 2>{});
    case 4:
      return g(std::integral_constant<int, 4>{});
    default:
      return g(std::integral_constant<int, 8>{});
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
      if (const int nv = regs_nv<T>(n); vec && nv > 0) {
        with_nv(nv, [&](auto k) {
          softmax_regs_kernel<T, decltype(k)::value><<<rows_grid(rows), kRowThreads, 0, stream>>>(
              static_cast<const T*>(x), static_cast<T*>(out), rows, n, log);
        });
        SMELT_CUDA_CHECK_LAUNCH();
        return;
      }
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
      if (const int nv = regs_nv<T>(n); vec && nv > 0) {
        with_nv(nv, [&](auto k) {
          layer_norm_regs_kernel<T, decltype(k)::value>
              <<<rows_grid(rows), kRowThreads, 0, stream>>>(
                  static_cast<const T*>(x), static_cast<T*>(out), rows, n,
                  static_cast<const T*>(weight), static_cast<const T*>(bias), eps);
        });
        SMELT_CUDA_CHECK_LAUNCH();
        return;
      }
      const int threads = threads_for(n, vec ? 16 / static_cast<int>(sizeof(T)) : 1);
      layer_norm_kernel<T><<<rows_grid(rows), threads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<T*>(out), rows, n, static_cast<const T*>(weight),
          static_cast<const T*>(bias), eps, vec);
      SMELT_CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace smelt::cuda::impl
