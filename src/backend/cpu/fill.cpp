// Eager CPU fills (see fill.h). Random fills take their elements from the
// shared formulas of kernels/random_ops.h in the layout of
// backend::random_blocks (element i reads block first_block + i / per_block);
// blocks are filled in parallel, so results depend on neither the thread
// count nor the device. Normals come from the vectorized kernel of
// random_kernels.h (the same values as random::normal_element).
#include "backend/cpu/fill.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/loops.h"
#include "backend/cpu/random_kernels.h"
#include "core/tensor_impl.h"
#include "kernels/fill_ops.h"
#include "kernels/random_ops.h"

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
    // Split across threads by parallel_for's grain rule, as copies are. With
    // one thread's memset of its 8 MiB output (2050 x 1026 float32), pad took
    // 5.7x PyTorch's time at 16 threads on the H200 host's Xeon.
    if (zero_bits(v)) {
      char* p = static_cast<char*>(dst.data_ptr());
      const int64_t es = static_cast<int64_t>(dst.element_size());
      parallel_for(0, n, kParallelGrain, [&](int64_t b, int64_t e) {
        std::memset(p + b * es, 0, static_cast<size_t>((e - b) * es));
      });
      return;
    }
    SMELT_DISPATCH_ALL(dst.dtype(), "fill", [&] {
      const T value = scalar_to<T>(v);
      T* p = static_cast<T*>(dst.data_ptr());
      parallel_for(0, n, kParallelGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) p[i] = value;
      });
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
  const int64_t s = start.to_int(), st = step.to_int();
  SMELT_DISPATCH_ALL(out.dtype(), "arange", [&] {
    T* p = static_cast<T*>(out.data_ptr());
    for (int64_t i = 0; i < n; ++i) p[i] = fill::arange_element<T>(i, s, st, xs, xst);
  });
}

void linspace(const Tensor& out, double start, double end) {
  const int64_t steps = out.numel();
  SMELT_DISPATCH_ALL(out.dtype(), "linspace", [&] {
    T* p = static_cast<T*>(out.data_ptr());
    for (int64_t i = 0; i < steps; ++i) p[i] = fill::linspace_element<T>(i, steps, start, end);
  });
}

// ---- random -------------------------------------------------------------------

namespace {
/// Calls f(i, block) for every element i; block is the Philox block holding
/// element i's words (`per_block` elements per block). Blocks are split
/// across threads by parallel_for's grain rule.
template <class F>
void for_each_block(int64_t n, int64_t per_block, uint64_t seed, uint64_t first, const F& f) {
  const int64_t nblocks = (n + per_block - 1) / per_block;
  parallel_for(0, nblocks, grain_for(per_block), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      uint32_t w[4];
      random::philox_block(seed, first + static_cast<uint64_t>(b), w);
      const int64_t end = std::min(n, (b + 1) * per_block);
      for (int64_t i = b * per_block; i < end; ++i) f(i, w);
    }
  });
}

template <class T>
constexpr bool is_float_v = std::is_same_v<T, double> || std::is_same_v<T, float> ||
                            std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
}  // namespace

void random_fill(const Tensor& out, const backend::RandomFill& r) {
  using Kind = backend::RandomFill::Kind;
  const int64_t n = out.numel();
  const uint64_t seed = r.seed, first = r.first_block;
  switch (r.kind) {
    case Kind::Uniform: {
      const int bits = backend::uniform_bits(out.dtype());
      SMELT_DISPATCH_ALL(out.dtype(), "rand", [&] {
        if constexpr (is_float_v<T>) {
          T* p = static_cast<T*>(out.data_ptr());
          for_each_block(
              n, random::uniform_per_block(bits), seed, first,
              [&](int64_t i, const uint32_t* w) { p[i] = random::uniform_element<T>(w, i, bits); });
        }
      });
      return;
    }
    case Kind::Normal:
      normal_fill_stub(out, seed, first);
      return;
    case Kind::Integer:
      SMELT_DISPATCH_ALL(out.dtype(), "randint", [&] {
        T* p = static_cast<T*>(out.data_ptr());
        for_each_block(n, 2, seed, first, [&](int64_t i, const uint32_t* w) {
          p[i] = random::integer_element<T>(w, i, r.low, r.range);
        });
      });
      return;
    case Kind::Bernoulli: {
      SMELT_INTERNAL_ASSERT(out.dtype() == DType::Bool, "bernoulli: bool output expected");
      bool* p = static_cast<bool*>(out.data_ptr());
      for_each_block(n, 2, seed, first, [&](int64_t i, const uint32_t* w) {
        p[i] = random::bernoulli_element(w, i, r.p);
      });
      return;
    }
  }
}

}  // namespace smelt::cpu
