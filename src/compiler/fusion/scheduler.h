// The fusion scheduler: decides which buffers are materialized and groups the
// graph's nodes into kernels. Policy (what we would like to fuse) is separate
// from legality (whether the kernel writer can generate the group): the
// scheduler proposes, generate_kernel() either succeeds or returns the reason
// it cannot, and every decision is logged with its reason (SMELT_LOGS=fusion).
//
// Patterns: vertical fusion of pointwise chains (producers inlined into their
// consumers); reductions of one domain share a kernel with the pointwise
// producers they read and the pointwise consumers after them (softmax,
// layer_norm, var_mean -> one kernel); GEMM + epilogue (bias, activation,
// residual add) as one library call with post-ops; horizontal fusion of
// independent pointwise outputs of one shape into one kernel.
#pragma once
#include "compiler/codegen/printer.h"
#include "compiler/fusion/schedule.h"

namespace smelt::compiler {

struct FusionOptions {
  bool fuse = true;           // false: one kernel per node (debugging)
  bool gemm_epilogue = true;  // fold bias/activation/residual into the GEMM call
};

Schedule schedule(const Graph& g, const FusionOptions& opts, const Dialect& dialect);

}  // namespace smelt::compiler
