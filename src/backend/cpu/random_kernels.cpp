// Eager CPU normal fill (see random_kernels.h). Built once per CPU capability.
//
// Chunks of kChunk blocks: the ten Philox rounds run on lanes of the
// chunk's counters (32 x 32 -> 64-bit products, sixteen blocks to an AVX-512
// register, eight to an AVX2 one), then the radius, angle, cos and sin of every block of the chunk
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

/// Philox4x32-10's multipliers and key increments (random::philox4x32).
constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;

#if defined(__AVX2__)
/// Eight 32-bit lanes of AVX2.
struct Lanes8 {
  using V = __m256i;
  static constexpr int64_t kWidth = 8;
  static V load(const uint32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const V*>(p)); }
  static void store(uint32_t* p, V v) { _mm256_storeu_si256(reinterpret_cast<V*>(p), v); }
  static V splat(uint32_t u) { return _mm256_set1_epi32(static_cast<int>(u)); }
  static V zero() { return _mm256_setzero_si256(); }
  static V xor3(V a, V b, V c) { return _mm256_xor_si256(_mm256_xor_si256(a, b), c); }
  /// The high and low 32-bit halves of the 32 x 32 -> 64-bit products a * m.
  static void mul_hi_lo(V a, V m, V& hi, V& lo) {
    const V even = _mm256_mul_epu32(a, m);
    const V odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
    lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
    hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  }
};
#endif
#if defined(__AVX512F__)
/// Sixteen 32-bit lanes of AVX-512. (The zero-masking forms with every lane
/// on: GCC 12 warns of the unmasked ones' undefined pass-through operand, its
/// bug 105593.)
struct Lanes16 {
  using V = __m512i;
  static constexpr int64_t kWidth = 16;
  static constexpr __mmask8 kAll = 0xFF;
  static V load(const uint32_t* p) { return _mm512_loadu_si512(p); }
  static void store(uint32_t* p, V v) { _mm512_storeu_si512(p, v); }
  static V splat(uint32_t u) { return _mm512_set1_epi32(static_cast<int>(u)); }
  static V zero() { return _mm512_setzero_si512(); }
  /// a ^ b ^ c in one instruction (vpternlogd).
  static V xor3(V a, V b, V c) { return _mm512_ternarylogic_epi32(a, b, c, 0x96); }
  /// Each half gathered by one masked in-lane shuffle: lo's odd dwords from
  /// odd's even ones, hi's even dwords from even's odd ones (two instructions
  /// where shifts and blends take four).
  static void mul_hi_lo(V a, V m, V& hi, V& lo) {
    const V even = _mm512_maskz_mul_epu32(kAll, a, m);
    const V odd = _mm512_maskz_mul_epu32(kAll, _mm512_maskz_srli_epi64(kAll, a, 32), m);
    lo = _mm512_mask_shuffle_epi32(even, 0xAAAA, odd, _MM_PERM_CCAA);
    hi = _mm512_mask_shuffle_epi32(odd, 0x5555, even, _MM_PERM_DDBB);
  }
};
#endif

/// The ten rounds on L::kWidth blocks at a time of c0..c3 (counters in, words
/// out), the state in registers, from block k while a whole vector remains:
/// returns the first block not done.
template <class L>
int64_t philox_vectors(uint32_t key0, uint32_t key1, int64_t k, int64_t n, uint32_t* c0,
                       uint32_t* c1, uint32_t* c2, uint32_t* c3) {
  using V = typename L::V;
  const V m0 = L::splat(kM0), m1 = L::splat(kM1);
  for (; k + L::kWidth <= n; k += L::kWidth) {
    V x0 = L::load(c0 + k), x1 = L::load(c1 + k), x2 = L::zero(), x3 = L::zero();
    uint32_t k0 = key0, k1 = key1;
    for (int r = 0; r < 10; ++r) {
      if (r > 0) {
        k0 += kW0;
        k1 += kW1;
      }
      V hi0, lo0, hi1, lo1;
      L::mul_hi_lo(x0, m0, hi0, lo0);
      L::mul_hi_lo(x2, m1, hi1, lo1);
      x0 = L::xor3(hi1, x1, L::splat(k0));
      x1 = lo1;
      x2 = L::xor3(hi0, x3, L::splat(k1));
      x3 = lo0;
    }
    L::store(c0 + k, x0);
    L::store(c1 + k, x1);
    L::store(c2 + k, x2);
    L::store(c3 + k, x3);
  }
  return k;
}

/// w[j][k] = word j of Philox block first + k of `seed` (k < n <= kChunk):
/// random::philox4x32 over lanes (16 blocks to a register with AVX-512, 8
/// with AVX2).
void philox_lanes(uint64_t seed, uint64_t first, int64_t n, uint32_t (*w)[kChunk]) {
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
#if defined(__AVX512F__)
  k = philox_vectors<Lanes16>(key0, key1, k, n, c0, c1, c2, c3);
#endif
#if defined(__AVX2__)
  k = philox_vectors<Lanes8>(key0, key1, k, n, c0, c1, c2, c3);
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
