// The CUDA pointwise kernels behind Backend::pointwise, for the .cu files that
// instantiate them (pointwise_*.cu, one per list of kernels/pointwise_list.h).
// Every element is computed as on the CPU:
//    out = cast<out dtype>(scalar::<functor><C>(cast<C>(in)..., C(extra)...))
// with C = opmath(compute dtype), calling the very functor of
// src/kernels/scalar_ops.h; an operand that rounds_to_common (an integer
// operand of a float16/bfloat16 computation, say) is rounded to the compute
// dtype after its conversion to C. Two kernels per functor:
//  * contig_kernel<S>: the common case of contiguous operands that all have
//    the compute dtype S (host values and broadcast device scalars allowed),
//    with aligned 16-byte vector loads and stores, 64-bit indices; one
//    instantiation per S of the functor's set;
//  * strided_kernel<C>: anything else — any strides, broadcasting, mixed
//    input dtypes converted at load time — through an OffsetCalc (32-bit
//    arithmetic when every offset fits, 64-bit otherwise); one instantiation
//    per opmath type C.
// Both check integer divisors when the launch asks for it
// (Backend::pointwise_checked_divisor): a zero stores the launch's code in the
// device's error flag (error_flag.h).
#pragma once
#include <utility>
#include <vector>

#include "backend/cuda/loops.cuh"
#include "backend/cuda/pointwise.h"

namespace smelt::cuda::impl::pw {

using ::smelt::pw::kAll;
using ::smelt::pw::kB;
using ::smelt::pw::kF;
using ::smelt::pw::kI;
using ::smelt::pw::kIB;
using ::smelt::pw::kIF;

/// True when element type T's category is in Set.
template <int Set, class T>
inline constexpr bool in_set_v = std::is_same_v<T, bool> ? (Set& kB) != 0
                                 : (std::is_floating_point_v<T> || scalar::is_half_v<T>)
                                     ? (Set& kF) != 0
                                     : (Set& kI) != 0;

/// opmath type of element type S (float for float16 / bfloat16).
template <class S>
using opmath_t = std::conditional_t<scalar::is_half_v<S>, float, S>;

// C repeated once per index (a class, not an alias template: see cpu/pointwise.h).
template <class C, size_t>
struct Ith {
  using type = C;
};
/// F's result for N operands and E extras of type C.
template <class F, class C, size_t... I>
auto result_of(std::index_sequence<I...>)
    -> decltype(F::template call<C>(std::declval<typename Ith<C, I>::type>()...));
template <class F, class C, int NE>
using result_t = decltype(result_of<F, C>(std::make_index_sequence<NE>{}));

template <class F, class C, int N, int E, size_t... I, size_t... J>
__device__ __forceinline__ auto apply(const C* v, const C* ex, std::index_sequence<I...>,
                                      std::index_sequence<J...>) {
  return F::template call<C>(v[I]..., ex[J]...);
}
template <class F, class C, int N, int E>
__device__ __forceinline__ auto apply(const C* v, const C* ex) {
  return apply<F, C, N, E>(v, ex, std::make_index_sequence<N>{}, std::make_index_sequence<E>{});
}

/// True when operand `o` of a computation in `compute` is rounded to it
/// first (rounds_to_common, unless the operand is marked unrounded).
inline bool rounds(const Operand& o, DType compute) {
  return !o.unrounded && rounds_to_common(o.dtype, compute);
}

/// The host value of operand `o` as C, rounded to `compute` where it rounds.
template <class C>
C operand_value(const Operand& o, DType compute) {
  C v = host_value_as<C>(o.value);
  if constexpr (std::is_same_v<C, float>)
    if (rounds(o, compute)) v = round_to_half(v, compute);
  return v;
}

/// The divisor check of Backend::pointwise_checked_divisor: when operand 1 of
/// an integer computation is zero, the launch's code goes to the error flag.
template <int N, class C>
__device__ __forceinline__ void check_divisor(const C* v, int* flag, int code) {
  if constexpr (N >= 2 && scalar::is_int_v<C>) {
    if (flag != nullptr && v[1] == C(0)) *flag = code;
  }
}

// ------------------------------------------------------------- strided --

template <int N, class C, class index_t>
struct StridedParams {
  OffsetCalc<N + 1, index_t> calc;
  index_t numel;
  char* out;
  DType out_dt;
  const char* in[N];
  DType in_dt[N];
  bool host[N];
  bool round[N];  // a device operand rounded to `compute` after its load
  DType compute;
  C value[N];
  C extra[3];
  int* flag;
  int code;
};

template <class F, int N, int E, class C, class index_t>
__global__ void __launch_bounds__(kBlockThreads)
    strided_kernel(const StridedParams<N, C, index_t> p) {
  const index_t step = static_cast<index_t>(gridDim.x) * blockDim.x;
  for (index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.numel;
       i += step) {
    index_t off[N + 1];
    p.calc.get(i, off);
    C v[N];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      v[k] = p.host[k] ? p.value[k] : load_as<C>(p.in[k] + off[k + 1], p.in_dt[k]);
      if constexpr (std::is_same_v<C, float>)
        if (p.round[k]) v[k] = round_to_half(v[k], p.compute);
    }
    check_divisor<N>(v, p.flag, p.code);
    store_as(p.out + off[0], p.out_dt, apply<F, C, N, E>(v, p.extra));
  }
}

template <class F, int N, int E, class C, class index_t>
void launch_strided(const PointwiseArgs& a) {
  StridedParams<N, C, index_t> p;
  const int64_t* strides[N + 1];
  strides[0] = a.out.strides;
  for (int k = 0; k < N; ++k) strides[k + 1] = a.in[k].strides;
  p.calc = OffsetCalc<N + 1, index_t>(a.geom, strides);
  p.numel = static_cast<index_t>(a.geom.numel);
  p.out = a.out.data;
  p.out_dt = a.out.dtype;
  for (int k = 0; k < N; ++k) {
    p.in[k] = a.in[k].data;
    p.in_dt[k] = a.in[k].dtype;
    p.host[k] = a.in[k].host;
    p.round[k] = !a.in[k].host && rounds(a.in[k], a.compute);
    p.value[k] = a.in[k].host ? operand_value<C>(a.in[k], a.compute) : C();
  }
  p.compute = a.compute;
  for (int e = 0; e < 3; ++e) p.extra[e] = e < E ? host_value_as<C>(a.extra[e]) : C();
  p.flag = a.error_flag;
  p.code = a.error_code;
  unsigned grid = grid_for(a.geom.numel, kBlockThreads);
  if (grid > (1u << 20)) grid = 1u << 20;
  strided_kernel<F, N, E, C, index_t><<<grid, kBlockThreads, 0, a.stream>>>(p);
  SMELT_CUDA_CHECK_LAUNCH();
}

// ---------------------------------------------------------- contiguous --

/// Operand modes of contig_kernel.
enum : int { kVector = 0, kHostValue = 1, kDeviceScalar = 2 };

template <class T, int VEC>
struct alignas(sizeof(T) * VEC) AlignedVec {
  T v[VEC];
};

template <int N, class S, class O, class C>
struct ContigParams {
  int64_t n;
  O* out;
  const S* in[N];
  int mode[N];
  C value[N];
  C extra[3];
  int* flag;
  int code;
};

/// Vector width of element type S: 16 bytes.
template <class S>
inline constexpr int vec_width_v = 16 / static_cast<int>(sizeof(S)) > 0
                                       ? 16 / static_cast<int>(sizeof(S))
                                       : 1;
/// Vectors each thread handles (loads issued before any compute).
inline constexpr int kUnroll = 1;
/// Threads per block of contig_kernel (PyTorch's vectorized elementwise
/// configuration: 128 threads, one 16-byte vector per thread and operand).
inline constexpr int kContigThreads = 128;

template <class F, int N, int E, class S, class O, class C>
__global__ void __launch_bounds__(kContigThreads) contig_kernel(const ContigParams<N, S, O, C> p) {
  constexpr int VEC = vec_width_v<S>;
  constexpr int64_t kPer = static_cast<int64_t>(VEC) * kUnroll;
  const int64_t base = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kPer;
  if (base >= p.n) return;
  C scal[N];
#pragma unroll
  for (int k = 0; k < N; ++k)
    scal[k] = p.mode[k] == kHostValue      ? p.value[k]
              : p.mode[k] == kDeviceScalar ? scalar::cast<C>(p.in[k][0])
                                           : C();
  if (base + kPer <= p.n) {
    AlignedVec<S, VEC> raw[kUnroll][N];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int k = 0; k < N; ++k)
        if (p.mode[k] == kVector)
          raw[u][k] = *reinterpret_cast<const AlignedVec<S, VEC>*>(p.in[k] + base + u * VEC);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      AlignedVec<O, VEC> o;
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        C v[N];
#pragma unroll
        for (int k = 0; k < N; ++k)
          v[k] = p.mode[k] == kVector ? scalar::cast<C>(raw[u][k].v[j]) : scal[k];
        check_divisor<N>(v, p.flag, p.code);
        o.v[j] = scalar::cast<O>(apply<F, C, N, E>(v, p.extra));
      }
      *reinterpret_cast<AlignedVec<O, VEC>*>(p.out + base + u * VEC) = o;
    }
    return;
  }
  for (int64_t i = base; i < p.n; ++i) {
    C v[N];
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = p.mode[k] == kVector ? scalar::cast<C>(p.in[k][i]) : scal[k];
    check_divisor<N>(v, p.flag, p.code);
    p.out[i] = scalar::cast<O>(apply<F, C, N, E>(v, p.extra));
  }
}

inline bool aligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

/// Runs the contiguous kernel for element type S when the operands allow it.
template <class F, int N, int E, class S>
bool try_contig(const PointwiseArgs& a) {
  using C = opmath_t<S>;
  using R = result_t<F, C, N + E>;
  using O = std::conditional_t<std::is_same_v<R, bool>, bool, S>;
  constexpr int VEC = vec_width_v<S>;
  const Geometry& g = a.geom;
  if (g.ndim != 1 || a.out.dtype != dtype_of<O>::value) return false;
  if (a.out.strides[0] != static_cast<int64_t>(sizeof(O)) || !aligned(a.out.data, sizeof(O) * VEC))
    return false;
  ContigParams<N, S, O, C> p;
  p.n = g.numel;
  p.out = reinterpret_cast<O*>(a.out.data);
  for (int k = 0; k < N; ++k) {
    const Operand& op = a.in[k];
    p.in[k] = reinterpret_cast<const S*>(op.data);
    p.value[k] = C();
    if (op.host) {
      p.mode[k] = kHostValue;
      p.value[k] = operand_value<C>(op, a.compute);
    } else if (op.dtype != a.compute) {
      return false;
    } else if (op.strides[0] == 0) {
      p.mode[k] = kDeviceScalar;
    } else if (op.strides[0] == static_cast<int64_t>(sizeof(S)) &&
               aligned(op.data, sizeof(S) * VEC)) {
      p.mode[k] = kVector;
    } else {
      return false;
    }
  }
  for (int e = 0; e < 3; ++e) p.extra[e] = e < E ? host_value_as<C>(a.extra[e]) : C();
  p.flag = a.error_flag;
  p.code = a.error_code;
  const unsigned grid = grid_for(g.numel, static_cast<int64_t>(kContigThreads) * VEC * kUnroll);
  contig_kernel<F, N, E, S, O, C><<<grid, kContigThreads, 0, a.stream>>>(p);
  SMELT_CUDA_CHECK_LAUNCH();
  return true;
}

/// Backend::pointwise for functor F over N operands and E extras, compute
/// types of Set: the contiguous kernel when it applies, else the strided one.
template <class F, int N, int E, int Set>
void run_pointwise(const PointwiseArgs& a) {
  bool done = false;
  dispatch_dtype(a.compute, [&](auto tag) {
    using S = typename decltype(tag)::type;
    if constexpr (in_set_v<Set, S>) done = try_contig<F, N, E, S>(a);
  });
  if (done) return;
  const int64_t* strides[N + 1];
  strides[0] = a.out.strides;
  for (int k = 0; k < N; ++k) strides[k + 1] = a.in[k].strides;
  const bool small = fits_32bit(a.geom, strides, N + 1);
  dispatch_dtype(opmath_type(a.compute), [&](auto tag) {
    using C = typename decltype(tag)::type;
    if constexpr (in_set_v<Set, C> && !scalar::is_half_v<C>) {
      if (small) {
        launch_strided<F, N, E, C, uint32_t>(a);
      } else {
        launch_strided<F, N, E, C, int64_t>(a);
      }
      done = true;
    }
  });
  if (!done)
    throw_internal_error("pointwise: compute dtype outside the functor's set", __FILE__, __LINE__);
}

template <class F, int N, int E, int Set>
PointwiseKernel make_kernel() {
  PointwiseKernel k;
  k.arity = N;
  k.n_extra = E;
  k.set = Set;
  k.run = &run_pointwise<F, N, E, Set>;
  return k;
}

}  // namespace smelt::cuda::impl::pw

/// The device functor wrapper of smelt::scalar::`fn` (at namespace scope).
#define SMELT_CUDA_PW_FUNCTOR(fn, arity, extra, set) \
  struct fn##_functor {                              \
    template <class C, class... A>                   \
    __host__ __device__ static auto call(A... a) {   \
      return ::smelt::scalar::fn<C>(a...);           \
    }                                                \
  };
/// A PointwiseTable row for `fn` (defined by SMELT_CUDA_PW_FUNCTOR).
#define SMELT_CUDA_PW_ROW(fn, arity, extra, set) \
  {#fn, ::smelt::cuda::impl::pw::make_kernel<fn##_functor, arity, extra, ::smelt::pw::set>()},
