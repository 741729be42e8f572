// `smelt demo`: the seed model run eagerly, the benchmarks (inference and a
// training step), a short training run against PyTorch's loss curve, then
// smelt against PyTorch on the reference models of <shared>/data. One
// function per section; each model check returns whether smelt agreed with PyTorch.
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
#include "smelt/autograd.h"
#include "smelt/compile.h"
#include "smelt/smelt.h"

namespace smelt::cli {

namespace {

constexpr double kRelTolF32 = 1e-5;     // max|smelt - torch| / max|torch|, float32 models
constexpr double kRelTolF64 = 1e-12;    // same weights run in float64
constexpr double kAbsTolMiniLM = 1e-5;  // max|smelt - sentence-transformers|, float32
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

// all-MiniLM-L6-v2 against sentence-transformers on minilm_refs' 18 sentences.
bool check_minilm(const std::string& shared, nn::SentenceEncoder enc, bool compiled) {
  const auto sentences = models::minilm_ref_sentences(shared);
  auto refs = models::SharedData::load(shared, "minilm_refs");
  enc.set_compiled(compiled);
  const std::string name = compiled ? "all-MiniLM-L6-v2 (compiled)" : "all-MiniLM-L6-v2";
  auto batch = enc.tokenizer.encode_batch(sentences, enc.max_seq_length);
  bool ok_ids =
      batch.input_ids.sizes() == refs.at("input_ids").sizes() &&
      batch.input_ids.to_vector<int64_t>() == refs.at("input_ids").to_vector<int64_t>() &&
      batch.attention_mask.to_vector<int64_t>() == refs.at("attention_mask").to_vector<int64_t>();
  if (!compiled)
    print_row(name, "token ids, masks",
              fmt::format("{} sentences, {} tokens: {}", sentences.size(), batch.input_ids.size(1),
                          ok_ids ? "identical" : "different"),
              ok_ids);
  if (!ok_ids) return false;
  auto [h, e] = enc.forward(batch);
  auto ah = models::compare_masked(h, refs.at("last_hidden_state"), refs.at("attention_mask"));
  auto ae = models::compare(e, refs.at("embeddings"));
  // The bound is absolute: 1e-5 on every element.
  auto abs_result = [](const models::Agreement& a) {
    return fmt::format("max abs {:.2e}  (tol {:.0e} abs)", a.max_abs_err, kAbsTolMiniLM);
  };
  const bool ok_h = ah.max_abs_err < kAbsTolMiniLM, ok_e = ae.max_abs_err < kAbsTolMiniLM;
  print_row(compiled ? name : "", "last hidden state", abs_result(ah), ok_h);
  print_row("", "embeddings (batch)", abs_result(ae), ok_e);
  // One sentence at a time: padding must not change an embedding.
  models::Agreement worst;
  for (size_t i = 0; i < sentences.size(); ++i) {
    auto a = models::compare(enc.encode({sentences[i]})[0],
                             refs.at("embeddings")[static_cast<int64_t>(i)]);
    worst.max_abs_err = std::max(worst.max_abs_err, a.max_abs_err);
  }
  const bool ok_one = worst.max_abs_err < kAbsTolMiniLM;
  print_row("", "embeddings (one each)", abs_result(worst), ok_one);
  return ok_h && ok_e && ok_one;
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
  ok &= guarded("all-MiniLM-L6-v2", [&] {
    auto enc = load_sentence_encoder("");
    return check_minilm(shared, enc, false) && check_minilm(shared, enc, true);
  });
  fmt::print("\n  {}\n", ok ? "all models agree with PyTorch"
                            : "MISMATCH: at least one model disagrees with PyTorch");
  return ok;
}

// ---- section 3: sentence embeddings ---------------------------------------------------------

/// Median and best time of `runs` calls of f (after one warm-up), in ms.
std::pair<double, double> run_times(const std::function<void()>& f, int runs) {
  f();
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) t.push_back(time_ms(f));
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front()};
}

bool section_sentence_embeddings() {
  const std::vector<std::string> sentences = {"A man is eating food.",
                                              "A man is eating a piece of bread.",
                                              "A man is riding a horse.",
                                              "A woman is playing violin.",
                                              "A monkey is playing drums.",
                                              "Kernel fusion keeps intermediates in registers.",
                                              "torch.compile generates Triton kernels for GPUs."};
  print_title(fmt::format("Sentence embeddings: all-MiniLM-L6-v2 ({} sentences, one batch)",
                          sentences.size()));
  auto enc = load_sentence_encoder("");
  Tensor e = enc.encode(sentences);
  Tensor cos = matmul(e, e.t());  // unit rows: cosine similarities
  auto c = cos.to_vector<double>();
  const auto n = static_cast<int64_t>(sentences.size());
  fmt::print("  cosine similarity\n  {:>4}", "");
  for (int64_t j = 0; j < n; ++j) fmt::print(" {:>6}", fmt::format("[{}]", j));
  fmt::print("\n");
  for (int64_t i = 0; i < n; ++i) {
    fmt::print("  {:>4}", fmt::format("[{}]", i));
    for (int64_t j = 0; j < n; ++j) fmt::print(" {:>6.3f}", c[i * n + j]);
    fmt::print("   {}\n", sentences[i]);
  }
  // Time per batch: the same batch eagerly and compiled (compiled first once:
  // the first call traces, generates and builds the kernels or loads them from
  // the disk cache).
  auto batch = enc.tokenizer.encode_batch(sentences, enc.max_seq_length);
  const auto [eager, eager_best] = run_times([&] { enc.forward(batch); }, kTimedRuns);
  nn::SentenceEncoder compiled = enc;
  compiled.set_compiled(true);
  const double first = time_ms([&] { compiled.forward(batch); });
  const auto [comp, comp_best] = run_times([&] { compiled.forward(batch); }, kTimedRuns);
  Tensor ec = std::get<1>(compiled.forward(batch));
  const double diff = models::compare(ec, e).max_abs_err;
  fmt::print(
      "\n  time per batch of {} sentences ({} tokens; compiled pads to a multiple of 32), "
      "median (best) of {} runs:\n",
      n, batch.input_ids.size(1), kTimedRuns);
  fmt::print("    eager     {:8.1f} ms ({:.1f})\n", eager, eager_best);
  fmt::print(
      "    compiled  {:8.1f} ms ({:.1f})   {:.2f}x; {} kernels; first compiled call {:.0f} ms\n",
      comp, comp_best, eager / comp, compiled.compile_stats().kernels, first);
  fmt::print("  compiled vs eager embeddings: max abs difference {:.2e}\n", diff);
  return diff < kAbsTolMiniLM;
}

}  // namespace

int cmd_demo(const std::string& shared_dir) {
  NoGradGuard no_grad;  // inference (module parameters require grad)
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
  ok &= guarded("training", [&] {
    print_title(
        "Training: the digits MLP from PyTorch's initial weights, eager and compiled (smelt "
        "train digits)");
    TrainOptions t;
    t.shared_dir = shared_dir;
    return cmd_train(t) == 0;
  });
  ok &= section_pytorch_agreement(shared_dir);
  ok &= guarded("sentence embeddings", section_sentence_embeddings);
  return ok ? 0 : 1;
}

}  // namespace smelt::cli
