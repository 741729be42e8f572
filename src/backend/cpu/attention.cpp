// Fused float32 scaled_dot_product_attention on the CPU (attention.h). Built
// once per CPU capability.
#include "backend/cpu/attention.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "backend/cpu/loops.h"
#include "kernels/scalar_ops.h"

namespace smelt::cpu::SMELT_CPU_CAP {

namespace {

/// Query rows a tile computes together: each load of k or v serves all of them.
constexpr int kRows = 8;
/// Keys per score tile and value dims per output tile (two 512-bit vectors).
constexpr int kCols = 32;
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

/// o[r][d] = sum over j < S of p[r * ldp + j] * v[j * vs + d] for the kRows
/// probability rows and kCols value dims from v (the fixed width keeps the
/// sums in registers): fused multiply-adds in the order of j.
inline void value_tile(const float* p, int64_t ldp, const float* v, int64_t vs, int64_t S,
                       float (*o)[kCols]) {
  float acc[kRows][kCols] = {};
  for (int64_t j = 0; j < S; ++j) {
    const float* vr = v + j * vs;
    for (int r = 0; r < kRows; ++r) {
      const float x = p[r * ldp + j];
      for (int d = 0; d < kCols; ++d) acc[r][d] = __builtin_fmaf(x, vr[d], acc[r][d]);
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int d = 0; d < kCols; ++d) o[r][d] = acc[r][d];
}

/// value_tile for the last `width` (< kCols) value dims.
inline void value_tail(const float* p, int64_t ldp, const float* v, int64_t vs, int64_t S,
                       int width, float (*o)[kCols]) {
  for (int r = 0; r < kRows; ++r)
    for (int d = 0; d < width; ++d) o[r][d] = 0.f;
  for (int64_t j = 0; j < S; ++j) {
    const float* vr = v + j * vs;
    for (int r = 0; r < kRows; ++r) {
      const float x = p[r * ldp + j];
      for (int d = 0; d < width; ++d) o[r][d] = __builtin_fmaf(x, vr[d], o[r][d]);
    }
  }
}

/// The mask of one query row as softmax_row reads it: keep[j] (nonzero:
/// kept) from a bool mask, or add[j] from a float32 one; both null: none.
struct MaskRow {
  const int32_t* keep = nullptr;
  const float* add = nullptr;
};

/// Scaled scores s[0 .. S) of query i into exp(s - max) in place, after the
/// causal triangle and then the mask as the decomposition applies them;
/// returns the sum the row's outputs are divided by: the sum of the exps (NaN
/// where a score is NaN, as softmax gives), or, where every score is -inf, 0
/// under a mask or the causal triangle (the caller then writes zeros:
/// PyTorch's _safe_softmax) and NaN without (softmax's NaN).
float softmax_row(int64_t S, bool causal, int64_t i, const MaskRow& mask, float* s) {
  const float ninf = -std::numeric_limits<float>::infinity();
  if (causal)
    for (int64_t j = i + 1; j < S; ++j) s[j] = ninf;
  if (mask.keep) {
    const Vec minus_inf = Vec{} + ninf;
    int64_t j = 0;
    for (; j + kLanes <= S; j += kLanes) {
      Ints keep;
      Vec x;
      __builtin_memcpy(&keep, mask.keep + j, sizeof keep);
      load(s + j, x);
      x = keep != 0 ? x : minus_inf;
      store(s + j, x);
    }
    for (; j < S; ++j) s[j] = mask.keep[j] ? s[j] : ninf;
  } else if (mask.add) {
    int64_t j = 0;
    for (; j + kLanes <= S; j += kLanes) {
      Vec x, y;
      load(s + j, x);
      load(mask.add + j, y);
      x += y;
      store(s + j, x);
    }
    for (; j < S; ++j) s[j] = scalar::add<float>(s[j], mask.add[j]);
  }
  // The max: order-free, so in kLanes lanes that skip NaN (a NaN score makes
  // its exp, hence the sum and the outputs, NaN below).
  Vec vmax = Vec{} + ninf;
  int64_t j = 0;
  for (; j + kLanes <= S; j += kLanes) {
    Vec x;
    load(s + j, x);
    vmax = x > vmax ? x : vmax;
  }
  float lanes[kLanes];
  __builtin_memcpy(lanes, &vmax, sizeof lanes);
  float mx = ninf;
  for (int l = 0; l < kLanes; ++l) mx = lanes[l] > mx ? lanes[l] : mx;
  for (; j < S; ++j) mx = s[j] > mx ? s[j] : mx;
  if (mx == ninf) {
    // Every score -inf or NaN: softmax's NaN where a score is NaN or where
    // nothing masked the row (exp(-inf - -inf)); zeros where a mask or the
    // causal triangle did (_safe_softmax, as the decomposition applies it).
    for (j = 0; j < S; ++j)
      if (s[j] != s[j]) return s[j];
    if (!causal && !mask.keep && !mask.add) return std::numeric_limits<float>::quiet_NaN();
    std::fill(s, s + S, 0.f);
    return 0.f;
  }
  for (j = 0; j < S; ++j) s[j] = scalar::exp<float>(scalar::sub<float>(s[j], mx));
  // The sum of the exps (each in [0, 1]) in kLanes lanes, combined pairwise.
  Vec vsum = Vec{};
  for (j = 0; j + kLanes <= S; j += kLanes) {
    Vec x;
    load(s + j, x);
    vsum += x;
  }
  __builtin_memcpy(lanes, &vsum, sizeof lanes);
  for (; j < S; ++j) lanes[0] += s[j];
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) lanes[l] += lanes[l + w];
  return lanes[0];
}

void attention(const AttentionCall& a) {
  const int64_t S = a.S, E = a.E, Ev = a.Ev, L = a.L;
  const int64_t Sp = (S + kCols - 1) / kCols * kCols;  // keys padded to whole tiles
  const int64_t pairs = a.batch * a.heads;
  // Tasks: a (batch, head) pair's query rows, cut into blocks when there are
  // fewer pairs than threads.
  const int64_t threads = omp_get_max_threads();
  const int64_t row_tiles = (L + kRows - 1) / kRows;
  const int64_t blocks = pairs >= threads ? 1 : std::min(row_tiles, (threads + pairs - 1) / pairs);
  const int64_t block_rows = (row_tiles + blocks - 1) / blocks * kRows;
  const int64_t* ms = a.mask.stride;
  const bool bool_mask = a.mask.data && a.mask.dtype == DType::Bool;
  parallel_for(0, pairs * blocks, 1, [&](int64_t t0, int64_t t1) {
    // Per thread: k^T and v of the current pair packed (the keys padded to
    // whole tiles), a tile's scores, and the last mask row converted.
    std::vector<float> kt(static_cast<size_t>(E * Sp)), vp(static_cast<size_t>(S * Ev)),
        p(static_cast<size_t>(kRows * Sp)),
        mask_row(a.mask.data && !bool_mask ? static_cast<size_t>(S) : 0);
    std::vector<int32_t> keep_row(bool_mask ? static_cast<size_t>(S) : 0);
    const void* converted = nullptr;
    float o[kRows][kCols];
    int64_t packed = -1;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t pair = t / blocks, b = pair / a.heads, h = pair % a.heads;
      const float* q = a.q + b * a.q_stride[0] + h * a.q_stride[1];
      float* out = a.out + b * a.o_stride[0] + h * a.o_stride[1];
      if (packed != pair) {
        // Rows of k and v in order, a few rows ahead prefetched (each row
        // of a head is usually on its own page, out of the hardware
        // prefetcher's reach).
        constexpr int64_t kAhead = 8;
        const float* k = a.k + b * a.k_stride[0] + h * a.k_stride[1];
        const float* v = a.v + b * a.v_stride[0] + h * a.v_stride[1];
        for (int64_t j = 0; j < Sp; ++j) {
          if (j + kAhead < S) {
            for (int64_t e = 0; e < E; e += 16)
              __builtin_prefetch(k + (j + kAhead) * a.k_stride[2] + e);
            for (int64_t e = 0; e < Ev; e += 16)
              __builtin_prefetch(v + (j + kAhead) * a.v_stride[2] + e);
          }
          const float* kr = k + j * a.k_stride[2];
          for (int64_t e = 0; e < E; ++e) kt[e * Sp + j] = j < S ? kr[e] : 0.f;
          if (j < S)
            std::copy(v + j * a.v_stride[2], v + j * a.v_stride[2] + Ev, vp.data() + j * Ev);
        }
        packed = pair;
      }
      const int64_t i_begin = t % blocks * block_rows, i_end = std::min(L, i_begin + block_rows);
      for (int64_t i0 = i_begin; i0 < i_end; i0 += kRows) {
        const int rows = static_cast<int>(std::min<int64_t>(kRows, i_end - i0));
        const float* qr[kRows];
        for (int r = 0; r < kRows; ++r) qr[r] = q + (i0 + (r < rows ? r : 0)) * a.q_stride[2];
        for (int r = 0; r < kRows && i0 + kRows + r < i_end; ++r)  // the next tile's queries
          for (int64_t e = 0; e < E; e += 16)
            __builtin_prefetch(q + (i0 + kRows + r) * a.q_stride[2] + e);
        for (int64_t j0 = 0; j0 < Sp; j0 += kCols)
          score_tile(qr, kt.data() + j0, Sp, E, a.scale, p.data() + j0, Sp);
        float sum[kRows];
        for (int r = 0; r < rows; ++r) {
          MaskRow m;
          if (a.mask.data) {
            const int64_t at = b * ms[0] + h * ms[1] + (i0 + r) * ms[2];
            const void* row =
                bool_mask ? static_cast<const void*>(static_cast<const bool*>(a.mask.data) + at)
                          : static_cast<const void*>(static_cast<const float*>(a.mask.data) + at);
            if (!bool_mask && ms[3] == 1) {
              m.add = static_cast<const float*>(row);
            } else {
              if (row != converted) {  // a key-padding mask converts once per batch
                for (int64_t j = 0; j < S; ++j) {
                  if (bool_mask) {
                    keep_row[j] = static_cast<const bool*>(row)[j * ms[3]];
                  } else {
                    mask_row[j] = static_cast<const float*>(row)[j * ms[3]];
                  }
                }
                converted = row;
              }
              if (bool_mask) {
                m.keep = keep_row.data();
              } else {
                m.add = mask_row.data();
              }
            }
          }
          sum[r] = softmax_row(S, a.causal, i0 + r, m, p.data() + r * Sp);
        }
        for (int r = rows; r < kRows; ++r) std::fill(p.data() + r * Sp, p.data() + r * Sp + S, 0.f);
        for (int64_t d0 = 0; d0 < Ev; d0 += kCols) {
          const int width = static_cast<int>(std::min<int64_t>(kCols, Ev - d0));
          if (width == kCols) {
            value_tile(p.data(), Sp, vp.data() + d0, Ev, S, o);
          } else {
            value_tail(p.data(), Sp, vp.data() + d0, Ev, S, width, o);
          }
          for (int r = 0; r < rows; ++r) {  // normalized here: Ev divisions instead of S
            float* dst = out + (i0 + r) * a.o_stride[2] + d0;
            if (sum[r] == 0.f) {
              std::fill(dst, dst + width, 0.f);
            } else {
              for (int d = 0; d < width; ++d) dst[d] = scalar::div<float>(o[r][d], sum[r]);
            }
          }
        }
      }
    }
  });
}

}  // namespace

}  // namespace smelt::cpu::SMELT_CPU_CAP

SMELT_REGISTER_DISPATCH(attention_stub, &::smelt::cpu::SMELT_CPU_CAP::attention);
