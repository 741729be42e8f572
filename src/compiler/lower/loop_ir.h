// Lowering in the style of Inductor: each graph node becomes a loop-level
// description — Pointwise (a function from an output index to an expression
// over loads), Reduction (the same, plus a reduced range and an accumulator
// from src/kernels/reduce_ops.h), Scan (an accumulator carried along one dim
// in index order, its every step a result: cumsum), Extern (a library call:
// GEMM) or Fallback (an op without a lowering, run through its eager kernel). Views are index
// remaps: an operand's window maps an iteration index (symbolic, IndexExpr) to
// a flat offset, or to the index of the producer it reads, without any copy.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "compiler/graph/graph.h"
#include "compiler/lower/index_expr.h"

namespace smelt::compiler {

enum class LoopKind { Pointwise, Reduction, Scan, Extern, Fallback };
const char* loop_kind_name(LoopKind k);
LoopKind classify(const Node& n);

/// The order eager combines a row of a reduction in (src/kernels/reduce_geom.h
/// and the order structs of src/kernels/reduce_ops.h), taken from the strides
/// the reduction's input has in eager mode. Generated code that reduces a row
/// on one thread follows it, so its result equals eager's bit for bit.
struct ReductionOrder {
  /// ColumnOrder (a kept dim is innermost in memory); else InnerOrder.
  bool column = false;
  /// Every reduced dim of S in visiting order, outermost first: size-1 dims,
  /// then the others by decreasing stride (row-major for indexed reductions).
  std::vector<int64_t> dims;
  /// InnerOrder: elements per run (the innermost merged reduced dims).
  int64_t run = 1;
  /// InnerOrder: runs are contiguous in memory (lane ops use their lanes).
  bool contiguous = false;
};

/// A reduction or scan node as the code generator sees it. A scan's `dims` is
/// its one scanned dim ({} for a 0-dim input), `rnumel` the dim's length, and
/// it visits the dim in index order (`order` is not used).
struct ReductionInfo {
  std::string
      accumulator;   // smelt::reduce struct: Sum, Prod, Max, Min, ArgMax, ArgMin, Welford, Any, All
  DType elem_dtype;  // each element is first converted (rounded) to this dtype (eager's rule)
  DType acc_dtype;   // then to this accumulate type before step() (detail::accumulation)
  ReductionOrder order;
  Shape in_sizes;             // the iteration domain S (the input operand's sizes)
  std::vector<int64_t> dims;  // reduced dims of S, sorted
  int64_t outer = 1;          // product of kept dims
  int64_t rnumel = 1;         // product of reduced dims
  /// Per output: "value", "index", "mean", "var", "std".
  std::vector<std::string> finals;
  double correction = 1;
  bool scan = false;  // an inclusive scan (OpDef::scan): the result has in_sizes
};
ReductionInfo reduction_info(const Graph& g, const Node& n);

/// An iteration index: one symbolic expression per dim of `shape` (dims of
/// size 1 are the constant 0), and the row-major flat position when it is
/// known as one expression (reads of dense operands then use it directly).
struct Index {
  Shape shape;
  std::vector<IndexExpr> vars;
  std::optional<IndexExpr> flat;
};

/// The row-major flat position of `it` within its shape.
IndexExpr flat_index(const Index& it);

/// `flat` (a row-major position) decomposed into one expression per dim of
/// `shape` (x / stride % size, simplified by the bounds of `flat`).
Index unflatten(const Shape& shape, const IndexExpr& flat);

/// The index of a reduction domain `shape` reducing `rdims`: kept dims walk
/// the row position `row`, reduced dims the position `r` within the row.
Index domain_index(const Shape& shape, const std::vector<int64_t>& rdims, const IndexExpr& row,
                   const IndexExpr& r);
/// The same with `r` walking the reduced dims row-major in the sequence
/// `visit` (a permutation of `rdims`, outermost first: ReductionOrder::dims).
Index domain_index(const Shape& shape, const std::vector<int64_t>& rdims, const IndexExpr& row,
                   const IndexExpr& r, const std::vector<int64_t>& visit);

/// Flat element offset of operand `o` read at iteration index `it` (the
/// operand broadcasts to it.shape, aligned at the trailing dims).
IndexExpr operand_offset(const Operand& o, const Index& it);

/// The index into a producer of logical (contiguous) shape `p` that operand
/// `o` reads at `it`: the flat offset decomposed over `p`, which simplifies to
/// a per-dim remap for permutes, slices, expands and selects.
Index producer_index(const Shape& p, const Operand& o, const Index& it);

}  // namespace smelt::compiler
