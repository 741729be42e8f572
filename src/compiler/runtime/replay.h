// CUDA graphs for mode "reduce-overhead" (PyTorch's cudagraph trees, for one
// compiled graph): the steps of a call — generated kernels, cuBLAS calls,
// eager fallbacks — are recorded once into a CUDA graph over static buffers,
// and later calls replay it with one launch.
//
//  * The first call runs step by step (a warm-up: it loads the kernels into
//    the device's context and makes the libraries' handles, which a recording
//    cannot do); the second records and replays.
//  * Static inputs: each argument is copied (device to device, in stream
//    order) into the recording's own input buffer before a replay, unless it
//    is that buffer. Parameters and constants are read where they are (the
//    guards keep them the same tensors in the same memory). A mutated
//    argument's final value is copied back into it after the replay.
//  * Static outputs: the results are views of the recording's output
//    buffers, returned without a copy, as cudagraph trees return them. A
//    replay overwrites them, so a recording is replayed only when none of
//    its outputs is referenced outside smelt any more (PyTorch raises when
//    an overwritten output is read; here the overwrite never happens): up to
//    kMaxRecordings recordings, each with its own outputs, take turns — in a
//    loop `y = f(x)` the previous y is alive during the call, the one before
//    is not — and a call finding all of them in use runs step by step into
//    fresh memory. Results stay valid as long as the program holds them.
//  * What cannot be recorded makes every call run step by step, with the
//    reason in CaptureStats::reason (logged under SMELT_LOGS=graph_breaks and
//    perf): kernels whose error flag (an integer division by zero, an index
//    out of range) the host reads after each call, an eager fallback that
//    waits for the device or copies from host memory (Adam's step counts
//    read with item(), say), anything the device refuses to record.
//  * Memory: the recordings keep their static inputs and outputs, the graph's
//    arena of intermediates (one for all of them), and the memory the
//    recorded work allocated (private to the recording, see
//    backend::CapturedWork) until the compiled graph is destroyed.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/runtime/executor.h"

namespace smelt::compiler {

/// Most recordings one compiled graph keeps (each with its own static inputs
/// and outputs; they take turns so that no replay overwrites a result in use).
inline constexpr size_t kMaxRecordings = 2;

/// Why `g` can never be recorded, whatever the call ("" when it can be tried):
/// its kernels' error flags are read on the host after each call.
std::string capture_blocker(const CompiledGraph& g);

class GraphReplays {
 public:
  explicit GraphReplays(const CompiledGraph& g);
  ~GraphReplays();
  GraphReplays(const GraphReplays&) = delete;
  GraphReplays& operator=(const GraphReplays&) = delete;

  /// Runs the call as a replay (recording it first when needed) in `stream`,
  /// intermediates in `arena` (the graph's kept arena): the results, or
  /// nullopt when this call runs step by step (the warm-up, a graph that
  /// cannot be recorded, every recording's outputs in use).
  std::optional<std::vector<Tensor>> run(const std::vector<Tensor>& args,
                                         const std::vector<Tensor>& params,
                                         const std::shared_ptr<Storage>& arena,
                                         backend::Stream stream);
  CaptureStats stats() const;

 private:
  struct Recording;
  /// A recording of the steps over new static buffers, or null (reason_ set)
  /// when they cannot be recorded.
  Recording* record(const std::vector<Tensor>& args, const std::vector<Tensor>& params,
                    const std::shared_ptr<Storage>& arena);
  std::vector<Tensor> replay(Recording& r, const std::vector<Tensor>& args,
                             const std::vector<Tensor>& params, backend::Stream stream);
  /// Logs (SMELT_LOGS=graph_breaks, perf) why calls run step by step.
  void note(const std::string& why, bool for_good);

  const CompiledGraph& g_;
  std::vector<std::unique_ptr<Recording>> recordings_;
  int calls_ = 0;
  std::string reason_;       // set for good: the graph cannot be recorded
  std::string busy_logged_;  // the last "all in use" reason logged
  int64_t arena_bytes_ = 0;
  CaptureStats stats_;
};

}  // namespace smelt::compiler
