// Compiled equals eager, bit for bit, on values where a code generator is
// easily wrong: literals of special values (±0, ±inf, NaN, subnormals, the
// extremes of each dtype) in both orders, and float16/bfloat16 results that
// eager rounds before the next op reads them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "compiler/codegen/cuda_dialect.h"
#include "compiler/compile_test_util.h"

using namespace smelt;
using smelt_test::bitwise_same;
using smelt_test::make;

namespace {

class ExactValues : public smelt_test::CompilerTest {};

const double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_F(ExactValues, SpecialLiteralsInEveryPosition) {
  const std::vector<double> specials = {-0.0,   0.0,     kInf,     -kInf,   std::nan(""),
                                        5e-324, 1.4e-45, -1.4e-45, 65504.0, 3.14,
                                        1e10,   -3.4e38, 1e-310};
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    Tensor x = make({-0.0, 0.0, 1.0, -1.0, kInf, -kInf, 2.5, 1e-40}, {8}).to(dt);
    for (double c : specials) {
      auto f = [c](const Tensor& x) { return std::make_tuple(x + c, x - c, c - x, x * c); };
      auto compiled = compile(f);
      auto [a, b, d, e] = compiled(x);
      auto [ea, eb, ed, ee] = f(x);
      SCOPED_TRACE(std::string(dtype_name(dt)) + " c=" + std::to_string(c));
      EXPECT_TRUE(bitwise_same(a, ea));
      EXPECT_TRUE(bitwise_same(b, eb));
      EXPECT_TRUE(bitwise_same(d, ed));
      EXPECT_TRUE(bitwise_same(e, ee));
    }
  }
}

TEST_F(ExactValues, IntegerExtremesPrintExactly) {
  Tensor x = make({0, 1, -1, 7}, {4}).to(DType::Int64);
  for (int64_t c : {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                    int64_t{-1}, int64_t{4294967296}}) {
    auto f = [c](const Tensor& x) { return x + c; };
    auto compiled = compile(f);
    EXPECT_EQ(compiled(x).to_vector<int64_t>(), f(x).to_vector<int64_t>()) << c;
  }
}

TEST_F(ExactValues, LiteralTextIsExactInBothDialects) {
  compiler::CppDialect cpp;
  compiler::CudaDialect cuda;
  for (const compiler::Dialect* d : {static_cast<const compiler::Dialect*>(&cpp),
                                     static_cast<const compiler::Dialect*>(&cuda)}) {
    EXPECT_EQ(d->literal(Scalar(-0.0), DType::Float32), "static_cast<float>(-0x0p+0)");
    EXPECT_EQ(d->literal(Scalar(5e-324), DType::Float64),
              "static_cast<double>(0x0.0000000000001p-1022)");
    EXPECT_EQ(d->literal(Scalar(std::numeric_limits<int64_t>::min()), DType::Int64),
              "static_cast<int64_t>(-INT64_C(9223372036854775807) - 1)");
    EXPECT_EQ(d->literal(Scalar(-kInf), DType::BFloat16),
              "-std::numeric_limits<float>::infinity()");
  }
}

TEST_F(ExactValues, HalfResultsAreRoundedInsideKernels) {
  // gelu(x, "tanh") of a tiny bfloat16 value rounds to 0 eagerly, so x / gelu
  // is inf or NaN; a kernel that kept gelu's float32 result would give finite
  // values.
  Tensor x = make({9.2e-41, -9.2e-41, 1e-38, 0.5, -2.0, 1e-30}, {6}).to(DType::BFloat16);
  auto f = [](const Tensor& x) { return x / gelu(x, "tanh"); };
  auto compiled = compile(f);
  EXPECT_TRUE(bitwise_same(compiled(x), f(x)));
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor y = randn({1000}).to(dt);
    auto g = [](const Tensor& y) { return exp(y * 3) * y - sigmoid(y) / (y + 0.1); };
    auto cg = compile(g);
    EXPECT_TRUE(bitwise_same(cg(y), g(y))) << dtype_name(dt);
  }
  // Turned off, the kernel keeps float32 intermediates (and says so in its config).
  CompileOptions o;
  o.round_intermediates = false;
  auto loose = compile(f, o);
  Tensor out = loose(x);
  EXPECT_NE(loose.generated_code().find("no_rounding"), std::string::npos);
  EXPECT_FALSE(bitwise_same(out, f(x)));
}
