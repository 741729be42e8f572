// Training on a GPU against the CPU: scatter_add (bitwise, repeated indices
// in index order), the multi-tensor optimizer steps (SGD with momentum,
// Nesterov and weight decay; Adam and AdamW with amsgrad: bitwise, every
// floating dtype, tensors spanning several chunks), autograd through the
// CUDA kernels (a small MLP's gradients and the losses' backward), and a few
// optimizer steps of that MLP. Every test skips itself ("no CUDA device")
// where there is no GPU.
#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "smelt/cuda.h"
#include "smelt/nn.h"
#include "smelt/ops.h"
#include "smelt/optim.h"
#include "test_util.h"

using namespace smelt;
using smelt_test::expect_close;
using smelt_test::vals;

namespace {

const Device kGpu("cuda:0");

/// Parameter shapes of the optimizer tests: one spanning three chunks of the
/// step kernel (8192 elements each), small ones, a 0-dim one.
const std::vector<Shape> kShapes = {{20000}, {7, 3}, {1}, {}, {64, 65}};

std::vector<Tensor> make_params(DType dt, Device dev) {
  manual_seed(42);
  std::vector<Tensor> p;
  for (const Shape& s : kShapes) p.push_back(randn(s).to(dt).to(dev).requires_grad_());
  return p;
}

/// The gradients of step k (the same values on every device).
void set_grads(const std::vector<Tensor>& p, int k) {
  manual_seed(100 + k);
  for (const Tensor& t : p) t.mutable_grad() = randn(t.sizes()).to(t.dtype()).to(t.device());
}

using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

/// Runs `steps` steps on `dev`: every parameter and state tensor's values, in order.
std::vector<std::vector<double>> run(const MakeOpt& make_opt, DType dt, Device dev,
                                     const std::vector<std::string>& state, int steps = 3) {
  std::vector<Tensor> p = make_params(dt, dev);
  auto opt = make_opt(p);
  for (int k = 0; k < steps; ++k) {
    set_grads(p, k);
    opt->step();
  }
  std::vector<std::vector<double>> out;
  for (const Tensor& t : p) {
    EXPECT_EQ(t.device(), dev);
    out.push_back(vals(t));
    for (const std::string& name : state) out.push_back(vals(opt->state(t, name)));
  }
  return out;
}

template <class O, class Options>
MakeOpt maker(Options o) {
  return [o](std::vector<Tensor> p) { return std::make_unique<O>(std::move(p), o); };
}

/// The optimizer on the GPU equals the CPU's bit for bit, in every floating dtype.
void expect_same_on_gpu(const MakeOpt& make_opt, const std::vector<std::string>& state) {
  for (DType dt : {float32, float64, float16, bfloat16}) {
    const auto cpu = run(make_opt, dt, Device(), state);
    const auto gpu = run(make_opt, dt, kGpu, state);
    ASSERT_EQ(cpu.size(), gpu.size());
    for (size_t i = 0; i < cpu.size(); ++i) EXPECT_EQ(gpu[i], cpu[i]) << dtype_name(dt) << " " << i;
  }
}

}  // namespace

TEST(CudaTraining, ScatterAddEqualsTheCpuBitwise) {
  SMELT_SKIP_WITHOUT_CUDA();
  manual_seed(1);
  for (DType dt : {float32, float64, float16, bfloat16, int64, int32, int8, uint8, kBool}) {
    Tensor self = randint(0, 5, {6, 9}).to(dt);
    Tensor src = (randn({6, 9}) * 30).to(dt);
    if (dt == kBool) src = randint(0, 2, {6, 9}).to(dt);
    // Many repeats per target, so that the order of the additions shows.
    Tensor i0 = randint(0, 3, {6, 9}), i1 = randint(0, 2, {4, 7}, TensorOptions(int32));
    for (const auto& [dim, index] : {std::pair<int64_t, Tensor>{0, i0}, {1, i1}, {-1, i0}}) {
      const std::vector<double> want = vals(scatter_add(self, dim, index, src));
      EXPECT_EQ(vals(scatter_add(self.cuda(), dim, index.cuda(), src.cuda())), want)
          << dtype_name(dt) << " dim " << dim;
      // Strided src and index (transposed views).
      const std::vector<double> want_t =
          vals(scatter_add(self.t(), 0, index.t().slice(0, 0, 3), src.t()));
      EXPECT_EQ(
          vals(scatter_add(self.cuda().t(), 0, index.cuda().t().slice(0, 0, 3), src.cuda().t())),
          want_t)
          << dtype_name(dt);
    }
  }
  // float32 sums that depend on their order: 1e8 + 1 - 1e8 ...
  Tensor src = from_vector<double>({1e8, 1, -1e8, 1, 3, 1e-3}, {6}, TensorOptions(float32));
  Tensor index = from_vector<int64_t>({0, 0, 0, 0, 1, 0}, {6});
  const std::vector<double> want = vals(scatter_add(zeros({2}), 0, index, src));
  EXPECT_EQ(vals(scatter_add(zeros({2}).cuda(), 0, index.cuda(), src.cuda())), want);
  // 0-dim.
  EXPECT_EQ(
      vals(scatter_add(scalar_tensor(2.0).cuda(), 0, scalar_tensor(0, TensorOptions(int64)).cuda(),
                       scalar_tensor(5.0).cuda())),
      (std::vector<double>{7}));
}

TEST(CudaTraining, SgdStepsEqualTheCpuBitwise) {
  SMELT_SKIP_WITHOUT_CUDA();
  using optim::SGD;
  using optim::SGDOptions;
  expect_same_on_gpu(maker<SGD>(SGDOptions(0.1)), {});
  expect_same_on_gpu(maker<SGD>(SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(1e-2)),
                     {"momentum_buffer"});
  expect_same_on_gpu(
      maker<SGD>(SGDOptions(0.05).momentum(0.8).dampening(0.3).weight_decay(0.1).maximize(true)),
      {"momentum_buffer"});
}

TEST(CudaTraining, AdamAndAdamWStepsEqualTheCpuBitwise) {
  SMELT_SKIP_WITHOUT_CUDA();
  using optim::Adam;
  using optim::AdamOptions;
  using optim::AdamW;
  using optim::AdamWOptions;
  expect_same_on_gpu(maker<Adam>(AdamOptions(1e-2)), {"exp_avg", "exp_avg_sq"});
  expect_same_on_gpu(maker<Adam>(AdamOptions(1e-2).amsgrad(true).weight_decay(0.1)),
                     {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"});
  expect_same_on_gpu(maker<AdamW>(AdamWOptions(1e-2).amsgrad(true).betas({0.8, 0.99})),
                     {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"});
  expect_same_on_gpu(maker<AdamW>(AdamWOptions(3e-3).weight_decay(0.5).maximize(true)),
                     {"exp_avg", "exp_avg_sq"});
}

TEST(CudaTraining, MlpGradientsMatchTheCpu) {
  SMELT_SKIP_WITHOUT_CUDA();
  manual_seed(3);
  nn::Sequential net(nn::Linear(8, 32), nn::GELU(), nn::LayerNorm(Shape{32}), nn::Linear(32, 16),
                     nn::ReLU(), nn::Linear(16, 4));
  Tensor x = randn({24, 8});
  Tensor y = randint(0, 4, {24});
  auto loss_of = [&](Device dev) {
    Tensor logits = net->forward(x.to(dev));
    // Three losses, so that gather / scatter_add, log_softmax and sigmoid run backward.
    return cross_entropy(logits, y.to(dev)) +
           nll_loss(log_softmax(logits, 1), y.to(dev), std::nullopt, 2) +
           binary_cross_entropy_with_logits(logits, (logits.detach() > 0).to(float32));
  };
  Tensor loss = loss_of(Device());
  loss.backward();
  std::vector<std::vector<double>> want;
  for (const Tensor& p : net->parameters()) want.push_back(vals(p.grad()));
  for (const Tensor& p : net->parameters()) p.mutable_grad() = Tensor();

  net->to(kGpu);
  Tensor gloss = loss_of(kGpu);
  EXPECT_TRUE(gloss.is_cuda());
  EXPECT_NEAR(gloss.item<double>(), loss.item<double>(), 1e-5);
  gloss.backward();
  const auto params = net->parameters();
  ASSERT_EQ(params.size(), want.size());
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(params[i].grad().defined()) << i;
    EXPECT_TRUE(params[i].grad().is_cuda()) << i;
    expect_close(vals(params[i].grad()), want[i], 1e-4);
  }
}

TEST(CudaTraining, AFewAdamStepsOfAnMlpFollowTheCpu) {
  SMELT_SKIP_WITHOUT_CUDA();
  std::vector<double> losses[2];
  for (int d = 0; d < 2; ++d) {
    const Device dev = d == 0 ? Device() : kGpu;
    manual_seed(5);
    nn::Sequential net(nn::Linear(6, 16), nn::Tanh(), nn::Linear(16, 3));
    net->to(dev);
    Tensor x = randn({32, 6}).to(dev);
    Tensor y = randint(0, 3, {32}).to(dev);
    optim::AdamW opt(net->parameters(), optim::AdamWOptions(1e-2).amsgrad(true));
    for (int step = 0; step < 5; ++step) {
      opt.zero_grad();
      Tensor loss = cross_entropy(net->forward(x), y);
      loss.backward();
      opt.step();
      losses[d].push_back(loss.item<double>());
    }
  }
  expect_close(losses[1], losses[0], 1e-5);
  EXPECT_LT(losses[1].back(), losses[1].front());
}
