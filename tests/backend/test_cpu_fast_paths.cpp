// The fast paths of the eager CPU kernels give the general path's values:
// parallel_for's ranges (the one grain rule of every eager CPU loop), the
// vectorized normal fill against random::normal_element element by element,
// the row copies of index_select / embedding and the contiguous gather
// against loops over the elements, and pointwise rows split across threads
// against one thread, on tiny and large (above the grain), contiguous,
// strided and broadcast inputs (one-element operands too), with NaN and -0.0.
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <set>
#include <vector>

#include "backend/cpu/capability.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/random_kernels.h"
#include "core/tensor_impl.h"
#include "kernels/random_ops.h"
#include "smelt/ops.h"
#include "test_util.h"

using namespace smelt;
using smelt::cpu::CpuCapability;

namespace {

/// Restores the OpenMP thread count and the CPU capability.
struct ThreadsGuard {
  int threads = omp_get_max_threads();
  CpuCapability cap = cpu::cpu_capability();
  ~ThreadsGuard() {
    omp_set_num_threads(threads);
    cpu::set_cpu_capability(cap);
  }
};

/// Bit-for-bit equality of two float64 value lists (NaN equals NaN, -0.0 differs from 0.0).
::testing::AssertionResult same_values(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], sizeof(double)) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
  }
  return ::testing::AssertionSuccess();
}

/// Values with NaN, -0.0 and infinities among an irregular sequence.
std::vector<double> special_seq(int64_t n) {
  std::vector<double> v = smelt_test::seq(n, 0.173, 0.4);
  const double special[] = {smelt_test::kNaN, -0.0, 0.0, smelt_test::kInf, -smelt_test::kInf};
  for (int64_t i = 0; i < n; i += 7) v[static_cast<size_t>(i)] = special[(i / 7) % 5];
  return v;
}

}  // namespace

TEST(CpuFastPaths, ParallelForCoversTheRangeOnceAndStaysSerialBelowTheGrain) {
  ThreadsGuard guard;
  omp_set_num_threads(2);
  for (int64_t n : {0, 1, 5, 100, 1000, 70001}) {
    for (int64_t grain : {1, 64, 1000, 100000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> calls{0};
      cpu::parallel_for(3, 3 + n, grain, [&](int64_t b, int64_t e) {
        ++calls;
        EXPECT_LT(b, e);
        for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i - 3)];
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << i;
      // One call when the range is at most one grain (or empty: none).
      const int64_t tasks = (n + grain - 1) / grain;
      EXPECT_EQ(calls.load(), n == 0 ? 0 : tasks <= 1 ? 1 : 2) << n << " " << grain;
    }
  }
  // Inside a parallel region (an outer parallel_for's): one call on the calling thread.
  std::atomic<int> inner_calls{0};
  cpu::parallel_for(0, 2, 1, [&](int64_t b0, int64_t e0) {
    for (int64_t j = b0; j < e0; ++j)
      cpu::parallel_for(0, 1000000, 1, [&](int64_t b, int64_t e) {
        ++inner_calls;
        EXPECT_EQ(b, 0);
        EXPECT_EQ(e, 1000000);
      });
  });
  EXPECT_EQ(inner_calls.load(), 2);
  EXPECT_EQ(cpu::grain_for(1), cpu::kParallelGrain);
  EXPECT_EQ(cpu::grain_for(1024), 32);
  EXPECT_EQ(cpu::grain_for(1 << 20), 1);
}

TEST(CpuFastPaths, ParallelForKeepsTheThreadPoolBetweenNarrowAndFullRegions) {
  // A region of fewer threads than the last one must not make libgomp end the
  // surplus threads (and a full-width region, as oneDNN's, create them again):
  // alternating the two sees the same few thread ids, not new ones each time.
  ThreadsGuard guard;
  omp_set_num_threads(4);
  std::mutex mu;
  std::set<pid_t> tids;
  auto note = [&] {
    std::lock_guard<std::mutex> lock(mu);
    tids.insert(static_cast<pid_t>(syscall(SYS_gettid)));
  };
  for (int i = 0; i < 40; ++i) {
    std::atomic<int> calls{0};
    cpu::parallel_for(0, 2 * cpu::kParallelGrain, cpu::kParallelGrain, [&](int64_t, int64_t) {
      ++calls;
      note();
    });
    EXPECT_EQ(calls.load(), 2);
#pragma omp parallel
    note();
  }
  EXPECT_LE(tids.size(), 4u);
}

TEST(CpuFastPaths, NormalFillEqualsTheScalarFormula) {
  ThreadsGuard guard;
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (int c = 0; c <= static_cast<int>(cpu::hardware_cpu_capability()); ++c) {
      cpu::set_cpu_capability(static_cast<CpuCapability>(c));
      for (DType dt : {float32, float64, float16, bfloat16}) {
        for (int64_t n : {1, 2, 7, 512, 513, 70001}) {
          for (uint64_t first : {uint64_t{0}, uint64_t{0xfffffff0ULL}, uint64_t{1} << 40}) {
            const uint64_t seed = 0x123456789abcdefULL + static_cast<uint64_t>(n);
            Tensor out = empty({n}, TensorOptions(dt));
            cpu::normal_fill_stub(out, seed, first);
            std::vector<double> want(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i) {
              uint32_t w[4];
              random::philox_block(seed, first + static_cast<uint64_t>(i / 2), w);
              double v = random::normal_element<double>(w, i);
              if (dt == float32) v = random::normal_element<float>(w, i);
              if (dt == float16) v = static_cast<float>(random::normal_element<Half>(w, i));
              if (dt == bfloat16) v = static_cast<float>(random::normal_element<BFloat16>(w, i));
              want[static_cast<size_t>(i)] = v;
            }
            ASSERT_TRUE(same_values(out.to_vector<double>(), want))
                << dtype_name(dt) << " n " << n << " first " << first << " threads " << threads
                << " cap " << c;
          }
        }
      }
    }
  }
}

TEST(CpuFastPaths, NormalValuesMatchTheirMoments) {
  manual_seed(3);
  const std::vector<double> v = randn({200000}).to_vector<double>();
  double s = 0, s2 = 0;
  for (double x : v) s += x, s2 += x * x;
  const double mean = s / v.size(), var = s2 / v.size() - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(var, 1.0, 0.02);
}

TEST(CpuFastPaths, IndexSelectAndEmbeddingRowCopiesEqualElementLoops) {
  ThreadsGuard guard;
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (Shape shape : {Shape{5, 3}, Shape{300, 257}, Shape{4, 6, 5}}) {
      int64_t numel = 1;
      for (int64_t d : shape) numel *= d;
      Tensor x = smelt_test::make(special_seq(numel), shape, float32);
      for (const Tensor& in : {x, x.transpose(0, 1)}) {  // contiguous and strided
        for (int64_t dim = 0; dim < in.dim(); ++dim) {
          const int64_t size = in.sizes()[static_cast<size_t>(dim)];
          std::vector<int64_t> iv;
          for (int64_t k = 0; k < 2 * size + 3; ++k) iv.push_back((k * 7 + 3) % size);
          Tensor got = index_select(in, dim, from_vector(iv, {static_cast<int64_t>(iv.size())}));
          // Element loop: out[..., k, ...] = in[..., iv[k], ...].
          const std::vector<double> xv = in.to_vector<double>();  // row-major values
          int64_t outer = 1, inner = 1;
          for (int64_t d = 0; d < dim; ++d) outer *= in.sizes()[static_cast<size_t>(d)];
          for (int64_t d = dim + 1; d < in.dim(); ++d) inner *= in.sizes()[static_cast<size_t>(d)];
          std::vector<double> want;
          for (int64_t o = 0; o < outer; ++o)
            for (int64_t v : iv)
              for (int64_t j = 0; j < inner; ++j)
                want.push_back(xv[static_cast<size_t>((o * size + v) * inner + j)]);
          EXPECT_TRUE(same_values(got.to_vector<double>(), want))
              << detail::shape_str(in.sizes()) << " dim " << dim << " threads " << threads;
        }
      }
    }
    // embedding: rows of the weight, large enough to be split across threads.
    const int64_t V = 1000, D = 96;
    Tensor w = smelt_test::make(special_seq(V * D), {V, D}, float32);
    std::vector<int64_t> ids;
    for (int64_t k = 0; k < 24 * 50; ++k) ids.push_back((k * 389 + 11) % V);
    Tensor got = embedding(w, from_vector(ids, {24, 50}));
    ASSERT_EQ(got.sizes(), (Shape{24, 50, D}));
    const std::vector<double> wv = w.to_vector<double>();
    std::vector<double> want;
    for (int64_t id : ids)
      for (int64_t j = 0; j < D; ++j) want.push_back(wv[static_cast<size_t>(id * D + j)]);
    EXPECT_TRUE(same_values(got.to_vector<double>(), want)) << "threads " << threads;
  }
}

TEST(CpuFastPaths, GatherEqualsAnElementLoop) {
  ThreadsGuard guard;
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (Shape shape : {Shape{3, 4}, Shape{200, 300}}) {
      const int64_t R = shape[0], C = shape[1];
      Tensor x = smelt_test::make(special_seq(R * C), shape, float64);
      for (int64_t dim : {0, 1}) {
        for (const Tensor& in : {x, contiguous(x.t()).t()}) {  // row-major and column-major
          const int64_t size = shape[static_cast<size_t>(dim)];
          std::vector<int64_t> iv;
          for (int64_t k = 0; k < R * C; ++k) iv.push_back((k * 13 + 5) % size);
          Tensor got = gather(in, dim, from_vector(iv, shape));
          const std::vector<double> xv = in.to_vector<double>();  // row-major values
          std::vector<double> want;
          for (int64_t i = 0; i < R; ++i)
            for (int64_t j = 0; j < C; ++j) {
              const int64_t v = iv[static_cast<size_t>(i * C + j)];
              want.push_back(xv[static_cast<size_t>(dim == 0 ? v * C + j : i * C + v)]);
            }
          EXPECT_TRUE(same_values(got.to_vector<double>(), want))
              << detail::shape_str(shape) << " dim " << dim << " threads " << threads;
        }
      }
    }
  }
}

TEST(CpuFastPaths, PointwiseRowsSplitAcrossThreadsEqualOneThread) {
  ThreadsGuard guard;
  for (Shape shape : {Shape{16}, Shape{3, 5}, Shape{70001}, Shape{300, 257}}) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    Tensor x = smelt_test::make(special_seq(n), shape, float32);
    Tensor y = smelt_test::make(smelt_test::seq(n, 0.41, 0.2), shape, float32);
    Tensor row = smelt_test::make(special_seq(shape.back()), {shape.back()}, float32);
    auto run = [&] {
      std::vector<Tensor> r;
      r.push_back(x + y);
      r.push_back(x + row);  // broadcast
      r.push_back(clamp(x, Scalar(-1.0), Scalar(1.0)));
      r.push_back(gelu(x));
      if (x.dim() == 2) r.push_back(x.t() * y.t());  // strided
      r.push_back(to_dtype(x, float16));
      Tensor mask = y > Scalar(0.5);             // bool, contiguous
      r.push_back(where(mask, x, y));            // bool loaded as 0 / 1
      r.push_back(to_dtype(mask, float32) + x);  // bool -> float in a pointwise op
      if (x.dim() == 2) r.push_back(where(mask.t(), x.t(), y.t() * Scalar(0.0)));  // strided bool
      // One-element operands of one dim (not 0-dim): the flat path's stride 0.
      r.push_back(smelt_test::make({0.75}, {1}, float32) * x);
      r.push_back(x - smelt_test::make({0.25}, {1}, float32));
      return r;
    };
    omp_set_num_threads(1);
    const std::vector<Tensor> want = run();
    omp_set_num_threads(2);
    const std::vector<Tensor> got = run();
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(same_values(got[i].to_vector<double>(), want[i].to_vector<double>()))
          << "op #" << i << " " << detail::shape_str(shape);
    // And the values themselves, against scalar formulas.
    const std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
    const std::vector<double> sum = got[0].to_vector<double>();
    const size_t at = x.dim() == 2 ? 6 : 5;  // where(mask, x, y), then mask + x
    const std::vector<double> picked = got[at].to_vector<double>();
    const std::vector<double> masked = got[at + 1].to_vector<double>();
    const std::vector<double> scaled = got[got.size() - 2].to_vector<double>();
    const std::vector<double> shifted = got.back().to_vector<double>();
    for (size_t i = 0; i < xv.size(); ++i) {
      const float xf = static_cast<float>(xv[i]), yf = static_cast<float>(yv[i]);
      ASSERT_TRUE(same_values({sum[i]}, {static_cast<double>(xf + yf)})) << i;
      ASSERT_TRUE(same_values({picked[i]}, {yf > 0.5f ? xf : yf})) << i;
      ASSERT_TRUE(same_values({masked[i]}, {static_cast<double>((yf > 0.5f ? 1.0f : 0.0f) + xf)}))
          << i;
      ASSERT_TRUE(same_values({scaled[i]}, {static_cast<double>(0.75f * xf)})) << i;
      ASSERT_TRUE(same_values({shifted[i]}, {static_cast<double>(xf - 0.25f)})) << i;
    }
  }
}

TEST(CpuFastPaths, RowBlockCopyMovesOnlyABlockTrailingTheStores) {
  using cpu::RowBlockCopy;
  EXPECT_TRUE(cpu::is_trailing_block({1024}, {512, 1024}));
  EXPECT_TRUE(cpu::is_trailing_block({1, 1, 8, 4}, {3, 8, 4}));
  EXPECT_TRUE(cpu::is_trailing_block({3, 8, 4}, {3, 8, 4}));
  EXPECT_FALSE(cpu::is_trailing_block({8, 1}, {3, 8, 4}));
  EXPECT_FALSE(cpu::is_trailing_block({2, 8, 4}, {3, 8, 4}));
  EXPECT_FALSE(cpu::is_trailing_block({5, 3, 8, 4}, {3, 8, 4}));
  alignas(4096) static char page[3 * 4096];
  char* dst = page + 4096;
  for (int64_t trail : {0, 64, 448, 512, 2048, 4032}) {
    char* block = page + 2 * 4096 - trail;  // its page offset trails dst's by `trail`
    std::memset(block, static_cast<int>(trail / 64 + 1), 256);
    RowBlockCopy moved;
    char* got = moved.away_from_stores(block, 256, dst, 4096);
    if (trail >= 512) {
      EXPECT_EQ(got, block) << trail;
    } else {
      ASSERT_NE(got, block) << trail;
      EXPECT_EQ(std::memcmp(got, block, 256), 0) << trail;
      EXPECT_EQ((reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(got)) % 4096,
                2048u);
    }
    // Rows whose starts move across the page, or a block too large to stay
    // in cache: left where it is.
    EXPECT_EQ(moved.away_from_stores(block, 256, dst, 4096 + 64), block) << trail;
    EXPECT_EQ(moved.away_from_stores(block, int64_t{1} << 20, dst, 4096), block) << trail;
  }
}

TEST(CpuFastPaths, RepeatedTrailingBlocksEqualElementLoops) {
  ThreadsGuard guard;
  omp_set_num_threads(2);
  // Inputs that repeat along the output (a bias row, a [T, C] block of a
  // [B, T, C] output, with leading 1s), of the compute dtype or not, beside
  // full and one-element operands, above and below the parallel grain.
  for (Shape shape : {Shape{3, 5}, Shape{64, 1024}, Shape{4, 33, 70}, Shape{40, 3000}}) {
    const int64_t n = shape[0] * (shape.size() == 3 ? shape[1] * shape[2] : shape[1]);
    const int64_t c = shape.back(), block = shape.size() == 3 ? shape[1] * c : c;
    Tensor x = smelt_test::make(special_seq(n), shape, float32);
    Shape bs(shape.begin() + 1, shape.end());
    Tensor b = smelt_test::make(smelt_test::seq(block, 0.37, 0.3), bs, float32);
    Tensor b1 = b.unsqueeze(0);
    Tensor bi = to_dtype(b * Scalar(10.0), int32);
    Tensor mask = b > Scalar(0.0);
    const std::vector<double> xv = x.to_vector<double>(), bv = b.to_vector<double>(),
                              biv = bi.to_vector<double>();
    const std::vector<double> add = (x + b).to_vector<double>(), mul = (b1 * x).to_vector<double>(),
                              mixed = (x - bi).to_vector<double>(),
                              pick = where(mask, x, smelt_test::make({-2.0}, {1}, float32))
                                         .to_vector<double>();
    for (int64_t i = 0; i < n; ++i) {
      const size_t u = static_cast<size_t>(i), p = static_cast<size_t>(i % block);
      const float xf = static_cast<float>(xv[u]), bf = static_cast<float>(bv[p]);
      ASSERT_TRUE(same_values({add[u]}, {static_cast<double>(xf + bf)})) << i;
      ASSERT_TRUE(same_values({mul[u]}, {static_cast<double>(bf * xf)})) << i;
      ASSERT_TRUE(same_values({mixed[u]}, {static_cast<double>(xf - static_cast<float>(biv[p]))}))
          << i;
      ASSERT_TRUE(same_values({pick[u]}, {bf > 0.0f ? xf : -2.0f})) << i;
    }
  }
  // x.add_(b) with b's page offset trailing x's by 0 to 448 bytes: b is read
  // from the moved copy, and the values are the same.
  Tensor storage = zeros({64 * 1024 + 2048}, float32);
  const auto page_offset = [](const Tensor& t) {
    return static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data_ptr()) % 4096) / 4;
  };
  const int64_t x0 = (1024 - page_offset(storage)) % 1024;  // x starts on a page
  Tensor row_src = smelt_test::make(smelt_test::seq(2048 + 1024, 0.21, 0.5), {3072}, float32);
  for (int64_t trail : {0, 16, 112, 512}) {
    Tensor x = storage.slice(0, x0, x0 + 64 * 1024).view({64, 1024});
    x.copy_(smelt_test::make(special_seq(64 * 1024), {64, 1024}, float32));
    const std::vector<double> before = x.to_vector<double>();
    const int64_t b0 = ((page_offset(x) - trail - page_offset(row_src)) % 1024 + 1024) % 1024;
    Tensor b = row_src.slice(0, b0, b0 + 1024);
    ASSERT_EQ((page_offset(x) - page_offset(b) + 1024) % 1024, trail);
    x.add_(b);
    const std::vector<double> after = x.to_vector<double>(), bv = b.to_vector<double>();
    for (size_t i = 0; i < after.size(); ++i)
      ASSERT_TRUE(same_values({after[i]}, {static_cast<double>(static_cast<float>(before[i]) +
                                                               static_cast<float>(bv[i % 1024]))}))
          << "trail " << trail << " element " << i;
  }
}

TEST(CpuFastPaths, CatInOnePassEqualsSliceCopies) {
  ThreadsGuard guard;
  omp_set_num_threads(2);
  // Contiguous inputs of out's dtype in one pass (rows before dim >= 2), and
  // the per-input copies otherwise (dim 0, a transposed input, another
  // dtype), against element loops; empty inputs are skipped.
  const Tensor a = smelt_test::make(special_seq(64 * 3 * 40), {64, 3, 40}, float32);
  const Tensor b = smelt_test::make(smelt_test::seq(64 * 5 * 40, 0.29, 0.1), {64, 5, 40}, float32);
  const Tensor e = zeros({64, 0, 40}, float32);
  const Tensor big = smelt_test::make(smelt_test::seq(600 * 700, 0.31), {600, 700}, float32);
  const Tensor big2 = smelt_test::make(special_seq(600 * 300), {600, 300}, float32);
  const Tensor side = smelt_test::make(smelt_test::seq(700 * 50), {700, 50}, float32);
  struct Case {
    std::vector<Tensor> in;
    int64_t dim;
  };
  const std::vector<Case> cases = {
      {{a, e, b, a}, 1},                  // middle dim, an empty input
      {{big, big2}, 1},                   // above the grain: rows split across threads
      {{a, a}, 0},                        // dim 0: per-input copies
      {{big.t(), side}, 1},               // a transposed input
      {{a, to_dtype(a, float64)}, 2},     // another dtype: promoted
      {{big.slice(1, 0, 300), big2}, 0},  // a strided view
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    const Tensor got = cat(c.in, c.dim);
    // The expected values: each input's elements at their place in out.
    const Shape& os = got.sizes();
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < c.dim; ++k) outer *= os[k];
    for (int64_t k = c.dim + 1; k < got.dim(); ++k) inner *= os[k];
    std::vector<double> want(static_cast<size_t>(got.numel()));
    int64_t at = 0;
    for (const Tensor& t : c.in) {
      const std::vector<double> v = t.contiguous().to_vector<double>();
      const int64_t len = t.sizes()[c.dim];
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < len * inner; ++j)
          want[static_cast<size_t>(o * os[c.dim] * inner + at * inner + j)] =
              v[static_cast<size_t>(o * len * inner + j)];
      at += len;
    }
    EXPECT_TRUE(same_values(got.to_vector<double>(), want)) << "case " << ci;
  }
}

TEST(CpuFastPaths, GatherOfEveryElementSizeAndRowLengthEqualsAnElementLoop) {
  ThreadsGuard guard;
  // Rows along a contiguous last dim, eight elements per vector gather where
  // the capability has it and one by one after: every dtype size, lengths
  // around multiples of 8, NaN payloads and -0.0 moved as bits.
  for (CpuCapability want_cap :
       {CpuCapability::Default, CpuCapability::AVX2, CpuCapability::AVX512}) {
    const CpuCapability cap = cpu::set_cpu_capability(want_cap);  // at most the hardware's
    for (DType dt : {float32, float64, int32, int64, float16, int8}) {
      for (int64_t len : {1, 7, 8, 9, 17, 64, 70}) {
        const int64_t rows = 5, width = 13;
        Tensor x =
            to_dtype(smelt_test::make(special_seq(rows * width), {rows, width}, float64), dt);
        std::vector<int64_t> iv;
        for (int64_t k = 0; k < rows * len; ++k) iv.push_back((k * 7 + 3) % width);
        const Tensor got = gather(x, 1, from_vector(iv, {rows, len}));
        const std::vector<double> xv = x.to_vector<double>();
        std::vector<double> want;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < len; ++j)
            want.push_back(
                xv[static_cast<size_t>(r * width + iv[static_cast<size_t>(r * len + j)])]);
        EXPECT_TRUE(same_values(got.to_vector<double>(), want))
            << dtype_name(dt) << " len " << len << " " << cpu::cpu_capability_name(cap);
        // An index out of range in any lane: the first one in element order is named.
        for (int64_t bad : {int64_t{0}, len / 2, len - 1}) {
          std::vector<int64_t> jv = iv;
          jv[static_cast<size_t>(len + bad)] = width;  // row 1
          if (bad + 1 < len) jv[static_cast<size_t>(len + bad + 1)] = -1;
          smelt_test::expect_error_mentions(
              [&] {
                gather(x, 1, from_vector(jv, {rows, len}));
              },
              "index 13 is out of bounds for dimension 1 with size 13");
        }
      }
    }
  }
}

TEST(CpuFastPaths, IndexSelectOfOneDTensorsAndSmallRowsEqualsAnElementLoop) {
  ThreadsGuard guard;
  // A 1-D selection goes through gather's kernel (its long row split across
  // threads), rows of up to 32 bytes are copied as words (1, 2, 4 or 8 bytes
  // wide), longer ones by memcpy: every element size, row widths around
  // those bounds, one and two threads, a selection long enough to split.
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (DType dt : {float32, float64, int16, int8, float16, int64}) {
      for (int64_t width : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5},
                            int64_t{8}, int64_t{9}}) {
        // width 0: a 1-D tensor; else rows of `width` elements.
        const int64_t size = 301, n = width == 0 ? 100003 : 517;
        const Shape shape = width == 0 ? Shape{size} : Shape{size, width};
        const int64_t row = std::max<int64_t>(width, 1);
        Tensor x = to_dtype(smelt_test::make(special_seq(size * row), shape, float64), dt);
        std::vector<int64_t> iv;
        for (int64_t k = 0; k < n; ++k) iv.push_back((k * 7919 + 13) % size);
        const Tensor got = index_select(x, 0, from_vector(iv, {n}));
        const std::vector<double> xv = x.to_vector<double>();
        std::vector<double> want;
        for (int64_t v : iv)
          for (int64_t j = 0; j < row; ++j) want.push_back(xv[static_cast<size_t>(v * row + j)]);
        EXPECT_TRUE(same_values(got.to_vector<double>(), want))
            << dtype_name(dt) << " width " << width << " threads " << threads;
        if (width == 0) {  // gather of the same row: the same values, split the same way
          const Tensor g = gather(x, 0, from_vector(iv, {n}));
          EXPECT_TRUE(same_values(g.to_vector<double>(), want))
              << dtype_name(dt) << " gather, threads " << threads;
        }
      }
    }
  }
}

TEST(CpuFastPaths, TwoRepeatingBlocksMovedFromTheStoresKeepTheirOwnValues) {
  ThreadsGuard guard;
  omp_set_num_threads(2);
  // Outputs of 2 MiB and more start on a page; each repeating block is a
  // slice whose page offset trails theirs by `trail` bytes (under 512: moved
  // to a copy). The same op on the blocks expanded to full tensors (the flat
  // path, nothing moved) gives the expected values.
  const auto slice_trailing = [](const Tensor& src, int64_t trail) {
    const int64_t es = static_cast<int64_t>(src.element_size());
    const int64_t off = static_cast<int64_t>(reinterpret_cast<uintptr_t>(src.data_ptr()) % 4096);
    const int64_t start = ((4096 - trail - off) % 4096 + 4096) % 4096 / es;
    return src.slice(0, start, start + 1024);
  };
  const auto full = [](const Tensor& row) { return contiguous(expand(row, {512, 1024})); };
  const Tensor x = smelt_test::make(special_seq(512 * 1024), {512, 1024}, float32);
  const Tensor cond = x > Scalar(0.0);
  const Tensor f32a = smelt_test::make(smelt_test::seq(4096, 0.23, -0.4), {4096}, float32);
  const Tensor f32b = smelt_test::make(smelt_test::seq(4096, 0.19, 0.3), {4096}, float32);
  const Tensor f64 = smelt_test::make(smelt_test::seq(2048, 0.31, 0.2), {2048}, float64);
  for (int64_t ta : {0, 64, 448, 2048})
    for (int64_t tb : {0, 128, 3072}) {
      const Tensor lo = slice_trailing(f32a, ta), hi = slice_trailing(f32b, tb);
      const Tensor wide = slice_trailing(f64, tb);
      // Blocks of one size (clamp, float32) and a larger second one (where, float64).
      EXPECT_TRUE(same_values(clamp(x, lo, hi).to_vector<double>(),
                              clamp(x, full(lo), full(hi)).to_vector<double>()))
          << "clamp, trails " << ta << ", " << tb;
      EXPECT_TRUE(same_values(where(cond, lo, wide).to_vector<double>(),
                              where(cond, full(lo), full(wide)).to_vector<double>()))
          << "where, trails " << ta << ", " << tb;
    }
}

TEST(CpuFastPaths, HalfOperandsConvertedInContiguousRunsEqualElementCasts) {
  // Pointwise ops load float16 / bfloat16 operands and store half results
  // through the converting copy's contiguous runs (F16C for float16): each
  // element as Half / BFloat16's own conversions, NaN, infinities, -0.0,
  // subnormals and rounding ties included, at lengths that leave remainders
  // of every vector width and of the 512-element block, on 1 and 2 threads.
  ThreadsGuard guard;
  auto check = [](DType dt, auto tag) {
    using T = decltype(tag);
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{23}, int64_t{70001}}) {
      std::vector<double> xv = special_seq(n), yv = smelt_test::seq(n, 0.41, 0.2);
      for (int64_t i = 3; i < n; i += 11) yv[static_cast<size_t>(i)] = 0x1p-20 * (i % 5);
      for (int64_t i = 5; i < n; i += 13) xv[static_cast<size_t>(i)] = 1.0 + 0x1p-9;  // a tie
      Tensor x = to_dtype(smelt_test::make(xv, {n}, float32), dt);
      Tensor y = to_dtype(smelt_test::make(yv, {n}, float32), dt);
      const T* xs = static_cast<const T*>(x.data_ptr());
      const T* ys = static_cast<const T*>(y.data_ptr());
      Tensor i8 = smelt_test::make(smelt_test::seq(n, 3.0, 1.0), {n}, int8);
      const int8_t* is = static_cast<const int8_t*>(i8.data_ptr());
      for (int threads : {1, 2}) {
        omp_set_num_threads(threads);
        Tensor sum = x + y;                      // half loads, float add, half store
        Tensor mixed = i8 * x;                   // int8 loads, half store
        Tensor wide = x + to_dtype(y, float32);  // half load, float store
        ASSERT_EQ(sum.dtype(), dt);
        ASSERT_EQ(mixed.dtype(), dt);
        const T* s = static_cast<const T*>(sum.data_ptr());
        const T* m = static_cast<const T*>(mixed.data_ptr());
        const float* w = static_cast<const float*>(wide.data_ptr());
        for (int64_t i = 0; i < n; ++i) {
          const float xf = static_cast<float>(xs[i]), yf = static_cast<float>(ys[i]);
          const T want_sum(xf + yf), want_mixed(static_cast<float>(is[i]) * xf);
          ASSERT_TRUE(std::isnan(xf + yf) ? std::isnan(static_cast<float>(s[i]))
                                          : s[i].x == want_sum.x)
              << dtype_name(dt) << " n " << n << " element " << i;
          ASSERT_TRUE(std::isnan(want_mixed) ? std::isnan(static_cast<float>(m[i]))
                                             : m[i].x == want_mixed.x)
              << dtype_name(dt) << " n " << n << " element " << i;
          ASSERT_TRUE(same_values({w[i]}, {static_cast<double>(xf + yf)}))
              << dtype_name(dt) << " n " << n << " element " << i;
        }
      }
    }
  };
  check(float16, Half{});
  check(bfloat16, BFloat16{});
}
