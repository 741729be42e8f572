// TensorImpl: the metadata behind a Tensor handle, plus helpers on shapes.
#pragma once
#include <memory>

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
};

namespace detail {
int64_t shape_numel(const Shape& s);
Shape contiguous_strides(const Shape& s);
/// Normalizes a possibly negative dim against `ndim`; Error naming `op` if out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
/// "[2, 3]"
std::string shape_str(const Shape& s);
/// A tensor of `sizes` viewing `base`'s storage with the given strides/offset.
Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset);
/// New contiguous tensor on `device` (a tracer storage is never made here).
/// When the device is out of memory, raises OutOfMemoryError naming `op` (or,
/// when null, the op of the innermost OpScope of this thread), the shape, the
/// dtype and the bytes, and saying what to do.
Tensor make_empty(const Shape& sizes, DType dtype, Device device, const char* op = nullptr);
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
