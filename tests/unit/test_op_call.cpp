// detail::call_op: argument unpacking for the golden runner and the JIT fallback.
#include <gtest/gtest.h>

#include "core/tensor_impl.h"
#include "ops/op_call.h"
#include "ops/op_table.h"
#include "smelt/ops.h"
#include "test_util.h"

using namespace smelt;
using detail::Attrs;
using detail::call_op;
using smelt_test::make_exact;

namespace {
bool mentions(const Error& e, const std::string& s) {
  return std::string(e.what()).find(s) != std::string::npos;
}
}  // namespace

TEST(OpCall, WrappedScalar) {
  Tensor a = detail::wrapped_scalar(Scalar(2.5));
  EXPECT_TRUE(a.is_wrapped_number());
  EXPECT_EQ(a.dim(), 0);
  EXPECT_EQ(a.dtype(), DType::Float64);
  EXPECT_EQ(a.item<double>(), 2.5);
  Tensor b = detail::wrapped_scalar(Scalar(int64_t{-3}));
  EXPECT_EQ(b.dtype(), DType::Int64);
  EXPECT_EQ(b.item<int64_t>(), -3);
  Tensor c = detail::wrapped_scalar(Scalar(true));
  EXPECT_EQ(c.dtype(), DType::Bool);
  EXPECT_TRUE(c.item<bool>());
}

TEST(OpCall, AddWithAlphaAndWrappedNumber) {
  Tensor x = make_exact<float>({1, 2, 3}, {3});
  auto out = call_op("add", {x, detail::wrapped_scalar(Scalar(2))}, Attrs{{"alpha", 0.5}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dtype(), DType::Float32);  // an int number never changes a float tensor
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{2, 3, 4}));
}

TEST(OpCall, AddMarkedAsLinearBiasKeepsAlpha) {
  // gemm_bias marks linear's traced bias add (alpha 1); an add given both
  // keeps add's semantics: x + alpha * y.
  Tensor x = make_exact<float>({1, 2, 3}, {3}), y = make_exact<float>({10, 20, 30}, {3});
  auto marked = call_op("add", {x, y}, Attrs{{"alpha", 2.0}, {"gemm_bias", true}});
  EXPECT_EQ(marked[0].to_vector<float>(), (std::vector<float>{21, 42, 63}));
  auto plain = call_op("add", {x, y}, Attrs{{"gemm_bias", true}});
  EXPECT_EQ(plain[0].to_vector<float>(), (std::vector<float>{11, 22, 33}));
}

TEST(OpCall, ReductionDimAsIntOrList) {
  Tensor x = make_exact<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto a = call_op("sum", {x}, Attrs{{"dim", int64_t{1}}});
  auto b = call_op("sum", {x}, Attrs{{"dim", std::vector<int64_t>{1}}, {"keepdim", false}});
  EXPECT_EQ(a[0].to_vector<double>(), (std::vector<double>{6, 15}));
  EXPECT_EQ(b[0].to_vector<double>(), (std::vector<double>{6, 15}));
  auto c = call_op("sum", {x}, Attrs{{"dtype", std::string("float32")}});
  EXPECT_EQ(c[0].dtype(), DType::Float32);
  EXPECT_EQ(c[0].item<float>(), 21.0f);
}

TEST(OpCall, MultipleOutputs) {
  Tensor x = make_exact<float>({1, 5, 2, 7, 0, 3}, {2, 3});
  auto mx = call_op("max", {x}, Attrs{{"dim", int64_t{1}}, {"keepdim", false}});
  ASSERT_EQ(mx.size(), 2u);
  EXPECT_EQ(mx[0].to_vector<float>(), (std::vector<float>{5, 7}));
  EXPECT_EQ(mx[1].to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  auto all = call_op("max", {x}, Attrs{});
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].item<float>(), 7.0f);
  auto pieces = call_op("split", {x}, Attrs{{"split_size", int64_t{2}}, {"dim", int64_t{1}}});
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].sizes(), Shape({2, 2}));
  EXPECT_EQ(pieces[1].sizes(), Shape({2, 1}));
  auto vm = call_op("var_mean", {x}, Attrs{{"correction", int64_t{0}}});
  ASSERT_EQ(vm.size(), 2u);
  EXPECT_NEAR(vm[1].item<double>(), 3.0, 1e-6);
}

TEST(OpCall, OptionalTensorInputs) {
  Tensor x = make_exact<double>({1, 2}, {1, 2});
  Tensor w = make_exact<double>({1, 1, 0, 1}, {2, 2});
  Tensor b = make_exact<double>({10, 20}, {2});
  auto with_bias = call_op("linear", {x, w, b}, Attrs{});
  EXPECT_EQ(with_bias[0].to_vector<double>(), (std::vector<double>{13, 22}));
  auto recorded = call_op("linear", {x, w}, Attrs{{"has_bias", false}});
  EXPECT_EQ(recorded[0].to_vector<double>(), (std::vector<double>{3, 2}));
}

TEST(OpCall, EmbeddingAcceptsBothArgumentOrders) {
  Tensor weight = make_exact<float>({0, 1, 10, 11, 20, 21}, {3, 2});
  Tensor idx = make_exact<int64_t>({2, 0}, {2});
  auto a = call_op("embedding", {idx, weight}, Attrs{});  // PyTorch's F.embedding order
  auto b = call_op("embedding", {weight, idx}, Attrs{});  // smelt::embedding order
  EXPECT_EQ(a[0].to_vector<float>(), (std::vector<float>{20, 21, 0, 1}));
  EXPECT_EQ(b[0].to_vector<float>(), (std::vector<float>{20, 21, 0, 1}));
}

TEST(OpCall, Errors) {
  Tensor x = make_exact<float>({1, 2}, {2});
  try {
    call_op("no_such_op", {x}, Attrs{});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_TRUE(mentions(e, "no_such_op"));
  }
  try {
    call_op("neg", {x, x}, Attrs{});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_TRUE(mentions(e, "neg"));
  }
  try {
    call_op("sum", {x}, Attrs{{"dimension", int64_t{0}}});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_TRUE(mentions(e, "dimension"));
  }
  try {
    call_op("softmax", {x}, Attrs{});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_TRUE(mentions(e, "softmax") && mentions(e, "dim"));
  }
  try {
    call_op("gelu", {x}, Attrs{{"approximate", int64_t{1}}});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_TRUE(mentions(e, "approximate"));
  }
}

TEST(OpCall, CoversTheOpTableOpsThatTakeTensors) {
  for (const auto& op : detail::op_table()) {
    std::string name(op.name);
    bool takes_tensors = op.kind != detail::OpKind::Factory &&
                         !(op.kind == detail::OpKind::Random && name != "dropout");
    if (takes_tensors) {
      EXPECT_TRUE(detail::has_call_op(name)) << name;
    }
  }
}
