// The copy/convert ops and the Tensor methods that read values: to_dtype,
// clone, contiguous, Tensor::to (dtypes and devices, non_blocking through
// pinned memory), pin_memory, cpu(), cuda(),
// Tensor::copy_ (the one write primitive, across devices too), item and
// to_vector. Each runs on the backend of the tensor's device; reading values
// to the host synchronizes with the device's queued work (copy_to_host).
#include <cstring>
#include <memory>

#include "backend/backend.h"
#include "core/tensor_impl.h"
#include "ops/dispatch.h"
#include "smelt/ops.h"

namespace smelt {

Tensor to_dtype(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  return detail::run_op1(
      "to_dtype", {x}, {{"dtype", dtype}}, {x.sizes(), dtype, x.device()},
      [&](const std::vector<Tensor>& out) { backend::backend(x.device()).copy(out[0], x); });
}

Tensor clone(const Tensor& x) {
  return detail::run_op1(
      "clone", {x}, {}, {x.sizes(), x.dtype(), x.device()},
      [&](const std::vector<Tensor>& out) { backend::backend(x.device()).copy(out[0], x); });
}

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : clone(x); }

Tensor Tensor::contiguous() const { return smelt::contiguous(*this); }
Tensor Tensor::clone() const { return smelt::clone(*this); }
Tensor Tensor::to(DType t) const { return to_dtype(*this, t); }
namespace {
/// Copies the values of `c` (contiguous) into host memory `dst`.
void read_to_host(const Tensor& c, void* dst);
}  // namespace

Tensor Tensor::to(Device d) const {
  SMELT_CHECK(defined(), "to: called on an undefined tensor");
  if (d == device()) return *this;
  if (is_tracer())
    detail::throw_value_read_while_tracing(
        "to(device)", "move tensors between devices before calling the compiled function");
  backend::Backend& to_be = backend::backend(d);  // Error when smelt has no backend for d
  const Tensor src = contiguous();
  Tensor out = detail::make_empty(sizes(), dtype(), d, "to");
  const size_t nbytes = static_cast<size_t>(numel()) * element_size();
  if (nbytes == 0) return out;
  if (device().is_cpu() && src.is_pinned()) {  // a copy from pinned memory is asynchronous: wait
    to_be.copy_from_pinned_async(out.data_ptr(), src.data_ptr(), nbytes, to_be.current_stream(d));
    to_be.synchronize(to_be.current_stream(d));
  } else if (device().is_cpu()) {
    to_be.copy_from_host(out.data_ptr(), src.data_ptr(), nbytes, to_be.current_stream(d));
  } else if (d.is_cpu()) {
    read_to_host(src, out.data_ptr());
  } else {  // between two GPUs: through the host
    std::unique_ptr<char[]> host(new char[nbytes]);
    read_to_host(src, host.get());
    to_be.copy_from_host(out.data_ptr(), host.get(), nbytes, to_be.current_stream(d));
    to_be.synchronize(to_be.current_stream(d));
  }
  return out;
}
Tensor Tensor::to(Device d, DType t) const { return to(d).to(t); }

Tensor Tensor::to(Device d, bool non_blocking) const {
  SMELT_CHECK(defined(), "to: called on an undefined tensor");
  if (!non_blocking || d == device() || is_tracer()) return to(d);
  const size_t nbytes = static_cast<size_t>(numel()) * element_size();
  if (device().is_cpu() && is_pinned() && is_contiguous() && nbytes > 0) {
    backend::Backend& be = backend::backend(d);
    Tensor out = detail::make_empty(sizes(), dtype(), d, "to");
    be.copy_from_pinned_async(out.data_ptr(), data_ptr(), nbytes, be.current_stream(d));
    return out;
  }
  if (d.is_cpu() && nbytes > 0) {
    backend::Backend& be = backend::backend(device());
    if (Allocator* pinned = be.pinned_allocator()) {
      const Tensor src = contiguous();
      Tensor out = detail::make_empty(sizes(), dtype(), d, "to", pinned);
      be.copy_to_pinned_async(out.data_ptr(), src.data_ptr(), nbytes, be.current_stream(device()));
      return out;
    }
  }
  return to(d);
}

bool Tensor::is_pinned() const { return defined() && storage() && storage()->pinned(); }

Tensor Tensor::pin_memory() const {
  SMELT_CHECK(defined(), "pin_memory: called on an undefined tensor");
  SMELT_CHECK(is_cpu(),
              "pin_memory: only CPU tensors can be pinned (this one is on {}); pin the CPU tensor "
              "before moving it",
              device().str());
  if (is_pinned()) return *this;
  if (is_tracer())
    detail::throw_value_read_while_tracing("pin_memory()",
                                           "pin tensors before calling the compiled function");
  backend::Backend* cuda = backend::find_backend(DeviceType::CUDA);
  Allocator* pinned = cuda ? cuda->pinned_allocator() : nullptr;
  SMELT_CHECK(pinned != nullptr,
              "pin_memory: smelt was built without CUDA, and pinned memory is CUDA's (configure "
              "with -DSMELT_CUDA=ON on a machine with the CUDA toolkit)");
  Tensor out = detail::make_empty(sizes(), dtype(), kCPU, "pin_memory", pinned);
  if (numel() > 0) backend::backend(kCPU).copy(out, *this);
  return out;
}

Tensor Tensor::cpu() const { return to(kCPU); }
Tensor Tensor::cuda() const {
  backend::Backend* be = backend::find_backend(DeviceType::CUDA);
  return to(Device(DeviceType::CUDA, be ? be->current_device() : 0));
}

namespace {
bool may_overlap(const Tensor& a, const Tensor& b) {
  if (a.storage() != b.storage()) return false;
  int64_t isz = static_cast<int64_t>(a.element_size());
  int64_t a0 = a.storage_offset() * isz,
          a1 = detail::storage_extent(a.sizes(), a.strides(), a.storage_offset()) * isz;
  int64_t b0 = b.storage_offset() * static_cast<int64_t>(b.element_size()),
          b1 = detail::storage_extent(b.sizes(), b.strides(), b.storage_offset()) *
               static_cast<int64_t>(b.element_size());
  return a0 < b1 && b0 < a1;
}

/// Copies the values of `c` (contiguous) into host memory `dst`.
void read_to_host(const Tensor& c, void* dst) {
  const size_t nbytes = static_cast<size_t>(c.numel()) * c.element_size();
  if (nbytes == 0) return;
  backend::Backend& be = backend::backend(c.device());
  be.copy_to_host(dst, c.data_ptr(), nbytes, be.current_stream(c.device()));
}
}  // namespace

Tensor& Tensor::copy_(const Tensor& src) const {
  SMELT_CHECK(defined() && src.defined(), "copy_: undefined tensor");
  Shape b = broadcast_shapes(sizes(), src.sizes(), "copy_");
  SMELT_CHECK(b == sizes(), "copy_: source of shape {} cannot be broadcast to destination shape {}",
              detail::shape_str(src.sizes()), detail::shape_str(sizes()));
  // A destination with internal overlap (an expanded view) has no single answer.
  for (int64_t i = 0; i < dim(); ++i)
    SMELT_CHECK(impl_->strides[i] != 0 || impl_->sizes[i] <= 1,
                "copy_: unsupported operation: more than one element of the written-to tensor "
                "refers to a single memory location (shape {}, strides {}); call .clone() first",
                detail::shape_str(sizes()), detail::shape_str(strides()));
  detail::run_copy(*this, src, [&] {
    backend::Backend& be = backend::backend(device());
    // From another device: moved here first (a 0-dim CPU source is read as a value).
    const bool cpu_scalar = src.device().is_cpu() && src.dim() == 0;
    if (src.device() != device() && !cpu_scalar) {
      be.copy(*this, src.to(device()));
    } else if (may_overlap(*this, src)) {
      be.copy(*this, smelt::clone(src));
    } else {
      be.copy(*this, src);
    }
  });
  return const_cast<Tensor&>(*this);  // a handle: const as in libtorch
}

template <class T>
T Tensor::item() const {
  if (is_tracer())
    detail::throw_value_read_while_tracing(
        "item()",
        "keep the value a 0-dim tensor (ops take it where they take a number), or call item() on "
        "a result of the compiled function");
  SMELT_CHECK(numel() == 1,
              "item: a Tensor with {} elements cannot be converted to a scalar (shape {})", numel(),
              detail::shape_str(sizes()));
  Tensor c = to(dtype_of<T>::value);
  T v;
  read_to_host(c, &v);
  return v;
}

Scalar Tensor::item() const {
  if (dtype() == DType::Bool) return Scalar(item<bool>());
  if (is_floating(dtype())) return Scalar(item<double>());
  return Scalar(item<int64_t>());
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  if (is_tracer())
    detail::throw_value_read_while_tracing("to_vector()",
                                           "call to_vector() on a result of the compiled function");
  Tensor c = to(dtype_of<T>::value).contiguous();
  if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> packs bits
    std::unique_ptr<bool[]> p(new bool[static_cast<size_t>(std::max<int64_t>(c.numel(), 1))]);
    read_to_host(c, p.get());
    return std::vector<bool>(p.get(), p.get() + c.numel());
  } else {
    std::vector<T> v(static_cast<size_t>(c.numel()));
    read_to_host(c, v.data());
    return v;
  }
}

#define SMELT_INSTANTIATE(T)          \
  template T Tensor::item<T>() const; \
  template std::vector<T> Tensor::to_vector<T>() const;
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

}  // namespace smelt
