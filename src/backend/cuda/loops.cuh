// The CUDA backend's elementwise machinery (TensorIterator's role in PyTorch),
// for .cu files only:
//  * offset calculators mapping a linear index to one byte offset per operand
//    over up to kMaxDims dims, in 32-bit arithmetic with multiply-shift
//    division when every offset fits (IntDivider, after PyTorch's
//    IntegerDivider / Granlund & Montgomery 1994), in 64-bit otherwise;
//  * loads and stores of any dtype converted by scalar::cast (the CPU's one
//    conversion) for operands whose dtype is known only at run time;
//  * the launch grid helpers.
// The kernels themselves live in pointwise.cuh (functors), copy.cu, fill.cu...
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernel_args.h"
#include "kernels/scalar_ops.h"

namespace smelt::cuda::impl {

/// Threads per block of the elementwise kernels.
inline constexpr int kBlockThreads = 256;

// ---------------------------------------------------------------- division --

/// n / d for 32-bit n < 2^31 and d in [1, 2^31]: one multiply-high and a shift.
struct IntDivider32 {
  uint32_t divisor = 1, m1 = 0, shift = 0;
  IntDivider32() = default;
  explicit IntDivider32(uint32_t d) : divisor(d) {
    for (shift = 0; shift < 32; ++shift)
      if ((1ull << shift) >= d) break;
    const uint64_t one = 1;
    m1 = static_cast<uint32_t>(((one << 32) * ((one << shift) - d)) / d + 1);
  }
  __device__ __forceinline__ uint32_t div(uint32_t n) const {
    const uint32_t t = __umulhi(n, m1);
    return (t + n) >> shift;
  }
};

/// Plain 64-bit division (operands of 2^31 elements or more).
struct IntDivider64 {
  int64_t divisor = 1;
  IntDivider64() = default;
  explicit IntDivider64(int64_t d) : divisor(d) {}
  __device__ __forceinline__ int64_t div(int64_t n) const { return n / divisor; }
};

template <class index_t>
using IntDivider =
    std::conditional_t<std::is_same_v<index_t, uint32_t>, IntDivider32, IntDivider64>;

// ------------------------------------------------------- offset calculator --

/// Byte offsets of NARGS operands at a linear index over a Geometry; dims are
/// stored innermost first.
template <int NARGS, class index_t>
struct OffsetCalc {
  int ndim = 0;
  IntDivider<index_t> sizes[kMaxDims];
  index_t strides[kMaxDims][NARGS > 0 ? NARGS : 1];

  OffsetCalc() = default;
  /// From a geometry and per-operand byte strides (strides[k][d], row-major dims).
  OffsetCalc(const Geometry& g, const int64_t* const* op_strides) : ndim(g.ndim) {
    for (int d = 0; d < g.ndim; ++d) {
      const int src = g.ndim - 1 - d;  // innermost first
      sizes[d] = IntDivider<index_t>(static_cast<index_t>(g.sizes[src]));
      for (int k = 0; k < NARGS; ++k) strides[d][k] = static_cast<index_t>(op_strides[k][src]);
    }
  }

  __device__ __forceinline__ void get(index_t linear, index_t (&off)[NARGS > 0 ? NARGS : 1]) const {
#pragma unroll
    for (int k = 0; k < NARGS; ++k) off[k] = 0;
#pragma unroll
    for (int d = 0; d < kMaxDims; ++d) {
      if (d == ndim) break;
      const index_t q = sizes[d].div(linear);
      const index_t r = linear - q * static_cast<index_t>(sizes[d].divisor);
      linear = q;
#pragma unroll
      for (int k = 0; k < NARGS; ++k) off[k] += r * strides[d][k];
    }
  }
};

/// True when linear indices and every operand's byte offsets fit 32-bit
/// arithmetic (2^31 - 1 with room for the division above).
inline bool fits_32bit(const Geometry& g, const int64_t* const* op_strides, int nops) {
  if (g.numel >= (int64_t{1} << 31)) return false;
  for (int k = 0; k < nops; ++k) {
    int64_t reach = 0;
    for (int d = 0; d < g.ndim; ++d) {
      const int64_t s = op_strides[k][d];
      if (s < 0) return false;
      reach += (g.sizes[d] - 1) * s;
    }
    if (reach >= (int64_t{1} << 31)) return false;
  }
  return true;
}

// ------------------------------------------------------ loads and stores --

/// The element at p (of dtype dt) converted to C by scalar::cast.
template <class C>
__device__ __forceinline__ C load_as(const char* p, DType dt) {
  switch (dt) {
    case DType::Bool:
      return scalar::cast<C>(*reinterpret_cast<const bool*>(p));
    case DType::UInt8:
      return scalar::cast<C>(*reinterpret_cast<const uint8_t*>(p));
    case DType::Int8:
      return scalar::cast<C>(*reinterpret_cast<const int8_t*>(p));
    case DType::Int16:
      return scalar::cast<C>(*reinterpret_cast<const int16_t*>(p));
    case DType::Int32:
      return scalar::cast<C>(*reinterpret_cast<const int32_t*>(p));
    case DType::Int64:
      return scalar::cast<C>(*reinterpret_cast<const int64_t*>(p));
    case DType::Float16:
      return scalar::cast<C>(*reinterpret_cast<const Half*>(p));
    case DType::BFloat16:
      return scalar::cast<C>(*reinterpret_cast<const BFloat16*>(p));
    case DType::Float32:
      return scalar::cast<C>(*reinterpret_cast<const float*>(p));
    case DType::Float64:
      return scalar::cast<C>(*reinterpret_cast<const double*>(p));
  }
  return C();
}

/// v rounded to `to` (float16 or bfloat16) and back to float: an operand
/// rounded to the common dtype before its float computation (rounds_to_common).
__host__ __device__ __forceinline__ float round_to_half(float v, DType to) {
  return to == DType::Float16 ? scalar::round_through<Half>(v) : scalar::round_through<BFloat16>(v);
}

/// Stores v converted (scalar::cast) to dtype dt at p.
template <class R>
__device__ __forceinline__ void store_as(char* p, DType dt, R v) {
  switch (dt) {
    case DType::Bool:
      *reinterpret_cast<bool*>(p) = scalar::cast<bool>(v);
      return;
    case DType::UInt8:
      *reinterpret_cast<uint8_t*>(p) = scalar::cast<uint8_t>(v);
      return;
    case DType::Int8:
      *reinterpret_cast<int8_t*>(p) = scalar::cast<int8_t>(v);
      return;
    case DType::Int16:
      *reinterpret_cast<int16_t*>(p) = scalar::cast<int16_t>(v);
      return;
    case DType::Int32:
      *reinterpret_cast<int32_t*>(p) = scalar::cast<int32_t>(v);
      return;
    case DType::Int64:
      *reinterpret_cast<int64_t*>(p) = scalar::cast<int64_t>(v);
      return;
    case DType::Float16:
      *reinterpret_cast<Half*>(p) = scalar::cast<Half>(v);
      return;
    case DType::BFloat16:
      *reinterpret_cast<BFloat16*>(p) = scalar::cast<BFloat16>(v);
      return;
    case DType::Float32:
      *reinterpret_cast<float*>(p) = scalar::cast<float>(v);
      return;
    case DType::Float64:
      *reinterpret_cast<double*>(p) = scalar::cast<double>(v);
      return;
  }
}

// ---------------------------------------------------------------- launches --

/// Blocks for `n` items at `per_block` items per block, at least 1, capped so
/// that grid-stride kernels stay within gridDim.x.
inline unsigned grid_for(int64_t n, int64_t per_block) {
  int64_t b = (n + per_block - 1) / per_block;
  if (b < 1) b = 1;
  if (b > (int64_t{1} << 30)) b = int64_t{1} << 30;
  return static_cast<unsigned>(b);
}

template <class T>
struct TypeTag {
  using type = T;
};

/// Calls g(TypeTag<T>{}) with T the C++ type of `dt` (host code).
template <class G>
void dispatch_dtype(DType dt, const G& g) {
  switch (dt) {
    case DType::Bool:
      return g(TypeTag<bool>{});
    case DType::UInt8:
      return g(TypeTag<uint8_t>{});
    case DType::Int8:
      return g(TypeTag<int8_t>{});
    case DType::Int16:
      return g(TypeTag<int16_t>{});
    case DType::Int32:
      return g(TypeTag<int32_t>{});
    case DType::Int64:
      return g(TypeTag<int64_t>{});
    case DType::Float16:
      return g(TypeTag<Half>{});
    case DType::BFloat16:
      return g(TypeTag<BFloat16>{});
    case DType::Float32:
      return g(TypeTag<float>{});
    case DType::Float64:
      return g(TypeTag<double>{});
  }
}

/// A host value converted to C on the host (the CPU's conversion of a
/// wrapped number or an extra argument: scalar::cast from its own dtype).
template <class C>
C host_value_as(const HostValue& v) {
  C out{};
  dispatch_dtype(v.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T x;
    std::memcpy(static_cast<void*>(&x), v.bytes, sizeof(T));
    out = scalar::cast<C>(x);
  });
  return out;
}

}  // namespace smelt::cuda::impl
