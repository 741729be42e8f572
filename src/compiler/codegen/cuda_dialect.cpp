// The CUDA dialect of the kernel printer (see cuda_dialect.h).
#include "compiler/codegen/cuda_dialect.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <sstream>

#include "kernels/embedded_source.h"
#include "smelt/error.h"

namespace smelt::compiler {

namespace {

/// What the embedded headers take from the standard library, for NVRTC
/// (which has no host headers): the few type traits and numeric_limits they
/// use, written here (libcu++'s <cuda/std/type_traits> and <cuda/std/limits>
/// would do, but parsing them costs NVRTC seconds per translation unit); the
/// math functions map onto CUDA's math library; the fixed-width integer types
/// and memcpy are the compiler's.
const char* kDevicePrelude = R"(// smelt CUDA translation unit (NVRTC)
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
template <class T, T v>
struct integral_constant {
  static constexpr T value = v;
};
using true_type = integral_constant<bool, true>;
using false_type = integral_constant<bool, false>;
template <bool B, class T, class F>
struct conditional {
  using type = T;
};
template <class T, class F>
struct conditional<false, T, F> {
  using type = F;
};
template <bool B, class T, class F>
using conditional_t = typename conditional<B, T, F>::type;
template <class A, class B>
struct is_same : false_type {};
template <class A>
struct is_same<A, A> : true_type {};
template <class A, class B>
inline constexpr bool is_same_v = is_same<A, B>::value;
template <class T>
struct is_floating_point : integral_constant<bool, is_same_v<T, float> || is_same_v<T, double>> {};
template <class T>
inline constexpr bool is_floating_point_v = is_floating_point<T>::value;
template <class T>
struct is_integral
    : integral_constant<bool, is_same_v<T, bool> || is_same_v<T, char> ||
                                  is_same_v<T, signed char> || is_same_v<T, unsigned char> ||
                                  is_same_v<T, short> || is_same_v<T, unsigned short> ||
                                  is_same_v<T, int> || is_same_v<T, unsigned> ||
                                  is_same_v<T, long> || is_same_v<T, unsigned long> ||
                                  is_same_v<T, long long> || is_same_v<T, unsigned long long>> {};
template <class T>
inline constexpr bool is_integral_v = is_integral<T>::value;
template <class T>
inline constexpr bool is_signed_v = is_floating_point_v<T> || (is_integral_v<T> && T(-1) < T(0));
template <class T> struct make_unsigned { using type = T; };
template <> struct make_unsigned<char> { using type = unsigned char; };
template <> struct make_unsigned<signed char> { using type = unsigned char; };
template <> struct make_unsigned<short> { using type = unsigned short; };
template <> struct make_unsigned<int> { using type = unsigned; };
template <> struct make_unsigned<long> { using type = unsigned long; };
template <> struct make_unsigned<long long> { using type = unsigned long long; };
template <class T>
using make_unsigned_t = typename make_unsigned<T>::type;
template <class T>
struct numeric_limits {  // integers
  static constexpr bool is_signed = is_signed_v<T>;
  __host__ __device__ static constexpr T min() {
    return is_signed ? T(static_cast<make_unsigned_t<T>>(1) << (sizeof(T) * 8 - 1)) : T(0);
  }
  __host__ __device__ static constexpr T max() { return T(~min()); }
  __host__ __device__ static constexpr T lowest() { return min(); }
};
template <>
struct numeric_limits<bool> {
  __host__ __device__ static constexpr bool min() { return false; }
  __host__ __device__ static constexpr bool max() { return true; }
  __host__ __device__ static constexpr bool lowest() { return false; }
};
template <>
struct numeric_limits<float> {
  __host__ __device__ static constexpr float infinity() { return __builtin_bit_cast(float, 0x7f800000u); }
  __host__ __device__ static constexpr float quiet_NaN() { return __builtin_bit_cast(float, 0x7fc00000u); }
  __host__ __device__ static constexpr float max() { return __builtin_bit_cast(float, 0x7f7fffffu); }
  __host__ __device__ static constexpr float min() { return __builtin_bit_cast(float, 0x00800000u); }
  __host__ __device__ static constexpr float lowest() { return -max(); }
};
template <>
struct numeric_limits<double> {
  __host__ __device__ static constexpr double infinity() {
    return __builtin_bit_cast(double, 0x7ff0000000000000ull);
  }
  __host__ __device__ static constexpr double quiet_NaN() {
    return __builtin_bit_cast(double, 0x7ff8000000000000ull);
  }
  __host__ __device__ static constexpr double max() {
    return __builtin_bit_cast(double, 0x7fefffffffffffffull);
  }
  __host__ __device__ static constexpr double min() {
    return __builtin_bit_cast(double, 0x0010000000000000ull);
  }
  __host__ __device__ static constexpr double lowest() { return -max(); }
};
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
      kernels::embedded_source(
          {"half.h", "vector_math.h", "scalar_ops.h", "reduce_ops.h", "cuda_device.h"}, false);
  return prelude;
}

namespace {

/// Steps of `vec` elements in a row of `extent` elements.
std::string units_of(const Range& r, const KernelConfig& c) {
  return c.vec > 1 ? fmt::format("({}) / {}", r.extent.str(), c.vec) : r.extent.str();
}

}  // namespace

void CudaDialect::kernel_begin(const KernelDesc& k, CodeBuffer& out) const {
  std::vector<std::string> params;
  for (auto& a : k.args)
    params.push_back(a.memory_of.empty()
                         ? fmt::format("{}{}* __restrict__ {}{}", const_of(a),
                                       storage_type(a.dtype), a.name, a.aligned ? "_p" : "")
                         : fmt::format("{}* {}_unused", storage_type(a.dtype), a.name));
  if (!k.error_ops.empty()) params.push_back("int* __restrict__ smelt_error");
  out.line(fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{",
                       std::max(1, k.config.block_size), k.name, fmt::join(params, ", ")));
  out.indent();
  // Buffers the runtime guarantees 16-byte aligned (allocator blocks, the
  // arena, inputs whose alignment the guards check): the compiler then
  // merges consecutive accesses into vector loads and stores.
  for (auto& a : k.args)
    if (a.aligned && a.memory_of.empty())
      out.line(fmt::format(
          "{0}{1}* __restrict__ {2} = static_cast<{0}{1}*>(__builtin_assume_aligned({2}_p, 16));",
          const_of(a), storage_type(a.dtype), a.name));
  // A result written in place: a pointer based on the read argument's
  // (Step::in_place), its own parameter unused.
  for (auto& a : k.args)
    if (!a.memory_of.empty())
      out.line(fmt::format("{0}* const {1} = reinterpret_cast<{0}*>({2});", storage_type(a.dtype),
                           a.name, a.memory_of));
  const KernelConfig& c = k.config;
  if (c.threads_per_row > 0) {
    // The thread's row in its block and its place among the row's threads.
    const int lanes = c.threads_per_row, rows = c.rows_per_block;
    out.line(fmt::format("const int r_lane = static_cast<int>(threadIdx.x) {} {};",
                         c.outer ? "/" : "%", c.outer ? rows : lanes));
    out.line(fmt::format("const int r_row = static_cast<int>(threadIdx.x) {} {};",
                         c.outer ? "%" : "/", c.outer ? rows : lanes));
  }
}

void CudaDialect::range_begin(const Range& r, const KernelConfig& c, CodeBuffer& out) const {
  const std::string t = index_type(c.index_bits);
  const std::string n = r.extent.str();
  const std::string& v = r.var;
  switch (r.tag) {
    case RangeTag::Serial:
    case RangeTag::Vector:
      out.line(fmt::format("for ({0} {1} = 0; {1} < {2}; ++{1}) {{", t, v, n));
      return;
    case RangeTag::Parallel: {
      // One thread per `vec` consecutive iterations (a grid that covers them);
      // with several vectors per thread, the block's threads take the
      // vectors of one pass side by side, pass after pass.
      const int passes = c.vectors_per_thread();
      std::string block_index = fmt::format("static_cast<{}>(blockIdx.x)", t);
      if (passes > 1) {
        out.line("#pragma unroll");
        out.line(fmt::format("for (int {0}_u = 0; {0}_u < {1}; ++{0}_u) {{", v, passes));
        block_index = fmt::format("({} * {} + {}_u)", block_index, passes, v);
      }
      const std::string base = fmt::format("({1} * {2} + static_cast<{0}>(threadIdx.x))", t,
                                           block_index, std::max(1, c.block_size));
      if (c.vec <= 1) {
        out.line(fmt::format("const {} {} = {};", t, v, base));
        out.line(fmt::format("if ({} < {}) {{", v, n));
        return;
      }
      out.line(fmt::format("const {} {}_w = {};", t, v, base));  // the vector's number
      out.line(fmt::format("const {0} {1}_base = {1}_w * {2};", t, v, c.vec));
      out.line(fmt::format("if ({}_base < {}) {{", v, n));
      out.line("#pragma unroll");
      out.line(fmt::format("for (int {0}_v = 0; {0}_v < {1}; ++{0}_v) {{", v, c.vec));
      out.line(fmt::format("const {0} {1} = {1}_base + {1}_v;", t, v));
      return;
    }
    case RangeTag::Block: {
      // Rows over blocks, rows_per_block at a time; a last block's rows past
      // the end repeat the last row (every thread takes part in the
      // combinations, which synchronize the block).
      const int p = std::max(1, c.rows_per_block);
      out.line(
          fmt::format("for ({0} {1}_b = static_cast<{0}>(blockIdx.x); {1}_b < ({2} + {3}) / {4}; "
                      "{1}_b += static_cast<{0}>(gridDim.x)) {{",
                      t, v, n, p - 1, p));
      if (p == 1) {
        out.line(fmt::format("const {0} {1} = {1}_b;", t, v));
      } else {
        out.line(fmt::format("const {0} {1}_at = {1}_b * {2} + r_row;", t, v, p));
        out.line(fmt::format("const {0} {1} = {1}_at < {2} ? {1}_at : {2} - 1;", t, v, n));
      }
      return;
    }
    case RangeTag::Thread: {
      const int lanes = std::max(1, c.threads_per_row);
      const std::string units = units_of(r, c);
      std::string step;
      if (c.row_iters > 0) {
        // A persistent row: row_iters unrolled steps (its row buffers stay in registers).
        out.line("#pragma unroll");
        out.line(fmt::format("for (int {0}_k = 0; {0}_k < {1}; ++{0}_k) {{", v, c.row_iters));
        // No bound check where the steps cover the row exactly (a row of 4096
        // in 4 steps of 128 lanes x 8): without the branch between them, the
        // steps' loads are all issued before the first is used.
        const std::optional<int64_t> extent = r.extent.as_const();
        const int64_t per_step = static_cast<int64_t>(lanes) * std::max(1, c.vec);
        if (!extent || *extent != static_cast<int64_t>(c.row_iters) * per_step)
          out.line(fmt::format("if ({0}_k * {1} + r_lane >= {2}) break;", v, lanes, units));
        step = fmt::format("(static_cast<{}>({}_k) * {} + r_lane)", t, v, lanes);
      } else {
        // A looped row: unrolled by 4, so that each thread has 4 loads in
        // flight instead of one (a thread's elements are still folded in
        // order). One load at a time left batch_norm's reduction over N, H, W
        // latency-bound (2.2 of the 4.3 TB/s).
        out.line("#pragma unroll 4");
        out.line(fmt::format("for ({0} {1}_s = r_lane; {1}_s < {2}; {1}_s += {3}) {{", t, v, units,
                             lanes));
        step = v + "_s";
      }
      if (c.vec <= 1) {
        out.line(fmt::format("const {} {} = {};", t, v, step));
        return;
      }
      out.line("#pragma unroll");
      out.line(fmt::format("for (int {0}_v = 0; {0}_v < {1}; ++{0}_v) {{", v, c.vec));
      out.line(fmt::format("const {0} {1} = {2} * {3} + {1}_v;", t, v, step, c.vec));
      return;
    }
  }
}

void CudaDialect::range_end(const Range& r, const KernelConfig& c, CodeBuffer& out) const {
  const bool vector_loop = c.vec > 1 && (r.tag == RangeTag::Parallel || r.tag == RangeTag::Thread);
  const bool passes = r.tag == RangeTag::Parallel && c.vectors_per_thread() > 1;
  out.line(std::string(1 + (vector_loop ? 1 : 0) + (passes ? 1 : 0), '}'));
}

std::string CudaDialect::row_buffer(const std::string& type, const std::string& name,
                                    int64_t extent, const KernelConfig& c) const {
  SMELT_INTERNAL_ASSERT(c.row_iters > 0, "row buffer {} outside a persistent CUDA row", name);
  // This thread's share of the row (registers, once the steps are unrolled).
  return fmt::format("{} {}[{}];", type, name, c.row_iters * std::max(1, c.vec));
}

std::string CudaDialect::row_slot(const IndexExpr& index, const KernelConfig& c) const {
  SMELT_INTERNAL_ASSERT(index.str() == "r", "row buffer read at {}, not at the row position r",
                        index.str());
  return c.vec > 1 ? fmt::format("r_k * {} + r_v", c.vec) : "r_k";
}

std::string CudaDialect::element_index(const IndexExpr& index, const KernelConfig& c) const {
  // In a reduction row read in vectors of `vec`, element r is a unit's start
  // plus its lane r_v (range_begin's loops). An index over several runs of
  // the row ((r / run) * stride + r % run) written in those terms is the
  // unit's run offset plus r_v, so the vector's accesses are visibly
  // adjacent and NVVM merges them into one 16-byte access, as it does for a
  // contiguous row (whose index is already linear in r: printed as it is).
  if (!c.reduction) {
    // Likewise a pointwise thread's vector of `vec` elements i = i_w * vec +
    // i_v (range_begin's loops), where i is read through a permutation whose
    // contiguous runs are whole vectors (a transpose of heads: runs of 32):
    // the run offset of i_w plus i_v, one 16-byte access instead of `vec`
    // scalar ones, each with its own divisions.
    const std::optional<int64_t> n = index.var_extent("i");
    if (c.vec <= 1 || !c.parallel || !n || *n % c.vec != 0 || index.coefficient("i"))
      return index.str();
    return index
        .substitute({{"i", IndexExpr::var("i_w", std::max<int64_t>(2, *n / c.vec)) * c.vec +
                               IndexExpr::var("i_v", c.vec)}})
        .str();
  }
  const std::optional<int64_t> extent = index.var_extent("r");
  if (c.vec <= 1 || c.outer || !extent || index.coefficient("r")) return index.str();
  const int64_t units = std::max<int64_t>(2, (*extent + c.vec - 1) / c.vec);
  const int lanes = std::max(1, c.threads_per_row);
  const IndexExpr unit = c.row_iters > 0 ? IndexExpr::var("r_k", std::max(2, c.row_iters)) * lanes +
                                               IndexExpr::var("r_lane", std::max(2, lanes))
                                         : IndexExpr::var("r_s", units);
  return index.substitute({{"r", unit * c.vec + IndexExpr::var("r_v", c.vec)}}).str();
}

std::string CudaDialect::once_per_row(const KernelConfig& c) const {
  return c.threads_per_row > 1 ? "if (r_lane == 0) " : "";
}

void CudaDialect::split_reduce(const Stmt& s, const std::string& acc_type, const std::string& loop,
                               const KernelConfig& c, CodeBuffer& out) const {
  // `loop` folds this thread's share of the row into its partial; the row's
  // threads then combine theirs (every thread gets the result).
  out.line("{");
  out.indent();
  std::istringstream in(loop);
  for (std::string l; std::getline(in, l);) out.line(l);
  // Welford's partials are shifted sums over the row's s.extent elements.
  out.line(fmt::format("{} = smelt::device::row_reduce<{}, {}, {}, {}>({}, r_lane{});", s.name,
                       acc_type, std::max(1, c.threads_per_row), std::max(1, c.rows_per_block),
                       c.outer ? "true" : "false", s.partial,
                       s.accumulator == "Welford" ? fmt::format(", {}", s.extent) : ""));
  out.dedent();
  out.line("}");
}

std::string CudaDialect::storage_type(DType t) const {
  return t == DType::Float16 || t == DType::BFloat16 ? "uint16_t" : Dialect::storage_type(t);
}

std::string CudaDialect::half_to_float(DType t, const std::string& v) const {
  return fmt::format("smelt::device::{}_to_float({})", t == DType::BFloat16 ? "bf16" : "f16", v);
}

std::string CudaDialect::float_to_half(DType t, const std::string& v) const {
  return fmt::format("smelt::device::float_to_{}({})", t == DType::BFloat16 ? "bf16" : "f16", v);
}

std::string CudaDialect::staged_store_lane(const Range& r, const KernelConfig& c, DType t) const {
  const bool vector_loop = c.vec > 1 && (r.tag == RangeTag::Parallel || r.tag == RangeTag::Thread);
  return vector_loop && t == DType::BFloat16 ? r.var + "_v" : "";
}

std::string CudaDialect::floats_to_half(DType t, const std::string& floats,
                                        const std::string& bits) const {
  SMELT_INTERNAL_ASSERT(t == DType::BFloat16, "staged {} stores", dtype_name(t));
  return fmt::format("smelt::device::floats_to_bf16({}, {})", floats, bits);
}

std::string CudaDialect::staged_store_redo(DType, const std::string& floats) const {
  return fmt::format("smelt::device::any_nan({})", floats);
}

std::string CudaDialect::set_error_flag(int code) const {
  // A plain store: the flag may be mapped host memory (a deferred flag, read
  // at the next synchronization), and any one failing thread's code is enough.
  return fmt::format("*smelt_error = {};", code);
}

}  // namespace smelt::compiler
