// The launch plan of one compiled graph and the code that runs it, through the
// backend of the graph's device: buffer pointers for inputs, parameters,
// constants and intermediates (intermediates share one arena from the
// backend's allocator, a buffer's memory reused once its last reader has run;
// large ones get memory of their own, freed after their last reader, where
// that lowers the run's peak, as in a training step: MemoryPlan::own), then
// each step in order — generated kernels launched from the
// plan's launch records, GEMMs with their fused epilogues, eager fallbacks — then one check of the
// kernels' error flags, then the write-back of mutated inputs.
//
// The launch records (kernel, argument slots, config) are built once per
// graph. Mode "reduce-overhead" keeps the arena across calls and, on CUDA,
// records the steps into CUDA graphs that later calls replay (replay.h).
#pragma once
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "compiler/fusion/schedule.h"

namespace smelt::compiler {

/// Where each intermediate buffer lives in the arena (bytes), -1 when the
/// buffer is allocated per call (graph outputs, write-back sources) or has
/// memory of its own for part of the run (`own`).
struct MemoryPlan {
  std::vector<int64_t> offset;
  int64_t arena_bytes = 0;
  int reused = 0;  // buffers sharing bytes with a (larger) one alive at other steps
  /// Per buffer: an intermediate with memory of its own, allocated when its
  /// first writer runs and freed after its last reader (plan_memory's
  /// `release_early`): the arena lives for the whole run, so an activation in
  /// it would still take memory while a training step's backward allocates
  /// the gradients; one of its own is gone by then, as in eager.
  std::vector<bool> own;
  /// Per step: the buffers of their own whose last use it is (freed after it).
  std::vector<std::vector<int>> release_after;
  /// Per step: the arguments (input indices) it is the last to read; a run
  /// that owns its arguments (CompiledGraph::run_consuming) drops them after it.
  std::vector<std::vector<int>> inputs_done_after;
  /// Bytes a run allocates at its highest point by the plan's count (the
  /// arena, buffers of their own alive, results allocated so far; arguments
  /// dropped early not counted), and the same with one arena for every
  /// intermediate (the plan without `release_early`).
  int64_t peak_bytes = 0;
  int64_t peak_bytes_one_arena = 0;
  /// Per buffer: the input, parameter, constant or intermediate whose memory
  /// it is written into (-1: none). A multi-tensor step (an optimizer's)
  /// updates a tensor in place when the tensor's old value is not read after
  /// it and the result is written back into it anyway: the write-back then
  /// has nothing to copy. A pointwise kernel writes a result into the memory
  /// of an intermediate it reads last (Step::in_place; the intermediate then
  /// lives until the result's last use).
  std::vector<int> in_place;
  std::string str(const Graph& g) const;
};
/// The memory plan of a graph's run: intermediates share an arena, a buffer
/// reusing memory whose last reader has run. `release_early` (a run with a
/// fresh arena each call; not mode reduce-overhead, whose arena and CUDA
/// graphs keep fixed addresses): intermediates of at least kOwnMemoryBytes
/// get memory of their own instead (MemoryPlan::own) when that lowers the
/// run's peak by a tenth or more (a training step: the backward's gradients
/// are allocated while the forward's activations die); small ones stay in
/// the arena (one allocation for many).
MemoryPlan plan_memory(const Graph& g, const Schedule& s, bool release_early = false);
constexpr int64_t kOwnMemoryBytes = 64 * 1024;

/// A tensor over `data` (memory of `device`, not owned) with these sizes and
/// strides (contiguous when `strides` is empty).
Tensor blob(void* data, const Shape& sizes, DType dtype, const Shape& strides, Device device);

/// Where one kernel argument comes from at run time.
struct ArgSlot {
  /// A buffer; the kernel's flag in the run's arena (read after the run); or
  /// its deferred flag (LaunchRecord::deferred_flag, raised by the backend at
  /// its next synchronization).
  enum class Kind { Buffer, ErrorFlag, DeferredFlag };
  Kind kind = Kind::Buffer;
  int index = 0;  // buffer id, or error flag index
};

/// One kernel launch of the plan.
struct LaunchRecord {
  int step = -1;  // index into the schedule's steps
  backend::KernelHandle kernel;
  std::vector<ArgSlot> args;  // in the kernel's order: reads, writes, then its error flag
  backend::LaunchConfig config;
  int error_flag = -1;           // the arena flag this kernel may set (division by zero), or -1
  int* deferred_flag = nullptr;  // or the backend's deferred flag for it (CUDA)
};

/// Where the buffers of one run live: a pointer per buffer, the memory the
/// run allocated for buffers of their own (results, write-back sources), the
/// arena of intermediates and, in it, the kernels' error flags.
struct RunBuffers {
  std::vector<void*> ptr;
  /// Per buffer: the contents of a parameter or constant no step writes (its
  /// storage's serial and version at bind time; a GEMM's backend may keep a
  /// prepared copy of it), unknown for every other buffer.
  std::vector<backend::OperandIdentity> identity;
  std::vector<Tensor> owned;
  std::shared_ptr<Storage> arena;
  char* flags = nullptr;  // CompiledGraph::error_flags() ints, or null when none
};

class GraphReplays;

/// What the CUDA graphs of mode "reduce-overhead" did for one compiled graph
/// (replay.h).
struct CaptureStats {
  int captures = 0;  // CUDA graphs recorded
  int replays = 0;   // calls that replayed one
  int uncaptured_runs =
      0;  // calls that ran step by step (the first, and any that could not replay)
  /// Device memory the recordings keep: static inputs and outputs, the
  /// intermediates' arena, and the memory the captured work allocated.
  int64_t static_bytes = 0;
  /// Why calls run step by step instead of replaying ("" while they replay).
  std::string reason;
  /// Wall time of the latest replay (ms), measured when profiling (SMELT_LOGS=perf).
  double last_replay_ms = 0;
  bool last_call_replayed = false;
};

class CompiledGraph {
 public:
  /// `module` holds the generated kernels (null when the schedule has none);
  /// `reduce_overhead` (mode "reduce-overhead"): one arena kept across calls
  /// and, on a device that can capture (CUDA), the calls replayed as a CUDA
  /// graph (replay.h). `release_early`: plan_memory's, unless reduce_overhead
  /// (smelt::compile asks for it on every device; the autotuner's walk does
  /// not).
  CompiledGraph(Graph g, Schedule s, std::shared_ptr<backend::Module> module, bool reduce_overhead,
                bool release_early = true);
  ~CompiledGraph();
  CompiledGraph(const CompiledGraph&) = delete;
  CompiledGraph& operator=(const CompiledGraph&) = delete;

  /// Runs the plan on `args` (the function's tensors) and `params` (the
  /// module's parameters and buffers, in the order they were bound).
  std::vector<Tensor> run(const std::vector<Tensor>& args, const std::vector<Tensor>& params);
  /// run() on arguments the caller gives up: each argument is dropped after
  /// the last step that reads it (MemoryPlan::inputs_done_after), so that its
  /// memory is freed there when nothing else holds it (a compiled backward's
  /// saved activations, as eager's backward frees each after its node ran).
  /// Arguments a result or a write-back needs are kept to the end. Mode
  /// reduce-overhead runs as run().
  std::vector<Tensor> run_consuming(std::vector<Tensor> args, const std::vector<Tensor>& params);

  /// The launch plan, for SMELT_LOGS=output_code.
  std::string plan_str() const;
  /// The kernel launches, in order (one per Kernel step).
  const std::vector<LaunchRecord>& launches() const { return launches_; }
  const Graph& graph() const { return g_; }
  const Schedule& schedule() const { return s_; }
  const MemoryPlan& memory() const { return mem_; }
  Device device() const { return device_; }
  /// The CUDA graphs of mode "reduce-overhead" (all zero otherwise).
  CaptureStats capture_stats() const;

  // ---- the pieces of a run (run() puts them together; so do the CUDA-graph
  // replays and the autotuner, which run the steps on buffers of their own) ----

  /// Error flags a run needs (one int per kernel that may fail), placed after
  /// the intermediates in the arena.
  int error_flags() const { return error_flags_; }
  /// Bytes of a run's arena: intermediates, then the error flags.
  int64_t arena_bytes() const;
  /// A new arena for a run (OutOfMemoryError naming the compiled function).
  std::shared_ptr<Storage> allocate_arena() const;
  /// The buffers of a run: inputs at `args`' data, parameters and constants
  /// in their storage, intermediates in `arena` (null when arena_bytes() is
  /// 0); buffers of their own are bound by allocate().
  RunBuffers bind(const std::vector<Tensor>& args, const std::vector<Tensor>& params,
                  std::shared_ptr<Storage> arena) const;
  /// Gives buffer `id` memory of its own when it needs it (a result or a
  /// write-back source, materialized) and has none yet.
  void allocate(RunBuffers& rb, int id) const;
  /// True when buffer `id` gets memory of its own (allocate()).
  bool owns_memory(int id) const;
  /// Zeroes the error flags of a run (in stream order).
  void clear_errors(const RunBuffers& rb, backend::Stream stream) const;
  /// Runs step `i` on `rb` in `stream`: a generated kernel, a GEMM, or an
  /// eager fallback (which queues its work on the thread's current stream:
  /// the caller makes `stream` current where it is not). Checks no error flag.
  void run_step(size_t i, const RunBuffers& rb, backend::Stream stream) const;
  /// Runs GEMM step `st` (a step of this schedule, or a copy of one with
  /// another gemm_algorithm: the autotuner's candidates) on `rb` in `stream`.
  void run_gemm_step(const Step& st, const RunBuffers& rb, backend::Stream stream) const;
  /// The GEMM algorithms the backend offers GEMM step `st` on `rb`'s
  /// buffers (backend::Backend::gemm_algorithm_count), at most `most`; 0 for
  /// any other step.
  int gemm_algorithm_count(const Step& st, const RunBuffers& rb, int most) const;
  /// Raises the error of the first kernel (in launch order) that set its flag
  /// (reads the flags: a synchronization).
  void check_errors(const RunBuffers& rb, backend::Stream stream) const;
  /// Copies each mutated buffer's final value into the input, parameter or
  /// constant it came from (in stream order).
  void write_back(const RunBuffers& rb, backend::Stream stream) const;
  /// An in-place write, as eager's copy_: the version counter of every tensor
  /// the run wrote back into moves on.
  void bump_versions(const std::vector<Tensor>& args, const std::vector<Tensor>& params) const;
  /// The function's results of a run (views of its buffers, of `args` where a
  /// result is a mutated input).
  std::vector<Tensor> results(const std::vector<Tensor>& args, const std::vector<Tensor>& params,
                              const RunBuffers& rb) const;

  /// Per-step time of the last run (ms), when profiling is on (SMELT_LOGS=perf):
  /// between timing events on a device that has them (the GPU's own time),
  /// else the host's wall time up to the step's completion.
  std::vector<double> last_step_ms;
  bool profile = false;

 private:
  /// A run step by step (no CUDA graph) in `stream`, intermediates in `arena`
  /// (null: a fresh one).
  /// `release_inputs`: args are the run's own (run_consuming), dropped as
  /// the plan says.
  std::vector<Tensor> run_steps(std::vector<Tensor> args, const std::vector<Tensor>& params,
                                std::shared_ptr<Storage> arena, backend::Stream stream,
                                bool release_inputs = false);
  /// Mode reduce-overhead on CUDA: work of this call waits for the previous
  /// call's, which may have run on another stream (they share the arena).
  void order_after_previous(backend::Stream stream);
  void mark_done(backend::Stream stream);

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
  bool keep_arena_;
  std::mutex arena_mutex_;
  std::shared_ptr<Storage> arena_;
  backend::Event previous_done_;  // recorded where the previous call's work ended
  backend::Stream previous_stream_;
  std::unique_ptr<GraphReplays> replays_;
};

}  // namespace smelt::compiler
