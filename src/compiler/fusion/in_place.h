// In-place buffer reuse (Inductor's "inplace" reuse of a dead input's buffer):
// a pointwise kernel writes a result into the memory of a buffer it reads
// when nothing reads that buffer afterwards, so that the two never take memory
// at the same time (a GELU after a GEMM: one activation's memory instead of
// two). Decided after fusion, before code generation: the result's pointer
// is then declared from the read argument's (codegen/kernel_desc.h's
// KernelArg::memory_of), and the memory plan (runtime/executor.h) gives the
// result the read buffer's memory.
#pragma once
#include "compiler/fusion/schedule.h"

namespace smelt::compiler {

/// Fills Step::in_place of the pointwise kernel steps of `s`: a written buffer
/// takes the memory of a read one when
/// - both are intermediates (node outputs) that are neither graph results nor
///   written back into an input, with one element count and one dtype (the
///   C++ compiler may reorder accesses through pointers of different types,
///   which strict aliasing says never overlap);
/// - no later step reads or writes the read one;
/// - the kernel reads it only where it writes the result: every node the
///   kernel computes is elementwise (an op of OpKind::Pointwise, not an index
///   map) over the kernel's shape, and every read of the buffer, and of a
///   value computed in the kernel, is the whole buffer in contiguous order,
///   so each element is read by the thread that writes the same element,
///   before it writes it.
/// The result is the kernel's last store (a horizontal kernel's others, and
/// the loads they need, come before it). A buffer gives its memory to one
/// result at most. Chains follow: a result written in place can give that
/// memory on to a later kernel's result.
void plan_in_place_writes(const Graph& g, Schedule& s);

}  // namespace smelt::compiler
