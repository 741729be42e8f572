// float32 erf, tanh and log of src/kernels/vector_math.h (in float with fused multiply-adds;
// vectorized by the compiler): within one ulp of the correctly rounded value (glibc's double
// erf / tanh / log rounded to float) over a sweep of float32 bit patterns, the special values as
// C's, and eager ops computing the same (exp, sqrt and log: their AVX-512 eager kernels); sin
// and cos within one ulp over the sweep (large arguments included), eager giving the same bits; pow
// (SLEEF's) within one ulp, C99's special cases, and eager pow (vectorized) giving the scalar
// function's bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/scalar_ops.h"
#include "kernels/vector_math.h"
#include "smelt/ops.h"

namespace {

int32_t float_bits(float f) {
  int32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

/// Every `step`th float32 bit pattern (4099: about a million values, every exponent).
std::vector<float> sweep(uint64_t step = 4099) {
  std::vector<float> v;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += step) {
    const uint32_t b = static_cast<uint32_t>(u);
    float f;
    std::memcpy(&f, &b, sizeof f);
    v.push_back(f);
  }
  return v;
}

template <class F, class Ref>
void expect_within_one_ulp(const char* name, F f, Ref ref, uint64_t step = 4099,
                           int64_t max_differ = 5000) {
  int64_t differ = 0;
  for (float x : sweep(step)) {
    const float got = f(x), want = static_cast<float>(ref(static_cast<double>(x)));
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(got)) << name << "(NaN)";
      continue;
    }
    if (got == want && std::signbit(got) == std::signbit(want)) continue;
    ++differ;
    ASSERT_LE(std::abs(static_cast<int64_t>(float_bits(got)) - float_bits(want)), 1)
        << name << "(" << x << ") = " << got << ", correctly rounded " << want;
  }
  // Nearly always the correctly rounded value itself.
  EXPECT_LT(differ, max_differ) << name;
}

}  // namespace

// Every 97th bit pattern (44 million values; the whole range was checked once
// offline, kernels/piecewise_math.h).
TEST(FloatMath, ErfWithinOneUlp) {
  expect_within_one_ulp(
      "erf", [](float x) { return smelt::vmath::erf(x); }, [](double x) { return std::erf(x); }, 97,
      1300000);
}

TEST(FloatMath, TanhWithinOneUlp) {
  expect_within_one_ulp(
      "tanh", [](float x) { return smelt::vmath::tanh(x); }, [](double x) { return std::tanh(x); },
      97, 1300000);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
typedef float V4 __attribute__((vector_size(16)));
typedef float V8 __attribute__((vector_size(32)));
typedef float V16 __attribute__((vector_size(64)));
extern "C" __attribute__((target("sse2"))) V4 tanh_b(V4) __asm__("_ZGVbN4v_smelt_vm_tanhf");
extern "C" __attribute__((target("avx"))) V8 tanh_c(V8) __asm__("_ZGVcN8v_smelt_vm_tanhf");
extern "C" __attribute__((target("avx2"))) V8 tanh_d(V8) __asm__("_ZGVdN8v_smelt_vm_tanhf");
extern "C" __attribute__((target("avx512f"))) V16 tanh_e(V16) __asm__("_ZGVeN16v_smelt_vm_tanhf");
extern "C" __attribute__((target("sse2"))) V4 erf_b(V4) __asm__("_ZGVbN4v_smelt_vm_erff");
extern "C" __attribute__((target("avx"))) V8 erf_c(V8) __asm__("_ZGVcN8v_smelt_vm_erff");
extern "C" __attribute__((target("avx2"))) V8 erf_d(V8) __asm__("_ZGVdN8v_smelt_vm_erff");
extern "C" __attribute__((target("avx512f"))) V16 erf_e(V16) __asm__("_ZGVeN16v_smelt_vm_erff");
extern "C" __attribute__((target("sse2"))) V4 sin_b(V4) __asm__("_ZGVbN4v_smelt_vm_sinf");
extern "C" __attribute__((target("avx"))) V8 sin_c(V8) __asm__("_ZGVcN8v_smelt_vm_sinf");
extern "C" __attribute__((target("avx2"))) V8 sin_d(V8) __asm__("_ZGVdN8v_smelt_vm_sinf");
extern "C" __attribute__((target("avx512f"))) V16 sin_e(V16) __asm__("_ZGVeN16v_smelt_vm_sinf");
extern "C" __attribute__((target("sse2"))) V4 cos_b(V4) __asm__("_ZGVbN4v_smelt_vm_cosf");
extern "C" __attribute__((target("avx"))) V8 cos_c(V8) __asm__("_ZGVcN8v_smelt_vm_cosf");
extern "C" __attribute__((target("avx2"))) V8 cos_d(V8) __asm__("_ZGVdN8v_smelt_vm_cosf");
extern "C" __attribute__((target("avx512f"))) V16 cos_e(V16) __asm__("_ZGVeN16v_smelt_vm_cosf");
extern "C" __attribute__((target("sse2"))) V4 pow_b(V4, V4) __asm__("_ZGVbN4vv_smelt_vm_powf");
extern "C" __attribute__((target("avx"))) V8 pow_c(V8, V8) __asm__("_ZGVcN8vv_smelt_vm_powf");
extern "C" __attribute__((target("avx2"))) V8 pow_d(V8, V8) __asm__("_ZGVdN8vv_smelt_vm_powf");
extern "C" __attribute__((target("avx512f")))
V16 pow_e(V16, V16) __asm__("_ZGVeN16vv_smelt_vm_powf");
// The 16-lane float exp the JIT's vectorized loops call (vmath::pw::exp16).
extern "C" __attribute__((target("avx512f"))) V16 exp_e(V16) __asm__("_ZGVeN16v_smelt_vm_expf");

namespace {
enum class Fn { kTanh, kErf, kSin, kCos, kPow };
// run_<isa>(v, fn, w): the <isa> variant of tanh, erf, sin, cos or pow (v ^ w)
// over v, a vector at a time.
#define RUN_VARIANT(isa, V, tgt)                                                                \
  __attribute__((target(tgt))) std::vector<float> run_##isa(const std::vector<float>& v, Fn fn, \
                                                            const std::vector<float>& w = {}) { \
    std::vector<float> out(v.size());                                                           \
    for (size_t i = 0; i + sizeof(V) / 4 <= v.size(); i += sizeof(V) / 4) {                     \
      V a, b{};                                                                                 \
      std::memcpy(&a, &v[i], sizeof a);                                                         \
      if (fn == Fn::kPow) std::memcpy(&b, &w[i], sizeof b);                                     \
      const V r = fn == Fn::kErf    ? erf_##isa(a)                                              \
                  : fn == Fn::kTanh ? tanh_##isa(a)                                             \
                  : fn == Fn::kSin  ? sin_##isa(a)                                              \
                  : fn == Fn::kCos  ? cos_##isa(a)                                              \
                                    : pow_##isa(a, b);                                           \
      std::memcpy(&out[i], &r, sizeof r);                                                       \
    }                                                                                           \
    return out;                                                                                 \
  }
RUN_VARIANT(b, V4, "sse2")
RUN_VARIANT(c, V8, "avx")
RUN_VARIANT(d, V8, "avx2")
RUN_VARIANT(e, V16, "avx512f")
#undef RUN_VARIANT
// out[0..16) = the 16-lane vector exp of in[0..16).
__attribute__((target("avx512f"))) void exp16_of(const float* in, float* out) {
  V16 a;
  std::memcpy(&a, in, sizeof a);
  const V16 y = exp_e(a);
  std::memcpy(out, &y, sizeof y);
}
}  // namespace

// The scalar function, the whole run (eager's kernel) and the 4-, 8- and
// 16-lane vector variants give the same bits (every 97th bit pattern, the
// special values, the ends of tanh's and erf's intervals and of their
// saturation, and for sin and cos the floats nearest to multiples of pi / 2,
// where the reduction's rounding of x / pi is closest to a tie, and the ends
// of their own range, 2^31).
TEST(FloatMath, TranscendentalsGiveTheSameBitsInEveryWidth) {
  std::vector<float> v = sweep(97);
  const float inf = std::numeric_limits<float>::infinity();
  for (float x :
       {0.0f,   -0.0f,       inf,           -inf,       std::numeric_limits<float>::quiet_NaN(),
        1e-40f, -1e-45f,     0x1p-126f,     0x1p-96f,   0x1.fffffep-97f,
        0.125f, 0.12499999f, 2.0f,          3.9192059f, 3.9192057f,
        4.0f,   8.0f,        9.0109138f,    9.0109129f, 10.0f,
        1e30f,  0x1p31f,     0x1.000002p31f})
    for (int s : {1, -1}) v.push_back(static_cast<float>(s) * x);
  std::vector<double> ks;
  for (int k = 1; k < 4096; ++k) ks.push_back(k);
  for (double k = 4096; k < 1.36e9; k = k * 1.37 + 1) ks.push_back(std::floor(k));
  for (double k : ks) {
    const float m = static_cast<float>(k * 1.5707963267948966);
    for (float x : {std::nextafter(m, 0.0f), m, std::nextafter(m, inf)})
      for (int s : {1, -1}) v.push_back(static_cast<float>(s) * x);
  }
  while (v.size() % 16 != 0) v.push_back(0.5f);
  const int64_t n = static_cast<int64_t>(v.size());
  const smelt::Tensor x = smelt::from_vector(v, {n});
  const char* names[] = {"tanh", "erf", "sin", "cos"};
  for (Fn fn : {Fn::kTanh, Fn::kErf, Fn::kSin, Fn::kCos}) {
    const char* name = names[static_cast<int>(fn)];
    const smelt::Tensor y = fn == Fn::kTanh  ? smelt::tanh(x)
                            : fn == Fn::kErf ? smelt::erf(x)
                            : fn == Fn::kSin ? smelt::sin(x)
                                             : smelt::cos(x);
    const std::vector<float> eager = y.to_vector<float>();
    const auto scalar = [fn](float a) {
      return fn == Fn::kTanh  ? smelt::vmath::tanh(a)
             : fn == Fn::kErf ? smelt::vmath::erf(a)
             : fn == Fn::kSin ? smelt::vmath::sin(a)
                              : smelt::vmath::cos(a);
    };
    std::vector<std::vector<float>> widths;
    widths.push_back(run_b(v, fn));
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx")) widths.push_back(run_c(v, fn));
    if (__builtin_cpu_supports("avx2")) widths.push_back(run_d(v, fn));
    if (__builtin_cpu_supports("avx512f")) widths.push_back(run_e(v, fn));
    for (size_t i = 0; i < v.size(); ++i) {
      const float want = scalar(v[i]);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(eager[i]));
        for (const auto& w : widths) ASSERT_TRUE(std::isnan(w[i]));
        continue;
      }
      ASSERT_EQ(float_bits(eager[i]), float_bits(want)) << name << " " << v[i];
      for (const auto& w : widths)
        ASSERT_EQ(float_bits(w[i]), float_bits(want)) << name << " " << v[i];
    }
  }
}

// pow: the scalar function, eager pow and the 4-, 8- and 16-lane variants give
// the same bits, whichever of smelt's own evaluation (AVX-512F: positive
// normal bases, finite exponents, |y log2 x| < 1000) and SLEEF's each lane
// takes, in one vector: every 97th bit pattern as the base, against exponents
// cycling through integers, fractions, large and special values, and against
// one exponent for the whole tensor.
TEST(FloatMath, PowGivesTheSameBitsInEveryWidth) {
  std::vector<float> a = sweep(97);
  const float inf = std::numeric_limits<float>::infinity();
  const float exps[] = {2.5f, -1.7f, 0.5f,   3.0f, -2.0f, 1e-3f, 100.0f, -0.3333f,
                        0.0f, -0.0f, inf,    -inf, 7e4f,  -9e5f, 1e30f,  std::nanf(""),
                        1.0f, 17.0f, 0.125f, 2.0f, -1.0f, 33.3f, -77.7f};
  std::vector<float> b(a.size());
  for (size_t i = 0; i < a.size(); ++i) b[i] = exps[(i * 7) % (sizeof exps / sizeof exps[0])];
  while (a.size() % 16 != 0) a.push_back(1.0f), b.push_back(1.0f);
  const int64_t n = static_cast<int64_t>(a.size());
  const std::vector<float> eager =
      smelt::pow(smelt::from_vector(a, {n}), smelt::from_vector(b, {n})).to_vector<float>();
  std::vector<std::vector<float>> widths;
  widths.push_back(run_b(a, Fn::kPow, b));
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx")) widths.push_back(run_c(a, Fn::kPow, b));
  if (__builtin_cpu_supports("avx2")) widths.push_back(run_d(a, Fn::kPow, b));
  if (__builtin_cpu_supports("avx512f")) widths.push_back(run_e(a, Fn::kPow, b));
  for (size_t i = 0; i < a.size(); ++i) {
    const float want = smelt::vmath::pow(a[i], b[i]);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(eager[i])) << a[i] << "^" << b[i];
      for (const auto& w : widths) ASSERT_TRUE(std::isnan(w[i])) << a[i] << "^" << b[i];
      continue;
    }
    ASSERT_EQ(float_bits(eager[i]), float_bits(want)) << a[i] << "^" << b[i];
    for (const auto& w : widths)
      ASSERT_EQ(float_bits(w[i]), float_bits(want)) << a[i] << "^" << b[i];
  }
  // One exponent for the whole tensor (eager's whole-block kernel, unary_runs.h's pow_run).
  const smelt::Tensor x = smelt::from_vector(a, {n});
  for (float e : {2.5f, -1.7f, 0.5f, 3.0f, 100.0f, -0.3333f, 1e30f, inf, std::nanf("")}) {
    const std::vector<float> got = smelt::pow(x, e).to_vector<float>();
    for (size_t i = 0; i < a.size(); ++i) {
      const float want = smelt::vmath::pow(a[i], e);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got[i])) << a[i] << "^" << e;
        continue;
      }
      ASSERT_EQ(float_bits(got[i]), float_bits(want)) << a[i] << "^" << e;
    }
  }
}
#endif

// Eager GELU (one pass with the vector erf) gives scalar::gelu<float>'s bits.
TEST(FloatMath, EagerGeluGivesTheScalarBits) {
  std::vector<float> v = sweep(997);
  for (float x : {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), 1e-40f, 5.5f, -5.5f})
    v.push_back(x);
  const int64_t n = static_cast<int64_t>(v.size());
  const std::vector<float> g = smelt::gelu(smelt::from_vector(v, {n})).to_vector<float>();
  for (int64_t i = 0; i < n; ++i) {
    const float want = smelt::scalar::gelu<float>(v[i]);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(g[i])) << v[i];
      continue;
    }
    ASSERT_EQ(float_bits(g[i]), float_bits(want)) << v[i];
  }
}

TEST(FloatMath, LogWithinOneUlp) {
  // Positive inputs (every exponent, subnormals included); the rest below.
  std::vector<float> pos;
  for (float x : sweep())
    if (x > 0.0f && x < std::numeric_limits<float>::infinity()) pos.push_back(x);
  int64_t differ = 0;
  for (float x : pos) {
    const float got = smelt::vmath::log(x);
    const float want = static_cast<float>(std::log(static_cast<double>(x)));
    if (float_bits(got) == float_bits(want)) continue;
    ++differ;
    ASSERT_LE(std::abs(static_cast<int64_t>(float_bits(got)) - float_bits(want)), 1)
        << "log(" << x << ") = " << got << ", correctly rounded " << want;
  }
  EXPECT_LT(differ, 20000);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(smelt::vmath::log(0.0f), -inf);
  EXPECT_EQ(smelt::vmath::log(-0.0f), -inf);
  EXPECT_EQ(smelt::vmath::log(inf), inf);
  EXPECT_EQ(float_bits(smelt::vmath::log(1.0f)), float_bits(0.0f));
  for (float x : {-1.0f, -1e-40f, -inf, std::numeric_limits<float>::quiet_NaN()})
    EXPECT_TRUE(std::isnan(smelt::vmath::log(x))) << x;
  // Eager log (vectorized) gives the scalar function's bits.
  const int64_t n = static_cast<int64_t>(pos.size());
  const std::vector<float> e = smelt::log(smelt::from_vector(pos, {n})).to_vector<float>();
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(float_bits(e[i]), float_bits(smelt::vmath::log(pos[i]))) << pos[i];
}

TEST(FloatMath, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  for (auto f : {+[](float x) { return smelt::vmath::erf(x); },
                 +[](float x) { return smelt::vmath::tanh(x); }}) {
    EXPECT_EQ(float_bits(f(0.0f)), float_bits(0.0f));
    EXPECT_EQ(float_bits(f(-0.0f)), float_bits(-0.0f));
    EXPECT_EQ(f(inf), 1.0f);
    EXPECT_EQ(f(-inf), -1.0f);
    EXPECT_TRUE(std::isnan(f(std::numeric_limits<float>::quiet_NaN())));
    EXPECT_EQ(f(30.0f), 1.0f);
    EXPECT_EQ(f(-30.0f), -1.0f);
  }
  EXPECT_EQ(smelt::vmath::tanh(1e-30f), 1e-30f);
  EXPECT_EQ(smelt::vmath::tanh(-1e-40f), -1e-40f);  // subnormal
  EXPECT_EQ(smelt::vmath::erf(1e-40f), static_cast<float>(std::erf(static_cast<double>(1e-40f))));
  EXPECT_EQ(smelt::vmath::erf(3.95f), 1.0f);
}

TEST(FloatMath, EagerOpsComputeTheSameFunctions) {
  std::vector<float> v;
  for (int i = -4000; i <= 4000; ++i) v.push_back(static_cast<float>(i) * 0.00123f);
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  smelt::Tensor x = smelt::from_vector(v, {static_cast<int64_t>(v.size())});
  const std::vector<float> e = smelt::erf(x).to_vector<float>();
  const std::vector<float> t = smelt::tanh(x).to_vector<float>();
  for (size_t i = 0; i + 1 < v.size(); ++i) {
    EXPECT_EQ(float_bits(e[i]), float_bits(smelt::vmath::erf(v[i]))) << v[i];
    EXPECT_EQ(float_bits(t[i]), float_bits(smelt::vmath::tanh(v[i]))) << v[i];
  }
  EXPECT_TRUE(std::isnan(e.back()) && std::isnan(t.back()));
}

TEST(FloatMath, SinCosWithinOneUlpAndEagerGivesTheScalarBits) {
  // Every exponent (arguments up to 2^31 smelt's own reduction, above it, up
  // to FLT_MAX, SLEEF's), infinities and NaN; a dense run of |x| <= 8.
  std::vector<float> v = sweep();
  for (float x = -8.0f; x < 8.0f; x += 0.000123f) v.push_back(x);
  const int64_t n = static_cast<int64_t>(v.size());
  const smelt::Tensor t = smelt::from_vector(v, {n});
  const std::vector<float> es = smelt::sin(t).to_vector<float>();
  const std::vector<float> ec = smelt::cos(t).to_vector<float>();
  for (int64_t i = 0; i < n; ++i) {
    const float x = v[static_cast<size_t>(i)];
    const float gs = smelt::vmath::sin(x), gc = smelt::vmath::cos(x);
    if (!std::isfinite(x)) {
      EXPECT_TRUE(std::isnan(gs) && std::isnan(gc) && std::isnan(es[i]) && std::isnan(ec[i])) << x;
      continue;
    }
    ASSERT_EQ(float_bits(es[i]), float_bits(gs)) << "sin(" << x << ")";
    ASSERT_EQ(float_bits(ec[i]), float_bits(gc)) << "cos(" << x << ")";
    const float ws = static_cast<float>(std::sin(static_cast<double>(x)));
    const float wc = static_cast<float>(std::cos(static_cast<double>(x)));
    ASSERT_LE(std::abs(static_cast<int64_t>(float_bits(gs)) - float_bits(ws)), 1)
        << "sin(" << x << ") = " << gs << ", correctly rounded " << ws;
    ASSERT_LE(std::abs(static_cast<int64_t>(float_bits(gc)) - float_bits(wc)), 1)
        << "cos(" << x << ") = " << gc << ", correctly rounded " << wc;
  }
  EXPECT_EQ(float_bits(smelt::vmath::sin(-0.0f)), float_bits(-0.0f));
  EXPECT_EQ(float_bits(smelt::vmath::sin(0.0f)), float_bits(0.0f));
  EXPECT_EQ(smelt::vmath::cos(0.0f), 1.0f);
  EXPECT_EQ(smelt::vmath::sin(1e-30f), 1e-30f);
}

TEST(FloatMath, EagerExpSqrtAndLogGiveTheScalarBits) {
  // The eager float kernels of exp, sqrt and log (src/backend/cpu/unary_runs.h
  // on AVX-512), and the JIT's 16-lane vector exp, against the scalar
  // functions: every exponent, signs, subnormals, infinities and NaN (the
  // sweep), and dense runs across exp's underflow and overflow ends, sqrt's
  // 2^-96 bound and log's normal / subnormal bound.
  std::vector<float> v = sweep();
  for (float x = -106.0f; x < -86.0f; x += 0.0007f) v.push_back(x);
  for (float x = 88.0f; x < 101.0f; x += 0.0007f) v.push_back(x);
  for (float x = 0x1p-98f; x < 0x1p-94f; x *= 1.0001f) v.push_back(x);
  for (float x = 0x1p-128f; x < 0x1p-124f; x *= 1.0001f) v.push_back(x);
  const int64_t n = static_cast<int64_t>(v.size());
  const smelt::Tensor t = smelt::from_vector(v, {n});
  const std::vector<float> e = smelt::exp(t).to_vector<float>();
  const std::vector<float> r = smelt::sqrt(t).to_vector<float>();
  const std::vector<float> l = smelt::log(t).to_vector<float>();
  for (int64_t i = 0; i < n; ++i) {
    const float want_l = smelt::vmath::log(v[i]);
    if (std::isnan(want_l))
      ASSERT_TRUE(std::isnan(l[i])) << "log(" << v[i] << ")";
    else
      ASSERT_EQ(float_bits(l[i]), float_bits(want_l)) << "log(" << v[i] << ")";
    const float want_e = smelt::vmath::exp(v[i]), want_r = std::sqrt(v[i]);
    if (std::isnan(want_e))
      ASSERT_TRUE(std::isnan(e[i])) << "exp(" << v[i] << ")";
    else
      ASSERT_EQ(float_bits(e[i]), float_bits(want_e)) << "exp(" << v[i] << ")";
    if (std::isnan(want_r))
      ASSERT_TRUE(std::isnan(r[i])) << "sqrt(" << v[i] << ")";
    else
      ASSERT_EQ(float_bits(r[i]), float_bits(want_r)) << "sqrt(" << v[i] << ")";
  }
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  // The 16-lane vector exp (the JIT's), where the processor has AVX-512F.
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) return;
  for (int64_t i = 0; i + 16 <= n; i += 16) {
    float y[16];
    exp16_of(&v[static_cast<size_t>(i)], y);
    for (int64_t k = 0; k < 16; ++k) {
      const float want = smelt::vmath::exp(v[static_cast<size_t>(i + k)]);
      if (std::isnan(want))
        ASSERT_TRUE(std::isnan(y[k])) << "exp16(" << v[static_cast<size_t>(i + k)] << ")";
      else
        ASSERT_EQ(float_bits(y[k]), float_bits(want))
            << "exp16(" << v[static_cast<size_t>(i + k)] << ")";
    }
  }
#endif
}

TEST(FloatMath, PowWithinOneUlpAndEagerGivesTheScalarBits) {
  // Bases in (0, 8), exponents in (-6, 6): glibc's double pow rounded to float is the reference.
  std::vector<float> a, b;
  for (int i = 1; i <= 20000; ++i) {
    a.push_back(static_cast<float>(i) * 0.0004f);
    b.push_back(static_cast<float>(i % 1200 - 600) * 0.01f + 0.003f);
  }
  const int64_t n = static_cast<int64_t>(a.size());
  const std::vector<float> e =
      smelt::pow(smelt::from_vector(a, {n}), smelt::from_vector(b, {n})).to_vector<float>();
  for (int64_t i = 0; i < n; ++i) {
    const float got = smelt::vmath::pow(a[i], b[i]);
    EXPECT_EQ(float_bits(e[i]), float_bits(got)) << a[i] << "^" << b[i];
    const double want = std::pow(static_cast<double>(a[i]), static_cast<double>(b[i]));
    const float w = static_cast<float>(want);
    if (!std::isfinite(w) || w == 0.0f) continue;
    ASSERT_LE(std::abs(static_cast<int64_t>(float_bits(got)) - float_bits(w)), 1)
        << a[i] << "^" << b[i] << " = " << got << ", correctly rounded " << w;
  }
  // The special cases (results 0, 1, inf or NaN, and sign of zeros) as C's; 0.5 ^ ±0.5 and
  // 2 ^ ±0.5 (the only inexact ones) within one ulp.
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const float bases[] = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 0.5f, inf, -inf, nan};
  const float exps[] = {0.0f, -0.0f, 0.5f, -0.5f, 1.0f, 2.0f, 3.0f, -1.0f, -3.0f, inf, -inf, nan};
  for (float x : bases)
    for (float y : exps) {
      const double wd = std::pow(static_cast<double>(x), static_cast<double>(y));
      const double gd = smelt::vmath::pow(static_cast<double>(x), static_cast<double>(y));
      const float want = std::pow(x, y), got = smelt::vmath::pow(x, y);
      if (std::isnan(wd)) {
        EXPECT_TRUE(std::isnan(got) && std::isnan(gd)) << x << "^" << y;
      } else if (std::abs(y) == 0.5f && std::isfinite(wd) && wd != 0.0) {
        EXPECT_LE(std::abs(float_bits(got) - float_bits(want)), 1) << x << "^" << y;
        EXPECT_NEAR(gd, wd, 2.3e-16 * wd) << x << "^" << y << " (double)";
      } else {
        EXPECT_EQ(float_bits(got), float_bits(want)) << x << "^" << y;
        EXPECT_EQ(gd, wd) << x << "^" << y << " (double)";
        EXPECT_EQ(std::signbit(gd), std::signbit(wd)) << x << "^" << y << " (double)";
      }
    }
}
