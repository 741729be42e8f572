// matmul (torch.matmul semantics) and the BLAS bridge (gemm_strided_batched,
// gemm_fused), against float64 references computed here with plain loops.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/blas.h"
#include "core/storage.h"
#include "smelt/ops.h"
#include "test_util.h"

using namespace smelt;
using smelt_test::expect_close;
using smelt_test::expect_error_mentions;
using smelt_test::make;
using smelt_test::seq;

namespace {

/// Reference batched product of contiguous row-major [B, m, k] @ [B, k, n].
std::vector<double> ref_bmm(const std::vector<double>& a, const std::vector<double>& b, int64_t B,
                            int64_t m, int64_t n, int64_t k, bool b_shared = false) {
  std::vector<double> c(B * m * n, 0.0);
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += a[(bi * m + i) * k + p] * b[((b_shared ? 0 : bi) * k + p) * n + j];
        c[(bi * m + i) * n + j] = s;
      }
  return c;
}

}  // namespace

TEST(Matmul, DotGivesZeroDim) {
  auto a = seq(5), b = seq(5, 0.5, 1.0);
  Tensor r = matmul(make(a, {5}), make(b, {5}));
  EXPECT_EQ(r.dim(), 0);
  EXPECT_EQ(r.dtype(), float64);
  double want = 0;
  for (int i = 0; i < 5; ++i) want += a[i] * b[i];
  EXPECT_NEAR(r.item<double>(), want, 1e-12);
}

TEST(Matmul, MatrixVectorAndVectorMatrix) {
  auto a = seq(15), v = seq(5, 0.9), w = seq(3, 0.2);
  Tensor mv = matmul(make(a, {3, 5}), make(v, {5}));
  EXPECT_EQ(mv.sizes(), (Shape{3}));
  expect_close(mv.to_vector<double>(), ref_bmm(a, v, 1, 3, 1, 5), 1e-12);
  Tensor vm = matmul(make(w, {3}), make(a, {3, 5}));
  EXPECT_EQ(vm.sizes(), (Shape{5}));
  expect_close(vm.to_vector<double>(), ref_bmm(w, a, 1, 1, 5, 3), 1e-12);
  // 1-D with a batched right operand: [3] @ [2, 3, 5] -> [2, 5]
  auto bb = seq(30, 0.11);
  Tensor vb = matmul(make(w, {3}), make(bb, {2, 3, 5}));
  EXPECT_EQ(vb.sizes(), (Shape{2, 5}));
  std::vector<double> w2(w);
  w2.insert(w2.end(), w.begin(), w.end());
  expect_close(vb.to_vector<double>(), ref_bmm(w2, bb, 2, 1, 5, 3), 1e-12);
  // batched left with 1-D right: [2, 4, 3] @ [3] -> [2, 4]
  auto ab = seq(24, 0.3);
  Tensor bv = matmul(make(ab, {2, 4, 3}), make(w, {3}));
  EXPECT_EQ(bv.sizes(), (Shape{2, 4}));
  expect_close(bv.to_vector<double>(), ref_bmm(ab, w, 1, 8, 1, 3), 1e-12);
}

TEST(Matmul, TwoDFloat32AndFloat64) {
  for (DType dt : {float32, float64}) {
    auto a = seq(7 * 9), b = seq(9 * 6, 0.21, 0.5);
    Tensor c = matmul(make(a, {7, 9}, dt), make(b, {9, 6}, dt));
    EXPECT_EQ(c.sizes(), (Shape{7, 6}));
    EXPECT_EQ(c.dtype(), dt);
    expect_close(c.to(float64).to_vector<double>(), ref_bmm(a, b, 1, 7, 6, 9),
                 dt == float32 ? 1e-5 : 1e-12);
  }
}

TEST(Matmul, BatchedFoldsSharedRightOperand) {
  auto a = seq(2 * 3 * 5), b = seq(5 * 4, 0.7);
  Tensor c = matmul(make(a, {2, 3, 5}), make(b, {5, 4}));
  EXPECT_EQ(c.sizes(), (Shape{2, 3, 4}));
  expect_close(c.to_vector<double>(), ref_bmm(a, b, 2, 3, 4, 5, true), 1e-12);
}

TEST(Matmul, BroadcastBatchDims) {
  // [2, 1, 3, 5] @ [4, 5, 2] -> [2, 4, 3, 2]
  auto a = seq(2 * 3 * 5), b = seq(4 * 5 * 2, 0.13);
  Tensor c = matmul(make(a, {2, 1, 3, 5}), make(b, {4, 5, 2}));
  ASSERT_EQ(c.sizes(), (Shape{2, 4, 3, 2}));
  std::vector<double> got = c.to_vector<double>();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t q = 0; q < 2; ++q) {
          double s = 0;
          for (int64_t p = 0; p < 5; ++p) s += a[(i * 3 + r) * 5 + p] * b[(j * 5 + p) * 2 + q];
          EXPECT_NEAR(got[((i * 4 + j) * 3 + r) * 2 + q], s, 1e-12);
        }
}

TEST(Matmul, NonContiguousOperands) {
  // Transposed weight (as in linear) and transposed input, float32.
  auto a = seq(6 * 4), b = seq(5 * 6, 0.3);
  Tensor at = make(a, {6, 4}, float32).t();  // [4, 6], strides (1, 4)
  Tensor bt = make(b, {5, 6}, float32).t();  // [6, 5]
  Tensor c = matmul(at, bt);
  ASSERT_EQ(c.sizes(), (Shape{4, 5}));
  std::vector<double> got = c.to(float64).to_vector<double>();
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      double s = 0;
      for (int64_t p = 0; p < 6; ++p) s += a[p * 4 + i] * b[j * 6 + p];
      EXPECT_NEAR(got[i * 5 + j], s, 1e-5 * (1 + std::fabs(s)));
    }
  // Permuted batch dims give non-uniform batch offsets; a column slice gives a
  // row stride the BLAS cannot take without packing.
  auto x = seq(3 * 2 * 4 * 7, 0.05);
  Tensor xp = make(x, {3, 2, 4, 7}).permute({1, 0, 2, 3}).slice(3, 0, 7, 2);  // [2, 3, 4, 4]
  auto y = seq(4 * 3, 0.4);
  Tensor yt = make(y, {3, 4}).t();  // [4, 3]
  Tensor z = matmul(xp, yt);
  ASSERT_EQ(z.sizes(), (Shape{2, 3, 4, 3}));
  std::vector<double> zg = z.to_vector<double>();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t r = 0; r < 4; ++r)
        for (int64_t q = 0; q < 3; ++q) {
          double s = 0;
          for (int64_t p = 0; p < 4; ++p) s += x[((j * 2 + i) * 4 + r) * 7 + 2 * p] * y[q * 4 + p];
          EXPECT_NEAR(zg[((i * 3 + j) * 4 + r) * 3 + q], s, 1e-12);
        }
}

TEST(Matmul, HeadViewsBecomeOneBatchedCall) {
  // Attention's q and k: per-head views [B, H, T, D] of [B, T, H * D]
  // projections, whose B and H strides do not combine: B calls of H
  // products each, unless matmul copies them (as PyTorch's matmul does).
  const int64_t B = 6, T = 5, H = 3, D = 4;
  auto qv = seq(B * T * H * D, 0.11), kv = seq(B * T * H * D, 0.23, 1.0);
  Tensor q = make(qv, {B, T, H * D}).view({B, T, H, D}).transpose(1, 2);
  Tensor k = make(kv, {B, T, H * D}).view({B, T, H, D}).transpose(1, 2);
  Tensor kt = k.transpose(-2, -1);
  backend::Gemm g;
  g.m = T;
  g.n = T;
  g.k = D;
  g.a = {nullptr, 0, H * D, 1};
  g.b = {nullptr, 0, 1, H * D};
  g.c_row_stride = T;
  const std::vector<backend::GemmBatchDim> views = {{B, T * H * D, T * H * D, H * T * T, 0},
                                                    {H, D, D, T * T, 0}};
  EXPECT_EQ(backend::gemm_calls_over_batch(g, views), B);
  g.a = {nullptr, 0, D, 1};
  g.b = {nullptr, 0, 1, D};
  const std::vector<backend::GemmBatchDim> packed = {{B, H * T * D, H * T * D, H * T * T, 0},
                                                     {H, T * D, T * D, T * T, 0}};
  EXPECT_EQ(backend::gemm_calls_over_batch(g, packed), 1);
  // The values: those of the contiguous operands, exactly.
  Tensor c = matmul(q, kt);
  ASSERT_EQ(c.sizes(), (Shape{B, H, T, T}));
  EXPECT_EQ(c.to_vector<double>(), matmul(q.contiguous(), kt.contiguous()).to_vector<double>());
  std::vector<double> got = c.to_vector<double>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d)
            s += qv[((b * T + i) * H + h) * D + d] * kv[((b * T + j) * H + h) * D + d];
          EXPECT_NEAR(got[((b * H + h) * T + i) * T + j], s, 1e-12);
        }
}

// matmul's batch copy of a transposed view (k^T of attention) is
// column-major: the product equals that of the contiguous operands, exactly,
// for every dtype, with the view as either operand or both, size-1 and
// size-0 matrix dims, a batch dim broadcast by expand (stride 0), a last dim
// of stride 0, a 1-D operand; bool still raises; gradients through the views
// equal those through contiguous copies.
TEST(Matmul, ColumnMajorBatchCopiesEqualContiguousOperands) {
  manual_seed(3);
  // [B, H, T, D] per-head view of a [B, T, H * D] projection: B calls of H
  // products each, so matmul copies it (B > 4).
  auto heads = [](int64_t B, int64_t T, int64_t H, int64_t D, DType dt) {
    return (randn({B, T, H * D}) * 4).to(dt).view({B, T, H, D}).transpose(1, 2);
  };
  for (DType dt : {DType::Float64, DType::Float32, DType::Float16, DType::BFloat16, DType::Int32,
                   DType::Int64}) {
    for (auto [B, T, H, D] : std::vector<std::array<int64_t, 4>>{
             {6, 5, 3, 4}, {5, 1, 3, 4}, {5, 7, 2, 1}, {6, 70, 2, 33}, {5, 3, 3, 0}}) {
      SCOPED_TRACE(::testing::Message()
                   << dtype_name(dt) << " B" << B << " T" << T << " H" << H << " D" << D);
      Tensor q = heads(B, T, H, D, dt), kt = heads(B, T, H, D, dt).transpose(-2, -1),
             v = heads(B, T, H, D, dt);
      // float64 and integers exactly; the others to a few units of their
      // last place (the GEMM may round a transposed read differently).
      const double tol = dt == DType::Float32 ? 1e-5 : dt == DType::Float16 ? 4e-3 : 3e-2;
      auto same = [&](const Tensor& a, const Tensor& b) {
        const std::vector<double> got = matmul(a, b).to_vector<double>(),
                                  want = matmul(a.contiguous(), b.contiguous()).to_vector<double>();
        if (dt == DType::Float64 || !is_floating(dt)) {
          EXPECT_EQ(got, want);
        } else {
          expect_close(got, want, tol);
        }
      };
      same(q, kt);  // the view on the right
      same(kt, v);  // on the left
      same(kt, q.transpose(-2, -1).transpose(-2, -1));
      same(kt.transpose(-2, -1), kt);  // both copied
    }
  }
  const int64_t B = 6, T = 5, H = 3, D = 4;
  Tensor q = heads(B, T, H, D, DType::Float64);
  auto same = [](const Tensor& a, const Tensor& b) {
    EXPECT_EQ(matmul(a, b).to_vector<double>(),
              matmul(a.contiguous(), b.contiguous()).to_vector<double>());
  };
  // A batch dim broadcast by expand; a last dim of stride 0; a 1-D operand.
  Tensor kt1 = heads(1, T, H, D, DType::Float64).transpose(-2, -1);
  same(q, kt1.expand({B, H, D, T}));
  same(q.permute({1, 0, 2, 3}),
       randn({B, H, D, 1}).to(DType::Float64).expand({B, H, D, T}).permute({1, 0, 2, 3}));
  Tensor kt = heads(B, T, H, D, DType::Float64).transpose(-2, -1);
  same(kt, randn({T}).to(DType::Float64));
  same(randn({D}).to(DType::Float64), kt);
  expect_error_mentions([&] { matmul(q.gt(0.0), kt.gt(0.0)); }, "matmul");
  // Gradients through the views and through contiguous copies.
  Tensor qb = randn({B, T, H * D}).to(DType::Float64), kb = randn({B, T, H * D}).to(DType::Float64);
  Tensor w = randn({B, H, T, T}).to(DType::Float64);
  std::vector<std::vector<double>> grads;
  for (bool copy : {false, true}) {
    Tensor qv = qb.detach(), kv = kb.detach();
    qv.requires_grad_(true);
    kv.requires_grad_(true);
    Tensor qh = qv.view({B, T, H, D}).transpose(1, 2);
    Tensor kh = kv.view({B, T, H, D}).transpose(1, 2).transpose(-2, -1);
    if (copy) {
      qh = qh.contiguous();
      kh = kh.contiguous();
    }
    (matmul(qh, kh) * w).sum().backward();
    grads.push_back(qv.grad().to_vector<double>());
    grads.push_back(kv.grad().to_vector<double>());
  }
  EXPECT_EQ(grads[0], grads[2]);
  EXPECT_EQ(grads[1], grads[3]);
}

TEST(Matmul, IntegerAndWraparound) {
  std::vector<int64_t> a = {1, -2, 3, 4, 5, -6}, b = {7, 8, -9, 10, 11, 12};
  Tensor c = matmul(from_vector<int64_t>(a, {2, 3}), from_vector<int64_t>(b, {3, 2}));
  EXPECT_EQ(c.dtype(), int64);
  EXPECT_EQ(c.to_vector<int64_t>(), (std::vector<int64_t>{58, 24, -83, 10}));
  // int8 products and sums wrap in int8, as PyTorch: 100*2 + 100*2 = 400 -> -112.
  Tensor i8 = matmul(from_vector<int8_t>({100, 100}, {1, 2}), from_vector<int8_t>({2, 2}, {2, 1}));
  EXPECT_EQ(i8.dtype(), int8);
  EXPECT_EQ(i8.to_vector<int64_t>()[0], static_cast<int8_t>(400));
  Tensor i32 = matmul(from_vector<int32_t>({3, 4}, {2}), from_vector<int32_t>({5, 6}, {2}));
  EXPECT_EQ(i32.dtype(), int32);
  EXPECT_EQ(i32.item<int64_t>(), 39);
}

TEST(Matmul, HalfAndBFloat16RoundOnce) {
  for (DType dt : {float16, bfloat16}) {
    auto a = seq(8 * 16), b = seq(16 * 4, 0.17);
    Tensor ta = make(a, {8, 16}, dt), tb = make(b, {16, 4}, dt);
    std::vector<double> ar = ta.to(float64).to_vector<double>();
    std::vector<double> br = tb.to(float64).to_vector<double>();
    Tensor c = matmul(ta, tb);
    EXPECT_EQ(c.dtype(), dt);
    std::vector<double> want = ref_bmm(ar, br, 1, 8, 4, 16);
    std::vector<double> got = c.to(float64).to_vector<double>();
    for (size_t i = 0; i < want.size(); ++i) {
      // float32 accumulation then one rounding: equals the rounded reference
      // up to float32 error straddling a rounding boundary.
      double rounded = dt == float16 ? static_cast<float>(Half(static_cast<float>(want[i])))
                                     : static_cast<float>(BFloat16(static_cast<float>(want[i])));
      double ulp = dt == float16 ? 1e-3 : 8e-3;
      EXPECT_NEAR(got[i], rounded, ulp * (1 + std::fabs(want[i]))) << i;
    }
  }
}

TEST(Matmul, EmptyAndZeroInnerDim) {
  Tensor c = matmul(zeros({3, 0}, float32), zeros({0, 4}, float32));
  EXPECT_EQ(c.sizes(), (Shape{3, 4}));
  for (float v : c.to_vector<float>()) EXPECT_EQ(v, 0.0f);
  Tensor e = matmul(zeros({0, 5}, float32), zeros({5, 2}, float32));
  EXPECT_EQ(e.sizes(), (Shape{0, 2}));
  Tensor eb = matmul(zeros({2, 0, 3, 5}, float64), zeros({5, 1}, float64));
  EXPECT_EQ(eb.sizes(), (Shape{2, 0, 3, 1}));
  Tensor d = matmul(zeros({0}, float64), zeros({0}, float64));
  EXPECT_EQ(d.dim(), 0);
  EXPECT_EQ(d.item<double>(), 0.0);
}

TEST(Matmul, NanPropagates) {
  Tensor a = from_vector<float>({NAN, 1.0f, 2.0f, 3.0f}, {2, 2});
  Tensor b = from_vector<float>({1.0f, 0.0f, 0.0f, 1.0f}, {2, 2});
  std::vector<float> c = matmul(a, b).to_vector<float>();
  EXPECT_TRUE(std::isnan(c[0]));
  EXPECT_TRUE(std::isnan(c[1]));  // NaN * 0 = NaN
  EXPECT_EQ(c[2], 2.0f);
  EXPECT_EQ(c[3], 3.0f);
}

TEST(Matmul, Errors) {
  Tensor m35 = zeros({3, 5}, float64), m42 = zeros({4, 2}, float64);
  expect_error_mentions([&] { matmul(m35, m42); }, "[3, 5] and [4, 2]");
  expect_error_mentions([&] { matmul(zeros({3}, float32), zeros({4}, float32)); }, "matmul");
  expect_error_mentions([&] { matmul(scalar_tensor(1.0), zeros({2}, float64)); }, "1-D");
  expect_error_mentions(
      [&] {
        matmul(zeros({2, 2}, float32), zeros({2, 2}, float64));
      },
      "same dtype");
  expect_error_mentions([&] { matmul(zeros({2, 2}, kBool), zeros({2, 2}, kBool)); }, "bool");
  expect_error_mentions(
      [&] {
        matmul(zeros({2, 3, 4}, float32), zeros({3, 4, 5}, float32));
      },
      "broadcast");
  EXPECT_THROW(matmul(zeros({5}, float32), zeros({4, 2}, float32)), smelt::Error);
}

// ---------------------------------------------------------------- blas.h ----

TEST(Blas, StridedBatchedBetaAndColumnMajorC) {
  // C (column-major 3x2) = 2 * A @ B + 1 * C, batch 2, B shared (batch stride 0).
  std::vector<double> a = seq(2 * 3 * 4), b = seq(4 * 2, 0.6);
  std::vector<double> c(2 * 6, 1.5), c0 = c;
  cpu::gemm_strided_batched(float64, 2, 3, 2, 4, {a.data(), 12, 4, 1}, {b.data(), 0, 2, 1},
                            c.data(), 6, 1, 3, 2.0, 1.0);
  std::vector<double> want = ref_bmm(a, b, 2, 3, 2, 4, true);
  for (int64_t bi = 0; bi < 2; ++bi)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 2; ++j)
        EXPECT_NEAR(c[bi * 6 + i + j * 3], 2 * want[(bi * 3 + i) * 2 + j] + 1.5, 1e-12);
  // Strides no BLAS takes (row stride 0 == broadcast rows): packed first.
  std::vector<float> af = {1, 2}, bf = {3, 4, 5, 6}, cf(4);
  cpu::gemm_strided_batched(float32, 1, 2, 2, 2, {af.data(), 0, 0, 1}, {bf.data(), 0, 2, 1},
                            cf.data(), 0, 2, 1);
  EXPECT_EQ(cf, (std::vector<float>{13, 16, 13, 16}));
  EXPECT_THROW(cpu::gemm_strided_batched(kBool, 1, 1, 1, 1, {}, {}, nullptr, 0, 1, 1),
               smelt::Error);
}

TEST(Blas, FusedEpilogueMatchesReference) {
  const int64_t B = 2, m = 5, n = 7, k = 6;
  std::vector<double> a = seq(B * m * k), bm = seq(k * n, 0.29), bias = seq(n, 0.8),
                      res = seq(B * m * n, 0.07);
  std::vector<double> prod = ref_bmm(a, bm, B, m, n, k, true);
  auto act = [](const std::string& name, double x) {
    if (name == "relu") return x > 0 ? x : 0.0;
    if (name == "gelu_erf") return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    if (name == "gelu_tanh")
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    if (name == "sigmoid") return 1 / (1 + std::exp(-x));
    if (name == "silu") return x / (1 + std::exp(-x));
    if (name == "tanh") return std::tanh(x);
    return x;
  };
  for (std::string name : {"", "relu", "gelu_erf", "gelu_tanh", "sigmoid", "silu", "tanh"}) {
    for (DType dt : {float32, float64, bfloat16}) {
      Tensor ta = make(a, {B, m, k}, dt), tb = make(bm, {k, n}, dt).t().contiguous().t();
      Tensor tbias = make(bias, {n}, dt), tres = make(res, {B, m, n}, dt);
      Tensor out = zeros({B, m, n}, dt);
      cpu::GemmEpilogue e;
      e.bias = tbias.data_ptr();
      e.activation = name;
      e.residual = tres.data_ptr();
      e.residual_batch_stride = m * n;
      e.residual_row_stride = n;
      e.residual_col_stride = 1;
      cpu::gemm_fused(dt, B, m, n, k, {ta.data_ptr(), m * k, k, 1},
                      {tb.data_ptr(), 0, tb.stride(0), tb.stride(1)}, out.data_ptr(), m * n, n, 1,
                      e);
      std::vector<double> got = out.to(float64).to_vector<double>();
      const double tol = dt == float64 ? 1e-12 : dt == float32 ? 2e-5 : 3e-2;
      for (int64_t i = 0; i < B * m * n; ++i) {
        double want = act(name, prod[i] + bias[i % n]) + res[i];
        EXPECT_NEAR(got[i], want, tol * (1 + std::fabs(want))) << name << " " << dtype_name(dt);
      }
    }
  }
  // Residual broadcast over rows and batches ([n] residual), no bias.
  std::vector<float> af = {1, 2, 3, 4, 5, 6};
  std::vector<float> bf = {1, 0, 0, 1}, rf = {10, 20}, cf(6);
  cpu::GemmEpilogue e;
  e.residual = rf.data();
  e.residual_col_stride = 1;
  cpu::gemm_fused(float32, 1, 3, 2, 2, {af.data(), 0, 2, 1}, {bf.data(), 0, 2, 1}, cf.data(), 0, 2,
                  1, e);
  EXPECT_EQ(cf, (std::vector<float>{11, 22, 13, 24, 15, 26}));
  cpu::GemmEpilogue bad;
  bad.activation = "softplus";
  EXPECT_THROW(cpu::gemm_fused(float32, 1, 1, 1, 1, {af.data(), 0, 1, 1}, {bf.data(), 0, 1, 1},
                               cf.data(), 0, 1, 1, bad),
               smelt::Error);
}

TEST(Blas, BothFloat32LibrariesMatchReference) {
  // Odd sizes, A read row-major and transposed (the backward's dW = dY^T X).
  const int64_t m = 37, n = 29, k = 53;
  std::vector<double> a = seq(m * k, 0.013), b = seq(k * n, 0.021);
  std::vector<double> want = ref_bmm(a, b, 1, m, n, k);
  std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end());
  std::vector<float> at(m * k);  // A^T stored row-major: k x m
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) at[p * m + i] = af[i * k + p];
  const cpu::CpuGemmLibrary before = cpu::cpu_gemm_library();
  for (cpu::CpuGemmLibrary lib : {cpu::CpuGemmLibrary::OneDnn, cpu::CpuGemmLibrary::OpenBlas}) {
    cpu::set_cpu_gemm_library(lib);
    EXPECT_EQ(cpu::cpu_gemm_library(), lib);
    for (bool transposed : {false, true}) {
      std::vector<float> c(m * n, -1.f);
      const cpu::MatrixRef ar =
          transposed ? cpu::MatrixRef{at.data(), 0, 1, m} : cpu::MatrixRef{af.data(), 0, k, 1};
      cpu::gemm_fused(float32, 1, m, n, k, ar, {bf.data(), 0, n, 1}, c.data(), 0, n, 1,
                      cpu::GemmEpilogue{});
      for (int64_t i = 0; i < m * n; ++i)
        EXPECT_NEAR(c[i], want[i], 2e-5 * (1 + std::fabs(want[i])))
            << cpu::cpu_gemm_library_name(lib) << (transposed ? " A^T" : " A") << " at " << i;
    }
    // bfloat16 operands: converted, multiplied as float32 by the same library, rounded once.
    Tensor ta = make(a, {m, k}, bfloat16), tb = make(b, {k, n}, bfloat16);
    Tensor out = zeros({m, n}, bfloat16);
    cpu::gemm_strided_batched(bfloat16, 1, m, n, k, {ta.data_ptr(), 0, k, 1},
                              {tb.data_ptr(), 0, n, 1}, out.data_ptr(), 0, n, 1);
    std::vector<double> got = out.to(float64).to_vector<double>();
    for (int64_t i = 0; i < m * n; ++i)
      EXPECT_NEAR(got[i], want[i], 3e-2 * (1 + std::fabs(want[i])))
          << cpu::cpu_gemm_library_name(lib) << " bfloat16 at " << i;
  }
  cpu::set_cpu_gemm_library(before);
  EXPECT_EQ(cpu::parse_cpu_gemm_library(nullptr), cpu::CpuGemmLibrary::OneDnn);
  EXPECT_EQ(cpu::parse_cpu_gemm_library(""), cpu::CpuGemmLibrary::OneDnn);
  EXPECT_EQ(cpu::parse_cpu_gemm_library("onednn"), cpu::CpuGemmLibrary::OneDnn);
  EXPECT_EQ(cpu::parse_cpu_gemm_library("openblas"), cpu::CpuGemmLibrary::OpenBlas);
  expect_error_mentions([] { cpu::parse_cpu_gemm_library("mkl"); }, "SMELT_CPU_GEMM=mkl");
}

namespace {
/// One float32 product C = act(A @ B + bias) through gemm_fused, B given as
/// the transposed [n, k] weight a Linear holds (column stride k), identified
/// by `id` (unknown: read in place).
std::vector<float> weight_product(const std::vector<float>& a, const std::vector<float>& w,
                                  const std::vector<float>& bias, int64_t m, int64_t n, int64_t k,
                                  const cpu::OperandIdentity& id) {
  std::vector<float> c(m * n, -1.f);
  cpu::GemmEpilogue e;
  e.bias = bias.data();
  e.activation = "gelu_erf";
  cpu::gemm_fused(float32, 1, m, n, k, {a.data(), 0, k, 1}, {w.data(), 0, 1, k}, c.data(), 0, n, 1,
                  e, 1.0, id);
  return c;
}
}  // namespace

TEST(Blas, PackedWeightsGiveTheSameBitsAndFollowTheVersion) {
  const int64_t m = 96, n = 80, k = 72;
  std::vector<double> ad = seq(m * k, 0.013), wd = seq(n * k, 0.021), bd = seq(n, 0.1);
  std::vector<float> a(ad.begin(), ad.end()), w(wd.begin(), wd.end()), bias(bd.begin(), bd.end());
  cpu::clear_packed_weights();
  const int64_t packs0 = cpu::packed_weight_stats().packs;
  const cpu::OperandIdentity id{Storage::next_serial() + 1000, 3};
  const std::vector<float> plain = weight_product(a, w, bias, m, n, k, {});
  EXPECT_EQ(cpu::packed_weight_stats().packs, packs0) << "an unknown B is read in place";
  const std::vector<float> packed = weight_product(a, w, bias, m, n, k, id);
  ASSERT_EQ(plain.size(), packed.size());
  EXPECT_EQ(std::memcmp(plain.data(), packed.data(), plain.size() * sizeof(float)), 0)
      << "the repacked weight gives other bits than the plain one";
  // oneDNN prefers a blocked weight on a CPU with AVX-512 or AVX2: one copy, made once.
  const cpu::PackedWeightStats s1 = cpu::packed_weight_stats();
  EXPECT_LE(s1.packs, packs0 + 1);
  weight_product(a, w, bias, m, n, k, id);
  EXPECT_EQ(cpu::packed_weight_stats().packs, s1.packs) << "the same version repacked";
  // An in-place write (a new version) is seen; the old version's copy is not used.
  for (float& x : w) x = -x;
  const std::vector<float> neg_plain = weight_product(a, w, bias, m, n, k, {});
  const std::vector<float> neg_packed = weight_product(a, w, bias, m, n, k, {id.serial, 4});
  EXPECT_EQ(std::memcmp(neg_plain.data(), neg_packed.data(), plain.size() * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(plain.data(), neg_packed.data(), plain.size() * sizeof(float)), 0);
  if (s1.packs > packs0) {
    EXPECT_EQ(cpu::packed_weight_stats().packs, s1.packs + 1);
    EXPECT_EQ(cpu::packed_weight_stats().entries, 1u);
  }
  cpu::clear_packed_weights();
  EXPECT_EQ(cpu::packed_weight_stats().entries, 0u);
  EXPECT_EQ(cpu::packed_weight_stats().bytes, 0u);
}

TEST(Blas, KnownBroadcastWeightStillFallsBack) {
  // B's rows broadcast (row stride 0): oneDNN cannot read it, packed or not;
  // the product falls back to the loop and stays right.
  const int64_t m = 5, n = 7, k = 6;
  std::vector<double> ad = seq(m * k, 0.5), rowd = seq(n, 0.25);
  std::vector<float> a(ad.begin(), ad.end()), row(rowd.begin(), rowd.end());
  std::vector<double> bfull(k * n);
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) bfull[p * n + j] = row[j];
  std::vector<double> want = ref_bmm(std::vector<double>(a.begin(), a.end()), bfull, 1, m, n, k);
  cpu::clear_packed_weights();
  const int64_t packs0 = cpu::packed_weight_stats().packs;
  std::vector<float> c(m * n, -1.f);
  cpu::gemm_fused(float32, 1, m, n, k, {a.data(), 0, k, 1}, {row.data(), 0, 0, 1}, c.data(), 0, n,
                  1, cpu::GemmEpilogue{}, 1.0, cpu::OperandIdentity{Storage::next_serial() + 7, 0});
  for (int64_t i = 0; i < m * n; ++i)
    EXPECT_NEAR(c[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << "at " << i;
  EXPECT_EQ(cpu::packed_weight_stats().packs, packs0);
  EXPECT_EQ(cpu::packed_weight_stats().entries, 0u);
}
