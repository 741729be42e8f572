// The losses against PyTorch 2.x (values and gradients computed by
// torch.nn.functional in float64): nll_loss with class weights, ignore_index and
// every reduction; binary_cross_entropy_with_logits with weight, pos_weight and
// logits far in the tails (where a naive formula overflows); their errors.
#include <gtest/gtest.h>

#include "smelt/smelt.h"
#include "test_util.h"

namespace {

using namespace smelt;
using smelt_test::expect_close;
using smelt_test::expect_error_mentions;
using smelt_test::make;
using smelt_test::vals;

Tensor logits() {
  return make({0.5, -1.0, 2.0, 1.5, 0.25, -0.5, -2.0, 0.0, 1.0, 0.3, 0.3, -0.7}, {4, 3})
      .requires_grad_();
}
Tensor targets() { return from_vector<int64_t>({2, 0, -100, 1}, {4}); }

TEST(Losses, NllLossMatchesPyTorch) {
  const Tensor w = make({0.5, 2.0, 1.5}, {3});
  const std::vector<double> g_sum = {0.262935588210055,
                                     0.05866885990603117,
                                     -0.3216044481160862,
                                     -0.14834301198911304,
                                     0.10075141391452547,
                                     0.047591598074587495,
                                     0.0,
                                     0.0,
                                     0.0,
                                     0.8446375965030364,
                                     -1.1553624034969636,
                                     0.3107248069939272};
  struct Want {
    std::string reduction;
    std::vector<double> loss, grad;
  };
  const std::vector<Want> wants = {
      {"mean",
       {0.5654831212509097},
       {0.06573389705251376, 0.014667214976507793, -0.08040111202902155, -0.03708575299727826,
        0.025187853478631367, 0.011897899518646874, 0.0, 0.0, 0.0, 0.2111593991257591,
        -0.2888406008742409, 0.0776812017484818}},
      {"sum", {2.261932485003639}, g_sum},
      {"none", {0.36196694498573556, 0.1759759319014009, 0.0, 1.7239896081165023}, g_sum},
  };
  for (const Want& want : wants) {
    Tensor x = logits();
    Tensor loss = nll_loss(log_softmax(x, 1), targets(), w, -100, want.reduction);
    expect_close(vals(loss), want.loss, 1e-14);
    sum(loss).backward();
    expect_close(vals(x.grad()), want.grad, 1e-14);
  }
  Tensor x = logits();
  Tensor loss = nll_loss(log_softmax(x, 1), targets());  // no weights: mean over 3 targets
  expect_close(vals(loss), {0.4850859881727367}, 1e-14);
  loss.backward();
  expect_close(vals(x.grad()),
               {0.05843013071334556, 0.013037524423562482, -0.07146765513690803,
                -0.09889534132607536, 0.0671676092763503, 0.031727732049724996, 0.0, 0.0, 0.0,
                0.14077293275050606, -0.19256040058282725, 0.051787467832321195},
               1e-14);
  // As PyTorch: cross_entropy is nll_loss of log_softmax.
  expect_close(vals(cross_entropy(logits(), targets())), {0.4850859881727367}, 1e-14);
  expect_error_mentions(
      [] {
        nll_loss(logits(), from_vector<int64_t>({3, 0, 0, 0}, {4}));
      },
      "target 3 is out of bounds for 3 classes");
  expect_error_mentions(
      [] {
        nll_loss(logits(), targets(), make({1, 2}, {2}));
      },
      "weight must be a [3] tensor");
}

TEST(Losses, BinaryCrossEntropyWithLogitsMatchesPyTorch) {
  auto z = [] { return make({0.5, -30.0, 2.0, 40.0, 0.0, -0.5}, {2, 3}).requires_grad_(); };
  auto t = [] { return make({1.0, 0.0, 0.3, 0.0, 1.0, 0.9}, {2, 3}).requires_grad_(); };
  const Tensor w = make({1.0, 0.5, 2.0}, {3}), pw = make({3.0, 1.0, 0.25}, {3});
  const std::vector<double> gz_sum = {
      -1.132622006394436,  4.6788114844196494e-14, 1.2152354708657176, 1.0, -0.25,
      -0.20459856528120546};
  const std::vector<double> gt_sum = {0.4481539683602134,  15.0, -4.190392016564459, -40.0, 0.0,
                                      -0.46111547627016003};
  struct Want {
    std::string reduction;
    std::vector<double> loss, gz, gt;
  };
  const std::vector<Want> wants = {
      {"mean",
       {7.549782166609003},
       {-0.18877033439907268, 7.798019140699416e-15, 0.20253924514428626, 0.16666666666666666,
        -0.041666666666666664, -0.03409976088020091},
       {0.07469232806003556, 2.5, -0.6983986694274099, -6.666666666666667, 0.0, -0.07685257937836}},
      {"sum", {45.298692999654016}, gz_sum, gt_sum},
      {"none",
       {1.42223095254032, 4.618527782440651e-14, 2.996738417116607, 40.0, 0.34657359027997264,
        0.5331500397170693},
       gz_sum,
       gt_sum},
  };
  for (const Want& want : wants) {
    Tensor x = z(), y = t();
    Tensor loss = binary_cross_entropy_with_logits(x, y, w, want.reduction, pw);
    expect_close(vals(loss), want.loss, 1e-13);
    sum(loss).backward();
    expect_close(vals(x.grad()), want.gz, 1e-13);
    expect_close(vals(y.grad()), want.gt, 1e-13);
  }
  Tensor x = z();
  Tensor loss = binary_cross_entropy_with_logits(x, t().detach());
  expect_close(vals(loss), {7.26970485999387}, 1e-14);
  loss.backward();
  expect_close(vals(x.grad()),
               {-0.0629234447996909, 1.559603828139883e-14, 0.09679951299631373,
                0.16666666666666666, -0.08333333333333333, -0.0870765552003091},
               1e-14);
  expect_error_mentions(
      [&] {
        binary_cross_entropy_with_logits(z(), make({1, 0}, {2}));
      },
      "Target size ([2]) must be the same as input size ([2, 3])");
}

TEST(Losses, CompiledEqualsEager) {
  NoGradGuard no_grad;  // compiled inference
  const Tensor x = logits().detach().to(float32), t = targets();
  auto f = compile([](const Tensor& a, const Tensor& b) {
    return nll_loss(log_softmax(a, 1), b, std::nullopt, -100, "sum");
  });
  expect_close(vals(f(x, t)), vals(nll_loss(log_softmax(x, 1), t, std::nullopt, -100, "sum")),
               1e-6);
  EXPECT_EQ(f.stats().graph_breaks, 0);
  const Tensor z = make({0.5, -30.0, 2.0, 40.0, 0.0, -0.5}, {2, 3}, float32);
  const Tensor y = make({1.0, 0.0, 0.3, 0.0, 1.0, 0.9}, {2, 3}, float32);
  auto g = compile([](const Tensor& a, const Tensor& b) {
    return binary_cross_entropy_with_logits(a, b, std::nullopt, "none");
  });
  expect_close(vals(g(z, y)), vals(binary_cross_entropy_with_logits(z, y, std::nullopt, "none")),
               1e-6);
  EXPECT_EQ(g.stats().graph_breaks, 0);
}

}  // namespace
