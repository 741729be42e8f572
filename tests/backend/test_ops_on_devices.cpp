// The op suite on every device (one suite, every device): the same cases with
// the same expected values run on the CPU and, where there is a GPU, on CUDA
// (inputs built on the host and moved; results read back). They cover the
// semantics a backend must keep — broadcasting, type promotion, wrapped
// numbers, NaN propagation, integer wrap-around and division, conversions,
// views and strides, in-place ops, reductions (inner and outer, split rows,
// accumulate types, first-index ties), scans, the nn composites, GEMMs,
// movement ops, factories and random numbers. The CUDA instances skip
// themselves ("no CUDA device") without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/tensor_impl.h"
#include "smelt/autograd.h"
#include "smelt/cuda.h"
#include "smelt/ops.h"
#include "test_util.h"

using namespace smelt;
using smelt_test::expect_close;
using smelt_test::kInf;
using smelt_test::kNaN;
using smelt_test::vals;

namespace {

class OnDevice : public testing::TestWithParam<Device> {
 protected:
  void SetUp() override { SMELT_SKIP_UNLESS_DEVICE(GetParam()); }
  Device dev() const { return GetParam(); }
  /// Values (converted as a store would) on the device under test.
  Tensor T(const std::vector<double>& v, const Shape& s, DType dt = float32) const {
    return from_vector<double>(v, s, TensorOptions(dt)).to(dev());
  }
  Tensor T(const std::vector<double>& v, DType dt = float32) const {
    return T(v, {static_cast<int64_t>(v.size())}, dt);
  }
  /// 0, 1, ..., n-1 (scaled) in `shape` on the device.
  Tensor iota(const Shape& shape, DType dt = float32, double scale = 1.0) const {
    int64_t n = detail::shape_numel(shape);
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>(i) * scale;
    return T(v, shape, dt);
  }
  /// The result is on the device under test; its values.
  std::vector<double> on(const Tensor& t) const {
    EXPECT_EQ(t.device(), dev());
    return vals(t);
  }
};

INSTANTIATE_TEST_SUITE_P(Devices, OnDevice, testing::ValuesIn(smelt_test::test_devices()),
                         smelt_test::device_name);

}  // namespace

TEST_P(OnDevice, BroadcastingPromotionAndWrappedNumbers) {
  Tensor a = T({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = T({10, 20, 30}, {3}, int64);
  Tensor r = a + b;
  EXPECT_EQ(r.dtype(), float32);
  EXPECT_EQ(on(r), (std::vector<double>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(on(a * 2), (std::vector<double>{2, 4, 6, 8, 10, 12}));  // float32 stays float32
  EXPECT_EQ((T({1, 2}, int32) + 1.5).dtype(), float32);             // floating number promotes
  EXPECT_EQ((T({1, 2}, int8) + 1000).dtype(), int8);                // an int number does not
  EXPECT_EQ(on(T({100}, int8) + 100), (std::vector<double>{-56}));  // wraps
  EXPECT_EQ(on(T({1, 2}, float16) * 3.0), (std::vector<double>{3, 6}));
  EXPECT_EQ(on(sub(T({5}, uint8), T({6}, uint8))), (std::vector<double>{255}));
  // A column times a row.
  EXPECT_EQ(on(T({1, 2}, {2, 1}) * T({3, 4, 5}, {1, 3})), (std::vector<double>{3, 4, 5, 6, 8, 10}));
  EXPECT_EQ(on(add(T({1, 2}), T({10, 20}), 3)), (std::vector<double>{31, 62}));
}

TEST_P(OnDevice, NaNAndSpecialValues) {
  Tensor x = T({kNaN, 1, -kInf, kInf, 0});
  const std::vector<double> mx = on(maximum(x, T({0, kNaN, 0, 0, -0.0})));
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1]));
  EXPECT_EQ(mx[2], 0);
  EXPECT_EQ(on(fmax(x, T({0, kNaN, 0, 0, 1}))), (std::vector<double>{0, 1, 0, kInf, 1}));
  EXPECT_EQ(on(isnan(x)), (std::vector<double>{1, 0, 0, 0, 0}));
  EXPECT_EQ(on(nan_to_num(x, 9.0, 8.0, -8.0)), (std::vector<double>{9, 1, -8, 8, 0}));
  EXPECT_EQ(on(relu(T({-1, kNaN, 2}))).size(), 3u);
  EXPECT_TRUE(std::isnan(on(relu(T({-1, kNaN, 2})))[1]));
  EXPECT_EQ(on(x.to(int32)),  // floats to integers as x86 / PyTorch's CPU kernels
            (std::vector<double>{INT32_MIN, 1, INT32_MIN, INT32_MIN, 0}));
  EXPECT_EQ(on(T({-1.5, 3e9, kNaN}).to(uint8)), (std::vector<double>{255, 0, 0}));
  EXPECT_EQ(on(T({1e10, -1e10}).to(float16)), (std::vector<double>{kInf, -kInf}));
  EXPECT_EQ(on(T({3.14159}).to(bfloat16)), (std::vector<double>{3.140625}));
}

TEST_P(OnDevice, IntegerSemantics) {
  Tensor a = T({7, -7, 7, -7, INT64_MIN}, int64);
  Tensor b = T({2, 2, -2, -2, -1}, int64);
  EXPECT_EQ(on(div(a, b, "floor")),
            (std::vector<double>{3, -4, -4, 3, static_cast<double>(INT64_MIN)}));
  EXPECT_EQ(on(div(a, b, "trunc")),
            (std::vector<double>{3, -3, -3, 3, static_cast<double>(INT64_MIN)}));
  EXPECT_EQ(on(remainder(a, b)), (std::vector<double>{1, 1, -1, -1, 0}));
  EXPECT_EQ(on(fmod(a, b)), (std::vector<double>{1, -1, 1, -1, 0}));
  EXPECT_EQ(on(div(T({1, 2}, int32), T({2, 4}, int32))), (std::vector<double>{0.5, 0.5}));
  EXPECT_EQ(on(pow(T({2, -1, 3}, int64), T({10, 3, -1}, int64))),
            (std::vector<double>{1024, -1, 0}));
  EXPECT_EQ(on(bitwise_xor(T({12, 10}, int16), T({10, 12}, int16))), (std::vector<double>{6, 6}));
  EXPECT_EQ(on(abs(T({-128}, int8))), (std::vector<double>{-128}));
  EXPECT_EQ(on(neg(T({5}, uint8))), (std::vector<double>{251}));
  // Raised by the op on the CPU, at the next synchronization (reading the values) on a GPU.
  smelt_test::expect_error_mentions([&] { on(remainder(T({1}, int32), T({0}, int32))); },
                                    "remainder: ZeroDivisionError");
}

TEST_P(OnDevice, UnaryMathInEveryFloatingDtype) {
  const std::vector<double> v = {-2.5, -0.5, 0.25, 1, 3};
  for (DType dt : {float16, bfloat16, float32, float64}) {
    const double tol = dt == float64 ? 1e-12 : dt == float32 ? 1e-6 : 1e-2;
    Tensor x = T(v, dt);
    std::vector<double> e(v.size()), g(v.size()), s(v.size()), t(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      e[i] = std::exp(v[i]);
      g[i] = 0.5 * v[i] * (1 + std::erf(v[i] / std::sqrt(2.0)));
      s[i] = 1 / (1 + std::exp(-v[i]));
      t[i] = std::tanh(v[i]);
    }
    expect_close(on(exp(x)), e, tol);
    expect_close(on(gelu(x)), g, tol);
    expect_close(on(sigmoid(x)), s, tol);
    expect_close(on(tanh(x)), t, tol);
    EXPECT_EQ(on(floor(x)), (std::vector<double>{-3, -1, 0, 1, 3})) << dtype_name(dt);
    EXPECT_EQ(on(round(T({0.5, 1.5, 2.5, -0.5}, dt))), (std::vector<double>{0, 2, 2, -0}));
  }
  expect_close(on(sqrt(T({4, 9}, int64))), {2, 3}, 1e-7);  // int -> float32
  EXPECT_EQ(sqrt(T({4}, int64)).dtype(), float32);
}

TEST_P(OnDevice, ViewsStridesAndInPlace) {
  Tensor x = iota({3, 4});
  EXPECT_EQ(on(x.t() + 0), (std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(on(x.slice(1, 1, 4, 2) * 10), (std::vector<double>{10, 30, 50, 70, 90, 110}));
  EXPECT_EQ(on(x.select(0, 2).exp().log().round()), (std::vector<double>{8, 9, 10, 11}));
  Tensor e = T({1, 2}, {2, 1}).expand({2, 3});
  EXPECT_EQ(on(e + x.slice(0, 0, 2).slice(1, 0, 3)), (std::vector<double>{1, 2, 3, 6, 7, 8}));
  // In place through a strided view: the base sees it.
  Tensor y = iota({2, 3});
  y.t().mul_(2);
  y.select(1, 0).add_(100);
  y.slice(1, 2, 3).fill_(-1);
  EXPECT_EQ(on(y), (std::vector<double>{100, 2, -1, 106, 8, -1}));
  y.zero_();
  EXPECT_EQ(on(y), (std::vector<double>(6, 0)));
  // copy_ converts and broadcasts, also from a CPU tensor.
  Tensor z = zeros({2, 3}, TensorOptions(int32).device(dev()));
  z.copy_(from_vector<double>({1.9, -2.9, 3.5}, {3}));
  EXPECT_EQ(on(z), (std::vector<double>{1, -2, 3, 1, -2, 3}));
  z.copy_(scalar_tensor(7));
  EXPECT_EQ(on(z), (std::vector<double>(6, 7)));
  Tensor m = iota({2, 3});
  m.masked_fill_(m > 2, -5);
  EXPECT_EQ(on(m), (std::vector<double>{0, 1, 2, -5, -5, -5}));
}

TEST_P(OnDevice, InPlaceOpsWriteIntoSelfOrCopy) {
  // Written straight into a contiguous self: the same storage, values and a
  // bumped version, whichever way the op runs.
  Tensor x = iota({2, 3});
  const void* data = x.data_ptr();
  const uint32_t v0 = x._version();
  Tensor y = T({10, 20, 30}, {3});
  x.add_(y, 2).mul_(2).relu_();
  EXPECT_EQ(x.data_ptr(), data);
  EXPECT_EQ(on(x), (std::vector<double>{40, 82, 124, 46, 88, 130}));
  EXPECT_EQ(x._version(), v0 + 3);
  x.sub_(x);  // an input that is self itself
  EXPECT_EQ(on(x), (std::vector<double>(6, 0)));
  // An input overlapping self without being its view: computed apart, then copied.
  Tensor s = iota({3, 3});
  s.add_(s.t());
  EXPECT_EQ(on(s), (std::vector<double>{0, 4, 8, 4, 8, 12, 8, 12, 16}));
  Tensor r = iota({2, 3});
  r.add_(r.select(0, 0));  // row 0 broadcast over self, read while self is written
  EXPECT_EQ(on(r), (std::vector<double>{0, 2, 4, 3, 5, 7}));
  // The result type is checked as before; self is untouched by the error.
  Tensor i = zeros({3}, TensorOptions(int64).device(dev()));
  EXPECT_THROW(i.add_(T({0.5, 1.5, 2.5}, {3})), Error);
  EXPECT_EQ(on(i), (std::vector<double>{0, 0, 0}));
  // Integer division by zero in place raises and leaves an integer self as it was
  // (on a GPU at the next synchronization).
  Tensor d = T({4, 6, 8}, {3}).to(int64);
  d.floor_divide_(2);
  EXPECT_EQ(on(d), (std::vector<double>{2, 3, 4}));
  // Under autograd the write goes through copy_ (a leaf that requires grad refuses it).
  Tensor leaf = iota({3}).requires_grad_();
  EXPECT_THROW(leaf.add_(1), Error);
  {
    NoGradGuard ng;
    leaf.add_(1);
  }
  EXPECT_EQ(on(leaf.detach()), (std::vector<double>{1, 2, 3}));
  // A saved tensor changed in place is caught at backward, as with copy_.
  Tensor w = iota({3}).requires_grad_();
  Tensor h = w * 1;
  Tensor e = h.exp();  // saves its result
  {
    NoGradGuard ng;
    e.mul_(2);
  }
  EXPECT_THROW(e.sum().backward(), Error);
}

TEST_P(OnDevice, ReductionsInnerOuterAndSplit) {
  Tensor x = iota({3, 4});
  EXPECT_EQ(on(sum(x, {1})), (std::vector<double>{6, 22, 38}));
  EXPECT_EQ(on(sum(x, {0})), (std::vector<double>{12, 15, 18, 21}));
  EXPECT_EQ(on(sum(x.t(), {1})), (std::vector<double>{12, 15, 18, 21}));  // strided rows
  EXPECT_EQ(on(sum(x, {0, 1}, true)), (std::vector<double>{66}));
  EXPECT_EQ(on(mean(x, {1})), (std::vector<double>{1.5, 5.5, 9.5}));
  EXPECT_EQ(on(amax(x, {0})), (std::vector<double>{8, 9, 10, 11}));
  EXPECT_EQ(on(prod(T({1, 2, 3, 4}, int32))), (std::vector<double>{24}));
  EXPECT_EQ(sum(T({1, 2}, int8)).dtype(), int64);
  EXPECT_EQ(on(sum(T({100, 100, 100}, int8))), (std::vector<double>{300}));  // int64 accumulate
  EXPECT_EQ(on(sum(T({1, 1}, kBool))), (std::vector<double>{2}));
  // Long rows split over blocks, few rows; half accumulates in float32.
  const int64_t n = 1 << 20;
  EXPECT_EQ(on(sum(ones({2, n}, TensorOptions().device(dev())), {1})),
            (std::vector<double>{static_cast<double>(n), static_cast<double>(n)}));
  EXPECT_EQ(on(sum(ones({n, 3}, TensorOptions(int32).device(dev())), {0})),
            (std::vector<double>(3, static_cast<double>(n))));
  EXPECT_EQ(on(sum(ones({4096}, TensorOptions(float16).device(dev())))),
            (std::vector<double>{4096}));
  // Every dim of a 3-D tensor, and two of three.
  Tensor c = iota({2, 3, 4});
  EXPECT_EQ(on(sum(c, {0, 2})), (std::vector<double>{60, 92, 124}));
  EXPECT_EQ(on(amin(c, {1})), (std::vector<double>{0, 1, 2, 3, 12, 13, 14, 15}));
  // Empty reductions: identities; NaN propagates through max.
  EXPECT_EQ(on(sum(zeros({0, 3}, TensorOptions().device(dev())), {0})),
            (std::vector<double>(3, 0)));
  EXPECT_EQ(on(prod(zeros({0}, TensorOptions().device(dev())))), (std::vector<double>{1}));
  EXPECT_TRUE(std::isnan(on(amax(T({1, kNaN, 3})))[0]));
  EXPECT_EQ(on(any(T({0, 0, 2}))), (std::vector<double>{1}));
  EXPECT_EQ(on(all(T({1, kNaN, 0}, {3}), {0})), (std::vector<double>{0}));
  EXPECT_EQ(on(any(zeros({0}, TensorOptions().device(dev())))), (std::vector<double>{0}));
}

TEST_P(OnDevice, ArgReductionsFirstIndexAndNaN) {
  Tensor x = T({1, 5, 5, 2, 0, 0, 0, -1}, {2, 4});
  EXPECT_EQ(on(argmax(x, 1)), (std::vector<double>{1, 0}));
  EXPECT_EQ(on(argmin(x, 1)), (std::vector<double>{0, 3}));
  EXPECT_EQ(on(argmax(x)), (std::vector<double>{1}));
  auto [v, i] = max(x, 0);
  EXPECT_EQ(on(v), (std::vector<double>{1, 5, 5, 2}));
  EXPECT_EQ(on(i), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(on(argmax(T({1, kNaN, 3, kNaN}))), (std::vector<double>{1}));
  // A long row: ties across blocks keep the first index.
  Tensor big = zeros({100000}, TensorOptions().device(dev()));
  big.slice(0, 70000, 70001).fill_(3);
  big.slice(0, 90000, 90001).fill_(3);
  EXPECT_EQ(on(argmax(big)), (std::vector<double>{70000}));
  EXPECT_EQ(on(argmin(big)), (std::vector<double>{0}));
}

TEST_P(OnDevice, VarianceAndScan) {
  Tensor x = T({1, 2, 3, 4, 10, 20, 30, 40}, {2, 4});
  expect_close(on(var(x, {1})), {1.6666666666666667, 166.66666666666666}, 1e-6);
  expect_close(on(smelt::std(x, {1}, 0)), {std::sqrt(1.25), std::sqrt(125.0)}, 1e-6);
  auto [vv, mm] = var_mean(x, {0});
  expect_close(on(vv), {40.5, 162, 364.5, 648}, 1e-6);
  expect_close(on(mm), {5.5, 11, 16.5, 22}, 1e-6);
  EXPECT_EQ(on(cumsum(T({1, 2, 3, 4, 5, 6}, {2, 3}), 1)), (std::vector<double>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(on(cumsum(T({1, 2, 3, 4, 5, 6}, {2, 3}), 0)), (std::vector<double>{1, 2, 3, 5, 7, 9}));
  EXPECT_EQ(cumsum(T({1}, int8), 0).dtype(), int64);
  // A long line (block scan) of integers: exact.
  const int64_t n = 5000;
  Tensor c = cumsum(ones({n}, TensorOptions(int32).device(dev())), 0);
  const std::vector<double> cv = on(c);
  for (int64_t i = 0; i < n; i += 997)
    EXPECT_EQ(cv[static_cast<size_t>(i)], static_cast<double>(i + 1));
  EXPECT_EQ(cv.back(), static_cast<double>(n));
}

TEST_P(OnDevice, NnComposites) {
  Tensor x = T({1, 2, 3, 1, 1, 1}, {2, 3});
  const double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0), s = e1 + e2 + e3;
  expect_close(on(softmax(x, 1)), {e1 / s, e2 / s, e3 / s, 1.0 / 3, 1.0 / 3, 1.0 / 3}, 1e-6);
  expect_close(on(log_softmax(x, 1)),
               {1 - std::log(s), 2 - std::log(s), 3 - std::log(s), -std::log(3.0), -std::log(3.0),
                -std::log(3.0)},
               1e-6);
  const double sd = std::sqrt(2.0 / 3 + 1e-5);
  expect_close(on(layer_norm(x, {3})), {-1 / sd, 0, 1 / sd, 0, 0, 0}, 1e-5);
  expect_close(on(cross_entropy(x, T({2, 0}, int64))), {((std::log(s) - 3) + std::log(3.0)) / 2},
               1e-6);
  Tensor q = iota({1, 2, 4}, float32, 0.1);
  expect_close(on(scaled_dot_product_attention(q, q, q)),
               vals(scaled_dot_product_attention(q.cpu(), q.cpu(), q.cpu())), 1e-6);
}

TEST_P(OnDevice, MatmulShapes) {
  Tensor a = iota({2, 2, 3}), b = iota({3, 2});
  EXPECT_EQ(on(matmul(a, b)), (std::vector<double>{10, 13, 28, 40, 46, 67, 64, 94}));
  EXPECT_EQ(on(matmul(T({1, 2, 3}), T({4, 5, 6}))), (std::vector<double>{32}));  // dot
  EXPECT_EQ(on(matmul(T({1, 2}), iota({2, 3}))), (std::vector<double>{6, 9, 12}));
  EXPECT_EQ(on(matmul(iota({2, 3}), T({1, 1, 1}))), (std::vector<double>{3, 12}));
  EXPECT_EQ(on(matmul(a.transpose(1, 2), iota({2, 2}))),
            (std::vector<double>{6, 9, 8, 13, 10, 17, 18, 33, 20, 37, 22, 41}));
  EXPECT_EQ(on(matmul(iota({2, 3}, int64), iota({3, 2}, int64))),
            (std::vector<double>{10, 13, 28, 40}));
  EXPECT_EQ(on(matmul(iota({0, 3}), iota({3, 2}))).size(), 0u);
  EXPECT_EQ(on(matmul(iota({2, 0}), iota({0, 2}))), (std::vector<double>(4, 0)));
}

TEST_P(OnDevice, MovementOps) {
  Tensor x = iota({2, 3});
  EXPECT_EQ(on(cat({x, T({9, 9, 9}, {1, 3})}, 0)),
            (std::vector<double>{0, 1, 2, 3, 4, 5, 9, 9, 9}));
  EXPECT_EQ(on(stack({T({1, 2}), T({3, 4})}, 1)), (std::vector<double>{1, 3, 2, 4}));
  EXPECT_EQ(on(pad(T({1, 2}), {1, 2}, -1)), (std::vector<double>{-1, 1, 2, -1, -1}));
  EXPECT_EQ(on(tril(iota({3, 3}))), (std::vector<double>{0, 0, 0, 3, 4, 0, 6, 7, 8}));
  EXPECT_EQ(on(triu(iota({2, 3}), 1)), (std::vector<double>{0, 1, 2, 0, 0, 5}));
  EXPECT_EQ(on(index_select(x, 1, T({2, 0, 2}, int64))), (std::vector<double>{2, 0, 2, 5, 3, 5}));
  EXPECT_EQ(on(index_select(x.t(), 0, T({1}, int32))), (std::vector<double>{1, 4}));
  EXPECT_EQ(on(gather(x, 1, T({2, 1, 0, 0}, {2, 2}, int64))), (std::vector<double>{2, 1, 3, 3}));
  EXPECT_EQ(on(embedding(iota({4, 2}), T({3, 0, 3}, int64))),
            (std::vector<double>{6, 7, 0, 1, 6, 7}));
  EXPECT_EQ(on(masked_fill(x, T({1, 0, 1}, kBool), -1)),
            (std::vector<double>{-1, 1, -1, -1, 4, -1}));
  EXPECT_EQ(on(where(x > 2, x, T({-1}))), (std::vector<double>{-1, -1, -1, 3, 4, 5}));
  Tensor y = iota({3, 2});
  y.index_put_(T({2, 0}, int64), T({7, 8}, {1, 2}));
  EXPECT_EQ(on(y), (std::vector<double>{7, 8, 2, 3, 7, 8}));
  expect_close(on(clamp(T({-2, 0.5, 9}), Scalar(0), Scalar(1))), {0, 0.5, 1}, 0);
  expect_close(on(lerp(T({0, 10}), T({10, 20}), 0.25)), {2.5, 12.5}, 1e-7);
}

TEST_P(OnDevice, FactoriesAndRandom) {
  const TensorOptions o = TensorOptions().device(dev());
  EXPECT_EQ(on(full({2}, 3.5, o)), (std::vector<double>{3.5, 3.5}));
  EXPECT_EQ(on(arange(5, o.dtype(int64))), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(on(arange(0, 1, 0.25, o)), (std::vector<double>{0, 0.25, 0.5, 0.75}));
  EXPECT_EQ(on(linspace(0, 1, 5, o)), (std::vector<double>{0, 0.25, 0.5, 0.75, 1}));
  EXPECT_EQ(on(eye(2, 3, o)), (std::vector<double>{1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(on(ones({2}, o.dtype(kBool))), (std::vector<double>{1, 1}));
  EXPECT_EQ(on(zeros_like(iota({2}))), (std::vector<double>{0, 0}));
  // Random draws are those of the CPU for the same seed.
  manual_seed(42);
  const std::vector<double> want = vals(rand({10}));
  manual_seed(42);
  EXPECT_EQ(on(rand({10}, o)), want);
}
