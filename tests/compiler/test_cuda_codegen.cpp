// Device-free: the CUDA dialect prints kernels through the same kernel
// description and printer as the C++ one, and NVRTC (which needs no GPU)
// compiles them. Every fusion pattern of fusion_patterns.h and every
// pointwise op and reduction of the op table (in float32, bfloat16 and the
// integer dtypes, inner and column reductions) is generated for CUDA and
// compiled to a CUBIN for sm_90, so CI catches a CUDA kernel that does not
// compile; the PTX of the benchmark shapes shows the layouts the configs ask
// for (16-byte vector accesses, warp shuffles, a row read once). Skipped with
// a message when the toolkit's NVRTC was not found at configure time.
#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <random>
#include <regex>
#include <set>

#include "compiler/codegen/cuda_dialect.h"
#include "compiler/codegen/generate.h"
#include "compiler/compile_test_util.h"
#include "compiler/fusion/legality.h"
#include "compiler/fusion_patterns.h"
#include "compiler/runtime/units.h"
#include "ops/op_call.h"
#include "ops/op_table.h"

#ifdef SMELT_TEST_NVRTC
#include <nvrtc.h>
#endif

using namespace smelt;
using namespace smelt::compiler;
using smelt_test::trace_graph;
using smelt_test::trace_vector;

namespace {

/// Passes, fusion for CUDA, and code generation in the CUDA dialect.
Schedule cuda_schedule(const Graph& captured, Graph* after = nullptr) {
  PassOptions passes;
  passes.planned_for = DeviceType::CUDA;  // graphs traced on the CPU
  Graph g = run_passes(captured, passes);
  Schedule s = schedule(g, FusionOptions{}, Target::Cuda);
  generate_kernels(g, s, CudaDialect());
  if (after) *after = std::move(g);
  return s;
}

bool has(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

int count(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

/// One graph to generate CUDA code for, and what it is.
struct Program {
  std::string label;
  Graph graph;
};

/// The kernels of every program, renamed apart (each schedule numbers its
/// kernels from 0), in one translation unit after the CUDA preamble.
struct Unit {
  std::string source;
  std::vector<std::string> kernels;
  std::map<std::string, std::string> label_of;  // kernel -> program label
};

Unit unit_of(const std::vector<Program>& programs) {
  Unit u;
  u.source = CudaDialect().preamble();
  for (size_t p = 0; p < programs.size(); ++p) {
    Schedule s = cuda_schedule(programs[p].graph);
    for (auto& st : s.steps) {
      if (st.kind != Step::Kind::Kernel) continue;
      const std::string name = fmt::format("{}_p{}", st.name, p);
      u.source += "\n" + std::regex_replace(st.source, std::regex(st.name + "\\b"), name);
      u.kernels.push_back(name);
      u.label_of[name] = programs[p].label;
    }
  }
  return u;
}

#ifdef SMELT_TEST_NVRTC
/// Compiles `source` with NVRTC (the library's options, cuda::impl::nvrtc_options)
/// for sm_90: PTX (`cubin` false) or a CUBIN, whose ptxas
/// step checks registers and shared memory too. Returns the PTX (empty for a
/// CUBIN), or fails the test with NVRTC's log.
std::string nvrtc(const std::string& source, bool cubin = false) {
  nvrtcProgram prog;
  EXPECT_EQ(nvrtcCreateProgram(&prog, source.c_str(), "smelt_kernels.cu", 0, nullptr, nullptr),
            NVRTC_SUCCESS);
  const char* arch = cubin ? "--gpu-architecture=sm_90" : "--gpu-architecture=compute_90";
  const char* opts[] = {arch, "-std=c++17", "--fmad=false", "--minimal", "--diag-suppress=177,550"};
  nvrtcResult r = nvrtcCompileProgram(prog, 5, opts);
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  nvrtcGetProgramLog(prog, log.data());
  std::string ptx;
  if (r == NVRTC_SUCCESS && !cubin) {
    size_t n = 0;
    nvrtcGetPTXSize(prog, &n);
    ptx.resize(n);
    nvrtcGetPTX(prog, ptx.data());
  }
  nvrtcDestroyProgram(&prog);
  EXPECT_EQ(r, NVRTC_SUCCESS) << log.substr(0, 20000);
  return ptx;
}

/// The PTX of one kernel's entry (up to the next entry).
std::string ptx_of(const std::string& ptx, const std::string& kernel) {
  const size_t at = ptx.find(".entry " + kernel);
  if (at == std::string::npos) return "";
  const size_t end = ptx.find(".entry ", at + 1);
  return ptx.substr(at, end == std::string::npos ? std::string::npos : end - at);
}
#endif

/// The only kernel step of a schedule (a test failure otherwise).
const Step& only_kernel(const Schedule& s) {
  static const Step none;
  int kernels = 0;
  const Step* k = &none;
  for (auto& st : s.steps)
    if (st.kind == Step::Kind::Kernel) ++kernels, k = &st;
  EXPECT_EQ(kernels, 1) << smelt_test::step_names(s);
  return *k;
}

/// The value of an index as printed (IndexExpr::str: integers, names, + - *
/// / % and parentheses), its names bound by `env`: the text a dialect
/// prints, evaluated as the device would (non-negative operands).
class PrintedIndex {
 public:
  PrintedIndex(const std::string& text, const std::map<std::string, int64_t>& env)
      : t_(text), env_(env) {}
  int64_t value() {
    const int64_t v = sum();
    skip();
    EXPECT_EQ(at_, t_.size()) << "unparsed rest of " << t_;
    return v;
  }

 private:
  void skip() {
    while (at_ < t_.size() && t_[at_] == ' ') ++at_;
  }
  bool eat(char c) {
    skip();
    if (at_ < t_.size() && t_[at_] == c) return ++at_, true;
    return false;
  }
  int64_t sum() {
    int64_t v = product();
    for (;;) {
      if (eat('+'))
        v += product();
      else if (eat('-'))
        v -= product();
      else
        return v;
    }
  }
  int64_t product() {
    int64_t v = unary();
    for (;;) {
      if (eat('*')) {
        v *= unary();
      } else if (eat('/')) {
        const int64_t d = unary();
        EXPECT_NE(d, 0) << t_;
        v = d == 0 ? 0 : v / d;
      } else if (eat('%')) {
        const int64_t d = unary();
        EXPECT_NE(d, 0) << t_;
        v = d == 0 ? 0 : v % d;
      } else {
        return v;
      }
    }
  }
  int64_t unary() {
    if (eat('-')) return -unary();
    if (eat('(')) {
      const int64_t v = sum();
      EXPECT_TRUE(eat(')')) << t_;
      return v;
    }
    skip();
    size_t end = at_;
    while (end < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[end])) || t_[end] == '_'))
      ++end;
    const std::string tok = t_.substr(at_, end - at_);
    at_ = end;
    EXPECT_FALSE(tok.empty()) << "at " << at_ << " of " << t_;
    if (tok.empty()) return 0;
    if (std::isdigit(static_cast<unsigned char>(tok[0]))) return std::stoll(tok);
    auto it = env_.find(tok);
    EXPECT_NE(it, env_.end()) << "unbound " << tok << " in " << t_;
    return it == env_.end() ? 0 : it->second;
  }

  const std::string& t_;
  const std::map<std::string, int64_t>& env_;
  size_t at_ = 0;
};

/// Every element index a kernel description loads or stores at.
void collect_indices(const Expr& e, std::vector<IndexExpr>& out) {
  if (e.kind == Expr::Kind::Load) out.push_back(e.index);
  for (const auto& o : e.operands) collect_indices(*o, out);
  if (e.mask) collect_indices(*e.mask, out);
}
void collect_indices(const std::vector<Stmt>& body, std::vector<IndexExpr>& out) {
  for (const Stmt& s : body) {
    if (s.kind == Stmt::Kind::Store) out.push_back(s.index);
    if (s.value) collect_indices(*s.value, out);
    if (s.mask) collect_indices(*s.mask, out);
    collect_indices(s.body, out);
  }
}

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
  // One thread per 4 consecutive floats (a 16-byte vector), 256 threads a block.
  EXPECT_EQ(st.config.vec, 4);
  EXPECT_EQ(st.config.block_size, 256);
  EXPECT_EQ(st.config.grid, 7);  // ceil(6400 / 1024)
  EXPECT_TRUE(has(st.source,
                  "__global__ void __launch_bounds__(256) "
                  "cuda_poi_fused_add_mul_sigmoid_0("))
      << st.source;
  EXPECT_TRUE(has(st.source, "__builtin_assume_aligned(in_arg0_p, 16)")) << st.source;
  EXPECT_TRUE(has(st.source, "blockIdx.x")) << st.source;
  EXPECT_TRUE(has(st.source, "int32_t i =")) << st.source;
  EXPECT_TRUE(has(st.source, "smelt::scalar::sigmoid<float>")) << st.source;
  // w broadcasts along rows: read at the column i % 100, written as the
  // vector's run offset plus its lane (100 is a whole number of vectors: one
  // 16-byte load); x and b dense at i.
  EXPECT_TRUE(has(st.source, "[i_v + (i_w % 25)*4]")) << st.source;
  EXPECT_TRUE(has(st.source, "[i]")) << st.source;
  EXPECT_FALSE(has(st.source, "#pragma omp")) << st.source;
}

// Attention's scores over head views of [B, T, H * E] projections: matmul
// copies the operands so that the batched GEMM is one call, k^T in k's own
// row order (runs of E floats) rather than transposed, the GEMM reading that
// copy transposed. q's and k's copies are one kernel whose reads are each a
// 16-byte vector: the vector's run offset plus its lane, not four strided
// floats.
TEST_F(CudaCodegen, AttentionHeadCopiesMoveRunsAsVectors) {
  const int64_t B = 6, T = 16, H = 3, E = 32;  // B calls of H products each without the copies
  auto scores = [&](const Tensor& a, const Tensor& b) {
    auto heads = [&](const Tensor& x) { return x.view({B, T, H, E}).transpose(1, 2); };
    return matmul(heads(a), heads(b).transpose(-2, -1));
  };
  Schedule s = cuda_schedule(trace_graph(scores, randn({B, T, H * E}), randn({B, T, H * E})));
  int kernels = 0;
  for (const Step& st : s.steps) {
    if (st.kind != Step::Kind::Kernel) continue;
    ++kernels;
    EXPECT_EQ(st.config.vec, 4);
    EXPECT_EQ(count(st.source, "[i_v + "), 2) << st.source;
    EXPECT_FALSE(has(st.source, "i_v*")) << st.source;  // no transposing read
  }
  EXPECT_EQ(kernels, 1);
}

// A GEMM of bfloat16 values converted to float32 reads the bfloat16 values
// (through a transpose) and writes float32: no convert kernel, and the
// converts' source is what the graph stores.
TEST_F(CudaCodegen, GemmOfConvertedHalvesReadsTheHalves) {
  Tensor q = randn({2, 3, 16, 8}).to(DType::BFloat16), k = randn({2, 3, 16, 8}).to(DType::BFloat16);
  auto scores = [](const Tensor& q, const Tensor& k) {
    return softmax(matmul(q.to(DType::Float32), k.to(DType::Float32).transpose(-2, -1)), -1);
  };
  Graph g;
  Schedule s = cuda_schedule(trace_graph(scores, q, k), &g);
  ASSERT_EQ(s.steps.size(), 2u);  // the GEMM, the softmax
  const Step& gemm = s.steps[0];
  EXPECT_EQ(gemm.kind, Step::Kind::Extern);
  EXPECT_TRUE(gemm.cast_prologue);
  EXPECT_EQ(gemm.reads, (std::vector<int>{0, 1}));  // the bfloat16 inputs themselves
  EXPECT_EQ(g.buffers[gemm.writes[0]].dtype, DType::Float32);
  const std::array<Operand, 2> src = *gemm_cast_prologue(g, g.nodes[gemm.node]);
  EXPECT_EQ(src[1].dtype, DType::BFloat16);
  EXPECT_EQ(src[1].sizes, (Shape{2, 3, 8, 16}));
  EXPECT_EQ(src[1].strides, (Shape{384, 128, 1, 8}));  // k^T read in place

  // A convert that is also read elsewhere is still computed; the GEMM reads
  // the bfloat16 values all the same.
  Schedule both = cuda_schedule(trace_graph(
      [&](const Tensor& q, const Tensor& k) {
        return std::vector<Tensor>{scores(q, k), q.to(DType::Float32) * 2};
      },
      q, k));
  int prologues = 0;
  for (const Step& st : both.steps) prologues += st.cast_prologue;
  EXPECT_EQ(prologues, 1);
  EXPECT_EQ(both.steps.size(), 3u);

  // A reshape that merges dims of the converted tensor cannot be read through:
  // the float32 GEMM stays.
  Schedule merged = cuda_schedule(trace_graph(
      [](const Tensor& q, const Tensor& k) {
        return matmul(q.to(DType::Float32).reshape({6, 16, 8}),
                      k.to(DType::Float32).reshape({6, 16, 8}).transpose(-2, -1));
      },
      q, k));
  for (const Step& st : merged.steps) EXPECT_FALSE(st.cast_prologue) << st.name;
}

// A reduction whose result only a GEMM's cast prologue reads (sdpa's q k^T of
// a summed bfloat16 q) is stored: the GEMM reads it (smelt fuzz --device cuda
// --seed 19001 case 376: cuBLAS was handed a null A and raised
// CUBLAS_STATUS_INVALID_VALUE).
TEST_F(CudaCodegen, ReductionReadByACastPrologueIsStored) {
  Tensor x = randn({2, 4, 8}).to(DType::BFloat16);
  auto f = [](const Tensor& x) {
    Tensor q = sum(x, {1}, /*keepdim=*/true);  // [2, 1, 8] bfloat16
    return matmul(q.to(DType::Float32), x.to(DType::Float32).transpose(-2, -1));
  };
  Graph g;
  Schedule s = cuda_schedule(trace_graph(f, x), &g);
  int prologues = 0;
  for (const Step& st : s.steps) {
    if (st.kind != Step::Kind::Extern) continue;
    prologues += st.cast_prologue;
    for (int b : st.reads) EXPECT_TRUE(s.materialized[b]) << st.name << " reads %" << b;
  }
  EXPECT_EQ(prologues, 1);
}

// A misaligned input (a view at an odd offset) is not declared aligned; the
// others still are.
TEST_F(CudaCodegen, OnlyAlignedBuffersAreDeclaredAligned) {
  Graph g =
      trace_graph([](const Tensor& x, const Tensor& y) { return x + y; }, randn({64}), randn({64}));
  g.buffers[0].aligned = false;  // as the tracer marks a misaligned CUDA input
  Schedule s = cuda_schedule(g);
  const Step& st = only_kernel(s);
  EXPECT_FALSE(has(st.source, "in_arg0_p")) << st.source;
  EXPECT_TRUE(has(st.source, "__builtin_assume_aligned(in_arg1_p, 16)")) << st.source;
}

// A scan prints through the same statements: one thread per row, the scanned
// dim walked in order (a parallel CUDA scan is later work).
TEST_F(CudaCodegen, ScanKernelWalksEachRowOnOneThread) {
  Tensor x = randn({64, 100});
  Schedule s = cuda_schedule(trace_graph([](const Tensor& x) { return cumsum(exp(x), 1) * 2; }, x));
  ASSERT_EQ(s.steps.size(), 1u);
  const Step& st = s.steps[0];
  EXPECT_EQ(st.name, "cuda_red_fused_cumsum_exp_mul_0");
  EXPECT_TRUE(st.config.scan);
  EXPECT_EQ(st.config.grid, 1);  // 64 rows, 256 threads a block
  EXPECT_TRUE(has(st.source, "blockIdx.x")) << st.source;
  EXPECT_TRUE(has(st.source, "int32_t r = 0; r < 100; ++r")) << st.source;
  EXPECT_TRUE(has(st.source, "smelt::reduce::Sum<double>::step")) << st.source;
}

// The layouts the heuristic picks for the benchmark shapes.
TEST_F(CudaCodegen, ReductionLayouts) {
  {  // softmax over 8192 float32: 512 threads a row, 4 steps of 4 floats each, in registers
    Schedule s = cuda_schedule(
        trace_graph([](const Tensor& x) { return softmax(x, -1); }, randn({16, 8192})));
    const Step& st = only_kernel(s);
    EXPECT_EQ(st.name.rfind("cuda_per_fused_", 0), 0u) << st.name;
    EXPECT_TRUE(st.config.persistent);
    EXPECT_EQ(st.config.threads_per_row, 512);
    EXPECT_EQ(st.config.rows_per_block, 1);
    EXPECT_EQ(st.config.vec, 4);
    EXPECT_EQ(st.config.row_iters, 4);
    EXPECT_EQ(st.config.grid, 16);
    EXPECT_FALSE(st.config.outer);
    EXPECT_TRUE(
        has(st.source, "smelt::device::row_reduce<smelt::reduce::Max<float>, 512, 1, false>"))
        << st.source;
    EXPECT_TRUE(
        has(st.source, "smelt::device::row_reduce<smelt::reduce::Sum<float>, 512, 1, false>"))
        << st.source;
    // The row is read once: later loops take it from the row buffer (registers).
    EXPECT_EQ(count(st.source, "in_arg0["), 1) << st.source;
    EXPECT_TRUE(has(st.source, "[r_k * 4 + r_v]")) << st.source;
  }
  {  // layer_norm over 4096 bfloat16: Welford as shifted sums per thread, 8 values a step,
     // the thread's 32 elements summed in float, the partials moved to one shift and
     // added in double over the row's 4096 elements; a row of 4 warps has its own block
    Tensor x = randn({16, 4096}).to(DType::BFloat16), w = randn({4096}).to(DType::BFloat16);
    Schedule s = cuda_schedule(trace_graph(
        [](const Tensor& x, const Tensor& w) { return layer_norm(x, {4096}, w, w, 1e-5); }, x, w));
    const Step& st = only_kernel(s);
    EXPECT_TRUE(st.config.persistent);
    EXPECT_EQ(st.config.vec, 8);
    EXPECT_EQ(st.config.threads_per_row, 128);
    EXPECT_EQ(st.config.rows_per_block, 1);
    EXPECT_EQ(st.config.block_size, 128);
    EXPECT_TRUE(has(st.source, "smelt::reduce::ShiftedWelford<float>::step")) << st.source;
    EXPECT_TRUE(has(st.source,
                    "row_reduce<smelt::reduce::Welford<double>, 128, 1, false>(acc0_local, "
                    "r_lane, 4096)"))
        << st.source;
  }
  {  // a row of 2^20 over at most 1024 threads (looped): each thread's partial stays in double
    Tensor x = randn({4, 1 << 20});
    Schedule s = cuda_schedule(
        trace_graph([](const Tensor& x) { return std::get<0>(var_mean(x, {1}, 0, false)); }, x));
    const Step& st = only_kernel(s);
    EXPECT_FALSE(st.config.persistent);
    EXPECT_FALSE(has(st.source, "ShiftedWelford<float>")) << st.source;
  }
  {  // a column sum with few columns: the column's threads interleave with the columns'
    Schedule s =
        cuda_schedule(trace_graph([](const Tensor& x) { return sum(x, {0}); }, randn({4096, 16})));
    const Step& st = only_kernel(s);
    EXPECT_TRUE(st.config.outer);
    EXPECT_EQ(st.config.rows_per_block, 16);
    EXPECT_EQ(st.config.threads_per_row, 16);
    EXPECT_FALSE(st.config.persistent);  // 4096 elements over 16 threads: looped
    EXPECT_EQ(st.name.rfind("cuda_red_fused_", 0), 0u) << st.name;
    EXPECT_TRUE(has(st.source, "r_lane = static_cast<int>(threadIdx.x) / 16")) << st.source;
  }
  {  // many short rows: one thread each, 256 rows a block
    Schedule s =
        cuda_schedule(trace_graph([](const Tensor& x) { return sum(x, {1}); }, randn({100000, 8})));
    const Step& st = only_kernel(s);
    EXPECT_EQ(st.config.threads_per_row, 1);
    EXPECT_EQ(st.config.rows_per_block, 256);
    EXPECT_EQ(st.config.grid, 391);
    EXPECT_EQ(st.config.vec, 4);
  }
}

// A graph of several CUDA kernels builds as several translation units (NVRTC
// runs on them side by side), each kernel whole in one of them.
TEST_F(CudaCodegen, SeveralKernelsBuildAsSeveralUnits) {
  const smelt_test::FusionPattern* gpt2 = nullptr;
  for (auto& p : smelt_test::fusion_patterns())
    if (p.name == "gpt2_block") gpt2 = &p;
  ASSERT_NE(gpt2, nullptr);
  smelt_test::PatternCase c = gpt2->make(Device());
  Schedule s = cuda_schedule(trace_vector(c.fn, c.inputs));
  int kernels = 0;
  for (auto& st : s.steps) kernels += st.kind == Step::Kind::Kernel;
  ASSERT_GE(kernels, 4) << smelt_test::step_names(s);
  std::vector<KernelUnit> units = split_units(s, "PRE", 8, kCudaUnitLines);
  EXPECT_GE(units.size(), 2u);
  size_t in_units = 0;
  for (auto& u : units) {
    EXPECT_EQ(u.source.rfind("PRE", 0), 0u);
    in_units += u.kernels.size();
  }
  EXPECT_EQ(in_units, static_cast<size_t>(kernels));
  EXPECT_EQ(split_units(s, "PRE", 8).size(), 1u);  // the C++ policy: one unit
}

#ifdef SMELT_TEST_NVRTC

// The PTX shows what the configs ask for: 16-byte vector loads and stores in
// a pointwise kernel, and in a softmax the row read once with vector loads and
// combined with warp shuffles.
TEST_F(CudaCodegen, PtxHasVectorAccessesAndShuffles) {
  Tensor x = randn({1 << 20}), w = randn({1 << 20}), b = randn({1 << 20});
  Graph pw = trace_graph(
      [](const Tensor& x, const Tensor& w, const Tensor& b) { return sigmoid(x * w + b); }, x, w,
      b);
  Graph sm = trace_graph([](const Tensor& x) { return softmax(x, -1); }, randn({16, 8192}));
  Unit u = unit_of({{"pointwise", std::move(pw)}, {"softmax", std::move(sm)}});
  ASSERT_EQ(u.kernels.size(), 2u);
  const std::string ptx = nvrtc(u.source);
  const std::string p = ptx_of(ptx, u.kernels[0]), s = ptx_of(ptx, u.kernels[1]);
  ASSERT_FALSE(p.empty() || s.empty()) << u.kernels[0] << " " << u.kernels[1];
  EXPECT_EQ(count(p, "ld.global.nc.v4.f32") + count(p, "ld.global.v4.f32"), 3) << p;
  EXPECT_EQ(count(p, "st.global.v4.f32"), 1) << p;
  // softmax: 4 steps of one vector each per thread, read once; shuffles combine.
  EXPECT_EQ(count(s, "ld.global.nc.v4.f32") + count(s, "ld.global.v4.f32"), 4) << s;
  EXPECT_EQ(count(s, "st.global.v4.f32"), 4) << s;
  EXPECT_TRUE(has(s, "shfl.sync.down")) << s;
}

// bfloat16 results are staged (CudaDialect::staged_store_lane): a vector's
// floats are converted by the hardware's cvt.rn.bf16.f32 after its loads and
// stored in one 16-byte store, in a pointwise kernel (GPT-2's tanh-GELU) and
// in a persistent reduction (layer_norm over 768), whose loads stay 16-byte
// too; a NaN among them is stored again through float_to_bf16.
TEST_F(CudaCodegen, BFloat16StoresConvertInHardwareAndStayVectors) {
  Graph pw = trace_graph([](const Tensor& x) { return gelu(x, "tanh"); },
                         randn({64, 3072}).to(DType::BFloat16));
  Graph ln = trace_graph([](const Tensor& x, const Tensor& w,
                            const Tensor& b) { return layer_norm(x, {768}, w, b, 1e-5); },
                         randn({64, 768}).to(DType::BFloat16), randn({768}).to(DType::BFloat16),
                         randn({768}).to(DType::BFloat16));
  Unit u = unit_of({{"gelu", std::move(pw)}, {"layer_norm", std::move(ln)}});
  ASSERT_EQ(u.kernels.size(), 2u);
  EXPECT_EQ(count(u.source, "smelt::device::floats_to_bf16("), 2) << u.source;
  EXPECT_EQ(count(u.source, "smelt::device::any_nan("), 2) << u.source;
  const std::string ptx = nvrtc(u.source);
  for (const std::string& name : u.kernels) {
    const std::string k = ptx_of(ptx, name);
    ASSERT_FALSE(k.empty()) << name;
    EXPECT_GE(count(k, "cvt.rn.bf16.f32"), 8) << k;
    // The stores: 16 bytes each, the NaN path's included (no 2-byte stores).
    EXPECT_GE(count(k, "st.global.v4.u32"), 1) << k;
    EXPECT_EQ(count(k, "st.global.u16") + count(k, "st.global.b16"), 0) << k;
    EXPECT_EQ(count(k, "ld.global.u16") + count(k, "ld.global.nc.u16"), 0) << k;
  }
}

// A reduction over N, H and W around a kept channel (batch_norm's
// statistics) reads its rows as contiguous H*W runs: 16-byte vectors within
// each run, in the reduction's loop and in the loop that applies the result.
TEST_F(CudaCodegen, RowsOfSeveralRunsReadVectors) {
  Graph g = trace_graph(
      [](const Tensor& x) {
        return relu(x - mean(x, {0, 2, 3}, /*keepdim=*/true));
      },
      randn({64, 16, 28, 28}));
  Unit u = unit_of({{"runs", std::move(g)}});
  ASSERT_EQ(u.kernels.size(), 1u);
  EXPECT_TRUE(has(u.source, "(r_s % 196)*4")) << u.source;
  const std::string k = ptx_of(nvrtc(u.source), u.kernels[0]);
  ASSERT_FALSE(k.empty());
  // Every access a vector (the loops are unrolled: several copies of each).
  EXPECT_GE(count(k, "ld.global.nc.v4.f32") + count(k, "ld.global.v4.f32"), 2) << k;
  EXPECT_GE(count(k, "st.global.v4.f32"), 1) << k;
  EXPECT_EQ(count(k, "ld.global.nc.f32") + count(k, "ld.global.f32"), 0) << k;
  EXPECT_EQ(count(k, "st.global.f32"), 0) << k;
}

// Property: reductions whose rows are several contiguous runs (random
// shapes, odd and size-1 dims, H*W not a multiple of 4) read vectors
// (CudaDialect::element_index writes the row position r as a unit's start
// plus its lane): every index as printed evaluates, for every r of the row
// and random other loop variables, to the value of the index itself; and
// the programs compile with NVRTC.
TEST_F(CudaCodegen, RunReductionIndicesAsPrintedEqualTheIndex) {
  std::mt19937 rng(20261201);
  const std::vector<int64_t> sizes{1, 2, 3, 4, 5, 7, 8, 12, 16, 28, 49};
  auto pick = [&] {
    return sizes[std::uniform_int_distribution<size_t>(0, sizes.size() - 1)(rng)];
  };
  const CudaDialect cuda;
  std::vector<Program> programs;
  int vectorized = 0, checked = 0;
  for (int iter = 0; iter < 40; ++iter) {
    const Shape shape{pick(), pick(), pick(), pick()};
    const int form = iter % 4;
    std::vector<int64_t> dims = form == 0   ? std::vector<int64_t>{0, 2, 3}
                                : form == 1 ? std::vector<int64_t>{0, 2}
                                : form == 2 ? std::vector<int64_t>{1, 3}
                                            : std::vector<int64_t>{0, 1, 3};
    const DType dt = iter % 3 == 2 ? DType::BFloat16 : DType::Float32;
    Graph captured =
        trace_graph([&](const Tensor& x) { return relu(x - mean(x, dims, /*keepdim=*/true)); },
                    randn(shape).to(dt));
    const std::string label = fmt::format("[{}] over [{}] {}", fmt::join(shape, ", "),
                                          fmt::join(dims, ", "), dtype_name(dt));
    SCOPED_TRACE(label);
    Graph g;
    Schedule s = cuda_schedule(captured, &g);
    for (const Step& st : s.steps) {
      if (st.kind != Step::Kind::Kernel || !st.config.reduction || st.config.vec <= 1) continue;
      ++vectorized;
      const KernelConfig& c = st.config;
      std::vector<IndexExpr> indices;
      collect_indices(describe_kernel(g, s, st).body, indices);
      for (const IndexExpr& index : indices) {
        const std::optional<int64_t> rn = index.var_extent("r");
        if (!rn) continue;
        const std::string printed = cuda.element_index(index, c);
        SCOPED_TRACE(index.str() + " printed " + printed);
        for (int sample = 0; sample < 4; ++sample) {
          std::map<std::string, int64_t> env;
          for (const std::string& v : index.free_vars())
            if (v != "r")
              env[v] = std::uniform_int_distribution<int64_t>(0, *index.var_extent(v) - 1)(rng);
          for (int64_t r = 0; r < *rn; ++r) {
            env["r"] = r;
            const int64_t unit = r / c.vec, lanes = std::max(1, c.threads_per_row);
            env["r_v"] = r % c.vec;
            env["r_s"] = unit;
            env["r_k"] = unit / lanes;
            env["r_lane"] = unit % lanes;
            ASSERT_EQ(PrintedIndex(printed, env).value(), index.eval(env)) << "at r=" << r;
            ++checked;
          }
        }
      }
    }
    programs.push_back({label, std::move(captured)});
  }
  EXPECT_GT(vectorized, 10);
  EXPECT_GT(checked, 1000);
#ifdef SMELT_TEST_NVRTC
  nvrtc(unit_of(programs).source, /*cubin=*/true);
#endif
}

// Every fusion pattern's CUDA program compiles (a CUBIN for sm_90).
TEST_F(CudaCodegen, NvrtcCompilesEveryFusionPattern) {
  std::vector<Program> programs;
  for (auto& p : smelt_test::fusion_patterns()) {
    smelt_test::PatternCase c = p.make(Device());
    programs.push_back({p.name, trace_vector(c.fn, c.inputs)});
  }
  Unit u = unit_of(programs);
  EXPECT_GE(u.kernels.size(), programs.size());
  nvrtc(u.source, /*cubin=*/true);
  // The error flag of integer division and index checks.
  EXPECT_TRUE(has(u.source, "*smelt_error = 1;"));
  EXPECT_TRUE(has(u.source, "*smelt_error = 2;"));
}

// Every autotuning candidate layout (max-autotune) of every fusion pattern's
// kernels compiles: PTX for all of them, a CUBIN for those of a softmax, a
// layer_norm and a column sum (ptxas checks their registers and shared memory).
TEST_F(CudaCodegen, NvrtcCompilesEveryAutotuneCandidate) {
  auto candidates_unit = [](const std::vector<Program>& programs) {
    std::string source = CudaDialect().preamble();
    int kernels = 0;
    for (size_t p = 0; p < programs.size(); ++p) {
      Graph g;
      Schedule s = cuda_schedule(programs[p].graph, &g);
      for (auto& st : s.steps) {
        if (st.kind != Step::Kind::Kernel) continue;
        const std::vector<KernelConfig> cands = candidate_configs(st.group, st.config);
        for (size_t k = 1; k < cands.size(); ++k) {
          Step c = st;
          c.name = fmt::format("{}_p{}_at{}", st.name, p, k);
          c.config = cands[k];
          generate_kernel(g, s, c, CudaDialect());
          source += "\n" + c.source;
          ++kernels;
        }
      }
    }
    return std::make_pair(source, kernels);
  };
  std::vector<Program> programs;
  for (auto& p : smelt_test::fusion_patterns()) {
    smelt_test::PatternCase c = p.make(Device());
    programs.push_back({p.name, trace_vector(c.fn, c.inputs)});
  }
  auto [all, n] = candidates_unit(programs);
  EXPECT_GT(n, 100);
  nvrtc(all);
  std::vector<Program> some;
  some.push_back(
      {"softmax", trace_graph([](const Tensor& x) { return softmax(x, -1); }, randn({16, 8192}))});
  Tensor x = randn({16, 4096}).to(DType::BFloat16), w = randn({4096}).to(DType::BFloat16);
  some.push_back(
      {"layer_norm", trace_graph([](const Tensor& x,
                                    const Tensor& w) { return layer_norm(x, {4096}, w, w, 1e-5); },
                                 x, w)});
  some.push_back(
      {"column sum", trace_graph([](const Tensor& x) { return sum(x, {0}); }, randn({4096, 16}))});
  auto [few, m] = candidates_unit(some);
  EXPECT_GT(m, 10);
  nvrtc(few, /*cubin=*/true);
}

#endif

// ---- every pointwise op and reduction of the op table ---------------------------

namespace {

/// An input of `dtype` for op-table programs: [8, 36] (36: a multiple of
/// every vector width), nonzero integers (divisors), or `sizes`.
Tensor op_input(DType dtype, const Shape& sizes = {8, 36}) {
  if (dtype == DType::Bool) return randint(0, 2, sizes).to(DType::Bool);
  if (!is_floating(dtype)) return randint(1, 7, sizes).to(dtype);
  return (rand(sizes) + 0.25).to(dtype);  // positive: log, sqrt, pow are defined
}

/// The graph of `op(inputs, attrs)` when eager mode accepts the call, else none.
std::optional<Graph> op_graph(const std::string& op, const std::vector<Tensor>& inputs,
                              const detail::Attrs& attrs) {
  try {
    detail::call_op(op, inputs, attrs);
  } catch (const Error&) {
    return std::nullopt;
  }
  return trace_vector([&](const std::vector<Tensor>& in) { return detail::call_op(op, in, attrs); },
                      inputs);
}

/// Programs of every pointwise op (and its attribute variants) with inputs of
/// `dtype`: each op called with `arity` inputs; `covered` collects the ops
/// eager mode accepted.
std::vector<Program> pointwise_programs(DType dtype, std::set<std::string>* covered) {
  std::vector<Program> out;
  for (const auto& def : detail::op_table()) {
    if (def.kind != detail::OpKind::Pointwise || def.rule == detail::DTypeRule::None ||
        def.arity < 1)
      continue;
    const std::string op(def.name);
    std::vector<detail::Attrs> variants = {{}};
    for (auto& v : def.variants) variants.push_back({{std::string(v.attr), std::string(v.value)}});
    for (auto& attrs : variants) {
      manual_seed(7);
      std::vector<Tensor> in;
      for (int k = 0; k < def.arity; ++k)
        in.push_back(op_input(k == 2 && op == "where" ? DType::Bool : dtype,
                              k == 0 ? Shape{8, 36} : Shape{36}));
      if (op == "where") std::swap(in[0], in[2]);  // where(condition, x, y)
      if (auto g = op_graph(op, in, attrs)) {
        out.push_back(
            {fmt::format("{}({}) {}", op, dtype_name(dtype), attrs.str()), std::move(*g)});
        covered->insert(op);
      }
    }
  }
  return out;
}

/// Programs of every reduction over inputs of `dtype`: over the last dim
/// (inner) or the first (`outer`: a column reduction), dims given as a list
/// or as one dim, whichever the op takes.
std::vector<Program> reduction_programs(DType dtype, bool outer, std::set<std::string>* covered) {
  std::vector<Program> out;
  for (const auto& def : detail::op_table()) {
    if (def.kind != detail::OpKind::Reduction || def.accumulator == detail::Accumulator::None)
      continue;
    const std::string op(def.name);
    manual_seed(7);
    // A row of 1000: persistent with vectors; outer: columns of 1000 elements.
    const Tensor x = op_input(dtype, outer ? Shape{1000, 24} : Shape{24, 1000});
    const int64_t dim = outer ? 0 : 1;
    std::optional<Graph> g;
    for (const detail::Attrs& attrs :
         {detail::Attrs{{"dim", std::vector<int64_t>{dim}}}, detail::Attrs{{"dim", dim}}}) {
      if ((g = op_graph(op, {x}, attrs))) break;
    }
    if (!g) continue;
    out.push_back(
        {fmt::format("{}({}{})", op, dtype_name(dtype), outer ? ", dim 0" : ""), std::move(*g)});
    covered->insert(op);
  }
  return out;
}

struct OpGroup {
  std::string name;
  std::function<std::vector<Program>(std::set<std::string>*)> programs;
};

const std::vector<OpGroup>& op_groups() {
  static const std::vector<OpGroup> groups = {
      {"pointwise_float32", [](auto* c) { return pointwise_programs(DType::Float32, c); }},
      {"pointwise_bfloat16", [](auto* c) { return pointwise_programs(DType::BFloat16, c); }},
      {"pointwise_float16", [](auto* c) { return pointwise_programs(DType::Float16, c); }},
      {"pointwise_int32", [](auto* c) { return pointwise_programs(DType::Int32, c); }},
      {"pointwise_uint8", [](auto* c) { return pointwise_programs(DType::UInt8, c); }},
      {"pointwise_bool", [](auto* c) { return pointwise_programs(DType::Bool, c); }},
      {"reductions_float32", [](auto* c) { return reduction_programs(DType::Float32, false, c); }},
      {"reductions_bfloat16",
       [](auto* c) { return reduction_programs(DType::BFloat16, false, c); }},
      {"reductions_int64", [](auto* c) { return reduction_programs(DType::Int64, false, c); }},
      {"reductions_bool", [](auto* c) { return reduction_programs(DType::Bool, false, c); }},
      {"reductions_column_float32",
       [](auto* c) { return reduction_programs(DType::Float32, true, c); }},
      {"reductions_column_float16",
       [](auto* c) { return reduction_programs(DType::Float16, true, c); }},
  };
  return groups;
}

class CudaOpTable : public smelt_test::CompilerTest,
                    public ::testing::WithParamInterface<size_t> {};

}  // namespace

// Every pointwise op (with its attribute variants) and every reduction of the
// op table has a CUDA program in some dtype: the groups below compile them all.
TEST_F(CudaCodegen, OpTableGroupsCoverEveryPointwiseOpAndReduction) {
  std::set<std::string> covered;
  for (auto& g : op_groups()) g.programs(&covered);
  std::vector<std::string> missing;
  for (const auto& def : detail::op_table()) {
    const bool pointwise = def.kind == detail::OpKind::Pointwise &&
                           def.rule != detail::DTypeRule::None && def.arity >= 1;
    const bool reduction =
        def.kind == detail::OpKind::Reduction && def.accumulator != detail::Accumulator::None;
    if ((pointwise || reduction) && !covered.count(std::string(def.name)))
      missing.emplace_back(def.name);
  }
  EXPECT_TRUE(missing.empty()) << "no CUDA program for: "
                               << fmt::format("{}", fmt::join(missing, ", "));
  EXPECT_GE(covered.size(), 60u);
}

TEST_P(CudaOpTable, NvrtcCompilesTheGroup) {
  const OpGroup& g = op_groups()[GetParam()];
  std::set<std::string> covered;
  std::vector<Program> programs = g.programs(&covered);
  ASSERT_FALSE(programs.empty()) << g.name;
  Unit u = unit_of(programs);
  EXPECT_GE(u.kernels.size(), programs.size() / 2) << g.name;
#ifndef SMELT_TEST_NVRTC
  GTEST_SKIP() << "skipped: NVRTC (CUDA toolkit) not found at configure time";
#else
  nvrtc(u.source, /*cubin=*/true);
#endif
}

INSTANTIATE_TEST_SUITE_P(Groups, CudaOpTable, ::testing::Range<size_t>(0, op_groups().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return op_groups()[info.param].name;
                         });
