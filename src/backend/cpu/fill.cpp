// Eager CPU fills (see fill.h). Random fills reproduce the layout of
// backend::random_blocks: element i of a fill reads words of block
// first_block + i / per_block, and blocks are filled in parallel, so results
// do not depend on the thread count.
#include "backend/cpu/fill.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/loops.h"
#include "core/random.h"
#include "core/tensor_impl.h"

namespace smelt::cpu {

namespace {

/// True when `v` stored in any dtype is all-zero bits.
bool zero_bits(const Scalar& v) {
  return v.is_floating() ? v.to_double() == 0.0 && !std::signbit(v.to_double()) : v.to_int() == 0;
}

}  // namespace

void fill(const Tensor& dst, const Scalar& v) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  if (dst.is_contiguous()) {
    if (zero_bits(v)) {
      std::memset(dst.data_ptr(), 0, n * dst.element_size());
      return;
    }
    SMELT_DISPATCH_ALL(dst.dtype(), "fill", [&] {
      const T value = scalar_to<T>(v);
      T* p = static_cast<T*>(dst.data_ptr());
      for (int64_t i = 0; i < n; ++i) p[i] = value;
    });
    return;
  }
  SMELT_DISPATCH_ALL(dst.dtype(), "fill", [&] {
    const T value = scalar_to<T>(v);
    for_each_row(dst.sizes(), {static_cast<char*>(dst.data_ptr())},
                 {broadcast_byte_strides(dst, dst.sizes())},
                 [value](char** p, const int64_t* s, int64_t len) {
                   for (int64_t i = 0; i < len; ++i) *reinterpret_cast<T*>(p[0] + i * s[0]) = value;
                 });
  });
}

void arange(const Tensor& out, const Scalar& start, const Scalar& step) {
  const int64_t n = out.numel();
  const double xs = start.to_double(), xst = step.to_double();
  SMELT_DISPATCH_ALL(out.dtype(), "arange", [&] {
    T* p = static_cast<T*>(out.data_ptr());
    if constexpr (std::is_same_v<T, bool>) {
      for (int64_t i = 0; i < n; ++i) p[i] = (xs + xst * static_cast<double>(i)) != 0.0;
    } else if constexpr (std::is_integral_v<T>) {
      // Integer output: computed in int64 (PyTorch's accumulate type for integers).
      int64_t s = start.to_int(), st = step.to_int();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(s + st * i);
    } else {
      // Floating output: start + i * step in double (PyTorch's CPU accumulate type).
      for (int64_t i = 0; i < n; ++i) {
        double v = xs + xst * static_cast<double>(i);
        if constexpr (std::is_floating_point_v<T>) {
          p[i] = static_cast<T>(v);
        } else {
          p[i] = T(static_cast<float>(v));
        }
      }
    }
  });
}

void linspace(const Tensor& out, double start, double end) {
  const int64_t steps = out.numel();
  // PyTorch's symmetric formula: the first half counts up from start, the second
  // half counts down from end, so both endpoints are exact.
  const int64_t halfway = steps / 2;
  SMELT_DISPATCH_ALL(out.dtype(), "linspace", [&] {
    T* p = static_cast<T*>(out.data_ptr());
    using S = std::conditional_t<std::is_same_v<T, double>, double,
                                 std::conditional_t<std::is_same_v<T, float>, float, double>>;
    const S s = static_cast<S>(start), e = static_cast<S>(end);
    const S step = steps == 1 ? S(0) : (e - s) / static_cast<S>(steps - 1);
    for (int64_t i = 0; i < steps; ++i) {
      S v = i < halfway ? s + step * static_cast<S>(i) : e - step * static_cast<S>(steps - i - 1);
      if constexpr (std::is_same_v<T, bool>) {
        p[i] = v != S(0);
      } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        p[i] = T(static_cast<float>(v));
      } else if constexpr (std::is_integral_v<T>) {
        p[i] = scalar::cast<T>(v);
      } else {
        p[i] = static_cast<T>(v);
      }
    }
  });
}

// ---- random -------------------------------------------------------------------

namespace {
constexpr int64_t kRandomGrain = 1 << 14;

inline uint64_t words64(const uint32_t* w) { return (static_cast<uint64_t>(w[1]) << 32) | w[0]; }

/// Calls f(i, block) for every element i in parallel; block is the Philox
/// block holding element i's words (`per_block` elements per block).
template <class F>
void for_each_block(int64_t n, int64_t per_block, uint64_t seed, uint64_t first, const F& f) {
  const int64_t nblocks = (n + per_block - 1) / per_block;
#pragma omp parallel for schedule(static) if (n >= kRandomGrain)
  for (int64_t b = 0; b < nblocks; ++b) {
    uint32_t w[4];
    detail::Generator::block_at(seed, first + static_cast<uint64_t>(b), w);
    const int64_t end = std::min(n, (b + 1) * per_block);
    for (int64_t i = b * per_block; i < end; ++i) f(i, w);
  }
}

/// Mantissa bits of a floating dtype (the uniform grid used so that values stay < 1).
int uniform_bits(DType t) {
  switch (t) {
    case DType::Float16:
      return 11;
    case DType::BFloat16:
      return 8;
    case DType::Float32:
      return 24;
    default:
      return 53;
  }
}

template <class T>
constexpr bool is_float_v = std::is_same_v<T, double> || std::is_same_v<T, float> ||
                            std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
/// Standard normal values from Philox blocks first, first + 1, ...: one block
/// per pair of elements, Box-Muller on two 53-bit uniforms, its radius and
/// angle once, then cos for the even element and sin for the odd one.
template <class T>
void normal_fill(T* p, int64_t n, uint64_t seed, uint64_t first) {
  auto store = [p](int64_t i, double z) {
    if constexpr (std::is_same_v<T, double>) {
      p[i] = z;
    } else {
      p[i] = static_cast<T>(static_cast<float>(z));
    }
  };
  const int64_t pairs = (n + 1) / 2;
#pragma omp parallel for schedule(static) if (n >= kRandomGrain)
  for (int64_t b = 0; b < pairs; ++b) {
    uint32_t w[4];
    detail::Generator::block_at(seed, first + static_cast<uint64_t>(b), w);
    // u1 in (0, 1] so that log(u1) is finite.
    const double u1 = 1.0 - static_cast<double>(words64(w) >> 11) * 0x1.0p-53;
    const double u2 = static_cast<double>(words64(w + 2) >> 11) * 0x1.0p-53;
    const double rr = std::sqrt(-2.0 * std::log(u1));
    const double theta = 2.0 * 3.14159265358979323846 * u2;
    store(2 * b, rr * std::cos(theta));
    // (opaque: GCC would merge sin and cos of one value into a sincos call,
    // whose results may differ from theirs in the last bit)
    if (2 * b + 1 < n) store(2 * b + 1, rr * std::sin(scalar::opaque(theta)));
  }
}
}  // namespace

void random_fill(const Tensor& out, const backend::RandomFill& r) {
  using Kind = backend::RandomFill::Kind;
  const int64_t n = out.numel();
  const uint64_t seed = r.seed, first = r.first_block;
  switch (r.kind) {
    case Kind::Uniform: {
      const int bits = uniform_bits(out.dtype());
      const double scale = std::ldexp(1.0, -bits);
      const int64_t per_block = bits > 32 ? 2 : 4;
      SMELT_DISPATCH_ALL(out.dtype(), "rand", [&] {
        if constexpr (is_float_v<T>) {
          T* p = static_cast<T*>(out.data_ptr());
          for_each_block(n, per_block, seed, first, [&](int64_t i, const uint32_t* w) {
            uint64_t v =
                per_block == 2 ? words64(w + 2 * (i % 2)) : static_cast<uint64_t>(w[i % 4]) << 32;
            double u = static_cast<double>(v >> (64 - bits)) * scale;  // exact in T, < 1
            if constexpr (std::is_same_v<T, double>) {
              p[i] = u;
            } else {
              p[i] = static_cast<T>(static_cast<float>(u));
            }
          });
        }
      });
      return;
    }
    case Kind::Normal:
      SMELT_DISPATCH_ALL(out.dtype(), "randn", [&] {
        if constexpr (is_float_v<T>) normal_fill(static_cast<T*>(out.data_ptr()), n, seed, first);
      });
      return;
    case Kind::Integer: {
      const int64_t low = r.low;
      const uint64_t range = r.range;
      SMELT_DISPATCH_ALL(out.dtype(), "randint", [&] {
        T* p = static_cast<T*>(out.data_ptr());
        for_each_block(n, 2, seed, first, [&](int64_t i, const uint32_t* w) {
          // Modulo reduction: bias <= range / 2^64, negligible for tensor sizes.
          uint64_t v = words64(w + 2 * (i % 2));
          int64_t x = static_cast<int64_t>(static_cast<uint64_t>(low) + v % range);
          if constexpr (std::is_same_v<T, bool>) {
            p[i] = x != 0;
          } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
            p[i] = T(static_cast<float>(x));
          } else {
            p[i] = static_cast<T>(x);
          }
        });
      });
      return;
    }
    case Kind::Bernoulli: {
      SMELT_INTERNAL_ASSERT(out.dtype() == DType::Bool, "bernoulli: bool output expected");
      bool* p = static_cast<bool*>(out.data_ptr());
      const double keep = r.p;
      for_each_block(n, 2, seed, first, [&](int64_t i, const uint32_t* w) {
        double u = static_cast<double>(words64(w + 2 * (i % 2)) >> 11) * 0x1.0p-53;
        p[i] = u < keep;
      });
      return;
    }
  }
}

}  // namespace smelt::cpu
