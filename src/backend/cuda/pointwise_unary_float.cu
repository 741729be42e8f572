// CUDA kernels of the unary functors over floating compute types
// (SMELT_PW_UNARY_FLOAT of kernels/pointwise_list.h; see pointwise.cuh).
#include "backend/cuda/pointwise.cuh"

namespace smelt::cuda::impl::pw {

namespace {
SMELT_PW_UNARY_FLOAT(SMELT_CUDA_PW_FUNCTOR)
}  // namespace

PointwiseTable unary_float_kernels() { return {SMELT_PW_UNARY_FLOAT(SMELT_CUDA_PW_ROW)}; }

}  // namespace smelt::cuda::impl::pw
