#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <string>

#include "core/random.h"
#include "ops/dispatch.h"
#include "ops/random_ops.h"
#include "smelt/ops.h"
#include "test_util.h"

using namespace smelt;
using smelt_test::error_of;
using smelt_test::vals;

namespace {
/// Records random draws the way the compiler's tracer would see them.
struct RandomRecorder : detail::TraceContext {
  std::vector<std::string> ops;
  std::vector<Tensor> record(const std::string&, const std::vector<Tensor>&, const detail::Attrs&,
                             const std::vector<detail::OutMeta>&) override {
    return {};
  }
  void record_copy(const Tensor&, const Tensor&) override {}
  void record_random(const std::string& op) override { ops.push_back(op); }
};
}  // namespace

TEST(Factories, ZerosOnesFullDtypes) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.dtype(), DType::Float32);
  EXPECT_EQ(z.sizes(), (Shape{2, 3}));
  EXPECT_TRUE(z.is_contiguous());
  for (double v : vals(z)) EXPECT_EQ(v, 0.0);
  for (int i = 0; i < kNumDTypes; ++i) {
    DType dt = static_cast<DType>(i);
    Tensor o = ones({3}, dt);
    EXPECT_EQ(o.dtype(), dt);
    for (double v : vals(o)) EXPECT_EQ(v, 1.0) << dtype_name(dt);
    Tensor f = full({2, 2}, 7, dt);
    for (double v : vals(f)) EXPECT_EQ(v, dt == DType::Bool ? 1.0 : 7.0) << dtype_name(dt);
  }
  EXPECT_EQ(full({2}, 3).dtype(), DType::Int64);
  EXPECT_EQ(full({2}, 3.5).dtype(), DType::Float32);
  EXPECT_EQ(full({2}, true).dtype(), DType::Bool);
  EXPECT_EQ(vals(full({2}, 2.75, float16)), (std::vector<double>{2.75, 2.75}));
  EXPECT_EQ(vals(full({1}, -2.9, int32)), (std::vector<double>{-2}));  // truncates
  EXPECT_EQ(zeros({0, 4}).numel(), 0);
  EXPECT_EQ(empty({2, 0, 3}).sizes(), (Shape{2, 0, 3}));
  EXPECT_EQ(zeros({}).dim(), 0);
}

TEST(Factories, LikeFactories) {
  Tensor x = full({2, 3}, 5, int16);
  Tensor t = x.t();
  EXPECT_EQ(zeros_like(t).sizes(), (Shape{3, 2}));
  EXPECT_EQ(zeros_like(t).dtype(), DType::Int16);
  EXPECT_TRUE(ones_like(t).is_contiguous());
  EXPECT_EQ(vals(full_like(x, 9.7))[0], 9.0);
  EXPECT_EQ(empty_like(x).sizes(), x.sizes());
}

TEST(Factories, SizeErrors) {
  EXPECT_THROW(zeros({2, -1}), Error);
  EXPECT_NE(error_of([] { ones({-3}); }).find("ones"), std::string::npos);
  EXPECT_NE(error_of([] { full({-1}, 2); }).find("negative"), std::string::npos);
  EXPECT_THROW(rand({-1}), Error);
  EXPECT_THROW(eye(-1), Error);
}

TEST(Factories, Arange) {
  Tensor a = arange(5);
  EXPECT_EQ(a.dtype(), DType::Int64);
  EXPECT_EQ(vals(a), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(vals(arange(10, 0, -3)), (std::vector<double>{10, 7, 4, 1}));
  EXPECT_EQ(vals(arange(2, 9, 3)), (std::vector<double>{2, 5, 8}));
  Tensor f = arange(0, 1, 0.25);
  EXPECT_EQ(f.dtype(), DType::Float32);
  EXPECT_EQ(vals(f), (std::vector<double>{0, 0.25, 0.5, 0.75}));
  EXPECT_EQ(vals(arange(1.0, 2.5, 0.5)), (std::vector<double>{1, 1.5, 2}));
  EXPECT_EQ(arange(5.0).dtype(), DType::Float32);
  EXPECT_EQ(arange(5, float64).dtype(), DType::Float64);
  EXPECT_EQ(arange(3, 3).numel(), 0);
  // ceil((1 - 0) / 0.1) = 10 elements; value i computed as start + i*step in double.
  Tensor t = arange(0.0, 1.0, 0.1, float64);
  ASSERT_EQ(t.numel(), 10);
  EXPECT_DOUBLE_EQ(vals(t)[3], 0.1 * 3);
  EXPECT_NE(error_of([] { arange(0, 5, 0); }).find("arange: step must be nonzero"),
            std::string::npos);
  EXPECT_THROW(arange(0, 5, -1), Error);
  EXPECT_THROW(arange(5, 0, 1), Error);
  EXPECT_THROW(arange(0.0, INFINITY), Error);
}

TEST(Factories, LinspaceEye) {
  Tensor l = linspace(0, 1, 5);
  EXPECT_EQ(l.dtype(), DType::Float32);
  EXPECT_EQ(vals(l), (std::vector<double>{0, 0.25, 0.5, 0.75, 1}));
  EXPECT_EQ(vals(linspace(2, 3, 1)), (std::vector<double>{2}));
  EXPECT_EQ(linspace(0, 1, 0).numel(), 0);
  EXPECT_EQ(vals(linspace(-1, 1, 3, float64)), (std::vector<double>{-1, 0, 1}));
  Tensor l7 = linspace(0.1, 0.7, 7, float64);
  for (int i = 0; i < 7; ++i) EXPECT_NEAR(vals(l7)[i], 0.1 * (i + 1), 1e-15);
  EXPECT_EQ(vals(l7).back(), 0.7);  // end exact
  EXPECT_EQ(vals(linspace(0, 10, 3, int64)), (std::vector<double>{0, 5, 10}));
  EXPECT_THROW(linspace(0, 1, -1), Error);
  Tensor e = eye(2, 3);
  EXPECT_EQ(e.sizes(), (Shape{2, 3}));
  EXPECT_EQ(vals(e), (std::vector<double>{1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(vals(eye(2, std::nullopt, kBool)), (std::vector<double>{1, 0, 0, 1}));
  EXPECT_EQ(eye(0).numel(), 0);
}

TEST(Factories, ScalarTensor) {
  Tensor s = scalar_tensor(2.5);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.dtype(), DType::Float32);
  EXPECT_EQ(s.item<double>(), 2.5);
  EXPECT_EQ(scalar_tensor(3).dtype(), DType::Int64);
  EXPECT_EQ(scalar_tensor(true).dtype(), DType::Bool);
  EXPECT_EQ(scalar_tensor(1.5, float64).dtype(), DType::Float64);
  EXPECT_EQ(scalar_tensor(int64_t{1} << 62, int64).item<int64_t>(), int64_t{1} << 62);
}

TEST(Factories, FromVectorAllTypes) {
  EXPECT_EQ(vals(from_vector<float>({1, 2, 3, 4}, {2, 2})), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(from_vector<double>({1}, {1}).dtype(), DType::Float64);
  EXPECT_EQ(from_vector<int64_t>({-1, 5}, {2}).dtype(), DType::Int64);
  EXPECT_EQ(from_vector<int32_t>({-1, 5}, {2}).dtype(), DType::Int32);
  EXPECT_EQ(from_vector<int16_t>({-1, 5}, {2}).dtype(), DType::Int16);
  EXPECT_EQ(from_vector<int8_t>({-1, 5}, {2}).dtype(), DType::Int8);
  EXPECT_EQ(from_vector<uint8_t>({255, 5}, {2}).to_vector<int64_t>(),
            (std::vector<int64_t>{255, 5}));
  EXPECT_EQ(from_vector<bool>({true, false, true}, {3}).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(vals(from_vector<Half>({Half(1.5f)}, {1})), (std::vector<double>{1.5}));
  EXPECT_EQ(vals(from_vector<BFloat16>({BFloat16(-2.0f)}, {1})), (std::vector<double>{-2}));
  Tensor c = from_vector<double>({1.7, -2.7}, {2}, int32);
  EXPECT_EQ(c.dtype(), DType::Int32);
  EXPECT_EQ(vals(c), (std::vector<double>{1, -2}));
  EXPECT_EQ(from_vector<float>({5}, {}).dim(), 0);
  EXPECT_EQ(from_vector<float>({}, {0, 3}).numel(), 0);
  std::string msg = error_of([] { from_vector<float>({1, 2, 3}, {2, 2}); });
  EXPECT_NE(msg.find("from_vector"), std::string::npos);
  EXPECT_NE(msg.find("[2, 2]"), std::string::npos);
}

TEST(Factories, FromBlobAliases) {
  float buf[6] = {0, 1, 2, 3, 4, 5};
  Tensor t = from_blob(buf, {2, 3}, float32);
  EXPECT_EQ(vals(t), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  buf[4] = 40;
  EXPECT_EQ(vals(t)[4], 40.0);
  Tensor col = from_blob(buf, {3}, float32, {2});  // strided: 0, 2, 40
  EXPECT_EQ(vals(col), (std::vector<double>{0, 2, 40}));
  static_cast<float*>(t.data_ptr())[0] = -1;
  EXPECT_EQ(buf[0], -1.0f);
  EXPECT_THROW(from_blob(buf, {2, 3}, float32, {1}), Error);
}

TEST(Random, PhiloxKnownAnswers) {
  // Random123 kat_vectors for philox4x32_10.
  uint32_t out[4];
  uint32_t zero[4] = {0, 0, 0, 0};
  detail::Philox4x32::block(zero, 0, out);
  EXPECT_EQ(out[0], 0x6627e8d5u);
  EXPECT_EQ(out[1], 0xe169c58du);
  EXPECT_EQ(out[2], 0xbc57ac4cu);
  EXPECT_EQ(out[3], 0x9b00dbd8u);
  uint32_t ones_[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu};
  detail::Philox4x32::block(ones_, 0xffffffffffffffffULL, out);
  EXPECT_EQ(out[0], 0x408f276du);
  EXPECT_EQ(out[1], 0x41c83b0eu);
  EXPECT_EQ(out[2], 0xa20bc7c6u);
  EXPECT_EQ(out[3], 0x6d5451fdu);
  uint32_t pi[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u};
  detail::Philox4x32::block(pi, (uint64_t{0x299f31d0u} << 32) | 0xa4093822u, out);
  EXPECT_EQ(out[0], 0xd16cfe09u);
  EXPECT_EQ(out[1], 0x94fdccebu);
  EXPECT_EQ(out[2], 0x5001e420u);
  EXPECT_EQ(out[3], 0x24126ea1u);
}

TEST(Random, SeededAndInRange) {
  manual_seed(123);
  Tensor a = rand({1000});
  manual_seed(123);
  Tensor b = rand({1000});
  EXPECT_EQ(vals(a), vals(b));
  Tensor c = rand({1000});
  EXPECT_NE(vals(a), vals(c));
  double sum = 0;
  for (double v : vals(a)) {
    EXPECT_GE(v, 0.0);
    EXPECT_LT(v, 1.0);
    sum += v;
  }
  EXPECT_NEAR(sum / 1000, 0.5, 0.05);
  for (DType dt : {float16, bfloat16, float64}) {
    Tensor r = rand({4096}, dt);
    EXPECT_EQ(r.dtype(), dt);
    for (double v : vals(r)) ASSERT_TRUE(v >= 0.0 && v < 1.0) << dtype_name(dt);
  }
  EXPECT_NE(error_of([] { rand({2}, int64); }).find("rand"), std::string::npos);
  EXPECT_THROW(randn({2}, int32), Error);
}

TEST(Random, RandnMoments) {
  manual_seed(7);
  Tensor r = randn({20000}, float64);
  double s = 0, s2 = 0;
  for (double v : vals(r)) {
    ASSERT_TRUE(std::isfinite(v));
    s += v;
    s2 += v * v;
  }
  double mean = s / 20000, var = s2 / 20000 - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.03);
  EXPECT_NEAR(var, 1.0, 0.05);
  EXPECT_EQ(randn({2, 3}).dtype(), DType::Float32);
  EXPECT_EQ(randn({0}).numel(), 0);
}

TEST(Random, Randint) {
  manual_seed(1);
  Tensor r = randint(-3, 4, {5000});
  EXPECT_EQ(r.dtype(), DType::Int64);
  std::vector<int> counts(7, 0);
  for (int64_t v : r.to_vector<int64_t>()) {
    ASSERT_TRUE(v >= -3 && v < 4);
    counts[v + 3]++;
  }
  for (int c : counts) EXPECT_GT(c, 500);  // every value drawn, roughly uniformly
  Tensor f = randint(0, 10, {100}, float32);
  EXPECT_EQ(f.dtype(), DType::Float32);
  for (double v : vals(f)) EXPECT_EQ(v, std::floor(v));
  EXPECT_NE(error_of([] { randint(5, 5, {2}); }).find("randint"), std::string::npos);
  EXPECT_THROW(randint(5, 1, {2}), Error);
  Tensor extreme = randint(INT64_MIN, INT64_MAX, {10});
  EXPECT_EQ(extreme.numel(), 10);
}

TEST(Random, BernoulliMaskAndUniformApi) {
  manual_seed(3);
  Tensor m = detail::bernoulli_mask({10000}, 0.3);
  EXPECT_EQ(m.dtype(), DType::Bool);
  int64_t n = 0;
  for (int64_t v : m.to_vector<int64_t>()) n += v;
  EXPECT_NEAR(n / 10000.0, 0.3, 0.03);
  for (int64_t v : detail::bernoulli_mask({100}, 1.0).to_vector<int64_t>()) EXPECT_EQ(v, 1);
  for (int64_t v : detail::bernoulli_mask({100}, 0.0).to_vector<int64_t>()) EXPECT_EQ(v, 0);
  EXPECT_THROW(detail::bernoulli_mask({2}, 1.5), Error);
  double u = detail::next_uniform();
  EXPECT_TRUE(u >= 0 && u < 1);
  manual_seed(9);
  uint64_t x = detail::next_u64();
  manual_seed(9);
  EXPECT_EQ(detail::next_u64(), x);
}

TEST(Random, NotesRandomForTracing) {
  RandomRecorder rec;
  detail::TraceContext* prev = detail::set_trace_context(&rec);
  rand({2});
  randn({2});
  randint(0, 3, {2});
  detail::bernoulli_mask({2}, 0.5);
  detail::set_trace_context(prev);
  EXPECT_EQ(rec.ops, (std::vector<std::string>{"rand", "randn", "randint", "bernoulli"}));
}

TEST(Random, SameNumbersForAnyThreadCount) {
  int prev = omp_get_max_threads();
  std::vector<std::vector<double>> runs;
  for (int threads : {1, 4}) {
    omp_set_num_threads(threads);
    manual_seed(42);
    std::vector<double> v = vals(rand({40000}));
    for (double x : vals(randn({40001}))) v.push_back(x);
    for (double x : vals(randint(0, 1000, {40000}))) v.push_back(x);
    runs.push_back(std::move(v));
  }
  omp_set_num_threads(prev);
  EXPECT_EQ(runs[0], runs[1]);
}
