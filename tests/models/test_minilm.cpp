// The real pretrained all-MiniLM-L6-v2 (fetched from PyPI by
// tools/fetch_model.py) against what sentence-transformers computes for the
// 18 sentences of ../shared/data/minilm_refs.{json,safetensors}: token ids and
// masks exactly; the encoder's last hidden state (at real tokens) and the
// normalized embeddings within 1e-5 (absolute, float32), eager and compiled,
// batched and one sentence at a time.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "nn/models.h"
#include "nn/pretrained.h"
#include "smelt/nn/sentence_encoder.h"
#include "smelt/smelt.h"
#include "test_util.h"

using namespace smelt;

namespace {

const std::string kShared = SMELT_SHARED_DIR;
constexpr double kTol = 1e-5;
constexpr int64_t kMaxLength = 256;  // minilm_refs.json "max_length"

/// The 18 sentences and sentence-transformers' results for them.
struct Refs {
  std::vector<std::string> sentences;
  models::SharedData data;
  const Tensor& at(const std::string& key) const { return data.at(key); }
};

const Refs& refs() {
  static const Refs r{models::minilm_ref_sentences(kShared),
                      models::SharedData::load(kShared, "minilm_refs")};
  return r;
}

/// The encoder, loaded once for the whole suite (eager; tests that compile
/// make their own SentenceEncoder sharing the same model).
nn::SentenceEncoder& encoder() {
  static nn::SentenceEncoder enc =
      nn::SentenceEncoder::from_pretrained(models::fetch_pretrained("all-MiniLM-L6-v2"));
  return enc;
}

/// max |a - b| over the real tokens (hidden [B, T, H], mask [B, T]).
double masked_max_err(const Tensor& a, const Tensor& b, const Tensor& mask) {
  return models::compare_masked(a, b, mask).max_abs_err;
}

double max_err(const Tensor& a, const Tensor& b) { return models::compare(a, b).max_abs_err; }

}  // namespace

TEST(MiniLM, ConfigAndStrictLoad) {
  auto& enc = encoder();
  const auto& c = enc.model->config;
  EXPECT_EQ(c.hidden_size, 384);
  EXPECT_EQ(c.num_hidden_layers, 6);
  EXPECT_EQ(c.num_attention_heads, 12);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-12);
  EXPECT_EQ(enc.max_seq_length, 256);
  EXPECT_TRUE(enc.normalize);
  int64_t n = 0;
  for (auto& p : enc.model->parameters()) n += p.numel();
  EXPECT_EQ(n, 22713216);  // 22.7 M, pooler included
  // Every checkpoint tensor has a home and vice versa (strict load), with the
  // checkpoint's values.
  auto file = load_safetensors(models::fetch_pretrained("all-MiniLM-L6-v2") + "/model.safetensors");
  auto state = enc.model->state_dict();
  EXPECT_EQ(state.size(), file.size());
  EXPECT_EQ(max_err(state.at("encoder.layer.5.output.dense.weight"),
                    file.at("encoder.layer.5.output.dense.weight")),
            0.0);
}

TEST(MiniLM, TokenizerMatchesSentenceTransformers) {
  const auto& r = refs();
  auto batch = encoder().tokenizer.encode_batch(r.sentences, kMaxLength);
  ASSERT_EQ(batch.input_ids.sizes(), r.at("input_ids").sizes());
  EXPECT_EQ(batch.input_ids.to_vector<int64_t>(), r.at("input_ids").to_vector<int64_t>());
  EXPECT_EQ(batch.attention_mask.to_vector<int64_t>(), r.at("attention_mask").to_vector<int64_t>());
  EXPECT_EQ(batch.token_type_ids.to_vector<int64_t>(), r.at("token_type_ids").to_vector<int64_t>());
}

TEST(MiniLM, EagerBatchedMatchesSentenceTransformers) {
  const auto& r = refs();
  auto& enc = encoder();
  auto batch = enc.tokenizer.encode_batch(r.sentences, kMaxLength);
  auto [h, e] = enc.forward(batch);
  double eh = masked_max_err(h, r.at("last_hidden_state"), r.at("attention_mask"));
  double ee = max_err(e, r.at("embeddings"));
  EXPECT_LT(eh, kTol);
  EXPECT_LT(ee, kTol);
  // The cosine matrix follows.
  EXPECT_LT(max_err(matmul(e, e.t()), r.at("cosine")), kTol);
  // encode() in batches of 5 (different padding per batch) gives the same rows.
  EXPECT_LT(max_err(enc.encode(r.sentences, 5), r.at("embeddings")), kTol);
}

TEST(MiniLM, EagerOneSentenceAtATime) {
  const auto& r = refs();
  auto& enc = encoder();
  Tensor want = r.at("embeddings");
  for (size_t i = 0; i < r.sentences.size(); ++i) {
    Tensor e = enc.encode({r.sentences[i]});
    ASSERT_EQ(e.sizes(), (Shape{1, 384}));
    EXPECT_LT(max_err(e[0], want[static_cast<int64_t>(i)]), kTol) << r.sentences[i];
  }
}

TEST(MiniLMCompiled, BatchedAndOneSentenceAtATime) {
  NoGradGuard no_grad;  // compiled inference (module parameters require grad)
  const auto& r = refs();
  nn::SentenceEncoder enc = encoder();  // shares the model
  enc.set_compiled(true);
  auto batch = enc.tokenizer.encode_batch(r.sentences, kMaxLength);
  auto [h, e] = enc.forward(batch);
  EXPECT_LT(masked_max_err(h, r.at("last_hidden_state"), r.at("attention_mask")), kTol);
  EXPECT_LT(max_err(e, r.at("embeddings")), kTol);
  EXPECT_EQ(enc.compile_stats().graph_breaks, 0);
  Tensor want = r.at("embeddings");
  for (size_t i = 0; i < r.sentences.size(); ++i) {
    Tensor one = enc.encode({r.sentences[i]});
    EXPECT_LT(max_err(one[0], want[static_cast<int64_t>(i)]), kTol) << r.sentences[i];
  }
  // Length buckets of 32 tokens: [18, 96] once, [1, 32] and [1, 96] for the singles.
  EXPECT_EQ(enc.compile_stats().compiles, 3);
  EXPECT_EQ(enc.compile_stats().eager_calls, 0);
}

namespace {
/// A fresh encoder (its own model) in `dtype` on the first GPU.
nn::SentenceEncoder cuda_encoder(DType dtype) {
  auto enc = nn::SentenceEncoder::from_pretrained(models::fetch_pretrained("all-MiniLM-L6-v2"));
  enc.model->to(dtype);
  enc.model->to(Device("cuda:0"));
  return enc;
}

/// The smallest cosine between a row of `got` and the same row of `want` ([N, H]).
double min_row_cosine(const Tensor& got, const Tensor& want) {
  Tensor g = got.cpu().to(DType::Float64), w = want.to(DType::Float64);
  Tensor cos = (g * w).sum(1) / ((g * g).sum(1).sqrt() * (w * w).sum(1).sqrt());
  return cos.min().item<double>();
}
}  // namespace

// float32 on the GPU: the same tolerance as on the CPU, eager and compiled
// (exact float32 products: TF32 is off by default), batched and one at a time.
TEST(MiniLMCuda, Float32MatchesSentenceTransformers) {
  SMELT_SKIP_WITHOUT_CUDA();
  NoGradGuard no_grad;
  const auto& r = refs();
  nn::SentenceEncoder enc = cuda_encoder(DType::Float32);
  for (bool compiled : {false, true}) {
    SCOPED_TRACE(compiled ? "compiled" : "eager");
    enc.set_compiled(compiled);
    auto batch = enc.tokenizer.encode_batch(r.sentences, kMaxLength);
    auto [h, e] = enc.forward(batch);
    EXPECT_TRUE(h.device().is_cuda() && e.device().is_cuda());
    EXPECT_LT(masked_max_err(h.cpu(), r.at("last_hidden_state"), r.at("attention_mask")), kTol);
    EXPECT_LT(max_err(e.cpu(), r.at("embeddings")), kTol);
    Tensor want = r.at("embeddings");
    for (size_t i = 0; i < r.sentences.size(); ++i) {
      Tensor one = enc.encode({r.sentences[i]});
      EXPECT_LT(max_err(one[0].cpu(), want[static_cast<int64_t>(i)]), kTol) << r.sentences[i];
    }
  }
  EXPECT_EQ(enc.compile_stats().graph_breaks, 0);
  EXPECT_EQ(enc.compile_stats().eager_calls, 0);
}

// bfloat16 and float16 on the GPU (tensor cores): each embedding points where
// sentence-transformers' float32 one does, eager and compiled alike. Bounds:
// the rounding of 8 (bfloat16) or 11 (float16) significant bits through six
// layers; the worst row cosine is printed.
TEST(MiniLMCuda, HalfPrecisionEmbeddingsFollowFloat32) {
  SMELT_SKIP_WITHOUT_CUDA();
  NoGradGuard no_grad;
  const auto& r = refs();
  for (auto [dtype, min_cos] :
       {std::pair{DType::BFloat16, 0.999}, std::pair{DType::Float16, 0.9999}}) {
    nn::SentenceEncoder enc = cuda_encoder(dtype);
    Tensor eager = enc.encode(r.sentences, 32);
    enc.set_compiled(true);
    Tensor compiled = enc.encode(r.sentences, 32);
    EXPECT_EQ(eager.dtype(), dtype);
    const double ce = min_row_cosine(eager, r.at("embeddings")),
                 cc = min_row_cosine(compiled, r.at("embeddings"));
    std::printf("MiniLM %s on CUDA: smallest row cosine to float32: eager %.6f, compiled %.6f\n",
                std::string(dtype_name(dtype)).c_str(), ce, cc);
    EXPECT_GT(ce, min_cos) << dtype_name(dtype);
    EXPECT_GT(cc, min_cos) << dtype_name(dtype);
    EXPECT_EQ(enc.compile_stats().graph_breaks, 0);
  }
}

#ifdef SMELT_CLI
namespace {
/// stdout and stderr of a shell command, and its exit status.
std::pair<std::string, int> run_shell(const std::string& cmd) {
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return {"popen failed", -1};
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  return {out, pclose(f)};
}
}  // namespace

TEST(MiniLMCli, EmbedFromStdinAndSimilarity) {
  models::fetch_pretrained("all-MiniLM-L6-v2");  // fetched before the CLI needs it
  const auto& r = refs();
  // Sentences 0, 14 ("") and 15 ("a") of the references, one per line; the
  // empty line is the empty sentence.
  auto [out, rc] = run_shell(
      fmt::format("printf 'A man is eating food.\\n\\na\\n' | {} embed --json", SMELT_CLI));
  if (out.find("not found") != std::string::npos) GTEST_SKIP() << "smelt CLI not built: " << out;
  ASSERT_EQ(rc, 0) << out;
  auto rows = nlohmann::json::parse(out).get<std::vector<std::vector<double>>>();
  ASSERT_EQ(rows.size(), 3u);
  const int64_t which[] = {0, 14, 15};
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_EQ(rows[i].size(), 384u);
    EXPECT_LT(max_err(from_vector(rows[i], {384}), r.at("embeddings")[which[i]]), kTol) << i;
  }
  // Plain output: one line of 384 numbers per sentence.
  auto [plain, rc2] =
      run_shell(fmt::format("{} embed a \"\" --compiled --batch-size 1", SMELT_CLI));
  ASSERT_EQ(rc2, 0) << plain;
  std::istringstream lines(plain);
  std::string line;
  std::vector<double> first;
  int n_lines = 0;
  while (std::getline(lines, line)) {
    std::istringstream nums(line);
    std::vector<double> v{std::istream_iterator<double>(nums), std::istream_iterator<double>()};
    EXPECT_EQ(v.size(), 384u);
    if (n_lines++ == 0) first = v;
  }
  EXPECT_EQ(n_lines, 2);
  EXPECT_LT(max_err(from_vector(first, {384}), r.at("embeddings")[15]), kTol);
  auto [sim, rc3] = run_shell(fmt::format(
      "{} similarity 'A man is eating food.' 'A man is eating a piece of bread.'", SMELT_CLI));
  ASSERT_EQ(rc3, 0) << sim;
  EXPECT_NEAR(std::stod(sim), r.at("cosine")[0][1].item<double>(), 2e-6) << sim;
}
#endif
