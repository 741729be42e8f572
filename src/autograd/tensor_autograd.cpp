// The autograd methods of Tensor (smelt/tensor.h, semantics in smelt/autograd.h):
// requires_grad, grad, grad_fn, backward, detach, hooks.
#include <atomic>

#include "autograd/graph.h"
#include "smelt/ops.h"

namespace smelt {

using autograd::autograd_meta;

namespace {
std::atomic<unsigned> g_next_hook{1};
}  // namespace

bool Tensor::requires_grad() const { return impl_ && detail::impl_requires_grad(impl_.get()); }

const Tensor& Tensor::requires_grad_(bool requires_grad) const {
  SMELT_CHECK(defined(), "requires_grad_: the tensor is undefined");
  if (!is_leaf()) {
    SMELT_CHECK(requires_grad,
                "requires_grad_: you can only change requires_grad flags of leaf variables. If "
                "you want to use a computed variable in a subgraph that doesn't require "
                "differentiation use var_no_grad = var.detach() (tensor {})",
                autograd::tensor_desc(*this));
    return *this;
  }
  if (requires_grad) {
    SMELT_CHECK(is_floating(dtype()),
                "requires_grad_: only Tensors of floating point dtype can require gradients (got "
                "{}, shape {}); convert it first, e.g. x.to(smelt::float32)",
                dtype_name(dtype()), detail::shape_str(sizes()));
    autograd::ensure_recorder();
  }
  if (requires_grad || impl_->autograd) autograd_meta(*this).requires_grad = requires_grad;
  return *this;
}

const Tensor& Tensor::grad() const {
  static const Tensor undefined;
  if (detail::TraceContext* ctx = detail::trace_context(); ctx && impl_)
    ctx->note_grad(*this, false);
  const detail::AutogradMeta* m = impl_ ? impl_->autograd.get() : nullptr;
  return m ? m->grad : undefined;
}

Tensor& Tensor::mutable_grad() const {
  SMELT_CHECK(defined(), "mutable_grad: the tensor is undefined");
  // The handle may be read before it is set: a read as far as a trace knows.
  if (detail::TraceContext* ctx = detail::trace_context()) ctx->note_grad(*this, false);
  return autograd_meta(*this).grad;
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  if (!impl_) return nullptr;
  const detail::AutogradMeta* m = impl_->autograd.get();
  const bool view = impl_->view_base && !impl_->view_no_grad;
  if (!view || !requires_grad()) return m ? m->grad_fn : nullptr;
  if (m && !m->grad_fn && m->requires_grad) return nullptr;  // a leaf that is a view
  return autograd::gradient_edge(*this).function;            // rebuilt if stale
}

bool Tensor::is_leaf() const { return grad_fn() == nullptr; }

uint32_t Tensor::output_nr() const {
  const detail::AutogradMeta* m = impl_ ? impl_->autograd.get() : nullptr;
  return m ? m->output_nr : 0;
}

uint32_t Tensor::_version() const {
  SMELT_CHECK(defined(), "_version: the tensor is undefined");
  return storage()->version();
}

bool Tensor::is_view() const { return impl_ && impl_->view_base != nullptr; }

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph, bool create_graph,
                      const std::vector<Tensor>& inputs) const {
  autograd::backward({*this},
                     gradient.defined() ? std::vector<Tensor>{gradient} : std::vector<Tensor>{},
                     retain_graph, create_graph, inputs);
}

Tensor Tensor::detach() const {
  SMELT_CHECK(defined(), "detach: the tensor is undefined");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->sizes = impl_->sizes;
  impl->strides = impl_->strides;
  impl->offset = impl_->offset;
  impl->dtype = impl_->dtype;
  impl->device = impl_->device;
  impl->wrapped_number = impl_->wrapped_number;
  return Tensor(std::move(impl));
}

const Tensor& Tensor::detach_() const {
  SMELT_CHECK(defined(), "detach_: the tensor is undefined");
  SMELT_CHECK(!(is_view() && requires_grad()),
              "detach_: Can't detach views in-place. Use detach() instead (tensor {})",
              autograd::tensor_desc(*this));
  if (auto* m = impl_->autograd.get()) {
    m->grad_fn = nullptr;
    m->requires_grad = false;
    m->output_nr = 0;
  }
  return *this;
}

void Tensor::retain_grad() const {
  SMELT_CHECK(requires_grad(),
              "retain_grad: can't retain_grad on Tensor that has requires_grad=False ({})",
              autograd::tensor_desc(*this));
  if (is_leaf()) return;  // leaves keep their gradient anyway
  detail::AutogradMeta& m = autograd_meta(*this);
  if (m.retains_grad) return;
  m.retains_grad = true;
  std::weak_ptr<TensorImpl> weak = impl_;  // the hook lives on grad_fn: no cycle
  grad_fn()->add_tensor_pre_hook(output_nr(), g_next_hook++, [weak](const Tensor& g) {
    if (auto impl = weak.lock()) {
      Tensor& grad = autograd_meta(Tensor(impl)).grad;
      if (!grad.defined()) {
        grad = GradMode::is_enabled() ? g : smelt::clone(g);
      } else {
        grad = smelt::add(grad, g);
      }
    }
    return Tensor();
  });
}

bool Tensor::retains_grad() const {
  const detail::AutogradMeta* m = impl_ ? impl_->autograd.get() : nullptr;
  return m && m->retains_grad;
}

unsigned Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  SMELT_CHECK(requires_grad(),
              "register_hook: cannot register a hook on a tensor that doesn't require gradient "
              "({}); call requires_grad_() first",
              autograd::tensor_desc(*this));
  const unsigned handle = g_next_hook++;
  if (auto fn = grad_fn()) {
    fn->add_tensor_pre_hook(output_nr(), handle, std::move(hook));
  } else {
    autograd_meta(*this).hooks.emplace_back(handle, std::move(hook));
  }
  return handle;
}

void Tensor::remove_hook(unsigned handle) const {
  if (auto* m = impl_ ? impl_->autograd.get() : nullptr) {
    auto& hooks = m->hooks;
    for (auto it = hooks.begin(); it != hooks.end(); ++it)
      if (it->first == handle) {
        hooks.erase(it);
        return;
      }
  }
  if (auto fn = grad_fn(); fn && fn->remove_tensor_pre_hook(handle)) return;
  detail::throw_error(fmt::format("remove_hook: no hook with handle {} on this tensor ({})", handle,
                                  autograd::tensor_desc(*this)));
}

}  // namespace smelt
