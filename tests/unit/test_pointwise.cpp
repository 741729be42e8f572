// Pointwise ops: values against float64 references, PyTorch edge cases (values
// checked against PyTorch's golden answers), type promotion, broadcasting,
// strided inputs, in-place forms and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "backend/cpu/loops.h"
#include "core/tensor_impl.h"
#include "kernels/scalar_ops.h"
#include "ops/pointwise.h"
#include "smelt/ops.h"
#include "test_util.h"

using namespace smelt;
using smelt_test::expect_error_mentions;
using smelt_test::kInf;
using smelt_test::kNaN;
using smelt_test::vals;

namespace {

/// A contiguous tensor of `dtype` holding `v` (converted as a store would).
Tensor T_(const std::vector<double>& v, const Shape& shape, DType dtype = float32) {
  Tensor t = detail::make_empty(shape, dtype, Device());
  EXPECT_EQ(static_cast<int64_t>(v.size()), t.numel());
  SMELT_DISPATCH_ALL(dtype, "test", [&] {
    T* p = static_cast<T*>(t.data_ptr());
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        p[i] = T(static_cast<float>(v[i]));
      } else if constexpr (std::is_integral_v<T>) {
        p[i] = static_cast<T>(static_cast<int64_t>(v[i]));
      } else {
        p[i] = static_cast<T>(v[i]);
      }
    }
  });
  return t;
}
Tensor T_(const std::vector<double>& v, DType dtype = float32) {
  return T_(v, {static_cast<int64_t>(v.size())}, dtype);
}
Tensor I64(const std::vector<int64_t>& v) {
  Tensor t = detail::make_empty({static_cast<int64_t>(v.size())}, int64, Device());
  std::memcpy(t.data_ptr(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

/// Random values in [lo, hi].
std::vector<double> rnd(int64_t n, double lo, double hi, uint32_t seed = 1) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

/// Transposed view of a contiguous 2-D tensor (non-contiguous input).
Tensor transposed(const Tensor& t) {
  return detail::make_view(t, {t.size(1), t.size(0)}, {t.stride(1), t.stride(0)},
                           t.storage_offset());
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rtol,
                  double atol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " [" << i << "] got " << got[i];
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << " [" << i << "]";
    } else {
      EXPECT_LE(std::fabs(got[i] - want[i]), atol + rtol * std::fabs(want[i]))
          << what << " [" << i << "] got " << got[i] << " want " << want[i];
    }
  }
}

template <class F>
std::vector<double> map1(const std::vector<double>& a, F f) {
  std::vector<double> r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = f(a[i]);
  return r;
}
template <class F>
std::vector<double> map2(const std::vector<double>& a, const std::vector<double>& b, F f) {
  std::vector<double> r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = f(a[i], b[i]);
  return r;
}

/// Rounds through float32 (what a float32 input holds).
std::vector<double> as_f32(std::vector<double> v) {
  for (auto& x : v) x = static_cast<float>(x);
  return v;
}

}  // namespace

// ------------------------------------------------------------ unary vs float64 --
TEST(Pointwise, UnaryFloatAgainstFloat64Reference) {
  struct Case {
    const char* name;
    Tensor (*op)(const Tensor&);
    double (*ref)(double);
    double lo, hi;
  };
  const Case cases[] = {
      {"exp", smelt::exp, [](double x) { return std::exp(x); }, -5, 5},
      {"exp2", smelt::exp2, [](double x) { return std::exp2(x); }, -5, 5},
      {"expm1", smelt::expm1, [](double x) { return std::expm1(x); }, -3, 3},
      {"log", smelt::log, [](double x) { return std::log(x); }, 0.01, 10},
      {"log2", smelt::log2, [](double x) { return std::log2(x); }, 0.01, 10},
      {"log1p", smelt::log1p, [](double x) { return std::log1p(x); }, -0.9, 10},
      {"sqrt", smelt::sqrt, [](double x) { return std::sqrt(x); }, 0, 10},
      {"rsqrt", smelt::rsqrt, [](double x) { return 1 / std::sqrt(x); }, 0.01, 10},
      {"reciprocal", smelt::reciprocal, [](double x) { return 1 / x; }, 0.1, 10},
      {"sin", smelt::sin, [](double x) { return std::sin(x); }, -6, 6},
      {"cos", smelt::cos, [](double x) { return std::cos(x); }, -6, 6},
      {"tan", smelt::tan, [](double x) { return std::tan(x); }, -1.4, 1.4},
      {"tanh", smelt::tanh, [](double x) { return std::tanh(x); }, -5, 5},
      {"sigmoid", smelt::sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, -10, 10},
      {"erf", smelt::erf, [](double x) { return std::erf(x); }, -3, 3},
      {"silu", smelt::silu, [](double x) { return x / (1 + std::exp(-x)); }, -8, 8},
      {"neg", smelt::neg, [](double x) { return -x; }, -8, 8},
      {"abs", smelt::abs, [](double x) { return std::fabs(x); }, -8, 8},
      {"relu", smelt::relu, [](double x) { return x < 0 ? 0.0 : x; }, -8, 8},
      {"floor", smelt::floor, [](double x) { return std::floor(x); }, -8, 8},
      {"ceil", smelt::ceil, [](double x) { return std::ceil(x); }, -8, 8},
      {"trunc", smelt::trunc, [](double x) { return std::trunc(x); }, -8, 8},
      {"round", smelt::round, [](double x) { return std::nearbyint(x); }, -8, 8},
  };
  for (const auto& c : cases) {
    auto v = as_f32(rnd(2000, c.lo, c.hi));
    for (DType dt : {float32, float64}) {
      Tensor x = T_(v, {40, 50}, dt);
      Tensor y = c.op(x);
      EXPECT_EQ(y.dtype(), dt) << c.name;
      EXPECT_EQ(y.sizes(), (Shape{40, 50})) << c.name;
      expect_close(vals(y), map1(v, c.ref), dt == float32 ? 2e-6 : 1e-13, 1e-7, c.name);
      // transposed (non-contiguous) input gives the transposed result
      Tensor yt = c.op(transposed(x));
      EXPECT_EQ(yt.sizes(), (Shape{50, 40}));
      expect_close(vals(yt), vals(transposed(y)), 0, 0, c.name);
    }
    // float16 / bfloat16 compute in float32 and round once
    for (DType dt : {float16, bfloat16}) {
      Tensor x = T_(v, {2000}, dt);
      Tensor y = c.op(x);
      EXPECT_EQ(y.dtype(), dt) << c.name;
      auto xin = vals(x);
      auto want = map1(xin, c.ref);
      // expected: the float32 result rounded once to dt
      std::vector<double> want_r(want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        float f = static_cast<float>(want[i]);
        want_r[i] = dt == float16 ? static_cast<float>(Half(f)) : static_cast<float>(BFloat16(f));
      }
      expect_close(vals(y), want_r, dt == float16 ? 1e-3 : 8e-3, 1e-5, c.name);
    }
  }
}

TEST(Pointwise, GeluBothForms) {
  auto v = as_f32(rnd(1000, -6, 6));
  Tensor x = T_(v);
  expect_close(vals(gelu(x)),
               map1(v, [](double a) { return 0.5 * a * (1 + std::erf(a / std::sqrt(2.0))); }), 2e-6,
               1e-7, "gelu");
  expect_close(vals(gelu(x, "tanh")),
               map1(v,
                    [](double a) {
                      return 0.5 * a *
                             (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));
                    }),
               // 1 + tanh(.) cancels near x = -6: one float32 ulp of tanh (6e-8,
               // SLEEF's tanhf is within 1 ulp) times x/2 is 1.8e-7.
               2e-6, 2e-7, "gelu_tanh");
  // PyTorch (vectorized float erf): gelu(+inf) is NaN in float32/16, inf in float64
  EXPECT_TRUE(std::isnan(vals(gelu(T_({kInf})))[0]));
  EXPECT_TRUE(std::isnan(vals(gelu(T_({-kInf})))[0]));
  EXPECT_EQ(vals(gelu(T_({kInf}, float64)))[0], kInf);
  EXPECT_EQ(vals(gelu(T_({kInf}), "tanh"))[0], kInf);
  expect_error_mentions([&] { gelu(x, "fast"); }, "gelu");
  expect_error_mentions([&] { gelu(T_({1, 2}, int64)); }, "gelu");
}

TEST(Pointwise, UnaryIntToFloatAndIntegers) {
  Tensor xi = T_({0, 1, 2, 3}, int32);
  Tensor e = exp(xi);
  EXPECT_EQ(e.dtype(), float32);
  expect_close(vals(e), {1, std::exp(1.0), std::exp(2.0), std::exp(3.0)}, 1e-6, 0, "exp int");
  EXPECT_EQ(sqrt(T_({1, 0}, kBool)).dtype(), float32);
  // Same-dtype ops keep integers; integer extremes wrap like PyTorch.
  Tensor ext = T_({0, -2147483648.0, 2147483647, -1, 18}, int32);
  EXPECT_EQ(abs(ext).to_vector<int32_t>(), (std::vector<int32_t>{0, INT32_MIN, INT32_MAX, 1, 18}));
  EXPECT_EQ(neg(ext).to_vector<int32_t>(),
            (std::vector<int32_t>{0, INT32_MIN, -INT32_MAX, 1, -18}));
  EXPECT_EQ(sign(ext).to_vector<int32_t>(), (std::vector<int32_t>{0, -1, 1, -1, 1}));
  EXPECT_EQ(neg(T_({0, 1, 255}, uint8)).to_vector<int64_t>(), (std::vector<int64_t>{0, 255, 1}));
  EXPECT_EQ(floor(ext).to_vector<int32_t>(), ext.to_vector<int32_t>());
  EXPECT_EQ(relu(T_({-3, 0, 4}, int64)).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 4}));
  EXPECT_EQ(bitwise_not(T_({0, 5, -1}, int8)).to_vector<int64_t>(),
            (std::vector<int64_t>{-1, -6, 0}));
  Tensor bn = bitwise_not(T_({0, 1}, kBool));
  EXPECT_EQ(bn.dtype(), kBool);
  EXPECT_EQ(bn.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ((~T_({1, 0}, kBool)).to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(sign(T_({1, 0}, kBool)).dtype(), kBool);
}

TEST(Pointwise, UnaryEdgeValues) {
  Tensor x = T_({-0.0, 0.0, kNaN, kInf, -kInf, 2.5, 3.5, -2.5, 0.5, 1e-30});
  // sign: 0 for ±0 and NaN (as PyTorch on the CPU), ±1 otherwise.
  auto s = vals(sign(x));
  EXPECT_EQ(s, (std::vector<double>{0, 0, 0, 1, -1, 1, 1, -1, 1, 1}));
  EXPECT_FALSE(std::signbit(s[0]));
  // relu keeps -0.0 and NaN
  auto r = vals(relu(x));
  EXPECT_TRUE(std::signbit(r[0]));
  EXPECT_TRUE(std::isnan(r[2]));
  EXPECT_EQ(r[4], 0.0);
  // round half to even
  auto rd = vals(round(x));
  EXPECT_EQ(rd[5], 2.0);
  EXPECT_EQ(rd[6], 4.0);
  EXPECT_EQ(rd[7], -2.0);
  EXPECT_EQ(rd[8], 0.0);
  EXPECT_TRUE(std::isnan(rd[2]));
  EXPECT_EQ(vals(abs(x))[0], 0.0);
  EXPECT_FALSE(std::signbit(vals(abs(x))[0]));
  EXPECT_EQ(isnan(x).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(isinf(x).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 1, 1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(isnan(x).dtype(), kBool);
  EXPECT_EQ(isinf(T_({1, 2}, int32)).to_vector<int64_t>(), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(logical_not(x).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 1, 0, 0, 0, 0, 0, 0, 0, 0}));
  // sigmoid saturates without NaN
  expect_close(vals(sigmoid(T_({-1000, 1000, kNaN}))), {0, 1, kNaN}, 0, 0, "sigmoid sat");
  expect_close(vals(log(T_({0, -1}))), {-kInf, kNaN}, 0, 0, "log edge");
}

TEST(Pointwise, NanToNum) {
  Tensor x = T_({kNaN, kInf, -kInf, -0.0, 1.5});
  auto f32max = static_cast<double>(std::numeric_limits<float>::max());
  expect_close(vals(nan_to_num(x)), {0, f32max, -f32max, 0, 1.5}, 0, 0, "f32 defaults");
  expect_close(vals(nan_to_num(x, 1.0, 2.0, -3.0)), {1, 2, -3, 0, 1.5}, 0, 0, "args");
  expect_close(vals(nan_to_num(T_({kNaN, kInf, -kInf}, float16))), {0, 65504, -65504}, 0, 0, "f16");
  expect_close(vals(nan_to_num(T_({kNaN, kInf, -kInf}, float64))),
               {0, std::numeric_limits<double>::max(), -std::numeric_limits<double>::max()}, 0, 0,
               "f64");
  expect_close(vals(nan_to_num(T_({kInf}, bfloat16))), {3.3895313892515355e38}, 0, 0, "bf16");
  Tensor xi = T_({0, -2147483648.0, 7}, int32);
  EXPECT_EQ(nan_to_num(xi).to_vector<int32_t>(), xi.to_vector<int32_t>());
  EXPECT_EQ(nan_to_num(T_({1, 0}, kBool)).dtype(), kBool);
}

// ----------------------------------------------------------- binary vs float64 --
TEST(Pointwise, BinaryFloatAgainstFloat64Reference) {
  auto a = as_f32(rnd(600, -5, 5, 7));
  auto b = as_f32(rnd(600, -5, 5, 8));
  for (auto& x : b)
    if (std::fabs(x) < 0.05) x = 0.5;
  struct Case {
    const char* name;
    Tensor (*op)(const Tensor&, const Tensor&);
    double (*ref)(double, double);
  };
  const Case cases[] = {
      {"mul", [](const Tensor& x, const Tensor& y) { return mul(x, y); },
       [](double x, double y) { return x * y; }},
      {"div", [](const Tensor& x, const Tensor& y) { return div(x, y); },
       [](double x, double y) { return x / y; }},
      {"add", [](const Tensor& x, const Tensor& y) { return add(x, y); },
       [](double x, double y) { return x + y; }},
      {"sub", [](const Tensor& x, const Tensor& y) { return sub(x, y); },
       [](double x, double y) { return x - y; }},
      {"add_alpha", [](const Tensor& x, const Tensor& y) { return add(x, y, 2.5); },
       [](double x, double y) { return x + 2.5 * y; }},
      {"sub_alpha", [](const Tensor& x, const Tensor& y) { return sub(x, y, -0.5); },
       [](double x, double y) { return x + 0.5 * y; }},
      {"remainder", [](const Tensor& x, const Tensor& y) { return remainder(x, y); },
       [](double x, double y) { return x - std::floor(x / y) * y; }},
      {"fmod", [](const Tensor& x, const Tensor& y) { return fmod(x, y); },
       [](double x, double y) { return std::fmod(x, y); }},
      {"floor_divide", [](const Tensor& x, const Tensor& y) { return floor_divide(x, y); },
       [](double x, double y) { return std::floor(x / y); }},
      {"div_trunc", [](const Tensor& x, const Tensor& y) { return div(x, y, "trunc"); },
       [](double x, double y) { return std::trunc(x / y); }},
      {"pow", [](const Tensor& x, const Tensor& y) { return pow(abs(x), y); },
       [](double x, double y) { return std::pow(std::fabs(x), y); }},
      {"atan2", [](const Tensor& x, const Tensor& y) { return atan2(x, y); },
       [](double x, double y) { return std::atan2(x, y); }},
      {"maximum", [](const Tensor& x, const Tensor& y) { return maximum(x, y); },
       [](double x, double y) { return std::max(x, y); }},
      {"minimum", [](const Tensor& x, const Tensor& y) { return minimum(x, y); },
       [](double x, double y) { return std::min(x, y); }},
      {"fmax", [](const Tensor& x, const Tensor& y) { return fmax(x, y); },
       [](double x, double y) { return std::fmax(x, y); }},
      {"fmin", [](const Tensor& x, const Tensor& y) { return fmin(x, y); },
       [](double x, double y) { return std::fmin(x, y); }},
  };
  for (const auto& c : cases) {
    for (DType dt : {float32, float64}) {
      Tensor x = T_(a, {20, 30}, dt), y = T_(b, {20, 30}, dt);
      Tensor z = c.op(x, y);
      EXPECT_EQ(z.dtype(), dt) << c.name;
      expect_close(vals(z), map2(a, b, c.ref), dt == float32 ? 3e-6 : 1e-12, 1e-5, c.name);
      // broadcasting a row / a column and non-contiguous operands
      Tensor xt = transposed(T_(a, {30, 20}, dt));
      Tensor zt = c.op(xt, y);
      auto at = vals(xt);
      expect_close(vals(zt), map2(at, b, c.ref), dt == float32 ? 3e-6 : 1e-12, 1e-5, c.name);
      Tensor row = T_(std::vector<double>(b.begin(), b.begin() + 30), {1, 30}, dt);
      auto zr = vals(c.op(x, row));
      std::vector<double> br(600);
      for (int i = 0; i < 600; ++i) br[i] = b[i % 30];
      expect_close(zr, map2(a, br, c.ref), dt == float32 ? 3e-6 : 1e-12, 1e-5, c.name);
    }
  }
}

TEST(Pointwise, ComparisonsAndLogical) {
  Tensor a = T_({1, 2, kNaN, -0.0, 5});
  Tensor b = T_({1, 3, kNaN, 0.0, 4});
  EXPECT_EQ(eq(a, b).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 1, 0}));
  EXPECT_EQ(ne(a, b).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 0, 1}));
  EXPECT_EQ(lt(a, b).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0, 0, 0}));
  EXPECT_EQ(le(a, b).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 0, 1, 0}));
  EXPECT_EQ(gt(a, b).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0, 1}));
  EXPECT_EQ(ge(a, b).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 1, 1}));
  EXPECT_EQ((a == b).dtype(), kBool);
  EXPECT_EQ((a < b).to_vector<int64_t>(), lt(a, b).to_vector<int64_t>());
  // int64 vs float32 compares in float32; int vs int exactly.
  Tensor big = I64({INT64_MAX, INT64_MAX - 1});
  EXPECT_EQ(eq(big, I64({INT64_MAX - 1, INT64_MAX - 1})).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1}));
  // logical ops take any dtype, NaN is true
  Tensor la = T_({0, 1, kNaN, 0});
  Tensor lb = T_({0, 0, 3, 7}, int32);
  EXPECT_EQ(logical_and(la, lb).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 0}));
  EXPECT_EQ(logical_or(la, lb).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 1}));
  EXPECT_EQ(logical_xor(la, lb).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_EQ(logical_and(la, lb).dtype(), kBool);
  // bitwise ops on integers and bool
  Tensor ia = T_({12, -1, 5}, int16), ib = T_({10, 3, 0}, int16);
  EXPECT_EQ((ia & ib).to_vector<int64_t>(), (std::vector<int64_t>{8, 3, 0}));
  EXPECT_EQ((ia | ib).to_vector<int64_t>(), (std::vector<int64_t>{14, -1, 5}));
  EXPECT_EQ((ia ^ ib).to_vector<int64_t>(), (std::vector<int64_t>{6, -4, 5}));
  Tensor ba = T_({1, 1, 0}, kBool), bb = T_({1, 0, 0}, kBool);
  EXPECT_EQ((ba ^ bb).dtype(), kBool);
  EXPECT_EQ((ba ^ bb).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(bitwise_and(T_({7, 6}, int64), detail::wrap_scalar(3)).dtype(), int64);
}

TEST(Pointwise, NaNPropagationMaxMinClamp) {
  Tensor a = T_({kNaN, 1, kNaN, 2});
  Tensor b = T_({1, kNaN, kNaN, 3});
  expect_close(vals(maximum(a, b)), {kNaN, kNaN, kNaN, 3}, 0, 0, "maximum");
  expect_close(vals(minimum(a, b)), {kNaN, kNaN, kNaN, 2}, 0, 0, "minimum");
  expect_close(vals(fmax(a, b)), {1, 1, kNaN, 3}, 0, 0, "fmax");
  expect_close(vals(fmin(a, b)), {1, 1, kNaN, 2}, 0, 0, "fmin");
  Tensor x = T_({-2, 0.5, 3, kNaN});
  expect_close(vals(clamp(x, Scalar(-1.0), Scalar(1.0))), {-1, 0.5, 1, kNaN}, 0, 0, "clamp");
  expect_close(vals(clamp(x, Scalar(0.0), std::nullopt)), {0, 0.5, 3, kNaN}, 0, 0, "clamp_min");
  expect_close(vals(clamp(x, std::nullopt, Scalar(0.0))), {-2, 0, 0, kNaN}, 0, 0, "clamp_max");
  // min > max gives max
  expect_close(vals(clamp(x, Scalar(2.0), Scalar(1.0))), {1, 1, 1, kNaN}, 0, 0, "min>max");
  // tensor bounds broadcast
  Tensor lo = T_({-1, 0, 1, 0}), hi = T_({2}, {1});
  expect_close(vals(clamp(x, std::optional<Tensor>(lo), std::optional<Tensor>(hi))),
               {-1, 0.5, 2, kNaN}, 0, 0, "clamp tensor");
  // integer clamp stays integer; a float bound promotes
  Tensor xi = T_({-10, 0, 10}, int32);
  Tensor ci = clamp(xi, Scalar(-5), Scalar(5));
  EXPECT_EQ(ci.dtype(), int32);
  EXPECT_EQ(ci.to_vector<int32_t>(), (std::vector<int32_t>{-5, 0, 5}));
  EXPECT_EQ(clamp(xi, Scalar(0.5), std::nullopt).dtype(), float32);
  expect_error_mentions([&] { clamp(x, std::optional<Scalar>(), std::optional<Scalar>()); },
                        "clamp");
}

// Bool tensors, as PyTorch 2.15: one bool tensor bound clamps (maximum for
// min, minimum for max); both bounds, or bool number bounds, have no kernel.
TEST(Pointwise, ClampOfBoolTensors) {
  const Tensor b = T_({1, 0, 1, 0}).to(DType::Bool);
  const Tensor lo = T_({0, 1, 0, 1}).to(DType::Bool), hi = T_({0, 0, 1, 1}).to(DType::Bool);
  const Tensor mn = clamp(b, std::optional<Tensor>(lo), std::nullopt);
  EXPECT_EQ(mn.dtype(), DType::Bool);
  EXPECT_EQ(vals(mn), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_EQ(vals(clamp(b, std::nullopt, std::optional<Tensor>(hi))),
            (std::vector<double>{0, 0, 1, 0}));
  expect_error_mentions([&] { clamp(b, std::optional<Tensor>(lo), std::optional<Tensor>(hi)); },
                        "both bounds");
  expect_error_mentions([&] { clamp(b, Scalar(true), std::nullopt); }, "bool number bounds");
  // An integer bound promotes to int64, as in PyTorch.
  const Tensor ci = clamp(b, Scalar(1), std::nullopt);
  EXPECT_EQ(ci.dtype(), DType::Int64);
  EXPECT_EQ(vals(ci), (std::vector<double>{1, 1, 1, 1}));
}

TEST(Pointwise, WhereAndLerp) {
  Tensor c = T_({1, 0, 1, 0, 1, 0}, {2, 3}, kBool);
  Tensor a = T_({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = T_({-1, -2, -3}, {1, 3});
  expect_close(vals(where(c, a, b)), {1, -2, 3, -1, 5, -3}, 0, 0, "where");
  Tensor w2 = where(c, a, Scalar(0.0));
  EXPECT_EQ(w2.dtype(), float32);
  expect_close(vals(w2), {1, 0, 3, 0, 5, 0}, 0, 0, "where scalar");
  Tensor w3 =
      where(c, T_({1, 2, 3, 4, 5, 6}, {2, 3}, int32), T_({9, 9, 9, 9, 9, 9}, {2, 3}, float16));
  EXPECT_EQ(w3.dtype(), float16);
  EXPECT_EQ(where(c, Scalar(1), T_({1, 2, 3}, int32)).dtype(), int32);
  expect_error_mentions([&] { where(a, a, b); }, "where");

  auto s = as_f32(rnd(100, -3, 3, 3));
  auto e = as_f32(rnd(100, -3, 3, 4));
  auto w = as_f32(rnd(100, -1, 2, 5));
  expect_close(
      vals(lerp(T_(s), T_(e), T_(w))),
      [&] {
        std::vector<double> r(100);
        for (int i = 0; i < 100; ++i) r[i] = s[i] + w[i] * (e[i] - s[i]);
        return r;
      }(),
      1e-5, 1e-5, "lerp");
  expect_close(vals(lerp(T_(s), T_(e), Scalar(0.3))),
               map2(s, e, [](double x, double y) { return x + 0.3 * (y - x); }), 1e-5, 1e-5,
               "lerp scalar");
  expect_error_mentions([&] { lerp(T_(s), T_(e, float64), Scalar(0.5)); }, "lerp");
  expect_error_mentions([&] { lerp(T_({1}, int32), T_({1}, int32), Scalar(0.5)); }, "lerp");
}

// ------------------------------------------------------------- integer math --
TEST(Pointwise, IntegerDivisionRemainderPow) {
  Tensor a = T_({7, -7, 7, -7, 0, -128}, int8);
  Tensor b = T_({2, 2, -2, -2, 3, -1}, int8);
  EXPECT_EQ(floor_divide(a, b).to_vector<int64_t>(), (std::vector<int64_t>{3, -4, -4, 3, 0, -128}));
  EXPECT_EQ(div(a, b, "trunc").to_vector<int64_t>(), (std::vector<int64_t>{3, -3, -3, 3, 0, -128}));
  EXPECT_EQ(remainder(a, b).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, -1, -1, 0, 0}));
  EXPECT_EQ(fmod(a, b).to_vector<int64_t>(), (std::vector<int64_t>{1, -1, 1, -1, 0, 0}));
  EXPECT_EQ((a % b).to_vector<int64_t>(), remainder(a, b).to_vector<int64_t>());
  EXPECT_EQ(floor_divide(a, b).dtype(), int8);
  // INT64_MIN / -1 wraps
  EXPECT_EQ(floor_divide(I64({INT64_MIN}), I64({-1})).to_vector<int64_t>()[0], INT64_MIN);
  // true division of integers is float32
  Tensor d = div(T_({1, 2}, int32), T_({2, 0}, int32));
  EXPECT_EQ(d.dtype(), float32);
  expect_close(vals(d), {0.5, kInf}, 0, 0, "int true div");
  // integer division by zero raises (PyTorch's ZeroDivisionError)
  for (auto f : {+[](const Tensor&x, const Tensor&y) { return floor_divide(x, y); },
                 +[](const Tensor&x, const Tensor&y) { return remainder(x, y); },
                 +[](const Tensor&x, const Tensor&y) { return fmod(x, y); },
                 +[](const Tensor&x, const Tensor&y) { return div(x, y, "trunc"); }}) {
    EXPECT_THROW(f(T_({5, -5, 0}, int32), T_({0, 0, 0}, int32)), smelt::Error);
    EXPECT_THROW(f(T_({5}, int64), T_({1, 0}, int32)), smelt::Error);
  }
  expect_error_mentions([&] { floor_divide(T_({5}, int32), T_({0}, int32)); }, "ZeroDivisionError");
  // an empty output does not divide
  EXPECT_EQ(floor_divide(T_({}, {0, 2}, int32), T_({0, 1}, {1, 2}, int32)).numel(), 0);
  // float remainder / floor division by zero follow IEEE (NaN / ±inf)
  expect_close(vals(remainder(T_({5, -5}), T_({0, 0}))), {kNaN, kNaN}, 0, 0, "rem0");
  expect_close(vals(floor_divide(T_({5, -5, 0}), T_({0, 0, 0}))), {kInf, -kInf, kNaN}, 0, 0,
               "fdiv0");
  // floor division sign of zero and exact floor of near-integers
  auto fz = vals(floor_divide(T_({-0.0, 1}), T_({5, -5})));
  EXPECT_TRUE(std::signbit(fz[0]) == false || fz[0] == 0);
  EXPECT_EQ(fz[1], -1.0);
  // integer pow: squaring, wrapping, negative exponents (PyTorch rules)
  EXPECT_EQ(pow(I64({2, 3, 1, -1, -1, 0}), I64({-1, 2, -5, -3, -2, 0})).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 9, 1, -1, 1, 1}));
  // int8 ** uint8 -> int16 (golden case pow_int8_uint8)
  Tensor p = pow(T_({20, 14, -13, -9, 19, 3}, int8), T_({18, 5, 20, 2, 3, 20}, uint8));
  EXPECT_EQ(p.dtype(), int16);
  std::vector<int64_t> want;
  for (auto [x, y] : std::vector<std::pair<int64_t, int64_t>>{
           {20, 18}, {14, 5}, {-13, 20}, {-9, 2}, {19, 3}, {3, 20}}) {
    uint64_t r = 1;
    for (int i = 0; i < y; ++i) r *= static_cast<uint64_t>(x);
    want.push_back(static_cast<int16_t>(static_cast<uint16_t>(r)));
  }
  EXPECT_EQ(p.to_vector<int64_t>(), want);
  EXPECT_EQ(pow(T_({2, 3}, int32), 2).to_vector<int64_t>(), (std::vector<int64_t>{4, 9}));
  EXPECT_EQ(pow(T_({2, 3}, int32), 0.5).dtype(), float32);
  expect_error_mentions([&] { pow(T_({2, 3}, int32), -1); }, "pow");
  expect_error_mentions([&] { pow(T_({2}, float16), 100000.0); }, "pow");
  // integer arithmetic wraps
  EXPECT_EQ((I64({INT64_MAX}) + 1).to_vector<int64_t>()[0], INT64_MIN);
  EXPECT_EQ((T_({100}, int8) * 3).to_vector<int64_t>()[0], 44);
  EXPECT_EQ((T_({250}, uint8) + 10).to_vector<int64_t>()[0], 4);
}

// ------------------------------------------------------ promotion & broadcast --
TEST(Pointwise, ResultTypeTable) {
  auto S = [](Scalar s) { return detail::wrap_scalar(s); };
  Tensor i32 = T_({1, 2}, int32), f16 = T_({1, 2}, float16), bf = T_({1}, bfloat16),
         b = T_({1, 0}, kBool), u8 = T_({1}, uint8), i8 = T_({1}, int8), f64 = T_({1}, float64);
  Tensor f64_0d = T_({1}, Shape{}, float64), i64_0d = T_({1}, Shape{}, int64);
  EXPECT_EQ(result_type(i32, S(2.5)), float32);
  EXPECT_EQ(result_type(i32, S(3)), int32);
  EXPECT_EQ(result_type(f16, S(100000.0)), float16);
  EXPECT_EQ(result_type(b, S(3)), int64);
  EXPECT_EQ(result_type(b, S(true)), kBool);
  EXPECT_EQ(result_type(b, S(1.5)), float32);
  EXPECT_EQ(result_type(u8, i8), int16);
  EXPECT_EQ(result_type(f16, bf), float32);
  EXPECT_EQ(result_type(i32, f16), float16);
  EXPECT_EQ(result_type(i32, f64_0d), float64);  // 0-dim tensor of a higher category counts
  EXPECT_EQ(result_type(T_({1}, float32), f64_0d), float32);
  EXPECT_EQ(result_type(T_({1}, int8), i64_0d), int8);
  EXPECT_EQ(result_type(i64_0d, S(1.5)), float32);
  EXPECT_EQ(result_type(f64, S(1)), float64);
  EXPECT_EQ(detail::result_type({S(1), S(2.0)}), float32);
  // ops follow it, with wrapped numbers on either side
  EXPECT_EQ((i32 + 2.5).dtype(), float32);
  EXPECT_EQ((2.5 * i32).dtype(), float32);
  EXPECT_EQ((i32 * 3).dtype(), int32);
  EXPECT_EQ((f16 + 100000.0).dtype(), float16);
  EXPECT_TRUE(std::isinf(vals(f16 + 100000.0)[0]));
  EXPECT_EQ(add(b, b).dtype(), kBool);
  EXPECT_EQ(add(b, b).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(mul(b, T_({1, 1}, kBool)).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ((b + 1).dtype(), int64);
  EXPECT_EQ(div(i32, 2).dtype(), float32);
  EXPECT_EQ(div(f16, 2).dtype(), float16);
  EXPECT_EQ(lt(i32, S(1.5)).dtype(), kBool);
  EXPECT_EQ(sub(i32, T_({1}, Shape{}, float64)).dtype(), float64);
  // values: 1 - x, x / 2 with wrapped number left and right
  expect_close(vals(1 - T_({0.25, 2})), {0.75, -1}, 0, 0, "1-x");
  expect_close(vals(3 / T_({2, 4})), {1.5, 0.75}, 0, 0, "3/x");
  expect_close(vals(T_({1, 2}) - 0.5), {0.5, 1.5}, 0, 0, "x-0.5");
  // float16 + float number: scalar converted straight to float (not rounded to half first)
  expect_close(vals(T_({1.0}, float16) * 0.1), {static_cast<float>(Half(0.1f))}, 0, 0, "f16*0.1");
}

TEST(Pointwise, BroadcastShapes) {
  EXPECT_EQ(broadcast_shapes({3, 1, 4}, {2, 4}), (Shape{3, 2, 4}));
  EXPECT_EQ(broadcast_shapes({}, {2, 3}), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({0, 3}, {1, 3}), (Shape{0, 3}));
  EXPECT_EQ(broadcast_shapes({1}, {0}), (Shape{0}));
  try {
    broadcast_shapes({3}, {4}, "add");
    ADD_FAILURE();
  } catch (const smelt::Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("add"), std::string::npos);
    EXPECT_NE(m.find("[3]"), std::string::npos);
    EXPECT_NE(m.find("[4]"), std::string::npos);
  }
  expect_error_mentions([&] { add(T_({1, 2, 3}), T_({1, 2, 3, 4})); }, "add");
  expect_error_mentions([&] { where(T_({1, 0}, kBool), T_({1, 2, 3}), T_({1})); }, "where");
  // size-0 and size-1 dims
  Tensor e = add(T_({}, {0, 3}), T_({1, 2, 3}, {1, 3}));
  EXPECT_EQ(e.sizes(), (Shape{0, 3}));
  Tensor o = mul(T_({2}, {1, 1}), T_({1, 2, 3}, {3, 1}));
  EXPECT_EQ(o.sizes(), (Shape{3, 1}));
  expect_close(vals(o), {2, 4, 6}, 0, 0, "1x1*3x1");
  Tensor outer = add(T_({1, 2, 3}, {3, 1}), T_({10, 20}, {1, 2}));
  EXPECT_EQ(outer.sizes(), (Shape{3, 2}));
  expect_close(vals(outer), {11, 21, 12, 22, 13, 23}, 0, 0, "outer");
  // 0-dim with 0-dim
  Tensor z = add(T_({1}, Shape{}), T_({2}, Shape{}));
  EXPECT_EQ(z.dim(), 0);
  EXPECT_EQ(vals(z)[0], 3.0);
}

TEST(Pointwise, LargeMixedDtypeParallel) {
  // Big enough for the OpenMP path; mixed dtypes go through the converting loads.
  const int64_t n = 100003;
  std::vector<double> a(n), b(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<double>(i % 1000) - 500;
    b[i] = static_cast<double>(i % 7) * 0.25;
  }
  Tensor x = T_(a, int32), y = T_(b, float16);
  Tensor z = add(x, y, 2);
  EXPECT_EQ(z.dtype(), float16);
  auto got = vals(z);
  for (int64_t i = 0; i < n; i += 997)
    EXPECT_EQ(got[i], static_cast<float>(Half(static_cast<float>(a[i] + 2 * b[i])))) << i;
  Tensor w = mul(T_(a, float64), T_(b, float32));
  auto gw = vals(w);
  for (int64_t i = 0; i < n; i += 991) EXPECT_EQ(gw[i], a[i] * b[i]);
}

// ------------------------------------------------------------------ in place --
TEST(Pointwise, InPlaceThroughViews) {
  Tensor x = T_({1, 2, 3, 4, 5, 6}, {2, 3});
  // row 1 as a view (narrow along dim 0)
  Tensor row = detail::make_view(x, {1, 3}, {3, 1}, 3);
  row.add_(T_({10, 20, 30}, {3}));
  expect_close(vals(x), {1, 2, 3, 14, 25, 36}, 0, 0, "add_ view");
  // a column (strided) view
  Tensor col = detail::make_view(x, {2}, {3}, 1);
  col.mul_(2);
  expect_close(vals(x), {1, 4, 3, 14, 50, 36}, 0, 0, "mul_ col");
  col.clamp_(Scalar(5), Scalar(10));
  expect_close(vals(x), {1, 5, 3, 14, 10, 36}, 0, 0, "clamp_ col");
  Tensor e = T_({0, 1});
  e.exp_();
  expect_close(vals(e), {1, std::exp(1.0f)}, 1e-7, 0, "exp_");
  Tensor xi = T_({1, 2}, int32);
  xi.add_(3);
  EXPECT_EQ(xi.to_vector<int32_t>(), (std::vector<int32_t>{4, 5}));
  EXPECT_THROW(xi.div_(2), smelt::Error);  // float result into an int tensor
  EXPECT_THROW(xi.add_(1.5), smelt::Error);
  EXPECT_EQ(xi.to_vector<int32_t>(), (std::vector<int32_t>{4, 5}));  // untouched
  Tensor h = T_({1, 2}, float16);
  h.mul_(0.5);
  expect_close(vals(h), {0.5, 1}, 0, 0, "f16 mul_");
}

// -------------------------------------------------------------------- errors --
TEST(Pointwise, Errors) {
  Tensor b = T_({1, 0}, kBool), f = T_({1, 2}), i = T_({1, 2}, int32);
  expect_error_mentions([&] { neg(b); }, "neg");
  expect_error_mentions([&] { -b; }, "neg");
  expect_error_mentions([&] { abs(b); }, "abs");
  expect_error_mentions([&] { relu(b); }, "relu");
  expect_error_mentions([&] { floor(b); }, "floor");
  expect_error_mentions([&] { silu(i); }, "silu");
  expect_error_mentions([&] { sub(b, b); }, "sub");
  expect_error_mentions([&] { sub(b, f); }, "sub");
  expect_error_mentions([&] { b - true; }, "sub");
  expect_error_mentions([&] { floor_divide(b, b); }, "floor_divide");
  expect_error_mentions([&] { remainder(b, b); }, "remainder");
  expect_error_mentions([&] { fmod(b, b); }, "fmod");
  expect_error_mentions([&] { pow(b, b); }, "pow");
  expect_error_mentions([&] { bitwise_and(f, f); }, "bitwise_and");
  expect_error_mentions([&] { bitwise_or(i, f); }, "bitwise_or");
  expect_error_mentions([&] { bitwise_xor(T_({1}, float16), T_({1}, bfloat16)); }, "bitwise_xor");
  expect_error_mentions([&] { bitwise_and(i, detail::wrap_scalar(2.5)); }, "bitwise_and");
  expect_error_mentions([&] { bitwise_not(f); }, "bitwise_not");
  expect_error_mentions([&] { add(i, i, 1.5); }, "add");
  expect_error_mentions([&] { add(f, f, true); }, "add");
  expect_error_mentions([&] { div(f, f, std::string("round")); }, "div");
  expect_error_mentions([&] { mul(f, Tensor()); }, "mul");
  expect_error_mentions([&] { exp(Tensor()); }, "exp");
}

// ------------------------------------------------------------ compiler contract --
TEST(Pointwise, PointwiseCallMapping) {
  using detail::Attrs;
  using detail::pointwise_call;
  EXPECT_EQ(pointwise_call("add", Attrs{{"alpha", Scalar(1)}}).functor, "add");
  auto pc = pointwise_call("add", Attrs{{"alpha", Scalar(2.5)}});
  EXPECT_EQ(pc.functor, "add_alpha");
  ASSERT_EQ(pc.extra.size(), 1u);
  EXPECT_EQ(pc.extra[0].to_double(), 2.5);
  EXPECT_EQ(pointwise_call("sub", Attrs{{"alpha", Scalar(2)}}).functor, "sub_alpha");
  EXPECT_EQ(pointwise_call("div", Attrs{}).functor, "div");
  EXPECT_EQ(pointwise_call("div", Attrs{{"rounding_mode", std::string("floor")}}).functor,
            "div_floor");
  EXPECT_EQ(pointwise_call("div", Attrs{{"rounding_mode", std::string("trunc")}}).functor,
            "div_trunc");
  EXPECT_EQ(pointwise_call("gelu", Attrs{{"approximate", std::string("tanh")}}).functor,
            "gelu_tanh");
  EXPECT_EQ(pointwise_call("gelu", Attrs{{"approximate", std::string("none")}}).functor, "gelu");
  auto nn = pointwise_call("nan_to_num", Attrs{{"nan", 1.0}, {"posinf", 2.0}, {"neginf", -3.0}});
  EXPECT_EQ(nn.functor, "nan_to_num");
  ASSERT_EQ(nn.extra.size(), 3u);
  EXPECT_EQ(nn.extra[2].to_double(), -3.0);
  EXPECT_EQ(pointwise_call("exp", Attrs{}).functor, "exp");
  EXPECT_EQ(pointwise_call("clamp_min", Attrs{}).functor, "clamp_min");
  EXPECT_EQ(pointwise_call("eq", Attrs{}).functor, "eq");
  // compute / output dtypes
  Tensor i = T_({1}, int32), h = T_({1}, float16);
  EXPECT_EQ(detail::compute_dtype("div", {i, i}), float32);
  EXPECT_EQ(detail::compute_dtype("add", {i, h}), float16);
  EXPECT_EQ(detail::compute_dtype("logical_and", {i, h}), kBool);
  EXPECT_EQ(detail::compute_dtype("where", {T_({1}, kBool), i, i}), int32);
  EXPECT_EQ(detail::output_dtype("lt", float16), kBool);
  EXPECT_EQ(detail::output_dtype("exp", float16), float16);
  Tensor w = detail::wrap_scalar(2.5);
  EXPECT_TRUE(w.is_wrapped_number());
  EXPECT_EQ(w.dtype(), float64);
  EXPECT_EQ(w.dim(), 0);
  EXPECT_EQ(detail::wrap_scalar(3).dtype(), int64);
  EXPECT_EQ(detail::wrap_scalar(true).dtype(), kBool);
}

// scalar::clamp (eager, JIT and CUDA kernels) is minimum(maximum(x, lo), hi)
// bit for bit: which NaN wins (x's, then lo's, then hi's payload), signed
// zeros, infinities, lo > hi; and through the eager kernel with tensor bounds.
TEST(Pointwise, ClampIsMinimumOfMaximumBitForBit) {
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
  };
  auto nan_with = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  };
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> special = {0.f,
                                      -0.f,
                                      1.f,
                                      -1.f,
                                      0.5f,
                                      inf,
                                      -inf,
                                      1e-40f,
                                      3e38f,
                                      nan_with(0x7fc00000u),
                                      nan_with(0x7fc12345u),
                                      nan_with(0xffc00001u)};
  std::vector<float> xs, los, his, want;
  for (float x : special)
    for (float lo : special)
      for (float hi : special) {
        const float w = scalar::minimum<float>(scalar::maximum<float>(x, lo), hi);
        EXPECT_EQ(bits(scalar::clamp<float>(x, lo, hi)), bits(w)) << x << " " << lo << " " << hi;
        const double cd = scalar::clamp<double>(x, lo, hi),
                     wd = scalar::minimum<double>(scalar::maximum<double>(x, lo), hi);
        EXPECT_EQ(std::memcmp(&cd, &wd, sizeof cd), 0) << x << " " << lo << " " << hi;
        xs.push_back(x);
        los.push_back(lo);
        his.push_back(hi);
        want.push_back(w);
      }
  for (int x = -3; x <= 3; ++x)
    for (int lo = -3; lo <= 3; ++lo)
      for (int hi = -3; hi <= 3; ++hi)
        EXPECT_EQ(scalar::clamp<int64_t>(x, lo, hi),
                  scalar::minimum<int64_t>(scalar::maximum<int64_t>(x, lo), hi));
  // The eager kernel over the same triples (vectorized loops and their tails).
  const int64_t n = static_cast<int64_t>(xs.size());
  auto t = [n](const std::vector<float>& v) {
    return from_blob(const_cast<float*>(v.data()), {n}, DType::Float32).clone();
  };
  const Tensor got = clamp(t(xs), std::optional<Tensor>(t(los)), std::optional<Tensor>(t(his)));
  const float* g = got.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(bits(g[i]), bits(want[static_cast<size_t>(i)])) << "element " << i;
}
