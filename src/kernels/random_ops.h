// smelt/kernels/random_ops.h — the counter-based random stream, written once
// for every device: the Philox4x32-10 block function (Salmon, Moraes, Dror &
// Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011) and the
// formulas that turn a block's four 32-bit words into one element of
// rand / randn / randint / a Bernoulli mask. core/random.cpp (the global
// generator), the CPU fill (src/backend/cpu/fill.cpp) and the CUDA fill
// (src/backend/cuda/fill.cu) call these, so a seed gives the same tensor on
// every device. Element i of a fill reads block first_block + i / per_block
// (backend::random_blocks gives the counts):
//   uniform (<= 32-bit floats): 4 elements per block, word i % 4 (the top
//     `bits` bits, bits = the dtype's mantissa digits, so values stay < 1);
//   uniform float64, integers, Bernoulli: 2 elements per block, the 64-bit
//     word pair i % 2;
//   normal: 2 elements per block, Box-Muller on two 53-bit uniforms of the
//     block (cos for the even, sin for the odd element), with the log, sin
//     and cos of kernels/vector_math.h (SLEEF's deterministic functions on
//     the host, in scalar and vector code alike; CUDA's on the device).
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/vector_math.h"
#include "smelt/half.h"

namespace smelt::random {

/// The Philox4x32-10 bijection of a 128-bit counter `ctr` (little-endian
/// words) under the 64-bit key: four 32-bit outputs.
SMELT_HD void philox4x32(const uint32_t ctr[4], uint64_t key, uint32_t out[4]) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u;  // golden ratio
  constexpr uint32_t kW1 = 0xBB67AE85u;  // sqrt(3) - 1
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c0, p1 = static_cast<uint64_t>(kM1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/// Block `index` of the stream keyed by `seed`: counter (index, 0).
SMELT_HD void philox_block(uint64_t seed, uint64_t index, uint32_t out[4]) {
  const uint32_t ctr[4] = {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 0, 0};
  philox4x32(ctr, seed, out);
}

/// Words 0-1 (or 2-3) of a block as one 64-bit value, low word first.
SMELT_HD uint64_t words64(const uint32_t* w) { return (static_cast<uint64_t>(w[1]) << 32) | w[0]; }

/// Elements per block of a uniform fill with `bits` random bits per element.
SMELT_HD int64_t uniform_per_block(int bits) { return bits > 32 ? 2 : 4; }

/// Stores a double into element type T (float16/bfloat16 through float).
template <class T>
SMELT_HD T from_double(double v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    return static_cast<T>(static_cast<float>(v));
  }
}

/// Uniform [0, 1) element i of its block `w` on the grid of 2^-bits (floating T).
template <class T>
SMELT_HD T uniform_element(const uint32_t* w, int64_t i, int bits) {
  const uint64_t v = bits > 32 ? words64(w + 2 * (i % 2)) : static_cast<uint64_t>(w[i % 4]) << 32;
  return from_double<T>(static_cast<double>(v >> (64 - bits)) * std::ldexp(1.0, -bits));
}

/// The 53-bit integer (w1:w0 >> 11) of the 64-bit word pair (w0 low, w1
/// high) as a double, exactly: w1 * 2^21 + (w0 >> 11), each part converted
/// through a signed 32-bit integer (conversions that vectorize on every ISA).
SMELT_HD double words53(uint32_t w0, uint32_t w1) {
  const double hi = static_cast<double>(static_cast<int32_t>(w1 ^ 0x80000000u)) + 2147483648.0;
  return hi * 0x1.0p21 + static_cast<double>(static_cast<int32_t>(w0 >> 11));
}

/// Box-Muller radius sqrt(-2 log u1) of the block's words 0-1 (u1 =
/// 1 - 53-bit uniform, in (0, 1], so that log(u1) is finite).
SMELT_HD double normal_radius(uint32_t w0, uint32_t w1) {
  const double u1 = 1.0 - words53(w0, w1) * 0x1.0p-53;
  return std::sqrt(-2.0 * vmath::log(u1));
}

/// Box-Muller angle 2 pi u2 of the block's words 2-3 (u2 a 53-bit uniform in [0, 1)).
SMELT_HD double normal_angle(uint32_t w2, uint32_t w3) {
  return 2.0 * 3.14159265358979323846 * (words53(w2, w3) * 0x1.0p-53);
}

/// Box-Muller radius r and angle theta of block `w`: its two normals are
/// r * cos(theta) and r * sin(theta).
SMELT_HD void normal_polar(const uint32_t* w, double& r, double& theta) {
  r = normal_radius(w[0], w[1]);
  theta = normal_angle(w[2], w[3]);
}

/// Standard normal element i of its block (normal_polar: cos for an even i,
/// sin for an odd one).
template <class T>
SMELT_HD T normal_element(const uint32_t* w, int64_t i) {
  double r, theta;
  normal_polar(w, r, theta);
  return from_double<T>(i % 2 == 0 ? r * vmath::cos(theta) : r * vmath::sin(theta));
}

/// low + (64 random bits mod range) as element type T (modulo bias <= range / 2^64).
template <class T>
SMELT_HD T integer_element(const uint32_t* w, int64_t i, int64_t low, uint64_t range) {
  const uint64_t v = words64(w + 2 * (i % 2));
  const int64_t x = static_cast<int64_t>(static_cast<uint64_t>(low) + v % range);
  if constexpr (std::is_same_v<T, bool>) {
    return x != 0;
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(x));
  } else {
    return static_cast<T>(x);
  }
}

/// True with probability p (a 53-bit uniform below p).
SMELT_HD bool bernoulli_element(const uint32_t* w, int64_t i, double p) {
  return static_cast<double>(words64(w + 2 * (i % 2)) >> 11) * 0x1.0p-53 < p;
}

}  // namespace smelt::random
