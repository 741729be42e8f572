// smelt/text/wordpiece.h — the WordPiece tokenizer of BERT models, driven by a
// Hugging Face `tokenizer.json`, giving the same ids as the `tokenizers`
// library (what sentence-transformers and transformers run).
//
//   auto tok = smelt::text::WordPieceTokenizer::from_file("all-MiniLM-L6-v2/tokenizer.json");
//   auto batch = tok.encode_batch({"A man is eating food.", "naïve café"}, 256);
//   // batch.input_ids [2, T] int64: [CLS] a man is eating food . [SEP] [PAD]...
//
// Steps, for each text (as the tokenizers library does):
//  1. special tokens written literally in the text ("[MASK]", "[SEP]", ...)
//     are cut out and kept whole (tokenizer.json's "added_tokens" that are
//     special and not normalized);
//  2. the rest is normalized and split into words by BERT's basic tokenizer
//     (clean-up of control characters, spaces around CJK ideographs, accents
//     stripped through Unicode NFD, lower-casing; split on white space and
//     punctuation; see the "normalizer" section of tokenizer.json);
//  3. each word becomes the longest vocabulary pieces, left to right, later
//     pieces carrying the "##" prefix; a word that cannot be covered, or is
//     longer than max_input_chars_per_word, becomes [UNK];
//  4. truncation to `max_length` tokens counting the special tokens, then the
//     template ([CLS] text [SEP] for BERT) with its type ids;
//  5. for a batch, padding with [PAD] (id from "padding" or the [PAD] token)
//     to the longest text or to a fixed length; attention_mask is 1 on real
//     tokens and 0 on padding.
// Unicode comes from ICU. Text is UTF-8; ill-formed bytes count as U+FFFD,
// which step 2 removes.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "smelt/tensor.h"

namespace smelt::text {

/// One encoded text.
struct Encoding {
  std::vector<int64_t> ids;             // with the template's special tokens
  std::vector<std::string> tokens;      // the same, as strings ("[CLS]", "un", "##able", ...)
  std::vector<int64_t> type_ids;        // segment of each token (0 for single texts)
  std::vector<int64_t> attention_mask;  // 1 for each token (an unpadded encoding)
};

/// A padded batch, as `tokenizer(texts, padding=True, return_tensors="pt")`
/// returns it: three int64 tensors of shape [batch, length].
struct BatchEncoding {
  Tensor input_ids;
  Tensor attention_mask;
  Tensor token_type_ids;
};

class WordPieceTokenizer {
 public:
  /// Reads a Hugging Face tokenizer.json whose model is "WordPiece", with a
  /// "BertNormalizer" (or none), a "BertPreTokenizer" and a
  /// "TemplateProcessing" or "BertProcessing" post-processor (or none): the
  /// layout of every BERT tokenizer. Its "truncation" and "padding" defaults
  /// are not used (the calls below say how to truncate and pad), except the
  /// padding id. Added tokens are matched in the raw text (their lstrip/rstrip
  /// flags change nothing after BERT's white-space split); single_word ones
  /// are refused. Error naming the file and the field for anything missing or
  /// unsupported.
  static WordPieceTokenizer from_file(const std::string& path);
  /// The same from the JSON text itself; `source` names it in errors.
  static WordPieceTokenizer from_json(const std::string& json, const std::string& source = "json");

  /// The word pieces of `text` (steps 1-3), without special tokens or truncation.
  std::vector<std::string> tokenize(const std::string& text) const;
  /// Steps 1-4 for one text. `max_length` counts the special tokens (must be
  /// at least their number; Error otherwise); nullopt: no truncation.
  Encoding encode(const std::string& text, std::optional<int64_t> max_length = std::nullopt) const;
  /// Steps 1-5 for a batch, truncating each text to `max_length` tokens and
  /// padding to the longest one (or, when `pad_to_max_length`, to exactly
  /// `max_length`). An empty batch gives [0, 0] tensors (or [0, max_length]).
  BatchEncoding encode_batch(const std::vector<std::string>& texts,
                             std::optional<int64_t> max_length = std::nullopt,
                             bool pad_to_max_length = false) const;

  /// The id of `token`, or nullopt when it is not in the vocabulary.
  std::optional<int64_t> token_to_id(const std::string& token) const;
  /// The token of `id`; Error if id is out of range.
  const std::string& id_to_token(int64_t id) const;
  int64_t vocab_size() const;
  int64_t pad_token_id() const;
  int64_t unk_token_id() const;
  /// Tokens the template adds to a single text (2 for BERT's [CLS] ... [SEP]).
  int64_t num_special_tokens() const;

  WordPieceTokenizer(WordPieceTokenizer&&) noexcept;
  WordPieceTokenizer& operator=(WordPieceTokenizer&&) noexcept;
  WordPieceTokenizer(const WordPieceTokenizer&);
  WordPieceTokenizer& operator=(const WordPieceTokenizer&);
  ~WordPieceTokenizer();

 private:
  struct State;
  explicit WordPieceTokenizer(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace smelt::text
