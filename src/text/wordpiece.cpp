// The WordPiece tokenizer: reading tokenizer.json, cutting out added tokens,
// the greedy longest-match WordPiece split, the post-processing template,
// truncation and padding (see smelt/text/wordpiece.h). The basic tokenizer
// (normalization, word split) lives in text/bert_basic.cpp.
#include "smelt/text/wordpiece.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "smelt/ops.h"
#include "text/bert_basic.h"
#include "text/unicode.h"

namespace smelt::text {

namespace {

using json = nlohmann::json;

/// A text that is matched literally and kept whole ("[CLS]", "[MASK]", ...).
struct AddedToken {
  std::string content;
  int64_t id;
};

/// One item of the single-text template: a special token's ids, or the text.
struct TemplateItem {
  bool is_sequence = false;
  std::vector<int64_t> ids;  // special token ids (empty for the sequence)
  std::vector<std::string> tokens;
  int64_t type_id = 0;
};

}  // namespace

struct WordPieceTokenizer::State {
  std::string source;
  std::unordered_map<std::string, int64_t> vocab;
  std::vector<std::string> id_to_token;
  std::string unk_token = "[UNK]";
  int64_t unk_id = 0;
  std::string prefix = "##";
  size_t max_input_chars_per_word = 100;
  bool has_normalizer = false;
  BertNormalizerOptions normalizer;
  std::vector<AddedToken> added;  // longest content first
  std::vector<TemplateItem> single;
  int64_t num_special = 0;
  int64_t pad_id = 0;

  [[noreturn]] void fail(const std::string& what) const {
    detail::throw_error(fmt::format("WordPieceTokenizer: {}: {}", source, what));
  }

  /// WordPiece pieces of one word, appended to ids/tokens.
  void word_pieces(const std::u32string& word, std::vector<int64_t>& ids,
                   std::vector<std::string>& tokens) const {
    if (word.size() > max_input_chars_per_word) {
      ids.push_back(unk_id);
      tokens.push_back(unk_token);
      return;
    }
    const size_t first = ids.size();
    size_t start = 0;
    while (start < word.size()) {
      size_t end = word.size();
      bool found = false;
      while (start < end) {
        std::string piece = unicode::to_utf8(std::u32string_view(word).substr(start, end - start));
        if (start > 0) piece = prefix + piece;
        auto it = vocab.find(piece);
        if (it != vocab.end()) {
          ids.push_back(it->second);
          tokens.push_back(std::move(piece));
          found = true;
          break;
        }
        --end;
      }
      if (!found) {  // the whole word is unknown
        ids.resize(first);
        tokens.resize(first);
        ids.push_back(unk_id);
        tokens.push_back(unk_token);
        return;
      }
      start = end;
    }
  }

  /// Steps 2-3 on a stretch of text without added tokens.
  void encode_plain(std::string_view text, std::vector<int64_t>& ids,
                    std::vector<std::string>& tokens) const {
    std::u32string s = unicode::from_utf8(text);
    if (has_normalizer) s = bert_normalize(s, normalizer);
    for (const auto& w : bert_pre_tokenize(s)) word_pieces(w, ids, tokens);
  }

  /// Steps 1-3.
  void encode_text(const std::string& text, std::vector<int64_t>& ids,
                   std::vector<std::string>& tokens) const {
    size_t plain_start = 0;
    for (size_t i = 0; i < text.size();) {
      const AddedToken* hit = nullptr;
      for (const auto& a : added)  // longest first: the first hit is the longest
        if (text.compare(i, a.content.size(), a.content) == 0) {
          hit = &a;
          break;
        }
      if (!hit) {
        ++i;
        continue;
      }
      encode_plain(std::string_view(text).substr(plain_start, i - plain_start), ids, tokens);
      ids.push_back(hit->id);
      tokens.push_back(hit->content);
      i += hit->content.size();
      plain_start = i;
    }
    encode_plain(std::string_view(text).substr(plain_start), ids, tokens);
  }
};

namespace {

const json& field(const json& j, const char* key, std::string_view where,
                  const std::string& source) {
  if (!j.is_object() || !j.contains(key))
    detail::throw_error(
        fmt::format("WordPieceTokenizer: {}: {} has no \"{}\"", source, where, key));
  return j.at(key);
}

}  // namespace

WordPieceTokenizer::WordPieceTokenizer(std::unique_ptr<State> s) : s_(std::move(s)) {}
WordPieceTokenizer::WordPieceTokenizer(WordPieceTokenizer&&) noexcept = default;
WordPieceTokenizer& WordPieceTokenizer::operator=(WordPieceTokenizer&&) noexcept = default;
WordPieceTokenizer::WordPieceTokenizer(const WordPieceTokenizer& o)
    : s_(std::make_unique<State>(*o.s_)) {}
WordPieceTokenizer& WordPieceTokenizer::operator=(const WordPieceTokenizer& o) {
  if (this != &o) s_ = std::make_unique<State>(*o.s_);
  return *this;
}
WordPieceTokenizer::~WordPieceTokenizer() = default;

WordPieceTokenizer WordPieceTokenizer::from_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  SMELT_CHECK(f.good(), "WordPieceTokenizer: cannot open {}; pass the path of a tokenizer.json",
              path);
  std::stringstream ss;
  ss << f.rdbuf();
  return from_json(ss.str(), path);
}

WordPieceTokenizer WordPieceTokenizer::from_json(const std::string& text,
                                                 const std::string& source) {
  auto s = std::make_unique<State>();
  s->source = source;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    s->fail(fmt::format("not valid JSON ({})", e.what()));
  }
  try {
    // ---- model --------------------------------------------------------------
    const json& model = field(j, "model", "the file", source);
    const std::string type = model.value("type", "");
    if (type != "WordPiece")
      s->fail(
          fmt::format("model type is \"{}\"; only \"WordPiece\" (BERT) tokenizers are "
                      "supported",
                      type));
    const json& vocab = field(model, "vocab", "\"model\"", source);
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      const int64_t id = it.value().get<int64_t>();
      if (id < 0) s->fail(fmt::format("vocabulary token \"{}\" has negative id {}", it.key(), id));
      s->vocab.emplace(it.key(), id);
      if (static_cast<size_t>(id) >= s->id_to_token.size()) s->id_to_token.resize(id + 1);
      s->id_to_token[id] = it.key();
    }
    s->unk_token = model.value("unk_token", "[UNK]");
    s->prefix = model.value("continuing_subword_prefix", "##");
    s->max_input_chars_per_word = model.value("max_input_chars_per_word", size_t{100});
    auto unk = s->vocab.find(s->unk_token);
    if (unk == s->vocab.end())
      s->fail(fmt::format("the unknown token \"{}\" is not in the vocabulary", s->unk_token));
    s->unk_id = unk->second;

    // ---- normalizer and pre-tokenizer -----------------------------------------
    if (j.contains("normalizer") && !j.at("normalizer").is_null()) {
      const json& n = j.at("normalizer");
      if (n.value("type", "") != "BertNormalizer")
        s->fail(fmt::format("normalizer type \"{}\" is not supported; only \"BertNormalizer\"",
                            n.value("type", "")));
      s->has_normalizer = true;
      s->normalizer.clean_text = n.value("clean_text", true);
      s->normalizer.handle_chinese_chars = n.value("handle_chinese_chars", true);
      s->normalizer.lowercase = n.value("lowercase", true);
      if (n.contains("strip_accents") && !n.at("strip_accents").is_null())
        s->normalizer.strip_accents = n.at("strip_accents").get<bool>();
    }
    const json& pre = field(j, "pre_tokenizer", "the file", source);
    if (pre.is_null() || pre.value("type", "") != "BertPreTokenizer")
      s->fail("pre_tokenizer must be \"BertPreTokenizer\"");

    // ---- added tokens ------------------------------------------------------------
    if (j.contains("added_tokens"))
      for (const json& a : j.at("added_tokens")) {
        if (a.value("single_word", false))
          s->fail(fmt::format("added token \"{}\" is single_word, which is not supported",
                              a.value("content", "")));
        AddedToken t{a.at("content").get<std::string>(), a.at("id").get<int64_t>()};
        if (!t.content.empty()) s->added.push_back(std::move(t));
      }
    std::stable_sort(s->added.begin(), s->added.end(),
                     [](const AddedToken& a, const AddedToken& b) {
                       return a.content.size() > b.content.size();
                     });

    // ---- post-processor --------------------------------------------------------------
    auto special = [&](const std::string& token, int64_t id) {
      TemplateItem it;
      it.ids = {id};
      it.tokens = {token};
      return it;
    };
    TemplateItem seq;
    seq.is_sequence = true;
    if (j.contains("post_processor") && !j.at("post_processor").is_null()) {
      const json& pp = j.at("post_processor");
      const std::string pt = pp.value("type", "");
      if (pt == "BertProcessing") {
        const json& cls = field(pp, "cls", "post_processor", source);
        const json& sep = field(pp, "sep", "post_processor", source);
        s->single = {special(cls.at(0).get<std::string>(), cls.at(1).get<int64_t>()), seq,
                     special(sep.at(0).get<std::string>(), sep.at(1).get<int64_t>())};
      } else if (pt == "TemplateProcessing") {
        const json& specials = field(pp, "special_tokens", "post_processor", source);
        for (const json& item : field(pp, "single", "post_processor", source)) {
          if (item.contains("Sequence")) {
            TemplateItem t = seq;
            t.type_id = item.at("Sequence").value("type_id", int64_t{0});
            s->single.push_back(t);
          } else if (item.contains("SpecialToken")) {
            const json& st = item.at("SpecialToken");
            const std::string name = st.at("id").get<std::string>();
            const json& def =
                field(specials, name.c_str(), "post_processor.special_tokens", source);
            TemplateItem t;
            t.ids = def.at("ids").get<std::vector<int64_t>>();
            t.tokens = def.at("tokens").get<std::vector<std::string>>();
            t.type_id = st.value("type_id", int64_t{0});
            s->single.push_back(t);
          } else {
            s->fail("post_processor.single has an item that is neither Sequence nor SpecialToken");
          }
        }
      } else {
        s->fail(
            fmt::format("post_processor type \"{}\" is not supported; use "
                        "\"TemplateProcessing\" or \"BertProcessing\"",
                        pt));
      }
    } else {
      s->single = {seq};
    }
    for (const auto& t : s->single) s->num_special += static_cast<int64_t>(t.ids.size());

    // ---- padding id ---------------------------------------------------------------------
    if (j.contains("padding") && j.at("padding").is_object() && j.at("padding").contains("pad_id"))
      s->pad_id = j.at("padding").at("pad_id").get<int64_t>();
    else if (auto p = s->vocab.find("[PAD]"); p != s->vocab.end())
      s->pad_id = p->second;
  } catch (const json::exception& e) {
    s->fail(fmt::format("unexpected layout ({})", e.what()));
  }
  return WordPieceTokenizer(std::move(s));
}

std::vector<std::string> WordPieceTokenizer::tokenize(const std::string& text) const {
  std::vector<int64_t> ids;
  std::vector<std::string> tokens;
  s_->encode_text(text, ids, tokens);
  return tokens;
}

Encoding WordPieceTokenizer::encode(const std::string& text,
                                    std::optional<int64_t> max_length) const {
  std::vector<int64_t> ids;
  std::vector<std::string> tokens;
  s_->encode_text(text, ids, tokens);
  if (max_length) {
    SMELT_CHECK(*max_length >= s_->num_special,
                "WordPieceTokenizer::encode: max_length {} leaves no room for the {} special "
                "tokens; pass at least {}",
                *max_length, s_->num_special, s_->num_special);
    const auto keep = static_cast<size_t>(*max_length - s_->num_special);
    if (ids.size() > keep) {
      ids.resize(keep);
      tokens.resize(keep);
    }
  }
  Encoding e;
  for (const auto& item : s_->single) {
    if (item.is_sequence) {
      e.ids.insert(e.ids.end(), ids.begin(), ids.end());
      e.tokens.insert(e.tokens.end(), tokens.begin(), tokens.end());
      e.type_ids.insert(e.type_ids.end(), ids.size(), item.type_id);
    } else {
      e.ids.insert(e.ids.end(), item.ids.begin(), item.ids.end());
      e.tokens.insert(e.tokens.end(), item.tokens.begin(), item.tokens.end());
      e.type_ids.insert(e.type_ids.end(), item.ids.size(), item.type_id);
    }
  }
  e.attention_mask.assign(e.ids.size(), 1);
  return e;
}

BatchEncoding WordPieceTokenizer::encode_batch(const std::vector<std::string>& texts,
                                               std::optional<int64_t> max_length,
                                               bool pad_to_max_length) const {
  SMELT_CHECK(!pad_to_max_length || max_length,
              "WordPieceTokenizer::encode_batch: pad_to_max_length needs a max_length");
  std::vector<Encoding> enc;
  enc.reserve(texts.size());
  size_t len = pad_to_max_length ? static_cast<size_t>(*max_length) : 0;
  for (const auto& t : texts) {
    enc.push_back(encode(t, max_length));
    if (!pad_to_max_length) len = std::max(len, enc.back().ids.size());
  }
  const auto B = static_cast<int64_t>(texts.size());
  const auto T = static_cast<int64_t>(len);
  std::vector<int64_t> ids(len * texts.size(), s_->pad_id), mask(len * texts.size(), 0),
      types(len * texts.size(), 0);
  for (size_t b = 0; b < enc.size(); ++b)
    for (size_t i = 0; i < enc[b].ids.size(); ++i) {
      ids[b * len + i] = enc[b].ids[i];
      mask[b * len + i] = 1;
      types[b * len + i] = enc[b].type_ids[i];
    }
  return {from_vector(ids, {B, T}), from_vector(mask, {B, T}), from_vector(types, {B, T})};
}

std::optional<int64_t> WordPieceTokenizer::token_to_id(const std::string& token) const {
  auto it = s_->vocab.find(token);
  if (it == s_->vocab.end()) return std::nullopt;
  return it->second;
}

const std::string& WordPieceTokenizer::id_to_token(int64_t id) const {
  SMELT_CHECK(id >= 0 && id < static_cast<int64_t>(s_->id_to_token.size()),
              "WordPieceTokenizer::id_to_token: id {} is out of range [0, {})", id,
              s_->id_to_token.size());
  return s_->id_to_token[id];
}

int64_t WordPieceTokenizer::vocab_size() const { return static_cast<int64_t>(s_->vocab.size()); }
int64_t WordPieceTokenizer::pad_token_id() const { return s_->pad_id; }
int64_t WordPieceTokenizer::unk_token_id() const { return s_->unk_id; }
int64_t WordPieceTokenizer::num_special_tokens() const { return s_->num_special; }

}  // namespace smelt::text
