// Comparing a computed tensor with PyTorch's golden answer (used by `smelt golden`).
#pragma once
#include <string>

#include "smelt/tensor.h"

namespace smelt::cli {

/// |got - want| <= atol + rtol * |want| for floating outputs.
struct Tolerance {
  double atol;
  double rtol;
};

/// Tolerance for output dtype `dtype` of op `op` (PyTorch's name):
///
/// | dtype    | exact-ish pointwise | transcendental   | reductions / matmul / nn |
/// |----------|---------------------|------------------|--------------------------|
/// | float64  | 1e-7 / 1e-7         | 1e-7 / 1e-7      | 1e-7 / 1e-7              |
/// | float32  | 1e-5 / 1.3e-6       | 1e-5 / 1e-5      | 1e-5 / 1e-4              |
/// | float16  | 1e-5 / 1e-3         | 1e-5 / 1e-3      | 1e-5 / 2e-3              |
/// | bfloat16 | 1e-5 / 1.6e-2       | 1e-5 / 1.6e-2    | 1e-5 / 1.6e-2            |
/// (atol / rtol). The column is the op's OpDef::precision in the op table (Exact,
/// Transcendental, Accumulated); names the table does not hold count as Exact.
Tolerance golden_tolerance(const std::string& op, DType dtype);

/// Empty when `got` matches `want` (same shape and dtype; integers and bool exactly; floats
/// with matching NaNs and infinities and within `tol`), else a one-line reason.
std::string compare_tensors(const Tensor& got, const Tensor& want, const Tolerance& tol);

}  // namespace smelt::cli
