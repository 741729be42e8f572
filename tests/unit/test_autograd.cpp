// Autograd semantics (smelt/autograd.h), each against what PyTorch does:
// requires_grad and leaves, backward and .grad accumulation, retain_graph,
// autograd::grad (and create_graph), grad mode guards, detach, hooks, version
// counters and in-place rules, views written in place, non-differentiable
// ops, deep graphs, nn parameters and smelt::compile's graph break.
#include <gtest/gtest.h>

#include <thread>

#include "smelt/autograd.h"
#include "smelt/compile.h"
#include "smelt/nn.h"
#include "smelt/ops.h"
#include "test_util.h"

namespace {

using namespace smelt;
using smelt_test::error_of;
using smelt_test::expect_close;
using smelt_test::expect_error_mentions;
using smelt_test::make;
using smelt_test::vals;

Tensor leaf(const std::vector<double>& v, const Shape& s) {
  return make(v, s).requires_grad_(true);
}

TEST(Autograd, LeavesRequireGradByOptionOrMethod) {
  Tensor a = zeros({2}, TensorOptions().requires_grad(true));
  EXPECT_TRUE(a.requires_grad());
  EXPECT_TRUE(a.is_leaf());
  EXPECT_EQ(a.grad_fn(), nullptr);
  Tensor b = ones({2});
  EXPECT_FALSE(b.requires_grad());
  b.requires_grad_();
  EXPECT_TRUE(b.requires_grad());
  b.requires_grad_(false);
  EXPECT_FALSE(b.requires_grad());
  expect_error_mentions([] { zeros({2}, int64).requires_grad_(); },
                        "only Tensors of floating point dtype can require gradients");
  expect_error_mentions([] { arange(3, TensorOptions().requires_grad(true)); },
                        "only Tensors of floating point dtype");
}

TEST(Autograd, BackwardOfAScalarFillsLeafGrads) {
  Tensor x = leaf({1, 2, 3}, {3});
  Tensor w = leaf({0.5, -1, 2}, {3});
  Tensor y = sum(x * x * w);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "SumBackward0");
  y.backward();
  expect_close(vals(x.grad()), {1, -4, 12}, 1e-12);  // 2 x w
  expect_close(vals(w.grad()), {1, 4, 9}, 1e-12);    // x^2
}

TEST(Autograd, NonScalarNeedsAGradientOfItsShape) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = x * 3.0;
  expect_error_mentions([&] { y.backward(); },
                        "grad can be implicitly created only for scalar outputs");
  expect_error_mentions([&] { y.backward(ones({3}, float64)); }, "Mismatch in shape");
  y.backward(make({1, -2}, {2}));
  expect_close(vals(x.grad()), {3, -6}, 1e-12);
}

TEST(Autograd, GradAccumulatesAcrossBackwardCalls) {
  Tensor x = leaf({1, 2}, {2});
  sum(x * x).backward();
  sum(x * x).backward();
  expect_close(vals(x.grad()), {4, 8}, 1e-12);
  x.mutable_grad() = Tensor();  // zero_grad(set_to_none=true)
  sum(x * 5.0).backward();
  expect_close(vals(x.grad()), {5, 5}, 1e-12);
}

TEST(Autograd, SecondBackwardNeedsRetainGraph) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = sum(exp(x));  // exp saves its result
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  expect_close(vals(x.grad()), {2 * std::exp(1.0), 2 * std::exp(2.0)}, 1e-12);
  expect_error_mentions([&] { y.backward(); },
                        "Trying to backward through the graph a second time");
}

TEST(Autograd, GradReturnsGradientsWithoutTouchingDotGrad) {
  Tensor x = leaf({1, 2}, {2});
  Tensor z = leaf({3}, {1});
  Tensor y = sum(x * x * x);
  std::vector<Tensor> g = autograd::grad({y}, {x}, {}, /*retain_graph=*/true);
  expect_close(vals(g[0]), {3, 12}, 1e-12);
  EXPECT_FALSE(x.grad().defined());
  expect_error_mentions([&] { autograd::grad({y}, {z}, {}, true); },
                        "appears to not have been used in the graph");
  std::vector<Tensor> u = autograd::grad({y}, {x, z}, {}, true, false, /*allow_unused=*/true);
  EXPECT_TRUE(u[0].defined());
  EXPECT_FALSE(u[1].defined());
  expect_error_mentions([&] { autograd::grad({y}, {make({1}, {1})}); }, "does not require grad");
}

TEST(Autograd, CreateGraphGivesSecondDerivatives) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = sum(x * x * x);
  Tensor g = autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  EXPECT_TRUE(g.requires_grad());
  expect_close(vals(g), {3, 12}, 1e-12);
  Tensor gg = autograd::grad({sum(g)}, {x})[0];
  expect_close(vals(gg), {6, 12}, 1e-12);  // 6 x
  // Through saved outputs too: d2/dx2 tanh = -2 tanh (1 - tanh^2).
  Tensor t = leaf({0.3}, {1});
  Tensor d = autograd::grad({sum(tanh(t))}, {t}, {}, std::nullopt, true)[0];
  Tensor d2 = autograd::grad({sum(d)}, {t})[0];
  const double th = std::tanh(0.3);
  expect_close(vals(d2), {-2 * th * (1 - th * th)}, 1e-12);
}

TEST(Autograd, BackwardWithInputsAccumulatesOnlyThere) {
  Tensor x = leaf({1, 2}, {2});
  Tensor w = leaf({3, 4}, {2});
  sum(x * w).backward(Tensor(), std::nullopt, false, {x});
  expect_close(vals(x.grad()), {3, 4}, 1e-12);
  EXPECT_FALSE(w.grad().defined());
}

TEST(Autograd, NoGradGuardRecordsNothing) {
  Tensor x = leaf({1, 2}, {2});
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(GradMode::is_enabled());
    Tensor y = x * 2.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.impl()->autograd, nullptr);
    {
      EnableGradGuard enable;
      EXPECT_TRUE((x * 2.0).requires_grad());
    }
    // Grad mode is per thread.
    bool other = false;
    std::thread([&] { other = GradMode::is_enabled(); }).join();
    EXPECT_TRUE(other);
  }
  EXPECT_TRUE(GradMode::is_enabled());
  // Without any input that requires grad, ops record nothing (no autograd state).
  Tensor a = make({1, 2}, {2});
  Tensor b = exp(a) + a;
  EXPECT_EQ(b.impl()->autograd, nullptr);
  EXPECT_EQ(a.impl()->autograd, nullptr);
}

TEST(Autograd, DetachSharesMemoryAndVersionButNoHistory) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = x * 2.0;
  Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.storage(), y.storage());
  const uint32_t v = y._version();
  d.add_(1.0);
  EXPECT_EQ(y._version(), v + 1);
  expect_close(vals(y), {3, 5}, 1e-12);
  Tensor e = y * 1.0;
  e.detach_();
  EXPECT_FALSE(e.requires_grad());
  EXPECT_TRUE(e.is_leaf());
}

TEST(Autograd, HooksSeeAndReplaceGradients) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = x * 3.0;
  std::vector<double> seen;
  y.register_hook([&](const Tensor& g) { seen = vals(g); });
  const unsigned h = y.register_hook([](const Tensor& g) { return g * 10.0; });
  x.register_hook([](const Tensor& g) { return g + 1.0; });
  sum(y).backward(Tensor(), true);
  expect_close(seen, {1, 1}, 1e-12);
  expect_close(vals(x.grad()), {31, 31}, 1e-12);  // (1 * 10) * 3 + 1
  y.remove_hook(h);
  x.mutable_grad() = Tensor();
  sum(y).backward();
  expect_close(vals(x.grad()), {4, 4}, 1e-12);
  expect_error_mentions([] { make({1}, {1}).register_hook([](const Tensor& g) { return g; }); },
                        "doesn't require gradient");
}

TEST(Autograd, RetainGradKeepsANonLeafsGradient) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = x * x;
  y.retain_grad();
  EXPECT_TRUE(y.retains_grad());
  sum(y * 3.0).backward();
  expect_close(vals(y.grad()), {3, 3}, 1e-12);
  expect_close(vals(x.grad()), {6, 12}, 1e-12);
}

TEST(Autograd, ModifiedSavedTensorRaisesPyTorchsError) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = exp(x);
  Tensor z = sum(y);
  EXPECT_EQ(y._version(), 0u);
  y.add_(1.0);  // y is not a leaf: allowed, but exp saved it
  EXPECT_EQ(y._version(), 1u);
  expect_error_mentions(
      [&] { z.backward(); },
      "one of the variables needed for gradient computation has been modified by an inplace "
      "operation: [float64 [2]], which is output 0 of ExpBackward0, is at version 1; expected "
      "version 0 instead");
  // A saved input modified in place after the op.
  Tensor a = leaf({1, 2}, {2});
  Tensor b = a * 1.0;
  Tensor c = sum(b * b);
  b.mul_(2.0);
  expect_error_mentions([&] { c.backward(); }, "is at version 1; expected version 0 instead");
}

TEST(Autograd, InPlaceOnALeafThatRequiresGradRaises) {
  Tensor x = leaf({1, 2}, {2});
  expect_error_mentions([&] { x.add_(1.0); },
                        "a leaf Variable that requires grad is being used in an in-place "
                        "operation");
  expect_error_mentions([&] { x.narrow(0, 0, 1).zero_(); },
                        "a view of a leaf Variable that requires grad is being used in an in-place "
                        "operation");
  {
    NoGradGuard no_grad;  // as an optimizer step
    x.sub_(make({0.5, 0.5}, {2}));
  }
  expect_close(vals(x), {0.5, 1.5}, 1e-12);
  EXPECT_TRUE(x.is_leaf());
  EXPECT_EQ(x._version(), 1u);
}

TEST(Autograd, InPlaceOpsOnNonLeavesAreDifferentiated) {
  Tensor x = leaf({1, 2}, {2});
  Tensor w = leaf({3, 5}, {2});
  Tensor y = x * 2.0;
  y.mul_(w);  // saves y's old values (x * 2) for w's gradient
  y.exp_();
  sum(y).backward();
  const double e0 = std::exp(6.0), e1 = std::exp(20.0);
  expect_close(vals(x.grad()), {e0 * 6, e1 * 10}, 1e-12);
  expect_close(vals(w.grad()), {e0 * 2, e1 * 4}, 1e-12);
}

TEST(Autograd, InPlaceWriteThroughAViewRebasesTheBase) {
  Tensor x = leaf({1, 2, 3, 4}, {2, 2});
  Tensor w = leaf({10, 20}, {2});
  Tensor y = x * 1.0;
  Tensor row = y.select(0, 1);
  row.copy_(w);
  EXPECT_EQ(y.grad_fn()->name(), "CopySlices");
  sum(y * make({1, 2, 3, 4}, {2, 2})).backward();
  expect_close(vals(x.grad()), {1, 2, 0, 0}, 1e-12);
  expect_close(vals(w.grad()), {3, 4}, 1e-12);

  // A view written in place carries the base's new history; another view of the
  // base made before the write sees it too.
  Tensor a = leaf({1, 2, 3}, {3});
  Tensor b = a * 2.0;
  Tensor first = b.narrow(0, 0, 2);
  Tensor last = b.narrow(0, 2, 1);
  first.mul_(3.0);
  sum(first).backward(Tensor(), true);
  expect_close(vals(a.grad()), {6, 6, 0}, 1e-12);
  a.mutable_grad() = Tensor();
  sum(b).backward();
  expect_close(vals(a.grad()), {6, 6, 2}, 1e-12);
  (void)last;
}

TEST(Autograd, ViewsOfTensorsThatRequireGradFlowGradients) {
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor v = x.t().slice(0, 1, 3).reshape({4});
  EXPECT_TRUE(v.requires_grad());
  EXPECT_TRUE(v.is_view());
  sum(v * make({1, 2, 3, 4}, {4})).backward();
  // v = [x01, x11, x02, x12]
  expect_close(vals(x.grad()), {0, 1, 3, 0, 2, 4}, 1e-12);
}

TEST(Autograd, NonDifferentiableOpsGiveResultsWithoutGrad) {
  Tensor x = leaf({1, 3, 2}, {3});
  Tensor i = argmax(x);
  EXPECT_FALSE(i.requires_grad());
  expect_error_mentions([&] { to_dtype(i, float64).backward(); }, "does not require grad");
  Tensor m = x.gt(1.5);
  EXPECT_FALSE(m.requires_grad());
  expect_error_mentions([&] { m.backward(); },
                        "it is the result of 'gt', which is not differentiable");
  auto [values, indices] = max(x, 0);
  EXPECT_TRUE(values.requires_grad());
  EXPECT_FALSE(indices.requires_grad());
  values.backward();
  expect_close(vals(x.grad()), {0, 1, 0}, 1e-12);
}

TEST(Autograd, DeepGraphsNeedNoDeepRecursion) {
  // Deeper than a recursive engine or a recursive destructor could take.
  Tensor x = leaf({1.0}, {1});
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = y * 1.0;
  y.backward(make({2.0}, {1}), /*retain_graph=*/true);
  expect_close(vals(x.grad()), {2.0}, 1e-12);
  y = Tensor();  // frees the 100000 nodes, one after the other
  EXPECT_EQ(x.grad_fn(), nullptr);
}

TEST(Autograd, SharedSubgraphsSumTheirGradients) {
  Tensor x = leaf({2}, {1});
  Tensor a = x * x;                 // used twice below
  Tensor y = sum(a * a + a * 3.0);  // x^4 + 3 x^2
  y.backward();
  expect_close(vals(x.grad()), {4 * 8 + 6 * 2}, 1e-12);
}

TEST(Autograd, ModuleParametersRequireGrad) {
  manual_seed(0);
  nn::Linear lin(3, 2);
  for (const auto& p : lin->parameters()) {
    EXPECT_TRUE(p.requires_grad());
    EXPECT_TRUE(p.is_leaf());
  }
  Tensor x = make({1, 2, 3, -1, 0, 1}, {2, 3}).to(float32);
  sum(lin(x)).backward();
  // d sum(x W^T + b) / dW = column sums of x for every row; / db = batch size.
  expect_close(vals(lin->weight.grad()), {0, 2, 4, 0, 2, 4}, 1e-6);
  expect_close(vals(lin->bias.grad()), {2, 2}, 1e-6);
  // Loading a state dict and converting stay possible (outside autograd).
  lin->load_state_dict({{"weight", zeros({2, 3})}, {"bias", ones({2})}});
  expect_close(vals(lin->bias), {1, 1}, 0);
  lin->to(float64);
  EXPECT_TRUE(lin->weight.requires_grad());
  EXPECT_EQ(lin->weight.grad().dtype(), float64);
}

TEST(Autograd, CompiledFunctionWithInputsThatRequireGradCompilesItsBackward) {
  auto f = compile([](const Tensor& a, const Tensor& b) { return tanh(a * b); });
  Tensor a = leaf({0.1, 0.2, 0.3}, {3});
  Tensor b = make({1, 2, 3}, {3});
  Tensor y = f(a, b);
  EXPECT_TRUE(y.requires_grad());
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "CompiledFunctionBackward");
  EXPECT_EQ(f.stats().graph_breaks, 0) << f.stats().last_graph_break;
  sum(y).backward();
  std::vector<double> want;
  for (double i : {1.0, 2.0, 3.0}) {
    const double t = std::tanh(0.1 * i * i);
    want.push_back((1 - t * t) * i);
  }
  expect_close(vals(a.grad()), want, 1e-12);
  EXPECT_FALSE(b.grad().defined());
  {
    NoGradGuard no_grad;  // a graph of its own (grad mode is a guard)
    Tensor z = f(a, b);
    EXPECT_FALSE(z.requires_grad());
    EXPECT_EQ(f.stats().compiles, 2);
  }
  CompileOptions full;
  full.fullgraph = true;
  auto g = compile([](const Tensor& a) { return a * 2.0; }, full);
  sum(g(a)).backward();
  expect_close(vals(a.grad()), {want[0] + 2, want[1] + 2, want[2] + 2}, 1e-12);
}

TEST(Autograd, GraphTracedWithoutGradIsNotReusedWithGrad) {
  // The function closes over a tensor that requires grad: only the grad-mode
  // guard can tell the two calls apart.
  Tensor w = leaf({2, 3}, {2});
  auto f = compile([w](const Tensor& x) { return x * w; });
  Tensor x = make({1, 1}, {2});
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(f(x).requires_grad());
  }
  Tensor y = f(x);
  EXPECT_TRUE(y.requires_grad());
  sum(y).backward();
  expect_close(vals(w.grad()), {1, 1}, 1e-12);
}

TEST(Autograd, ScatterAddSumsRepeatedIndices) {
  Tensor self = make({1, 1, 1, 1}, {2, 2});
  Tensor index = from_vector<int64_t>({1, 1, 0, 1}, {2, 2});
  Tensor src = make({1, 2, 3, 4}, {2, 2});
  expect_close(vals(scatter_add(self, 1, index, src)), {1, 4, 4, 5}, 0);
  expect_error_mentions([&] { scatter_add(self, 1, index + 5, src); }, "out of bounds");
}

}  // namespace

TEST(Autograd, FloorDivideHasNoDerivativeAsInPyTorch) {
  // PyTorch: "derivative for aten::floor_divide is not implemented", while
  // div with rounding_mode "floor" has zero gradients.
  Tensor a = make({3, 5}, {2}).requires_grad_(), b = make({2, 2}, {2}).requires_grad_();
  Tensor q = floor_divide(a, b);
  EXPECT_EQ(vals(q), (std::vector<double>{1, 2}));  // the forward is unchanged
  expect_error_mentions([&] { sum(q).backward(); },
                        "the derivative for floor_divide is not implemented");
  EXPECT_FALSE(a.grad().defined());
  // Compiled, the same.
  auto cf = compile([](const Tensor& x, const Tensor& y) { return floor_divide(x, y); });
  Tensor cq = cf(a, b);
  EXPECT_EQ(vals(cq), (std::vector<double>{1, 2}));
  expect_error_mentions([&] { sum(cq).backward(); },
                        "the derivative for floor_divide is not implemented");
  EXPECT_FALSE(a.grad().defined());
  sum(div(a, b, "floor")).backward();
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{0, 0}));
  EXPECT_EQ(vals(b.grad()), (std::vector<double>{0, 0}));
}
