// smelt/nn/sentence_encoder.h — sentence embeddings as sentence-transformers
// computes them (Reimers & Gurevych 2019, "Sentence-BERT"): tokenize, run a
// BERT encoder, average the token states over the attention mask, and
// L2-normalize.
//
//   auto enc = smelt::nn::SentenceEncoder::from_pretrained("all-MiniLM-L6-v2");
//   smelt::Tensor e = enc.encode({"A man is eating food.", "A man is riding a horse."});
//   // e [2, 384] float32, unit rows; cosine similarity = e[0] . e[1]
//   enc.set_compiled(true);   // the same through smelt::compile
//
// A pretrained folder is what the sentence-transformers package saves (and
// what tools/fetch_model.py unpacks): config.json, model.safetensors,
// tokenizer.json, and optionally sentence_bert_config.json (max_seq_length,
// default 256 tokens), 1_Pooling/config.json (must ask for mean pooling) and
// modules.json (a sentence_transformers.models.Normalize module turns the
// final normalization on; without modules.json it is on).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "smelt/compile.h"
#include "smelt/nn/bert.h"
#include "smelt/text/wordpiece.h"

namespace smelt::nn {

/// sum(hidden * mask) / max(sum(mask), 1e-9) over the tokens:
/// hidden [B, T, H] floating, attention_mask [B, T] (1 = token; integer or
/// bool). Returns [B, H] (sentence-transformers' Pooling, mean mode).
Tensor mean_pooling(const Tensor& hidden, const Tensor& attention_mask);

/// x / max(||x||_2, eps) along `dim` (torch.nn.functional.normalize with p=2).
Tensor l2_normalize(const Tensor& x, int64_t dim = -1, double eps = 1e-12);

class SentenceEncoder {
 public:
  /// The model and tokenizer of a sentence-transformers folder (see above).
  /// Error naming the folder and the file that is missing or unsupported.
  static SentenceEncoder from_pretrained(const std::string& dir);
  SentenceEncoder(BertModel model, text::WordPieceTokenizer tokenizer, int64_t max_seq_length = 256,
                  bool normalize = true);

  /// Embeddings of `sentences`, [N, hidden] float (the model's dtype), on the
  /// model's device (`model->to(Device("cuda"))` runs it on a GPU), row i
  /// for sentence i. As sentence-transformers, sentences are sorted by length
  /// and run in batches of `batch_size`, each padded to its longest sentence
  /// (truncated to max_seq_length tokens). An empty list gives [0, hidden].
  /// Runs with grad mode off (inference; no graph is recorded).
  Tensor encode(const std::vector<std::string>& sentences, int64_t batch_size = 32);

  /// (last_hidden_state [B, T, hidden], embeddings [B, hidden]) of a
  /// tokenized batch, eagerly or compiled (set_compiled), on the model's
  /// device (the batch's tensors are moved there).
  std::tuple<Tensor, Tensor> forward(const text::BatchEncoding& batch);

  /// Runs forward() through smelt::compile from now on (or eagerly again).
  /// Compiled calls pad the batch to a multiple of 32 tokens (at most
  /// max_seq_length) and to `batch_size` rows in encode(), so a handful of
  /// shapes covers every input: each new shape compiles once (its kernels
  /// are then cached on disk). Padding never changes a sentence's result.
  void set_compiled(bool on, CompileOptions opts = {});
  bool compiled() const;
  /// Statistics of the compiled function (zeros before its first call).
  CompileStats compile_stats() const;

  BertModel model{nullptr};
  text::WordPieceTokenizer tokenizer;
  int64_t max_seq_length = 256;
  bool normalize = true;

 private:
  struct CompiledForward;
  std::shared_ptr<CompiledForward> compiled_;
};

}  // namespace smelt::nn
