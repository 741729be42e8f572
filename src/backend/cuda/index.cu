// CUDA indexing kernels (index_select, gather, embedding rows, index_copy,
// tril / triu): they move elements as raw bytes of the element size, so one
// instantiation per size serves every dtype; scatter_add, which adds, has one
// per dtype (scalar::add, as the CPU). Indices are in range (the ops check
// them before launching).
#include "backend/cuda/kernels.h"
#include "backend/cuda/loops.cuh"

namespace smelt::cuda::impl {

namespace {

template <class E, class index_t>
__global__ void __launch_bounds__(kBlockThreads)
    gather_kernel(const GatherArgs a, const OffsetCalc<2, index_t> calc) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < a.geom.numel;
       e += step) {
    index_t off[2];
    calc.get(static_cast<index_t>(e), off);
    const int64_t k = a.select ? reinterpret_cast<const int64_t*>(a.index)[(e / a.inner) % a.n]
                               : load_as<int64_t>(a.index + off[1], a.index_dtype);
    if (static_cast<uint64_t>(k) >= static_cast<uint64_t>(a.size)) {
      *a.error_flag = a.error_code;  // raised at the next synchronization
      continue;
    }
    reinterpret_cast<E*>(a.out)[e] =
        *reinterpret_cast<const E*>(a.x + static_cast<int64_t>(off[0]) + k * a.x_dim_stride);
  }
}

template <class E>
__global__ void __launch_bounds__(kBlockThreads)
    index_copy_kernel(E* out, const E* src, const int64_t* index, int64_t n, int64_t row) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t j = e / row;
    out[index[j] * row + (e - j * row)] = src[e];
  }
}

template <class E>
__global__ void __launch_bounds__(kBlockThreads)
    triangle_kernel(E* out, int64_t n, int64_t rows, int64_t cols, int64_t diagonal, bool lower) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t j = e % cols, i = (e / cols) % rows;
    const bool keep = lower ? j - i <= diagonal : j - i >= diagonal;
    if (!keep) out[e] = E(0);
  }
}

template <class T, class index_t>
__global__ void __launch_bounds__(kBlockThreads)
    scatter_add_kernel(const ScatterAddArgs a, const OffsetCalc<3, index_t> calc) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t l = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; l < a.lines.numel;
       l += step) {
    index_t off[3];
    calc.get(static_cast<index_t>(l), off);
    char* out = a.out + static_cast<int64_t>(off[0]);
    const char* src = a.src + static_cast<int64_t>(off[1]);
    const char* index = a.index + static_cast<int64_t>(off[2]);
    for (int64_t j = 0; j < a.len; ++j) {
      const int64_t k = load_as<int64_t>(index + j * a.index_dim_stride, a.index_dtype);
      if (static_cast<uint64_t>(k) >= static_cast<uint64_t>(a.size)) {
        *a.error_flag = a.error_code;  // raised at the next synchronization
        continue;
      }
      T& d = *reinterpret_cast<T*>(out + k * a.out_dim_stride);
      d = scalar::add<T>(d, *reinterpret_cast<const T*>(src + j * a.src_dim_stride));
    }
  }
}

template <class G>
void by_size(int elem, const G& g) {
  switch (elem) {
    case 1:
      return g(TypeTag<uint8_t>{});
    case 2:
      return g(TypeTag<uint16_t>{});
    case 4:
      return g(TypeTag<uint32_t>{});
    default:
      return g(TypeTag<uint64_t>{});
  }
}

}  // namespace

void launch_gather(const GatherArgs& a) {
  if (a.geom.numel == 0) return;
  const int64_t* strides[2] = {a.x_strides, a.index_strides};
  const bool small = fits_32bit(a.geom, strides, 2);
  by_size(a.elem, [&](auto tag) {
    using E = typename decltype(tag)::type;
    const unsigned grid = grid_for(a.geom.numel, kBlockThreads * 4);
    if (small) {
      gather_kernel<E, uint32_t>
          <<<grid, kBlockThreads, 0, a.stream>>>(a, OffsetCalc<2, uint32_t>(a.geom, strides));
    } else {
      gather_kernel<E, int64_t>
          <<<grid, kBlockThreads, 0, a.stream>>>(a, OffsetCalc<2, int64_t>(a.geom, strides));
    }
    SMELT_CUDA_CHECK_LAUNCH();
  });
}

void launch_scatter_add(const ScatterAddArgs& a) {
  if (a.lines.numel == 0 || a.len == 0) return;
  const int64_t* strides[3] = {a.out_strides, a.src_strides, a.index_strides};
  const bool small = fits_32bit(a.lines, strides, 3);
  dispatch_dtype(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const unsigned grid = grid_for(a.lines.numel, kBlockThreads);
    if (small) {
      scatter_add_kernel<T, uint32_t>
          <<<grid, kBlockThreads, 0, a.stream>>>(a, OffsetCalc<3, uint32_t>(a.lines, strides));
    } else {
      scatter_add_kernel<T, int64_t>
          <<<grid, kBlockThreads, 0, a.stream>>>(a, OffsetCalc<3, int64_t>(a.lines, strides));
    }
    SMELT_CUDA_CHECK_LAUNCH();
  });
}

void launch_index_copy(char* out, const char* src, const int64_t* index, int64_t rows,
                       int64_t row_bytes, int elem, cudaStream_t stream) {
  const int64_t row = row_bytes / elem, n = rows * row;
  if (n == 0) return;
  by_size(elem, [&](auto tag) {
    using E = typename decltype(tag)::type;
    index_copy_kernel<E><<<grid_for(n, kBlockThreads * 4), kBlockThreads, 0, stream>>>(
        reinterpret_cast<E*>(out), reinterpret_cast<const E*>(src), index, n, row);
    SMELT_CUDA_CHECK_LAUNCH();
  });
}

void launch_triangle_zero(char* out, int64_t numel, int64_t rows, int64_t cols, int64_t diagonal,
                          bool lower, int elem, cudaStream_t stream) {
  if (numel == 0) return;
  by_size(elem, [&](auto tag) {
    using E = typename decltype(tag)::type;
    triangle_kernel<E><<<grid_for(numel, kBlockThreads * 4), kBlockThreads, 0, stream>>>(
        reinterpret_cast<E*>(out), numel, rows, cols, diagonal, lower);
    SMELT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace smelt::cuda::impl
