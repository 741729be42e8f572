// The multi-tensor optimizer steps (optimizer_step.h).
#include "ops/optimizer_step.h"

#include <cmath>
#include <utility>

#include "backend/backend.h"
#include "core/tensor_impl.h"

namespace smelt::detail {

namespace {

/// Checks that lists[k][i] fit params[i] (each list empty or one tensor per param).
void check_lists(const char* op, const std::vector<Tensor>& params,
                 const std::vector<const std::vector<Tensor>*>& lists) {
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    SMELT_CHECK(p.defined() && is_floating(p.dtype()),
                "{}: parameter {} must be a defined floating tensor", op, i);
    SMELT_CHECK(p.is_contiguous(),
                "{}: parameter {} (shape {}, strides {}) is not contiguous; optimizers update "
                "contiguous parameters (make it with .contiguous() before building the optimizer)",
                op, i, shape_str(p.sizes()), shape_str(p.strides()));
    for (const auto* l : lists) {
      if (l->empty()) continue;
      SMELT_INTERNAL_ASSERT(l->size() == params.size(), "{}: list of {} tensors for {} params", op,
                            l->size(), params.size());
      const Tensor& t = (*l)[i];
      SMELT_CHECK(t.defined() && t.sizes() == p.sizes() && t.dtype() == p.dtype() &&
                      t.device() == p.device() && t.is_contiguous(),
                  "{}: the gradient or state of parameter {} ({} {}) must be a contiguous {} "
                  "tensor of shape {} on {}",
                  op, i, t.defined() ? dtype_name(t.dtype()) : "undefined",
                  t.defined() ? shape_str(t.sizes()) : "", dtype_name(p.dtype()),
                  shape_str(p.sizes()), p.device().str());
    }
  }
}

/// The indices of params grouped by (device, dtype), in first-seen order.
std::vector<std::vector<size_t>> groups_of(const std::vector<Tensor>& params) {
  std::vector<std::vector<size_t>> groups;
  std::vector<std::pair<Device, DType>> keys;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::pair<Device, DType> k{params[i].device(), params[i].dtype()};
    size_t g = 0;
    while (g < keys.size() && !(keys[g].first == k.first && keys[g].second == k.second)) ++g;
    if (g == keys.size()) {
      keys.push_back(k);
      groups.emplace_back();
    }
    groups[g].push_back(i);
  }
  return groups;
}

std::vector<Tensor> pick(const std::vector<Tensor>& l, const std::vector<size_t>& idx) {
  std::vector<Tensor> out;
  if (l.empty()) return out;
  for (size_t i : idx) out.push_back(l[i]);
  return out;
}

void bump(const std::vector<Tensor>& l) {
  for (const auto& t : l) t.storage()->bump_version();
}

std::vector<Tensor> concat(std::initializer_list<const std::vector<Tensor>*> lists) {
  std::vector<Tensor> all;
  for (const auto* l : lists) all.insert(all.end(), l->begin(), l->end());
  return all;
}

/// True while smelt::compile traces the step (its tensors are tracers, or real
/// tensors the trace reads at every call).
bool traced(const std::vector<Tensor>& all) {
  TraceContext* ctx = trace_context();
  return ctx && (any_tracer(all) || ctx->captures(all));
}

/// Records multi-tensor op `op` over `written` (updated in place) and `read`;
/// `written` then hold its results (written back at the end of the graph's
/// run, or updated in place by the step: MemoryPlan::in_place).
void record_step(const std::string& op, const std::vector<Tensor>& written,
                 const std::vector<Tensor>& read, const Attrs& attrs) {
  std::vector<OutMeta> outs;
  for (const auto& t : written) outs.push_back({t.sizes(), t.dtype(), t.device()});
  std::vector<Tensor> inputs = written;
  inputs.insert(inputs.end(), read.begin(), read.end());
  std::vector<Tensor> results = trace_context()->record(op, inputs, attrs, outs);
  for (size_t k = 0; k < written.size(); ++k) {
    trace_context()->record_assign(written[k], results[k]);
    written[k].storage()->bump_version();
  }
}

Attrs sgd_attrs(const optim_ops::SgdHyper& h, size_t n) {
  return {{"n", static_cast<int64_t>(n)},   {"lr", h.lr},
          {"momentum", h.momentum},         {"dampening", h.dampening},
          {"weight_decay", h.weight_decay}, {"nesterov", h.nesterov},
          {"maximize", h.maximize},         {"first_step", h.first_step}};
}

optim_ops::SgdHyper sgd_hyper(const Attrs& a) {
  optim_ops::SgdHyper h;
  h.lr = a.as<double>("lr");
  h.momentum = a.as<double>("momentum");
  h.dampening = a.as<double>("dampening");
  h.weight_decay = a.as<double>("weight_decay");
  h.nesterov = a.as<bool>("nesterov");
  h.maximize = a.as<bool>("maximize");
  h.first_step = a.as<bool>("first_step");
  return h;
}

Attrs adam_attrs(const optim_ops::AdamHyper& h, size_t n) {
  return {{"n", static_cast<int64_t>(n)},
          {"lr", h.lr},
          {"beta1", h.beta1},
          {"beta2", h.beta2},
          {"eps", h.eps},
          {"weight_decay", h.weight_decay},
          {"amsgrad", h.amsgrad},
          {"maximize", h.maximize},
          {"decoupled_weight_decay", h.decoupled_weight_decay}};
}

optim_ops::AdamHyper adam_hyper(const Attrs& a) {
  optim_ops::AdamHyper h;
  h.lr = a.as<double>("lr");
  h.beta1 = a.as<double>("beta1");
  h.beta2 = a.as<double>("beta2");
  h.eps = a.as<double>("eps");
  h.weight_decay = a.as<double>("weight_decay");
  h.amsgrad = a.as<bool>("amsgrad");
  h.maximize = a.as<bool>("maximize");
  h.decoupled_weight_decay = a.as<bool>("decoupled_weight_decay");
  return h;
}

/// Splits a node's inputs into `counts` consecutive lists.
std::vector<std::vector<Tensor>> split(const char* op, const std::vector<Tensor>& inputs,
                                       const std::vector<size_t>& counts) {
  size_t total = 0;
  for (size_t c : counts) total += c;
  SMELT_CHECK(inputs.size() == total, "{}: expected {} tensors, got {}", op, total, inputs.size());
  std::vector<std::vector<Tensor>> lists;
  size_t at = 0;
  for (size_t c : counts) {
    lists.emplace_back(inputs.begin() + static_cast<int64_t>(at),
                       inputs.begin() + static_cast<int64_t>(at + c));
    at += c;
  }
  return lists;
}

}  // namespace

void sgd_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& momentum_buffers, const optim_ops::SgdHyper& hyper) {
  check_lists("SGD.step", params, {&grads, &momentum_buffers});
  if (traced(concat({&params, &grads, &momentum_buffers}))) {
    record_step("_fused_sgd_", concat({&params, &momentum_buffers}), grads,
                sgd_attrs(hyper, params.size()));
    return;
  }
  for (const auto& g : groups_of(params)) {
    const auto p = pick(params, g);
    backend::backend(p[0].device()).sgd_step(p, pick(grads, g), pick(momentum_buffers, g), hyper);
  }
  bump(params);
  bump(momentum_buffers);
}

void adam_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<Tensor>& steps,
                const optim_ops::AdamHyper& hyper) {
  check_lists("Adam.step", params, {&grads, &exp_avgs, &exp_avg_sqs, &max_exp_avg_sqs});
  SMELT_INTERNAL_ASSERT(steps.size() == params.size(), "Adam.step: {} step counts for {}",
                        steps.size(), params.size());
  if (traced(concat({&params, &grads, &exp_avgs, &exp_avg_sqs, &max_exp_avg_sqs, &steps}))) {
    record_step("_fused_adam_", concat({&params, &exp_avgs, &exp_avg_sqs, &max_exp_avg_sqs}),
                concat({&grads, &steps}), adam_attrs(hyper, params.size()));
    return;
  }
  std::vector<optim_ops::AdamHyper> per_param;
  for (const Tensor& s : steps) {
    // torch/optim/adam.py: bias corrections from the step count, in Python floats.
    const double step = s.item<double>();
    optim_ops::AdamHyper h = hyper;
    h.step_size = hyper.lr / (1 - std::pow(hyper.beta1, step));
    h.bias_correction2_sqrt = std::sqrt(1 - std::pow(hyper.beta2, step));
    per_param.push_back(h);
  }
  for (const auto& g : groups_of(params)) {
    const auto p = pick(params, g);
    std::vector<optim_ops::AdamHyper> h;
    for (size_t i : g) h.push_back(per_param[i]);
    backend::backend(p[0].device())
        .adam_step(p, pick(grads, g), pick(exp_avgs, g), pick(exp_avg_sqs, g),
                   pick(max_exp_avg_sqs, g), h);
  }
  bump(params);
  bump(exp_avgs);
  bump(exp_avg_sqs);
  bump(max_exp_avg_sqs);
}

std::vector<Tensor> fused_sgd_(const std::vector<Tensor>& inputs, const Attrs& attrs) {
  const auto n = static_cast<size_t>(attrs.as<int64_t>("n"));
  const optim_ops::SgdHyper h = sgd_hyper(attrs);
  const size_t bufs = h.momentum != 0 ? n : 0;
  auto l = split("_fused_sgd_", inputs, {n, bufs, n});
  sgd_step_(l[0], l[2], l[1], h);
  return concat({&l[0], &l[1]});
}

std::vector<Tensor> fused_adam_(const std::vector<Tensor>& inputs, const Attrs& attrs) {
  const auto n = static_cast<size_t>(attrs.as<int64_t>("n"));
  const optim_ops::AdamHyper h = adam_hyper(attrs);
  auto l = split("_fused_adam_", inputs, {n, n, n, h.amsgrad ? n : 0, n, n});
  adam_step_(l[0], l[4], l[1], l[2], l[3], l[5], h);
  return concat({&l[0], &l[1], &l[2], &l[3]});
}

}  // namespace smelt::detail
