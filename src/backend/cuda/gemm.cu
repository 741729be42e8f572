// The CUDA GEMM helpers around cuBLAS (blas.cpp): the integer product cuBLAS
// does not have, the fused epilogue (the formula of kernels/gemm_epilogue.h)
// and the packing of operands cuBLAS cannot read in place.
#include "backend/cuda/kernels.h"
#include "backend/cuda/loops.cuh"
#include "kernels/gemm_epilogue.h"

namespace smelt::cuda::impl {

namespace {

/// One thread per output element; k accumulated in uint64 (wrapping).
template <class T>
__global__ void __launch_bounds__(kBlockThreads)
    gemm_int_kernel(int64_t batch, int64_t m, int64_t n, int64_t k, MatArg a, MatArg b, T* c,
                    int64_t cbs, int64_t crs, int64_t ccs, uint64_t alpha) {
  const int64_t total = batch * m * n;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const T* ap = static_cast<const T*>(a.data);
  const T* bp = static_cast<const T*>(b.data);
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t j = e % n, i = (e / n) % m, bi = e / (m * n);
    const T* ar = ap + bi * a.bs + i * a.rs;
    const T* bc = bp + bi * b.bs + j * b.cs;
    uint64_t acc = 0;
    for (int64_t p = 0; p < k; ++p)
      acc += static_cast<uint64_t>(static_cast<int64_t>(ar[p * a.cs])) *
             static_cast<uint64_t>(static_cast<int64_t>(bc[p * b.rs]));
    c[bi * cbs + i * crs + j * ccs] = static_cast<T>(acc * alpha);
  }
}

/// C = act(src + bias) + residual over batch * m rows of n columns. A block's
/// threads cover `cols` consecutive columns (a power of two from 32 to
/// kBlockThreads) of kBlockThreads / cols rows at a time, so that a row's
/// batch and row index are divided out once per row instead of once per
/// element: three 64-bit divisions per element made the erf-GELU epilogue of
/// MiniLM's float32 FFN (4096 x 1536) about 54 us, half again cuBLAS's product.
template <class T, class Acc>
__global__ void __launch_bounds__(kBlockThreads)
    epilogue_kernel(int64_t batch, int64_t m, int64_t n, int cols, const float* src, T* c,
                    int64_t cbs, int64_t crs, int64_t ccs, const T* bias, EpilogueActivation act,
                    const T* res, int64_t rbs, int64_t rrs, int64_t rcs) {
  const int lane = static_cast<int>(threadIdx.x) % cols;
  const int rows_per_block = kBlockThreads / cols;
  const int64_t rows = batch * m;
  const int64_t step = static_cast<int64_t>(gridDim.x) * rows_per_block;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * rows_per_block + threadIdx.x / cols; r < rows;
       r += step) {
    const int64_t bi = r / m, i = r - bi * m;
    T* c_row = c + bi * cbs + i * crs;
    const float* src_row = src ? src + r * n : nullptr;
    const T* res_row = res ? res + bi * rbs + i * rrs : nullptr;
    for (int64_t j = lane; j < n; j += cols) {
      T& out = c_row[j * ccs];
      const Acc v = src_row ? static_cast<Acc>(src_row[j]) : static_cast<Acc>(out);
      out = static_cast<T>(apply_epilogue<Acc>(v, bias ? bias + j : nullptr, act,
                                               res_row ? res_row + j * rcs : nullptr));
    }
  }
}

template <class E>
__global__ void __launch_bounds__(kBlockThreads)
    matrix_copy_kernel(E* dst, int64_t dbs, int64_t drs, int64_t dcs, const E* src, int64_t bs,
                       int64_t rs, int64_t cs, int64_t rows, int64_t cols, int64_t total) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t j = e % cols, i = (e / cols) % rows, bi = e / (rows * cols);
    dst[bi * dbs + i * drs + j * dcs] = src[bi * bs + i * rs + j * cs];
  }
}

}  // namespace

void launch_gemm_int(DType dtype, int64_t batch, int64_t m, int64_t n, int64_t k, MatArg a,
                     MatArg b, void* c, int64_t cbs, int64_t crs, int64_t ccs, int64_t alpha,
                     cudaStream_t stream) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      gemm_int_kernel<T><<<grid_for(batch * m * n, kBlockThreads), kBlockThreads, 0, stream>>>(
          batch, m, n, k, a, b, static_cast<T*>(c), cbs, crs, ccs, static_cast<uint64_t>(alpha));
      SMELT_CUDA_CHECK_LAUNCH();
    }
  });
}

void launch_gemm_epilogue(DType dtype, int64_t batch, int64_t m, int64_t n, const float* src,
                          void* c, int64_t cbs, int64_t crs, int64_t ccs, const void* bias,
                          int activation, const void* residual, int64_t rbs, int64_t rrs,
                          int64_t rcs, cudaStream_t stream) {
  const auto act = static_cast<EpilogueActivation>(activation);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) {
      using Acc = std::conditional_t<scalar::is_half_v<T>, float,
                                     std::conditional_t<std::is_integral_v<T>, int64_t, T>>;
      int cols = 32;
      while (cols < kBlockThreads && cols < n) cols *= 2;
      // About two row groups per block.
      epilogue_kernel<T, Acc>
          <<<grid_for(batch * m, 2 * (kBlockThreads / cols)), kBlockThreads, 0, stream>>>(
              batch, m, n, cols, src, static_cast<T*>(c), cbs, crs, ccs,
              static_cast<const T*>(bias), act, static_cast<const T*>(residual), rbs, rrs, rcs);
      SMELT_CUDA_CHECK_LAUNCH();
    }
  });
}

void launch_matrix_copy(void* dst, int64_t dbs, int64_t drs, int64_t dcs, MatArg src, int64_t batch,
                        int64_t rows, int64_t cols, int elem, cudaStream_t stream) {
  const int64_t total = batch * rows * cols;
  if (total == 0) return;
  auto go = [&](auto tag) {
    using E = typename decltype(tag)::type;
    matrix_copy_kernel<E><<<grid_for(total, kBlockThreads * 4), kBlockThreads, 0, stream>>>(
        static_cast<E*>(dst), dbs, drs, dcs, static_cast<const E*>(src.data), src.bs, src.rs,
        src.cs, rows, cols, total);
    SMELT_CUDA_CHECK_LAUNCH();
  };
  switch (elem) {
    case 1:
      return go(TypeTag<uint8_t>{});
    case 2:
      return go(TypeTag<uint16_t>{});
    case 4:
      return go(TypeTag<uint32_t>{});
    default:
      return go(TypeTag<uint64_t>{});
  }
}

}  // namespace smelt::cuda::impl
