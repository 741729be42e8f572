// Generates the source of one fused kernel (a KernelGroup) in a Dialect:
// producers that are not materialized are computed inline from their loads
// (composition of index -> expression functions), reductions of one domain
// share the outer loop and each get an inner loop with an accumulator from
// src/kernels/reduce_ops.h, and pointwise consumers of the reductions run
// after them in the same kernel.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/codegen/printer.h"
#include "compiler/fusion/schedule.h"

namespace smelt::compiler {

/// Thrown when a group cannot be generated as one kernel; the message is the
/// reason, which the scheduler logs as a no-fuse decision.
struct NotFusable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct KernelSource {
  std::string source;      // the kernel function
  std::vector<int> reads;  // argument order: reads, then writes
  std::vector<int> writes;
  std::vector<std::string> ops;  // op names computed (for the kernel name)
  /// A reduction whose row fits: values several loops need are kept in a row buffer.
  bool persistent = false;
  /// Ops that check a runtime error (integer division by zero), "" if none:
  /// the kernel then takes one more argument, an int flag it sets to nonzero.
  std::string error_ops;
};

/// Elements below which a kernel loop runs on one thread.
inline constexpr int64_t kJitParallelGrain = 32768;
/// Longest reduced row a reduction kernel keeps resident (persistent); longer
/// rows are looped and recompute what later loops need.
inline constexpr int64_t kPersistentRow = 8192;
/// With fewer rows than this, each long row is split across threads instead.
inline constexpr int64_t kSplitRowsBelow = 8;

KernelSource generate_kernel(const Graph& g, const std::vector<bool>& materialized,
                             const KernelGroup& group, const std::string& name,
                             const Dialect& dialect);

}  // namespace smelt::compiler
