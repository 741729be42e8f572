// The compile modes on a GPU (every test skips itself with "no CUDA device"
// where there is none): reduce-overhead's CUDA graphs — the same values as
// mode default over calls with changing inputs, arguments copied into the
// static inputs, results the program holds never overwritten, a new shape
// recorded anew, mutated arguments written back, fused attention (cuDNN's
// where it loads) recorded, an SGD training step replayed, a kernel with a runtime check recorded
// (its failure raised at the next synchronization), a graph that cannot be recorded running step by
// step with its reason — and max-autotune: the
// same values as default, nothing the caller passed written, the disk cache
// of choices hit by a second compile, the time budget.
#include <gtest/gtest.h>

#include "compiler/compile_test_util.h"
#include "compiler/fusion_patterns.h"
#include "compiler/runtime/kernel_cache.h"
#ifdef SMELT_TEST_CUDA_BACKEND
#include "backend/cuda/cudnn_attention.h"
#endif
#include "smelt/cuda.h"
#include "smelt/nn.h"
#include "smelt/optim.h"

using namespace smelt;
using smelt_test::close;
using smelt_test::same;

namespace {

const Device kGpu("cuda:0");

class CudaModes : public smelt_test::CompilerTest {};

CompileOptions mode(const char* m) {
  CompileOptions o;
  o.mode = m;
  o.fullgraph = true;
  return o;
}

/// A small MLP block with a softmax and a reduction: a GEMM with its
/// epilogue, a persistent reduction and a pointwise chain.
Tensor block(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor h = gelu(matmul(x, w) + b);
  return softmax(h, -1) * 2 + sum(h, {1}, true);
}

}  // namespace

// Several calls with new data each time: every result equals mode default's
// (the same kernels) and eager's; the calls after the warm-up replay a CUDA
// graph.
TEST_F(CudaModes, ReduceOverheadEqualsDefaultOverCallsWithChangingInputs) {
  SMELT_SKIP_WITHOUT_CUDA();
  auto ro = compile(block, mode("reduce-overhead"));
  auto def = compile(block, mode("default"));
  Tensor w = randn({64, 128}).cuda(), b = randn({128}).cuda();
  for (int i = 0; i < 6; ++i) {
    Tensor x = randn({32, 64}).cuda();
    const Tensor got = ro(x, w, b).cpu();  // the result is dropped: the next call may replay
    EXPECT_TRUE(close(got, def(x, w, b).cpu(), 1e-6)) << "call " << i;
    EXPECT_TRUE(close(got, block(x, w, b).cpu(), 1e-4)) << "call " << i;
  }
  const CompileStats& st = ro.stats();
  EXPECT_EQ(st.compiles, 1);
  EXPECT_EQ(st.cudagraph_skip_reason, "");
  EXPECT_EQ(st.cudagraph_captures, 1);
  EXPECT_EQ(st.cudagraph_replays, 5);
  EXPECT_EQ(st.cudagraph_uncaptured_runs, 1);  // the warm-up
  EXPECT_GT(st.cudagraph_static_bytes, 32 * 64 * 4);
}

// The same argument tensor, changed in place between calls: each replay
// copies it in again.
TEST_F(CudaModes, ReduceOverheadCopiesArgumentsIn) {
  SMELT_SKIP_WITHOUT_CUDA();
  auto f = compile([](const Tensor& x) { return exp(x) + 1; }, mode("reduce-overhead"));
  Tensor x = randn({1000}).cuda();
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(close(f(x).cpu(), (exp(x) + 1).cpu(), 1e-6)) << "call " << i;
    x.mul_(0.5);
  }
  // A view with a storage offset (aligned) is copied from where it starts.
  Tensor base = randn({2048}).cuda();
  Tensor view = base.narrow(0, 1024, 1000);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(close(f(view).cpu(), (exp(view) + 1).cpu(), 1e-6));
  EXPECT_GE(f.stats().cudagraph_replays, 4);
}

// Results the program still holds are never overwritten: two recordings take
// turns, and a call finding both in use runs step by step.
TEST_F(CudaModes, ReduceOverheadNeverOverwritesAHeldResult) {
  SMELT_SKIP_WITHOUT_CUDA();
  auto f = compile([](const Tensor& x) { return x * 3; }, mode("reduce-overhead"));
  std::vector<Tensor> xs, ys;
  for (int i = 0; i < 5; ++i) {
    xs.push_back(randn({4096}).cuda());
    ys.push_back(f(xs.back()));
  }
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(same(ys[i].cpu(), (xs[i] * 3).cpu())) << "result " << i;
  const CompileStats& st = f.stats();
  EXPECT_EQ(st.cudagraph_captures, 2);
  EXPECT_EQ(st.cudagraph_replays, 2);
  EXPECT_EQ(st.cudagraph_uncaptured_runs, 3);  // the warm-up, then two calls with both in use
  // The usual loop: y reassigned each call; the recordings alternate.
  Tensor y;
  ys.clear();
  for (int i = 0; i < 6; ++i) {
    Tensor x = randn({4096}).cuda();
    y = f(x);
    EXPECT_TRUE(same(y.cpu(), (x * 3).cpu()));
  }
  EXPECT_EQ(f.stats().cudagraph_replays, 8);
}

// A new shape fails a guard: a new graph is compiled and recorded.
TEST_F(CudaModes, ReduceOverheadRecordsANewGraphForANewShape) {
  SMELT_SKIP_WITHOUT_CUDA();
  auto f = compile([](const Tensor& x) { return softmax(x, -1) + 1; }, mode("reduce-overhead"));
  for (int64_t rows : {16, 16, 16, 48, 48, 48}) {
    Tensor x = randn({rows, 300}).cuda();
    EXPECT_TRUE(close(f(x).cpu(), (softmax(x, -1) + 1).cpu(), 1e-6)) << rows;
  }
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_EQ(f.stats().cudagraph_captures, 1);  // of the latest graph
  EXPECT_EQ(f.stats().cudagraph_replays, 2);
}

#ifdef SMELT_TEST_CUDA_BACKEND
// Fused attention recorded into the CUDA graph: causal sdpa in bfloat16 with
// 300 keys, head dims 64 (smelt's kernel or cuDNN's) and 128 (cuDNN's alone,
// where libcudnn.so.9 loads; otherwise decomposed). The warm-up builds
// cuDNN's plan, the recording reuses it, and the replays give the CPU's
// values for new inputs each call.
TEST_F(CudaModes, ReduceOverheadRecordsFusedAttention) {
  SMELT_SKIP_WITHOUT_CUDA();
  for (int64_t E : {64, 128}) {
    SCOPED_TRACE(::testing::Message() << "E " << E);
    auto f = compile(
        [](const Tensor& q, const Tensor& k, const Tensor& v) {
          return scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, true) * 2;
        },
        mode("reduce-overhead"));
    const int64_t launches = cuda::impl::cudnn_attention_launches();
    for (int i = 0; i < 4; ++i) {
      Tensor q = randn({2, 3, 300, E}).to(DType::BFloat16),
             k = randn({2, 3, 300, E}).to(DType::BFloat16),
             v = randn({2, 3, 300, E}).to(DType::BFloat16);
      const Tensor want = scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, true) * 2;
      smelt_test::expect_close(smelt_test::vals(f(q.cuda(), k.cuda(), v.cuda()).cpu()),
                               smelt_test::vals(want), 4e-2);
    }
    const CompileStats& st = f.stats();
    EXPECT_EQ(st.cudagraph_skip_reason, "");
    EXPECT_EQ(st.cudagraph_captures, 1);
    EXPECT_EQ(st.cudagraph_replays, 3);  // the recording call replays too
    // cuDNN ran in the warm-up and was recorded (replays do not call it).
    if (cuda::impl::cudnn_attention_available()) {
      EXPECT_GE(cuda::impl::cudnn_attention_launches() - launches, 2)
          << cuda::impl::cudnn_attention_last_decline();
    }
  }
}
#endif  // SMELT_TEST_CUDA_BACKEND

// An argument the function writes into: the replay's final value is written
// back into it, its version moves on.
TEST_F(CudaModes, ReduceOverheadWritesMutatedArgumentsBack) {
  SMELT_SKIP_WITHOUT_CUDA();
  auto f = compile(
      [](const Tensor& x) {
        x.add_(1);
        return x * 2;
      },
      mode("reduce-overhead"));
  Tensor x = zeros({256}).cuda();
  for (int i = 1; i <= 4; ++i) {
    const auto v = x.storage()->version();
    Tensor y = f(x);
    EXPECT_TRUE(same(x.cpu(), full({256}, static_cast<double>(i))));
    EXPECT_TRUE(same(y.cpu(), full({256}, 2.0 * i)));
    EXPECT_GT(x.storage()->version(), v);
  }
  EXPECT_GE(f.stats().cudagraph_replays, 3);
}

namespace {
/// Steps of SGD (momentum) on an MLP compiled in `m`: the losses and the
/// final parameters.
std::pair<std::vector<double>, std::vector<Tensor>> train(const char* m, int steps) {
  manual_seed(7);
  auto model = nn::Sequential(nn::Linear(32, 64), nn::GELU(), nn::Linear(64, 10));
  model->to(kGpu);
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  Tensor x = randn({128, 32}).cuda();
  Tensor y = remainder(arange(0, 128), full({128}, 10, TensorOptions(DType::Int64))).cuda();
  EnableGradGuard grad;
  CompileOptions o = mode(m);
  auto step = compile(
      [&](const Tensor& x, const Tensor& y) {
        opt.zero_grad();
        Tensor loss = cross_entropy(model(x), y);
        loss.backward();
        opt.step();
        return loss;
      },
      o);
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) losses.push_back(step(x, y).item<double>());
  std::vector<Tensor> params;
  for (auto& p : model->parameters()) params.push_back(p.detach().cpu());
  if (std::string(m) == "reduce-overhead") {
    EXPECT_EQ(step.stats().cudagraph_skip_reason, "");
    EXPECT_GE(step.stats().cudagraph_replays, steps - 3);
  }
  return {losses, params};
}

/// `steps` training steps in mode `m` give the losses and parameters of mode default.
void expect_trains_as_default(const char* m, int steps) {
  auto [want_losses, want_params] = train("default", steps);
  auto [got_losses, got_params] = train(m, steps);
  for (size_t i = 0; i < want_losses.size(); ++i)
    EXPECT_NEAR(got_losses[i], want_losses[i], 1e-5 * (1 + std::abs(want_losses[i])))
        << m << " " << i;
  for (size_t i = 0; i < want_params.size(); ++i)
    EXPECT_TRUE(close(got_params[i], want_params[i], 1e-5)) << m << " " << i;
}
}  // namespace

// A training step (forward, backward, SGD with momentum: its tables staged in
// pinned memory the graph keeps) replays, and trains as mode default does.
TEST_F(CudaModes, ReduceOverheadReplaysAnSgdTrainingStep) {
  SMELT_SKIP_WITHOUT_CUDA();
  expect_trains_as_default("reduce-overhead", 6);
}

// A kernel with a runtime check is recorded too: its flag is the backend's
// deferred one, so a failed check raises at the next synchronization, naming
// the op, and the replays go on afterwards. What cannot be recorded (a graph
// that launches nothing) runs step by step, with the reason.
TEST_F(CudaModes, ReduceOverheadRecordsCheckedKernelsAndRaisesAtTheNextSynchronization) {
  SMELT_SKIP_WITHOUT_CUDA();
  auto f = compile([](const Tensor& a, const Tensor& b) { return remainder(a, b) * 2; },
                   mode("reduce-overhead"));
  Tensor a = arange(0, 100).to(DType::Int32).cuda(), b = arange(1, 101).to(DType::Int32).cuda();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(same(f(a, b).cpu(), (remainder(a, b) * 2).cpu()));
  EXPECT_EQ(f.stats().cudagraph_captures, 1) << f.stats().cudagraph_skip_reason;
  EXPECT_GE(f.stats().cudagraph_replays, 1);
  Tensor z = b.clone();
  z.narrow(0, 5, 1).fill_(0);
  Tensor pending = f(a, z);
  smelt_test::expect_error_mentions([&] { cuda::synchronize(); }, "remainder");
  EXPECT_TRUE(same(f(a, b).cpu(), (remainder(a, b) * 2).cpu()));

  auto views = compile([](const Tensor& x) { return x.t(); }, mode("reduce-overhead"));
  Tensor x = randn({4, 8}).cuda();
  EXPECT_TRUE(same(views(x).cpu(), x.t().cpu()));
  EXPECT_EQ(views.stats().cudagraph_captures, 0);
  EXPECT_NE(views.stats().cudagraph_skip_reason.find("launches nothing"), std::string::npos)
      << views.stats().cudagraph_skip_reason;
}

// max-autotune computes what default computes (the fastest agreeing layout
// of each kernel), and a second compile takes every choice from the disk
// cache: nothing is benchmarked, NVRTC does not run.
TEST_F(CudaModes, MaxAutotuneAgreesWithDefaultAndCachesItsChoices) {
  SMELT_SKIP_WITHOUT_CUDA();
  smelt_test::ScopedEnv dir("SMELT_CACHE_DIR", smelt_test::fresh_cache_dir("autotune"));
  Tensor w = randn({64, 128}).cuda(), b = randn({128}).cuda(), x = randn({300, 64}).cuda();
  const Tensor want = compile(block, mode("default"))(x, w, b).cpu();
  auto cold = compile(block, mode("max-autotune"));
  EXPECT_TRUE(close(cold(x, w, b).cpu(), want, 1e-4));
  const CompileStats cs = cold.stats();
  EXPECT_GE(cs.autotune_tuned, 1);
  EXPECT_GE(cs.autotune_candidates, cs.autotune_tuned);
  EXPECT_EQ(cs.autotune_cache_hits, 0);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(close(cold(x, w, b).cpu(), want, 1e-4));
  EXPECT_GE(cold.stats().cudagraph_replays, 1);  // max-autotune replays CUDA graphs too
  const int builds = compiler::compiler_invocations();
  auto warm = compile(block, mode("max-autotune"));
  EXPECT_TRUE(close(warm(x, w, b).cpu(), want, 1e-4));
  EXPECT_EQ(warm.stats().autotune_tuned, 0);
  EXPECT_EQ(warm.stats().autotune_cache_hits, cs.autotune_tuned + cs.autotune_cache_hits);
  EXPECT_EQ(warm.stats().kernel_names, cs.kernel_names);
  EXPECT_EQ(compiler::compiler_invocations(), builds);
  EXPECT_EQ(warm.generated_code(), cold.generated_code());
}

// max-autotune times cuBLASLt's proposed algorithms for each GEMM (the
// seed MLP's three, in bfloat16 and float32) against its own choice, keeps
// the fastest that agrees, and a second compile takes the choices from the
// disk cache; the results agree with mode default either way.
TEST_F(CudaModes, MaxAutotuneTimesGemmAlgorithms) {
  SMELT_SKIP_WITHOUT_CUDA();
  smelt_test::ScopedEnv dir("SMELT_CACHE_DIR", smelt_test::fresh_cache_dir("autotune-gemm"));
  for (DType dt : {DType::BFloat16, DType::Float32}) {
    manual_seed(5);
    auto m = nn::Sequential(nn::Linear(256, 512), nn::GELU(), nn::Linear(512, 256), nn::GELU(),
                            nn::Linear(256, 10));
    m->to(dt);
    m->to(kGpu);
    Tensor x = randn({64, 256}).to(dt).cuda();
    const Tensor want = compile(m, mode("default"))(x).cpu();
    auto cold = compile(m, mode("max-autotune-no-cudagraphs"));
    const double tol = dt == DType::Float32 ? 1e-4 : 2e-2;
    EXPECT_TRUE(close(cold(x).cpu(), want, tol)) << dtype_name(dt);
    // bfloat16: three bias epilogues cuBLASLt runs, each timed with its
    // proposals. float32: on the H200 cuBLASLt proposes nothing for these
    // (erf-GELU epilogues; exact float32), so nothing is tuned and the
    // results are default's.
    if (dt == DType::BFloat16) {
      EXPECT_EQ(cold.stats().autotune_gemms_tuned, 3);
      EXPECT_GE(cold.stats().autotune_candidates, 3);
    }
    auto warm = compile(m, mode("max-autotune-no-cudagraphs"));
    EXPECT_TRUE(close(warm(x).cpu(), want, tol)) << dtype_name(dt);
    EXPECT_EQ(warm.stats().autotune_gemms_tuned, 0) << dtype_name(dt);
    EXPECT_GE(warm.stats().autotune_cache_hits, cold.stats().autotune_gemms_tuned)
        << dtype_name(dt);
    EXPECT_EQ(warm.stats().autotune_gemms_changed, cold.stats().autotune_gemms_changed);
  }
}

// Every fusion pattern: max-autotune-no-cudagraphs equals mode default.
TEST_F(CudaModes, MaxAutotuneEqualsDefaultOnEveryPattern) {
  SMELT_SKIP_WITHOUT_CUDA();
  for (auto& p : smelt_test::fusion_patterns()) {
    smelt_test::PatternCase c = p.make(kGpu);
    detail::CompiledCore def(mode("default"), nullptr, nullptr);
    detail::CompiledCore tuned(mode("max-autotune-no-cudagraphs"), nullptr, nullptr);
    const std::vector<Tensor> want = def.call(c.inputs, c.fn);
    const std::vector<Tensor> got = tuned.call(c.inputs, c.fn);
    ASSERT_EQ(got.size(), want.size()) << p.name;
    for (size_t k = 0; k < got.size(); ++k)
      EXPECT_TRUE(close(got[k].cpu(), want[k].cpu(), std::max(p.tol, 1e-4)))
          << p.name << " output " << k;
    EXPECT_EQ(tuned.stats().cudagraph_captures, 0) << p.name;
  }
}

// The benchmark runs the steps on the caller's tensors but writes none of
// them: a training step's first call under max-autotune updates the
// parameters once, as default does.
TEST_F(CudaModes, MaxAutotuneWritesNothingTheCallerPassed) {
  SMELT_SKIP_WITHOUT_CUDA();
  smelt_test::ScopedEnv dir("SMELT_CACHE_DIR", smelt_test::fresh_cache_dir("autotune-train"));
  expect_trains_as_default("max-autotune-no-cudagraphs", 2);
}

// A spent budget leaves the heuristic layouts (and stores nothing).
TEST_F(CudaModes, MaxAutotuneWithinItsBudget) {
  SMELT_SKIP_WITHOUT_CUDA();
  smelt_test::ScopedEnv dir("SMELT_CACHE_DIR", smelt_test::fresh_cache_dir("autotune-budget"));
  CompileOptions o = mode("max-autotune");
  o.autotune_budget_s = 1e-9;
  auto f = compile([](const Tensor& x) { return softmax(x, -1); }, o);
  Tensor x = randn({64, 1000}).cuda();
  EXPECT_TRUE(close(f(x).cpu(), softmax(x, -1).cpu(), 1e-6));
  EXPECT_EQ(f.stats().autotune_tuned, 0);
  EXPECT_EQ(f.stats().autotune_changed, 0);
  auto again = compile([](const Tensor& x) { return softmax(x, -1); }, mode("max-autotune"));
  again(x);
  EXPECT_EQ(again.stats().autotune_cache_hits, 0);
  EXPECT_EQ(again.stats().autotune_tuned, 1);
}
