// Neural-network functional ops against float64 references computed here with
// plain loops, their PyTorch edge cases and errors, and the single graph node
// each composite records while tracing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/storage.h"
#include "core/tensor_impl.h"
#include "ops/decompose.h"
#include "ops/dispatch.h"
#include "smelt/ops.h"
#include "test_util.h"

using namespace smelt;
using smelt_test::expect_close;
using smelt_test::expect_error_mentions;
using smelt_test::kInf;
using smelt_test::make;
using smelt_test::seq;
using smelt_test::vals;

namespace {

/// Row-wise softmax / log_softmax reference over the last dim of [rows, n].
std::vector<double> ref_softmax(const std::vector<double>& x, int64_t rows, int64_t n, bool log) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double m = -kInf;
    for (int64_t j = 0; j < n; ++j) m = std::max(m, x[r * n + j]);
    double s = 0;
    for (int64_t j = 0; j < n; ++j) s += std::exp(x[r * n + j] - m);
    for (int64_t j = 0; j < n; ++j)
      y[r * n + j] = log ? x[r * n + j] - m - std::log(s) : std::exp(x[r * n + j] - m) / s;
  }
  return y;
}

}  // namespace

// ----------------------------------------------------------------- linear ---

TEST(NNFunctional, LinearWithAndWithoutBias) {
  auto x = seq(2 * 3 * 5), w = seq(4 * 5, 0.23), b = seq(4, 1.1);
  std::vector<double> want(2 * 3 * 4);
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t o = 0; o < 4; ++o) {
      double s = 0;
      for (int64_t i = 0; i < 5; ++i) s += x[r * 5 + i] * w[o * 5 + i];
      want[r * 4 + o] = s;
    }
  Tensor y = linear(make(x, {2, 3, 5}), make(w, {4, 5}));
  EXPECT_EQ(y.sizes(), (Shape{2, 3, 4}));
  expect_close(vals(y), want, 1e-12);
  for (int64_t i = 0; i < 24; ++i) want[i] += b[i % 4];
  Tensor yb = linear(make(x, {2, 3, 5}, float32), make(w, {4, 5}, float32), make(b, {4}, float32));
  EXPECT_EQ(yb.dtype(), float32);
  expect_close(vals(yb), want, 1e-5);
  // Non-contiguous weight: the transpose of a [5, 4] matrix.
  std::vector<double> wt(20);
  for (int64_t o = 0; o < 4; ++o)
    for (int64_t i = 0; i < 5; ++i) wt[i * 4 + o] = w[o * 5 + i];
  Tensor y2 = linear(make(x, {6, 5}), make(wt, {5, 4}).t(), make(b, {4}));
  expect_close(vals(y2), want, 1e-12);
}

TEST(NNFunctional, LinearRoundsOnceWithItsBias) {
  // x @ w^T = 1 + 2^-8 (a tie between bfloat16 neighbours 1 and 1 + 2^-7) and
  // bias 2^-9: rounded once (PyTorch's addmm: the bias joins the float32
  // accumulator) the sum is 1 + 2^-7; rounding the product first would give 1.
  Tensor x = make({1.0, 0.00390625}, {1, 2}, bfloat16), w = make({1.0, 1.0}, {1, 2}, bfloat16),
         b = make({0.001953125}, {1}, bfloat16);
  EXPECT_EQ(vals(linear(x, w, b)), (std::vector<double>{1.0078125}));
  EXPECT_EQ(vals(add(matmul(x, w.t()), b)), (std::vector<double>{1.0}));
}

TEST(NNFunctional, LinearErrors) {
  expect_error_mentions([] { linear(zeros({2, 3}, float32), zeros({4, 5}, float32)); }, "linear");
  expect_error_mentions([] { linear(zeros({2, 5}, float32), zeros({4, 5}, float64)); }, "dtype");
  expect_error_mentions(
      [] {
        linear(zeros({2, 5}, float32), zeros({4, 5}, float32), zeros({3}, float32));
      },
      "bias");
}

TEST(NNFunctional, LinearBackwardWithZeroFeatures) {
  // in_features or out_features 0 (PyTorch: zero-sized gradients, zeros where
  // a product over nothing sums): dW counts x's rows, never reshapes with -1.
  struct Case {
    Shape x, w;
  };
  for (const Case& c : {Case{{3, 0}, {4, 0}}, Case{{2, 3, 0}, {4, 0}}, Case{{3, 5}, {0, 5}}}) {
    Tensor x = make(seq(detail::shape_numel(c.x)), c.x),
           w = make(seq(detail::shape_numel(c.w)), c.w);
    Tensor b = make(seq(c.w[0], 1.1), {c.w[0]});
    x.requires_grad_(true);
    w.requires_grad_(true);
    b.requires_grad_(true);
    const int64_t rows = detail::shape_numel(Shape(c.x.begin(), c.x.end() - 1));
    Tensor y = linear(x, w, b);
    std::vector<double> want_y;  // b in every row (x W^T is an empty sum)
    for (int64_t r = 0; r < rows; ++r)
      for (double v : vals(b)) want_y.push_back(v);
    EXPECT_EQ(vals(y), want_y);
    mul(y, y).sum().backward();
    EXPECT_EQ(x.grad().sizes(), c.x);
    EXPECT_EQ(w.grad().sizes(), c.w);
    EXPECT_EQ(vals(w.grad()), std::vector<double>(detail::shape_numel(c.w), 0.0));
    std::vector<double> want_b = vals(b);  // d/db sum(y^2) = 2 b per row
    for (double& v : want_b) v *= 2.0 * static_cast<double>(rows);
    expect_close(vals(b.grad()), want_b, 1e-12);
  }
}

TEST(NNFunctional, LinearDeviceMismatchNamesLinear) {
  SMELT_SKIP_WITHOUT_CUDA();
  const Device gpu("cuda:0");
  Tensor x = zeros({2, 5}, TensorOptions().device(gpu)),
         w = zeros({4, 5}, TensorOptions().device(gpu));
  // A [out] bias on another device: an error naming linear (not the fused
  // GEMM's internal assertion).
  expect_error_mentions([&] { linear(x, w, zeros({4})); },
                        "linear: Expected all tensors to be on the same device, but found at least "
                        "two devices, cuda:0 (input) and cpu (bias)");
  expect_error_mentions(
      [&] {
        linear(x, zeros({4, 5}));
      },
      "linear: Expected all tensors to be on the same device, but found at least "
      "two devices, cuda:0 (input) and cpu (weight)");
  // A 0-d CPU bias is a scalar, as for add.
  EXPECT_EQ(vals(linear(x, w, full({}, 1.5))), std::vector<double>(8, 1.5));
}

// ---------------------------------------------------------------- softmax ---

TEST(NNFunctional, SoftmaxAndLogSoftmax) {
  auto x = seq(4 * 33, 0.71);
  for (DType dt : {float32, float64}) {
    Tensor t = make(x, {4, 33}, dt);
    const double tol = dt == float32 ? 2e-6 : 1e-13;
    expect_close(vals(softmax(t, -1)), ref_softmax(x, 4, 33, false), tol);
    expect_close(vals(log_softmax(t, 1)), ref_softmax(x, 4, 33, true), tol);
    // dim 0 = softmax of the transpose.
    std::vector<double> xt(x.size());
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t c = 0; c < 33; ++c) xt[c * 4 + r] = x[r * 33 + c];
    std::vector<double> want_t = ref_softmax(xt, 33, 4, false), want(x.size());
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t c = 0; c < 33; ++c) want[r * 33 + c] = want_t[c * 4 + r];
    expect_close(vals(softmax(t, 0)), want, tol);
  }
}

TEST(NNFunctional, SoftmaxStableAndEdgeCases) {
  // Huge logits do not overflow (the max is subtracted first).
  std::vector<double> big = {1000, 1001, 1002, -1000};
  expect_close(vals(softmax(make(big, {1, 4}, float32), -1)), ref_softmax(big, 1, 4, false), 1e-6);
  expect_close(vals(log_softmax(make(big, {1, 4}, float32), -1)), ref_softmax(big, 1, 4, true),
               1e-6);
  // A row of -inf gives NaN (as PyTorch); -inf entries elsewhere give 0.
  std::vector<double> r = {-kInf, -kInf, 1.0, -kInf};
  std::vector<double> got = vals(softmax(make(r, {2, 2}), -1));
  EXPECT_TRUE(std::isnan(got[0]) && std::isnan(got[1]));
  EXPECT_EQ(got[2], 1.0);
  EXPECT_EQ(got[3], 0.0);
  // Size-1 dim gives 1; 0-dim input works; empty input keeps its shape.
  expect_close(vals(softmax(make(seq(6), {1, 6}, float32), 0)), std::vector<double>(6, 1.0), 0);
  EXPECT_EQ(softmax(scalar_tensor(3.0), 0).item<double>(), 1.0);
  EXPECT_EQ(log_softmax(scalar_tensor(3.0), -1).item<double>(), 0.0);
  EXPECT_EQ(softmax(zeros({0, 3}, float32), 1).sizes(), (Shape{0, 3}));
  EXPECT_EQ(softmax(zeros({3, 0}, float32), 1).sizes(), (Shape{3, 0}));
}

TEST(NNFunctional, SoftmaxDtypes) {
  auto x = seq(2 * 9, 0.9);
  for (DType dt : {float16, bfloat16}) {
    Tensor t = make(x, {2, 9}, dt);
    Tensor y = softmax(t, -1);
    EXPECT_EQ(y.dtype(), dt);
    expect_close(vals(y), ref_softmax(vals(t), 2, 9, false), dt == float16 ? 1e-3 : 8e-3);
  }
  // Integer input with dtype= computes in that dtype; without it is an error.
  Tensor i = from_vector<int64_t>({1, 2, 3}, {3});
  Tensor y = softmax(i, 0, float64);
  EXPECT_EQ(y.dtype(), float64);
  expect_close(vals(y), ref_softmax({1, 2, 3}, 1, 3, false), 1e-14);
  expect_error_mentions([&] { softmax(i, 0); }, "softmax");
  expect_error_mentions([] { log_softmax(zeros({2, 3}, float32), 2); }, "log_softmax");
}

// ------------------------------------------------------------------ norms ---

TEST(NNFunctional, LayerNorm) {
  const int64_t rows = 12, n = 16;
  auto x = seq(rows * n, 0.53), w = seq(n, 0.3, 0.2), b = seq(n, 0.9);
  auto ref = [&](const std::vector<double>& in, bool affine, double eps) {
    std::vector<double> y(in.size());
    for (int64_t r = 0; r < rows; ++r) {
      double m = 0, v = 0;
      for (int64_t j = 0; j < n; ++j) m += in[r * n + j];
      m /= n;
      for (int64_t j = 0; j < n; ++j) v += (in[r * n + j] - m) * (in[r * n + j] - m);
      v /= n;
      for (int64_t j = 0; j < n; ++j) {
        double z = (in[r * n + j] - m) / std::sqrt(v + eps);
        y[r * n + j] = affine ? z * w[j] + b[j] : z;
      }
    }
    return y;
  };
  Tensor y = layer_norm(make(x, {3, 4, n}, float32), {n}, make(w, {n}, float32),
                        make(b, {n}, float32), 1e-5);
  EXPECT_EQ(y.sizes(), (Shape{3, 4, n}));
  expect_close(vals(y), ref(x, true, 1e-5), 2e-5);
  // Two normalized dims, no affine, float64, large offset (needs a stable variance).
  std::vector<double> xo(x);
  for (double& v : xo) v += 1e4;
  Tensor y2 = layer_norm(make(xo, {3, 4, n}).reshape({3, 4, 4, 4}), {4, 4});
  expect_close(vals(y2), ref(xo, false, 1e-5), 1e-8);
  // bfloat16 computes in float32, rounds once.
  Tensor xb = make(x, {rows, n}, bfloat16);
  Tensor yb = layer_norm(xb, {n});
  EXPECT_EQ(yb.dtype(), bfloat16);
  expect_close(vals(yb), ref(vals(xb), false, 1e-5), 1e-2);
}

TEST(NNFunctional, LayerNormErrors) {
  Tensor x = zeros({3, 4, 15}, float32);
  expect_error_mentions([&] { layer_norm(x, {16}); }, "[3, 4, 15]");
  expect_error_mentions([&] { layer_norm(x, {}); }, "normalized_shape");
  expect_error_mentions([&] { layer_norm(x, {15}, zeros({4, 15}, float32)); }, "weight");
  expect_error_mentions([] { layer_norm(zeros({2, 3}, int64), {3}); }, "floating");
}

TEST(NNFunctional, RmsNorm) {
  const int64_t rows = 6, n = 8;
  auto x = seq(rows * n, 0.41), w = seq(n, 0.6);
  auto ref = [&](const std::vector<double>& in, double eps, bool affine) {
    std::vector<double> y(in.size());
    for (int64_t r = 0; r < rows; ++r) {
      double ms = 0;
      for (int64_t j = 0; j < n; ++j) ms += in[r * n + j] * in[r * n + j];
      ms /= n;
      for (int64_t j = 0; j < n; ++j)
        y[r * n + j] = in[r * n + j] / std::sqrt(ms + eps) * (affine ? w[j] : 1.0);
    }
    return y;
  };
  expect_close(vals(rms_norm(make(x, {rows, n}), {n}, make(w, {n}), 1e-6)), ref(x, 1e-6, true),
               1e-12);
  // Default eps is the dtype's machine epsilon; visible on an all-zero-but-tiny row.
  std::vector<double> tiny(n, 1e-4);
  Tensor y = rms_norm(make(tiny, {1, n}, float32), {n});
  const double eps32 = std::numeric_limits<float>::epsilon();
  expect_close(vals(y), std::vector<double>(n, 1e-4 / std::sqrt(1e-8 + eps32)), 1e-5);
  Tensor y64 = rms_norm(make(tiny, {1, n}), {n});
  expect_close(vals(y64), std::vector<double>(n, 1e-4 / std::sqrt(1e-8 + 2.220446049250313e-16)),
               1e-12);
  expect_error_mentions([] { rms_norm(zeros({2, 3}, float32), {4}); }, "rms_norm");
}

TEST(NNFunctional, BatchNormTrainingUpdatesRunningStats) {
  const int64_t N = 6, C = 3, L = 5;
  auto x = seq(N * C * L, 0.29);
  auto w = std::vector<double>{0.5, 1.5, -1.0}, b = std::vector<double>{0.1, 0.2, 0.3};
  std::vector<double> rm0 = {0.2, -0.1, 0.0}, rv0 = {1.0, 2.0, 0.5};
  Tensor rm = make(rm0, {C}, float32), rv = make(rv0, {C}, float32);
  Tensor y = batch_norm(make(x, {N, C, L}, float32), rm, rv, make(w, {C}, float32),
                        make(b, {C}, float32), /*training=*/true, /*momentum=*/0.1, 1e-5);
  std::vector<double> want(x.size()), want_rm(C), want_rv(C);
  for (int64_t c = 0; c < C; ++c) {
    double m = 0, v = 0;
    const double cnt = N * L;
    for (int64_t i = 0; i < N; ++i)
      for (int64_t l = 0; l < L; ++l) m += x[(i * C + c) * L + l];
    m /= cnt;
    for (int64_t i = 0; i < N; ++i)
      for (int64_t l = 0; l < L; ++l) v += std::pow(x[(i * C + c) * L + l] - m, 2);
    const double biased = v / cnt, unbiased = v / (cnt - 1);
    for (int64_t i = 0; i < N; ++i)
      for (int64_t l = 0; l < L; ++l) {
        const int64_t k = (i * C + c) * L + l;
        want[k] = (x[k] - m) / std::sqrt(biased + 1e-5) * w[c] + b[c];
      }
    want_rm[c] = 0.9 * rm0[c] + 0.1 * m;
    want_rv[c] = 0.9 * rv0[c] + 0.1 * unbiased;
  }
  expect_close(vals(y), want, 2e-5);
  expect_close(vals(rm), want_rm, 1e-6);
  expect_close(vals(rv), want_rv, 1e-6);
  // Eval mode normalizes with the (now updated) running stats, which stay unchanged.
  Tensor ye = batch_norm(make(x, {N, C, L}, float32), rm, rv, std::nullopt, std::nullopt, false);
  std::vector<double> want_e(x.size());
  for (int64_t k = 0; k < N * C * L; ++k) {
    const int64_t c = (k / L) % C;
    want_e[k] = (x[k] - want_rm[c]) / std::sqrt(want_rv[c] + 1e-5);
  }
  expect_close(vals(ye), want_e, 2e-5);
  expect_close(vals(rm), want_rm, 1e-6);
  // Training without running stats just normalizes with batch stats.
  Tensor yn = batch_norm(make(x, {N, C, L}, float32), std::nullopt, std::nullopt,
                         make(w, {C}, float32), make(b, {C}, float32), true);
  expect_close(vals(yn), want, 2e-5);
}

TEST(NNFunctional, BatchNormErrors) {
  Tensor rm = zeros({3}, float32), rv = ones({3}, float32);
  expect_error_mentions(
      [&] {
        batch_norm(zeros({4, 3}, float32), std::nullopt, std::nullopt);
      },
      "running_mean");
  expect_error_mentions(
      [&] {
        batch_norm(zeros({1, 3}, float32), rm, rv, std::nullopt, std::nullopt, true);
      },
      "more than 1 value per channel");
  expect_error_mentions([&] { batch_norm(zeros({4, 2}, float32), rm, rv); }, "[3]");
  expect_error_mentions([&] { batch_norm(zeros({4}, float32), rm, rv); }, "batch_norm");
  // Nothing was written by the failed calls.
  EXPECT_EQ(vals(rm), std::vector<double>(3, 0.0));
}

// ---------------------------------------------------------------- dropout ---

TEST(NNFunctional, Dropout) {
  Tensor x = make(seq(1000), {10, 100}, float32);
  EXPECT_TRUE(dropout(x, 0.5, /*training=*/false).is_same(x));
  EXPECT_TRUE(dropout(x, 0.0, true).is_same(x));
  EXPECT_EQ(vals(dropout(x, 1.0, true)), std::vector<double>(1000, 0.0));
  manual_seed(123);
  std::vector<double> a = vals(dropout(x, 0.25, true));
  manual_seed(123);
  std::vector<double> b = vals(dropout(x, 0.25, true));
  EXPECT_EQ(a, b);  // reproducible from the seed
  std::vector<double> xv = vals(x);
  int zeros_seen = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == 0.0 && xv[i] != 0.0) {
      ++zeros_seen;
    } else {
      EXPECT_NEAR(a[i], xv[i] / 0.75, 1e-5 * (1 + std::fabs(xv[i])));
    }
  }
  EXPECT_GT(zeros_seen, 150);
  EXPECT_LT(zeros_seen, 350);
  expect_error_mentions([&] { dropout(x, 1.5, true); }, "dropout");
  expect_error_mentions([&] { dropout(x, -0.1, true); }, "between 0 and 1");
}

// -------------------------------------------------------------- embedding ---

TEST(NNFunctional, Embedding) {
  auto w = seq(10 * 4, 0.17);
  std::vector<int64_t> idx = {3, 0, 9, 3, 7, 1};
  for (bool i32 : {false, true}) {
    Tensor ti =
        i32 ? from_vector<int64_t>(idx, {2, 3}).to(int32) : from_vector<int64_t>(idx, {2, 3});
    Tensor y = embedding(make(w, {10, 4}, float32), ti);
    EXPECT_EQ(y.sizes(), (Shape{2, 3, 4}));
    EXPECT_EQ(y.dtype(), float32);
    std::vector<double> want;
    for (int64_t i : idx)
      for (int64_t j = 0; j < 4; ++j) want.push_back(static_cast<float>(w[i * 4 + j]));
    expect_close(vals(y), want, 0);
  }
  // Transposed weight and transposed indices.
  std::vector<double> wt(40);
  for (int64_t r = 0; r < 10; ++r)
    for (int64_t j = 0; j < 4; ++j) wt[j * 10 + r] = w[r * 4 + j];
  Tensor y = embedding(make(wt, {4, 10}).t(), from_vector<int64_t>(idx, {2, 3}).t());
  EXPECT_EQ(y.sizes(), (Shape{3, 2, 4}));
  std::vector<double> got = vals(y);
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t j = 0; j < 4; ++j)
        EXPECT_EQ(got[(a * 2 + c) * 4 + j], w[idx[c * 3 + a] * 4 + j]);
  EXPECT_EQ(embedding(make(w, {10, 4}), from_vector<int64_t>({}, {0})).sizes(), (Shape{0, 4}));
  expect_error_mentions(
      [&] {
        embedding(make(w, {10, 4}), from_vector<int64_t>({10}, {1}));
      },
      "out of range");
  expect_error_mentions(
      [&] {
        embedding(make(w, {10, 4}), from_vector<int64_t>({-1}, {1}));
      },
      "out of range");
  expect_error_mentions([&] { embedding(make(w, {10, 4}), zeros({2}, float32)); }, "int64");
  expect_error_mentions([&] { embedding(make(w, {40}), from_vector<int64_t>({1}, {1})); }, "2-D");
}

// ----------------------------------------------------------------- losses ---

namespace {
/// Per-sample cross-entropy terms of [N, C] logits: (nll, smooth = -sum_c logp).
void ce_terms(const std::vector<double>& x, const std::vector<int64_t>& t, int64_t N, int64_t C,
              std::vector<double>& nll, std::vector<double>& smooth) {
  std::vector<double> lp = ref_softmax(x, N, C, true);
  nll.assign(N, 0);
  smooth.assign(N, 0);
  for (int64_t i = 0; i < N; ++i) {
    nll[i] = -lp[i * C + t[i]];
    for (int64_t c = 0; c < C; ++c) smooth[i] -= lp[i * C + c];
  }
}
}  // namespace

TEST(NNFunctional, CrossEntropy) {
  const int64_t N = 5, C = 7;
  auto x = seq(N * C, 0.61);
  std::vector<int64_t> t = {1, 6, 0, 3, 3};
  std::vector<double> nll, smooth;
  ce_terms(x, t, N, C, nll, smooth);
  Tensor in = make(x, {N, C}, float32), tg = from_vector<int64_t>(t, {N});
  double s = 0;
  for (double v : nll) s += v;
  EXPECT_NEAR(cross_entropy(in, tg).item<double>(), s / N, 1e-5);
  EXPECT_NEAR(cross_entropy(in, tg, -100, "sum").item<double>(), s, 1e-5);
  Tensor none = cross_entropy(in, tg, -100, "none");
  EXPECT_EQ(none.sizes(), (Shape{N}));
  expect_close(vals(none), nll, 1e-5);
  // ignore_index: mean over the targets kept.
  std::vector<int64_t> ti = {1, -100, 0, -100, 3};
  Tensor tgi = from_vector<int64_t>(ti, {N});
  const double kept = nll[0] + nll[2] + nll[4];
  EXPECT_NEAR(cross_entropy(in, tgi).item<double>(), kept / 3, 1e-5);
  std::vector<double> none_i = vals(cross_entropy(in, tgi, -100, "none"));
  EXPECT_EQ(none_i[1], 0.0);
  EXPECT_EQ(none_i[3], 0.0);
  EXPECT_TRUE(std::isnan(
      cross_entropy(in, from_vector<int64_t>(std::vector<int64_t>(N, 2), {N}), 2).item<double>()));
  // Label smoothing: (1 - ls) * nll + ls / C * smooth, mean over kept targets.
  const double ls = 0.1;
  double want = 0;
  for (int64_t i : {0, 2, 4}) want += (1 - ls) * nll[i] + ls / C * smooth[i];
  EXPECT_NEAR(cross_entropy(in, tgi, -100, "mean", ls).item<double>(), want / 3, 1e-5);
  double want_all = 0;
  for (int64_t i = 0; i < N; ++i) want_all += (1 - ls) * nll[i] + ls / C * smooth[i];
  EXPECT_NEAR(cross_entropy(in, tg, -100, "sum", ls).item<double>(), want_all, 1e-5);
  // [C] logits with a 0-dim target.
  Tensor one = cross_entropy(make(std::vector<double>(x.begin(), x.begin() + C), {C}),
                             from_vector<int64_t>({1}, {}));
  EXPECT_NEAR(one.item<double>(), nll[0], 1e-12);
  // [N, C, d] logits with [N, d] targets.
  Tensor x3 = make(x, {N, C}).unsqueeze(2);
  Tensor l3 = cross_entropy(x3, tg.unsqueeze(1), -100, "none");
  EXPECT_EQ(l3.sizes(), (Shape{N, 1}));
  expect_close(vals(l3), nll, 1e-12);
  // Class probabilities (one-hot == class indices).
  std::vector<double> onehot(N * C, 0.0);
  for (int64_t i = 0; i < N; ++i) onehot[i * C + t[i]] = 1.0;
  EXPECT_NEAR(cross_entropy(make(x, {N, C}), make(onehot, {N, C})).item<double>(), s / N, 1e-12);
}

TEST(NNFunctional, CrossEntropyErrors) {
  Tensor in = zeros({5, 7}, float32);
  expect_error_mentions(
      [&] {
        cross_entropy(in, from_vector<int64_t>({0, 1, 2, 3, 7}, {5}));
      },
      "out of bounds");
  expect_error_mentions(
      [&] {
        cross_entropy(in, from_vector<int64_t>({0, 1, 2, 3, -1}, {5}));
      },
      "out of bounds");
  expect_error_mentions(
      [&] {
        cross_entropy(in, from_vector<int64_t>({0, 1, 2, 3, 4}, {5}).to(int32));
      },
      "int64");
  expect_error_mentions([&] { cross_entropy(in, from_vector<int64_t>({0, 1}, {2})); }, "target");
  expect_error_mentions([&] { cross_entropy(in, zeros({5}, int64), -100, "avg"); }, "reduction");
  expect_error_mentions([&] { cross_entropy(in, zeros({5}, int64), -100, "mean", 1.5); },
                        "label_smoothing");
}

TEST(NNFunctional, MseLoss) {
  auto a = seq(12), b = seq(12, 0.5, 1.0);
  double s = 0;
  std::vector<double> sq(12);
  for (int i = 0; i < 12; ++i) s += (sq[i] = (a[i] - b[i]) * (a[i] - b[i]));
  Tensor ta = make(a, {3, 4}, float32), tb = make(b, {3, 4}, float32);
  EXPECT_NEAR(mse_loss(ta, tb).item<double>(), s / 12, 1e-5);
  EXPECT_NEAR(mse_loss(ta, tb, "sum").item<double>(), s, 1e-4);
  expect_close(vals(mse_loss(ta, tb, "none")), sq, 1e-5);
  EXPECT_EQ(mse_loss(ta, tb).dim(), 0);
  expect_error_mentions([] { mse_loss(zeros({3}, int64), zeros({3}, int64)); }, "mse_loss");
  expect_error_mentions([] { mse_loss(zeros({3}, float32), zeros({4}, float32)); }, "broadcast");
}

// -------------------------------------------------------------- attention ---

namespace {
/// Reference attention for [B, L, E] x [B, S, E] x [B, S, Ev]; keep(b, i, j) masks.
template <class Keep>
std::vector<double> ref_sdpa(const std::vector<double>& q, const std::vector<double>& k,
                             const std::vector<double>& v, int64_t B, int64_t L, int64_t S,
                             int64_t E, int64_t Ev, Keep keep) {
  std::vector<double> out(B * L * Ev, 0.0);
  const double scale = 1 / std::sqrt(static_cast<double>(E));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> sc(S);
      for (int64_t j = 0; j < S; ++j) {
        double d = 0;
        for (int64_t e = 0; e < E; ++e) d += q[(b * L + i) * E + e] * k[(b * S + j) * E + e];
        sc[j] = keep(b, i, j) ? d * scale : -kInf;
      }
      std::vector<double> p = ref_softmax(sc, 1, S, false);
      for (int64_t j = 0; j < S; ++j)
        for (int64_t e = 0; e < Ev; ++e)
          out[(b * L + i) * Ev + e] += p[j] * v[(b * S + j) * Ev + e];
    }
  return out;
}
}  // namespace

TEST(NNFunctional, ScaledDotProductAttention) {
  const int64_t B = 2, H = 3, L = 6, S = 6, E = 8;
  auto q = seq(B * H * L * E, 0.13), k = seq(B * H * S * E, 0.29, 1.0),
       v = seq(B * H * S * E, 0.07, 2.0);
  Tensor tq = make(q, {B, H, L, E}), tk = make(k, {B, H, S, E}), tv = make(v, {B, H, S, E});
  auto all = [](int64_t, int64_t, int64_t) { return true; };
  auto causal = [](int64_t, int64_t i, int64_t j) { return j <= i; };
  expect_close(vals(scaled_dot_product_attention(tq, tk, tv)),
               ref_sdpa(q, k, v, B * H, L, S, E, E, all), 1e-12);
  std::vector<double> want_c = ref_sdpa(q, k, v, B * H, L, S, E, E, causal);
  expect_close(vals(scaled_dot_product_attention(tq, tk, tv, std::nullopt, 0.0, true)), want_c,
               1e-12);
  // Causal equals an explicit lower-triangular bool mask and the matching float mask.
  std::vector<bool> tri(L * S);
  std::vector<double> fm(L * S);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < S; ++j) {
      tri[i * S + j] = j <= i;
      fm[i * S + j] = j <= i ? 0.0 : -kInf;
    }
  expect_close(vals(scaled_dot_product_attention(tq, tk, tv, from_vector<bool>(tri, {L, S}))),
               want_c, 1e-12);
  expect_close(vals(scaled_dot_product_attention(tq, tk, tv, make(fm, {L, S}))), want_c, 1e-12);
  // A fully masked row gives zeros (as PyTorch's math path, _safe_softmax, since 2.5).
  std::vector<bool> m2(tri);
  for (int64_t j = 0; j < S; ++j) m2[2 * S + j] = false;
  std::vector<double> got = vals(
      scaled_dot_product_attention(make(q, {B, H, L, E}, float32), make(k, {B, H, S, E}, float32),
                                   make(v, {B, H, S, E}, float32), from_vector<bool>(m2, {L, S})));
  for (int64_t e = 0; e < E; ++e) EXPECT_EQ(got[2 * E + e], 0.0);
  EXPECT_NEAR(got[0], want_c[0], 1e-5);
  // Explicit scale.
  Tensor ys = scaled_dot_product_attention(tq, tk, tv, std::nullopt, 0.0, false,
                                           2.0 / std::sqrt(static_cast<double>(E)));
  Tensor ys_ref = scaled_dot_product_attention(mul(tq, Scalar(2.0)), tk, tv);
  expect_close(vals(ys), vals(ys_ref), 1e-12);
}

TEST(NNFunctional, ScaledDotProductAttentionHalfBroadcastsKeysOverTheBatch) {
  // q [B, H, L, E] with k, v [H, S, E] (broadcast over B), float16 /
  // bfloat16 as float32: the result of k and v expanded to 4-D.
  for (DType dt : {DType::Float16, DType::BFloat16, DType::Float32}) {
    Tensor q = randn({2, 3, 5, 4}).to(dt), k = randn({3, 7, 4}).to(dt), v = randn({3, 7, 6}).to(dt);
    Tensor y = scaled_dot_product_attention(q, k, v);
    Tensor want = scaled_dot_product_attention(q, k.expand({2, 3, 7, 4}), v.expand({2, 3, 7, 6}));
    EXPECT_EQ(y.sizes(), (Shape{2, 3, 5, 6})) << dtype_name(dt);
    expect_close(vals(y), vals(want), 0.0);
  }
}

// Head dim 0: the scores are zeros whatever the scale (PyTorch scales the
// empty q and k, not the scores), so each query averages v over the keys it
// sees: all of them, or the causal triangle's; not 0 * 1/sqrt(0) = NaN. On
// float32 (the CPU's fused kernel declines it) and float64, with the default
// and an explicit scale, eagerly and through autograd's recorded path.
TEST(NNFunctional, ScaledDotProductAttentionOfHeadDimZeroAveragesValues) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor q = zeros({2, 3, 5, 0}, TensorOptions(dt)), k = zeros({2, 3, 4, 0}, TensorOptions(dt));
    Tensor v = randn({2, 3, 4, 6}).to(dt);
    Tensor all_keys = v.mean(2, /*keepdim=*/true).expand({2, 3, 5, 6});
    for (std::optional<double> scale : {std::optional<double>(), std::optional<double>(0.5)}) {
      SCOPED_TRACE(dtype_name(dt));
      expect_close(vals(scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, false, scale)),
                   vals(all_keys), 1e-6);
      // Causal, L 5 > S 4: query i sees keys 0..min(i, 3).
      Tensor causal = scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, true, scale);
      for (int64_t i = 0; i < 5; ++i)
        expect_close(vals(causal.select(2, i)),
                     vals(v.narrow(2, 0, std::min<int64_t>(i, 3) + 1).mean(2)), 1e-6);
      Tensor vg = v.detach().requires_grad_(true);
      expect_close(vals(scaled_dot_product_attention(q, k, vg, std::nullopt, 0.0, false, scale)),
                   vals(all_keys), 1e-6);
    }
  }
}

TEST(NNFunctional, ScaledDotProductAttentionErrors) {
  Tensor q = zeros({2, 4, 8}, float32), k = zeros({2, 5, 8}, float32),
         v = zeros({2, 5, 3}, float32);
  EXPECT_EQ(scaled_dot_product_attention(q, k, v).sizes(), (Shape{2, 4, 3}));
  expect_error_mentions(
      [&] {
        scaled_dot_product_attention(q, k, v, ones({4, 5}, kBool), 0.0, true);
      },
      "is_causal");
  expect_error_mentions(
      [&] {
        scaled_dot_product_attention(q, zeros({2, 5, 7}, float32), v);
      },
      "scaled_dot_product_attention");
  expect_error_mentions([&] { scaled_dot_product_attention(q, k, v.to(float64)); }, "same dtype");
  expect_error_mentions(
      [&] {
        scaled_dot_product_attention(q, k, v, ones({3, 5}, kBool));
      },
      "attn_mask");
}

// ------------------------------------------------------------------ tracing ---

namespace {
struct RecordingTrace : detail::TraceContext {
  std::vector<std::string> ops;
  std::vector<detail::Attrs> attrs;
  std::vector<Tensor> record(const std::string& op, const std::vector<Tensor>& inputs,
                             const detail::Attrs& a,
                             const std::vector<detail::OutMeta>& outs) override {
    ops.push_back(op);
    attrs.push_back(a);
    std::vector<Tensor> r;
    for (auto& m : outs) r.push_back(tracer(m.sizes, m.dtype));
    return r;
  }
  void record_copy(const Tensor&, const Tensor&) override { ops.push_back("copy_"); }
  void record_random(const std::string& op) override {
    throw GraphBreak(op + ": random op while tracing");
  }
  static Tensor tracer(const Shape& s, DType dt) {
    auto impl = std::make_shared<TensorImpl>();
    impl->sizes = s;
    impl->strides = detail::contiguous_strides(s);
    impl->dtype = dt;
    impl->storage = Storage::tracer(detail::shape_numel(s) * itemsize(dt), Device(),
                                    std::make_shared<detail::TraceValue>());
    return Tensor(impl);
  }
};
struct TraceScope {
  RecordingTrace ctx;
  detail::TraceContext* prev;
  TraceScope() { prev = detail::set_trace_context(&ctx); }
  ~TraceScope() { detail::set_trace_context(prev); }
};
}  // namespace

TEST(NNFunctional, CompositesRecordOneNodeWhenTracing) {
  TraceScope scope;
  Tensor x = RecordingTrace::tracer({2, 3, 5}, float32);
  Tensor w = RecordingTrace::tracer({4, 5}, float32);
  Tensor y = linear(x, w);
  EXPECT_EQ(y.sizes(), (Shape{2, 3, 4}));
  Tensor s = softmax(y, -1);
  Tensor mm = matmul(x, w.t());
  Tensor e = embedding(w, RecordingTrace::tracer({7}, int64));
  EXPECT_EQ(e.sizes(), (Shape{7, 5}));
  Tensor ce =
      cross_entropy(RecordingTrace::tracer({3, 4}, float32), RecordingTrace::tracer({3}, int64));
  EXPECT_EQ(ce.dim(), 0);
  ASSERT_EQ(scope.ctx.ops, (std::vector<std::string>{"linear", "softmax", "matmul", "embedding",
                                                     "cross_entropy"}));
  EXPECT_FALSE(scope.ctx.attrs[0].as<bool>("has_bias"));
  EXPECT_EQ(scope.ctx.attrs[1].as<int64_t>("dim"), 2);
  EXPECT_EQ(mm.sizes(), (Shape{2, 3, 4}));
  EXPECT_THROW(dropout(x, 0.5, true), GraphBreak);
  EXPECT_TRUE(dropout(x, 0.5, false).is_same(x));
  // Every composite has a decomposition.
  for (const char* op : {"linear", "softmax", "log_softmax", "layer_norm", "rms_norm", "batch_norm",
                         "cross_entropy", "mse_loss", "scaled_dot_product_attention"})
    EXPECT_NE(detail::find_decomposition(op), nullptr) << op;
}
