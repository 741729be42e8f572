// Device-free: fusion decisions, materialization, kernel kinds and names,
// the generated C++ text and the launch/memory plan, without running the
// C++ compiler (schedules are built from traced graphs directly).
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "backend/toolchain_files.h"
#include "compiler/codegen/printer.h"
#include "compiler/compile_test_util.h"
#include "compiler/fusion/kernel_config.h"
#include "compiler/lower/loop_ir.h"
#include "compiler/runtime/executor.h"

using namespace smelt;
using namespace smelt::compiler;
using smelt_test::schedule_of;
using smelt_test::step_names;
using smelt_test::trace_graph;

namespace {
class Codegen : public smelt_test::CompilerTest {};

bool has(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}
}  // namespace

TEST_F(Codegen, PointwiseChainKernelText) {
  Tensor x = randn({100}), w = randn({100}), b = randn({100});
  Graph g = trace_graph(
      [](const Tensor& x, const Tensor& w, const Tensor& b) { return sigmoid(x * w + b); }, x, w,
      b);
  Graph after;
  Schedule s = schedule_of(g, {}, {}, &after);
  ASSERT_EQ(s.steps.size(), 1u) << step_names(s);
  const Step& st = s.steps[0];
  EXPECT_EQ(st.kind, Step::Kind::Kernel);
  EXPECT_EQ(st.kernel_kind, "poi");
  EXPECT_EQ(st.name, "cpp_poi_fused_add_mul_sigmoid_0");
  EXPECT_EQ(st.reads.size(), 3u);
  EXPECT_EQ(st.writes.size(), 1u);
  EXPECT_TRUE(
      has(st.source, "extern \"C\" void cpp_poi_fused_add_mul_sigmoid_0(void* const* args)"))
      << st.source;
  EXPECT_TRUE(has(st.source, "__restrict__")) << st.source;
  // Intermediates (x*w, +b) are not materialized: only the output is stored.
  int materialized_nodes = 0;
  for (auto& buf : after.buffers)
    if (buf.kind == BufferKind::Node && s.materialized[buf.id]) ++materialized_nodes;
  EXPECT_EQ(materialized_nodes, 1);
  // 100 elements is below the parallel grain: no OpenMP pragma.
  EXPECT_FALSE(has(st.source, "#pragma omp")) << st.source;
  EXPECT_FALSE(s.decisions.empty());
}

TEST_F(Codegen, LargeKernelsAreParallel) {
  Tensor x = randn({kJitParallelGrain * 2});
  Schedule s = schedule_of(trace_graph([](const Tensor& x) { return exp(x) + 1; }, x));
  ASSERT_EQ(s.steps.size(), 1u);
  EXPECT_TRUE(has(s.steps[0].source, "#pragma omp parallel for")) << s.steps[0].source;
  EXPECT_TRUE(s.steps[0].config.parallel) << s.steps[0].config.str();
}

// A parallel pointwise kernel of few long rows cuts each row into blocks of
// columns, its parallel loop over rows x blocks keeping iterations for the
// threads (64: 4 per thread of a 16-core host); small kernels and kernels of
// rows enough keep whole rows.
TEST_F(Codegen, FewLongRowsAreCutIntoColumnBlocks) {
  auto only_step = [](const Schedule& s) -> const Step& {
    EXPECT_EQ(s.steps.size(), 1u) << step_names(s);
    return s.steps.at(0);
  };
  auto bias_add = [](const Tensor& x, const Tensor& b) { return x * b + 1.0; };
  {
    Schedule s = schedule_of(trace_graph(bias_add, randn({4, 65536}), randn({65536})));
    const Step& st = only_step(s);
    EXPECT_TRUE(st.config.parallel && st.config.tile_rows) << st.config.str();
    EXPECT_EQ(st.config.column_blocks, 16) << st.config.str();
    EXPECT_TRUE(has(st.source, "for (int64_t b = 0; b < 64; ++b)")) << st.source;
    EXPECT_TRUE(has(st.source, "for (int64_t j = 0; j < 4096; ++j)")) << st.source;
  }
  for (const auto& shape : {std::vector<int64_t>{256, 1024}, std::vector<int64_t>{2, 40}}) {
    Schedule s = schedule_of(trace_graph(bias_add, randn(shape), randn({shape[1]})));
    EXPECT_EQ(only_step(s).config.column_blocks, 0) << only_step(s).config.str();
  }
  // A row of 3 x 32771 (prime) columns has no divisor to cut it by.
  Schedule prime = schedule_of(trace_graph(bias_add, randn({3, 32771}), randn({32771})));
  EXPECT_EQ(only_step(prime).config.column_blocks, 0) << only_step(prime).config.str();
}

TEST_F(Codegen, HorizontalFusionKind) {
  Tensor x = randn({64});
  Schedule s =
      schedule_of(trace_graph([](const Tensor& x) { return std::make_tuple(sin(x), cos(x)); }, x));
  ASSERT_EQ(s.steps.size(), 1u) << step_names(s);
  EXPECT_EQ(s.steps[0].kernel_kind, "for");
  EXPECT_EQ(s.steps[0].name, "cpp_for_fused_cos_sin_0");
  EXPECT_EQ(s.steps[0].writes.size(), 2u);
  EXPECT_EQ(s.steps[0].reads.size(), 1u);
}

TEST_F(Codegen, ReductionKernelFusesProducersAndConsumers) {
  Tensor x = randn({8, 32});
  Graph after;
  Schedule s =
      schedule_of(trace_graph([](const Tensor& x) { return softmax(x, 1); }, x), {}, {}, &after);
  ASSERT_EQ(s.steps.size(), 1u) << step_names(s);
  const Step& st = s.steps[0];
  EXPECT_TRUE(st.kernel_kind == "red" || st.kernel_kind == "per") << st.kernel_kind;
  EXPECT_EQ(st.name.rfind("cpp_" + st.kernel_kind + "_fused_", 0), 0u) << st.name;
  EXPECT_TRUE(has(st.name, "exp")) << st.name;
  EXPECT_EQ(st.group.rdims, (std::vector<int64_t>{1}));
  EXPECT_EQ(st.group.reductions.size(), 2u);  // amax and sum share the row loop
  EXPECT_EQ(st.reads.size(), 1u);
  ASSERT_FALSE(after.outputs.empty());
  EXPECT_NE(std::find(st.writes.begin(), st.writes.end(), after.outputs[0].buf), st.writes.end());
  EXPECT_TRUE(has(st.source, "smelt::reduce::")) << st.source;
  // A long row does not fit: a looping reduction.
  Tensor big = randn({2, 1 << 16});
  Schedule sb = schedule_of(trace_graph([](const Tensor& x) { return softmax(x, 1); }, big));
  ASSERT_EQ(sb.steps.size(), 1u) << step_names(sb);
  EXPECT_EQ(sb.steps[0].kernel_kind, "red") << sb.steps[0].name;

  // var_mean: one Welford reduction, two outputs.
  Schedule v = schedule_of(trace_graph([](const Tensor& x) { return var_mean(x, {1}); }, x));
  ASSERT_EQ(v.steps.size(), 1u) << step_names(v);
  EXPECT_EQ(v.steps[0].writes.size(), 2u);
}

// A row over reduced dims that are not adjacent (batch_norm's N and H, W of
// [N, C, H, W]): its pointwise consumer walks rows of the trailing adjacent dims,
// an inner loop over contiguous elements with no division of the row position;
// the values are eager's.
TEST_F(Codegen, ConsumerOfNonAdjacentReducedDimsWalksContiguousRuns) {
  Tensor x = randn({8, 3, 56, 56});  // rows of 25088: a looped (not persistent) reduction
  auto f = [](const Tensor& x) { return relu(x - mean(x, {0, 2, 3}, true)); };
  Schedule s = schedule_of(trace_graph(f, x));
  ASSERT_EQ(s.steps.size(), 1u) << step_names(s);
  const std::string& src = s.steps[0].source;
  EXPECT_TRUE(has(src, "for (int64_t r_o = 0; r_o < 8; ++r_o)")) << src;
  EXPECT_TRUE(has(src, "for (int64_t r_i = 0; r_i < 3136; ++r_i)")) << src;
  EXPECT_FALSE(has(src, "r_i /")) << src;
  // The reduction itself folds one stretch per run, indexed within the run.
  EXPECT_TRUE(has(src, "const int64_t r_i = r - (r_o*3136);")) << src;
  EXPECT_FALSE(has(src, "r / 3136")) << src;
  auto cf = compile(f);
  EXPECT_TRUE(smelt_test::same(cf(x), f(x)));
  // Welford (batch_norm's statistics), sums and maxima over the same runs:
  // eager's bits (the same elements folded in the same sequence).
  auto g = [](const Tensor& x) {
    auto vm = var_mean(x, {0, 2, 3}, 0.0, true);
    return std::vector<Tensor>{std::get<0>(vm), std::get<1>(vm), sum(x, {0, 2}), amax(x, {0, 3})};
  };
  auto cg = compile(g);
  std::vector<Tensor> got = cg(x), want = g(x);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(smelt_test::same(got[i], want[i])) << i;
  // Adjacent reduced dims (the last two): one loop over the row, as before.
  Schedule t = schedule_of(trace_graph(
      [](const Tensor& x) {
        return relu(x - mean(x, {2, 3}, true));
      },
      x));
  ASSERT_EQ(t.steps.size(), 1u) << step_names(t);
  EXPECT_FALSE(has(t.steps[0].source, "r_i")) << t.steps[0].source;
}

// A row folded straight from memory (the input, or a row buffer of computed
// elements) is a reduce::ContiguousRun, whose lanes the host folds in whole
// vectors as eager's reduce kernels do (a lambda per element kept max / min
// scalar), through reduce_jit.h's jit_stretch: out of line, in the
// toolchain's math object, for the common accumulators (the unit does not
// compile the fold again); elements that need a conversion or are strided
// keep the lambda. The values are eager's, NaN and infinities included.
TEST_F(Codegen, RowsReadFromMemoryFoldAsContiguousRuns) {
  Tensor x = randn({64, 1024});
  x[3][5].fill_(std::numeric_limits<float>::quiet_NaN());
  x[7][9].fill_(std::numeric_limits<float>::infinity());
  x[9][1000].fill_(-std::numeric_limits<float>::infinity());
  auto f = [](const Tensor& x) {
    Tensor e = exp(x - amax(x, {-1}, true));
    return e / sum(e, {-1}, true);
  };
  Schedule s = schedule_of(trace_graph(f, x));
  ASSERT_EQ(s.steps.size(), 1u) << step_names(s);
  const std::string& src = s.steps[0].source;
  EXPECT_TRUE(has(src,
                  "smelt::reduce::jit_stretch(acc0_order, 0, 1024, INT64_C(1024), "
                  "in_arg0 + (o*1024));"))
      << src;
  EXPECT_TRUE(has(src, "smelt::reduce::jit_stretch(acc1_order, 0, 1024, INT64_C(1024), rowin"))
      << src;
  EXPECT_FALSE(has(src, "[&](int64_t r)")) << src;
  // exp(x - max), stored for the sum, is read back from that row by the
  // division: no second copy of the row.
  EXPECT_FALSE(has(src, "rowcache")) << src;
  EXPECT_TRUE(has(src, "= rowin2[r];")) << src;
  auto cf = compile(f);
  EXPECT_TRUE(smelt_test::bitwise_same(cf(x), f(x)));
  // A transposed input (a strided row) and a float16 one (converted to the
  // float accumulator) compute each element in the lambda.
  auto g = [](const Tensor& x) { return amax(x, {-1}); };
  for (const Tensor& in : {x.t(), x.to(DType::Float16)}) {
    Schedule t = schedule_of(trace_graph(g, in));
    ASSERT_EQ(t.steps.size(), 1u) << step_names(t);
    EXPECT_FALSE(has(t.steps[0].source, "jit_stretch")) << t.steps[0].source;
    EXPECT_TRUE(has(t.steps[0].source, "[&](int64_t r)")) << t.steps[0].source;
    EXPECT_TRUE(smelt_test::bitwise_same(compile(g)(in), g(in)));
  }
  // Welford in float64 folds a float32 row as it is (each element widened
  // exactly): layer_norm's and var's rows take jit_stretch too.
  auto ln = [](const Tensor& x) { return layer_norm(x, {1024}); };
  Schedule l = schedule_of(trace_graph(ln, x));
  ASSERT_EQ(l.steps.size(), 1u) << step_names(l);
  EXPECT_TRUE(has(l.steps[0].source,
                  "smelt::reduce::jit_stretch(acc0_order, 0, 1024, INT64_C(1024), "
                  "in_arg0 + (o*1024));"))
      << l.steps[0].source;
  EXPECT_TRUE(smelt_test::bitwise_same(compile(ln)(x), ln(x)));
}

// A gathered row that a persistent kernel needs in two passes (embeddings
// under a layer_norm, as BERT's): the first pass gathers it, checks its index
// and stores it in the row buffer the fold reads; the second reads that
// buffer, without gathering the table again or checking the index again
// (whose atomic error store kept the loop scalar). Values are eager's, and
// an index out of range still fails.
TEST_F(Codegen, GatheredRowIsGatheredOncePerRow) {
  Tensor table = randn({50, 64}), pos = randn({16, 64});
  Tensor ids = randint(0, 50, {4, 16});
  auto f = [](const Tensor& ids, const Tensor& table, const Tensor& pos) {
    return layer_norm(embedding(table, ids) + pos, {64});
  };
  Schedule s = schedule_of(trace_graph(f, ids, table, pos));
  ASSERT_EQ(s.steps.size(), 1u) << step_names(s);
  const std::string& src = s.steps[0].source;
  auto count = [&](const std::string& needle) {
    size_t n = 0;
    for (size_t at = src.find(needle); at != std::string::npos; at = src.find(needle, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("__atomic_store_n(smelt_error"), 1u) << src;
  EXPECT_EQ(count("in_arg0[o]"), 1u) << src;
  EXPECT_TRUE(has(src, "= rowin1[r];")) << src;
  auto cf = compile(f);
  EXPECT_TRUE(smelt_test::bitwise_same(cf(ids, table, pos), f(ids, table, pos)));
  Tensor bad = ids.clone();
  bad[2][3].fill_(50);
  EXPECT_THROW(cf(bad, table, pos), Error);
}

TEST_F(Codegen, FuseOffGivesOneKernelPerNode) {
  Tensor x = randn({50});
  Graph g = trace_graph([](const Tensor& x) { return sigmoid(exp(x) * 2 - 1); }, x);
  FusionOptions fo;
  fo.fuse = false;
  Graph after;
  Schedule s = schedule_of(g, fo, {}, &after);
  EXPECT_EQ(s.steps.size(), after.nodes.size()) << step_names(s);
  EXPECT_EQ(s.steps.size(), 4u) << step_names(s);
  for (size_t i = 0; i < s.steps.size(); ++i)
    EXPECT_TRUE(has(s.steps[i].name, "_" + std::to_string(i))) << s.steps[i].name;
  // Unfused intermediates share memory: each pointwise kernel writes into
  // the memory of the buffer it reads last (Step::in_place), so the three
  // take one arena slot.
  MemoryPlan mp = plan_memory(after, s);
  EXPECT_EQ(mp.arena_bytes, 256) << mp.str(after);
  EXPECT_EQ(std::count_if(mp.in_place.begin(), mp.in_place.end(), [](int b) { return b >= 0; }), 2)
      << mp.str(after);
}

TEST_F(Codegen, GemmEpilogueAndExtern) {
  Tensor x = randn({4, 8}), w = randn({6, 8}), b = randn({6});
  auto fn = [](const Tensor& x, const Tensor& w, const Tensor& b) { return gelu(linear(x, w, b)); };
  Schedule s = schedule_of(trace_graph(fn, x, w, b));
  ASSERT_EQ(s.steps.size(), 1u) << step_names(s);
  EXPECT_EQ(s.steps[0].kind, Step::Kind::Extern);
  EXPECT_EQ(s.steps[0].kernel_kind, "tem");
  EXPECT_EQ(s.steps[0].name, "cpp_tem_fused_addmm_gelu_0");
  EXPECT_EQ(s.steps[0].activation, "gelu_erf");

  FusionOptions no_epi;
  no_epi.gemm_epilogue = false;
  Schedule s2 = schedule_of(trace_graph(fn, x, w, b), no_epi);
  ASSERT_GE(s2.steps.size(), 2u) << step_names(s2);
  EXPECT_EQ(s2.steps[0].name, "extern_matmul") << step_names(s2);
  EXPECT_EQ(s2.steps[1].kind, Step::Kind::Kernel);

  Schedule s3 = schedule_of(
      trace_graph([](const Tensor& x, const Tensor& w) { return matmul(x, w.t()); }, x, w));
  ASSERT_EQ(s3.steps.size(), 1u) << step_names(s3);
  EXPECT_EQ(s3.steps[0].name, "extern_matmul");
  EXPECT_EQ(s3.steps[0].kernel_kind, "extern");
}

// float16 / bfloat16 epilogues run on the float32 product and round once: they
// fold into the GEMM only when intermediates need not round as eager's.
TEST_F(Codegen, HalfGemmEpilogueOnlyWithoutRounding) {
  auto fn = [](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& r) {
    return gelu(linear(x, w, b), "tanh") + r;
  };
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor x = randn({4, 8}).to(dt), w = randn({6, 8}).to(dt), b = randn({6}).to(dt),
           r = randn({4, 6}).to(dt);
    FusionOptions no_round;
    no_round.round_intermediates = false;
    Schedule s = schedule_of(trace_graph(fn, x, w, b, r), no_round);
    ASSERT_EQ(s.steps.size(), 1u) << step_names(s);
    EXPECT_EQ(s.steps[0].kernel_kind, "tem");
    EXPECT_EQ(s.steps[0].name, "cpp_tem_fused_addmm_gelu_add_0");
    EXPECT_EQ(s.steps[0].activation, "gelu_tanh");
    EXPECT_GE(s.steps[0].residual, 0);

    // Rounding as eager: linear's bias still folds (eager adds it before its
    // one rounding), the GELU and the add after it do not.
    Schedule rounded = schedule_of(trace_graph(fn, x, w, b, r));
    ASSERT_EQ(rounded.steps.size(), 2u) << step_names(rounded);
    EXPECT_EQ(rounded.steps[0].name, "cpp_tem_fused_addmm_0");
    EXPECT_EQ(rounded.steps[0].activation, "");
    EXPECT_LT(rounded.steps[0].residual, 0);
    bool logged = false;
    for (auto& d : rounded.decisions) logged |= has(d, "round_intermediates");
    EXPECT_TRUE(logged);
  }
}

TEST_F(Codegen, FallbackStepForOpsWithoutLowering) {
  Tensor x = randn({3, 4});
  Graph after;
  Schedule s = schedule_of(trace_graph(
                               [](const Tensor& x) {
                                 return stack({x * 2, x}, 1) + 1;
                               },
                               x),
                           {}, {}, &after);
  ASSERT_EQ(s.steps.size(), 3u) << step_names(s);
  EXPECT_EQ(s.steps[0].kind, Step::Kind::Kernel);
  EXPECT_EQ(s.steps[1].kind, Step::Kind::Fallback);
  EXPECT_EQ(s.steps[1].name, "fallback_stack");
  EXPECT_EQ(s.steps[2].kind, Step::Kind::Kernel);
  // The fallback's input is materialized (an eager kernel reads it from memory).
  EXPECT_TRUE(s.materialized[s.steps[1].reads.at(0)]);
  bool logged = false;
  for (auto& d : s.decisions) logged |= has(d, "stack") && has(d, "eager kernel");
  EXPECT_TRUE(logged);
}

TEST_F(Codegen, ViewsAreIndexRemapsInTheKernel) {
  Tensor a = randn({6, 4}), b = randn({4, 12});
  Schedule s = schedule_of(trace_graph(
      [](const Tensor& a, const Tensor& b) { return a.t() * b.slice(1, 1, 12, 2); }, a, b));
  ASSERT_EQ(s.steps.size(), 1u) << step_names(s);
  EXPECT_EQ(s.steps[0].reads.size(), 2u);

  // Offsets of a strided window: a transposed read, symbolic and simplified.
  Operand o;
  o.buf = 0;
  o.sizes = {4, 6};
  o.strides = {1, 4};
  o.offset = 2;
  IndexExpr i0 = IndexExpr::var("i0", 4), i1 = IndexExpr::var("i1", 6);
  Index it{{4, 6}, {i0, i1}, std::nullopt};
  EXPECT_EQ(operand_offset(o, it).str(), "i0 + i1*4 + 2");
  // A broadcast (stride 0) dim does not appear.
  o.strides = {0, 1};
  o.offset = 0;
  EXPECT_EQ(operand_offset(o, it).str(), "i1");
  // A dense read of the iteration's own layout uses its flat position.
  IndexExpr i = IndexExpr::var("i", 24);
  Index flat = unflatten({4, 6}, i);
  o.strides = {6, 1};
  EXPECT_EQ(operand_offset(o, flat).str(), "i");
  // A transposed producer read decomposes to a per-dim remap, not div/mod of a sum.
  Operand t;
  t.buf = 0;
  t.sizes = {6, 4};
  t.strides = {1, 6};
  Index p = producer_index({4, 6}, t, Index{{6, 4}, {i1, i0}, std::nullopt});
  ASSERT_EQ(p.vars.size(), 2u);
  EXPECT_EQ(p.vars[0], i0) << p.vars[0].str();
  EXPECT_EQ(p.vars[1], i1) << p.vars[1].str();
  // A size-1 dim never leaves a mod by 1.
  Index u = unflatten({3, 1, 5}, IndexExpr::var("i", 15));
  EXPECT_EQ(u.vars[1].str(), "0");
  EXPECT_EQ(u.vars[2].str(), "i % 5");
}

TEST_F(Codegen, LiteralsAndTypes) {
  CppDialect d;
  EXPECT_EQ(d.storage_type(DType::Float16), "smelt::Half");
  EXPECT_EQ(d.value_type(DType::BFloat16), "float");
  EXPECT_EQ(d.value_type(DType::Float64), "double");
  EXPECT_TRUE(has(d.literal(Scalar(std::nan("")), DType::Float32), "quiet_NaN"));
  EXPECT_TRUE(has(d.literal(Scalar(-INFINITY), DType::Float32), "-std::numeric_limits"));
  EXPECT_EQ(d.literal(Scalar(true), DType::Bool), "true");
  EXPECT_TRUE(has(d.literal(Scalar(int64_t{-9}), DType::Int32), "-9"));
}

// The C++ preamble leaves out C++17's special math functions (their templates
// were instantiated again at the end of every unit, a quarter of a one-kernel
// unit's compile): libstdc++'s guard is defined before the first standard header.
TEST_F(Codegen, PreambleLeavesOutSpecialMathFunctions) {
  const std::string p = CppDialect().preamble();
  const size_t guard = p.find(backend::kNoSpecialMathFunctions);
  ASSERT_NE(guard, std::string::npos);
  EXPECT_LT(guard, p.find("#include <"));
  EXPECT_LT(guard, p.find(backend::kPreambleEnd));
}

TEST_F(Codegen, LaunchPlanNamesEveryStep) {
  Tensor x = randn({3, 4});
  Graph after;
  Schedule s = schedule_of(trace_graph([](const Tensor& x) { return cumsum(exp(x), 1) * 3; }, x),
                           {}, {}, &after);
  // No library needed to describe the plan: a plan with kernels but no library
  // is only built by compile(); here only the memory plan is checked.
  MemoryPlan mp = plan_memory(after, s);
  std::string str = mp.str(after);
  EXPECT_FALSE(str.empty());
  EXPECT_EQ(mp.offset.size(), after.buffers.size());
}
