// The CUDA backend's cuBLASLt GEMM path (src/backend/cuda/blaslt.h).
// Device-free: which cuBLASLt epilogue each activation and dtype gets, the
// row-major Gemm -> column-major cuBLASLt call mapping, the cases that fall
// back (and why), compute types, and the algorithm cache's key. On a GPU
// (skipped with "no CUDA device" elsewhere): cuBLASLt against float64 CPU
// references for float32 / float16 / bfloat16 with bias, relu and tanh-GELU,
// batched, broadcast and transposed operands; the algorithm cache; the
// fallbacks' results; the heuristic's candidates; eager matmul and a compiled
// linear + bias + GELU graph through cuBLASLt.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "test_util.h"

#ifdef SMELT_TEST_CUDA_BACKEND
#include <cstdint>

#include "backend/backend.h"
#include "backend/cuda/blaslt.h"
#include "compiler/compile_test_util.h"
#include "smelt/compile.h"
#include "smelt/cuda.h"
#include "smelt/ops.h"

using namespace smelt;
using namespace smelt::cuda::impl;
using smelt_test::close;

namespace {

const Device kGpu("cuda:0");

const void* at(uintptr_t address) { return reinterpret_cast<const void*>(address); }

/// A row-major batched Gemm over contiguous operands at made-up addresses
/// (device-free tests never dereference them).
backend::Gemm fake_gemm(DType dt, int64_t batch, int64_t m, int64_t n, int64_t k) {
  backend::Gemm g;
  g.device = kGpu;
  g.dtype = dt;
  g.batch = batch, g.m = m, g.n = n, g.k = k;
  g.a = {at(0x100000), m * k, k, 1};
  g.b = {at(0x200000), k * n, n, 1};
  g.c = const_cast<void*>(at(0x300000));
  g.c_batch_stride = m * n, g.c_row_stride = n, g.c_col_stride = 1;
  return g;
}

std::string why_not(const backend::Gemm& g) {
  std::string why;
  EXPECT_FALSE(lt_gemm_of(g, &why).has_value());
  return why;
}

}  // namespace

// ---- device-free ----

TEST(CublasLt, EpilogueForEachActivationAndDtype) {
  using E = EpilogueActivation;
  for (DType dt : {float32, float16, bfloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    EXPECT_EQ(lt_epilogue(dt, false, E::None, false), CUBLASLT_EPILOGUE_DEFAULT);
    EXPECT_EQ(lt_epilogue(dt, true, E::None, false), CUBLASLT_EPILOGUE_BIAS);
    EXPECT_EQ(lt_epilogue(dt, false, E::Relu, false), CUBLASLT_EPILOGUE_RELU);
    EXPECT_EQ(lt_epilogue(dt, true, E::Relu, false), CUBLASLT_EPILOGUE_RELU_BIAS);
    // The activations cuBLASLt lacks (its GELU is the tanh form): gemm.cu's kernel.
    for (E act : {E::GeluErf, E::Sigmoid, E::Silu, E::Tanh}) {
      EXPECT_FALSE(lt_epilogue(dt, false, act, false).has_value());
      EXPECT_FALSE(lt_epilogue(dt, true, act, false).has_value());
    }
    // A residual add rides cuBLASLt's C (beta = 1) only without an activation:
    // cuBLASLt adds beta * C before it.
    EXPECT_EQ(lt_epilogue(dt, false, E::None, true), CUBLASLT_EPILOGUE_DEFAULT);
    EXPECT_EQ(lt_epilogue(dt, true, E::None, true), CUBLASLT_EPILOGUE_BIAS);
    EXPECT_FALSE(lt_epilogue(dt, true, E::Relu, true).has_value());
    EXPECT_FALSE(lt_epilogue(dt, false, E::Relu, true).has_value());
  }
  // tanh-GELU: cuBLASLt's for the half types only; float32 keeps scalar::gelu_tanh.
  for (DType dt : {float16, bfloat16}) {
    EXPECT_EQ(lt_epilogue(dt, false, E::GeluTanh, false), CUBLASLT_EPILOGUE_GELU);
    EXPECT_EQ(lt_epilogue(dt, true, E::GeluTanh, false), CUBLASLT_EPILOGUE_GELU_BIAS);
  }
  EXPECT_FALSE(lt_epilogue(float32, true, E::GeluTanh, false).has_value());
  EXPECT_FALSE(lt_epilogue(float32, false, E::GeluTanh, false).has_value());
}

TEST(CublasLt, ComputeTypePerDtypeAndPrecision) {
  EXPECT_EQ(gemm_compute_type(float32, "highest"), CUBLAS_COMPUTE_32F);
  EXPECT_EQ(gemm_compute_type(float32, "high"), CUBLAS_COMPUTE_32F_FAST_TF32);
  EXPECT_EQ(gemm_compute_type(float32, "medium"), CUBLAS_COMPUTE_32F_FAST_TF32);
  for (const char* p : {"highest", "high"}) {
    EXPECT_EQ(gemm_compute_type(float16, p), CUBLAS_COMPUTE_32F);
    EXPECT_EQ(gemm_compute_type(bfloat16, p), CUBLAS_COMPUTE_32F);
    EXPECT_EQ(gemm_compute_type(float64, p), CUBLAS_COMPUTE_64F);
  }
  EXPECT_TRUE(lt_supports_dtype(float32) && lt_supports_dtype(float16) &&
              lt_supports_dtype(bfloat16));
  EXPECT_FALSE(lt_supports_dtype(float64) || lt_supports_dtype(int32));
  // The setting reaches the cuBLASLt call.
  backend::Gemm g = fake_gemm(float32, 1, 8, 8, 8);
  EXPECT_EQ(lt_gemm_of(g)->compute, CUBLAS_COMPUTE_32F);
  set_float32_matmul_precision("high");
  EXPECT_EQ(lt_gemm_of(g)->compute, CUBLAS_COMPUTE_32F_FAST_TF32);
  set_float32_matmul_precision("highest");
}

TEST(CublasLt, CublasOperandReadsUnitStrideDimsInPlace) {
  cublasOperation_t op;
  int64_t ld = 0;
  ASSERT_TRUE(cublas_operand(5, 7, 7, 1, &op, &ld));  // row-major: C^T's column-major
  EXPECT_EQ(op, CUBLAS_OP_N);
  EXPECT_EQ(ld, 7);
  ASSERT_TRUE(cublas_operand(5, 7, 9, 1, &op, &ld));  // a slice of wider rows
  EXPECT_EQ(ld, 9);
  ASSERT_TRUE(cublas_operand(5, 7, 1, 5, &op, &ld));  // a transposed view
  EXPECT_EQ(op, CUBLAS_OP_T);
  EXPECT_EQ(ld, 5);
  ASSERT_TRUE(cublas_operand(1, 7, 123, 1, &op, &ld));  // one row: its stride is never used
  EXPECT_EQ(op, CUBLAS_OP_N);
  EXPECT_EQ(ld, 7);
  EXPECT_FALSE(cublas_operand(5, 7, 14, 2, &op, &ld));  // neither dim unit-stride: pack
  EXPECT_FALSE(cublas_operand(5, 7, 3, 1, &op, &ld));   // overlapping rows
}

TEST(CublasLt, RowMajorGemmIsTheTransposedColumnMajorCall) {
  backend::Gemm g = fake_gemm(bfloat16, 1, 64, 48, 32);
  g.epilogue.bias = at(0x400000);
  g.epilogue.activation = "gelu_tanh";
  std::optional<CublasGemm> p = lt_gemm_of(g);
  ASSERT_TRUE(p.has_value());
  // C^T (48 x 64) = B^T (48 x 32) @ A^T (32 x 64): cuBLAS's A is smelt's B.
  EXPECT_EQ(p->m, 48);
  EXPECT_EQ(p->n, 64);
  EXPECT_EQ(p->k, 32);
  EXPECT_EQ(p->a, g.b.data);
  EXPECT_EQ(p->b, g.a.data);
  EXPECT_EQ(p->d, g.c);
  EXPECT_EQ(p->op_a, CUBLAS_OP_N);
  EXPECT_EQ(p->op_b, CUBLAS_OP_N);
  EXPECT_EQ(p->lda, 48);
  EXPECT_EQ(p->ldb, 32);
  EXPECT_EQ(p->ldd, 48);
  EXPECT_EQ(p->dtype, bfloat16);
  EXPECT_EQ(p->d_dtype, bfloat16);
  EXPECT_EQ(p->compute, CUBLAS_COMPUTE_32F);
  // The bias runs along C's columns = D's rows: cuBLASLt's bias vector.
  EXPECT_EQ(p->epilogue, CUBLASLT_EPILOGUE_GELU_BIAS);
  EXPECT_EQ(p->bias, g.epilogue.bias);
  EXPECT_EQ(p->stride_a, 0);  // batch 1: no batch offsets
  EXPECT_EQ(p->stride_d, 0);

  // linear's x @ W^T: B is the transposed view of a row-major W [n, k].
  g.b = {at(0x200000), 0, 1, 32};
  p = lt_gemm_of(g);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->op_a, CUBLAS_OP_T);
  EXPECT_EQ(p->lda, 32);

  // Batched with a shared B (broadcast: batch offset 0) and a transposed A.
  g = fake_gemm(float16, 3, 64, 48, 32);
  g.b.batch_stride = 0;
  g.a = {at(0x100000), 64 * 32, 1, 64};
  p = lt_gemm_of(g);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->batch, 3);
  EXPECT_EQ(p->stride_a, 0);
  EXPECT_EQ(p->stride_b, 64 * 32);
  EXPECT_EQ(p->stride_d, 64 * 48);
  EXPECT_EQ(p->op_b, CUBLAS_OP_T);
  EXPECT_EQ(p->ldb, 64);
  EXPECT_EQ(p->epilogue, CUBLASLT_EPILOGUE_DEFAULT);
  EXPECT_EQ(p->bias, nullptr);
}

TEST(CublasLt, WhatFallsBackAndWhy) {
  const backend::Gemm base = fake_gemm(bfloat16, 2, 16, 16, 16);
  ASSERT_TRUE(lt_gemm_of(base).has_value());
  auto with = [&](auto change) {
    backend::Gemm g = base;
    change(g);
    return why_not(g);
  };
  EXPECT_NE(with([](auto& g) { g.dtype = int32; }).find("dtype int32"), std::string::npos);
  EXPECT_NE(with([](auto& g) { g.dtype = float64; }).find("dtype float64"), std::string::npos);
  EXPECT_NE(with([](auto& g) { g.k = 0; }).find("empty"), std::string::npos);
  EXPECT_NE(with([](auto& g) { g.epilogue.activation = "gelu_erf"; }).find("gelu_erf"),
            std::string::npos);
  EXPECT_NE(with([](auto& g) { g.epilogue.activation = "silu"; }).find("silu"), std::string::npos);
  EXPECT_NE(with([](auto& g) {
              g.dtype = float32;
              g.epilogue.activation = "gelu_tanh";
            }).find("gelu_tanh"),
            std::string::npos);
  EXPECT_NE(with([](auto& g) {
              g.epilogue.activation = "relu";
              g.epilogue.residual = at(0x500000);
              g.epilogue.residual_row_stride = 16;
              g.epilogue.residual_col_stride = 1;
            }).find("residual add after activation \"relu\""),
            std::string::npos);
  EXPECT_NE(with([](auto& g) {  // a transposed residual
              g.epilogue.residual = at(0x500000);
              g.epilogue.residual_batch_stride = 256;
              g.epilogue.residual_row_stride = 1;
              g.epilogue.residual_col_stride = 16;
            })
                .find("residual is not row-major"),
            std::string::npos);
  for (uintptr_t offset : {0, 2 * 128}) {  // C itself, C's second half
    EXPECT_NE(with([offset](auto& g) {
                g.epilogue.residual = at(0x300000 + offset);
                g.epilogue.residual_batch_stride = 256;
                g.epilogue.residual_row_stride = 16;
                g.epilogue.residual_col_stride = 1;
              }).find("the residual overlaps C"),
              std::string::npos);
  }
  EXPECT_NE(with([](auto& g) { g.a.col_stride = 2, g.a.row_stride = 64; }).find("A must be packed"),
            std::string::npos);
  EXPECT_NE(with([](auto& g) { g.b.col_stride = 2, g.b.row_stride = 64; }).find("B must be packed"),
            std::string::npos);
  EXPECT_NE(with([](auto& g) { g.c_col_stride = 16, g.c_row_stride = 1; }).find("C is not"),
            std::string::npos);
  EXPECT_NE(with([](auto& g) { g.a.batch_stride = -256; }).find("negative batch stride"),
            std::string::npos);
  EXPECT_NE(with([](auto& g) { g.epilogue.activation = "softmax"; }).find("unknown activation"),
            std::string::npos);
  // What Lt computes itself stays one call.
  for (const char* act : {"", "relu", "gelu_tanh"}) {
    backend::Gemm g = base;
    g.epilogue.activation = act;
    g.epilogue.bias = at(0x600000);
    EXPECT_TRUE(lt_gemm_of(g).has_value()) << act;
  }
}

TEST(CublasLt, CacheKeyTellsAlignmentsApart) {
  EXPECT_EQ(alignment_bytes(at(0x100000)), 256u);
  EXPECT_EQ(alignment_bytes(at(0x100010)), 16u);
  EXPECT_EQ(alignment_bytes(at(0x100008)), 8u);
  EXPECT_EQ(alignment_bytes(at(0x100002)), 2u);
  EXPECT_EQ(alignment_bytes(at(0x100001)), 1u);
  EXPECT_EQ(alignment_bytes(nullptr), 256u);

  backend::Gemm g = fake_gemm(float16, 1, 64, 64, 64);
  g.epilogue.bias = at(0x400000);
  const LtKey k0 = lt_key(*lt_gemm_of(g), 0);
  EXPECT_EQ(k0.align_a, 256u);
  EXPECT_EQ(k0.align_bias, 256u);
  // Other buffers of the same alignment: the same key (the cached algorithm is reused).
  backend::Gemm moved = g;
  moved.a.data = at(0x700000);
  moved.c = const_cast<void*>(at(0x900200));
  EXPECT_TRUE(lt_key(*lt_gemm_of(moved), 0) == k0);
  // A 2-byte-aligned operand, another device, precision or epilogue: another key.
  backend::Gemm odd = g;
  odd.a.data = at(0x100002);
  const LtKey k1 = lt_key(*lt_gemm_of(odd), 0);
  EXPECT_FALSE(k1 == k0);
  EXPECT_EQ(k1.align_b, 2u);  // smelt's A is cuBLAS's B
  EXPECT_FALSE(lt_key(*lt_gemm_of(g), 1) == k0);
  backend::Gemm relu = g;
  relu.epilogue.activation = "relu";
  EXPECT_FALSE(lt_key(*lt_gemm_of(relu), 0) == k0);
  backend::Gemm unbiased = g;
  unbiased.epilogue.bias = nullptr;
  EXPECT_EQ(lt_key(*lt_gemm_of(unbiased), 0).align_bias, 0u);
  EXPECT_FALSE(lt_key(*lt_gemm_of(unbiased), 0) == k0);
}

// ---- on a GPU ----

namespace {

/// act(A @ B + bias) in float64 on the CPU, from the (rounded) operands.
Tensor reference(const Tensor& a, const Tensor& b, const Tensor& bias, const std::string& act) {
  Tensor y = matmul(a.cpu().to(float64), b.cpu().to(float64));
  if (bias.defined()) y = y + bias.cpu().to(float64);
  if (act == "relu") y = relu(y);
  if (act == "gelu_tanh") y = gelu(y, "tanh");
  if (act == "gelu_erf") y = gelu(y);
  if (act == "silu") y = silu(y);
  return y;
}

double tolerance(DType dt) { return dt == float32 ? 1e-5 : dt == float16 ? 3e-3 : 2e-2; }

/// The Gemm computing C [batch, m, n] = A @ B from 3-D (batch-broadcast) views.
backend::Gemm gemm_of(const Tensor& a, const Tensor& b, const Tensor& c) {
  backend::Gemm g;
  g.device = kGpu;
  g.dtype = a.dtype();
  g.batch = c.size(0), g.m = c.size(1), g.n = c.size(2), g.k = a.size(2);
  g.a = {a.data_ptr(), a.size(0) == 1 ? 0 : a.stride(0), a.stride(1), a.stride(2)};
  g.b = {b.data_ptr(), b.size(0) == 1 ? 0 : b.stride(0), b.stride(1), b.stride(2)};
  g.c = c.data_ptr();
  g.c_batch_stride = c.stride(0), g.c_row_stride = c.stride(1), g.c_col_stride = c.stride(2);
  return g;
}

/// Compiles with the suite's private kernel cache, grad mode off and a fixed seed.
class CublasLtCompile : public smelt_test::CompilerTest {};

}  // namespace

TEST(CublasLt, MatchesTheCpuForEveryDtypeEpilogueAndLayout) {
  SMELT_SKIP_WITHOUT_CUDA();
  manual_seed(3);
  const int64_t batch = 2, m = 64, n = 48, k = 96;
  backend::Backend& be = backend::backend(kGpu);
  for (DType dt : {float32, float16, bfloat16}) {
    for (int layout = 0; layout < 3; ++layout) {
      // 0: contiguous batches; 1: B shared by the batch; 2: transposed views of A and B.
      Tensor a = randn({batch, m, k}).to(dt).cuda();
      Tensor b = layout == 1 ? randn({1, k, n}).to(dt).cuda() : randn({batch, k, n}).to(dt).cuda();
      if (layout == 2) {
        a = randn({batch, k, m}).to(dt).cuda().transpose(1, 2);
        b = randn({batch, n, k}).to(dt).cuda().transpose(1, 2);  // linear's W^T
      }
      for (const char* act : {"", "relu", "gelu_tanh"}) {
        for (bool with_bias : {false, true}) {
          SCOPED_TRACE(
              fmt::format("{} layout {} act '{}' bias {}", dtype_name(dt), layout, act, with_bias));
          Tensor bias = with_bias ? randn({n}).to(dt).cuda() : Tensor();
          Tensor c = empty({batch, m, n}, TensorOptions(dt).device(kGpu));
          backend::Gemm g = gemm_of(a, b, c);
          g.epilogue.activation = act;
          g.epilogue.bias = with_bias ? bias.data_ptr() : nullptr;
          // One call: cuBLASLt's with an epilogue, cublasGemmEx's for a plain product; float32
          // tanh-GELU is cuBLAS's product, then gemm.cu's epilogue kernel.
          const bool one_call = !(dt == float32 && std::string(act) == "gelu_tanh");
          const bool plain = std::string(act).empty() && !with_bias;
          EXPECT_EQ(lt_gemm_of(g).has_value(), one_call);
          const LtStats before = lt_stats();
          be.gemm(g, be.current_stream(kGpu));
          EXPECT_EQ(lt_stats().matmuls, before.matmuls + (one_call && !plain ? 1 : 0));
          EXPECT_TRUE(close(c.cpu().to(float64), reference(a, b, bias, act), tolerance(dt)));
        }
      }
    }
  }
}

// A residual add (without an activation) is cuBLASLt's C with beta = 1: one
// call, D = AB + residual + bias rounded once, the residual read in place
// (contiguous, or the first n columns of wider rows).
TEST(CublasLt, ResidualAddRidesCuBlasLtsC) {
  SMELT_SKIP_WITHOUT_CUDA();
  manual_seed(11);
  backend::Backend& be = backend::backend(kGpu);
  const int64_t batch = 2, m = 64, n = 48, k = 32;
  for (DType dt : {float32, float16, bfloat16}) {
    for (bool window : {false, true}) {
      for (bool with_bias : {false, true}) {
        SCOPED_TRACE(fmt::format("{} window {} bias {}", dtype_name(dt), window, with_bias));
        Tensor a = randn({batch, m, k}).to(dt).cuda();
        Tensor b = randn({batch, n, k}).to(dt).cuda().transpose(1, 2);  // linear's W^T
        Tensor bias = with_bias ? randn({n}).to(dt).cuda() : Tensor();
        Tensor wide = randn({batch, m, window ? 2 * n : n}).to(dt).cuda();
        Tensor res = wide.narrow(2, 0, n);
        Tensor c = empty({batch, m, n}, TensorOptions(dt).device(kGpu));
        backend::Gemm g = gemm_of(a, b, c);
        g.epilogue.bias = with_bias ? bias.data_ptr() : nullptr;
        g.epilogue.residual = res.data_ptr();
        g.epilogue.residual_batch_stride = res.stride(0);
        g.epilogue.residual_row_stride = res.stride(1), g.epilogue.residual_col_stride = 1;
        const std::optional<CublasGemm> p = lt_gemm_of(g);
        ASSERT_TRUE(p.has_value());
        EXPECT_EQ(p->c, g.epilogue.residual);
        EXPECT_EQ(p->ldc, res.stride(1));
        EXPECT_EQ(p->stride_c, res.stride(0));
        const LtStats before = lt_stats();
        be.gemm(g, be.current_stream(kGpu));
        EXPECT_EQ(lt_stats().matmuls, before.matmuls + 1);
        EXPECT_TRUE(close(c.cpu().to(float64), reference(a, b, bias, "") + res.cpu().to(float64),
                          tolerance(dt) * 2));
      }
    }
  }
}

TEST(CublasLt, TheHeuristicRunsOncePerProblem) {
  SMELT_SKIP_WITHOUT_CUDA();
  backend::Backend& be = backend::backend(kGpu);
  // A shape no other test uses.
  Tensor a = randn({1, 80, 40}).to(bfloat16).cuda(), b = randn({1, 40, 24}).to(bfloat16).cuda();
  Tensor c = empty({1, 80, 24}, TensorOptions(bfloat16).device(kGpu));
  backend::Gemm g = gemm_of(a, b, c);
  g.epilogue.activation = "relu";  // cuBLASLt's (a plain product is cublasGemmEx's)
  const LtStats s0 = lt_stats();
  be.gemm(g, be.current_stream(kGpu));
  const LtStats s1 = lt_stats();
  EXPECT_EQ(s1.heuristic_queries, s0.heuristic_queries + 1);
  EXPECT_EQ(s1.cached_keys, s0.cached_keys + 1);
  // New buffers of the same shape and alignment: the cached algorithm.
  Tensor a2 = randn({1, 80, 40}).to(bfloat16).cuda();
  Tensor c2 = empty({1, 80, 24}, TensorOptions(bfloat16).device(kGpu));
  backend::Gemm g2 = gemm_of(a2, b, c2);
  g2.epilogue.activation = "relu";
  be.gemm(g2, be.current_stream(kGpu));
  const LtStats s2 = lt_stats();
  EXPECT_EQ(s2.heuristic_queries, s1.heuristic_queries);
  EXPECT_EQ(s2.matmuls, s1.matmuls + 1);
  EXPECT_TRUE(close(c2.cpu().to(float64), reference(a2, b, Tensor(), "relu"), tolerance(bfloat16)));
}

TEST(CublasLt, FallbacksGiveTheSameValues) {
  SMELT_SKIP_WITHOUT_CUDA();
  manual_seed(4);
  backend::Backend& be = backend::backend(kGpu);
  const int64_t m = 33, n = 17, k = 65;  // odd sizes: no 16-byte aligned rows
  for (DType dt : {float32, float16, bfloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    // Operands one element past an aligned address (2- or 4-byte aligned).
    Tensor abuf = randn({m * k + 1}).to(dt).cuda(), bbuf = randn({k * n + 1}).to(dt).cuda();
    Tensor a = abuf.narrow(0, 1, m * k).view({1, m, k}),
           b = bbuf.narrow(0, 1, k * n).view({1, k, n});
    Tensor bias = randn({n}).to(dt).cuda(), res = randn({1, m, n}).to(dt).cuda();
    // cuBLASLt with lower alignments or cublasGemmEx, then gemm.cu's epilogue kernel.
    for (const char* act : {"relu", "gelu_erf", "silu"}) {
      SCOPED_TRACE(act);
      Tensor c = empty({1, m, n}, TensorOptions(dt).device(kGpu));
      backend::Gemm g = gemm_of(a, b, c);
      g.epilogue.activation = act;
      g.epilogue.bias = bias.data_ptr();
      g.epilogue.residual = res.data_ptr();
      g.epilogue.residual_row_stride = n, g.epilogue.residual_col_stride = 1;
      be.gemm(g, be.current_stream(kGpu));
      EXPECT_TRUE(close(c.cpu().to(float64), reference(a, b, bias, act) + res.cpu().to(float64),
                        tolerance(dt) * 2));
    }
    // A strided C (packed product in scratch, then copied).
    Tensor cbuf = zeros({1, n, m}, TensorOptions(dt).device(kGpu));
    Tensor c = cbuf.transpose(1, 2);
    backend::Gemm g = gemm_of(a, b, c);
    EXPECT_FALSE(lt_gemm_of(g).has_value());
    be.gemm(g, be.current_stream(kGpu));
    EXPECT_TRUE(close(c.cpu().to(float64), reference(a, b, Tensor(), ""), tolerance(dt)));
  }
  // float64 (cublasGemmEx) stays exact to float64 rounding.
  Tensor a = randn({1, 20, 30}, TensorOptions(float64).device(kGpu));
  Tensor b = randn({1, 30, 10}, TensorOptions(float64).device(kGpu));
  Tensor c = empty({1, 20, 10}, TensorOptions(float64).device(kGpu));
  const LtStats before = lt_stats();
  be.gemm(gemm_of(a, b, c), be.current_stream(kGpu));
  EXPECT_EQ(lt_stats().matmuls, before.matmuls);
  EXPECT_TRUE(close(c.cpu(), reference(a, b, Tensor(), ""), 1e-12));
}

TEST(CublasLt, TF32OnlyWhenAllowed) {
  SMELT_SKIP_WITHOUT_CUDA();
  manual_seed(5);
  Tensor a = randn({256, 512}).cuda(), b = randn({512, 128}).cuda();
  const Tensor want = reference(a.view({1, 256, 512}), b.view({1, 512, 128}), Tensor(), "")[0];
  EXPECT_TRUE(close(matmul(a, b).cpu().to(float64), want, 1e-5));
  set_float32_matmul_precision("high");
  Tensor tf32 = matmul(a, b).cpu().to(float64);
  set_float32_matmul_precision("highest");
  // TF32 keeps 10 of float32's 23 mantissa bits: over k = 512 products of
  // randn values the error is about sqrt(k) * 2^-10, some 0.02 (one element
  // of 32768 reached 0.024 on an H200).
  EXPECT_TRUE(close(tf32, want, 0.1));
}

TEST(CublasLt, HeuristicCandidatesEachComputeTheProduct) {
  SMELT_SKIP_WITHOUT_CUDA();
  manual_seed(6);
  Tensor a = randn({1, 256, 128}).to(bfloat16).cuda(), b = randn({1, 128, 192}).to(bfloat16).cuda();
  Tensor bias = randn({192}).to(bfloat16).cuda();
  Tensor c = empty({1, 256, 192}, TensorOptions(bfloat16).device(kGpu));
  backend::Gemm g = gemm_of(a, b, c);
  g.epilogue.bias = bias.data_ptr();
  g.epilogue.activation = "gelu_tanh";
  const std::vector<LtAlgorithm> algos = gemm_algorithms(g, 6);
  ASSERT_GE(algos.size(), 1u);
  EXPECT_LE(algos.size(), 6u);
  const Tensor want = reference(a, b, bias, "gelu_tanh");
  backend::Backend& be = backend::backend(kGpu);
  for (const LtAlgorithm& al : algos) {
    EXPECT_LE(al.workspace_bytes, kLtMaxWorkspaceBytes);
    c.zero_();
    gemm_with_algorithm(g, al, static_cast<cudaStream_t>(be.current_stream(kGpu).handle));
    EXPECT_TRUE(close(c.cpu().to(float64), want, tolerance(bfloat16)));
  }
  // A Gemm cuBLASLt cannot run as one call: no candidates, and an Error naming why.
  g.epilogue.activation = "gelu_erf";
  EXPECT_TRUE(gemm_algorithms(g, 4).empty());
  smelt_test::expect_error_mentions([&] { gemm_with_algorithm(g, algos.front(), nullptr); },
                                    "gelu_erf");
}

// A plain eager product is cublasGemmEx's, as PyTorch's matmul; its batch
// still folds into one 256 x 96 product.
TEST(CublasLt, EagerPlainMatmulIsCublasGemmEx) {
  SMELT_SKIP_WITHOUT_CUDA();
  manual_seed(7);
  Tensor x = randn({4, 64, 128}).to(bfloat16).cuda(), w = randn({96, 128}).to(bfloat16).cuda();
  const LtStats before = lt_stats();
  Tensor y = matmul(x, w.t());
  EXPECT_EQ(lt_stats().matmuls, before.matmuls);
  EXPECT_TRUE(close(y.cpu().to(float64), matmul(x.cpu().to(float64), w.cpu().to(float64).t()),
                    tolerance(bfloat16)));
}

TEST(CublasLt, EagerLinearAddsItsBiasInTheEpilogue) {
  SMELT_SKIP_WITHOUT_CUDA();
  manual_seed(8);
  for (DType dt : {float32, bfloat16}) {
    Tensor x = randn({3, 64, 128}).to(dt).cuda(), w = randn({96, 128}).to(dt).cuda(),
           b = randn({96}).to(dt).cuda();
    const LtStats before = lt_stats();
    Tensor y = linear(x, w, b);
    EXPECT_EQ(lt_stats().matmuls, before.matmuls + 1) << dtype_name(dt);  // one call, no add kernel
    const Tensor want =
        linear(x.cpu().to(float64), w.cpu().to(float64), b.cpu().to(float64)).to(dt).to(float64);
    EXPECT_TRUE(close(y.cpu().to(float64), want, tolerance(dt))) << dtype_name(dt);
  }
  // One rounding (NNFunctional.LinearRoundsOnceWithItsBias's case).
  Tensor x = smelt_test::make({1.0, 0.00390625}, {1, 2}, bfloat16).cuda(),
         w = smelt_test::make({1.0, 1.0}, {1, 2}, bfloat16).cuda(),
         b = smelt_test::make({0.001953125}, {1}, bfloat16).cuda();
  EXPECT_EQ(linear(x, w, b).cpu().to(float64).item<double>(), 1.0078125);
}

TEST_F(CublasLtCompile, LinearBiasGeluIsOneCublasLtCall) {
  SMELT_SKIP_WITHOUT_CUDA();
  auto fn = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return gelu(linear(x, w, b), "tanh");
  };
  Tensor x = randn({128, 256}).to(bfloat16).cuda(), w = randn({192, 256}).to(bfloat16).cuda(),
         b = randn({192}).to(bfloat16).cuda();
  const Tensor want =
      gelu(linear(x.cpu().to(float64), w.cpu().to(float64), b.cpu().to(float64)), "tanh");
  CompileOptions o;
  o.fullgraph = true;
  o.round_intermediates = false;  // half-precision epilogues round once
  auto f = compile(fn, o);
  Tensor y = f(x, w, b);  // compiles (the heuristic runs on this first call)
  const LtStats before = lt_stats();
  y = f(x, w, b);
  EXPECT_EQ(lt_stats().matmuls, before.matmuls + 1);
  EXPECT_EQ(lt_stats().heuristic_queries, before.heuristic_queries);
  ASSERT_EQ(f.stats().kernels, 1) << smelt_test::names(f);
  EXPECT_EQ(f.stats().kernel_names.at(0).rfind("cuda_tem_fused_addmm_gelu", 0), 0u)
      << smelt_test::names(f);
  EXPECT_TRUE(close(y.cpu().to(float64), want, tolerance(bfloat16)));

  // Rounding intermediates as eager does: the GEMM, then a pointwise kernel.
  CompileOptions rounding;
  rounding.fullgraph = true;
  auto eager_like = compile(fn, rounding);
  EXPECT_TRUE(close(eager_like(x, w, b).cpu().to(float64), want, tolerance(bfloat16)));
  EXPECT_EQ(eager_like.stats().kernels, 2) << smelt_test::names(eager_like);

  // float32 linear + bias + relu: one exact cuBLASLt call (RELU_BIAS).
  auto relu_fn = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return relu(linear(x, w, b));
  };
  auto fr = compile(relu_fn, rounding);
  Tensor x32 = x.to(float32), w32 = w.to(float32), b32 = b.to(float32);
  fr(x32, w32, b32);
  const LtStats r0 = lt_stats();
  Tensor yr = fr(x32, w32, b32);
  EXPECT_EQ(lt_stats().matmuls, r0.matmuls + 1);
  EXPECT_EQ(fr.stats().kernels, 1) << smelt_test::names(fr);
  EXPECT_TRUE(close(yr.cpu().to(float64),
                    relu(linear(x.cpu().to(float64), w.cpu().to(float64), b.cpu().to(float64))),
                    1e-5));
}

#else

TEST(CublasLt, NotBuilt) { GTEST_SKIP() << "no CUDA device (smelt was built without CUDA)"; }

#endif  // SMELT_TEST_CUDA_BACKEND
