// scratch
#include <gtest/gtest.h>

#include "compile_test_util.h"
#include "nn/models.h"
#include "smelt/optim.h"
#include "smelt/smelt.h"

using namespace smelt;

namespace {
const std::string kShared = SMELT_SHARED_DIR;

void run(const std::string& which) {
  smelt_test::ScopedEnv cache("SMELT_CACHE_DIR", smelt_test::suite_cache_dir());
  auto data = models::SharedData::load(kShared, "digits_mlp");
  auto refs = models::SharedData::load(kShared, "training");
  Tensor x = data.at("x_train"), y = data.at("y_train");
  auto make = [&](nn::Sequential& m) -> std::unique_ptr<optim::Optimizer> {
    m = models::make_digits_mlp();
    nn::StateDict init;
    for (const auto& [name, p] : m->named_parameters()) init[name] = refs.at("digits/init/" + name);
    m->load_state_dict(init);
    if (which == "sgd")
      return std::make_unique<optim::SGD>(m->parameters(), optim::SGDOptions(0.1));
    if (which == "nesterov")
      return std::make_unique<optim::SGD>(
          m->parameters(), optim::SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(1e-4));
    return std::make_unique<optim::Adam>(m->parameters(), optim::AdamOptions(3e-3));
  };
  nn::Sequential me{nullptr}, mc{nullptr};
  auto oe = make(me);
  auto oc = make(mc);
  auto step = compile([&](const Tensor& xb, const Tensor& yb) {
    oc->zero_grad();
    Tensor loss = cross_entropy(mc(xb), yb);
    loss.backward();
    oc->step();
    return loss;
  });
  const std::vector<double> want =
      refs.at("digits/" + (which == "nesterov" ? std::string("sgd_momentum_nesterov_wd") : which) +
              "/losses")
          .to_vector<double>();
  double worst = 0, worst_t = 0;
  for (int s = 0; s < 50; ++s) {
    oe->zero_grad();
    Tensor le = cross_entropy(me(x), y);
    le.backward();
    oe->step();
    Tensor lc = step(x, y);
    double a = le.item<double>(), b = lc.item<double>();
    worst = std::max(worst, std::abs(a - b) / std::abs(a));
    worst_t = std::max(worst_t, std::abs(b - want[s]) / want[s]);
    if (s < 3) std::printf("step %d eager %.9g compiled %.9g torch %.9g\n", s, a, b, want[s]);
  }
  std::printf(
      "%s: worst rel eager-compiled %.3g, compiled-torch %.3g; compiles %d recompiles %d (%s) "
      "kernels %d eager_ops %d\n",
      which.c_str(), worst, worst_t, step.stats().compiles, step.stats().recompiles,
      step.stats().last_recompile_reason.c_str(), step.stats().kernels, step.stats().eager_ops);
  for (auto& k : step.stats().kernel_names) std::printf(" %s", k.c_str());
  std::printf("\n");
}
TEST(CompiledTraining, Sgd) { run("sgd"); }
TEST(CompiledTraining, Nesterov) { run("nesterov"); }
TEST(CompiledTraining, Adam) { run("adam"); }
}  // namespace
