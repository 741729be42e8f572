// The CUDA reduction kernels (for reduce_*.cu): one generic reduction over the
// accumulator structs of kernels/reduce_ops.h (step, combine, finalize: the
// CPU's definitions), in the accumulate types of reduce::accumulate_t.
//
//  * inner schedule (a reduced dim is innermost in memory, e.g. sum over the
//    last dim): a row of reduced elements per group of bx threads (bx = 256
//    for long rows, a power of two down to 1 for short ones, 256 / bx rows per
//    block); each thread steps its elements in increasing order (16-byte
//    vector loads when the rows are contiguous and aligned, kInnerLoads of
//    them issued before the first is stepped), then the group
//    combines its partials with warp shuffles (and shared memory across warps);
//  * outer schedule (a kept dim is innermost, e.g. sum over dim 0): 32
//    neighbouring outputs per block, read with coalesced loads, the reduced
//    range split over 8 thread rows combined through shared memory;
//  * few outputs with long rows: the reduced range is split over up to 65535
//    blocks per output; each writes a partial and a second kernel combines
//    them in order.
// Float sums are therefore reassociated (tree order), which rounds
// differently from the CPU's order; integer results, max/min and the first
// index of argmax/argmin (NaN winning) are exact. Welford's combine of
// partials holding infinities is order-dependent too: a mean over +-inf and
// finite values can come out NaN on one device and +-inf on the other (the
// CPU's one-element-at-a-time Welford gives NaN where the exact mean is
// infinite).
#pragma once
#include <algorithm>

#include "backend/cuda/kernels.h"
#include "backend/cuda/loops.cuh"
#include "kernels/reduce_ops.h"

namespace smelt::cuda::impl::red {

namespace r = ::smelt::reduce;

inline constexpr int kThreads = 256;
/// 16-byte loads each thread of the inner schedule has in flight (64 bytes:
/// 128 KiB per SM at full occupancy, enough to cover the memory latency).
inline constexpr int kInnerLoads = 4;
inline constexpr int kOuterX = 32, kOuterY = 8;

/// __shfl_down_sync of any trivially copyable value, 4 bytes at a time.
template <class T>
__device__ __forceinline__ T shfl_down(const T& v, int delta, int width) {
  constexpr int W = (sizeof(T) + 3) / 4;
  int w[W];
  memcpy(w, &v, sizeof(T));
#pragma unroll
  for (int i = 0; i < W; ++i) w[i] = __shfl_down_sync(0xffffffffu, w[i], delta, width);
  T out;
  memcpy(&out, w, sizeof(T));
  return out;
}

/// __shfl_xor_sync of any trivially copyable value, 4 bytes at a time.
template <class T>
__device__ __forceinline__ T shfl_xor(const T& v, int mask) {
  constexpr int W = (sizeof(T) + 3) / 4;
  int w[W];
  memcpy(w, &v, sizeof(T));
#pragma unroll
  for (int i = 0; i < W; ++i) w[i] = __shfl_xor_sync(0xffffffffu, w[i], mask);
  T out;
  memcpy(&out, w, sizeof(T));
  return out;
}

/// Combines the partials of each group of `width` lanes (a power of two <= 32)
/// into the group's first lane.
template <class Op>
__device__ __forceinline__ typename Op::acc_t group_reduce(typename Op::acc_t a, int width) {
  for (int d = width / 2; d > 0; d /= 2) a = Op::combine(a, shfl_down(a, d, width));
  return a;
}

/// Combines one partial per thread of a 1-D block of `threads` threads (a
/// multiple of 32, at most 1024) and returns the block's result to every
/// thread. `scratch` holds 32 accumulators of shared memory; every thread of
/// the block must call it.
template <class Op>
__device__ __forceinline__ typename Op::acc_t block_allreduce(typename Op::acc_t a,
                                                              typename Op::acc_t* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  a = group_reduce<Op>(a, 32);
  if (lane == 0) scratch[warp] = a;
  __syncthreads();
  if (warp == 0) {
    a = group_reduce<Op>(lane < warps ? scratch[lane] : Op::init(), 32);
    if (lane == 0) scratch[0] = a;
  }
  __syncthreads();
  a = scratch[0];
  __syncthreads();  // scratch may be reused right after
  return a;
}

/// Element offset of output o's first input element.
__device__ __forceinline__ int64_t out_offset(const ReduceArgs& a, int64_t o) {
  int64_t off = 0;
  for (int d = a.out_ndim - 1; d >= 0; --d) {
    const int64_t q = o / a.out_sizes[d];
    off += (o - q * a.out_sizes[d]) * a.out_in_strides[d];
    o = q;
  }
  return off;
}

/// Element offset of reduced element r (row-major over the reduced dims).
__device__ __forceinline__ int64_t red_offset(const ReduceArgs& a, int64_t r) {
  if (a.red_ndim == 1) return r * a.red_strides[0];
  int64_t off = 0;
  for (int d = a.red_ndim - 1; d >= 0; --d) {
    const int64_t q = r / a.red_sizes[d];
    off += (r - q * a.red_sizes[d]) * a.red_strides[d];
    r = q;
  }
  return off;
}

template <class T, int VEC>
struct alignas(sizeof(T) * VEC) Vec {
  T v[VEC];
};

/// Stores vector v at p (global memory, aligned to the vector's size) with
/// one store instruction of 8 or 16 bytes: a plain struct copy (or a uint4
/// assembled from 16-bit elements) can be split into one store per element or
/// word by the compiler. The assembly has no memory clobber, so it is no
/// compiler barrier: loads after it (layer_norm's weight and bias) may still be
/// issued before it. The calling thread must not read p again in the kernel.
template <class T, int VEC>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, VEC>& v) {
  constexpr int kBytes = static_cast<int>(sizeof(T)) * VEC;
  if constexpr (kBytes == 16 || kBytes == 8) {
    uint32_t w[kBytes / 4];
    memcpy(w, &v, kBytes);
    const size_t g = __cvta_generic_to_global(p);
    if constexpr (kBytes == 16) {
      asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(g), "r"(w[0]), "r"(w[1]),
                   "r"(w[2]), "r"(w[3]));
    } else {
      asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(g), "r"(w[0]), "r"(w[1]));
    }
  } else {
    *reinterpret_cast<Vec<T, VEC>*>(p) = v;
  }
}

template <class T>
inline constexpr int red_vec_v = 16 / static_cast<int>(sizeof(T)) > 0
                                     ? 16 / static_cast<int>(sizeof(T))
                                     : 1;

/// What one thread of the inner schedule accumulates its elements into before
/// the threads combine: Op itself, except for Welford, whose per-element
/// division gives way to reduce::ShiftedWelford's shifted sums (one
/// conversion to Welford's accumulator per thread).
template <class Op>
struct ThreadPartial {
  using op = Op;
  static __device__ __forceinline__ typename Op::acc_t finish(const typename Op::acc_t& p) {
    return p;
  }
};
template <class A>
struct ThreadPartial<r::Welford<A>> {
  using op = r::ShiftedWelford<A>;
  static __device__ __forceinline__ r::WelfordAcc<A> finish(const r::ShiftedSums<A>& p) {
    return op::welford(p);
  }
};

/// Inner schedule; a 1-D block of kThreads = (256 / bx rows) x (bx threads).
/// vec: 16-byte loads, over the whole row (runs false: the reduced elements
/// are contiguous) or within runs (runs true: the innermost reduced dim is
/// contiguous, a multiple of VEC long and every run starts 16-byte aligned,
/// e.g. batch_norm's N and H*W of NCHW; each load's offset comes from its
/// first element's index).
template <class Op, class T, class Emit>
__global__ void __launch_bounds__(kThreads)
    inner_kernel(const ReduceArgs a, Emit emit, int bx_log2, int64_t splits, int64_t stretch,
                 bool vec, bool runs, typename Op::acc_t* ws) {
  using acc_t = typename Op::acc_t;
  using A = typename Op::value_t;
  using P = ThreadPartial<Op>;
  using POp = typename P::op;
  constexpr int VEC = red_vec_v<T>;
  __shared__ alignas(16) unsigned char raw[sizeof(acc_t) * (kThreads / 32)];
  const int bx = 1 << bx_log2;
  const int tx = threadIdx.x & (bx - 1), ty = threadIdx.x >> bx_log2;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * (kThreads >> bx_log2) + ty;
  const int64_t s = blockIdx.y;
  typename POp::acc_t part = POp::init();
  if (o < a.n_out) {
    const T* base = reinterpret_cast<const T*>(a.x) + out_offset(a, o);
    const int64_t r0 = s * stretch < a.n_red ? s * stretch : a.n_red;
    const int64_t r1 = r0 + stretch < a.n_red ? r0 + stretch : a.n_red;
    int64_t tail = r0;
    if (vec) {
      const int64_t stride = static_cast<int64_t>(bx) * VEC;
      int64_t i = r0 + static_cast<int64_t>(tx) * VEC;
      // kInnerLoads independent loads in flight, stepped in the order of the
      // one-vector loop below (the same order, so the same result).
      auto at = [&](int64_t e) { return base + (runs ? red_offset(a, e) : e); };
      for (; i + (kInnerLoads - 1) * stride + VEC <= r1; i += kInnerLoads * stride) {
        Vec<T, VEC> v[kInnerLoads];
#pragma unroll
        for (int u = 0; u < kInnerLoads; ++u)
          v[u] = *reinterpret_cast<const Vec<T, VEC>*>(at(i + u * stride));
#pragma unroll
        for (int u = 0; u < kInnerLoads; ++u)
#pragma unroll
          for (int j = 0; j < VEC; ++j)
            part = r::step_at<POp>(part, r::to_acc<A>(v[u].v[j]), i + u * stride + j);
      }
      for (; i + VEC <= r1; i += stride) {
        const Vec<T, VEC> v = *reinterpret_cast<const Vec<T, VEC>*>(at(i));
#pragma unroll
        for (int j = 0; j < VEC; ++j) part = r::step_at<POp>(part, r::to_acc<A>(v.v[j]), i + j);
      }
      tail = r0 + (r1 - r0) / VEC * VEC;
    }
    for (int64_t i = tail + tx; i < r1; i += bx)
      part = r::step_at<POp>(part, r::to_acc<A>(base[red_offset(a, i)]), i);
  }
  acc_t acc = P::finish(part);
  // Combine each row's bx partials: within warps by shuffles, across warps
  // (bx > 32) through shared memory.
  acc = group_reduce<Op>(acc, bx < 32 ? bx : 32);
  if (bx > 32) {  // uniform across the block
    acc_t* sm = reinterpret_cast<acc_t*>(raw);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) sm[warp] = acc;
    __syncthreads();
    const int warps_per_row = bx / 32;
    if (tx < 32) {
      acc_t p = tx < warps_per_row ? sm[ty * warps_per_row + tx] : Op::init();
      acc = group_reduce<Op>(p, 32);
    }
  }
  if (tx == 0 && o < a.n_out) {
    if (splits == 1) {
      emit(o, acc);
    } else {
      ws[o * splits + s] = acc;
    }
  }
}

/// Outer schedule; block (kOuterX outputs) x (kOuterY slices of the reduced range).
template <class Op, class T, class Emit>
__global__ void __launch_bounds__(kOuterX* kOuterY)
    outer_kernel(const ReduceArgs a, Emit emit, int64_t splits, int64_t stretch,
                 typename Op::acc_t* ws) {
  using acc_t = typename Op::acc_t;
  using A = typename Op::value_t;
  __shared__ alignas(16) unsigned char raw[sizeof(acc_t) * kOuterX * kOuterY];
  acc_t* sm = reinterpret_cast<acc_t*>(raw);
  const int v = a.column;
  const int64_t V = a.out_sizes[v], sv = a.out_in_strides[v], ov = a.out_out_strides[v];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kOuterX + tx;
  const int64_t rows = a.n_out / V;
  const int64_t s = blockIdx.z;
  const int64_t r0 = s * stretch < a.n_red ? s * stretch : a.n_red;
  const int64_t r1 = r0 + stretch < a.n_red ? r0 + stretch : a.n_red;
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    // Offsets of this row over the kept dims other than v.
    int64_t in_off = 0, out_off = 0, rem = row;
    for (int d = a.out_ndim - 1; d >= 0; --d) {
      if (d == v) continue;
      const int64_t q = rem / a.out_sizes[d];
      const int64_t i = rem - q * a.out_sizes[d];
      rem = q;
      in_off += i * a.out_in_strides[d];
      out_off += i * a.out_out_strides[d];
    }
    acc_t acc = Op::init();
    if (j < V) {
      const T* base = reinterpret_cast<const T*>(a.x) + in_off + j * sv;
      for (int64_t i = r0 + ty; i < r1; i += kOuterY)
        acc = r::step_at<Op>(acc, r::to_acc<A>(base[red_offset(a, i)]), i);
    }
    sm[ty * kOuterX + tx] = acc;
    __syncthreads();
    if (ty == 0 && j < V) {
      for (int k = 1; k < kOuterY; ++k) acc = Op::combine(acc, sm[k * kOuterX + tx]);
      const int64_t o = out_off + j * ov;
      if (splits == 1) {
        emit(o, acc);
      } else {
        ws[o * splits + s] = acc;
      }
    }
    __syncthreads();
  }
}

/// Combines each output's partials in order.
template <class Op, class Emit>
__global__ void __launch_bounds__(kThreads)
    combine_kernel(int64_t n_out, int64_t splits, const typename Op::acc_t* ws, Emit emit) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < n_out;
       o += step) {
    typename Op::acc_t acc = ws[o * splits];
    for (int64_t c = 1; c < splits; ++c) acc = Op::combine(acc, ws[o * splits + c]);
    emit(o, acc);
  }
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/// Runs Op over input elements T, handing each output's accumulator to emit.
template <class Op, class T, class Emit>
void run(const ReduceArgs& a, const Workspace& wsp, const Emit& emit) {
  using acc_t = typename Op::acc_t;
  if (a.n_out == 0) return;
  const int64_t target = 4 * static_cast<int64_t>(a.sm_count);  // blocks to fill the GPU
  acc_t* ws = nullptr;
  auto workspace = [&](int64_t splits) {
    if (splits > 1)
      ws = static_cast<acc_t*>(
          wsp.alloc(wsp.ctx, static_cast<size_t>(a.n_out * splits) * sizeof(acc_t)));
  };
  if (a.column < 0) {
    int bx_log2 = 0;
    while ((int64_t{1} << bx_log2) < a.n_red && bx_log2 < 8) ++bx_log2;
    const int64_t rows_per_block = kThreads >> bx_log2;
    const int64_t blocks = ceil_div(a.n_out, rows_per_block);
    constexpr int VEC = red_vec_v<T>;
    constexpr int64_t kT = static_cast<int64_t>(sizeof(T));
    // 16-byte loads over a contiguous row, or within contiguous runs of the
    // innermost reduced dim that every load stays inside (a multiple of VEC
    // long, every run 16-byte aligned).
    const int last = a.red_ndim - 1;
    const bool contiguous = a.red_ndim == 1 && a.red_strides[0] == 1;
    bool runs = a.red_ndim > 1 && a.red_strides[last] == 1 && a.red_sizes[last] % VEC == 0;
    for (int d = 0; runs && d < last; ++d) runs = (a.red_strides[d] * kT) % 16 == 0;
    bool vec = VEC > 1 && (contiguous || runs) && reinterpret_cast<uintptr_t>(a.x) % 16 == 0;
    for (int d = 0; vec && d < a.out_ndim; ++d) vec = (a.out_in_strides[d] * kT) % 16 == 0;
    runs = vec && runs;
    int64_t splits = 1;
    if (blocks < target) {
      const int64_t by_len = a.n_red / (int64_t{16} << bx_log2);  // >= 16 elements per thread
      splits = clamp64(std::min(ceil_div(target, blocks), by_len), 1, 65535);
    }
    int64_t stretch = ceil_div(a.n_red, splits);
    stretch = ceil_div(stretch, VEC) * VEC;  // vector-aligned stretches
    if (stretch == 0) stretch = 1;
    splits = a.n_red == 0 ? 1 : ceil_div(a.n_red, stretch);
    workspace(splits);
    dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(splits));
    inner_kernel<Op, T, Emit>
        <<<grid, kThreads, 0, a.stream>>>(a, emit, bx_log2, splits, stretch, vec, runs, ws);
    SMELT_CUDA_CHECK_LAUNCH();
    if (splits > 1) {
      combine_kernel<Op, Emit>
          <<<grid_for(a.n_out, kThreads), kThreads, 0, a.stream>>>(a.n_out, splits, ws, emit);
      SMELT_CUDA_CHECK_LAUNCH();
    }
    return;
  }
  const int64_t V = a.out_sizes[a.column];
  const int64_t bxs = ceil_div(V, kOuterX);
  const int64_t rows = a.n_out / V;
  const int64_t gy = rows < 65535 ? rows : 65535;
  int64_t splits = 1;
  if (bxs * gy < target) {
    const int64_t by_len = a.n_red / (kOuterY * 16);
    splits = clamp64(std::min(ceil_div(target, bxs * gy), by_len), 1, 65535);
  }
  const int64_t stretch = a.n_red == 0 ? 1 : ceil_div(a.n_red, splits);
  splits = a.n_red == 0 ? 1 : ceil_div(a.n_red, stretch);
  workspace(splits);
  dim3 grid(static_cast<unsigned>(bxs), static_cast<unsigned>(gy), static_cast<unsigned>(splits));
  outer_kernel<Op, T, Emit>
      <<<grid, dim3(kOuterX, kOuterY), 0, a.stream>>>(a, emit, splits, stretch, ws);
  SMELT_CUDA_CHECK_LAUNCH();
  if (splits > 1) {
    combine_kernel<Op, Emit>
        <<<grid_for(a.n_out, kThreads), kThreads, 0, a.stream>>>(a.n_out, splits, ws, emit);
    SMELT_CUDA_CHECK_LAUNCH();
  }
}

// ---- what each output receives --------------------------------------------

/// out[o] = cast<D>(acc): sum, prod, amax, amin.
template <class D>
struct StoreEmit {
  D* out;
  template <class Acc>
  __device__ void operator()(int64_t o, const Acc& acc) const {
    out[o] = scalar::cast<D>(acc);
  }
};

/// out[o] = cast<D>(sum / count).
template <class D>
struct MeanEmit {
  D* out;
  int64_t count;
  template <class Acc>
  __device__ void operator()(int64_t o, const Acc& acc) const {
    out[o] = scalar::cast<D>(r::mean_finalize(acc, count));
  }
};

/// values (may be null) and int64 indices of an arg reduction.
template <class D>
struct ArgEmit {
  D* values;
  int64_t* indices;
  template <class Acc>
  __device__ void operator()(int64_t o, const Acc& acc) const {
    if (values) values[o] = scalar::cast<D>(acc.value);
    indices[o] = acc.index;
  }
};

/// var (std with take_sqrt) and the mean (may be null) of a Welford accumulator.
template <class D, class W>
struct VarEmit {
  D* var;
  D* mean;
  double correction;
  bool take_sqrt;
  __device__ void operator()(int64_t o, const typename W::acc_t& acc) const {
    const auto v = W::var(acc, correction);
    var[o] = scalar::cast<D>(take_sqrt ? std::sqrt(v) : v);
    if (mean) mean[o] = scalar::cast<D>(W::mean(acc));
  }
};

/// any / all into a bool or uint8 output.
struct BoolEmit {
  uint8_t* out;
  __device__ void operator()(int64_t o, bool acc) const { out[o] = acc ? 1 : 0; }
};

}  // namespace smelt::cuda::impl::red
