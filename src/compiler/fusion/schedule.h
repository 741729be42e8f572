// The result of fusion: an ordered list of steps (generated kernels, extern
// library calls, eager fallbacks) and, for each buffer, whether it is
// materialized in memory or only computed inside the kernels that read it.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "compiler/fusion/kernel_config.h"
#include "compiler/graph/graph.h"
#include "compiler/lower/loop_ir.h"

namespace smelt::compiler {

/// One generated kernel: pointwise over `shape`, or a reduction over the
/// domain `shape` reducing `rdims` (reductions of one domain share its loops),
/// or a scan (reduction and scan both set): `reductions` are scans along the
/// one dim in `rdims`, each row walked in index order, every step a result.
struct KernelGroup {
  bool reduction = false;
  bool scan = false;
  Shape shape;
  std::vector<int64_t> rdims;
  std::vector<int> reductions;  // reduction (or scan) nodes, in order
  std::vector<int> stores;      // pointwise node outputs written by this kernel
};

struct Step {
  enum class Kind { Kernel, Extern, Fallback };
  Kind kind = Kind::Kernel;
  std::string name;           // kernel name, e.g. cpp_poi_fused_add_mul_sigmoid_0
  std::string kernel_kind;    // poi, per, red, tem, for, extern, fallback
  KernelGroup group;          // Kernel
  int node = -1;              // Extern / Fallback: the node it runs
  std::vector<int> epilogue;  // Extern: pointwise nodes applied to the GEMM output (tem)
  std::string activation;     // Extern epilogue activation: epilogue_activation_name()
  int bias = -1;              // Extern epilogue: index into node inputs of the bias add, or -1
  int residual =
      -1;  // Extern epilogue: index into the residual add's inputs of the residual, or -1
  /// Extern: the GEMM reads its operands' float16 / bfloat16 sources through
  /// their converts (gemm_cast_prologue, fusion/legality.h) and writes float32.
  bool cast_prologue = false;
  /// Fallback: its one result is written into this buffer instead, viewed
  /// with out_strides (a permutation of the buffer's dims: a copy of the
  /// result's transpose folded into the op, Scheduler::fold_permuted_copies);
  /// -1: into the result's own buffer.
  int out_buffer = -1;
  std::vector<int64_t> out_strides;
  /// Extern: the GEMM algorithm max-autotune chose (backend::Gemm::algorithm);
  /// -1: the library's own choice.
  int gemm_algorithm = -1;
  /// Kernel (pointwise): pairs (read buffer, written buffer) where the
  /// written one takes the read one's memory, the read one being dead after
  /// this step (in-place buffer reuse, fusion/in_place.h); their kernel
  /// arguments may alias.
  std::vector<std::pair<int, int>> in_place;
  std::vector<int> reads;   // buffers read (kernel argument order: reads then writes)
  std::vector<int> writes;  // buffers written
  KernelConfig config;      // Kernel: its layout (chosen in fusion/, printed by codegen/)
  std::string source;       // Kernel: the generated function (filled by codegen)
  std::string error_ops;    // Kernel: ops whose runtime check (op table RuntimeCheck) may fail
};

struct Schedule {
  std::vector<Step> steps;
  std::vector<bool> materialized;      // per buffer
  std::vector<std::string> decisions;  // fusion log: each fuse / no-fuse with its reason

  /// Per buffer (of `buffers` in all): the last step that reads or writes
  /// it, -1 for none.
  std::vector<int> last_uses(size_t buffers) const {
    std::vector<int> last(buffers, -1);
    for (size_t i = 0; i < steps.size(); ++i) {
      for (int b : steps[i].reads) last[b] = static_cast<int>(i);
      for (int b : steps[i].writes) last[b] = static_cast<int>(i);
    }
    return last;
  }
};

}  // namespace smelt::compiler
