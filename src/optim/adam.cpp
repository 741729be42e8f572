// optim::Adam and optim::AdamW (torch.optim.Adam / AdamW): per-parameter step
// counts, then one multi-tensor step per group through detail::adam_step_
// (which derives the bias corrections from the step counts; the element update
// is optim_ops::adam).
#include "ops/optimizer_step.h"
#include "smelt/autograd.h"
#include "smelt/ops.h"
#include "smelt/optim.h"

namespace smelt::optim {

namespace {
std::vector<std::pair<std::string, double>> adam_options(const char* kind, const AdamOptions& o,
                                                         bool decoupled) {
  const auto [beta1, beta2] = o.betas();
  SMELT_CHECK(o.eps() >= 0, "{}: Invalid epsilon value: {}", kind, o.eps());
  SMELT_CHECK(beta1 >= 0 && beta1 < 1, "{}: Invalid beta parameter at index 0: {}", kind, beta1);
  SMELT_CHECK(beta2 >= 0 && beta2 < 1, "{}: Invalid beta parameter at index 1: {}", kind, beta2);
  SMELT_CHECK(o.weight_decay() >= 0, "{}: Invalid weight_decay value: {}", kind, o.weight_decay());
  return {{"lr", o.lr()},
          {"beta1", beta1},
          {"beta2", beta2},
          {"eps", o.eps()},
          {"weight_decay", o.weight_decay()},
          {"amsgrad", o.amsgrad() ? 1.0 : 0.0},
          {"maximize", o.maximize() ? 1.0 : 0.0},
          {"decoupled_weight_decay", decoupled ? 1.0 : 0.0}};
}

AdamOptions from_adamw(const AdamWOptions& o) {
  return AdamOptions(o.lr())
      .betas(o.betas())
      .eps(o.eps())
      .weight_decay(o.weight_decay())
      .amsgrad(o.amsgrad())
      .maximize(o.maximize());
}
}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions options) : Optimizer("Adam") {
  add_group_options(std::move(params), options, false);
}

Adam::Adam(std::string kind, std::vector<Tensor> params, const AdamOptions& options, bool decoupled)
    : Optimizer(std::move(kind)) {
  add_group_options(std::move(params), options, decoupled);
}

void Adam::add_param_group(std::vector<Tensor> params, AdamOptions options) {
  add_group_options(std::move(params), options, false);
}

void Adam::add_group_options(std::vector<Tensor> params, const AdamOptions& options,
                             bool decoupled) {
  add_group(std::move(params), adam_options(decoupled ? "AdamW" : "Adam", options, decoupled));
}

void Adam::step() {
  NoGradGuard no_grad;
  guard_trace();
  for (size_t g = 0; g < num_param_groups(); ++g) {
    optim_ops::AdamHyper base;
    base.lr = option(g, "lr");
    base.beta1 = option(g, "beta1");
    base.beta2 = option(g, "beta2");
    base.eps = option(g, "eps");
    base.weight_decay = option(g, "weight_decay");
    base.amsgrad = option(g, "amsgrad") != 0;
    base.maximize = option(g, "maximize") != 0;
    base.decoupled_weight_decay = option(g, "decoupled_weight_decay") != 0;
    std::vector<Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
    for (const Tensor& p : params_with_grad(g)) {
      auto& s = state_of(p);
      if (!s.count("step")) {
        // PyTorch's initial state: step 0 (a float32 scalar), zero moments.
        s["step"] = zeros({}, TensorOptions(DType::Float32));
        s["exp_avg"] = zeros_like(p);
        s["exp_avg_sq"] = zeros_like(p);
        if (base.amsgrad) s["max_exp_avg_sq"] = zeros_like(p);
      }
      s["step"].add_(1.0);
      params.push_back(p);
      grads.push_back(p.grad().contiguous());
      exp_avgs.push_back(s["exp_avg"]);
      exp_avg_sqs.push_back(s["exp_avg_sq"]);
      if (base.amsgrad) {
        Tensor& m = s["max_exp_avg_sq"];
        if (!m.defined()) m = zeros_like(p);  // amsgrad turned on after loading a state
        max_exp_avg_sqs.push_back(m);
      }
      steps.push_back(s["step"]);
    }
    if (!params.empty())
      detail::adam_step_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, base);
  }
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : Adam("AdamW", std::move(params), from_adamw(options), true) {}

void AdamW::add_param_group(std::vector<Tensor> params, AdamWOptions options) {
  add_group_options(std::move(params), from_adamw(options), true);
}

}  // namespace smelt::optim
