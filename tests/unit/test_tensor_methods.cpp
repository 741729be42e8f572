// Tensor methods follow libtorch's: method forms of the ops (x.sin(),
// x.max(), x.sum(dim), ...) give what the free functions give, numbers work on
// either side of arithmetic and comparison operators, and in-place methods are
// callable on a `const Tensor&` handle and write through it.
#include <gtest/gtest.h>

#include <functional>
#include <type_traits>

#include "test_util.h"

using namespace smelt;
using smelt_test::error_of;
using smelt_test::kInf;
using smelt_test::kNaN;
using smelt_test::make;
using smelt_test::vals;

namespace {

/// Same dtype, shape and values (NaN where NaN).
::testing::AssertionResult same(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype() || got.sizes() != want.sizes())
    return ::testing::AssertionFailure()
           << "got " << dtype_name(got.dtype()) << " " << detail::shape_str(got.sizes())
           << ", want " << dtype_name(want.dtype()) << " " << detail::shape_str(want.sizes());
  auto g = vals(got), w = vals(want);
  for (size_t i = 0; i < g.size(); ++i)
    if (!(g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i]))))
      return ::testing::AssertionFailure() << "at " << i << ": got " << g[i] << ", want " << w[i];
  return ::testing::AssertionSuccess();
}

Tensor sample() { return make({-2.5, -1, -0.0, 0.5, 1, 2.25, kNaN, kInf}, {2, 4}, float32); }

}  // namespace

TEST(TensorMethods, UnaryMethodsAreTheOps) {
  const Tensor x = sample();
  const Tensor pos = make({0.25, 0.5, 1, 2, 4, 9}, {6}, float32);
  const Tensor ints = make({-3, 0, 5, 12}, {4}, int32);
  struct Case {
    const char* name;
    Tensor got, want;
  };
  std::vector<Case> cases = {
      {"neg", x.neg(), neg(x)},
      {"abs", x.abs(), abs(x)},
      {"sign", x.sign(), sign(x)},
      {"exp", x.exp(), exp(x)},
      {"exp2", x.exp2(), exp2(x)},
      {"expm1", x.expm1(), expm1(x)},
      {"log", pos.log(), log(pos)},
      {"log2", pos.log2(), log2(pos)},
      {"log1p", pos.log1p(), log1p(pos)},
      {"sqrt", pos.sqrt(), sqrt(pos)},
      {"rsqrt", pos.rsqrt(), rsqrt(pos)},
      {"reciprocal", pos.reciprocal(), reciprocal(pos)},
      {"sin", x.sin(), sin(x)},
      {"cos", x.cos(), cos(x)},
      {"tan", x.tan(), tan(x)},
      {"tanh", x.tanh(), tanh(x)},
      {"sigmoid", x.sigmoid(), sigmoid(x)},
      {"relu", x.relu(), relu(x)},
      {"erf", x.erf(), erf(x)},
      {"floor", x.floor(), floor(x)},
      {"ceil", x.ceil(), ceil(x)},
      {"round", x.round(), round(x)},
      {"trunc", x.trunc(), trunc(x)},
      {"logical_not", x.logical_not(), logical_not(x)},
      {"bitwise_not", ints.bitwise_not(), bitwise_not(ints)},
      {"isnan", x.isnan(), isnan(x)},
      {"isinf", x.isinf(), isinf(x)},
      {"nan_to_num", x.nan_to_num(7.0), nan_to_num(x, 7.0)},
  };
  for (auto& c : cases) EXPECT_TRUE(same(c.got, c.want)) << c.name;
  // A few values, so that a method forwarding to the wrong op cannot pass by symmetry.
  EXPECT_EQ(vals(make({4, 9}, {2}).sqrt()), (std::vector<double>{2, 3}));
  EXPECT_EQ(vals(make({-1.5, 2.5}, {2}).round()), (std::vector<double>{-2, 2}));
  EXPECT_EQ(vals(ints.bitwise_not()), (std::vector<double>{2, -1, -6, -13}));
}

TEST(TensorMethods, BinaryMethodsTakeTensorsAndNumbers) {
  const Tensor a = make({-7, -2, 3, 8}, {4}, float32);
  const Tensor b = make({2, 3, -2, 3}, {4}, float32);
  const Tensor i = make({-7, -2, 3, 8}, {4}, int64);
  EXPECT_TRUE(same(a.add(b, 2), add(a, b, 2)));
  EXPECT_EQ(vals(a.add(1, 2)), (std::vector<double>{-5, 0, 5, 10}));
  EXPECT_EQ(vals(a.sub(b)), (std::vector<double>{-9, -5, 5, 5}));
  EXPECT_EQ(vals(a.sub(1)), (std::vector<double>{-8, -3, 2, 7}));
  EXPECT_EQ(vals(a.mul(b)), (std::vector<double>{-14, -6, -6, 24}));
  EXPECT_EQ(vals(a.mul(0.5)), (std::vector<double>{-3.5, -1, 1.5, 4}));
  EXPECT_EQ(vals(a.div(2)), (std::vector<double>{-3.5, -1, 1.5, 4}));
  EXPECT_EQ(vals(a.div(b, "floor")), (std::vector<double>{-4, -1, -2, 2}));
  EXPECT_EQ(vals(a.div(2, "trunc")), (std::vector<double>{-3, -1, 1, 4}));
  EXPECT_EQ(vals(i.floor_divide(2)), (std::vector<double>{-4, -1, 1, 4}));
  EXPECT_EQ(vals(i.remainder(3)), (std::vector<double>{2, 1, 0, 2}));
  EXPECT_EQ(vals(i.fmod(3)), (std::vector<double>{-1, -2, 0, 2}));
  EXPECT_EQ(vals(a.remainder(b)), vals(remainder(a, b)));
  EXPECT_EQ(vals(a.fmod(b)), vals(fmod(a, b)));
  EXPECT_EQ(vals(a.pow(2)), (std::vector<double>{49, 4, 9, 64}));
  EXPECT_TRUE(same(a.pow(b), pow(a, b)));
  EXPECT_EQ(vals(a.maximum(b)), (std::vector<double>{2, 3, 3, 8}));
  EXPECT_EQ(vals(a.minimum(b)), (std::vector<double>{-7, -2, -2, 3}));
  EXPECT_TRUE(same(a.fmax(b), fmax(a, b)));
  EXPECT_TRUE(same(a.fmin(b), fmin(a, b)));
  EXPECT_TRUE(same(a.atan2(b), atan2(a, b)));
  EXPECT_EQ(vals(a.eq(3)), (std::vector<double>{0, 0, 1, 0}));
  EXPECT_EQ(vals(a.ne(b)), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_EQ(vals(a.lt(0)), (std::vector<double>{1, 1, 0, 0}));
  EXPECT_EQ(vals(a.le(-2)), (std::vector<double>{1, 1, 0, 0}));
  EXPECT_EQ(vals(a.gt(b)), (std::vector<double>{0, 0, 1, 1}));
  EXPECT_EQ(vals(a.ge(3)), (std::vector<double>{0, 0, 1, 1}));
  EXPECT_EQ(a.gt(0).dtype(), DType::Bool);
  EXPECT_EQ(vals(i.bitwise_and(6)), (std::vector<double>{0, 6, 2, 0}));
  EXPECT_EQ(vals(i.bitwise_or(1)), (std::vector<double>{-7, -1, 3, 9}));
  EXPECT_EQ(vals(i.bitwise_xor(i)), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(vals(a.logical_and(b)), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_TRUE(same(a.logical_or(b), logical_or(a, b)));
  EXPECT_TRUE(same(a.logical_xor(b), logical_xor(a, b)));
  const Tensor cond = a > 0;
  EXPECT_EQ(vals(a.where(cond, b)), (std::vector<double>{2, 3, 3, 8}));
  EXPECT_EQ(vals(a.where(cond, 0)), (std::vector<double>{0, 0, 3, 8}));
  EXPECT_EQ(vals(a.clamp(-2, 4)), (std::vector<double>{-2, -2, 3, 4}));
  EXPECT_EQ(vals(a.clamp(0)), (std::vector<double>{0, 0, 3, 8}));
  EXPECT_EQ(vals(a.clamp(std::nullopt, 0)), (std::vector<double>{-7, -2, 0, 0}));
  EXPECT_EQ(vals(a.clamp(b)), (std::vector<double>{2, 3, 3, 8}));
  EXPECT_EQ(vals(a.lerp(b, 0.5)), (std::vector<double>{-2.5, 0.5, 0.5, 5.5}));
  EXPECT_TRUE(same(a.lerp(b, b), lerp(a, b, b)));
}

TEST(TensorMethods, ReductionsTakeOneDimOrAList) {
  const Tensor x = make({1, 5, 2, 8, -3, 4}, {2, 3}, float32);
  EXPECT_EQ(vals(x.sum()), (std::vector<double>{17}));
  EXPECT_EQ(x.sum().dim(), 0);
  EXPECT_EQ(vals(x.sum(1)), (std::vector<double>{8, 9}));
  EXPECT_EQ(vals(x.sum(0)), (std::vector<double>{9, 2, 6}));
  EXPECT_EQ(x.sum(1, true).sizes(), (Shape{2, 1}));
  EXPECT_EQ(vals(x.sum({0, 1})), (std::vector<double>{17}));
  EXPECT_EQ(x.sum(DType::Float64).dtype(), DType::Float64);
  EXPECT_EQ(x.sum(1, false, DType::Float64).dtype(), DType::Float64);
  EXPECT_EQ(vals(x.mean(1)), (std::vector<double>{8.0f / 3, 3}));
  EXPECT_EQ(vals(x.mean()), (std::vector<double>{17.0f / 6}));
  EXPECT_EQ(vals(x.prod()), (std::vector<double>{-960}));
  EXPECT_EQ(vals(x.prod(1)), (std::vector<double>{10, -96}));
  EXPECT_EQ(vals(x.amax(1)), (std::vector<double>{5, 8}));
  EXPECT_EQ(vals(x.amin()), (std::vector<double>{-3}));
  EXPECT_EQ(vals(x.max()), (std::vector<double>{8}));
  EXPECT_EQ(vals(x.min()), (std::vector<double>{-3}));
  auto [mx, arg] = x.max(1);
  EXPECT_EQ(vals(mx), (std::vector<double>{5, 8}));
  EXPECT_EQ(vals(arg), (std::vector<double>{1, 0}));
  auto [mn, argn] = x.min(0, true);
  EXPECT_EQ(mn.sizes(), (Shape{1, 3}));
  EXPECT_EQ(vals(argn), (std::vector<double>{0, 1, 0}));
  EXPECT_EQ(vals(x.max(make({3, 3, 3, 3, 3, 3}, {2, 3}, float32))),
            (std::vector<double>{3, 5, 3, 8, 3, 4}));
  EXPECT_EQ(vals(x.min(make({3}, {1}, float32))), (std::vector<double>{1, 3, 2, 3, -3, 3}));
  EXPECT_EQ(vals(x.argmax()), (std::vector<double>{3}));
  EXPECT_EQ(vals(x.argmin(1)), (std::vector<double>{0, 1}));
  EXPECT_TRUE(same(x.var(1), var(x, {1})));
  EXPECT_EQ(vals(x.var(0, 0)), (std::vector<double>{12.25, 16, 1}));
  EXPECT_TRUE(same(x.std(), smelt::std(x)));
  EXPECT_TRUE(same(x.std(1, 0, true), smelt::std(x, {1}, 0, true)));
  EXPECT_TRUE(same(x.logsumexp(1), logsumexp(x, {1})));
  const Tensor b = x > 1;
  EXPECT_EQ(vals(b.any()), (std::vector<double>{1}));
  EXPECT_EQ(vals(b.all()), (std::vector<double>{0}));
  EXPECT_EQ(vals(b.all(1)), (std::vector<double>{0, 0}));
  EXPECT_EQ(vals(b.any(0)), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(vals(x.cumsum(1)), (std::vector<double>{1, 6, 8, 8, 5, 9}));
}

TEST(TensorMethods, MovementAndNNMethods) {
  const Tensor x = smelt_test::iota({2, 3});
  EXPECT_EQ(x.broadcast_to({4, 2, 3}).sizes(), (Shape{4, 2, 3}));
  EXPECT_EQ(make({1, 2}, {2, 1}).expand_as(x).sizes(), (Shape{2, 3}));
  EXPECT_EQ(smelt_test::iota({6}).view_as(x).sizes(), (Shape{2, 3}));
  EXPECT_EQ(x.t().reshape_as(x).sizes(), (Shape{2, 3}));
  EXPECT_EQ(x.type_as(make({1}, {1}, int32)).dtype(), DType::Int32);
  const Tensor idx = make({2, 0}, {2}, int64);
  EXPECT_EQ(vals(x.index_select(1, idx)), (std::vector<double>{2, 0, 5, 3}));
  EXPECT_EQ(vals(x.gather(1, make({1, 1, 0, 2}, {2, 2}, int64))),
            (std::vector<double>{1, 1, 3, 5}));
  EXPECT_EQ(x.split(2, 1).size(), 2u);
  EXPECT_EQ(vals(x.split(std::vector<int64_t>{1, 2}, 1)[1]), (std::vector<double>{1, 2, 4, 5}));
  EXPECT_EQ(vals(x.chunk(2, 0)[1]), (std::vector<double>{3, 4, 5}));
  EXPECT_EQ(vals(x.tril()), (std::vector<double>{0, 0, 0, 3, 4, 0}));
  EXPECT_EQ(vals(x.triu(1)), (std::vector<double>{0, 1, 2, 0, 0, 5}));
  EXPECT_TRUE(same(x.softmax(1, DType::Float64), softmax(x, 1, DType::Float64)));
  EXPECT_TRUE(same(x.log_softmax(0), log_softmax(x, 0)));
}

TEST(TensorMethods, NumbersOnEitherSideOfOperators) {
  const Tensor a = make({-1, 0, 1.5, 3}, {4}, float32);
  EXPECT_EQ(vals(a > 0), (std::vector<double>{0, 0, 1, 1}));
  EXPECT_EQ(vals(0 < a), (std::vector<double>{0, 0, 1, 1}));
  EXPECT_EQ(vals(a >= 0), (std::vector<double>{0, 1, 1, 1}));
  EXPECT_EQ(vals(1.5 >= a), (std::vector<double>{1, 1, 1, 0}));
  EXPECT_EQ(vals(a < 1.5), (std::vector<double>{1, 1, 0, 0}));
  EXPECT_EQ(vals(a <= 0), (std::vector<double>{1, 1, 0, 0}));
  EXPECT_EQ(vals(2 > a), (std::vector<double>{1, 1, 1, 0}));
  EXPECT_EQ(vals(3 <= a), (std::vector<double>{0, 0, 0, 1}));
  EXPECT_EQ(vals(a == 1.5), (std::vector<double>{0, 0, 1, 0}));
  EXPECT_EQ(vals(3 == a), (std::vector<double>{0, 0, 0, 1}));
  EXPECT_EQ(vals(a != 0), (std::vector<double>{1, 0, 1, 1}));
  EXPECT_EQ(vals(-1 != a), (std::vector<double>{0, 1, 1, 1}));
  EXPECT_EQ((a == 1.5).dtype(), DType::Bool);
  EXPECT_EQ(vals(2 * a), (std::vector<double>{-2, 0, 3, 6}));
  EXPECT_EQ(vals(a * 2), (std::vector<double>{-2, 0, 3, 6}));
  EXPECT_EQ(vals(1 - a), (std::vector<double>{2, 1, -0.5, -2}));
  EXPECT_EQ(vals(3 / make({2, 4}, {2}, float32)), (std::vector<double>{1.5, 0.75}));
  EXPECT_EQ(vals(0.5 + a), (std::vector<double>{-0.5, 0.5, 2, 3.5}));
  // Integer tensors: an integer number keeps the dtype, a float number promotes.
  const Tensor i = make({-7, 2, 9}, {3}, int32);
  EXPECT_EQ((i % 4).dtype(), DType::Int32);
  EXPECT_EQ(vals(i % 4), (std::vector<double>{1, 2, 1}));
  EXPECT_EQ(vals(10 % i), (std::vector<double>{-4, 0, 1}));
  EXPECT_EQ((2 * i).dtype(), DType::Int32);
  EXPECT_EQ((i * 0.5).dtype(), DType::Float32);
  EXPECT_EQ(vals(i > 1.5), (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(vals(i & 3), (std::vector<double>{1, 2, 1}));
  EXPECT_EQ(vals(8 | i), (std::vector<double>{-7, 10, 9}));
  EXPECT_EQ(vals(i ^ 1), (std::vector<double>{-8, 3, 8}));
  const Tensor m = a > 0;
  EXPECT_EQ(vals(m & true), (std::vector<double>{0, 0, 1, 1}));
  EXPECT_EQ(vals(false | m), (std::vector<double>{0, 0, 1, 1}));
  EXPECT_EQ((m ^ true).dtype(), DType::Bool);
  EXPECT_EQ(vals(m ^ true), (std::vector<double>{1, 1, 0, 0}));
}

TEST(TensorMethods, InPlaceMethodsWorkOnConstHandles) {
  static_assert(std::is_same_v<decltype(std::declval<const Tensor&>().add_(1)), Tensor&>);
  static_assert(std::is_same_v<decltype(std::declval<const Tensor&>().copy_(Tensor())), Tensor&>);
  Tensor base = make({1, 2, 3, 4}, {4}, float32);
  auto scale = [](const Tensor& t) { t.mul_(2).add_(1); };  // a const handle, as in libtorch
  scale(base);
  EXPECT_EQ(vals(base), (std::vector<double>{3, 5, 7, 9}));
  const Tensor view = base.narrow(0, 1, 2);
  Tensor& r = view.sub_(5);
  EXPECT_TRUE(r.is_same(view));
  EXPECT_EQ(vals(base), (std::vector<double>{3, 0, 2, 9}));
  view.copy_(make({-1, -2}, {2}, float32));
  EXPECT_EQ(vals(base), (std::vector<double>{3, -1, -2, 9}));
  const Tensor c = make({-1.5, 0.25, 4}, {3}, float32);
  c.abs_().sqrt_();
  EXPECT_EQ(vals(c), (std::vector<double>{std::sqrt(1.5f), 0.5, 2}));
  c.fill_(2);
  c.pow_(3);
  EXPECT_EQ(vals(c), (std::vector<double>{8, 8, 8}));
  c.div_(make({2, 4, 16}, {3}, float32)).neg_();
  EXPECT_EQ(vals(c), (std::vector<double>{-4, -2, -0.5}));
  c.clamp_(-3, -1);
  EXPECT_EQ(vals(c), (std::vector<double>{-3, -2, -1}));
  c.masked_fill_(c < -2, 0);
  EXPECT_EQ(vals(c), (std::vector<double>{0, -2, -1}));
  c.zero_();
  EXPECT_EQ(vals(c), (std::vector<double>{0, 0, 0}));
  const Tensor k = make({-7, 2, 9}, {3}, int64);
  k.remainder_(4);
  EXPECT_EQ(vals(k), (std::vector<double>{1, 2, 1}));
  k.bitwise_or_(make({2, 1, 4}, {3}, int64));
  EXPECT_EQ(vals(k), (std::vector<double>{3, 3, 5}));
  k.floor_divide_(2);
  EXPECT_EQ(vals(k), (std::vector<double>{1, 1, 2}));
  const Tensor sq = smelt_test::iota({2, 2});
  sq.triu_();
  EXPECT_EQ(vals(sq), (std::vector<double>{0, 1, 0, 3}));
  const Tensor n = make({kNaN, kInf, 1}, {3}, float32);
  n.nan_to_num_(0.0, 5.0);
  EXPECT_EQ(vals(n), (std::vector<double>{0, 5, 1}));
  // Compound assignment on a const handle.
  const Tensor acc = make({1, 2}, {2}, float32);
  acc += 1;
  acc *= make({2, 3}, {2}, float32);
  acc -= 0.5;
  acc /= 2;
  EXPECT_EQ(vals(acc), (std::vector<double>{1.75, 4.25}));
}

TEST(TensorMethods, InPlaceRefusesAResultTheTensorCannotHold) {
  const Tensor i = make({1, 2}, {2}, int32);
  EXPECT_EQ(error_of([&] { i.sqrt_(); }),
            "sqrt_: result type float32 can't be cast to the desired output type int32; use the "
            "out-of-place op or convert the tensor first (x = x.to(...))");
  EXPECT_EQ(error_of([&] { i.div_(2); }),
            "div_: result type float32 can't be cast to the desired output type int32; use the "
            "out-of-place op or convert the tensor first (x = x.to(...))");
  EXPECT_EQ(vals(i), (std::vector<double>{1, 2})) << "nothing was written";
  i.div_(2, "floor");
  EXPECT_EQ(vals(i), (std::vector<double>{0, 1}));
}
