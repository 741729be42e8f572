// smelt/autograd.h — reverse-mode automatic differentiation, with PyTorch's
// semantics and libtorch's C++ API.
//
//   auto w = smelt::randn({3, 4}, smelt::TensorOptions().requires_grad(true));
//   auto x = smelt::randn({8, 4});
//   auto loss = smelt::mse_loss(smelt::matmul(x, w.t()), smelt::zeros({8, 3}));
//   loss.backward();                 // w.grad() now holds d loss / d w
//   {
//     smelt::NoGradGuard no_grad;    // no graph is recorded in this scope
//     w.sub_(w.grad() * 0.1);        // a leaf may be updated in place here
//   }
//
// Recording. While grad mode is on (the default; a thread-local flag, see
// GradMode), every op with an input that requires grad records a backward
// node (Tensor::grad_fn()) whose edges point at the nodes of its inputs; its
// outputs then require grad too (floating outputs only: integer and bool
// results never do). An op over inputs that do not require grad records
// nothing: inference pays one thread-local check per op. Leaves are the
// tensors the user made require grad (factories with
// TensorOptions::requires_grad, Tensor::requires_grad_, nn module parameters);
// backward() accumulates into their .grad().
//
// Derivatives. Each op's derivative is written once, in its op-table entry
// (src/ops/op_table.cpp; `smelt ops` lists them), in terms of smelt ops, so a
// backward pass is made of the same ops as a forward one (and can be recorded
// again: create_graph=true gives higher-order gradients). Ops that are not
// differentiable (comparisons, argmax, integer and bool ops, factories) give
// outputs that do not require grad.
//
// In-place ops and views (PyTorch's rules). Every in-place write bumps the
// storage's version counter (Tensor::_version(), shared by views). A tensor
// saved for backward remembers its version; if it was modified in place
// since, backward raises "one of the variables needed for gradient computation
// has been modified by an inplace operation: ... is at version N; expected
// version M instead". An in-place op on a leaf that requires grad (or on a
// view of one) raises unless grad mode is off. An in-place op on a view of a
// tensor that requires grad rewrites the base's history (PyTorch's
// CopySlices): gradients flow to the written values and around them.
//
// The engine runs the nodes reachable from the roots in topological order
// (iteratively: no recursion proportional to graph depth, also when a graph is
// freed), summing the gradients that reach a node from several uses, and
// frees each node's saved tensors after use unless retain_graph=true; a second
// backward through freed nodes raises.
//
// smelt::compile and autograd: ops over tracers record backward nodes like
// any op, so a compiled function that runs backward() itself (a training
// step) compiles its backward pass with its forward (smelt/compile.h,
// "Training"). A compiled function that returns a result requiring grad
// without running backward() compiles that result's backward too, as a second
// graph: the result's grad_fn is one CompiledFunctionBackward node that runs
// it (smelt/compile.h, "Compiled forward, backward run by the caller"). Wrap
// inference in a NoGradGuard: no backward graph is compiled then.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "smelt/tensor.h"

namespace smelt {

/// The thread-local grad mode (PyTorch's torch.is_grad_enabled()). On by default
/// in every thread.
struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

/// Sets grad mode to `enabled` for its lifetime, restoring the previous mode after
/// (libtorch's torch::AutoGradMode).
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : prev_(GradMode::is_enabled()) {
    GradMode::set_enabled(enabled);
  }
  ~AutoGradMode() { GradMode::set_enabled(prev_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool prev_;
};

/// No graph is recorded in its scope (torch.no_grad()): results do not require
/// grad, and leaves may be modified in place (optimizer steps, initialization).
class NoGradGuard : public AutoGradMode {
 public:
  NoGradGuard() : AutoGradMode(false) {}
};

/// Turns recording back on inside a NoGradGuard (torch.enable_grad()).
class EnableGradGuard : public AutoGradMode {
 public:
  EnableGradGuard() : AutoGradMode(true) {}
};

namespace autograd {

class Node;

/// An edge of the backward graph: gradient input `input_nr` of `function`.
struct Edge {
  std::shared_ptr<Node> function;
  uint32_t input_nr = 0;
  bool is_valid() const { return function != nullptr; }
};

/// Shape, dtype and device of a gradient a node receives (the forward output it
/// belongs to): the engine checks every gradient against it.
struct InputMetadata {
  Shape sizes;
  DType dtype = DType::Float32;
  Device device;
};

/// A node of the backward graph (PyTorch's torch::autograd::Node). Its inputs are
/// the gradients of the forward op's outputs; its outputs, one per edge of
/// next_edges(), the gradients of the forward op's inputs.
class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /// PyTorch's class name: "MulBackward0", "AccumulateGrad", "CopySlices".
  virtual std::string name() const = 0;
  /// Gradients of the forward inputs (one per next edge; undefined: zero) from the
  /// gradients of the forward outputs (one per input; the engine passes undefined
  /// only when the op has several outputs and some got no gradient).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  /// Frees the tensors saved for backward (after a backward without retain_graph).
  virtual void release_variables() {}

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  std::vector<Edge>& mutable_next_edges() { return next_edges_; }
  uint32_t num_inputs() const { return static_cast<uint32_t>(input_metadata_.size()); }
  const InputMetadata& input_metadata(uint32_t i) const { return input_metadata_.at(i); }
  /// Adds an input (a forward output) and returns its index.
  uint32_t add_input_metadata(InputMetadata m);
  /// Creation order in this thread (later nodes have larger numbers).
  uint64_t sequence_nr() const { return sequence_nr_; }

  /// Hooks run on the gradient of input `input_nr` before apply() (the hooks of the
  /// tensor that is this node's output `input_nr`); each may replace it.
  void add_tensor_pre_hook(uint32_t input_nr, unsigned handle,
                           std::function<Tensor(const Tensor&)> hook);
  bool remove_tensor_pre_hook(unsigned handle);
  /// Runs the tensor hooks on `grads` (AccumulateGrad runs its leaf's hooks).
  virtual void call_tensor_pre_hooks(std::vector<Tensor>& grads);

 protected:
  std::vector<Edge> next_edges_;
  std::vector<InputMetadata> input_metadata_;

 private:
  struct PreHook {
    uint32_t input_nr;
    unsigned handle;
    std::function<Tensor(const Tensor&)> fn;
  };
  std::vector<PreHook> pre_hooks_;
  uint64_t sequence_nr_;
};

/// Computes the gradients of `tensors` with respect to the graph leaves and
/// accumulates them into their .grad() (torch.autograd.backward).
/// `grad_tensors`: one per tensor (undefined: implicit, allowed for one-element
/// tensors only, where it is 1); each must have its tensor's shape.
/// `retain_graph` (default: create_graph) keeps saved tensors for another backward.
/// `create_graph` records the backward pass itself, for higher-order gradients.
/// `inputs`: when not empty, accumulate only into these tensors' .grad().
/// Errors: a tensor that does not require grad ("element 0 of tensors does not
/// require grad and does not have a grad_fn"), an implicit gradient for a
/// tensor of several elements, a shape mismatch, a graph already freed, a saved
/// tensor modified in place.
void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
              const std::vector<Tensor>& inputs = {});

/// The gradients of `outputs` with respect to `inputs` (torch.autograd.grad),
/// returned instead of accumulated into .grad(). `grad_outputs` as backward's
/// grad_tensors. An input the outputs do not depend on raises unless
/// `allow_unused`, where its gradient is an undefined Tensor. Every input must
/// require grad.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {},
                         std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                         bool allow_unused = false);

}  // namespace autograd
}  // namespace smelt
