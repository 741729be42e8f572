// nn::BertModel on small random configurations (no download): transformers'
// state_dict names, padding that changes nothing, mean pooling and
// normalization, compiled equal to eager with attention fused (one encoder
// layer's kernels), and errors naming the problem. The real pretrained model
// is checked against sentence-transformers in tests/models/test_minilm.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "nn/models.h"
#include "smelt/nn/sentence_encoder.h"
#include "smelt/smelt.h"
#include "test_util.h"
#include "tiny_tokenizer.h"

using namespace smelt;
using smelt_test::expect_error_mentions;

namespace {

/// A BERT config of these sizes (the other fields: BertConfig's defaults).
nn::BertConfig bert_config(int64_t vocab, int64_t hidden, int64_t layers, int64_t heads,
                           int64_t intermediate, int64_t max_positions) {
  nn::BertConfig c;
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.intermediate_size = intermediate;
  c.max_position_embeddings = max_positions;
  return c;
}

nn::BertConfig tiny_config() { return bert_config(50, 16, 2, 4, 32, 24); }

/// A BERT of config `c` with every parameter drawn from N(0, scale^2) after manual_seed(seed).
nn::BertModel random_bert(const nn::BertConfig& c, uint64_t seed, double scale) {
  manual_seed(seed);
  nn::BertModel m(c);
  NoGradGuard no_grad;  // parameters are leaves that require grad
  for (auto& p : m->parameters()) p.copy_(randn(p.sizes()) * scale);
  return m;
}

/// A tiny BERT with weights drawn at scale 0.5 (so attention is not uniform).
nn::BertModel tiny_bert(uint64_t seed = 0) { return random_bert(tiny_config(), seed, 0.5); }

double max_err(const Tensor& a, const Tensor& b) { return models::compare(a, b).max_abs_err; }

}  // namespace

TEST(Bert, StateDictNamesAreTransformers) {
  nn::BertModel m(tiny_config());
  auto sd = m->state_dict();
  // embeddings: 3 tables, LayerNorm, position_ids; 16 per layer; pooler 2.
  EXPECT_EQ(sd.size(), 3u + 2u + 1u + 2u * 16u + 2u);
  for (const char* k :
       {"embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
        "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight",
        "embeddings.LayerNorm.bias", "embeddings.position_ids",
        "encoder.layer.1.attention.self.query.weight", "encoder.layer.1.attention.self.key.bias",
        "encoder.layer.1.attention.self.value.weight",
        "encoder.layer.1.attention.output.dense.weight",
        "encoder.layer.1.attention.output.LayerNorm.bias",
        "encoder.layer.1.intermediate.dense.weight", "encoder.layer.1.output.dense.bias",
        "encoder.layer.1.output.LayerNorm.weight", "pooler.dense.weight"})
    EXPECT_TRUE(sd.count(k)) << k;
  EXPECT_EQ(sd.at("encoder.layer.0.intermediate.dense.weight").sizes(), (Shape{32, 16}));
  EXPECT_EQ(sd.at("embeddings.position_ids").to_vector<int64_t>()[23], 23);
  EXPECT_FALSE(m->is_training());  // inference model
  nn::BertModel no_pool(tiny_config(), /*add_pooling_layer=*/false);
  EXPECT_EQ(no_pool->state_dict().count("pooler.dense.weight"), 0u);
}

TEST(Bert, PaddingChangesNothing) {
  auto m = tiny_bert();
  Tensor ids = from_vector<int64_t>({2, 7, 9, 11, 3, 2, 5, 3, 0, 0}, {2, 5});
  Tensor mask = from_vector<int64_t>({1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {2, 5});
  Tensor h = m(ids, mask);
  ASSERT_EQ(h.sizes(), (Shape{2, 5, 16}));
  // The second sentence alone, unpadded.
  Tensor alone = m(from_vector<int64_t>({2, 5, 3}, {1, 3}), Tensor());
  EXPECT_LT(max_err(h[1].narrow(0, 0, 3), alone[0]), 1e-5);
  // Padding ids do not matter either (their keys are masked out).
  Tensor ids2 = ids.clone();
  ids2.select(0, 1).narrow(0, 3, 2).fill_(42);
  EXPECT_LT(max_err(m(ids2, mask)[1].narrow(0, 0, 3), alone[0]), 1e-6);
  // Mean pooling then ignores the padded rows.
  Tensor pooled = nn::mean_pooling(h, mask);
  EXPECT_LT(max_err(pooled[1], alone[0].mean(0)), 1e-5);
  // Omitted token types are type 0.
  EXPECT_LT(max_err(m(ids, mask, zeros({2, 5}, DType::Int64)), h), 1e-6);
  EXPECT_GT(max_err(m(ids, mask, ones({2, 5}, DType::Int64)), h), 1e-3);
}

TEST(Bert, MeanPoolingAndNormalize) {
  Tensor h = from_vector<float>({1, 2, 3, 4, 100, 100}, {1, 3, 2});
  Tensor mask = from_vector<int64_t>({1, 1, 0}, {1, 3});
  EXPECT_EQ(nn::mean_pooling(h, mask).to_vector<double>(), (std::vector<double>{2, 3}));
  // No token at all: sums over an empty set divided by the 1e-9 floor.
  EXPECT_EQ(nn::mean_pooling(h, zeros({1, 3}, DType::Int64)).to_vector<double>(),
            (std::vector<double>{0, 0}));
  Tensor v = from_vector<float>({3, 4, 0, 0}, {2, 2});
  smelt_test::expect_close(nn::l2_normalize(v).to_vector<double>(), {0.6, 0.8, 0, 0}, 1e-7);
  expect_error_mentions([&] { nn::mean_pooling(h, ones({2, 3}, DType::Int64)); }, "mean_pooling");
}

TEST(Bert, CompiledEqualsEagerWithAttentionFused) {
  NoGradGuard no_grad;  // compiled inference (module parameters require grad)
  auto m = tiny_bert(1);
  Tensor ids = from_vector<int64_t>({2, 7, 9, 11, 3, 0, 2, 5, 3, 0, 0, 0}, {2, 6});
  Tensor mask = from_vector<int64_t>({1, 1, 1, 1, 1, 0, 1, 1, 1, 0, 0, 0}, {2, 6});
  Tensor want = m(ids, mask);
  auto c = smelt::compile([m](const Tensor& i, const Tensor& k) { return m->forward(i, k); });
  Tensor got = c(ids, mask);
  EXPECT_LT(models::compare_masked(got, want, mask).max_abs_err, 1e-5);
  EXPECT_EQ(c.stats().graph_breaks, 0);

  // One encoder layer alone: attention is QKV GEMMs and one step running the
  // CPU's fused float32 attention under the padding mask, and the output
  // projections with their residual adds (and the intermediate GELU) in GEMM
  // epilogues.
  auto layer = m->encoder->layer->at<nn::BertLayerImpl>(0);
  Tensor x = randn({2, 6, 16});
  Tensor keep = mask.to(DType::Bool).view({2, 1, 1, 6});
  auto cl =
      smelt::compile([layer](const Tensor& h, const Tensor& k) { return layer->forward(h, k); });
  EXPECT_LT(models::compare_masked(cl(x, keep), layer->forward(x, keep), mask).max_abs_err, 1e-5);
  int attention = 0, residual_gemms = 0, gelu_gemms = 0;
  for (auto& k : cl.stats().kernel_names) {
    attention += k == "fallback_scaled_dot_product_attention";
    if (k != "fallback_scaled_dot_product_attention") {
      EXPECT_EQ(k.rfind("fallback_", 0), std::string::npos) << k;
    }
    residual_gemms += k.rfind("cpp_tem_fused_addmm_add_", 0) == 0;
    gelu_gemms += k.rfind("cpp_tem_fused_addmm_gelu_", 0) == 0;
  }
  EXPECT_EQ(attention, 1) << fmt::format("{}", fmt::join(cl.stats().kernel_names, " "));
  EXPECT_EQ(residual_gemms, 2);
  EXPECT_EQ(gelu_gemms, 1);
  EXPECT_LE(cl.stats().kernels, 9);
}

TEST(Bert, SentenceEncoderEagerAndCompiled) {
  NoGradGuard no_grad;  // compiled inference (module parameters require grad)
  nn::SentenceEncoder enc(
      tiny_bert(2), text::WordPieceTokenizer::from_json(smelt_test::tokenizer_json().dump()), 20);
  const std::vector<std::string> s = {"a man is eating.", "hello world", "", "naive cafe",
                                      "$5-50 is a man"};
  Tensor e = enc.encode(s, 2);
  ASSERT_EQ(e.sizes(), (Shape{5, 16}));
  // Unit rows; each row as if encoded alone.
  for (double n : sqrt(sum(e * e, {1})).to_vector<double>()) EXPECT_NEAR(n, 1.0, 1e-6);
  for (int64_t i = 0; i < 5; ++i) EXPECT_LT(max_err(enc.encode({s[i]})[0], e[i]), 1e-5) << s[i];
  // Compiled: batches of 2 (the last filled up with an empty sentence), the
  // length padded to 20 (max_seq_length < 32): one graph for every batch.
  enc.set_compiled(true);
  EXPECT_LT(max_err(enc.encode(s, 2), e), 1e-5);
  EXPECT_EQ(enc.compile_stats().compiles, 1);
  EXPECT_EQ(enc.compile_stats().calls, 3);
  EXPECT_EQ(enc.compile_stats().graph_breaks, 0);
  // forward() returns the unpadded hidden states.
  auto batch = enc.tokenizer.encode_batch({s[0]}, 20);
  auto [h, one] = enc.forward(batch);
  EXPECT_EQ(h.sizes(), (Shape{1, batch.input_ids.size(1), 16}));
  EXPECT_LT(max_err(one[0], e[0]), 1e-5);
  // Turning normalization off is seen by the compiled function too.
  enc.normalize = false;
  Tensor raw = enc.encode({s[0]});
  EXPECT_GT(std::fabs(sqrt(sum(raw * raw)).item<double>() - 1.0), 1e-3);
  enc.set_compiled(false);
  EXPECT_LT(max_err(enc.encode({s[0]}), raw), 1e-5);
  expect_error_mentions([&] { enc.encode(s, 0); }, "batch_size must be >= 1");
  EXPECT_EQ(enc.encode({}).sizes(), (Shape{0, 16}));
}

namespace {
/// all-MiniLM-L6-v2's widths (384 hidden, 12 heads of 32, 1536 intermediate)
/// in two layers, random weights (scale 0.1), the tiny tokenizer: a
/// SentenceEncoder that needs no download.
nn::SentenceEncoder minilm_shaped_encoder() {
  return nn::SentenceEncoder(
      random_bert(bert_config(64, 384, 2, 12, 1536, 64), /*seed=*/3, /*scale=*/0.1),
      text::WordPieceTokenizer::from_json(smelt_test::tokenizer_json().dump()), 64);
}

double min_row_cosine(const Tensor& got, const Tensor& want) {
  Tensor g = got.cpu().to(DType::Float64), w = want.cpu().to(DType::Float64);
  return (sum(g * w, {1}) / (sqrt(sum(g * g, {1})) * sqrt(sum(w * w, {1})))).min().item<double>();
}
}  // namespace

// The encoder on a GPU against the same weights on the CPU, eager and
// compiled, with padding in every batch: float32 to 1e-5 (exact float32
// GEMMs, TF32 off), bfloat16 / float16 (tensor cores) by the direction of
// each embedding. The embeddings come back on the GPU.
TEST(BertCuda, SentenceEncoderMatchesTheCpu) {
  SMELT_SKIP_WITHOUT_CUDA();
  NoGradGuard no_grad;
  const std::vector<std::string> s = {
      "a man is eating.", "hello world",    "",
      "naive cafe",       "$5-50 is a man", "a man is a man is a man is eating."};
  nn::SentenceEncoder cpu = minilm_shaped_encoder();
  const Tensor want = cpu.encode(s, 4);
  ASSERT_EQ(want.sizes(), (Shape{6, 384}));
  for (auto [dtype, min_cos] : {std::pair{DType::Float32, 1.0}, std::pair{DType::BFloat16, 0.999},
                                std::pair{DType::Float16, 0.9999}}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    nn::SentenceEncoder gpu = minilm_shaped_encoder();
    gpu.model->to(dtype);
    gpu.model->to(Device("cuda:0"));
    for (bool compiled : {false, true}) {
      SCOPED_TRACE(compiled ? "compiled" : "eager");
      gpu.set_compiled(compiled);
      Tensor got = gpu.encode(s, 4);
      EXPECT_TRUE(got.device().is_cuda());
      EXPECT_EQ(got.dtype(), dtype);
      if (dtype == DType::Float32) {
        EXPECT_LT(max_err(got.cpu(), want), 1e-5);
      } else {
        const double c = min_row_cosine(got, want);
        std::printf(
            "BERT (MiniLM widths) %s %s on CUDA: smallest row cosine to the CPU's "
            "float32: %.6f\n",
            std::string(dtype_name(dtype)).c_str(), compiled ? "compiled" : "eager", c);
        EXPECT_GT(c, min_cos);
      }
    }
    EXPECT_EQ(gpu.compile_stats().graph_breaks, 0);
    EXPECT_EQ(gpu.compile_stats().eager_calls, 0);
  }
}

TEST(Bert, ErrorsNameTheProblem) {
  auto m = tiny_bert();
  expect_error_mentions(
      [&] {
        m(zeros({1, 25}, DType::Int64), Tensor());
      },
      "25 tokens exceed max_position_embeddings 24");
  expect_error_mentions([&] { m(zeros({1, 4}), Tensor()); }, "input_ids must be int64 or int32");
  expect_error_mentions(
      [&] {
        m(zeros({1, 4}, DType::Int64), zeros({1, 5}, DType::Int64));
      },
      "attention_mask");
  auto c = tiny_config();
  c.num_attention_heads = 5;
  expect_error_mentions([&] { nn::BertModel bad(c); }, "not a multiple of num_attention_heads");
  c = tiny_config();
  c.hidden_act = "relu";
  expect_error_mentions([&] { nn::BertModel bad(c); }, "hidden_act \"relu\"");
  // A checkpoint without one tensor: strict loading names the key.
  auto dir = std::filesystem::temp_directory_path() / fmt::format("smelt-bert-{}", ::getpid());
  std::filesystem::create_directories(dir);
  auto sd = m->state_dict();
  sd.erase("encoder.layer.1.output.dense.bias");
  sd.erase("embeddings.position_ids");  // allowed: newer checkpoints drop it
  const std::string path = (dir / "model.safetensors").string();
  save_safetensors(path, sd);
  nn::BertModel fresh(tiny_config());
  expect_error_mentions([&] { fresh->load_pretrained(path); }, "encoder.layer.1.output.dense.bias");
  // With the key back (under transformers' "bert." prefix) it loads.
  std::map<std::string, Tensor> prefixed;
  for (auto& [k, v] : m->state_dict())
    if (k != "embeddings.position_ids") prefixed["bert." + k] = v;
  save_safetensors(path, prefixed);
  fresh->load_pretrained(path);
  Tensor ids = from_vector<int64_t>({2, 7, 3}, {1, 3});
  EXPECT_EQ(max_err(fresh(ids, Tensor()), m(ids, Tensor())), 0.0);
  std::filesystem::remove_all(dir);
}

TEST(Bert, ConfigFromFile) {
  auto path = std::filesystem::temp_directory_path() / fmt::format("smelt-cfg-{}.json", ::getpid());
  {
    std::ofstream f(path);
    f << R"({"model_type": "bert", "hidden_size": 384, "num_hidden_layers": 6,
             "num_attention_heads": 12, "intermediate_size": 1536, "layer_norm_eps": 1e-12,
             "hidden_act": "gelu", "vocab_size": 30522, "pad_token_id": 0})";
  }
  auto c = nn::BertConfig::from_file(path.string());
  EXPECT_EQ(c.hidden_size, 384);
  EXPECT_EQ(c.num_hidden_layers, 6);
  EXPECT_EQ(c.max_position_embeddings, 512);  // default kept
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-12);
  {
    std::ofstream f(path);
    f << R"({"model_type": "roberta"})";
  }
  expect_error_mentions([&] { nn::BertConfig::from_file(path.string()); }, "\"roberta\"");
  std::filesystem::remove(path);
  expect_error_mentions([] { nn::BertConfig::from_file("/no/config.json"); },
                        "cannot open /no/config.json");
}
