// GEMM on CUDA (Backend::gemm): cuBLAS for floating dtypes — float32 in exact
// float32 (CUBLAS_COMPUTE_32F) unless set_float32_matmul_precision("high")
// allows TF32, float64 in float64, float16 / bfloat16 on tensor cores with
// float32 accumulation — and gemm.cu's kernel for integers. Operands cuBLAS
// cannot read in place (neither dim unit-stride) are packed first; an
// epilogue (bias, activation, residual) runs as one kernel after the product
// (from float32 scratch for float16 / bfloat16, so the result rounds once).
#pragma once
#include <cuda_runtime_api.h>

#include "backend/backend.h"

namespace smelt::cuda::impl {

bool gemm_epilogue_supported(const backend::GemmActivation& act);
/// Runs `g` on `device` in `stream` (Errors as Backend::gemm).
void gemm(const backend::Gemm& g, int device, cudaStream_t stream);

}  // namespace smelt::cuda::impl
