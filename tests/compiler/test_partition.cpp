// The joint graph's trace and partition, device-free (no compiler run): which
// values the forward saves, which pointwise nodes the backward recomputes,
// and the layout of the two graphs' inputs and outputs
// (compiler/trace/joint.h, compiler/passes/partition.h).
#include <gtest/gtest.h>

#include "compile_test_util.h"
#include "compiler/passes/partition.h"
#include "compiler/trace/joint.h"

using namespace smelt;
using namespace smelt::compiler;

namespace {

struct Joint {
  Graph graph;
  TracedBackward traced;
};

/// out = gelu(x @ w1) @ w2 traced with its backward; x the argument, w1 and
/// w2 captured leaves that require grad.
Joint gelu_chain(const Tensor& x, const Tensor& w1, const Tensor& w2) {
  EnableGradGuard grad;
  GraphBuilder gb;
  gb.set_num_args(1);
  Tensor xt = gb.add_input(x, 0);
  Tensor out;
  {
    TraceScope scope(&gb);
    out = matmul(gelu(matmul(xt, w1)), w2);
  }
  Joint j;
  j.traced = trace_backward(gb, {out}, 1);
  j.graph = run_passes(std::move(gb.graph), PassOptions{});
  return j;
}

TEST(Partition, GeluOutputIsRecomputedFromItsInput) {
  Tensor x = randn({4, 8}), w1 = randn({8, 16}).requires_grad_(),
         w2 = randn({16, 3}).requires_grad_();
  Joint j = gelu_chain(x, w1, w2);
  // The gradients of both captured leaves, none of x (it does not require grad).
  ASSERT_EQ(j.traced.diff_results, std::vector<int>{0});
  ASSERT_EQ(j.traced.inputs.size(), 2u);
  for (const auto& in : j.traced.inputs) {
    EXPECT_EQ(in.arg, -1);
    EXPECT_GE(in.output, 1);
  }
  EXPECT_EQ(j.graph.outputs.size(), 3u);
  const JointSignature sig{1, 1, 1};
  // Recompute: the forward saves h = x @ w1 (and x, for w1's gradient); the
  // backward computes gelu(h) again for w2's gradient.
  JointPartition p = partition_joint(j.graph, sig, true);
  EXPECT_EQ(p.num_saved, 1);
  EXPECT_EQ(p.saved_args, std::vector<int>{0});
  EXPECT_TRUE(p.saved_params.empty());
  EXPECT_EQ(p.recomputed, 1);
  EXPECT_EQ(smelt_test::count_op(p.forward, "gelu"), 1);
  EXPECT_EQ(smelt_test::count_op(p.backward, "gelu"), 1);
  EXPECT_EQ(p.forward.outputs.size(), 2u);  // the result, then h
  EXPECT_EQ(p.backward.outputs.size(), 2u);
  EXPECT_EQ(p.saved_bytes, (4 * 8 + 4 * 16) * 4);
  EXPECT_EQ(p.saved_bytes_all, (4 * 8 + 4 * 16 + 4 * 16) * 4);
  // Backward inputs: argument 0, the result's gradient (1), h (2).
  int inputs = 0;
  for (const auto& b : p.backward.buffers)
    if (b.kind == BufferKind::Input) {
      ++inputs;
      EXPECT_LE(b.input_index, 2);
    }
  EXPECT_EQ(inputs, 3);
  // No recompute: h and gelu(h) are both saved, nothing is computed twice.
  JointPartition q = partition_joint(j.graph, sig, false);
  EXPECT_EQ(q.num_saved, 2);
  EXPECT_EQ(q.recomputed, 0);
  EXPECT_EQ(smelt_test::count_op(q.backward, "gelu"), 0);
  EXPECT_EQ(q.saved_bytes, q.saved_bytes_all);
  EXPECT_LT(p.saved_bytes, q.saved_bytes);
}

TEST(Partition, ArgumentGradientAndCapturedLeafWithHistory) {
  EnableGradGuard grad;
  Tensor x = randn({3}).requires_grad_();
  Tensor w = randn({3}).requires_grad_() * 2;  // a captured tensor with a history
  {
    GraphBuilder gb;
    gb.set_num_args(1);
    Tensor xt = gb.add_input(x, 0);
    Tensor out;
    {
      TraceScope scope(&gb);
      out = (xt * xt).sum();
    }
    TracedBackward tb = trace_backward(gb, {out}, 1);
    ASSERT_EQ(tb.inputs.size(), 1u);
    EXPECT_EQ(tb.inputs[0].arg, 0);
    EXPECT_EQ(tb.inputs[0].output, 1);
  }
  GraphBuilder gb;
  gb.set_num_args(1);
  Tensor xt = gb.add_input(x, 0);
  Tensor out;
  {
    TraceScope scope(&gb);
    out = (xt * w).sum();
  }
  EXPECT_THROW(trace_backward(gb, {out}, 1), GraphBreak);
}

}  // namespace
