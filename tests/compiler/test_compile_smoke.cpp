// End-to-end: compile() of small functions, compared with eager.
#include <gtest/gtest.h>

#include <cstdlib>

#include "smelt/compile.h"
#include "smelt/ops.h"

using namespace smelt;

namespace {
struct CacheEnv : ::testing::Environment {
  void SetUp() override {
    if (!std::getenv("SMELT_CACHE_DIR")) setenv("SMELT_CACHE_DIR", "/tmp/smelt-test-cache", 0);
  }
};
[[maybe_unused]] auto* const env = ::testing::AddGlobalTestEnvironment(new CacheEnv);

double max_abs_diff(const Tensor& a, const Tensor& b) {
  auto x = a.to(DType::Float64).to_vector<double>();
  auto y = b.to(DType::Float64).to_vector<double>();
  EXPECT_EQ(x.size(), y.size());
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}
}  // namespace

TEST(CompileSmoke, PointwiseChainIsOneKernel) {
  manual_seed(0);
  Tensor x = randn({1000}), w = randn({1000}), b = randn({1000});
  auto f =
      compile([](const Tensor& x, const Tensor& w, const Tensor& b) { return sigmoid(x * w + b); });
  Tensor y = f(x, w, b);
  Tensor ref = sigmoid(x * w + b);
  EXPECT_EQ(f.stats().kernels, 1);
  EXPECT_LT(max_abs_diff(y, ref), 1e-6);
}

TEST(CompileSmoke, NestedCompiledFunctionIsInlined) {
  auto inner = compile([](const Tensor& x) { return x * 2; });
  auto outer = compile([&inner](const Tensor& x) { return inner(x) + 1; });
  Tensor x = ones({4});
  EXPECT_EQ(outer(x).to_vector<float>(), std::vector<float>(4, 3.f));
  EXPECT_EQ(outer.stats().kernels, 1);      // mul and add fused across the nesting
  EXPECT_EQ(inner.stats().compiles, 0);     // the inner function was traced inline
}

TEST(CompileSmoke, RowBroadcastOperandsInOneKernel) {
  manual_seed(0);
  Tensor x = randn({64, 33}), b = randn({33}), c = randn({64, 1});
  auto f = compile([](const Tensor& x, const Tensor& b, const Tensor& c) { return relu(x + b) * c; });
  Tensor y = f(x, b, c);
  EXPECT_EQ(f.stats().kernels, 1);
  EXPECT_LT(max_abs_diff(y, relu(x + b) * c), 1e-6);
}

TEST(CompileSmoke, FullReductionsSplitAcrossThreadsStayAccurate) {
  manual_seed(0);
  Tensor x = randn({1 << 20});
  x.narrow(0, 777777, 1).fill_(100.0);
  auto f = compile([](const Tensor& x) {
    return std::make_tuple(sum(x * 2), argmax(x), x / amax(x));
  });
  auto [s, a, d] = f(x);
  EXPECT_EQ(f.stats().kernels, 1);  // three reductions and the pointwise tail: one kernel
  EXPECT_NEAR(s.item<double>(), sum(x.to(DType::Float64) * 2).item<double>(), 1e-3);
  EXPECT_EQ(a.item<int64_t>(), 777777);
  EXPECT_LT(max_abs_diff(d, x / amax(x)), 1e-7);
}
