// Optimizers and learning-rate schedulers against PyTorch 2.x: three steps of
// each optimizer configuration over two parameters with fixed gradients (the
// expected parameters computed by torch.optim in float64), zero_grad, state
// dicts (a run interrupted by save/load ends where an uninterrupted one does),
// parameter groups and schedulers' learning-rate sequences.
#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "smelt/optim.h"
#include "smelt/smelt.h"
#include "test_util.h"

namespace {

using namespace smelt;
using smelt_test::expect_close;
using smelt_test::expect_error_mentions;
using smelt_test::make;
using smelt_test::vals;

using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

std::vector<Tensor> fresh_params(DType dt = float64) {
  return {make({0.5, -1.25, 2.0, 0.0, -0.75}, {5}, dt).requires_grad_(),
          make({1.0, -2.0, 0.25, 3.0}, {2, 2}, dt).requires_grad_()};
}

/// Step k's gradients (as the PyTorch script that made the references).
void set_grads(const std::vector<Tensor>& p, int k) {
  const DType dt = p[0].dtype();
  p[0].mutable_grad() = make({0.1 * (k + 1), -0.3, 0.7 - 0.2 * k, 1.5, -0.05 * k}, {5}, dt);
  p[1].mutable_grad() = make({0.5, -0.5 * k, 2.0, 0.01}, {2, 2}, dt);
}

std::vector<double> run(const MakeOpt& make_opt, int steps = 3, DType dt = float64) {
  auto p = fresh_params(dt);
  auto opt = make_opt(p);
  for (int k = 0; k < steps; ++k) {
    set_grads(p, k);
    opt->step();
  }
  std::vector<double> out = vals(p[0]);
  for (double v : vals(p[1])) out.push_back(v);
  return out;
}

template <class O, class Options>
MakeOpt maker(Options o) {
  return [o](std::vector<Tensor> p) { return std::make_unique<O>(std::move(p), o); };
}

TEST(Optim, SgdMatchesPyTorch) {
  using optim::SGD;
  using optim::SGDOptions;
  expect_close(run(maker<SGD>(SGDOptions(0.1))),
               {0.43999999999999995, -1.16, 1.8499999999999999, -0.45000000000000007, -0.735,
                0.8499999999999999, -1.8499999999999999, -0.35000000000000003, 2.9970000000000003},
               1e-14);
  expect_close(run(maker<SGD>(SGDOptions(0.1).momentum(0.9).dampening(0.1).weight_decay(0.01))),
               {0.40909250649499995, -1.0838821621874999, 1.68744830168, -0.7973656215000001,
                -0.7284672218924999, 0.7288956886899999, -1.8139089583799999, -0.8144831047025001,
                2.97873691676},
               1e-14);
  expect_close(run(maker<SGD>(SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(1e-4))),
               {0.42718531562299217, -1.1292157372820517, 1.7833067640893965, -0.6036697845128607,
                -0.7336948616357744, 0.7987364938434123, -1.8371699619453983, -0.5549031071802228,
                2.9958548008130115},
               1e-14);
  expect_close(run(maker<SGD>(SGDOptions(0.1).momentum(0.5).maximize(true))),
               {0.5775, -1.3775, 2.2274999999999996, 0.6375000000000001, -0.7675, 1.2125, -2.175,
                1.1, 3.00425},
               1e-14);
  expect_error_mentions([] { optim::SGD(fresh_params(), SGDOptions(0.1).nesterov(true)); },
                        "Nesterov momentum requires a momentum");
}

TEST(Optim, AdamAndAdamWMatchPyTorch) {
  using optim::Adam;
  using optim::AdamOptions;
  using optim::AdamW;
  using optim::AdamWOptions;
  expect_close(run(maker<Adam>(AdamOptions(0.01))),
               {0.47076816955448425, -1.220000001, 1.9709802869414528, -0.029999999799999927,
                -0.7342729088649872, 0.9700000006000001, -1.9842729058164033, 0.22000000015000007,
                2.97000002999997},
               1e-13);
  expect_close(run(maker<Adam>(
                   AdamOptions(0.01).betas({0.8, 0.99}).eps(1e-6).weight_decay(0.1).amsgrad(true))),
               {0.46999344438709667, -1.220004667220383, 1.9708712444946137, -0.029998684665046627,
                -0.7199886206924356, 0.970003298770843, -1.9712216898981374, 0.22000097378873829,
                2.9700064163143107},
               1e-13);
  expect_close(run(maker<AdamW>(AdamWOptions(0.01))),
               {0.4706211496357491, -1.21962803839865, 1.9703833246600795, -0.02999699990001993,
                -0.7340486755008503, 0.9697030304989401, -1.9836737099512058, 0.21992800754973507,
                2.96910311989397},
               1e-13);
  expect_close(run(maker<AdamW>(AdamWOptions(0.02).weight_decay(0.5).amsgrad(true).maximize(true))),
               {0.543022124537874, -1.2722757480199332, 1.9980438619917569, 0.059401999603986524,
                -0.7590296049473966, 1.0297009988119599, -1.9719033610066885, 0.3019767497029899,
                2.970298940598059},
               1e-13);
  EXPECT_EQ(AdamWOptions().weight_decay(), 1e-2);  // PyTorch's defaults
  EXPECT_EQ(AdamOptions().weight_decay(), 0.0);
  EXPECT_EQ(optim::SGDOptions().lr(), 1e-3);
}

TEST(Optim, Float32AndHalfParametersStepToo) {
  // The same update in float32 (computed in float) and bfloat16 (stored rounded).
  auto want = run(maker<optim::Adam>(optim::AdamOptions(0.01)));
  expect_close(run(maker<optim::Adam>(optim::AdamOptions(0.01)), 3, float32), want, 1e-6);
  expect_close(run(maker<optim::Adam>(optim::AdamOptions(0.01)), 3, bfloat16), want, 1e-2);
}

TEST(Optim, StepSkipsParametersWithoutGradAndRunsWithoutGrad) {
  auto p = fresh_params();
  optim::SGD opt(p, optim::SGDOptions(0.5));
  p[0].mutable_grad() = ones({5}, float64);
  opt.step();  // p[1] has no gradient: untouched
  expect_close(vals(p[0]), {0, -1.75, 1.5, -0.5, -1.25}, 1e-15);
  expect_close(vals(p[1]), {1.0, -2.0, 0.25, 3.0}, 0);
  EXPECT_TRUE(p[0].is_leaf());
  EXPECT_EQ(p[0]._version(), 1u);  // an in-place write, as PyTorch counts it
  opt.zero_grad(/*set_to_none=*/false);
  expect_close(vals(p[0].grad()), {0, 0, 0, 0, 0}, 0);
  opt.zero_grad();
  EXPECT_FALSE(p[0].grad().defined());
  // Non-leaves and repeated parameters are refused.
  expect_error_mentions([&] { optim::SGD({p[0] * 2.0}, optim::SGDOptions()); },
                        "can't optimize a non-leaf Tensor");
  expect_error_mentions(
      [&] {
        optim::SGD({p[0], p[0]}, optim::SGDOptions());
      },
      "more than one parameter group");
}

TEST(Optim, ParamGroupsHaveTheirOwnOptions) {
  auto p = fresh_params();
  optim::SGD opt({p[0]}, optim::SGDOptions(0.1));
  opt.add_param_group({p[1]}, optim::SGDOptions(1.0));
  EXPECT_EQ(opt.num_param_groups(), 2u);
  p[0].mutable_grad() = ones({5}, float64);
  p[1].mutable_grad() = ones({2, 2}, float64);
  opt.step();
  expect_close(vals(p[0]), {0.4, -1.35, 1.9, -0.1, -0.85}, 1e-15);
  expect_close(vals(p[1]), {0.0, -3.0, -0.75, 2.0}, 1e-15);
}

TEST(Optim, StateDictResumesARun) {
  const auto opts = optim::AdamOptions(0.01).amsgrad(true).weight_decay(0.1);
  const std::vector<double> want = run(maker<optim::Adam>(opts), 4);
  // Two steps, save (through a safetensors file), then two more steps in a new
  // optimizer over new parameters with the saved values.
  auto p = fresh_params();
  optim::Adam opt(p, opts);
  for (int k = 0; k < 2; ++k) {
    set_grads(p, k);
    opt.step();
  }
  const std::string path = ::testing::TempDir() + "/adam_state.safetensors";
  save_safetensors(path, opt.state_dict());
  auto sd = opt.state_dict();
  EXPECT_EQ(sd.at("state.0.step").item<double>(), 2.0);
  EXPECT_EQ(sd.at("param_groups.0.lr").item<double>(), 0.01);
  EXPECT_EQ(sd.at("state.1.exp_avg").sizes(), (Shape{2, 2}));
  auto q = fresh_params();
  {
    NoGradGuard no_grad;
    q[0].copy_(p[0]);
    q[1].copy_(p[1]);
  }
  optim::Adam resumed(q, optim::AdamOptions(0.5));  // options come from the state dict
  resumed.load_state_dict(load_safetensors(path));
  EXPECT_EQ(resumed.lr(), 0.01);
  for (int k = 2; k < 4; ++k) {
    set_grads(q, k);
    resumed.step();
  }
  std::vector<double> got = vals(q[0]);
  for (double v : vals(q[1])) got.push_back(v);
  expect_close(got, want, 1e-15);
  // A state dict of other shapes is refused, naming the key.
  optim::Adam other({zeros({3}, float64).requires_grad_(), zeros({2, 2}, float64).requires_grad_()},
                    opts);
  expect_error_mentions([&] { other.load_state_dict(sd); }, "state.0.exp_avg");
}

TEST(Optim, SchedulersFollowPyTorch) {
  auto p = fresh_params();
  optim::SGD opt(p, optim::SGDOptions(0.1));
  optim::StepLR step(opt, 3, 0.5);
  std::vector<double> lrs;
  for (int i = 0; i < 8; ++i) {
    opt.step();
    step.step();
    lrs.push_back(step.get_last_lr()[0]);
  }
  expect_close(lrs, {0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025}, 1e-15);
  EXPECT_EQ(opt.lr(), 0.025);

  optim::SGD opt2(fresh_params(), optim::SGDOptions(0.1));
  optim::CosineAnnealingLR cos(opt2, 4, 0.01);
  lrs.clear();
  for (int i = 0; i < 10; ++i) {
    cos.step();
    lrs.push_back(cos.get_last_lr()[0]);
  }
  expect_close(lrs,
               {0.08681980515339464, 0.05500000000000001, 0.023180194846605363, 0.01,
                0.023180194846605363, 0.05500000000000002, 0.08681980515339469, 0.10000000000000006,
                0.0868198051533947, 0.05500000000000005},
               1e-14);
}

}  // namespace
