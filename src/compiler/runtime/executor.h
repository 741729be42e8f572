// The launch plan of one compiled graph and the code that runs it: buffer
// pointers for inputs, parameters, constants and intermediates (intermediates
// share one arena; a buffer's memory is reused once its last reader has run),
// then each step in order — generated kernels, GEMM calls with their fused
// epilogues, eager fallbacks — then the write-back of mutated inputs.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compiler/fusion/schedule.h"
#include "compiler/runtime/jit.h"

namespace smelt::compiler {

/// Where each intermediate buffer lives in the arena (bytes), -1 when the
/// buffer is allocated per call (graph outputs, write-back sources).
struct MemoryPlan {
  std::vector<int64_t> offset;
  int64_t arena_bytes = 0;
  int reused = 0;  // buffers placed in memory freed by an earlier one
  std::string str(const Graph& g) const;
};
MemoryPlan plan_memory(const Graph& g, const Schedule& s);

class CompiledGraph {
 public:
  /// `keep_arena`: reuse one arena across calls (mode "reduce-overhead").
  CompiledGraph(Graph g, Schedule s, std::shared_ptr<KernelLibrary> lib, bool keep_arena);

  /// Runs the plan on `args` (the function's tensors) and `params` (the
  /// module's parameters and buffers, in the order they were bound).
  std::vector<Tensor> run(const std::vector<Tensor>& args, const std::vector<Tensor>& params);

  /// The launch plan, for SMELT_LOGS=output_code.
  std::string plan_str() const;
  const Graph& graph() const { return g_; }
  const Schedule& schedule() const { return s_; }
  const MemoryPlan& memory() const { return mem_; }

  /// Per-step wall time of the last run (ms), when profiling is on (SMELT_LOGS=perf).
  std::vector<double> last_step_ms;
  bool profile = false;

 private:
  Graph g_;
  Schedule s_;
  MemoryPlan mem_;
  std::vector<bool> escaping_;  // per buffer: returned or written back (allocated per call)
  std::shared_ptr<KernelLibrary> lib_;
  std::vector<KernelLibrary::KernelFn> fns_;
  bool keep_arena_;
  std::mutex arena_mutex_;
  std::shared_ptr<Storage> arena_;
};

}  // namespace smelt::compiler
