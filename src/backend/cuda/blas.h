// GEMM on CUDA (Backend::gemm): cuBLAS for floating dtypes — float32 in exact
// float32 (CUBLAS_COMPUTE_32F) unless set_float32_matmul_precision("high")
// allows TF32, float64 in float64, float16 / bfloat16 on tensor cores with
// float32 accumulation — and gemm.cu's kernel for integers.
// A float32 / float16 / bfloat16 product whose operands and C cuBLAS reads in
// place and whose epilogue cuBLASLt has (bias, relu, half-precision tanh-GELU)
// is one cublasLtMatmul call (blaslt.h). Otherwise operands cuBLAS cannot read
// in place (neither dim unit-stride) are packed first, the product runs on
// cuBLASLt (cublasGemmStridedBatchedEx where cuBLASLt has no algorithm, and
// for float64), and the epilogue (bias, activation, residual) as one kernel
// after it (from float32 scratch for float16 / bfloat16, so the result rounds
// once).
#pragma once
#include <cuda_runtime_api.h>

#include "backend/backend.h"

namespace smelt::cuda::impl {

bool gemm_epilogue_supported(const backend::GemmActivation& act);
/// Runs `g` on `device` in `stream` (Errors as Backend::gemm); a
/// Gemm::algorithm index picks one of cuBLASLt's proposals for it.
void gemm(const backend::Gemm& g, int device, cudaStream_t stream);
/// How many of cuBLASLt's proposals for `g` (at most `most`, best first) a
/// Gemm::algorithm index may pick (Backend::gemm_algorithm_count); 0 when
/// cuBLASLt does not run `g` as one call. The proposals are kept with the
/// problem's descriptors (one heuristic query). Defined in blaslt.cpp.
int gemm_candidate_count(const backend::Gemm& g, int most);

}  // namespace smelt::cuda::impl
