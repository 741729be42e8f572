// Device-free: the tracer (views make no nodes, in-place writes are
// functionalized into write-backs), the graph, and the passes (DCE, CSE,
// decomposition, constant folding). Nothing here runs the C++ compiler.
#include <gtest/gtest.h>

#include "compiler/compile_test_util.h"
#include "fuzz/fuzz.h"

using namespace smelt;
using namespace smelt::compiler;
using smelt_test::count_op;
using smelt_test::trace_graph;

namespace {
class Passes : public smelt_test::CompilerTest {};
class Tracer : public smelt_test::CompilerTest {};
}  // namespace

TEST_F(Tracer, RecordsOneNodePerOpAndNoneForViews) {
  Tensor x = randn({4, 6}), w = randn({6});
  Graph g = trace_graph(
      [](const Tensor& x, const Tensor& w) {
        return sigmoid(x.t().t().reshape({2, 12}).reshape({4, 6}) * w + 1);
      },
      x, w);
  EXPECT_EQ(g.num_inputs, 2);
  EXPECT_EQ(g.nodes.size(), 3u) << g.str();
  EXPECT_EQ(count_op(g, "mul"), 1);
  EXPECT_EQ(count_op(g, "add"), 1);
  EXPECT_EQ(count_op(g, "sigmoid"), 1);
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.outputs[0].sizes, (Shape{4, 6}));
  EXPECT_TRUE(g.mutations.empty());
  // The scalar 1 is an inline operand, not a buffer.
  bool has_scalar = false;
  for (auto& n : g.nodes)
    for (auto& in : n.inputs) has_scalar |= in.is_scalar();
  EXPECT_TRUE(has_scalar);
  std::string listing = g.str();
  EXPECT_NE(listing.find("sigmoid"), std::string::npos) << listing;
  EXPECT_NE(listing.find("arg0"), std::string::npos) << listing;
}

TEST_F(Tracer, ViewsAreStridedOperandWindows) {
  Tensor x = randn({5, 8});
  Graph g = trace_graph([](const Tensor& x) { return exp(x.slice(1, 1, 8, 3).t()); }, x);
  ASSERT_EQ(g.nodes.size(), 1u) << g.str();
  const Operand& o = g.nodes[0].inputs.at(0);
  EXPECT_EQ(o.buf, 0);
  EXPECT_EQ(o.sizes, (Shape{3, 5}));
  EXPECT_EQ(o.strides, (Shape{3, 8}));
  EXPECT_EQ(o.offset, 1);
}

TEST_F(Tracer, InPlaceWriteBecomesWriteBack) {
  Tensor x = randn({3, 4});
  Graph g = trace_graph(
      [](const Tensor& x) {
        Tensor t = x;
        t.add_(1);
        return t * 2;
      },
      x);
  ASSERT_EQ(g.mutations.size(), 1u) << g.str();
  EXPECT_EQ(g.mutations[0].first, 0);  // the input buffer
  // The result reads the new value, not the input.
  int src = g.mutations[0].second;
  EXPECT_EQ(g.buffers[src].kind, BufferKind::Node);
  const Node& mul = g.nodes.back();
  EXPECT_EQ(mul.op, "mul");
  EXPECT_NE(mul.inputs[0].buf, 0);

  // A write through a narrow() view is a partial copy_ over the whole buffer.
  Graph h = trace_graph(
      [](const Tensor& x) {
        x.narrow(0, 1, 1).mul_(3);
        return x.sum();
      },
      x);
  ASSERT_EQ(h.mutations.size(), 1u) << h.str();
  EXPECT_EQ(count_op(h, "copy_"), 1) << h.str();
  EXPECT_TRUE(x.is_contiguous());  // tracing touched no real data
}

TEST_F(Tracer, ReadAfterWriteSeesTheNewValueThroughAliases) {
  Tensor x = randn({6});
  Graph g = trace_graph(
      [](const Tensor& x) {
        Tensor v = x.view({2, 3});
        Tensor t = x;
        t.mul_(2);
        return v.sum(1);  // the alias reads the written buffer
      },
      x);
  ASSERT_EQ(g.mutations.size(), 1u);
  const Node& s = g.nodes.back();
  EXPECT_EQ(s.op, "sum");
  EXPECT_EQ(s.inputs[0].buf, g.mutations[0].second) << g.str();
}

TEST_F(Passes, DeadCodeIsRemoved) {
  Tensor x = randn({8});
  Graph g = trace_graph(
      [](const Tensor& x) {
        Tensor unused = exp(x) * 3;
        (void)unused;
        return x + 1;
      },
      x);
  EXPECT_EQ(g.nodes.size(), 3u);
  std::vector<bool> live = live_nodes(g);
  EXPECT_EQ(std::count(live.begin(), live.end(), true), 1);
  PassStats st;
  Graph p = run_passes(g, PassOptions{}, &st);
  EXPECT_EQ(p.nodes.size(), 1u) << p.str();
  EXPECT_EQ(st.removed_dead, 2);
  EXPECT_NE(st.str().find("dce removed 2"), std::string::npos) << st.str();
  PassOptions off;
  off.dce = false;
  EXPECT_EQ(run_passes(g, off).nodes.size(), 3u);
}

TEST_F(Passes, CommonSubexpressionsAreMerged) {
  Tensor x = randn({8}), y = randn({8});
  Graph g = trace_graph(
      [](const Tensor& x, const Tensor& y) { return (x * y + 1) * (x * y + 1) + x * 2; }, x, y);
  EXPECT_EQ(count_op(g, "mul"), 4);
  PassStats st;
  Graph p = run_passes(g, PassOptions{}, &st);
  EXPECT_EQ(count_op(p, "mul"), 3) << p.str();  // x*y once, the square, x*2
  EXPECT_EQ(count_op(p, "add"), 2) << p.str();
  EXPECT_EQ(st.merged_common, 2);
  PassOptions off;
  off.cse = false;
  EXPECT_EQ(count_op(run_passes(g, off), "mul"), 4);
  // x * 2 and x * 3 differ: not merged.
  Graph h = trace_graph([](const Tensor& x) { return x * 2 + x * 3; }, x);
  EXPECT_EQ(count_op(run_passes(h, PassOptions{}), "mul"), 2);
}

TEST_F(Passes, CompositesAreDecomposedIntoPrimitives) {
  Tensor x = randn({4, 10});
  Graph g = trace_graph([](const Tensor& x) { return softmax(x, 1); }, x);
  ASSERT_EQ(g.nodes.size(), 1u) << g.str();
  EXPECT_EQ(g.nodes[0].op, "softmax");
  PassStats st;
  Graph p = run_passes(g, PassOptions{}, &st);
  EXPECT_EQ(count_op(p, "softmax"), 0) << p.str();
  EXPECT_GE(st.decomposed, 1);
  EXPECT_EQ(count_op(p, "exp"), 1) << p.str();
  EXPECT_GE(count_op(p, "amax") + count_op(p, "max"), 1) << p.str();
  EXPECT_EQ(count_op(p, "sum"), 1) << p.str();
  PassOptions off;
  off.decompose = false;
  EXPECT_EQ(count_op(run_passes(g, off), "softmax"), 1);

  Graph ln = run_passes(trace_graph([](const Tensor& x) { return layer_norm(x, {10}); }, x),
                        PassOptions{});
  EXPECT_EQ(count_op(ln, "layer_norm"), 0) << ln.str();
}

TEST_F(Passes, ConstantsAreFolded) {
  Tensor x = randn({5});
  Tensor captured = arange(5, TensorOptions().dtype(DType::Float32));
  // A tensor captured from outside is lifted: ops over it are recorded (and
  // never folded), so in-place updates of it are seen at every call.
  Graph g0 = trace_graph([&captured](const Tensor& x) { return x + exp(captured * 0.5); }, x);
  ASSERT_EQ(g0.nodes.size(), 3u) << g0.str();
  const Buffer& cb = g0.buffers[g0.nodes[0].inputs[0].buf];
  EXPECT_EQ(cb.kind, BufferKind::Constant);
  EXPECT_TRUE(cb.captured);
  PassStats st0;
  EXPECT_EQ(run_passes(g0, PassOptions{}, &st0).nodes.size(), 3u);
  EXPECT_EQ(st0.folded, 0);

  // Nodes over constants the function created (as replays produce them) are folded.
  GraphBuilder gb;
  Tensor c = arange(5, TensorOptions().dtype(DType::Float32));  // created during the trace
  Tensor xt = gb.add_input(x, 0);
  Tensor e = gb.record("exp", {c}, {}, {{c.sizes(), DType::Float32, c.device()}}).at(0);
  {
    TraceScope scope(&gb);
    Tensor e2 = sqrt(e);
    gb.finish({xt * e2});
  }
  Graph g = std::move(gb.graph);
  EXPECT_EQ(g.nodes.size(), 3u) << g.str();
  PassStats st;
  Graph p = run_passes(g, PassOptions{}, &st);
  EXPECT_EQ(st.folded, 2) << p.str();
  ASSERT_EQ(p.nodes.size(), 1u) << p.str();
  EXPECT_EQ(p.nodes[0].op, "mul");
  const Operand& k = p.nodes[0].inputs[1];
  ASSERT_FALSE(k.is_scalar());
  const Buffer& b = p.buffers[k.buf];
  ASSERT_EQ(b.kind, BufferKind::Constant);
  EXPECT_TRUE(smelt_test::close(b.constant.view({5}), sqrt(exp(c)), 1e-7));
  PassOptions off;
  off.fold_constants = false;
  EXPECT_EQ(run_passes(g, off).nodes.size(), 3u);
}

TEST_F(Passes, AllPassesOffKeepTheGraph) {
  Tensor x = randn({3, 4});
  Graph g = trace_graph(
      [](const Tensor& x) { return std::make_tuple(softmax(x * 2, 1), x * 2, exp(x)); }, x);
  PassOptions off{false, false, false, false};
  PassStats st;
  Graph p = run_passes(g, off, &st);
  EXPECT_EQ(p.nodes.size(), g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) EXPECT_EQ(p.nodes[i].op, g.nodes[i].op);
  EXPECT_EQ(st.removed_dead + st.merged_common + st.decomposed + st.folded, 0);
  EXPECT_EQ(p.outputs.size(), 3u);
}

TEST_F(Passes, WriteBacksSurvivePasses) {
  Tensor x = randn({6});
  Graph g = trace_graph(
      [](const Tensor& x) {
        Tensor t = x;
        t.mul_(2);
        t.add_(1);
        return x.sum();
      },
      x);
  Graph p = run_passes(g, PassOptions{});
  ASSERT_EQ(p.mutations.size(), 1u) << p.str();
  EXPECT_EQ(p.buffers[p.mutations[0].first].kind, BufferKind::Input);
  EXPECT_EQ(count_op(p, "mul"), 1) << p.str();
  EXPECT_EQ(count_op(p, "add"), 1) << p.str();
}

namespace {
/// The graph of fuzz program `p` (a tracer for each of its inputs).
Graph trace_program(const smelt::fuzz::Program& p) {
  GraphBuilder gb;
  std::vector<Tensor> real = smelt::fuzz::make_inputs(p), tracers;
  for (size_t i = 0; i < real.size(); ++i)
    tracers.push_back(gb.add_input(real[i], static_cast<int>(i)));
  std::vector<Tensor> outs;
  {
    TraceScope scope(&gb);
    outs = smelt::fuzz::interpret(p, tracers);
  }
  gb.finish(outs);
  gb.restore_params();
  return std::move(gb.graph);
}
}  // namespace

TEST_F(Passes, UnchangedGraphIsWhatTheReplayWouldBuild) {
  // A graph no pass changes is kept as it is: it must be the replay's graph
  // buffer for buffer (same hash), for every combination of passes.
  Tensor captured = randn({4});
  std::vector<Graph> graphs;
  Tensor x = randn({4});
  graphs.push_back(trace_graph([](const Tensor& x) { return sigmoid(x * 2 + 1); }, x));
  graphs.push_back(trace_graph(  // a constant the function creates, one it captures
      [&](const Tensor& x) { return x * smelt::ones({4}) + captured; }, x));
  graphs.push_back(trace_graph(  // the same value twice, both returned (never merged)
      [](const Tensor& x) { return std::make_tuple(x + 1, x + 1); }, x));
  graphs.push_back(trace_graph(  // repeated, dead, composite
      [](const Tensor& x) {
        Tensor unused = exp(x);
        return softmax(x + 1, 0) * (x + 1);
      },
      x));
  for (int i = 0; i < 150; ++i) graphs.push_back(trace_program(smelt::fuzz::generate(77, i)));
  int kept = 0;
  for (size_t k = 0; k < graphs.size(); ++k) {
    for (int mask = 0; mask < 16; ++mask) {
      PassOptions keep{(mask & 1) != 0, (mask & 2) != 0, (mask & 4) != 0, (mask & 8) != 0};
      PassOptions replay = keep;
      replay.keep_unchanged = false;
      Graph a = run_passes(graphs[k], keep), b = run_passes(graphs[k], replay);
      ASSERT_EQ(a.hash(), b.hash()) << "graph " << k << ", passes mask " << mask << "\nkept:\n"
                                    << a.str() << "replayed:\n"
                                    << b.str();
      kept += a.hash() == graphs[k].hash();
    }
  }
  EXPECT_GT(kept, 500) << "most fuzz graphs have nothing for the passes to do";
}
