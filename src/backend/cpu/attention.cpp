// Fused float32 scaled_dot_product_attention on the CPU (attention.h). Built
// once per CPU capability.
#include "backend/cpu/attention.h"

#include <omp.h>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "backend/cpu/loops.h"
#include "backend/cpu/unary_runs.h"
#include "kernels/scalar_ops.h"

namespace smelt::cpu::SMELT_CPU_CAP {

namespace {

/// Query rows a tile computes together: each load of k or v serves all of them.
constexpr int kRows = 8;
/// Keys per score tile and value dims per output tile (two 512-bit vectors).
constexpr int kCols = 32;
/// Outputs from this size on are written with non-temporal stores.
constexpr int64_t kStreamBytes = int64_t{4} << 20;
/// Independent lanes of a row's max and sum (one 512-bit vector).
constexpr int kLanes = 16;
/// kLanes floats and their int32 masks as GCC vectors (one
/// instruction each where the capability has 512-bit vectors, several
/// narrower ones otherwise).
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t Ints __attribute__((vector_size(kLanes * sizeof(int32_t))));
/// (By reference: a 64-byte vector passed or returned by value changes the
/// ABI without AVX-512.)
#define SMELT_VEC_INLINE inline __attribute__((always_inline))
SMELT_VEC_INLINE void load(const float* p, Vec& v) { __builtin_memcpy(&v, p, sizeof v); }
SMELT_VEC_INLINE void store(float* p, const Vec& v) { __builtin_memcpy(p, &v, sizeof v); }

/// Four lanes (a quarter of a 512-bit vector: the SSE register's shape).
typedef float Quarter __attribute__((vector_size(4 * sizeof(float))));

/// q op q2 lane by lane, then lane 0 with 2 and 1 with 3, then those two:
/// the last steps of fold and fold512.
template <class Op>
SMELT_VEC_INLINE float fold_quarters(Quarter q, const Quarter& q2, Op op) {
  op(q, q2);
  float a = q[0], b = q[1];
  op(a, q[2]);
  op(b, q[3]);
  op(a, b);
  return a;
}

/// The kLanes lanes of v folded pairwise by `op` (op(a, b) sets a to a op b,
/// for vectors and floats): lane l with lane l + w for w = 8, 4, 2, 1, as
/// halves of the vector (no trip through memory).
template <class Op>
SMELT_VEC_INLINE float fold(const Vec& v, Op op) {
  typedef float Half __attribute__((vector_size(kLanes / 2 * sizeof(float))));
  static_assert(kLanes == 16, "fold: halves of quarters");
  Half h, h2;
  __builtin_memcpy(&h, &v, sizeof h);
  __builtin_memcpy(&h2, reinterpret_cast<const char*>(&v) + sizeof h, sizeof h);
  op(h, h2);
  Quarter q, q2;
  __builtin_memcpy(&q, &h, sizeof q);
  __builtin_memcpy(&q2, reinterpret_cast<const char*>(&h) + sizeof q, sizeof q);
  return fold_quarters(q, q2, op);
}

#if defined(__AVX512F__)
/// fold on a register: the same steps on its halves, quarters and lanes,
/// without the trip through memory that a copy into a Vec makes GCC take
/// (which, in a loop's accumulator, costs a store-to-load forward a step).
template <class Op>
SMELT_VEC_INLINE float fold512(__m512 v, Op op) {
  // (The zero-masked extractions: GCC 12 warns that the plain ones' and the
  // cast's undefined source may be used uninitialized.)
  __m256 h = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, _mm512_castps_pd(v), 0)),
         h2 = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, _mm512_castps_pd(v), 1));
  op(h, h2);
  return fold_quarters(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1), op);
}
#endif

#if defined(__AVX512F__)
/// Exp16 (hence scalar::exp's bits) for x <= 0 or NaN, as softmax's
/// score minus its row's max is, with fewer instructions on the vector
/// ports: no clamp from above (min(100, x) is x there), and t = x log2(e)
/// rounded to an integer by adding and subtracting 1.5 * 2^23 (for |t| <
/// 2^22 the sum's last bit is t's nearest integer, ties to even, as
/// roundscale gives; a zero's sign may differ, which q * ln2 + x, the
/// polynomial and the scaling make no difference of).
struct ExpOfNonPositive : Exp16 {
  const __m512 shift = _mm512_set1_ps(0x1.8p23f);

  SMELT_VEC_INLINE __m512 operator()(__m512 x) const {
    const __m512 a = _mm512_mask_max_ps(lo, kAll, lo, x);  // NaN: x (the second operand)
    return from_reduced(a, _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(a, log2e), shift), shift));
  }
};
#endif

/// kt[e * ld + j] = k[j * ks + e] for j < S and e < E (k^T): 16 x 16
/// blocks transposed in registers where the capability has 512-bit vectors,
/// the rest (and everything elsewhere) element by element.
void transpose_keys(const float* k, int64_t ks, int64_t S, int64_t E, float* kt, int64_t ld) {
  int64_t j0 = 0;
#if defined(__AVX512F__)
  for (; j0 + 16 <= S; j0 += 16) {
    int64_t e0 = 0;
    for (; e0 + 16 <= E; e0 += 16) {
      // (The zero-masked forms with every lane set: GCC 12 warns that the
      // plain ones' undefined source may be used uninitialized.)
      constexpr __mmask16 kAll = 0xffff;
      constexpr __mmask8 kAll8 = 0xff;
      __m512 r[16], t[16];
      for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(k + (j0 + i) * ks + e0);
      // Pairs of rows interleaved by lanes, by lane pairs, then by 128-bit
      // quarters twice: r[e] = the block's column e.
      for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_maskz_unpacklo_ps(kAll, r[i], r[i + 1]);
        t[i + 1] = _mm512_maskz_unpackhi_ps(kAll, r[i], r[i + 1]);
      }
      for (int i = 0; i < 16; i += 4)
        for (int h = 0; h < 2; ++h) {
          const __m512d a = _mm512_castps_pd(t[i + h]), b = _mm512_castps_pd(t[i + h + 2]);
          r[i + 2 * h] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(kAll8, a, b));
          r[i + 2 * h + 1] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(kAll8, a, b));
        }
      for (int i = 0; i < 16; i += 8)
        for (int c = 0; c < 4; ++c) {
          t[i + c] = _mm512_maskz_shuffle_f32x4(kAll, r[i + c], r[i + c + 4], 0x88);
          t[i + c + 4] = _mm512_maskz_shuffle_f32x4(kAll, r[i + c], r[i + c + 4], 0xdd);
        }
      for (int c = 0; c < 8; ++c) {
        r[c] = _mm512_maskz_shuffle_f32x4(kAll, t[c], t[c + 8], 0x88);
        r[c + 8] = _mm512_maskz_shuffle_f32x4(kAll, t[c], t[c + 8], 0xdd);
      }
      for (int i = 0; i < 16; ++i) _mm512_storeu_ps(kt + (e0 + i) * ld + j0, r[i]);
    }
    for (; e0 < E; ++e0)
      for (int64_t j = j0; j < j0 + 16; ++j) kt[e0 * ld + j] = k[j * ks + e0];
  }
#endif
  for (int64_t j = j0; j < S; ++j)
    for (int64_t e = 0; e < E; ++e) kt[e * ld + j] = k[j * ks + e];
}

/// v [S, Ev] (row j at v + j * vs) packed in blocks of kCols dims: dim
/// d0 + d of key j at vp[(d0 / kCols * S + j) * kCols + d], the last block's
/// dims past Ev left as they are (zeros: the tiles compute them and drop
/// them). Each value tile then reads one contiguous block (16 KB for
/// MiniLM's 128 keys) instead of S rows a head's stride apart, which map to
/// a few of L1's sets and evict one another.
void pack_values(const float* v, int64_t vs, int64_t S, int64_t Ev, float* vp) {
  for (int64_t d0 = 0; d0 < Ev; d0 += kCols) {
    const int64_t width = std::min<int64_t>(kCols, Ev - d0);
    float* block = vp + d0 * S;
    if (width == kCols) {  // (a copy of constant size: vector moves, no call)
      for (int64_t j = 0; j < S; ++j)
        __builtin_memcpy(block + j * kCols, v + j * vs + d0, kCols * sizeof(float));
    } else {
      for (int64_t j = 0; j < S; ++j) std::copy_n(v + j * vs + d0, width, block + j * kCols);
    }
  }
}

/// The cache lines of a few row sets (rows[x] rows of width[x] floats,
/// row i at base[x] + i * stride[x]) fetched into L2 (prefetcht1) a few at a
/// time: the q, k and v of the tasks a thread takes next while it computes
/// the ones before. A line is fetched as its own request only while one of
/// L1's few fill buffers is free: many at once stall the core until memory
/// answers, so they go out n at a time between the tiles.
struct LinePrefetcher {
  static constexpr int kSets = 3;
  const float* base[kSets] = {};
  int64_t stride[kSets] = {}, rows[kSets] = {}, width[kSets] = {};
  int set = 0;
  int64_t row = 0;
  uintptr_t line = 0, end = 0;  // the current row's next line and its end

  /// The lines of every row of every set (for the share per call).
  int64_t lines() const {
    int64_t n = 0;
    for (int x = 0; x < kSets; ++x) n += rows[x] * ((width[x] * 4 + 63) / 64 + 1);
    return n;
  }
  void fetch(int64_t n) {
    for (; n > 0; --n) {
      while (line >= end) {  // the next row
        if (set == kSets) return;
        if (row == rows[set] || width[set] == 0) {
          ++set;
          row = 0;
          continue;
        }
        const auto at = reinterpret_cast<uintptr_t>(base[set] + row * stride[set]);
        line = at & ~uintptr_t{63};
        end = at + static_cast<uintptr_t>(width[set]) * 4;
        ++row;
      }
      __builtin_prefetch(reinterpret_cast<const void*>(line), 0, 2);
      line += 64;
    }
  }
};

/// The mask of one query row as the kernels read it: keep[j] (nonzero:
/// kept) from a bool mask, or add[j] from a float32 one; both null: none.
struct MaskRow {
  const int32_t* keep = nullptr;
  const float* add = nullptr;
};

/// The masked scores of a tile's `rows` rows (row r at p + r * ldp, S
/// scores, max mx[r]) into exp(s - max) in place; sum[r]: what row r's
/// outputs are divided by: the sum of its exps (NaN where a score is NaN, as
/// softmax gives), or, where every score is -inf (mx[r] -inf), 0 under a
/// mask or the causal triangle (the row's probabilities zeros, PyTorch's
/// _safe_softmax: the caller writes their product with v, zeros where v is
/// finite) and NaN without (softmax's NaN). The rows' sums run in
/// kLanes lanes each (exp j into lane j % kLanes, in order of j; the last S %
/// kLanes into lane 0), the rows interleaved, the lanes combined pairwise.
void softmax_tile(int64_t S, bool masked, const float* mx, int rows, float* p, int64_t ldp,
                  float* sum) {
  const float ninf = -std::numeric_limits<float>::infinity();
  [[maybe_unused]] bool decided[kRows] = {};  // (read by the sums after the loop, not AVX-512)
  for (int r = 0; r < rows; ++r) {
    float* s = p + r * ldp;
    if (mx[r] == ninf) {
      // Every score -inf or NaN: softmax's NaN where a score is NaN or where
      // nothing masked the row (exp(-inf - -inf)); zeros where a mask or the
      // causal triangle did (_safe_softmax, as the decomposition applies it).
      decided[r] = true;
      sum[r] = masked ? 0.f : std::numeric_limits<float>::quiet_NaN();
      for (int64_t j = 0; j < S; ++j)
        if (s[j] != s[j]) {
          sum[r] = s[j];
          break;
        }
      if (sum[r] == 0.f) std::fill(s, s + S, 0.f);
      continue;
    }
#if !defined(__AVX512F__)
    const float m = mx[r];
    for (int64_t j = 0; j < S; ++j) s[j] = scalar::exp<float>(scalar::sub<float>(s[j], m));
#endif
  }
#if defined(__AVX512F__)
  // exp and the sum in one pass, the sum's lanes in a register, kGroup
  // rows at a time (independent chains through exp's long one).
  constexpr int kGroup = 4;
  int todo[kRows], n = 0;
  for (int r = 0; r < rows; ++r)
    if (!decided[r]) todo[n++] = r;
  const ExpOfNonPositive exp16;
  for (int t = 0; t < n; t += kGroup) {
    float* s[kGroup];
    __m512 m[kGroup], accs[kGroup];
#pragma GCC unroll 4
    for (int u = 0; u < kGroup; ++u) {
      const int r = todo[t + u < n ? t + u : t];  // (rows past n: the first again)
      s[u] = p + r * ldp;
      m[u] = _mm512_set1_ps(mx[r]);
      accs[u] = _mm512_setzero_ps();
    }
    int64_t j = 0;
    for (; j + kLanes <= S; j += kLanes) {
      __m512 x[kGroup];
#pragma GCC unroll 4
      for (int u = 0; u < kGroup; ++u) x[u] = exp16(_mm512_sub_ps(_mm512_loadu_ps(s[u] + j), m[u]));
#pragma GCC unroll 4
      for (int u = 0; u < kGroup; ++u) {
        _mm512_storeu_ps(s[u] + j, x[u]);
        accs[u] = _mm512_add_ps(accs[u], x[u]);
      }
    }
    const int64_t j_tail = j;
    for (int u = 0; u < kGroup && t + u < n; ++u) {
      const int r = todo[t + u];
      float* row = p + r * ldp;
      __m512 acc = accs[u];
      if (j_tail < S) {
        float tail = _mm512_cvtss_f32(acc);
        for (j = j_tail; j < S; ++j) {
          row[j] = scalar::exp<float>(scalar::sub<float>(row[j], mx[r]));
          tail += row[j];
        }
        acc = _mm512_mask_mov_ps(acc, 1, _mm512_set1_ps(tail));
      }
      sum[r] = fold512(acc, [](auto& x, const auto& y) { x += y; });
    }
  }
#else
  Vec vsum[kRows];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) vsum[r] = Vec{};
  int64_t j = 0;
  for (; j + kLanes <= S; j += kLanes) {
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {  // (rows past `rows`: ignored)
      Vec x;
      load(p + r * ldp + j, x);
      vsum[r] += x;
    }
  }
  for (int r = 0; r < rows; ++r) {
    if (decided[r]) continue;
    Vec v = vsum[r];
    if (j < S) {
      float tail = v[0];
      for (int64_t t = j; t < S; ++t) tail += p[r * ldp + t];
      v[0] = tail;
    }
    sum[r] = fold(v, [](auto& x, const auto& y) { x += y; });
  }
#endif
}

#if defined(__AVX512F__)
// The tiles with AVX-512 intrinsics (GCC keeps the sums of the portable
// loops below in registers, but clears and spills them in memory around
// every tile), the mask and the max taken as the scores are stored: the
// same operations in the same order as the portable code, hence the same
// bits.

/// score_tile for keys j0 .. j0 + kCols of S, with mask_and_max's steps on
/// the scaled scores of query rows i0 + r before they are stored (keys from
/// S on: -inf, no mask read), and each row's running max (NaN skipped) in
/// mx[r].
SMELT_VEC_INLINE void score_tile(const float* const* q, const float* kt, int64_t ld, int64_t E,
                                 float scale, float* c, int64_t ldc, int64_t j0, int64_t S,
                                 int64_t i0, bool causal, const MaskRow* mask, __m512* mx) {
  __m512 acc[kRows][2];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t e = 0; e < E; ++e) {
    const __m512 k0 = _mm512_loadu_ps(kt + e * ld), k1 = _mm512_loadu_ps(kt + e * ld + 16);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m512 x = _mm512_set1_ps(q[r][e]);
      acc[r][0] = _mm512_fmadd_ps(x, k0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(x, k1, acc[r][1]);
    }
  }
  const __m512 vscale = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-__builtin_inff());
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#pragma GCC unroll 2
  for (int hv = 0; hv < 2; ++hv) {
    const int64_t j = j0 + 16 * hv;
    const __mmask16 valid =
        static_cast<__mmask16>(S - j >= 16 ? 0xffff
                               : S <= j    ? 0
                                           : (1u << static_cast<unsigned>(S - j)) - 1);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      __m512 y = _mm512_mul_ps(acc[r][hv], vscale);
      if (causal) {  // keys past the query: j + lane > i0 + r
        const int64_t d = std::clamp<int64_t>(i0 + r - j, -1, 16);
        y = _mm512_mask_mov_ps(
            y, _mm512_cmpgt_epi32_mask(iota, _mm512_set1_epi32(static_cast<int32_t>(d))), ninf);
      }
      if (mask[r].keep) {
        const __mmask16 keep = _mm512_mask_cmpneq_epi32_mask(
            valid, _mm512_maskz_loadu_epi32(valid, mask[r].keep + j), _mm512_setzero_si512());
        y = _mm512_mask_blend_ps(keep, ninf, y);
      } else if (mask[r].add) {
        y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(valid, mask[r].add + j));
      }
      _mm512_storeu_ps(c + r * ldc + 16 * hv, y);
      mx[r] = _mm512_mask_max_ps(mx[r], valid, y, mx[r]);  // y > mx ? y : mx
    }
  }
}

/// value_tile on a block of packed values (pack_values), the sums times 1 /
/// sum[r] (where it is 0, the sums themselves: the zero probabilities times v,
/// 0 or NaN where v is not finite, as the decomposition's product gives) into
/// out[r * os + d] for the first `rows` rows and `width` (<= kCols) dims;
/// with `stream`, a row's whole cache lines by non-temporal stores.
SMELT_VEC_INLINE void value_tile(const float* p, int64_t ldp, const float* v, int64_t S, int width,
                                 const float* sum, int rows, float* out, int64_t os,
                                 LinePrefetcher& ahead, int64_t share, bool stream) {
  const __mmask16 m0 = static_cast<__mmask16>(width >= 16 ? 0xffff : (1u << width) - 1),
                  m1 = static_cast<__mmask16>(width >= 32   ? 0xffff
                                              : width <= 16 ? 0
                                                            : (1u << (width - 16)) - 1);
  __m512 acc[kRows][2];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int half = 0; half < 2; ++half) {
    ahead.fetch(share);  // (between the halves too)
    for (int64_t j = half * S / 2; j < (half + 1) * S / 2; ++j) {
      const __m512 v0 = _mm512_loadu_ps(v + j * kCols), v1 = _mm512_loadu_ps(v + j * kCols + 16);
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        const __m512 x = _mm512_set1_ps(p[r * ldp + j]);
        acc[r][0] = _mm512_fmadd_ps(x, v0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(x, v1, acc[r][1]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
    if (r >= rows) break;
    const __m512 inv = _mm512_set1_ps(scalar::div<float>(1.f, sum[r]));
    const bool zero = sum[r] == 0.f;
    const __m512 y0 = zero ? acc[r][0] : _mm512_mul_ps(acc[r][0], inv),
                 y1 = zero ? acc[r][1] : _mm512_mul_ps(acc[r][1], inv);
    float* dst = out + r * os;
    if (stream && width == kCols && (reinterpret_cast<uintptr_t>(dst) & 63) == 0) {
      _mm512_stream_ps(dst, y0);
      _mm512_stream_ps(dst + 16, y1);
    } else {
      _mm512_mask_storeu_ps(dst, m0, y0);
      _mm512_mask_storeu_ps(dst + 16, m1, y1);
    }
  }
}
#else
#if defined(__AVX2__) && defined(__FMA__)
// AVX2: the tiles in sub-tiles of 4 rows x 16 columns, 8 accumulators of 8
// floats (a whole 8 x 32 tile would need 32 ymm registers of the 16 and
// spill: 4x slower). Each sum runs in the order of its own index with one
// fused multiply-add per step, as the portable code below: the same bits.

/// acc[r][0..1] = the 16 sums over t < n of a(r, t) * b(t)[0 .. 16), t in
/// order, for the sub-tile's 4 rows r.
template <class A, class B>
SMELT_VEC_INLINE void subtile_4x16(__m256 (&acc)[4][2], int64_t n, const A& a, const B& b) {
  for (int r = 0; r < 4; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t t = 0; t < n; ++t) {
    const float* bt = b(t);
    const __m256 b0 = _mm256_loadu_ps(bt), b1 = _mm256_loadu_ps(bt + 8);
    for (int r = 0; r < 4; ++r) {
      const __m256 x = _mm256_set1_ps(a(r, t));
      acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
    }
  }
}

/// c[r * ldc + j] = (sum over e < E of q[r][e] * kt[e * ld + j]) * scale for
/// the kRows rows q[r] and kCols keys j: fused multiply-adds in the order of
/// e, then the decomposition's multiplication by the scale.
inline void score_tile(const float* const* q, const float* kt, int64_t ld, int64_t E, float scale,
                       float* c, int64_t ldc) {
  const __m256 vscale = _mm256_set1_ps(scale);
  for (int r0 = 0; r0 < kRows; r0 += 4)
    for (int j0 = 0; j0 < kCols; j0 += 16) {
      __m256 acc[4][2];
      subtile_4x16(
          acc, E, [&](int r, int64_t e) { return q[r0 + r][e]; },
          [&](int64_t e) { return kt + e * ld + j0; });
      for (int r = 0; r < 4; ++r) {
        _mm256_storeu_ps(c + (r0 + r) * ldc + j0, _mm256_mul_ps(acc[r][0], vscale));
        _mm256_storeu_ps(c + (r0 + r) * ldc + j0 + 8, _mm256_mul_ps(acc[r][1], vscale));
      }
    }
}

/// o[r][d] = sum over j < S of p[r * ldp + j] * v[j * kCols + d] for the
/// kRows probability rows and a block of packed values (pack_values): fused
/// multiply-adds in the order of j.
inline void value_tile(const float* p, int64_t ldp, const float* v, int64_t S, float (*o)[kCols]) {
  for (int r0 = 0; r0 < kRows; r0 += 4)
    for (int d0 = 0; d0 < kCols; d0 += 16) {
      __m256 acc[4][2];
      subtile_4x16(
          acc, S, [&](int r, int64_t j) { return p[(r0 + r) * ldp + j]; },
          [&](int64_t j) { return v + j * kCols + d0; });
      for (int r = 0; r < 4; ++r) {
        _mm256_storeu_ps(o[r0 + r] + d0, acc[r][0]);
        _mm256_storeu_ps(o[r0 + r] + d0 + 8, acc[r][1]);
      }
    }
}
#else
/// c[r * ldc + j] = (sum over e < E of q[r][e] * kt[e * ld + j]) * scale for
/// the kRows rows q[r] and kCols keys j: fused multiply-adds in the order of
/// e, then the decomposition's multiplication by the scale.
inline void score_tile(const float* const* q, const float* kt, int64_t ld, int64_t E, float scale,
                       float* c, int64_t ldc) {
  float acc[kRows][kCols] = {};
  for (int64_t e = 0; e < E; ++e) {
    const float* kr = kt + e * ld;
    for (int r = 0; r < kRows; ++r) {
      const float x = q[r][e];
      for (int j = 0; j < kCols; ++j) acc[r][j] = __builtin_fmaf(x, kr[j], acc[r][j]);
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int j = 0; j < kCols; ++j) c[r * ldc + j] = scalar::mul<float>(acc[r][j], scale);
}

/// o[r][d] = sum over j < S of p[r * ldp + j] * v[j * kCols + d] for the
/// kRows probability rows and a block of packed values (pack_values; the
/// fixed width keeps the sums in registers): fused multiply-adds in the
/// order of j.
inline void value_tile(const float* p, int64_t ldp, const float* v, int64_t S, float (*o)[kCols]) {
  float acc[kRows][kCols] = {};
  for (int64_t j = 0; j < S; ++j) {
    const float* vr = v + j * kCols;
    for (int r = 0; r < kRows; ++r) {
      const float x = p[r * ldp + j];
      for (int d = 0; d < kCols; ++d) acc[r][d] = __builtin_fmaf(x, vr[d], acc[r][d]);
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int d = 0; d < kCols; ++d) o[r][d] = acc[r][d];
}

#endif

/// Scaled scores s[0 .. S) of query i with the causal triangle and then the
/// mask applied in place, as the decomposition applies them; returns their
/// max (NaN skipped; -inf where every score is -inf or NaN).
float mask_and_max(int64_t S, bool causal, int64_t i, const MaskRow& mask, float* s) {
  const float ninf = -std::numeric_limits<float>::infinity();
  if (causal)
    for (int64_t j = i + 1; j < S; ++j) s[j] = ninf;
  // The max: order-free, so in kLanes lanes that skip NaN (a NaN score makes
  // its exp, hence the sum and the outputs, NaN in softmax_tile).
  Vec vmax = Vec{} + ninf;
  int64_t j = 0;
  if (mask.keep) {
    for (; j + kLanes <= S; j += kLanes) {
      Ints keep;
      Vec x;
      __builtin_memcpy(&keep, mask.keep + j, sizeof keep);
      load(s + j, x);
      x = keep != 0 ? x : Vec{} + ninf;
      store(s + j, x);
      vmax = x > vmax ? x : vmax;
    }
    for (int64_t t = j; t < S; ++t) s[t] = mask.keep[t] ? s[t] : ninf;
  } else if (mask.add) {
    for (; j + kLanes <= S; j += kLanes) {
      Vec x, y;
      load(s + j, x);
      load(mask.add + j, y);
      x += y;
      store(s + j, x);
      vmax = x > vmax ? x : vmax;
    }
    for (int64_t t = j; t < S; ++t) s[t] = scalar::add<float>(s[t], mask.add[t]);
  } else {
    for (; j + kLanes <= S; j += kLanes) {
      Vec x;
      load(s + j, x);
      vmax = x > vmax ? x : vmax;
    }
  }
  float mx = fold(vmax, [](auto& x, const auto& y) { x = x > y ? x : y; });
  for (; j < S; ++j) mx = s[j] > mx ? s[j] : mx;
  return mx;
}

#endif

void attention(const AttentionCall& a) {
  const int64_t S = a.S, E = a.E, Ev = a.Ev, L = a.L;
  const int64_t Sp = (S + kCols - 1) / kCols * kCols;  // keys padded to whole tiles
  const int64_t pairs = a.batch * a.heads;
  // Tasks: a (batch, head) pair's query rows, cut into `blocks` blocks of
  // row tiles where that balances the threads better (parallel_for gives
  // each thread ceil(tasks / threads) tasks in a row): the fewest blocks whose
  // busiest thread has the fewest row tiles (12 pairs on 16 threads: 4
  // blocks, 3 a thread; 384 pairs on 16: whole pairs). A thread packs k and
  // v again for each pair it starts.
  const int64_t threads = omp_get_max_threads();
  const int64_t row_tiles = (L + kRows - 1) / kRows;
  int64_t blocks = 1;
  auto busiest = [&](int64_t n) {  // the row tiles of the busiest thread with n blocks
    return (pairs * n + threads - 1) / threads * ((row_tiles + n - 1) / n);
  };
  for (int64_t n = 2; n <= std::min<int64_t>(row_tiles, 16); ++n)
    if (busiest(n) < busiest(blocks)) blocks = n;
  const int64_t block_rows = (row_tiles + blocks - 1) / blocks * kRows;
  const int64_t* ms = a.mask.stride;
  const bool bool_mask = a.mask.data && a.mask.dtype == DType::Bool;
  // k, v and q each holding a batch's rows of every head in one span
  // without gaps (heads packed in rows, [B, T, H * D] as BERT's and GPT-2's
  // projections give, or [B, H, T, D]): the prefetches then fetch a batch at
  // a time in address order, whole pages instead of a head's two lines of
  // each row (when each task is a whole pair: batch_spans).
  struct Span {
    const float* data;
    int64_t batch_stride, extent;
  } spans[LinePrefetcher::kSets];
  bool batch_spans = blocks == 1;
  {
    const float* data[] = {a.k, a.v, a.q};
    const int64_t* strides[] = {a.k_stride, a.v_stride, a.q_stride};
    const int64_t rows[] = {S, S, L}, widths[] = {E, Ev, E};
    for (int x = 0; x < LinePrefetcher::kSets; ++x) {
      const int64_t* st = strides[x];
      const int64_t extent = (a.heads - 1) * st[1] + (rows[x] - 1) * st[2] + widths[x];
      spans[x] = {data[x], st[0], extent};
      batch_spans = batch_spans && st[1] >= 0 && st[2] >= 0 &&
                    extent == a.heads * rows[x] * widths[x] && st[0] >= extent;
    }
  }
  // A large output (MiniLM's: 6 MiB) is written with non-temporal stores
  // (AVX-512, whole lines): its lines are not read first from memory, where
  // they are (a block the allocator handed out again, long out of cache),
  // which costs MiniLM's attention as much as its softmax; a small one stays
  // in cache for what reads it next.
  [[maybe_unused]] const bool stream =
      pairs * L * Ev * static_cast<int64_t>(sizeof(float)) >= kStreamBytes;
  parallel_for(0, pairs * blocks, 1, [&](int64_t t0, int64_t t1) {
    // Per thread: k^T and v of the current pair packed (the keys padded to
    // whole tiles, v in blocks of kCols dims), a tile's scores, and a tile's
    // mask rows converted (one row per slot; the slots remember which row
    // they hold).
    const int64_t Evp = (Ev + kCols - 1) / kCols * kCols;
    std::vector<float> kt(static_cast<size_t>(E * Sp)), vp(static_cast<size_t>(Evp * S)),
        p(static_cast<size_t>(kRows * Sp)),
        add_rows(a.mask.data && !bool_mask ? static_cast<size_t>(kRows * S) : 0);
    std::vector<int32_t> keep_rows(bool_mask ? static_cast<size_t>(kRows * S) : 0);
    const void* converted[kRows] = {};
    bool all_kept[kRows] = {};  // a converted bool row that keeps every key: read as no mask
    int64_t packed = -1;
    LinePrefetcher ahead;  // the next batch's or task's q, k and v
    int64_t share = 0;     // its lines per tile
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t pair = t / blocks, b = pair / a.heads, h = pair % a.heads;
      const float* q = a.q + b * a.q_stride[0] + h * a.q_stride[1];
      float* out = a.out + b * a.o_stride[0] + h * a.o_stride[1];
      if (packed != pair) {
        const float* k = a.k + b * a.k_stride[0] + h * a.k_stride[1];
        const float* v = a.v + b * a.v_stride[0] + h * a.v_stride[1];
        // (kt's columns past S and vp's dims past Ev stay the zeros they
        // were made with.)
        transpose_keys(k, a.k_stride[2], S, E, kt.data(), Sp);
        pack_values(v, a.v_stride[2], S, Ev, vp.data());
        packed = pair;
      }
      // What the thread computes next fetched into L2 while it computes
      // this (q, k and v come from memory or L3: a GEMM just wrote them; the
      // packing and the first tiles would otherwise wait for each line), a
      // share before each tile: with batch_spans, the next batch's spans
      // (in address order) over this batch's tasks; else the next task's
      // rows of k, v and q over this task.
      const int64_t i_begin = t % blocks * block_rows, i_end = std::min(L, i_begin + block_rows);
      // (The prefetches' calls: before each score tile, the softmax, and each
      // half of each value tile.)
      const int64_t tiles = (i_end - i_begin + kRows - 1) / kRows * ((Sp + 2 * Evp) / kCols + 1);
      if (batch_spans ? t == t0 || h == 0 : true) {
        ahead = LinePrefetcher();
        int64_t tasks = 1;  // this thread's tasks before those fetched
        if (batch_spans && (b + 1) * a.heads < t1) {
          for (int x = 0; x < LinePrefetcher::kSets; ++x) {
            ahead.base[x] = spans[x].data + (b + 1) * spans[x].batch_stride;
            ahead.rows[x] = 1;
            ahead.width[x] = spans[x].extent;
          }
          tasks = (b + 1) * a.heads - t;
        } else if (!batch_spans && t + 1 < t1 && (t + 1) / blocks != pair) {
          const int64_t nb = (t + 1) / blocks / a.heads, nh = (t + 1) / blocks % a.heads;
          const int64_t ni = (t + 1) % blocks * block_rows;
          ahead.base[0] = a.k + nb * a.k_stride[0] + nh * a.k_stride[1];
          ahead.base[1] = a.v + nb * a.v_stride[0] + nh * a.v_stride[1];
          ahead.base[2] = a.q + nb * a.q_stride[0] + nh * a.q_stride[1] + ni * a.q_stride[2];
          const int64_t strides[] = {a.k_stride[2], a.v_stride[2], a.q_stride[2]};
          const int64_t rows[] = {S, S, std::min(block_rows, L - ni)}, widths[] = {E, Ev, E};
          for (int x = 0; x < LinePrefetcher::kSets; ++x) {
            ahead.stride[x] = strides[x];
            ahead.rows[x] = rows[x];
            ahead.width[x] = widths[x];
          }
        }
        share = (ahead.lines() + tasks * tiles - 1) / (tasks * tiles);
      }
      // Query i's mask row in `slot` (one another slot of the tile holds
      // already: that one; a key-padding mask converts once per batch).
      auto mask_row = [&](int64_t i, int slot) {
        MaskRow m;
        const int64_t at = b * ms[0] + h * ms[1] + i * ms[2];
        if (!bool_mask && ms[3] == 1) {
          m.add = static_cast<const float*>(a.mask.data) + at;
          return m;
        }
        const void* row =
            bool_mask ? static_cast<const void*>(static_cast<const bool*>(a.mask.data) + at)
                      : static_cast<const void*>(static_cast<const float*>(a.mask.data) + at);
        int use = slot;
        for (int u = 0; u < slot; ++u)
          if (converted[u] == row) {
            use = u;
            break;
          }
        if (use == slot && converted[slot] != row) {
          bool all = bool_mask;
          for (int64_t j = 0; j < S; ++j) {
            if (bool_mask) {
              const bool kept = static_cast<const bool*>(row)[j * ms[3]];
              keep_rows[slot * S + j] = kept;
              all = all && kept;
            } else {
              add_rows[slot * S + j] = static_cast<const float*>(row)[j * ms[3]];
            }
          }
          converted[slot] = row;
          all_kept[slot] = all;
        }
        if (bool_mask) {
          // A row that keeps every key changes no score (the tile's
          // all--inf rows still follow the masked rule: `masked` is unchanged).
          if (!all_kept[use]) m.keep = keep_rows.data() + use * S;
        } else {
          m.add = add_rows.data() + use * S;
        }
        return m;
      };
      for (int64_t i0 = i_begin; i0 < i_end; i0 += kRows) {
        const int rows = static_cast<int>(std::min<int64_t>(kRows, i_end - i0));
        // The tile's queries and mask rows (rows past `rows` repeat row i0's).
        const float* qr[kRows];
        MaskRow m[kRows];
        for (int r = 0; r < kRows; ++r) {
          const int64_t i = i0 + (r < rows ? r : 0);
          qr[r] = q + i * a.q_stride[2];
          if (a.mask.data) m[r] = mask_row(i, r);
        }
        const bool masked = a.causal || a.mask.data;
        float sum[kRows];
#if defined(__AVX512F__)
        __m512 mx[kRows];
        for (int r = 0; r < kRows; ++r) mx[r] = _mm512_set1_ps(-__builtin_inff());
        for (int64_t j0 = 0; j0 < Sp; j0 += kCols) {
          ahead.fetch(share);
          score_tile(qr, kt.data() + j0, Sp, E, a.scale, p.data() + j0, Sp, j0, S, i0, a.causal, m,
                     mx);
        }
        float row_max[kRows];
        for (int r = 0; r < rows; ++r)
          row_max[r] = fold512(mx[r], [](auto& x, const auto& y) { x = x > y ? x : y; });
#else
        for (int64_t j0 = 0; j0 < Sp; j0 += kCols) {
          ahead.fetch(share);
          score_tile(qr, kt.data() + j0, Sp, E, a.scale, p.data() + j0, Sp);
        }
        float row_max[kRows];
        for (int r = 0; r < rows; ++r)
          row_max[r] = mask_and_max(S, a.causal, i0 + r, m[r], p.data() + r * Sp);
#endif
        ahead.fetch(share);
        softmax_tile(S, masked, row_max, rows, p.data(), Sp, sum);
        for (int r = rows; r < kRows; ++r) std::fill(p.data() + r * Sp, p.data() + r * Sp + S, 0.f);
        // Normalized at the end: times 1 / sum, as the CUDA kernel does.
        for (int64_t d0 = 0; d0 < Ev; d0 += kCols) {
          const int width = static_cast<int>(std::min<int64_t>(kCols, Ev - d0));
#if defined(__AVX512F__)
          value_tile(p.data(), Sp, vp.data() + d0 * S, S, width, sum, rows,
                     out + i0 * a.o_stride[2] + d0, a.o_stride[2], ahead, share, stream);
#else
          ahead.fetch(2 * share);
          float o[kRows][kCols];
          value_tile(p.data(), Sp, vp.data() + d0 * S, S, o);
          for (int r = 0; r < rows; ++r) {
            float* dst = out + (i0 + r) * a.o_stride[2] + d0;
            if (sum[r] == 0.f) {  // zero probabilities times v: 0, or NaN where v is not finite
              for (int d = 0; d < width; ++d) dst[d] = o[r][d];
            } else {
              const float inv = scalar::div<float>(1.f, sum[r]);
              for (int d = 0; d < width; ++d) dst[d] = scalar::mul<float>(o[r][d], inv);
            }
          }
#endif
        }
      }
    }
#if defined(__AVX512F__)
    if (stream) _mm_sfence();  // the streamed lines written before the threads join
#endif
  });
}

}  // namespace

}  // namespace smelt::cpu::SMELT_CPU_CAP

SMELT_REGISTER_DISPATCH(attention_stub, &::smelt::cpu::SMELT_CPU_CAP::attention);
