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
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "smelt/device.h"
#include "smelt/dtype.h"
#include "smelt/error.h"
#include "smelt/scalar.h"

namespace smelt {

using Shape = std::vector<int64_t>;
struct TensorImpl;
class Storage;

/// dtype + device for factories: `smelt::zeros({2, 3}, smelt::TensorOptions().dtype(int64))`
/// or simply `smelt::zeros({2, 3}, smelt::int64)`.
struct TensorOptions {
  DType dtype_ = DType::Float32;
  Device device_ = Device();
  bool has_dtype = false;
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
  Tensor to(Device d) const;
  Tensor to(Device d, DType t) const;

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

  // ---- common ops as methods (same as the free functions in ops.h) ---------
  Tensor sum() const;
  Tensor sum(const std::vector<int64_t>& dim, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const std::vector<int64_t>& dim, bool keepdim = false) const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor neg() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor tanh() const;
  Tensor matmul(const Tensor& other) const;
  Tensor softmax(int64_t dim) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor masked_fill(const Tensor& mask, const Scalar& value) const;

  // ---- in-place (write through views; return *this) -------------------------
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(const Scalar& value);
  Tensor& zero_();
  Tensor& add_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& add_(const Scalar& other);
  Tensor& sub_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& sub_(const Scalar& other);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(const Scalar& other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(const Scalar& other);
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max);
  Tensor& masked_fill_(const Tensor& mask, const Scalar& value);
  /// x[indices] = values; `indices` is a bool mask (same shape as x's leading
  /// dims) or an int64 index along dim 0.
  Tensor& index_put_(const Tensor& indices, const Tensor& values);
  // Unary in-place forms: x.exp_() == x.copy_(exp(x)).
  Tensor& neg_();
  Tensor& abs_();
  Tensor& exp_();
  Tensor& log_();
  Tensor& sqrt_();
  Tensor& sigmoid_();
  Tensor& relu_();
  Tensor& tanh_();
  Tensor& sin_();
  Tensor& cos_();
  Tensor& floor_();
  Tensor& ceil_();
  Tensor& round_();
  Tensor& trunc_();
  Tensor& reciprocal_();
  Tensor& rsqrt_();

  /// PyTorch-style printing: "tensor([[1., 2.],\n        [3., 4.]])".
  std::string str() const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace smelt
