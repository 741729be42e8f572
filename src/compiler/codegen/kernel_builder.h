// Builds the description of one fused kernel (kernel_desc.h) from a
// KernelGroup and the KernelConfig fusion chose for it: producers that are not
// materialized are computed inline from their loads (composition of index ->
// expression functions, values shared by common-subexpression elimination),
// reductions of one domain share the row loop and each get an accumulator from
// src/kernels/reduce_ops.h, pointwise consumers of the reductions run after
// them in the same kernel, and a persistent kernel keeps values that several
// loops over a row need in row buffers. The config is applied as given.
#pragma once
#include <string>
#include <vector>

#include "compiler/codegen/kernel_desc.h"
#include "compiler/fusion/schedule.h"

namespace smelt::compiler {

KernelDesc build_kernel(const Graph& g, const std::vector<bool>& materialized,
                        const KernelGroup& group, const KernelConfig& config,
                        const std::string& name);

}  // namespace smelt::compiler
