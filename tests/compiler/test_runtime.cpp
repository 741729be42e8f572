// The compiler runtime: the launch plan (one record per generated kernel, its
// argument slots and error flag), built once per graph and run through the
// backend; kernel error flags checked once per run, before any write-back.
#include <gtest/gtest.h>

#include "compiler/compile_test_util.h"
#include "compiler/runtime/executor.h"
#include "compiler/runtime/kernel_cache.h"
#include "test_util.h"

using namespace smelt;
using namespace smelt::compiler;
using smelt_test::expect_error_mentions;
using smelt_test::make_exact;
using smelt_test::schedule_of;
using smelt_test::trace_graph;

namespace {
class Runtime : public smelt_test::CompilerTest {};

/// The graph after passes, its schedule (fusion off: one kernel per node) and
/// its compiled form, built as compile() builds it.
struct Built {
  Graph g;
  Schedule s;
  std::shared_ptr<CompiledGraph> cg;
};
template <class Fn, class... Args>
Built build(Fn&& fn, const Args&... args) {
  Built b;
  FusionOptions fo;
  fo.fuse = false;
  b.s = schedule_of(trace_graph(fn, args...), fo, {}, &b.g);
  std::string source = CppDialect().preamble();
  for (auto& st : b.s.steps)
    if (st.kind == Step::Kind::Kernel) source += "\n" + st.source;
  auto module = backend::backend(Device()).build(source, kernel_cache(), nullptr);
  b.cg = std::make_shared<CompiledGraph>(b.g, b.s, module, false);
  return b;
}
}  // namespace

TEST_F(Runtime, LaunchPlanHasOneRecordPerKernel) {
  Tensor x = make_exact<float>({1, 2, 3, 4}, {4});
  Built b = build([](const Tensor& x) { return sigmoid(exp(x) * 2 - 1); }, x);
  const auto& plan = b.cg->launches();
  ASSERT_EQ(plan.size(), b.s.steps.size());  // every step is a generated kernel
  for (size_t i = 0; i < plan.size(); ++i) {
    const Step& st = b.s.steps[i];
    EXPECT_EQ(plan[i].step, static_cast<int>(i));
    EXPECT_TRUE(plan[i].kernel) << st.name;
    ASSERT_EQ(plan[i].args.size(), st.reads.size() + st.writes.size()) << st.name;
    for (size_t a = 0; a < st.reads.size(); ++a)
      EXPECT_EQ(plan[i].args[a].index, st.reads[a]) << st.name;
    EXPECT_EQ(plan[i].args.back().index, st.writes.back()) << st.name;
    EXPECT_EQ(plan[i].error_flag, -1) << "float kernels cannot fail";
  }
  std::vector<Tensor> out = b.cg->run({x}, {});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(smelt_test::close(out[0], sigmoid(exp(x) * 2 - 1)));
}

TEST_F(Runtime, IntegerDivisionKernelsGetAnErrorFlag) {
  Tensor a = make_exact<int64_t>({7, -7, 9}, {3}), d = make_exact<int64_t>({2, 3, 4}, {3});
  Built b = build([](const Tensor& a, const Tensor& d) { return remainder(floor_divide(a, d), d); },
                  a, d);
  int flagged = 0;
  for (auto& r : b.cg->launches()) {
    if (r.error_flag < 0) continue;
    EXPECT_EQ(r.error_flag, flagged++);
    EXPECT_EQ(r.args.back().kind, ArgSlot::Kind::ErrorFlag);
  }
  EXPECT_EQ(flagged, 2);  // floor_divide and remainder, one kernel each
  EXPECT_TRUE(smelt_test::same(b.cg->run({a, d}, {})[0], remainder(floor_divide(a, d), d)));
  // A zero divisor in the first kernel: the error names it, after the run.
  Tensor z = make_exact<int64_t>({2, 0, 4}, {3});
  expect_error_mentions([&] { b.cg->run({a, z}, {}); }, "ZeroDivisionError");
  expect_error_mentions([&] { b.cg->run({a, z}, {}); }, b.s.steps[0].name);
}

TEST_F(Runtime, KernelErrorPreventsWriteBackOfMutatedInputs) {
  auto f = compile([](Tensor x, const Tensor& a, const Tensor& d) {
    x.add_(floor_divide(a, d));
    return x * 2;
  });
  Tensor x = make_exact<int64_t>({1, 2, 3}, {3});
  Tensor a = make_exact<int64_t>({10, 20, 30}, {3});
  Tensor ok = make_exact<int64_t>({1, 2, 3}, {3});
  Tensor zero = make_exact<int64_t>({1, 0, 3}, {3});
  Tensor y = f(x, a, ok);
  EXPECT_EQ(x.to_vector<int64_t>(), (std::vector<int64_t>{11, 12, 13}));
  EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{22, 24, 26}));
  expect_error_mentions([&] { f(x, a, zero); },
                        "ZeroDivisionError: integer division by zero; use a floating dtype");
  expect_error_mentions([&] { f(x, a, zero); }, "(in compiled kernel cpp_");
  EXPECT_EQ(x.to_vector<int64_t>(), (std::vector<int64_t>{11, 12, 13})) << "x was written back";
}
