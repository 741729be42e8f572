// Device-free: the CUDA dialect prints kernels through the same kernel
// description and printer as the C++ one, and NVRTC (which needs no GPU)
// compiles them to PTX for sm_90. Skipped with a message when the toolkit's
// NVRTC was not found at configure time.
#include <gtest/gtest.h>

#include "compiler/codegen/cuda_dialect.h"
#include "compiler/codegen/generate.h"
#include "compiler/compile_test_util.h"

#ifdef SMELT_TEST_NVRTC
#include <nvrtc.h>
#endif

using namespace smelt;
using namespace smelt::compiler;
using smelt_test::trace_graph;

namespace {

/// Passes, fusion for CUDA, and code generation in the CUDA dialect.
Schedule cuda_schedule(const Graph& captured, Graph* after = nullptr) {
  Graph g = run_passes(captured, PassOptions{});
  Schedule s = schedule(g, FusionOptions{}, Target::Cuda);
  generate_kernels(g, s, CudaDialect());
  if (after) *after = std::move(g);
  return s;
}

bool has(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

#ifdef SMELT_TEST_NVRTC
/// Compiles `source` with NVRTC for compute_90; returns the PTX, or fails the
/// test with NVRTC's log.
std::string nvrtc_ptx(const std::string& source) {
  nvrtcProgram prog;
  EXPECT_EQ(nvrtcCreateProgram(&prog, source.c_str(), "smelt_kernels.cu", 0, nullptr, nullptr),
            NVRTC_SUCCESS);
  std::string inc = std::string("-I") + SMELT_CUDA_CCCL_INCLUDE;
  const char* opts[] = {"--gpu-architecture=compute_90", "-std=c++17", inc.c_str()};
  nvrtcResult r = nvrtcCompileProgram(prog, 3, opts);
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  nvrtcGetProgramLog(prog, log.data());
  std::string ptx;
  if (r == NVRTC_SUCCESS) {
    size_t n = 0;
    nvrtcGetPTXSize(prog, &n);
    ptx.resize(n);
    nvrtcGetPTX(prog, ptx.data());
  }
  nvrtcDestroyProgram(&prog);
  EXPECT_EQ(r, NVRTC_SUCCESS) << log << "\n--- source tail ---\n"
                              << source.substr(source.size() > 3000 ? source.size() - 3000 : 0);
  return ptx;
}
#endif

class CudaCodegen : public smelt_test::CompilerTest {};

}  // namespace

TEST_F(CudaCodegen, PointwiseKernelPrintsThroughTheSamePath) {
  Tensor x = randn({64, 100}), w = randn({100}), b = randn({64, 100});
  Schedule s = cuda_schedule(trace_graph(
      [](const Tensor& x, const Tensor& w, const Tensor& b) { return sigmoid(x * w + b); }, x, w,
      b));
  ASSERT_EQ(s.steps.size(), 1u);
  const Step& st = s.steps[0];
  EXPECT_EQ(st.name, "cuda_poi_fused_add_mul_sigmoid_0");
  EXPECT_EQ(st.config.target, Target::Cuda);
  EXPECT_EQ(st.config.index_bits, 32);  // 6400 elements: 32-bit indexing
  EXPECT_TRUE(has(st.source, "extern \"C\" __global__ void cuda_poi_fused_add_mul_sigmoid_0("))
      << st.source;
  EXPECT_TRUE(has(st.source, "blockIdx.x")) << st.source;
  EXPECT_TRUE(has(st.source, "int32_t i =")) << st.source;
  EXPECT_TRUE(has(st.source, "smelt::scalar::sigmoid<float>")) << st.source;
  // w broadcasts along rows: read at the column i % 100; x and b dense at i.
  EXPECT_TRUE(has(st.source, "[i % 100]")) << st.source;
  EXPECT_FALSE(has(st.source, "#pragma omp")) << st.source;
}

// A scan prints through the same statements: one thread per row (grid-stride
// over rows), the scanned dim walked in order (a parallel CUDA scan is later work).
TEST_F(CudaCodegen, ScanKernelWalksEachRowOnOneThread) {
  Tensor x = randn({64, 100});
  Schedule s = cuda_schedule(trace_graph([](const Tensor& x) { return cumsum(exp(x), 1) * 2; }, x));
  ASSERT_EQ(s.steps.size(), 1u);
  const Step& st = s.steps[0];
  EXPECT_EQ(st.name, "cuda_red_fused_cumsum_exp_mul_0");
  EXPECT_TRUE(st.config.scan);
  EXPECT_TRUE(has(st.source, "blockIdx.x")) << st.source;
  EXPECT_TRUE(has(st.source, "int32_t r = 0; r < 100; ++r")) << st.source;
  EXPECT_TRUE(has(st.source, "smelt::reduce::Sum<double>::step")) << st.source;
}

TEST_F(CudaCodegen, NvrtcCompilesGeneratedKernels) {
#ifndef SMELT_TEST_NVRTC
  GTEST_SKIP() << "skipped: NVRTC (CUDA toolkit) not found at configure time";
#else
  Tensor x = randn({64, 100}), w = randn({100}), b = randn({64, 100});
  std::string source = CudaDialect().preamble();
  std::vector<std::string> names;
  auto add = [&](const Schedule& s) {
    for (auto& st : s.steps) {
      ASSERT_EQ(st.kind, Step::Kind::Kernel) << st.name;
      source += "\n" + st.source;
      names.push_back(st.name);
    }
  };
  add(cuda_schedule(trace_graph(
      [](const Tensor& x, const Tensor& w, const Tensor& b) { return sigmoid(x * w + b); }, x, w,
      b)));
  // bfloat16 storage and rounding, a transposed read, erf gelu.
  Tensor h = randn({32, 48}).to(DType::BFloat16);
  add(cuda_schedule(trace_graph([](const Tensor& h) { return gelu(h.t() * 2); }, h)));
  // Integer division checks set the device error flag.
  Tensor i = arange(0, 40).to(DType::Int32), j = arange(1, 41).to(DType::Int32);
  add(cuda_schedule(
      trace_graph([](const Tensor& i, const Tensor& j) { return remainder(i, j) + i; }, i, j)));
  add(cuda_schedule(trace_graph([](const Tensor& x) { return cumsum(exp(x), 0) * 2; }, x)));
  ASSERT_EQ(names.size(), 4u);
  EXPECT_TRUE(has(source, "atomicExch(smelt_error, 1)"));
  std::string ptx = nvrtc_ptx(source);
  for (auto& n : names) EXPECT_TRUE(has(ptx, ".entry " + n)) << n;
#endif
}
