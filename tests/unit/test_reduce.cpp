// Reductions vs a float64 reference computed here: sum, mean, prod, amax,
// amin, max/min, argmax/argmin, var, std, var_mean, logsumexp, any, all,
// cumsum; plus the attrs recorded while tracing.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>

#include "backend/cpu/copy.h"
#include "backend/cpu/loops.h"
#include "core/storage.h"
#include "core/tensor_impl.h"
#include "kernels/reduce_ops.h"
#include "kernels/scalar_ops.h"
#include "ops/dispatch.h"
#include "smelt/ops.h"
#include "test_util.h"

using namespace smelt;
using smelt_test::kInf;
using smelt_test::kNaN;
using smelt_test::make_exact;
using smelt_test::OmpThreads;
using smelt_test::vals;

namespace {

/// Row-major values -> tensor of `dt` (via a float64 tensor and copy_convert).
Tensor make(const std::vector<double>& v, const Shape& shape, DType dt = DType::Float32) {
  Tensor d = detail::make_empty(shape, DType::Float64, Device());
  std::copy(v.begin(), v.end(), static_cast<double*>(d.data_ptr()));
  if (dt == DType::Float64) return d;
  Tensor t = detail::make_empty(shape, dt, Device());
  cpu::copy_convert(t, d);
  return t;
}

std::vector<double> randv(int64_t n, uint32_t seed, double lo = -2, double hi = 2) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(g);
  return v;
}

/// A permuted view of contiguous `t` (dims reordered by `perm`).
Tensor permuted(const Tensor& t, const std::vector<int64_t>& perm) {
  Shape s, st;
  for (int64_t p : perm) {
    s.push_back(t.sizes()[static_cast<size_t>(p)]);
    st.push_back(t.strides()[static_cast<size_t>(p)]);
  }
  return detail::make_view(t, s, st, t.storage_offset());
}

/// Reference reduction: f(values of the reduced dims, in row-major order).
struct Ref {
  Shape out_shape;
  std::vector<double> out;
};
Ref ref_reduce(const std::vector<double>& v, const Shape& shape, std::vector<int64_t> dims,
               bool keepdim, const std::function<double(const std::vector<double>&)>& f) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  if (dims.empty())
    for (int64_t d = 0; d < nd; ++d) dims.push_back(d);
  for (auto& d : dims) d = d < 0 ? d + nd : d;
  std::vector<bool> red(static_cast<size_t>(nd), false);
  for (auto d : dims) red[static_cast<size_t>(d)] = true;
  Shape kept_sizes, red_sizes;
  Ref r;
  for (int64_t d = 0; d < nd; ++d) {
    if (red[d]) {
      red_sizes.push_back(shape[d]);
      if (keepdim) r.out_shape.push_back(1);
    } else {
      kept_sizes.push_back(shape[d]);
      r.out_shape.push_back(shape[d]);
    }
  }
  Shape strides = detail::contiguous_strides(shape);
  int64_t n_out = detail::shape_numel(kept_sizes), n_red = detail::shape_numel(red_sizes);
  for (int64_t o = 0; o < n_out; ++o) {
    std::vector<double> vals;
    for (int64_t k = 0; k < n_red; ++k) {
      int64_t oo = o, kk = k, off = 0;
      for (int64_t d = nd - 1; d >= 0; --d) {
        int64_t i;
        if (red[d]) {
          i = kk % shape[d];
          kk /= shape[d];
        } else {
          i = oo % shape[d];
          oo /= shape[d];
        }
        off += i * strides[d];
      }
      vals.push_back(v[static_cast<size_t>(off)]);
    }
    r.out.push_back(f(vals));
  }
  return r;
}

double rsum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}
double rmean(const std::vector<double>& v) { return rsum(v) / static_cast<double>(v.size()); }
double rprod(const std::vector<double>& v) {
  double s = 1;
  for (double x : v) s *= x;
  return s;
}
double rmax(const std::vector<double>& v) {
  double m = -kInf;
  for (double x : v) {
    if (std::isnan(x)) return x;
    m = std::max(m, x);
  }
  return m;
}
double rmin(const std::vector<double>& v) {
  double m = kInf;
  for (double x : v) {
    if (std::isnan(x)) return x;
    m = std::min(m, x);
  }
  return m;
}
double rargmax(const std::vector<double>& v) {
  size_t best = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) return static_cast<double>(i);
    if (v[i] > v[best]) best = i;
  }
  return static_cast<double>(best);
}
double rargmin(const std::vector<double>& v) {
  size_t best = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) return static_cast<double>(i);
    if (v[i] < v[best]) best = i;
  }
  return static_cast<double>(best);
}
std::function<double(const std::vector<double>&)> rvar(double correction) {
  return [correction](const std::vector<double>& v) {
    double m = rmean(v), s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return s / std::max(0.0, static_cast<double>(v.size()) - correction);
  };
}
double rlse(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::exp(x);
  return std::log(s);
}

void expect_close(const Tensor& got, const Ref& want, double rtol, double atol,
                  const std::string& what) {
  ASSERT_EQ(got.sizes(), want.out_shape) << what;
  std::vector<double> g = vals(got);
  ASSERT_EQ(g.size(), want.out.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want.out[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << what << " at " << i << ": got " << g[i];
    } else if (std::isinf(want.out[i])) {
      EXPECT_EQ(g[i], want.out[i]) << what << " at " << i;
    } else {
      EXPECT_NEAR(g[i], want.out[i], atol + rtol * std::abs(want.out[i])) << what << " at " << i;
    }
  }
}

template <class F>
void expect_error(F&& f, const std::string& op) {
  try {
    f();
    ADD_FAILURE() << op << ": expected smelt::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
  }
}

const std::vector<std::vector<int64_t>> kDimSets = {{},   {0},    {1},    {2},
                                                    {-1}, {0, 2}, {2, 0}, {-2, 0}};

}  // namespace

TEST(Reduce, SumMeanProdVsReference) {
  const Shape shape = {5, 7, 3};
  auto v = randv(105, 1);
  auto pv = randv(105, 2, 0.5, 1.6);
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor x = make(v, shape, dt), px = make(pv, shape, dt);
    double rt = dt == DType::Float32 ? 1e-5 : 1e-12;
    for (auto& dims : kDimSets) {
      for (bool keep : {false, true}) {
        std::string what =
            "dims size " + std::to_string(dims.size()) + " keep " + std::to_string(keep);
        Tensor s = sum(x, dims, keep);
        EXPECT_EQ(s.dtype(), dt);
        expect_close(s, ref_reduce(v, shape, dims, keep, rsum), rt, rt, "sum " + what);
        expect_close(mean(x, dims, keep), ref_reduce(v, shape, dims, keep, rmean), rt, rt,
                     "mean " + what);
      }
    }
    for (int64_t d : {0, 1, 2, -1}) {
      for (bool keep : {false, true}) {
        expect_close(prod(px, d, keep), ref_reduce(pv, shape, {d}, keep, rprod), rt, rt, "prod");
      }
    }
    expect_close(prod(px), ref_reduce(pv, shape, {}, false, rprod), 1e-4, 0, "prod all");
  }
}

TEST(Reduce, AmaxAminArgVsReference) {
  const Shape shape = {5, 7, 3};
  std::vector<double> v(105);
  std::mt19937 g(3);
  for (auto& x : v) x = static_cast<double>(static_cast<int>(g() % 9)) - 4;  // many ties
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Float16,
                   DType::BFloat16, DType::Int8}) {
    Tensor x = make(v, shape, dt);
    for (auto& dims : kDimSets) {
      for (bool keep : {false, true}) {
        Tensor a = amax(x, dims, keep);
        EXPECT_EQ(a.dtype(), dt);
        expect_close(a, ref_reduce(v, shape, dims, keep, rmax), 0, 0, "amax");
        expect_close(amin(x, dims, keep), ref_reduce(v, shape, dims, keep, rmin), 0, 0, "amin");
      }
    }
    for (int64_t d : {0, 1, 2, -1, -3}) {
      for (bool keep : {false, true}) {
        auto [mv, mi] = max(x, d, keep);
        EXPECT_EQ(mv.dtype(), dt);
        EXPECT_EQ(mi.dtype(), DType::Int64);
        expect_close(mv, ref_reduce(v, shape, {d}, keep, rmax), 0, 0, "max values");
        expect_close(mi, ref_reduce(v, shape, {d}, keep, rargmax), 0, 0, "max indices");
        auto [nv, ni] = min(x, d, keep);
        expect_close(nv, ref_reduce(v, shape, {d}, keep, rmin), 0, 0, "min values");
        expect_close(ni, ref_reduce(v, shape, {d}, keep, rargmin), 0, 0, "min indices");
        expect_close(argmax(x, d, keep), ref_reduce(v, shape, {d}, keep, rargmax), 0, 0, "argmax");
        expect_close(argmin(x, d, keep), ref_reduce(v, shape, {d}, keep, rargmin), 0, 0, "argmin");
      }
    }
    Tensor am = argmax(x);
    EXPECT_EQ(am.dim(), 0);
    EXPECT_EQ(am.item<int64_t>(), static_cast<int64_t>(rargmax(v)));
    EXPECT_EQ(argmin(x).item<int64_t>(), static_cast<int64_t>(rargmin(v)));
    EXPECT_EQ(argmax(x, std::nullopt, true).sizes(), (Shape{1, 1, 1}));
    EXPECT_EQ(max(x).item<double>(), rmax(v));
    EXPECT_EQ(min(x).item<double>(), rmin(v));
  }
}

TEST(Reduce, VarStdVarMeanVsReference) {
  const Shape shape = {6, 9, 4};
  auto v = randv(216, 4);
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor x = make(v, shape, dt);
    double rt = dt == DType::Float32 ? 1e-5 : 1e-12;
    for (double c : {0.0, 1.0, 2.5}) {
      for (auto& dims : kDimSets) {
        for (bool keep : {false, true}) {
          auto want = ref_reduce(v, shape, dims, keep, rvar(c));
          expect_close(var(x, dims, c, keep), want, rt, rt, "var");
          for (auto& w : want.out) w = std::sqrt(w);
          expect_close(smelt::std(x, dims, c, keep), want, rt, rt, "std");
          auto [vv, mm] = var_mean(x, dims, c, keep);
          expect_close(vv, ref_reduce(v, shape, dims, keep, rvar(c)), rt, rt, "var_mean var");
          expect_close(mm, ref_reduce(v, shape, dims, keep, rmean), rt, rt, "var_mean mean");
        }
      }
    }
  }
  // Too few elements: 0/0 = NaN (one element, correction 1); m2/0 = inf.
  Tensor one = make({1, 2}, {2, 1});
  for (double r : vals(var(one, {1}))) EXPECT_TRUE(std::isnan(r));
  EXPECT_TRUE(std::isinf(var(make({1, 2}, {2}), {}, 2).item<double>()));
  // Catastrophic cancellation: values around 1e4 with a tiny spread.
  std::vector<double> lo(4096);
  std::mt19937 g(5);
  for (auto& x : lo) x = 10000.0 + (static_cast<double>(g() % 1000) / 1000.0 - 0.5) * 4e-3;
  Tensor xl = make(lo, {4096});
  std::vector<double> lo32 = vals(xl);
  double want = rvar(1)(lo32);
  EXPECT_NEAR(var(xl).item<double>(), want, 1e-3 * want);
}

// Welford's lanes (reduce::welford_lanes) take a lane's mean as its sum times
// 1 / count: float64 elements near the largest double overflow that sum
// where their mean is finite. Rows of 1e308 keep mean 1e308, variance 0 and
// layer_norm 0 (PyTorch's values); rows of 1e308 .. 1.4e308 keep a finite mean
// (their variance overflows, as it must); float32 rows of 3e38 (summed in
// double) likewise. Row lengths from one element per lane to many chunks.
TEST(Reduce, WelfordMeansOfElementsNearTheLargestValueStayFinite) {
  for (int64_t n : {16, 17, 64, 100, 1024, 4000}) {
    SCOPED_TRACE(n);
    for (auto [dt, big] :
         {std::pair<DType, double>{DType::Float64, 1e308}, {DType::Float32, 3e38}}) {
      Tensor x = full({3, n}, Scalar(big), TensorOptions(dt));
      auto [v, m] = var_mean(x, {1}, 1.0);
      for (double r : vals(v)) EXPECT_EQ(r, 0.0) << dtype_name(dt);
      for (double r : vals(m)) EXPECT_EQ(r, vals(x)[0]) << dtype_name(dt);
      for (double r : vals(var(x, {1}, 0.0))) EXPECT_EQ(r, 0.0) << dtype_name(dt);
      for (double r : vals(layer_norm(x, {n}))) EXPECT_EQ(r, 0.0) << dtype_name(dt);
    }
    std::vector<double> big(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) big[static_cast<size_t>(i)] = 1e308 * (1 + 0.1 * (i % 5));
    double want = 0;
    for (double a : big) want += a / static_cast<double>(n);
    auto [vb, mb] = var_mean(make(big, {1, n}, DType::Float64), {1}, 1.0);
    EXPECT_NEAR(mb.item<double>(), want, 1e-12 * want);
    EXPECT_EQ(vb.item<double>(), std::numeric_limits<double>::infinity());
  }
}

// float32 variances (var, std, var_mean, layer_norm) against float64 computed
// here from the same float32 values, on rows that break a naive sum of squares
// in float (1e4 + N(0, 1): E[x^2] - E[x]^2 loses every bit of the variance):
// reduce_ops.h folds float32 in float lanes as shifted sums, combined in
// double. Constant rows have variance and layer_norm exactly 0; rows whose
// squared deviations overflow or underflow float (1e20, 1e-30 scales) stay
// accurate too (those lanes fold in double). Row lengths from a few elements
// per lane to many chunks.
TEST(Reduce, Float32VarianceIsAccurateForHardRows) {
  using smelt_test::hard_variance_rows;
  for (int64_t n : {16, 17, 40, 100, 1000, 1024, 4099}) {
    for (const char* kind : {"offset", "far", "equal", "huge", "tiny"}) {
      SCOPED_TRACE(std::string(kind) + " n " + std::to_string(n));
      const int64_t rows = 5;
      Tensor x = hard_variance_rows(kind, rows, n);
      const std::vector<double> xv = vals(x);
      auto [v, m] = var_mean(x, {1}, 0.0);
      const std::vector<double> vv = vals(v), mv = vals(m), sv = vals(smelt::std(x, {1}, 1.0));
      const std::vector<double> ln = vals(layer_norm(x, {n}));
      for (int64_t r = 0; r < rows; ++r) {
        const double* xr = xv.data() + r * n;
        double mean = 0, m2 = 0;
        for (int64_t i = 0; i < n; ++i) mean += xr[i] / static_cast<double>(n);
        for (int64_t i = 0; i < n; ++i) m2 += (xr[i] - mean) * (xr[i] - mean);
        const double var0 = m2 / static_cast<double>(n);
        const double std1 = std::sqrt(m2 / static_cast<double>(n - 1));
        const size_t ri = static_cast<size_t>(r);
        if (std::string(kind) == "equal") {
          EXPECT_EQ(vv[ri], 0.0);
          EXPECT_EQ(sv[ri], 0.0);
          EXPECT_EQ(mv[ri], xr[0]);
          for (int64_t i = 0; i < n; ++i) ASSERT_EQ(ln[static_cast<size_t>(r * n + i)], 0.0);
          continue;
        }
        const double fvar = static_cast<float>(var0);  // the float32 result at best
        EXPECT_NEAR(vv[ri], fvar, 1e-4 * fvar);
        EXPECT_NEAR(sv[ri], static_cast<float>(std1), 1e-4 * std1);
        EXPECT_NEAR(mv[ri], mean, 1e-6 * std::abs(mean));
        if (std::string(kind) == "offset") {
          // (x - mean) / sqrt(var + eps), both rounded to float: about 1e-3 of N(0, 1).
          const double rstd = 1.0 / std::sqrt(var0 + 1e-5);
          for (int64_t i = 0; i < n; ++i)
            ASSERT_NEAR(ln[static_cast<size_t>(r * n + i)], (xr[i] - mean) * rstd, 2e-3) << i;
        }
      }
    }
  }
}

TEST(Reduce, AnyAll) {
  const Shape shape = {4, 5, 3};
  std::vector<double> v(60);
  std::mt19937 g(6);
  for (auto& x : v) x = (g() % 4 == 0) ? 0.0 : 1.5;
  auto rany = [](const std::vector<double>& a) {
    for (double x : a)
      if (x != 0) return 1.0;
    return 0.0;
  };
  auto rall = [](const std::vector<double>& a) {
    for (double x : a)
      if (x == 0) return 0.0;
    return 1.0;
  };
  for (DType dt : {DType::Bool, DType::Float32, DType::Int32, DType::UInt8, DType::Float16}) {
    Tensor x = make(v, shape, dt);
    DType want_dt = dt == DType::UInt8 ? DType::UInt8 : DType::Bool;
    for (auto& dims : kDimSets) {
      for (bool keep : {false, true}) {
        Tensor a = any(x, dims, keep);
        EXPECT_EQ(a.dtype(), want_dt);
        expect_close(a, ref_reduce(v, shape, dims, keep, rany), 0, 0, "any");
        expect_close(all(x, dims, keep), ref_reduce(v, shape, dims, keep, rall), 0, 0, "all");
      }
    }
  }
  // NaN is truthy.
  EXPECT_TRUE(all(make({kNaN, 1.0}, {2})).item<bool>());
  EXPECT_TRUE(any(make({0.0, kNaN}, {2})).item<bool>());
}

TEST(Reduce, NonContiguousInputs) {
  // Transposed 2-D, permuted 3-D and strided (every other element) views.
  Tensor base = make(randv(7 * 5, 7), {7, 5});
  auto v = vals(base);
  Tensor xt = permuted(base, {1, 0});  // [5, 7]
  std::vector<double> vt(35);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 7; ++j) vt[i * 7 + j] = v[j * 5 + i];
  for (auto& dims : std::vector<std::vector<int64_t>>{{}, {0}, {1}}) {
    expect_close(sum(xt, dims), ref_reduce(vt, {5, 7}, dims, false, rsum), 1e-5, 1e-5, "sum T");
    expect_close(amax(xt, dims), ref_reduce(vt, {5, 7}, dims, false, rmax), 0, 0, "amax T");
    expect_close(var(xt, dims), ref_reduce(vt, {5, 7}, dims, false, rvar(1)), 1e-5, 1e-5, "var T");
  }
  expect_close(argmax(xt, 1), ref_reduce(vt, {5, 7}, {1}, false, rargmax), 0, 0, "argmax T");
  expect_close(argmin(xt, 0), ref_reduce(vt, {5, 7}, {0}, false, rargmin), 0, 0, "argmin T");
  EXPECT_EQ(argmax(xt).item<int64_t>(), static_cast<int64_t>(rargmax(vt)));  // flat, row-major

  Tensor b3 = make(randv(4 * 6 * 5, 8), {4, 6, 5});
  auto v3 = vals(b3);
  Tensor p3 = permuted(b3, {2, 0, 1});  // [5, 4, 6]
  std::vector<double> vp(120);
  for (int a = 0; a < 5; ++a)
    for (int b = 0; b < 4; ++b)
      for (int c = 0; c < 6; ++c) vp[(a * 4 + b) * 6 + c] = v3[(b * 6 + c) * 5 + a];
  for (auto& dims : kDimSets) {
    expect_close(sum(p3, dims, true), ref_reduce(vp, {5, 4, 6}, dims, true, rsum), 1e-5, 1e-5,
                 "sum P");
    expect_close(amin(p3, dims), ref_reduce(vp, {5, 4, 6}, dims, false, rmin), 0, 0, "amin P");
  }
  EXPECT_EQ(argmin(p3).item<int64_t>(), static_cast<int64_t>(rargmin(vp)));

  // Every other column: sizes [7, 3], strides [5, 2].
  Tensor sl = detail::make_view(base, {7, 3}, {5, 2}, 0);
  std::vector<double> vs;
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 3; ++j) vs.push_back(v[i * 5 + j * 2]);
  for (auto& dims : std::vector<std::vector<int64_t>>{{}, {0}, {1}})
    expect_close(sum(sl, dims), ref_reduce(vs, {7, 3}, dims, false, rsum), 1e-5, 1e-5, "sum S");

  // Broadcast (stride 0) input.
  Tensor row = make({1, 2, 3}, {3});
  Tensor ex = detail::make_view(row, {4, 3}, {0, 1}, 0);
  EXPECT_EQ(vals(sum(ex, {0})), (std::vector<double>{4, 8, 12}));
  EXPECT_EQ(vals(argmax(ex, 0)), (std::vector<double>{0, 0, 0}));
}

TEST(Reduce, EmptyAndSizeOneDims) {
  Tensor e = make({}, {0, 4});
  EXPECT_EQ(vals(sum(e, {0})), std::vector<double>(4, 0.0));
  EXPECT_EQ(sum(e).item<double>(), 0.0);
  EXPECT_EQ(vals(prod(e, 0)), std::vector<double>(4, 1.0));
  EXPECT_EQ(prod(e).item<double>(), 1.0);
  for (double m : vals(mean(e, {0}))) EXPECT_TRUE(std::isnan(m));
  EXPECT_TRUE(std::isnan(mean(e).item<double>()));
  for (double m : vals(var(e, {0}))) EXPECT_TRUE(std::isnan(m));
  auto [ev, em] = var_mean(e, {0});
  for (double m : vals(em)) EXPECT_TRUE(std::isnan(m));
  EXPECT_EQ(sum(e, {1}).sizes(), (Shape{0}));
  EXPECT_EQ(amax(e, {1}).sizes(), (Shape{0}));  // reducing a non-empty dim of an empty tensor
  EXPECT_EQ(argmax(e, 1).sizes(), (Shape{0}));
  EXPECT_EQ(vals(any(e, {0})), std::vector<double>(4, 0.0));
  EXPECT_EQ(vals(all(e, {0})), std::vector<double>(4, 1.0));
  EXPECT_FALSE(any(e).item<bool>());
  EXPECT_TRUE(all(e).item<bool>());
  EXPECT_EQ(sum(make({}, {0, 4}, DType::Int32)).dtype(), DType::Int64);

  Tensor s1 = make(randv(12, 9), {3, 1, 4});
  EXPECT_EQ(vals(sum(s1, {1})), vals(s1));
  EXPECT_EQ(sum(s1, {1}).sizes(), (Shape{3, 4}));
  EXPECT_EQ(vals(argmax(s1, 1)), std::vector<double>(12, 0.0));
  // 0-dim input: dim 0 / -1 allowed, the result is 0-dim.
  Tensor z = make({2.5}, {});
  EXPECT_EQ(sum(z).item<double>(), 2.5);
  EXPECT_EQ(sum(z, {0}).dim(), 0);
  EXPECT_EQ(amax(z, {-1}).item<double>(), 2.5);
  EXPECT_EQ(argmax(z).item<int64_t>(), 0);
  auto [zv, zi] = max(z, 0);
  EXPECT_EQ(zv.item<double>(), 2.5);
  EXPECT_EQ(zi.item<int64_t>(), 0);
  EXPECT_EQ(vals(cumsum(z, 0)), (std::vector<double>{2.5}));
}

TEST(Reduce, NaNPropagation) {
  Tensor x = make({1, kNaN, 5, kNaN}, {4});
  EXPECT_TRUE(std::isnan(amax(x).item<double>()));
  EXPECT_TRUE(std::isnan(amin(x).item<double>()));
  EXPECT_TRUE(std::isnan(max(x).item<double>()));
  EXPECT_EQ(argmax(x).item<int64_t>(), 1);  // the first NaN wins
  EXPECT_EQ(argmin(x).item<int64_t>(), 1);
  auto [mv, mi] = max(x, 0);
  EXPECT_TRUE(std::isnan(mv.item<double>()));
  EXPECT_EQ(mi.item<int64_t>(), 1);
  EXPECT_TRUE(std::isnan(sum(x).item<double>()));
  // A NaN late in a long row (lanes, chunks and splits must keep it), float16 too.
  for (DType dt : {DType::Float32, DType::Float16}) {
    std::vector<double> v(100000, 1.0);
    v[77777] = kNaN;
    v[88888] = kNaN;
    Tensor big = make(v, {100000}, dt);
    EXPECT_TRUE(std::isnan(amax(big).item<double>()));
    EXPECT_TRUE(std::isnan(amin(big).item<double>()));
    EXPECT_EQ(argmax(big).item<int64_t>(), 77777);
    EXPECT_EQ(argmin(big).item<int64_t>(), 77777);
  }
  // -0.0: all negative zeros give -0.0.
  Tensor nz = make(std::vector<double>(8193, -0.0), {8193});
  EXPECT_TRUE(std::signbit(amax(nz).item<double>()));
  // Infinities.
  EXPECT_EQ(amax(make({-kInf, -kInf}, {2})).item<double>(), -kInf);
  EXPECT_EQ(argmax(make({-kInf, -kInf}, {2})).item<int64_t>(), 0);
  EXPECT_EQ(amin(make({kInf, 3}, {2})).item<double>(), 3);
}

/// argmax / argmin / max(dim) / min(dim) over contiguous float32 rows of every
/// length from 1 to 70 (whole 16-lane blocks and tails), each row drawn
/// from few values so that ties are common, with signed zeros, infinities
/// and NaNs at random places: indices against rargmax / rargmin, values the
/// element at that index (the first of tied +0 / -0, a NaN's payload kept).
TEST(Reduce, ArgExtremesOfContiguousRowsEveryLength) {
  std::mt19937 gen(7);
  const std::vector<double> pool = {-0.0, 0.0, 1.5, -1.5, 3.0, kInf, -kInf};
  for (int64_t n = 1; n <= 70; ++n) {
    for (int trial = 0; trial < 6; ++trial) {
      const int64_t rows = 3;
      std::vector<double> v(static_cast<size_t>(rows * n));
      for (double& x : v) x = pool[gen() % pool.size()];
      if (trial >= 3) v[gen() % v.size()] = kNaN;  // some row has a NaN
      if (trial == 5) v[gen() % v.size()] = kNaN;
      Tensor x = make(v, {rows, n});
      const std::vector<double> am = vals(argmax(x, 1)), an = vals(argmin(x, 1));
      auto [maxv, maxi] = max(x, 1);
      auto [minv, mini] = min(x, 1);
      const std::vector<double> mv = vals(maxv), mvi = vals(maxi), nv = vals(minv),
                                nvi = vals(mini);
      for (int64_t r = 0; r < rows; ++r) {
        const std::vector<double> row(v.begin() + r * n, v.begin() + (r + 1) * n);
        const double ia = rargmax(row), in = rargmin(row);
        SCOPED_TRACE("n " + std::to_string(n) + " trial " + std::to_string(trial) + " row " +
                     std::to_string(r));
        EXPECT_EQ(am[r], ia);
        EXPECT_EQ(an[r], in);
        EXPECT_EQ(mvi[r], ia);
        EXPECT_EQ(nvi[r], in);
        const double want_max = row[static_cast<size_t>(ia)],
                     want_min = row[static_cast<size_t>(in)];
        EXPECT_TRUE(std::isnan(want_max) ? std::isnan(mv[r]) : mv[r] == want_max);
        EXPECT_EQ(std::signbit(mv[r]), std::signbit(want_max));
        EXPECT_TRUE(std::isnan(want_min) ? std::isnan(nv[r]) : nv[r] == want_min);
        EXPECT_EQ(std::signbit(nv[r]), std::signbit(want_min));
      }
    }
  }
}

/// amax / amin over contiguous rows of whole chunks (plain_extreme's one pass,
/// no cascade) give the bits of the same rows read with a stride (InnerOrder's
/// element-wise fold): random rows, a NaN, all -inf / +inf, and extremes that
/// are zeros (plain_extreme declines them: +0 / -0 ties are the order's), in
/// float32 and float64.
TEST(Reduce, ExtremesOfWholeChunkRowsGiveTheBitsOfAStridedRead) {
  std::mt19937 gen(11);
  std::normal_distribution<double> normal;
  const auto bits = [](double v) {
    uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
  };
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (int64_t n : {128, 256, 1024}) {
      const int64_t rows = 8;
      std::vector<double> v(static_cast<size_t>(rows * n));
      for (double& x : v) x = normal(gen);
      double* row = v.data();
      row[1 * n + 77] = kNaN;                                  // row 1: a NaN
      for (int64_t k = 0; k < n; ++k) row[2 * n + k] = -kInf;  // row 2: all -inf
      for (int64_t k = 0; k < n; ++k) row[3 * n + k] = kInf;   // row 3: all +inf
      for (int64_t k = 0; k < n; ++k) row[4 * n + k] = -std::abs(row[4 * n + k]);
      row[4 * n + 5] = 0.0;  // row 4: max is a zero, -0.0 elsewhere too
      row[4 * n + 9] = -0.0;
      for (int64_t k = 0; k < n; ++k) row[5 * n + k] = k % 2 ? 0.0 : -0.0;  // row 5: zeros
      for (int64_t k = 0; k < n; ++k) row[6 * n + k] = std::abs(row[6 * n + k]);
      row[6 * n + n - 1] = -0.0;  // row 6: min is a zero
      Tensor x = make(v, {rows, n}, dt);
      // The same values with the reduced dim strided: x^T stored, viewed back.
      Tensor strided = transpose(contiguous(transpose(x, 0, 1)), 0, 1);
      ASSERT_FALSE(strided.is_contiguous());
      for (bool is_max : {true, false}) {
        const std::vector<double> got = vals(is_max ? amax(x, {1}) : amin(x, {1}));
        const std::vector<double> want = vals(is_max ? amax(strided, {1}) : amin(strided, {1}));
        for (int64_t r = 0; r < rows; ++r) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " n " + std::to_string(n) + " row " +
                       std::to_string(r) + (is_max ? " amax" : " amin"));
          if (std::isnan(want[r])) {
            EXPECT_TRUE(std::isnan(got[r]));
          } else if (want[r] == 0) {
            // A tie of +0 and -0: which comes out depends on the fold's
            // order, and the two reads fold in different orders.
            EXPECT_EQ(got[r], 0.0);
          } else {
            EXPECT_EQ(bits(got[r]), bits(want[r]));
          }
        }
        EXPECT_TRUE(std::isnan(got[1]));
        EXPECT_EQ(got[2], -kInf);  // all -inf: amax and amin alike
        EXPECT_EQ(got[3], kInf);
      }
    }
  }
}

TEST(Reduce, ShortContiguousRowsFoldAsInnerOrderDefinesThem) {
  // Rows shorter than InnerOrder's lanes, shorter than a chunk and a few
  // chunks long, contiguous: eager's folds (short rows stepped in a loop of
  // their own, lanes and their tree on vectors, a row's extreme in one pass,
  // Welford's float lanes, layer_norm's row statistics) against
  // reduce::InnerOrder over the same elements
  // through a plain getter in this file (its element-by-element definition),
  // bit for bit: NaN, signed zeros and infinities included.
  std::mt19937 gen(23);
  std::normal_distribution<float> normal;
  for (int64_t n : {1, 3, 4, 15, 16, 24, 63, 64, 72, 100, 192, 320, 640}) {
    const int64_t rows = 6;
    std::vector<float> v(static_cast<size_t>(rows * n));
    for (float& e : v) e = normal(gen);
    float* r = v.data();
    r[1 * n + 3 % n] = std::numeric_limits<float>::quiet_NaN();  // row 1: a NaN
    for (int64_t k = 0; k < n; ++k) r[2 * n + k] = -std::abs(r[2 * n + k]);
    r[2 * n + n / 2] = 0.0f;  // row 2: the max is +0 among -0s
    r[2 * n + (n / 2 + 1) % n] = -0.0f;
    r[3 * n] = kInf;  // row 3: both infinities
    r[3 * n + n - 1] = -kInf;
    for (int64_t k = 0; k < n; ++k) r[4 * n + k] += 1e4f;   // row 4: a large mean
    for (int64_t k = 0; k < n; ++k) r[5 * n + k] = 0.375f;  // row 5: all equal
    std::vector<double> vd(v.begin(), v.end());
    Tensor x = make(vd, {rows, n}, DType::Float32);
    const std::vector<double> s = vals(sum(x, {1})), mx = vals(amax(x, {1})),
                              mn = vals(amin(x, {1})), vr = vals(var(x, {1}, 1.0)),
                              pr = vals(prod(x, 1)), am = vals(argmax(x, 1)),
                              ln = vals(layer_norm(x, {n}, std::nullopt, std::nullopt, 1e-5));
    for (int64_t q = 0; q < rows; ++q) {
      SCOPED_TRACE("n " + std::to_string(n) + " row " + std::to_string(q));
      const float* row = r + q * n;
      const auto get = [row](int64_t k) { return row[k]; };
      auto fold = [&](auto op) {
        reduce::InnerOrder<decltype(op)> order(0);
        order.template run<true>(0, n, get);
        return order.result();
      };
      const auto same = [](double got, double want) {
        return std::isnan(want) ? std::isnan(got)
                                : std::signbit(got) == std::signbit(want) && got == want;
      };
      EXPECT_PRED2(same, s[q], fold(reduce::Sum<float>{}));
      EXPECT_PRED2(same, mx[q], fold(reduce::Max<float>{}));
      EXPECT_PRED2(same, mn[q], fold(reduce::Min<float>{}));
      EXPECT_PRED2(same, pr[q], fold(reduce::Prod<float>{}));
      EXPECT_EQ(am[q], static_cast<double>(fold(reduce::ArgMax<float>{}).index));
      EXPECT_PRED2(
          same, vr[q],
          static_cast<float>(reduce::Welford<double>::var(fold(reduce::Welford<double>{}), 1.0)));
      // layer_norm's statistics fold the row as var_mean does (its fused
      // kernel takes them through fold_contiguous_row).
      const auto w = fold(reduce::Welford<double>{});
      const float mean = static_cast<float>(reduce::Welford<double>::mean(w));
      const float rstd = scalar::rsqrt<float>(scalar::add<float>(
          static_cast<float>(reduce::Welford<double>::var(w, 0.0)), static_cast<float>(1e-5)));
      for (int64_t k = 0; k < n; ++k)
        ASSERT_PRED2(same, ln[static_cast<size_t>(q * n + k)],
                     scalar::mul<float>(scalar::sub<float>(row[k], mean), rstd))
            << "layer_norm element " << k;
    }
  }
}

/// Reductions over the outer and inner dims of [a, b, n] (each output a row
/// of `a` runs of n contiguous elements: runs that tile InnerOrder's chunks go
/// four at a time through fold_runs, the rest run by run) against
/// reduce::InnerOrder over the same elements through a plain getter, bit for
/// bit: float32 and float64, runs of 16 to 128 (and 24, 40, which do not tile
/// a chunk), rows from one run to a cascade of chunks, with a NaN (in the
/// last run, in the first), signed zeros and both infinities in some outputs.
/// Rows long enough are cut into stretches across 4 threads (row_splits);
/// a = 601 makes the stretches begin inside runs. The reference folds each
/// stretch from its first element and combines them in order, as eager does.
TEST(Reduce, OuterAndInnerDimsFoldAsInnerOrderDefinesThem) {
  std::mt19937 gen(29);
  std::normal_distribution<double> normal;
  const auto same = [](double got, double want) {
    return std::isnan(want) ? std::isnan(got)
                            : std::signbit(got) == std::signbit(want) && got == want;
  };
  for (int threads : {1, 4}) {
    const OmpThreads scope(threads);
    for (DType dt : {DType::Float32, DType::Float64}) {
      for (int64_t n : {16, 24, 32, 40, 64, 128}) {
        for (int64_t a : {1, 3, 4, 5, 9, 70, 600, 601}) {
          if (a >= 600 && n != 64) continue;  // 600 runs of 64: 38,400 elements
          const int64_t b = 5;
          std::vector<double> v(static_cast<size_t>(a * b * n));
          for (double& e : v)
            e = dt == DType::Float32 ? static_cast<float>(normal(gen)) : normal(gen);
          const auto at = [&](int64_t i, int64_t j, int64_t k) -> double& {
            return v[static_cast<size_t>((i * b + j) * n + k)];
          };
          at(a - 1, 1, n / 2) = kNaN;  // output 1: a NaN in its last run
          for (int64_t i = 0; i < a; ++i)
            for (int64_t k = 0; k < n; ++k) at(i, 2, k) = -std::abs(at(i, 2, k));
          at(a / 2, 2, 3) = 0.0;  // output 2: the max is +0 among -0s
          at(0, 2, 5) = -0.0;
          at(0, 3, 0) = kInf;  // output 3: both infinities
          at(a - 1, 3, n - 1) = -kInf;
          at(0, 4, 1) = kNaN;  // output 4: a NaN in its first run
          Tensor x = make(v, {a, b, n}, dt);
          const std::vector<double> s = vals(sum(x, {0, 2})), mx = vals(amax(x, {0, 2})),
                                    mn = vals(amin(x, {0, 2}));
          const int64_t splits = reduce::row_splits(b, a * n, omp_get_max_threads());
          if (a >= 600 && threads == 4) {
            EXPECT_EQ(splits, 4);  // the stretches are tested
          }
          for (int64_t j = 0; j < b; ++j) {
            SCOPED_TRACE(std::string(dtype_name(dt)) + " a " + std::to_string(a) + " n " +
                         std::to_string(n) + " output " + std::to_string(j) + " threads " +
                         std::to_string(threads));
            auto fold = [&](auto op) {
              using Op = decltype(op);
              using A = typename Op::value_t;
              const auto get = [&](int64_t r) { return static_cast<A>(at(r / n, j, r % n)); };
              typename Op::acc_t acc{};
              for (int64_t c = 0; c < splits; ++c) {
                const int64_t r0 = reduce::stretch_begin(c, splits, a * n),
                              r1 = reduce::stretch_begin(c + 1, splits, a * n);
                reduce::InnerOrder<Op> order(r0);
                order.template stretch<true>(r0, r1, n, get);
                acc = c == 0 ? order.result() : Op::combine(acc, order.result());
              }
              return static_cast<double>(acc);
            };
            if (dt == DType::Float32) {
              EXPECT_PRED2(same, s[j], fold(reduce::Sum<float>{}));
              EXPECT_PRED2(same, mx[j], fold(reduce::Max<float>{}));
              EXPECT_PRED2(same, mn[j], fold(reduce::Min<float>{}));
            } else {
              EXPECT_PRED2(same, s[j], fold(reduce::Sum<double>{}));
              EXPECT_PRED2(same, mx[j], fold(reduce::Max<double>{}));
              EXPECT_PRED2(same, mn[j], fold(reduce::Min<double>{}));
            }
          }
          EXPECT_TRUE(std::isnan(s[1]));
          EXPECT_TRUE(std::isnan(mx[4]));
          EXPECT_EQ(mx[3], kInf);
          EXPECT_EQ(mn[3], -kInf);
        }
      }
    }
  }
}

TEST(Reduce, IntegerExtremes) {
  const int32_t imax = std::numeric_limits<int32_t>::max();
  Tensor a = make_exact<int32_t>({imax, imax, imax, 1}, {4});
  Tensor s = sum(a);
  EXPECT_EQ(s.dtype(), DType::Int64);
  EXPECT_EQ(s.item<int64_t>(), 3LL * imax + 1);
  const int64_t lmax = std::numeric_limits<int64_t>::max(),
                lmin = std::numeric_limits<int64_t>::min();
  Tensor b = make_exact<int64_t>({lmax, 1}, {2});
  EXPECT_EQ(sum(b).item<int64_t>(), lmin);  // wraps around, as PyTorch
  EXPECT_EQ(prod(make_exact<int64_t>({lmax, 2}, {2})).item<int64_t>(), -2);
  Tensor c = make_exact<int64_t>({lmax - 1, lmin, lmax, lmin + 1}, {4});
  EXPECT_EQ(amax(c).item<int64_t>(), lmax);  // exact, not through double
  EXPECT_EQ(amin(c).item<int64_t>(), lmin);
  EXPECT_EQ(argmax(c).item<int64_t>(), 2);
  EXPECT_EQ(argmin(c).item<int64_t>(), 1);
  Tensor u = make_exact<uint8_t>({200, 100, 0}, {3});
  EXPECT_EQ(sum(u).item<int64_t>(), 300);
  EXPECT_EQ(amax(u).item<int64_t>(), 200);
  EXPECT_EQ(any(u).dtype(), DType::UInt8);
  EXPECT_EQ(all(u).item<int64_t>(), 0);
  Tensor bo = make_exact<bool>({true, true, false}, {3});
  EXPECT_EQ(sum(bo).dtype(), DType::Int64);
  EXPECT_EQ(sum(bo).item<int64_t>(), 2);
  EXPECT_EQ(prod(bo).dtype(), DType::Int64);
  EXPECT_EQ(amax(bo).item<bool>(), true);
  auto [bv, bi] = min(bo, 0);
  EXPECT_EQ(bv.item<bool>(), false);
  EXPECT_EQ(bi.item<int64_t>(), 2);
  Tensor i8 = make_exact<int8_t>({-128, 127, -1}, {3});
  EXPECT_EQ(sum(i8).item<int64_t>(), -2);
  EXPECT_EQ(prod(i8).item<int64_t>(), 128 * 127);
}

TEST(Reduce, HalfAccumulatesInFloat) {
  // 20000 x 0.1 in float16: a float16 accumulator would stall at 256.
  Tensor h = make(std::vector<double>(20000, 0.1), {20000}, DType::Float16);
  Tensor s = sum(h);
  EXPECT_EQ(s.dtype(), DType::Float16);
  double want = 20000 * static_cast<double>(static_cast<float>(Half(0.1f)));
  EXPECT_NEAR(s.item<double>(), want, 2.0);  // float16 spacing at 2000 is 2
  EXPECT_NEAR(mean(h).item<double>(), 0.1, 1e-3);
  // bfloat16: 3 x 5000 ones sum to 5000 exactly in float, rounded to 4992.
  Tensor bf = make(std::vector<double>(15000, 1.0), {3, 5000}, DType::BFloat16);
  Tensor bs = sum(bf, {1});
  EXPECT_EQ(bs.dtype(), DType::BFloat16);
  EXPECT_EQ(vals(bs), (std::vector<double>{4992, 4992, 4992}));
  // float16 overflow: the float sum exceeds 65504 -> inf after rounding.
  Tensor ov = make(std::vector<double>(724, 100.0), {724}, DType::Float16);
  EXPECT_TRUE(std::isinf(sum(ov).item<double>()));
  // var / std / mean of float16 rows.
  auto v = randv(6 * 9, 10);
  Tensor x16 = make(v, {6, 9}, DType::Float16);
  std::vector<double> v16 = vals(x16);
  auto [vv, mm] = var_mean(x16, {1}, 0);
  EXPECT_EQ(vv.dtype(), DType::Float16);
  expect_close(vv, ref_reduce(v16, {6, 9}, {1}, false, rvar(0)), 1e-3, 1e-3, "var f16");
  expect_close(mm, ref_reduce(v16, {6, 9}, {1}, false, rmean), 1e-3, 1e-3, "mean f16");
  expect_close(prod(x16, 0), ref_reduce(v16, {6, 9}, {0}, false, rprod), 2e-3, 1e-3, "prod f16");
  auto [hv, hi] = max(x16, 1);
  EXPECT_EQ(hv.dtype(), DType::Float16);
  expect_close(hi, ref_reduce(v16, {6, 9}, {1}, false, rargmax), 0, 0, "max f16 idx");
}

TEST(Reduce, LargeAndParallel) {
  // Full reduction of a big tensor (split into partials when threads exist).
  const int64_t n = 1 << 20;
  auto v = randv(n, 11, 0, 1);
  Tensor x = make(v, {n});
  EXPECT_NEAR(sum(x).item<double>(), rsum(vals(x)), 1e-6 * n * 0.5);
  std::vector<double> ones(static_cast<size_t>(n), 0.1);
  Tensor o = make(ones, {n});
  double want = static_cast<double>(static_cast<float>(0.1)) * n;
  EXPECT_NEAR(sum(o).item<double>(), want, want * 1e-6);  // cascade: no linear error growth
  EXPECT_NEAR(mean(o).item<double>(), 0.1, 1e-7);
  Tensor vx = make(v, {n}, DType::Float64);
  EXPECT_NEAR(var(vx).item<double>(), rvar(1)(v), 1e-12);
  EXPECT_EQ(argmax(vx).item<int64_t>(), static_cast<int64_t>(rargmax(v)));

  // Outer schedule: reduce dim 0 of a row-major matrix (blocks of outputs),
  // more than one block, and a long reduced dim with few outputs.
  const Shape s1 = {3000, 70};
  auto w = randv(3000 * 70, 12);
  Tensor m = make(w, s1, DType::Float64);
  expect_close(sum(m, {0}), ref_reduce(w, s1, {0}, false, rsum), 1e-12, 1e-12, "sum d0");
  expect_close(argmax(m, 0), ref_reduce(w, s1, {0}, false, rargmax), 0, 0, "argmax d0");
  expect_close(amin(m, {0}), ref_reduce(w, s1, {0}, false, rmin), 0, 0, "amin d0");
  expect_close(var(m, {0}), ref_reduce(w, s1, {0}, false, rvar(1)), 1e-12, 1e-12, "var d0");
  expect_close(sum(m, {1}), ref_reduce(w, s1, {1}, false, rsum), 1e-12, 1e-12, "sum d1");
  const Shape s2 = {40000, 2};
  auto w2 = randv(80000, 13);
  Tensor m2 = make(w2, s2, DType::Float64);
  expect_close(sum(m2, {0}), ref_reduce(w2, s2, {0}, false, rsum), 1e-12, 1e-10, "sum tall");
  expect_close(argmin(m2, 0), ref_reduce(w2, s2, {0}, false, rargmin), 0, 0, "argmin tall");
  // Many outputs, short reductions.
  const Shape s3 = {20000, 3};
  auto w3 = randv(60000, 14);
  Tensor m3 = make(w3, s3, DType::Float64);
  expect_close(sum(m3, {1}), ref_reduce(w3, s3, {1}, false, rsum), 1e-12, 1e-12, "sum wide");
  expect_close(argmax(m3, 1), ref_reduce(w3, s3, {1}, false, rargmax), 0, 0, "argmax wide");
}

TEST(Reduce, DTypeArgument) {
  Tensor i = make_exact<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor s = sum(i, {}, false, DType::Float64);
  EXPECT_EQ(s.dtype(), DType::Float64);
  EXPECT_EQ(s.item<double>(), 21.0);
  Tensor m = mean(i, {1}, false, DType::Float32);
  EXPECT_EQ(m.dtype(), DType::Float32);
  EXPECT_EQ(vals(m), (std::vector<double>{2, 5}));
  Tensor p = prod(i, 1, true, DType::Float32);
  EXPECT_EQ(p.sizes(), (Shape{2, 1}));
  EXPECT_EQ(vals(p), (std::vector<double>{6, 120}));
  Tensor f = make({1.7, 2.9}, {2});
  EXPECT_EQ(sum(f, {}, false, DType::Int64).item<int64_t>(), 3);  // converted first, as PyTorch
  Tensor f16 = sum(f, {}, false, DType::Float16);
  EXPECT_EQ(f16.dtype(), DType::Float16);
  EXPECT_NEAR(f16.item<double>(), 4.6, 4e-3);
  EXPECT_EQ(sum(i, {}, false, DType::Int32).dtype(), DType::Int32);
  EXPECT_EQ(cumsum(i, 1, DType::Float64).dtype(), DType::Float64);
}

TEST(Reduce, Cumsum) {
  auto v = randv(24, 15);
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16}) {
    Tensor x = make(v, {4, 6}, dt);
    std::vector<double> xv = vals(x);
    for (int64_t d : {0, 1, -1}) {
      Tensor c = cumsum(x, d);
      EXPECT_EQ(c.dtype(), dt);
      EXPECT_EQ(c.sizes(), (Shape{4, 6}));
      std::vector<double> got = vals(c);
      int64_t dd = d < 0 ? d + 2 : d;
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 6; ++j) {
          double s = 0;
          for (int k = 0; k <= (dd == 0 ? i : j); ++k) s += dd == 0 ? xv[k * 6 + j] : xv[i * 6 + k];
          double tol = dt == DType::Float16 ? 1e-2 : 1e-5;
          EXPECT_NEAR(got[i * 6 + j], s, tol * (1 + std::abs(s)));
        }
    }
  }
  Tensor b = make_exact<bool>({true, false, true, true}, {4});
  Tensor cb = cumsum(b, 0);
  EXPECT_EQ(cb.dtype(), DType::Int64);
  EXPECT_EQ(vals(cb), (std::vector<double>{1, 1, 2, 3}));
  Tensor i = make_exact<int32_t>({2147483647, 1, 5}, {3});
  Tensor ci = cumsum(i, 0);
  EXPECT_EQ(ci.dtype(), DType::Int64);
  EXPECT_EQ(ci.to_vector<int64_t>(),
            (std::vector<int64_t>{2147483647, 2147483648LL, 2147483653LL}));
  // Transposed input.
  Tensor base = make({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor t = permuted(base, {1, 0});  // [[1, 4], [2, 5], [3, 6]]
  EXPECT_EQ(vals(cumsum(t, 0)), (std::vector<double>{1, 4, 3, 9, 6, 15}));
  EXPECT_EQ(vals(cumsum(t, 1)), (std::vector<double>{1, 5, 2, 7, 3, 9}));
  EXPECT_EQ(cumsum(make({}, {0, 3}), 0).sizes(), (Shape{0, 3}));
}

/// cumsum of contiguous tensors along every dim (lines side by side along an
/// outer dim, lines in groups along the last): each line folded in index
/// order in the scan's accumulate type (float32 in double), rounded after
/// every step, exactly; lines enough to split across threads and groups with
/// a remainder; int8 into int64.
TEST(Reduce, CumsumOfEveryDimFoldsEachLineInOrder) {
  const Shape shape{3, 37, 300};
  const int64_t n = 3 * 37 * 300;
  std::mt19937 gen(5);
  std::normal_distribution<double> normal;
  std::vector<double> v(static_cast<size_t>(n));
  for (double& e : v) e = normal(gen) * 1e3;
  Tensor x = make(v, shape, DType::Float32);
  const std::vector<double> xv = vals(x);  // the float32 values
  std::vector<double> iv(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) iv[static_cast<size_t>(k)] = static_cast<double>(k % 251) - 125;
  Tensor x8 = to_dtype(make(iv, shape, DType::Float64), DType::Int8);
  const int64_t st[3] = {37 * 300, 300, 1};
  for (int64_t dim : {0, 1, 2}) {
    const std::vector<double> got = vals(cumsum(x, dim));
    const std::vector<int64_t> got8 = cumsum(x8, dim).to_vector<int64_t>();
    size_t bad = 0, bad8 = 0;
    for (int64_t a = 0; a < 3; ++a)
      for (int64_t b = 0; b < 37; ++b)
        for (int64_t c = 0; c < 300; ++c) {
          const int64_t idx[3] = {a, b, c};
          if (idx[dim] != 0) continue;  // one line per start
          double acc = 0;
          int64_t acc8 = 0;
          const int64_t base = a * st[0] + b * st[1] + c;
          for (int64_t k = 0; k < shape[static_cast<size_t>(dim)]; ++k) {
            const size_t at = static_cast<size_t>(base + k * st[dim]);
            acc += xv[at];
            acc8 += static_cast<int64_t>(iv[at]);
            bad += got[at] != static_cast<double>(static_cast<float>(acc));
            bad8 += got8[at] != acc8;
          }
        }
    EXPECT_EQ(bad, 0u) << "dim " << dim;
    EXPECT_EQ(bad8, 0u) << "int8, dim " << dim;
  }
}

/// Sums over dim 0 of few columns (chunks of the column folded side by side
/// where there are at most 8 columns and four whole chunks) give ColumnOrder's
/// bits: each column's elements stepped in order, 128 a partial, the
/// partials through the cascade. One thread (one stretch per column).
TEST(Reduce, NarrowColumnSumsGiveColumnOrdersBits) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  std::mt19937 gen(9);
  std::normal_distribution<double> normal;
  for (int64_t cols : {2, 3, 4, 8, 9}) {  // (one column is a contiguous row: InnerOrder)
    for (int64_t rows : {127, 128, 511, 512, 513, 1000, 4173, 70001}) {
      std::vector<double> v(static_cast<size_t>(rows * cols));
      for (double& e : v) e = normal(gen) * std::exp(normal(gen) * 4);
      Tensor x = make(v, {rows, cols}, DType::Float32);
      const std::vector<double> xv = vals(x);
      const std::vector<double> got = vals(sum(x, {0}));
      for (int64_t j = 0; j < cols; ++j) {
        reduce::ColumnOrder<reduce::Sum<float>> order;
        for (int64_t r = 0; r < rows; ++r)
          order.step(static_cast<float>(xv[static_cast<size_t>(r * cols + j)]));
        const float want = order.result();
        EXPECT_EQ(static_cast<float>(got[static_cast<size_t>(j)]), want)
            << rows << " x " << cols << " column " << j;
      }
    }
  }
  omp_set_num_threads(threads);
}

TEST(Reduce, Errors) {
  Tensor x = make(randv(12, 16), {3, 4});
  expect_error([&] { sum(x, {2}); }, "sum");
  expect_error([&] { sum(x, {-3}); }, "sum");
  expect_error([&] { sum(x, {1, -1}); }, "sum");  // duplicate dim
  expect_error([&] { mean(x, {0, 0}); }, "mean");
  expect_error([&] { prod(x, 2); }, "prod");
  expect_error([&] { amax(x, {5}); }, "amax");
  expect_error([&] { max(x, 2); }, "max");
  expect_error([&] { argmax(x, -3); }, "argmax");
  expect_error([&] { var(x, {3}); }, "var");
  expect_error([&] { cumsum(x, 2); }, "cumsum");
  expect_error([&] { any(x, {2}); }, "any");
  expect_error([&] { logsumexp(x, {2}); }, "logsumexp");
  Tensor e = make({}, {0, 4});
  expect_error([&] { amax(e, {0}); }, "amax");
  expect_error([&] { amin(e); }, "amin");
  expect_error([&] { max(e, 0); }, "max");
  expect_error([&] { min(e, 0); }, "min");
  expect_error([&] { max(make({}, {0})); }, "max");
  expect_error([&] { min(make({}, {0})); }, "min");
  expect_error([&] { argmax(e, 0); }, "argmax");
  expect_error([&] { argmin(e); }, "argmin");
  expect_error([&] { logsumexp(e, {}); }, "logsumexp");
  Tensor i = make_exact<int32_t>({1, 2}, {2});
  expect_error([&] { mean(i); }, "mean");
  expect_error([&] { mean(make_exact<bool>({true}, {1})); }, "mean");
  expect_error([&] { mean(x, {}, false, DType::Int64); }, "mean");
  expect_error([&] { var(i); }, "var");
  expect_error([&] { smelt::std(i); }, "std");
  expect_error([&] { var_mean(i); }, "var_mean");
  expect_error([&] { argmax(make_exact<bool>({true}, {1})); }, "argmax");
}

namespace {
/// Records op names and attrs instead of running kernels.
struct RecordingTrace : detail::TraceContext {
  struct Node {
    std::string op;
    detail::Attrs attrs;
    std::vector<detail::OutMeta> outs;
  };
  std::vector<Node> nodes;
  std::vector<Tensor> record(const std::string& op, const std::vector<Tensor>& inputs,
                             const detail::Attrs& attrs,
                             const std::vector<detail::OutMeta>& outs) override {
    nodes.push_back({op, attrs, outs});
    std::vector<Tensor> r;
    for (auto& m : outs) r.push_back(tracer(m.sizes, m.dtype));
    return r;
  }
  void record_copy(const Tensor&, const Tensor&) override {}
  void record_random(const std::string&) override {}
  static Tensor tracer(const Shape& s, DType dt) {
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = Storage::tracer(static_cast<size_t>(detail::shape_numel(s)) * itemsize(dt),
                                    Device(), std::make_shared<detail::TraceValue>());
    impl->sizes = s;
    impl->strides = detail::contiguous_strides(s);
    impl->dtype = dt;
    return Tensor(impl);
  }
};
struct TraceGuard {
  detail::TraceContext* prev;
  explicit TraceGuard(detail::TraceContext* c) : prev(detail::set_trace_context(c)) {}
  ~TraceGuard() { detail::set_trace_context(prev); }
};
}  // namespace

TEST(Reduce, TracedAttrs) {
  RecordingTrace tr;
  TraceGuard guard(&tr);
  Tensor x = RecordingTrace::tracer({2, 3, 4}, DType::Float16);
  Tensor xi = RecordingTrace::tracer({2, 3}, DType::Int32);
  sum(x, {-1, 0}, true);
  sum(xi);
  mean(xi, {1}, false, DType::Float32);
  auto [v, i] = max(x, -2);
  argmax(x);
  var_mean(x, {1}, 0.0);
  any(xi, {0});
  cumsum(xi, -1);
  amax(x);
  ASSERT_EQ(tr.nodes.size(), 9u);
  auto& n0 = tr.nodes[0];
  EXPECT_EQ(n0.op, "sum");
  EXPECT_EQ(n0.attrs.as<std::vector<int64_t>>("dim"), (std::vector<int64_t>{0, 2}));
  EXPECT_TRUE(n0.attrs.as<bool>("keepdim"));
  EXPECT_EQ(n0.attrs.as<DType>("dtype"), DType::Float16);
  EXPECT_EQ(n0.outs[0].sizes, (Shape{1, 3, 1}));
  EXPECT_EQ(tr.nodes[1].attrs.as<std::vector<int64_t>>("dim"), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(tr.nodes[1].attrs.as<DType>("dtype"), DType::Int64);
  EXPECT_EQ(tr.nodes[1].outs[0].dtype, DType::Int64);
  EXPECT_EQ(tr.nodes[2].attrs.as<DType>("dtype"), DType::Float32);
  EXPECT_EQ(tr.nodes[3].op, "max");
  EXPECT_EQ(tr.nodes[3].outs.size(), 2u);
  EXPECT_EQ(tr.nodes[3].outs[1].dtype, DType::Int64);
  EXPECT_EQ(tr.nodes[3].attrs.as<std::vector<int64_t>>("dim"), (std::vector<int64_t>{1}));
  EXPECT_EQ(v.sizes(), (Shape{2, 4}));
  EXPECT_EQ(i.dtype(), DType::Int64);
  EXPECT_EQ(tr.nodes[4].op, "argmax");
  EXPECT_TRUE(tr.nodes[4].attrs.as<bool>("flatten"));
  EXPECT_EQ(tr.nodes[4].attrs.as<std::vector<int64_t>>("dim"), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(tr.nodes[4].outs[0].sizes, Shape{});
  EXPECT_EQ(tr.nodes[5].op, "var_mean");
  EXPECT_EQ(tr.nodes[5].attrs.as<double>("correction"), 0.0);
  EXPECT_EQ(tr.nodes[5].outs.size(), 2u);
  EXPECT_EQ(tr.nodes[6].outs[0].dtype, DType::Bool);
  EXPECT_EQ(tr.nodes[7].op, "cumsum");
  EXPECT_EQ(tr.nodes[7].attrs.as<std::vector<int64_t>>("dim"), (std::vector<int64_t>{1}));
  EXPECT_EQ(tr.nodes[7].outs[0].dtype, DType::Int64);
  EXPECT_EQ(tr.nodes[8].op, "amax");
  EXPECT_FALSE(tr.nodes[8].attrs.as<bool>("keepdim"));
}

TEST(Reduce, AccumulatorCombine) {
  // combine() of split partials equals one sequential pass (the JIT relies on it).
  namespace r = smelt::reduce;
  std::vector<double> v = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 9};
  for (size_t cut = 0; cut <= v.size(); ++cut) {
    auto a = r::ArgMax<double>::init(), b = r::ArgMax<double>::init();
    auto w1 = r::Welford<double>::init(), w2 = r::Welford<double>::init();
    for (size_t k = 0; k < v.size(); ++k) {
      auto& acc = k < cut ? a : b;
      acc = r::ArgMax<double>::step(acc, v[k], static_cast<int64_t>(k));
      auto& w = k < cut ? w1 : w2;
      w = r::Welford<double>::step(w, v[k]);
    }
    auto ab = r::ArgMax<double>::combine(b, a);
    EXPECT_EQ(ab.index, 5);
    EXPECT_EQ(ab.value, 9);
    auto w = r::Welford<double>::combine(w1, w2);
    EXPECT_EQ(w.count, 12);
    EXPECT_NEAR(r::Welford<double>::mean(w), rmean(v), 1e-12);
    EXPECT_NEAR(r::Welford<double>::var(w, 1), rvar(1)(v), 1e-12);
  }
  EXPECT_TRUE(std::isnan(r::Welford<double>::mean(r::Welford<double>::init())));
  auto m = r::Max<float>::combine(r::Max<float>::step(r::Max<float>::init(), NAN), 3.0f);
  EXPECT_TRUE(std::isnan(m));
}

TEST(Reduce, ShiftedSumsRebasedToOneShiftAddUp) {
  // A GPU row's threads keep float shifted sums around their own first element,
  // move them to the first thread's shift (rebase) and add them: the mean and
  // variance of the whole row, also far from zero (shifts 1e4 apart) and with a
  // thread that saw nothing.
  namespace r = smelt::reduce;
  std::vector<float> v;
  for (int k = 0; k < 96; ++k) v.push_back(1e4f + static_cast<float>((k * 37) % 11) * 0.25f);
  for (int k = 0; k < 32; ++k) v.push_back(2e4f - static_cast<float>(k) * 0.5f);
  const std::vector<double> vd(v.begin(), v.end());
  const size_t cuts[] = {0, 40, 96, 96, 128};  // threads: [0,40) [40,96) [] [96,128)
  std::vector<r::ShiftedSums<float>> parts;
  for (size_t t = 0; t + 1 < std::size(cuts); ++t) {
    auto p = r::ShiftedWelford<float>::init();
    for (size_t k = cuts[t]; k < cuts[t + 1]; ++k) p = r::ShiftedWelford<float>::step(p, v[k]);
    parts.push_back(p);
  }
  EXPECT_EQ(parts[2].count, 0);
  const double c0 = parts[0].shift;
  double s1 = 0, s2 = 0;
  for (const auto& p : parts) {
    const r::ShiftedSums<double> q = r::ShiftedWelford<float>::rebase(p, c0);
    EXPECT_EQ(q.shift, c0);
    EXPECT_EQ(q.count, p.count);
    s1 += q.s1;
    s2 += q.s2;
  }
  const auto w = r::ShiftedWelford<double>::welford(r::ShiftedSums<double>{c0, s1, s2, 128});
  EXPECT_NEAR(r::Welford<double>::mean(w), rmean(vd), 1e-9);
  EXPECT_NEAR(r::Welford<double>::var(w, 0), rvar(0)(vd), 1e-6 * rvar(0)(vd));
}

TEST(Reduce, Logsumexp) {
  const Shape shape = {5, 7, 3};
  auto v = randv(105, 17, -30, 30);
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor x = make(v, shape, dt);
    double rt = dt == DType::Float32 ? 1e-5 : 1e-12;
    for (auto& dims : kDimSets) {
      for (bool keep : {false, true}) {
        Tensor l = logsumexp(x, dims, keep);
        EXPECT_EQ(l.dtype(), dt);
        expect_close(l, ref_reduce(v, shape, dims, keep, rlse), rt, rt, "logsumexp");
      }
    }
  }
  // Rows of -inf, with +inf, with NaN; large values (no overflow).
  Tensor s = make({-kInf, -kInf, 1, kInf, 1, kNaN, 1000, 1000}, {4, 2});
  std::vector<double> got = vals(logsumexp(s, {1}));
  EXPECT_EQ(got[0], -kInf);
  EXPECT_EQ(got[1], kInf);
  EXPECT_TRUE(std::isnan(got[2]));
  EXPECT_NEAR(got[3], 1000 + std::log(2.0), 1e-4);
  // Integer input -> float32; an empty reduced dim -> -inf.
  Tensor li = logsumexp(make_exact<int32_t>({0, 0}, {2}), {0});
  EXPECT_EQ(li.dtype(), DType::Float32);
  EXPECT_NEAR(li.item<double>(), std::log(2.0), 1e-6);
  Tensor le = logsumexp(make({}, {0, 4}), {0});
  EXPECT_EQ(vals(le), std::vector<double>(4, -kInf));
}
