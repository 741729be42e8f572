// The multi-tensor optimizer steps as ops (what src/optim calls; optimizers
// reach devices through ops, never a backend): validation, grouping of the
// parameters by device and dtype (one backend kernel per group, PyTorch's
// foreach path), and the version-counter bump of every tensor written.
#pragma once
#include <vector>

#include "kernels/optim_ops.h"
#include "smelt/tensor.h"

namespace smelt::detail {

/// One SGD step, in place, over params[i] with grads[i] and (momentum != 0)
/// momentum_buffers[i] (empty otherwise; made by the caller, zero-filled on the
/// first step, when hyper.first_step copies d_p into them). Error for a
/// non-floating, non-contiguous or mismatched tensor, or while tracing.
void sgd_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& momentum_buffers, const optim_ops::SgdHyper& hyper);

/// One Adam / AdamW step, in place, with hyper[i] for params[i] (its bias
/// corrections); max_exp_avg_sqs empty unless amsgrad. Errors as sgd_step_.
void adam_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                const std::vector<Tensor>& max_exp_avg_sqs,
                const std::vector<optim_ops::AdamHyper>& hyper);

}  // namespace smelt::detail
