// Compiled training (smelt::compile of a function that runs backward() and an
// optimizer step): the structure of the graph (the backward pass fused, the
// optimizer one multi-tensor step updating the parameters in place), the
// .grad semantics (accumulation, arguments, captured leaves), the guards on
// host state (optimizer state and options, .grad on entry) and graph breaks
// that leave every piece of state as eager mode would. Values against
// PyTorch's are in tests/models/test_training.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "compile_test_util.h"
#include "nn/models.h"
#include "smelt/memory.h"
#include "smelt/optim.h"
#include "smelt/smelt.h"

using namespace smelt;
using smelt_test::same;

namespace {

/// The compiler tests' fixture (private kernel cache...), with grad mode on.
class CompiledTraining : public smelt_test::CompilerTest {
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

/// The digits model's architecture, seeded, and a batch of inputs and labels.
struct Batch {
  nn::Sequential model{nullptr};
  Tensor x, y;
  explicit Batch(uint64_t seed = 0) {
    manual_seed(seed);
    model = models::make_digits_mlp();
    x = randn({32, 64});
    y = randint(0, 10, {32});
  }
};

/// A step as PyTorch's loop writes it.
Tensor train_step(nn::Sequential& model, optim::Optimizer& opt, const Tensor& x, const Tensor& y) {
  opt.zero_grad();
  Tensor loss = cross_entropy(model(x), y);
  loss.backward();
  opt.step();
  return loss;
}

int count_names(const CompileStats& st, const std::string& part) {
  return static_cast<int>(
      std::count_if(st.kernel_names.begin(), st.kernel_names.end(),
                    [&](const std::string& n) { return n.find(part) != std::string::npos; }));
}

TEST_F(CompiledTraining, BackwardAndOptimizerStepAreFused) {
  Batch s;
  optim::SGD opt(s.model->parameters(), optim::SGDOptions(0.1));
  auto step =
      compile([&](const Tensor& x, const Tensor& y) { return train_step(s.model, opt, x, y); });
  step(s.x, s.y);
  const CompileStats& st = step.stats();
  EXPECT_EQ(st.graph_breaks, 0) << st.last_graph_break;
  // Forward (3 GEMMs + epilogues, 2 GELUs, the loss), backward and the update.
  EXPECT_LT(st.kernels * 2, st.eager_ops) << fmt::format("{}", fmt::join(st.kernel_names, " "));
  // Each GELU's derivative (erf, exp, muls, adds over the saved input) is one kernel.
  EXPECT_EQ(count_names(st, "_poi_fused_add_erf_exp_mul_"), 2);
  // The SGD update of the six parameters is one multi-tensor step...
  EXPECT_EQ(count_names(st, "cpp_for_fused_sgd_"), 1);
  EXPECT_EQ(st.kernel_names.back().rfind("cpp_for_fused_sgd_", 0), 0u)
      << "the update is the last step: no copies of the new parameters after it";
  // ... writing each parameter in place (nothing is left to copy back).
  const std::string plan = step.launch_plan();
  size_t in_place = 0;
  for (size_t at = plan.find("written in place into"); at != std::string::npos;
       at = plan.find("written in place into", at + 1))
    ++in_place;
  EXPECT_EQ(in_place, 6u) << plan;
}

TEST_F(CompiledTraining, StepsEqualEagerAndParametersChangeInPlace) {
  Batch s, twin;
  optim::SGD opt(s.model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  optim::SGD twin_opt(twin.model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  auto step =
      compile([&](const Tensor& x, const Tensor& y) { return train_step(s.model, opt, x, y); });
  const Tensor w = s.model->parameters()[0];
  const void* data = w.data_ptr();
  const uint32_t version = w._version();
  for (int i = 0; i < 4; ++i) {
    const Tensor got = step(s.x, s.y), want = train_step(twin.model, twin_opt, twin.x, twin.y);
    EXPECT_NEAR(got.item<double>(), want.item<double>(), 1e-6 * want.item<double>()) << i;
    EXPECT_FALSE(got.requires_grad()) << "the backward pass already ran in the graph";
  }
  const auto ps = s.model->parameters(), qs = twin.model->parameters();
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_LT(models::compare(ps[i], qs[i]).rel_err(), 1e-6) << i;
    EXPECT_LT(models::compare(ps[i].grad(), qs[i].grad()).rel_err(), 1e-6) << i;
    EXPECT_LT(models::compare(opt.state(ps[i], "momentum_buffer"),
                              twin_opt.state(qs[i], "momentum_buffer"))
                  .rel_err(),
              1e-6)
        << i;
  }
  EXPECT_EQ(w.data_ptr(), data) << "the same parameter tensor, updated";
  EXPECT_GT(w._version(), version);
  // The first step makes the momentum buffers; the later steps share one graph.
  EXPECT_EQ(step.stats().compiles, 2);
  EXPECT_NE(step.stats().last_recompile_reason.find("SGD"), std::string::npos)
      << step.stats().last_recompile_reason;
}

TEST_F(CompiledTraining, NewLearningRateRecompiles) {
  Batch s;
  optim::SGD opt(s.model->parameters(), optim::SGDOptions(0.1));
  auto step =
      compile([&](const Tensor& x, const Tensor& y) { return train_step(s.model, opt, x, y); });
  step(s.x, s.y);
  step(s.x, s.y);
  EXPECT_EQ(step.stats().compiles, 1);
  opt.set_lr(0.01, 0);
  step(s.x, s.y);
  EXPECT_EQ(step.stats().compiles, 2);
  EXPECT_NE(step.stats().last_recompile_reason.find("SGD: its options"), std::string::npos)
      << step.stats().last_recompile_reason;
}

TEST_F(CompiledTraining, GradientsAccumulateWithoutZeroGrad) {
  Batch s, twin;
  auto fn = [](nn::Sequential& m, const Tensor& x, const Tensor& y) {
    Tensor loss = cross_entropy(m(x), y);
    loss.backward();
    return loss;
  };
  auto step = compile([&](const Tensor& x, const Tensor& y) { return fn(s.model, x, y); });
  for (int i = 0; i < 3; ++i) {
    step(s.x, s.y);
    fn(twin.model, twin.x, twin.y);
  }
  const auto ps = s.model->parameters(), qs = twin.model->parameters();
  for (size_t i = 0; i < ps.size(); ++i)
    EXPECT_LT(models::compare(ps[i].grad(), qs[i].grad()).rel_err(), 1e-6) << i;
  // Without a .grad on entry, then with one (a graph input it adds into);
  // the third call reuses the second graph.
  EXPECT_EQ(step.stats().compiles, 2);
  EXPECT_NE(step.stats().last_recompile_reason.find(".grad of a tensor the function captures"),
            std::string::npos)
      << step.stats().last_recompile_reason;
}

TEST_F(CompiledTraining, GradientsReachArgumentsAndCapturedLeavesUnshared) {
  Tensor w = from_vector<float>({0.5f, -1.0f, 2.0f}, {3}).requires_grad_();
  auto f = compile([&w](const Tensor& a, const Tensor& b) {
    Tensor loss = sum(a * w + b);
    loss.backward();
    return loss;
  });
  Tensor a = from_vector<float>({1, 2, 3}, {3}).requires_grad_();
  Tensor b = from_vector<float>({4, 5, 6}, {3}).requires_grad_();
  EXPECT_FLOAT_EQ(f(a, b).item<float>(), 4.5f + 15.0f);
  EXPECT_EQ(f.stats().graph_breaks, 0) << f.stats().last_graph_break;
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{0.5f, -1.0f, 2.0f}));
  EXPECT_EQ(b.grad().to_vector<float>(), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{1, 2, 3}));
  // Each .grad is its own tensor, as eager's (b's gradient is the upstream one).
  b.grad().add_(1.0);
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{1, 2, 3}));
  // A second call accumulates into the arguments' .grad.
  f(a, b);
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{1.0f, -2.0f, 4.0f}));
  EXPECT_EQ(b.grad().to_vector<float>(), (std::vector<float>{3, 3, 3}));
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{2, 4, 6}));
}

TEST_F(CompiledTraining, ResultThatRequiresGradWithoutBackwardGetsACompiledBackward) {
  Batch s;
  auto f = compile([&](const Tensor& x) { return s.model(x); });
  Tensor y = f(s.x);
  EXPECT_TRUE(y.requires_grad());
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "CompiledFunctionBackward");
  EXPECT_EQ(f.stats().graph_breaks, 0) << f.stats().last_graph_break;
  EXPECT_FALSE(f.stats().backward_kernel_names.empty());
  for (const auto& p : s.model->parameters()) EXPECT_FALSE(p.grad().defined());
  // tests/compiler/test_compiled_autograd.cpp covers this path.
}

TEST_F(CompiledTraining, GraphBreakInAStepLeavesStateAsEager) {
  // item() inside the step breaks the graph after the trace made the momentum
  // buffers and set .grad: the call reruns eagerly from the state before it.
  Batch s, twin;
  optim::SGD opt(s.model->parameters(), optim::SGDOptions(0.05).momentum(0.9).dampening(0.1));
  optim::SGD twin_opt(twin.model->parameters(),
                      optim::SGDOptions(0.05).momentum(0.9).dampening(0.1));
  double seen = 0;
  auto fn = [&seen](nn::Sequential& m, optim::Optimizer& o, const Tensor& x, const Tensor& y) {
    o.zero_grad();
    Tensor loss = cross_entropy(m(x), y);
    loss.backward();
    o.step();
    seen = loss.item<double>();
    return loss;
  };
  auto step = compile([&](const Tensor& x, const Tensor& y) { return fn(s.model, opt, x, y); });
  for (int i = 0; i < 3; ++i) {
    step(s.x, s.y);
    fn(twin.model, twin_opt, twin.x, twin.y);
  }
  EXPECT_GE(step.stats().graph_breaks, 1);
  const auto ps = s.model->parameters(), qs = twin.model->parameters();
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_TRUE(same(ps[i], qs[i])) << i;
    EXPECT_TRUE(same(ps[i].grad(), qs[i].grad())) << i;
    EXPECT_TRUE(same(opt.state(ps[i], "momentum_buffer"), twin_opt.state(qs[i], "momentum_buffer")))
        << i;
  }
}

TEST_F(CompiledTraining, OptimizerStepAloneReadsEachCallsGradients) {
  // torch.compile(opt.step): gradients from an eager backward, a new .grad
  // tensor at every step, read as graph inputs (guarded on shape, not identity).
  Batch s, twin;
  optim::Adam opt(s.model->parameters(), optim::AdamOptions(1e-3));
  optim::Adam twin_opt(twin.model->parameters(), optim::AdamOptions(1e-3));
  auto compiled_step = compile([&](const Tensor& x) {
    opt.step();
    return x;
  });
  for (int i = 0; i < 4; ++i) {
    opt.zero_grad();
    cross_entropy(s.model(s.x), s.y).backward();
    compiled_step(s.x);
    train_step(twin.model, twin_opt, twin.x, twin.y);
  }
  const auto ps = s.model->parameters(), qs = twin.model->parameters();
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_TRUE(same(ps[i], qs[i])) << i;
  EXPECT_EQ(compiled_step.stats().graph_breaks, 0) << compiled_step.stats().last_graph_break;
  EXPECT_EQ(compiled_step.stats().compiles, 2)
      << "the first step, which makes the state, and the rest";
  EXPECT_EQ(opt.state(ps[0], "step").item<double>(), 4.0);
}

}  // namespace

TEST_F(CompiledTraining, StepOverAnArgumentWithAHistoryRunsEagerly) {
  // The backward() inside the function would stop at the argument: eager.
  Tensor x0 = from_vector<float>({1, 2, 3}, {3}).requires_grad_();
  auto f = compile([](const Tensor& x) {
    Tensor loss = (x * x).sum();
    loss.backward();
    return loss;
  });
  f(x0 * 2);
  EXPECT_EQ(f.stats().graph_breaks, 1);
  EXPECT_NE(f.stats().last_graph_break.find("argument 0 requires grad and is the result of "
                                            "recorded ops"),
            std::string::npos)
      << f.stats().last_graph_break;
  EXPECT_EQ(x0.grad().to_vector<float>(), (std::vector<float>{8, 16, 24}));
}

TEST_F(CompiledTraining, StepPeakMemoryFreesActivationsBeforeTheGradients) {
  // The seed MLP (1024 -> 1024 -> 512 -> 10, GELUs) at batch 256: a step's
  // gradients (6 MiB) replace the previous step's (zero_grad sets them to
  // none), so what a step adds at its highest point is the activations alive
  // then. The compiled step allocates each large activation when its kernel
  // runs and frees it after its last reader, as eager does: when the first
  // layer's weight gradient (4 MiB) is allocated, only the activation that
  // GEMM reads (the gradient at the first GELU's input, [256, 1024], 1 MiB) is
  // left. One arena for all intermediates would hold them all (4.5 MiB).
  manual_seed(0);
  nn::Sequential model = models::make_seed_mlp(), twin = models::make_seed_mlp();
  twin->load_state_dict(model->state_dict());
  const Tensor x = randn({256, 1024}), y = randint(0, 10, {256});
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.01));
  optim::SGD twin_opt(twin->parameters(), optim::SGDOptions(0.01));
  auto step =
      compile([&](const Tensor& x, const Tensor& y) { return train_step(model, opt, x, y); });
  auto peak_added = [](const std::function<Tensor()>& f) {
    const int64_t before = memory_allocated();
    reset_peak_memory_stats();
    const Tensor loss = f();
    return std::pair{max_memory_allocated() - before, loss.item<double>()};
  };
  // The first two calls compile (.grad on entry is guarded); the later ones run.
  for (int i = 0; i < 4; ++i) {
    const auto [compiled_peak, got] = peak_added([&] { return step(x, y); });
    const auto [eager_peak, want] = peak_added([&] { return train_step(twin, twin_opt, x, y); });
    EXPECT_NEAR(got, want, 1e-5 * want) << i;
    if (i < 2) continue;
    constexpr int64_t kActivation = 256 * 1024 * 4;
    EXPECT_LE(compiled_peak, kActivation + 128 * 1024) << i;
    EXPECT_LE(compiled_peak, eager_peak) << i;
  }
  EXPECT_EQ(step.stats().graph_breaks, 0) << step.stats().last_graph_break;
  const auto ps = model->parameters(), qs = twin->parameters();
  for (size_t i = 0; i < ps.size(); ++i)
    EXPECT_LT(models::compare(ps[i], qs[i]).rel_err(), 1e-5) << i;
}
