// smelt/optim.h — optimizers and learning-rate schedulers with PyTorch's update
// formulas and defaults (torch.optim) and libtorch's API.
//
//   auto model = smelt::nn::Linear(4, 2);
//   smelt::optim::SGD opt(model->parameters(), smelt::optim::SGDOptions(0.1).momentum(0.9));
//   smelt::optim::StepLR sched(opt, /*step_size=*/30, /*gamma=*/0.1);
//   for (...) {
//     opt.zero_grad();
//     smelt::Tensor loss = smelt::cross_entropy(model(x), y);
//     loss.backward();
//     opt.step();   // runs with grad mode off
//   }
//   sched.step();   // once per epoch
//
// step() updates every parameter that has a gradient (parameters whose .grad()
// is undefined are skipped, as in PyTorch) with one multi-tensor kernel per
// group of parameters of one device and dtype (PyTorch's foreach path): the
// element update of each optimizer is written once, in src/kernels/optim_ops.h,
// and follows PyTorch's single-tensor implementation operation by operation.
// Parameters must be contiguous floating tensors; the optimizer keeps its state
// (momentum buffers, Adam's moments and step counts) per parameter.
//
// Compiled training: a step() called inside a function given to smelt::compile
// is traced into the graph as one multi-tensor node (see smelt/compile.h); the
// graph is guarded on the options (a new learning rate recompiles, as a Python
// float lr does under torch.compile) and on which state tensors exist.
//
// state_dict() flattens PyTorch's optimizer state_dict into named tensors, so it
// saves with save_safetensors: "state.<i>.<name>" for parameter i (counted over
// all groups in order; names as PyTorch's: momentum_buffer, step, exp_avg,
// exp_avg_sq, max_exp_avg_sq) and "param_groups.<g>.<option>" (0-dim float64:
// lr, momentum, betas as beta1/beta2, ...). load_state_dict() restores an
// optimizer built over parameters of the same shapes.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "smelt/nn/module.h"
#include "smelt/tensor.h"

/// A fluent option as libtorch's TORCH_ARG: `opts.momentum(0.9)` sets it and
/// returns the options, `opts.momentum()` reads it; `= value` after the macro
/// gives its default.
#define SMELT_OPTIM_ARG(T, name)            \
 public:                                    \
  auto& name(const T& new_value) {          \
    name##_ = new_value;                    \
    return *this;                           \
  }                                         \
  const T& name() const { return name##_; } \
                                            \
 private:                                   \
  T name##_

namespace smelt::optim {

/// Adam's (beta1, beta2).
using Betas = std::pair<double, double>;

/// torch.optim.SGD's options (its defaults: lr 1e-3, everything else off).
struct SGDOptions {
  explicit SGDOptions(double lr = 1e-3) : lr_(lr) {}
  SMELT_OPTIM_ARG(double, lr);
  SMELT_OPTIM_ARG(double, momentum) = 0;
  SMELT_OPTIM_ARG(double, dampening) = 0;
  SMELT_OPTIM_ARG(double, weight_decay) = 0;
  /// Nesterov momentum (needs momentum > 0 and dampening 0).
  SMELT_OPTIM_ARG(bool, nesterov) = false;
  /// Maximize the objective (ascend the gradient).
  SMELT_OPTIM_ARG(bool, maximize) = false;
};

/// torch.optim.Adam's options (lr 1e-3, betas (0.9, 0.999), eps 1e-8, no weight
/// decay, which is added to the gradient: L2, not decoupled).
struct AdamOptions {
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  SMELT_OPTIM_ARG(double, lr);
  SMELT_OPTIM_ARG(Betas, betas) = {0.9, 0.999};
  SMELT_OPTIM_ARG(double, eps) = 1e-8;
  SMELT_OPTIM_ARG(double, weight_decay) = 0;
  /// AMSGrad: the running maximum of the second moment in the denominator.
  SMELT_OPTIM_ARG(bool, amsgrad) = false;
  SMELT_OPTIM_ARG(bool, maximize) = false;
};

/// torch.optim.AdamW's options: Adam's, with decoupled weight decay (default 1e-2):
/// the parameter is multiplied by 1 - lr * weight_decay before each update.
struct AdamWOptions {
  explicit AdamWOptions(double lr = 1e-3) : lr_(lr) {}
  SMELT_OPTIM_ARG(double, lr);
  SMELT_OPTIM_ARG(Betas, betas) = {0.9, 0.999};
  SMELT_OPTIM_ARG(double, eps) = 1e-8;
  SMELT_OPTIM_ARG(double, weight_decay) = 1e-2;
  SMELT_OPTIM_ARG(bool, amsgrad) = false;
  SMELT_OPTIM_ARG(bool, maximize) = false;
};

/// What every optimizer shares: parameter groups (each with its own options),
/// per-parameter state, zero_grad, learning rates for schedulers, state dicts.
class Optimizer {
 public:
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter that has a gradient, with grad mode off.
  /// Error for a parameter that is not a contiguous floating tensor, or whose
  /// gradient does not match it.
  virtual void step() = 0;

  /// Resets every parameter's gradient: to undefined (set_to_none, PyTorch 2's
  /// default), else to zeros in place.
  void zero_grad(bool set_to_none = true);

  size_t num_param_groups() const { return groups_.size(); }
  /// The parameters of group `g`.
  const std::vector<Tensor>& params(size_t g = 0) const;
  /// Every parameter, group by group (the numbering of state_dict()).
  std::vector<Tensor> parameters() const;
  /// Learning rate of group `g` (what schedulers read and set).
  double lr(size_t g = 0) const;
  void set_lr(double lr, size_t g);

  /// The state (see the header comment); tensors are copies.
  nn::StateDict state_dict() const;
  /// Restores a state_dict() of an optimizer of the same kind over parameters of
  /// the same shapes, group sizes and options. Error naming the key otherwise.
  void load_state_dict(const nn::StateDict& state);

  /// The state of parameter `p` by name ("momentum_buffer", "exp_avg", "step"...);
  /// an undefined Tensor when it has none yet.
  Tensor state(const Tensor& p, const std::string& name) const;

 protected:
  /// `kind` names the optimizer in errors and state dicts ("SGD", "Adam", "AdamW").
  explicit Optimizer(std::string kind);
  /// Adds a group with its options as (name, value) pairs (lr first).
  void add_group(std::vector<Tensor> params, std::vector<std::pair<std::string, double>> options);
  /// Option `name` of group `g`.
  double option(size_t g, const std::string& name) const;
  /// The parameters of group `g` that have a gradient.
  std::vector<Tensor> params_with_grad(size_t g) const;
  /// Per-parameter state: name -> tensor, created by the optimizer on first use.
  std::map<std::string, Tensor>& state_of(const Tensor& p);
  /// Called first by step(): while smelt::compile traces it, the graph's reuse is
  /// guarded on the options and on which state tensors exist (a first step, which
  /// makes the state, and the later ones are different graphs), and state the
  /// traced step makes is dropped again if the graph is not used.
  void guard_trace();

 private:
  /// The options of every group and the identity of every parameter and state tensor.
  std::string trace_key() const;
  struct Group {
    std::vector<Tensor> params;
    std::vector<std::pair<std::string, double>> options;
  };
  std::string kind_;
  std::vector<Group> groups_;
  std::map<const TensorImpl*, std::map<std::string, Tensor>> state_;
  /// Expires with the optimizer (compiled steps hold a weak reference in their guards).
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

/// Stochastic gradient descent with momentum, dampening, Nesterov momentum and
/// weight decay (torch.optim.SGD):
///   d = g + weight_decay p;  buf = momentum buf + (1 - dampening) d (buf = d on the
///   first step);  d = nesterov ? d + momentum buf : buf;  p -= lr d.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  /// Another group with its own options.
  void add_param_group(std::vector<Tensor> params, SGDOptions options);
  void step() override;
};

/// Adam (torch.optim.Adam), and with decoupled weight decay AdamW:
///   m = lerp(m, g, 1 - beta1);  v = beta2 v + (1 - beta2) g^2;
///   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
/// (amsgrad: the running maximum of v instead of v).
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options);
  void add_param_group(std::vector<Tensor> params, AdamOptions options);
  void step() override;

 protected:
  Adam(std::string kind, std::vector<Tensor> params, const AdamOptions& options, bool decoupled);
  void add_group_options(std::vector<Tensor> params, const AdamOptions& options, bool decoupled);
};

/// AdamW (torch.optim.AdamW): Adam with decoupled weight decay.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options);
  void add_param_group(std::vector<Tensor> params, AdamWOptions options);
};

/// Sets the optimizer's learning rates once per step() (PyTorch's LRScheduler):
/// built over an optimizer, it records each group's learning rate as its base
/// (epoch 0); each step() moves to the next epoch.
class LRScheduler {
 public:
  virtual ~LRScheduler();
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;
  void step();
  /// The learning rates the latest step set (one per group).
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  /// The learning rates for last_epoch() (already advanced), from the current
  /// ones (recursive forms, as PyTorch's get_lr()).
  virtual std::vector<double> get_lr() const = 0;
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;

 private:
  std::vector<double> last_lr_;
  int64_t last_epoch_ = 0;
};

/// lr * gamma every `step_size` epochs (torch.optim.lr_scheduler.StepLR).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() const override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// Cosine annealing from the base lr down to eta_min over T_max epochs (and back
/// up over the next T_max), torch.optim.lr_scheduler.CosineAnnealingLR.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);

 protected:
  std::vector<double> get_lr() const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

}  // namespace smelt::optim
