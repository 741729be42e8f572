// The CUDA dialect of the kernel printer (see cuda_dialect.h).
#include "compiler/codegen/cuda_dialect.h"

#include <fmt/format.h>

#include <sstream>

#include "kernels/embedded_source.h"
#include "smelt/error.h"

namespace smelt::compiler {

namespace {

/// What the embedded headers take from the standard library, for NVRTC
/// (which has no host headers): libcu++ (CCCL, shipped with the toolkit)
/// provides the type traits and limits; the math functions map onto CUDA's
/// math library; the fixed-width integer types and memcpy are the compiler's.
const char* kDevicePrelude = R"(// smelt CUDA translation unit (NVRTC)
#include <cuda/std/type_traits>
#include <cuda/std/limits>
using int8_t = signed char;
using int16_t = short;
using int32_t = int;
using int64_t = long long;
using uint8_t = unsigned char;
using uint16_t = unsigned short;
using uint32_t = unsigned int;
using uint64_t = unsigned long long;
#ifndef INT64_C
#define INT64_C(c) c##LL
#endif
namespace std {
using cuda::std::false_type;
using cuda::std::true_type;
using cuda::std::conditional;
using cuda::std::conditional_t;
using cuda::std::is_floating_point;
using cuda::std::is_floating_point_v;
using cuda::std::is_integral;
using cuda::std::is_integral_v;
using cuda::std::is_same;
using cuda::std::is_same_v;
using cuda::std::is_signed_v;
using cuda::std::make_unsigned;
using cuda::std::make_unsigned_t;
using cuda::std::numeric_limits;
__device__ inline void* memcpy(void* d, const void* s, unsigned long n) { return ::memcpy(d, s, n); }
// CUDA's math library: f-suffixed functions for float, plain ones for double.
#define SMELT_MATH1(F) \
  __device__ inline float F(float x) { return ::F##f(x); } \
  __device__ inline double F(double x) { return ::F(x); }
#define SMELT_MATH2(F) \
  __device__ inline float F(float x, float y) { return ::F##f(x, y); } \
  __device__ inline double F(double x, double y) { return ::F(x, y); }
SMELT_MATH1(exp) SMELT_MATH1(exp2) SMELT_MATH1(expm1) SMELT_MATH1(log) SMELT_MATH1(log2)
SMELT_MATH1(log1p) SMELT_MATH1(sqrt) SMELT_MATH1(sin) SMELT_MATH1(cos) SMELT_MATH1(tan)
SMELT_MATH1(tanh) SMELT_MATH1(erf) SMELT_MATH1(floor) SMELT_MATH1(ceil) SMELT_MATH1(trunc)
SMELT_MATH1(nearbyint) SMELT_MATH1(fabs)
SMELT_MATH2(fmod) SMELT_MATH2(pow) SMELT_MATH2(atan2) SMELT_MATH2(fmin) SMELT_MATH2(fmax)
SMELT_MATH2(copysign)
#undef SMELT_MATH1
#undef SMELT_MATH2
}  // namespace std
)";
}  // namespace

std::string CudaDialect::preamble() const {
  static const std::string prelude =
      kDevicePrelude +
      kernels::embedded_source({"half.h", "vector_math.h", "scalar_ops.h", "reduce_ops.h"}, false);
  return prelude;
}

void CudaDialect::kernel_begin(const KernelDesc& k, CodeBuffer& out) const {
  std::vector<std::string> params;
  for (auto& a : k.args)
    params.push_back(fmt::format("{}{}* __restrict__ {}", a.write ? "" : "const ",
                                 storage_type(a.dtype), a.name));
  if (!k.error_ops.empty()) params.push_back("int* smelt_error");
  out.line(fmt::format("extern \"C\" __global__ void {}({}) {{", k.name, fmt::join(params, ", ")));
  out.indent();
}

void CudaDialect::range_begin(const Range& r, const KernelConfig& c, CodeBuffer& out) const {
  const std::string t = index_type(c.index_bits);
  const std::string n = r.extent.str();
  switch (r.tag) {
    case RangeTag::Serial:
    case RangeTag::Vector:
      out.line(fmt::format("for ({0} {1} = 0; {1} < {2}; ++{1}) {{", t, r.var, n));
      return;
    case RangeTag::Parallel:  // grid-stride: every thread of the grid
      out.line(fmt::format(
          "for ({0} {1} = static_cast<{0}>(blockIdx.x) * blockDim.x + threadIdx.x; {1} < {2}; "
          "{1} += static_cast<{0}>(gridDim.x) * blockDim.x) {{",
          t, r.var, n));
      return;
    case RangeTag::Block:
      out.line(
          fmt::format("for ({0} {1} = blockIdx.x; {1} < {2}; {1} += gridDim.x) {{", t, r.var, n));
      return;
    case RangeTag::Thread:
      out.line(
          fmt::format("for ({0} {1} = threadIdx.x; {1} < {2}; {1} += blockDim.x) {{", t, r.var, n));
      return;
  }
}

void CudaDialect::split_reduce(const Stmt& s, const std::string& acc_type, const std::string& loop,
                               CodeBuffer& out) const {
  SMELT_INTERNAL_ASSERT(false,
                        "the CUDA dialect does not print split reductions yet ({} over {}): the "
                        "GPU compiler adds warp and block combines",
                        s.name, acc_type);
}

std::string CudaDialect::set_error_flag(int code) const {
  return fmt::format("atomicExch(smelt_error, {});", code);
}

}  // namespace smelt::compiler
