// The multi-tensor optimizer steps as ops (what src/optim calls; optimizers
// reach devices through ops, never a backend): validation, grouping of the
// parameters by device and dtype (one backend kernel per group, PyTorch's
// foreach path), and the version-counter bump of every tensor written. While
// smelt::compile traces a training step, a step is recorded as one graph node
// (_fused_sgd_ / _fused_adam_, OpDef::multi_tensor) whose results are copied
// back into the parameters and state; the compiled graph runs the node through
// the same functions, so eager and compiled steps share one implementation.
#pragma once
#include <vector>

#include "kernels/optim_ops.h"
#include "ops/dispatch.h"
#include "smelt/tensor.h"

namespace smelt::detail {

/// One SGD step, in place, over params[i] with grads[i] and (momentum != 0)
/// momentum_buffers[i] (empty otherwise; made by the caller, their contents
/// unused on the first step, when hyper.first_step copies d_p into them).
/// Error for a non-floating, non-contiguous or mismatched tensor.
void sgd_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& momentum_buffers, const optim_ops::SgdHyper& hyper);

/// One Adam / AdamW step, in place. `steps[i]` is parameter i's step count
/// (a one-element tensor, already advanced for this step), from which the bias
/// corrections of `hyper` (its step_size and bias_correction2_sqrt are
/// ignored) are computed in double, as torch.optim.Adam does:
/// step_size = lr / (1 - beta1^step), bias_correction2_sqrt = sqrt(1 - beta2^step).
/// max_exp_avg_sqs empty unless amsgrad. Errors as sgd_step_.
void adam_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<Tensor>& steps,
                const optim_ops::AdamHyper& hyper);

/// The graph nodes' form (call_op of "_fused_sgd_" / "_fused_adam_"): the
/// tensors in the node's order, updated in place; returns the updated ones
/// (the node's outputs). _fused_sgd_: params, momentum buffers (when
/// momentum != 0), grads; _fused_adam_: params, exp_avgs, exp_avg_sqs,
/// max_exp_avg_sqs (amsgrad), grads, steps. Attribute "n" counts the
/// parameters; the others are the hyperparameters by name.
std::vector<Tensor> fused_sgd_(const std::vector<Tensor>& inputs, const Attrs& attrs);
std::vector<Tensor> fused_adam_(const std::vector<Tensor>& inputs, const Attrs& attrs);

}  // namespace smelt::detail
