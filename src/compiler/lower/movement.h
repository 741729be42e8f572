// Loop-level lowering of the ops that move data without computing
// (masked_fill, tril/triu, pad, cat, index_select, gather, embedding): each is
// a function from an output index to reads of its inputs at remapped indices,
// so it fuses with its producers and consumers like a pointwise op. Reads
// outside an input (pad, the other pieces of cat) are guarded: they happen
// only where their guard holds, and the fill value stands in elsewhere.
// Indices that are data (gather, index_select, embedding) come from the
// caller, which reads the index tensor and checks its range at run time.
#pragma once
#include <functional>
#include <tuple>
#include <vector>

#include "compiler/lower/loop_ir.h"

namespace smelt::compiler {

/// A conjunction of lo <= e < hi terms over indices (empty: always true).
struct Guard {
  std::vector<std::tuple<IndexExpr, int64_t, int64_t>> terms;
  bool always() const { return terms.empty(); }
};

/// A read of input `input` at index `at` (in the input operand's shape),
/// where `guard` holds.
struct MovementRead {
  int input = 0;
  Index at;
  Guard guard;
};

struct MovementLowering {
  enum class Combine {
    Read,        // the value of reads[0] (guarded: `fill` where the guard fails)
    Pieces,      // the first read whose guard holds (cat)
    MaskedFill,  // reads {x, mask}: mask ? fill : x
    Keep,        // reads[0] where `keep` holds, else `fill` (tril/triu)
  };
  Combine combine = Combine::Read;
  std::vector<MovementRead> reads;
  Guard keep;
  Scalar fill;
};

/// Supplies a data-dependent index: the value of input `input` read at `at`,
/// an index into a dim of `extent` elements, as an IndexExpr (a variable with
/// bounds [0, extent)).
using IndexValueFn = std::function<IndexExpr(int input, const Index& at, int64_t extent)>;

/// True when node `n` is a movement op the op table marks as an index map.
bool is_index_map(const Node& n);

/// The reads node `n` makes to compute its output at `out`.
MovementLowering lower_movement(const Graph& g, const Node& n, const Index& out,
                                const IndexValueFn& index_value);

}  // namespace smelt::compiler
