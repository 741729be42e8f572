// Eager CPU normal fill (see random_kernels.h). Built once per CPU capability.
//
// Chunks of kChunk blocks: the ten Philox rounds run on lanes of the
// chunk's counters (32 x 32 -> 64-bit products, eight blocks to an AVX2
// register), then the radius, angle, cos and sin of every block of the chunk
// through the shared helpers of kernels/random_ops.h (SLEEF's deterministic
// log / sin / cos, whose vector variants give the scalar functions' bits), so
// each element equals random::normal_element's. Chunks are split across
// threads by parallel_for's grain rule.
#include "backend/cpu/random_kernels.h"

#include <algorithm>
#include <type_traits>

#include "backend/cpu/loops.h"
#include "core/dtype_dispatch.h"
#include "kernels/random_ops.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace smelt::cpu::SMELT_CPU_CAP {

namespace {

/// Blocks (pairs of elements) per chunk.
constexpr int64_t kChunk = 256;

#if defined(__AVX2__)
/// The high and low 32-bit halves of the 32 x 32 -> 64-bit products a * m of
/// 8 lanes (m in every lane).
inline void mul_hi_lo(__m256i a, __m256i m, __m256i& hi, __m256i& lo) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}
#endif

/// w[j][k] = word j of Philox block first + k of `seed` (k < n <= kChunk):
/// random::philox4x32 over lanes (8 blocks to a register with AVX2).
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
  const uint32_t key0 = static_cast<uint32_t>(seed), key1 = static_cast<uint32_t>(seed >> 32);
  int64_t k = 0;
#if defined(__AVX2__)
  // Eight blocks at a time, the state in registers for the ten rounds.
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(kM0));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(kM1));
  for (; k + 8 <= n; k += 8) {
    __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c0 + k));
    __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c1 + k));
    __m256i x2 = _mm256_setzero_si256(), x3 = _mm256_setzero_si256();
    uint32_t k0 = key0, k1 = key1;
    for (int r = 0; r < 10; ++r) {
      if (r > 0) {
        k0 += kW0;
        k1 += kW1;
      }
      __m256i hi0, lo0, hi1, lo1;
      mul_hi_lo(x0, m0, hi0, lo0);
      mul_hi_lo(x2, m1, hi1, lo1);
      x0 = _mm256_xor_si256(_mm256_xor_si256(hi1, x1), _mm256_set1_epi32(static_cast<int>(k0)));
      x1 = lo1;
      x2 = _mm256_xor_si256(_mm256_xor_si256(hi0, x3), _mm256_set1_epi32(static_cast<int>(k1)));
      x3 = lo0;
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c0 + k), x0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c1 + k), x1);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c2 + k), x2);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c3 + k), x3);
  }
#endif
  if (k == n) return;
  uint32_t k0 = key0, k1 = key1;
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    for (int64_t j = k; j < n; ++j) {
      const uint64_t p0 = static_cast<uint64_t>(kM0) * c0[j];
      const uint64_t p1 = static_cast<uint64_t>(kM1) * c2[j];
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[j] ^ k0;
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[j] ^ k1;
      c1[j] = static_cast<uint32_t>(p1);
      c3[j] = static_cast<uint32_t>(p0);
      c0[j] = n0;
      c2[j] = n2;
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
