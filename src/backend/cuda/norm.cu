// Fused CUDA kernels of softmax, log_softmax and layer_norm over contiguous
// rows (Backend::fused_softmax / fused_layer_norm), and of batch_norm's
// per-channel normalization (Backend::fused_batch_norm_apply, a block per
// plane of one channel), instead of the decomposition's chain of kernels with
// float32 intermediates. The formulas
// are the decomposition's (ops/decompositions.cpp), computed with the same
// scalar functors in opmath; only the order of the row sums differs.
//
//  * rows of up to kRowThreads * 64 elements are held in registers: a group
//    of G threads per row (a power of two up to kRowThreads, 128 / G rows per
//    block of kRowThreads), each thread holding NV loads of V elements (V = 16
//    bytes of elements when the rows are 16-byte aligned, else 1). The row is
//    read from memory once; the row max and sum (mean and variance) are
//    combined within the group by warp shuffles (a butterfly, so every thread
//    gets the same value) and, for G > 32, across warps through shared memory
//    in warp order. softmax keeps exp(x - max) in registers, so exp runs once
//    per element;
//  * longer rows: one block per row, which reads the row three times (the
//    second and third reads come from L1/L2) and writes it once.
//
// softmax's max only shifts the exponent: a row holding a NaN gives NaN
// everywhere whichever max is taken, so it is a plain fmax (no NaN
// propagation). layer_norm's register kernel takes mean and variance from the
// row's sums of x - shift and (x - shift)^2 (shift: the row's first element,
// so the sums do not cancel when the mean is large against the spread), in
// double for float32 and float64 and, for float16 and bfloat16, each thread's
// few elements in float before the threads' partials are combined in double:
// one reduction of the pair per row, and a difference from the decomposition's
// Welford in double far below the output's ulp. The long-row kernel keeps the
// mean, then the centred squares.
#include "backend/cuda/kernels.h"
#include "backend/cuda/reduce.cuh"

namespace smelt::cuda::impl {

namespace {

namespace r = ::smelt::reduce;

template <class T>
using opmath_t = std::conditional_t<scalar::is_half_v<T>, float, T>;

/// Max of two values without NaN propagation (see the file comment).
template <class C>
__device__ __forceinline__ C fmax_of(C a, C b) {
  if constexpr (std::is_same_v<C, float>) {
    return fmaxf(a, b);
  } else {
    return fmax(a, b);
  }
}

struct FMax {
  template <class C>
  __device__ __forceinline__ C operator()(C a, C b) const {
    return fmax_of(a, b);
  }
};
struct Add {
  template <class C>
  __device__ __forceinline__ C operator()(C a, C b) const {
    return a + b;
  }
};

// ---- rows longer than the register kernels take ------------------------------

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

// ---- rows held in registers ----------------------------------------------------

/// Threads per block of the register kernels; also the most threads per row.
constexpr int kRowThreads = 128;
/// The most elements one thread holds (64 floats: about 90 registers in all).
constexpr int kMaxPerThread = 64;

template <class T>
inline constexpr int kVec = 16 / static_cast<int>(sizeof(T));

/// Blocks per SM the register kernels ask the compiler to fit (__launch_bounds__):
/// 8 (64 registers a thread, which they fit in without spilling) for 16-byte
/// loads of 16-bit elements, at most 4 a thread; otherwise the compiler's choice.
template <class T, int V, int NV>
inline constexpr int kMinBlocks = sizeof(T) == 2 && V > 1 && NV <= 4 ? 8 : 1;

/// Where this thread's part of a row lies: the group of G threads of its row
/// (G a power of two), its lane in the group, and the row's first row in the
/// block.
struct RowGroup {
  int g_log2;  // log2 G
  int lane;    // 0..G-1
  int slot;    // the row's index in the block: 0..kRowThreads / G - 1
  __device__ __forceinline__ explicit RowGroup(int g_log2_)
      : g_log2(g_log2_),
        lane(static_cast<int>(threadIdx.x) & ((1 << g_log2_) - 1)),
        slot(static_cast<int>(threadIdx.x) >> g_log2_) {}
  /// First element of load k (of V elements) of this thread (an int: the
  /// register kernels' rows are at most kRowThreads * kMaxPerThread long).
  template <int V>
  __device__ __forceinline__ int first(int k) const {
    return ((k << g_log2) + lane) * V;
  }
};

/// Combines one value per thread over each group of G threads with `op`
/// (commutative; every thread of the group gets the same result, combined in
/// the same order). Every thread of the block calls it. `scratch` holds
/// kRowThreads / 32 values of shared memory that no other call uses until this
/// one's next call. GL: log2 G when the caller knows it at compile time (the
/// loops unroll), else -1 (g.g_log2).
template <int GL = -1, class A, class Op>
__device__ __forceinline__ A group_allreduce(A a, const RowGroup& g, A* scratch, Op op) {
  const int g_log2 = GL >= 0 ? GL : g.g_log2;
  const int width = g_log2 < 5 ? 1 << g_log2 : 32;
#pragma unroll
  for (int d = width / 2; d > 0; d /= 2) a = op(a, red::shfl_xor(a, d));
  if (g_log2 <= 5) return a;  // uniform across the block
  const int warp = static_cast<int>(threadIdx.x) / 32;
  if (threadIdx.x % 32 == 0) scratch[warp] = a;
  __syncthreads();
  const int warps = 1 << (g_log2 - 5);
  const int w0 = g.slot * warps;
  a = scratch[w0];
#pragma unroll
  for (int w = 1; w < warps; ++w) a = op(a, scratch[w0 + w]);
  return a;
}

/// Loads load k (of V elements) of this thread from row `xr` (n elements)
/// into `raw`, as it is in memory; false when the row has no such load.
template <class T, int V>
__device__ __forceinline__ bool load_one(const T* __restrict__ xr, int64_t n, const RowGroup& g,
                                         bool valid, int k, red::Vec<T, V>& raw) {
  const int i = g.first<V>(k);
  if (!valid || i >= n) return false;
  raw = *reinterpret_cast<const red::Vec<T, V>*>(xr + i);
  return true;
}

/// This thread's NV loads of row `xr` as they are in memory; `have[k]` tells
/// which exist.
template <class T, int V, int NV>
__device__ __forceinline__ void load_raw(const T* __restrict__ xr, int64_t n, const RowGroup& g,
                                         bool valid, red::Vec<T, V> (&raw)[NV], bool (&have)[NV]) {
#pragma unroll
  for (int k = 0; k < NV; ++k) have[k] = load_one<T, V>(xr, n, g, valid, k, raw[k]);
}

/// This thread's NV loads of row `xr`, converted to C.
template <class T, class C, int V, int NV>
__device__ __forceinline__ void load_row(const T* __restrict__ xr, int64_t n, const RowGroup& g,
                                         bool valid, C (&v)[NV][V], bool (&have)[NV]) {
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    red::Vec<T, V> raw;
    have[k] = load_one<T, V>(xr, n, g, valid, k, raw);
    if (have[k])
#pragma unroll
      for (int j = 0; j < V; ++j) v[k][j] = scalar::cast<C>(raw.v[j]);
  }
}

/// Stores this thread's NV loads (computed by f(k, j) as C) into row yr.
template <class T, int V, int NV, class F>
__device__ __forceinline__ void store_row(T* __restrict__ yr, const RowGroup& g,
                                          const bool (&have)[NV], const F& f) {
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    if (!have[k]) continue;
    red::Vec<T, V> o;
#pragma unroll
    for (int j = 0; j < V; ++j) o.v[j] = scalar::cast<T>(f(k, j));
    red::store_vec(yr + g.first<V>(k), o);
  }
}

template <class T, int V, int NV>
__global__ void __launch_bounds__(kRowThreads, kMinBlocks<T, V, NV>)
    softmax_regs_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t rows, int64_t n,
                        int g_log2, bool log) {
  using C = opmath_t<T>;
  __shared__ C scratch_max[kRowThreads / 32], scratch_sum[kRowThreads / 32];
  const RowGroup g(g_log2);
  const int64_t per_block = kRowThreads >> g_log2;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * per_block; base < rows;
       base += static_cast<int64_t>(gridDim.x) * per_block) {
    const int64_t row = base + g.slot;
    const bool valid = row < rows;
    C v[NV][V];
    bool have[NV];
    load_row<T, C, V, NV>(x + row * n, n, g, valid, v, have);
    C m = r::lowest<C>();
#pragma unroll
    for (int k = 0; k < NV; ++k)
      if (have[k])
#pragma unroll
        for (int j = 0; j < V; ++j) m = fmax_of(m, v[k][j]);
    m = group_allreduce(m, g, scratch_max, FMax{});
    // v becomes x - max (log_softmax) or exp(x - max) (softmax).
    C s = C(0);
    if (log) {
#pragma unroll
      for (int k = 0; k < NV; ++k)
        if (have[k])
#pragma unroll
          for (int j = 0; j < V; ++j) {
            v[k][j] = scalar::sub<C>(v[k][j], m);
            s = s + scalar::exp<C>(v[k][j]);
          }
    } else {
#pragma unroll
      for (int k = 0; k < NV; ++k)
        if (have[k])
#pragma unroll
          for (int j = 0; j < V; ++j) {
            v[k][j] = scalar::exp<C>(scalar::sub<C>(v[k][j], m));
            s = s + v[k][j];
          }
    }
    s = group_allreduce(s, g, scratch_sum, Add{});
    if (log) {
      const C log_s = scalar::log<C>(s);
      store_row<T, V, NV>(out + row * n, g, have,
                          [&](int k, int j) { return scalar::sub<C>(v[k][j], log_s); });
    } else {
      store_row<T, V, NV>(out + row * n, g, have,
                          [&](int k, int j) { return scalar::div<C>(v[k][j], s); });
    }
  }
}

/// A row's shifted sums, sum(x - shift) and sum((x - shift)^2), combined in double.
struct ShiftedSums {
  double s1, s2;
};
struct AddSums {
  __device__ __forceinline__ ShiftedSums operator()(ShiftedSums a, ShiftedSums b) const {
    return {a.s1 + b.s1, a.s2 + b.s2};
  }
};

/// log2 kRowThreads: the group of a row that takes a whole block.
constexpr int kBlockRowLog2 = 7;
static_assert(kRowThreads == 1 << kBlockRowLog2);

/// FULL: the launch guarantees a whole block per row (G = kRowThreads), rows of
/// exactly kRowThreads * NV * V elements (every load exists) and both weight
/// and bias (nn.LayerNorm's affine case): the group reduction unrolls and no
/// per-load or per-pointer test is left (16384 x 4096 bfloat16 on the H200:
/// 112 -> 81 us). Otherwise any G, row length and optional weight / bias.
template <class T, int V, int NV, bool FULL>
__global__ void __launch_bounds__(kRowThreads, kMinBlocks<T, V, NV>)
    layer_norm_regs_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t rows, int64_t n,
                           int g_log2, const T* __restrict__ w, const T* __restrict__ b,
                           double eps) {
  using C = opmath_t<T>;
  // Each thread's partial sums: float for 16-bit inputs (a few elements of 8
  // or 11 significant bits), double otherwise; the partials combine in double.
  using P = std::conditional_t<scalar::is_half_v<T>, float, double>;
  __shared__ ShiftedSums scratch[kRowThreads / 32];
  const C eps_c = scalar::cast<C>(eps);  // the wrapped number, converted as add() does
  const RowGroup g(FULL ? kBlockRowLog2 : g_log2);
  const bool has_w = FULL || w != nullptr, has_b = FULL || b != nullptr;
  const int64_t per_block = kRowThreads >> g.g_log2;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * per_block; base < rows;
       base += static_cast<int64_t>(gridDim.x) * per_block) {
    const int64_t row = base + g.slot;
    const bool valid = FULL || row < rows;
    // The row stays in registers as loaded (half the registers of float for
    // 16-bit elements, which leaves room to issue the weight and bias loads
    // together) and is converted where it is used.
    red::Vec<T, V> raw[NV];
    bool have[NV];
    if constexpr (FULL) {
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        raw[k] = *reinterpret_cast<const red::Vec<T, V>*>(x + row * n + g.first<V>(k));
        have[k] = true;
      }
    } else {
      load_raw<T, V, NV>(x + row * n, n, g, valid, raw, have);
    }
    // Sums of x - shift and of its square, shifted by the row's first element
    // so that they do not cancel when the mean is large against the spread:
    // one reduction of the pair instead of one for the mean and one for the
    // centred squares.
    const P shift = valid ? static_cast<P>(scalar::cast<C>(x[row * n])) : P(0);
    P s1 = 0, s2 = 0;
#pragma unroll
    for (int k = 0; k < NV; ++k)
      if (have[k])
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const P d = static_cast<P>(scalar::cast<C>(raw[k].v[j])) - shift;
          s1 += d;
          s2 += d * d;
        }
    // mean and biased variance in double (the division by n as var_mean's),
    // rounded to opmath as var_mean's outputs are.
    constexpr int kGroupLog2 = FULL ? kBlockRowLog2 : -1;
    const ShiftedSums sums = group_allreduce<kGroupLog2>(
        ShiftedSums{static_cast<double>(s1), static_cast<double>(s2)}, g, scratch, AddSums{});
    const double dn = static_cast<double>(n), m1 = sums.s1 / dn;
    const double mean_d = static_cast<double>(shift) + m1;
    const double raw_var = sums.s2 / dn - m1 * m1;  // NaN stays NaN (a row with inf or NaN)
    const double var_d = raw_var < 0.0 ? 0.0 : raw_var;
    const C mean = static_cast<C>(mean_d), var = static_cast<C>(var_d);
    const C rstd = scalar::rsqrt<C>(scalar::add<C>(var, eps_c));
    T* yr = out + row * n;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (!have[k]) continue;
      const int i0 = g.first<V>(k);
      red::Vec<T, V> wv, bv, o;
      if (has_w) wv = *reinterpret_cast<const red::Vec<T, V>*>(w + i0);
      if (has_b) bv = *reinterpret_cast<const red::Vec<T, V>*>(b + i0);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        C y = scalar::mul<C>(scalar::sub<C>(scalar::cast<C>(raw[k].v[j]), mean), rstd);
        if (has_w) y = scalar::mul<C>(y, scalar::cast<C>(wv.v[j]));
        if (has_b) y = scalar::add<C>(y, scalar::cast<C>(bv.v[j]));
        o.v[j] = scalar::cast<T>(y);
      }
      red::store_vec(yr + i0, o);
    }
  }
}

/// The register kernels' shape for rows of n elements: V elements per load,
/// NV loads per thread and G = 2^g_log2 threads per row; nv == 0 when a row
/// does not fit.
struct RowPlan {
  int v = 1;
  int nv = 0;
  int g_log2 = 0;
};

/// The most loads of V elements a thread of the register kernels makes: up to
/// kMaxPerThread elements (half as many for float64, two registers each), at
/// most 32 loads.
template <class T>
constexpr int max_loads(int v) {
  const int elements = kMaxPerThread / (sizeof(T) == 8 ? 2 : 1);
  return elements / v < 32 ? elements / v : 32;
}

/// Aims at 4 loads of 16 bytes per thread (16 elements for unaligned rows),
/// with as many threads per row as that needs (up to kRowThreads), then as
/// many loads as the row needs (at most kMaxPerThread elements per thread).
template <class T>
RowPlan plan_rows(int64_t n, bool vec) {
  RowPlan p;
  p.v = vec ? kVec<T> : 1;
  const int64_t loads = (n + p.v - 1) / p.v;
  const int64_t target = vec ? 4 : 16;
  while ((int64_t{1} << p.g_log2) < kRowThreads && (target << p.g_log2) < loads) ++p.g_log2;
  const int64_t per = ((loads - 1) >> p.g_log2) + 1;  // loads per thread
  int nv = 1;
  while (nv < per) nv *= 2;
  if (!vec) nv = nv <= 4 ? 4 : nv <= 16 ? 16 : nv;  // unaligned rows: 4, 16 or 32 (fewer kernels)
  p.nv = nv <= max_loads<T>(p.v) ? nv : 0;
  return p;
}

/// Calls g(std::integral_constant<int, V>{}, std::integral_constant<int, NV>{})
/// for the plan's V (kVec<T> or 1) and NV (a power of two up to what
/// kMaxPerThread allows; 4, 16 or 32 when V is 1).
template <class T, class G>
void with_plan(const RowPlan& p, const G& g) {
  auto by_nv = [&](auto v) {
    constexpr int V = decltype(v)::value;
    constexpr int kMax = max_loads<T>(V);
    auto call = [&](auto nv) {
      constexpr int NV = decltype(nv)::value;
      if constexpr (NV <= kMax && (V > 1 || NV == 4 || NV == 16 || NV == 32)) {
        g(v, nv);
      } else {
        throw_internal_error("norm: no register kernel for this row plan", __FILE__, __LINE__);
      }
    };
    switch (p.nv) {
      case 1:
        return call(std::integral_constant<int, 1>{});
      case 2:
        return call(std::integral_constant<int, 2>{});
      case 4:
        return call(std::integral_constant<int, 4>{});
      case 8:
        return call(std::integral_constant<int, 8>{});
      case 16:
        return call(std::integral_constant<int, 16>{});
      case 32:
        return call(std::integral_constant<int, 32>{});
      default:
        throw_internal_error("norm: no register kernel for this row plan", __FILE__, __LINE__);
    }
  };
  if (p.v == 1) return by_nv(std::integral_constant<int, 1>{});
  by_nv(std::integral_constant<int, kVec<T>>{});
}

/// Threads per row: enough for one vector per thread, 32 to 512.
int threads_for(int64_t n, int vec) {
  int t = 32;
  while (t < 512 && static_cast<int64_t>(t) * vec < n) t *= 2;
  return t;
}

unsigned blocks_for(int64_t rows, int64_t per_block) {
  const int64_t b = (rows + per_block - 1) / per_block;
  return static_cast<unsigned>(b < (int64_t{1} << 30) ? b : (int64_t{1} << 30));
}

template <class T>
bool vectorizable(const void* x, const void* out, int64_t n) {
  constexpr int VEC = 16 / static_cast<int>(sizeof(T));
  return n % VEC == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(out) % 16 == 0;
}

/// batch_norm's normalization, a block per plane of hw elements (one channel's
/// mean, rstd, weight and bias read once per plane), 16-byte loads and stores
/// when the planes are aligned.
template <class T>
__global__ void batch_norm_apply_kernel(const T* __restrict__ x, T* __restrict__ out,
                                        int64_t planes, int64_t channels, int64_t hw,
                                        const opmath_t<T>* __restrict__ mean,
                                        const opmath_t<T>* __restrict__ var,
                                        const T* __restrict__ w, const T* __restrict__ b,
                                        double eps, bool vec) {
  using C = opmath_t<T>;
  constexpr int V = kVec<T>;
  const C eps_c = scalar::cast<C>(eps);  // the wrapped number, converted as add() does
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const int64_t c = p % channels;
    const C m = mean[c];
    const C rstd = scalar::rsqrt<C>(scalar::add<C>(var[c], eps_c));
    const C wc = w ? scalar::cast<C>(w[c]) : C(0), bc = b ? scalar::cast<C>(b[c]) : C(0);
    auto f = [&](T v) {
      C y = scalar::mul<C>(scalar::sub<C>(scalar::cast<C>(v), m), rstd);
      if (w) y = scalar::mul<C>(y, wc);
      if (b) y = scalar::add<C>(y, bc);
      return scalar::cast<T>(y);
    };
    const T* xp = x + p * hw;
    T* op = out + p * hw;
    if (vec) {
      for (int64_t i = static_cast<int64_t>(threadIdx.x) * V; i < hw;
           i += static_cast<int64_t>(blockDim.x) * V) {
        const red::Vec<T, V> v = *reinterpret_cast<const red::Vec<T, V>*>(xp + i);
        red::Vec<T, V> o;
#pragma unroll
        for (int j = 0; j < V; ++j) o.v[j] = f(v.v[j]);
        red::store_vec(op + i, o);
      }
    } else {
      for (int64_t i = threadIdx.x; i < hw; i += blockDim.x) op[i] = f(xp[i]);
    }
  }
}

}  // namespace

void launch_softmax(const void* x, void* out, DType dtype, int64_t rows, int64_t n, bool log,
                    cudaStream_t stream) {
  if (rows == 0 || n == 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || scalar::is_half_v<T>) {
      const bool vec = vectorizable<T>(x, out, n);
      if (const RowPlan p = plan_rows<T>(n, vec); p.nv > 0) {
        with_plan<T>(p, [&](auto v, auto nv) {
          softmax_regs_kernel<T, decltype(v)::value, decltype(nv)::value>
              <<<blocks_for(rows, kRowThreads >> p.g_log2), kRowThreads, 0, stream>>>(
                  static_cast<const T*>(x), static_cast<T*>(out), rows, n, p.g_log2, log);
        });
        SMELT_CUDA_CHECK_LAUNCH();
        return;
      }
      const int threads = threads_for(n, vec ? 16 / static_cast<int>(sizeof(T)) : 1);
      softmax_kernel<T><<<blocks_for(rows, 1), threads, 0, stream>>>(
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
      const bool vec = vectorizable<T>(x, out, n) &&
                       reinterpret_cast<uintptr_t>(weight) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(bias) % 16 == 0;
      if (const RowPlan p = plan_rows<T>(n, vec); p.nv > 0) {
        const bool full = p.g_log2 == kBlockRowLog2 &&
                          n == (static_cast<int64_t>(p.nv) << kBlockRowLog2) * p.v &&
                          weight != nullptr && bias != nullptr;
        with_plan<T>(p, [&](auto v, auto nv) {
          constexpr int V = decltype(v)::value, NV = decltype(nv)::value;
          const unsigned blocks = blocks_for(rows, kRowThreads >> p.g_log2);
          auto launch = [&](auto kernel) {
            kernel<<<blocks, kRowThreads, 0, stream>>>(
                static_cast<const T*>(x), static_cast<T*>(out), rows, n, p.g_log2,
                static_cast<const T*>(weight), static_cast<const T*>(bias), eps);
          };
          if (full)
            launch(layer_norm_regs_kernel<T, V, NV, true>);
          else
            launch(layer_norm_regs_kernel<T, V, NV, false>);
        });
        SMELT_CUDA_CHECK_LAUNCH();
        return;
      }
      const int threads = threads_for(n, vec ? 16 / static_cast<int>(sizeof(T)) : 1);
      layer_norm_kernel<T><<<blocks_for(rows, 1), threads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<T*>(out), rows, n, static_cast<const T*>(weight),
          static_cast<const T*>(bias), eps, vec);
      SMELT_CUDA_CHECK_LAUNCH();
    }
  });
}

void launch_batch_norm_apply(const void* x, void* out, DType dtype, int64_t planes,
                             int64_t channels, int64_t hw, const void* mean, const void* var,
                             const void* weight, const void* bias, double eps,
                             cudaStream_t stream) {
  if (planes == 0 || hw == 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || scalar::is_half_v<T>) {
      using C = opmath_t<T>;
      const bool vec = hw % kVec<T> == 0 && vectorizable<T>(x, out, hw);
      batch_norm_apply_kernel<T><<<blocks_for(planes, 1), kRowThreads * 2, 0, stream>>>(
          static_cast<const T*>(x), static_cast<T*>(out), planes, channels, hw,
          static_cast<const C*>(mean), static_cast<const C*>(var), static_cast<const T*>(weight),
          static_cast<const T*>(bias), eps, vec);
      SMELT_CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace smelt::cuda::impl
