// BLAS bridge: strided, batched matrix products on raw CPU buffers, for the
// eager matmul and for JIT-generated plans (which call these functions
// directly). float32 products run as oneDNN matmul primitives (with or
// without a fused epilogue; $SMELT_CPU_GEMM=openblas sends those without one
// to OpenBLAS), float64 ones through OpenBLAS (cblas); float16 / bfloat16 are
// converted to float32, multiplied as float32, and rounded once on store;
// integer types use a blocked loop whose products and sums wrap around in the
// element type (as PyTorch's integer matmul does). Bool is refused.
//
// All strides are in ELEMENTS and may be anything (zero, negative, transposed);
// op(A) = A^T is expressed by swapping A's row and column strides. Operands
// whose strides a library cannot take are packed into contiguous scratch first.
#pragma once
#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "smelt/dtype.h"

namespace smelt::cpu {

/// Operand and epilogue descriptions are the device-neutral ones of backend.h.
using backend::GemmEpilogue;
using backend::MatrixRef;
using backend::OperandIdentity;

/// The library that runs the float32 products without an epilogue (matmul,
/// mm, the backward's dX = dY W and dW = dY^T X, eager and compiled alike)
/// and the float32 products of float16 / bfloat16 operands: oneDNN's matmul
/// primitive (the default: the same OpenMP threads as smelt's kernels), or
/// OpenBLAS's cblas_sgemm, one call per matrix (Debian's default OpenBLAS
/// runs a pthread pool of its own beside OpenMP's, its workers spinning a
/// while after each call). Products with an epilogue and batched ones
/// (batch > 1) run through oneDNN under both, layouts oneDNN refuses through
/// OpenBLAS; float64 always runs through OpenBLAS. The libraries sum in
/// different orders: results differ in the last bits, never between eager
/// and compiled code of one process.
enum class CpuGemmLibrary { OneDnn, OpenBlas };

/// A $SMELT_CPU_GEMM value: nullptr, "" or "onednn" -> OneDnn, "openblas" ->
/// OpenBlas. Throws smelt::Error naming the variable for anything else.
CpuGemmLibrary parse_cpu_gemm_library(const char* value);
/// The library in use: $SMELT_CPU_GEMM, read at the first product of the
/// process, or what set_cpu_gemm_library() chose. Throws smelt::Error for an
/// unknown $SMELT_CPU_GEMM value.
CpuGemmLibrary cpu_gemm_library();
/// Runs later products with `lib` (returns the one used before). For tests
/// that compare the libraries; not thread-safe with products running.
CpuGemmLibrary set_cpu_gemm_library(CpuGemmLibrary lib);
/// "onednn", "openblas".
const char* cpu_gemm_library_name(CpuGemmLibrary lib);

/// C[b] = alpha * A[b] @ B[b] + beta * C[b] for b in [0, batch); A[b] is m x k,
/// B[b] is k x n, C[b] is m x n. When beta == 0, C is not read (NaN in C does not
/// propagate). All operands have dtype `dtype` (any dtype but bool; float16 and
/// bfloat16 accumulate in float32; integers wrap). C may not alias A or B.
/// Throws smelt::Error for bool.
void gemm_strided_batched(DType dtype, int64_t batch, int64_t m, int64_t n, int64_t k,
                          const MatrixRef& a, const MatrixRef& b, void* c, int64_t c_batch_stride,
                          int64_t c_row_stride, int64_t c_col_stride, double alpha = 1.0,
                          double beta = 0.0);

/// True when `activation` is one GemmEpilogue accepts.
bool gemm_epilogue_activation_supported(const std::string& activation);

/// C[b] = activation(alpha * A[b] @ B[b] + bias) + residual[b]: one oneDNN
/// matmul primitive with bias and post-ops (eltwise_relu / gelu_erf / gelu_tanh
/// / logistic / swish / tanh, binary_add) for float32 (float16 / bfloat16
/// through float32), primitives cached by shape, strides and epilogue; other
/// dtypes, or layouts oneDNN refuses, run gemm_strided_batched and then the
/// epilogue in a loop. Throws smelt::Error for bool or an unknown activation.
///
/// `b_identity` known (a compiled plan's weight): a float32 B shared by the
/// whole batch is read from a copy repacked once into the layout oneDNN's
/// matmul prefers (format_tag::any, e.g. BA16a64b), kept in a per-thread
/// cache keyed by B's address, layout, storage serial and version (a new
/// version repacks; least recently used copies go beyond
/// kPackedWeightCacheBytes). The products are the same bits as with B read in
/// place.
void gemm_fused(DType dtype, int64_t batch, int64_t m, int64_t n, int64_t k, const MatrixRef& a,
                const MatrixRef& b, void* c, int64_t c_batch_stride, int64_t c_row_stride,
                int64_t c_col_stride, const GemmEpilogue& epilogue, double alpha = 1.0,
                const OperandIdentity& b_identity = {});

/// The most bytes of repacked weights one thread keeps (gemm_fused).
constexpr size_t kPackedWeightCacheBytes = size_t{1} << 30;

/// The calling thread's cache of repacked weights (gemm_fused's b_identity).
struct PackedWeightStats {
  size_t entries = 0;  // copies kept
  size_t bytes = 0;    // their size
  int64_t packs = 0;   // repacks so far (a new weight, or a new version of one)
};
PackedWeightStats packed_weight_stats();
/// Empties the calling thread's cache of repacked weights (packs stays counted).
void clear_packed_weights();

}  // namespace smelt::cpu
