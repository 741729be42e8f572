// CompiledFunctionBackward (compiled_function.h): the node, what it saves, and
// how its apply() binds the compiled backward graph's inputs.
#include "compiler/runtime/compiled_function.h"

#include <fmt/format.h>

#include <algorithm>

#include "autograd/graph.h"
#include "core/tensor_impl.h"
#include "smelt/ops.h"

namespace smelt::compiler {

namespace {

/// A tensor over `t`'s memory that is not a view (the executor returns views
/// of the buffers it allocated): a result autograd treats as eager's, a
/// gradient AccumulateGrad may keep without a copy.
Tensor plain(const Tensor& t) { return t.impl()->view_base ? detail::alias(t) : t; }

class CompiledFunctionBackward final : public autograd::Node {
 public:
  explicit CompiledFunctionBackward(std::shared_ptr<const BackwardFunction> fn)
      : fn_(std::move(fn)) {}

  std::string name() const override { return "CompiledFunctionBackward"; }

  void save(const std::vector<Tensor>& args, const std::vector<Tensor>& params,
            const std::vector<Tensor>& saved) {
    auto self = shared_from_this();
    for (int a : fn_->saved_args) args_.emplace_back(args.at(static_cast<size_t>(a)), false, self);
    for (int p : fn_->saved_params)
      params_.emplace_back(params.at(static_cast<size_t>(p)), false, self);
    for (const auto& t : saved) saved_.emplace_back(t, false, self);
  }

  void release_variables() override {
    for (auto& s : args_) s.reset();
    for (auto& s : params_) s.reset();
    for (auto& s : saved_) s.reset();
  }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (detail::trace_context() != nullptr)
      throw GraphBreak("CompiledFunctionBackward",
                       "a backward pass through the result of an earlier compiled call runs "
                       "while another function is being compiled",
                       "call the compiled function inside the function being compiled (it is "
                       "then traced into it), or run this backward outside it");
    SMELT_CHECK(!GradMode::is_enabled(),
                "CompiledFunctionBackward: a backward pass with create_graph=true (double "
                "backward) through the result of a smelt::compile'd function is not supported: "
                "its backward is a compiled graph, not recorded ops. Run it without "
                "create_graph, or call the function eagerly where higher-order gradients are "
                "needed");
    const BackwardFunction& f = *fn_;
    const size_t k_count = f.diff_results.size();
    const size_t num_args = static_cast<size_t>(f.num_args);
    std::vector<Tensor> inputs(num_args + k_count + static_cast<size_t>(f.num_saved));
    for (size_t i = 0; i < args_.size(); ++i)
      inputs[static_cast<size_t>(f.saved_args[i])] = args_[i].unpack(*this);
    for (size_t k = 0; k < k_count; ++k) {
      Tensor g = k < grads.size() ? grads[k] : Tensor();
      const autograd::InputMetadata& m = input_metadata(static_cast<uint32_t>(k));
      if (!g.defined()) {
        // A result the loss did not use: its gradient is zero.
        g = zeros(m.sizes, TensorOptions(m.dtype).device(m.device));
      } else if (!g.is_contiguous() || !input_aligned(g)) {
        // The graph reads each gradient as a dense, aligned block (an expanded
        // one from sum(), a slice's, are copied).
        g = clone(g);
      }
      inputs[num_args + k] = g;
    }
    for (size_t j = 0; j < saved_.size(); ++j)
      inputs[num_args + k_count + j] = saved_[j].unpack(*this);
    std::vector<Tensor> params;
    for (size_t i = 0; i < params_.size(); ++i) {
      const size_t at = static_cast<size_t>(f.saved_params[i]);
      if (params.size() <= at) params.resize(at + 1);
      params[at] = params_[i].unpack(*this);
    }
    // A backward that does not keep the graph frees the saved tensors now
    // (the engine would after apply()): the graph then holds the only
    // reference to each, and drops it after the last step that reads it, so
    // that each activation is freed as its backward consumed it, as in eager.
    std::vector<Tensor> outs;
    if (autograd::current_graph_task_keep_graph()) {
      outs = f.graph->run(inputs, params);
    } else {
      release_variables();
      grads.clear();
      outs = f.graph->run_consuming(std::move(inputs), params);
    }
    std::vector<Tensor> result(next_edges_.size());
    for (size_t i = 0; i < f.inputs.size() && i < result.size(); ++i)
      if (f.inputs[i].output >= 0 && next_edges_[i].is_valid())
        result[i] = plain(outs.at(static_cast<size_t>(f.inputs[i].output)));
    return result;
  }

 private:
  std::shared_ptr<const BackwardFunction> fn_;
  std::vector<autograd::SavedVariable> args_, params_, saved_;
};

}  // namespace

void connect_views(const std::vector<ViewResult>& views, const std::vector<Tensor>& args,
                   std::vector<Tensor>& outputs) {
  for (const ViewResult& v : views) {
    Tensor& r = outputs.at(static_cast<size_t>(v.result));
    const Tensor& base = args.at(static_cast<size_t>(v.arg));
    if (r.sizes() == base.sizes() && r.strides() == base.strides() &&
        r.storage_offset() == base.storage_offset()) {
      r = base;
      continue;
    }
    if (!base.requires_grad()) continue;
    auto node = autograd::make_node<autograd::ViewOfBase>(
        autograd::ViewGeometry{r.sizes(), r.strides(), r.storage_offset() - base.storage_offset()},
        autograd::metadata_of(base));
    node->mutable_next_edges().push_back(autograd::gradient_edge(base));
    node->add_input_metadata(autograd::metadata_of(r));
    autograd::set_history(r, node, 0);
  }
}

void connect_backward(const std::shared_ptr<const BackwardFunction>& fn,
                      const std::vector<Tensor>& args, const std::vector<Tensor>& params,
                      std::vector<Tensor>& outputs, int num_results) {
  auto node = autograd::make_node<CompiledFunctionBackward>(fn);
  for (const auto& in : fn->inputs)
    node->mutable_next_edges().push_back(
        autograd::gradient_edge(in.arg >= 0 ? args.at(static_cast<size_t>(in.arg)) : in.leaf));
  const std::vector<Tensor> saved(outputs.begin() + num_results, outputs.end());
  outputs.resize(static_cast<size_t>(num_results));
  for (size_t i = 0; i < fn->diff_results.size(); ++i) {
    Tensor& r = outputs.at(static_cast<size_t>(fn->diff_results[i]));
    r = plain(r);
    node->add_input_metadata(autograd::metadata_of(r));
    autograd::set_history(r, node, static_cast<uint32_t>(i));
  }
  node->save(args, params, saved);
}

}  // namespace smelt::compiler
