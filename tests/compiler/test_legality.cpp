// Device-free: fusion legality answers fuse / don't fuse with a reason from
// the graph and symbolic indices alone (no code is generated), and the
// KernelConfig chosen for a group is a value (equality, hash, printable).
#include <gtest/gtest.h>

#include "compiler/compile_test_util.h"
#include "compiler/fusion/kernel_config.h"
#include "compiler/fusion/legality.h"

using namespace smelt;
using namespace smelt::compiler;
using smelt_test::trace_graph;

namespace {

class Legality : public smelt_test::CompilerTest {};

struct Lowered {
  Graph g;
  std::vector<bool> mat;
};

/// Passes, and every node output materialized (each node its own candidate).
Lowered lower(const Graph& captured) {
  Lowered l{run_passes(captured, PassOptions{}), {}};
  l.mat.assign(l.g.buffers.size(), true);
  return l;
}

int node_of(const Graph& g, const std::string& op) {
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].op == op) return static_cast<int>(i);
  ADD_FAILURE() << "no node " << op;
  return -1;
}

/// The reduction node running `op` over dims `dim`.
int reduction_over(const Graph& g, const std::string& op, std::vector<int64_t> dim) {
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].op == op && reduction_info(g, g.nodes[i]).dims == dim)
      return static_cast<int>(i);
  ADD_FAILURE() << "no node " << op;
  return -1;
}

KernelGroup reduction_group(const Graph& g, int node) {
  ReductionInfo info = reduction_info(g, g.nodes[node]);
  KernelGroup grp;
  grp.reduction = true;
  grp.shape = info.in_sizes;
  grp.rdims = info.dims;
  grp.reductions = {node};
  return grp;
}

bool has(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

}  // namespace

TEST_F(Legality, PointwiseNeedsTheKernelsShape) {
  Tensor x = randn({4, 8}), y = randn({8});
  Lowered l = lower(trace_graph(
      [](const Tensor& x, const Tensor& y) {
        Tensor a = exp(x);
        Tensor b = sin(y);
        Tensor c = cos(x);
        return std::make_tuple(a, b, c);
      },
      x, y));
  KernelGroup grp;
  grp.shape = {4, 8};
  grp.stores = {node_of(l.g, "exp")};
  FusionDecision other = can_join(l.g, l.mat, grp, node_of(l.g, "sin"));
  EXPECT_FALSE(other.fuse);
  EXPECT_TRUE(has(other.reason, "[8]") && has(other.reason, "[4, 8]")) << other.reason;
  FusionDecision same = can_join(l.g, l.mat, grp, node_of(l.g, "cos"));
  EXPECT_TRUE(same.fuse) << same.reason;
  EXPECT_TRUE(has(same.reason, "horizontal")) << same.reason;
}

TEST_F(Legality, VerticalConsumerIsVertical) {
  Tensor x = randn({16});
  Lowered l = lower(trace_graph([](const Tensor& x) { return sigmoid(exp(x)); }, x));
  KernelGroup grp;
  grp.shape = {16};
  grp.stores = {node_of(l.g, "exp")};
  FusionDecision d = can_join(l.g, l.mat, grp, node_of(l.g, "sigmoid"));
  EXPECT_TRUE(d.fuse);
  EXPECT_TRUE(has(d.reason, "vertical")) << d.reason;
}

TEST_F(Legality, ReductionsShareADomainOnly) {
  Tensor x = randn({8, 32});
  Lowered l = lower(trace_graph(
      [](const Tensor& x) { return std::make_tuple(amax(x, {1}), sum(x, {1}), sum(x, {0})); }, x));
  KernelGroup grp = reduction_group(l.g, node_of(l.g, "amax"));
  FusionDecision same = can_join(l.g, l.mat, grp, reduction_over(l.g, "sum", {1}));
  EXPECT_TRUE(same.fuse) << same.reason;
  FusionDecision other = can_join(l.g, l.mat, grp, reduction_over(l.g, "sum", {0}));
  EXPECT_FALSE(other.fuse);
  EXPECT_TRUE(has(other.reason, "reduces")) << other.reason;
  KernelGroup pw;
  pw.shape = {8, 32};
  EXPECT_FALSE(can_join(l.g, l.mat, pw, reduction_over(l.g, "sum", {1})).fuse);
}

TEST_F(Legality, ReductionResultIsReadAtItsOwnRowOnly) {
  Tensor x = randn({8, 8});
  // amax over dim 1 gives one value per row i; `x + m` broadcasts m along the
  // last dim, so element (i, j) reads m[j]: another row. `x - m[:, None]` reads m[i].
  Lowered l = lower(trace_graph(
      [](const Tensor& x) {
        Tensor m = amax(x, {1});
        return std::make_tuple(x + m, x - m.unsqueeze(1));
      },
      x));
  KernelGroup grp = reduction_group(l.g, node_of(l.g, "amax"));
  FusionDecision wrong = can_join(l.g, l.mat, grp, node_of(l.g, "add"));
  EXPECT_FALSE(wrong.fuse);
  EXPECT_TRUE(has(wrong.reason, "another row")) << wrong.reason;
  FusionDecision right = can_join(l.g, l.mat, grp, node_of(l.g, "sub"));
  EXPECT_TRUE(right.fuse) << right.reason;
  EXPECT_TRUE(has(right.reason, "consumer of its reductions")) << right.reason;
}

TEST_F(Legality, EpilogueMustBeARowOrTheDomain) {
  Tensor x = randn({8, 32}), y = randn({4});
  Lowered l = lower(trace_graph(
      [](const Tensor& x, const Tensor& y) { return std::make_tuple(sum(x, {1}), exp(y)); }, x, y));
  KernelGroup grp = reduction_group(l.g, node_of(l.g, "sum"));
  FusionDecision d = can_join(l.g, l.mat, grp, node_of(l.g, "exp"));
  EXPECT_FALSE(d.fuse);
  EXPECT_TRUE(has(d.reason, "neither a row nor the domain")) << d.reason;
}

TEST_F(Legality, FootprintListsMemoryReadsAndOps) {
  Tensor x = randn({8, 32});
  Graph g = run_passes(trace_graph([](const Tensor& x) { return softmax(x, 1); }, x), {});
  Schedule s = schedule(g, FusionOptions{}, Target::Cpp);
  ASSERT_EQ(s.steps.size(), 1u);
  GroupFootprint fp = footprint(g, s.materialized, s.steps[0].group);
  ASSERT_EQ(fp.reads.size(), 1u);
  EXPECT_EQ(g.buffers[fp.reads[0]].kind, BufferKind::Input);
  EXPECT_EQ(fp.ops, (std::vector<std::string>{"amax", "div", "exp", "sub", "sum"}));
  // sum's element is exp(x - max): computed, so a persistent kernel prefills it.
  ASSERT_EQ(fp.computed_element.size(), 2u);
  EXPECT_FALSE(fp.computed_element[0]);
  EXPECT_TRUE(fp.computed_element[1]);
  EXPECT_TRUE(s.steps[0].config.persistent);
  EXPECT_EQ(s.steps[0].config.prefill.size(), 1u);
}

TEST_F(Legality, NodeJoinsAnEarlierCompatibleKernel) {
  // sin(x) and cos(x) are separated by a reduction kernel over another domain;
  // cos still joins sin's kernel (horizontal), which runs before the reduction.
  Tensor x = randn({64}), y = randn({8, 16});
  Schedule s = smelt_test::schedule_of(trace_graph(
      [](const Tensor& x, const Tensor& y) {
        Tensor a = sin(x);
        Tensor b = sum(y, {1});
        Tensor c = cos(x);
        return std::make_tuple(a, b, c);
      },
      x, y));
  ASSERT_EQ(s.steps.size(), 2u) << smelt_test::step_names(s);
  EXPECT_EQ(s.steps[0].name, "cpp_for_fused_cos_sin_0");
  EXPECT_EQ(s.steps[1].kernel_kind, "per");
}

TEST(KernelConfig, IsAValue) {
  KernelConfig a;
  a.reduction = true;
  a.parallel = true;
  a.persistent = true;
  KernelConfig b = a;
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(a.str(), "cpp reduction parallel persistent idx64");
  b.split = true;
  EXPECT_NE(a, b);
  EXPECT_NE(a.str(), b.str());
  b = a;
  b.target = Target::Cuda;
  b.block_size = 256;
  b.items_per_thread = 16;
  b.index_bits = 32;
  b.grid = 64;
  b.vec = 4;
  b.threads_per_row = 128;
  b.rows_per_block = 2;
  b.row_iters = 4;
  EXPECT_EQ(b.str(),
            "cuda reduction parallel persistent idx32 block=256x16 grid=64 vec=4 row=128x2 "
            "row_iters=4");
  KernelConfig c = b;
  EXPECT_EQ(b, c);
  c.outer = true;
  EXPECT_NE(b, c);
  EXPECT_NE(b.hash(), c.hash());
  EXPECT_EQ(c.str(),
            "cuda reduction parallel persistent idx32 block=256x16 grid=64 vec=4 row=outer "
            "128x2 row_iters=4");
}
