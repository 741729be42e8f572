// The CUDA backend's multi-tensor optimizer steps (Backend::sgd_step /
// adam_step), host side: the group's tensors become tables in device memory
// (kernels.h's OptimTensor / OptimChunk) and optim.cu runs the whole group in
// one kernel launch on the current stream.
#pragma once
#include <vector>

#include "core/tensor_impl.h"
#include "kernels/optim_ops.h"

namespace smelt::cuda::impl {

/// See Backend::sgd_step.
void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_buffers, const optim_ops::SgdHyper& hyper);
/// See Backend::adam_step.
void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
               const std::vector<Tensor>& max_exp_avg_sqs,
               const std::vector<optim_ops::AdamHyper>& hyper);

}  // namespace smelt::cuda::impl
