// The op table: one entry per op smelt knows, with its kind and, for pointwise
// ops, the dtype rule and the scalar functor (in src/kernels/scalar_ops.h) that
// both the eager kernel and JIT-generated code call. `smelt ops` prints it; the
// compiler looks nodes up here to lower them.
#pragma once
#include <string_view>
#include <vector>

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
  None,            // not pointwise
  Same,            // compute and return in the promoted input dtype (neg, abs, add...)
  IntToFloat,      // promoted dtype, integers and bool become float32 (div, exp, sin...)
  Compare,         // compute in the promoted dtype, return bool (eq, lt, isnan...)
  Logical,         // truthiness of each input, return bool (logical_and, logical_not)
  IntegralOnly,    // bool/integer inputs only (bitwise ops)
};

struct OpDef {
  std::string_view name;
  OpKind kind;
  // Pointwise ops only:
  int arity = 0;
  DTypeRule rule = DTypeRule::None;
  /// Function in namespace smelt::scalar that computes one element (in the
  /// compute type); attribute values, when the op has any, follow the operands.
  std::string_view functor = {};
};

const std::vector<OpDef>& op_table();
/// nullptr when `name` is unknown.
const OpDef* find_op(std::string_view name);

}  // namespace smelt::detail
