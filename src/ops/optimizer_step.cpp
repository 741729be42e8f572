// The multi-tensor optimizer steps (optimizer_step.h).
#include "ops/optimizer_step.h"

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
    SMELT_CHECK(!p.is_tracer(),
                "{}: optimizer steps are not captured by smelt::compile yet; step outside the "
                "compiled function",
                op);
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

}  // namespace

void sgd_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& momentum_buffers, const optim_ops::SgdHyper& hyper) {
  check_lists("SGD.step", params, {&grads, &momentum_buffers});
  for (const auto& g : groups_of(params)) {
    const auto p = pick(params, g);
    backend::backend(p[0].device()).sgd_step(p, pick(grads, g), pick(momentum_buffers, g), hyper);
  }
  bump(params);
  bump(momentum_buffers);
}

void adam_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                const std::vector<Tensor>& max_exp_avg_sqs,
                const std::vector<optim_ops::AdamHyper>& hyper) {
  check_lists("Adam.step", params, {&grads, &exp_avgs, &exp_avg_sqs, &max_exp_avg_sqs});
  SMELT_INTERNAL_ASSERT(hyper.size() == params.size(), "Adam.step: {} hyperparameters for {}",
                        hyper.size(), params.size());
  for (const auto& g : groups_of(params)) {
    const auto p = pick(params, g);
    std::vector<optim_ops::AdamHyper> h;
    for (size_t i : g) h.push_back(hyper[i]);
    backend::backend(p[0].device())
        .adam_step(p, pick(grads, g), pick(exp_avgs, g), pick(exp_avg_sqs, g),
                   pick(max_exp_avg_sqs, g), h);
  }
  bump(params);
  bump(exp_avgs);
  bump(exp_avg_sqs);
  bump(max_exp_avg_sqs);
}

}  // namespace smelt::detail
