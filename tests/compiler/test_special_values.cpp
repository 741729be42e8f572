// Every pointwise op of the op table, compiled against eager on special values
// (±0, ±inf, NaN, subnormals, the largest finite values; the extremes of every
// integer dtype) in grids of 256 elements, so that generated loops vectorize.
// Bit for bit (NaN equals NaN, the sign of zero counts), every op: the functors
// calling exp, exp2, expm1, log, log2, log1p, sin, cos, tan, tanh or erf too,
// whose vectorized calls in generated code and scalar calls in eager kernels
// give the same bits (kernels/vector_math.h).
// Also: the float -> integer conversion of every dtype pair against PyTorch's
// (x86-64 CPU) results, and pow with a constant exponent (compiled pow(x, 0.5)
// was sqrt: -0.0 at -0.0 and NaN at -inf).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "compiler/compile_test_util.h"
#include "ops/op_call.h"
#include "ops/op_table.h"

using namespace smelt;
using smelt_test::kInf;
using smelt_test::kNaN;

namespace {

class SpecialValues : public smelt_test::CompilerTest {};

constexpr int64_t kN = 256;  // elements of every operand: vectorized loops, no tail only

const std::vector<DType> kAllDtypes = {
    DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::UInt8,
    DType::Int8,    DType::Int16,   DType::Int32,   DType::Int64,    DType::Bool};

/// 16 special values of floating dtype `dt`: zeros, infinities, NaN, the smallest
/// subnormal, the smallest normal, the largest finite value, and ordinary ones.
std::vector<double> float_specials(DType dt) {
  double tiny = 4.9406564584124654e-324, normal = DBL_MIN, big = DBL_MAX;
  if (dt == DType::Float32) tiny = 1.401298464324817e-45, normal = FLT_MIN, big = FLT_MAX;
  if (dt == DType::Float16) tiny = 5.9604644775390625e-08, normal = 6.103515625e-05, big = 65504;
  if (dt == DType::BFloat16)
    tiny = 9.183549615799121e-41, normal = 1.1754943508222875e-38, big = 3.3895313892515355e38;
  return {0.0, -0.0, kInf, -kInf, kNaN,     tiny,  -tiny, normal,
          1.0, -1.0, 0.5,  -2.5,  3.140625, 100.0, big,   -big};
}

/// 16 special values of integer dtype `dt`: its extremes and their neighbours,
/// 0, ±1, ±2 and others.
template <class T>
std::vector<T> int_specials() {
  using L = std::numeric_limits<T>;
  return {T(0),
          T(1),
          T(-1),
          T(2),
          T(-2),
          T(7),
          T(-7),
          T(100),
          T(3),
          L::lowest(),
          L::max(),
          T(L::lowest() + 1),
          T(L::max() - 1),
          T(64),
          T(-3),
          T(-100)};
}

/// A 256-element tensor of `dt` whose element i is values[pick(i)].
template <class T>
Tensor grid(const std::vector<T>& values, int64_t (*pick)(int64_t, int64_t)) {
  std::vector<T> v(kN);
  const auto k = static_cast<int64_t>(values.size());
  for (int64_t i = 0; i < kN; ++i) v[i] = values[pick(i, k)];
  return smelt_test::make_exact<T>(v, {kN});
}

int64_t pick_x(int64_t i, int64_t k) { return (i / k) % k; }
int64_t pick_y(int64_t i, int64_t k) { return i % k; }
int64_t pick_z(int64_t i, int64_t k) { return (i * 5 + 3) % k; }

/// Operands x, y, z of dtype `dt`: x and y hold every pair of special values.
std::vector<Tensor> operands(DType dt) {
  std::vector<Tensor> out;
  for (auto pick : {pick_x, pick_y, pick_z}) {
    switch (dt) {
      case DType::Bool:
        out.push_back(grid<bool>({false, true}, pick));
        break;
      case DType::UInt8:
        out.push_back(grid(int_specials<uint8_t>(), pick));
        break;
      case DType::Int8:
        out.push_back(grid(int_specials<int8_t>(), pick));
        break;
      case DType::Int16:
        out.push_back(grid(int_specials<int16_t>(), pick));
        break;
      case DType::Int32:
        out.push_back(grid(int_specials<int32_t>(), pick));
        break;
      case DType::Int64:
        out.push_back(grid(int_specials<int64_t>(), pick));
        break;
      default:
        out.push_back(grid(float_specials(dt), pick).to(dt));
    }
  }
  return out;
}

/// One call of a pointwise op: op-table name, attributes, and its operands as
/// indices into {x, y, z, cond} or wrapped numbers.
struct Case {
  std::string label;
  std::string op;
  detail::Attrs attrs;
  std::vector<int> args;         // 0..3: x, y, z, cond; -1: the number
  std::optional<double> number;  // the C++ number operand, if any
};

/// Every pointwise op of the op table with the operands its arity takes, every
/// variant (gelu approximate, div rounding modes), add/sub with alpha, to_dtype
/// to every dtype; binary ops also with a constant number on either side.
std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const detail::OpDef& d : detail::op_table()) {
    if (d.kind != detail::OpKind::Pointwise) continue;
    const std::string op(d.name);
    std::vector<int> args = {0};
    if (d.arity == 2) args = {0, 1};
    if (d.arity == 3) args = op == "where" ? std::vector<int>{3, 0, 1} : std::vector<int>{0, 1, 2};
    if (op == "to_dtype") {
      for (DType t : kAllDtypes)
        cases.push_back({"to_" + std::string(dtype_name(t)), op, {{"dtype", t}}, args, {}});
      continue;
    }
    cases.push_back({op, op, {}, args, {}});
    if (op == "add" || op == "sub")
      cases.push_back({op + "_alpha2", op, {{"alpha", int64_t{2}}}, args, {}});
    for (const detail::OpVariant& v : d.variants)
      cases.push_back({op + "_" + std::string(v.value),
                       op,
                       {{std::string(v.attr), std::string(v.value)}},
                       args,
                       {}});
    if (d.arity == 2) {
      // Literal operands are where a C++ compiler rewrites with constants.
      for (double c : {0.5, 2.0, -1.0, -0.5, 3.0}) {
        cases.push_back({op + "(x," + std::to_string(c) + ")", op, {}, {0, -1}, c});
        cases.push_back({op + "(" + std::to_string(c) + ",x)", op, {}, {-1, 0}, c});
      }
    }
  }
  return cases;
}

std::vector<Tensor> run_case(const Case& c, const std::vector<Tensor>& xyzc) {
  std::vector<Tensor> in;
  for (int a : c.args) in.push_back(a < 0 ? detail::wrapped_scalar(Scalar(*c.number)) : xyzc[a]);
  return detail::call_op(c.op, in, c.attrs);
}

/// Order-preserving integer of a finite float value of `dt` (ulp distances).
int64_t ordered_bits(double v, DType dt) {
  int64_t b = 0, sign = 0;
  if (dt == DType::Float64) {
    uint64_t u;
    std::memcpy(&u, &v, sizeof u);
    sign = static_cast<int64_t>(u >> 63), b = static_cast<int64_t>(u & ~(uint64_t{1} << 63));
  } else {
    float f = static_cast<float>(v);
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if (dt == DType::Float16) u = static_cast<uint32_t>(Half(f).x) << 16;
    if (dt == DType::BFloat16) u = static_cast<uint32_t>(BFloat16(f).x) << 16;
    if (dt == DType::Float16 || dt == DType::BFloat16) u >>= 16;
    const uint32_t top = (dt == DType::Float32) ? 31 : 15;
    sign = u >> top, b = u & ((1u << top) - 1);
  }
  return sign ? -b : b;
}

/// Machine epsilon of floating dtype `dt`.
double epsilon(DType dt) {
  switch (dt) {
    case DType::Float64:
      return DBL_EPSILON;
    case DType::Float16:
      return 0x1p-10;
    case DType::BFloat16:
      return 0x1p-7;
    default:
      return FLT_EPSILON;
  }
}

/// Compiled against eager: bit for bit, or for `ulps` > 0, where both are
/// finite and nonzero, within `ulps` ulps or ulps * epsilon * |x[i]| of each
/// other (NaN, infinities and signed zeros still exactly).
::testing::AssertionResult matches(const Tensor& got, const Tensor& want, int64_t ulps,
                                   const Tensor& x = Tensor()) {
  if (got.sizes() != want.sizes() || got.dtype() != want.dtype())
    return ::testing::AssertionFailure() << "shape or dtype differs: " << dtype_name(got.dtype())
                                         << " vs " << dtype_name(want.dtype());
  const DType dt = want.dtype();
  if (!is_floating(dt)) {
    auto a = got.to_vector<int64_t>(), b = want.to_vector<int64_t>();
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i])
        return ::testing::AssertionFailure()
               << "element " << i << ": compiled " << a[i] << " eager " << b[i];
    return ::testing::AssertionSuccess();
  }
  auto a = smelt_test::vals(got), b = smelt_test::vals(want);
  const std::vector<double> in = x.defined() ? smelt_test::vals(x) : std::vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    const bool exact = a[i] == b[i] && std::signbit(a[i]) == std::signbit(b[i]);
    if (exact) continue;
    const bool special = std::isnan(a[i]) || std::isnan(b[i]) || std::isinf(a[i]) ||
                         std::isinf(b[i]) || a[i] == 0 || b[i] == 0;
    const double scale = i < in.size() ? std::fabs(in[i]) : 0.0;
    if (ulps > 0 && !special &&
        (std::llabs(ordered_bits(a[i], dt) - ordered_bits(b[i], dt)) <= ulps ||
         std::fabs(a[i] - b[i]) <= static_cast<double>(ulps) * epsilon(dt) * scale))
      continue;
    return ::testing::AssertionFailure() << "element " << i << ": compiled " << a[i] << " eager "
                                         << b[i] << (ulps ? " (beyond the ulp bound)" : "");
  }
  return ::testing::AssertionSuccess();
}

}  // namespace

TEST_F(SpecialValues, EveryPointwiseOpCompiledEqualsEager) {
  const std::vector<Case> cases = all_cases();
  CompileOptions opts;
  opts.fuse = false;  // one kernel (one vectorizable loop) per op
  opts.fullgraph = true;
  for (DType dt : kAllDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    std::vector<Tensor> xyzc = operands(dt);
    xyzc.push_back(grid<bool>({false, true, true}, pick_z));  // where's condition
    // Eager first; a case eager refuses (bitwise ops on floats, integer division
    // by zero, ...) is left out of the compiled function.
    std::vector<const Case*> ok;
    std::vector<Tensor> want;
    for (const Case& c : cases) {
      try {
        std::vector<Tensor> out = run_case(c, xyzc);
        ok.push_back(&c);
        want.push_back(out.at(0));
      } catch (const Error&) {
      }
    }
    ASSERT_GT(ok.size(), 40u);
    auto f = [&ok](const Tensor& x, const Tensor& y, const Tensor& z, const Tensor& cond) {
      std::vector<Tensor> outs;
      for (const Case* c : ok) outs.push_back(run_case(*c, {x, y, z, cond}).at(0));
      return outs;
    };
    auto compiled = compile(f, opts);
    std::vector<Tensor> got = compiled(xyzc[0], xyzc[1], xyzc[2], xyzc[3]);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(compiled.stats().eager_calls, 0);
    for (size_t i = 0; i < ok.size(); ++i)
      EXPECT_TRUE(matches(got[i], want[i], 0, xyzc[0])) << ok[i]->label;
  }
}

TEST_F(SpecialValues, PowWithAConstantExponentIsPowAtEveryLength) {
  // GCC turned the vectorized pow(x, 0.5) into sqrt(x) (-0.0 at -0.0, NaN at
  // -inf); one element (no vector loop) was right.
  const std::vector<double> exponents = {0.5, 2.0, -1.0, -0.5, 0.0, 1.0, 3.0};
  for (int64_t n : {1, 64, 257}) {
    std::vector<double> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = i % 2 ? -0.0 : -kInf;
    for (DType dt : {DType::Float32, DType::Float64}) {
      Tensor x = smelt_test::make(v, {n}).to(dt);
      auto f = [&exponents](const Tensor& x) {
        std::vector<Tensor> out;
        for (double e : exponents) out.push_back(pow(x, e));
        return out;
      };
      auto compiled = compile(f);
      std::vector<Tensor> got = compiled(x), want = f(x);
      for (size_t k = 0; k < exponents.size(); ++k)
        EXPECT_TRUE(matches(got[k], want[k], 0))
            << "n=" << n << " e=" << exponents[k] << " " << dtype_name(dt);
      // IEEE pow: pow(-inf, 0.5) = +inf, pow(-0.0, 0.5) = +0.0.
      EXPECT_EQ(got[0].to_vector<double>()[0], kInf);
      if (n > 1) {
        EXPECT_FALSE(std::signbit(got[0].to_vector<double>()[1]));
      }
    }
  }
}

namespace {

/// PyTorch's CPU result (x86-64) of converting `v` to integer dtype `t`: C++
/// leaves out-of-range conversions undefined and PyTorch documents them as
/// such; its CPU kernels give cvttss2si's results (pytorch/pytorch#154311,
/// #154724, #154726: NaN and ±inf to int32 are INT32_MIN, to int64 INT64_MIN),
/// int8/int16 the low bits of the int32 result, uint8 the low byte of the int64
/// result (c10::convert goes through int64 for uint8).
int64_t pytorch_cpu_cast(double v, DType t) {
  const bool in64 = v >= -9223372036854775808.0 && v < 9223372036854775808.0;
  const bool in32 = v > -2147483649.0 && v < 2147483648.0;
  const int64_t i64 = in64 ? static_cast<int64_t>(v) : std::numeric_limits<int64_t>::min();
  const int32_t i32 = in32 ? static_cast<int32_t>(v) : std::numeric_limits<int32_t>::min();
  switch (t) {
    case DType::Int64:
      return i64;
    case DType::Int32:
      return i32;
    case DType::Int16:
      return static_cast<int16_t>(static_cast<uint16_t>(static_cast<uint32_t>(i32)));
    case DType::Int8:
      return static_cast<int8_t>(static_cast<uint8_t>(static_cast<uint32_t>(i32)));
    case DType::UInt8:
      return static_cast<uint8_t>(static_cast<uint64_t>(i64));
    default:
      return v != 0;  // bool (NaN is true)
  }
}

}  // namespace

TEST_F(SpecialValues, FloatToIntegerMatchesPyTorchInEveryDtypePair) {
  const std::vector<double> values = {
      kNaN,          kInf,    -kInf,    3e9,    -3e9,    1e19,    -1e19, 2147483648.0,
      -2147483648.0, 70000.5, -70000.5, 300.75, -300.75, 255.5,   128.0, -129.0,
      -1.5,          -0.0,    0.0,      0.75,   65504.0, -65504.0};
  // The documented cases of the issue, spelled out.
  EXPECT_EQ(pytorch_cpu_cast(kNaN, DType::Int32), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(pytorch_cpu_cast(3e9, DType::Int32), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(pytorch_cpu_cast(3e9, DType::Int16), 0);
  EXPECT_EQ(pytorch_cpu_cast(3e9, DType::Int64), 3000000000);
  EXPECT_EQ(pytorch_cpu_cast(70000.5, DType::Int16), 4464);
  EXPECT_EQ(pytorch_cpu_cast(-1.5, DType::UInt8), 255);
  for (DType from : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    std::vector<double> v(kN);
    for (int64_t i = 0; i < kN; ++i) v[i] = values[i % values.size()];
    Tensor x = smelt_test::make(v, {kN}).to(from);
    const std::vector<double> stored = smelt_test::vals(x);  // as `from` holds them
    const std::vector<DType> targets = {DType::UInt8, DType::Int8,  DType::Int16,
                                        DType::Int32, DType::Int64, DType::Bool};
    auto f = [&targets](const Tensor& x) {
      std::vector<Tensor> out;
      for (DType to : targets) {
        out.push_back(x.to(to));
        out.push_back((x * 1.0).to(to));  // converted inside a fused kernel
      }
      return out;
    };
    auto compiled = compile(f);
    std::vector<Tensor> got = compiled(x);
    for (size_t t = 0; t < targets.size(); ++t) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(targets[t])));
      const auto w = x.to(targets[t]).to_vector<int64_t>();
      const auto g = got[2 * t].to_vector<int64_t>(), gf = got[2 * t + 1].to_vector<int64_t>();
      for (int64_t i = 0; i < kN; ++i) {
        const int64_t expect = pytorch_cpu_cast(stored[i], targets[t]);
        ASSERT_EQ(w[i], expect) << "eager, value " << stored[i];
        ASSERT_EQ(g[i], expect) << "compiled, value " << stored[i];
        ASSERT_EQ(gf[i], expect) << "compiled after a multiply, value " << stored[i];
      }
    }
  }
}

// A float truncated through an integer dtype and converted back is +0.0 at
// zero, as eager and PyTorch give: GCC folds (float)(int64_t)x into trunc(x),
// which kept -0.0 for -1 < x < 0 (fuzz seed 16003, case 390: atan2 of the
// result was -pi where eager gives 0).
TEST_F(SpecialValues, FloatThroughAnIntegerAndBackIsPositiveZero) {
  std::vector<double> v(kN);
  for (int64_t i = 0; i < kN; ++i) v[i] = (i % 4 == 0) ? -0.3 : (i % 4 == 1) ? -0.0 : -1.5 - i;
  for (DType from : {DType::Float32, DType::Float64, DType::BFloat16}) {
    for (DType through : {DType::Int64, DType::Int32, DType::Int16}) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " through " + std::string(dtype_name(through)));
      Tensor x = smelt_test::make(v, {kN}).to(from);
      auto f = [through, from](const Tensor& x) {
        Tensor back = x.to(through).to(from);
        return std::vector<Tensor>{back, atan2(back, back)};
      };
      auto compiled = compile(f);
      std::vector<Tensor> got = compiled(x), want = f(x);
      EXPECT_TRUE(matches(got[0], want[0], 0));
      EXPECT_TRUE(matches(got[1], want[1], 0));
      const std::vector<double> g = got[0].to_vector<double>();
      for (int64_t i = 0; i < kN; i += 4) {
        EXPECT_EQ(g[i], 0.0) << i;
        EXPECT_FALSE(std::signbit(g[i])) << "-0.3 gave -0.0 at " << i;
      }
    }
  }
}

TEST_F(SpecialValues, ComparingAValueWithItselfHonoursNaN) {
  // GCC 12 folded x >= x and x <= x to true after peeling the loop of a
  // reduction over a dim of size 1: compiled amin(ge(x, x), 0) was true at a
  // NaN, where eager (and PyTorch) give false (fuzz seed 4014, case 251). One
  // compiled function per comparison: the fold needs the kernel of that shape.
  using Cmp = Tensor (*)(const Tensor&, const Tensor&);
  const std::vector<std::pair<const char*, Cmp>> cmps = {
      {"eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); }},
      {"ne", [](const Tensor& a, const Tensor& b) { return ne(a, b); }},
      {"lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); }},
      {"le", [](const Tensor& a, const Tensor& b) { return le(a, b); }},
      {"gt", [](const Tensor& a, const Tensor& b) { return gt(a, b); }},
      {"ge", [](const Tensor& a, const Tensor& b) { return ge(a, b); }}};
  // PyTorch: a comparison with NaN is false, except ne.
  const std::vector<std::vector<bool>> expected = {
      {true, false, true, true}, {false, true, false, false},  {false, false, false, false},
      {true, false, true, true}, {false, false, false, false}, {true, false, true, true}};
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor x = smelt_test::make({1.0, kNaN, 2.0, 3.0}, {1, 2, 2}).to(dt);
    for (size_t k = 0; k < cmps.size(); ++k) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + cmps[k].first);
      Cmp cmp = cmps[k].second;
      auto f = [cmp](const Tensor& x) { return amin(cmp(x, x), {0}, true); };
      EXPECT_EQ(f(x).to_vector<bool>(), expected[k]);
      EXPECT_EQ(compile(f)(x).to_vector<bool>(), expected[k]);
    }
  }
}

// Compiled sin, cos, exp, sqrt and log give eager's bits away from the special
// values too: a sweep of float32 bit patterns (every exponent, both signs, NaN
// payloads) and a dense run across 2^31, where the FMA family's sin and cos
// hand vectors with a lane above it to SLEEF (kernels/vector_math_impl.h,
// SMELT_VM_TRIG), in vectors of mixed lanes, with a tail of 5.
TEST_F(SpecialValues, CompiledTranscendentalsGiveEagerBitsOverASweep) {
  std::vector<uint32_t> bits;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099) bits.push_back(static_cast<uint32_t>(u));
  for (uint32_t u = 0x4effff00u; u < 0x4f000100u; ++u) {
    bits.push_back(u);
    bits.push_back(u | 0x80000000u);
  }
  bits.resize(bits.size() / 16 * 16 + 5, 0x7f800000u);
  std::vector<float> v(bits.size());
  std::memcpy(v.data(), bits.data(), bits.size() * sizeof(float));
  const Tensor x = from_vector(v, {static_cast<int64_t>(v.size())});
  using Fn = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<const char*, Fn>> ops = {
      {"sin", [](const Tensor& t) { return sin(t); }},
      {"cos", [](const Tensor& t) { return cos(t); }},
      {"exp", [](const Tensor& t) { return exp(t); }},
      {"sqrt", [](const Tensor& t) { return sqrt(t); }},
      {"log", [](const Tensor& t) { return log(t); }}};
  for (const auto& [name, f] : ops)
    EXPECT_TRUE(smelt_test::bitwise_same(compile(f)(x), f(x))) << name;
}
