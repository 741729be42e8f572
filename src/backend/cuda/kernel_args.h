// The plain arguments the CUDA backend's host code (the .cpp files, which see
// tensors) passes to its kernel launchers (the .cu files, which see only
// pointers, sizes and strides): no fmt, no Tensor, so nvcc compiles nothing
// but the kernels and the scalar functors. Strides are in BYTES here.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>

#include "smelt/dtype.h"

namespace smelt::cuda::impl {

/// Dims a strided kernel handles after size-1 dims are dropped and
/// contiguous neighbours merged (TensorIterator's limit is 25).
inline constexpr int kMaxDims = 16;

/// One value of dtype `dtype` held by the host (a wrapped number or a 0-dim CPU
/// tensor, an extra argument such as alpha): the kernel receives it already
/// converted to its compute type, by the same scalar::cast the CPU uses.
struct HostValue {
  DType dtype = DType::Float64;
  alignas(8) unsigned char bytes[8] = {};
  static HostValue of(DType dt, const void* p, size_t n) {
    HostValue v;
    v.dtype = dt;
    std::memcpy(v.bytes, p, n);
    return v;
  }
};

/// The iteration space of an elementwise kernel: `ndim` dims of `sizes`
/// (row-major; dim ndim - 1 innermost), numel elements in all.
struct Geometry {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t numel = 0;
};

/// One operand of an elementwise kernel.
struct Operand {
  char* data = nullptr;            // device memory (null for a host value)
  int64_t strides[kMaxDims] = {};  // bytes; 0 along broadcast dims
  DType dtype = DType::Float32;
  bool host = false;  // a host value (0-dim CPU tensor): `value` holds it
  HostValue value;
  /// Never rounded to the compute dtype as other operands of another dtype
  /// are (rounds_to_common): a wrapped number, which its op's NumberRule
  /// converted (ops/numbers.h), or the one-element second operand of a
  /// functor that reads it so (pw::unrounded_single_operand).
  bool unrounded = false;
};

/// Backend::pointwise for one functor: out = f(C(in)..., C(extra)...) with
/// C = opmath(compute); `out` is operand 0.
struct PointwiseArgs {
  DType compute = DType::Float32;
  Geometry geom;
  Operand out;
  int nin = 0;
  Operand in[3];
  int nextra = 0;
  HostValue extra[3];
  int device = 0;
  cudaStream_t stream = nullptr;
  /// Backend::pointwise_checked_divisor: where the kernel stores `error_code`
  /// when an integer divisor (in[1]) is zero (error_flag.h); null: no check.
  int* error_flag = nullptr;
  int error_code = 0;
};

}  // namespace smelt::cuda::impl
