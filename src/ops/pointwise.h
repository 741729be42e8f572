// Pointwise ops: the contract between their eager kernels and the JIT compiler.
//
// Every pointwise op records one node through run_op1 with
//  * inputs: the tensors it reads, in their ORIGINAL dtypes (C++ numbers become
//    wrapped-number 0-dim tensors, see wrap_scalar);
//  * attrs: "dtype" = the dtype it computes in (the promoted common dtype; for
//    int->float ops such as div or exp of integers, float32; bool for the logical
//    ops), plus the op's own arguments under PyTorch's names (alpha,
//    rounding_mode, approximate, nan/posinf/neginf).
// One element is then computed as
//    out = store(smelt::scalar::<functor><C>(C(in_0), ..., C(in_k), C(extra)...))
// with C = opmath_type(dtype) and (functor, extra) = pointwise_call(op, attrs);
// conversions are scalar::cast (via float for float16/bfloat16: Half(float)),
// and an operand of another dtype than a float16/bfloat16 `dtype` is rounded
// to `dtype` first, as PyTorch casts operands to the common dtype
// (rounds_to_common; not a wrapped number, nor the one-element second operand
// of mul and div: pw::unrounded_single_operand).
// The eager kernel follows exactly this convention, so compiled code can match
// it bit for bit.
#pragma once
#include <initializer_list>
#include <string>
#include <vector>

#include "ops/dispatch.h"

namespace smelt::detail {

struct PointwiseCall {
  std::string functor;        // function name in namespace smelt::scalar
  std::vector<Scalar> extra;  // trailing arguments, converted to the compute type
};

/// How one element of pointwise node `op` (with the attrs it recorded, and
/// "dtype": its compute dtype) is computed:
/// smelt::scalar::<functor><C>(operands converted to C..., extra converted to C...).
/// add / sub with alpha != 1: add_alpha / sub_alpha, alpha rounded to a
/// float16 / bfloat16 compute dtype first (as PyTorch converts it).
/// div with rounding_mode trunc / floor (and floor_divide) of a float16 /
/// bfloat16 compute dtype whose divisor is not a scalar to PyTorch
/// (`single_second_operand` false: see single_divisor): div_trunc_<dtype> /
/// div_floor_<dtype>, which round their intermediates to it, as PyTorch's
/// kernels do there.
/// Internal error for an op that is not pointwise.
PointwiseCall pointwise_call(const std::string& op, const Attrs& attrs,
                             bool single_second_operand = false);

/// Whether a division's second operand (of these sizes, strides and dtype,
/// in an op computing in `common`) is a scalar to PyTorch's division
/// kernels (TensorIterator::is_scalar: every dim of size 1 or stride 0, so
/// an expanded one-element tensor too), which then compute in float and
/// round once. An operand of another dtype counts only with one element:
/// TensorIterator casts it to a dense copy first.
bool single_divisor(const Shape& sizes, const Shape& strides, DType dtype, DType common);

/// A wrapped-number 0-dim CPU tensor holding `s` (dtype bool / int64 / float64 by
/// the scalar's kind); it has the lowest priority in type promotion.
Tensor wrap_scalar(const Scalar& s);

/// PyTorch's result_type over any number of operands: dim>0 tensors outrank
/// 0-dim tensors, which outrank wrapped numbers; a lower-ranked operand only
/// matters when it is of a higher category (bool < integer < floating), and a
/// floating wrapped number then counts as the default dtype (float32).
DType result_type(const std::vector<Tensor>& operands);

/// The dtype pointwise op `op` (an op_table name) computes in for these inputs
/// (the "dtype" attr): result_type of the operands (for "where", of the two
/// values), with integers/bool -> float32 for int->float ops, bool for logical ops.
/// Exception it cannot see: div with a rounding_mode computes in result_type (no
/// int->float); the recorded "dtype" attr is always authoritative.
DType compute_dtype(const std::string& op, const std::vector<Tensor>& inputs);
/// The same for a braced list of inputs (no vector: every pointwise op asks).
DType compute_dtype(const std::string& op, std::initializer_list<Tensor> inputs);

/// The output dtype of pointwise op `op` computing in `dtype` (bool for
/// comparisons, isnan/isinf and logical ops, `dtype` otherwise).
DType output_dtype(const std::string& op, DType dtype);

/// The device a pointwise op over `tensors` runs on: that of its tensors, where
/// wrapped numbers and 0-dim CPU tensors go with tensors of any device
/// (PyTorch's CPU-scalar exception; CPU when there is nothing else). Error
/// naming `op` and two of the devices when the others differ.
Device common_device(const char* op, const std::vector<Tensor>& tensors);

/// Broadcast shape of all `tensors`; Error naming `op` and the shapes when incompatible.
Shape broadcast_all(const std::vector<Tensor>& tensors, const char* op);

}  // namespace smelt::detail
