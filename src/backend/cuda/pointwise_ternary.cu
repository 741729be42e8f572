// CUDA kernels of the clamp, where and lerp functors
// (SMELT_PW_TERNARY of kernels/pointwise_list.h; see pointwise.cuh).
#include "backend/cuda/pointwise.cuh"

namespace smelt::cuda::impl::pw {

namespace {
SMELT_PW_TERNARY(SMELT_CUDA_PW_FUNCTOR)
}  // namespace

PointwiseTable ternary_kernels() { return {SMELT_PW_TERNARY(SMELT_CUDA_PW_ROW)}; }

}  // namespace smelt::cuda::impl::pw
