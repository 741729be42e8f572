// The converting copy behind Backend::copy on CUDA: out = scalar::cast<To>(in)
// elementwise, with the pointwise machinery of pointwise.cuh and the identity
// functor, instantiated for every destination type To: the contiguous
// kernel when both sides have the same dtype (vectorized), a contiguous
// converting kernel when only the dtypes differ, the strided kernel (any
// strides, broadcast source) otherwise. Same-dtype contiguous copies without
// broadcasting never come here (cudaMemcpyAsync, cuda_backend.cpp).
#include "backend/cuda/kernels.h"
#include "backend/cuda/pointwise.cuh"

namespace smelt::cuda::impl {

namespace {

struct identity_functor {
  template <class C, class... A>
  __host__ __device__ static auto call(A... a) {
    return ::smelt::scalar::identity<C>(a...);
  }
};

/// out[i] = cast<To>(in[i]) for contiguous operands of different dtypes.
template <class To>
__global__ void __launch_bounds__(kBlockThreads)
    convert_contig_kernel(To* out, const char* in, DType from, int64_t elem, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    out[i] = load_as<To>(in + i * elem, from);
}

}  // namespace

void launch_copy(const PointwiseArgs& a) {
  dispatch_dtype(a.out.dtype, [&](auto tag) {
    using To = typename decltype(tag)::type;
    const Operand& in = a.in[0];
    if (!in.host && in.dtype == a.out.dtype && pw::try_contig<identity_functor, 1, 0, To>(a))
      return;
    const int64_t isz = static_cast<int64_t>(itemsize(in.dtype));
    if (!in.host && a.geom.ndim == 1 && a.out.strides[0] == static_cast<int64_t>(sizeof(To)) &&
        in.strides[0] == isz) {
      unsigned grid = grid_for(a.geom.numel, kBlockThreads * 4);
      convert_contig_kernel<To><<<grid, kBlockThreads, 0, a.stream>>>(
          reinterpret_cast<To*>(a.out.data), in.data, in.dtype, isz, a.geom.numel);
      SMELT_CUDA_CHECK_LAUNCH();
      return;
    }
    const int64_t* strides[2] = {a.out.strides, in.strides};
    if (fits_32bit(a.geom, strides, 2)) {
      pw::launch_strided<identity_functor, 1, 0, To, uint32_t>(a);
    } else {
      pw::launch_strided<identity_functor, 1, 0, To, int64_t>(a);
    }
  });
}

}  // namespace smelt::cuda::impl
