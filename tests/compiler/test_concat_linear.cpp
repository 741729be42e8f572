// concat_linear (compiler/passes/concat_linear.h): linears over one input run
// as one GEMM over their concatenated weights; the copy is guarded by the
// weights' version counters.
#include <gtest/gtest.h>

#include "compiler/compile_test_util.h"
#include "smelt/nn.h"

using namespace smelt;
using smelt_test::close;
using smelt_test::count_prefix;
using smelt_test::names;

namespace {

class ConcatLinear : public smelt_test::CompilerTest {};

/// Attention's Q, K and V projections of one hidden state, split into heads
/// ([B, T, C] -> [B, H, T, C / H]) and mixed by a product of q and k and a
/// sum with v, so that every projection is read through a strided view.
struct QkvImpl : nn::Module {
  nn::Linear query{nullptr}, key{nullptr}, value{nullptr};
  int64_t heads;
  QkvImpl(int64_t c, int64_t h, bool bias) : Module("Qkv"), heads(h) {
    query = register_module("query", nn::Linear(c, c, bias));
    key = register_module("key", nn::Linear(c, c, bias));
    value = register_module("value", nn::Linear(c, 2 * c, bias));
  }
  Tensor split(const Tensor& t) const {
    return t.view({t.size(0), t.size(1), heads, t.size(2) / heads}).transpose(1, 2);
  }
  Tensor forward(const Tensor& x) override {
    Tensor q = split(query(x)), k = split(key(x)), v = split(value(x));
    Tensor s = matmul(q, k.transpose(-2, -1));
    return matmul(softmax(s, -1), v);
  }
};
SMELT_MODULE(Qkv);

}  // namespace

TEST_F(ConcatLinear, ProjectionsOfOneInputAreOneGemm) {
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "with bias" : "no bias");
    Qkv model(16, 4, bias);  // the fixture runs under NoGradGuard: inference
    Tensor x = randn({2, 5, 16});
    Tensor ref = model(x);
    auto f = compile(model);
    Tensor y = f(x);
    EXPECT_TRUE(close(y, ref, 1e-5));
    CompileOptions off;
    off.concat_linear = false;
    auto g = compile(model, off);
    EXPECT_TRUE(close(g(x), ref, 1e-5));
    // Three projections, then q k^T and the product with v.
    auto gemms = [](const auto& c) {
      return count_prefix(c, "extern_matmul") + count_prefix(c, "cpp_tem_fused_addmm");
    };
    EXPECT_EQ(gemms(g), 5) << names(g);
    EXPECT_EQ(gemms(f), 3) << names(f);
    EXPECT_EQ(f.stats().kernels, g.stats().kernels - 2) << names(f) << " / " << names(g);
  }
}

TEST_F(ConcatLinear, AnInPlaceUpdateOfAWeightRecompiles) {
  Qkv model(8, 2, true);
  Tensor x = randn({3, 4, 8});
  auto f = compile(model);
  EXPECT_TRUE(close(f(x), model(x), 1e-5));
  EXPECT_TRUE(close(f(x), model(x), 1e-5));
  EXPECT_EQ(f.stats().compiles, 1);
  // The graph holds a copy of the weights: a write into one is seen.
  model->key->weight.mul_(-2);
  model->value->bias.add_(1);
  Tensor ref = model(x);
  EXPECT_TRUE(close(f(x), ref, 1e-5));
  EXPECT_EQ(f.stats().recompiles, 1);
  EXPECT_NE(f.stats().last_recompile_reason.find("written in place"), std::string::npos)
      << f.stats().last_recompile_reason;
  // load_state_dict writes in place too.
  Qkv other(8, 2, true);
  model->load_state_dict(other->state_dict());
  EXPECT_TRUE(close(f(x), other(x), 1e-5));
  EXPECT_EQ(f.stats().recompiles, 2);
}

TEST_F(ConcatLinear, ReadersAcrossTheLastDimKeepSeparateGemms) {
  // q flattened across its last dim: a reader that is no window of q's
  // columns in the fused result. The group is left alone, and results agree.
  struct FlatImpl : nn::Module {
    nn::Linear a{nullptr}, b{nullptr};
    FlatImpl() : Module("Flat") {
      a = register_module("a", nn::Linear(6, 4));
      b = register_module("b", nn::Linear(6, 4));
    }
    Tensor forward(const Tensor& x) override { return a(x).reshape({-1}) * b(x).reshape({-1}); }
  };
  auto model = std::make_shared<FlatImpl>();
  Tensor x = randn({3, 6});
  Tensor ref = model->forward(x);
  auto f = compile(model);
  EXPECT_TRUE(close(f(x), ref, 1e-5));
  EXPECT_EQ(count_prefix(f, "cpp_tem_fused_addmm"), 2) << names(f);
}

TEST_F(ConcatLinear, GraphsThatTrainAreNotRewritten) {
  EnableGradGuard grad;  // the fixture runs under NoGradGuard
  Qkv model(8, 2, true);
  Tensor x = randn({2, 3, 8});
  auto f = compile(model);  // parameters require grad: a joint graph
  Tensor y = f(x);
  Tensor ref = model(x);
  EXPECT_TRUE(close(y, ref, 1e-5));
  y.sum().backward();
  Tensor g1 = model->key->weight.grad().clone();
  for (const Tensor& p : model->parameters()) p.mutable_grad() = Tensor();
  ref.sum().backward();
  EXPECT_TRUE(close(g1, model->key->weight.grad(), 1e-5));
  EXPECT_EQ(count_prefix(f, "cpp_tem_fused_addmm"), 3) << names(f);
}
