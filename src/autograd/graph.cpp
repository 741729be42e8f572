// The backward graph's pieces (graph.h): nodes, saved tensors, the connection of
// tensors to nodes. Formulas for PyTorch parity are cited where they are used.
#include "autograd/graph.h"

#include <cctype>

#include "ops/derivatives.h"
#include "smelt/ops.h"

namespace smelt::autograd {

using detail::AutogradMeta;

// ---- Node ----------------------------------------------------------------------------------

namespace {
thread_local uint64_t g_next_sequence_nr = 0;
thread_local std::vector<Node*>* g_pending_deletes = nullptr;
}  // namespace

Node::Node() : sequence_nr_(g_next_sequence_nr++) {}

uint64_t next_sequence_nr() { return g_next_sequence_nr; }
Node::~Node() = default;

uint32_t Node::add_input_metadata(InputMetadata m) {
  input_metadata_.push_back(std::move(m));
  return static_cast<uint32_t>(input_metadata_.size() - 1);
}

void Node::add_tensor_pre_hook(uint32_t input_nr, unsigned handle,
                               std::function<Tensor(const Tensor&)> hook) {
  pre_hooks_.push_back({input_nr, handle, std::move(hook)});
}

bool Node::remove_tensor_pre_hook(unsigned handle) {
  for (auto it = pre_hooks_.begin(); it != pre_hooks_.end(); ++it)
    if (it->handle == handle) {
      pre_hooks_.erase(it);
      return true;
    }
  return false;
}

void Node::call_tensor_pre_hooks(std::vector<Tensor>& grads) {
  for (auto& h : pre_hooks_) {
    Tensor& g = grads.at(h.input_nr);
    if (!g.defined()) continue;
    Tensor r = h.fn(g);
    if (r.defined()) g = r;
  }
}

void delete_node(Node* n) {
  if (g_pending_deletes != nullptr) {  // inside an outer delete_node: queue it there
    g_pending_deletes->push_back(n);
    return;
  }
  std::vector<Node*> pending{n};
  g_pending_deletes = &pending;
  while (!pending.empty()) {
    Node* x = pending.back();
    pending.pop_back();
    delete x;  // the nodes it held reach delete_node and are queued, not deleted here
  }
  g_pending_deletes = nullptr;
}

// ---- tensors -------------------------------------------------------------------------------

AutogradMeta& autograd_meta(const Tensor& t) {
  auto& m = t.impl()->autograd;
  if (!m) m = std::make_shared<AutogradMeta>();
  return *m;
}

InputMetadata metadata_of(const Tensor& t) { return {t.sizes(), t.dtype(), t.device()}; }

std::string tensor_desc(const Tensor& t) {
  return fmt::format("[{} {}]", dtype_name(t.dtype()), detail::shape_str(t.sizes()));
}

std::shared_ptr<Node> grad_accumulator(const Tensor& t) {
  AutogradMeta& m = autograd_meta(t);
  if (auto acc = m.grad_accumulator.lock()) return acc;
  auto acc = make_node<AccumulateGrad>(t.impl_ptr());
  m.grad_accumulator = acc;
  return acc;
}

void set_history(const Tensor& t, const std::shared_ptr<Node>& fn, uint32_t output_nr) {
  AutogradMeta& m = autograd_meta(t);
  m.grad_fn = fn;
  m.output_nr = output_nr;
  m.attr_version = t.storage()->version();
}

Edge gradient_edge(const Tensor& t) {
  TensorImpl* impl = t.impl();
  AutogradMeta* m = impl->autograd.get();
  const bool view = impl->view_base && !impl->view_no_grad;
  if (m && m->grad_fn && (!view || m->attr_version == t.storage()->version()))
    return {m->grad_fn, m->output_nr};
  if (m && !m->grad_fn && m->requires_grad) return {grad_accumulator(t), 0};
  if (view) {
    Tensor base(impl->view_base);
    if (detail::impl_requires_grad(base.impl())) {
      // The memory was written in place since this view's history was recorded
      // (or the base started to require grad): the view's history is now its base's.
      Edge base_edge = gradient_edge(base);
      auto node = make_node<ViewOfBase>(view_geometry(t, base), metadata_of(base));
      node->mutable_next_edges().push_back(std::move(base_edge));
      node->add_input_metadata(metadata_of(t));
      set_history(t, node, 0);
      return {node, 0};
    }
  }
  if (m && m->grad_fn) return {m->grad_fn, m->output_nr};
  return {};
}

// ---- SavedVariable -------------------------------------------------------------------------

SavedVariable::SavedVariable(const Tensor& t, bool is_output, const std::shared_ptr<Node>& owner)
    : saved_(t.defined()), is_output_(is_output) {
  if (!t.defined()) return;
  version_ = t.storage()->version();
  if (is_output) {
    data_ = detail::alias(t);
    owner_ = owner;
    if (auto* m = t.impl()->autograd.get()) output_nr_ = m->output_nr;
  } else {
    data_ = t;
  }
}

Tensor SavedVariable::unpack(const Node& node) const {
  if (!saved_) return Tensor();
  SMELT_CHECK(!released_,
              "Trying to backward through the graph a second time (or directly access saved "
              "tensors after they have already been freed). Saved intermediate values of the "
              "graph are freed when you call .backward() or autograd::grad(). Specify "
              "retain_graph=true if you need to backward through the graph a second time or if "
              "you need to access saved tensors after calling backward (node {})",
              node.name());
  const uint32_t now = data_.storage()->version();
  if (now != version_) {
    std::string which;
    if (is_output_) {
      which = fmt::format(", which is output {} of {},", output_nr_, node.name());
    } else if (auto* m = data_.impl()->autograd.get(); m && m->grad_fn) {
      which = fmt::format(", which is output {} of {},", m->output_nr, m->grad_fn->name());
    }
    detail::throw_error(fmt::format(
        "one of the variables needed for gradient computation has been modified by an inplace "
        "operation: {}{} is at version {}; expected version {} instead. Hint: {} saved it for "
        "backward; do not modify it in place before backward() (use the out-of-place op, or "
        "clone() it first)",
        tensor_desc(data_), which, now, version_, node.name()));
  }
  if (!GradMode::is_enabled()) return data_;
  // create_graph: the saved tensor with its history, so the backward is recorded too.
  if (is_output_) {
    auto owner = owner_.lock();
    if (!owner) return data_;
    Tensor t = detail::alias(data_);
    set_history(t, owner, output_nr_);
    return t;
  }
  if (preserved_edge_.is_valid()) {
    Tensor t = detail::alias(data_);
    set_history(t, preserved_edge_.function, preserved_edge_.input_nr);
    return t;
  }
  return data_;
}

void SavedVariable::reset() {
  if (!saved_) return;
  data_ = Tensor();
  preserved_edge_ = {};
  released_ = true;
}

void SavedVariable::preserve_before_write(const Tensor& dst) {
  if (!saved_ || released_ || is_output_ || data_.storage() != dst.storage() ||
      data_.storage()->version() != version_)
    return;
  Edge e = gradient_edge(data_);
  Tensor copy;
  {
    NoGradGuard no_grad;
    copy = clone(data_);
  }
  data_ = copy;
  version_ = copy.storage()->version();
  preserved_edge_ = std::move(e);
}

// ---- OpNode --------------------------------------------------------------------------------

OpNode::OpNode(const detail::OpDef& def, detail::Attrs attrs,
               std::vector<detail::OutMeta> input_meta)
    : def_(def), attrs_(std::move(attrs)), input_meta_(std::move(input_meta)) {}

std::string OpNode::name() const {
  if (def_.name == "copy_") return "CopyBackwards";
  if (def_.name == "to_dtype") return "ToCopyBackward0";
  std::string n;
  bool upper = true;
  for (char ch : def_.name) {
    if (ch == '_') {
      upper = true;
      continue;
    }
    n += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(ch))) : ch;
    upper = false;
  }
  return n + "Backward0";
}

void OpNode::save(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
  auto self = shared_from_this();
  saved_inputs_.resize(inputs.size());
  has_saved_input_.assign(inputs.size(), false);
  for (size_t i = 0; i < inputs.size() && i < 32; ++i)
    if (def_.save_inputs & detail::save_bit(static_cast<int>(i))) {
      saved_inputs_[i] = SavedVariable(inputs[i], false, self);
      has_saved_input_[i] = true;
    }
  saved_outputs_.resize(outputs.size());
  has_saved_output_.assign(outputs.size(), false);
  for (size_t i = 0; i < outputs.size() && i < 32; ++i)
    if (def_.save_outputs & detail::save_bit(static_cast<int>(i))) {
      saved_outputs_[i] = SavedVariable(outputs[i], true, self);
      has_saved_output_[i] = true;
    }
}

void OpNode::release_variables() {
  for (auto& s : saved_inputs_) s.reset();
  for (auto& s : saved_outputs_) s.reset();
}

void OpNode::preserve_before_write(const Tensor& dst) {
  for (auto& s : saved_inputs_) s.preserve_before_write(dst);
}

std::vector<Tensor> OpNode::apply(std::vector<Tensor>&& grads) {
  std::vector<Tensor> inputs(saved_inputs_.size()), outputs(saved_outputs_.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (has_saved_input_[i]) inputs[i] = saved_inputs_[i].unpack(*this);
  for (size_t i = 0; i < outputs.size(); ++i)
    if (has_saved_output_[i]) outputs[i] = saved_outputs_[i].unpack(*this);
  // Several outputs with some gradients missing: zeros stand in (GradContext's
  // promise; integer outputs such as max's indices never get a gradient).
  for (uint32_t i = 0; i < grads.size(); ++i) {
    const InputMetadata& m = input_metadata(i);
    if (!grads[i].defined() && is_floating(m.dtype))
      grads[i] = zeros(m.sizes, TensorOptions(m.dtype).device(m.device));
  }
  std::vector<bool> needs(next_edges_.size());
  for (size_t i = 0; i < needs.size(); ++i) needs[i] = next_edges_[i].is_valid();
  const detail::GradContext ctx{inputs, outputs, input_meta_, attrs_, grads, needs};
  std::vector<Tensor> result = def_.derivative(ctx);
  SMELT_INTERNAL_ASSERT(result.size() <= next_edges_.size(),
                        "{}: the derivative of '{}' returned {} gradients for {} inputs", name(),
                        def_.name, result.size(), next_edges_.size());
  result.resize(next_edges_.size());
  // Broadcast and promotion: each gradient summed to its input's shape, in its dtype.
  for (size_t i = 0; i < result.size(); ++i) {
    if (!needs[i] || !result[i].defined()) {
      result[i] = Tensor();
      continue;
    }
    const detail::OutMeta& m = input_meta_[i];
    if (result[i].sizes() != m.sizes) result[i] = detail::sum_to(result[i], m.sizes);
    if (result[i].dtype() != m.dtype) result[i] = to_dtype(result[i], m.dtype);
  }
  return result;
}

// ---- AccumulateGrad ------------------------------------------------------------------------

AccumulateGrad::AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {
  add_input_metadata(metadata_of(Tensor(leaf_)));
}

void AccumulateGrad::call_tensor_pre_hooks(std::vector<Tensor>& grads) {
  Node::call_tensor_pre_hooks(grads);
  AutogradMeta* m = leaf_->autograd.get();
  if (!m || grads.empty() || !grads[0].defined()) return;
  auto hooks = m->hooks;  // a hook may register or remove hooks
  for (auto& [handle, fn] : hooks) {
    Tensor r = fn(grads[0]);
    if (r.defined()) grads[0] = r;
  }
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  Tensor g = std::move(grads.at(0));
  if (!g.defined()) return {};
  detail::TraceContext* ctx = detail::trace_context();
  if (ctx) {
    // Reads the .grad (to accumulate into it), then replaces it.
    ctx->note_grad(Tensor(leaf_), false);
    ctx->note_grad(Tensor(leaf_), true);
  }
  AutogradMeta& m = autograd_meta(Tensor(leaf_));
  if (GradMode::is_enabled()) {  // create_graph: .grad keeps the graph of the gradient
    m.grad = m.grad.defined() ? add(m.grad, g) : g;
    return {};
  }
  if (!m.grad.defined()) {
    // Take the gradient itself when nothing else can see it; else a copy that
    // later in-place accumulation cannot write through.
    const long own = ctx ? ctx->own_storage_refs(g) : 0;
    const bool sole = g.impl_ptr().use_count() == 1 && g.storage().use_count() == 1 + own &&
                      g.is_contiguous() && g.impl()->autograd == nullptr && !g.impl()->view_base;
    m.grad = sole ? g : clone(g);
  } else {
    m.grad.add_(g);
  }
  return {};
}

// ---- views written in place --------------------------------------------------------------------

ViewGeometry view_geometry(const Tensor& v, const Tensor& base) {
  SMELT_CHECK(base.is_contiguous(),
              "autograd: a view of a non-contiguous tensor {} that requires grad was written in "
              "place; this case is not supported: clone() the base first or use out-of-place ops",
              tensor_desc(base));
  return {v.sizes(), v.strides(), v.storage_offset() - base.storage_offset()};
}

Tensor ViewGeometry::apply(const Tensor& t) const {
  return detail::make_view(t, sizes, strides, t.storage_offset() + offset);
}

CopySlices::CopySlices(ViewGeometry view, InputMetadata src)
    : view_(std::move(view)), src_(std::move(src)) {}

std::vector<Tensor> CopySlices::apply(std::vector<Tensor>&& grads) {
  Tensor g = grads.at(0).contiguous();
  Tensor rest = clone(g);
  Tensor region = view_.apply(rest);
  std::vector<Tensor> r(2);
  if (next_edges_[1].is_valid()) {
    Tensor gs = clone(region);
    if (gs.sizes() != src_.sizes) gs = detail::sum_to(gs, src_.sizes);
    if (gs.dtype() != src_.dtype) gs = to_dtype(gs, src_.dtype);
    r[1] = gs;
  }
  if (next_edges_[0].is_valid()) {
    region.zero_();
    r[0] = rest;
  }
  return r;
}

ViewOfBase::ViewOfBase(ViewGeometry view, InputMetadata base)
    : view_(std::move(view)), base_(std::move(base)) {}

std::vector<Tensor> ViewOfBase::apply(std::vector<Tensor>&& grads) {
  Tensor g = grads.at(0);
  // An expanded view (stride 0) repeats base elements: their gradients add up.
  ViewGeometry geo = view_;
  std::vector<int64_t> repeated;
  for (size_t d = 0; d < geo.sizes.size(); ++d)
    if (geo.strides[d] == 0 && geo.sizes[d] > 1) {
      repeated.push_back(static_cast<int64_t>(d));
      geo.sizes[d] = 1;
    }
  if (!repeated.empty()) g = sum(g, repeated, /*keepdim=*/true);
  Tensor out = zeros(base_.sizes, TensorOptions(g.dtype()).device(base_.device));
  geo.apply(out).copy_(g);
  return {out};
}

std::vector<Tensor> NotImplementedNode::apply(std::vector<Tensor>&&) {
  detail::throw_error(fmt::format(
      "the derivative for '{}' is not implemented; compute this part under smelt::NoGradGuard "
      "or detach() its inputs",
      op_));
}

}  // namespace smelt::autograd
