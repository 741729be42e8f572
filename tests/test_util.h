// Shared helpers of the test suite (tests/**/test_*.cpp): tensors built from
// values, values read back, and error-message checks. Each test file takes the
// helpers it uses by name (`using smelt_test::vals;` ...).
#pragma once
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "core/tensor_impl.h"
#include "smelt/cuda.h"
#include "smelt/ops.h"

namespace smelt_test {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

/// Sets the OpenMP thread count for a scope and restores the previous one
/// when the scope ends (an ASSERT's early return included).
struct OmpThreads {
  int prev = omp_get_max_threads();
  explicit OmpThreads(int threads) { omp_set_num_threads(threads); }
  ~OmpThreads() { omp_set_num_threads(prev); }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;
};

/// Elements as float64 (row-major).
inline std::vector<double> vals(const smelt::Tensor& t) { return t.to_vector<double>(); }

/// 0, 1, ..., n-1 as `dt` in `shape`.
inline smelt::Tensor iota(const smelt::Shape& shape, smelt::DType dt = smelt::float32) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), 0.0);
  return smelt::from_vector<double>(v, shape, dt);
}

/// A smooth, irregular sequence of `n` values in about [-2, 2.2].
inline std::vector<double> seq(int64_t n, double scale = 0.37, double shift = 0.0) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = std::sin(i * scale + shift) * 2.0 + 0.1 * (i % 3);
  return v;
}

/// Float32 rows whose variance is hard to get right, as a float32 [rows, n]
/// tensor (row-major), by kind: "offset" 1e4 + N(0, 1) (a large mean, small
/// variance: a sum of squares in float loses it), "far" 1e6 + N(0, 0.1),
/// "equal" a constant per row (variance exactly 0; the constants need all of
/// float's bits), "huge" 1e20 (1 + 0.1 N(0, 1)) (deviations whose squares
/// overflow float), "tiny" 1e-30 (1 + 0.1 N(0, 1)) (squares that underflow
/// float).
inline smelt::Tensor hard_variance_rows(const std::string& kind, int64_t rows, int64_t n,
                                        uint32_t seed = 7) {
  std::vector<double> v(static_cast<size_t>(rows * n));
  uint64_t s = seed;
  auto normal = [&s] {  // Box-Muller over a 64-bit LCG (deterministic everywhere)
    auto u = [&s] {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      return (static_cast<double>(s >> 11) + 0.5) / 9007199254740992.0;
    };
    const double a = u(), b = u();
    return std::sqrt(-2.0 * std::log(a)) * std::cos(6.283185307179586 * b);
  };
  const double equal[] = {1.0 + 0x1p-23, -3.7, 10000.5, 2.5e-20, 6.5e7 + 4.0};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) {
      double& x = v[static_cast<size_t>(r * n + i)];
      if (kind == "offset")
        x = 1e4 + normal();
      else if (kind == "far")
        x = 1e6 + 0.1 * normal();
      else if (kind == "equal")
        x = equal[r % 5];
      else if (kind == "huge")
        x = 1e20 * (1 + 0.1 * normal());
      else
        x = 1e-30 * (1 + 0.1 * normal());
    }
  return smelt::from_vector<double>(v, {rows, n}, smelt::float32);
}

/// Row-major float64 values -> tensor of `dt` (converted as a store would).
inline smelt::Tensor make(const std::vector<double>& v, const smelt::Shape& s,
                          smelt::DType dt = smelt::float64) {
  return smelt::from_vector<double>(v, s, dt);
}

/// A contiguous tensor of T's dtype holding exactly `v` (written directly, no op runs).
template <class T>
smelt::Tensor make_exact(const std::vector<T>& v, const smelt::Shape& shape) {
  smelt::Tensor t = smelt::detail::make_empty(shape, smelt::dtype_of<T>::value, smelt::Device());
  std::copy(v.begin(), v.end(), static_cast<T*>(t.data_ptr()));
  return t;
}

/// The message of the smelt::Error `f` raises, or "<no error>".
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const smelt::Error& e) {
    return e.what();
  }
  return "<no error>";
}

/// EXPECTs that `f` raises smelt::Error whose message contains `what`.
template <class F>
void expect_error_mentions(F&& f, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "expected smelt::Error mentioning " << what;
  } catch (const smelt::Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

/// EXPECTs got[i] within tol * (1 + |want[i]|) of want[i]; a NaN want needs a NaN got,
/// an infinite want the same infinity.
inline void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                         double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i << ": got " << got[i];
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << "at " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "at " << i;
    }
  }
}

// ---- devices -----------------------------------------------------------------

/// The devices a device-parameterized suite runs on: the CPU and the first GPU.
/// CUDA instances skip themselves (GTEST_SKIP "no CUDA device") where there is
/// none, so CI output shows what did not run.
inline std::vector<smelt::Device> test_devices() {
  return {smelt::Device("cpu"), smelt::Device("cuda:0")};
}

/// "cpu" / "cuda0": a test-name suffix for INSTANTIATE_TEST_SUITE_P.
inline std::string device_name(const testing::TestParamInfo<smelt::Device>& info) {
  return info.param.is_cpu() ? "cpu" : "cuda" + std::to_string(info.param.index);
}

}  // namespace smelt_test

/// Skips the current test unless `device` can run here (a CUDA device needs a GPU).
#define SMELT_SKIP_UNLESS_DEVICE(device)                                                        \
  do {                                                                                          \
    if ((device).is_cuda() && !::smelt::cuda::is_available()) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

/// Skips the current test unless a CUDA device is present.
#define SMELT_SKIP_WITHOUT_CUDA() SMELT_SKIP_UNLESS_DEVICE(::smelt::Device("cuda:0"))
