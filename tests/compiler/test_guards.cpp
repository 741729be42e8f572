// Guards and recompiles (sizes, dtypes, parameter identity, training flags,
// the recompile limit) and graph breaks (data-dependent reads, printing,
// random ops; fullgraph=true turns them into errors).
#include <gtest/gtest.h>

#include <functional>
#include <sstream>

#include "backend/cpu/blas.h"
#include "compiler/compile_test_util.h"
#include "smelt/nn.h"

using namespace smelt;
using smelt_test::close;
using smelt_test::names;
using smelt_test::same;

namespace {
class Guards : public smelt_test::CompilerTest {};
class GraphBreaks : public smelt_test::CompilerTest {};

Tensor affine_tanh(const Tensor& x, const Tensor& w) { return tanh(x * w - 0.5); }
}  // namespace

TEST_F(Guards, SameShapesCompileOnce) {
  auto f = compile(affine_tanh);
  Tensor w = randn({16});
  for (int i = 0; i < 3; ++i) {
    Tensor x = randn({4, 16});
    EXPECT_TRUE(close(f(x, w), affine_tanh(x, w), 1e-6));
  }
  EXPECT_EQ(f.stats().calls, 3);
  EXPECT_EQ(f.stats().compiles, 1);
  EXPECT_EQ(f.stats().recompiles, 0);
  EXPECT_EQ(f.stats().eager_calls, 0);
}

TEST_F(Guards, NewBatchSizeRecompilesOnceWithReason) {
  auto f = compile(affine_tanh);
  Tensor w = randn({16});
  Tensor a = randn({4, 16}), b = randn({9, 16});
  EXPECT_TRUE(close(f(a, w), affine_tanh(a, w), 1e-6));
  EXPECT_TRUE(close(f(b, w), affine_tanh(b, w), 1e-6));
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_EQ(f.stats().recompiles, 1);
  const std::string& why = f.stats().last_recompile_reason;
  EXPECT_NE(why.find("argument 0"), std::string::npos) << why;
  EXPECT_NE(why.find("9"), std::string::npos) << why;
  // Both graphs are kept: going back to either shape compiles nothing.
  EXPECT_TRUE(close(f(a, w), affine_tanh(a, w), 1e-6));
  EXPECT_TRUE(close(f(b, w), affine_tanh(b, w), 1e-6));
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_EQ(f.stats().recompiles, 1);
}

TEST_F(Guards, NewDtypeRecompiles) {
  auto f = compile([](const Tensor& x) { return x * 3 + 1; });
  Tensor x = randn({10});
  EXPECT_TRUE(same(f(x), x * 3 + 1));
  Tensor xd = x.to(DType::Float64);
  Tensor y = f(xd);
  EXPECT_EQ(y.dtype(), DType::Float64);
  EXPECT_TRUE(same(y, xd * 3 + 1));
  EXPECT_EQ(f.stats().recompiles, 1);
  EXPECT_NE(f.stats().last_recompile_reason.find("float64"), std::string::npos)
      << f.stats().last_recompile_reason;
  Tensor xi = arange(10, TensorOptions().dtype(DType::Int32));
  EXPECT_TRUE(same(f(xi), xi * 3 + 1));
  EXPECT_EQ(f.stats().recompiles, 2);
}

TEST_F(Guards, InPlaceWeightUpdateNeedsNoRecompile) {
  nn::Linear lin(6, 3);
  auto f = compile(lin);
  Tensor x = randn({2, 6});
  EXPECT_TRUE(close(f(x), lin(x), 1e-5));
  lin->weight.copy_(randn({3, 6}));
  lin->bias.mul_(-2);
  Tensor y = f(x);
  EXPECT_TRUE(close(y, matmul(x, lin->weight.t()) + lin->bias, 1e-5));
  EXPECT_EQ(f.stats().compiles, 1);
  EXPECT_EQ(f.stats().recompiles, 0);
}

// The CPU reads a compiled plan's weights from copies repacked once for its
// GEMM library; an in-place write to a weight (an optimizer step, copy_
// under no_grad) bumps its version, and the next call repacks it.
TEST_F(Guards, InPlaceWriteToPrepackedWeightIsSeen) {
  nn::Linear lin(64, 48);
  auto f = compile(lin);
  Tensor x = randn({32, 64});
  cpu::clear_packed_weights();
  const int64_t packs0 = cpu::packed_weight_stats().packs;
  EXPECT_TRUE(close(f(x), lin(x), 1e-5));
  const int64_t packs1 = cpu::packed_weight_stats().packs;
  EXPECT_LE(packs1, packs0 + 1);
  EXPECT_TRUE(close(f(x), lin(x), 1e-5));
  EXPECT_EQ(cpu::packed_weight_stats().packs, packs1) << "an unchanged weight was repacked";
  {
    NoGradGuard no_grad;
    lin->weight.copy_(randn({48, 64}));
  }
  EXPECT_TRUE(close(f(x), matmul(x, lin->weight.t()) + lin->bias, 1e-5));
  if (packs1 > packs0) {
    EXPECT_EQ(cpu::packed_weight_stats().packs, packs1 + 1);
  }
  // A weight the function captures (a constant of the plan) is followed too.
  Tensor w = randn({48, 64});
  auto g = compile([w](const Tensor& v) { return relu(matmul(v, w.t())); });
  EXPECT_TRUE(close(g(x), relu(matmul(x, w.t())), 1e-5));
  w.mul_(-1.5);
  EXPECT_TRUE(close(g(x), relu(matmul(x, w.t())), 1e-5));
  EXPECT_EQ(f.stats().recompiles, 0);
  EXPECT_EQ(g.stats().recompiles, 0);
  cpu::clear_packed_weights();
}

// Assigning a new tensor to the module's member (as `lin.weight = ...` in
// PyTorch) must not leave the compiled function on the old weight.
TEST_F(Guards, ReplacedParameterRecompiles) {
  nn::Linear lin(6, 3);
  auto f = compile(lin);
  Tensor x = randn({2, 6});
  EXPECT_TRUE(close(f(x), lin(x), 1e-5));
  lin->weight = randn({3, 6});
  Tensor y = f(x);
  EXPECT_TRUE(close(y, matmul(x, lin->weight.t()) + lin->bias, 1e-5));
  EXPECT_EQ(f.stats().recompiles, 1);
  EXPECT_EQ(f.stats().last_recompile_reason, "parameter weight was replaced by another tensor");
}

namespace {
struct TwoLayer : nn::Module {
  nn::Linear fc1{nullptr}, fc2{nullptr};
  nn::BatchNorm1d bn{nullptr};
  TwoLayer() : Module("TwoLayer") {
    fc1 = register_module("fc1", nn::Linear(4, 8));
    bn = register_module("bn", nn::BatchNorm1d(8));
    fc2 = register_module("fc2", nn::Linear(8, 2));
  }
  Tensor forward(const Tensor& x) override { return fc2(relu(bn(fc1(x)))); }
};
}  // namespace

// Recompile reasons and the guards log name parameters and buffers by their
// state_dict names, never by index or address.
TEST_F(Guards, ReasonsAndGuardsLogUseStateDictNames) {
  auto net = std::make_shared<TwoLayer>();
  net->eval();
  auto f = compile(net);
  Tensor x = randn({3, 4});
  smelt_test::ScopedEnv logs("SMELT_LOGS", std::string("guards"));
  testing::internal::CaptureStderr();
  EXPECT_TRUE(close(f(x), net->forward(x), 1e-5));
  std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("[smelt:guards] guards of the new graph\n  argument 0: float32 [3, 4]"),
            std::string::npos)
      << log;
  for (const char* name : {"parameter fc1.weight: this very tensor, float32 [8, 4]",
                           "parameter fc1.bias: this very tensor, float32 [8]",
                           "buffer bn.running_mean: this very tensor, float32 [8]",
                           "parameter fc2.weight: this very tensor, float32 [2, 8]"})
    EXPECT_NE(log.find(std::string("\n  ") + name), std::string::npos) << name << "\n" << log;
  EXPECT_EQ(log.find("param0"), std::string::npos) << log;
  EXPECT_EQ(log.find("0x"), std::string::npos) << "no addresses: " << log;

  net->fc2->weight = randn({2, 8});
  EXPECT_TRUE(close(f(x), net->forward(x), 1e-5));
  EXPECT_EQ(f.stats().last_recompile_reason, "parameter fc2.weight was replaced by another tensor");

  net->bn->running_var.mul_(2);  // in place: no recompile
  EXPECT_TRUE(close(f(x), net->forward(x), 1e-5));
  EXPECT_EQ(f.stats().recompiles, 1);

  net->to(DType::Float64);
  net->to(DType::Float32);
  EXPECT_TRUE(close(f(x), net->forward(x), 1e-5));
  EXPECT_EQ(f.stats().last_recompile_reason,
            "parameter fc1.weight now uses another storage (Module::to() or a new tensor)");
}

TEST_F(Guards, ParameterStorageSwapRecompiles) {
  nn::Linear lin(6, 3);
  auto f = compile(lin);
  Tensor x = randn({2, 6});
  EXPECT_TRUE(close(f(x), lin(x), 1e-5));
  // Module::to() gives every parameter a new storage (same TensorImpl).
  lin->to(DType::Float64);
  lin->to(DType::Float32);
  lin->weight.mul_(0.5);
  Tensor y = f(x);
  EXPECT_TRUE(close(y, lin(x), 1e-5));
  EXPECT_EQ(f.stats().recompiles, 1);
  EXPECT_NE(f.stats().last_recompile_reason.find("storage"), std::string::npos)
      << f.stats().last_recompile_reason;
}

TEST_F(Guards, TrainEvalSwitchRecompiles) {
  nn::Sequential model(nn::Linear(4, 4), nn::BatchNorm1d(4));
  nn::Sequential twin(nn::Linear(4, 4), nn::BatchNorm1d(4));
  // Same parameters in both.
  auto p = model->named_parameters_and_buffers(), q = twin->named_parameters_and_buffers();
  ASSERT_EQ(p.size(), q.size());
  for (size_t i = 0; i < p.size(); ++i) q[i].tensor.copy_(p[i].tensor);
  auto f = compile(model);
  Tensor x = randn({6, 4});
  EXPECT_TRUE(close(f(x), twin(x), 1e-5));
  model->eval();
  twin->eval();
  EXPECT_TRUE(close(f(x), twin(x), 1e-5));
  EXPECT_EQ(f.stats().recompiles, 1);
  EXPECT_NE(f.stats().last_recompile_reason.find("eval"), std::string::npos)
      << f.stats().last_recompile_reason;
  EXPECT_TRUE(close(model->named_parameters_and_buffers()[2].tensor,
                    twin->named_parameters_and_buffers()[2].tensor, 1e-6));
}

TEST_F(Guards, RecompileLimitFallsBackToEager) {
  CompileOptions o;
  o.recompile_limit = 2;
  auto f = compile([](const Tensor& x) { return exp(x) - 1; }, o);
  Tensor a = randn({2}), b = randn({3}), c = randn({4});
  EXPECT_TRUE(close(f(a), exp(a) - 1, 1e-6));
  EXPECT_TRUE(close(f(b), exp(b) - 1, 1e-6));
  EXPECT_EQ(f.stats().eager_calls, 0);
  testing::internal::CaptureStderr();
  Tensor y = f(c);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(close(y, exp(c) - 1, 1e-6));
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_EQ(f.stats().eager_calls, 1);
  EXPECT_NE(err.find("recompile limit"), std::string::npos) << err;
  EXPECT_TRUE(close(f(c), exp(c) - 1, 1e-6));
  EXPECT_EQ(f.stats().eager_calls, 2);
  EXPECT_EQ(f.stats().compiles, 2);
}

// ---- graph breaks ---------------------------------------------------------------

TEST_F(GraphBreaks, ItemFallsBackToEager) {
  auto fn = [](const Tensor& x) {
    double s = x.sum().item<double>();
    return x * s;
  };
  auto f = compile(fn);
  Tensor x = randn({5});
  EXPECT_TRUE(same(f(x), fn(x)));
  EXPECT_EQ(f.stats().graph_breaks, 1);
  EXPECT_EQ(f.stats().eager_calls, 1);
  EXPECT_FALSE(f.stats().last_graph_break.empty());
  Tensor x2 = randn({5});
  EXPECT_TRUE(same(f(x2), fn(x2)));
  EXPECT_EQ(f.stats().graph_breaks, 1) << "the same guards do not trace again";
  EXPECT_EQ(f.stats().eager_calls, 2);
}

TEST_F(GraphBreaks, PrintingFallsBackToEager) {
  std::ostringstream out;
  auto fn = [&out](const Tensor& x) {
    Tensor y = relu(x);
    out << y;
    return y + 1;
  };
  auto f = compile(fn);
  Tensor x = from_vector<float>({-1, 2}, {2});
  Tensor y = f(x);
  EXPECT_TRUE(same(y, from_vector<float>({1, 3}, {2})));
  EXPECT_EQ(f.stats().graph_breaks, 1);
  EXPECT_NE(out.str().find("tensor("), std::string::npos) << out.str();
}

TEST_F(GraphBreaks, FullgraphRaises) {
  CompileOptions o;
  o.fullgraph = true;
  auto f = compile([](const Tensor& x) { return x * x.sum().item<double>(); }, o);
  Tensor x = randn({5});
  EXPECT_EQ(smelt_test::error_of([&] { f(x); }),
            "smelt::compile(fullgraph=true): graph break at item(): reads tensor values, which do "
            "not exist while smelt::compile traces the function (tracers have shapes and dtypes "
            "only); keep the value a 0-dim tensor (ops take it where they take a number), or call "
            "item() on a result of the compiled function. Without fullgraph=true, such calls fall "
            "back to eager mode.");
  auto g = compile([](const Tensor& x) { return x + randn(x.sizes()); }, o);
  EXPECT_EQ(smelt_test::error_of([&] { g(x); }),
            "smelt::compile(fullgraph=true): graph break at randn: random ops are not captured by "
            "smelt::compile yet (they draw from the global generator); draw the random tensor "
            "outside the compiled function and pass it as an argument. Without fullgraph=true, "
            "such calls fall back to eager mode.");
}

// Every kind of break names the op that broke the graph; the advice fits the
// case: with fullgraph=true nothing runs eagerly, so the error says how to keep
// the op out of the compiled function; without it the log says the call runs eagerly.
TEST_F(GraphBreaks, EachBreakNamesItsOp) {
  struct Case {
    std::string op, advice;
    std::function<Tensor(const Tensor&, const Tensor&)> fn;
    bool aliased = false;
  };
  std::ostringstream sink;
  std::vector<Case> cases = {
      {"item()", "keep the value a 0-dim tensor",
       [](const Tensor& x, const Tensor&) { return x * x.sum().item<double>(); }},
      {"to_vector()", "call to_vector() on a result of the compiled function",
       [](const Tensor& x, const Tensor&) { return x * x.to_vector<float>()[0]; }},
      {"data_ptr()", "use data_ptr() on the inputs before, or the results after",
       [](const Tensor& x, const Tensor&) { return x + (x.data_ptr() != nullptr ? 1 : 2); }},
      {"printing a tensor (str(), operator<<)", "print a result of the compiled function",
       [&sink](const Tensor& x, const Tensor&) {
         sink << x;
         return x + 1;
       }},
      {"randn", "draw the random tensor outside the compiled function",
       [](const Tensor& x, const Tensor&) { return x + randn(x.sizes()); }},
      {"rand", "draw the random tensor outside the compiled function",
       [](const Tensor& x, const Tensor&) { return x * rand(x.sizes()); }},
      {"dropout", "compile the model in eval() mode",
       [](const Tensor& x, const Tensor&) { return dropout(x, 0.5, true); }},
      {"an in-place write into an argument", "pass arguments that do not share memory",
       [](const Tensor& x, const Tensor& y) {
         x.mul_(2);
         return x + y;
       },
       true},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.op);
    Tensor a = from_vector<float>({1, 2, 3}, {3});
    Tensor b = c.aliased ? a : from_vector<float>({4, 5, 6}, {3});
    // Without fullgraph: the call runs eagerly, the log and the stats name the op.
    {
      smelt_test::ScopedEnv logs("SMELT_LOGS", std::string("graph_breaks"));
      auto f = compile(c.fn);
      testing::internal::CaptureStderr();
      f(a, b);
      std::string err = testing::internal::GetCapturedStderr();
      EXPECT_EQ(f.stats().graph_breaks, 1);
      EXPECT_EQ(f.stats().last_graph_break.rfind(c.op + ": ", 0), 0u) << f.stats().last_graph_break;
      EXPECT_NE(err.find("[smelt:graph_breaks] graph break, running eagerly\ngraph break at " +
                         c.op + ": "),
                std::string::npos)
          << err;
      EXPECT_NE(err.find("; this call runs eagerly"), std::string::npos) << err;
    }
    // With fullgraph: an Error naming the op, with advice instead of "runs eagerly".
    CompileOptions o;
    o.fullgraph = true;
    auto g = compile(c.fn, o);
    std::string m = smelt_test::error_of([&] { g(a, b); });
    EXPECT_EQ(m.rfind("smelt::compile(fullgraph=true): graph break at " + c.op + ": ", 0), 0u) << m;
    EXPECT_NE(m.find(c.advice), std::string::npos) << m;
    EXPECT_EQ(m.find("runs eagerly"), std::string::npos) << m;
    EXPECT_EQ(m.find("run eagerly"), std::string::npos) << m;
  }
}

TEST_F(GraphBreaks, RandomOpBreaksAndKeepsTheGeneratorStream) {
  auto fn = [](const Tensor& x) { return x + randn(x.sizes()); };
  auto f = compile(fn);
  Tensor x = randn({7});
  manual_seed(42);
  Tensor y = f(x);
  manual_seed(42);
  Tensor ref = fn(x);
  EXPECT_TRUE(same(y, ref)) << "tracing must not draw from the generator";
  EXPECT_EQ(f.stats().graph_breaks, 1);
  EXPECT_EQ(f.stats().eager_calls, 1);
}

TEST_F(GraphBreaks, WriteIntoCapturedTensorIsWrittenBackAtEveryCall) {
  // A captured tensor the function writes into (state, as an optimizer's) is
  // lifted: the graph writes its new value back at every call, as eager would.
  Tensor state = zeros({3});
  auto fn = [&state](const Tensor& x) {
    state.add_(x);
    return x * 2;
  };
  auto f = compile(fn);
  Tensor x = from_vector<float>({1, 2, 3}, {3});
  const uint32_t v0 = state._version();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(same(f(x), x * 2));
  EXPECT_TRUE(same(state, x * 3.0)) << "written at each of the three calls";
  EXPECT_GT(state._version(), v0);
  EXPECT_EQ(f.stats().graph_breaks, 0);
  EXPECT_EQ(f.stats().compiles, 1);
  EXPECT_EQ(f.stats().eager_calls, 0);
}
