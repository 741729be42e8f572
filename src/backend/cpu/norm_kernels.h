// Fused eager CPU kernels of composite ops over contiguous rows: softmax,
// log_softmax, layer_norm and batch_norm's normalization, one pass over each
// row's cached data instead of one kernel per primitive of the decomposition
// (src/ops/decompositions.cpp).
// They compute exactly the decomposition's values: the same scalar functors
// (src/kernels/scalar_ops.h) in the same order, and the row reductions (max,
// sum, Welford var_mean) through the same InnerOrder (src/kernels/reduce_ops.h)
// eager's reduction kernels use. Built once per CPU capability (capability.h);
// the CPU backend checks the cases they take (see Backend::fused_softmax).
#pragma once
#include <cstdint>

#include "backend/cpu/capability.h"
#include "core/tensor_impl.h"

namespace smelt::cpu {

/// softmax (log = false) or log_softmax over the last dim: x, out contiguous
/// float32 or float64 of one shape, rows of at least one element.
using SoftmaxRowsFn = void (*)(const Tensor& x, bool log, const Tensor& out);
SMELT_DECLARE_DISPATCH(SoftmaxRowsFn, softmax_rows_stub);

/// layer_norm over rows of n elements (x, out contiguous, float32 or float64;
/// weight, bias undefined or contiguous [n] of x's dtype).
using LayerNormRowsFn = void (*)(const Tensor& x, int64_t n, const Tensor& weight,
                                 const Tensor& bias, double eps, const Tensor& out);
SMELT_DECLARE_DISPATCH(LayerNormRowsFn, layer_norm_rows_stub);

/// batch_norm's normalization (Backend::fused_batch_norm_apply) of x [N, C,
/// ...] (contiguous float32 or float64, at least 3-D) into out (x's shape):
/// (x - mean[c]) * rsqrt(var[c] + eps) [* weight[c]] [+ bias[c]], each op
/// rounded in x's dtype as the decomposition's; mean, var, weight and bias
/// contiguous [C] of x's dtype (weight, bias may be undefined).
using BatchNormApplyFn = void (*)(const Tensor& x, const Tensor& mean, const Tensor& var,
                                  const Tensor& weight, const Tensor& bias, double eps,
                                  const Tensor& out);
SMELT_DECLARE_DISPATCH(BatchNormApplyFn, batch_norm_apply_stub);

}  // namespace smelt::cpu
