// Data-movement ops lowered into loop IR (masked_fill, tril/triu, pad, cat,
// index_select, gather, embedding): compiled equals eager, they fuse with
// their neighbours (kernel counts asserted), and out-of-range indices raise
// like eager.
#include <gtest/gtest.h>

#include "compiler/compile_test_util.h"

using namespace smelt;
using smelt_test::close;
using smelt_test::count_prefix;
using smelt_test::error_of;
using smelt_test::names;
using smelt_test::reduction_kernels;

namespace {
class MovementFusion : public smelt_test::CompilerTest {};
}  // namespace

TEST_F(MovementFusion, HandWrittenCausalAttentionIsThreeSteps) {
  const int64_t T = 16, D = 8;
  Tensor q = randn({2, T, D}), k = randn({2, T, D}), v = randn({2, T, D});
  Tensor mask = triu(ones({T, T}), 1).to(DType::Bool);
  auto attn = [mask](const Tensor& q, const Tensor& k, const Tensor& v) {
    Tensor s = matmul(q, k.transpose(1, 2)) * (1.0 / std::sqrt(8.0));
    return matmul(softmax(s.masked_fill(mask, -INFINITY), -1), v);
  };
  auto f = compile(attn);
  EXPECT_TRUE(close(f(q, k, v), attn(q, k, v), 1e-5));
  // GEMM, one reduction kernel (scale, mask, softmax), GEMM.
  EXPECT_EQ(f.stats().kernels, 3) << names(f);
  EXPECT_EQ(reduction_kernels(f), 1) << names(f);
  EXPECT_EQ(count_prefix(f, "fallback_"), 0) << names(f);
}

TEST_F(MovementFusion, EachOpMatchesEagerAndFuses) {
  Tensor x = randn({5, 7}), y = randn({5, 3}).to(DType::Float64), m = gt(randn({5, 7}), zeros({5, 7}));
  Tensor idx = from_vector<int64_t>({4, 0, 2, 2}, {4});
  Tensor gidx = from_vector<int64_t>({0, 6, 1, 3, 3, 5, 2, 0, 1, 4}, {5, 2});
  Tensor w = randn({10, 4}), tok = from_vector<int64_t>({3, 9, 0, 3, 7, 1}, {2, 3});
  struct Case {
    const char* name;
    std::function<Tensor()> fn;
  };
  std::vector<Case> cases = {
      {"masked_fill",
       [&] {
         return compile(
             [](const Tensor& x, const Tensor& m) { return exp(x.masked_fill(m, 0.5)) * 2; })(x, m);
       }},
      {"tril", [&] { return compile([](const Tensor& x) { return tril(x * 3, -1) + 1; })(x); }},
      {"triu", [&] { return compile([](const Tensor& x) { return sigmoid(triu(x, 2)); })(x); }},
      {"pad",
       [&] {
         return compile([](const Tensor& x) { return pad(exp(x), {1, 2, 0, 1}, 7.5) * 2; })(x);
       }},
      {"pad_crop", [&] { return compile([](const Tensor& x) {
                           return pad(x + 1, {-2, 1});
                         })(x); }},
      {"cat",
       [&] {
         return compile([](const Tensor& x, const Tensor& y) {
           return cat({x * 2, y, exp(x)}, 1) - 1;
         })(x, y);
       }},
      {"index_select",
       [&] {
         return compile([](const Tensor& x, const Tensor& i) {
           return index_select(x * 2, 1, i) + 1;
         })(x, idx);
       }},
      {"gather",
       [&] {
         return compile([](const Tensor& x, const Tensor& i) { return gather(x, 1, i) * 3; })(x,
                                                                                              gidx);
       }},
      {"embedding",
       [&] {
         return compile([](const Tensor& w, const Tensor& t) { return embedding(w, t) * 2; })(w,
                                                                                              tok);
       }},
  };
  std::vector<Tensor> eager = {
      exp(x.masked_fill(m, 0.5)) * 2,     tril(x * 3, -1) + 1,    sigmoid(triu(x, 2)),
      pad(exp(x), {1, 2, 0, 1}, 7.5) * 2, pad(x + 1, {-2, 1}),    cat({x * 2, y, exp(x)}, 1) - 1,
      index_select(x * 2, 1, idx) + 1,    gather(x, 1, gidx) * 3, embedding(w, tok) * 2};
  for (size_t c = 0; c < cases.size(); ++c)
    EXPECT_TRUE(close(cases[c].fn(), eager[c], 1e-6)) << cases[c].name;
  // One kernel each: the movement op fuses with the ops around it.
  auto p = compile([](const Tensor& x) { return pad(exp(x), {1, 2, 0, 1}, 7.5) * 2; });
  p(x);
  EXPECT_EQ(p.stats().kernels, 1) << names(p);
  EXPECT_EQ(p.stats().kernel_names[0], "cpp_poi_fused_exp_mul_pad_0");
  auto c = compile([](const Tensor& x, const Tensor& y) { return cat({x * 2, y, exp(x)}, 1) - 1; });
  c(x, y);
  EXPECT_EQ(c.stats().kernels, 1) << names(c);
}

TEST_F(MovementFusion, OutOfRangeIndexRaisesLikeEager) {
  Tensor x = randn({3, 4});
  Tensor bad = from_vector<int64_t>({0, 4}, {2});
  auto f = compile([](const Tensor& x, const Tensor& i) { return index_select(x + 1, 1, i); });
  std::string msg = error_of([&] { f(x, bad); });
  EXPECT_NE(msg.find("index_select"), std::string::npos) << msg;
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
  Tensor w = randn({5, 2}), tok = from_vector<int64_t>({1, -1}, {2});
  auto e = compile([](const Tensor& w, const Tensor& t) { return embedding(w, t); });
  EXPECT_NE(error_of([&] { e(w, tok); }).find("out of range"), std::string::npos);
}
