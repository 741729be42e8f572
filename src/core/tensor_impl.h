// TensorImpl: the metadata behind a Tensor handle, plus helpers on shapes.
#pragma once
#include <memory>

#include "core/autograd_meta.h"
#include "core/storage.h"
#include "smelt/tensor.h"

namespace smelt {

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;       // in elements
  int64_t offset = 0;  // in elements
  DType dtype = DType::Float32;
  Device device;
  bool wrapped_number = false;  // 0-dim tensor made from a C++ number
  /// Autograd state; null for tensors autograd has never touched (core/autograd_meta.h).
  std::shared_ptr<detail::AutogradMeta> autograd;
  /// For a view (made by make_view): the tensor that owns the memory (never
  /// itself a view). Autograd rebases the base's history when the view is
  /// written in place. Null for tensors that are not views (detach() gives none).
  std::shared_ptr<TensorImpl> view_base;
  /// The view was made while grad mode was off (NoGradGuard): it does not
  /// inherit its base's requires_grad, as in PyTorch.
  bool view_no_grad = false;
};

namespace detail {
/// Whether `t` requires grad (Tensor::requires_grad): a leaf flagged so, a tensor
/// with a grad_fn, or a view made in grad mode of a base that requires grad.
inline bool impl_requires_grad(const TensorImpl* t) {
  if (const AutogradMeta* m = t->autograd.get(); m && (m->requires_grad || m->grad_fn)) return true;
  if (!t->view_base || t->view_no_grad) return false;
  const AutogradMeta* b = t->view_base->autograd.get();
  return b && (b->requires_grad || b->grad_fn);
}
int64_t shape_numel(const Shape& s);
Shape contiguous_strides(const Shape& s);
/// Normalizes a possibly negative dim against `ndim`; Error naming `op` if out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
/// "[2, 3]"
std::string shape_str(const Shape& s);
/// A tensor of `sizes` viewing `base`'s storage with the given strides/offset
/// (a view of base for autograd; no history is recorded here: the view ops do that).
Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset);
/// A tensor over `t`'s memory (same sizes, strides, offset) with no autograd
/// state and no view base: neither a view nor a leaf of anything.
Tensor alias(const Tensor& t);
/// New contiguous tensor on `device` (a tracer storage is never made here).
/// When the device is out of memory, raises OutOfMemoryError naming `op` (or,
/// when null, the op of the innermost OpScope of this thread), the shape, the
/// dtype and the bytes, and saying what to do. With `pinned` (a backend's
/// pinned allocator), a CPU tensor in page-locked memory (Storage::allocate_pinned).
Tensor make_empty(const Shape& sizes, DType dtype, Device device, const char* op = nullptr,
                  Allocator* pinned = nullptr);
/// While alive, names the op on whose behalf this thread allocates (the
/// out-of-memory error of make_empty names it). Scopes nest.
class OpScope {
 public:
  explicit OpScope(const char* op);
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  const char* prev_;
};
/// "512 bytes", "1.5 KiB", "16.0 GiB".
std::string bytes_str(int64_t bytes);
/// Byte size a tensor needs from its storage: offset + max reach, in elements.
int64_t storage_extent(const Shape& sizes, const Shape& strides, int64_t offset);
}  // namespace detail

}  // namespace smelt
