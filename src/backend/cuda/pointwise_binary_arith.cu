// CUDA kernels of the binary arithmetic functors
// (SMELT_PW_BINARY_ARITH of kernels/pointwise_list.h; see pointwise.cuh).
#include "backend/cuda/pointwise.cuh"

namespace smelt::cuda::impl::pw {

namespace {
SMELT_PW_BINARY_ARITH(SMELT_CUDA_PW_FUNCTOR)
}  // namespace

PointwiseTable binary_arith_kernels() { return {SMELT_PW_BINARY_ARITH(SMELT_CUDA_PW_ROW)}; }

}  // namespace smelt::cuda::impl::pw
