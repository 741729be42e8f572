// Fusion patterns: each compiled function is compared with eager and its
// schedule is checked (kernel count, kinds and names), as tinygrad's
// check_schedule does.
#include <gtest/gtest.h>

#include "compiler/compile_test_util.h"
#include "smelt/nn.h"

using namespace smelt;
using smelt_test::bitwise_same;
using smelt_test::close;
using smelt_test::count_prefix;
using smelt_test::names;
using smelt_test::reduction_kernels;

namespace {
class Fusion : public smelt_test::CompilerTest {};
}  // namespace

TEST_F(Fusion, PointwiseChainIsOneNamedKernel) {
  Tensor x = randn({257}), w = randn({257}), b = randn({257});
  auto f =
      compile([](const Tensor& x, const Tensor& w, const Tensor& b) { return sigmoid(x * w + b); });
  Tensor y = f(x, w, b);
  EXPECT_TRUE(close(y, sigmoid(x * w + b), 1e-6));
  ASSERT_EQ(f.stats().kernels, 1) << names(f);
  EXPECT_EQ(f.stats().kernel_names.at(0), "cpp_poi_fused_add_mul_sigmoid_0");
  EXPECT_EQ(f.stats().compiles, 1);
  EXPECT_EQ(f.stats().eager_calls, 0);
}

TEST_F(Fusion, BiasBroadcastOverRows) {
  Tensor x = randn({7, 33}), b = randn({33});
  auto f = compile([](const Tensor& x, const Tensor& b) { return relu(x + b) * 2; });
  Tensor y = f(x, b);
  EXPECT_TRUE(close(y, relu(x + b) * 2, 1e-6));
  EXPECT_EQ(f.stats().kernels, 1) << names(f);
  EXPECT_EQ(count_prefix(f, "cpp_poi_fused_"), 1) << names(f);
  // Column bias [R, 1] broadcast along the columns.
  Tensor c = randn({7, 1});
  auto g = compile([](const Tensor& x, const Tensor& c) { return x - c; });
  EXPECT_TRUE(close(g(x, c), x - c, 1e-6));
  EXPECT_EQ(g.stats().kernels, 1) << names(g);
}

TEST_F(Fusion, ManualSoftmaxIsOneReductionKernel) {
  Tensor x = randn({9, 130}) * 4;
  auto fn = [](const Tensor& x) {
    Tensor e = exp(x - amax(x, {-1}, true));
    return e / sum(e, {-1}, true);
  };
  auto f = compile(fn);
  Tensor y = f(x);
  EXPECT_TRUE(close(y, fn(x), 1e-6));
  EXPECT_TRUE(close(y, softmax(x, -1), 1e-6));
  ASSERT_EQ(f.stats().kernels, 1) << names(f);
  EXPECT_EQ(reduction_kernels(f), 1) << names(f);
}

TEST_F(Fusion, NormalizationOpsAreOneKernelEach) {
  Tensor x = randn({6, 40}) * 3 + 1;
  Tensor w = randn({40}), b = randn({40});
  {
    auto f = compile([](const Tensor& x) { return softmax(x, 1); });
    EXPECT_TRUE(close(f(x), softmax(x, 1), 1e-6));
    EXPECT_EQ(f.stats().kernels, 1) << names(f);
    EXPECT_EQ(reduction_kernels(f), 1) << names(f);
  }
  {
    auto f = compile([](const Tensor& x) { return log_softmax(x, -1); });
    EXPECT_TRUE(close(f(x), log_softmax(x, -1), 1e-5));
    EXPECT_EQ(f.stats().kernels, 1) << names(f);
    EXPECT_EQ(reduction_kernels(f), 1) << names(f);
  }
  {
    auto f = compile([](const Tensor& x, const Tensor& w, const Tensor& b) {
      return layer_norm(x, {40}, w, b);
    });
    EXPECT_TRUE(close(f(x, w, b), layer_norm(x, {40}, w, b), 1e-5));
    EXPECT_EQ(f.stats().kernels, 1) << names(f);
    EXPECT_EQ(reduction_kernels(f), 1) << names(f);
  }
  {
    auto f = compile([](const Tensor& x) { return var_mean(x, {1}); });
    auto [v, m] = f(x);
    auto [rv, rm] = var_mean(x, {1});
    EXPECT_TRUE(close(v, rv, 1e-5));
    EXPECT_TRUE(close(m, rm, 1e-6));
    EXPECT_EQ(f.stats().kernels, 1) << names(f);
    EXPECT_EQ(reduction_kernels(f), 1) << names(f);
  }
  {
    auto f = compile([](const Tensor& x, const Tensor& w) { return rms_norm(x, {40}, w, 1e-6); });
    EXPECT_TRUE(close(f(x, w), rms_norm(x, {40}, w, 1e-6), 1e-5));
    EXPECT_EQ(f.stats().kernels, 1) << names(f);
    EXPECT_EQ(reduction_kernels(f), 1) << names(f);
  }
}

TEST_F(Fusion, SumThenPointwiseOnTheResult) {
  Tensor x = randn({12, 50});
  auto fn = [](const Tensor& x) { return sqrt(abs(sum(x, {1})) + 1); };
  auto f = compile(fn);
  EXPECT_TRUE(close(f(x), fn(x), 1e-6));
  EXPECT_EQ(f.stats().kernels, 1) << names(f);
  EXPECT_EQ(reduction_kernels(f), 1) << names(f);
}

TEST_F(Fusion, ReductionOverDimZeroAndOverAllDims) {
  Tensor x = randn({37, 11});
  auto f0 = compile([](const Tensor& x) { return sum(x * 2, {0}); });
  Tensor y0 = f0(x);
  EXPECT_EQ(y0.sizes(), (Shape{11}));
  EXPECT_TRUE(close(y0, sum(x * 2, {0}), 1e-5));
  EXPECT_EQ(f0.stats().kernels, 1) << names(f0);
  EXPECT_EQ(reduction_kernels(f0), 1) << names(f0);

  auto fa = compile([](const Tensor& x) { return amax(exp(x)); });
  Tensor ya = fa(x);
  EXPECT_EQ(ya.dim(), 0);
  EXPECT_TRUE(close(ya, amax(exp(x)), 1e-6));
  EXPECT_EQ(fa.stats().kernels, 1) << names(fa);

  auto fm = compile([](const Tensor& x) { return mean(x, {0, 1}, true); });
  Tensor ym = fm(x);
  EXPECT_EQ(ym.sizes(), (Shape{1, 1}));
  EXPECT_TRUE(close(ym, mean(x, {0, 1}, true), 1e-6));
}

TEST_F(Fusion, HorizontalSinCosIsOneKernelWithTwoOutputs) {
  Tensor x = randn({300});
  auto f = compile([](const Tensor& x) { return std::make_tuple(sin(x), cos(x)); });
  auto [s, c] = f(x);
  EXPECT_TRUE(close(s, sin(x), 1e-6));
  EXPECT_TRUE(close(c, cos(x), 1e-6));
  ASSERT_EQ(f.stats().kernels, 1) << names(f);
  EXPECT_EQ(f.stats().kernel_names.at(0), "cpp_for_fused_cos_sin_0");
  // Two results: two distinct output buffers.
  EXPECT_NE(s.data_ptr(), c.data_ptr());
}

TEST_F(Fusion, LinearGeluIsGemmWithEpilogue) {
  nn::Sequential model(nn::Linear(16, 24), nn::GELU());
  Tensor x = randn({5, 16});
  Tensor ref = model(x);
  auto f = compile(model);
  Tensor y = f(x);
  EXPECT_TRUE(close(y, ref, 1e-5));
  ASSERT_EQ(f.stats().kernels, 1) << names(f);
  EXPECT_EQ(count_prefix(f, "cpp_tem_fused_addmm_gelu"), 1) << names(f);
}

TEST_F(Fusion, HalfLinearGeluFoldsWhenIntermediatesNeedNotRound) {
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor x = randn({5, 16}).to(dt), w = randn({24, 16}).to(dt), b = randn({24}).to(dt);
    auto fn = [](const Tensor& x, const Tensor& w, const Tensor& b) {
      return gelu(linear(x, w, b));
    };
    CompileOptions o;
    o.round_intermediates = false;
    auto f = compile(fn, o);
    Tensor y = f(x, w, b);
    ASSERT_EQ(f.stats().kernels, 1) << names(f);
    EXPECT_EQ(count_prefix(f, "cpp_tem_fused_addmm_gelu"), 1) << names(f);
    // One rounding of the float32 result: within half an ulp of the exact value.
    const Tensor want =
        gelu(linear(x.to(DType::Float64), w.to(DType::Float64), b.to(DType::Float64)));
    EXPECT_TRUE(close(y.to(DType::Float64), want, dt == DType::Float16 ? 1e-3 : 8e-3));
  }
}

TEST_F(Fusion, HalfLinearBiasFoldsAndRoundsOnceAsEager) {
  // Eager linear adds its bias to the float32 product and rounds once; the
  // compiled graph folds that bias into the GEMM's epilogue (rounding on),
  // and keeps the GELU after it, since eager rounds the linear's result first.
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor x = randn({2, 5, 16}).to(dt), w = randn({24, 16}).to(dt), b = randn({24}).to(dt);
    auto fn = [](const Tensor& x, const Tensor& w, const Tensor& b) {
      return gelu(linear(x, w, b));
    };
    auto f = compile(fn);
    Tensor y = f(x, w, b);
    EXPECT_TRUE(bitwise_same(y, fn(x, w, b))) << dtype_name(dt);
    ASSERT_EQ(f.stats().kernels, 2) << names(f);
    EXPECT_EQ(count_prefix(f, "cpp_tem_fused_addmm_"), 1) << names(f);
    EXPECT_EQ(count_prefix(f, "cpp_poi_fused_gelu_"), 1) << names(f);
    // A bias added by hand is two roundings eagerly: matmul, then add.
    auto by_hand = [](const Tensor& x, const Tensor& w, const Tensor& b) {
      return matmul(x, w.t()) + b;
    };
    auto h = compile(by_hand);
    EXPECT_TRUE(bitwise_same(h(x, w, b), by_hand(x, w, b))) << dtype_name(dt);
    EXPECT_EQ(count_prefix(h, "cpp_tem_"), 0) << names(h);
  }
}

TEST_F(Fusion, HalfLinearRoundsAsEagerForEveryBiasAndInputShape) {
  // Eager linear rounds once only for a contiguous [out] bias with a 2-D
  // weight (the GEMM's epilogue); a bias of another shape ([1, out], one
  // expanded over the rows) is matmul, then add: two roundings, which the
  // compiled graph must keep. A 1-D input takes the epilogue eagerly: one
  // rounding compiled too.
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor x = randn({2, 4, 9}).to(dt), w = randn({7, 9}).to(dt), b = randn({7}).to(dt);
    auto fn = [](const Tensor& x, const Tensor& w, const Tensor& b) { return linear(x, w, b); };
    for (const Tensor& bias :
         {b.view({1, 7}), b.view({1, 1, 7}), b.unsqueeze(0).expand({4, 7}), b}) {
      auto f = compile(fn);
      EXPECT_TRUE(bitwise_same(f(x, w, bias), fn(x, w, bias)))
          << dtype_name(dt) << " bias " << bias.sizes().size() << "-D";
    }
    Tensor x1 = randn({9}).to(dt);
    auto f = compile(fn);
    EXPECT_TRUE(bitwise_same(f(x1, w, b), fn(x1, w, b))) << dtype_name(dt) << " 1-D input";
    // One output feature: a [1] bias is contiguous whatever its stride (one
    // rounding eagerly), so it folds whatever its stride.
    Tensor b1 = b.slice(0, 0, 2, 2), w1 = w.narrow(0, 0, 1);
    auto g = compile(fn);
    EXPECT_TRUE(bitwise_same(g(x, w1, b1), fn(x, w1, b1))) << dtype_name(dt) << " [1] bias";
  }
}

TEST_F(Fusion, MatmulWithoutBiasIsExtern) {
  Tensor a = randn({8, 12}), b = randn({12, 5});
  auto f = compile([](const Tensor& a, const Tensor& b) { return matmul(a, b); });
  EXPECT_TRUE(close(f(a, b), matmul(a, b), 1e-5));
  ASSERT_EQ(f.stats().kernels, 1) << names(f);
  EXPECT_EQ(f.stats().kernel_names.at(0), "extern_matmul");
}

TEST_F(Fusion, ViewsFeedPointwiseWithoutCopies) {
  // Every operand is a view of an input; the sum of them is one kernel.
  Tensor a = randn({6, 4});     // permute / transpose -> [4, 6]
  Tensor b = randn({4, 12});    // slice with step 2 on dim 1 -> [4, 6]
  Tensor c = randn({6});        // expand -> [4, 6]
  Tensor d = randn({24});       // reshape of contiguous -> [4, 6]
  Tensor e = randn({3, 4, 6});  // select -> [4, 6]
  auto fn = [](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d,
               const Tensor& e) {
    return a.permute({1, 0}) + a.transpose(0, 1) * 2 + b.slice(1, 0, 12, 2) +
           c.expand({4, 6}) * d.reshape({4, 6}) - e.select(0, 1);
  };
  auto f = compile(fn);
  EXPECT_TRUE(close(f(a, b, c, d, e), fn(a, b, c, d, e), 1e-6));
  EXPECT_EQ(f.stats().kernels, 1) << names(f);
  EXPECT_EQ(count_prefix(f, "cpp_poi_fused_"), 1) << names(f);
  EXPECT_EQ(count_prefix(f, "fallback_"), 0) << names(f);
}

TEST_F(Fusion, OpWithoutLoweringRunsAsFallbackStep) {
  Tensor x = randn({3, 5});
  auto fn = [](const Tensor& x) { return stack({exp(x), x}, 1) * 3; };
  auto fs = compile(fn);
  EXPECT_TRUE(close(fs(x), fn(x), 1e-5));
  EXPECT_EQ(count_prefix(fs, "fallback_stack"), 1) << names(fs);
  EXPECT_EQ(fs.stats().kernels, 3) << names(fs);  // exp, stack's eager kernel, mul
  EXPECT_EQ(fs.stats().eager_calls, 0);
}

TEST_F(Fusion, FallbackWritesThroughAPermutedViewInsteadOfACopy) {
  // attention's [B, H, L, E] result, then its [B, L, H, E] copy (GPT-2's
  // y.transpose(1, 2).contiguous()): the op writes the copy's buffer through
  // a permuted view and no copy kernel runs. Kept whole here by turning
  // decomposition off (on CUDA the fused attention kernel keeps it whole).
  manual_seed(3);
  Tensor q = randn({2, 3, 5, 4}), k = randn({2, 3, 7, 4}), v = randn({2, 3, 7, 4});
  auto fn = [](const Tensor& q, const Tensor& k, const Tensor& v) {
    return scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, false)
        .transpose(1, 2)
        .contiguous();
  };
  CompileOptions o;
  o.decompose = false;
  auto f = compile(fn, o);
  Tensor y = f(q, k, v);
  EXPECT_TRUE(close(y, fn(q, k, v), 1e-6));
  EXPECT_TRUE(y.is_contiguous());
  EXPECT_EQ(y.sizes(), (Shape{2, 5, 3, 4}));
  ASSERT_EQ(f.stats().kernels, 1) << names(f);
  EXPECT_EQ(f.stats().kernel_names.at(0), "fallback_scaled_dot_product_attention");
  // A copy that is not a permutation of the whole result stays a kernel.
  auto g = compile(
      [](const Tensor& q, const Tensor& k, const Tensor& v) {
        return scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, false)
            .narrow(2, 1, 3)
            .contiguous();
      },
      o);
  Tensor z = g(q, k, v);
  EXPECT_TRUE(close(
      z,
      scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, false).narrow(2, 1, 3).contiguous(),
      1e-6));
  EXPECT_EQ(g.stats().kernels, 2) << names(g);
}

TEST_F(Fusion, DataMovementFusesWithItsNeighbours) {
  Tensor x = randn({3, 5}), y = randn({2, 5});
  auto fc = compile([](const Tensor& x, const Tensor& y) { return cat({x * 2, y}, 0) + 1; });
  EXPECT_TRUE(close(fc(x, y), cat({x * 2, y}, 0) + 1, 1e-6));
  EXPECT_EQ(fc.stats().kernels, 1) << names(fc);
  EXPECT_EQ(fc.stats().kernel_names[0], "cpp_poi_fused_add_cat_mul_0");

  Tensor idx = from_vector<int64_t>({0, 4, 2, 1, 1, 3}, {3, 2});
  auto fg = compile([](const Tensor& x, const Tensor& i) { return gather(x + 1, 1, i); });
  EXPECT_TRUE(close(fg(x, idx), gather(x + 1, 1, idx), 1e-6));
  EXPECT_EQ(fg.stats().kernels, 1) << names(fg);
  EXPECT_EQ(count_prefix(fg, "fallback_"), 0) << names(fg);
}

TEST_F(Fusion, PerfLogGivesEachKernelItsShareOfTheCopyBandwidth) {
  smelt_test::ScopedEnv logs("SMELT_LOGS", std::string("perf"));
  Tensor x = randn({1 << 16});
  auto f = compile([](const Tensor& x) { return exp(x) * 2; });
  testing::internal::CaptureStderr();
  Tensor y = f(x);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(close(y, exp(x) * 2, 1e-6));
  EXPECT_NE(err.find("copy bandwidth measured on cpu: "), std::string::npos) << err;
  const size_t line = err.find(f.stats().kernel_names.at(0));
  ASSERT_NE(line, std::string::npos) << err;
  const std::string row = err.substr(line, err.find('\n', line) - line);
  // time, bytes (4 read and 4 written per element), GB/s and the share
  EXPECT_NE(row.find(" 524288 bytes"), std::string::npos) << row;
  EXPECT_NE(row.find("% of copy"), std::string::npos) << row;
}

TEST_F(Fusion, LogsShowOutputCodeAndFusionDecisions) {
  smelt_test::ScopedEnv logs("SMELT_LOGS", std::string("output_code,fusion"));
  Tensor x = randn({64});
  auto f = compile([](const Tensor& x) { return tanh(x) * x + 3; });
  testing::internal::CaptureStderr();
  Tensor y = f(x);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(close(y, tanh(x) * x + 3, 1e-6));
  ASSERT_EQ(f.stats().kernel_names.size(), 1u);
  const std::string& k = f.stats().kernel_names[0];
  EXPECT_NE(err.find("[smelt:output_code]"), std::string::npos) << err;
  EXPECT_NE(err.find("[smelt:fusion]"), std::string::npos) << err;
  EXPECT_NE(err.find(k), std::string::npos) << err;
  EXPECT_NE(f.generated_code().find(k), std::string::npos);
  EXPECT_NE(f.launch_plan().find(k), std::string::npos) << f.launch_plan();
}
