// Reductions on CUDA as the backend calls them (host code): the geometry of
// kernels/reduce_geom.h, flattened into kernels.h's ReduceArgs and run by the
// reduce_*.cu kernels; cumsum by scan.cu.
#pragma once
#include <vector>

#include "backend/backend.h"

namespace smelt::cuda::impl {

/// See Backend::reduce, arg_reduce, var and cumsum.
void reduce(backend::ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims,
            const Tensor& out);
void arg_reduce(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& values,
                const Tensor& indices, bool is_max);
void var(const Tensor& x, const std::vector<int64_t>& dims, double correction, bool take_sqrt,
         const Tensor& var, const Tensor& mean);
void cumsum(const Tensor& x, int64_t dim, const Tensor& out);

}  // namespace smelt::cuda::impl
