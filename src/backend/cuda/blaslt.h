// GEMM through cuBLASLt (cublasLtMatmul), the path PyTorch's addmm takes on
// CUDA: float32, float16 and bfloat16 products with the epilogues cuBLASLt
// computes itself on the float32 accumulator before the single rounding to the
// output dtype (CUBLASLT_EPILOGUE_BIAS, RELU, RELU_BIAS, GELU, GELU_BIAS).
// blas.cpp's Backend::gemm runs a Gemm here first and falls back to
// cublasGemmStridedBatchedEx (float64, a layout or alignment no cuBLASLt
// algorithm takes) and to gemm.cu's kernels (integers, the epilogues cuBLASLt
// lacks: exact erf GELU, sigmoid, silu, tanh, the residual add).
//
// Layout: the transpose trick, as cublasGemmEx is called. cuBLAS is
// column-major (CUBLASLT_ORDER_COL, the default; smelt never sets
// CUBLASLT_ORDER_ROW); a row-major m x n C is the column-major n x m C^T, and
// C^T = B^T A^T, so cuBLAS's "A" is smelt's B and its "B" is smelt's A, m and
// n swap, and the bias (one value per column of C) is cuBLASLt's bias over the
// rows of D, which is exactly what CUBLASLT_EPILOGUE_BIAS broadcasts.
//
// Precision: float32 in exact float32 (CUBLAS_COMPUTE_32F) unless
// set_float32_matmul_precision("high" / "medium") allows TF32
// (CUBLAS_COMPUTE_32F_FAST_TF32); float16 / bfloat16 on tensor cores with
// float32 accumulation (CUBLAS_COMPUTE_32F; split-K partial sums reduced in
// float32 too: CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE). cuBLASLt's GELU is the
// tanh approximation (PyTorch's gelu(approximate="tanh")), whose accuracy
// cuBLAS does not document: it is used for float16 / bfloat16 only, where the
// output's rounding dominates; float32 tanh-GELU runs in gemm.cu's epilogue
// kernel (scalar::gelu_tanh, as eager).
//
// Algorithms: cublasLtMatmulAlgoGetHeuristic's best algorithm for a problem
// is cached per LtKey (shape, operations, leading dims, batch strides, dtypes,
// compute type, epilogue, pointer alignments, device) in a process-wide map,
// with the problem's matmul and layout descriptors (a repeated call only sets
// its bias pointer: no descriptor is created per call); "no algorithm" is
// cached too. The workspace an algorithm asks for (at most
// kLtMaxWorkspaceBytes) comes from the caching allocator for each call.
// Every cuBLASLt call is checked (SMELT_CUBLAS_CHECK: smelt::Error with the
// call, the status's name and message).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "kernels/gemm_epilogue.h"

namespace smelt::cuda::impl {

/// The largest workspace a cuBLASLt algorithm may ask for (PyTorch's default on Hopper).
inline constexpr size_t kLtMaxWorkspaceBytes = size_t{32} << 20;

/// One product in cuBLAS's column-major terms (after the transpose trick):
///   D[b] = epilogue(alpha * op_a(A[b]) @ op_b(B[b]))   for b in [0, batch)
/// with D m x n (leading dim ldd), op_a(A) m x k, op_b(B) k x n; A is stored
/// m x k (op N) or k x m (op T) with leading dim lda, B likewise; strides
/// between batches in elements (>= 0; 0 broadcasts an operand).
struct CublasGemm {
  DType dtype = DType::Float32;    // A, B and the bias
  DType d_dtype = DType::Float32;  // D: dtype, or Float32 (scratch for a later epilogue kernel)
  int64_t m = 0, n = 0, k = 0, batch = 1;
  cublasOperation_t op_a = CUBLAS_OP_N, op_b = CUBLAS_OP_N;
  const void* a = nullptr;
  int64_t lda = 1, stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 1, stride_b = 0;
  void* d = nullptr;
  int64_t ldd = 1, stride_d = 0;
  double alpha = 1.0;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  /// cuBLASLt's epilogue; bias: [m] contiguous of `dtype` (BIAS variants).
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  /// C, added with beta = 1 before the bias (D = alpha AB + C + bias): a
  /// residual of `d_dtype`, column-major m x n with leading dim ldc, apart
  /// from D. nullptr: beta = 0 (D is passed as C).
  const void* c = nullptr;
  int64_t ldc = 1, stride_c = 0;
};

/// CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF or CUDA_R_64F for a floating dtype.
cudaDataType_t cuda_data_type(DType t);

/// How cuBLAS reads a row-major-indexed rows x cols operand with strides
/// (rs, cs) in place: as the transpose of a column-major matrix with leading
/// dimension ld (op N) when its column stride is 1, as the column-major
/// matrix itself (op T) when its row stride is 1. False when neither fits
/// (the operand must be packed first) or ld exceeds int32.
bool cublas_operand(int64_t rows, int64_t cols, int64_t rs, int64_t cs, cublasOperation_t* op,
                    int64_t* ld);

/// The compute type of a `dtype` product under float32 matmul precision
/// `precision` ("highest", "high", "medium"): 64F for float64, 32F_FAST_TF32
/// for float32 unless "highest", 32F otherwise.
cublasComputeType_t gemm_compute_type(DType dtype, const std::string& precision);

/// True for the dtypes the cuBLASLt path runs: float32, float16, bfloat16.
bool lt_supports_dtype(DType dtype);

/// The cuBLASLt epilogue computing C = act(AB + bias) [+ residual] for a
/// `dtype` product, or nullopt when cuBLASLt has none: an activation other
/// than relu and, for float16 / bfloat16, gelu_tanh; a residual after an
/// activation (cuBLASLt adds beta * C before it, so a residual rides C only
/// without one: AB + residual + bias, rounded once).
std::optional<cublasLtEpilogue_t> lt_epilogue(DType dtype, bool has_bias, EpilogueActivation act,
                                              bool has_residual);

/// `g` (row-major, backend.h) as one cuBLASLt call that also computes its
/// whole epilogue, reading A, B and C in place; nullopt (and the reason in
/// `*why`) when it is not: a dtype or epilogue cuBLASLt lacks, an empty
/// product (k = 0 included), an operand that must be packed, a C whose
/// column stride is not 1, a negative batch stride. Pure (no CUDA call).
std::optional<CublasGemm> lt_gemm_of(const backend::Gemm& g, std::string* why = nullptr);

/// The largest power of two (at most 256) that divides address `p`: the
/// alignment cuBLASLt's heuristic is told about (256 for nullptr).
uint32_t alignment_bytes(const void* p);

/// What identifies a problem for the algorithm cache.
struct LtKey {
  int device = 0;
  DType dtype = DType::Float32, d_dtype = DType::Float32;
  int compute = 0, epilogue = 0, op_a = 0, op_b = 0;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t lda = 0, ldb = 0, ldd = 0, stride_a = 0, stride_b = 0, stride_d = 0;
  bool has_c = false;
  int64_t ldc = 0, stride_c = 0;
  uint32_t align_a = 0, align_b = 0, align_d = 0, align_bias = 0, align_c = 0;
  auto operator<=>(const LtKey&) const = default;
};
/// The cache key of `p` on `device` (alignments from its pointers).
LtKey lt_key(const CublasGemm& p, int device);

/// One algorithm cuBLASLt's heuristic proposes for a problem.
struct LtAlgorithm {
  cublasLtMatmulAlgo_t algo{};
  size_t workspace_bytes = 0;  // what it needs (<= kLtMaxWorkspaceBytes)
  float waves_count = 0;       // the heuristic's estimate of device utilization (1 = one full wave)
};

/// Runs `p` through cublasLtMatmul on `device` in `stream`, with the cached
/// heuristic algorithm, or with `algo` when given. Returns false, queueing
/// nothing, when cuBLASLt has no algorithm for it, !lt_supports_dtype(p.dtype)
/// or a batch stride is negative (the caller falls back); smelt::Error when a
/// cuBLASLt call fails.
bool lt_matmul(const CublasGemm& p, int device, cudaStream_t stream,
               const LtAlgorithm* algo = nullptr);

/// Up to `max_count` (>= 1) algorithms cuBLASLt's heuristic proposes for `p`
/// on `device`, best first (empty when it has none). Uncached.
std::vector<LtAlgorithm> lt_algorithms(const CublasGemm& p, int device, int max_count);

// ---- candidates of a Gemm (for max-autotune) ----

/// Up to `max_count` cuBLASLt algorithms for `g` (row-major, run on
/// g.device), best first: empty when lt_gemm_of(g) is nullopt or cuBLASLt
/// has none. Time each with gemm_with_algorithm and keep the fastest.
std::vector<LtAlgorithm> gemm_algorithms(const backend::Gemm& g, int max_count);
/// Runs `p` with proposal `index` of the problem's kept proposals (up to
/// kLtTuneCandidates): false, queueing nothing, when there is no such
/// proposal (the caller runs its default).
bool lt_matmul_candidate(const CublasGemm& p, int device, cudaStream_t stream, int index);
/// The most proposals max-autotune times per GEMM.
inline constexpr int kLtTuneCandidates = 8;

/// Runs `g` in `stream` with `algo` (one of gemm_algorithms(g), or of a Gemm
/// with the same LtKey). smelt::Error when lt_gemm_of(g) is nullopt.
void gemm_with_algorithm(const backend::Gemm& g, const LtAlgorithm& algo, cudaStream_t stream);

/// Counters of the cuBLASLt path since the process started (for tests and logs).
struct LtStats {
  int64_t matmuls = 0;            // cublasLtMatmul calls
  int64_t heuristic_queries = 0;  // cublasLtMatmulAlgoGetHeuristic calls (cache misses)
  int64_t no_algorithm = 0;       // lt_matmul calls that found no algorithm (fell back)
  int64_t cached_keys = 0;        // entries of the algorithm cache
};
LtStats lt_stats();

}  // namespace smelt::cuda::impl
