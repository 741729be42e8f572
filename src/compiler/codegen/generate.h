// The code-generation stage: every kernel step of a schedule is built into a
// KernelDesc (from its group and the KernelConfig fusion chose) and printed
// once in the target's dialect.
#pragma once
#include "compiler/codegen/printer.h"
#include "compiler/fusion/schedule.h"

namespace smelt::compiler {

/// Fills Step::source and Step::error_ops of every kernel step of `s`.
void generate_kernels(const Graph& g, Schedule& s, const Dialect& dialect);

/// Fills Step::source and Step::error_ops of kernel step `st` (of `s`, whose
/// materialized buffers it reads), from its group and config, and puts
/// Step::reads and Step::writes in the kernel's argument order.
void generate_kernel(const Graph& g, const Schedule& s, Step& st, const Dialect& dialect);

/// The description of one kernel step (for tests and SMELT_LOGS).
KernelDesc describe_kernel(const Graph& g, const Schedule& s, const Step& st);

}  // namespace smelt::compiler
