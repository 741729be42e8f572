// Graphs over tensors with a size-0 dim compile and match eager: the loops
// over an empty domain never run, so lowering must not index it (the fuzzer
// found "mod: divisor 0" raised while lowering slices, cat, pad, matmul and
// reductions of empty tensors).
#include <gtest/gtest.h>

#include "compiler/compile_test_util.h"

using namespace smelt;
using smelt_test::make;

namespace {
class ZeroSize : public smelt_test::CompilerTest {};
}  // namespace

TEST_F(ZeroSize, PointwiseMovementAndMatmulOfEmptyTensors) {
  Tensor x = randn({3, 3, 1}).slice(1, 0, 3, 3);  // [3, 1, 1], strided
  auto f = [](const Tensor& x) {
    Tensor e = x.slice(2, -2, -1, 2);              // [3, 1, 0]
    Tensor m = x.reshape({3, 1}).narrow(0, 0, 0);  // [0, 1]
    return std::make_tuple(cat({e, e}, 2), pad(e, {1, 1}, 1.5), gt(e, e), matmul(m.t(), m),
                           log1p(matmul(m, m.t())));
  };
  auto [a, b, c, d, e] = compile(f)(x);
  auto [ea, eb, ec, ed, ee] = f(x);
  EXPECT_TRUE(smelt_test::same(a, ea));
  EXPECT_TRUE(smelt_test::same(b, eb));  // [3, 1, 2] of 1.5
  EXPECT_TRUE(smelt_test::same(c, ec));
  EXPECT_TRUE(smelt_test::same(d, ed));  // [1, 1] of 0
  EXPECT_TRUE(smelt_test::same(e, ee));
  EXPECT_EQ(b.sizes(), (Shape{3, 1, 2}));
}

TEST_F(ZeroSize, ReductionsOverAndAlongEmptyDims) {
  Tensor x = randn({2, 5, 4, 7}).narrow(3, 0, 0);        // [2, 5, 4, 0]
  Tensor y = randn({0, 3, 1, 7}).permute({1, 2, 0, 3});  // [3, 1, 0, 7]
  auto f = [](const Tensor& x, const Tensor& y) {
    return std::make_tuple(logsumexp(x, {3}), sum(x, {3}), prod(x, {3}), mean(x, {1}),
                           sum(y.to(DType::Bool), {-2}, true), log_softmax(x, 1));
  };
  auto [a, b, c, d, e, g] = compile(f)(x, y);
  auto [ea, eb, ec, ed, ee, eg] = f(x, y);
  EXPECT_TRUE(smelt_test::same(a, ea));  // -inf
  EXPECT_TRUE(smelt_test::same(b, eb));  // 0
  EXPECT_TRUE(smelt_test::same(c, ec));  // 1
  EXPECT_TRUE(smelt_test::same(d, ed));
  EXPECT_TRUE(smelt_test::same(e, ee));
  EXPECT_TRUE(smelt_test::same(g, eg));
  EXPECT_EQ(a.sizes(), (Shape{2, 5, 4}));
}

// A kernel of one reduction over empty rows still takes its input (the
// schedule hands it over): fuzzer seed 3, case 1.
TEST_F(ZeroSize, LoneReductionOfAnEmptyRow) {
  Tensor x = make({1, 2, 3, 4}, {1, 4}).to(DType::Int64).slice(1, 3, -1, 2);  // [1, 0]
  auto f = [](const Tensor& x) { return std::make_tuple(any(x), sum(x.to(DType::Float32), {1})); };
  auto [a, b] = compile(f)(x);
  EXPECT_FALSE(a.item<bool>());
  EXPECT_TRUE(smelt_test::same(b, make({0}, {1}).to(DType::Float32)));
}

// Reductions over empty leading dims that keep the last one (the CPU's column
// lanes layout, which the rows' count would have made write no output): each
// output is the reduction's identity, as eager gives (fuzz --grad seed 7,
// case 8: any over [2, 0, 8] of dims 0, 1 read uninitialized memory).
TEST_F(ZeroSize, ColumnReductionsOfEmptyRowsGiveTheirIdentity) {
  Tensor x = randn({2, 0, 16});
  auto f = [](const Tensor& x) {
    return std::make_tuple(any(x.to(DType::Bool), std::vector<int64_t>{0, 1}, true), sum(x, {0, 1}),
                           all(x.to(DType::Int32), std::vector<int64_t>{0, 1}), prod(x, {1}));
  };
  auto [a, b, c, d] = compile(f)(x);
  auto [ea, eb, ec, ed] = f(x);
  EXPECT_TRUE(smelt_test::same(a, ea));  // false
  EXPECT_TRUE(smelt_test::same(b, eb));  // 0
  EXPECT_TRUE(smelt_test::same(c, ec));  // true
  EXPECT_TRUE(smelt_test::same(d, ed));  // 1
  EXPECT_EQ(a.sizes(), (Shape{1, 1, 16}));
  EXPECT_EQ(a.to(DType::Int64).sum().item<int64_t>(), 0);
  EXPECT_EQ(b.abs().sum().item<double>(), 0.0);
}
