// Graphs of tens of thousands of nodes (issue 7, "Graph size"): a chain of
// 40,000 adds compiles on a thread with a 256 KiB stack (nothing recurses as
// deep as the graph), equals eager bit for bit, is cut into kernels of at most
// kMaxKernelOps ops whose source splits into translation units, and a second
// compile loads its plan. The exact recount keeps shared producers from
// cutting short chains; a chain whose every value is returned is checked in
// linear time; translation units keep every kernel whole and in order.
#include <gtest/gtest.h>
#include <pthread.h>

#include <cstring>
#include <filesystem>
#include <functional>

#include "compiler/compile_test_util.h"
#include "compiler/fusion/kernel_config.h"
#include "compiler/runtime/kernel_cache.h"
#include "compiler/runtime/units.h"

using namespace smelt;
using namespace smelt::compiler;
using smelt_test::ScopedEnv;

namespace {

class GraphSize : public smelt_test::CompilerTest {};

/// Runs `f` on a new thread whose stack is `bytes` long, and waits for it;
/// an exception `f` throws is rethrown here.
void run_with_stack(size_t bytes, const std::function<void()>& f) {
  struct Call {
    const std::function<void()>* f;
    std::exception_ptr error;
  } call{&f, nullptr};
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, bytes), 0);
  pthread_t t;
  auto body = [](void* p) -> void* {
    auto* c = static_cast<Call*>(p);
    try {
      (*c->f)();
    } catch (...) {
      c->error = std::current_exception();
    }
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&t, &attr, body, &call), 0);
  pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
  if (call.error) std::rethrow_exception(call.error);
}

/// y + k, `n` times.
Tensor add_chain(const Tensor& y0, const Tensor& k, int64_t n) {
  Tensor y = y0;
  for (int64_t i = 0; i < n; ++i) y = y + k;
  return y;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  auto x = a.to_vector<float>(), y = b.to_vector<float>();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_F(GraphSize, ChainOf40000AddsOnASmallStackEqualsEager) {
  // A fresh cache: the whole pipeline runs (trace, passes, fusion, codegen, build).
  const std::string dir = smelt_test::fresh_cache_dir("chain");
  ScopedEnv cache("SMELT_CACHE_DIR", dir);
  constexpr int64_t kNodes = 40000;
  Tensor y = randn({16}), k = randn({});
  Tensor want = add_chain(y, k, kNodes);
  auto f = [](const Tensor& y, const Tensor& k) { return add_chain(y, k, kNodes); };
  Tensor cold, warm;
  CompileStats cold_stats, warm_stats;
  int builds = 0;
  run_with_stack(256 * 1024, [&] {
    auto c = smelt::compile(f);
    cold = c(y, k);
    cold_stats = c.stats();
    builds = compiler_invocations();
    auto again = smelt::compile(f);  // a new compiled object: the plan comes from the cache
    warm = again(y, k);
    warm_stats = again.stats();
    builds = compiler_invocations() - builds;
  });
  EXPECT_TRUE(same_bits(cold, want));
  EXPECT_TRUE(same_bits(warm, want));
  EXPECT_EQ(cold_stats.compiles, 1);
  EXPECT_EQ(cold_stats.eager_calls, 0);
  // Cut into kernels of at most kMaxKernelOps adds (one add per node).
  EXPECT_GE(cold_stats.kernels, kNodes / (kMaxKernelOps + 1));
  EXPECT_LE(cold_stats.kernels, kNodes / (kMaxKernelOps / 2));
  EXPECT_FALSE(cold_stats.last_plan_cache_hit);
  EXPECT_TRUE(warm_stats.last_plan_cache_hit);
  EXPECT_TRUE(warm_stats.last_cache_hit);
  EXPECT_EQ(builds, 0) << "a warm compile runs no compiler";
  EXPECT_EQ(warm_stats.kernel_names, cold_stats.kernel_names);
  EXPECT_EQ(warm_stats.last_compile_phases.codegen_ms, 0.0) << "codegen is skipped on a plan hit";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST_F(GraphSize, ChainIsCutEveryKMaxKernelOps) {
  Tensor y = randn({16}), k = randn({});
  constexpr int64_t kNodes = 3 * kMaxKernelOps;
  auto c = smelt::compile([](const Tensor& y, const Tensor& k) { return add_chain(y, k, kNodes); });
  Tensor got = c(y, k);
  EXPECT_TRUE(same_bits(got, add_chain(y, k, kNodes)));
  // 3 * cap adds in kernels of cap + 1 adds: 3 kernels.
  EXPECT_EQ(c.stats().kernels, 3) << smelt_test::names(c);
  std::string code = c.generated_code();
  size_t adds = 0;
  for (size_t p = code.find("smelt::scalar::add<float>("); p != std::string::npos;
       p = code.find("smelt::scalar::add<float>(", p + 1))
    ++adds;
  EXPECT_EQ(adds, static_cast<size_t>(kNodes)) << "each add computed once";
}

TEST_F(GraphSize, SharedProducersAreCountedOnce) {
  // Each step reads its input twice through two ops: an estimate that adds
  // its inputs' counts doubles every step, the exact count grows by 5.
  constexpr int kSteps = 40;  // 5 * 40 ops: under the cap
  static_assert(5 * kSteps <= kMaxKernelOps);
  auto f = [](const Tensor& x) {
    Tensor y = x;
    for (int i = 0; i < kSteps; ++i) y = sin(y) * 0.5 + cos(y) * 0.25;
    return y;
  };
  Tensor x = randn({64});
  auto c = smelt::compile(f);
  EXPECT_TRUE(smelt_test::same(c(x), f(x)));
  EXPECT_EQ(c.stats().kernels, 1) << smelt_test::names(c);
}

TEST_F(GraphSize, WideGraphIsCutAndEqualsEager) {
  // Many independent outputs of one input: horizontal fusion stops at the cap
  // on a kernel's stores.
  auto f = [](const Tensor& x) {
    std::vector<Tensor> out;
    for (int i = 0; i < 600; ++i) out.push_back(x * static_cast<double>(i) + 1.0);
    return out;
  };
  Tensor x = randn({32});
  auto c = smelt::compile(f);
  std::vector<Tensor> got = c(x), want = f(x);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(same_bits(got[i], want[i])) << i;
  // 600 outputs in kernels of kMaxKernelOutputs stores each.
  const int64_t want_kernels = (600 + kMaxKernelOutputs - 1) / kMaxKernelOutputs;
  EXPECT_EQ(c.stats().kernels, want_kernels) << smelt_test::names(c);
}

TEST_F(GraphSize, ChainReturningEveryValueEqualsEager) {
  // Every value is a store its successor reads: kernels of kMaxKernelOutputs
  // stores, each checked once (not through all the stores before it).
  constexpr int kNodes = 1000;
  auto f = [](const Tensor& y0, const Tensor& k) {
    std::vector<Tensor> out;
    Tensor y = y0;
    for (int i = 0; i < kNodes; ++i) out.push_back(y = y + k);
    return out;
  };
  Tensor y = randn({16}), k = randn({});
  auto c = smelt::compile(f);
  std::vector<Tensor> got = c(y, k), want = f(y, k);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_TRUE(same_bits(got[i], want[i])) << i;
  EXPECT_EQ(c.stats().kernels, (kNodes + kMaxKernelOutputs - 1) / kMaxKernelOutputs)
      << smelt_test::names(c);
}

TEST(Units, LongSourceSplitsIntoWholeKernelsInOrder) {
  Schedule s;
  for (int k = 0; k < 10; ++k) {
    Step st;
    st.kind = Step::Kind::Kernel;
    st.name = "k" + std::to_string(k);
    for (int l = 0; l < kUnitLines / 2; ++l) st.source += "// " + st.name + "\n";
    s.steps.push_back(st);
    Step other;  // extern and fallback steps have no source
    other.kind = Step::Kind::Fallback;
    s.steps.push_back(other);
  }
  std::vector<KernelUnit> one = split_units(s, "PRE", 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].kernels.size(), 10u);
  std::vector<KernelUnit> units = split_units(s, "PRE", 3);
  ASSERT_EQ(units.size(), 3u) << "5 * kUnitLines lines on 3 threads";
  std::vector<std::string> order;
  std::vector<size_t> counts;
  for (auto& u : units) {
    EXPECT_EQ(u.source.rfind("PRE\n", 0), 0u);
    EXPECT_GE(u.kernels.size(), 3u);
    for (auto& k : u.kernels) {
      order.push_back(k);
      EXPECT_NE(u.source.find("// " + k + "\n"), std::string::npos);
    }
    counts.push_back(u.kernels.size());
  }
  for (int k = 0; k < 10; ++k) EXPECT_EQ(order[k], "k" + std::to_string(k));
  std::vector<KernelUnit> again = join_units(s, "PRE", counts);
  ASSERT_EQ(again.size(), units.size());
  for (size_t u = 0; u < units.size(); ++u) EXPECT_EQ(again[u].source, units[u].source);
  // A short source is one unit whatever the parallelism.
  Schedule small;
  small.steps.push_back(s.steps[0]);
  EXPECT_EQ(split_units(small, "PRE", 8).size(), 1u);
  EXPECT_TRUE(split_units(Schedule{}, "PRE", 8).empty());
}
