// smelt/kernels/optim_ops.h — the element update of each optimizer, written once
// (host and device), for the multi-tensor ("foreach") step kernels.
//
// Each function updates one element of a parameter and its state in place, in
// the compute type C (float for float16/bfloat16/float32 parameters, double for
// float64), following PyTorch's single-tensor implementations in
// torch/optim/sgd.py and torch/optim/adam.py step for step: every tensor op
// there is one rounding to C here, in the same order.
#pragma once
#include <cmath>

#include "smelt/half.h"

namespace smelt::optim_ops {

/// torch.optim.SGD's hyperparameters for one step of one tensor group.
struct SgdHyper {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false;
  /// The momentum buffers do not exist yet (the first step): buf = d_p.
  bool first_step = false;
  /// sgd()'s branches on the values. A type derived from SgdHyper may hide these
  /// and the flags above with compile-time constants (the CPU's vectorized loops).
  SMELT_HD constexpr bool has_weight_decay() const { return weight_decay != 0; }
  SMELT_HD constexpr bool has_momentum() const { return momentum != 0; }
};

/// One element of SGD: p -= lr * d_p, with d_p = g (+ weight_decay p) and, with
/// momentum, buf = momentum buf + (1 - dampening) d_p (nesterov: d_p += momentum buf).
/// H is SgdHyper or a type derived from it (see has_momentum()).
template <class C, class H = SgdHyper>
SMELT_HD void sgd(C& p, C g, C* buf, const H& h) {
  C d = h.maximize ? -g : g;
  if (h.has_weight_decay()) d = d + static_cast<C>(h.weight_decay) * p;
  if (h.has_momentum()) {
    C b = h.first_step ? d
                       : static_cast<C>(*buf * static_cast<C>(h.momentum)) +
                             static_cast<C>(1 - h.dampening) * d;
    *buf = b;
    d = h.nesterov ? d + static_cast<C>(h.momentum) * b : b;
  }
  p = p + static_cast<C>(-h.lr) * d;
}

/// torch.optim.Adam / AdamW's hyperparameters for one step of one tensor group.
struct AdamHyper {
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool amsgrad = false, maximize = false;
  /// AdamW: p *= 1 - lr weight_decay before the update (else weight_decay adds to g).
  bool decoupled_weight_decay = false;
  /// lr / (1 - beta1^step) and sqrt(1 - beta2^step) (computed in double, as Python does).
  double step_size = 0, bias_correction2_sqrt = 1;
};

/// One element of Adam (torch/optim/adam.py _single_tensor_adam):
///   m.lerp_(g, 1 - beta1); v = v beta2 + (1 - beta2) g g;
///   p += -step_size m / (sqrt(v or max(vmax, v)) / bias_correction2_sqrt + eps).
template <class C>
SMELT_HD void adam(C& p, C g, C& m, C& v, C* vmax, const AdamHyper& h) {
  if (h.maximize) g = -g;
  if (h.weight_decay != 0) {
    if (h.decoupled_weight_decay) {
      p = p * static_cast<C>(1 - h.lr * h.weight_decay);
    } else {
      g = g + static_cast<C>(h.weight_decay) * p;
    }
  }
  // lerp(m, g, w) with w = 1 - beta1 < 0.5: m + w (g - m) (PyTorch's lerp formula).
  const C w = static_cast<C>(1 - h.beta1);
  m = w < C(0.5) ? m + w * (g - m) : g - (g - m) * (C(1) - w);
  // mul_(beta2), then addcmul_(g, g, value=1 - beta2): v + value * g * g.
  v = static_cast<C>(v * static_cast<C>(h.beta2)) + static_cast<C>(1 - h.beta2) * g * g;
  C second = v;
  if (h.amsgrad) {
    *vmax = *vmax > v || std::isnan(*vmax) ? *vmax : v;  // torch.maximum keeps NaN
    second = *vmax;
  }
  const C denom = static_cast<C>(std::sqrt(second) / static_cast<C>(h.bias_correction2_sqrt)) +
                  static_cast<C>(h.eps);
  // addcdiv_(m, denom, value=-step_size): p + value * m / denom.
  p = p + static_cast<C>(-h.step_size) * m / denom;
}

}  // namespace smelt::optim_ops
