// optim::SGD (torch.optim.SGD): one multi-tensor step per group through
// detail::sgd_step_ (the element update is optim_ops::sgd).
#include "ops/optimizer_step.h"
#include "smelt/autograd.h"
#include "smelt/ops.h"
#include "smelt/optim.h"

namespace smelt::optim {

namespace {
std::vector<std::pair<std::string, double>> sgd_options(const SGDOptions& o) {
  SMELT_CHECK(o.momentum() >= 0, "SGD: Invalid momentum value: {}", o.momentum());
  SMELT_CHECK(o.weight_decay() >= 0, "SGD: Invalid weight_decay value: {}", o.weight_decay());
  SMELT_CHECK(!o.nesterov() || (o.momentum() > 0 && o.dampening() == 0),
              "SGD: Nesterov momentum requires a momentum and zero dampening (momentum {}, "
              "dampening {})",
              o.momentum(), o.dampening());
  return {{"lr", o.lr()},
          {"momentum", o.momentum()},
          {"dampening", o.dampening()},
          {"weight_decay", o.weight_decay()},
          {"nesterov", o.nesterov() ? 1.0 : 0.0},
          {"maximize", o.maximize() ? 1.0 : 0.0}};
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : Optimizer("SGD") {
  add_param_group(std::move(params), options);
}

void SGD::add_param_group(std::vector<Tensor> params, SGDOptions options) {
  add_group(std::move(params), sgd_options(options));
}

void SGD::step() {
  NoGradGuard no_grad;
  guard_trace();
  for (size_t g = 0; g < num_param_groups(); ++g) {
    optim_ops::SgdHyper h;
    h.lr = option(g, "lr");
    h.momentum = option(g, "momentum");
    h.dampening = option(g, "dampening");
    h.weight_decay = option(g, "weight_decay");
    h.nesterov = option(g, "nesterov") != 0;
    h.maximize = option(g, "maximize") != 0;
    // Parameters with a momentum buffer, and those on their first step (the
    // buffer is made here and takes d_p), are two calls.
    std::vector<Tensor> p[2], grads[2], bufs[2];
    for (const Tensor& param : params_with_grad(g)) {
      int first = 0;
      if (h.momentum != 0) {
        Tensor& buf = state_of(param)["momentum_buffer"];
        if (!buf.defined()) {
          buf = empty_like(param);
          first = 1;
        }
        bufs[first].push_back(buf);
      }
      p[first].push_back(param);
      grads[first].push_back(param.grad().contiguous());
    }
    for (int first = 0; first < 2; ++first) {
      if (p[first].empty()) continue;
      h.first_step = first == 1;
      detail::sgd_step_(p[first], grads[first], bufs[first], h);
    }
  }
}

}  // namespace smelt::optim
