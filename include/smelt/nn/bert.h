// smelt/nn/bert.h — BERT (Devlin et al. 2019, "BERT: Pre-training of Deep
// Bidirectional Transformers") as Hugging Face transformers' BertModel
// defines it, with the same module tree, so a checkpoint's state_dict names
// ("embeddings.word_embeddings.weight", "encoder.layer.0.attention.self.query.weight",
// ...) load strictly:
//
//   nn::BertModel bert = nn::bert_from_pretrained("all-MiniLM-L6-v2");  // config.json +
//   model.safetensors Tensor h = bert(input_ids, attention_mask);   // [B, T, hidden]
//   last_hidden_state
//
// The forward pass (eval mode; dropout is not applied):
//   embeddings: LayerNorm(word[ids] + token_type[type_ids] + position[0..T)), eps
//     from the config (1e-12 for BERT);
//   each encoder layer (post-LayerNorm):
//     a = LayerNorm(h + dense(sdpa(q(h), k(h), v(h), key padding mask)))
//     h = LayerNorm(a + dense(gelu(dense(a))))          (erf GELU, hidden_act "gelu")
//   with num_attention_heads heads of hidden/heads each, scale 1/sqrt(head size),
//   and padded keys (attention_mask 0) masked out of every softmax.
// Rows at padded positions are computed as well (as transformers does) and
// mean nothing; a caller pools over the mask.
//
// Each layer is an ordinary module written with smelt ops, so smelt::compile
// traces it like any other code.
#pragma once
#include <cstdint>
#include <string>

#include "smelt/nn/module.h"
#include "smelt/nn/modules.h"

namespace smelt::nn {

/// The fields of a Hugging Face BERT config.json (defaults: bert-base-uncased).
struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  double layer_norm_eps = 1e-12;
  /// "gelu" (erf form) or "gelu_new" / "gelu_pytorch_tanh" (tanh form); Error otherwise.
  std::string hidden_act = "gelu";
  int64_t pad_token_id = 0;

  /// Reads config.json. model_type must be "bert" (when present) and
  /// position_embedding_type "absolute"; Error naming the file and the field otherwise.
  static BertConfig from_file(const std::string& path);
  /// Error when sizes are not positive or hidden_size is not a multiple of the heads.
  void validate() const;
};

/// word + token-type + position embeddings, then LayerNorm.
class BertEmbeddingsImpl : public Module {
 public:
  explicit BertEmbeddingsImpl(const BertConfig& cfg);
  /// input_ids int64 [B, T]; token_type_ids int64 [B, T] or undefined (all 0).
  /// Returns float [B, T, hidden]. Error if T > max_position_embeddings.
  Tensor forward(const Tensor& input_ids, const Tensor& token_type_ids);
  Tensor forward(const Tensor& input_ids) override { return forward(input_ids, Tensor()); }

  Embedding word_embeddings{nullptr}, position_embeddings{nullptr}, token_type_embeddings{nullptr};
  LayerNorm layer_norm{nullptr};  // registered as "LayerNorm"
  Tensor position_ids;  // buffer [1, max_position_embeddings] = 0, 1, ... (checkpoints carry it)
};

/// Multi-head self-attention: query, key, value projections and scaled dot
/// product attention under the key mask.
class BertSelfAttentionImpl : public Module {
 public:
  explicit BertSelfAttentionImpl(const BertConfig& cfg);
  /// hidden [B, T, H]; mask bool [B, 1, 1, T] (true = attend) or undefined.
  /// Returns the heads' context concatenated, [B, T, H].
  Tensor forward(const Tensor& hidden, const Tensor& mask);
  Tensor forward(const Tensor& hidden) override { return forward(hidden, Tensor()); }

  int64_t num_heads, head_size;
  Linear query{nullptr}, key{nullptr}, value{nullptr};
};

/// LayerNorm(input + dense(hidden)): the output block after attention
/// (transformers' BertSelfOutput) and after the feed-forward (BertOutput).
class BertOutputImpl : public Module {
 public:
  BertOutputImpl(int64_t in_features, const BertConfig& cfg, const char* name = "BertOutput");
  using Module::forward;  // the one-argument form stays visible (and raises: needs two inputs)
  Tensor forward(const Tensor& hidden, const Tensor& input);

  Linear dense{nullptr};
  LayerNorm layer_norm{nullptr};  // registered as "LayerNorm"
};

/// self-attention then its output block.
class BertAttentionImpl : public Module {
 public:
  explicit BertAttentionImpl(const BertConfig& cfg);
  Tensor forward(const Tensor& hidden, const Tensor& mask);
  Tensor forward(const Tensor& hidden) override { return forward(hidden, Tensor()); }

  std::shared_ptr<BertSelfAttentionImpl> self;
  std::shared_ptr<BertOutputImpl> output;
};

/// act(dense(x)), hidden -> intermediate.
class BertIntermediateImpl : public Module {
 public:
  explicit BertIntermediateImpl(const BertConfig& cfg);
  Tensor forward(const Tensor& x) override;

  Linear dense{nullptr};
  std::string hidden_act;
};

/// One encoder layer: attention, intermediate, output.
class BertLayerImpl : public Module {
 public:
  explicit BertLayerImpl(const BertConfig& cfg);
  Tensor forward(const Tensor& hidden, const Tensor& mask);
  Tensor forward(const Tensor& hidden) override { return forward(hidden, Tensor()); }

  std::shared_ptr<BertAttentionImpl> attention;
  std::shared_ptr<BertIntermediateImpl> intermediate;
  std::shared_ptr<BertOutputImpl> output;
};

/// The stack of layers ("encoder.layer.<i>").
class BertEncoderImpl : public Module {
 public:
  explicit BertEncoderImpl(const BertConfig& cfg);
  Tensor forward(const Tensor& hidden, const Tensor& mask);
  Tensor forward(const Tensor& hidden) override { return forward(hidden, Tensor()); }

  ModuleList layer{nullptr};
};

/// tanh(dense(hidden[:, 0])): the [CLS] summary of pre-training (not used by
/// sentence-transformers, kept so that checkpoints load strictly).
class BertPoolerImpl : public Module {
 public:
  explicit BertPoolerImpl(const BertConfig& cfg);
  /// hidden [B, T, H] -> [B, H].
  Tensor forward(const Tensor& hidden) override;

  Linear dense{nullptr};
};

class BertModelImpl : public Module {
 public:
  /// The layers with PyTorch's default initialization (load weights before use).
  /// `add_pooling_layer` as transformers' BertModel.
  explicit BertModelImpl(const BertConfig& cfg, bool add_pooling_layer = true);

  /// input_ids int64/int32 [B, T]; attention_mask [B, T] (1 = token, 0 =
  /// padding; any integer or bool dtype) or undefined (no padding);
  /// token_type_ids [B, T] or undefined (all 0). Returns last_hidden_state
  /// [B, T, hidden] in the parameters' dtype. Error naming the shapes when
  /// they disagree.
  Tensor forward(const Tensor& input_ids, const Tensor& attention_mask,
                 const Tensor& token_type_ids = Tensor());
  Tensor forward(const Tensor& input_ids) override { return forward(input_ids, Tensor()); }

  /// Loads a transformers checkpoint (model.safetensors) with strict names,
  /// shapes and dtypes. Accepts the names with or without a "bert." prefix,
  /// and fills embeddings.position_ids when the file lacks it (newer
  /// checkpoints do not save it). Error naming the file and the keys otherwise.
  void load_pretrained(const std::string& safetensors_path);

  std::string extra_repr() const override;

  BertConfig config;
  std::shared_ptr<BertEmbeddingsImpl> embeddings;
  std::shared_ptr<BertEncoderImpl> encoder;
  std::shared_ptr<BertPoolerImpl> pooler;  // null without the pooling layer
};

SMELT_MODULE(BertEmbeddings);
SMELT_MODULE(BertLayer);
SMELT_MODULE(BertModel);

/// A BertModel built from `<dir>/config.json` without random initialization
/// (init::NoInitGuard) and loaded from `<dir>/model.safetensors`
/// (load_pretrained), in eval mode. Error naming the file that is missing or wrong.
BertModel bert_from_pretrained(const std::string& dir);

}  // namespace smelt::nn
