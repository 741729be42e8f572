// The fusion scheduler: decides which buffers are materialized and groups the
// graph's nodes into kernels. Policy (which legal kernel a node joins) is
// separate from legality (fusion/legality.h, answered without generating
// code); every decision is logged with its reason (SMELT_LOGS=fusion). A node
// may join any earlier kernel that runs after everything it reads.
//
// Patterns: vertical fusion of pointwise chains (producers inlined into their
// consumers); reductions of one domain share a kernel with the pointwise
// producers they read and the pointwise consumers after them (softmax,
// layer_norm, var_mean -> one kernel); scans (cumsum) likewise, their
// pointwise consumers running at each step of the scan (cumsum(exp(x)) / n ->
// one kernel); GEMM + epilogue (bias, activation,
// residual add) as one library call with post-ops; horizontal fusion of
// independent pointwise outputs of one shape into one kernel.
#pragma once
#include "compiler/fusion/schedule.h"

namespace smelt::compiler {

struct FusionOptions {
  bool fuse = true;           // false: one kernel per node (debugging)
  bool gemm_epilogue = true;  // fold bias/activation/residual into the GEMM call
  /// float16/bfloat16 results of ops inside fused kernels are rounded to
  /// their dtype as eager stores them (CompileOptions::round_intermediates);
  /// GEMM epilogues fold into float16/bfloat16 GEMMs only when this is off.
  bool round_intermediates = true;
};

/// Groups the graph into steps; kernels are named with `target`'s prefix and
/// get their KernelConfig. No code is generated here.
Schedule schedule(const Graph& g, const FusionOptions& opts, Target target = Target::Cpp);

}  // namespace smelt::compiler
