// `smelt train digits [--run NAME] [--mode eager|compiled|both] [--steps N]`:
// trains the digits model (Sequential(Linear(64,128), GELU(), Linear(128,64),
// GELU(), Linear(64,10))) on the real digits data from PyTorch's initial
// weights with one of training.json's runs, eagerly and/or through
// smelt::compile (forward, backward and the optimizer step as one graph). A
// progress line on stderr (a terminal only), the loss per epoch, then the
// checks against PyTorch's run: every loss of the first 50 steps within 1e-4
// relative, the test accuracy within one sample, and compiled against eager:
// every loss within 1e-6 relative.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <vector>

#include "commands.h"
#include "nn/models.h"
#include "progress.h"
#include "smelt/smelt.h"

namespace smelt::cli {

namespace {

constexpr double kTorchTol = 1e-4;   // float32 training: relative, over the first 50 steps
constexpr int64_t kTorchSteps = 50;  // ... PyTorch's curve, as the issue states it
constexpr double kEagerTol = 1e-6;   // compiled vs eager, relative, every step

struct Result {
  std::vector<double> losses;
  int64_t correct = 0, tested = 0;
  double seconds = 0;       // the whole run
  double step_seconds = 0;  // the steps that compiled nothing
  int64_t timed_steps = 0;  // how many those are
  CompileStats stats;       // compiled runs
};

/// max over the first `n` steps of |a - b| / |b|.
double max_rel(const std::vector<double>& a, const std::vector<double>& b, size_t n) {
  double worst = 0;
  for (size_t i = 0; i < std::min({n, a.size(), b.size()}); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::abs(b[i]));
  return worst;
}

std::string status(bool ok) { return ok ? "OK" : "MISMATCH"; }

/// Trains once: zero_grad, cross_entropy, backward, step at every step (the
/// loss is the one before the step, as PyTorch recorded it).
Result train(const models::DigitsRun& run, const models::SharedData& data,
             const models::SharedData& refs, bool compiled, int64_t steps,
             const std::vector<double>& torch) {
  nn::Sequential model = models::load_digits_init(refs);
  auto opt = run.make(model->parameters());
  auto step = [&](const Tensor& x, const Tensor& y) {
    opt->zero_grad();
    Tensor loss = cross_entropy(model(x), y);
    loss.backward();
    opt->step();
    return loss;
  };
  auto compiled_step = smelt::compile(step);
  const Tensor x = data.at("x_train"), y = data.at("y_train");
  const int64_t n = x.size(0);
  const int64_t per_epoch = run.batch > 0 ? (n + run.batch - 1) / run.batch : 1;
  const int64_t epochs = (steps + per_epoch - 1) / per_epoch;
  // Every epoch, or about ten of them when there are many (full-batch runs: a step each).
  const int64_t every = std::max<int64_t>(1, epochs / 10);
  Progress progress(fmt::format("smelt train digits ({})", compiled ? "compiled" : "eager"), steps,
                    "steps");
  Result r;
  fmt::print("  {:>9}  {:>10}  {:>10}  {:>12}\n", "epoch", "mean loss", "last loss",
             "PyTorch last");
  const auto t0 = std::chrono::steady_clock::now();
  double epoch_sum = 0;
  for (int64_t s = 0; s < steps; ++s) {
    const auto [first, count] = run.rows(s, n);
    const Tensor xb = x.narrow(0, first, count), yb = y.narrow(0, first, count);
    const int compiles = compiled_step.stats().compiles;
    const auto t_step = std::chrono::steady_clock::now();
    const double loss = (compiled ? compiled_step(xb, yb) : step(xb, yb)).item<double>();
    if (compiled_step.stats().compiles == compiles) {
      r.step_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t_step).count();
      ++r.timed_steps;
    }
    r.losses.push_back(loss);
    epoch_sum += loss;
    const int64_t epoch = s / per_epoch + 1;
    const bool epoch_end = (s + 1) % per_epoch == 0 || s + 1 == steps;
    if (epoch_end && (epoch % every == 0 || s + 1 == steps || epoch == 1)) {
      progress.clear();
      const int64_t in_epoch = s - (epoch - 1) * per_epoch + 1;
      fmt::print("  {:>9}  {:>10.6f}  {:>10.6f}  {:>12}\n", fmt::format("{}/{}", epoch, epochs),
                 epoch_sum / static_cast<double>(in_epoch), loss,
                 static_cast<size_t>(s) < torch.size()
                     ? fmt::format("{:.6f}", torch[static_cast<size_t>(s)])
                     : "-");
      std::fflush(stdout);
    }
    if (epoch_end) epoch_sum = 0;
    progress.update(s + 1, -1);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  progress.clear();
  if (compiled) r.stats = compiled_step.stats();
  NoGradGuard no_grad;
  const auto pred = argmax(model(data.at("x_test")), 1).to_vector<int64_t>();
  const auto labels = data.at("y_test").to_vector<int64_t>();
  r.tested = static_cast<int64_t>(labels.size());
  for (size_t i = 0; i < pred.size(); ++i) r.correct += pred[i] == labels[i];
  return r;
}

}  // namespace

int cmd_train(const TrainOptions& opts) {
  EnableGradGuard grad;  // also when called from `smelt demo`, which runs under NoGradGuard
  SMELT_CHECK(opts.model == "digits",
              "smelt train: unknown model '{}'; the model trained is 'digits' (the digits MLP "
              "of training.safetensors)",
              opts.model);
  SMELT_CHECK(opts.mode == "eager" || opts.mode == "compiled" || opts.mode == "both",
              "smelt train: --mode must be eager, compiled or both, got '{}'", opts.mode);
  SMELT_CHECK(std::filesystem::is_regular_file(opts.shared_dir + "/data/training.safetensors"),
              "smelt train: PyTorch's training references are not at {}/data/training.safetensors; "
              "pass --shared <dir>",
              opts.shared_dir);
  const models::DigitsRun& run = models::digits_run(opts.run);
  auto data = models::SharedData::load(opts.shared_dir, "digits_mlp");
  auto refs = models::SharedData::load(opts.shared_dir, "training");
  const std::vector<double> torch = refs.at("digits/" + run.name + "/losses").to_vector<double>();
  const int64_t steps = opts.steps > 0 ? opts.steps : static_cast<int64_t>(torch.size());
  const double torch_acc = models::digits_run_accuracy(opts.shared_dir, run.name);
  const int64_t n = data.at("x_train").size(0);
  fmt::print(
      "smelt train digits: run {} ({}), {} steps over {} training images, from PyTorch's initial "
      "weights\n",
      run.name, run.batch > 0 ? fmt::format("minibatches of {}", run.batch) : "full batch", steps,
      n);
  bool ok = true;
  std::optional<Result> eager;
  for (bool compiled : {false, true}) {
    if (compiled ? opts.mode == "eager" : opts.mode == "compiled") continue;
    fmt::print("\n{}\n", compiled ? "compiled (smelt::compile of the training step)" : "eager");
    Result r = train(run, data, refs, compiled, steps, torch);
    const double dev = max_rel(r.losses, torch, kTorchSteps);
    const bool ok_curve = dev <= kTorchTol;
    const auto torch_correct =
        static_cast<int64_t>(std::lround(torch_acc * static_cast<double>(r.tested)));
    const bool ok_acc =
        steps < static_cast<int64_t>(torch.size()) || std::abs(r.correct - torch_correct) <= 1;
    fmt::print(
        "  losses vs PyTorch's, first {} steps: max relative difference {:.2e} (tolerance "
        "{:.0e})  {}\n",
        std::min<int64_t>(kTorchSteps, steps), dev, kTorchTol, status(ok_curve));
    fmt::print("  test accuracy {:.2f}% ({}/{}); PyTorch {:.2f}%  {}\n",
               100.0 * static_cast<double>(r.correct) / static_cast<double>(r.tested), r.correct,
               r.tested, 100 * torch_acc,
               steps < static_cast<int64_t>(torch.size()) ? "(not compared: a shorter run)"
                                                          : status(ok_acc));
    fmt::print("  {:.2f} s in all, {:.2f} ms per step", r.seconds,
               r.timed_steps ? 1e3 * r.step_seconds / static_cast<double>(r.timed_steps) : 0.0);
    if (compiled)
      fmt::print(
          " (besides the {} steps that compiled a graph, the last in {:.0f} ms); {} kernels "
          "per step where eager runs {} ops",
          steps - r.timed_steps, r.stats.last_compile_ms, r.stats.kernels, r.stats.eager_ops);
    fmt::print("\n");
    ok = ok && ok_curve && ok_acc;
    if (compiled && eager) {
      const double d = max_rel(r.losses, eager->losses, r.losses.size());
      const bool ok_eager = d <= kEagerTol && r.stats.graph_breaks == 0;
      fmt::print(
          "  compiled vs eager, every step: max relative difference {:.2e} (tolerance "
          "{:.0e}){}  {}\n",
          d, kEagerTol,
          r.stats.graph_breaks ? fmt::format("; {} graph breaks", r.stats.graph_breaks) : "",
          status(ok_eager));
      ok = ok && ok_eager;
    }
    if (!compiled) eager = std::move(r);
  }
  return ok ? 0 : 1;
}

}  // namespace smelt::cli
