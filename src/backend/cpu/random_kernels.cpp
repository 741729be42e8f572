// Eager CPU normal fill (see random_kernels.h). Built once per CPU capability.
//
// Chunks of kChunk blocks: the ten Philox rounds run over arrays of the
// chunk's counters (lanes of 32 x 32 -> 64-bit products), then the radius,
// angle, cos and sin of every block of the chunk through the shared helpers
// of kernels/random_ops.h (SLEEF's deterministic log / sin / cos, whose
// vector variants give the scalar functions' bits), so each element equals
// random::normal_element's. Chunks are split across threads by
// parallel_for's grain rule.
#include "backend/cpu/random_kernels.h"

#include <algorithm>
#include <type_traits>

#include "backend/cpu/loops.h"
#include "core/dtype_dispatch.h"
#include "kernels/random_ops.h"

namespace smelt::cpu::SMELT_CPU_CAP {

namespace {

/// Blocks (pairs of elements) per chunk.
constexpr int64_t kChunk = 256;

/// w[j][k] = word j of Philox block first + k of `seed` (k < n <= kChunk):
/// random::philox4x32 over lanes.
void philox_lanes(uint64_t seed, uint64_t first, int64_t n, uint32_t (*w)[kChunk]) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t* __restrict c0 = w[0];
  uint32_t* __restrict c1 = w[1];
  uint32_t* __restrict c2 = w[2];
  uint32_t* __restrict c3 = w[3];
  for (int64_t k = 0; k < n; ++k) {
    const uint64_t index = first + static_cast<uint64_t>(k);
    c0[k] = static_cast<uint32_t>(index);
    c1[k] = static_cast<uint32_t>(index >> 32);
    c2[k] = 0;
    c3[k] = 0;
  }
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    for (int64_t k = 0; k < n; ++k) {
      const uint64_t p0 = static_cast<uint64_t>(kM0) * c0[k];
      const uint64_t p1 = static_cast<uint64_t>(kM1) * c2[k];
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[k] ^ k0;
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[k] ^ k1;
      c1[k] = static_cast<uint32_t>(p1);
      c3[k] = static_cast<uint32_t>(p0);
      c0[k] = n0;
      c2[k] = n2;
    }
  }
}

/// Elements [2 b0, min(n, 2 (b0 + m))) of the fill: blocks first + b0 ..
/// first + b0 + m - 1 (m <= kChunk).
template <class T>
void normal_chunk(T* p, int64_t n, uint64_t seed, uint64_t first, int64_t b0, int64_t m) {
  alignas(64) uint32_t w[4][kChunk];
  philox_lanes(seed, first + static_cast<uint64_t>(b0), m, w);
  alignas(64) double rad[kChunk], theta[kChunk], c[kChunk], s[kChunk];
  for (int64_t k = 0; k < m; ++k) {
    rad[k] = random::normal_radius(w[0][k], w[1][k]);
    theta[k] = random::normal_angle(w[2][k], w[3][k]);
  }
  for (int64_t k = 0; k < m; ++k) c[k] = rad[k] * vmath::cos(theta[k]);
  for (int64_t k = 0; k < m; ++k) s[k] = rad[k] * vmath::sin(theta[k]);
  T* __restrict o = p + 2 * b0;
  if (2 * (b0 + m) <= n) {
    for (int64_t k = 0; k < m; ++k) {
      o[2 * k] = random::from_double<T>(c[k]);
      o[2 * k + 1] = random::from_double<T>(s[k]);
    }
  } else {  // the last chunk of an odd count: no element for the last sin
    for (int64_t k = 0; k < m; ++k) {
      o[2 * k] = random::from_double<T>(c[k]);
      if (2 * (b0 + k) + 1 < n) o[2 * k + 1] = random::from_double<T>(s[k]);
    }
  }
}

void normal_fill(const Tensor& out, uint64_t seed, uint64_t first) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const int64_t blocks = (n + 1) / 2;
  const int64_t chunks = (blocks + kChunk - 1) / kChunk;
  SMELT_DISPATCH_ALL(out.dtype(), "randn", [&] {
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
                  std::is_same_v<T, BFloat16>) {
      T* p = static_cast<T*>(out.data_ptr());
      parallel_for(0, chunks, grain_for(2 * kChunk), [&](int64_t c0, int64_t c1) {
        for (int64_t ch = c0; ch < c1; ++ch) {
          const int64_t b0 = ch * kChunk;
          normal_chunk<T>(p, n, seed, first, b0, std::min(kChunk, blocks - b0));
        }
      });
    } else {
      SMELT_INTERNAL_ASSERT(false, "randn: floating output expected, got {}",
                            dtype_name(out.dtype()));
    }
  });
}

}  // namespace

}  // namespace smelt::cpu::SMELT_CPU_CAP

SMELT_REGISTER_DISPATCH(normal_fill_stub, &::smelt::cpu::SMELT_CPU_CAP::normal_fill);
