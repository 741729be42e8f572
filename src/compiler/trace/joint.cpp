// trace_backward (joint.h): the leaves the results depend on, found by walking
// the autograd graph recorded while tracing; their gradients traced by
// autograd::grad with symbolic grad_outputs.
#include "compiler/trace/joint.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

#include "autograd/graph.h"
#include "core/tensor_impl.h"

namespace smelt::compiler {

namespace {

/// Takes the hooks of leaves away for its lifetime (they run at backward time,
/// on the real gradients, not on tracers).
class StashedHooks {
 public:
  explicit StashedHooks(const std::vector<Tensor>& leaves) {
    for (const auto& t : leaves)
      if (detail::AutogradMeta* m = t.impl()->autograd.get(); m && !m->hooks.empty())
        stash_.emplace_back(m, std::move(m->hooks));
    for (auto& [m, hooks] : stash_) m->hooks.clear();
  }
  ~StashedHooks() {
    for (auto& [m, hooks] : stash_) m->hooks = std::move(hooks);
  }
  StashedHooks(const StashedHooks&) = delete;
  StashedHooks& operator=(const StashedHooks&) = delete;

 private:
  std::vector<std::pair<detail::AutogradMeta*, std::vector<std::pair<unsigned, detail::GradHook>>>>
      stash_;
};

/// Marks a joint backward in progress on `gb` for its lifetime.
class JointBackwardScope {
 public:
  explicit JointBackwardScope(GraphBuilder& gb) : gb_(gb) { gb_.tracing_joint_backward = true; }
  ~JointBackwardScope() { gb_.tracing_joint_backward = false; }
  JointBackwardScope(const JointBackwardScope&) = delete;
  JointBackwardScope& operator=(const JointBackwardScope&) = delete;

 private:
  GraphBuilder& gb_;
};

}  // namespace

TracedBackward trace_backward(GraphBuilder& gb, const std::vector<Tensor>& results, int num_args,
                              const std::vector<bool>& skip) {
  if (!gb.grad_slots.empty())
    throw GraphBreak("autograd",
                     "the function reads or replaces a .grad and returns a result that requires "
                     "grad without running a backward pass",
                     "keep .grad out of the compiled function, or run the whole training step "
                     "(backward() and the optimizer's step()) inside it");
  TracedBackward tb;
  std::vector<Tensor> roots;
  for (size_t k = 0; k < results.size(); ++k)
    if (results[k].defined() && results[k].requires_grad() && !(k < skip.size() && skip[k])) {
      tb.diff_results.push_back(static_cast<int>(k));
      roots.push_back(results[k]);
    }
  // The leaves the results depend on: the AccumulateGrad nodes reachable from
  // them. Every other node must have been recorded by the trace.
  std::vector<Tensor> leaves;
  // (A leaf result's AccumulateGrad lives only as long as an edge holds it.)
  std::unordered_set<const autograd::Node*> seen;
  std::vector<std::shared_ptr<autograd::Node>> stack;
  auto visit = [&](const autograd::Edge& e) {
    if (e.is_valid() && seen.insert(e.function.get()).second) stack.push_back(e.function);
  };
  for (const auto& r : roots) visit(autograd::gradient_edge(r));
  while (!stack.empty()) {
    std::shared_ptr<autograd::Node> n = std::move(stack.back());
    stack.pop_back();
    if (auto* acc = dynamic_cast<autograd::AccumulateGrad*>(n.get())) {
      leaves.emplace_back(acc->leaf());
      continue;
    }
    if (n->sequence_nr() < gb.first_node())
      throw GraphBreak(
          "autograd",
          fmt::format("a result depends on a tensor the function captures that requires grad and "
                      "has a history of its own ({}, recorded before the call)",
                      n->name()),
          "pass that tensor as an argument (its history then connects to the compiled "
          "backward), or detach() it");
    for (const auto& e : n->next_edges()) visit(e);
  }
  // Arguments first, in order; then the real leaves as found.
  std::stable_sort(leaves.begin(), leaves.end(), [&](const Tensor& a, const Tensor& b) {
    const int ia = gb.arg_of_leaf(a.impl()), ib = gb.arg_of_leaf(b.impl());
    return (ia < 0 ? INT32_MAX : ia) < (ib < 0 ? INT32_MAX : ib);
  });
  for (const auto& leaf : leaves) {
    TracedBackward::Input in;
    in.arg = gb.arg_of_leaf(leaf.impl());
    if (in.arg < 0) in.leaf = leaf;
    tb.inputs.push_back(std::move(in));
  }
  std::vector<Tensor> grad_outputs;
  for (size_t k = 0; k < roots.size(); ++k)
    grad_outputs.push_back(
        gb.add_input(detail::OutMeta{roots[k].sizes(), roots[k].dtype(), roots[k].device()},
                     num_args + static_cast<int>(k)));
  std::vector<Tensor> grads;
  if (!leaves.empty()) {
    StashedHooks no_hooks(leaves);
    JointBackwardScope joint(gb);
    TraceScope scope(&gb);
    try {
      grads = autograd::grad(roots, leaves, grad_outputs, /*retain_graph=*/false,
                             /*create_graph=*/false, /*allow_unused=*/true);
    } catch (const GraphBreak&) {
      throw;
    } catch (const Error& e) {
      // A derivative that raises (an op without one): the call runs eagerly,
      // and raises only if the caller runs the backward, as eager does.
      throw GraphBreak("autograd",
                       fmt::format("tracing the backward of the results raised: {}", e.what()),
                       "run the call under smelt::NoGradGuard if no gradient is needed");
    }
  }
  std::vector<Tensor> outputs = results;
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;
    tb.inputs[i].output = static_cast<int>(outputs.size());
    outputs.push_back(grads[i]);
  }
  gb.finish(outputs);
  gb.num_results = static_cast<int>(results.size());
  return tb;
}

}  // namespace smelt::compiler
