// The ../shared/data reference models rebuilt with smelt::nn.
#include "nn/models.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/tensor_impl.h"
#include "smelt/io.h"

namespace smelt::models {

// ---- data -----------------------------------------------------------------------------

const Tensor& SharedData::at(const std::string& key) const {
  auto it = tensors.find(key);
  SMELT_CHECK(it != tensors.end(), "SharedData: {}.safetensors has no tensor \"{}\"", name, key);
  return it->second;
}

nn::StateDict SharedData::weights_for(const nn::Module& model) const {
  nn::StateDict out;
  for (const auto& nt : model.named_parameters_and_buffers()) {
    auto it = tensors.find(nt.name);
    if (it != tensors.end()) out.emplace(nt.name, it->second);
  }
  return out;
}

SharedData SharedData::load(const std::string& shared_dir, const std::string& name) {
  SharedData d;
  d.name = name;
  d.tensors = load_safetensors(shared_dir + "/data/" + name + ".safetensors");
  return d;
}

double digits_test_accuracy(const std::string& shared_dir) {
  const std::string path = shared_dir + "/data/models.json";
  std::ifstream f(path);
  SMELT_CHECK(f.good(), "digits_test_accuracy: cannot open {}", path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
    return j.at("digits_mlp").at("test_accuracy").get<double>();
  } catch (const nlohmann::json::exception& e) {
    detail::throw_error(fmt::format("digits_test_accuracy: {} has no digits_mlp.test_accuracy ({})",
                                    path, e.what()));
  }
}

std::vector<std::string> minilm_ref_sentences(const std::string& shared_dir) {
  const std::string path = shared_dir + "/data/minilm_refs.json";
  std::ifstream f(path);
  SMELT_CHECK(f.good(), "minilm_ref_sentences: cannot open {}", path);
  try {
    return nlohmann::json::parse(f).at("sentences").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    detail::throw_error(
        fmt::format("minilm_ref_sentences: {} has no list of sentences ({})", path, e.what()));
  }
}

// ---- builders -------------------------------------------------------------------------

nn::Sequential make_seed_mlp() {
  return nn::Sequential(nn::Linear(1024, 1024), nn::GELU(), nn::Linear(1024, 512), nn::GELU(),
                        nn::Linear(512, 10));
}

std::pair<int64_t, int64_t> DigitsRun::rows(int64_t step, int64_t n) const {
  if (batch <= 0) return {0, n};
  const int64_t per_epoch = (n + batch - 1) / batch;
  const int64_t first = step % per_epoch * batch;
  return {first, std::min(batch, n - first)};
}

const std::vector<DigitsRun>& digits_runs() {
  using P = std::vector<Tensor>;
  static const std::vector<DigitsRun> runs = {
      {"sgd",
       [](P p) { return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions(0.1)); }},
      {"sgd_momentum_nesterov_wd",
       [](P p) {
         return std::make_unique<optim::SGD>(
             std::move(p), optim::SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(1e-4));
       }},
      {"adam",
       [](P p) { return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions(3e-3)); }},
      {"adamw",
       [](P p) {
         return std::make_unique<optim::AdamW>(std::move(p),
                                               optim::AdamWOptions(3e-3).weight_decay(0.05));
       }},
      {"adam_minibatch",
       [](P p) { return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions(1e-3)); },
       64},
  };
  return runs;
}

const DigitsRun& digits_run(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& r : digits_runs()) {
    if (r.name == name) return r;
    names.push_back(r.name);
  }
  detail::throw_error(fmt::format("digits_run: no run called '{}' in training.json; the runs: {}",
                                  name, fmt::join(names, ", ")));
}

double digits_run_accuracy(const std::string& shared_dir, const std::string& name) {
  const std::string path = shared_dir + "/data/training.json";
  std::ifstream f(path);
  SMELT_CHECK(f.good(), "digits_run_accuracy: cannot open {}", path);
  try {
    return nlohmann::json::parse(f)
        .at("digits")
        .at("runs")
        .at(name)
        .at("test_accuracy")
        .get<double>();
  } catch (const nlohmann::json::exception& e) {
    detail::throw_error(fmt::format(
        "digits_run_accuracy: {} has no digits.runs.{}.test_accuracy ({})", path, name, e.what()));
  }
}

nn::Sequential load_digits_init(const SharedData& training) {
  auto m = make_digits_mlp();
  nn::StateDict init;
  for (const auto& [name, p] : m->named_parameters())
    init[name] = training.at("digits/init/" + name);
  m->load_state_dict(init);
  return m;
}

nn::Sequential make_digits_mlp() {
  return nn::Sequential(nn::Linear(64, 128), nn::GELU(), nn::Linear(128, 64), nn::GELU(),
                        nn::Linear(64, 10));
}

GPT2BlockImpl::GPT2BlockImpl(int64_t n_embd, int64_t n_head)
    : Module("GPT2Block"), n_embd(n_embd), n_head(n_head) {
  SMELT_CHECK(n_embd > 0 && n_head > 0 && n_embd % n_head == 0,
              "GPT2Block: n_embd ({}) must be a positive multiple of n_head ({})", n_embd, n_head);
  ln_1 = register_module("ln_1", nn::LayerNorm(Shape{n_embd}));
  c_attn = register_module("c_attn", nn::Linear(n_embd, 3 * n_embd));
  c_proj = register_module("c_proj", nn::Linear(n_embd, n_embd));
  ln_2 = register_module("ln_2", nn::LayerNorm(Shape{n_embd}));
  c_fc = register_module("c_fc", nn::Linear(n_embd, 4 * n_embd));
  mlp_proj = register_module("mlp_proj", nn::Linear(4 * n_embd, n_embd));
}

Tensor GPT2BlockImpl::forward(const Tensor& x) {
  SMELT_CHECK(x.dim() == 3 && x.size(2) == n_embd,
              "GPT2Block: expected input [B, T, {}], got shape {}", n_embd,
              detail::shape_str(x.sizes()));
  const int64_t B = x.size(0), T = x.size(1), C = n_embd, hs = C / n_head;
  // Attention: q, k, v each [B, n_head, T, hs].
  auto qkv = split(c_attn(ln_1(x)), C, 2);
  auto heads = [&](const Tensor& t) { return t.reshape({B, T, n_head, hs}).transpose(1, 2); };
  Tensor y = scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), std::nullopt,
                                          0.0, /*is_causal=*/true);
  y = y.transpose(1, 2).contiguous().view({B, T, C});
  Tensor h = x + c_proj(y);
  // MLP.
  return h + mlp_proj(gelu(c_fc(ln_2(h)), "tanh"));
}

std::string GPT2BlockImpl::extra_repr() const {
  return fmt::format("n_embd={}, n_head={}", n_embd, n_head);
}

// ---- loaders ------------------------------------------------------------------------------

nn::Sequential load_seed_mlp(const SharedData& data) {
  auto m = make_seed_mlp();
  m->load_state_dict(data.weights_for(*m));
  return m;
}

nn::Sequential load_digits_mlp(const SharedData& data) {
  auto m = make_digits_mlp();
  m->load_state_dict(data.weights_for(*m));
  return m;
}

GPT2Block load_gpt2_block(const SharedData& data) {
  GPT2Block m(64, 4);
  m->load_state_dict(data.weights_for(*m));
  return m;
}

// ---- comparison ------------------------------------------------------------------------------

double Agreement::rel_err() const {
  if (max_abs_ref == 0) return max_abs_err == 0 ? 0.0 : INFINITY;
  return max_abs_err / max_abs_ref;
}

namespace {
/// Agreement over the elements whose index / `group` has keep[index / group] set.
Agreement agreement(const std::vector<double>& va, const std::vector<double>& vr,
                    const std::vector<int64_t>* keep, size_t group) {
  Agreement r;
  for (size_t i = 0; i < va.size(); ++i) {
    if (keep && (*keep)[i / group] == 0) continue;
    double d = std::fabs(va[i] - vr[i]);
    if (std::isnan(d)) d = INFINITY;
    r.max_abs_err = std::max(r.max_abs_err, d);
    r.max_abs_ref = std::max(r.max_abs_ref, std::fabs(vr[i]));
  }
  return r;
}
}  // namespace

Agreement compare(const Tensor& a, const Tensor& ref) {
  SMELT_CHECK(a.sizes() == ref.sizes(), "compare: shapes differ ({} vs reference {})",
              detail::shape_str(a.sizes()), detail::shape_str(ref.sizes()));
  return agreement(a.to_vector<double>(), ref.to_vector<double>(), nullptr, 1);
}

Agreement compare_masked(const Tensor& a, const Tensor& ref, const Tensor& mask) {
  SMELT_CHECK(a.sizes() == ref.sizes() && a.dim() >= 2 && mask.dim() == 2 &&
                  mask.size(0) == a.size(0) && mask.size(1) == a.size(1),
              "compare_masked: expected a and reference [B, T, ...] of one shape and mask [B, T], "
              "got {}, {} and {}",
              detail::shape_str(a.sizes()), detail::shape_str(ref.sizes()),
              detail::shape_str(mask.sizes()));
  const auto keep = mask.to_vector<int64_t>();
  const size_t group = keep.empty() ? 1 : static_cast<size_t>(a.numel()) / keep.size();
  return agreement(a.to_vector<double>(), ref.to_vector<double>(), &keep,
                   std::max<size_t>(group, 1));
}

}  // namespace smelt::models
