// BERT's "basic tokenizer", the steps before WordPiece, as Hugging Face's
// `tokenizers` library runs them for a tokenizer.json with a BertNormalizer and
// a BertPreTokenizer (tokenizers/src/normalizers/bert.rs,
// pre_tokenizers/bert.rs):
//   normalize: drop NUL, U+FFFD and "other" characters (Cc, Cf, Cn, Co, Cs, but
//     not \t \n \r), map every White_Space character to ' ' (clean_text); put
//     spaces around CJK ideographs (handle_chinese_chars); NFD and drop Mn
//     marks (strip_accents, which defaults to `lowercase`); lower-case;
//   pre-tokenize: split on White_Space (dropped), then isolate every
//     punctuation character (ASCII punctuation or Unicode P*) as its own word.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace smelt::text {

/// The fields of tokenizer.json's "normalizer" of type "BertNormalizer".
struct BertNormalizerOptions {
  bool clean_text = true;
  bool handle_chinese_chars = true;
  std::optional<bool> strip_accents;  // nullopt: same as lowercase
  bool lowercase = true;
};

/// The normalized text (code points).
std::u32string bert_normalize(std::u32string_view text, const BertNormalizerOptions& opts);

/// The words of normalized text: whitespace-separated runs, each punctuation
/// character on its own. Never returns an empty word.
std::vector<std::u32string> bert_pre_tokenize(std::u32string_view text);

/// True for a CJK ideograph of the blocks BERT spaces out (Hangul, Hiragana
/// and Katakana are not among them); the ranges of Hugging Face tokenizers.
bool is_cjk_ideograph(char32_t c);

}  // namespace smelt::text
