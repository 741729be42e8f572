// C++ numbers entering tensor ops: how PyTorch converts a Python number (a
// wrapped-number operand, a Scalar argument such as masked_fill's value) to the
// dtype an op computes in, and when that conversion raises for overflow. The
// rule each pointwise op follows is its op-table NumberRule; pw::launch applies
// it, so eager kernels and generated code see the same converted number.
#pragma once
#include <utility>
#include <vector>

#include "smelt/scalar.h"
#include "smelt/tensor.h"

namespace smelt::detail {

/// The finite range of dtype `t` as doubles (lowest, max): bool [0, 1], the
/// integers' exact limits (int64's rounded to doubles), the floating types'
/// largest finite values.
std::pair<double, double> dtype_range(DType t);

/// True when PyTorch's checked conversion of `s` to dtype `t` (Scalar::to<T>,
/// c10::overflows) raises: a finite value outside t's range; NaN or ±inf for an
/// integer dtype; for uint8 a negative integer below -255 (one above wraps, as
/// in PyTorch). Never for bool (any number is truthy or not) or a bool `s`.
bool number_overflows(const Scalar& s, DType t);

/// `s` as a value of dtype `t` (scalar::cast: float16/bfloat16 round through
/// float, integers wrap, float -> integer truncates), returned as a Scalar of
/// t's kind (bool, integer, or floating holding the rounded value).
Scalar number_to_dtype(const Scalar& s, DType t);

/// number_to_dtype, raising smelt::Error naming `op` when number_overflows.
Scalar checked_number_to_dtype(const Scalar& s, DType t, const char* op);

/// The operands of pointwise op `record` (an op-table name) computing in `dtype`,
/// with every C++ number (wrapped-number tensor holding a value) converted by the
/// op's NumberRule; `op` names the op in errors. Tensors pass unchanged.
std::vector<Tensor> convert_numbers(const char* op, const char* record, DType dtype,
                                    const std::vector<Tensor>& inputs);

}  // namespace smelt::detail
