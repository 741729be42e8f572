// Guards and recompiles (sizes, dtypes, parameter identity, training flags,
// the recompile limit) and graph breaks (data-dependent reads, printing,
// random ops; fullgraph=true turns them into errors).
#include <gtest/gtest.h>

#include <sstream>

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
  EXPECT_NE(f.stats().last_recompile_reason.find("param"), std::string::npos)
      << f.stats().last_recompile_reason;
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
  try {
    f(x);
    ADD_FAILURE() << "fullgraph=true must raise on a graph break";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("graph break"), std::string::npos) << m;
    EXPECT_NE(m.find("item"), std::string::npos) << m;
  }
  auto g = compile([](const Tensor& x) { return x + randn(x.sizes()); }, o);
  try {
    g(x);
    ADD_FAILURE() << "fullgraph=true must raise on a random op";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("graph break"), std::string::npos) << m;
    EXPECT_NE(m.find("randn"), std::string::npos) << m;
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

TEST_F(GraphBreaks, WriteIntoCapturedTensorBreaks) {
  Tensor state = zeros({3});
  auto fn = [&state](const Tensor& x) {
    state.add_(x);
    return x * 2;
  };
  auto f = compile(fn);
  Tensor x = from_vector<float>({1, 2, 3}, {3});
  Tensor y = f(x);
  EXPECT_TRUE(same(y, x * 2));
  EXPECT_TRUE(same(state, x)) << "the write ran once, eagerly";
  EXPECT_EQ(f.stats().graph_breaks, 1);
}
