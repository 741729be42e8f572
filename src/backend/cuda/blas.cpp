// GEMM on CUDA through cuBLAS (blas.h).
#include "backend/cuda/blas.h"

#include <cublas_v2.h>
#include <fmt/format.h>

#include <array>
#include <climits>
#include <mutex>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "backend/cuda/kernels.h"
#include "core/tensor_impl.h"
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

/// How cuBLAS (column-major) reads a rows x cols row-major-indexed operand
/// with strides (rs, cs): as the transpose of a column-major matrix with
/// leading dimension ld (op N) when unit column stride, as the matrix itself
/// (op T) when unit row stride. False when neither fits.
bool layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, cublasOperation_t* op,
            int64_t* ld) {
  if ((cols == 1 || cs == 1) && (rows == 1 || rs >= std::max<int64_t>(1, cols))) {
    *op = CUBLAS_OP_N;
    *ld = rows == 1 ? std::max<int64_t>(1, cols) : rs;
    return fits_int(*ld);
  }
  if ((rows == 1 || rs == 1) && (cols == 1 || cs >= std::max<int64_t>(1, rows))) {
    *op = CUBLAS_OP_T;
    *ld = cols == 1 ? std::max<int64_t>(1, rows) : cs;
    return fits_int(*ld);
  }
  return false;
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::Float16:
      return CUDA_R_16F;
    case DType::BFloat16:
      return CUDA_R_16BF;
    case DType::Float64:
      return CUDA_R_64F;
    default:
      return CUDA_R_32F;
  }
}

/// Device scratch that lives until the end of the call (stream-ordered reuse).
struct Scratch {
  std::vector<Tensor> held;
  void* get(size_t bytes, int device) {
    held.push_back(detail::make_empty({static_cast<int64_t>(bytes)}, DType::UInt8,
                                      Device(DeviceType::CUDA, device), "matmul"));
    return held.back().data_ptr();
  }
};

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
  if (g.batch <= 0 || g.m <= 0 || g.n <= 0) return;
  DeviceGuard guard(device);
  const int64_t esz = static_cast<int64_t>(itemsize(g.dtype));
  const backend::GemmEpilogue& e = g.epilogue;
  const MatArg a{g.a.data, g.a.batch_stride, g.a.row_stride, g.a.col_stride};
  const MatArg b{g.b.data, g.b.batch_stride, g.b.row_stride, g.b.col_stride};
  Scratch scratch;

  if (g.k == 0) {  // an empty sum: C = epilogue(0), zeros copied from one zeroed element
    void* zero = scratch.get(static_cast<size_t>(esz), device);
    SMELT_CUDA_CHECK(cudaMemsetAsync(zero, 0, static_cast<size_t>(esz), stream));
    launch_matrix_copy(g.c, g.c_batch_stride, g.c_row_stride, g.c_col_stride, MatArg{zero, 0, 0, 0},
                       g.batch, g.m, g.n, static_cast<int>(esz), stream);
    if (!e.empty())
      launch_gemm_epilogue(g.dtype, g.batch, g.m, g.n, nullptr, g.c, g.c_batch_stride,
                           g.c_row_stride, g.c_col_stride, e.bias, static_cast<int>(*act),
                           e.residual, e.residual_batch_stride, e.residual_row_stride,
                           e.residual_col_stride, stream);
    return;
  }
  if (!is_floating(g.dtype)) {
    launch_gemm_int(g.dtype, g.batch, g.m, g.n, g.k, a, b, g.c, g.c_batch_stride, g.c_row_stride,
                    g.c_col_stride, static_cast<int64_t>(g.alpha), stream);
    if (!e.empty())
      launch_gemm_epilogue(g.dtype, g.batch, g.m, g.n, nullptr, g.c, g.c_batch_stride,
                           g.c_row_stride, g.c_col_stride, e.bias, static_cast<int>(*act),
                           e.residual, e.residual_batch_stride, e.residual_row_stride,
                           e.residual_col_stride, stream);
    return;
  }

  // Operands: read in place, or packed contiguous (row-major) first.
  auto operand = [&](MatArg x, int64_t rows, int64_t cols, cublasOperation_t* op, int64_t* ld,
                     int64_t* bs) {
    if (layout(rows, cols, x.rs, x.cs, op, ld)) {
      *bs = x.bs;
      return x.data;
    }
    void* p = scratch.get(static_cast<size_t>(g.batch * rows * cols * esz), device);
    launch_matrix_copy(p, rows * cols, cols, 1, x, g.batch, rows, cols, static_cast<int>(esz),
                       stream);
    *op = CUBLAS_OP_N;
    *ld = cols;
    *bs = rows * cols;
    return static_cast<const void*>(p);
  };
  cublasOperation_t opa, opb;
  int64_t lda, ldb, bsa, bsb;
  const void* ap = operand(a, g.m, g.k, &opa, &lda, &bsa);
  const void* bp = operand(b, g.k, g.n, &opb, &ldb, &bsb);

  // The result: straight into C when it is row-major with unit column stride
  // and no epilogue needs float32 scratch; else into contiguous scratch.
  const bool half = g.dtype == DType::Float16 || g.dtype == DType::BFloat16;
  const bool direct_c = g.c_col_stride == 1 && g.c_row_stride >= g.n && fits_int(g.c_row_stride) &&
                        !(half && !e.empty());
  const bool f32_scratch = half && !e.empty();
  void* cp = g.c;
  int64_t ldc = g.c_row_stride, bsc = g.c_batch_stride;
  if (!direct_c) {
    cp = scratch.get(static_cast<size_t>(g.batch * g.m * g.n * (f32_scratch ? 4 : esz)), device);
    ldc = g.n;
    bsc = g.m * g.n;
  }
  SMELT_CHECK(fits_int(g.m) && fits_int(g.n) && fits_int(g.k) && fits_int(g.batch),
              "matmul: sizes m={} n={} k={} batch={} exceed cuBLAS's 32-bit limits", g.m, g.n, g.k,
              g.batch);

  cublasHandle_t h = handle(device);
  SMELT_CUBLAS_CHECK(cublasSetStream(h, stream));
  const cudaDataType_t ab_type = cuda_type(g.dtype);
  const cudaDataType_t c_type = f32_scratch ? CUDA_R_32F : ab_type;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (g.dtype == DType::Float64) {
    compute = CUBLAS_COMPUTE_64F;
  } else if (g.dtype == DType::Float32 && backend::float32_matmul_precision() != "highest") {
    compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  }
  const double alpha_d = g.alpha, beta_d = 0.0;
  const float alpha_f = static_cast<float>(g.alpha), beta_f = 0.0f;
  const void* alpha = g.dtype == DType::Float64 ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = g.dtype == DType::Float64 ? static_cast<const void*>(&beta_d) : &beta_f;
  // Row-major C = A @ B is column-major C^T = B^T @ A^T.
  SMELT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      h, opb, opa, static_cast<int>(g.n), static_cast<int>(g.m), static_cast<int>(g.k), alpha, bp,
      ab_type, static_cast<int>(ldb), bsb, ap, ab_type, static_cast<int>(lda), bsa, beta, cp,
      c_type, static_cast<int>(ldc), bsc, static_cast<int>(g.batch), compute, CUBLAS_GEMM_DEFAULT));

  if (f32_scratch) {
    launch_gemm_epilogue(g.dtype, g.batch, g.m, g.n, static_cast<const float*>(cp), g.c,
                         g.c_batch_stride, g.c_row_stride, g.c_col_stride, e.bias,
                         static_cast<int>(*act), e.residual, e.residual_batch_stride,
                         e.residual_row_stride, e.residual_col_stride, stream);
    return;
  }
  if (!direct_c) {  // scratch (contiguous) -> C (strided)
    launch_matrix_copy(g.c, g.c_batch_stride, g.c_row_stride, g.c_col_stride,
                       MatArg{cp, g.m * g.n, g.n, 1}, g.batch, g.m, g.n, static_cast<int>(esz),
                       stream);
  }
  if (!e.empty())
    launch_gemm_epilogue(g.dtype, g.batch, g.m, g.n, nullptr, g.c, g.c_batch_stride, g.c_row_stride,
                         g.c_col_stride, e.bias, static_cast<int>(*act), e.residual,
                         e.residual_batch_stride, e.residual_row_stride, e.residual_col_stride,
                         stream);
}

}  // namespace smelt::cuda::impl
