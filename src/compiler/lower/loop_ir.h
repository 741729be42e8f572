// Lowering in the style of Inductor: each graph node becomes a loop-level
// description — Pointwise (a function from an output index to an expression
// over loads), Reduction (the same, plus a reduced range and an accumulator
// from src/kernels/reduce_ops.h), Extern (a library call: GEMM) or Fallback
// (an op without a lowering, run through its eager kernel). Views are index
// remaps: an operand's window maps an iteration index to a flat offset, or to
// the index of the producer it reads, without any copy.
#pragma once
#include <string>
#include <vector>

#include "compiler/graph/graph.h"

namespace smelt::compiler {

enum class LoopKind { Pointwise, Reduction, Extern, Fallback };
const char* loop_kind_name(LoopKind k);
LoopKind classify(const Node& n);

/// Reduced length from which float32 sums accumulate in double.
inline constexpr int64_t kLongReduction = 4096;

/// A reduction node as the code generator sees it.
struct ReductionInfo {
  std::string
      accumulator;  // smelt::reduce struct: Sum, Prod, Max, Min, ArgMax, ArgMin, Welford, Any, All
  DType acc_dtype;  // elements are converted to this type before step()
  Shape in_sizes;   // the iteration domain S (the input operand's sizes)
  std::vector<int64_t> dims;  // reduced dims of S, sorted
  int64_t outer = 1;          // product of kept dims
  int64_t rnumel = 1;         // product of reduced dims
  /// Per output: "value", "index", "mean", "var", "std".
  std::vector<std::string> finals;
  double correction = 1;
};
ReductionInfo reduction_info(const Graph& g, const Node& n);

/// An iteration index: one C++ expression per dim of `shape`, plus the
/// row-major flat index when it is available as one expression.
struct Index {
  Shape shape;
  std::vector<std::string> vars;
  std::string flat;  // "" when not known
};

/// Flat element offset (C++ expression) of operand `o` read at iteration index
/// `it` (the operand broadcasts to it.shape, aligned at the trailing dims).
std::string operand_offset(const Operand& o, const Index& it);

/// The index into a producer of logical shape `p` that operand `o` reads at
/// `it`: a per-dim remap for permutes, slices, expands and selects, else a
/// div/mod decomposition of the flat offset (reshapes).
Index producer_index(const Shape& p, const Operand& o, const Index& it);

}  // namespace smelt::compiler
