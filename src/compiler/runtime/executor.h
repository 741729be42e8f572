// The launch plan of one compiled graph and the code that runs it, through the
// backend of the graph's device: buffer pointers for inputs, parameters,
// constants and intermediates (intermediates share one arena from the
// backend's allocator; a buffer's memory is reused once its last reader has
// run), then each step in order — generated kernels launched from the plan's
// launch records, GEMMs with their fused epilogues, eager fallbacks — then one
// check of the kernels' error flags, then the write-back of mutated inputs.
//
// The launch records (kernel, argument slots, config) are built once per
// graph: a CUDA graph can record them as they are.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "compiler/fusion/schedule.h"

namespace smelt::compiler {

/// Where each intermediate buffer lives in the arena (bytes), -1 when the
/// buffer is allocated per call (graph outputs, write-back sources).
struct MemoryPlan {
  std::vector<int64_t> offset;
  int64_t arena_bytes = 0;
  int reused = 0;  // buffers placed in memory freed by an earlier one
  /// Per buffer: the input, parameter or constant whose memory it is written
  /// into (-1: none). A multi-tensor step (an optimizer's) updates a tensor in
  /// place when the tensor's old value is not read after it and the result is
  /// written back into it anyway: the write-back then has nothing to copy.
  std::vector<int> in_place;
  std::string str(const Graph& g) const;
};
MemoryPlan plan_memory(const Graph& g, const Schedule& s);

/// Where one kernel argument comes from at run time.
struct ArgSlot {
  enum class Kind { Buffer, ErrorFlag };
  Kind kind = Kind::Buffer;
  int index = 0;  // buffer id, or error flag index
};

/// One kernel launch of the plan.
struct LaunchRecord {
  int step = -1;  // index into the schedule's steps
  backend::KernelHandle kernel;
  std::vector<ArgSlot> args;  // in the kernel's order: reads, writes, then its error flag
  backend::LaunchConfig config;
  int error_flag = -1;  // the flag this kernel may set (division by zero), or -1
};

class CompiledGraph {
 public:
  /// `module` holds the generated kernels (null when the schedule has none);
  /// `keep_arena`: reuse one arena across calls (mode "reduce-overhead").
  CompiledGraph(Graph g, Schedule s, std::shared_ptr<backend::Module> module, bool keep_arena);

  /// Runs the plan on `args` (the function's tensors) and `params` (the
  /// module's parameters and buffers, in the order they were bound).
  std::vector<Tensor> run(const std::vector<Tensor>& args, const std::vector<Tensor>& params);

  /// The launch plan, for SMELT_LOGS=output_code.
  std::string plan_str() const;
  /// The kernel launches, in order (one per Kernel step).
  const std::vector<LaunchRecord>& launches() const { return launches_; }
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
  Device device_;
  std::shared_ptr<backend::Module> module_;
  std::vector<LaunchRecord> launches_;
  std::vector<int> launch_of_step_;  // per step: index into launches_, or -1
  int error_flags_ = 0;              // error flags per run (after the arena's buffers)
  int64_t error_offset_ = 0;         // their byte offset in the arena
  size_t max_args_ = 0;
  bool keep_arena_;
  std::mutex arena_mutex_;
  std::shared_ptr<Storage> arena_;
};

}  // namespace smelt::compiler
