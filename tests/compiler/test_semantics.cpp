// Compiled == eager: dtypes (float16/bfloat16 rounding, integer arithmetic),
// NaN propagation, empty / size-1 / 0-dim / non-contiguous inputs, scalar
// operands, what a compiled function may return, and in-place writes
// (functionalization) whose effect on the caller's tensors must be eager's.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <limits>
#include <sstream>

#include "compiler/compile_test_util.h"
#include "smelt/nn.h"

using namespace smelt;
using smelt_test::close;
using smelt_test::names;
using smelt_test::same;

namespace {
class Semantics : public smelt_test::CompilerTest {};
class Mutation : public smelt_test::CompilerTest {};
}  // namespace

// ---- dtypes -------------------------------------------------------------------

TEST_F(Semantics, ExplicitFloat16CastRoundsAsIfStored) {
  // 1 + 2^-12 is not representable in float16: the cast must round it away
  // even though the fused kernel computes in float.
  Tensor x = from_vector<float>(
      {1.0f, 1.000244140625f, 3.14159f, 65504.f, 70000.f, -2.7182818f, 1e-8f, 0.1f}, {8});
  auto fn = [](const Tensor& x) { return (x * 1.0f).to(DType::Float16).to(DType::Float32) - x; };
  auto f = compile(fn);
  Tensor y = f(x);
  EXPECT_EQ(y.dtype(), DType::Float32);
  EXPECT_TRUE(same(y, fn(x)));
  EXPECT_EQ(f.stats().kernels, 1) << names(f);

  auto fb = [](const Tensor& x) {
    return (x + 0.0f).to(DType::BFloat16).to(DType::Float32) * 3 - x * 3;
  };
  auto g = compile(fb);
  EXPECT_TRUE(same(g(x), fb(x)));
}

TEST_F(Semantics, HalfPrecisionChains) {
  Tensor a32 = randn({5, 70}), b32 = randn({70});
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor a = a32.to(dt), b = b32.to(dt);
    auto fn = [](const Tensor& a, const Tensor& b) { return sigmoid(a * b + 1) - a; };
    auto f = compile(fn);
    Tensor y = f(a, b);
    Tensor ref = fn(a, b);
    EXPECT_EQ(y.dtype(), dt);
    // Eager rounds after every op, the fused kernel once at the store.
    EXPECT_TRUE(close(y, ref, dt == DType::Float16 ? 2e-3 : 2e-2)) << dtype_name(dt);
    EXPECT_EQ(f.stats().kernels, 1) << names(f);
    // Reductions accumulate in float and store in the half type.
    auto fs = compile([](const Tensor& a) { return softmax(a, 1); });
    Tensor s = fs(a);
    EXPECT_EQ(s.dtype(), dt);
    EXPECT_TRUE(close(s, softmax(a, 1), dt == DType::Float16 ? 2e-3 : 2e-2)) << dtype_name(dt);
  }
}

TEST_F(Semantics, IntegerArithmetic) {
  Tensor a = from_vector<int32_t>({7, -7, 100, INT_MAX, -3, 0}, {6});
  Tensor b = from_vector<int32_t>({2, 2, -3, 1, 5, 9}, {6});
  auto add = compile([](const Tensor& a, const Tensor& b) { return a + b * 2 + 5; });
  Tensor s = add(a, b);
  EXPECT_EQ(s.dtype(), DType::Int32);
  EXPECT_TRUE(same(s, a + b * 2 + 5));  // INT_MAX + 2 wraps as eager

  auto fdiv = compile([](const Tensor& a, const Tensor& b) {
    return std::make_tuple(floor_divide(a, b), div(a, b, "floor"), remainder(a, b), a / b);
  });
  auto [q, q2, r, t] = fdiv(a, b);
  EXPECT_EQ(q.dtype(), DType::Int32);
  EXPECT_TRUE(same(q, floor_divide(a, b)));
  EXPECT_EQ(q.to_vector<int32_t>()[1], -4);  // floor, not trunc
  EXPECT_TRUE(same(q2, div(a, b, "floor")));
  EXPECT_TRUE(same(r, remainder(a, b)));
  EXPECT_EQ(t.dtype(), DType::Float32);  // true division promotes
  EXPECT_TRUE(close(t, a / b, 1e-6));

  // INT_MIN // -1 overflows: it must not trap (SIGFPE), and must match eager.
  Tensor m = from_vector<int32_t>({INT_MIN, INT_MIN, 5}, {3});
  Tensor n = from_vector<int32_t>({-1, 1, -1}, {3});
  auto g = compile([](const Tensor& m, const Tensor& n) {
    return std::make_tuple(floor_divide(m, n), remainder(m, n));
  });
  auto [gq, gr] = g(m, n);
  EXPECT_TRUE(same(gq, floor_divide(m, n)));
  EXPECT_TRUE(same(gr, remainder(m, n)));
  EXPECT_EQ(add.stats().eager_calls + fdiv.stats().eager_calls + g.stats().eager_calls, 0);
}

TEST_F(Semantics, NaNPropagates) {
  Tensor x = from_vector<float>({1, NAN, 3, -1, 2, 0, NAN, 5}, {2, 4});
  Tensor y = from_vector<float>({0, 0, NAN, 0, 9, -9, 1, 1}, {2, 4});
  auto f = compile([](const Tensor& x, const Tensor& y) {
    return std::make_tuple(maximum(x, y), amax(x, {1}), argmax(x, 1), minimum(x, y), amin(y, {0}));
  });
  auto [mx, am, ag, mn, an] = f(x, y);
  EXPECT_TRUE(same(mx, maximum(x, y)));
  EXPECT_TRUE(same(am, amax(x, {1})));
  EXPECT_TRUE(std::isnan(am.to_vector<float>()[0]));
  EXPECT_EQ(ag.dtype(), DType::Int64);
  EXPECT_TRUE(same(ag, argmax(x, 1)));
  EXPECT_EQ(ag.to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));  // NaN is the maximum
  EXPECT_TRUE(same(mn, minimum(x, y)));
  EXPECT_TRUE(same(an, amin(y, {0})));
  EXPECT_EQ(f.stats().eager_calls, 0);
}

TEST_F(Semantics, EmptyAndSizeOneDims) {
  Tensor e = randn({0, 4});
  auto f = compile([](const Tensor& x) { return std::make_tuple(sigmoid(x * 2), sum(x, {0})); });
  auto [s, t] = f(e);
  EXPECT_EQ(s.sizes(), (Shape{0, 4}));
  EXPECT_EQ(t.sizes(), (Shape{4}));
  EXPECT_TRUE(same(t, zeros({4})));
  EXPECT_EQ(f.stats().eager_calls, 0);

  Tensor e2 = randn({3, 0});
  auto g = compile([](const Tensor& x) { return amax(x, {0}) + sum(x, {1}).sum(); });
  Tensor r = g(e2);
  EXPECT_EQ(r.sizes(), (Shape{0}));

  Tensor a = randn({3, 1}), b = randn({1, 4}), c = randn({1, 1});
  auto h = compile([](const Tensor& a, const Tensor& b, const Tensor& c) { return a * b + c; });
  Tensor y = h(a, b, c);
  EXPECT_EQ(y.sizes(), (Shape{3, 4}));
  EXPECT_TRUE(close(y, a * b + c, 1e-6));
  auto k = compile([](const Tensor& a) { return softmax(a, 1); });  // reduce over a size-1 dim
  EXPECT_TRUE(same(k(a), softmax(a, 1)));
}

TEST_F(Semantics, NonContiguousAndZeroDimInputs) {
  Tensor base = randn({8, 6});
  Tensor xt = base.t();                // transposed
  Tensor xs = base.slice(0, 1, 8, 2);  // [4, 6] stepped rows
  auto f = compile([](const Tensor& x, const Tensor& s) {
    return exp(x) + sum(s, {0}).unsqueeze(1).expand({6, 8}).t().t();
  });
  auto ref = [](const Tensor& x, const Tensor& s) {
    return exp(x) + sum(s, {0}).unsqueeze(1).expand({6, 8}).t().t();
  };
  EXPECT_TRUE(close(f(xt, xs), ref(xt, xs), 1e-5));

  Tensor s0 = scalar_tensor(2.5);
  Tensor v = randn({5});
  auto g = compile([](const Tensor& s, const Tensor& v) { return v * s + s; });
  Tensor y = g(s0, v);
  EXPECT_EQ(y.dtype(), DType::Float32);
  EXPECT_TRUE(close(y, v * s0 + s0, 1e-6));
  auto h = compile([](const Tensor& s) { return exp(s) * 2; });  // 0-dim in, 0-dim out
  Tensor z = h(s0);
  EXPECT_EQ(z.dim(), 0);
  EXPECT_TRUE(close(z, exp(s0) * 2, 1e-12));
}

TEST_F(Semantics, ScalarOperands) {
  Tensor x = randn({33});
  auto f = compile([](const Tensor& x) { return (x * 2.5 + 1) / 3 - (-x) * int64_t{4}; });
  Tensor y = f(x);
  EXPECT_EQ(y.dtype(), DType::Float32);
  EXPECT_TRUE(close(y, (x * 2.5 + 1) / 3 - (-x) * int64_t{4}, 1e-6));
  Tensor i = arange(10, TensorOptions().dtype(DType::Int64));
  auto g = compile([](const Tensor& i) {
    return std::make_tuple(i * 3 + 1, i * 0.5,
                           gt(i, scalar_tensor(4, TensorOptions().dtype(DType::Int64))));
  });
  auto [a, b, c] = g(i);
  EXPECT_EQ(a.dtype(), DType::Int64);
  EXPECT_EQ(b.dtype(), DType::Float32);
  EXPECT_EQ(c.dtype(), DType::Bool);
  EXPECT_TRUE(same(a, i * 3 + 1));
  EXPECT_TRUE(same(b, i * 0.5));
  EXPECT_TRUE(same(c, gt(i, scalar_tensor(4, TensorOptions().dtype(DType::Int64)))));
}

TEST_F(Semantics, ReturningInputsViewsTuplesAndVectors) {
  Tensor x = randn({3, 4});
  auto id = compile([](const Tensor& x) { return x; });
  Tensor y = id(x);
  EXPECT_TRUE(same(y, x));
  EXPECT_EQ(y.data_ptr(), x.data_ptr()) << "eager returns the input itself";

  auto tv = compile([](const Tensor& x) { return x.t(); });
  Tensor v = tv(x);
  EXPECT_EQ(v.sizes(), (Shape{4, 3}));
  EXPECT_TRUE(same(v, x.t()));
  EXPECT_EQ(v.data_ptr(), x.data_ptr()) << "a view of an input aliases it, as eager";

  auto tup = compile([](const Tensor& x) { return std::make_tuple(x + 1, x, x * 2); });
  auto [a, b, c] = tup(x);
  EXPECT_TRUE(same(a, x + 1));
  EXPECT_TRUE(same(b, x));
  EXPECT_TRUE(same(c, x * 2));

  auto vec = compile([](const Tensor& x) {
    return std::vector<Tensor>{relu(x), x.sum(), x.select(0, 0)};
  });
  std::vector<Tensor> r = vec(x);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(same(r[0], relu(x)));
  EXPECT_TRUE(close(r[1], x.sum(), 1e-6));
  EXPECT_TRUE(same(r[2], x.select(0, 0)));
}

// ---- mutation / functionalization ------------------------------------------------

TEST_F(Mutation, InPlaceAddMutatesCallerTensorAsEager) {
  auto fn = [](const Tensor& x) {
    Tensor t = x;
    t.add_(1);
    return t * 2;
  };
  Tensor x = randn({4, 5});
  Tensor xe = x.clone();
  auto f = compile(fn);
  Tensor y = f(x);
  Tensor ye = fn(xe);
  EXPECT_TRUE(same(x, xe)) << "the caller's tensor is mutated exactly like eager";
  EXPECT_TRUE(same(y, ye));
  // Second call: the compiled code runs again on the already-mutated x.
  Tensor y2 = f(x);
  Tensor ye2 = fn(xe);
  EXPECT_TRUE(same(x, xe));
  EXPECT_TRUE(same(y2, ye2));
  EXPECT_EQ(f.stats().compiles, 1);
}

TEST_F(Mutation, WriteThroughNarrowViewOfInput) {
  auto fn = [](const Tensor& x) {
    Tensor v = x.narrow(0, 1, 2);
    v.mul_(10);
    return x.sum(1);
  };
  Tensor x = randn({4, 3});
  Tensor xe = x.clone();
  auto f = compile(fn);
  Tensor y = f(x);
  Tensor ye = fn(xe);
  EXPECT_TRUE(same(x, xe));
  EXPECT_TRUE(close(y, ye, 1e-6));
}

TEST_F(Mutation, ReadInputAfterMutatingIt) {
  auto fn = [](const Tensor& x, const Tensor& w) {
    Tensor before = x * 1;
    Tensor t = x;
    t.mul_(w);
    t.add_(2);
    return std::make_tuple(x + before, before);
  };
  Tensor x = randn({6}), w = randn({6});
  Tensor xe = x.clone();
  auto f = compile(fn);
  auto [a, b] = f(x, w);
  auto [ae, be] = fn(xe, w);
  EXPECT_TRUE(same(x, xe));
  EXPECT_TRUE(same(a, ae));
  EXPECT_TRUE(same(b, be));
}

TEST_F(Mutation, BatchNormTrainingUpdatesRunningStats) {
  nn::BatchNorm1d bn(5), ref(5);
  Tensor x1 = randn({8, 5}) * 2 + 1, x2 = randn({8, 5}) - 3;
  auto f = compile(bn);
  Tensor y1 = f(x1), r1 = ref(x1);
  Tensor y2 = f(x2), r2 = ref(x2);
  EXPECT_TRUE(close(y1, r1, 1e-5));
  EXPECT_TRUE(close(y2, r2, 1e-5));
  EXPECT_TRUE(close(bn->running_mean, ref->running_mean, 1e-6));
  EXPECT_TRUE(close(bn->running_var, ref->running_var, 1e-6));
  EXPECT_TRUE(same(bn->num_batches_tracked, ref->num_batches_tracked));
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 2);
  EXPECT_EQ(f.stats().compiles, 1);
  EXPECT_EQ(f.stats().eager_calls, 0);
}

TEST_F(Mutation, CopyIntoInputSlice) {
  auto fn = [](const Tensor& x, const Tensor& src) {
    x.select(1, 0).copy_(src);
    return x * 1;
  };
  Tensor x = randn({3, 4}), src = randn({3});
  Tensor xe = x.clone();
  auto f = compile(fn);
  Tensor y = f(x, src);
  Tensor ye = fn(xe, src);
  EXPECT_TRUE(same(x, xe));
  EXPECT_TRUE(same(y, ye));
}
