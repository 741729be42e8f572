// `smelt demo`: the seed model run eagerly, then smelt against PyTorch on the
// three reference models of <shared>/data. One function per section; each
// model check returns whether smelt agreed with PyTorch.
#include <fmt/format.h>

#include <filesystem>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "commands.h"
#include "core/tensor_impl.h"
#include "nn/models.h"
#include "smelt/compile.h"
#include "smelt/smelt.h"

namespace smelt::cli {

namespace {

constexpr double kRelTolF32 = 1e-5;   // max|smelt - torch| / max|torch|, float32 models
constexpr double kRelTolF64 = 1e-12;  // same weights run in float64
constexpr int kTimedRuns = 5;

void print_title(const std::string& title) {
  fmt::print("\n{}\n{}\n", title, std::string(title.size(), '-'));
}

// One aligned line of the agreement table.
void print_row(const std::string& model, const std::string& check, const std::string& result,
               bool ok) {
  fmt::print("  {:<22} {:<20} {:<48} {}\n", model, check, result, ok ? "OK" : "MISMATCH");
}

std::string error_result(const models::Agreement& a, double tol) {
  return fmt::format("max abs {:.2e}  rel {:.2e}  (tol {:.0e})", a.max_abs_err, a.rel_err(), tol);
}

// Runs `check`, turning an Error into a failed row so one broken model does not
// hide the others.
bool guarded(const std::string& model, const std::function<bool()>& check) {
  try {
    return check();
  } catch (const Error& e) {
    fmt::print("  {:<12} error: {}\n", model, e.what());
    return false;
  }
}

double time_ms(const std::function<void()>& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

// ---- section 1: the seed model, eager ---------------------------------------------------

void section_seed_model() {
  print_title(
      "Seed model: Sequential(Linear(1024,1024), GELU(), Linear(1024,512), GELU(), "
      "Linear(512,10))");
  manual_seed(0);
  auto model = nn::Sequential(nn::Linear(1024, 1024), nn::GELU(), nn::Linear(1024, 512), nn::GELU(),
                              nn::Linear(512, 10));
  Tensor x = randn({256, 1024});
  Tensor y = model(x);  // warm-up
  std::vector<double> times;
  for (int i = 0; i < kTimedRuns; ++i) times.push_back(time_ms([&] { y = model(x); }));
  std::sort(times.begin(), times.end());
  double sum = 0, sum_abs = 0;
  for (double v : y.to_vector<double>()) {
    sum += v;
    sum_abs += std::fabs(v);
  }
  fmt::print("  {:<10} randn({}) {}, manual_seed(0)\n", "input", detail::shape_str(x.sizes()),
             dtype_name(x.dtype()));
  fmt::print("  {:<10} {} {}\n", "output", detail::shape_str(y.sizes()), dtype_name(y.dtype()));
  fmt::print("  {:<10} {:.3f} ms median, {:.3f} ms best ({} runs after 1 warm-up, eager)\n", "time",
             times[times.size() / 2], times.front(), kTimedRuns);
  fmt::print("  {:<10} sum = {:.6e}   sum|y| = {:.6e}\n", "checksum", sum, sum_abs);
}

/// The model's output, eagerly or through smelt::compile (a fresh compile: the
/// kernels come from the disk cache after the first run).
template <class M>
Tensor forward(const M& model, const Tensor& x, bool compiled) {
  if (!compiled) return model(x);
  auto c = smelt::compile(model);
  return c(x);
}

// ---- section 2: agreement with PyTorch -----------------------------------------------------

bool check_seed_mlp(const std::string& shared, bool compiled) {
  auto data = models::SharedData::load(shared, "seed_mlp");
  auto model = models::load_seed_mlp(data);
  auto a = models::compare(forward(model, data.at("input"), compiled), data.at("output"));
  bool ok = a.rel_err() < kRelTolF32;
  print_row(compiled ? "seed_mlp (compiled)" : "seed_mlp", "output float32",
            error_result(a, kRelTolF32), ok);
  model->to(DType::Float64);
  auto a64 = models::compare(forward(model, data.at("input").to(DType::Float64), compiled),
                             data.at("output_f64"));
  bool ok64 = a64.rel_err() < kRelTolF64;
  print_row("", "output float64", error_result(a64, kRelTolF64), ok64);
  return ok && ok64;
}

bool check_digits_mlp(const std::string& shared, bool compiled) {
  auto data = models::SharedData::load(shared, "digits_mlp");
  auto model = models::load_digits_mlp(data);
  model->eval();
  Tensor logits = forward(model, data.at("x_test"), compiled);
  auto a = models::compare(logits, data.at("logits_test"));
  bool ok_logits = a.rel_err() < kRelTolF32;
  print_row(compiled ? "digits_mlp (compiled)" : "digits_mlp", "test logits",
            error_result(a, kRelTolF32), ok_logits);

  auto ours = argmax(logits, 1).to_vector<int64_t>();
  auto theirs = argmax(data.at("logits_test"), 1).to_vector<int64_t>();
  auto labels = data.at("y_test").to_vector<int64_t>();
  int64_t agree = 0, correct = 0, n = static_cast<int64_t>(ours.size());
  for (int64_t i = 0; i < n; ++i) {
    agree += ours[i] == theirs[i];
    correct += ours[i] == labels[i];
  }
  const double acc = n ? static_cast<double>(correct) / static_cast<double>(n) : 0.0;
  const double torch_acc = models::digits_test_accuracy(shared);
  const bool ok_acc = std::fabs(acc - torch_acc) < 1e-6;  // PyTorch stored a float32
  print_row(
      "", "test accuracy",
      fmt::format("smelt {:.2f}% ({}/{})  PyTorch {:.2f}%", 100 * acc, correct, n, 100 * torch_acc),
      ok_acc);
  const bool ok_pred = agree == n;
  print_row("", "predictions agree", fmt::format("{} / {} test images", agree, n), ok_pred);
  return ok_logits && ok_acc && ok_pred;
}

bool check_gpt2_block(const std::string& shared, bool compiled) {
  auto data = models::SharedData::load(shared, "gpt2_block");
  auto block = models::load_gpt2_block(data);
  block->eval();
  auto a = models::compare(forward(block, data.at("input"), compiled), data.at("output"));
  bool ok = a.rel_err() < kRelTolF32;
  print_row(compiled ? "gpt2_block (compiled)" : "gpt2_block", "output float32",
            error_result(a, kRelTolF32), ok);
  block->to(DType::Float64);
  auto a64 = models::compare(forward(block, data.at("input").to(DType::Float64), compiled),
                             data.at("output_f64"));
  bool ok64 = a64.rel_err() < kRelTolF64;
  print_row("", "output float64", error_result(a64, kRelTolF64), ok64);
  return ok && ok64;
}

bool section_pytorch_agreement(const std::string& shared) {
  print_title("Agreement with PyTorch (" + shared + "/data)");
  fmt::print("  {:<22} {:<20} {:<48} {}\n", "model", "check", "result", "status");
  bool ok = true;
  for (bool compiled : {false, true}) {
    ok &= guarded("seed_mlp", [&] { return check_seed_mlp(shared, compiled); });
    ok &= guarded("digits_mlp", [&] { return check_digits_mlp(shared, compiled); });
    ok &= guarded("gpt2_block", [&] { return check_gpt2_block(shared, compiled); });
  }
  fmt::print("\n  {}\n", ok ? "all models agree with PyTorch"
                            : "MISMATCH: at least one model disagrees with PyTorch");
  return ok;
}

}  // namespace

int cmd_demo(const std::string& shared_dir) {
  SMELT_CHECK(std::filesystem::is_directory(shared_dir + "/data") &&
                  std::filesystem::is_directory(shared_dir + "/golden"),
              "smelt demo: the PyTorch reference data is not at {} (expected data/ and golden/ "
              "there); pass --shared <dir>",
              shared_dir);
  fmt::print("smelt {} demo\n", SMELT_VERSION);
  bool ok = guarded("seed model", [] {
    section_seed_model();
    return true;
  });
  ok &= guarded("benchmarks", [] {
    print_title("smelt bench all (CPU, float32): eager vs compiled on the same seeded inputs");
    BenchOptions b;
    b.workload = "all";
    return cmd_bench(b) == 0;
  });
  ok &= section_pytorch_agreement(shared_dir);
  return ok ? 0 : 1;
}

}  // namespace smelt::cli
