// Fusion legality: whether a node can join a kernel group, answered from the
// graph and symbolic indices alone — no code is generated — with the reason
// (XLA's FusionDecision). The scheduler's policy (fusion/scheduler.cpp) picks
// among the legal candidates; SMELT_LOGS=fusion prints every reason.
//
// A group computes its stores and reductions from memory reads, inlining every
// pointwise producer that is not materialized. Rules:
// - a pointwise group: every store iterates the group's shape;
// - a reduction group: every reduction has the group's domain and reduced
//   dims; stores iterate the domain or one element per row;
// - a reduction's result is read only after it completes and only at the row
//   it was reduced for (checked symbolically on the producer index);
// - a scan group: every scan has the group's domain and scanned dim, stores
//   iterate the domain, and a scan's result is read only at the position it
//   has just reached (the same row and step), by stores and later scans.
#pragma once
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "compiler/fusion/schedule.h"
#include "compiler/lower/loop_ir.h"

namespace smelt::compiler {

struct FusionDecision {
  bool fuse = false;
  std::string reason;
  static FusionDecision yes(std::string why) { return {true, std::move(why)}; }
  static FusionDecision no(std::string why) { return {false, std::move(why)}; }
  explicit operator bool() const { return fuse; }
};

/// True when `buf` is computed inside a kernel of `group` (a pointwise producer
/// that is not materialized or that the group stores, or one of its
/// reductions) rather than read from memory.
bool computed_in(const Graph& g, const std::vector<bool>& materialized, const KernelGroup& group,
                 int buf);

/// The symbolic index at which a member node of `group` is computed: the
/// domain index of a reduction group (row position "o", reduced position "r"),
/// the row position for stores of one element per row, else the flat position
/// "i" over the group's shape.
Index member_index(const Graph& g, const KernelGroup& group, int node);

/// Whether `node` can join `group` (checked against the group as it is).
FusionDecision can_join(const Graph& g, const std::vector<bool>& materialized,
                        const KernelGroup& group, int node);

/// What a (legal) group reads from memory and computes.
struct GroupFootprint {
  std::vector<int> reads;        // materialized buffers read, sorted
  std::vector<std::string> ops;  // op names computed, sorted ("convert" for to_dtype)
  /// Per store (in group.stores order): whether it reads another store of the
  /// group (vertical) rather than being independent of them (horizontal).
  std::vector<bool> reads_other_store;
  /// Per reduction (in group.reductions order): its element is computed by an
  /// op (not a plain load or conversion).
  std::vector<bool> computed_element;
};
GroupFootprint footprint(const Graph& g, const std::vector<bool>& materialized,
                         const KernelGroup& group);

/// A GEMM's cast prologue: when matmul node `n` has a float32 result and both
/// its operands are to_dtype conversions to float32 of float16 or bfloat16
/// values (one dtype for both), the windows of those values (window_through)
/// that one half-precision GEMM with a float32 result reads instead. Products
/// of float16 / bfloat16 values are exact in float32, so only the summation
/// order differs from the float32 GEMM of the converted operands. nullopt
/// otherwise (a view the convert's output cannot be traced through included).
std::optional<std::array<Operand, 2>> gemm_cast_prologue(const Graph& g, const Node& n);

}  // namespace smelt::compiler
