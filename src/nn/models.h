// The reference models of ../shared/data (made by PyTorch, described in
// models.json): builders for the same architectures in smelt::nn, loaders for
// their weights, and the inputs / expected outputs stored beside them.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "smelt/nn.h"
#include "smelt/optim.h"

namespace smelt::models {

/// Every tensor of ../shared/data/<name>.safetensors plus the numbers of models.json.
struct SharedData {
  std::string name;                       // "seed_mlp", "digits_mlp", "gpt2_block"
  std::map<std::string, Tensor> tensors;  // weights, inputs and PyTorch's outputs
  /// The tensor `key`; Error naming the file if it is absent.
  const Tensor& at(const std::string& key) const;
  bool has(const std::string& key) const { return tensors.count(key) != 0; }
  /// The tensors whose names are state_dict keys of `model` (the weights only).
  nn::StateDict weights_for(const nn::Module& model) const;

  /// Loads <shared_dir>/data/<name>.safetensors; Error if it cannot be read.
  static SharedData load(const std::string& shared_dir, const std::string& name);
};

/// models.json's "digits_mlp"."test_accuracy" (PyTorch's test accuracy, 0.9666...).
double digits_test_accuracy(const std::string& shared_dir);

/// minilm_refs.json's "sentences": the 18 sentences whose sentence-transformers
/// results minilm_refs.safetensors holds (SharedData::load(dir, "minilm_refs")).
std::vector<std::string> minilm_ref_sentences(const std::string& shared_dir);

/// One of the digits model's training runs of training.safetensors (PyTorch's,
/// described by training.json): its name, the optimizer it used over given
/// parameters, and its minibatch size (0: full batch; else minibatches in
/// stored order, the last one of each epoch shorter).
struct DigitsRun {
  std::string name;  // "sgd", "sgd_momentum_nesterov_wd", "adam", "adamw", "adam_minibatch"
  std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)> make;
  int64_t batch = 0;
  /// The rows [first, first + count) of an `n`-row training set that step `step` trains on.
  std::pair<int64_t, int64_t> rows(int64_t step, int64_t n) const;
};
/// The five runs, in training.json's order.
const std::vector<DigitsRun>& digits_runs();
/// The run called `name`; Error listing the names otherwise.
const DigitsRun& digits_run(const std::string& name);
/// training.json's test accuracy of run `name` (PyTorch's final model on x_test).
double digits_run_accuracy(const std::string& shared_dir, const std::string& name);
/// The digits model at the runs' common initial weights (training's digits/init/<param>).
nn::Sequential load_digits_init(const SharedData& training);

/// Sequential(Linear(1024,1024), GELU(), Linear(1024,512), GELU(), Linear(512,10)),
/// PyTorch default initialization (the seed model).
nn::Sequential make_seed_mlp();
/// Sequential(Linear(64,128), GELU(), Linear(128,64), GELU(), Linear(64,10)).
nn::Sequential make_digits_mlp();

/// One GPT-2 style block (pre-LayerNorm, causal multi-head self-attention,
/// tanh-GELU MLP, residuals), as models.json's gpt2_block:
///   x = x + c_proj(causal_sdpa(split(c_attn(ln_1(x))) into n_head heads))
///   x = x + mlp_proj(gelu_tanh(c_fc(ln_2(x))))
/// Input [B, T, n_embd]; children ln_1, c_attn (n_embd -> 3 n_embd, q,k,v in
/// that order), c_proj, ln_2, c_fc (n_embd -> 4 n_embd), mlp_proj.
class GPT2BlockImpl : public nn::Module {
 public:
  explicit GPT2BlockImpl(int64_t n_embd = 64, int64_t n_head = 4);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  int64_t n_embd, n_head;
  nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  nn::Linear c_attn{nullptr}, c_proj{nullptr}, c_fc{nullptr}, mlp_proj{nullptr};
};
SMELT_MODULE(GPT2Block);

/// The model built and loaded with the weights of `data` (strict: every
/// parameter must be present with PyTorch's shape and dtype).
nn::Sequential load_seed_mlp(const SharedData& data);
nn::Sequential load_digits_mlp(const SharedData& data);
GPT2Block load_gpt2_block(const SharedData& data);

/// Agreement of two tensors of the same shape (compared in float64).
struct Agreement {
  double max_abs_err = 0;  // max |a - ref|
  double max_abs_ref = 0;  // max |ref|
  /// max|a - ref| / max|ref| (0 when both are all zero): the relative error
  /// used by the model tests and the demo.
  double rel_err() const;
};
/// Error if shapes differ.
Agreement compare(const Tensor& a, const Tensor& ref);
/// The same over the real tokens only: a and ref [B, T, ...], mask [B, T]
/// (nonzero = token); positions where mask is 0 are ignored.
Agreement compare_masked(const Tensor& a, const Tensor& ref, const Tensor& mask);

}  // namespace smelt::models
