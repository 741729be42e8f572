// The op table: one entry per op smelt knows, holding everything the compiler
// needs to know about it — its kind; for pointwise ops the dtype rule, the
// scalar functor (in src/kernels/scalar_ops.h) that both the eager kernel and
// JIT-generated code call, the runtime check generated code must make and the
// GEMM-epilogue activation it folds into; for reductions the accumulator (in
// src/kernels/reduce_ops.h) and what each output finalizes to; for every op
// whether it is discontinuous, its precision class and its derivative slot.
// Every other per-op list (lowering, codegen checks, epilogue fusion, the
// fuzzer's op set, golden tolerances) is derived from here. `smelt ops` prints it.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/gemm_epilogue.h"
#include "ops/dispatch.h"
#include "smelt/tensor.h"

namespace smelt::detail {

enum class OpKind {
  Pointwise,  // elementwise over broadcast inputs
  Reduction,  // reduces one or more dims
  View,       // new sizes/strides over the same storage (no kernel)
  Movement,   // data movement that is not a view: cat, gather, pad, index_select...
  Extern,     // library call: matmul (BLAS / oneDNN)
  Composite,  // has its own eager kernel and a decomposition into primitives
  Factory,    // creates a tensor from scratch
  Random,     // draws from the global generator
  InPlace,    // writes into an existing tensor
};
std::string_view op_kind_name(OpKind k);

/// How a pointwise op's output (and compute) dtype follows from its inputs.
enum class DTypeRule {
  None,          // not pointwise
  Same,          // compute and return in the promoted input dtype (neg, abs, add...)
  IntToFloat,    // promoted dtype, integers and bool become float32 (div, exp, sin...)
  Compare,       // compute in the promoted dtype, return bool (eq, lt, isnan...)
  Logical,       // truthiness of each input, return bool (logical_and, logical_not)
  IntegralOnly,  // bool/integer inputs only (bitwise ops)
};

/// A reduction's accumulator: the struct of that name in namespace smelt::reduce
/// (src/kernels/reduce_ops.h); a scan (OpDef::scan) folds with it too. None: not a
/// reduction, or one without a loop-level lowering (logsumexp is written over
/// primitive ops and never recorded).
enum class Accumulator { None, Sum, Prod, Max, Min, ArgMax, ArgMin, Welford, Any, All };
/// "Sum", "Prod", "Max", "Min", "ArgMax", "ArgMin", "Welford", "Any", "All"; "" for None.
std::string_view accumulator_name(Accumulator a);

/// The dtypes reduction or scan `def` works in, from input dtype `in` and result
/// dtype `out` (the values, not the indices, of max/min):
///   element  each input element is first converted (rounded) to it: for Sum
///            and Prod (sum, mean, prod, cumsum) the result dtype, as eager
///            converts its input to the result dtype; else the input dtype;
///   acc      the accumulate type, reduce::accumulate_t (src/kernels/reduce_ops.h)
///            of the element dtype: the rule the eager kernels are written with
///            (AccRule::Scan for a scan: float32 accumulates in double).
struct Accumulation {
  DType element;
  DType acc;
};
struct OpDef;
/// Raises an internal error when `def` has no accumulator.
Accumulation accumulation(const OpDef& def, DType in, DType out);

/// A check generated code makes at run time, where eager raises smelt::Error.
enum class RuntimeCheck {
  None,
  /// The second operand is 0 and the compute dtype is an integer (or bool): eager
  /// raises "ZeroDivisionError". Applies to remainder and fmod always, and to div only
  /// with a rounding_mode (its variants below; plain div of integers computes in float).
  IntegerDivisionByZero,
  /// An index read from a tensor (gather, index_select, embedding) is outside the
  /// dim it selects: eager raises "index out of range".
  IndexOutOfRange,
};
std::string_view runtime_check_name(RuntimeCheck c);
/// What a failed check means and what to do, for the error a compiled kernel raises.
std::string_view runtime_check_message(RuntimeCheck c);

/// How a C++ number (a wrapped-number operand, PyTorch's Python scalar) enters a
/// pointwise op: PyTorch's CPU rules, recorded by shared/golden/golden_scalars.json.
enum class NumberRule {
  /// Converted to the compute dtype first, unchecked, as TensorIterator converts a
  /// CPU scalar to the common dtype: bfloat16 [3.14] == 3.14 compares with
  /// bfloat16(3.14) = 3.140625, float16 + 1e10 adds inf, int8 + 200 adds -56.
  Convert,
  /// Read at the compute dtype's opmath precision (float32 for float16/bfloat16),
  /// unrounded: PyTorch's mul and div kernels take original_scalar_value<opmath_t>,
  /// lerp its weight as opmath_t.
  Opmath,
  /// A number after the first operand is converted with PyTorch's overflow check
  /// (Scalar::to<T>: "value cannot be converted to type int8_t without overflow"):
  /// pow's exponent, clamp's bounds. A number first is converted unchecked.
  Checked,
  /// Checked when the compute dtype is an integer, Convert otherwise (where).
  CheckedIfIntegral,
};
std::string_view number_rule_name(NumberRule r);

/// How far a correct result may lie from PyTorch's; the golden tolerances key on it.
enum class Precision {
  Exact,           // exact or one correctly rounded operation (add, floor, max, views...)
  Transcendental,  // library math within a few ulps (exp, sin, gelu, pow, div...)
  Accumulated,     // sums many terms, error grows with length (sum, var, matmul, softmax...)
};
std::string_view precision_name(Precision p);

/// What a derivative formula sees: one backward call of one recorded op.
struct GradContext {
  /// The op's inputs, in its recorded order (absent optional inputs left out);
  /// defined only where the op's entry saves them (OpDef::save_inputs).
  const std::vector<Tensor>& inputs;
  /// The op's outputs; defined only where the entry saves them (save_outputs).
  const std::vector<Tensor>& outputs;
  /// Shape, dtype and device of every input (saved or not).
  const std::vector<OutMeta>& input_meta;
  const Attrs& attrs;
  /// The gradient of each output; when the op has several outputs and some got
  /// no gradient, zeros stand in for those (a formula never sees an undefined one).
  const std::vector<Tensor>& grad_outputs;
  /// Which inputs need a gradient (a formula may skip the others).
  const std::vector<bool>& needs_input_grad;

  /// Saved input / output i (internal error if the entry does not save it).
  const Tensor& in(size_t i) const;
  const Tensor& out(size_t i = 0) const;
  const Tensor& grad(size_t i = 0) const { return grad_outputs.at(i); }
  bool needs(size_t i) const { return i < needs_input_grad.size() && needs_input_grad[i]; }
  const Shape& in_sizes(size_t i) const { return input_meta.at(i).sizes; }
};

/// Backward formula of one op (PyTorch's derivatives.yaml entry): the gradient of
/// each input (an undefined Tensor where it gets none, or needs none) from a
/// GradContext. Written with the public ops, so it runs eagerly, records graph
/// nodes again under create_graph (higher-order gradients) and can be traced by
/// the compiler like any forward graph. A returned gradient may have the op's
/// broadcast shape or compute dtype: autograd sums it to the input's shape and
/// converts it to the input's dtype (PyTorch's sum_to / validate_outputs).
using DerivativeFn = std::vector<Tensor> (*)(const GradContext& c);

/// Bit i set: input (or output) i is saved for backward (a derivative reads its values).
using SaveMask = uint32_t;
constexpr SaveMask kSaveNone = 0;
constexpr SaveMask kSaveAll = ~SaveMask{0};
constexpr SaveMask save_bit(int i) { return SaveMask{1} << i; }

/// A pointwise op computed differently when its string attribute `attr` equals
/// `value` (gelu approximate="tanh", div rounding_mode="floor"); the fields below
/// then replace the op's own.
struct OpVariant {
  std::string_view attr;
  std::string_view value;
  std::string_view functor;
  RuntimeCheck check = RuntimeCheck::None;
  EpilogueActivation epilogue = EpilogueActivation::None;
  bool discontinuous = false;
};

struct OpDef {
  std::string_view name;
  OpKind kind;
  // ---- pointwise ops only ----
  int arity = 0;
  DTypeRule rule = DTypeRule::None;
  /// Function in namespace smelt::scalar that computes one element (in the
  /// compute type); attribute values, when the op has any, follow the operands.
  std::string_view functor = {};
  RuntimeCheck check = RuntimeCheck::None;
  /// The activation a GEMM epilogue applies for this op; None: not foldable.
  EpilogueActivation epilogue = EpilogueActivation::None;
  std::vector<OpVariant> variants = {};
  NumberRule numbers = NumberRule::Convert;
  // ---- reductions only ----
  Accumulator accumulator = Accumulator::None;
  /// Per output, what the accumulator finalizes to: "value", "index", "mean", "var", "std".
  std::vector<std::string_view> finals = {};
  /// An inclusive scan along one dim (cumsum): the result has the input's shape,
  /// its element k along the dim being the accumulator after elements 0..k, folded
  /// in index order; it accumulates in reduce::AccRule::Scan's type.
  bool scan = false;
  // ---- every op ----
  /// The result jumps as a function of real inputs (floor, sign, comparisons, remainder,
  /// argmax, float->integer casts, truthiness...), so a rounding-level difference in an
  /// input can change it by far more than rounding; the fuzzer never feeds such an op
  /// values that may legitimately differ by rounding. Integer-only ops (bitwise) take
  /// exact inputs and are not marked.
  bool discontinuous = false;
  Precision precision = Precision::Exact;
  /// Movement ops: the compiler lowers it into loop IR as an index map
  /// (src/compiler/lower/movement.cpp), so it fuses like a pointwise op.
  bool index_map = false;
  /// False when no input gets a gradient: bool/integer results (comparisons, logical
  /// and bitwise ops, isnan, argmax, any), results that do not depend on the inputs'
  /// values (factories, random draws, fill_). Ops with an almost-everywhere-zero
  /// derivative (floor, sign, round) are differentiable, as in PyTorch. The outputs
  /// of a non-differentiable op never require grad.
  bool differentiable = true;
  /// The backward formula (see DerivativeFn); with `save_inputs` / `save_outputs`,
  /// the inputs and outputs it reads (saved when the op is recorded, checked
  /// against in-place writes when used).
  DerivativeFn derivative = nullptr;
  SaveMask save_inputs = kSaveNone;
  SaveMask save_outputs = kSaveNone;
  /// An in-place multi-tensor op (the optimizers' fused steps, PyTorch's
  /// _fused_sgd_ / _fused_adam_): it updates its first inputs in place (the
  /// parameters, then the state tensors) from the others (gradients, step
  /// counts). A graph records it functionally, output k being the new value of
  /// input k; the compiler runs it as one step that launches the backend's
  /// multi-tensor kernel over every tensor, in place where the old values are
  /// not read again.
  bool multi_tensor = false;
  /// For a differentiable op without a formula of its own: what autograd records
  /// instead, because the op's eager code is written over other recorded ops
  /// ("narrow" for split, "decomposition" for cross_entropy, "the engine" for copy_).
  std::string_view derivative_via = {};
};

const std::vector<OpDef>& op_table();
/// nullptr when `name` is unknown.
const OpDef* find_op(std::string_view name);

/// The variant of `def` that `attrs` select, or nullptr for the op's own entry.
const OpVariant* find_variant(const OpDef& def, const Attrs& attrs);
/// The scalar functor of pointwise op `def` under `attrs` (before any alpha / extra
/// arguments, which pointwise_call adds).
std::string_view op_functor(const OpDef& def, const Attrs& attrs);
/// The runtime check of node `op` with `attrs`; None for an unknown op.
RuntimeCheck runtime_check(std::string_view op, const Attrs& attrs);
/// The GEMM-epilogue activation node `op` with `attrs` folds into; None when it does not
/// fold (or the op is unknown).
EpilogueActivation epilogue_activation(std::string_view op, const Attrs& attrs);
/// Whether node `op` with `attrs` is discontinuous (see OpDef::discontinuous); false for
/// an unknown op.
bool is_discontinuous(std::string_view op, const Attrs& attrs);

}  // namespace smelt::detail
