// Training a model, eagerly and compiled: the digits MLP (8x8 images of
// handwritten digits, 10 classes) trained by Adam on minibatches of 64 for 5
// epochs from PyTorch's initial weights, then the same run through
// smelt::compile, where one compiled call is a whole training step: forward,
// cross_entropy, backward and the optimizer update fused into one graph.
// Every loss is compared with the one PyTorch recorded for the same run.
//   ./build/examples/train_digits [<shared>/data]
// (the folder holding digits_mlp.safetensors and training.safetensors).
#include <smelt/smelt.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#ifndef SMELT_EXAMPLE_DATA_DIR
#define SMELT_EXAMPLE_DATA_DIR "data"
#endif

namespace nn = smelt::nn;
namespace optim = smelt::optim;
using smelt::Tensor;

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : SMELT_EXAMPLE_DATA_DIR;
  auto digits = smelt::load_safetensors(dir + "/digits_mlp.safetensors");
  auto refs = smelt::load_safetensors(dir + "/training.safetensors");
  const Tensor x = digits.at("x_train"), y = digits.at("y_train");
  const std::vector<double> torch_losses =
      refs.at("digits/adam_minibatch/losses").to_vector<double>();
  const int64_t n = x.size(0), batch = 64, steps = static_cast<int64_t>(torch_losses.size());
  const int64_t per_epoch = (n + batch - 1) / batch;

  std::vector<double> eager_losses;
  for (bool compiled : {false, true}) {
    // The model at PyTorch's initial weights, and its optimizer.
    auto model = nn::Sequential(nn::Linear(64, 128), nn::GELU(), nn::Linear(128, 64), nn::GELU(),
                                nn::Linear(64, 10));
    nn::StateDict init;
    for (const auto& [name, p] : model->named_parameters())
      init[name] = refs.at("digits/init/" + name);
    model->load_state_dict(init);
    optim::Adam opt(model->parameters(), optim::AdamOptions(1e-3));

    // One training step, written as in PyTorch. Compiled, it is one graph.
    auto step = [&](const Tensor& xb, const Tensor& yb) {
      opt.zero_grad();
      Tensor loss = smelt::cross_entropy(model(xb), yb);
      loss.backward();
      opt.step();
      return loss;
    };
    auto compiled_step = smelt::compile(step);

    std::printf("%s\n", compiled ? "compiled" : "eager");
    double worst = 0, vs_eager = 0, epoch_loss = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < steps; ++s) {
      // Minibatches in stored order, the last one of each epoch shorter.
      const int64_t first = s % per_epoch * batch, count = std::min(batch, n - first);
      const Tensor xb = x.narrow(0, first, count), yb = y.narrow(0, first, count);
      const double loss = (compiled ? compiled_step(xb, yb) : step(xb, yb)).item<double>();
      worst = std::max(worst, std::abs(loss - torch_losses[s]) / torch_losses[s]);
      if (compiled)
        vs_eager = std::max(vs_eager, std::abs(loss - eager_losses[s]) / eager_losses[s]);
      else
        eager_losses.push_back(loss);
      epoch_loss += loss;
      if ((s + 1) % per_epoch == 0) {
        std::printf("  epoch %lld: mean loss %.6f\n", static_cast<long long>((s + 1) / per_epoch),
                    epoch_loss / static_cast<double>(per_epoch));
        epoch_loss = 0;
      }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    smelt::NoGradGuard no_grad;  // evaluation
    const Tensor pred = smelt::argmax(model(digits.at("x_test")), 1);
    const double accuracy =
        smelt::mean(smelt::eq(pred, digits.at("y_test")).to(smelt::float32)).item<double>();
    std::printf("  test accuracy %.2f%%, %.2f s; every loss within %.1e of PyTorch's (relative)\n",
                100 * accuracy, seconds, worst);
    if (compiled)
      std::printf(
          "  compiled vs eager: every loss within %.1e; %d kernels per step (%d eager ops)\n",
          vs_eager, compiled_step.stats().kernels, compiled_step.stats().eager_ops);
    if (worst > 1e-4) return 1;
  }
  return 0;
}
