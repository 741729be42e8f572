// The WordPiece tokenizer on a small hand-made tokenizer.json (no model
// needed): BERT's basic tokenizer (clean-up, CJK, accents through NFD,
// lower-casing, white space and punctuation), WordPiece pieces and [UNK],
// added tokens written in the text, truncation, padding, and errors. The
// expected tokens follow Hugging Face tokenizers' BertNormalizer,
// BertPreTokenizer and WordPiece model.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "smelt/text/wordpiece.h"
#include "test_util.h"
#include "tiny_tokenizer.h"

using smelt::text::WordPieceTokenizer;
using smelt_test::expect_error_mentions;
using smelt_test::kVocab;
using smelt_test::tokenizer_json;
using Tokens = std::vector<std::string>;

namespace {

const WordPieceTokenizer& tok() {
  static const WordPieceTokenizer t =
      WordPieceTokenizer::from_json(tokenizer_json().dump(), "test tokenizer.json");
  return t;
}

}  // namespace

TEST(WordPiece, VocabularyAndSpecialTokens) {
  EXPECT_EQ(tok().vocab_size(), static_cast<int64_t>(kVocab.size()));
  EXPECT_EQ(tok().token_to_id("##ing"), 9);
  EXPECT_EQ(tok().token_to_id("nope"), std::nullopt);
  EXPECT_EQ(tok().id_to_token(16), "hello");
  EXPECT_EQ(tok().pad_token_id(), 0);
  EXPECT_EQ(tok().unk_token_id(), 1);
  EXPECT_EQ(tok().num_special_tokens(), 2);
  expect_error_mentions([] { tok().id_to_token(1000); }, "out of range");
}

TEST(WordPiece, LowerCasePunctuationAndPieces) {
  auto e = tok().encode("A man is eating.");
  EXPECT_EQ(e.tokens, (Tokens{"[CLS]", "a", "man", "is", "eat", "##ing", ".", "[SEP]"}));
  EXPECT_EQ(e.ids, (std::vector<int64_t>{2, 5, 6, 7, 8, 9, 10, 3}));
  EXPECT_EQ(e.type_ids, std::vector<int64_t>(8, 0));
  EXPECT_EQ(e.attention_mask, std::vector<int64_t>(8, 1));
  EXPECT_EQ(tok().tokenize("unaffable"), (Tokens{"un", "##aff", "##able"}));
  // ASCII symbols count as punctuation ($, -); digits split into pieces.
  EXPECT_EQ(tok().tokenize("$5-50"), (Tokens{"$", "5", "-", "5", "##0"}));
}

TEST(WordPiece, AccentsAreStrippedThroughNfd) {
  EXPECT_EQ(tok().tokenize("naïve CAFÉ"), (Tokens{"naive", "cafe"}));
  // Precomposed and decomposed spellings give the same tokens.
  EXPECT_EQ(tok().tokenize("cafe\u0301"), (Tokens{"cafe"}));
  // U+0130 (I with dot above) decomposes to I + U+0307, whose mark is dropped.
  EXPECT_EQ(tok().tokenize("\u0130"), (Tokens{"i"}));
  // Capital sigma lower-cases to sigma on its own (no final-sigma context).
  EXPECT_EQ(tok().tokenize("\u03a3"), (Tokens{"σ"}));
}

TEST(WordPiece, WhiteSpaceAndControlCharacters) {
  // Tab, newline, no-break space and ideographic space all separate words.
  EXPECT_EQ(tok().tokenize("hello\tworld\nhello\u00a0world\u3000a"),
            (Tokens{"hello", "world", "hello", "world", "a"}));
  // A control character (BEL), a format character (zero-width joiner) and
  // U+FFFD are removed without splitting the word.
  EXPECT_EQ(tok().tokenize("hel\u0007lo wor\u200dld hel\ufffdlo"),
            (Tokens{"hello", "world", "hello"}));
  // Ill-formed UTF-8 reads as U+FFFD, which is removed.
  EXPECT_EQ(tok().tokenize("man\xff"), (Tokens{"man"}));
  EXPECT_TRUE(tok().tokenize("").empty());
  EXPECT_TRUE(tok().tokenize(" \t\n").empty());
  EXPECT_EQ(tok().encode("").tokens, (Tokens{"[CLS]", "[SEP]"}));
}

TEST(WordPiece, CjkIdeographsAreWordsOfTheirOwn) {
  // 人 is not in the vocabulary: it alone becomes [UNK].
  EXPECT_EQ(tok().tokenize("中国人a"), (Tokens{"中", "国", "[UNK]", "a"}));
  // tokenizers' ranges: U+2B920 is spaced out, U+2B8A0 (Google's range only) is
  // not, so "x" and it make one unknown word.
  EXPECT_EQ(tok().tokenize("x\U0002B920"), (Tokens{"x", "[UNK]"}));
  EXPECT_EQ(tok().tokenize("x\U0002B8A0"), (Tokens{"[UNK]"}));
}

TEST(WordPiece, UnknownAndOverlongWords) {
  EXPECT_EQ(tok().tokenize("zzz"), (Tokens{"[UNK]"}));
  // "eat" matches but "##z" does not: the whole word is unknown.
  EXPECT_EQ(tok().tokenize("eatz is"), (Tokens{"[UNK]", "is"}));
  // 100 characters is the longest word split into pieces; 101 is [UNK].
  auto pieces = tok().tokenize(std::string(100, 'a'));
  ASSERT_EQ(pieces.size(), 100u);
  EXPECT_EQ(pieces[0], "a");
  EXPECT_EQ(pieces[99], "##a");
  EXPECT_EQ(tok().tokenize(std::string(101, 'a')), (Tokens{"[UNK]"}));
}

TEST(WordPiece, SpecialTokensWrittenInTheText) {
  // Matched in the raw text, case-sensitively, before normalization.
  EXPECT_EQ(tok().tokenize("a [MASK] is[SEP]x"), (Tokens{"a", "[MASK]", "is", "[SEP]", "x"}));
  EXPECT_EQ(tok().encode("[MASK]").ids, (std::vector<int64_t>{2, 4, 3}));
  // Lower case is ordinary text: brackets are punctuation.
  EXPECT_EQ(tok().tokenize("[mask]"), (Tokens{"[", "mask", "]"}));
}

TEST(WordPiece, TruncationCountsTheSpecialTokens) {
  auto e = tok().encode("a man is a man", 4);
  EXPECT_EQ(e.tokens, (Tokens{"[CLS]", "a", "man", "[SEP]"}));
  EXPECT_EQ(tok().encode("a man", 2).tokens, (Tokens{"[CLS]", "[SEP]"}));
  EXPECT_EQ(tok().encode("a man", 100).tokens.size(), 4u);
  expect_error_mentions([] { tok().encode("a", 1); }, "max_length 1");
}

TEST(WordPiece, BatchPaddingAndMasks) {
  auto b = tok().encode_batch({"a man", "", "hello world is"});
  ASSERT_EQ(b.input_ids.sizes(), (smelt::Shape{3, 5}));
  EXPECT_EQ(b.input_ids.dtype(), smelt::DType::Int64);
  EXPECT_EQ(b.input_ids.to_vector<int64_t>(),
            (std::vector<int64_t>{2, 5, 6, 3, 0, 2, 3, 0, 0, 0, 2, 16, 17, 7, 3}));
  EXPECT_EQ(b.attention_mask.to_vector<int64_t>(),
            (std::vector<int64_t>{1, 1, 1, 1, 0, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1}));
  EXPECT_EQ(b.token_type_ids.to_vector<int64_t>(), std::vector<int64_t>(15, 0));
  // Truncated to 3 tokens each; then padded to exactly max_length.
  auto t = tok().encode_batch({"a man", "hello world is"}, 3);
  EXPECT_EQ(t.input_ids.to_vector<int64_t>(), (std::vector<int64_t>{2, 5, 3, 2, 16, 3}));
  auto f = tok().encode_batch({"a"}, 6, /*pad_to_max_length=*/true);
  EXPECT_EQ(f.input_ids.to_vector<int64_t>(), (std::vector<int64_t>{2, 5, 3, 0, 0, 0}));
  EXPECT_EQ(tok().encode_batch({}).input_ids.sizes(), (smelt::Shape{0, 0}));
  expect_error_mentions([] { tok().encode_batch({"a"}, std::nullopt, true); }, "max_length");
}

TEST(WordPiece, UnsupportedFilesAreRefusedClearly) {
  expect_error_mentions([] { WordPieceTokenizer::from_file("/no/such/tokenizer.json"); },
                        "cannot open /no/such/tokenizer.json");
  expect_error_mentions([] { WordPieceTokenizer::from_json("{not json", "bad.json"); },
                        "bad.json: not valid JSON");
  auto j = tokenizer_json();
  j["model"]["type"] = "BPE";
  expect_error_mentions([&] { WordPieceTokenizer::from_json(j.dump(), "bpe.json"); },
                        "only \"WordPiece\"");
  j = tokenizer_json();
  j["pre_tokenizer"] = {{"type", "Metaspace"}};
  expect_error_mentions([&] { WordPieceTokenizer::from_json(j.dump(), "t.json"); },
                        "BertPreTokenizer");
  j = tokenizer_json();
  j["model"]["unk_token"] = "<unk>";
  expect_error_mentions([&] { WordPieceTokenizer::from_json(j.dump(), "t.json"); },
                        "\"<unk>\" is not in the vocabulary");
  j = tokenizer_json();
  j["added_tokens"][4]["single_word"] = true;
  expect_error_mentions([&] { WordPieceTokenizer::from_json(j.dump(), "t.json"); }, "single_word");
}
