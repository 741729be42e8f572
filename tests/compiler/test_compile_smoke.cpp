// End-to-end: compile() of small functions, compared with eager.
#include <gtest/gtest.h>

#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "compiler/compile_test_util.h"
#include "smelt/compile.h"
#include "smelt/ops.h"

using namespace smelt;
using smelt_test::ScopedEnv;

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

// A parallel pointwise kernel of few long rows runs rows x blocks of
// columns (KernelConfig::column_blocks): operands broadcast along the rows, along
// the columns and through a leading dim of size 1 land where eager puts them.
TEST(CompileSmoke, RowsCutIntoColumnBlocksEqualEager) {
  manual_seed(0);
  Tensor x = randn({2, 3, 16384}), b = randn({16384}), s = randn({2, 3, 1}), t = randn({1, 3, 1});
  auto f = [](const Tensor& x, const Tensor& b, const Tensor& s, const Tensor& t) {
    return gelu(x * b + s) - t;
  };
  auto compiled = compile(f);
  Tensor got = compiled(x, b, s, t);
  EXPECT_EQ(max_abs_diff(got, f(x, b, s, t)), 0.0);
  EXPECT_NE(compiled.generated_code().find("column_blocks=16"), std::string::npos)
      << compiled.generated_code();
}

// Rows cut into column blocks read their operands through views: a strided
// slice, a narrowed row (blocks of 471 columns: a vector tail in every block),
// a pad, a cat, tril (the column index in a mask), a permuted 3-d view and
// integer and float16 values, each bit for bit eager's on 1 and 3 threads.
TEST(CompileSmoke, RowsCutIntoColumnBlocksThroughViewsEqualEager) {
  manual_seed(0);
  using Fn = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<const char*, Fn>> cases = {
      {"slice", [](const Tensor& x) { return slice(x, 1, 1, std::nullopt, 2) * 2.0 + 1.0; }},
      {"narrow", [](const Tensor& x) { return narrow(x, 1, 3, x.size(1) - 67) * 2.0 + 1.0; }},
      {"pad",
       [](const Tensor& x) {
         return pad(x * 2.0, {5, 59}, 7.0) + 1.0;
       }},
      {"cat",
       [](const Tensor& x) {
         return cat({narrow(x, 1, 0, 100) * 2.0, x + 1.0}, 1) * 3.0;
       }},
      {"tril", [](const Tensor& x) { return tril(x * 2.0, 100) + 1.0; }},
      {"reshape",
       [](const Tensor& x) {
         return reshape(x, {x.size(0), 2, -1}) * 2.0 + 1.0;
       }},
      {"int", [](const Tensor& x) { return (x * 100.0).to(DType::Int64) * 3 + 1; }},
      {"half",
       [](const Tensor& x) { return (x.to(DType::Float16) * 2.0 + 1.0).to(DType::Float32); }},
  };
  const Tensor x = randn({4, 65536});
  const int threads = omp_get_max_threads();
  for (int t : {1, 3}) {
    omp_set_num_threads(t);
    for (const auto& [name, f] : cases) {
      auto compiled = compile(f);
      EXPECT_TRUE(smelt_test::bitwise_same(compiled(x), f(x))) << name << ", threads " << t;
      EXPECT_NE(compiled.generated_code().find("column_blocks="), std::string::npos)
          << name << "\n"
          << compiled.generated_code();
    }
  }
  omp_set_num_threads(threads);
}

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
  EXPECT_EQ(outer.stats().kernels, 1);   // mul and add fused across the nesting
  EXPECT_EQ(inner.stats().compiles, 0);  // the inner function was traced inline
}

TEST(CompileSmoke, RowBroadcastOperandsInOneKernel) {
  manual_seed(0);
  Tensor x = randn({64, 33}), b = randn({33}), c = randn({64, 1});
  auto f =
      compile([](const Tensor& x, const Tensor& b, const Tensor& c) { return relu(x + b) * c; });
  Tensor y = f(x, b, c);
  EXPECT_EQ(f.stats().kernels, 1);
  EXPECT_LT(max_abs_diff(y, relu(x + b) * c), 1e-6);
}

TEST(CompileSmoke, FullReductionsSplitAcrossThreadsStayAccurate) {
  manual_seed(0);
  Tensor x = randn({1 << 20});
  x.narrow(0, 777777, 1).fill_(100.0);
  auto f =
      compile([](const Tensor& x) { return std::make_tuple(sum(x * 2), argmax(x), x / amax(x)); });
  auto [s, a, d] = f(x);
  EXPECT_EQ(f.stats().kernels, 1);  // three reductions and the pointwise tail: one kernel
  EXPECT_NEAR(s.item<double>(), sum(x.to(DType::Float64) * 2).item<double>(), 1e-3);
  EXPECT_EQ(a.item<int64_t>(), 777777);
  EXPECT_LT(max_abs_diff(d, x / amax(x)), 1e-7);
}

TEST(CompileSmoke, UnusableCacheDirectoryRunsEagerlyWithAWarning) {
  Tensor x = arange(0, 6).to(DType::Float32);
  ScopedEnv cache("SMELT_CACHE_DIR", "/proc/smelt-cannot-create-this");
  auto f = compile([](const Tensor& x) { return exp(x) + 1; });
  testing::internal::CaptureStderr();
  Tensor y = f(x);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("smelt::compile warning: smelt::compile: the kernel cache directory "
                     "/proc/smelt-cannot-create-this cannot be created (No such file or "
                     "directory); set SMELT_CACHE_DIR to a directory of your own; this function "
                     "runs eagerly"),
            std::string::npos)
      << err;
  EXPECT_LT(max_abs_diff(y, exp(x) + 1), 1e-6);
  EXPECT_EQ(f.stats().compiles, 0);
  EXPECT_GE(f.stats().eager_calls, 1);
}

TEST(CompileSmoke, PathsAreNeverInterpretedByAShell) {
  // A cache directory whose name would run a command if a shell saw it.
  std::string dir = "/tmp/smelt-test-quote-a'b;touch smelt-pwned;'";
  {
    ScopedEnv cache("SMELT_CACHE_DIR", dir);
    auto f = compile([](const Tensor& x) { return sin(x) * 3; });
    Tensor x = arange(0, 5).to(DType::Float32);
    EXPECT_LT(max_abs_diff(f(x), sin(x) * 3), 1e-6);
    EXPECT_EQ(f.stats().compiles, 1);
  }
  EXPECT_NE(access("smelt-pwned", F_OK), 0);
}

TEST(CompileSmoke, HangingCompilerTimesOutAndRunsEagerly) {
  std::string script = "/tmp/smelt-test-hanging-cxx.sh";
  FILE* s = std::fopen(script.c_str(), "w");
  ASSERT_NE(s, nullptr);
  std::fputs("#!/bin/sh\n[ \"$1\" = --version ] && { echo fake 1.0; exit 0; }\nsleep 30\n", s);
  std::fclose(s);
  chmod(script.c_str(), 0755);
  ScopedEnv cxx("SMELT_CXX", script);
  ScopedEnv timeout("SMELT_COMPILE_TIMEOUT", "1");
  ScopedEnv cache("SMELT_CACHE_DIR", "/tmp/smelt-test-hanging-cache");
  auto f = compile([](const Tensor& x) { return cos(x) - 2; });
  Tensor x = arange(0, 4).to(DType::Float32);
  testing::internal::CaptureStderr();
  Tensor y = f(x);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("timed out"), std::string::npos) << err;
  EXPECT_LT(max_abs_diff(y, cos(x) - 2), 1e-6);
}

TEST(CompileSmoke, ResultsCreatedByTheFunctionAreFreshEveryCall) {
  auto f = compile([](const Tensor&) { return full({2}, 3.0); });
  Tensor y = f(ones({1}));
  y.fill_(0);  // must not leak into the next call
  EXPECT_EQ(f(ones({1})).to_vector<float>(), (std::vector<float>{3.f, 3.f}));
}

TEST(CompileSmoke, CapturedTensorsAreReadAtEveryCall) {
  Tensor w = ones({4});
  auto f = compile([&w](const Tensor& x) { return x + exp(w) * 2; });
  Tensor x = zeros({4});
  EXPECT_LT(max_abs_diff(f(x), x + exp(w) * 2), 1e-6);
  w.fill_(0);  // an in-place update of the captured tensor is seen, no recompile
  EXPECT_LT(max_abs_diff(f(x), full({4}, 2.0)), 1e-6);
  EXPECT_EQ(f.stats().compiles, 1);
}

TEST(CompileSmoke, AliasedArgumentsWithAWriteRunEagerly) {
  auto fn = [](const Tensor& a, const Tensor& b) {
    Tensor t = a;
    t.add_(1);
    return b * 1;
  };
  Tensor base = zeros({4}), base2 = zeros({4});
  Tensor want = fn(base2, base2.narrow(0, 0, 2));
  auto f = compile(fn);
  Tensor got = f(base, base.narrow(0, 0, 2));
  EXPECT_EQ(got.to_vector<float>(), want.to_vector<float>());  // [1, 1], as eager
  EXPECT_EQ(base.to_vector<float>(), base2.to_vector<float>());
  EXPECT_EQ(f.stats().graph_breaks, 1);
}

// ---- regressions found by review ---------------------------------------------

TEST(CompileSmoke, ConstantWrittenIntoPartOfAnInput) {
  auto fn = [](const Tensor& x) {
    Tensor t = x;
    t.narrow(0, 1, 1).fill_(5.0);
    return t.sum();
  };
  Tensor a = arange(0, 8).to(DType::Float32), b = a.clone();
  Tensor want = fn(b);
  auto f = compile(fn);
  EXPECT_LT(max_abs_diff(f(a), want), 1e-6);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());  // x[1] = 5 written back
}

TEST(CompileSmoke, MatrixVectorProductKeepsItsBiasAdd) {
  manual_seed(1);
  Tensor a = randn({5, 4}), v = randn({4}), r = randn({5});
  auto f =
      compile([](const Tensor& a, const Tensor& v, const Tensor& r) { return matmul(a, v) + r; });
  EXPECT_LT(max_abs_diff(f(a, v, r), matmul(a, v) + r), 1e-5);
}

TEST(CompileSmoke, EagerAndCompiledMatmulFromTwoThreads) {
  manual_seed(2);
  Tensor x = randn({64, 64}), y = randn({64, 64});
  Tensor want = matmul(x, y);
  auto f = compile([](const Tensor& a, const Tensor& b) { return matmul(a, b); });
  f(x, y);
  std::vector<double> err(2, 0);
  auto work = [&](int t) {
    for (int i = 0; i < 50; ++i) {
      err[t] = std::max(err[t], max_abs_diff(t ? f(x, y) : matmul(x, y), want));
    }
  };
  std::thread t0(work, 0), t1(work, 1);
  t0.join();
  t1.join();
  EXPECT_LT(err[0], 1e-4);
  EXPECT_LT(err[1], 1e-4);
}

TEST(CompileSmoke, ReturnedMutatedInputIsTheInput) {
  auto f = compile([](const Tensor& x) {
    Tensor t = x;
    t.add_(1);
    return t.t();
  });
  Tensor x = zeros({2, 3});
  Tensor y = f(x);
  EXPECT_EQ(y.storage(), x.storage());  // a view of the caller's tensor, as eager
  y.fill_(7);
  EXPECT_EQ(x.to_vector<float>(), std::vector<float>(6, 7.f));
}

TEST(CompileSmoke, EqualResultsAreDistinctTensors) {
  auto f = compile([](const Tensor& x) { return std::make_tuple(x + 1, x + 1); });
  auto [a, b] = f(zeros({3}));
  a.fill_(0);
  EXPECT_EQ(b.to_vector<float>(), std::vector<float>(3, 1.f));
}

TEST(CompileSmoke, FewLongRowsAreSplitAcrossThreads) {
  manual_seed(3);
  Tensor x = randn({3, 1 << 18});
  auto f = compile([](const Tensor& x) { return sum(x, {1}); });
  Tensor y = f(x);
  EXPECT_LT(max_abs_diff(y, sum(x.to(DType::Float64), {1})), 1e-3);
}
