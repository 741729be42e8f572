// Sentence embeddings with a pretrained sentence-transformers model, eager
// then compiled, and the cosine similarity of every pair:
//   python3 tools/fetch_model.py      # prints the model folder (downloads it once)
//   ./build/examples/sentence_embeddings ~/.cache/smelt/models/all-MiniLM-L6-v2
//       "A man is eating food." "A man is eating a piece of bread."   (one command line)
#include <smelt/smelt.h>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL_DIR SENTENCE...\n", argv[0]);
    return 2;
  }
  try {
    auto encoder = smelt::nn::SentenceEncoder::from_pretrained(argv[1]);
    std::vector<std::string> sentences(argv + 2, argv + argc);
    smelt::Tensor e = encoder.encode(sentences);  // [N, 384], unit rows

    encoder.set_compiled(true);  // the same model through smelt::compile
    smelt::Tensor ec = encoder.encode(sentences);

    smelt::Tensor cos = smelt::matmul(ec, ec.t());
    for (size_t i = 0; i < sentences.size(); ++i)
      for (size_t j = i + 1; j < sentences.size(); ++j)
        std::printf("%.4f  \"%s\" ~ \"%s\"\n",
                    cos[static_cast<int64_t>(i)][static_cast<int64_t>(j)].item<double>(),
                    sentences[i].c_str(), sentences[j].c_str());
    double diff = smelt::max(smelt::abs(e - ec)).item<double>();
    std::printf("max |eager - compiled| = %.2e\n", diff);
  } catch (const smelt::Error& err) {
    std::fprintf(stderr, "%s\n", err.what());
    return 1;
  }
  return 0;
}
