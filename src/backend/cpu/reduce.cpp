// Eager CPU reductions (see reduce.h). Built once per CPU capability.
#include "backend/cpu/reduce.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "backend/cpu/loops.h"
#include "kernels/reduce_ops.h"

namespace smelt::cpu::SMELT_CPU_CAP {

namespace r = ::smelt::reduce;
using r::make_reduce_geom;
using r::ReduceGeom;

namespace {

/// Outputs accumulated side by side by the outer schedule (one row of up to
/// kBlock columns per reduced element: long contiguous reads).
constexpr int64_t kBlock = r::kColumnBlock;

/// A heap array of accumulators (not std::vector: vector<bool> packs bits, so
/// threads writing neighbouring elements would race).
template <class Acc>
struct AccBuf {
  std::unique_ptr<Acc[]> p;
  explicit AccBuf(int64_t n) : p(new Acc[static_cast<size_t>(std::max<int64_t>(n, 1))]) {}
  Acc& operator[](int64_t i) { return p[static_cast<size_t>(i)]; }
  Acc* data() { return p.get(); }
};

/// Multi-index counter over dims [0, nd) of (sizes, strides): offset of the
/// current element, advanced in row-major order.
struct Counter {
  const int64_t* sizes;
  const int64_t* strides;
  int64_t nd;
  int64_t idx[64];
  int64_t off = 0;
  Counter(const Shape& sz, const Shape& st, int64_t n, int64_t linear)
      : sizes(sz.data()), strides(st.data()), nd(n) {
    for (int64_t d = nd - 1; d >= 0; --d) {
      idx[d] = linear % sizes[d];
      linear /= sizes[d];
      off += idx[d] * strides[d];
    }
  }
  void next() {
    for (int64_t d = nd - 1; d >= 0; --d) {
      off += strides[d];
      if (++idx[d] < sizes[d]) return;
      off -= strides[d] * sizes[d];
      idx[d] = 0;
    }
  }
};

/// This copy's tag for reduce::ContiguousRun (an instantiation of its own).
struct RunTag {};

#if defined(__AVX512F__)
/// Whether accumulate_range takes a contiguous float run of ArgMax / ArgMin
/// through arg_run16.
template <class Op, class T>
constexpr bool kArgVector = std::is_same_v<T, float> && (std::is_same_v<Op, r::ArgMax<float>> ||
                                                         std::is_same_v<Op, r::ArgMin<float>>);

/// ArgMax / ArgMin of the float run p[0, n) (n >= 1) whose first element has
/// linear index i0: what Op::step gives over it in order (the first NaN wins;
/// otherwise the first element equal to the extreme, so of +0 and -0 the
/// first one), found in two passes of 16 lanes: the extreme with NaNs set
/// aside, then the first lane equal to it (or the first NaN). 512 x 1024
/// float32 argmax over dim -1, 2 threads: 0.285 -> 0.027 ms (PyTorch 0.232).
template <class Op>
inline typename Op::acc_t arg_run16(const float* p, int64_t n, int64_t i0) {
  constexpr bool kMax = std::is_same_v<Op, r::ArgMax<float>>;
  // vmaxps / vminps (the second operand where either is NaN: a NaN of v
  // keeps ext), through the masked forms: the plain ones warn in GCC 12
  // (-Wmaybe-uninitialized on their undefined pass-through).
  const auto extreme = [](__m512 v, __m512 ext) {
    return kMax ? _mm512_mask_max_ps(ext, 0xffff, v, ext) : _mm512_mask_min_ps(ext, 0xffff, v, ext);
  };
  // The lanes of the block at j that lie in the run.
  const auto lanes = [n](int64_t j) {
    return n - j >= 16 ? static_cast<__mmask16>(0xffff)
                       : static_cast<__mmask16>((1u << (n - j)) - 1);
  };
  const __m512 fill = _mm512_set1_ps(kMax ? -INFINITY : INFINITY);
  __m512 ext = fill;
  __mmask16 nan = 0;
  for (int64_t j = 0; j < n; j += 16) {
    const __m512 v = _mm512_mask_loadu_ps(fill, lanes(j), p + j);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    ext = extreme(v, ext);
  }
  // Lanes combined in memory: GCC 12's _mm512_reduce_max_ps warns (-Wmaybe-uninitialized).
  alignas(64) float lane[16];
  _mm512_store_ps(lane, ext);
  float e = lane[0];
  for (int k = 1; k < 16; ++k) e = kMax ? std::max(e, lane[k]) : std::min(e, lane[k]);
  const __m512 target = _mm512_set1_ps(e);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 in = lanes(j);
    const __m512 v = _mm512_maskz_loadu_ps(in, p + j);
    const __mmask16 hit = nan ? _mm512_mask_cmp_ps_mask(in, v, v, _CMP_UNORD_Q)
                              : _mm512_mask_cmp_ps_mask(in, v, target, _CMP_EQ_OQ);
    if (hit) {
      const int64_t k = j + __builtin_ctz(hit);
      return typename Op::acc_t{p[k], i0 + k};
    }
  }
  return typename Op::acc_t{p[0], i0};  // not reached: some lane equals the extreme
}
#endif

/// Accumulates the reduced elements [r0, r1) (linear reduced index) of the
/// output whose first input element is `base`, in InnerOrder (reduce_ops.h).
template <class Op, class T>
typename Op::acc_t accumulate_range(const T* base, const ReduceGeom& g, int64_t r0, int64_t r1) {
  using A = typename Op::value_t;
  const int64_t nd = static_cast<int64_t>(g.red_sizes.size());
  if (r0 >= r1) return Op::init();
  if (nd == 0) {
    r::InnerOrder<Op> row(r0);
    row.template run<false>(0, 1, [base](int64_t) { return r::to_acc<A>(base[0]); });
    return row.result();
  }
  const int64_t n_in = g.red_sizes[nd - 1], s_in = g.red_strides[nd - 1];
#if defined(__AVX512F__)
  if constexpr (kArgVector<Op, T>) {
    if (nd == 1 && s_in == 1) return arg_run16<Op>(base + r0, r1 - r0, r0);
  }
#endif
  constexpr bool kFoldsRun = std::is_floating_point_v<T> &&
                             (std::is_same_v<Op, r::Sum<T>> || std::is_same_v<Op, r::Max<T>> ||
                              std::is_same_v<Op, r::Min<T>>);
  if constexpr (kFoldsRun) {
    // One contiguous run (a row, or a stretch of one): fold_contiguous_row's
    // straight loops (Sum) or one plain_extreme (Max / Min), the bits of the
    // InnerOrder below (512 x 1024 float32 sum over dim -1, one thread:
    // 30.2 -> 27.0 us).
    if (nd == 1 && s_in == 1)
      return r::fold_contiguous_row<Op>(r1 - r0, r::ContiguousRun<T, RunTag>{base + r0});
  }
  // (Constructed here, after the paths that return without it: a cascade of
  // its own per output otherwise, for 65536 rows of 4 elements too.)
  r::InnerOrder<Op> row(r0);
  Counter c(g.red_sizes, g.red_strides, nd - 1, r0 / n_in);
  int64_t i_in = r0 % n_in;
  int64_t rr = r0;
#if SMELT_HOST_VECTOR_LANES
  if constexpr (kFoldsRun) {
    // Runs shorter than a chunk that tile it (from a run's start, where the
    // first chunk starts too): four at a time through fold_runs, their lanes
    // side by side, each run's tree then into the chunk's partial as run()
    // would put it. 32 x 128 x 64 float32 summed over dims (0, 2), one
    // thread of a 2-core AVX-512 Xeon: 34.5 -> 20.3 us (PyTorch 26).
    constexpr int64_t kChunk = r::chunk_size<Op>();
    constexpr int kGroup = 4;
    if (s_in == 1 && i_in == 0 && n_in >= 2 * r::kLanes && n_in < kChunk && kChunk % n_in == 0 &&
        n_in % r::kLanes == 0) {
      using Run = r::ContiguousRun<T, RunTag>;
      for (; r1 - rr >= kGroup * n_in; rr += kGroup * n_in) {
        Run runs[kGroup];
        for (int g = 0; g < kGroup; ++g) {
          runs[g] = Run{base + c.off};
          c.next();
        }
        typename Op::acc_t trees[kGroup];
        r::fold_runs<Op, kGroup>(runs, n_in, trees);
        for (int g = 0; g < kGroup; ++g) row.add_run_tree(trees[g], n_in);
      }
    }
  }
#endif
  for (; rr < r1;) {
    const int64_t len = std::min(n_in - i_in, r1 - rr);
    const T* p = base + c.off + i_in * s_in;
    if (s_in == 1) {
      // The elements as they are where the fold takes them so: of the
      // accumulate type, or float for Welford<double> (welford_lanes' float lanes).
      if constexpr (std::is_same_v<T, A> ||
                    (r::is_welford<Op>::value && std::is_same_v<T, float>)) {
        row.template run<true>(0, len, r::ContiguousRun<T, RunTag>{p});
      } else {
        row.template run<true>(0, len, [p](int64_t k) { return r::to_acc<A>(p[k]); });
      }
    } else {
      row.template run<false>(0, len, [p, s_in](int64_t k) { return r::to_acc<A>(p[k * s_in]); });
    }
    rr += len;
    i_in = 0;
    c.next();
  }
  return row.result();
}

/// The Cascades (reduce_ops.h) of `jn` neighbouring columns, stored level by
/// level (level l of column j at lv[l * jn + j]). Every column of a block
/// takes its partials at the same rows, so the fan-out counts are shared and
/// each step is one loop across the columns (vectorized); column j's values
/// are those of its own Cascade, bit for bit. The levels are allocated at the
/// first add() (a stretch of at most kColumnChunk rows never needs them).
template <class Op>
class CascadeColumns {
 public:
  using Acc = typename Op::acc_t;
  explicit CascadeColumns(int64_t jn) : jn_(jn) {}
  /// Cascade::add of part[j] for every column; part[j] is reset to init().
  void add(Acc* __restrict part) {
    if (!lv_) {
      lv_.reset(new Acc[static_cast<size_t>(r::kCascadeLevels * jn_)]);
      for (int64_t i = 0; i < r::kCascadeLevels * jn_; ++i) lv_[i] = Op::init();
    }
    Acc* __restrict l0 = lv_.get();
    for (int64_t j = 0; j < jn_; ++j) {
      l0[j] = Op::combine(l0[j], part[j]);
      part[j] = Op::init();
    }
    for (int l = 0; l + 1 < r::kCascadeLevels && ++cnt_[l] == r::kCascadeFanout; ++l) {
      Acc* __restrict lo = lv_.get() + l * jn_;
      Acc* __restrict hi = lo + jn_;
      for (int64_t j = 0; j < jn_; ++j) {
        hi[j] = Op::combine(hi[j], lo[j]);
        lo[j] = Op::init();
      }
      cnt_[l] = 0;
    }
  }
  /// Cascade::result_after(part[j]) for every column, into res.
  void result_after(const Acc* part, Acc* __restrict res) const {
    if (!lv_) {
      // Every level still init(): one combine with it gives what
      // kCascadeLevels give (init() is each accumulator's identity, but for
      // a float sum's -0 + 0 = +0, which a second + 0 keeps). 4 x 65536
      // float32 summed over dim 0, one thread of a 2-core AVX-512 Xeon:
      // 58 -> 45 us (PyTorch 36).
      for (int64_t j = 0; j < jn_; ++j) res[j] = Op::combine(part[j], Op::init());
      return;
    }
    for (int64_t j = 0; j < jn_; ++j) res[j] = part[j];
    for (int l = 0; l < r::kCascadeLevels; ++l) {
      const Acc* lv = lv_ ? lv_.get() + l * jn_ : nullptr;
      for (int64_t j = 0; j < jn_; ++j) res[j] = Op::combine(res[j], lv ? lv[j] : Op::init());
    }
  }

 private:
  int64_t jn_;
  std::unique_ptr<Acc[]> lv_;
  int cnt_[r::kCascadeLevels] = {};
};

/// One reduced element (row rr, at p) stepped into the partials of `jn`
/// neighbouring columns (input stride sv).
template <class Op, class T>
inline void step_columns(typename Op::acc_t* __restrict part, const T* __restrict p, int64_t sv,
                         int64_t jn, int64_t rr) {
  using A = typename Op::value_t;
  if constexpr (Op::kIndexed) {
    for (int64_t j = 0; j < jn; ++j) part[j] = Op::step(part[j], r::to_acc<A>(p[j * sv]), rr);
  } else {
    (void)rr;
    if (sv == 1) {
      for (int64_t j = 0; j < jn; ++j) part[j] = Op::step(part[j], r::to_acc<A>(p[j]));
    } else {
      for (int64_t j = 0; j < jn; ++j) part[j] = Op::step(part[j], r::to_acc<A>(p[j * sv]));
    }
  }
}

/// Reduced elements step_rows takes at a time.
constexpr int64_t kStepRows = 8;

/// Whether step_rows folds kStepRows rows per pass for Op: sums and products
/// of floats (their steps vectorize across the columns when nested; a
/// column's steps are the same ones in the same order either way). Not
/// Max / Min: GCC 12 leaves their nested selects scalar (amax over dim 0 of
/// 512 x 64 columns: 4.2 -> 40 us); float's fold is written out for AVX-512
/// instead (max_min_step16: 4.3 -> 3.2 us).
template <class Op>
constexpr bool kFoldsRows = !Op::kIndexed && std::is_floating_point_v<typename Op::acc_t> &&
                            (std::is_same_v<Op, r::Sum<typename Op::acc_t>> ||
                             std::is_same_v<Op, r::Prod<typename Op::acc_t>>);

/// Whether step_rows folds float Max / Min with max_min_step16 (AVX-512).
template <class Op, class T>
constexpr bool kMaxMinVector =
#if defined(__AVX512F__)
    std::is_same_v<T, float> &&
    (std::is_same_v<Op, r::Max<float>> || std::is_same_v<Op, r::Min<float>>);
#else
    false;
#endif

#if defined(__AVX512F__)
/// The compare predicate of float Max / Min's step (x against acc; true where
/// x is NaN).
template <class Op>
constexpr int kMaxMinCompare = std::is_same_v<Op, r::Max<float>> ? _CMP_NLE_UQ : _CMP_NGE_UQ;

/// Op::step of float Max / Min on 16 lanes: x where acc is a number and x is
/// NaN or beyond acc, else acc (the same select, so the same bits, NaN
/// payloads and signed zeros included).
template <class Op>
inline __m512 max_min_step16(__m512 acc, __m512 x) {
  const __mmask16 number = _mm512_cmp_ps_mask(acc, acc, _CMP_ORD_Q);
  return _mm512_mask_mov_ps(acc, _mm512_mask_cmp_ps_mask(number, x, acc, kMaxMinCompare<Op>), x);
}
#endif

/// The reduced elements [rr, rr + n) of `jn` neighbouring columns (Counter c
/// at rr, advanced past them) stepped into their partials, kStepRows rows
/// per pass over the partials where kFoldsRows<Op>: a partial is loaded and
/// stored once per kStepRows rows instead of once per row, so a narrow block
/// (64 columns: four vectors, 16 threads on 512 x 1024 over dim 0) is no
/// longer bound by storing a partial and loading it back for the next row.
/// One thread, 512 x 64 columns of a 512 x 1024 float32 over dim 0: 3.75 ->
/// 2.90 us (PyTorch 3.70); 512 x 512: 20.2 -> 16.4 us (PyTorch 20.2); 4
/// rows: 3.19 and 18.9, 16 rows: 3.18 and 19.8.
template <class Op, class T>
inline void step_rows(typename Op::acc_t* __restrict part, const T* base, Counter& c, int64_t sv,
                      int64_t jn, int64_t rr, int64_t n) {
  using A = typename Op::value_t;
  int64_t k = 0;
  if constexpr (kFoldsRows<Op> || kMaxMinVector<Op, T>) {
    if (sv == 1) {
      for (; k + kStepRows <= n; k += kStepRows) {
        const T* __restrict p[kStepRows];
        for (int64_t u = 0; u < kStepRows; ++u) {
          p[u] = base + c.off;
          c.next();
        }
        int64_t j = 0;
#if defined(__AVX512F__)
        if constexpr (kMaxMinVector<Op, T>) {
          for (; j + 16 <= jn; j += 16) {
            __m512 a = _mm512_loadu_ps(part + j);
            for (int64_t u = 0; u < kStepRows; ++u)
              a = max_min_step16<Op>(a, _mm512_loadu_ps(p[u] + j));
            _mm512_storeu_ps(part + j, a);
          }
        }
#endif
        for (; j < jn; ++j) {
          typename Op::acc_t a = part[j];
#pragma GCC unroll 16
          for (int64_t u = 0; u < kStepRows; ++u) a = Op::step(a, r::to_acc<A>(p[u][j]));
          part[j] = a;
        }
      }
    }
  }
  for (; k < n; ++k) {
    step_columns<Op>(part, base + c.off, sv, jn, rr + k);
    c.next();
  }
}

/// Outer schedule: outputs j0 .. j0 + jn along kept dim v (input stride sv)
/// accumulated side by side over reduced elements [r0, r1); results in `res`.
/// Each column is combined in ColumnOrder (reduce_ops.h): the partials are
/// arrays over the columns (the stepping loop vectorizes across them), every
/// kColumnChunk rows they go into the columns' cascades.
template <class Op, class T>
void accumulate_block(const T* base, const ReduceGeom& g, int64_t sv, int64_t jn, int64_t r0,
                      int64_t r1, typename Op::acc_t* res) {
  using Acc = typename Op::acc_t;
  AccBuf<Acc> buf(jn);
  for (int64_t j = 0; j < jn; ++j) buf[j] = Op::init();
  Acc* __restrict part = buf.data();
  CascadeColumns<Op> cas(jn);
  const int64_t nd = static_cast<int64_t>(g.red_sizes.size());
  int64_t start = r0;
  if constexpr (kFoldsRows<Op>) {
    // Few columns: each column's chunk is one chain of additions, so a
    // column block narrower than a vector waits on them. kChunkGroup whole
    // chunks are folded side by side (each still from init(), row by row)
    // and go into the cascades in order: the same partials, the same bits
    // (65536 x 4 float32 summed over dim 0, one thread: 241 -> 98 us;
    // PyTorch 41).
    constexpr int64_t kChunkGroup = 4, kNarrow = 8;
    const int64_t span = kChunkGroup * r::kColumnChunk;
    if (jn <= kNarrow && sv == 1 && nd == 1) {  // one reduced dim: rows at a fixed stride
      const int64_t rs = g.red_strides[0];
      Acc parts[kChunkGroup][kNarrow];
      for (; r1 - start >= span; start += span) {
        for (int64_t q = 0; q < kChunkGroup; ++q)
          for (int64_t j = 0; j < kNarrow; ++j) parts[q][j] = Op::init();
        const T* rows = base + start * rs;
        for (int64_t u = 0; u < r::kColumnChunk; ++u, rows += rs)
          for (int64_t q = 0; q < kChunkGroup; ++q) {
            const T* __restrict p = rows + q * r::kColumnChunk * rs;
            for (int64_t j = 0; j < jn; ++j)
              parts[q][j] = Op::step(parts[q][j], r::to_acc<typename Op::value_t>(p[j]));
          }
        for (int64_t q = 0; q < kChunkGroup; ++q) cas.add(parts[q]);
      }
    }
  }
  Counter c(g.red_sizes, g.red_strides, nd, start);
  for (int64_t rr = start; rr < r1; rr += r::kColumnChunk) {
    const int64_t n = std::min(r::kColumnChunk, r1 - rr);
    step_rows<Op>(part, base, c, sv, jn, rr, n);
    if (n == r::kColumnChunk) cas.add(part);
  }
  cas.result_after(part, res);
}

/// The partials ColumnOrder takes from chunks c0 .. c1 - 1 (kColumnChunk
/// reduced elements each, the last one possibly shorter) of `jn` neighbouring
/// columns: chunk ch's into out + ch * stride.
template <class Op, class T>
void column_chunks(const T* base, const ReduceGeom& g, int64_t sv, int64_t jn, int64_t c0,
                   int64_t c1, typename Op::acc_t* out, int64_t stride) {
  const int64_t nd = static_cast<int64_t>(g.red_sizes.size());
  Counter c(g.red_sizes, g.red_strides, nd, c0 * r::kColumnChunk);
  for (int64_t ch = c0; ch < c1; ++ch) {
    typename Op::acc_t* __restrict part = out + ch * stride;
    for (int64_t j = 0; j < jn; ++j) part[j] = Op::init();
    const int64_t b = ch * r::kColumnChunk, e = std::min(g.n_red, b + r::kColumnChunk);
    step_rows<Op>(part, base, c, sv, jn, b, e - b);
  }
}

/// Columns per block of a column reduction over V columns in `units`
/// independent pieces (rows x splits, or rows x chunk groups) on `threads`
/// threads: kBlock, or narrower (a multiple of 16 columns, at least 16)
/// where kBlock-wide blocks would leave threads idle.
inline int64_t column_block_width(int64_t V, int64_t units, int64_t threads) {
  const int64_t tasks = units * ((V + kBlock - 1) / kBlock);
  if (tasks >= threads) return kBlock;
  const int64_t per_row = (threads + units - 1) / units;
  return std::max<int64_t>(16, ((V + per_row - 1) / per_row + 15) / 16 * 16);
}

/// Input offset of output `o` (row-major over the kept dims).
inline int64_t out_input_offset(const ReduceGeom& g, int64_t o) {
  int64_t off = 0;
  for (int64_t d = static_cast<int64_t>(g.out_sizes.size()) - 1; d >= 0; --d) {
    off += (o % g.out_sizes[d]) * g.out_in_strides[d];
    o /= g.out_sizes[d];
  }
  return off;
}

/// The generic reduction: calls emit(o, acc) once for every output element o
/// (row-major linear index into the contiguous output).
template <class Op, class T, class Emit>
void reduce_loop(const Tensor& x, const std::vector<int64_t>& dims, const Emit& emit) {
  using Acc = typename Op::acc_t;
  const ReduceGeom g = make_reduce_geom(x.sizes(), x.strides(), dims, Op::kIndexed);
  SMELT_INTERNAL_ASSERT(g.red_sizes.size() < 64 && g.out_sizes.size() < 64,
                        "reduction: too many dims");
  if (g.n_out == 0) return;
  const T* base = static_cast<const T*>(x.data_ptr());
  const int64_t nthreads = omp_get_max_threads();
  if (g.n_red == 0) {
    for (int64_t o = 0; o < g.n_out; ++o) emit(o, Op::init());
    return;
  }

  // Outer schedule when a kept dim is innermost in memory (ColumnOrder).
  const int64_t v = g.column;

  if (v >= 0) {
    const int64_t V = g.out_sizes[v], sv = g.out_in_strides[v], ov = g.out_out_strides[v];
    const int64_t nblk = (V + kBlock - 1) / kBlock;
    const int64_t n_rows = g.n_out / V;
    const int64_t tasks = n_rows * nblk;
    // Row r of the kept dims other than v: input / output offsets.
    Shape rs, ris, ros;
    for (size_t d = 0; d < g.out_sizes.size(); ++d) {
      if (static_cast<int64_t>(d) == v) continue;
      rs.push_back(g.out_sizes[d]);
      ris.push_back(g.out_in_strides[d]);
      ros.push_back(g.out_out_strides[d]);
    }
    auto row_offsets = [&](int64_t row, int64_t& in_off, int64_t& out_off) {
      in_off = 0;
      out_off = 0;
      for (int64_t d = static_cast<int64_t>(rs.size()) - 1; d >= 0; --d) {
        int64_t i = row % rs[d];
        row /= rs[d];
        in_off += i * ris[d];
        out_off += i * ros[d];
      }
    };
    // splits of the reduced range (these decide the values: compiled code
    // asks row_splits the same question)
    const int64_t P = r::row_splits(g.n_out, g.n_red, nthreads);
    const int64_t n_chunks = (g.n_red + r::kColumnChunk - 1) / r::kColumnChunk;
    // Blocks of at least 16 columns, narrowed until every thread has one (the
    // schedule after this branch) where there are that many: 512 x 1024 over
    // dim 0 on the GPU host's 16 cores, 16 blocks of 64 columns, took 0.0134-
    // 0.0159 ms against 0.0316-0.0321 ms for 4 chunk groups x 4 blocks of 256
    // (PyTorch: 0.0138-0.0185 ms). On 2 threads (two blocks of 512) 0.0202-
    // 0.0259 ms against 0.0195-0.0220 for 2 chunk groups of whole rows.
    const bool narrow_fills = n_rows * ((V + 15) / 16) >= nthreads;
    if (P == 1 && tasks < nthreads && !narrow_fills && n_chunks >= 2 &&
        g.n_out * g.n_red >= r::kReduceParallelGrain) {
      // Too few blocks for the threads even when narrowed, and no split: the
      // threads take stretches of whole chunks of every block (whole rows of
      // memory), the partials ColumnOrder makes of each chunk are kept
      // ([row][chunk][V]), then each block's cascades take them in order:
      // ColumnOrder over the whole range, bit for bit.
      const int64_t groups = std::min(n_chunks, (nthreads + tasks - 1) / tasks);
      const int64_t per_group = (n_chunks + groups - 1) / groups;
      // Blocks narrower than kBlock where the chunk groups alone leave
      // threads idle. A column's value does not depend on the block that
      // holds it.
      const int64_t bw = column_block_width(V, n_rows * groups, nthreads);
      const int64_t nb = (V + bw - 1) / bw, ntasks = n_rows * nb;
      AccBuf<Acc> parts(n_rows * n_chunks * V);
      parallel_for(0, ntasks * groups, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t task = t / groups, grp = t % groups;
          const int64_t row = task / nb, j0 = task % nb * bw;
          const int64_t c0 = grp * per_group, c1 = std::min(n_chunks, c0 + per_group);
          int64_t in_off, out_off;
          row_offsets(row, in_off, out_off);
          if (c0 < c1)
            column_chunks<Op>(base + in_off + j0 * sv, g, sv, std::min(bw, V - j0), c0, c1,
                              parts.data() + row * n_chunks * V + j0, V);
        }
      });
      const int64_t full = g.n_red / r::kColumnChunk;  // chunks the cascades take
      parallel_for(0, ntasks, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t task = t0; task < t1; ++task) {
          const int64_t row = task / nb, j0 = task % nb * bw;
          const int64_t jn = std::min(bw, V - j0);
          int64_t in_off, out_off;
          row_offsets(row, in_off, out_off);
          Acc* chunk0 = parts.data() + row * n_chunks * V + j0;
          CascadeColumns<Op> cas(jn);
          for (int64_t ch = 0; ch < full; ++ch) cas.add(chunk0 + ch * V);
          AccBuf<Acc> tail(jn), res(jn);
          for (int64_t j = 0; j < jn; ++j)
            tail[j] = full < n_chunks ? chunk0[(n_chunks - 1) * V + j] : Op::init();
          cas.result_after(tail.data(), res.data());
          for (int64_t j = 0; j < jn; ++j) emit(out_off + (j0 + j) * ov, res[j]);
        }
      });
      return;
    }
    // split c's partials of every output side by side (not each output's
    // splits side by side: threads would write to the same cache lines)
    AccBuf<Acc> partial(P > 1 ? g.n_out * P : 0);
    // Blocks narrower than kBlock when rows x blocks x splits would leave
    // threads idle ([100, 1000] over dim 0 on 4 threads: one block of one
    // chunk; [60000, 3] over dim 0 on 64 threads: one block, 58 splits). A
    // column's value does not depend on the block that holds it.
    const int64_t bw = g.n_out * g.n_red >= r::kReduceParallelGrain
                           ? column_block_width(V, n_rows * P, nthreads)
                           : kBlock;
    const int64_t nb = (V + bw - 1) / bw, ntasks = n_rows * nb;
    // Each task covers about n_out * n_red / (ntasks * P) elements.
    const int64_t per_task = std::max<int64_t>(1, g.n_out * g.n_red / (ntasks * P));
    parallel_for(0, ntasks * P, grain_for(per_task), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t task = t / P, cidx = t % P;
        const int64_t row = task / nb, blk = task % nb;
        int64_t in_off, out_off;
        row_offsets(row, in_off, out_off);
        const int64_t j0 = blk * bw, jn = std::min(bw, V - j0);
        AccBuf<Acc> res(jn);
        const int64_t r0 = r::stretch_begin(cidx, P, g.n_red),
                      r1 = r::stretch_begin(cidx + 1, P, g.n_red);
        accumulate_block<Op>(base + in_off + j0 * sv, g, sv, jn, r0, r1, res.data());
        for (int64_t j = 0; j < jn; ++j) {
          const int64_t o = out_off + (j0 + j) * ov;
          if (P == 1) {
            emit(o, res[j]);
          } else {
            partial[cidx * g.n_out + o] = res[j];
          }
        }
      }
    });
    if (P > 1) {
      for (int64_t o = 0; o < g.n_out; ++o) {
        Acc acc = partial[o];
        for (int64_t c = 1; c < P; ++c) acc = Op::combine(acc, partial[c * g.n_out + o]);
        emit(o, acc);
      }
    }
    return;
  }

  // Inner schedule.
  if (const int64_t P = r::row_splits(g.n_out, g.n_red, nthreads); P > 1) {
    // Few outputs, long reductions: per-thread partials merged with combine().
    AccBuf<Acc> partial(g.n_out * P);
    parallel_for(0, g.n_out * P, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t o = t / P, cidx = t % P;
        const int64_t r0 = r::stretch_begin(cidx, P, g.n_red),
                      r1 = r::stretch_begin(cidx + 1, P, g.n_red);
        partial[t] = accumulate_range<Op>(base + out_input_offset(g, o), g, r0, r1);
      }
    });
    for (int64_t o = 0; o < g.n_out; ++o) {
      Acc acc = partial[o * P];
      for (int64_t c = 1; c < P; ++c) acc = Op::combine(acc, partial[o * P + c]);
      emit(o, acc);
    }
    return;
  }
  if (g.red_sizes.size() == 1 && g.red_strides[0] == 1 && g.n_red < 2 * r::kLanes) {
    // Contiguous rows shorter than InnerOrder's lanes need: its fold of them
    // is the elements stepped in order from init(), written here without a
    // call per row (65536 rows of 4 floats summed, one thread of a 2-core
    // AVX-512 Xeon: 317 -> 164 us; PyTorch 234).
    const int64_t n = g.n_red;
    parallel_for(0, g.n_out, grain_for(n), [&](int64_t o0, int64_t o1) {
      Counter c(g.out_sizes, g.out_in_strides, static_cast<int64_t>(g.out_sizes.size()), o0);
      for (int64_t o = o0; o < o1; ++o) {
        const T* p = base + c.off;
        emit(o, r::fold_run<Op, false>(
                    Op::init(), [p](int64_t k) { return r::to_acc<typename Op::value_t>(p[k]); }, n,
                    0));
        c.next();
      }
    });
    return;
  }
  parallel_for(0, g.n_out, grain_for(g.n_red), [&](int64_t o0, int64_t o1) {
    Counter c(g.out_sizes, g.out_in_strides, static_cast<int64_t>(g.out_sizes.size()), o0);
    for (int64_t o = o0; o < o1; ++o) {
      emit(o, accumulate_range<Op>(base + c.off, g, 0, g.n_red));
      c.next();
    }
  });
}

/// Converts an accumulator value to the stored output type.
template <class D, class A>
inline D from_acc(A a) {
  if constexpr (std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>) {
    return D(static_cast<float>(a));
  } else if constexpr (std::is_same_v<D, bool>) {
    return a != A(0);
  } else {
    return static_cast<D>(a);
  }
}

template <class T>
constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

/// Sum-like (Sum, Prod) of T accumulated in acc_type<T>, stored as T or int64.
template <template <class> class OpT>
void sumlike(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out,
             const char* name) {
  SMELT_DISPATCH_ALL(x.dtype(), name, [&] {
    using A = r::accumulate_t<r::AccRule::Sum, T>;
    using Op = OpT<A>;
    if (out.dtype() == x.dtype()) {
      T* o = static_cast<T*>(out.data_ptr());
      reduce_loop<Op, T>(x, dims, [&](int64_t i, A acc) { o[i] = from_acc<T>(acc); });
    } else {
      SMELT_INTERNAL_ASSERT(out.dtype() == DType::Int64 && std::is_integral_v<T>,
                            "{}: unexpected dtypes {} -> {}", name, dtype_name(x.dtype()),
                            dtype_name(out.dtype()));
      int64_t* o = static_cast<int64_t*>(out.data_ptr());
      reduce_loop<Op, T>(x, dims, [&](int64_t i, A acc) { o[i] = from_acc<int64_t>(acc); });
    }
  });
}

}  // namespace

void sum_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out) {
  sumlike<r::Sum>(x, dims, out, "sum");
}

void prod_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out) {
  sumlike<r::Prod>(x, dims, out, "prod");
}

void mean_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out) {
  SMELT_INTERNAL_ASSERT(is_floating(x.dtype()) && out.dtype() == x.dtype(),
                        "mean: unexpected dtypes");
  int64_t count = 1;
  for (int64_t d : dims) count *= x.sizes()[static_cast<size_t>(d)];
  SMELT_DISPATCH_ALL(x.dtype(), "mean", [&] {
    if constexpr (std::is_floating_point_v<T> || is_half_v<T>) {
      using A = r::accumulate_t<r::AccRule::Sum, T>;
      T* o = static_cast<T*>(out.data_ptr());
      reduce_loop<r::Sum<A>, T>(
          x, dims, [&](int64_t i, A acc) { o[i] = from_acc<T>(r::mean_finalize(acc, count)); });
    }
  });
}

void minmax_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out,
                   bool is_max) {
  SMELT_DISPATCH_ALL(x.dtype(), is_max ? "amax" : "amin", [&] {
    using A = r::accumulate_t<r::AccRule::Compare, T>;
    T* o = static_cast<T*>(out.data_ptr());
    auto emit = [&](int64_t i, A acc) { o[i] = from_acc<T>(acc); };
    if (is_max) {
      reduce_loop<r::Max<A>, T>(x, dims, emit);
    } else {
      reduce_loop<r::Min<A>, T>(x, dims, emit);
    }
  });
}

void arg_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& values,
                const Tensor& indices, bool is_max) {
  SMELT_DISPATCH_ALL(x.dtype(), is_max ? "argmax" : "argmin", [&] {
    using A = r::accumulate_t<r::AccRule::Compare, T>;
    T* vo = values.defined() ? static_cast<T*>(values.data_ptr()) : nullptr;
    int64_t* io = static_cast<int64_t*>(indices.data_ptr());
    auto emit = [&](int64_t i, const r::ArgAcc<A>& acc) {
      if (vo) vo[i] = from_acc<T>(acc.value);
      io[i] = acc.index;
    };
    if (is_max) {
      reduce_loop<r::ArgMax<A>, T>(x, dims, emit);
    } else {
      reduce_loop<r::ArgMin<A>, T>(x, dims, emit);
    }
  });
}

void var_kernel(const Tensor& x, const std::vector<int64_t>& dims, double correction,
                bool take_sqrt, const Tensor& var, const Tensor& mean) {
  SMELT_DISPATCH_ALL(x.dtype(), "var", [&] {
    if constexpr (std::is_floating_point_v<T> || is_half_v<T>) {
      using W = r::Welford<r::accumulate_t<r::AccRule::Welford, T>>;
      T* vo = static_cast<T*>(var.data_ptr());
      T* mo = mean.defined() ? static_cast<T*>(mean.data_ptr()) : nullptr;
      reduce_loop<W, T>(x, dims, [&](int64_t i, const typename W::acc_t& acc) {
        auto v = W::var(acc, correction);
        vo[i] = from_acc<T>(take_sqrt ? std::sqrt(v) : v);
        if (mo) mo[i] = from_acc<T>(W::mean(acc));
      });
    } else {
      SMELT_INTERNAL_ASSERT(false, "var: floating input expected");
    }
  });
}

void anyall_kernel(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out,
                   bool is_any) {
  SMELT_INTERNAL_ASSERT(out.dtype() == DType::Bool || out.dtype() == DType::UInt8,
                        "any/all: unexpected output dtype");
  uint8_t* o = static_cast<uint8_t*>(out.data_ptr());
  auto emit = [&](int64_t i, bool acc) { o[i] = acc ? 1 : 0; };
  SMELT_DISPATCH_ALL(x.dtype(), is_any ? "any" : "all", [&] {
    if (is_any) {
      reduce_loop<r::Any, T>(x, dims, emit);
    } else {
      reduce_loop<r::All, T>(x, dims, emit);
    }
  });
}

namespace {
/// Each line folded in index order through reduce::Sum in the scan's
/// accumulate type (reduce_ops.h, AccRule::Scan: float32 in double); compiled
/// scan kernels (compiler/codegen/kernel_builder.cpp) do the same.
template <class T, class D>
void cumsum_typed(const Tensor& x, int64_t dim, const Tensor& out) {
  using A = r::accumulate_t<r::AccRule::Scan, D>;
  const Shape& sizes = x.sizes();
  const int64_t nd = x.dim();
  const int64_t numel = x.numel();
  if (numel == 0) return;
  if (nd == 0) {
    static_cast<D*>(out.data_ptr())[0] =
        from_acc<D>(r::to_acc<A>(static_cast<const T*>(x.data_ptr())[0]));
    return;
  }
  const int64_t L = sizes[static_cast<size_t>(dim)];
  const int64_t sx = x.strides()[static_cast<size_t>(dim)];
  // One step of a line: the element into the running sum, the sum stored.
  const auto step = [](A& acc, T v) {
    acc = r::Sum<A>::step(acc, r::to_acc<A>(v));
    return from_acc<D>(acc);
  };
  const T* xp = static_cast<const T*>(x.data_ptr());
  D* op = static_cast<D*>(out.data_ptr());
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < nd; ++d) inner *= sizes[static_cast<size_t>(d)];
  if (inner > 1 && x.is_contiguous()) {
    // Lines along a dim that is not innermost: kLines neighbouring lines
    // side by side, each still folded in index order (the same bits), so
    // every step reads and writes whole rows of memory instead of one
    // element per row (cumsum over dim 0 of 2048 x 1024 float32, one thread:
    // 26.5 -> 0.54 ms; PyTorch 12.8).
    constexpr int64_t kLines = 256;
    const int64_t outer = numel / (L * inner), blocks = (inner + kLines - 1) / kLines;
    parallel_for(0, outer * blocks, grain_for(L * kLines), [&](int64_t t0, int64_t t1) {
      A acc[kLines];
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t o = t / blocks, j0 = t % blocks * kLines;
        const int64_t w = std::min(kLines, inner - j0);
        for (int64_t j = 0; j < w; ++j) acc[j] = r::Sum<A>::init();
        for (int64_t k = 0; k < L; ++k) {
          const T* __restrict xr = xp + (o * L + k) * inner + j0;
          D* __restrict orow = op + (o * L + k) * inner + j0;
          for (int64_t j = 0; j < w; ++j) orow[j] = step(acc[j], xr[j]);
        }
      }
    });
    return;
  }
  if (inner == 1 && x.is_contiguous() && numel / L >= 2) {
    // Lines along the innermost dim: kGroup of them stepped in turn, each in
    // index order (the same bits), so that their additions overlap instead
    // of waiting on one another (cumsum over dim 1 of 2048 x 1024 float32,
    // one thread: 1.97 -> 1.35-1.49 ms; PyTorch 1.97).
    constexpr int64_t kGroup = 8;
    const int64_t lines = numel / L;
    parallel_for(0, (lines + kGroup - 1) / kGroup, grain_for(L * kGroup),
                 [&](int64_t g0, int64_t g1) {
                   for (int64_t g = g0; g < g1; ++g) {
                     const int64_t first = g * kGroup, w = std::min(kGroup, lines - first);
                     A acc[kGroup];
                     for (int64_t q = 0; q < kGroup; ++q) acc[q] = r::Sum<A>::init();
                     const T* __restrict xr = xp + first * L;
                     D* __restrict orow = op + first * L;
                     // A cache line of each line in turn: the lines' chains
                     // interleave in the processor, the memory is read in
                     // whole lines.
                     constexpr int64_t kStep = 64 / sizeof(T);
                     for (int64_t kb = 0; kb < L; kb += kStep) {
                       const int64_t ke = std::min(L, kb + kStep);
                       for (int64_t q = 0; q < w; ++q)
                         for (int64_t k = kb; k < ke; ++k)
                           orow[q * L + k] = step(acc[q], xr[q * L + k]);
                     }
                   }
                 });
    return;
  }
  const Shape ostr = detail::contiguous_strides(sizes);
  const int64_t so = ostr[static_cast<size_t>(dim)];
  Shape ls, lis, los;  // the other dims
  for (int64_t d = 0; d < nd; ++d) {
    if (d == dim) continue;
    ls.push_back(sizes[static_cast<size_t>(d)]);
    lis.push_back(x.strides()[static_cast<size_t>(d)]);
    los.push_back(ostr[static_cast<size_t>(d)]);
  }
  const int64_t lines = numel / L;
  parallel_for(0, lines, grain_for(L), [&](int64_t l0, int64_t l1) {
    for (int64_t line = l0; line < l1; ++line) {
      int64_t rem = line, io = 0, oo = 0;
      for (int64_t d = static_cast<int64_t>(ls.size()) - 1; d >= 0; --d) {
        int64_t i = rem % ls[d];
        rem /= ls[d];
        io += i * lis[d];
        oo += i * los[d];
      }
      A acc = r::Sum<A>::init();
      for (int64_t k = 0; k < L; ++k) op[oo + k * so] = step(acc, xp[io + k * sx]);
    }
  });
}
}  // namespace

void cumsum_kernel(const Tensor& x, int64_t dim, const Tensor& out) {
  SMELT_DISPATCH_ALL(x.dtype(), "cumsum", [&] {
    if (out.dtype() == x.dtype()) {
      cumsum_typed<T, T>(x, dim, out);
    } else {
      SMELT_INTERNAL_ASSERT(out.dtype() == DType::Int64 && std::is_integral_v<T>,
                            "cumsum: unexpected dtypes {} -> {}", dtype_name(x.dtype()),
                            dtype_name(out.dtype()));
      if constexpr (std::is_integral_v<T>) cumsum_typed<T, int64_t>(x, dim, out);
    }
  });
}

}  // namespace smelt::cpu::SMELT_CPU_CAP

SMELT_REGISTER_DISPATCH(sum_stub, &::smelt::cpu::SMELT_CPU_CAP::sum_kernel);
SMELT_REGISTER_DISPATCH(mean_stub, &::smelt::cpu::SMELT_CPU_CAP::mean_kernel);
SMELT_REGISTER_DISPATCH(prod_stub, &::smelt::cpu::SMELT_CPU_CAP::prod_kernel);
SMELT_REGISTER_DISPATCH(minmax_stub, &::smelt::cpu::SMELT_CPU_CAP::minmax_kernel);
SMELT_REGISTER_DISPATCH(anyall_stub, &::smelt::cpu::SMELT_CPU_CAP::anyall_kernel);
SMELT_REGISTER_DISPATCH(arg_stub, &::smelt::cpu::SMELT_CPU_CAP::arg_kernel);
SMELT_REGISTER_DISPATCH(var_stub, &::smelt::cpu::SMELT_CPU_CAP::var_kernel);
SMELT_REGISTER_DISPATCH(cumsum_stub, &::smelt::cpu::SMELT_CPU_CAP::cumsum_kernel);
