// Device-free parts of the compile modes (the GPU runs are in
// tests/backend/test_cuda_modes.cpp): max-autotune's candidate layouts
// (first the heuristic's, distinct, each a valid CUDA layout of its kernel),
// the disk cache of its choices (keys, storage, validation against the
// candidates), a chosen layout regenerating its kernel; reduce-overhead's
// static reason not to record a graph; and the modes' plumbing on the CPU.
#include <gtest/gtest.h>

#include <set>

#include "compiler/codegen/cuda_dialect.h"
#include "compiler/codegen/generate.h"
#include "compiler/compile_test_util.h"
#include "compiler/fusion_patterns.h"
#include "compiler/runtime/autotune.h"
#include "compiler/runtime/replay.h"

using namespace smelt;
using namespace smelt::compiler;
using smelt_test::trace_graph;

namespace {

class Modes : public smelt_test::CompilerTest {};

/// Passes, fusion for CUDA, and code generation in the CUDA dialect.
Schedule cuda_schedule(const Graph& captured, Graph* after) {
  PassOptions passes;
  passes.planned_for = DeviceType::CUDA;  // graphs traced on the CPU
  *after = run_passes(captured, passes);
  Schedule s = schedule(*after, FusionOptions{}, Target::Cuda);
  generate_kernels(*after, s, CudaDialect());
  return s;
}

bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

/// Every invariant a CUDA layout of `group` must hold (see kernel_config.h).
::testing::AssertionResult valid_layout(const KernelGroup& group, const KernelConfig& c,
                                        const KernelConfig& base) {
  auto fail = [&](const std::string& why) {
    return ::testing::AssertionFailure() << c.str() << ": " << why;
  };
  if (c.vec != base.vec || c.index_bits != base.index_bits ||
      c.round_intermediates != base.round_intermediates || c.outer != base.outer ||
      c.reduction != base.reduction || c.scan != base.scan)
    return fail("changes what the kernel computes or reads, not its layout");
  if (c.block_size < 1 || c.block_size > kCudaMaxBlock) return fail("block size");
  if (c.grid < 1) return fail("grid");
  const int64_t n = detail::shape_numel(group.shape);
  if (!group.reduction) {
    if (c.items_per_thread % c.vec != 0) return fail("items per thread not whole vectors");
    if (int64_t{c.block_size} * c.items_per_thread > kCudaMaxBlockSpan) return fail("block span");
    if (c.grid * c.block_size * c.items_per_thread < n) return fail("grid does not cover");
    return ::testing::AssertionSuccess();
  }
  int64_t rn = 1, rows = 1;
  for (size_t d = 0; d < group.shape.size(); ++d)
    (std::find(group.rdims.begin(), group.rdims.end(), static_cast<int64_t>(d)) != group.rdims.end()
         ? rn
         : rows) *= group.shape[d];
  if (group.scan) {
    if (c.grid * c.block_size < rows) return fail("scan grid does not cover the rows");
    return ::testing::AssertionSuccess();
  }
  if (!is_pow2(c.threads_per_row)) return fail("threads per row not a power of two");
  if (c.threads_per_row * c.rows_per_block != c.block_size) return fail("block != lanes x rows");
  if (c.persistent) {
    if (c.row_iters < 1 || c.row_iters > kCudaRowIters) return fail("row_iters");
    if (int64_t{c.row_iters} * c.threads_per_row * c.vec < rn) return fail("row not covered");
  } else if (c.row_iters != 0) {
    return fail("a looped row with row_iters");
  }
  if (c.grid * c.rows_per_block < rows) return fail("grid does not cover the rows");
  return ::testing::AssertionSuccess();
}

}  // namespace

// Every kernel of every fusion pattern: the heuristic layout first, then
// distinct valid layouts, at most kMaxCandidates.
TEST_F(Modes, CandidatesOfEveryPatternAreValidLayouts) {
  int kernels = 0, with_alternatives = 0;
  for (auto& p : smelt_test::fusion_patterns()) {
    smelt_test::PatternCase c = p.make(Device());
    Graph g;
    Schedule s = cuda_schedule(smelt_test::trace_vector(c.fn, c.inputs), &g);
    for (auto& st : s.steps) {
      if (st.kind != Step::Kind::Kernel) continue;
      ++kernels;
      const std::vector<KernelConfig> cands = candidate_configs(st.group, st.config);
      ASSERT_FALSE(cands.empty());
      EXPECT_EQ(cands[0], st.config) << p.name;
      EXPECT_LE(cands.size(), kMaxCandidates);
      with_alternatives += cands.size() > 1;
      std::set<std::string> seen;
      for (auto& k : cands) {
        EXPECT_TRUE(seen.insert(k.str()).second) << p.name << ": twice " << k.str();
        EXPECT_TRUE(valid_layout(st.group, k, st.config)) << p.name << " " << st.name;
      }
    }
  }
  EXPECT_GT(kernels, 10);
  EXPECT_EQ(with_alternatives, kernels);
}

TEST_F(Modes, CandidatesOfTheBenchmarkShapes) {
  auto layouts = [](const Graph& captured) {
    Graph g;
    Schedule s = cuda_schedule(captured, &g);
    for (auto& st : s.steps)
      if (st.kind == Step::Kind::Kernel) return candidate_configs(st.group, st.config);
    return std::vector<KernelConfig>{};
  };
  {  // a pointwise chain over 2^20 float32: 256 x 1 vector first; 2 and 4 vectors a thread
    Tensor x = randn({1 << 20});
    auto c = layouts(trace_graph([](const Tensor& x) { return sigmoid(x * 2 + 1); }, x));
    ASSERT_GE(c.size(), 8u);
    EXPECT_EQ(c[0].str(), "cuda pointwise parallel idx32 block=256x4 grid=1024 vec=4");
    std::set<std::string> all;
    for (auto& k : c) all.insert(k.str());
    EXPECT_TRUE(all.count("cuda pointwise parallel idx32 block=256x8 grid=512 vec=4"));
    EXPECT_TRUE(all.count("cuda pointwise parallel idx32 block=1024x16 grid=64 vec=4"));
    EXPECT_EQ(c[1].vectors_per_thread(), 1);  // nearest first: other block sizes, one vector
  }
  {  // softmax over 8192 float32: 512 threads a row persistent; looped and narrower rows too
    auto c =
        layouts(trace_graph([](const Tensor& x) { return softmax(x, -1); }, randn({16, 8192})));
    ASSERT_GE(c.size(), 6u);
    EXPECT_TRUE(c[0].persistent);
    EXPECT_EQ(c[0].threads_per_row, 512);
    bool looped = false, narrower = false, wider = false;
    for (auto& k : c) {
      looped |= !k.persistent;
      narrower |= k.threads_per_row == 256 && k.persistent && k.row_iters == 8;
      wider |= k.threads_per_row == 1024;
    }
    EXPECT_TRUE(looped && narrower && wider);
  }
  {  // a small pointwise kernel: no second vector per thread past the end
    auto c = layouts(trace_graph([](const Tensor& x) { return x * 2; }, randn({300})));
    for (auto& k : c) EXPECT_EQ(k.vectors_per_thread(), 1) << k.str();
  }
}

TEST_F(Modes, CpuConfigsHaveNoAlternative) {
  Graph g =
      run_passes(trace_graph([](const Tensor& x) { return softmax(x, -1); }, randn({16, 8192})),
                 PassOptions{});
  Schedule s = schedule(g, FusionOptions{}, Target::Cpp);
  for (auto& st : s.steps) {
    if (st.kind == Step::Kind::Kernel) {
      EXPECT_EQ(candidate_configs(st.group, st.config).size(), 1u);
    }
  }
}

// The key names the kernel's code, shapes and device, not its place in a graph.
TEST_F(Modes, AutotuneKeyIgnoresTheKernelNameOnly) {
  auto first_kernel = [](const Graph& captured) {
    Graph g;
    Schedule s = cuda_schedule(captured, &g);
    for (auto& st : s.steps)
      if (st.kind == Step::Kind::Kernel) return st;
    return Step{};
  };
  Tensor x = randn({64, 1000});
  Step a = first_kernel(trace_graph([](const Tensor& x) { return softmax(x, -1); }, x));
  // The same kernel numbered 7 in another graph.
  Step b = a;
  b.name = a.name.substr(0, a.name.rfind('_')) + "_7";
  for (size_t at = b.source.find(a.name); at != std::string::npos;
       at = b.source.find(a.name, at + 1))
    b.source.replace(at, a.name.size(), b.name);
  ASSERT_NE(a.source, b.source);
  EXPECT_EQ(autotune_key(a, "NVIDIA H200, compute capability 9.0"),
            autotune_key(b, "NVIDIA H200, compute capability 9.0"));
  EXPECT_NE(autotune_key(a, "NVIDIA H200, compute capability 9.0"),
            autotune_key(a, "NVIDIA A100, compute capability 8.0"));
  Step c =
      first_kernel(trace_graph([](const Tensor& x) { return softmax(x, -1); }, randn({64, 999})));
  EXPECT_NE(autotune_key(a, "d"), autotune_key(c, "d"));
  EXPECT_EQ(autotune_key(a, "d").size(), 16u);
}

TEST_F(Modes, AutotuneChoicesAreStoredAndCheckedAgainstTheCandidates) {
  smelt_test::ScopedEnv dir("SMELT_CACHE_DIR", smelt_test::fresh_cache_dir("autotune"));
  Graph g;
  Schedule s = cuda_schedule(
      trace_graph([](const Tensor& x) { return softmax(x, -1); }, randn({16, 8192})), &g);
  Step& st = s.steps[0];
  ASSERT_EQ(st.kind, Step::Kind::Kernel);
  const std::vector<KernelConfig> cands = candidate_configs(st.group, st.config);
  const std::string key = autotune_key(st, "dev");
  EXPECT_EQ(load_autotune_choice(key), "");
  store_autotune_choice(key, cands[3].str());
  EXPECT_EQ(load_autotune_choice(key), cands[3].str());
  const KernelConfig* found = find_candidate(cands, load_autotune_choice(key));
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(*found, cands[3]);
  // A stored layout that is no candidate (another smelt, a damaged file) is not used.
  store_autotune_choice(key, "cuda reduction idx32 block=7x1 grid=1");
  EXPECT_EQ(find_candidate(cands, load_autotune_choice(key)), nullptr);
  EXPECT_EQ(find_candidate(cands, ""), nullptr);
}

// A chosen layout regenerates the kernel; a reduction's name follows its
// persistence (cuda_per_ / cuda_red_).
TEST_F(Modes, ApplyingALayoutRegeneratesTheKernel) {
  Graph g;
  Schedule s = cuda_schedule(
      trace_graph([](const Tensor& x) { return softmax(x, -1); }, randn({16, 8192})), &g);
  Step& st = s.steps[0];
  ASSERT_EQ(st.name.rfind("cuda_per_fused_", 0), 0u) << st.name;
  const std::vector<KernelConfig> cands = candidate_configs(st.group, st.config);
  const KernelConfig* looped = nullptr;
  for (auto& c : cands)
    if (!c.persistent && c.threads_per_row == st.config.threads_per_row) looped = &c;
  ASSERT_NE(looped, nullptr);
  const std::string before = st.source;
  apply_config(g, s, st, *looped, CudaDialect());
  EXPECT_EQ(st.config, *looped);
  EXPECT_EQ(st.kernel_kind, "red");
  EXPECT_EQ(st.name.rfind("cuda_red_fused_", 0), 0u) << st.name;
  EXPECT_NE(st.source, before);
  EXPECT_NE(st.source.find("// " + st.name + ": " + looped->str()), std::string::npos)
      << st.source.substr(0, 400);
  EXPECT_NE(st.source.find("extern \"C\" __global__ void __launch_bounds__(512) " + st.name),
            std::string::npos);
}

// Two vectors per thread: the block takes two passes, its threads side by
// side in each (coalesced), the vector's elements unrolled.
TEST_F(Modes, SeveralVectorsPerThreadPrintAsPasses) {
  Graph g;
  Schedule s = cuda_schedule(
      trace_graph([](const Tensor& x) { return sigmoid(x * 2 + 1); }, randn({1 << 20})), &g);
  Step& st = s.steps[0];
  const std::vector<KernelConfig> cands = candidate_configs(st.group, st.config);
  const KernelConfig* two = nullptr;
  for (auto& c : cands)
    if (c.vectors_per_thread() == 2 && c.block_size == 256) two = &c;
  ASSERT_NE(two, nullptr);
  apply_config(g, s, st, *two, CudaDialect());
  EXPECT_NE(st.source.find("for (int i_u = 0; i_u < 2; ++i_u) {"), std::string::npos) << st.source;
  EXPECT_NE(st.source.find("i_w = ((static_cast<int32_t>(blockIdx.x) * 2 + i_u) * 256 + "
                           "static_cast<int32_t>(threadIdx.x));"),
            std::string::npos)
      << st.source;
  EXPECT_NE(st.source.find("i_base = i_w * 4;"), std::string::npos) << st.source;
  EXPECT_EQ(two->grid, 512);
}

namespace {
/// A module whose kernels are placeholders: a CompiledGraph's plan can be
/// built and inspected without a toolchain or a device.
class PlanOnlyModule final : public backend::Module {
 public:
  backend::KernelHandle function(const std::string&) const override {
    return backend::KernelHandle{this};
  }
  const std::string& path() const override { return path_; }

 private:
  std::string path_ = "(none)";
};
}  // namespace

// Kernels whose runtime check the host reads after each call keep a graph
// from being recorded, and so does a graph that launches nothing; others do not.
TEST_F(Modes, ErrorFlagsKeepAGraphFromBeingRecorded) {
  auto plan = [](const Graph& captured) {
    Graph g;
    Schedule s = cuda_schedule(captured, &g);
    return std::make_unique<CompiledGraph>(std::move(g), std::move(s),
                                           std::make_shared<PlanOnlyModule>(), false);
  };
  Tensor a = arange(0, 100).to(DType::Int32), b = arange(1, 101).to(DType::Int32);
  auto div =
      plan(trace_graph([](const Tensor& a, const Tensor& b) { return remainder(a, b) * 2; }, a, b));
  const std::string why = capture_blocker(*div);
  EXPECT_NE(why.find("remainder"), std::string::npos) << why;
  EXPECT_NE(why.find("error flag"), std::string::npos) << why;
  EXPECT_NE(why.find(div->schedule().steps[0].name), std::string::npos) << why;
  auto fine = plan(trace_graph([](const Tensor& x) { return softmax(x, -1); }, randn({8, 64})));
  EXPECT_EQ(capture_blocker(*fine), "");
  EXPECT_EQ(fine->capture_stats().captures, 0);
  // A graph of views only launches nothing: no graph to record.
  auto views = plan(trace_graph([](const Tensor& x) { return x.t(); }, randn({4, 8})));
  EXPECT_TRUE(views->schedule().steps.empty());
  EXPECT_EQ(capture_blocker(*views), "the graph launches nothing");
}

// On the CPU, every mode computes what eager does; reduce-overhead records no
// CUDA graph and max-autotune tunes nothing (both say so in their stats).
TEST_F(Modes, EveryModeRunsOnTheCpu) {
  auto fn = [](const Tensor& x) { return softmax(x * 2, -1) + 1; };
  Tensor x = randn({32, 100});
  const Tensor want = fn(x);
  for (const char* mode :
       {"default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"}) {
    CompileOptions o;
    o.mode = mode;
    auto f = compile(fn, o);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(smelt_test::close(f(x), want, 1e-6)) << mode;
    EXPECT_EQ(f.stats().compiles, 1) << mode;
    EXPECT_EQ(f.stats().cudagraph_captures, 0) << mode;
    EXPECT_EQ(f.stats().cudagraph_replays, 0) << mode;
    EXPECT_EQ(f.stats().cudagraph_static_bytes, 0) << mode;
    EXPECT_EQ(f.stats().autotune_tuned, 0) << mode;
    EXPECT_EQ(f.stats().autotune_cache_hits, 0) << mode;
  }
}

TEST_F(Modes, UnknownModeNamesTheModes) {
  CompileOptions o;
  o.mode = "max-autotune-cudagraphs";
  smelt_test::expect_error_mentions([&] { compile([](const Tensor& x) { return x + 1; }, o); },
                                    "\"max-autotune-no-cudagraphs\"");
}
