// smelt/tensor.h — the Tensor handle.
//
// A Tensor is a reference-counted handle to a TensorImpl: sizes, strides (in
// elements), a storage offset, a dtype, a device and a Storage. Views share
// storage with their base, so a write through either is seen by both, as in
// PyTorch. While smelt::compile traces a function, tensors are *tracers*: same
// metadata, no data; every op records a graph node instead of running a kernel.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "smelt/device.h"
#include "smelt/dtype.h"
#include "smelt/error.h"
#include "smelt/scalar.h"

namespace smelt {

namespace cuda {
class Stream;  // smelt/cuda.h
}

using Shape = std::vector<int64_t>;
struct TensorImpl;
class Storage;
namespace autograd {
class Node;
}  // namespace autograd

/// dtype + device (+ requires_grad) for factories:
/// `smelt::zeros({2, 3}, smelt::TensorOptions().dtype(int64))` or simply
/// `smelt::zeros({2, 3}, smelt::int64)`; `TensorOptions().requires_grad(true)` makes
/// the new tensor a leaf that requires grad (floating dtypes only, else Error).
struct TensorOptions {
  DType dtype_ = DType::Float32;
  Device device_ = Device();
  bool has_dtype = false;
  bool requires_grad_ = false;
  TensorOptions() = default;
  TensorOptions(DType t) : dtype_(t), has_dtype(true) {}
  TensorOptions(Device d) : device_(d) {}
  TensorOptions dtype(DType t) const {
    TensorOptions o = *this;
    o.dtype_ = t;
    o.has_dtype = true;
    return o;
  }
  TensorOptions device(Device d) const {
    TensorOptions o = *this;
    o.device_ = d;
    return o;
  }
  TensorOptions requires_grad(bool r = true) const {
    TensorOptions o = *this;
    o.requires_grad_ = r;
    return o;
  }
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  /// Same TensorImpl (not merely the same values or storage).
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // ---- metadata ----------------------------------------------------------
  const Shape& sizes() const;
  const Shape& shape() const { return sizes(); }
  const Shape& strides() const;
  /// Size of `dim` (negative dims count from the end); Error if out of range.
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t storage_offset() const;
  int64_t dim() const;
  int64_t numel() const;
  DType dtype() const;
  DType scalar_type() const { return dtype(); }
  Device device() const;
  size_t element_size() const { return itemsize(dtype()); }
  bool is_contiguous() const;
  /// True while tracing: this tensor has metadata but no data.
  bool is_tracer() const;
  /// True for a 0-dim tensor made from a C++ number (lower promotion priority).
  bool is_wrapped_number() const;
  const std::shared_ptr<Storage>& storage() const;

  // ---- data access (Error on a tracer: a graph break) ----------------------
  /// Pointer to element [0,...,0] (storage data + offset).
  void* data_ptr() const;
  template <class T>
  T* data_ptr() const;  // Error if T does not match dtype()
  /// The single element of a one-element tensor, converted to T.
  template <class T>
  T item() const;
  Scalar item() const;
  /// All elements in row-major order, converted to T.
  template <class T>
  std::vector<T> to_vector() const;

  // ---- conversions ---------------------------------------------------------
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(DType t) const;
  /// A copy on device `d` (this tensor itself when it is there already).
  /// From a GPU to the CPU the host waits for the copy; from the CPU to a GPU
  /// the copy is queued (the source may be reused at once).
  Tensor to(Device d) const;
  Tensor to(Device d, DType t) const;
  /// to(d), asynchronous where PyTorch's non_blocking=True is: from a pinned
  /// CPU tensor (pin_memory(), contiguous) to a GPU, the copy is queued on the
  /// current stream of d and this returns at once (the pinned memory is not
  /// reused before the copy has run, even if this tensor is dropped); from a
  /// GPU to the CPU, the result is a new pinned tensor whose values are there
  /// only once the GPU's current stream has reached the copy (synchronize it,
  /// or an Event recorded after). Anything else, and non_blocking = false,
  /// is to(d).
  Tensor to(Device d, bool non_blocking) const;
  /// A contiguous copy of this CPU tensor in pinned (page-locked) host
  /// memory, from and to which copies to a GPU can be asynchronous
  /// (torch.Tensor.pin_memory); this tensor itself when it is pinned already.
  /// Error for a tensor on another device, or without CUDA or a GPU. The
  /// copy has no autograd history.
  Tensor pin_memory() const;
  /// True for a CPU tensor in pinned memory (pin_memory(), to(cpu, true)).
  bool is_pinned() const;
  /// torch.Tensor.record_stream: this CUDA tensor's memory is used by work
  /// queued on `stream` (not the stream current where it was allocated), so
  /// once freed, the caching allocator reuses it only after the work queued
  /// on `stream` up to the free has run. `stream` must stay alive until this
  /// tensor's memory is freed. Error for a non-CUDA tensor or a stream of
  /// another device.
  void record_stream(const cuda::Stream& stream) const;
  /// to(cpu) and to(the current CUDA device) (Error without CUDA or a GPU).
  Tensor cpu() const;
  Tensor cuda() const;
  bool is_cuda() const { return device().is_cuda(); }
  bool is_cpu() const { return device().is_cpu(); }

  // ---- views (share storage) ------------------------------------------------
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor expand(const Shape& size) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, const Shape& sizes) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
               int64_t step = 1) const;
  /// x[i] along dim 0.
  Tensor operator[](int64_t index) const { return select(0, index); }

  // ---- ops as methods, as libtorch's Tensor has them ----------------------------
  // x.op(args) == smelt::op(x, args) (ops.h documents each op). Where an
  // argument is a number, it is a wrapped number as in `x + 2` (lowest
  // promotion priority).

  // unary pointwise
  Tensor neg() const;
  Tensor abs() const;
  Tensor sign() const;
  Tensor exp() const;
  Tensor exp2() const;
  Tensor expm1() const;
  Tensor log() const;
  Tensor log2() const;
  Tensor log1p() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor reciprocal() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tan() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor erf() const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round() const;
  Tensor trunc() const;
  Tensor logical_not() const;
  Tensor bitwise_not() const;
  Tensor isnan() const;
  Tensor isinf() const;
  Tensor nan_to_num(std::optional<double> nan = 0.0, std::optional<double> posinf = std::nullopt,
                    std::optional<double> neginf = std::nullopt) const;

  // binary pointwise: `other` is a tensor (broadcast) or a number
  Tensor add(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor add(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor sub(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor sub(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(const Scalar& other) const;
  /// rounding_mode: std::nullopt (true division), "trunc" or "floor".
  Tensor div(const Tensor& other,
             const std::optional<std::string>& rounding_mode = std::nullopt) const;
  Tensor div(const Scalar& other,
             const std::optional<std::string>& rounding_mode = std::nullopt) const;
  Tensor floor_divide(const Tensor& other) const;
  Tensor floor_divide(const Scalar& other) const;
  Tensor remainder(const Tensor& other) const;
  Tensor remainder(const Scalar& other) const;
  Tensor fmod(const Tensor& other) const;
  Tensor fmod(const Scalar& other) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(const Scalar& exponent) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor fmax(const Tensor& other) const;
  Tensor fmin(const Tensor& other) const;
  Tensor atan2(const Tensor& other) const;
  Tensor eq(const Tensor& other) const;
  Tensor eq(const Scalar& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(const Scalar& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(const Scalar& other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(const Scalar& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(const Scalar& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(const Scalar& other) const;
  Tensor logical_and(const Tensor& other) const;
  Tensor logical_or(const Tensor& other) const;
  Tensor logical_xor(const Tensor& other) const;
  Tensor bitwise_and(const Tensor& other) const;
  Tensor bitwise_and(const Scalar& other) const;
  Tensor bitwise_or(const Tensor& other) const;
  Tensor bitwise_or(const Scalar& other) const;
  Tensor bitwise_xor(const Tensor& other) const;
  Tensor bitwise_xor(const Scalar& other) const;
  /// condition ? *this : other.
  Tensor where(const Tensor& condition, const Tensor& other) const;
  Tensor where(const Tensor& condition, const Scalar& other) const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor clamp(const std::optional<Tensor>& min,
               const std::optional<Tensor>& max = std::nullopt) const;
  Tensor lerp(const Tensor& end, const Tensor& weight) const;
  Tensor lerp(const Tensor& end, const Scalar& weight) const;

  // reductions: `dim` is one dim or a list (empty: all dims)
  Tensor sum(std::optional<DType> dtype = std::nullopt) const;
  Tensor sum(int64_t dim, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const;
  Tensor sum(const std::vector<int64_t>& dim, bool keepdim = false,
             std::optional<DType> dtype = std::nullopt) const;
  Tensor mean(std::optional<DType> dtype = std::nullopt) const;
  Tensor mean(int64_t dim, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const;
  Tensor mean(const std::vector<int64_t>& dim, bool keepdim = false,
              std::optional<DType> dtype = std::nullopt) const;
  Tensor prod(std::optional<DType> dtype = std::nullopt) const;
  Tensor prod(int64_t dim, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const;
  Tensor amax(int64_t dim, bool keepdim = false) const;
  Tensor amax(const std::vector<int64_t>& dim = {}, bool keepdim = false) const;
  Tensor amin(int64_t dim, bool keepdim = false) const;
  Tensor amin(const std::vector<int64_t>& dim = {}, bool keepdim = false) const;
  /// Over all elements (0-dim).
  Tensor max() const;
  /// (values, indices) along `dim`.
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  /// Elementwise with `other` (== maximum).
  Tensor max(const Tensor& other) const;
  Tensor min() const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor min(const Tensor& other) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor var(int64_t dim, double correction = 1, bool keepdim = false) const;
  Tensor var(const std::vector<int64_t>& dim = {}, double correction = 1,
             bool keepdim = false) const;
  Tensor std(int64_t dim, double correction = 1, bool keepdim = false) const;
  Tensor std(const std::vector<int64_t>& dim = {}, double correction = 1,
             bool keepdim = false) const;
  Tensor logsumexp(int64_t dim, bool keepdim = false) const;
  Tensor logsumexp(const std::vector<int64_t>& dim, bool keepdim = false) const;
  Tensor any() const;
  Tensor any(int64_t dim, bool keepdim = false) const;
  Tensor all() const;
  Tensor all(int64_t dim, bool keepdim = false) const;
  Tensor cumsum(int64_t dim, std::optional<DType> dtype = std::nullopt) const;

  // data movement
  Tensor broadcast_to(const Shape& size) const;
  Tensor expand_as(const Tensor& other) const;
  Tensor view_as(const Tensor& other) const;
  Tensor reshape_as(const Tensor& other) const;
  /// to(other.dtype()).
  Tensor type_as(const Tensor& other) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split(const std::vector<int64_t>& split_sizes, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  Tensor masked_fill(const Tensor& mask, const Scalar& value) const;

  // neural-network ops
  Tensor matmul(const Tensor& other) const;
  Tensor softmax(int64_t dim, std::optional<DType> dtype = std::nullopt) const;
  Tensor log_softmax(int64_t dim, std::optional<DType> dtype = std::nullopt) const;

  // ---- in-place (write through views; return *this) -------------------------
  // As in libtorch they are const: `const Tensor&` is a handle, and the write
  // goes to the data it refers to. Each is "compute out of place, then copy_",
  // and refuses a result dtype the tensor cannot hold (float into an integer
  // tensor, anything but bool into a bool tensor) with an Error.
  Tensor& copy_(const Tensor& src) const;
  Tensor& fill_(const Scalar& value) const;
  Tensor& zero_() const;
  Tensor& add_(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor& add_(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor& sub_(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor& sub_(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor& mul_(const Tensor& other) const;
  Tensor& mul_(const Scalar& other) const;
  Tensor& div_(const Tensor& other,
               const std::optional<std::string>& rounding_mode = std::nullopt) const;
  Tensor& div_(const Scalar& other,
               const std::optional<std::string>& rounding_mode = std::nullopt) const;
  Tensor& floor_divide_(const Tensor& other) const;
  Tensor& floor_divide_(const Scalar& other) const;
  Tensor& remainder_(const Tensor& other) const;
  Tensor& remainder_(const Scalar& other) const;
  Tensor& fmod_(const Tensor& other) const;
  Tensor& fmod_(const Scalar& other) const;
  Tensor& pow_(const Tensor& exponent) const;
  Tensor& pow_(const Scalar& exponent) const;
  Tensor& atan2_(const Tensor& other) const;
  Tensor& bitwise_and_(const Tensor& other) const;
  Tensor& bitwise_or_(const Tensor& other) const;
  Tensor& bitwise_xor_(const Tensor& other) const;
  Tensor& logical_and_(const Tensor& other) const;
  Tensor& logical_or_(const Tensor& other) const;
  Tensor& logical_xor_(const Tensor& other) const;
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor& lerp_(const Tensor& end, const Scalar& weight) const;
  Tensor& lerp_(const Tensor& end, const Tensor& weight) const;
  Tensor& masked_fill_(const Tensor& mask, const Scalar& value) const;
  Tensor& tril_(int64_t diagonal = 0) const;
  Tensor& triu_(int64_t diagonal = 0) const;
  /// x[indices] = values; `indices` is a bool mask (same shape as x's leading
  /// dims) or an int64 index along dim 0.
  Tensor& index_put_(const Tensor& indices, const Tensor& values) const;
  // Unary in-place forms: x.exp_() == x.copy_(exp(x)).
  Tensor& neg_() const;
  Tensor& abs_() const;
  Tensor& sign_() const;
  Tensor& exp_() const;
  Tensor& exp2_() const;
  Tensor& expm1_() const;
  Tensor& log_() const;
  Tensor& log2_() const;
  Tensor& log1p_() const;
  Tensor& sqrt_() const;
  Tensor& rsqrt_() const;
  Tensor& reciprocal_() const;
  Tensor& sin_() const;
  Tensor& cos_() const;
  Tensor& tan_() const;
  Tensor& tanh_() const;
  Tensor& sigmoid_() const;
  Tensor& relu_() const;
  Tensor& erf_() const;
  Tensor& floor_() const;
  Tensor& ceil_() const;
  Tensor& round_() const;
  Tensor& trunc_() const;
  Tensor& logical_not_() const;
  Tensor& bitwise_not_() const;
  Tensor& nan_to_num_(std::optional<double> nan = 0.0, std::optional<double> posinf = std::nullopt,
                      std::optional<double> neginf = std::nullopt) const;
  // Compound assignment: a += b is a.add_(b) (b a tensor or a number).
  Tensor& operator+=(const Tensor& other) const { return add_(other); }
  Tensor& operator+=(const Scalar& other) const { return add_(other); }
  Tensor& operator-=(const Tensor& other) const { return sub_(other); }
  Tensor& operator-=(const Scalar& other) const { return sub_(other); }
  Tensor& operator*=(const Tensor& other) const { return mul_(other); }
  Tensor& operator*=(const Scalar& other) const { return mul_(other); }
  Tensor& operator/=(const Tensor& other) const { return div_(other); }
  Tensor& operator/=(const Scalar& other) const { return div_(other); }
  Tensor& operator&=(const Tensor& other) const { return bitwise_and_(other); }
  Tensor& operator|=(const Tensor& other) const { return bitwise_or_(other); }
  Tensor& operator^=(const Tensor& other) const { return bitwise_xor_(other); }

  // ---- autograd (smelt/autograd.h describes the semantics) -------------------
  /// True for a leaf made to require grad and for any result of an op recorded
  /// from one (and for a view made in grad mode of a tensor that requires grad).
  bool requires_grad() const;
  /// Makes this leaf require grad (or stop requiring it). Error for a non-floating
  /// dtype ("only Tensors of floating point dtype can require gradients") and, with
  /// false, for a non-leaf (use detach()). Returns *this.
  const Tensor& requires_grad_(bool requires_grad = true) const;
  /// The gradient accumulated by backward() (leaves, and tensors that
  /// retain_grad()); undefined before the first backward or after it was reset.
  const Tensor& grad() const;
  /// The .grad handle itself, to reset it (`x.mutable_grad() = Tensor()`) or set it.
  Tensor& mutable_grad() const;
  /// The backward node that produced this tensor; null for leaves and for tensors
  /// that do not require grad.
  std::shared_ptr<autograd::Node> grad_fn() const;
  /// True when grad_fn() is null (PyTorch: every tensor that does not require
  /// grad is a leaf too).
  bool is_leaf() const;
  /// Which output of grad_fn() this tensor is.
  uint32_t output_nr() const;
  /// The version counter of this tensor's memory (bumped by every in-place write).
  uint32_t _version() const;
  /// True for a view of another tensor's memory (slice, transpose, view, expand...).
  bool is_view() const;
  /// Accumulates d(this)/d(leaf) into every leaf's .grad() (autograd::backward
  /// with this one tensor). `gradient` may be left undefined for a one-element
  /// tensor (then 1); otherwise it must have this tensor's shape.
  void backward(const Tensor& gradient = Tensor(), std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false, const std::vector<Tensor>& inputs = {}) const;
  /// A tensor sharing this one's memory (and version counter) with no history:
  /// it does not require grad.
  Tensor detach() const;
  /// Detaches this tensor in place (Error for a view that requires grad).
  const Tensor& detach_() const;
  /// Makes backward() fill grad() for this non-leaf too (a no-op on leaves).
  void retain_grad() const;
  bool retains_grad() const;
  /// Registers a hook called with this tensor's gradient each time one is computed,
  /// before it is accumulated or passed on; a hook returning a defined Tensor
  /// replaces the gradient (same shape). Returns a handle for remove_hook. Error on
  /// a tensor that does not require grad.
  unsigned register_hook(std::function<Tensor(const Tensor&)> hook) const;
  /// A hook that only looks at the gradient.
  template <class F>
  requires std::is_void_v<std::invoke_result_t<F&, const Tensor&>>
  unsigned register_hook(F hook) const {
    return register_hook(std::function<Tensor(const Tensor&)>([hook](const Tensor& g) mutable {
      hook(g);
      return Tensor();
    }));
  }
  void remove_hook(unsigned handle) const;

  /// PyTorch-style printing: "tensor([[1., 2.],\n        [3., 4.]])".
  std::string str() const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace smelt
