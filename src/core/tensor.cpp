// Tensor metadata, data access and allocation. What computes on a tensor's
// values (copy_, to, clone, item, printing) lives in src/ops.
#include <fmt/format.h>

#include <ostream>

#include "core/tensor_impl.h"
#include "smelt/autograd.h"

namespace smelt {

namespace detail {
int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}
Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (int64_t i = static_cast<int64_t>(s.size()) - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= std::max<int64_t>(s[i], 1);
  }
  return st;
}
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);  // a 0-dim tensor accepts dim 0 and -1
  SMELT_CHECK(dim >= -n && dim < n,
              "{}: dimension out of range (expected to be in range of [{}, {}], but got {})", op,
              -n, n - 1, dim);
  return dim < 0 ? dim + n : dim;
}
std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  impl->device = base.device();
  impl->view_base = base.impl()->view_base ? base.impl()->view_base : base.impl_ptr();
  impl->view_no_grad = !GradMode::is_enabled();
  return Tensor(std::move(impl));
}

Tensor alias(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->sizes = t.sizes();
  impl->strides = t.strides();
  impl->offset = t.storage_offset();
  impl->dtype = t.dtype();
  impl->device = t.device();
  impl->wrapped_number = t.is_wrapped_number();
  return Tensor(std::move(impl));
}

namespace {
thread_local const char* g_op = nullptr;
}  // namespace

OpScope::OpScope(const char* op) : prev_(g_op) { g_op = op; }
OpScope::~OpScope() { g_op = prev_; }

std::string bytes_str(int64_t bytes) {
  static const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} bytes", bytes);
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", v, units[u]);
}

Tensor make_empty(const Shape& sizes, DType dtype, Device device, const char* op,
                  Allocator* pinned) {
  int64_t bytes = static_cast<int64_t>(itemsize(dtype));
  for (auto d : sizes) {
    SMELT_CHECK(d >= 0, "empty: negative dimension in size {}", shape_str(sizes));
    SMELT_CHECK(!__builtin_mul_overflow(bytes, d, &bytes),
                "empty: size {} of {} needs more than 2^63 bytes; use a smaller shape",
                shape_str(sizes), dtype_name(dtype));
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->sizes = sizes;
  impl->strides = contiguous_strides(sizes);
  impl->dtype = dtype;
  impl->device = device;
  try {
    impl->storage = pinned ? Storage::allocate_pinned(static_cast<size_t>(bytes), *pinned)
                           : Storage::allocate(static_cast<size_t>(bytes), device);
  } catch (const OutOfMemoryError& e) {
    // A device allocator's own message (what it holds, what the device has free) follows.
    throw OutOfMemoryError(fmt::format(
        "{}: out of memory allocating a {} tensor of shape {} ({}) on {}; free tensors that are "
        "no longer needed, or use a smaller shape (e.g. a smaller batch) or a smaller dtype "
        "(float16, bfloat16){}",
        op     ? op
        : g_op ? g_op
               : "empty",
        dtype_name(dtype), shape_str(sizes), bytes_str(bytes), device.str(),
        device.is_cpu() ? "" : fmt::format(" ({})", e.what())));
  }
  return Tensor(std::move(impl));
}

int64_t storage_extent(const Shape& sizes, const Shape& strides, int64_t offset) {
  int64_t reach = offset;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return offset;
    reach += (sizes[i] - 1) * strides[i];
  }
  return reach + 1;
}
}  // namespace detail

using detail::wrap_dim;

namespace {
[[noreturn]] void undefined_tensor(const char* what) {
  detail::throw_error(fmt::format(
      "{}: called on an undefined tensor (a default-constructed smelt::Tensor holds no data); "
      "assign a tensor to it first",
      what));
}
}  // namespace

#define SMELT_REQUIRE_DEFINED(what) \
  if (!impl_) undefined_tensor(what)

const Shape& Tensor::sizes() const {
  SMELT_REQUIRE_DEFINED("sizes");
  return impl_->sizes;
}
const Shape& Tensor::strides() const {
  SMELT_REQUIRE_DEFINED("strides");
  return impl_->strides;
}
int64_t Tensor::size(int64_t d) const { return sizes()[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return impl_->strides[wrap_dim(d, dim(), "stride")]; }
int64_t Tensor::storage_offset() const {
  SMELT_REQUIRE_DEFINED("storage_offset");
  return impl_->offset;
}
int64_t Tensor::dim() const { return static_cast<int64_t>(sizes().size()); }
int64_t Tensor::numel() const { return detail::shape_numel(sizes()); }
DType Tensor::dtype() const {
  SMELT_REQUIRE_DEFINED("dtype");
  return impl_->dtype;
}
Device Tensor::device() const {
  SMELT_REQUIRE_DEFINED("device");
  return impl_->device;
}
bool Tensor::is_tracer() const { return impl_ && impl_->storage && impl_->storage->is_tracer(); }
bool Tensor::is_wrapped_number() const { return impl_ && impl_->wrapped_number; }
const std::shared_ptr<Storage>& Tensor::storage() const {
  SMELT_REQUIRE_DEFINED("storage");
  return impl_->storage;
}

bool Tensor::is_contiguous() const {
  // As PyTorch: a tensor with no elements is contiguous, whatever its strides.
  for (int64_t size : impl_->sizes)
    if (size == 0) return true;
  int64_t expected = 1;
  for (int64_t i = dim() - 1; i >= 0; --i) {
    if (impl_->sizes[i] == 1) continue;
    if (impl_->strides[i] != expected) return false;
    expected *= impl_->sizes[i];
  }
  return true;
}

void* Tensor::data_ptr() const {
  SMELT_CHECK(defined(), "data_ptr: called on an undefined tensor");
  if (is_tracer())
    detail::throw_value_read_while_tracing(
        "data_ptr()",
        "use data_ptr() on the inputs before, or the results after, the call of "
        "the compiled function");
  return static_cast<char*>(impl_->storage->data()) + impl_->offset * element_size();
}

template <class T>
T* Tensor::data_ptr() const {
  SMELT_CHECK(dtype_of<T>::value == dtype(), "data_ptr<{}>: tensor has dtype {}",
              dtype_name(dtype_of<T>::value), dtype_name(dtype()));
  return static_cast<T*>(data_ptr());
}

#define SMELT_INSTANTIATE(T) template T* Tensor::data_ptr<T>() const;
SMELT_INSTANTIATE(bool)
SMELT_INSTANTIATE(uint8_t)
SMELT_INSTANTIATE(int8_t)
SMELT_INSTANTIATE(int16_t)
SMELT_INSTANTIATE(int32_t)
SMELT_INSTANTIATE(int64_t)
SMELT_INSTANTIATE(Half)
SMELT_INSTANTIATE(BFloat16)
SMELT_INSTANTIATE(float)
SMELT_INSTANTIATE(double)
#undef SMELT_INSTANTIATE

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace smelt
