// `smelt embed` and `smelt similarity`: sentence embeddings from the command
// line with a sentence-transformers model (all-MiniLM-L6-v2 by default,
// fetched on first use).
#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "commands.h"
#include "nn/pretrained.h"
#include "smelt/cuda.h"
#include "smelt/ops.h"

namespace smelt::cli {

namespace {

/// The device --device names: cpu, cuda or cuda:N, the GPU present in this build and machine.
Device device_of(const std::string& device) {
  SMELT_CHECK(device == "cpu" || device.rfind("cuda", 0) == 0,
              "smelt embed: --device must be cpu, cuda or cuda:N, got '{}'", device);
  const Device d(device);
  SMELT_CHECK(d.is_cpu() || cuda::is_available(),
              "smelt embed: --device {}: no CUDA device is available (this build has no CUDA "
              "backend, or this machine no GPU); use --device cpu",
              device);
  SMELT_CHECK(d.is_cpu() || d.index < cuda::device_count(),
              "smelt embed: --device {}: this machine has {} CUDA device(s); pick an index "
              "below {}",
              device, cuda::device_count(), cuda::device_count());
  return d;
}

/// The embeddings of the options' sentences, or of stdin's lines when none are given.
Tensor embeddings_of(const EmbedOptions& opts, const std::vector<std::string>& sentences) {
  const Device device = device_of(opts.device);
  SMELT_CHECK(opts.batch_size >= 1, "smelt embed: --batch-size must be >= 1, got {}",
              opts.batch_size);
  auto enc = load_sentence_encoder(opts.model);
  enc.model->to(device);
  enc.set_compiled(opts.compiled);
  return enc.encode(sentences, opts.batch_size).cpu();
}

}  // namespace

nn::SentenceEncoder load_sentence_encoder(const std::string& model_dir) {
  return nn::SentenceEncoder::from_pretrained(
      model_dir.empty() ? models::fetch_pretrained("all-MiniLM-L6-v2") : model_dir);
}

int cmd_embed(const EmbedOptions& opts) {
  std::vector<std::string> sentences = opts.sentences;
  if (sentences.empty())
    for (std::string line; std::getline(std::cin, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      sentences.push_back(line);  // an empty line is an empty sentence
    }
  Tensor e = embeddings_of(opts, sentences).contiguous();
  const int64_t n = e.size(0), d = e.size(1);
  auto v = e.to_vector<float>();
  // Each float32 printed with the fewest digits that read back to it.
  auto row = [&](int64_t i) {
    std::string r;
    for (int64_t k = 0; k < d; ++k)
      r += fmt::format("{}{}", k ? (opts.json ? "," : " ") : "", v[i * d + k]);
    return r;
  };
  if (opts.json) {
    std::string out = "[";
    for (int64_t i = 0; i < n; ++i) out += fmt::format("{}[{}]", i ? "," : "", row(i));
    std::puts((out + "]").c_str());
    return 0;
  }
  for (int64_t i = 0; i < n; ++i) std::puts(row(i).c_str());
  return 0;
}

int cmd_similarity(const EmbedOptions& opts) {
  SMELT_CHECK(opts.sentences.size() == 2,
              "smelt similarity: expected two sentences, got {}; quote each one: smelt "
              "similarity \"A man is eating.\" \"Someone eats.\"",
              opts.sentences.size());
  Tensor e = embeddings_of(opts, opts.sentences);
  // a.b / (|a| |b|), as sentence-transformers' util.cos_sim (the rows are unit
  // vectors already when the model ends with a Normalize module).
  Tensor a = e[0], b = e[1];
  Tensor cos = sum(a * b) / (sqrt(sum(a * a)) * sqrt(sum(b * b)));
  std::puts(fmt::format("{:.6f}", cos.item<double>()).c_str());
  return 0;
}

}  // namespace smelt::cli
