// smelt::compile on CUDA tensors (needs a GPU; every test skips itself with
// "no CUDA device" where there is none): every fusion pattern of
// tests/compiler/fusion_patterns.h compiled on the GPU against CUDA eager and
// CPU eager, kernel counts and names, the error flag of integer division and
// index checks, the alignment guard, the disk cache of CUBINs, the launch
// plan, streams and the reduce-overhead arena; a compiled model's forward and
// backward graphs against the CPU's eager gradients.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "backend/backend.h"
#include "compiler/compile_test_util.h"
#include "compiler/fusion_patterns.h"
#include "compiler/runtime/kernel_cache.h"
#include "smelt/cuda.h"
#include "smelt/nn.h"

using namespace smelt;
using smelt_test::close;
using smelt_test::expect_error_mentions;

namespace {

const Device kGpu("cuda:0");

/// A compiled function of a vector of tensors (the patterns' form).
struct VectorCompiled {
  explicit VectorCompiled(CompileOptions o = {}) : core(std::move(o), nullptr, nullptr) {}
  std::vector<Tensor> operator()(const smelt_test::PatternFn& fn, const std::vector<Tensor>& in) {
    return core.call(in, fn);
  }
  detail::CompiledCore core;
};

std::vector<Tensor> to_cpu(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (auto& t : ts) out.push_back(t.to(Device()));
  return out;
}

class CudaCompile : public smelt_test::CompilerTest {};
class CudaCompilePattern : public smelt_test::CompilerTest,
                           public ::testing::WithParamInterface<size_t> {};

}  // namespace

// Compiled on the GPU == eager on the GPU == eager on the CPU (within the
// pattern's tolerance), with the kernels named for CUDA.
TEST_P(CudaCompilePattern, CompiledMatchesCudaEagerAndCpuEager) {
  SMELT_SKIP_WITHOUT_CUDA();
  const smelt_test::FusionPattern& p = smelt_test::fusion_patterns()[GetParam()];
  smelt_test::PatternCase gpu = p.make(kGpu), cpu = p.make(Device());
  CompileOptions o;
  o.fullgraph = true;  // a graph break would hide the compiled path
  VectorCompiled c(o);
  std::vector<Tensor> got = to_cpu(c(gpu.fn, gpu.inputs));
  const CompileStats& st = c.core.stats();
  EXPECT_EQ(st.compiles, 1);
  EXPECT_EQ(st.eager_calls, 0);
  for (auto& n : st.kernel_names)
    EXPECT_TRUE(n.rfind("cuda_", 0) == 0 || n.rfind("extern_", 0) == 0 ||
                n.rfind("fallback_", 0) == 0)
        << n;
  if (p.cuda_steps >= 0) {
    EXPECT_EQ(st.kernels, p.cuda_steps) << smelt_test::names(c.core);
  }
  const std::vector<Tensor> eager_gpu = to_cpu(gpu.fn(gpu.inputs));
  const std::vector<Tensor> eager_cpu = cpu.fn(cpu.inputs);
  ASSERT_EQ(got.size(), eager_gpu.size());
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_TRUE(close(got[k], eager_gpu[k], p.tol))
        << p.name << " output " << k << " vs CUDA eager";
    EXPECT_TRUE(close(got[k], eager_cpu[k], p.tol)) << p.name << " output " << k << " vs CPU eager";
  }
  // A second call runs the same kernels (no recompile) and gives the same values.
  std::vector<Tensor> again = to_cpu(c(gpu.fn, gpu.inputs));
  EXPECT_EQ(c.core.stats().compiles, 1);
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(smelt_test::same(again[k], got[k]));
}

INSTANTIATE_TEST_SUITE_P(Patterns, CudaCompilePattern,
                         ::testing::Range<size_t>(0, smelt_test::fusion_patterns().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return smelt_test::fusion_patterns()[info.param].name;
                         });

TEST_F(CudaCompile, PointwiseChainIsOneVectorizedKernel) {
  SMELT_SKIP_WITHOUT_CUDA();
  auto f =
      compile([](const Tensor& x, const Tensor& w, const Tensor& b) { return sigmoid(x * w + b); });
  Tensor x = randn({1 << 20}, TensorOptions().device(kGpu)), w = randn({1 << 20}).cuda(),
         b = randn({1 << 20}).cuda();
  Tensor y = f(x, w, b);
  EXPECT_EQ(y.device(), kGpu);
  EXPECT_EQ(smelt_test::names(f), "cuda_poi_fused_add_mul_sigmoid_0");
  EXPECT_TRUE(close(y.cpu(), sigmoid(x * w + b).cpu(), 1e-6));
  EXPECT_NE(f.generated_code().find("__global__"), std::string::npos);
  EXPECT_NE(f.launch_plan().find("<<<grid 1024, block 256"), std::string::npos) << f.launch_plan();
}

// A bfloat16 result is converted by the hardware (cvt.rn.bf16.f32, staged
// stores: CudaDialect::staged_store_lane), with eager's bits: round to
// nearest even at every tie, subnormals, overflow to infinity, and NaNs
// with their sign and payload (stored again through float_to_bf16), over
// float32 bit patterns of every kind, vectors with and without a NaN.
TEST_F(CudaCompile, BFloat16StoresGiveEagerBits) {
  SMELT_SKIP_WITHOUT_CUDA();
  std::vector<uint32_t> bits;
  std::mt19937 rng(1234);
  for (int i = 0; i < (1 << 16); ++i) bits.push_back(rng());  // NaNs included (about 1 in 256)
  for (uint32_t hi = 0; hi < (1u << 16); hi += 7) {           // ties, below and above them
    bits.push_back(hi << 16 | 0x8000u);
    bits.push_back(hi << 16 | 0x7fffu);
    bits.push_back(hi << 16 | 0x8001u);
  }
  for (uint32_t b : {0x7f7fffffu, 0x7f7f8000u, 0xff7f8000u, 0x00000001u, 0x80008000u, 0x7fc00001u,
                     0xffa00000u, 0x7f800001u, 0x7f800000u, 0xff800000u})
    bits.push_back(b);
  // 64 vectors of 8 without a NaN at the end (the path without the redo).
  for (int i = 0; i < 512; ++i) bits.push_back(0x3f800000u + static_cast<uint32_t>(i) * 0x1235u);
  Tensor x = from_blob(bits.data(), {static_cast<int64_t>(bits.size())}, DType::Float32).clone();
  // A conversion alone: arithmetic on the GPU gives the canonical NaN
  // before any conversion (neg is FADD there, eager and compiled alike), so
  // only a conversion shows whether the staged stores keep payloads.
  auto fn = [](const Tensor& t) { return t.to(DType::BFloat16); };
  auto f = compile(fn);
  const Tensor got = f(x.cuda()).cpu(), want = fn(x.cuda()).cpu(), cpu = fn(x);
  EXPECT_EQ(smelt_test::names(f).rfind("cuda_poi_fused_", 0), 0u) << smelt_test::names(f);
  EXPECT_NE(f.generated_code().find("floats_to_bf16"), std::string::npos);
  const uint16_t* g = static_cast<const uint16_t*>(got.data_ptr());
  const uint16_t* w = static_cast<const uint16_t*>(want.data_ptr());
  const uint16_t* c = static_cast<const uint16_t*>(cpu.data_ptr());
  int wrong = 0;
  for (size_t i = 0; i < bits.size() && wrong < 10; ++i) {
    if (g[i] != w[i] || w[i] != c[i]) ++wrong;
    EXPECT_EQ(g[i], w[i]) << "float32 bits " << std::hex << bits[i];
    EXPECT_EQ(w[i], c[i]) << "float32 bits " << std::hex << bits[i];
  }
}

TEST_F(CudaCompile, IntegerDivisionByZeroRaisesNamingTheOp) {
  SMELT_SKIP_WITHOUT_CUDA();
  auto f = compile([](const Tensor& a, const Tensor& b) { return remainder(a, b) * 2; });
  Tensor a = arange(0, 100).to(DType::Int32).cuda(), b = arange(1, 101).to(DType::Int32).cuda();
  EXPECT_TRUE(close(f(a, b).cpu(), (remainder(a, b) * 2).cpu(), 0));
  Tensor z = b.clone();
  z.narrow(0, 50, 1).fill_(0);
  // The check does not wait for the device: the next synchronization raises.
  Tensor pending = f(a, z);
  expect_error_mentions([&] { cuda::synchronize(); }, "remainder");
  // The process and the compiled function stay usable.
  EXPECT_TRUE(close(f(a, b).cpu(), (remainder(a, b) * 2).cpu(), 0));
}

TEST_F(CudaCompile, IndexOutOfRangeRaises) {
  SMELT_SKIP_WITHOUT_CUDA();
  auto f = compile([](const Tensor& w, const Tensor& i) { return embedding(w, i) + 1; });
  Tensor w = randn({10, 4}).cuda();
  EXPECT_TRUE(
      close(f(w, arange(0, 10).cuda()).cpu(), (embedding(w, arange(0, 10).cuda()) + 1).cpu()));
  expect_error_mentions(
      [&] { f(w, full({3}, 10, TensorOptions(DType::Int64).device(kGpu))).cpu(); }, "out of range");
  // The process and the compiled function stay usable.
  EXPECT_TRUE(
      close(f(w, arange(0, 10).cuda()).cpu(), (embedding(w, arange(0, 10).cuda()) + 1).cpu()));
}

// A view whose data is not 16-byte aligned is guarded: the graph compiled for
// aligned inputs is not reused for it (no vector access may touch it).
TEST_F(CudaCompile, MisalignedInputRecompiles) {
  SMELT_SKIP_WITHOUT_CUDA();
  auto f = compile([](const Tensor& x) { return x * 2 + 1; });
  Tensor base = randn({4097}).cuda();
  Tensor aligned = base.narrow(0, 0, 4096), odd = base.narrow(0, 1, 4096);
  EXPECT_TRUE(close(f(aligned).cpu(), (aligned * 2 + 1).cpu(), 0));
  EXPECT_TRUE(close(f(odd).cpu(), (odd * 2 + 1).cpu(), 0));
  EXPECT_EQ(f.stats().recompiles, 1);
  EXPECT_NE(f.stats().last_recompile_reason.find("16-byte"), std::string::npos)
      << f.stats().last_recompile_reason;
  EXPECT_EQ(f.generated_code().find("in_arg0_p, 16"), std::string::npos) << f.generated_code();
}

// A second compile of the same graph (a new compiled object) loads its CUBIN
// from the disk cache: NVRTC does not run.
TEST_F(CudaCompile, WarmCompileLoadsFromTheDiskCache) {
  SMELT_SKIP_WITHOUT_CUDA();
  smelt_test::ScopedEnv dir("SMELT_CACHE_DIR", smelt_test::fresh_cache_dir("cudawarm"));
  auto fn = [](const Tensor& x) { return softmax(x * 3, -1); };
  Tensor x = randn({64, 1000}).cuda();
  auto cold = compile(fn);
  Tensor a = cold(x);
  EXPECT_FALSE(cold.stats().last_cache_hit);
  const int builds = compiler::compiler_invocations();
  auto warm = compile(fn);
  Tensor b = warm(x);
  EXPECT_TRUE(warm.stats().last_cache_hit);
  EXPECT_EQ(compiler::compiler_invocations(), builds);
  EXPECT_TRUE(smelt_test::same(a.cpu(), b.cpu()));
}

TEST_F(CudaCompile, RunsOnTheCurrentStream) {
  SMELT_SKIP_WITHOUT_CUDA();
  auto f = compile([](const Tensor& x) { return layer_norm(x, {256}) * 2; });
  Tensor x = randn({128, 256}).cuda();
  Tensor want = f(x).cpu();
  backend::Backend& be = backend::backend(kGpu);
  backend::Stream s = be.create_stream(kGpu);
  be.set_current_stream(kGpu, s);
  Tensor got = f(x);
  be.synchronize(s);
  be.set_current_stream(kGpu, {});
  be.destroy_stream(s);
  EXPECT_TRUE(smelt_test::same(got.cpu(), want));
}

TEST_F(CudaCompile, ReduceOverheadKeepsOneArena) {
  SMELT_SKIP_WITHOUT_CUDA();
  CompileOptions o;
  o.mode = "reduce-overhead";
  auto f = compile([](const Tensor& x) { return sum(exp(x) * 2, {1}) + amax(x, {1}); }, o);
  Tensor x = randn({300, 500}).cuda();
  Tensor want = (sum(exp(x) * 2, {1}) + amax(x, {1})).cpu();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(close(f(x).cpu(), want, 1e-4));
  EXPECT_EQ(f.stats().compiles, 1);
}

TEST_F(CudaCompile, PointwiseKernelWritesIntoTheMemoryOfTheBufferItReadsLast) {
  // The GELU between two bfloat16 GEMMs (the seed MLP's) and exp * 2 between
  // two float32 ones: each pointwise kernel writes its result into its
  // input's memory (Step::in_place), in both modes, with CUDA eager's values.
  SMELT_SKIP_WITHOUT_CUDA();
  auto mlp = [](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2) {
    return matmul(gelu(linear(x, w1, b1)), w2);
  };
  auto ex = [](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2) {
    return matmul(exp(matmul(x, w1) + b1), w2);
  };
  for (DType dt : {DType::BFloat16, DType::Float32}) {
    const TensorOptions o = TensorOptions().device(kGpu).dtype(dt);
    const Tensor x = randn({256, 1024}, o), w1 = randn({512, 1024}, o) * 0.03,
                 b1 = randn({512}, o) * 0.1, w2 = randn({512, 64}, o) * 0.05;
    const Tensor wt = dt == DType::BFloat16 ? w1 : w1.t().contiguous();
    const auto f = dt == DType::BFloat16 ? std::function(mlp) : std::function(ex);
    const Tensor want = f(x, wt, b1, w2).cpu();
    for (const char* mode : {"default", "reduce-overhead"}) {
      CompileOptions co;
      co.mode = mode;
      auto cf = compile(f, co);
      for (int call = 0; call < 3; ++call)
        EXPECT_TRUE(close(cf(x, wt, b1, w2).cpu(), want, dt == DType::BFloat16 ? 2e-2 : 1e-4))
            << dtype_name(dt) << " " << mode;
      EXPECT_NE(cf.launch_plan().find("written into the memory of"), std::string::npos)
          << cf.launch_plan();
      EXPECT_NE(cf.generated_code().find("_unused"), std::string::npos);
    }
  }
}

TEST_F(CudaCompile, OutputCodeLogShowsLaunchConfigs) {
  SMELT_SKIP_WITHOUT_CUDA();
  auto f = compile([](const Tensor& x) { return softmax(x, -1); });
  f(randn({32, 8192}).cuda());
  EXPECT_NE(f.generated_code().find("// cuda_per_fused_"), std::string::npos);
  EXPECT_NE(f.generated_code().find("block=512x16 grid=32"), std::string::npos)
      << f.generated_code().substr(0, 4000);
  EXPECT_NE(f.launch_plan().find("<<<grid 32, block 512, shared 136 B, idx32>>>"),
            std::string::npos)
      << f.launch_plan();
}

TEST_F(CudaCompile, SecondDeviceRunsItsOwnKernels) {
  SMELT_SKIP_WITHOUT_CUDA();
  if (cuda::device_count() < 2) GTEST_SKIP() << "one CUDA device";
  auto f = compile([](const Tensor& x) { return exp(x) + 1; });
  Tensor x = randn({1000});
  for (int d : {0, 1}) {
    Tensor xd = x.to(Device(DeviceType::CUDA, d));
    Tensor y = f(xd);
    EXPECT_EQ(y.device().index, d);
    EXPECT_TRUE(close(y.cpu(), exp(x) + 1, 1e-6));
  }
  EXPECT_EQ(cuda::current_device(), 0);
}

// Ops the code generator leaves to eager kernels (fallback steps) run on the
// graph's device over views of its buffers: stack and scatter_add (with the
// index a node of the graph computes) against CUDA eager.
TEST_F(CudaCompile, FallbackStepsRunOnTheDevice) {
  SMELT_SKIP_WITHOUT_CUDA();
  auto f = [](const Tensor& x, const Tensor& idx) {
    Tensor s = stack({x * 2, x + 1}, 0);
    Tensor i = 3 - idx;  // computed in the graph, still in [0, 4)
    return std::vector<Tensor>{
        s, scatter_add(zeros({4, 3}, TensorOptions().device(x.device())), 0, i, exp(x))};
  };
  Tensor x = randn({5, 3}).to(kGpu);
  Tensor idx =
      from_vector(std::vector<int64_t>{0, 3, 1, 2, 3, 0, 2, 2, 1, 0, 3, 1, 2, 0, 1}, {5, 3})
          .to(kGpu);
  auto c = compile([&](const Tensor& a, const Tensor& b) { return f(a, b); });
  std::vector<Tensor> got = c(x, idx), want = f(x, idx);
  ASSERT_EQ(got.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(got[k].device(), kGpu);
    EXPECT_TRUE(close(got[k].cpu(), want[k].cpu(), 1e-6)) << "output " << k;
  }
  EXPECT_EQ(c.stats().eager_calls, 0);
}

// A compiled model trained with an eager loss and backward() on the GPU: its
// forward and backward graphs (CUDA kernels, cuBLAS GEMMs) give the CPU's
// eager gradients, bias gradients as column reductions.
TEST_F(CudaCompile, CompiledForwardBackwardGradientsMatchTheCpu) {
  SMELT_SKIP_WITHOUT_CUDA();
  EnableGradGuard grad;
  manual_seed(3);
  auto cpu_model = nn::Sequential(nn::Linear(64, 128), nn::GELU(), nn::Linear(128, 10));
  manual_seed(3);
  auto gpu_model = nn::Sequential(nn::Linear(64, 128), nn::GELU(), nn::Linear(128, 10));
  cpu_model->to(DType::Float64);
  gpu_model->to(DType::Float64);
  gpu_model->to(kGpu);
  Tensor x = randn({32, 64}).to(DType::Float64), y = randint(0, 10, {32});
  auto compiled = compile(gpu_model);
  Tensor out = compiled(x.cuda());
  ASSERT_NE(out.grad_fn(), nullptr);
  EXPECT_EQ(out.grad_fn()->name(), "CompiledFunctionBackward");
  cross_entropy(out, y.cuda()).backward();
  cross_entropy(cpu_model(x), y).backward();
  const CompileStats& st = compiled.stats();
  EXPECT_EQ(st.graph_breaks, 0) << st.last_graph_break;
  int sums = 0;
  for (const auto& n : st.backward_kernel_names) sums += n.find("_fused_sum_") != std::string::npos;
  EXPECT_EQ(sums, 2) << fmt::format("{}", fmt::join(st.backward_kernel_names, " "));
  const auto ps = gpu_model->parameters(), qs = cpu_model->parameters();
  for (size_t i = 0; i < ps.size(); ++i)
    EXPECT_TRUE(close(ps[i].grad().cpu(), qs[i].grad(), 1e-10)) << i;
}
