// Scans (cumsum) lowered into loop IR: a scan kernel walks each row of the
// scanned dim in index order with eager's accumulate type, so compiled results
// are bitwise eager's for every dtype, dim and layout; pointwise producers are
// inlined into it and pointwise consumers run at each step (kernel counts
// asserted); consumers that read another position stay outside.
#include <gtest/gtest.h>

#include <limits>

#include "compiler/compile_test_util.h"

using namespace smelt;
using smelt_test::bitwise_same;
using smelt_test::count_prefix;
using smelt_test::names;
using smelt_test::reduction_kernels;

namespace {

class ScanFusion : public smelt_test::CompilerTest {};

/// Cumsums of `x` over every dim and through views (transposed, strided
/// slice, broadcast), with and without dtype=: one compiled graph.
std::vector<Tensor> cumsums(const Tensor& x, std::optional<DType> dt) {
  return {cumsum(x, 0, dt),
          cumsum(x, 1, dt),
          cumsum(x, -1, dt),
          cumsum(x.transpose(0, 2), 1, dt),
          cumsum(x.slice(1, 1, std::nullopt, 2), 1, dt),
          cumsum(x.slice(2, 0, 1, 1).expand({-1, -1, 3}), 2, dt)};
}

/// Values whose float sums depend on the order they are added in.
Tensor spread(const Shape& s, DType dt) {
  Tensor x = randn(s) * 300;
  if (dt == DType::Bool) return gt(x, zeros(s));
  return x.to(dt);
}

}  // namespace

TEST_F(ScanFusion, CumsumOfPointwiseThenPointwiseIsOneKernel) {
  Tensor x = randn({6, 40});
  auto fn = [](const Tensor& x) { return cumsum(exp(x), 1) * 2; };
  auto f = compile(fn);
  EXPECT_TRUE(bitwise_same(f(x), fn(x)));
  EXPECT_EQ(f.stats().kernels, 1) << names(f);
  EXPECT_EQ(f.stats().kernel_names.at(0), "cpp_per_fused_cumsum_exp_mul_0");
  EXPECT_EQ(count_prefix(f, "fallback_"), 0) << names(f);
  // The scan's config says so; each row is folded in order, float32 in double.
  EXPECT_NE(f.generated_code().find("cpp scan"), std::string::npos) << f.generated_code();
  EXPECT_NE(f.generated_code().find("smelt::reduce::Sum<double>::step"), std::string::npos)
      << f.generated_code();
}

TEST_F(ScanFusion, ProducersAndConsumersFuseInEveryDim) {
  Tensor x = randn({5, 7, 9}), m = gt(randn({5, 7, 9}), zeros({5, 7, 9}));
  Tensor n = arange(1, 8).to(DType::Float32).reshape({7, 1});
  for (int64_t d : {0, 1, 2, -1}) {
    // masked producer inlined, a broadcast divisor and an add after the scan
    auto fn = [d](const Tensor& x, const Tensor& m, const Tensor& n) {
      return cumsum(exp(x) * m, d) / n + 1;
    };
    auto f = compile(fn);
    EXPECT_TRUE(bitwise_same(f(x, m, n), fn(x, m, n))) << "dim " << d;
    EXPECT_EQ(f.stats().kernels, 1) << "dim " << d << ": " << names(f);
    EXPECT_EQ(reduction_kernels(f), 1) << names(f);
  }
}

TEST_F(ScanFusion, BitwiseEagerForEveryDTypeDimAndLayout) {
  struct Case {
    DType in;
    std::optional<DType> dt;
  };
  const std::vector<Case> cases = {
      {DType::Float32, std::nullopt},  {DType::Float64, std::nullopt},
      {DType::BFloat16, std::nullopt}, {DType::Float16, std::nullopt},
      {DType::Int32, std::nullopt},    {DType::Bool, std::nullopt},
      {DType::UInt8, std::nullopt},    {DType::Float32, DType::Float64},
      {DType::Int32, DType::Float32},  {DType::Float32, DType::BFloat16},
  };
  for (const Case& c : cases) {
    // [4, 33, 6]: dim 1 is the middle dim, long enough for rounding to differ by order.
    Tensor x = spread({4, 33, 6}, c.in);
    auto fn = [dt = c.dt](const Tensor& x) { return cumsums(x, dt); };
    auto f = compile(fn);
    // A non-contiguous input (permuted) as well as a contiguous one.
    for (const Tensor& in : {x, x.permute({2, 1, 0}).contiguous().permute({2, 1, 0})}) {
      std::vector<Tensor> got = f(in), want = fn(in);
      ASSERT_EQ(got.size(), want.size());
      for (size_t k = 0; k < got.size(); ++k)
        EXPECT_TRUE(bitwise_same(got[k], want[k]))
            << dtype_name(c.in) << " -> " << (c.dt ? dtype_name(*c.dt) : "default") << ", case "
            << k << ", contiguous " << in.is_contiguous();
    }
    EXPECT_EQ(count_prefix(f, "fallback_"), 0) << names(f);
    // int and bool inputs promote to int64, as PyTorch's cumsum does
    if (!c.dt && !is_floating(c.in)) {
      EXPECT_EQ(f(x)[0].dtype(), DType::Int64);
    }
  }
}

TEST_F(ScanFusion, LargeInputsRunRowsInParallelAndStayBitwise) {
  Tensor x = randn({96, 700}) * 100;  // over the parallel grain
  auto fn = [](const Tensor& x) {
    return std::vector<Tensor>{cumsum(x * 3, 0), cumsum(sigmoid(x), 1) - x};
  };
  auto f = compile(fn);
  std::vector<Tensor> got = f(x), want = fn(x);
  EXPECT_TRUE(bitwise_same(got[0], want[0]));
  EXPECT_TRUE(bitwise_same(got[1], want[1]));
  EXPECT_EQ(f.stats().kernels, 2) << names(f);
  EXPECT_NE(f.generated_code().find("cpp scan parallel"), std::string::npos);
}

// The layout follows the scanned dim: rows along inner positions are scanned
// side by side (lanes, the inner loop contiguous), a row that fits is computed,
// scanned and consumed in three loops (persistent), a long row in one; every
// layout adds each row in eager's order.
TEST_F(ScanFusion, LayoutsFollowTheScannedDimAndStayBitwise) {
  struct Case {
    Shape shape;
    int64_t dim;
    const char* config;  // part of the kernel's config line
    const char* prefix;
  };
  const std::vector<Case> cases = {
      {{40, 96}, 0, "cpp scan lanes=96 idx64", "cpp_red_"},
      {{512, 4096}, 0, "cpp scan parallel lanes=256 idx64", "cpp_red_"},  // 16 groups of rows
      {{3, 1031}, 0, "cpp scan persistent prefill", "cpp_per_"},          // 1031 is prime: no lanes
      {{64, 700}, 1, "cpp scan parallel persistent prefill", "cpp_per_"},
      {{2, 9000}, 1, "cpp scan idx64", "cpp_red_"},  // longer than a persistent row
  };
  for (const Case& c : cases) {
    Tensor x = randn(c.shape) * 10;
    auto fn = [d = c.dim](const Tensor& x) { return cumsum(tanh(x), d) * x; };
    auto f = compile(fn);
    EXPECT_TRUE(bitwise_same(f(x), fn(x))) << ::testing::PrintToString(c.shape) << " dim " << c.dim;
    EXPECT_NE(f.generated_code().find(c.config), std::string::npos) << c.config << "\n"
                                                                    << f.generated_code();
    EXPECT_EQ(f.stats().kernels, 1) << names(f);
    EXPECT_EQ(count_prefix(f, c.prefix), 1) << names(f);
  }
}

TEST_F(ScanFusion, EmptyLengthOneAndZeroDim) {
  const std::vector<std::pair<Shape, int64_t>> cases = {{{0, 5}, 1}, {{0, 5}, 0}, {{3, 0}, 1},
                                                        {{3, 0}, 0}, {{1, 5}, 0}, {{5, 1}, 1},
                                                        {{1}, 0},    {{}, 0}};
  for (auto& [shape, d] : cases) {
    Tensor x = randn(shape);
    auto fn = [d = d](const Tensor& x) { return cumsum(x + 1, d) * 2; };
    auto f = compile(fn);
    EXPECT_TRUE(bitwise_same(f(x), fn(x))) << ::testing::PrintToString(shape) << " dim " << d;
    EXPECT_EQ(count_prefix(f, "fallback_"), 0) << names(f);
  }
  // A 0-dim input is copied, a length-1 dim added to 0: -0.0 stays -0.0 only in the first.
  Tensor z = full({}, -0.0), z1 = full({1}, -0.0);
  auto fn = [](const Tensor& x) { return cumsum(x, 0); };
  auto f = compile(fn);
  EXPECT_TRUE(bitwise_same(f(z), fn(z)));
  EXPECT_TRUE(std::signbit(f(z).item<double>()));
  EXPECT_TRUE(bitwise_same(f(z1), fn(z1)));
  EXPECT_FALSE(std::signbit(f(z1).item<double>()));
}

TEST_F(ScanFusion, IntegerSumsWrapAsEager) {
  const int64_t big = std::numeric_limits<int64_t>::max() - 1;
  Tensor x = smelt_test::make_exact<int64_t>({big, 5, -7, big, 3, 2}, {2, 3});
  Tensor i = smelt_test::make_exact<int32_t>({2147483647, 1, 1, -5, 6, 7}, {3, 2});
  auto fn = [](const Tensor& x, const Tensor& i) {
    return std::vector<Tensor>{cumsum(x, 1), cumsum(i, 0), cumsum(i, 0, DType::Int32)};
  };
  auto f = compile(fn);
  std::vector<Tensor> got = f(x, i), want = fn(x, i);
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(bitwise_same(got[k], want[k])) << k;
  EXPECT_EQ(got[2].dtype(), DType::Int32);
}

TEST_F(ScanFusion, ScansOfOneDomainShareAKernel) {
  Tensor x = randn({8, 30});
  // two scans over the same rows, and a scan of a scan read at the same step
  auto fn = [](const Tensor& x) {
    return cumsum(x, 1) + cumsum(x * x, 1) - cumsum(cumsum(x, 1), 1);
  };
  auto f = compile(fn);
  EXPECT_TRUE(bitwise_same(f(x), fn(x)));
  EXPECT_EQ(f.stats().kernels, 1) << names(f);
  // scans of different dims cannot share one
  auto g = [](const Tensor& x) { return cumsum(x, 0) + cumsum(x, 1); };
  auto fg = compile(g);
  EXPECT_TRUE(bitwise_same(fg(x), g(x)));
  EXPECT_EQ(fg.stats().kernels, 2) << names(fg);
}

TEST_F(ScanFusion, ConsumersReadingAnotherPositionRunAfterTheScan) {
  Tensor x = randn({12, 12});
  // the transpose reads the scan at (j, i), the slice one step ahead: neither
  // is the position the scan has reached, so both run in a kernel of their own
  auto fn = [](const Tensor& x) {
    Tensor c = cumsum(x, 1);
    return std::vector<Tensor>{c.t() + x, c.slice(1, 1, std::nullopt, 1) * 2};
  };
  auto f = compile(fn);
  std::vector<Tensor> got = f(x), want = fn(x);
  EXPECT_TRUE(bitwise_same(got[0], want[0]));
  EXPECT_TRUE(bitwise_same(got[1], want[1]));
  EXPECT_EQ(reduction_kernels(f), 1) << names(f);
  EXPECT_EQ(f.stats().kernels, 3) << names(f);
  // a reduction of a scan is a kernel of its own, after it
  auto g = [](const Tensor& x) { return sum(cumsum(x, 1), {1}); };
  auto fg = compile(g);
  EXPECT_TRUE(bitwise_same(fg(x), g(x)));
  EXPECT_EQ(fg.stats().kernels, 2) << names(fg);
}
