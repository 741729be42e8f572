// The backward engine (PyTorch's torch/csrc/autograd/engine.cpp, single-threaded):
// counts, for every node reachable from the roots, how many edges lead into it;
// then runs the nodes whose gradients are complete (dependency count 0, the most
// recently created first), summing the gradients that reach a node from several
// uses, checking each against the shape and dtype the node expects. All loops
// are iterative. autograd::backward accumulates into leaves' .grad;
// autograd::grad captures the gradients of chosen tensors instead and runs only
// the nodes on the way to them.
#include <algorithm>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/graph.h"
#include "ops/derivatives.h"
#include "smelt/ops.h"

namespace smelt::autograd {

namespace {

/// The keep_graph of the backward pass running on this thread (false when none).
thread_local bool current_keep_graph = false;

/// Sets current_keep_graph for one backward pass (nested passes restore it).
class KeepGraphScope {
 public:
  explicit KeepGraphScope(bool keep) : prev_(current_keep_graph) { current_keep_graph = keep; }
  ~KeepGraphScope() { current_keep_graph = prev_; }
  KeepGraphScope(const KeepGraphScope&) = delete;
  KeepGraphScope& operator=(const KeepGraphScope&) = delete;

 private:
  bool prev_;
};

/// Checks `g`, flowing into a node input described by `m`: summed to its shape
/// when broadcast, converted to its dtype; Error when the shapes do not fit.
Tensor validate(Tensor g, const InputMetadata& m, const Node& from, size_t index) {
  if (g.sizes() != m.sizes) {
    bool expandable = g.dim() >= static_cast<int64_t>(m.sizes.size());
    for (size_t i = 0; expandable && i < m.sizes.size(); ++i) {
      const int64_t gs = g.size(g.dim() - static_cast<int64_t>(m.sizes.size()) + i);
      expandable = m.sizes[i] == gs || m.sizes[i] == 1;
    }
    SMELT_INTERNAL_ASSERT(expandable,
                          "Function {} returned an invalid gradient at index {} - got {} but "
                          "expected shape compatible with {}",
                          from.name(), index, detail::shape_str(g.sizes()),
                          detail::shape_str(m.sizes));
    g = detail::sum_to(g, m.sizes);
  }
  if (g.dtype() != m.dtype) g = to_dtype(g, m.dtype);
  return g;
}

struct ByNewest {
  bool operator()(const Node* a, const Node* b) const {
    return a->sequence_nr() < b->sequence_nr();
  }
};

/// Runs the backward pass from `roots` with gradients `root_grads`. With `captures`
/// empty every reachable node runs (leaves accumulate); otherwise only the nodes
/// leading to a capture edge run, and the gradient arriving at each capture edge
/// (after its tensor's hooks) is returned in its slot.
std::vector<Tensor> run_backward(const std::vector<Edge>& roots,
                                 const std::vector<Tensor>& root_grads, bool keep_graph,
                                 bool create_graph, const std::vector<Edge>& captures) {
  if (detail::TraceContext* ctx = detail::trace_context()) ctx->note_backward();
  KeepGraphScope keep_scope(keep_graph);
  // 1. Discover the graph, counting the edges into each node.
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> discovered;
  std::vector<Node*> stack;
  std::unordered_set<Node*> seen;
  for (const auto& e : roots)
    if (e.is_valid() && seen.insert(e.function.get()).second) stack.push_back(e.function.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    discovered.push_back(n);
    for (const auto& e : n->next_edges()) {
      if (!e.is_valid()) continue;
      ++deps[e.function.get()];
      if (seen.insert(e.function.get()).second) stack.push_back(e.function.get());
    }
  }

  // 2. With captures: which nodes must run (those with a path to a capture).
  std::unordered_map<Node*, std::vector<std::pair<uint32_t, size_t>>> capture_at;
  for (size_t i = 0; i < captures.size(); ++i)
    if (captures[i].is_valid())
      capture_at[captures[i].function.get()].push_back({captures[i].input_nr, i});
  std::unordered_set<Node*> runs;  // capture mode only
  if (!captures.empty()) {
    // Reverse topological order (Kahn's order, reversed) so children come first.
    std::unordered_map<Node*, int> d = deps;
    std::vector<Node*> topo, ready;
    for (Node* n : discovered)
      if (d[n] == 0) ready.push_back(n);
    while (!ready.empty()) {
      Node* n = ready.back();
      ready.pop_back();
      topo.push_back(n);
      for (const auto& e : n->next_edges())
        if (e.is_valid() && --d[e.function.get()] == 0) ready.push_back(e.function.get());
    }
    std::unordered_set<Node*> needed;
    for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
      Node* n = *it;
      bool child_needed = false;
      for (const auto& e : n->next_edges())
        child_needed |= e.is_valid() && needed.count(e.function.get()) > 0;
      if (child_needed) runs.insert(n);
      if (child_needed || capture_at.count(n)) needed.insert(n);
    }
  }

  // 3. Run.
  std::vector<Tensor> captured(captures.size());
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto add_grad = [&](Node* n, uint32_t slot, const Tensor& g) {
    auto& buf = buffers[n];
    if (buf.empty()) buf.resize(n->num_inputs());
    if (!g.defined()) return;
    buf.at(slot) = buf[slot].defined() ? add(buf[slot], g) : g;
  };
  std::priority_queue<Node*, std::vector<Node*>, ByNewest> ready;
  std::unordered_set<Node*> queued;
  {
    AutoGradMode mode(create_graph);
    for (size_t i = 0; i < roots.size(); ++i)
      if (roots[i].is_valid()) add_grad(roots[i].function.get(), roots[i].input_nr, root_grads[i]);
  }
  for (const auto& e : roots)
    if (e.is_valid() && deps[e.function.get()] == 0 && queued.insert(e.function.get()).second)
      ready.push(e.function.get());
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    std::vector<Tensor> grads = std::move(buffers[n]);
    buffers.erase(n);
    grads.resize(n->num_inputs());
    AutoGradMode mode(create_graph);
    n->call_tensor_pre_hooks(grads);
    if (auto it = capture_at.find(n); it != capture_at.end())
      for (auto [input_nr, slot] : it->second) captured[slot] = grads.at(input_nr);
    if (!captures.empty() && !runs.count(n)) continue;
    const bool any =
        std::any_of(grads.begin(), grads.end(), [](const Tensor& g) { return g.defined(); });
    std::vector<Tensor> outs;
    if (any) outs = n->apply(std::move(grads));
    if (!keep_graph) n->release_variables();
    const auto& edges = n->next_edges();
    SMELT_INTERNAL_ASSERT(outs.size() <= edges.size() || edges.empty(),
                          "{} returned {} gradients for {} edges", n->name(), outs.size(),
                          edges.size());
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.is_valid()) continue;
      Node* next = e.function.get();
      Tensor g = i < outs.size() ? outs[i] : Tensor();
      if (g.defined()) g = validate(std::move(g), next->input_metadata(e.input_nr), *n, i);
      add_grad(next, e.input_nr, g);
      if (--deps[next] == 0 && queued.insert(next).second) ready.push(next);
    }
  }
  return captured;
}

/// The roots' edges and gradients: a defined gradient per output (ones for a
/// one-element output given none), checked against its shape.
void make_roots(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                std::vector<Edge>& edges, std::vector<Tensor>& grads) {
  SMELT_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(),
              "backward: got {} tensors and {} gradients; pass one gradient per tensor",
              outputs.size(), grad_outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i];
    SMELT_CHECK(t.defined(), "backward: tensor {} is undefined", i);
    if (!t.requires_grad()) {
      std::string why;
      if (auto* m = t.impl()->autograd.get(); m && m->nondifferentiable_op)
        why = fmt::format(
            " (it is the result of '{}', which is not differentiable: its result does not "
            "change smoothly with its inputs)",
            m->nondifferentiable_op);
      else if (!GradMode::is_enabled())
        why = " (grad mode is off: was it computed under a NoGradGuard?)";
      detail::throw_error(fmt::format(
          "element {} of tensors does not require grad and does not have a grad_fn{}", i, why));
    }
    Tensor g = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (!g.defined()) {
      SMELT_CHECK(t.numel() == 1,
                  "grad can be implicitly created only for scalar outputs (output {} has shape "
                  "{}); pass a gradient of that shape",
                  i, detail::shape_str(t.sizes()));
      NoGradGuard no_grad;
      g = ones_like(t);
    } else {
      SMELT_CHECK(g.sizes() == t.sizes(),
                  "Mismatch in shape: grad_output[{}] has a shape of {} and output[{}] has a "
                  "shape of {}.",
                  i, detail::shape_str(g.sizes()), i, detail::shape_str(t.sizes()));
      SMELT_CHECK(is_floating(g.dtype()), "backward: grad_output[{}] must be floating, got {}", i,
                  dtype_name(g.dtype()));
      if (g.dtype() != t.dtype()) g = to_dtype(g, t.dtype());
    }
    edges.push_back(gradient_edge(t));
    grads.push_back(g);
  }
}

std::vector<Edge> capture_edges(const std::vector<Tensor>& inputs, const char* op) {
  std::vector<Edge> edges;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    SMELT_CHECK(t.defined(), "{}: input {} is undefined", op, i);
    SMELT_CHECK(t.requires_grad(),
                "{}: One of the differentiated Tensors does not require grad (input {}, {})", op, i,
                tensor_desc(t));
    edges.push_back(gradient_edge(t));
  }
  return edges;
}

}  // namespace

bool current_graph_task_keep_graph() { return current_keep_graph; }

void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors,
              std::optional<bool> retain_graph, bool create_graph,
              const std::vector<Tensor>& inputs) {
  std::vector<Edge> roots;
  std::vector<Tensor> grads;
  make_roots(tensors, grad_tensors, roots, grads);
  const bool keep = retain_graph.value_or(create_graph);
  if (inputs.empty()) {
    run_backward(roots, grads, keep, create_graph, {});
    return;
  }
  // Only into `inputs`: capture their gradients, then accumulate as AccumulateGrad would.
  std::vector<Tensor> got =
      run_backward(roots, grads, keep, create_graph, capture_edges(inputs, "backward"));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!got[i].defined()) continue;
    if (detail::TraceContext* ctx = detail::trace_context()) {
      ctx->note_grad(inputs[i], false);
      ctx->note_grad(inputs[i], true);
    }
    Tensor& g = autograd_meta(inputs[i]).grad;
    AutoGradMode mode(create_graph);
    g = g.defined() ? add(g, got[i]) : (create_graph ? got[i] : got[i].detach());
  }
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph,
                         bool create_graph, bool allow_unused) {
  SMELT_CHECK(!inputs.empty(),
              "autograd::grad: inputs is empty; pass the tensors to differentiate "
              "with respect to");
  std::vector<Edge> roots;
  std::vector<Tensor> grads;
  make_roots(outputs, grad_outputs, roots, grads);
  std::vector<Tensor> got = run_backward(roots, grads, retain_graph.value_or(create_graph),
                                         create_graph, capture_edges(inputs, "autograd::grad"));
  for (size_t i = 0; i < got.size(); ++i) {
    SMELT_CHECK(got[i].defined() || allow_unused,
                "autograd::grad: One of the differentiated Tensors appears to not have been used "
                "in the graph (input {}, {}). Set allow_unused=true if this is the desired "
                "behavior.",
                i, tensor_desc(inputs[i]));
    if (got[i].defined() && !create_graph) got[i] = got[i].detach();
  }
  return got;
}

}  // namespace smelt::autograd
