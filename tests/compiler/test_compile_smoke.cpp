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
