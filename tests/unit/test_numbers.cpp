// C++ numbers in tensor ops (ops/numbers.h): PyTorch converts a Python number
// to the op's dtype first (bfloat16 [3.14] == 3.14 is true, float16 + 1e10 is
// inf), raises where its checked conversion overflows (int8 and 200 in
// masked_fill, where, clamp_min, pow), and lets mul/div read it unrounded.
// Values from shared/golden/golden_scalars.json (PyTorch 2.11, CPU).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/numbers.h"
#include "ops/pointwise.h"
#include "smelt/ops.h"
#include "test_util.h"

using namespace smelt;
using smelt_test::expect_error_mentions;
using smelt_test::kInf;
using smelt_test::kNaN;
using smelt_test::make;
using smelt_test::vals;

namespace {
/// A C++ number as ops receive it (a wrapped-number tensor).
Tensor num(const Scalar& s) { return detail::wrap_scalar(s); }
}  // namespace

TEST(Numbers, OverflowFollowsPyTorchsCheckedConversion) {
  using detail::number_overflows;
  EXPECT_TRUE(number_overflows(Scalar(200), DType::Int8));
  EXPECT_TRUE(number_overflows(Scalar(-129), DType::Int8));
  EXPECT_FALSE(number_overflows(Scalar(-128), DType::Int8));
  EXPECT_FALSE(number_overflows(Scalar(3.14), DType::Int8));   // truncates to 3
  EXPECT_TRUE(number_overflows(Scalar(127.5), DType::Int8));   // above the max, as c10
  EXPECT_FALSE(number_overflows(Scalar(-129), DType::UInt8));  // wraps to 127
  EXPECT_TRUE(number_overflows(Scalar(-256), DType::UInt8));
  EXPECT_TRUE(number_overflows(Scalar(-2.0), DType::UInt8));  // a float may not wrap
  EXPECT_TRUE(number_overflows(Scalar(kNaN), DType::Int64));
  EXPECT_TRUE(number_overflows(Scalar(kInf), DType::Int32));
  EXPECT_TRUE(number_overflows(Scalar(1e10), DType::Int32));
  EXPECT_FALSE(number_overflows(Scalar(1e10), DType::Int64));
  EXPECT_TRUE(number_overflows(Scalar(70000.0), DType::Float16));
  EXPECT_TRUE(number_overflows(Scalar(100000), DType::Float16));
  EXPECT_FALSE(number_overflows(Scalar(kInf), DType::Float16));  // inf is a float16
  EXPECT_FALSE(number_overflows(Scalar(kNaN), DType::Float16));
  EXPECT_FALSE(number_overflows(Scalar(1e10), DType::BFloat16));
  EXPECT_FALSE(number_overflows(Scalar(1e10), DType::Bool));
  EXPECT_FALSE(number_overflows(Scalar(true), DType::Int8));
}

TEST(Numbers, ConversionRoundsToTheDtype) {
  using detail::number_to_dtype;
  EXPECT_EQ(number_to_dtype(Scalar(3.14), DType::BFloat16).to_double(), 3.140625);
  EXPECT_EQ(number_to_dtype(Scalar(3.14), DType::Float16).to_double(), 3.140625);
  EXPECT_EQ(number_to_dtype(Scalar(1e10), DType::Float16).to_double(), kInf);
  EXPECT_EQ(number_to_dtype(Scalar(100000), DType::Float16).to_double(), kInf);
  EXPECT_EQ(number_to_dtype(Scalar(3.14), DType::Float32).to_double(), static_cast<float>(3.14));
  EXPECT_EQ(number_to_dtype(Scalar(-2), DType::UInt8).to_int(), 254);
  EXPECT_EQ(number_to_dtype(Scalar(200), DType::Int8).to_int(), -56);
  EXPECT_EQ(number_to_dtype(Scalar(-3.7), DType::Int16).to_int(), -3);
  EXPECT_TRUE(number_to_dtype(Scalar(0.5), DType::Bool).is_bool());
}

TEST(Numbers, ReducedFloatOpsSeeTheRoundedNumber) {
  // bfloat16(3.14) = 3.140625, so each of these holds the number as bfloat16 stores it.
  Tensor b = make({3.14, 3.140625, 3.125}, {3}).to(DType::BFloat16);
  EXPECT_EQ(vals(eq(b, num(3.14))), (std::vector<double>{1, 1, 0}));
  EXPECT_EQ(vals(b - 3.14), (std::vector<double>{0, 0, -0.015625}));
  // float16: 1e10 becomes inf first, so -inf + 1e10 is NaN.
  Tensor h = make({1.0, -kInf, 65504.0}, {3}).to(DType::Float16);
  auto s = vals(h + 1e10);
  EXPECT_EQ(s[0], kInf);
  EXPECT_TRUE(std::isnan(s[1]));
  EXPECT_EQ(s[2], kInf);
  EXPECT_EQ(vals(gt(h, num(100000)))[2], 0.0);  // 100000 is inf in float16
  // where converts without a check for floating dtypes.
  Tensor m = make({1, 0, 1}, {3}).to(DType::Bool);
  EXPECT_EQ(vals(where(m, h, Scalar(1e10)))[1], kInf);
}

TEST(Numbers, MulAndDivReadTheNumberUnrounded) {
  // PyTorch's mul kernel multiplies bfloat16 by float(3.14), not bfloat16(3.14).
  Tensor b = make({7.78125}, {1}).to(DType::BFloat16);
  EXPECT_EQ(vals(b * 3.14)[0], 24.375);
  EXPECT_EQ(vals(b * 3.140625)[0], 24.5);
  EXPECT_EQ(vals(mul(num(3.14), b))[0], 24.375);
}

TEST(Numbers, CheckedConversionsRaise) {
  Tensor i8 = make({1, -2, 3}, {3}).to(DType::Int8);
  Tensor mask = make({0, 1, 0}, {3}).to(DType::Bool);
  expect_error_mentions([&] { masked_fill(i8, mask, Scalar(200)); },
                        "cannot be converted to type int8 without overflow");
  expect_error_mentions([&] { where(mask, i8, Scalar(200)); }, "without overflow");
  expect_error_mentions([&] { clamp(i8, Scalar(200), std::nullopt); },
                        "min value 200 is outside the representable range of int8");
  expect_error_mentions([&] { pow(i8, Scalar(255)); }, "without overflow");
  expect_error_mentions([&] { masked_fill(i8, mask, Scalar(kNaN)); }, "without overflow");
  Tensor h = make({1, 2, 3}, {3}).to(DType::Float16);
  expect_error_mentions([&] { clamp(h, Scalar(70000.0), std::nullopt); }, "float16");
  expect_error_mentions([&] { masked_fill(h, mask, Scalar(1e10)); }, "without overflow");
  // In range, or wrapping as PyTorch allows: no error.
  EXPECT_EQ(vals(masked_fill(make({1, 2, 3}, {3}).to(DType::UInt8), mask, Scalar(-129)))[1], 127);
  EXPECT_EQ(vals(masked_fill(i8, mask, Scalar(3.7)))[1], 3);
  EXPECT_EQ(vals(masked_fill(make({1, 0}, {2}).to(DType::Bool), make({1, 1}, {2}).to(DType::Bool),
                             Scalar(1e10))),
            (std::vector<double>{1, 1}));
  // The unchecked ops wrap: int8 + 200 adds -56.
  EXPECT_EQ(vals(i8 + 200)[0], -55);
  // pow's base may be any number (only the exponent is checked).
  EXPECT_EQ(vals(pow(num(100000), make({1}, {1}).to(DType::Int8)))[0], 100000 % 256 - 256);
}

// An integer bound outside an integer tensor's range, as PyTorch 2.15: on the
// side that changes no element it is dropped; on the other it is refused.
TEST(Numbers, ClampBoundsPastAnIntegerRange) {
  Tensor i8 = make({-100, 0, 100, 127}, {4}).to(DType::Int8);
  const std::vector<double> same = {-100, 0, 100, 127};
  EXPECT_EQ(vals(clamp(i8, std::nullopt, Scalar(200))), same);
  EXPECT_EQ(vals(clamp(i8, Scalar(-200), std::nullopt)), same);
  EXPECT_EQ(vals(clamp(i8, Scalar(-200), Scalar(200))), same);
  EXPECT_EQ(vals(clamp(i8, Scalar(-200), Scalar(50))), (std::vector<double>{-100, 0, 50, 50}));
  EXPECT_EQ(clamp(i8, std::nullopt, Scalar(200)).dtype(), DType::Int8);
  expect_error_mentions([&] { clamp(i8, std::nullopt, Scalar(-200)); },
                        "max value -200 is outside the representable range of int8");
  // uint8: -1 is below the range here (no wrap to 255, as a checked conversion would).
  Tensor u8 = make({0, 100, 255}, {3}).to(DType::UInt8);
  EXPECT_EQ(vals(clamp(u8, Scalar(-1), std::nullopt)), (std::vector<double>{0, 100, 255}));
  EXPECT_EQ(vals(clamp(u8, Scalar(-5), Scalar(50))), (std::vector<double>{0, 50, 50}));
  expect_error_mentions([&] { clamp(u8, std::nullopt, Scalar(-1)); }, "max value -1");
  // A float bound promotes instead (int8 with 1.5 is float32), and float16 keeps its check.
  EXPECT_EQ(vals(clamp(i8, Scalar(1.5), std::nullopt)), (std::vector<double>{1.5, 1.5, 100, 127}));
  expect_error_mentions([&] { clamp(i8.to(DType::Float16), Scalar(1e5), std::nullopt); },
                        "without overflow");
  // The input is left as it was.
  EXPECT_EQ(vals(i8), same);
}

TEST(Numbers, FillsCheckTheValue) {
  expect_error_mentions([] { full({2}, Scalar(200), DType::Int8); }, "full: value 200");
  expect_error_mentions([] { scalar_tensor(Scalar(kNaN), DType::Int32); }, "without overflow");
  Tensor x = zeros({3}, DType::Float16);
  expect_error_mentions([&] { x.fill_(Scalar(1e10)); }, "fill_");
  EXPECT_EQ(vals(x.fill_(Scalar(kInf)))[0], kInf);
  EXPECT_EQ(vals(full({1}, Scalar(3.14), DType::BFloat16))[0], 3.140625);
  EXPECT_EQ(vals(full({1}, Scalar(-1), DType::UInt8))[0], 255);  // wraps, as PyTorch allows
}

TEST(Numbers, BoolToTheBoolPowers) {
  Tensor b = make({1, 0, 1, 0}, {4}).to(DType::Bool);
  Tensor t = pow(b, Scalar(true));
  EXPECT_EQ(t.dtype(), DType::Bool);
  EXPECT_EQ(vals(t), vals(b));
  EXPECT_EQ(vals(pow(b, Scalar(false))), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_THROW(pow(num(true), b), Error);
}
