// The `smelt` command-line tool: one function per subcommand, each in its own file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "smelt/nn/sentence_encoder.h"

namespace smelt::cli {

/// `smelt ops`: every op smelt knows with its kind (ops_cmd.cpp).
int cmd_ops();

struct GoldenOptions {
  std::string manifest;        // path to a golden .json manifest
  bool compiled = false;       // run each case's op through smelt::compile
  std::string filter;          // only cases whose id contains this
  bool verbose = false;        // also print passing cases
  std::string device = "cpu";  // where the ops run: cpu, cuda, cuda:N (inputs moved there)
};
/// `smelt golden <manifest>`: runs every case, one line per failure, then
/// "N passed, M failed"; returns 0 only when none failed (golden.cpp).
int cmd_golden(const GoldenOptions& opts);

struct CacheOptions {
  bool clear = false;  // delete the cached kernels
};
/// `smelt cache [--clear]`: the kernel cache's location, kernel count and size,
/// or delete its kernels (cache_cmd.cpp).
int cmd_cache(const CacheOptions& opts);

/// `smelt demo`: the main job (demo.cpp).
int cmd_demo(const std::string& shared_dir);

struct BenchOptions {
  std::string workload;  // pointwise | softmax | layernorm | mlp | train-mlp | train-aot |
                         // horizontal | batchnorm-relu | gpt2-block | gemm | linear-gelu |
                         // linear-gelu-erf | chain | minilm | all
  std::string device = "cpu";
  /// "" = the workload's default: bfloat16 for the GEMM workloads on a GPU, float32 otherwise.
  std::string dtype;
  std::string mode = "default";
  bool json = false;
  int iters = 0;                    // 0 = automatic
  bool round_intermediates = true;  // CompileOptions::round_intermediates
  bool concat_linear = true;        // CompileOptions::concat_linear
  /// set_float32_matmul_precision for the run: "highest" (exact float32
  /// products), "high" or "medium" (TF32 tensor cores on a GPU).
  std::string matmul_precision = "highest";
  std::string model;      // minilm: sentence-transformers folder ("" = fetched)
  int64_t nodes = 40000;  // chain: number of adds
  /// The kernel cache to compile into, kept afterwards ("" = a fresh private
  /// one, removed after the row): a second run with the same folder measures
  /// a warm compile in a fresh process.
  std::string cache_dir;
  /// A safetensors file holding the workload's inputs ("t0", "t1", ... in the
  /// order the workload makes them) and a model's weights ("mlp." + its
  /// state_dict keys) instead of seeded random ones: bench/torch_compare.py
  /// gives smelt the very inputs PyTorch runs ("" = seeded randn).
  std::string inputs;
  /// Where to write the outputs ("eager0", "compiled0", ...) as safetensors ("" = nowhere).
  std::string save_outputs;
  std::string filter;  // ops, op-shapes: only the ops whose name contains this
  /// With device cuda: generate the workload's CUDA program at the GPU sizes
  /// and compile it with NVRTC for compute capability cuda_arch / 10 .
  /// cuda_arch % 10, without a GPU; nothing runs (bench_codegen.h).
  bool codegen_only = false;
  int cuda_arch = 90;
  /// The peaks the share of achieved bandwidth and FLOP rate is taken of
  /// (GB/s, TFLOP/s); 0: on CUDA the H200's (4300 GB/s copy, 780 TFLOP/s
  /// bfloat16/float16 dense, measured), on the CPU none.
  double peak_gbps = 0;
  double peak_tflops = 0;
};
/// `smelt bench <workload>`: eager vs compiled; prints each row as it finishes (bench.cpp).
int cmd_bench(const BenchOptions& opts);
/// `smelt bench ops|op-shapes`: eager time of each op of the per-op set
/// (opts.workload picks the list), one row per op (bench_ops.cpp).
int cmd_bench_ops(const BenchOptions& opts);
/// What each column of `smelt bench` means (its --help footer; the README says the same).
const char* bench_columns_help();

/// The sentence encoder in `model_dir` (a sentence-transformers folder), or,
/// when it is empty, all-MiniLM-L6-v2 fetched by tools/fetch_model.py (embed.cpp).
nn::SentenceEncoder load_sentence_encoder(const std::string& model_dir);

struct EmbedOptions {
  std::vector<std::string> sentences;  // empty: one per line from stdin
  std::string model;                   // sentence-transformers folder ("" = all-MiniLM-L6-v2)
  std::string device = "cpu";
  bool compiled = false;
  bool json = false;  // a JSON list of lists instead of one line per sentence
  int batch_size = 32;
};
/// `smelt embed [sentences...]`: one embedding per line (embed.cpp).
int cmd_embed(const EmbedOptions& opts);
/// `smelt similarity A B`: the cosine similarity of two sentences' embeddings
/// (sentences[0], sentences[1] of opts) (embed.cpp).
int cmd_similarity(const EmbedOptions& opts);

struct TrainOptions {
  std::string model = "digits";        // the only model trained so far
  std::string run = "adam_minibatch";  // a digits run of training.json (models::digits_runs)
  std::string mode = "both";           // eager | compiled | both
  int64_t steps = 0;                   // 0: the run's whole schedule (PyTorch's)
  std::string shared_dir;              // folder with data/training.safetensors
};
/// `smelt train digits`: trains the digits model from PyTorch's initial weights,
/// eagerly and/or compiled, with a progress line and the loss per epoch, and
/// checks the loss curve and test accuracy against PyTorch's (train.cpp).
int cmd_train(const TrainOptions& opts);

struct FuzzOptions {
  int cases = 100;
  uint64_t seed = 0;
  bool verbose = false;
  std::string device;  // "": compiled vs eager; "cuda": eager on the GPU vs eager on the CPU
  bool grad = false;   // gradient programs: compiled backward against eager backward
};
/// `smelt fuzz --cases N --seed S [--grad]`: differential compiled-vs-eager fuzzing (fuzz.cpp).
int cmd_fuzz(const FuzzOptions& opts);

}  // namespace smelt::cli
