// The autograd state a TensorImpl carries (PyTorch's AutogradMeta): whether a
// leaf requires grad, the backward node that produced the tensor, its
// accumulated .grad, gradient hooks. Most tensors (inference, anything made
// under NoGradGuard) have none: TensorImpl::autograd stays null and the only
// cost autograd adds to an op is a thread-local check and a pointer test per
// input. The backward nodes themselves live in src/autograd; core only holds
// them through an opaque pointer.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "smelt/tensor.h"

namespace smelt::autograd {
class Node;
}  // namespace smelt::autograd

namespace smelt::detail {

/// A gradient hook: gets the gradient computed for a tensor and returns the one
/// to use instead (an undefined Tensor keeps it).
using GradHook = std::function<Tensor(const Tensor&)>;

struct AutogradMeta {
  /// Set on leaves by requires_grad_(); a tensor with a grad_fn requires grad
  /// whatever this says.
  bool requires_grad = false;
  /// The node whose output `output_nr` this tensor is; null for a leaf.
  std::shared_ptr<autograd::Node> grad_fn;
  uint32_t output_nr = 0;
  /// For a view: the storage version when grad_fn was set. A later in-place
  /// write anywhere in the storage makes grad_fn stale; it is then rebuilt
  /// from the base's history (PyTorch's attr_version).
  uint32_t attr_version = 0;
  /// .grad: accumulated by backward() for leaves and tensors that retain_grad().
  Tensor grad;
  /// The leaf's AccumulateGrad node, while some graph holds it.
  std::weak_ptr<autograd::Node> grad_accumulator;
  /// Hooks of a leaf, with their handles (a non-leaf's hooks live on its grad_fn).
  std::vector<std::pair<unsigned, GradHook>> hooks;
  bool retains_grad = false;
  /// Set on the output of a non-differentiable op (argmax, eq, ...) whose input
  /// required grad: backward() from it names the op in its error.
  const char* nondifferentiable_op = nullptr;
};

}  // namespace smelt::detail
