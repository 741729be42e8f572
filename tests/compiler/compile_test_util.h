// Shared helpers of the compiler test suite (tests/compiler/test_*.cpp).
//
// Every compiler test runs with a private SMELT_CACHE_DIR under /tmp:
// CompilerTest (a fixture) points it at the suite's cache, which is kept
// between runs so that graphs other tests already built cost no compiler run;
// tests about the cache itself take a fresh directory (fresh_cache_dir()).
#pragma once
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "compiler/codegen/generate.h"
#include "compiler/fusion/scheduler.h"
#include "compiler/passes/passes.h"
#include "compiler/trace/tracer.h"
#include "smelt/autograd.h"
#include "smelt/compile.h"
#include "smelt/ops.h"
#include "test_util.h"

namespace smelt_test {

using smelt::DType;
using smelt::Tensor;

/// The suite's shared kernel cache (private to this user).
inline std::string suite_cache_dir() {
  return "/tmp/smelt-compiler-tests-" + std::to_string(::getuid());
}

/// A new, empty directory under /tmp, for tests about the cache. The returned
/// path is a directory that does not exist yet (smelt creates it 0700).
inline std::string fresh_cache_dir(const std::string& tag) {
  std::string tmpl = "/tmp/smelt-h8-" + tag + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  char* made = ::mkdtemp(buf.data());
  if (!made) return "/tmp/smelt-h8-" + tag + "-fallback-" + std::to_string(::getpid());
  std::string dir = made;
  ::rmdir(dir.c_str());  // let smelt create it (and set its mode)
  return dir + "-cache";
}

/// Sets an environment variable for one scope and restores the old value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

/// Fixture: private kernel cache, no logs, reproducible random inputs, grad mode
/// off (these tests compile inference: module parameters require grad, and a
/// compiled call that would need autograd runs eagerly instead).
class CompilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    no_grad_ = std::make_unique<smelt::NoGradGuard>();
    cache_ = std::make_unique<ScopedEnv>("SMELT_CACHE_DIR", suite_cache_dir());
    logs_ = std::make_unique<ScopedEnv>("SMELT_LOGS", std::nullopt);
    cxx_ = std::make_unique<ScopedEnv>("SMELT_CXX", std::nullopt);
    smelt::manual_seed(1234);
  }
  void TearDown() override {
    cxx_.reset();
    logs_.reset();
    cache_.reset();
    no_grad_.reset();
  }

 private:
  std::unique_ptr<ScopedEnv> cache_, logs_, cxx_;
  std::unique_ptr<smelt::NoGradGuard> no_grad_;
};

/// Same shape and dtype, and every element within `tol` (absolute + relative);
/// NaN must match NaN.
inline ::testing::AssertionResult close(const Tensor& got, const Tensor& want, double tol = 1e-5) {
  if (got.sizes() != want.sizes())
    return ::testing::AssertionFailure() << "shape " << ::testing::PrintToString(got.sizes())
                                         << " vs " << ::testing::PrintToString(want.sizes());
  if (got.dtype() != want.dtype())
    return ::testing::AssertionFailure() << "dtype " << smelt::dtype_name(got.dtype()) << " vs "
                                         << smelt::dtype_name(want.dtype());
  auto a = vals(got), b = vals(want);
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      if (std::isnan(a[i]) && std::isnan(b[i])) continue;
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
    }
    if (a[i] == b[i]) continue;  // also equal infinities
    if (!(std::abs(a[i] - b[i]) <= tol * (1 + std::abs(b[i]))))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << a[i] << " vs " << b[i] << " (tol " << tol << ")";
  }
  return ::testing::AssertionSuccess();
}

/// Bit-for-bit equality of the values (as float64), NaN == NaN.
inline ::testing::AssertionResult same(const Tensor& got, const Tensor& want) {
  return close(got, want, 0.0);
}

/// Compiled `got` bitwise equal to eager `want`: same shape and dtype, equal
/// values with equal signs of zero, NaN equals NaN; integers compared exactly.
inline ::testing::AssertionResult bitwise_same(const Tensor& got, const Tensor& want) {
  if (got.sizes() != want.sizes() || got.dtype() != want.dtype())
    return ::testing::AssertionFailure()
           << "shape or dtype differs: " << ::testing::PrintToString(got.sizes()) << " "
           << smelt::dtype_name(got.dtype()) << " vs " << ::testing::PrintToString(want.sizes())
           << " " << smelt::dtype_name(want.dtype());
  if (!smelt::is_floating(got.dtype())) {
    auto a = got.to_vector<int64_t>(), b = want.to_vector<int64_t>();
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i])
        return ::testing::AssertionFailure() << "element " << i << " of " << a.size()
                                             << ": compiled " << a[i] << " eager " << b[i];
    return ::testing::AssertionSuccess();
  }
  auto a = vals(got), b = vals(want);
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (a[i] != b[i] || std::signbit(a[i]) != std::signbit(b[i]))
      return ::testing::AssertionFailure()
             << "element " << i << " of " << a.size() << ": compiled " << a[i] << " eager " << b[i];
  }
  return ::testing::AssertionSuccess();
}

/// The latest graph's step names joined with spaces (for failure messages).
template <class C>
std::string names(const C& compiled) {
  std::string s;
  for (auto& n : compiled.stats().kernel_names) s += (s.empty() ? "" : " ") + n;
  return s;
}

/// Number of steps of the latest graph whose name starts with `prefix`.
template <class C>
int count_prefix(const C& compiled, const std::string& prefix) {
  int n = 0;
  for (auto& k : compiled.stats().kernel_names) n += k.rfind(prefix, 0) == 0;
  return n;
}

/// Reduction kernels of the latest graph: cpp_red_fused_* (looping) or
/// cpp_per_fused_* (persistent: the reduced row stays resident).
template <class C>
int reduction_kernels(const C& compiled) {
  return count_prefix(compiled, "cpp_red_fused_") + count_prefix(compiled, "cpp_per_fused_");
}

/// File mode bits (& 0777) of `path`, or -1.
inline int mode_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 0777);
}

// ---- device-free: trace, passes and schedule without building anything ----------

/// Traces `fn(args...)` (real tensors give the tracers' metadata) into a graph,
/// exactly as smelt::compile's first step does.
template <class Fn, class... Args>
smelt::compiler::Graph trace_graph(Fn&& fn, const Args&... args) {
  using namespace smelt::compiler;
  GraphBuilder gb;
  std::vector<Tensor> real{static_cast<const Tensor&>(args)...};
  std::vector<Tensor> tracers;
  for (size_t i = 0; i < real.size(); ++i)
    tracers.push_back(gb.add_input(real[i], static_cast<int>(i)));
  std::vector<Tensor> outs;
  {
    TraceScope scope(&gb);
    auto call = [&]<size_t... I>(std::index_sequence<I...>) { return fn(tracers[I]...); };
    using R = std::decay_t<decltype(call(std::index_sequence_for<Args...>{}))>;
    outs = smelt::detail::ResultPack<R>::pack(call(std::index_sequence_for<Args...>{}));
  }
  gb.finish(outs);
  gb.restore_params();
  return std::move(gb.graph);
}

/// Traces a function of a vector of tensors (a fusion pattern's form) over
/// `inputs` into a graph, as smelt::compile's first step does.
inline smelt::compiler::Graph trace_vector(
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
    const std::vector<Tensor>& inputs) {
  using namespace smelt::compiler;
  GraphBuilder gb;
  std::vector<Tensor> tracers;
  for (size_t i = 0; i < inputs.size(); ++i)
    tracers.push_back(gb.add_input(inputs[i], static_cast<int>(i)));
  std::vector<Tensor> outs;
  {
    TraceScope scope(&gb);
    outs = fn(tracers);
  }
  gb.finish(outs);
  gb.restore_params();
  return std::move(gb.graph);
}

/// Number of nodes of `g` running `op`.
inline int count_op(const smelt::compiler::Graph& g, const std::string& op) {
  int n = 0;
  for (auto& node : g.nodes) n += node.op == op;
  return n;
}

/// Passes (all on unless `opts` says otherwise) then fusion, as compile() does.
inline smelt::compiler::Schedule schedule_of(const smelt::compiler::Graph& captured,
                                             smelt::compiler::FusionOptions fo = {},
                                             smelt::compiler::PassOptions po = {},
                                             smelt::compiler::Graph* after_passes = nullptr) {
  using namespace smelt::compiler;
  Graph g = run_passes(captured, po);
  Schedule s = schedule(g, fo, Target::Cpp);
  generate_kernels(g, s, CppDialect());
  if (after_passes) *after_passes = std::move(g);
  return s;
}

inline std::string step_names(const smelt::compiler::Schedule& s) {
  std::string out;
  for (auto& st : s.steps) out += (out.empty() ? "" : " ") + st.name;
  return out;
}

}  // namespace smelt_test
