// The plan cache (runtime/plan_cache.h): a second compile of a graph, by a new
// compiled object, loads the schedule and kernel source that the first one
// stored, and gives the same kernels, plan, code, fusion log and values with
// no compiler run; options that change the plan key it; an unreadable plan is
// ignored and rewritten. Graph::hash tells apart graphs that differ only in
// a scalar's sign of zero or kind.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "compiler/compile_test_util.h"
#include "compiler/runtime/kernel_cache.h"

using namespace smelt;
using namespace smelt::compiler;
using smelt_test::ScopedEnv;

namespace {

class PlanCache : public smelt_test::CompilerTest {
 protected:
  void SetUp() override {
    CompilerTest::SetUp();
    dir_ = smelt_test::fresh_cache_dir("plan");
    cache_ = std::make_unique<ScopedEnv>("SMELT_CACHE_DIR", dir_);
  }
  void TearDown() override {
    cache_.reset();
    CompilerTest::TearDown();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::vector<std::string> plans() const {
    std::vector<std::string> out;
    for (auto& e : std::filesystem::directory_iterator(dir_))
      if (e.path().extension() == ".plan") out.push_back(e.path().string());
    return out;
  }
  std::string dir_;

 private:
  std::unique_ptr<ScopedEnv> cache_;
};

// Every kind of step: a GEMM with its epilogue, a reduction kernel with its
// consumers, a pointwise kernel, and an eager fallback.
std::vector<Tensor> model(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor h = gelu(matmul(x, w) + b);
  Tensor e = exp(h - amax(h, {-1}, true));
  Tensor p = e / sum(e, {-1}, true);
  return {p, cumsum(p, 1) * 0.5 - 0.125};
}

}  // namespace

TEST_F(PlanCache, SecondCompileLoadsThePlan) {
  Tensor x = randn({8, 16}), w = randn({16, 12}), b = randn({12});
  auto first = smelt::compile(model);
  std::vector<Tensor> a = first(x, w, b);
  EXPECT_FALSE(first.stats().last_plan_cache_hit);
  ASSERT_EQ(plans().size(), 1u);
  const int builds = compiler_invocations();
  auto second = smelt::compile(model);
  std::vector<Tensor> c = second(x, w, b);
  EXPECT_TRUE(second.stats().last_plan_cache_hit);
  EXPECT_TRUE(second.stats().last_cache_hit);
  EXPECT_EQ(compiler_invocations(), builds);
  EXPECT_EQ(second.stats().kernel_names, first.stats().kernel_names);
  EXPECT_EQ(second.launch_plan(), first.launch_plan());
  EXPECT_EQ(second.generated_code(), first.generated_code());
  EXPECT_EQ(second.stats().bytes_compiled, first.stats().bytes_compiled);
  std::vector<Tensor> want = model(x, w, b);
  ASSERT_EQ(c.size(), want.size());
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_TRUE(smelt_test::same(c[i], a[i])) << i;
    EXPECT_TRUE(smelt_test::close(c[i], want[i])) << i;
  }
}

TEST_F(PlanCache, FusionLogOfALoadedPlanIsTheSame) {
  Tensor x = randn({8, 16}), w = randn({16, 12}), b = randn({12});
  ScopedEnv logs("SMELT_LOGS", "fusion");
  testing::internal::CaptureStderr();
  smelt::compile(model)(x, w, b);
  std::string made = testing::internal::GetCapturedStderr();
  testing::internal::CaptureStderr();
  auto again = smelt::compile(model);
  again(x, w, b);
  std::string loaded = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(again.stats().last_plan_cache_hit);
  EXPECT_NE(made.find("fuse "), std::string::npos) << made;
  EXPECT_EQ(loaded, made);
}

TEST_F(PlanCache, OptionsThatChangeThePlanKeyIt) {
  Tensor x = randn({8, 16}), w = randn({16, 12}), b = randn({12});
  smelt::compile(model)(x, w, b);
  CompileOptions unfused;
  unfused.fuse = false;
  auto c = smelt::compile(model, unfused);
  std::vector<Tensor> got = c(x, w, b), want = model(x, w, b);
  EXPECT_FALSE(c.stats().last_plan_cache_hit);
  EXPECT_EQ(plans().size(), 2u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(smelt_test::close(got[i], want[i])) << i;
  // Another graph (another shape) is another plan.
  auto d = smelt::compile(model);
  d(randn({4, 16}), w, b);
  EXPECT_FALSE(d.stats().last_plan_cache_hit);
  EXPECT_EQ(plans().size(), 3u);
}

TEST_F(PlanCache, UnreadablePlanIsIgnoredAndRewritten) {
  Tensor x = randn({8, 16}), w = randn({16, 12}), b = randn({12});
  smelt::compile(model)(x, w, b);
  ASSERT_EQ(plans().size(), 1u);
  const std::string path = plans()[0];
  const auto size = std::filesystem::file_size(path);
  for (std::string bad : {std::string("garbage"), std::string("10\n{\"key\": 1}"), std::string()}) {
    {
      std::ofstream f(path, std::ios::binary | std::ios::trunc);
      f << bad;
    }
    auto c = smelt::compile(model);
    std::vector<Tensor> got = c(x, w, b), want = model(x, w, b);
    EXPECT_FALSE(c.stats().last_plan_cache_hit) << bad;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(smelt_test::close(got[i], want[i])) << i;
    EXPECT_EQ(std::filesystem::file_size(path), size) << "rewritten";
  }
  // A truncated plan (its kernel source cut short).
  std::filesystem::resize_file(path, size - 10);
  auto c = smelt::compile(model);
  c(x, w, b);
  EXPECT_FALSE(c.stats().last_plan_cache_hit);
  auto d = smelt::compile(model);
  d(x, w, b);
  EXPECT_TRUE(d.stats().last_plan_cache_hit);
}

TEST_F(PlanCache, GraphHashSeesScalarsExactly) {
  Tensor x = randn({4});
  auto hash_of = [&](auto f) { return smelt_test::trace_graph(f, x).hash(); };
  const uint64_t plus = hash_of([](const Tensor& x) { return x + 0.0; });
  EXPECT_EQ(plus, hash_of([](const Tensor& x) { return x + 0.0; }));
  EXPECT_NE(plus, hash_of([](const Tensor& x) { return x + (-0.0); }));
  EXPECT_NE(plus, hash_of([](const Tensor& x) { return x + 1e-30; }));
  EXPECT_NE(plus, hash_of([](const Tensor& x) { return x - 0.0; }));
  EXPECT_NE(hash_of([](const Tensor& x) { return sum(x, {0}); }),
            hash_of([](const Tensor& x) { return sum(x, {0}, true); }));
  EXPECT_NE(plus,
            smelt_test::trace_graph([](const Tensor& x) { return x + 0.0; }, randn({5})).hash());
}
