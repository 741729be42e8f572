// CUDA fills: a constant into any strided tensor, arange / linspace
// (kernels/fill_ops.h) and random numbers from the Philox stream
// (kernels/random_ops.h: the formulas the CPU uses, so a seed gives the same
// tensor on both devices). Random fills run one thread per Philox block.
#include "backend/cuda/kernels.h"
#include "backend/cuda/loops.cuh"
#include "kernels/fill_ops.h"
#include "kernels/random_ops.h"

namespace smelt::cuda::impl {

namespace {

template <class T, class index_t>
__global__ void __launch_bounds__(kBlockThreads)
    fill_kernel(OffsetCalc<1, index_t> calc, char* dst, index_t n, T value) {
  const index_t step = static_cast<index_t>(gridDim.x) * blockDim.x;
  for (index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    index_t off[1];
    calc.get(i, off);
    *reinterpret_cast<T*>(dst + off[0]) = value;
  }
}

template <class T>
__global__ void __launch_bounds__(kBlockThreads)
    arange_kernel(T* out, int64_t n, int64_t si, int64_t sti, double sd, double std_) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    out[i] = fill::arange_element<T>(i, si, sti, sd, std_);
}

template <class T>
__global__ void __launch_bounds__(kBlockThreads)
    linspace_kernel(T* out, int64_t n, double start, double end) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    out[i] = fill::linspace_element<T>(i, n, start, end);
}

template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || scalar::is_half_v<T>;

/// One thread per Philox block: the per_block elements of block b.
template <class T>
__global__ void __launch_bounds__(kBlockThreads)
    random_kernel(T* out, int64_t n, int64_t per_block, RandomArgs r) {
  const int64_t nblocks = (n + per_block - 1) / per_block;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < nblocks;
       b += step) {
    uint32_t w[4];
    random::philox_block(r.seed, r.first_block + static_cast<uint64_t>(b), w);
    const int64_t end = (b + 1) * per_block < n ? (b + 1) * per_block : n;
    for (int64_t i = b * per_block; i < end; ++i) {
      if (r.kind == 2) {
        out[i] = random::integer_element<T>(w, i, r.low, r.range);
      } else if constexpr (std::is_same_v<T, bool>) {
        out[i] = random::bernoulli_element(w, i, r.p);
      } else if constexpr (is_float_v<T>) {
        out[i] = r.kind == 0 ? random::uniform_element<T>(w, i, r.bits)
                             : random::normal_element<T>(w, i);
      }
    }
  }
}

}  // namespace

void launch_fill(const Geometry& g, const Operand& dst, const HostValue& value,
                 cudaStream_t stream) {
  dispatch_dtype(dst.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = host_value_as<T>(value);
    const int64_t* strides[1] = {dst.strides};
    const unsigned grid = grid_for(g.numel, kBlockThreads * 4);
    if (fits_32bit(g, strides, 1)) {
      fill_kernel<T, uint32_t><<<grid, kBlockThreads, 0, stream>>>(
          OffsetCalc<1, uint32_t>(g, strides), dst.data, static_cast<uint32_t>(g.numel), v);
    } else {
      fill_kernel<T, int64_t><<<grid, kBlockThreads, 0, stream>>>(
          OffsetCalc<1, int64_t>(g, strides), dst.data, g.numel, v);
    }
    SMELT_CUDA_CHECK_LAUNCH();
  });
}

void launch_arange(void* out, DType dtype, int64_t n, int64_t start_i, int64_t step_i,
                   double start_d, double step_d, cudaStream_t stream) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    arange_kernel<T><<<grid_for(n, kBlockThreads * 4), kBlockThreads, 0, stream>>>(
        static_cast<T*>(out), n, start_i, step_i, start_d, step_d);
    SMELT_CUDA_CHECK_LAUNCH();
  });
}

void launch_linspace(void* out, DType dtype, int64_t n, double start, double end,
                     cudaStream_t stream) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    linspace_kernel<T><<<grid_for(n, kBlockThreads * 4), kBlockThreads, 0, stream>>>(
        static_cast<T*>(out), n, start, end);
    SMELT_CUDA_CHECK_LAUNCH();
  });
}

void launch_random(void* out, DType dtype, int64_t n, const RandomArgs& r, cudaStream_t stream) {
  const int64_t per_block = r.kind == 0 ? random::uniform_per_block(r.bits) : 2;
  const int64_t nblocks = (n + per_block - 1) / per_block;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    random_kernel<T><<<grid_for(nblocks, kBlockThreads), kBlockThreads, 0, stream>>>(
        static_cast<T*>(out), n, per_block, r);
    SMELT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace smelt::cuda::impl
