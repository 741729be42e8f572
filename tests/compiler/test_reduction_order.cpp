// Compiled reductions equal eager reductions bit for bit where a row is reduced
// by one thread: the same accumulate type (detail::accumulation, from
// reduce_ops.h's accumulate_t) and the same combination order (reduce_geom.h's
// visiting sequence, reduce_ops.h's InnerOrder / ColumnOrder), for every
// reduction, every layout and lengths around the order's chunk boundaries.
// Inputs stay below the eager kernels' parallel grain, where eager may split a
// row across threads.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "compiler/compile_test_util.h"
#include "compiler/lower/loop_ir.h"
#include "kernels/reduce_geom.h"
#include "kernels/reduce_ops.h"
#include "ops/op_table.h"

using namespace smelt;
using smelt_test::bitwise_same;
using smelt_test::close;
using smelt_test::make;

namespace {

class ReductionOrder : public smelt_test::CompilerTest {};

/// Every floating reduction of `x` over `dims` (and over dim `d` for the ones
/// taking a single dim).
std::vector<Tensor> all_reductions(const Tensor& x, const std::vector<int64_t>& dims, int64_t d) {
  auto [mx, imx] = max(x, d);
  auto [mn, imn] = min(x, d);
  auto [v, m] = var_mean(x, dims, 1.0, false);
  return {sum(x, dims),
          mean(x, dims),
          prod(x, d),
          amax(x, dims),
          amin(x, dims),
          mx,
          imx,
          mn,
          imn,
          argmax(x, d),
          argmin(x, d),
          var(x, dims, 0.0),
          smelt::std(x, dims, 1.0),
          v,
          m,
          any(x, dims),
          all(x, dims),
          sum(abs(x) * 3.0 - 1.0, dims),  // a computed element
          sum(x, dims, false, DType::Float64)};
}

void expect_bitwise(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t k = 0; k < got.size(); ++k)
    EXPECT_TRUE(bitwise_same(got[k], want[k])) << what << ", output " << k;
}

}  // namespace

// The fuzzer's case: int32 values squared, cast to float32, prod over 8436
// elements. Eager's lanes overflow to inf apart from the lane that holds the
// zero, and inf * 0 is NaN; a sequential product met the zero first (0).
TEST_F(ReductionOrder, LongProductOverflowsLikeEager) {
  std::vector<double> v(8436, 300.0);
  v[0] = 0;
  Tensor x = make(v, {8436}).to(DType::Int32);
  auto f = [](const Tensor& x) { return prod(pow(x, 2).to(DType::Float32)); };
  Tensor want = f(x);
  ASSERT_TRUE(std::isnan(want.item<float>())) << "the input no longer overflows eagerly";
  EXPECT_TRUE(bitwise_same(compile(f)(x), want));
}

// A short product then tan near its pole: any other multiplication order moves
// the product by an ulp, and tan by far more.
TEST_F(ReductionOrder, ShortProductThenTanIsBitwiseEager) {
  // 33 float32 values whose sequential product is another float than eager's
  // (8 lanes), scaled onto 3e-7 below pi/2, where tan is ~3e6 and one ulp
  // of its argument moves it by a third (the seed searched for, as libm's tan
  // differs between machines).
  Tensor x;
  float k = 0, seq_tan = 0, eager_tan = 0;
  for (uint64_t seed = 7; seed < 200 && seq_tan == eager_tan; ++seed) {
    manual_seed(seed);
    x = rand({33}) * 0.1 + 0.97;
    const float lanes = prod(x).item<float>();
    float seq = 1;
    for (float v : x.to_vector<float>()) seq *= v;
    k = static_cast<float>((M_PI / 2 - 3e-7) / lanes);
    seq_tan = std::tan(seq * k);
    eager_tan = std::tan(lanes * k);
  }
  ASSERT_GT(std::abs(seq_tan - eager_tan), 0.01 * std::abs(eager_tan));
  auto f = [k](const Tensor& x) { return tan(prod(x) * k); };
  EXPECT_TRUE(bitwise_same(compile(f)(x), f(x)));
}

// Every reduction, row lengths around the order's chunk boundaries (lanes from
// 16 elements, 128-element chunks, the cascade), contiguous rows. (At 4500,
// eager folds the last whole Welford chunks as a pair, JIT code one at a
// time: reduce_ops.h's SMELT_REDUCE_CHUNK_PAIRS.)
TEST_F(ReductionOrder, EveryReductionOverContiguousRows) {
  for (int64_t n : {1, 33, 129, 4500}) {
    for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16}) {
      if ((n == 1 || n == 129) && dt != DType::Float32) continue;
      Tensor x = (randn({3, n}) * 3).to(dt);
      auto f = [](const Tensor& x) { return all_reductions(x, {1}, 1); };
      expect_bitwise(compile(f)(x), f(x),
                     std::string(dtype_name(dt)) + " [3, " + std::to_string(n) + "]");
    }
  }
}

// Welford rows (var_mean, std, layer_norm, batch_norm) whose last whole
// 128-element chunks after the groups of four are two or three, which eager
// folds as a pair and JIT code one at a time (SMELT_REDUCE_CHUNK_PAIRS), after
// a partial chunk or none: contiguous rows and rows in runs (reduced dims
// around a kept one).
TEST_F(ReductionOrder, WelfordChunksLeftAfterGroupsOfFourAreBitwiseEager) {
  std::vector<int64_t> ns;
  for (int64_t k : {2, 3, 6, 7, 11})
    for (int64_t r : {0, 5, 127}) ns.push_back(128 * k + r);
  const int64_t most = 128 * 11 + 127;
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor x = (randn({3, most}) * 3 + 1).to(dt), y = (randn({2, 3, most}) * 3 - 1).to(dt);
    auto f = [ns](const Tensor& x, const Tensor& y) {
      std::vector<Tensor> outs;
      for (int64_t n : ns) {
        Tensor xs = x.slice(1, 0, n), ys = y.slice(2, 0, n);
        auto [v, m] = var_mean(xs, {1}, 1.0, false);
        auto [rv, rm] = var_mean(ys, {0, 2}, 1.0, true);
        for (const Tensor& t :
             {v, m, smelt::std(xs, {1}, 0.0), layer_norm(xs, {n}), rv, rm,
              batch_norm(ys, std::nullopt, std::nullopt, std::nullopt, std::nullopt, true)})
          outs.push_back(t);
      }
      return outs;
    };
    expect_bitwise(compile(f)(x, y), f(x, y), std::string(dtype_name(dt)));
  }
}

// Rows longer than the parallel grain on 1 to 8 threads (fewer or more than
// the cores), with OpenMP's dynamic teams, and called inside a parallel
// region: reductions of an input split as eager splits them. z's
// columns are too short to split, so eager gives its threads narrower blocks
// of columns (reduce.cpp), which must not change a value.
TEST_F(ReductionOrder, SplitRowsAreBitwiseEagerOnAnyTeam) {
  const int threads = omp_get_max_threads();
  Tensor x = randn({2, 100003}) * 3 + 0.5, y = randn({70001, 3}) * 2;
  Tensor z = randn({3, 100, 1000});
  auto f = [z](const Tensor& x, const Tensor& y) {
    auto [v, m] = var_mean(x, {1}, 1.0, false);
    return std::vector<Tensor>{sum(z, {1}),
                               amax(z, {0}),
                               var(z, {0, 1}, 1.0),
                               sum(x, {1}),
                               v,
                               m,
                               amax(x, {1}),
                               argmax(x, 1),
                               sum(y, {0}),
                               var(y, {0}, 1.0),
                               layer_norm(x, {100003}),
                               sum(x),
                               var(y)};
  };
  auto compiled = compile(f);
  for (int dynamic : {0, 1}) {
    omp_set_dynamic(dynamic);
    for (int t : {1, 2, 3, 4, 8}) {
      omp_set_num_threads(t);
      const std::string what = std::to_string(t) + " threads" + (dynamic ? ", dynamic" : "");
      const std::vector<Tensor> want = f(x, y);
      expect_bitwise(compiled(x, y), want, what);
      std::vector<Tensor> nested;
#pragma omp parallel num_threads(2)
      {
#pragma omp single
        nested = compiled(x, y);
      }
      expect_bitwise(nested, want, what + ", inside a parallel region");
    }
  }
  omp_set_dynamic(0);
  omp_set_num_threads(threads);
}

// Shapes on either side of reduce::row_splits' thresholds (7 and 8 outputs,
// 32767 and 32768 elements), rows reduced as columns ([40000, 7] over dim 0,
// [2, 40000, 3] over dim 1) and a transposed input, float32 / float16 /
// int64, accumulators with and without an out-of-line result (reduce_jit.h:
// Sum, Max, Welford<double>; Prod, ArgMin, Sum<int64_t>, any): compiled ==
// eager bit for bit on teams of 1, 3, 5 and 16 threads and inside a parallel
// region.
TEST_F(ReductionOrder, SplitThresholdsAreBitwiseEagerOnAnyTeam) {
  const int threads = omp_get_max_threads();
  Tensor a = randn({7, 33000}) * 2 + 0.5, b = randn({8, 32768}), c = randn({3, 32767}) * 3;
  Tensor d = randn({40000, 7}), e = (randn({2, 40000, 3}) * 2).to(DType::Float16);
  Tensor t = randn({32768, 3}).t(), k = (randn({3, 40000}) * 4).to(DType::Int64);
  auto f = [](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d, const Tensor& e,
              const Tensor& t, const Tensor& k) {
    auto [v, m] = var_mean(e, {1}, 1.0, false);
    return std::vector<Tensor>{sum(a, {1}),
                               amax(exp(a), {1}),
                               argmin(a, 1),
                               logsumexp(b, {1}),
                               sum(b * 2.0 + 1.0, {1}),
                               prod(c * 0.0 + 1.0, 1),
                               var(c, {1}, 1.0),
                               sum(d, {0}),
                               mean(d, {0}),
                               amin(d, {0}),
                               v,
                               m,
                               sum(e, {1}),
                               softmax(t, 1),
                               sum(k, {1}),
                               any(k > 7, {1}),
                               amax(k, {1})};
  };
  auto compiled = compile(f);
  for (int n : {1, 3, 5, 16}) {
    omp_set_num_threads(n);
    const std::string what = std::to_string(n) + " threads";
    const std::vector<Tensor> want = f(a, b, c, d, e, t, k);
    expect_bitwise(compiled(a, b, c, d, e, t, k), want, what);
    std::vector<Tensor> nested;
#pragma omp parallel num_threads(2)
    {
#pragma omp single
      nested = compiled(a, b, c, d, e, t, k);
    }
    expect_bitwise(nested, want, what + ", inside a parallel region");
  }
  omp_set_num_threads(threads);
}

// Layouts: a kept dim innermost in memory (ColumnOrder), a transposed input
// reduced over all dims (visited by decreasing stride), several reduced dims,
// strided runs (no lanes), a row longer than a persistent kernel keeps.
TEST_F(ReductionOrder, EveryReductionOverEveryLayout) {
  struct Case {
    std::string what;
    Tensor x;
    std::vector<int64_t> dims;
    int64_t d;
  };
  Tensor a = randn({300, 40}) * 2, b = randn({6, 50, 7}) * 2, c = randn({2, 9000});
  std::vector<Case> cases = {
      {"dim 0 of a row-major matrix", a, {0}, 0},
      {"all dims of a transposed matrix", a.t(), {}, 1},
      {"dim 1 of a transposed matrix", a.t(), {1}, 1},
      {"dims 0 and 2", b, {0, 2}, 2},
      {"dims 1 and 2 of a permuted tensor", b.permute({2, 0, 1}), {1, 2}, 1},
      {"a strided slice", b.slice(2, 0, 7, 2), {1}, 1},
      {"an expanded dim", make({1, 2, 3}, {3, 1}).expand({3, 40}), {0, 1}, 1},
      {"rows longer than a persistent kernel", c, {1}, 1},
  };
  for (auto& k : cases) {
    auto dims = k.dims;
    int64_t d = k.d;
    auto f = [dims, d](const Tensor& x) { return all_reductions(x, dims, d); };
    expect_bitwise(compile(f)(k.x), f(k.x), k.what);
  }
}

// Column reductions reduce neighbouring outputs side by side
// (KernelConfig::column_lanes), each output still folded in ColumnOrder:
// bitwise eager for lane counts that divide the last dim, rows past the
// cascade's first level, several reduced dims, a kept dim before the last, a
// computed element and a per-output consumer.
TEST_F(ReductionOrder, ColumnLanesAreBitwiseEager) {
  struct Case {
    std::string what;
    Tensor x;
    std::vector<int64_t> dims;
    std::string lanes;
  };
  std::vector<Case> cases = {
      {"[300, 100] over dim 0", randn({300, 100}) * 2, {0}, "column_lanes=50"},
      {"[2100, 8] over dim 0", randn({2100, 8}), {0}, "column_lanes=8"},
      {"[5, 40, 48] over dims 0 and 1", randn({5, 40, 48}), {0, 1}, "column_lanes=48"},
      {"[30, 4, 24] over dim 0", randn({30, 4, 24}), {0}, "column_lanes=24"},
  };
  for (auto& k : cases) {
    auto dims = k.dims;
    auto f = [dims](const Tensor& x) {
      return std::make_tuple(sum(x, dims), mean(x, dims), amax(x, dims), var(x, dims, 1.0),
                             sum(x * x - 1.0, dims) * 0.5);
    };
    auto compiled = compile(f);
    auto [a, b, c, d, e] = compiled(k.x);
    auto [ea, eb, ec, ed, ee] = f(k.x);
    EXPECT_TRUE(bitwise_same(a, ea)) << k.what;
    EXPECT_TRUE(bitwise_same(b, eb)) << k.what;
    EXPECT_TRUE(bitwise_same(c, ec)) << k.what;
    EXPECT_TRUE(bitwise_same(d, ed)) << k.what;
    EXPECT_TRUE(bitwise_same(e, ee)) << k.what;
    EXPECT_NE(compiled.generated_code().find(k.lanes), std::string::npos) << k.what;
  }
}

// A column reduction that reads another's result (logsumexp's sum of
// exp(x - amax), a softmax over dim 0) needs a second pass over the rows: it
// keeps the one-output-at-a-time kernel (found by the fuzzer: the side-by-side
// kernel read amax before it was complete).
TEST_F(ReductionOrder, ChainedColumnReductionsKeepTwoPasses) {
  auto f = [](const Tensor& x) {
    return std::make_tuple(logsumexp(x, {0, 1}, false), softmax(x, 0));
  };
  Tensor x = randn({4, 3, 33});
  auto compiled = compile(f);
  auto [a, b] = compiled(x);
  auto [ea, eb] = f(x);
  EXPECT_TRUE(close(a, ea, 1e-6));
  EXPECT_TRUE(close(b, eb, 1e-6));
}

// Fused kernels built of reductions: layer_norm (var_mean, rsqrt) is compiled
// == eager bit for bit, and so are a softmax-shaped kernel (amax, a computed
// element, sum, div) and softmax itself (its exp vectorized in generated code,
// scalar in eager, the same bits: kernels/vector_math.h).
TEST_F(ReductionOrder, LayerNormAndSoftmaxShapesAreBitwiseEager) {
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    Tensor x = (randn({8, 1000}) * 4).to(dt);
    Tensor w = randn({1000}).to(dt), bias = randn({1000}).to(dt);
    auto f = [w, bias](const Tensor& x) {
      Tensor e = abs(x - amax(x, {-1}, true)) + 0.25;
      return std::make_tuple(layer_norm(x, {1000}, w, bias), e / sum(e, {-1}, true),
                             softmax(x, -1));
    };
    auto [ln, sm, s] = compile(f)(x);
    auto [eln, esm, es] = f(x);
    EXPECT_TRUE(bitwise_same(ln, eln)) << dtype_name(dt);
    EXPECT_TRUE(bitwise_same(sm, esm)) << dtype_name(dt);
    EXPECT_TRUE(bitwise_same(s, es)) << dtype_name(dt);
  }
}

// float32 var_mean and layer_norm (read from memory, and with a producer fused
// into the fold: Welford<double> takes float32 elements unwidened either way)
// on rows in and out of the float lanes' range (smelt_test::hard_variance_rows:
// the lanes that fold in double instead) give eager's bits.
TEST_F(ReductionOrder, Float32WelfordOfHardRowsIsBitwiseEager) {
  for (int64_t n : {17, 100, 1024, 2050}) {
    for (const char* kind : {"offset", "equal", "huge", "tiny"}) {
      Tensor x = smelt_test::hard_variance_rows(kind, 4, n);
      auto f = [n](const Tensor& x) {
        auto [v, m] = var_mean(x, {1}, 1.0, true);
        return std::vector<Tensor>{v, m, layer_norm(x, {n}), layer_norm(x * 2.0, {n}),
                                   var(x * 0.5, {1})};
      };
      expect_bitwise(compile(f)(x), f(x), std::string(kind) + " n " + std::to_string(n));
    }
  }
}

// Signs of zero and NaNs follow eager's order too: amax of -0.0 and +0.0 keeps
// whichever the order meets first.
TEST_F(ReductionOrder, SignedZerosAndNaNsFollowEagerOrder) {
  std::vector<double> v(40, 0.0);
  for (size_t i = 0; i < v.size(); i += 3) v[i] = -0.0;
  v[37] = std::nan("");
  Tensor x = make(v, {2, 20});
  auto f = [](const Tensor& x) {
    return std::make_tuple(amax(x, {1}), amin(x, {1}), sum(x, {1}), amax(x), prod(x, 1));
  };
  auto [a, b, c, d, e] = compile(f)(x);
  auto [ea, eb, ec, ed, ee] = f(x);
  EXPECT_TRUE(bitwise_same(a, ea));
  EXPECT_TRUE(bitwise_same(b, eb));
  EXPECT_TRUE(bitwise_same(c, ec));
  EXPECT_TRUE(bitwise_same(d, ed));
  EXPECT_TRUE(bitwise_same(e, ee));
}

// The accumulate types come from one rule (reduce_ops.h's accumulate_t),
// through the op table: float32 sums accumulate in float at any length, float32
// scans (cumsum) in double, as PyTorch's CPU kernels do.
TEST(ReductionAccumulation, OneRuleForEveryReduction) {
  auto acc = [](const char* op, DType in, DType out) {
    return detail::accumulation(*detail::find_op(op), in, out);
  };
  EXPECT_EQ(acc("sum", DType::Float32, DType::Float32).acc, DType::Float32);
  EXPECT_EQ(acc("sum", DType::BFloat16, DType::BFloat16).acc, DType::Float32);
  EXPECT_EQ(acc("sum", DType::Float16, DType::Float64).acc, DType::Float64);
  EXPECT_EQ(acc("sum", DType::Float32, DType::Float16).element, DType::Float16);
  EXPECT_EQ(acc("prod", DType::Int32, DType::Int64).acc, DType::Int64);
  EXPECT_EQ(acc("sum", DType::Bool, DType::Int64).acc, DType::Int64);
  EXPECT_EQ(acc("amax", DType::Float16, DType::Float16).acc, DType::Float32);
  EXPECT_EQ(acc("argmin", DType::Int16, DType::Int64).acc, DType::Int16);
  EXPECT_EQ(acc("argmin", DType::Int16, DType::Int64).element, DType::Int16);
  EXPECT_EQ(acc("var", DType::Float32, DType::Float32).acc, DType::Float64);
  EXPECT_EQ(acc("var", DType::BFloat16, DType::BFloat16).acc, DType::Float64);
  EXPECT_EQ(acc("any", DType::Float32, DType::Bool).acc, DType::Bool);
  EXPECT_EQ(acc("cumsum", DType::Float32, DType::Float32).acc, DType::Float64);
  EXPECT_EQ(acc("cumsum", DType::BFloat16, DType::BFloat16).acc, DType::Float32);
  EXPECT_EQ(acc("cumsum", DType::Float16, DType::Float32).element, DType::Float32);
  EXPECT_EQ(acc("cumsum", DType::Int32, DType::Int64).acc, DType::Int64);
  EXPECT_EQ(acc("cumsum", DType::Float64, DType::Float64).acc, DType::Float64);
}

// The visiting order: reduced dims by decreasing stride, size-1 dims dropped,
// contiguous neighbours merged into one run; argmax keeps row-major order.
TEST(ReductionAccumulation, GeometryVisitsByDecreasingStride) {
  // [4, 5, 6] permuted to strides [1, 24, 4]: reduce dims 0 and 1.
  reduce::ReduceGeom g = reduce::make_reduce_geom({4, 6, 5}, {1, 5, 30}, {0, 2}, false);
  EXPECT_EQ(g.red_dims, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(g.run(), 4);
  EXPECT_TRUE(g.run_contiguous());
  EXPECT_EQ(g.column, -1);
  reduce::ReduceGeom k = reduce::make_reduce_geom({4, 6, 5}, {1, 5, 30}, {0, 2}, true);
  EXPECT_EQ(k.red_dims, (std::vector<int64_t>{0, 2}));
  // dim 0 of a row-major [300, 40]: the kept dim is innermost (ColumnOrder).
  reduce::ReduceGeom c = reduce::make_reduce_geom({300, 40}, {40, 1}, {0}, false);
  EXPECT_EQ(c.column, 0);
  // [2, 3, 4] contiguous, all dims: one run of 24.
  reduce::ReduceGeom m = reduce::make_reduce_geom({2, 3, 4}, {12, 4, 1}, {0, 1, 2}, false);
  EXPECT_EQ(m.run(), 24);
  EXPECT_TRUE(m.run_contiguous());
}

// A normalization over rows whose elements are all equal (a row of one element,
// or a broadcast value) gives exactly 0 eagerly: the mean equals each element.
// The compiled kernel recomputes its inlined producer (sigmoid) in each pass
// over the row; every pass must compute it the same way, or the difference
// (one ulp) is divided by sqrt(eps) (the fuzzer found 1.9e-5 against 0).
TEST_F(ReductionOrder, NormalizationOfEqualElementsIsExactlyZero) {
  for (int64_t rows : {1, 7, 64, 1000}) {
    for (int64_t n : {1, 2, 3}) {
      manual_seed(11 + rows);
      Tensor x = randn({rows, 1});
      auto f = [n](const Tensor& x) {
        Tensor s = sigmoid(x * 1.7 - 0.3).expand({x.size(0), n});
        return std::vector<Tensor>{layer_norm(s, {n}), s - s.mean(1, true)};
      };
      auto want = f(x);
      auto got = compile(f)(x);
      expect_bitwise(got, want, "rows " + std::to_string(rows) + ", n " + std::to_string(n));
    }
  }
}

namespace {
struct OrderTestTag {};
/// The row folded run by run (runs of `run` elements), and folded again in
/// pieces cut at every chunk boundary (at most one chunk each, so no run()
/// call groups chunks): InnerOrder's definition of the order.
template <class Op, class Get>
std::pair<typename Op::acc_t, typename Op::acc_t> by_runs_and_by_chunks(int64_t n, int64_t run,
                                                                        const Get& get) {
  reduce::InnerOrder<Op> whole, pieces;
  whole.template stretch<true>(0, n, run, get);
  constexpr int64_t kChunk = reduce::chunk_size<Op>();
  for (int64_t s = 0; s < n;) {
    const int64_t e = std::min({n, (s / kChunk + 1) * kChunk, (s / run + 1) * run});
    pieces.template run<true>(s, e - s, get);
    s = e;
  }
  return {whole.result(), pieces.result()};
}
}  // namespace

// Chunks grouped within a run (four or two side by side: reduce::fold_chunks,
// welford_chunks) wherever a chunk begins, also after the chunk the previous
// run left open is completed (runs of 600 and 2000 are not whole chunks; 2000
// and 4800 hold several groups): the same bits as chunk by chunk, for Sum,
// Max and Welford.
TEST(ReductionAccumulation, ChunksGroupWithinRunsWithTheSameBits) {
  for (int64_t run : {600, 2000, 4800}) {
    const int64_t n = 8 * run;
    manual_seed(3);
    const std::vector<float> xs = randn({n}).to_vector<float>();
    const reduce::ContiguousRun<float, OrderTestTag> cont{xs.data()};
    auto [s0, s1] = by_runs_and_by_chunks<reduce::Sum<float>>(n, run, cont);
    EXPECT_EQ(s0, s1) << run;
    EXPECT_NE(s0, 0.0f);
    auto [m0, m1] = by_runs_and_by_chunks<reduce::Max<float>>(n, run, cont);
    EXPECT_EQ(m0, m1) << run;
    auto as_double = [&](int64_t r) { return static_cast<double>(xs[r]); };
    auto [w0, w1] = by_runs_and_by_chunks<reduce::Welford<double>>(n, run, as_double);
    EXPECT_EQ(w0.mean, w1.mean) << run;
    EXPECT_EQ(w0.m2, w1.m2) << run;
    EXPECT_EQ(w0.count, w1.count);
    EXPECT_EQ(w0.count, n);
  }
}

// Welford's lanes whose sums overflow (elements near the largest double) take
// the sum of x / count lane by lane, whatever chunks are grouped with theirs:
// one chunk in eight near 1e308 and one element of its group's others too,
// the same bits grouped or chunk by chunk, and a finite mean.
TEST(ReductionAccumulation, WelfordLanesNearTheLargestValueGroupWithTheSameBits) {
  constexpr int64_t kChunk = reduce::chunk_size<reduce::Welford<double>>();
  const int64_t run = 600, n = 8 * run;
  manual_seed(4);
  std::vector<double> xs = smelt_test::vals(randn({n}));
  for (int64_t i = 0; i < n; ++i)
    if ((i / kChunk) % 8 == 1)
      xs[static_cast<size_t>(i)] = 1.2e308 + 1e306 * xs[static_cast<size_t>(i)];
  xs[2 * kChunk + 3] = 1.5e308;
  auto get = [&](int64_t r) { return xs[static_cast<size_t>(r)]; };
  auto [w0, w1] = by_runs_and_by_chunks<reduce::Welford<double>>(n, run, get);
  EXPECT_EQ(w0.mean, w1.mean);
  EXPECT_TRUE(std::isfinite(w0.mean)) << w0.mean;
  double want = 0;
  for (double x : xs) want += x / static_cast<double>(n);
  EXPECT_NEAR(w0.mean, want, 1e-9 * want);
}

// Eager column reductions on any team (threads idle under rows x blocks x
// splits narrow the blocks; each split's partials lie side by side) equal
// ColumnOrder over reduce::row_splits' stretches, combined in order, bit
// for bit: columns not a multiple of 16, rows past the cascade's second
// level, too few rows for a split per thread (narrow blocks), NaNs,
// infinities and signed zeros among them.
TEST_F(ReductionOrder, EagerColumnsFollowColumnOrderOnAnyTeam) {
  namespace r = smelt::reduce;
  const int threads = omp_get_max_threads();
  // 200 columns of 600 rows: 5 chunk groups, so blocks narrower than the
  // columns (ragged last block) on 8 and 16 threads.
  for (auto [c, n] : {std::pair<int64_t, int64_t>{45, 600}, {45, 2100}, {200, 600}}) {
    Tensor x = randn({n, c}) * 2;
    float* p = x.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) {
      p[i * c] = -0.0f;
      p[i * c + 1] = i % 2 ? 0.0f : -0.0f;
      if (i == 130 || i == 2049) p[i * c + 2] = std::numeric_limits<float>::quiet_NaN();
      if (i == 2047) p[i * c + 3] = std::numeric_limits<float>::infinity();
      p[i * c + 4] = -std::numeric_limits<float>::infinity();
    }
    auto reference = [&, c = c, n = n](auto op, int64_t nthreads) {
      using Op = decltype(op);
      const int64_t splits = r::row_splits(c, n, nthreads);
      std::vector<float> out(c);
      for (int64_t j = 0; j < c; ++j) {
        float acc = Op::init();
        for (int64_t s = 0; s < splits; ++s) {
          const int64_t r0 = r::stretch_begin(s, splits, n),
                        r1 = r::stretch_begin(s + 1, splits, n);
          r::ColumnOrder<Op> order(r0);
          for (int64_t i = r0; i < r1; ++i) order.step(p[i * c + j]);
          acc = s == 0 ? order.result() : Op::combine(acc, order.result());
        }
        out[static_cast<size_t>(j)] = acc;
      }
      return make(std::vector<double>(out.begin(), out.end()), {c}).to(DType::Float32);
    };
    for (int t : {1, 2, 3, 5, 8, 16}) {
      omp_set_num_threads(t);
      EXPECT_TRUE(bitwise_same(sum(x, {0}), reference(r::Sum<float>{}, t)))
          << n << " rows, " << t << " threads";
      EXPECT_TRUE(bitwise_same(amax(x, {0}), reference(r::Max<float>{}, t)))
          << n << " rows, " << t << " threads";
    }
  }
  omp_set_num_threads(threads);
}

// Eager and compiled code cut the same rows across threads
// (reduce::row_splits: fewer than 8 outputs of at least 32768 elements) and
// no others, so that they agree bit for bit on any team: many short columns
// (eager used to split their rows, compiled code never did), a few rows too
// short to split (likewise), a few long rows on fewer threads than rows
// (compiled code used to split them anyway), inner and column orders, an
// input and a computed element.
TEST_F(ReductionOrder, RowsAreCutWhereEagerCutsThemOnAnyTeam) {
  const int threads = omp_get_max_threads();
  struct Case {
    std::vector<int64_t> shape;
    int64_t dim;
  };
  for (const Case& c : {Case{{128, 1000}, 0}, Case{{5000, 7}, 0}, Case{{40000, 3}, 0},
                        Case{{4, 20000}, 1}, Case{{3, 40000}, 1}, Case{{2, 33000, 3}, 1}}) {
    Tensor x = randn(c.shape) * 2;
    const int64_t d = c.dim;
    auto f = [d](const Tensor& x) {
      return std::vector<Tensor>{sum(x, {d}), amax(x, {d}), var(x, {d}, 1.0),
                                 sum(x * 2.0 + 1.0, {d})};
    };
    auto compiled = compile(f);
    for (int t : {1, 2, 3, 8}) {
      omp_set_num_threads(t);
      expect_bitwise(compiled(x), f(x),
                     std::to_string(x.size(0)) + "x" + std::to_string(x.size(1)) + " over dim " +
                         std::to_string(d) + " on " + std::to_string(t) + " threads");
    }
  }
  omp_set_num_threads(threads);
}

// Randomized eager column reductions (both column schedules, blocks narrowed
// for the team, ragged last blocks; [K, N, V] over N, [N, K, V] over N,
// [K + 1, N, V] over two dims, a column of stride 2; float32 / float64 /
// float16 / int32 / int64; sum, amax, argmax, mean, var, prod, any): on any
// team they equal eager on one thread where no row is split (ColumnOrder does
// not depend on the team), contiguous float32 sums equal a direct ColumnOrder
// reference, and compiled code equals eager on every team. FUZZ_SEED and
// FUZZ_ITERS widen a local run.
TEST_F(ReductionOrder, RandomColumnReductionsFollowColumnOrderOnAnyTeam) {
  namespace r = smelt::reduce;
  const int threads = omp_get_max_threads();
  const char* seed = std::getenv("FUZZ_SEED");
  const char* iters = std::getenv("FUZZ_ITERS");
  std::mt19937 rng(seed ? static_cast<unsigned>(std::atoi(seed)) : 77u);
  auto pick = [&](std::initializer_list<int64_t> v) {
    return *(v.begin() + static_cast<int64_t>(rng() % v.size()));
  };
  const DType dtypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::Int32,
                          DType::Int64};
  int failures = 0;
  for (int it = 0; it < (iters ? std::atoi(iters) : 12) && failures < 5; ++it) {
    const int64_t V = pick({1, 2, 3, 5, 15, 16, 17, 33, 48, 100, 200, 257, 1000, 1024, 1025, 2100});
    const int64_t K = pick({1, 1, 2, 3, 5});
    int64_t N = pick({129, 200, 256, 300, 600, 1000, 2100, 4000, 9000});
    if (V <= 3 && rng() % 2) N = pick({33000, 40000});  // rows split across threads
    const DType dtype = dtypes[rng() % 5];
    const int layout = static_cast<int>(rng() % 4);
    const double scale = is_floating(dtype) ? 2.0 : 20.0;
    Tensor x;
    std::vector<int64_t> dims = {1};
    int64_t d = 1;
    if (layout == 0) {
      x = (randn({K, N, V}) * scale).to(dtype);
    } else if (layout == 1) {
      x = (randn({N, K, V}) * scale).to(dtype);
      dims = {0};
      d = 0;
    } else if (layout == 2) {
      x = (randn({K + 1, N, V}) * scale).to(dtype);
      dims = {0, 1};
    } else {
      x = slice((randn({K, N, 2 * V}) * scale).to(dtype), 2, 0, std::nullopt, 2);
    }
    const std::string what = fmt::format("case {}: layout {}, K {}, N {}, V {}, {}", it, layout, K,
                                         N, V, dtype_name(dtype));
    auto f = [dims, d](const Tensor& x) {
      std::vector<Tensor> out = {sum(x, dims), amax(x, dims), argmax(x, d)};
      if (is_floating(x.dtype())) {
        out.push_back(mean(x, dims));
        out.push_back(var(x, dims, 1.0));
        out.push_back(prod(x * 0.001 + 1.0, d));
        out.push_back(sum(x * x - 1.0, dims));
      } else {
        out.push_back(any(x, dims));
        out.push_back(prod(x, d));
      }
      return out;
    };
    omp_set_num_threads(1);
    const std::vector<Tensor> one = f(x);
    if (layout == 0 && dtype == DType::Float32 && V > 1) {  // V == 1: an inner reduction
      const float* p = x.data_ptr<float>();
      std::vector<double> ref;
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < V; ++j) {
          r::ColumnOrder<r::Sum<float>> order(0);
          for (int64_t i = 0; i < N; ++i) order.step(p[(k * N + i) * V + j]);
          ref.push_back(order.result());
        }
      if (!bitwise_same(one[0], make(ref, {K, V}).to(DType::Float32))) {
        ADD_FAILURE() << what << ": eager != the ColumnOrder reference";
        ++failures;
      }
    }
    auto compiled = compile(f);
    const int64_t n_out = layout == 2 ? V : K * V, n_red = layout == 2 ? (K + 1) * N : N;
    for (int t : {1, 2, 3, 5, 8, 11, 16}) {
      omp_set_num_threads(t);
      const std::vector<Tensor> e = f(x), c = compiled(x);
      const bool split = r::row_splits(n_out, n_red, t) > 1;
      for (size_t k = 0; k < e.size(); ++k) {
        if (!split && !bitwise_same(e[k], one[k])) {
          ADD_FAILURE() << what << ": eager on " << t << " threads != on 1, output " << k;
          ++failures;
        }
        if (!bitwise_same(c[k], e[k])) {
          ADD_FAILURE() << what << ": compiled != eager on " << t << " threads, output " << k;
          ++failures;
        }
      }
    }
  }
  omp_set_num_threads(threads);
}

// Cascade::add_inits(k) (reduce_ops.h: after plain_extreme's one partial)
// leaves a Max / Min cascade as k adds of init() do: every level's count and
// partial, bit for bit (NaN payloads, signed zeros), over random sequences of
// value adds and runs of inits that carry partials up to the top level.
TEST(ReductionOrderCascade, AddInitsEqualsThatManyAddsOfInit) {
  std::mt19937 rng(7);
  auto check = [&](auto op) {
    using Op = decltype(op);
    using C = reduce::Cascade<Op>;
    const float vals[] = {1.5f,
                          -2.0f,
                          0.0f,
                          -0.0f,
                          std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(),
                          7.0f,
                          -7.0f};
    for (int trial = 0; trial < 60; ++trial) {
      C fast, slow;
      for (int step = 0; step < 40; ++step) {
        if (rng() % 3 == 0) {
          const uint32_t kind = rng() % 30, most = kind == 0 ? 1200000 : kind < 6 ? 70000 : 40;
          const int64_t k = static_cast<int64_t>(rng() % most);
          fast.add_inits(k);
          for (int64_t i = 0; i < k; ++i) slow.add(Op::init());
        } else {
          float v = vals[rng() % 8];
          if (std::isnan(v)) {  // a payload of its own
            uint32_t bits;
            std::memcpy(&bits, &v, 4);
            bits |= rng() % 1000;
            std::memcpy(&v, &bits, 4);
          }
          fast.add(v);
          slow.add(v);
        }
        for (int l = 0; l < reduce::kCascadeLevels; ++l) {
          ASSERT_EQ(fast.cnt[l], slow.cnt[l]) << "level " << l << ", trial " << trial;
          ASSERT_EQ(std::memcmp(&fast.lv[l], &slow.lv[l], sizeof(float)), 0)
              << "level " << l << ", trial " << trial;
        }
      }
    }
  };
  check(reduce::Max<float>{});
  check(reduce::Min<float>{});
}
