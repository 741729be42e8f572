// BERT's modules (see smelt/nn/bert.h): config.json, the embeddings, the
// encoder layers, the pooler, and loading a transformers checkpoint.
#include "smelt/nn/bert.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/tensor_impl.h"
#include "smelt/io.h"
#include "smelt/nn/init.h"
#include "smelt/ops.h"

namespace smelt::nn {

namespace {
std::string S(const Tensor& t) { return detail::shape_str(t.sizes()); }

bool is_index_dtype(DType t) { return t == DType::Int64 || t == DType::Int32; }
}  // namespace

// ---- config --------------------------------------------------------------------------

BertConfig BertConfig::from_file(const std::string& path) {
  std::ifstream f(path);
  SMELT_CHECK(f.good(), "BertConfig: cannot open {}; pass the model's config.json", path);
  BertConfig c;
  try {
    auto j = nlohmann::json::parse(f);
    const std::string type = j.value("model_type", "bert");
    SMELT_CHECK(type == "bert", "BertConfig: {} describes a \"{}\" model, not \"bert\"", path,
                type);
    const std::string pos = j.value("position_embedding_type", "absolute");
    SMELT_CHECK(pos == "absolute",
                "BertConfig: {}: position_embedding_type \"{}\" is not supported (only "
                "\"absolute\")",
                path, pos);
    c.vocab_size = j.value("vocab_size", c.vocab_size);
    c.hidden_size = j.value("hidden_size", c.hidden_size);
    c.num_hidden_layers = j.value("num_hidden_layers", c.num_hidden_layers);
    c.num_attention_heads = j.value("num_attention_heads", c.num_attention_heads);
    c.intermediate_size = j.value("intermediate_size", c.intermediate_size);
    c.max_position_embeddings = j.value("max_position_embeddings", c.max_position_embeddings);
    c.type_vocab_size = j.value("type_vocab_size", c.type_vocab_size);
    c.layer_norm_eps = j.value("layer_norm_eps", c.layer_norm_eps);
    c.hidden_act = j.value("hidden_act", c.hidden_act);
    if (j.contains("pad_token_id") && j.at("pad_token_id").is_number_integer())
      c.pad_token_id = j.at("pad_token_id").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    detail::throw_error(
        fmt::format("BertConfig: {} is not a valid config.json ({})", path, e.what()));
  }
  c.validate();
  return c;
}

void BertConfig::validate() const {
  SMELT_CHECK(vocab_size > 0 && hidden_size > 0 && num_hidden_layers >= 0 &&
                  num_attention_heads > 0 && intermediate_size > 0 && max_position_embeddings > 0 &&
                  type_vocab_size > 0,
              "BertConfig: sizes must be positive (vocab_size {}, hidden_size {}, "
              "num_hidden_layers {}, num_attention_heads {}, intermediate_size {}, "
              "max_position_embeddings {}, type_vocab_size {})",
              vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size,
              max_position_embeddings, type_vocab_size);
  SMELT_CHECK(hidden_size % num_attention_heads == 0,
              "BertConfig: hidden_size {} is not a multiple of num_attention_heads {}", hidden_size,
              num_attention_heads);
  SMELT_CHECK(hidden_act == "gelu" || hidden_act == "gelu_new" || hidden_act == "gelu_pytorch_tanh",
              "BertConfig: hidden_act \"{}\" is not supported; use \"gelu\", \"gelu_new\" or "
              "\"gelu_pytorch_tanh\"",
              hidden_act);
}

// ---- embeddings --------------------------------------------------------------------------

BertEmbeddingsImpl::BertEmbeddingsImpl(const BertConfig& cfg) : Module("BertEmbeddings") {
  word_embeddings = register_module("word_embeddings", Embedding(cfg.vocab_size, cfg.hidden_size));
  position_embeddings = register_module("position_embeddings",
                                        Embedding(cfg.max_position_embeddings, cfg.hidden_size));
  token_type_embeddings =
      register_module("token_type_embeddings", Embedding(cfg.type_vocab_size, cfg.hidden_size));
  layer_norm =
      register_module("LayerNorm", nn::LayerNorm(Shape{cfg.hidden_size}, cfg.layer_norm_eps));
  register_buffer("position_ids", position_ids,
                  arange(cfg.max_position_embeddings).view({1, cfg.max_position_embeddings}));
}

Tensor BertEmbeddingsImpl::forward(const Tensor& input_ids, const Tensor& token_type_ids) {
  SMELT_CHECK(input_ids.dim() == 2 && is_index_dtype(input_ids.dtype()),
              "BertEmbeddings: input_ids must be int64 or int32 [batch, length], got {} {}",
              dtype_name(input_ids.dtype()), S(input_ids));
  const int64_t T = input_ids.size(1);
  const int64_t P = position_embeddings->num_embeddings;
  SMELT_CHECK(T <= P,
              "BertEmbeddings: {} tokens exceed max_position_embeddings {}; truncate the input "
              "(the tokenizer's max_length)",
              T, P);
  // As transformers: (word + token_type) + position, then LayerNorm.
  Tensor e = word_embeddings(input_ids);
  if (token_type_ids.defined()) {
    SMELT_CHECK(
        token_type_ids.sizes() == input_ids.sizes() && is_index_dtype(token_type_ids.dtype()),
        "BertEmbeddings: token_type_ids {} {} must be int64 or int32 shaped like "
        "input_ids {}",
        dtype_name(token_type_ids.dtype()), S(token_type_ids), S(input_ids));
    e = e + token_type_embeddings(token_type_ids);
  } else {
    e = e + token_type_embeddings->weight.select(0, 0);  // every type id is 0
  }
  // Positions 0..T-1 are the first T rows of the table (position_ids[:, :T]).
  e = e + position_embeddings->weight.narrow(0, 0, T);
  return layer_norm(e);
}

// ---- attention -----------------------------------------------------------------------------

BertSelfAttentionImpl::BertSelfAttentionImpl(const BertConfig& cfg)
    : Module("BertSelfAttention"),
      num_heads(cfg.num_attention_heads),
      head_size(cfg.hidden_size / cfg.num_attention_heads) {
  query = register_module("query", Linear(cfg.hidden_size, cfg.hidden_size));
  key = register_module("key", Linear(cfg.hidden_size, cfg.hidden_size));
  value = register_module("value", Linear(cfg.hidden_size, cfg.hidden_size));
}

Tensor BertSelfAttentionImpl::forward(const Tensor& hidden, const Tensor& mask) {
  const int64_t H = num_heads * head_size;
  SMELT_CHECK(hidden.dim() == 3 && hidden.size(2) == H,
              "BertSelfAttention: expected hidden states [batch, length, {}], got {}", H,
              S(hidden));
  const int64_t B = hidden.size(0), T = hidden.size(1);
  auto heads = [&](const Tensor& t) {
    return t.view({B, T, num_heads, head_size}).transpose(1, 2);
  };
  Tensor ctx =
      scaled_dot_product_attention(heads(query(hidden)), heads(key(hidden)), heads(value(hidden)),
                                   mask.defined() ? std::optional<Tensor>(mask) : std::nullopt);
  return ctx.transpose(1, 2).reshape({B, T, H});
}

BertOutputImpl::BertOutputImpl(int64_t in_features, const BertConfig& cfg, const char* name)
    : Module(name) {
  dense = register_module("dense", Linear(in_features, cfg.hidden_size));
  layer_norm =
      register_module("LayerNorm", nn::LayerNorm(Shape{cfg.hidden_size}, cfg.layer_norm_eps));
}

Tensor BertOutputImpl::forward(const Tensor& hidden, const Tensor& input) {
  return layer_norm(dense(hidden) + input);
}

BertAttentionImpl::BertAttentionImpl(const BertConfig& cfg) : Module("BertAttention") {
  self = register_module("self", std::make_shared<BertSelfAttentionImpl>(cfg));
  output = register_module(
      "output", std::make_shared<BertOutputImpl>(cfg.hidden_size, cfg, "BertSelfOutput"));
}

Tensor BertAttentionImpl::forward(const Tensor& hidden, const Tensor& mask) {
  return output->forward(self->forward(hidden, mask), hidden);
}

// ---- feed-forward, layer, encoder, pooler ------------------------------------------------------

BertIntermediateImpl::BertIntermediateImpl(const BertConfig& cfg)
    : Module("BertIntermediate"), hidden_act(cfg.hidden_act) {
  dense = register_module("dense", Linear(cfg.hidden_size, cfg.intermediate_size));
}

Tensor BertIntermediateImpl::forward(const Tensor& x) {
  return gelu(dense(x), hidden_act == "gelu" ? "none" : "tanh");
}

BertLayerImpl::BertLayerImpl(const BertConfig& cfg) : Module("BertLayer") {
  attention = register_module("attention", std::make_shared<BertAttentionImpl>(cfg));
  intermediate = register_module("intermediate", std::make_shared<BertIntermediateImpl>(cfg));
  output = register_module("output", std::make_shared<BertOutputImpl>(cfg.intermediate_size, cfg));
}

Tensor BertLayerImpl::forward(const Tensor& hidden, const Tensor& mask) {
  Tensor a = attention->forward(hidden, mask);
  return output->forward(intermediate->forward(a), a);
}

BertEncoderImpl::BertEncoderImpl(const BertConfig& cfg) : Module("BertEncoder") {
  layer = register_module("layer", ModuleList());
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i)
    layer->push_back(std::make_shared<BertLayerImpl>(cfg));
}

Tensor BertEncoderImpl::forward(const Tensor& hidden, const Tensor& mask) {
  Tensor h = hidden;
  for (size_t i = 0; i < layer->size(); ++i)
    h = layer->at<BertLayerImpl>(static_cast<int64_t>(i))->forward(h, mask);
  return h;
}

BertPoolerImpl::BertPoolerImpl(const BertConfig& cfg) : Module("BertPooler") {
  dense = register_module("dense", Linear(cfg.hidden_size, cfg.hidden_size));
}

Tensor BertPoolerImpl::forward(const Tensor& hidden) {
  SMELT_CHECK(hidden.dim() == 3,
              "BertPooler: expected hidden states [batch, length, hidden], got {}", S(hidden));
  return tanh(dense(hidden.select(1, 0)));
}

// ---- the model ------------------------------------------------------------------------------

BertModelImpl::BertModelImpl(const BertConfig& cfg, bool add_pooling_layer)
    : Module("BertModel"), config(cfg) {
  config.validate();
  embeddings = register_module("embeddings", std::make_shared<BertEmbeddingsImpl>(config));
  encoder = register_module("encoder", std::make_shared<BertEncoderImpl>(config));
  if (add_pooling_layer)
    pooler = register_module("pooler", std::make_shared<BertPoolerImpl>(config));
  eval();  // inference model: no dropout anywhere
}

Tensor BertModelImpl::forward(const Tensor& input_ids, const Tensor& attention_mask,
                              const Tensor& token_type_ids) {
  Tensor h = embeddings->forward(input_ids, token_type_ids);
  Tensor mask;
  if (attention_mask.defined()) {
    SMELT_CHECK(
        attention_mask.sizes() == input_ids.sizes() &&
            (is_index_dtype(attention_mask.dtype()) || attention_mask.dtype() == DType::Bool),
        "BertModel: attention_mask {} {} must be an integer or bool tensor shaped like "
        "input_ids {}",
        dtype_name(attention_mask.dtype()), S(attention_mask), S(input_ids));
    // Key padding mask [B, 1, 1, T]: every query attends to the real tokens only.
    mask = attention_mask.to(DType::Bool).view({input_ids.size(0), 1, 1, input_ids.size(1)});
  }
  return encoder->forward(h, mask);
}

void BertModelImpl::load_pretrained(const std::string& path) {
  auto file = load_safetensors(path);
  StateDict state;
  for (auto& [name, t] : file) {
    // Checkpoints saved from BertFor* models prefix the encoder with "bert.".
    const bool prefixed = name.rfind("bert.", 0) == 0;
    std::string key = prefixed ? name.substr(5) : name;
    if (!prefixed && file.count("bert." + name)) continue;
    state.emplace(std::move(key), t);
  }
  if (!state.count("embeddings.position_ids"))
    state.emplace("embeddings.position_ids", embeddings->position_ids);
  if (!pooler) {
    for (auto it = state.begin(); it != state.end();)
      it = it->first.rfind("pooler.", 0) == 0 ? state.erase(it) : std::next(it);
  }
  try {
    load_state_dict(state, /*strict=*/true);
  } catch (const Error& e) {
    detail::throw_error(fmt::format("BertModel::load_pretrained: {}: {}", path, e.what()));
  }
}

BertModel bert_from_pretrained(const std::string& dir) {
  BertConfig cfg = BertConfig::from_file(dir + "/config.json");
  BertModel m = [&] {
    init::NoInitGuard no_init;  // every parameter is about to be overwritten
    return BertModel(cfg);
  }();
  m->load_pretrained(dir + "/model.safetensors");
  return m;
}

std::string BertModelImpl::extra_repr() const {
  return fmt::format(
      "hidden_size={}, num_hidden_layers={}, num_attention_heads={}, "
      "intermediate_size={}, vocab_size={}",
      config.hidden_size, config.num_hidden_layers, config.num_attention_heads,
      config.intermediate_size, config.vocab_size);
}

}  // namespace smelt::nn
