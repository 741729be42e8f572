// CUDA kernels of the other unary functors
// (SMELT_PW_UNARY_OTHER of kernels/pointwise_list.h; see pointwise.cuh).
#include "backend/cuda/pointwise.cuh"

namespace smelt::cuda::impl::pw {

namespace {
SMELT_PW_UNARY_OTHER(SMELT_CUDA_PW_FUNCTOR)
}  // namespace

PointwiseTable unary_other_kernels() { return {SMELT_PW_UNARY_OTHER(SMELT_CUDA_PW_ROW)}; }

}  // namespace smelt::cuda::impl::pw
