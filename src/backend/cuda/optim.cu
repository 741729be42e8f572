// The CUDA multi-tensor optimizer steps (PyTorch's foreach path): one launch
// per tensor group, one block per chunk of kOptimChunk elements of one
// tensor, each element updated by the functor of kernels/optim_ops.h that the
// CPU calls too. Compiled with -fmad=false (CMakeLists.txt): no multiply-add
// is contracted, so every rounding is the CPU's and the results are bitwise
// equal to it (sqrt and division are IEEE-rounded in nvcc's default mode).
#include "backend/cuda/kernels.h"
#include "backend/cuda/loops.cuh"

namespace smelt::cuda::impl {

namespace {

/// Block size of the step kernels.
constexpr int kOptimThreads = 256;

/// Blocks for n chunks (a grid-stride loop covers the rest).
unsigned optim_grid(int64_t n_chunks) {
  return static_cast<unsigned>(n_chunks < (int64_t{1} << 20) ? n_chunks : int64_t{1} << 20);
}

template <class T, class C>
__global__ void __launch_bounds__(kOptimThreads)
    sgd_kernel(const OptimTensor* tensors, const OptimChunk* chunks, int64_t n_chunks,
               const optim_ops::SgdHyper h) {
  const bool momentum = h.momentum != 0;
  for (int64_t k = blockIdx.x; k < n_chunks; k += gridDim.x) {
    const OptimTensor t = tensors[chunks[k].tensor];
    T* p = static_cast<T*>(t.p);
    const T* g = static_cast<const T*>(t.g);
    T* buf = static_cast<T*>(t.a);
    const int64_t end = min(t.n, chunks[k].begin + kOptimChunk);
    for (int64_t e = chunks[k].begin + threadIdx.x; e < end; e += blockDim.x) {
      C pv = static_cast<C>(p[e]);
      C bv = momentum ? static_cast<C>(buf[e]) : C(0);
      optim_ops::sgd<C>(pv, static_cast<C>(g[e]), &bv, h);
      p[e] = static_cast<T>(pv);
      if (momentum) buf[e] = static_cast<T>(bv);
    }
  }
}

template <class T, class C>
__global__ void __launch_bounds__(kOptimThreads)
    adam_kernel(const OptimTensor* tensors, const OptimChunk* chunks, int64_t n_chunks,
                const optim_ops::AdamHyper* hyper) {
  for (int64_t k = blockIdx.x; k < n_chunks; k += gridDim.x) {
    const OptimTensor t = tensors[chunks[k].tensor];
    const optim_ops::AdamHyper h = hyper[chunks[k].tensor];
    T* p = static_cast<T*>(t.p);
    const T* g = static_cast<const T*>(t.g);
    T* m = static_cast<T*>(t.a);
    T* v = static_cast<T*>(t.b);
    T* vmax = static_cast<T*>(t.c);
    const int64_t end = min(t.n, chunks[k].begin + kOptimChunk);
    for (int64_t e = chunks[k].begin + threadIdx.x; e < end; e += blockDim.x) {
      C pv = static_cast<C>(p[e]), mv = static_cast<C>(m[e]), vv = static_cast<C>(v[e]);
      C xv = h.amsgrad ? static_cast<C>(vmax[e]) : C(0);
      optim_ops::adam<C>(pv, static_cast<C>(g[e]), mv, vv, &xv, h);
      p[e] = static_cast<T>(pv);
      m[e] = static_cast<T>(mv);
      v[e] = static_cast<T>(vv);
      if (h.amsgrad) vmax[e] = static_cast<T>(xv);
    }
  }
}

/// Calls f(TypeTag<T>{}, TypeTag<C>{}) for the floating dtype `dt` (T its
/// element type, C the compute type: float, double for float64).
template <class F>
void dispatch_floating(DType dt, const F& f) {
  switch (dt) {
    case DType::Float16:
      return f(TypeTag<Half>{}, TypeTag<float>{});
    case DType::BFloat16:
      return f(TypeTag<BFloat16>{}, TypeTag<float>{});
    case DType::Float32:
      return f(TypeTag<float>{}, TypeTag<float>{});
    case DType::Float64:
      return f(TypeTag<double>{}, TypeTag<double>{});
    default:
      throw_internal_error("optimizer step: non-floating dtype", __FILE__, __LINE__);
  }
}

}  // namespace

void launch_sgd_step(const OptimArgs& a, const optim_ops::SgdHyper& hyper) {
  if (a.n_chunks == 0) return;
  dispatch_floating(a.dtype, [&](auto t, auto c) {
    using T = typename decltype(t)::type;
    using C = typename decltype(c)::type;
    sgd_kernel<T, C><<<optim_grid(a.n_chunks), kOptimThreads, 0, a.stream>>>(a.tensors, a.chunks,
                                                                             a.n_chunks, hyper);
    SMELT_CUDA_CHECK_LAUNCH();
  });
}

void launch_adam_step(const OptimArgs& a, const optim_ops::AdamHyper* hyper) {
  if (a.n_chunks == 0) return;
  dispatch_floating(a.dtype, [&](auto t, auto c) {
    using T = typename decltype(t)::type;
    using C = typename decltype(c)::type;
    adam_kernel<T, C><<<optim_grid(a.n_chunks), kOptimThreads, 0, a.stream>>>(a.tensors, a.chunks,
                                                                              a.n_chunks, hyper);
    SMELT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace smelt::cuda::impl
