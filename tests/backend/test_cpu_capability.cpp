// The eager CPU kernels built once per CPU capability (src/backend/cpu/
// capability.h) give the same bits on every capability this processor has,
// and the fused row kernels of softmax, log_softmax and layer_norm
// (src/backend/cpu/norm_kernels.h) give the bits of their decompositions.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/capability.h"
#include "core/tensor_impl.h"
#include "smelt/ops.h"
#include "test_util.h"

using namespace smelt;
using smelt::cpu::CpuCapability;

namespace {

/// Same dtype, shape and values bit for bit, as tests/compiler/
/// test_special_values.cpp compares: every NaN equals every NaN (which
/// operand's NaN an operation returns is up to the compiler's operand order),
/// the sign of zero counts.
::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes())
    return ::testing::AssertionFailure() << "dtype or shape differ";
  Tensor ca = contiguous(a), cb = contiguous(b);
  if (is_floating(a.dtype())) {
    const std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
    for (size_t i = 0; i < va.size(); ++i) {
      if (std::isnan(va[i]) && std::isnan(vb[i])) continue;
      if (std::memcmp(&va[i], &vb[i], sizeof(double)) != 0)
        return ::testing::AssertionFailure() << "element " << i << ": " << va[i] << " vs " << vb[i];
    }
    return ::testing::AssertionSuccess();
  }
  const size_t n = static_cast<size_t>(ca.numel()) * ca.element_size();
  if (std::memcmp(ca.data_ptr(), cb.data_ptr(), n) != 0)
    return ::testing::AssertionFailure() << "the bytes differ";
  return ::testing::AssertionSuccess();
}

/// Special values (zeros, infinities, NaN, subnormals, extremes) followed by
/// an irregular sequence: n values in `shape`'s row-major order.
std::vector<double> special_then_seq(int64_t n) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = {0.0,   -0.0,  1.0,     -1.0,   inf,    -inf,    NAN,    1e-40, -1e-40,
                           3e38,  -3e38, 1e-30,   88.7,   -103.5, 0.5,     1e10,   -7.25, 20.0,
                           -20.0, 1e-8,  0.70710, 2.5,    -0.125, 65504.0, 70000., 1e-45, 9.0,
                           -9.0,  1e300, -1e300,  1e-310, 3.0,    -NAN};
  std::vector<double> s = smelt_test::seq(n, 0.731, 0.3);
  for (int64_t i = static_cast<int64_t>(v.size()); i < n; ++i) v.push_back(s[i] * 3.0);
  v.resize(static_cast<size_t>(n));
  return v;
}

/// Runs every op of the list on `x` and `y` (float tensors of one shape, with
/// special values), returning the results in order.
std::vector<Tensor> run_ops(const Tensor& x, const Tensor& y) {
  std::vector<Tensor> r;
  using Unary = Tensor (*)(const Tensor&);
  using Binary = Tensor (*)(const Tensor&, const Tensor&);
  for (Unary f : std::vector<Unary>{
           &smelt::neg,   &smelt::abs,        &smelt::sign,  &smelt::exp,   &smelt::exp2,
           &smelt::expm1, &smelt::log,        &smelt::log2,  &smelt::log1p, &smelt::sqrt,
           &smelt::rsqrt, &smelt::reciprocal, &smelt::sin,   &smelt::cos,   &smelt::tan,
           &smelt::tanh,  &smelt::sigmoid,    &smelt::relu,  &smelt::silu,  &smelt::erf,
           &smelt::floor, &smelt::ceil,       &smelt::round, &smelt::trunc, &smelt::isnan,
           &smelt::isinf})
    r.push_back(f(x));
  r.push_back(gelu(x));
  r.push_back(gelu(x, "tanh"));
  for (Binary f : std::vector<Binary>{&smelt::maximum, &smelt::minimum, &smelt::fmax, &smelt::fmin,
                                      &smelt::atan2, &smelt::remainder, &smelt::fmod, &smelt::pow,
                                      &smelt::eq, &smelt::lt})
    r.push_back(f(x, y));
  r.push_back(x + y);
  r.push_back(x - y);
  r.push_back(x * y);
  r.push_back(x / y);
  r.push_back(add(x, y, 0.5));
  r.push_back(clamp(x, Scalar(-1.0), Scalar(2.0)));
  r.push_back(where(x > y, x, y));
  r.push_back(lerp(x, y, 0.3));
  r.push_back(nan_to_num(x));
  for (int64_t d : {0, 1}) {
    r.push_back(sum(x, {d}));
    r.push_back(mean(x, {d}));
    r.push_back(amax(x, {d}));
    r.push_back(amin(x, {d}));
    r.push_back(argmax(x, d));
    r.push_back(var(x, {d}));
    r.push_back(prod(x, d));
    r.push_back(cumsum(x, d));
  }
  r.push_back(softmax(x, -1));
  r.push_back(log_softmax(x, -1));
  r.push_back(softmax(x, 0));
  r.push_back(layer_norm(x, {x.size(-1)}, y.select(0, 0), y.select(0, 1), 1e-5));
  for (DType t : {float16, bfloat16, int32, int64, uint8, int8, kBool, float64, float32})
    r.push_back(to_dtype(x, t));
  r.push_back(to_dtype(to_dtype(x, float16), float32));
  r.push_back(to_dtype(to_dtype(x, bfloat16), float32));
  r.push_back(contiguous(x.t()));
  return r;
}

/// Restores the capability the process started with.
struct CapabilityGuard {
  CpuCapability saved = cpu::cpu_capability();
  ~CapabilityGuard() { cpu::set_cpu_capability(saved); }
};

}  // namespace

TEST(CpuCapability, NamesAndLimits) {
  CapabilityGuard guard;
  EXPECT_STREQ(cpu::cpu_capability_name(CpuCapability::Default), "default");
  EXPECT_STREQ(cpu::cpu_capability_name(CpuCapability::AVX2), "avx2");
  EXPECT_STREQ(cpu::cpu_capability_name(CpuCapability::AVX512), "avx512");
  // Never above what the processor has.
  EXPECT_EQ(cpu::set_cpu_capability(CpuCapability::AVX512), cpu::hardware_cpu_capability());
  EXPECT_EQ(cpu::set_cpu_capability(CpuCapability::Default), CpuCapability::Default);
  EXPECT_EQ(cpu::cpu_capability(), CpuCapability::Default);
}

// float32 -> float16 of NaNs (quiet, signalling, either sign) in the 16-wide
// (AVX-512), 8-wide (F16C) and scalar parts of a contiguous conversion: the
// canonical sign | 0x7e00 on every capability, as Half's own conversion.
TEST(CpuCapability, Float16OfNaNIsCanonicalOnEveryPath) {
  CapabilityGuard guard;
  const int64_t n = 16 + 8 + 5;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = 0.37f * static_cast<float>(i) - 3.0f;
  auto from_bits = [](uint32_t b) {
    float f;
    std::memcpy(&f, &b, sizeof f);
    return f;
  };
  const std::vector<std::pair<int, uint32_t>> nans = {
      {1, 0x7fc00000u},  {5, 0xffc00000u},  {10, 0x7f800001u}, {17, 0xff800123u},
      {22, 0x7fffffffu}, {26, 0xffc00001u}, {28, 0x7f812345u}};
  for (auto [i, b] : nans) v[static_cast<size_t>(i)] = from_bits(b);
  Tensor x = from_vector(v, {n});
  for (int c = 0; c <= static_cast<int>(cpu::hardware_cpu_capability()); ++c) {
    cpu::set_cpu_capability(static_cast<CpuCapability>(c));
    Tensor h = to_dtype(x, float16);
    const Half* p = h.data_ptr<Half>();
    for (int64_t i = 0; i < n; ++i) {
      const float f = v[static_cast<size_t>(i)];
      uint32_t fb;
      std::memcpy(&fb, &f, sizeof fb);
      const uint16_t want =
          std::isnan(f) ? static_cast<uint16_t>(((fb >> 16) & 0x8000u) | 0x7e00u) : Half(f).x;
      EXPECT_EQ(p[i].x, want) << "element " << i << " on "
                              << cpu::cpu_capability_name(static_cast<CpuCapability>(c));
    }
  }
}

TEST(CpuCapability, EveryCapabilityGivesTheSameBits) {
  CapabilityGuard guard;
  for (DType dt : {float32, float64}) {
    for (Shape shape : {Shape{7, 1037}, Shape{64, 33}}) {
      const int64_t n = shape[0] * shape[1];
      Tensor x = smelt_test::make(special_then_seq(n), shape, dt);
      std::vector<double> yv = smelt_test::seq(n, 0.291, 1.1);
      yv[3] = 0.0;
      yv[5] = -0.0;
      yv[9] = NAN;
      Tensor y = smelt_test::make(yv, shape, dt);
      cpu::set_cpu_capability(CpuCapability::Default);
      const std::vector<Tensor> want = run_ops(x, y);
      for (int c = 1; c <= static_cast<int>(cpu::hardware_cpu_capability()); ++c) {
        cpu::set_cpu_capability(static_cast<CpuCapability>(c));
        const std::vector<Tensor> got = run_ops(x, y);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i)
          EXPECT_TRUE(same_bits(got[i], want[i]))
              << "op #" << i << " on " << dtype_name(dt) << " "
              << cpu::cpu_capability_name(static_cast<CpuCapability>(c));
      }
    }
  }
}

// float32 var, var_mean and layer_norm of rows in and out of the float lanes'
// range (smelt_test::hard_variance_rows; reduce_ops.h: welford_float_lanes and
// the lanes that fold in double instead) give the same bits on every capability.
TEST(CpuCapability, Float32WelfordOfHardRowsGivesTheSameBits) {
  CapabilityGuard guard;
  for (int64_t n : {16, 17, 100, 1024, 2050}) {
    for (const char* kind : {"offset", "far", "equal", "huge", "tiny"}) {
      Tensor x = smelt_test::hard_variance_rows(kind, 3, n);
      auto run = [&] {
        auto [v, m] = var_mean(x, {1}, 1.0);
        return std::vector<Tensor>{v, m, var(x, {1}), layer_norm(x, {n})};
      };
      cpu::set_cpu_capability(CpuCapability::Default);
      const std::vector<Tensor> want = run();
      for (int c = 1; c <= static_cast<int>(cpu::hardware_cpu_capability()); ++c) {
        cpu::set_cpu_capability(static_cast<CpuCapability>(c));
        const std::vector<Tensor> got = run();
        for (size_t i = 0; i < got.size(); ++i)
          EXPECT_TRUE(same_bits(got[i], want[i]))
              << kind << " n " << n << " output " << i << " on "
              << cpu::cpu_capability_name(static_cast<CpuCapability>(c));
      }
    }
  }
}

/// Calls f(threads, capability) on teams of 1 and 2 threads with every
/// capability this processor has (restoring both afterwards).
template <class F>
void on_every_team_and_capability(const F& f) {
  CapabilityGuard guard;
  const int saved_threads = omp_get_max_threads();
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (int c = 0; c <= static_cast<int>(cpu::hardware_cpu_capability()); ++c) {
      cpu::set_cpu_capability(static_cast<CpuCapability>(c));
      f(threads, c);
    }
  }
  omp_set_num_threads(saved_threads);
}

TEST(CpuCapability, FusedRowKernelsEqualTheirDecompositions) {
  on_every_team_and_capability([](int threads, int c) {
    for (DType dt : {float32, float64}) {
      for (Shape shape : {Shape{3, 1}, Shape{5, 7}, Shape{4, 16}, Shape{9, 129}, Shape{40, 1000},
                          Shape{2, 3, 300}, Shape{64, 2050}}) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        Tensor x = smelt_test::make(special_then_seq(n), shape, dt);
        Tensor big = smelt_test::make(smelt_test::seq(n, 0.113, 0.2), shape, dt) * 40.0;
        const int64_t c_last = shape.back();
        Tensor w = smelt_test::make(smelt_test::seq(c_last, 0.5, 0.7), {c_last}, dt);
        Tensor b = smelt_test::make(smelt_test::seq(c_last, 0.9, 0.1), {c_last}, dt);
        for (const Tensor& in : {x, big}) {
          // The decompositions of src/ops/decompositions.cpp, op by op.
          Tensor shifted = in - amax(in, {-1}, true);
          Tensor e = exp(shifted);
          const std::string what = fmt::format("{} {} threads {} cap {}", dtype_name(dt),
                                               detail::shape_str(shape), threads, c);
          EXPECT_TRUE(same_bits(softmax(in, -1), e / sum(e, {-1}, true))) << what;
          EXPECT_TRUE(same_bits(log_softmax(in, -1), shifted - log(sum(e, {-1}, true)))) << what;
          auto [v, m] = var_mean(in, {-1}, 0, true);
          Tensor norm = (in - m) * rsqrt(v + 1e-5);
          EXPECT_TRUE(same_bits(layer_norm(in, {c_last}, w, b, 1e-5), norm * w + b)) << what;
          EXPECT_TRUE(same_bits(layer_norm(in, {c_last}, w, std::nullopt, 1e-5), norm * w)) << what;
          EXPECT_TRUE(same_bits(layer_norm(in, {c_last}, std::nullopt, std::nullopt, 1e-5), norm))
              << what;
        }
      }
    }
  });
}

// batch_norm's normalization (Backend::fused_batch_norm_apply) in training
// and evaluation mode, with and without weight and bias, over 3-D and 4-D
// inputs, equals the decomposition op by op on every capability and team.
TEST(CpuCapability, FusedBatchNormApplyEqualsItsDecomposition) {
  on_every_team_and_capability([](int threads, int c) {
    for (DType dt : {float32, float64}) {
      for (Shape shape : {Shape{2, 3, 5}, Shape{4, 6, 7, 9}, Shape{3, 16, 33, 40}}) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        const int64_t ch = shape[1];
        Tensor x = smelt_test::make(special_then_seq(n), shape, dt) * 3.0 + 0.25;
        Tensor w = smelt_test::make(smelt_test::seq(ch, 0.5, 0.7), {ch}, dt);
        Tensor b = smelt_test::make(smelt_test::seq(ch, 0.9, 0.1), {ch}, dt);
        Tensor rm = smelt_test::make(smelt_test::seq(ch, 0.1, 0.3), {ch}, dt);
        Tensor rv = smelt_test::make(smelt_test::seq(ch, 0.5, 0.2), {ch}, dt);
        Shape bshape(shape.size(), 1);
        bshape[1] = ch;
        std::vector<int64_t> dims{0};
        for (int64_t d = 2; d < static_cast<int64_t>(shape.size()); ++d) dims.push_back(d);
        auto [bv, bm] = var_mean(x, dims, 0, false);
        const std::string what = fmt::format("{} {} threads {} cap {}", dtype_name(dt),
                                             detail::shape_str(shape), threads, c);
        for (bool training : {true, false}) {
          const Tensor& m = training ? bm : rm;
          const Tensor& v = training ? bv : rv;
          // (x - mean) * rsqrt(var + eps) [* weight] [+ bias], op by op.
          Tensor norm = (x - m.reshape(bshape)) * rsqrt(v.reshape(bshape) + 1e-5);
          Tensor wr = w.reshape(bshape), br = b.reshape(bshape);
          // running stats the call may update: fresh copies each time
          auto call = [&](const std::optional<Tensor>& wt, const std::optional<Tensor>& bt) {
            return batch_norm(x, rm.clone(), rv.clone(), wt, bt, training, 0.1, 1e-5);
          };
          EXPECT_TRUE(same_bits(call(w, b), norm * wr + br)) << what << " training " << training;
          EXPECT_TRUE(same_bits(call(w, std::nullopt), norm * wr)) << what;
          EXPECT_TRUE(same_bits(call(std::nullopt, b), norm + br)) << what;
          EXPECT_TRUE(same_bits(call(std::nullopt, std::nullopt), norm)) << what;
        }
      }
    }
  });
}

// batch_norm eagerly equals itself through the decomposition (the fused
// normalization refused: x requires grad) bit for bit, output and running
// stats alike, on inputs the fused kernel must take or leave: channels-last
// and strided x, weight / bias / running stats of other dtypes, float16 /
// bfloat16, C = 1, an empty dim, special values, eps that overflows float32 or
// lies just past half an ulp of 1 (added in x's dtype, as add() does), momentum
// 0 and 1, on 1 and 3 threads.
TEST(CpuCapability, EagerBatchNormEqualsItsAutogradPathOnEveryInput) {
  const int saved_threads = omp_get_max_threads();
  const double past_half_ulp = std::ldexp(1.0 + std::ldexp(1.0, -30), -24);
  for (int threads : {1, 3}) {
    omp_set_num_threads(threads);
    for (DType dt : {float32, float64, float16, bfloat16}) {
      for (Shape shape : {Shape{2, 5, 3, 4}, Shape{3, 1, 7}, Shape{4, 3, 0, 2}}) {
        const int64_t ch = shape[1], n = detail::shape_numel(shape);
        Tensor x = smelt_test::make(special_then_seq(n), shape, dt);
        std::vector<Tensor> xs{x, x * 0.5 + 0.25};
        if (shape.size() == 4) {  // channels-last, and every other channel
          Shape nhwc{shape[0], shape[2], shape[3], shape[1]};
          xs.push_back(smelt_test::make(special_then_seq(n), nhwc, dt).permute({0, 3, 1, 2}));
          Shape wide{shape[0], 2 * ch, shape[2], shape[3]};
          xs.push_back(smelt_test::make(special_then_seq(2 * n), wide, dt).slice(1, 0, 2 * ch, 2));
        }
        for (DType pt : {dt, float64}) {
          Tensor w = smelt_test::make(smelt_test::seq(ch, 0.5, 0.7), {ch}, pt);
          Tensor b = smelt_test::make(smelt_test::seq(ch, 0.9, 0.1), {ch}, pt);
          Tensor rm = smelt_test::make(smelt_test::seq(ch, 0.1, 0.3), {ch}, pt);
          Tensor rv =
              pt == dt ? ones({ch}, pt) : smelt_test::make(smelt_test::seq(ch, 0.5, 0.2), {ch}, pt);
          for (size_t k = 0; k < xs.size(); ++k) {
            for (double eps : {1e-5, 1e39, past_half_ulp}) {
              for (bool training : {true, false}) {
                for (double momentum : {0.0, 1.0}) {
                  const std::string what = fmt::format(
                      "{} {} input {} params {} eps {} training {} momentum {} threads {}",
                      dtype_name(dt), detail::shape_str(shape), k, dtype_name(pt), eps, training,
                      momentum, threads);
                  Tensor fused_m = rm.clone(), fused_v = rv.clone(), ref_m = rm.clone(),
                         ref_v = rv.clone();
                  Tensor xg = xs[k].detach();
                  xg.requires_grad_();
                  Tensor got = batch_norm(xs[k], fused_m, fused_v, w, b, training, momentum, eps);
                  Tensor want =
                      batch_norm(xg, ref_m, ref_v, w, b, training, momentum, eps).detach();
                  EXPECT_TRUE(same_bits(got, want)) << what;
                  EXPECT_TRUE(same_bits(fused_m, ref_m)) << what;
                  EXPECT_TRUE(same_bits(fused_v, ref_v)) << what;
                  EXPECT_TRUE(
                      same_bits(batch_norm(xs[k], rm, rv, std::nullopt, b, false, 0.1, eps),
                                batch_norm(xg, rm, rv, std::nullopt, b, false, 0.1, eps).detach()))
                      << what << " without weight";
                }
              }
            }
          }
        }
      }
    }
  }
  omp_set_num_threads(saved_threads);
}

TEST(CpuCapability, FusedLayerNormTakesLowerPrecisionWeights) {
  // float16 / bfloat16 inputs and weights: computed in float32, as the
  // decomposition does, and rounded once.
  for (DType dt : {float16, bfloat16}) {
    const int64_t rows = 6, c = 300;
    Tensor x = smelt_test::make(special_then_seq(rows * c), {rows, c}, dt);
    Tensor w = smelt_test::make(smelt_test::seq(c, 0.5, 0.7), {c}, dt);
    Tensor b = smelt_test::make(smelt_test::seq(c, 0.9, 0.1), {c}, dt);
    Tensor xf = to_dtype(x, float32);
    auto [v, m] = var_mean(xf, {-1}, 0, true);
    Tensor norm = (xf - m) * rsqrt(v + 1e-5);
    EXPECT_TRUE(same_bits(layer_norm(x, {c}, w, b, 1e-5), to_dtype(norm * w + b, dt)))
        << dtype_name(dt);
    // float32 input, lower-precision weights: a float32 result.
    EXPECT_TRUE(same_bits(layer_norm(xf, {c}, w, b, 1e-5), norm * w + b)) << dtype_name(dt);
  }
}

// amax / amin of float32 and float64 rows whose extreme decides their bits
// (reduce_ops.h: plain_extreme folds their whole chunks at once) and rows
// whose result depends on the order (a zero extreme: which signed zero; NaNs
// of several payloads: which one), also after a first run folded at once
// (two runs of whole chunks: the second's NaNs and zeros meet the cascade
// counts the first left), and a false alarm (+inf and -inf): every
// capability gives the baseline's bits, NaN payloads included.
TEST(CpuCapability, AmaxAminKeepTheirBitsOnEveryCapability) {
  CapabilityGuard guard;
  auto run = [](auto zero) {
    using T = decltype(zero);
    using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    const T inf = std::numeric_limits<T>::infinity();
    auto nan = [](U payload) {
      U bits;
      const T q = std::numeric_limits<T>::quiet_NaN();
      std::memcpy(&bits, &q, sizeof q);
      bits |= payload;
      T v;
      std::memcpy(&v, &bits, sizeof v);
      return v;
    };
    const int64_t rows = 9, runs = 2, len = 2048 + 37;  // two runs of 16 chunks, a tail
    std::vector<T> v(static_cast<size_t>(rows * runs * len));
    const std::vector<double> s = smelt_test::seq(static_cast<int64_t>(v.size()), 0.731, 0.3);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<T>(s[i] * 3.0 - 1.0);
    auto at = [&](int64_t row, int64_t r, int64_t k) -> T& {
      return v[static_cast<size_t>((row * runs + r) * len + k)];
    };
    for (int64_t r = 0; r < runs; ++r) {
      for (int64_t k = 0; k < len; ++k) {
        at(1, r, k) = -std::abs(at(1, r, k)) - T(1);  // negative rows: a zero somewhere wins
        at(2, r, k) = -std::abs(at(2, r, k)) - T(1);
        at(3, r, k) = -std::abs(at(3, r, k)) - T(1);
        at(5, r, k) = -inf;
      }
    }
    for (int64_t k : {5, 300, 1030, 2000, 2060}) at(1, 1, k) = (k % 2) ? T(0) : -T(0);  // 2nd run
    for (int64_t k : {7, 129, 2050}) at(2, 0, k) = (k % 2) ? -T(0) : T(0);
    at(2, 1, 64) = T(0);
    for (int64_t k : {3, 200, 700, 1500, 2070}) at(3, 1, k) = nan(U(k));  // NaNs in the 2nd run
    at(4, 0, 17) = nan(U(1));
    at(4, 0, 1900) = nan(U(2));
    at(4, 1, 40) = -nan(U(3));
    at(6, 0, 10) = inf;
    at(6, 1, 11) = -inf;  // +inf and -inf: a false alarm
    at(7, 1, 2084) = nan(U(5));
    for (int64_t k = 0; k < len; ++k) at(8, 0, k) = at(8, 1, k) = T(k % 3) - T(1);  // -1, 0, 1
    Tensor x = from_vector<T>(v, {rows, runs, len});
    // One run a row, the first run's chunks at once, and two runs a row (the
    // tails cut off: runs of whole chunks, apart in memory).
    Tensor x2 = narrow(x, 2, 0, 2048);
    auto results = [&] {
      std::vector<Tensor> r;
      for (bool is_max : {true, false}) {
        auto f = [&](const Tensor& t, std::vector<int64_t> d) {
          return is_max ? amax(t, d) : amin(t, d);
        };
        r.push_back(f(x, {2}));
        r.push_back(f(x2, {1, 2}));
        r.push_back(f(neg(x), {2}));
        r.push_back(f(neg(x2), {1, 2}));
        // Over the leading dim (columns: 8 rows a pass, then the rest).
        r.push_back(f(x, {0}));
        r.push_back(f(neg(reshape(x, {rows * runs, len})), {0}));
      }
      return r;
    };
    cpu::set_cpu_capability(CpuCapability::Default);
    const std::vector<Tensor> want = results();
    for (int c = 1; c <= static_cast<int>(cpu::hardware_cpu_capability()); ++c) {
      cpu::set_cpu_capability(static_cast<CpuCapability>(c));
      const std::vector<Tensor> got = results();
      for (size_t i = 0; i < got.size(); ++i) {
        const std::vector<T> g = got[i].to_vector<T>(), w = want[i].to_vector<T>();
        ASSERT_EQ(g.size(), w.size());
        EXPECT_EQ(std::memcmp(g.data(), w.data(), g.size() * sizeof(T)), 0)
            << "result " << i << " of " << (sizeof(T) == 4 ? "float32" : "float64") << " on "
            << cpu::cpu_capability_name(static_cast<CpuCapability>(c));
      }
    }
    // The rows meant to end at a zero or a NaN do.
    const std::vector<T> m1 = want[0].to_vector<T>(),
                         m2 = want[1].to_vector<T>();  // [row, run], [row]
    EXPECT_TRUE(m1[3] == 0 && m1[4] == 0 && m1[5] == 0 && m2[1] == 0 && m2[2] == 0);
    EXPECT_TRUE(std::isnan(m1[7]) && std::isnan(m1[8]) && std::isnan(m1[9]));
    EXPECT_TRUE(std::isnan(m2[3]) && std::isnan(m2[4]));
  };
  run(0.0f);
  run(0.0);
}
