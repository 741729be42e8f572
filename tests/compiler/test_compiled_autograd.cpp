// A compiled forward whose results require grad (smelt::compile(model) called
// under grad mode, the loss and backward() run by the caller): the joint
// forward + backward trace split into two compiled graphs, the
// CompiledFunctionBackward node that runs the backward graph (gradients equal
// eager's, accumulate into .grad, reach arguments with a history, leaf hooks
// run once), retain_graph and in-place checks on the saved tensors, the
// guards (grad mode, requires_grad of arguments, parameters and captured
// tensors), the backward's fusion, and the memory the recompute rule saves.
#include <gtest/gtest.h>

#include <algorithm>

#include "compile_test_util.h"
#include "nn/models.h"
#include "smelt/memory.h"
#include "smelt/optim.h"
#include "smelt/smelt.h"

using namespace smelt;

namespace {

/// The compiler tests' fixture (private kernel cache...), with grad mode on.
class CompiledAutograd : public smelt_test::CompilerTest {
 protected:
  void SetUp() override {
    CompilerTest::SetUp();
    grad_ = std::make_unique<EnableGradGuard>();
  }
  void TearDown() override {
    grad_.reset();
    CompilerTest::TearDown();
  }

 private:
  std::unique_ptr<EnableGradGuard> grad_;
};

/// Two copies of the digits MLP (Linear, GELU, Linear, GELU, Linear) with the
/// same seeded weights in `dt`, and a batch.
struct Twins {
  nn::Sequential model{nullptr}, twin{nullptr};
  Tensor x, y;
  explicit Twins(DType dt, int64_t batch = 32, uint64_t seed = 0) {
    manual_seed(seed);
    model = models::make_digits_mlp();
    manual_seed(seed);
    twin = models::make_digits_mlp();
    model->to(dt);
    twin->to(dt);
    x = randn({batch, 64}).to(dt);
    y = randint(0, 10, {batch});
  }
};

double max_rel_err(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(got[i].defined() && want[i].defined()) << i;
    if (!got[i].defined() || !want[i].defined()) return 1e300;
    worst = std::max(worst, models::compare(got[i], want[i]).rel_err());
  }
  return worst;
}

std::vector<Tensor> grads_of(const nn::Sequential& m) {
  std::vector<Tensor> g;
  for (const auto& p : m->parameters()) g.push_back(p.grad());
  return g;
}

int count_containing(const std::vector<std::string>& names, const std::string& part) {
  return static_cast<int>(std::count_if(names.begin(), names.end(), [&](const std::string& n) {
    return n.find(part) != std::string::npos;
  }));
}

void check_grads_equal_eager(DType dt, double tol) {
  Twins t(dt);
  auto compiled = compile(t.model);
  Tensor out = compiled(t.x);
  ASSERT_TRUE(out.requires_grad());
  ASSERT_NE(out.grad_fn(), nullptr);
  EXPECT_EQ(out.grad_fn()->name(), "CompiledFunctionBackward");
  EXPECT_EQ(compiled.stats().graph_breaks, 0) << compiled.stats().last_graph_break;
  EXPECT_EQ(compiled.stats().eager_calls, 0);
  Tensor loss = cross_entropy(out, t.y);
  loss.backward();
  Tensor want_out = t.twin(t.x);
  Tensor want_loss = cross_entropy(want_out, t.y);
  want_loss.backward();
  EXPECT_LT(models::compare(out, want_out).rel_err(), tol);
  EXPECT_LT(models::compare(loss, want_loss).rel_err(), tol);
  EXPECT_LT(max_rel_err(grads_of(t.model), grads_of(t.twin)), tol);
  EXPECT_FALSE(t.x.grad().defined());
}

TEST_F(CompiledAutograd, GradientsEqualEagerFloat64) {
  check_grads_equal_eager(DType::Float64, 1e-12);
}

TEST_F(CompiledAutograd, GradientsEqualEagerFloat32) {
  check_grads_equal_eager(DType::Float32, 1e-5);
}

TEST_F(CompiledAutograd, TrainingLoopEqualsEager) {
  Twins t(DType::Float32);
  optim::SGD opt(t.model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD twin_opt(t.twin->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  auto compiled = compile(t.model);
  for (int step = 0; step < 4; ++step) {
    opt.zero_grad();
    Tensor loss = cross_entropy(compiled(t.x), t.y);
    loss.backward();
    opt.step();
    twin_opt.zero_grad();
    Tensor want = cross_entropy(t.twin(t.x), t.y);
    want.backward();
    twin_opt.step();
    EXPECT_NEAR(loss.item<double>(), want.item<double>(), 1e-5 * want.item<double>()) << step;
  }
  const auto ps = t.model->parameters(), qs = t.twin->parameters();
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_LT(models::compare(ps[i], qs[i]).rel_err(), 1e-5) << i;
    EXPECT_LT(models::compare(ps[i].grad(), qs[i].grad()).rel_err(), 1e-5) << i;
  }
  // Parameters updated in place and .grad set between calls need no new graph.
  EXPECT_EQ(compiled.stats().compiles, 1) << compiled.stats().last_recompile_reason;
  EXPECT_EQ(compiled.stats().calls, 4);
}

TEST_F(CompiledAutograd, GradientsAccumulateAcrossBackwardCalls) {
  Twins t(DType::Float64);
  auto compiled = compile(t.model);
  for (int i = 0; i < 2; ++i) {
    cross_entropy(compiled(t.x), t.y).backward();
    cross_entropy(t.twin(t.x), t.y).backward();
  }
  EXPECT_LT(max_rel_err(grads_of(t.model), grads_of(t.twin)), 1e-12);
}

TEST_F(CompiledAutograd, BackwardIsFused) {
  Twins t(DType::Float32);
  auto compiled = compile(t.model);
  cross_entropy(compiled(t.x), t.y).backward();
  const CompileStats& st = compiled.stats();
  const auto& bw = st.backward_kernel_names;
  const std::string names =
      fmt::format("forward: {}\nbackward: {}", fmt::join(st.kernel_names, " "), fmt::join(bw, " "));
  // Backward: 5 GEMMs (dW3, dx3, dW2, dx2, dW1); each GELU's derivative one
  // pointwise kernel (erf, exp, muls, adds over the saved input); each bias
  // gradient one column reduction; the two GELU values the weight gradients
  // read recomputed from the saved GELU inputs, one kernel each.
  EXPECT_EQ(count_containing(bw, "extern_matmul"), 5) << names;
  EXPECT_EQ(count_containing(bw, "_poi_fused_add_erf_exp_mul_"), 2) << names;
  EXPECT_EQ(count_containing(bw, "_poi_fused_gelu_"), 2) << names;
  EXPECT_EQ(count_containing(bw, "_fused_sum_"), 3) << names;
  for (const auto& n : bw) {
    if (n.find("_fused_sum_") == std::string::npos) continue;
    EXPECT_TRUE(n.rfind("cpp_per_", 0) == 0 || n.rfind("cpp_red_", 0) == 0) << n;
  }
  EXPECT_EQ(bw.size(), 12u) << names;
  // Forward: 3 GEMMs with their bias epilogue, 2 GELUs.
  EXPECT_EQ(count_containing(st.kernel_names, "_tem_fused_addmm_"), 3) << names;
  EXPECT_EQ(st.kernel_names.size(), 5u) << names;
  EXPECT_EQ(st.kernels, static_cast<int>(st.kernel_names.size() + bw.size()));
  EXPECT_LT(st.kernels * 2, st.eager_ops) << names;
  EXPECT_EQ(st.recomputed_ops, 2) << names;
  // Compiled code for both graphs.
  EXPECT_NE(compiled.generated_code().find("cpp_red_fused_sum_"), std::string::npos);
  EXPECT_NE(compiled.launch_plan().find("backward launch plan"), std::string::npos);
}

TEST_F(CompiledAutograd, NoGradGraphIsNotReusedWithGradEnabled) {
  Twins t(DType::Float32);
  auto compiled = compile(t.model);
  {
    NoGradGuard no_grad;
    Tensor y = compiled(t.x);
    EXPECT_FALSE(y.requires_grad());
  }
  EXPECT_EQ(compiled.stats().compiles, 1);
  Tensor y = compiled(t.x);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_EQ(compiled.stats().compiles, 2);
  EXPECT_NE(compiled.stats().last_recompile_reason.find("grad mode changed"), std::string::npos)
      << compiled.stats().last_recompile_reason;
  EXPECT_FALSE(compiled.stats().backward_kernel_names.empty());
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(compiled(t.x).requires_grad());
  }
  EXPECT_EQ(compiled.stats().compiles, 2) << "each graph is reused under its own grad mode";
  y.sum().backward();
  for (const auto& p : t.model->parameters()) EXPECT_TRUE(p.grad().defined());
}

TEST_F(CompiledAutograd, SecondBackwardRaisesUnlessRetained) {
  Twins t(DType::Float64);
  auto compiled = compile(t.model);
  Tensor out = compiled(t.x), want = t.twin(t.x);
  Tensor g = randn(out.sizes(), TensorOptions(DType::Float64));
  out.backward(g, /*retain_graph=*/true);
  out.backward(g);  // the saved tensors are still there
  want.backward(g, true);
  want.backward(g);
  EXPECT_LT(max_rel_err(grads_of(t.model), grads_of(t.twin)), 1e-12);
  smelt_test::expect_error_mentions([&] { out.backward(g); },
                                    "Trying to backward through the graph a second time");
  smelt_test::expect_error_mentions([&] { out.backward(g); }, "(node CompiledFunctionBackward)");
}

TEST_F(CompiledAutograd, DoubleBackwardRaises) {
  Twins t(DType::Float64);
  auto compiled = compile(t.model);
  Tensor loss = cross_entropy(compiled(t.x), t.y);
  smelt_test::expect_error_mentions(
      [&] { autograd::grad({loss}, {t.model->parameters()[0]}, {}, true, /*create_graph=*/true); },
      "create_graph=true (double backward)");
}

TEST_F(CompiledAutograd, SavedArgumentModifiedInPlaceRaises) {
  Twins t(DType::Float64);
  auto compiled = compile(t.model);
  Tensor loss = cross_entropy(compiled(t.x), t.y);
  t.x.mul_(2);  // the first layer's weight gradient reads x
  smelt_test::expect_error_mentions([&] { loss.backward(); }, "modified by an inplace operation");
}

TEST_F(CompiledAutograd, RecomputeSavesMemory) {
  // The digits MLP: x [B,64] -> h1 [B,128] -> gelu -> a1 -> h2 [B,64] -> gelu
  // -> a2 -> out [B,10]. The backward reads x, h1, a1, h2, a2 (and W2, W3);
  // a1 = gelu(h1) and a2 = gelu(h2) are recomputed from h1 and h2, which the
  // GELU derivatives read anyway.
  constexpr int64_t B = 32;
  std::vector<Tensor> grads[2];
  int64_t bytes[2] = {0, 0};
  for (int recompute = 0; recompute < 2; ++recompute) {
    Twins t(DType::Float32, B);
    CompileOptions o;
    o.recompute = recompute == 1;
    auto compiled = compile(t.model, o);
    cross_entropy(compiled(t.x), t.y).backward();
    const CompileStats& st = compiled.stats();
    bytes[recompute] = st.saved_bytes;
    EXPECT_EQ(st.saved_bytes_without_recompute, B * (64 + 128 + 128 + 64 + 64) * 4);
    if (recompute) {
      EXPECT_EQ(st.saved_bytes, B * (64 + 128 + 64) * 4);
      EXPECT_EQ(st.saved_tensors, 5);  // x, h1, h2, W2, W3
      EXPECT_EQ(st.recomputed_ops, 2);
    } else {
      EXPECT_EQ(st.saved_bytes, st.saved_bytes_without_recompute);
      EXPECT_EQ(st.saved_tensors, 7);  // x, h1, a1, h2, a2, W2, W3
      EXPECT_EQ(st.recomputed_ops, 0);
    }
    grads[recompute] = grads_of(t.model);
  }
  EXPECT_LT(bytes[1], bytes[0]);
  EXPECT_LT(max_rel_err(grads[1], grads[0]), 1e-6);
}

TEST_F(CompiledAutograd, BackwardFreesEachSavedActivationAfterItsLastUse) {
  // The seed MLP at batch 256 saves h1 [256, 1024] and h2 [256, 512] (1.5
  // MiB; the GELU outputs are recomputed from them). A backward without
  // retain_graph hands them to the backward graph, which frees each after the
  // GELU derivative that reads it last: by the time the first layer's weight
  // gradient (4 MiB) is allocated, neither is held. With retain_graph both
  // stay until the end.
  manual_seed(0);
  nn::Sequential model = models::make_seed_mlp(), twin = models::make_seed_mlp();
  twin->load_state_dict(model->state_dict());
  const Tensor x = randn({256, 1024}), y = randint(0, 10, {256});
  auto compiled = compile(model);
  int64_t peak[2] = {0, 0};
  for (int retain = 0; retain < 2; ++retain) {
    for (auto& p : model->parameters()) p.mutable_grad() = Tensor();
    Tensor loss = cross_entropy(compiled(x), y);
    const int64_t before = memory_allocated();
    reset_peak_memory_stats();
    loss.backward({}, /*retain_graph=*/retain == 1);
    peak[retain] = max_memory_allocated() - before;
    EXPECT_EQ(compiled.stats().saved_bytes, 256 * (1024 + 1024 + 512) * 4) << "x, h1, h2";
  }
  constexpr int64_t kSavedActivations = 256 * (1024 + 512) * 4;
  EXPECT_LE(peak[0] + kSavedActivations, peak[1]) << peak[0] << " vs " << peak[1];
  cross_entropy(twin(x), y).backward();
  EXPECT_LT(max_rel_err(grads_of(model), grads_of(twin)), 1e-5);
}

TEST_F(CompiledAutograd, ResultsThatDoNotRequireGradAndUnusedResults) {
  Tensor w = (randn({4, 3}, TensorOptions(DType::Float64)) * 0.5).requires_grad_();
  Tensor v = randn({4, 3}, TensorOptions(DType::Float64)).requires_grad_();
  auto fn = [&](const Tensor& x) {
    Tensor a = exp(x * w);
    return std::make_tuple(a.sum(1), argmax(a, 1), tanh(x + v), x * 2);
  };
  auto f = compile(fn);
  Tensor x = randn({4, 3}, TensorOptions(DType::Float64));
  auto [s, idx, th, x2] = f(x);
  EXPECT_EQ(f.stats().graph_breaks, 0) << f.stats().last_graph_break;
  EXPECT_TRUE(s.requires_grad());
  EXPECT_FALSE(idx.requires_grad());
  EXPECT_FALSE(x2.requires_grad());
  EXPECT_TRUE(th.requires_grad());
  EXPECT_EQ(s.grad_fn(), th.grad_fn()) << "one node for the call";
  // Only the first result reaches the loss: th's gradient is zero, v gets none.
  (s * s).sum().backward();
  const Tensor gw = w.grad().clone();
  EXPECT_FALSE(v.grad().defined() && v.grad().abs().sum().item<double>() != 0);
  w.mutable_grad() = Tensor();
  v.mutable_grad() = Tensor();
  auto [es, eidx, eth, ex2] = fn(x);
  (es * es).sum().backward();
  EXPECT_LT(models::compare(gw, w.grad()).rel_err(), 1e-12);
  EXPECT_TRUE(smelt_test::same(idx, eidx));
}

TEST_F(CompiledAutograd, ArgumentWithHistoryAndLeafHooks) {
  Tensor x0 = randn({5, 6}, TensorOptions(DType::Float64)).requires_grad_();
  Tensor w = randn({6, 2}, TensorOptions(DType::Float64)).requires_grad_();
  int hook_calls = 0;
  w.register_hook([&](const Tensor& g) {
    ++hook_calls;
    return g * 3;
  });
  auto fn = [&](const Tensor& x) { return sigmoid(matmul(x, w)); };
  auto f = compile(fn);
  Tensor x = x0 * 2;  // an argument with a history
  f(x).sum().backward();
  EXPECT_EQ(f.stats().graph_breaks, 0) << f.stats().last_graph_break;
  EXPECT_EQ(hook_calls, 1) << "the leaf's hook runs once, at backward time";
  const Tensor gx = x0.grad().clone(), gw = w.grad().clone();
  x0.mutable_grad() = Tensor();
  w.mutable_grad() = Tensor();
  fn(x0 * 2).sum().backward();
  EXPECT_EQ(hook_calls, 2);
  EXPECT_LT(models::compare(gx, x0.grad()).rel_err(), 1e-12);
  EXPECT_LT(models::compare(gw, w.grad()).rel_err(), 1e-12);
}

TEST_F(CompiledAutograd, RequiresGradIsGuarded) {
  Tensor w = randn({3}, TensorOptions(DType::Float64)).requires_grad_();
  auto f = compile([&](const Tensor& x) { return (x * w).sin(); });
  Tensor x = randn({3}, TensorOptions(DType::Float64));
  f(x).sum().backward();
  EXPECT_FALSE(x.grad().defined());
  // The argument now requires grad: a new graph, whose backward reaches it.
  x.requires_grad_();
  f(x).sum().backward();
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_NE(f.stats().last_recompile_reason.find("requires grad"), std::string::npos)
      << f.stats().last_recompile_reason;
  ASSERT_TRUE(x.grad().defined());
  EXPECT_LT(models::compare(x.grad(), (x * w).cos().detach() * w.detach()).rel_err(), 1e-12);
  // The captured tensor no longer requires grad: another graph.
  w.requires_grad_(false);
  Tensor y = f(x);
  EXPECT_EQ(f.stats().compiles, 3);
  EXPECT_NE(f.stats().last_recompile_reason.find("no longer requires grad"), std::string::npos)
      << f.stats().last_recompile_reason;
  EXPECT_TRUE(y.requires_grad()) << "through x";
  // A parameter frozen: a new graph.
  Twins t(DType::Float32);
  auto compiled = compile(t.model);
  compiled(t.x);
  t.model->parameters()[0].requires_grad_(false);
  cross_entropy(compiled(t.x), t.y).backward();
  EXPECT_EQ(compiled.stats().compiles, 2);
  EXPECT_FALSE(t.model->parameters()[0].grad().defined());
  EXPECT_TRUE(t.model->parameters()[1].grad().defined());
}

TEST_F(CompiledAutograd, FullgraphCompilesTheForward) {
  Twins t(DType::Float32);
  CompileOptions full;
  full.fullgraph = true;
  auto compiled = compile(t.model, full);
  cross_entropy(compiled(t.x), t.y).backward();
  EXPECT_EQ(compiled.stats().graph_breaks, 0);
  EXPECT_TRUE(t.model->parameters()[0].grad().defined());
}

TEST_F(CompiledAutograd, ResultsThatAreViewsOfArguments) {
  auto fn = [](const Tensor& x, const Tensor& y) {
    return std::make_tuple(x, x.t(), x.select(0, 1), x * y);
  };
  auto f = compile(fn);
  Tensor x = randn({3, 4}, TensorOptions(DType::Float64)).requires_grad_();
  Tensor y = randn({3, 4}, TensorOptions(DType::Float64)).requires_grad_();
  auto [a, b, c, d] = f(x, y);
  EXPECT_EQ(f.stats().graph_breaks, 0) << f.stats().last_graph_break;
  // `return x` returns x; the views are views of x with a view node each.
  EXPECT_TRUE(a.is_leaf());
  EXPECT_EQ(a.data_ptr(), x.data_ptr());
  ASSERT_NE(b.grad_fn(), nullptr);
  EXPECT_EQ(b.grad_fn()->name(), "AsStridedBackward0");
  EXPECT_EQ(b.data_ptr(), x.data_ptr());
  EXPECT_EQ(c.data_ptr(), static_cast<const double*>(x.data_ptr()) + 4);
  EXPECT_EQ(d.grad_fn()->name(), "CompiledFunctionBackward");
  Tensor ca = randn({3, 4}, TensorOptions(DType::Float64)),
         cb = randn({4, 3}, TensorOptions(DType::Float64)),
         cc = randn({4}, TensorOptions(DType::Float64)),
         cd = randn({3, 4}, TensorOptions(DType::Float64));
  auto loss = [&](const Tensor& p, const Tensor& q, const Tensor& r, const Tensor& s) {
    return (p * ca).sum() + (q * cb).sum() + (r * cc).sum() + (s * cd).sum();
  };
  loss(a, b, c, d).backward();
  const Tensor gx = x.grad().clone(), gy = y.grad().clone();
  x.mutable_grad() = Tensor();
  y.mutable_grad() = Tensor();
  auto [ea, eb, ec, ed] = fn(x, y);
  loss(ea, eb, ec, ed).backward();
  EXPECT_LT(models::compare(gx, x.grad()).rel_err(), 1e-12);
  EXPECT_LT(models::compare(gy, y.grad()).rel_err(), 1e-12);
  // An in-place write into a view of a leaf raises, as eagerly.
  // (A copy of the handle: Clang 14 captures no structured binding in a lambda.)
  const Tensor view_of_leaf = b;
  smelt_test::expect_error_mentions([&] { view_of_leaf.add_(1); }, "a view of a leaf Variable");
}

TEST_F(CompiledAutograd, ResultThatIsAViewOfANonContiguousArgumentRunsEagerly) {
  auto f = compile([](const Tensor& x) { return std::make_tuple(x.t(), x * 2); });
  Tensor x = randn({4, 3}).t().requires_grad_();
  auto [a, b] = f(x);
  EXPECT_EQ(f.stats().graph_breaks, 1);
  EXPECT_NE(f.stats().last_graph_break.find("result 0 requires grad and is a non-contiguous "
                                            "argument"),
            std::string::npos)
      << f.stats().last_graph_break;
  (a.t() + b).sum().backward();
  EXPECT_TRUE(smelt_test::same(x.grad(), full({3, 4}, 3.0f)));
}

}  // namespace

// Attention scores over head views whose batch matmul copies (k^T
// column-major): compiled forward equal to eager bit for bit, and the
// gradients of the compiled function equal eager's.
TEST_F(CompiledAutograd, MatmulOfCopiedHeadViewsMatchesEager) {
  const int64_t B = 6, T = 5, H = 3, D = 4;  // B calls of H products each without the copies
  for (DType dt : {DType::Float64, DType::Float32}) {
    Tensor qb = randn({B, T, H * D}).to(dt), kb = randn({B, T, H * D}).to(dt),
           w = randn({B, H, T, T}).to(dt);
    auto scores = [=](const Tensor& qb, const Tensor& kb) {
      Tensor q = qb.view({B, T, H, D}).transpose(1, 2);
      Tensor kt = kb.view({B, T, H, D}).transpose(1, 2).transpose(-2, -1);
      return softmax(matmul(q, kt) * 0.5, -1) * w;
    };
    {
      NoGradGuard no_grad;
      EXPECT_TRUE(smelt_test::bitwise_same(compile(scores)(qb, kb), scores(qb, kb)))
          << dtype_name(dt);
    }
    std::vector<Tensor> grads;
    auto compiled = compile(scores);
    for (bool use_compiled : {true, false}) {
      Tensor q = qb.detach(), k = kb.detach();
      q.requires_grad_(true);
      k.requires_grad_(true);
      (use_compiled ? compiled(q, k) : scores(q, k)).sum().backward();
      grads.push_back(q.grad());
      grads.push_back(k.grad());
    }
    const double tol = dt == DType::Float64 ? 1e-12 : 1e-5;
    EXPECT_TRUE(smelt_test::close(grads[0], grads[2], tol)) << dtype_name(dt);
    EXPECT_TRUE(smelt_test::close(grads[1], grads[3], tol)) << dtype_name(dt);
  }
}
