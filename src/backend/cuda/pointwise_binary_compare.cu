// CUDA kernels of the binary min/max, comparison, logical and bitwise functors
// (SMELT_PW_BINARY_COMPARE of kernels/pointwise_list.h; see pointwise.cuh).
#include "backend/cuda/pointwise.cuh"

namespace smelt::cuda::impl::pw {

namespace {
SMELT_PW_BINARY_COMPARE(SMELT_CUDA_PW_FUNCTOR)
}  // namespace

PointwiseTable binary_compare_kernels() { return {SMELT_PW_BINARY_COMPARE(SMELT_CUDA_PW_ROW)}; }

}  // namespace smelt::cuda::impl::pw
