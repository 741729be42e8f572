// GEMM on CUDA through cuBLAS (blas.h).
#include "backend/cuda/blas.h"

#include <cublas_v2.h>
#include <fmt/format.h>

#include <array>
#include <climits>
#include <mutex>

#include "backend/cuda/blaslt.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/scratch.h"
#include "kernels/gemm_epilogue.h"

namespace smelt::cuda::impl {

namespace {

/// One cuBLAS handle per device, created on first use (never destroyed: used
/// until exit).
cublasHandle_t handle(int device) {
  static std::mutex mu;
  static std::array<cublasHandle_t, kMaxDevices> handles{};
  std::lock_guard<std::mutex> lock(mu);
  cublasHandle_t& h = handles[static_cast<size_t>(device)];
  if (h == nullptr) {
    DeviceGuard guard(device);
    SMELT_CUBLAS_CHECK(cublasCreate(&h));
  }
  return h;
}

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

/// cublasGemmStridedBatchedEx for `p` (no epilogue): every floating dtype.
void gemm_ex(const CublasGemm& p, int device, cudaStream_t stream) {
  SMELT_INTERNAL_ASSERT(p.epilogue == CUBLASLT_EPILOGUE_DEFAULT && p.bias == nullptr,
                        "gemm_ex: cublasGemmEx has no epilogue");
  cublasHandle_t h = handle(device);
  SMELT_CUBLAS_CHECK(cublasSetStream(h, stream));
  const double alpha_d = p.alpha, beta_d = 0.0;
  const float alpha_f = static_cast<float>(p.alpha), beta_f = 0.0f;
  const bool f64 = p.compute == CUBLAS_COMPUTE_64F;
  const void* alpha = f64 ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = f64 ? static_cast<const void*>(&beta_d) : &beta_f;
  const cudaDataType_t ab_type = cuda_data_type(p.dtype);
  SMELT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      h, p.op_a, p.op_b, static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), alpha,
      p.a, ab_type, static_cast<int>(p.lda), p.stride_a, p.b, ab_type, static_cast<int>(p.ldb),
      p.stride_b, beta, p.d, cuda_data_type(p.d_dtype), static_cast<int>(p.ldd), p.stride_d,
      static_cast<int>(p.batch), p.compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

bool gemm_epilogue_supported(const backend::GemmActivation& act) {
  return parse_epilogue_activation(act).has_value();
}

void gemm(const backend::Gemm& g, int device, cudaStream_t stream) {
  SMELT_CHECK(g.dtype != DType::Bool,
              "matmul: bool matrices are not supported (as in PyTorch); convert the operands to "
              "an integer or floating dtype first");
  const std::optional<EpilogueActivation> act = parse_epilogue_activation(g.epilogue.activation);
  SMELT_CHECK(act.has_value(), "gemm_fused: unknown activation \"{}\"", g.epilogue.activation);
  SMELT_CHECK(
      is_floating(g.dtype) || *act == EpilogueActivation::None || *act == EpilogueActivation::Relu,
      "gemm_fused: activation \"{}\" needs a floating dtype, got {}", g.epilogue.activation,
      dtype_name(g.dtype));
  const DType c_dtype = g.c_dtype();
  const bool half = g.dtype == DType::Float16 || g.dtype == DType::BFloat16;
  SMELT_INTERNAL_ASSERT(
      c_dtype == g.dtype || (half && c_dtype == DType::Float32 && g.epilogue.empty()),
      "gemm: {} operands with a {} result (only float16 / bfloat16 -> "
      "float32, without an epilogue)",
      dtype_name(g.dtype), dtype_name(c_dtype));
  if (g.batch <= 0 || g.m <= 0 || g.n <= 0) return;
  DeviceGuard guard(device);
  const int64_t esz = static_cast<int64_t>(itemsize(g.dtype));
  const int64_t csz = static_cast<int64_t>(itemsize(c_dtype));
  const backend::GemmEpilogue& e = g.epilogue;
  const MatArg a{g.a.data, g.a.batch_stride, g.a.row_stride, g.a.col_stride};
  const MatArg b{g.b.data, g.b.batch_stride, g.b.row_stride, g.b.col_stride};
  Scratch scratch(device, stream);
  // gemm.cu's epilogue kernel over C, reading the product from `src` (float32
  // scratch, contiguous) or from C itself (nullptr).
  auto epilogue_kernel = [&](const float* src) {
    launch_gemm_epilogue(g.dtype, g.batch, g.m, g.n, src, g.c, g.c_batch_stride, g.c_row_stride,
                         g.c_col_stride, e.bias, static_cast<int>(*act), e.residual,
                         e.residual_batch_stride, e.residual_row_stride, e.residual_col_stride,
                         stream);
  };

  if (g.k == 0) {  // an empty sum: C = epilogue(0), zeros copied from one zeroed element
    void* zero = scratch.get(static_cast<size_t>(csz));
    SMELT_CUDA_CHECK(cudaMemsetAsync(zero, 0, static_cast<size_t>(csz), stream));
    launch_matrix_copy(g.c, g.c_batch_stride, g.c_row_stride, g.c_col_stride, MatArg{zero, 0, 0, 0},
                       g.batch, g.m, g.n, static_cast<int>(csz), stream);
    if (!e.empty()) epilogue_kernel(nullptr);
    return;
  }
  if (!is_floating(g.dtype)) {
    launch_gemm_int(g.dtype, g.batch, g.m, g.n, g.k, a, b, g.c, g.c_batch_stride, g.c_row_stride,
                    g.c_col_stride, static_cast<int64_t>(g.alpha), stream);
    if (!e.empty()) epilogue_kernel(nullptr);
    return;
  }

  // One call for the product and its whole epilogue, when it reads the
  // operands and writes C in place: a plain product through cublasGemmEx, as
  // PyTorch's matmul does (8192^3 bfloat16 on the H200: 768-779 TFLOP/s, at
  // PyTorch's speed), one with an epilogue through cuBLASLt when it has an
  // algorithm.
  if (const std::optional<CublasGemm> lt = lt_gemm_of(g)) {
    // An autotuned algorithm (max-autotune): cuBLASLt's proposal of that index.
    if (g.algorithm >= 0 && lt_matmul_candidate(*lt, device, stream, g.algorithm)) return;
    if (lt->epilogue == CUBLASLT_EPILOGUE_DEFAULT && lt->bias == nullptr && lt->c == nullptr) {
      gemm_ex(*lt, device, stream);
      return;
    }
    if (lt_matmul(*lt, device, stream)) return;
  }

  // Otherwise: the operands cuBLAS cannot read in place packed (row-major)
  // first, the product by cublasGemmEx, the epilogue by gemm.cu's kernel.
  // Row-major C = A @ B is column-major C^T = B^T @ A^T.
  auto operand = [&](MatArg x, int64_t rows, int64_t cols, cublasOperation_t* op, int64_t* ld,
                     int64_t* bs) {
    if (cublas_operand(rows, cols, x.rs, x.cs, op, ld)) {
      *bs = x.bs;
      return x.data;
    }
    void* p = scratch.get(static_cast<size_t>(g.batch * rows * cols * esz));
    launch_matrix_copy(p, rows * cols, cols, 1, x, g.batch, rows, cols, static_cast<int>(esz),
                       stream);
    *op = CUBLAS_OP_N;
    *ld = cols;
    *bs = rows * cols;
    return static_cast<const void*>(p);
  };
  CublasGemm p;
  p.dtype = g.dtype;
  p.m = g.n;
  p.n = g.m;
  p.k = g.k;
  p.batch = g.batch;
  p.alpha = g.alpha;
  p.compute = gemm_compute_type(g.dtype, backend::float32_matmul_precision());
  p.b = operand(a, g.m, g.k, &p.op_b, &p.ldb, &p.stride_b);
  p.a = operand(b, g.k, g.n, &p.op_a, &p.lda, &p.stride_a);

  // The result: straight into C when it is row-major with unit column stride
  // and no epilogue needs float32 scratch; else into contiguous scratch
  // (float32 for float16 / bfloat16 with an epilogue, so the result rounds once).
  const bool f32_scratch = half && !e.empty();
  const bool direct_c =
      g.c_col_stride == 1 && g.c_row_stride >= g.n && fits_int(g.c_row_stride) && !f32_scratch;
  p.d_dtype = f32_scratch ? DType::Float32 : c_dtype;
  p.d = g.c;
  p.ldd = g.c_row_stride;
  p.stride_d = g.c_batch_stride;
  if (!direct_c) {
    p.d = scratch.get(static_cast<size_t>(g.batch * g.m * g.n * (f32_scratch ? 4 : csz)));
    p.ldd = g.n;
    p.stride_d = g.m * g.n;
  }
  SMELT_CHECK(fits_int(g.m) && fits_int(g.n) && fits_int(g.k) && fits_int(g.batch),
              "matmul: sizes m={} n={} k={} batch={} exceed cuBLAS's 32-bit limits", g.m, g.n, g.k,
              g.batch);
  gemm_ex(p, device, stream);

  if (f32_scratch) {
    epilogue_kernel(static_cast<const float*>(p.d));
    return;
  }
  if (!direct_c) {  // scratch (contiguous) -> C (strided)
    launch_matrix_copy(g.c, g.c_batch_stride, g.c_row_stride, g.c_col_stride,
                       MatArg{p.d, g.m * g.n, g.n, 1}, g.batch, g.m, g.n, static_cast<int>(csz),
                       stream);
  }
  if (!e.empty()) epilogue_kernel(nullptr);
}

}  // namespace smelt::cuda::impl
