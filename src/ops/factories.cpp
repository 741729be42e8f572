// Tensor factories: empty/zeros/ones/full(+_like), arange, linspace, eye,
// scalar_tensor, from_vector, from_blob. Factories always make real tensors
// (never tracers): under smelt::compile they become graph constants. The
// values are written by the backend of the requested device.
#include <cmath>

#include "backend/backend.h"
#include "core/tensor_impl.h"
#include "ops/numbers.h"
#include "smelt/ops.h"

namespace smelt {

namespace {

void check_size(const char* op, const Shape& size) {
  for (auto d : size)
    SMELT_CHECK(d >= 0, "{}: negative dimension in size {}; every size must be >= 0", op,
                detail::shape_str(size));
}

DType dtype_or(const TensorOptions& o, DType fallback) { return o.has_dtype ? o.dtype_ : fallback; }

/// dtype PyTorch gives a factory filled with `v`: bool / int64 / default float.
DType scalar_default_dtype(const Scalar& v) {
  return v.is_bool() ? DType::Bool : v.is_integral() ? DType::Int64 : default_dtype();
}

void fill(const Tensor& t, const Scalar& v) {
  if (t.numel() > 0) backend::backend(t.device()).fill(t, v);
}

/// `t`, made a leaf that requires grad when the options ask for it.
Tensor leaf(const Tensor& t, const TensorOptions& o) {
  if (o.requires_grad_) t.requires_grad_(true);
  return t;
}

}  // namespace

Tensor empty(const Shape& size, TensorOptions opts) {
  check_size("empty", size);
  return leaf(detail::make_empty(size, dtype_or(opts, default_dtype()), opts.device_, "empty"),
              opts);
}

Tensor zeros(const Shape& size, TensorOptions opts) {
  check_size("zeros", size);
  Tensor t = detail::make_empty(size, dtype_or(opts, default_dtype()), opts.device_, "zeros");
  fill(t, 0);
  return leaf(t, opts);
}

Tensor ones(const Shape& size, TensorOptions opts) {
  check_size("ones", size);
  Tensor t = detail::make_empty(size, dtype_or(opts, default_dtype()), opts.device_, "ones");
  fill(t, 1);
  return leaf(t, opts);
}

Tensor full(const Shape& size, const Scalar& value, TensorOptions opts) {
  check_size("full", size);
  Tensor t =
      detail::make_empty(size, dtype_or(opts, scalar_default_dtype(value)), opts.device_, "full");
  // PyTorch's fill converts with its overflow check: full({2}, 200, int8) raises.
  fill(t, detail::checked_number_to_dtype(value, t.dtype(), "full"));
  return leaf(t, opts);
}

Tensor zeros_like(const Tensor& t) {
  return zeros(t.sizes(), TensorOptions(t.dtype()).device(t.device()));
}
Tensor ones_like(const Tensor& t) {
  return ones(t.sizes(), TensorOptions(t.dtype()).device(t.device()));
}
Tensor empty_like(const Tensor& t) {
  return empty(t.sizes(), TensorOptions(t.dtype()).device(t.device()));
}
Tensor full_like(const Tensor& t, const Scalar& value) {
  return full(t.sizes(), value, TensorOptions(t.dtype()).device(t.device()));
}

Tensor scalar_tensor(const Scalar& value, TensorOptions opts) {
  Tensor t = detail::make_empty({}, dtype_or(opts, scalar_default_dtype(value)), opts.device_,
                                "scalar_tensor");
  fill(t, detail::checked_number_to_dtype(value, t.dtype(), "scalar_tensor"));
  return leaf(t, opts);
}

// ---- arange / linspace / eye ------------------------------------------------

Tensor arange(const Scalar& end, TensorOptions opts) { return arange(0, end, 1, opts); }

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions opts) {
  const bool all_int = !start.is_floating() && !end.is_floating() && !step.is_floating();
  const DType dt = dtype_or(opts, all_int ? DType::Int64 : default_dtype());
  const double xs = start.to_double(), xe = end.to_double(), xst = step.to_double();
  SMELT_CHECK(std::isfinite(xs) && std::isfinite(xe),
              "arange: unsupported range: {} -> {}; start and end must be finite", xs, xe);
  SMELT_CHECK(xst != 0.0, "arange: step must be nonzero");
  SMELT_CHECK((xst > 0 && xe >= xs) || (xst < 0 && xe <= xs),
              "arange: upper bound and larger bound inconsistent with step sign (start={}, "
              "end={}, step={}); use a positive step for start <= end and a negative one "
              "otherwise",
              start.str(), end.str(), step.str());
  int64_t n;
  if (all_int) {
    // Exact integer count: ceil((end - start) / step).
    int64_t s = start.to_int(), e = end.to_int(), st = step.to_int();
    int64_t span = e - s;
    n = st > 0 ? (span + st - 1) / st : (span + st + 1) / st;
  } else {
    double dn = std::ceil((xe - xs) / xst);
    SMELT_CHECK(dn >= 0 && dn < 9.2e18,
                "arange: invalid number of elements ({}) for range {} -> {} step {}", dn, xs, xe,
                xst);
    n = static_cast<int64_t>(dn);
  }
  Tensor t = detail::make_empty({n}, dt, opts.device_, "arange");
  if (n > 0) backend::backend(t.device()).arange(t, start, step);
  return leaf(t, opts);
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions opts) {
  SMELT_CHECK(steps >= 0, "linspace: number of steps must be non-negative, got {}", steps);
  const DType dt = dtype_or(opts, default_dtype());
  Tensor t = detail::make_empty({steps}, dt, opts.device_, "linspace");
  if (steps == 1) fill(t, start);  // PyTorch fills with start
  if (steps > 1) backend::backend(t.device()).linspace(t, start, end);
  return leaf(t, opts);
}

Tensor eye(int64_t n, std::optional<int64_t> m_opt, TensorOptions opts) {
  const int64_t m = m_opt.value_or(n);
  SMELT_CHECK(n >= 0 && m >= 0, "eye: n and m must be non-negative, got n={} m={}", n, m);
  Tensor t = zeros({n, m}, opts.requires_grad(false));
  // The diagonal: a strided view stepping one row and one column at a time.
  fill(detail::make_view(t, {std::min(n, m)}, {m + 1}, 0), 1);
  return leaf(t, opts);
}

// ---- from_vector / from_blob -------------------------------------------------

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions opts) {
  check_size("from_vector", shape);
  const int64_t n = detail::shape_numel(shape);
  SMELT_CHECK(n == static_cast<int64_t>(values.size()),
              "from_vector: {} values cannot fill a tensor of shape {} ({} elements); pass as "
              "many values as the shape holds",
              values.size(), detail::shape_str(shape), n);
  Tensor t = detail::make_empty(shape, dtype_of<T>::value, Device(), "from_vector");
  T* p = static_cast<T*>(t.data_ptr());
  for (int64_t i = 0; i < n; ++i) p[i] = values[i];  // works for std::vector<bool> too
  if (opts.has_dtype && opts.dtype_ != t.dtype()) {
    Tensor c = detail::make_empty(shape, opts.dtype_, Device(), "from_vector");
    backend::backend(c.device()).copy(c, t);
    t = c;
  }
  // The values are host memory: made on the CPU, then moved (and made a leaf there).
  return leaf(t.to(opts.device_), opts);
}

template Tensor from_vector<float>(const std::vector<float>&, const Shape&, TensorOptions);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&, TensorOptions);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&, TensorOptions);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const Shape&, TensorOptions);
template Tensor from_vector<int16_t>(const std::vector<int16_t>&, const Shape&, TensorOptions);
template Tensor from_vector<int8_t>(const std::vector<int8_t>&, const Shape&, TensorOptions);
template Tensor from_vector<uint8_t>(const std::vector<uint8_t>&, const Shape&, TensorOptions);
template Tensor from_vector<bool>(const std::vector<bool>&, const Shape&, TensorOptions);
template Tensor from_vector<Half>(const std::vector<Half>&, const Shape&, TensorOptions);
template Tensor from_vector<BFloat16>(const std::vector<BFloat16>&, const Shape&, TensorOptions);

Tensor from_blob(void* data, const Shape& shape, DType dtype, const Shape& strides_in) {
  check_size("from_blob", shape);
  Shape strides =
      strides_in.empty() && !shape.empty() ? detail::contiguous_strides(shape) : strides_in;
  SMELT_CHECK(strides.size() == shape.size(),
              "from_blob: {} strides given for a shape of {} dims ({}); pass one stride per "
              "dim or none for contiguous",
              strides.size(), shape.size(), detail::shape_str(shape));
  for (auto s : strides)
    SMELT_CHECK(s >= 0, "from_blob: negative strides are not supported (strides {})",
                detail::shape_str(strides));
  const int64_t n = detail::shape_numel(shape);
  SMELT_CHECK(data != nullptr || n == 0, "from_blob: data is null for a tensor of shape {}",
              detail::shape_str(shape));
  const int64_t extent = detail::storage_extent(shape, strides, 0);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::wrap(data, static_cast<size_t>(extent) * itemsize(dtype), Device());
  impl->sizes = shape;
  impl->strides = strides;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

}  // namespace smelt
