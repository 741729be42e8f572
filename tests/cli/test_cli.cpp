// The `smelt` command-line tool as a user sees it: --help shows every default
// and describes --device, errors are printed once with one "smelt" prefix,
// `golden --filter` that matches nothing fails and says so, long commands
// draw a progress line on stderr only when it is a terminal, `bench`
// explains its columns and splits compile times by phase, and `cache` reports
// and clears the kernel cache.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

extern "C" char** environ;

#ifdef SMELT_CLI
namespace {

struct CliRun {
  int rc = -1;
  std::string out, err;
};

/// Runs the smelt CLI with `args`; stdout is a pipe, stderr a pipe or (when
/// `stderr_tty`) a pseudo-terminal, as when a user runs it in a shell.
CliRun run_cli(const std::vector<std::string>& args, bool stderr_tty = false) {
  CliRun r;
  int out[2], err[2];
  if (::pipe(out) != 0) return r;
  if (stderr_tty) {
    if (::openpty(&err[0], &err[1], nullptr, nullptr, nullptr) != 0) return r;
  } else if (::pipe(err) != 0) {
    return r;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  posix_spawn_file_actions_addclose(&fa, err[0]);
  std::vector<std::string> argv = {SMELT_CLI};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargs;
  for (auto& a : argv) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, cargs[0], &fa, nullptr, cargs.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    ::close(out[0]);
    ::close(err[0]);
    return r;
  }
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* dst[2] = {&r.out, &r.err};
  int open = 2;
  char buf[4096];
  while (open > 0) {
    if (::poll(fds, 2, -1) < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        dst[i]->append(buf, static_cast<size_t>(n));
      } else {  // EOF (pipe) or EIO (terminal closed)
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

const std::string kGolden = std::string(SMELT_SHARED_DIR) + "/golden/golden.json";

}  // namespace

TEST(Cli, HelpShowsEveryDefaultAndDescribesDevice) {
  CliRun r = run_cli({"bench", "--help"});
  EXPECT_EQ(r.rc, 0) << r.err;
  for (const char* want :
       {"--device TEXT=cpu", "device the workload runs on: cpu", "--dtype TEXT ",
        "(default: float32; bfloat16 for the GEMM workloads and gpt2-block on a GPU)",
        "--mode TEXT=default", "--iters INT=0", "\n  eager_ms, comp_ms        median wall time",
        "\n  cold_ms                  first compile of the graph with none of its kernels in the"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  CliRun f = run_cli({"fuzz", "--help"});
  EXPECT_NE(f.out.find("--cases INT:INT in [1 - 1000000]=100"), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("--seed UINT=0"), std::string::npos) << f.out;
  CliRun g = run_cli({"golden", "--help"});
  EXPECT_NE(g.out.find("progress line"), std::string::npos) << g.out;
}

TEST(Cli, ErrorsArePrefixedOnce) {
  CliRun r = run_cli({"bench", "pointwise", "--device", "gpu"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "smelt bench: --device must be cpu, cuda or cuda:N, got 'gpu'\n");
  EXPECT_EQ(r.out, "") << "no table header before the error";
  CliRun w = run_cli({"bench", "no_such_workload"});
  EXPECT_EQ(w.rc, 2);
  EXPECT_EQ(w.err,
            "smelt bench: unknown workload 'no_such_workload'; use pointwise, softmax, layernorm, "
            "mlp, train-mlp, train-aot, horizontal, batchnorm-relu, gpt2-block, gemm, "
            "linear-gelu, linear-gelu-erf, chain, minilm, ops, op-shapes or all\n");
  CliRun c = run_cli({"bench", "pointwise", "--codegen-only"});
  EXPECT_EQ(c.err, "smelt bench: --codegen-only generates the CUDA program; add --device cuda\n");
  CliRun d = run_cli({"bench", "softmax", "--dtype", "int32"});
  EXPECT_EQ(d.err, "smelt bench: --dtype must be a floating dtype, got int32\n");
  // A library error gets the one prefix.
  CliRun m = run_cli({"bench", "softmax", "--dtype", "nonsense"});
  EXPECT_EQ(m.err,
            "smelt: dtype: unknown dtype name 'nonsense'; use one of bool, uint8, int8, int16, "
            "int32, int64, float16, bfloat16, float32, float64\n");
  CliRun g = run_cli({"golden", "/nonexistent/golden.json"});
  EXPECT_EQ(g.err, "smelt golden: cannot open manifest '/nonexistent/golden.json'\n");
}

// embed / similarity check --device before loading any model.
TEST(Cli, EmbedNamesAWrongDevice) {
  CliRun r = run_cli({"embed", "--device", "gpu", "a"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "smelt embed: --device must be cpu, cuda or cuda:N, got 'gpu'\n");
  // No GPU here, or fewer than eight: either way, the device and what to do.
  CliRun c = run_cli({"similarity", "a", "b", "--device", "cuda:7"});
  EXPECT_EQ(c.rc, 2);
  EXPECT_EQ(c.err.rfind("smelt embed: --device cuda:7: ", 0), 0u) << c.err;
  EXPECT_TRUE(c.err.find("use --device cpu") != std::string::npos ||
              c.err.find("pick an index below") != std::string::npos)
      << c.err;
  EXPECT_EQ(c.out, "");
}

TEST(Cli, BenchOpsTimesSingleOps) {
  CliRun r = run_cli({"bench", "ops", "--filter", "softmax", "--iters", "1", "--json"});
  EXPECT_EQ(r.rc, 0) << r.err;
  // softmax and log_softmax, one JSON row each.
  EXPECT_NE(r.out.find("{\"eager_ms\":"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"op\":\"softmax\",\"shape\":\"512x1024 dim -1\"}"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\"op\":\"log_softmax\""), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"op\":\"layer_norm\""), std::string::npos) << r.out;
}

TEST(Cli, BenchOpShapesTimesTheOtherShapes) {
  // The op-shapes list: its own rows (not the ops list's), filtered by name.
  CliRun r = run_cli({"bench", "op-shapes", "--filter", "sum_dim", "--iters", "1", "--json"});
  EXPECT_EQ(r.rc, 0) << r.err;
  for (const char* want :
       {"\"op\":\"sum_dim0_tall\",\"shape\":\"65536x4 dim 0\"", "\"op\":\"sum_dim1_tall\"",
        "\"op\":\"sum_dim0_wide\"", "\"op\":\"sum_dim1_wide\",\"shape\":\"4x65536 dim 1\""})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 4) << r.out;
  CliRun gpu = run_cli({"bench", "op-shapes", "--device", "cuda"});
  EXPECT_EQ(gpu.rc, 2) << gpu.out;
  EXPECT_NE(gpu.err.find("the op-shapes workload runs on the CPU only"), std::string::npos)
      << gpu.err;
}

TEST(Cli, TrainDigitsShowsEpochsAndAgreesWithPyTorch) {
  // Two epochs of the minibatch Adam run, eagerly and compiled, with a progress line.
  CliRun r = run_cli({"train", "digits", "--steps", "46"}, true);
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  for (const char* want :
       {"run adam_minibatch (minibatches of 64), 46 steps over 1437 training images", "\neager\n",
        "\ncompiled (smelt::compile of the training step)\n", "      1/2    2.242813    2.165985",
        "      2/2    1.855372    1.488809      1.488809",
        "losses vs PyTorch's, first 46 steps: max relative difference",
        "compiled vs eager, every step: max relative difference 0.00e+00"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  EXPECT_EQ(r.out.find("MISMATCH"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("\r\033[Ksmelt train digits (compiled): 46/46 steps (100%), "),
            std::string::npos)
      << r.err;
  CliRun bad = run_cli({"train", "digits", "--run", "rmsprop"});
  EXPECT_EQ(bad.rc, 2);
  EXPECT_EQ(bad.err,
            "smelt: digits_run: no run called 'rmsprop' in training.json; the runs: sgd, "
            "sgd_momentum_nesterov_wd, adam, adamw, adam_minibatch\n");
}

TEST(Cli, BenchChainSplitsItsCompileTime) {
  // 600 adds: three kernels of at most 256 ops; the compile time by phase.
  CliRun r = run_cli({"bench", "chain", "--nodes", "600", "--iters", "1"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("chain           cold compile: trace "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chain           warm compile: trace "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", C++ compiler 0.0, load "), std::string::npos) << "warm: no compiler run";
  EXPECT_NE(r.out.find("kernels: cpp_poi_fused_add_0, cpp_poi_fused_add_1, cpp_poi_fused_add_2\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(" 0.00e+00  0.00e+00 "), std::string::npos) << "equal to eager\n" << r.out;
}

namespace {
/// The last line of `out` (a JSON row of `smelt bench --json`) parsed.
nlohmann::json last_json(const std::string& out) {
  const size_t end = out.find_last_not_of('\n');
  const size_t begin = out.rfind('\n', end);
  return nlohmann::json::parse(out.substr(begin == std::string::npos ? 0 : begin + 1));
}
}  // namespace

// Training-mode batch_norm + relu on the CPU (8x64x56x56): the compiled module
// updates running_mean / running_var as eager does (two calls from the same
// stats, compared), its output agrees, and the bandwidth share uses the peak given.
TEST(Cli, BenchBatchNormReluUpdatesRunningStatsAsEager) {
  CliRun r = run_cli({"bench", "batchnorm-relu", "--json", "--iters", "1", "--peak-gbps", "50"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json j = last_json(r.out);
  EXPECT_EQ(j["workload"], "batchnorm-relu");
  EXPECT_NE(j["description"].get<std::string>().find("8x64x56x56"), std::string::npos) << j;
  ASSERT_TRUE(j.contains("state_max_abs_err")) << j;
  EXPECT_LT(j["state_max_abs_err"].get<double>(), 1e-5) << j;
  EXPECT_LT(j["max_abs_err"].get<double>(), 1e-4) << j;
  EXPECT_GE(j["compiled_kernels"].get<int>(), 1) << j;
  EXPECT_DOUBLE_EQ(j["peak_gbps"].get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(j["gbps_share"].get<double>(), j["gbps_compiled"].get<double>() / 50.0);
  EXPECT_FALSE(j.contains("tflops_compiled")) << "batch_norm counts bytes, not FLOPs";
}

// --matmul-precision: the run's float32 GEMM precision, recorded in the JSON
// row (bench/torch_compare.py sets PyTorch's to the same); float32 GEMMs on the
// CPU stay exact, so the MLP still agrees with eager as tightly; an unknown
// value is refused before anything runs.
TEST(Cli, BenchMatmulPrecisionIsRecordedAndChecked) {
  CliRun r = run_cli({"bench", "mlp", "--json", "--iters", "1", "--matmul-precision", "high"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json j = last_json(r.out);
  EXPECT_EQ(j["matmul_precision"], "high") << j;
  EXPECT_LT(j["max_abs_err"].get<double>(), 1e-4) << j;
  CliRun d = run_cli({"bench", "mlp", "--json", "--iters", "1"});
  ASSERT_EQ(d.rc, 0) << d.err;
  EXPECT_EQ(last_json(d.out)["matmul_precision"], "highest");
  CliRun bad = run_cli({"bench", "mlp", "--matmul-precision", "tf32"});
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.err.find("--matmul-precision: tf32 not in {highest,high,medium}"),
            std::string::npos)
      << bad.err;
}

// A GPT-2 block (C 768, 12 heads) over 1 x 128 tokens on the CPU: compiled
// agrees with eager, the FLOPs are counted (24 B T C^2 + 4 B T^2 C), and the
// shared PyTorch block compiled here matches PyTorch's output.
TEST(Cli, BenchGpt2BlockAgreesAndCountsFlops) {
  CliRun r = run_cli({"bench", "gpt2-block", "--json", "--iters", "1", "--peak-tflops", "2"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json j = last_json(r.out);
  EXPECT_EQ(j["workload"], "gpt2-block");
  EXPECT_LT(j["max_abs_err"].get<double>(), 1e-3) << j;
  EXPECT_LT(j["shared_block_rel_err"].get<double>(), 1e-4) << j;
  EXPECT_DOUBLE_EQ(j["flops"].get<double>(), 24.0 * 128 * 768 * 768 + 4.0 * 128 * 128 * 768);
  EXPECT_DOUBLE_EQ(j["tflops_compiled"].get<double>(),
                   j["flops"].get<double>() / j["compiled_ms"].get<double>() / 1e9);
  EXPECT_DOUBLE_EQ(j["tflops_share"].get<double>(), j["tflops_compiled"].get<double>() / 2);
  EXPECT_EQ(j["items_unit"], "tokens");
  EXPECT_FALSE(j.contains("gbps_share")) << "no default peak on the CPU";
}

// --codegen-only: the CUDA program of the GPU-sized workload, generated and
// compiled by NVRTC for sm_90 on a machine without a GPU; nothing runs.
TEST(Cli, BenchCodegenOnlyCompilesTheCudaProgramWithoutAGpu) {
  CliRun r = run_cli({"bench", "gpt2-block", "--device", "cuda", "--dtype", "bfloat16",
                      "--codegen-only", "--json"});
  if (r.rc != 0 && r.err.find("built without CUDA") != std::string::npos) GTEST_SKIP() << r.err;
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json j = last_json(r.out);
  EXPECT_TRUE(j["codegen_only"].get<bool>());
  EXPECT_EQ(j["arch"], "sm_90");
  EXPECT_EQ(j["binary"], "cubin");
  EXPECT_GT(j["binary_bytes"].get<int64_t>(), 0);
  EXPECT_NE(j["description"].get<std::string>().find("batch 8 x 1024 tokens"), std::string::npos)
      << "the GPU sizes";
  int kernels = 0, gemms = 0;
  for (const auto& st : j["steps"]) {
    if (st["kind"] == "kernel") {
      ++kernels;
      EXPECT_EQ(st["name"].get<std::string>().rfind("cuda_", 0), 0u) << st;
      EXPECT_GT(st["grid"].get<int64_t>(), 0) << st;
      EXPECT_GT(st["block"].get<int>(), 0) << st;
    }
    gemms += st["kind"] == "extern";
  }
  EXPECT_EQ(kernels, j["generated_kernels"].get<int>());
  EXPECT_GE(kernels, 3) << j["kernel_names"];  // layer norms, attention's softmax, gelu...
  EXPECT_GE(gemms, 4) << j["kernel_names"];    // the four linear layers at least

  // Text: one line per step with its launch; the source with SMELT_LOGS=output_code.
  // The kernels index the 64x256x56x56 input: a batch stride of 256 * 56 * 56.
  setenv("SMELT_LOGS", "output_code", 1);
  CliRun t = run_cli({"bench", "batchnorm-relu", "--device", "cuda", "--codegen-only"});
  unsetenv("SMELT_LOGS");
  ASSERT_EQ(t.rc, 0) << t.err;
  EXPECT_NE(t.out.find("<<<grid "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("NVRTC "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("for sm_90 in "), std::string::npos) << t.out;
  EXPECT_NE(t.err.find("__global__"), std::string::npos) << t.err.substr(0, 2000);
  EXPECT_NE(t.err.find("*802816"), std::string::npos) << "the GPU sizes in the source";
}

TEST(Cli, GoldenFilterMatchingNothingFails) {
  CliRun r = run_cli({"golden", kGolden, "--filter", "no_case_has_this_id"});
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(r.err, "smelt golden: no case of " + kGolden +
                       " has an id containing 'no_case_has_this_id' (--filter matches part of a "
                       "case id, e.g. 'softmax'; run with -v and no --filter to list them)\n");
  EXPECT_EQ(r.out.find("0 passed"), std::string::npos) << r.out;
}

TEST(Cli, GoldenShowsProgressOnlyOnATerminal) {
  CliRun tty = run_cli({"golden", kGolden, "--filter", "softmax", "--compiled"}, true);
  ASSERT_EQ(tty.rc, 0) << tty.out << tty.err;
  const size_t at = tty.out.find(" passed, 0 failed");
  ASSERT_NE(at, std::string::npos) << tty.out;
  const size_t line =
      tty.out.rfind('\n', at) == std::string::npos ? 0 : tty.out.rfind('\n', at) + 1;
  const int n = std::stoi(tty.out.substr(line, at - line));
  ASSERT_GT(n, 1) << tty.out;
  EXPECT_NE(tty.out.find(std::to_string(n) + " passed, 0 failed"), std::string::npos) << tty.out;
  const std::string done = "smelt golden --compiled: " + std::to_string(n) + "/" +
                           std::to_string(n) + " cases (100%), 0 failed, ";
  EXPECT_NE(tty.err.find("\r\033[K" + done), std::string::npos) << tty.err;
  EXPECT_EQ(tty.err.substr(tty.err.size() - 4), "\r\033[K") << "the line is erased at the end";
  EXPECT_EQ(tty.out.find("cases ("), std::string::npos) << "progress goes to stderr only";

  CliRun pipe = run_cli({"golden", kGolden, "--filter", "softmax", "--compiled"});
  EXPECT_EQ(pipe.rc, 0);
  EXPECT_EQ(pipe.err, "") << "no progress line into a pipe or a log";
  EXPECT_EQ(pipe.out, tty.out);
}

TEST(Cli, FuzzShowsProgressOnlyOnATerminal) {
  CliRun tty = run_cli({"fuzz", "--cases", "3", "--seed", "3"}, true);
  ASSERT_EQ(tty.rc, 0) << tty.out << tty.err;
  EXPECT_NE(tty.out.find("3 cases, 0 mismatches"), std::string::npos) << tty.out;
  EXPECT_NE(tty.err.find("\r\033[Ksmelt fuzz: 1/3 cases (33%), 0 failed, "), std::string::npos)
      << tty.err;
  EXPECT_NE(tty.err.find(", ETA "), std::string::npos) << tty.err;
  EXPECT_NE(tty.err.find("\r\033[Ksmelt fuzz: 3/3 cases (100%), 0 failed, "), std::string::npos)
      << tty.err;
  CliRun pipe = run_cli({"fuzz", "--cases", "3", "--seed", "3"});
  EXPECT_EQ(pipe.rc, 0);
  EXPECT_EQ(pipe.err.find("cases ("), std::string::npos) << pipe.err;
}
TEST(Cli, CacheShowsLocationSizeAndClears) {
  char tmpl[] = "/tmp/smelt-cli-cache-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto write = [&](const std::string& name, size_t bytes) {
    std::ofstream(dir + "/" + name) << std::string(bytes, 'x');
  };
  write("0123456789abcdef.cpp", 1000);
  write("0123456789abcdef.so", 2000);
  write("0123456789abcdef.meta", 48);
  write("fedcba9876543210.so.tmp.12.34", 100);  // a temporary a crash left
  write("00000000ffffffff.plan", 200);          // a compiled plan (no kernel module)
  write("1111111111111111.h", 300);             // the CPU units' preamble ...
  write("1111111111111111.h.gch", 400);         // ... precompiled
  write("notes.txt", 5);                        // not the cache's
  write("cafe.h", 7);                           // not the cache's either (no 16-digit key)
  ::mkdir((dir + "/models").c_str(), 0700);
  const char* old = std::getenv("SMELT_CACHE_DIR");
  const std::string saved = old ? old : "";
  ::setenv("SMELT_CACHE_DIR", dir.c_str(), 1);
  CliRun info = run_cli({"cache"});
  CliRun clear = run_cli({"cache", "--clear"});
  CliRun after = run_cli({"cache"});
  if (old)
    ::setenv("SMELT_CACHE_DIR", saved.c_str(), 1);
  else
    ::unsetenv("SMELT_CACHE_DIR");
  EXPECT_EQ(info.rc, 0) << info.err;
  EXPECT_EQ(info.out, "kernel cache: " + dir +
                          " (from SMELT_CACHE_DIR)\n3 compiled kernel modules, 4.0 KiB in 7 "
                          "files\nnothing is evicted; `smelt cache --clear` deletes them (rebuilt "
                          "when needed)\n");
  EXPECT_EQ(clear.rc, 0) << clear.err;
  EXPECT_EQ(clear.out, "removed 7 files (4.0 KiB, 3 kernel modules) from " + dir + "\n");
  EXPECT_NE(after.out.find("0 compiled kernel modules, 0 bytes in 0 files"), std::string::npos)
      << after.out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/notes.txt")) << "only the cache's files go";
  EXPECT_TRUE(std::filesystem::exists(dir + "/cafe.h"));
  EXPECT_TRUE(std::filesystem::is_directory(dir + "/models"));
  std::filesystem::remove_all(dir);
}
#endif
