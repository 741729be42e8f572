// BERT's basic tokenizer: normalization and pre-tokenization (see bert_basic.h).
#include "text/bert_basic.h"

#include "text/unicode.h"

namespace smelt::text {

bool is_cjk_ideograph(char32_t c) {
  // The ranges of Hugging Face tokenizers' is_chinese_char (normalizers/bert.rs),
  // which sentence-transformers runs: Google's BERT (tokenization.py) starts
  // the sixth range at 0x2B820, tokenizers at 0x2B920; we follow tokenizers.
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

namespace {

bool is_bert_whitespace(char32_t c) {
  return c == U'\t' || c == U'\n' || c == U'\r' || unicode::is_whitespace(c);
}

bool is_bert_control(char32_t c) {
  if (c == U'\t' || c == U'\n' || c == U'\r') return false;  // whitespace, not control
  return unicode::is_other(c);
}

/// ASCII punctuation (Rust's is_ascii_punctuation: !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~,
/// which includes symbols such as $ + < = > ^ ` | ~) or Unicode P*.
bool is_bert_punctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126))
    return true;
  return unicode::is_punctuation(c);
}

}  // namespace

std::u32string bert_normalize(std::u32string_view text, const BertNormalizerOptions& opts) {
  std::u32string s;
  s.reserve(text.size());
  for (char32_t c : text) {
    if (opts.clean_text) {
      if (c == 0 || c == 0xFFFD || is_bert_control(c)) continue;
      if (is_bert_whitespace(c)) c = U' ';
    }
    if (opts.handle_chinese_chars && is_cjk_ideograph(c)) {
      s.push_back(U' ');
      s.push_back(c);
      s.push_back(U' ');
    } else {
      s.push_back(c);
    }
  }
  if (opts.strip_accents.value_or(opts.lowercase)) {
    std::u32string d = unicode::nfd(s);
    s.clear();
    for (char32_t c : d)
      if (!unicode::is_nonspacing_mark(c)) s.push_back(c);
  }
  if (opts.lowercase) s = unicode::to_lower(s);
  return s;
}

std::vector<std::u32string> bert_pre_tokenize(std::u32string_view text) {
  std::vector<std::u32string> words;
  std::u32string cur;
  auto flush = [&] {
    if (!cur.empty()) words.push_back(std::move(cur));
    cur.clear();
  };
  for (char32_t c : text) {
    if (is_bert_whitespace(c)) {
      flush();
    } else if (is_bert_punctuation(c)) {
      flush();
      words.emplace_back(1, c);
    } else {
      cur.push_back(c);
    }
  }
  flush();
  return words;
}

}  // namespace smelt::text
