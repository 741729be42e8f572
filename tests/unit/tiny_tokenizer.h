// A small hand-made BERT tokenizer.json (31 tokens) for tests that need a
// WordPieceTokenizer without downloading a model (test_wordpiece.cpp,
// test_bert.cpp): BertNormalizer, BertPreTokenizer, [CLS] $A [SEP] template.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace smelt_test {

inline const std::vector<std::string> kVocab = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a",     "man",   "is", "eat", "##ing", ".",
    "naive", "cafe",  "un",    "##aff", "##able", "hello", "world", "中", "国",  "$",     "5",
    "##0",   "-",     "i",     "σ",     "##a",    "[",     "mask",  "]",  "x"};

inline nlohmann::json tokenizer_json() {
  nlohmann::json vocab = nlohmann::json::object();
  for (size_t i = 0; i < kVocab.size(); ++i) vocab[kVocab[i]] = i;
  nlohmann::json added = nlohmann::json::array();
  for (int i = 0; i < 5; ++i)
    added.push_back({{"id", i},
                     {"content", kVocab[i]},
                     {"special", true},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false}});
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer",
           {{"type", "BertNormalizer"},
            {"clean_text", true},
            {"handle_chinese_chars", true},
            {"strip_accents", nullptr},
            {"lowercase", true}}},
          {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single",
             {{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}},
              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
              {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}}}},
            {"special_tokens",
             {{"[CLS]", {{"id", "[CLS]"}, {"ids", {2}}, {"tokens", {"[CLS]"}}}},
              {"[SEP]", {{"id", "[SEP]"}, {"ids", {3}}, {"tokens", {"[SEP]"}}}}}}}},
          {"model",
           {{"type", "WordPiece"},
            {"unk_token", "[UNK]"},
            {"continuing_subword_prefix", "##"},
            {"max_input_chars_per_word", 100},
            {"vocab", vocab}}}};
}

}  // namespace smelt_test
