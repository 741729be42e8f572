// optim::Optimizer: parameter groups and their options, per-parameter state,
// zero_grad, and the flat state dict (smelt/optim.h describes its keys).
#include <fmt/format.h>

#include <set>

#include "core/tensor_impl.h"
#include "ops/dispatch.h"
#include "smelt/autograd.h"
#include "smelt/ops.h"
#include "smelt/optim.h"

namespace smelt::optim {

Optimizer::Optimizer(std::string kind) : kind_(std::move(kind)) {}
Optimizer::~Optimizer() = default;

void Optimizer::add_group(std::vector<Tensor> params,
                          std::vector<std::pair<std::string, double>> options) {
  std::set<const TensorImpl*> seen;
  for (const auto& g : groups_)
    for (const auto& p : g.params) seen.insert(p.impl());
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    SMELT_CHECK(p.defined(), "{}: parameter {} of group {} is undefined", kind_, i, groups_.size());
    SMELT_CHECK(is_floating(p.dtype()),
                "{}: can only optimize floating tensors, but parameter {} of group {} is {}", kind_,
                i, groups_.size(), dtype_name(p.dtype()));
    SMELT_CHECK(p.is_leaf(),
                "{}: can't optimize a non-leaf Tensor (parameter {} of group {}, which has a "
                "grad_fn); pass leaves (detach() it and call requires_grad_())",
                kind_, i, groups_.size());
    SMELT_CHECK(seen.insert(p.impl()).second,
                "{}: some parameters appear in more than one parameter group (parameter {} of "
                "group {}); give each parameter to one group",
                kind_, i, groups_.size());
  }
  SMELT_INTERNAL_ASSERT(!options.empty() && options[0].first == "lr", "{}: lr must come first",
                        kind_);
  SMELT_CHECK(options[0].second >= 0, "{}: Invalid learning rate: {}", kind_, options[0].second);
  groups_.push_back({std::move(params), std::move(options)});
}

const std::vector<Tensor>& Optimizer::params(size_t g) const {
  SMELT_CHECK(g < groups_.size(), "{}: no parameter group {} (it has {})", kind_, g,
              groups_.size());
  return groups_[g].params;
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> all;
  for (const auto& g : groups_) all.insert(all.end(), g.params.begin(), g.params.end());
  return all;
}

double Optimizer::option(size_t g, const std::string& name) const {
  for (const auto& [k, v] : groups_.at(g).options)
    if (k == name) return v;
  SMELT_INTERNAL_ASSERT(false, "{}: no option '{}'", kind_, name);
}

double Optimizer::lr(size_t g) const {
  params(g);  // range check
  return option(g, "lr");
}

void Optimizer::set_lr(double lr, size_t g) {
  params(g);
  groups_[g].options[0].second = lr;
}

std::vector<Tensor> Optimizer::params_with_grad(size_t g) const {
  std::vector<Tensor> out;
  for (const auto& p : groups_.at(g).params)
    if (p.grad().defined()) out.push_back(p);
  return out;
}

std::map<std::string, Tensor>& Optimizer::state_of(const Tensor& p) { return state_[p.impl()]; }

std::string Optimizer::trace_key() const {
  std::string key = kind_;
  for (const auto& g : groups_) {
    for (const auto& [name, value] : g.options) key += fmt::format("|{}={:a}", name, value);
    for (const auto& p : g.params) {
      key += fmt::format("|p{}", static_cast<const void*>(p.impl()));
      auto it = state_.find(p.impl());
      if (it == state_.end()) continue;
      for (const auto& [name, t] : it->second)
        key += fmt::format(",{}:{}", name, static_cast<const void*>(t.impl()));
    }
  }
  return key;
}

void Optimizer::guard_trace() {
  detail::TraceContext* ctx = detail::trace_context();
  if (!ctx) return;
  std::weak_ptr<int> alive = alive_;
  ctx->add_guard([this, alive, key = trace_key()]() -> std::string {
    if (alive.expired()) return kind_ + ": the optimizer the graph steps was destroyed";
    if (trace_key() == key) return "";
    return fmt::format(
        "{}: its options (a learning rate, ...) or its state (the first step makes it; "
        "load_state_dict replaces it) changed since the graph was traced",
        kind_);
  });
  // State the traced step makes is made again by an eager run of the call.
  ctx->on_abort([this, alive, saved = state_] {
    if (!alive.expired()) state_ = saved;
  });
}

Tensor Optimizer::state(const Tensor& p, const std::string& name) const {
  auto it = state_.find(p.impl());
  if (it == state_.end()) return Tensor();
  auto jt = it->second.find(name);
  return jt == it->second.end() ? Tensor() : jt->second;
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  detail::TraceContext* ctx = detail::trace_context();
  for (const auto& g : groups_)
    for (const auto& p : g.params) {
      // Under smelt::compile: set_to_none replaces the .grad whatever it was.
      if (ctx && set_to_none) ctx->note_grad(p, true);
      Tensor& grad = p.mutable_grad();
      if (!grad.defined()) continue;
      if (set_to_none) {
        grad = Tensor();
      } else {
        if (grad.grad_fn()) grad = grad.detach();
        grad.zero_();
      }
    }
}

nn::StateDict Optimizer::state_dict() const {
  nn::StateDict out;
  size_t index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (const auto& [name, value] : groups_[g].options)
      out.emplace(fmt::format("param_groups.{}.{}", g, name),
                  scalar_tensor(value, TensorOptions(DType::Float64)));
    std::vector<int64_t> ids;
    for (const auto& p : groups_[g].params) {
      ids.push_back(static_cast<int64_t>(index));
      auto it = state_.find(p.impl());
      if (it != state_.end())
        for (const auto& [name, t] : it->second)
          out.emplace(fmt::format("state.{}.{}", index, name), t.clone());
      ++index;
    }
    const auto n = static_cast<int64_t>(ids.size());
    out.emplace(fmt::format("param_groups.{}.params", g), from_vector(ids, {n}));
  }
  return out;
}

void Optimizer::load_state_dict(const nn::StateDict& state) {
  auto at = [&](const std::string& key) -> const Tensor& {
    auto it = state.find(key);
    SMELT_CHECK(it != state.end(),
                "{}.load_state_dict: \"{}\" is missing; the state dict must come from a {} over "
                "the same parameter groups",
                kind_, key, kind_);
    return it->second;
  };
  // Validate everything first, then assign.
  std::set<std::string> known;
  size_t index = 0;
  std::vector<std::pair<const TensorImpl*, std::map<std::string, Tensor>>> new_state;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::string key = fmt::format("param_groups.{}.params", g);
    const Tensor& ids = at(key);
    known.insert(key);
    SMELT_CHECK(ids.numel() == static_cast<int64_t>(groups_[g].params.size()),
                "{}.load_state_dict: group {} has {} parameters but the state dict's has {}", kind_,
                g, groups_[g].params.size(), ids.numel());
    for (const auto& [name, value] : groups_[g].options)
      known.insert(fmt::format("param_groups.{}.{}", g, name));
    for (const auto& p : groups_[g].params) {
      std::map<std::string, Tensor> s;
      const std::string prefix = fmt::format("state.{}.", index);
      for (auto it = state.lower_bound(prefix);
           it != state.end() && it->first.rfind(prefix, 0) == 0; ++it) {
        const std::string name = it->first.substr(prefix.size());
        const Tensor& t = it->second;
        SMELT_CHECK(name == "step" || (t.sizes() == p.sizes() && t.dtype() == p.dtype()),
                    "{}.load_state_dict: \"{}\" is {} {} but parameter {} is {} {}", kind_,
                    it->first, dtype_name(t.dtype()), detail::shape_str(t.sizes()), index,
                    dtype_name(p.dtype()), detail::shape_str(p.sizes()));
        s.emplace(name, t.clone());
        known.insert(it->first);
      }
      new_state.emplace_back(p.impl(), std::move(s));
      ++index;
    }
  }
  for (const auto& [k, v] : state)
    SMELT_CHECK(known.count(k),
                "{}.load_state_dict: unexpected key \"{}\" (the state dict is not from a {} over "
                "these parameter groups)",
                kind_, k, kind_);
  for (size_t g = 0; g < groups_.size(); ++g)
    for (auto& [name, value] : groups_[g].options)
      value = at(fmt::format("param_groups.{}.{}", g, name)).item<double>();
  state_.clear();
  for (auto& [impl, s] : new_state)
    if (!s.empty()) state_[impl] = std::move(s);
}

}  // namespace smelt::optim
