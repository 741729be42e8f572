// Sentence embeddings (see smelt/nn/sentence_encoder.h): reading a
// sentence-transformers folder, mean pooling, normalization, batching, and
// the compiled forward pass with its shape buckets.
#include "smelt/nn/sentence_encoder.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <numeric>

#include "core/tensor_impl.h"
#include "smelt/autograd.h"
#include "smelt/ops.h"

namespace smelt::nn {

namespace {

namespace fs = std::filesystem;

/// Token-length buckets of compiled calls: multiples of this many tokens.
constexpr int64_t kLengthBucket = 32;

std::string S(const Tensor& t) { return detail::shape_str(t.sizes()); }

nlohmann::json read_json(const fs::path& path) {
  std::ifstream f(path);
  SMELT_CHECK(f.good(), "SentenceEncoder: cannot open {}", path.string());
  try {
    return nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    detail::throw_error(
        fmt::format("SentenceEncoder: {} is not valid JSON ({})", path.string(), e.what()));
  }
}

/// The encoder, mean pooling and normalization: what eager and compiled calls run.
std::tuple<Tensor, Tensor> embed(BertModelImpl& model, bool normalize, const Tensor& ids,
                                 const Tensor& mask, const Tensor& types) {
  Tensor h = model.forward(ids, mask, types);
  Tensor e = mean_pooling(h, mask);
  if (normalize) e = l2_normalize(e, -1);
  return {h, e};
}

/// `t` [B, T] with `extra` more columns of `value` on the right.
Tensor pad_columns(const Tensor& t, int64_t extra, int64_t value) {
  return extra == 0 ? t : pad(t, {0, extra}, static_cast<double>(value));
}

}  // namespace

Tensor mean_pooling(const Tensor& hidden, const Tensor& attention_mask) {
  SMELT_CHECK(hidden.dim() == 3 && attention_mask.dim() == 2 &&
                  attention_mask.size(0) == hidden.size(0) &&
                  attention_mask.size(1) == hidden.size(1),
              "mean_pooling: expected hidden [B, T, H] and attention_mask [B, T], got {} and {}",
              S(hidden), S(attention_mask));
  SMELT_CHECK(is_floating(hidden.dtype()), "mean_pooling: hidden must be floating, got {}",
              dtype_name(hidden.dtype()));
  Tensor m = attention_mask.to(hidden.dtype()).unsqueeze(-1);  // [B, T, 1]
  Tensor count = clamp(sum(m, {1}), Scalar(1e-9), std::nullopt);
  return sum(hidden * m, {1}) / count;
}

Tensor l2_normalize(const Tensor& x, int64_t dim, double eps) {
  SMELT_CHECK(is_floating(x.dtype()), "l2_normalize: x must be floating, got {} {}",
              dtype_name(x.dtype()), S(x));
  Tensor norm = sqrt(sum(x * x, {dim}, /*keepdim=*/true));
  return x / clamp(norm, Scalar(eps), std::nullopt);
}

// ---- construction ------------------------------------------------------------------------

struct SentenceEncoder::CompiledForward {
  using Fn = std::function<std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&)>;
  Compiled<Fn> fn;
  bool normalize;       // what `fn` was traced with
  CompileOptions opts;  // to compile again when `normalize` changes
};

SentenceEncoder::SentenceEncoder(BertModel m, text::WordPieceTokenizer tok, int64_t max_len,
                                 bool norm)
    : model(std::move(m)), tokenizer(std::move(tok)), max_seq_length(max_len), normalize(norm) {
  SMELT_CHECK(!model.is_empty(), "SentenceEncoder: the model is an empty holder");
  SMELT_CHECK(max_seq_length >= tokenizer.num_special_tokens() &&
                  max_seq_length <= model->config.max_position_embeddings,
              "SentenceEncoder: max_seq_length {} must be in [{}, {}] (the special tokens and "
              "the model's max_position_embeddings)",
              max_seq_length, tokenizer.num_special_tokens(),
              model->config.max_position_embeddings);
}

SentenceEncoder SentenceEncoder::from_pretrained(const std::string& dir) {
  const fs::path root(dir);
  SMELT_CHECK(fs::is_directory(root),
              "SentenceEncoder::from_pretrained: {} is not a folder; pass a sentence-transformers "
              "model folder (config.json, model.safetensors, tokenizer.json)",
              dir);
  for (const char* need : {"config.json", "model.safetensors", "tokenizer.json"})
    SMELT_CHECK(fs::is_regular_file(root / need), "SentenceEncoder::from_pretrained: {} has no {}",
                dir, need);
  int64_t max_len = 256;
  if (fs::is_regular_file(root / "sentence_bert_config.json"))
    max_len = read_json(root / "sentence_bert_config.json").value("max_seq_length", max_len);
  if (fs::is_regular_file(root / "1_Pooling/config.json")) {
    auto p = read_json(root / "1_Pooling/config.json");
    const bool mean_only = p.value("pooling_mode_mean_tokens", false) &&
                           !p.value("pooling_mode_cls_token", false) &&
                           !p.value("pooling_mode_max_tokens", false) &&
                           !p.value("pooling_mode_mean_sqrt_len_tokens", false);
    SMELT_CHECK(mean_only,
                "SentenceEncoder::from_pretrained: {}/1_Pooling/config.json asks for a pooling "
                "other than mean pooling, which is not supported",
                dir);
  }
  bool norm = true;
  if (fs::is_regular_file(root / "modules.json")) {
    norm = false;
    for (const auto& m : read_json(root / "modules.json"))
      norm |= m.value("type", "") == "sentence_transformers.models.Normalize";
  }
  BertModel bert = bert_from_pretrained(dir);
  auto tok = text::WordPieceTokenizer::from_file((root / "tokenizer.json").string());
  max_len = std::min(max_len, bert->config.max_position_embeddings);
  return SentenceEncoder(std::move(bert), std::move(tok), max_len, norm);
}

// ---- running -------------------------------------------------------------------------------

void SentenceEncoder::set_compiled(bool on, CompileOptions opts) {
  if (!on) {
    compiled_.reset();
    return;
  }
  // Shape buckets (lengths x batch sizes) each need a graph: allow plenty.
  opts.recompile_limit = std::max(opts.recompile_limit, 64);
  const CompileOptions kept = opts;
  auto impl = model.ptr();
  const bool norm = normalize;
  CompiledForward::Fn fn = [impl, norm](const Tensor& ids, const Tensor& mask,
                                        const Tensor& types) {
    return embed(*impl, norm, ids, mask, types);
  };
  compiled_ = std::make_shared<CompiledForward>(
      CompiledForward{smelt::compile(impl, std::move(fn), std::move(opts)), norm, kept});
}

bool SentenceEncoder::compiled() const { return compiled_ != nullptr; }

CompileStats SentenceEncoder::compile_stats() const {
  return compiled_ ? compiled_->fn.stats() : CompileStats{};
}

std::tuple<Tensor, Tensor> SentenceEncoder::forward(const text::BatchEncoding& batch) {
  const Tensor& ids = batch.input_ids;
  SMELT_CHECK(ids.defined() && ids.dim() == 2 && batch.attention_mask.defined() &&
                  batch.attention_mask.sizes() == ids.sizes(),
              "SentenceEncoder::forward: expected input_ids and attention_mask [batch, length], "
              "got {} and {}",
              ids.defined() ? S(ids) : "undefined",
              batch.attention_mask.defined() ? S(batch.attention_mask) : "undefined");
  // The tokenizer's tensors are on the CPU: they go to the model's device.
  const Device device = model->embeddings->word_embeddings->weight.device();
  const Tensor in_ids = ids.to(device), in_mask = batch.attention_mask.to(device);
  const Tensor types =
      batch.token_type_ids.defined() ? batch.token_type_ids.to(device) : zeros_like(in_ids);
  if (!compiled_) return embed(*model, normalize, in_ids, in_mask, types);
  if (compiled_->normalize != normalize) set_compiled(true, compiled_->opts);
  // Pad the length to its bucket; padded keys are masked out, so no result changes.
  const int64_t T = ids.size(1);
  const int64_t bucket = std::max<int64_t>(
      T, std::min(max_seq_length, (T + kLengthBucket - 1) / kLengthBucket * kLengthBucket));
  const int64_t extra = bucket - T;
  auto [h, e] = compiled_->fn(pad_columns(in_ids, extra, tokenizer.pad_token_id()),
                              pad_columns(in_mask, extra, 0), pad_columns(types, extra, 0));
  return {extra ? h.narrow(1, 0, T) : h, e};
}

Tensor SentenceEncoder::encode(const std::vector<std::string>& sentences, int64_t batch_size) {
  SMELT_CHECK(batch_size >= 1, "SentenceEncoder::encode: batch_size must be >= 1, got {}",
              batch_size);
  NoGradGuard no_grad;  // inference, as sentence-transformers' encode
  const auto n = static_cast<int64_t>(sentences.size());
  if (n == 0)
    return empty({0, model->config.hidden_size}, model->embeddings->layer_norm->weight.dtype());
  // As sentence-transformers: batches of sentences of similar length (sorted
  // by length, longest first) need little padding; rows go back in order.
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return sentences[a].size() > sentences[b].size(); });
  std::vector<Tensor> parts;
  for (int64_t start = 0; start < n; start += batch_size) {
    const int64_t end = std::min(n, start + batch_size);
    std::vector<std::string> chunk;
    for (int64_t i = start; i < end; ++i) chunk.push_back(sentences[order[i]]);
    // Compiled runs over several batches keep one batch size: the last batch
    // is filled with empty sentences, whose rows are dropped.
    const auto real = static_cast<int64_t>(chunk.size());
    if (compiled_ && n > batch_size) chunk.resize(static_cast<size_t>(batch_size));
    auto batch = tokenizer.encode_batch(chunk, max_seq_length);
    Tensor e = std::get<1>(forward(batch));
    parts.push_back(real < e.size(0) ? e.narrow(0, 0, real) : e);
  }
  Tensor sorted = parts.size() == 1 ? parts[0] : cat(parts, 0);
  std::vector<int64_t> inverse(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) inverse[order[i]] = i;
  return index_select(sorted, 0, from_vector(inverse, {n}).to(sorted.device()));
}

}  // namespace smelt::nn
