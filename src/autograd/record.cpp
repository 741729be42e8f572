// How ops record history (detail::GradRecorder, called by ops/dispatch.cpp and the
// view ops): one OpNode per recorded op, its outputs connected to it; and the
// in-place rules: a leaf that requires grad refuses writes, a written tensor
// takes the write into its history, a written view rewrites its base's (CopySlices).
// Tracers (smelt::compile) record the same nodes, so a backward pass run while
// tracing is traced through the same derivatives.
#include <mutex>

#include "autograd/graph.h"
#include "smelt/ops.h"

namespace smelt::autograd {

namespace {

bool is_leaf_requiring_grad(const Tensor& t) {
  const detail::AutogradMeta* m = t.impl()->autograd.get();
  return m && m->requires_grad && !m->grad_fn;
}

/// The outputs of a non-differentiable op over inputs that require grad.
void mark_nondifferentiable(const detail::OpDef* def, const std::vector<Tensor>& outputs) {
  for (const auto& o : outputs)
    if (o.defined()) autograd_meta(o).nondifferentiable_op = def->name.data();
}

class Recorder final : public detail::GradRecorder {
 public:
  void record(const std::string& op, const std::vector<Tensor>& inputs, const detail::Attrs& attrs,
              const std::vector<Tensor>& outputs) override {
    const detail::OpDef* def = detail::find_op(op);
    if (def && !def->differentiable) {
      mark_nondifferentiable(def, outputs);
      return;
    }
    std::vector<Edge> edges(inputs.size());
    bool any = false;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = inputs[i];
      if (!t.defined() || !is_floating(t.dtype()) || !detail::impl_requires_grad(t.impl()))
        continue;
      edges[i] = gradient_edge(t);
      any |= edges[i].is_valid();
    }
    if (!any) return;
    std::shared_ptr<Node> node;
    std::shared_ptr<OpNode> op_node;
    if (def && def->derivative) {
      std::vector<detail::OutMeta> meta;
      meta.reserve(inputs.size());
      for (const auto& t : inputs)
        meta.push_back(t.defined() ? detail::OutMeta{t.sizes(), t.dtype(), t.device()}
                                   : detail::OutMeta{{}, DType::Float32, Device()});
      op_node = make_node<OpNode>(*def, attrs, std::move(meta));
      node = op_node;
    } else {
      node = make_node<NotImplementedNode>(op);
    }
    node->mutable_next_edges() = std::move(edges);
    for (uint32_t i = 0; i < outputs.size(); ++i) {
      const Tensor& o = outputs[i];
      node->add_input_metadata(metadata_of(o));
      if (is_floating(o.dtype())) set_history(o, node, i);
    }
    if (op_node) op_node->save(inputs, outputs);
  }

  void before_write(const Tensor& dst, const Tensor& src) override {
    const TensorImpl* impl = dst.impl();
    if (impl->view_base) view_geometry(dst, Tensor(impl->view_base));  // Error if unsupported
    if (impl->view_base && !impl->view_no_grad) {
      Tensor base(impl->view_base);
      SMELT_CHECK(!is_leaf_requiring_grad(base),
                  "a view of a leaf Variable that requires grad is being used in an in-place "
                  "operation (tensor {}, a view of {}); modify it under smelt::NoGradGuard or "
                  "clone() it first",
                  tensor_desc(dst), tensor_desc(base));
    } else if (impl->view_base && impl->view_no_grad &&
               detail::impl_requires_grad(impl->view_base.get())) {
      detail::throw_error(fmt::format(
          "A view was created in no_grad mode and is being modified inplace with grad mode "
          "enabled (tensor {}). Given that this use case is ambiguous and error-prone, it is "
          "forbidden. Either create the view outside no_grad mode or do the write under "
          "smelt::NoGradGuard",
          tensor_desc(dst)));
    }
    SMELT_CHECK(!is_leaf_requiring_grad(dst),
                "a leaf Variable that requires grad is being used in an in-place operation "
                "(tensor {}); modify it under smelt::NoGradGuard (as optimizers do), or use an "
                "out-of-place op",
                tensor_desc(dst));
    // x.op_(...) is x.copy_(op(x, ...)): the op's node saved x's current values.
    if (const detail::AutogradMeta* m = src.impl()->autograd.get(); m && m->grad_fn)
      if (auto* n = dynamic_cast<OpNode*>(m->grad_fn.get())) n->preserve_before_write(dst);
  }

  void after_write(const Tensor& dst, const Tensor& src) override {
    const TensorImpl* impl = dst.impl();
    const bool src_grad = detail::impl_requires_grad(src.impl()) && is_floating(dst.dtype());
    Edge src_edge = src_grad ? gradient_edge(src) : Edge{};
    if (impl->view_base) {
      // A write through a view: the base's history becomes CopySlices.
      Tensor base(impl->view_base);
      ViewGeometry geo = view_geometry(dst, base);
      Edge base_edge = detail::impl_requires_grad(base.impl()) ? gradient_edge(base) : Edge{};
      auto node = make_node<CopySlices>(geo, metadata_of(src));
      node->mutable_next_edges() = {std::move(base_edge), std::move(src_edge)};
      node->add_input_metadata(metadata_of(base));
      set_history(base, node, 0);
      // The view's history: its base's.
      auto view_node = make_node<ViewOfBase>(geo, metadata_of(base));
      view_node->mutable_next_edges().push_back(Edge{node, 0});
      view_node->add_input_metadata(metadata_of(dst));
      set_history(dst, view_node, 0);
      return;
    }
    if (src_edge.is_valid() && !dynamic_cast<AccumulateGrad*>(src_edge.function.get()) &&
        src.sizes() == dst.sizes() && src.dtype() == dst.dtype()) {
      // The usual in-place op (x.copy_(op(x, ...))): dst now is the op's result.
      set_history(dst, src_edge.function, src_edge.input_nr);
      return;
    }
    const detail::OpDef* def = detail::find_op("copy_");
    auto node =
        make_node<OpNode>(*def, detail::Attrs{},
                          std::vector<detail::OutMeta>{{dst.sizes(), dst.dtype(), dst.device()},
                                                       {src.sizes(), src.dtype(), src.device()}});
    node->mutable_next_edges() = {Edge{}, std::move(src_edge)};
    node->add_input_metadata(metadata_of(dst));
    set_history(dst, node, 0);
  }
};

}  // namespace

void ensure_recorder() {
  static Recorder recorder;
  static std::once_flag once;
  std::call_once(once, [] { detail::set_grad_recorder(&recorder); });
}

}  // namespace smelt::autograd
