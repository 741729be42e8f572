// CUDA-graph recordings and replays of a compiled graph (replay.h).
#include "compiler/runtime/replay.h"

#include <fmt/format.h>

#include <chrono>

#include "compiler/logs.h"
#include "core/tensor_impl.h"

namespace smelt::compiler {

/// One recording: the CUDA graph and the buffers baked into it.
struct GraphReplays::Recording {
  std::unique_ptr<backend::CapturedWork> work;
  RunBuffers buffers;  // static: inputs (below), outputs (buffers.owned), the shared arena
  struct StaticInput {
    int buf = -1;  // the graph's input buffer
    int arg = -1;  // the argument it holds
    size_t bytes = 0;
  };
  std::vector<StaticInput> inputs;
  std::vector<Tensor> input_memory;  // per argument (undefined where none)
  int64_t input_bytes = 0, output_bytes = 0;

  /// True when a result of an earlier replay is still referenced outside
  /// smelt (a tensor the program holds, a .grad): a replay would overwrite it.
  bool in_use() const {
    for (const Tensor& t : buffers.owned)
      if (t.defined() && t.storage().use_count() > 1) return true;
    return false;
  }
};

std::string capture_blocker(const CompiledGraph& g) {
  if (g.error_flags() == 0) return "";
  std::string kernels;
  for (const Step& st : g.schedule().steps)
    if (st.kind == Step::Kind::Kernel && !st.error_ops.empty())
      kernels += fmt::format("{}{} ({})", kernels.empty() ? "" : ", ", st.name, st.error_ops);
  return fmt::format(
      "kernel(s) {} may fail a runtime check (an integer division by zero, an index out of "
      "range), and their error flags are read on the host after each call",
      kernels);
}

GraphReplays::GraphReplays(const CompiledGraph& g) : g_(g) {
  arena_bytes_ = g.arena_bytes();
  if (std::string why = capture_blocker(g); !why.empty()) reason_ = why;
}

GraphReplays::~GraphReplays() {
  if (recordings_.empty()) return;
  // A replay may still run: its memory goes back to the allocator after it.
  try {
    backend::backend(g_.device()).synchronize_device(g_.device());
  } catch (const Error&) {  // an error of earlier work: not this destructor's to raise
  }
}

CaptureStats GraphReplays::stats() const {
  CaptureStats s = stats_;
  s.reason = reason_;
  s.static_bytes = recordings_.empty() ? 0 : arena_bytes_;
  for (const auto& r : recordings_)
    s.static_bytes += r->input_bytes + r->output_bytes + r->work->private_bytes();
  return s;
}

void GraphReplays::note(const std::string& why, bool for_good) {
  const std::string what =
      fmt::format("reduce-overhead: {} step by step, without a CUDA graph: {}",
                  for_good ? "the calls of this graph run" : "this call runs", why);
  for (const char* artifact : {"graph_breaks", "perf"})
    if (log_enabled(artifact)) log_artifact(artifact, what);
}

std::optional<std::vector<Tensor>> GraphReplays::run(const std::vector<Tensor>& args,
                                                     const std::vector<Tensor>& params,
                                                     const std::shared_ptr<Storage>& arena,
                                                     backend::Stream stream) {
  stats_.last_call_replayed = false;
  if (++calls_ == 1 || !reason_.empty()) {  // the warm-up, or a graph that cannot be recorded
    if (calls_ == 2 && !reason_.empty()) note(reason_, true);
    ++stats_.uncaptured_runs;
    return std::nullopt;
  }
  Recording* free = nullptr;
  for (auto& r : recordings_)
    if (!r->in_use()) {
      free = r.get();
      break;
    }
  if (free == nullptr) {
    if (recordings_.size() >= kMaxRecordings) {
      const std::string why = fmt::format(
          "the results of all {} recordings are still in use (a replay would overwrite them); "
          "drop or clone() results kept across calls",
          recordings_.size());
      if (busy_logged_ != why) note(why, false);
      busy_logged_ = why;
      ++stats_.uncaptured_runs;
      return std::nullopt;
    }
    free = record(args, params, arena);
    if (free == nullptr) {
      note(reason_, true);
      ++stats_.uncaptured_runs;
      return std::nullopt;
    }
  }
  return replay(*free, args, params, stream);
}

GraphReplays::Recording* GraphReplays::record(const std::vector<Tensor>& args,
                                              const std::vector<Tensor>& params,
                                              const std::shared_ptr<Storage>& arena) {
  const Device device = g_.device();
  backend::Backend& be = backend::backend(device);
  const Graph& graph = g_.graph();
  auto rec = std::make_unique<Recording>();
  // Static inputs: a buffer per argument the graph reads, laid out as the
  // argument (its data pointer is the buffer's start).
  std::vector<Tensor> static_args = args;
  rec->input_memory.resize(args.size());
  for (const Buffer& b : graph.buffers) {
    if (b.kind != BufferKind::Input) continue;
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(1, b.extent)) * itemsize(b.dtype);
    Tensor mem = detail::make_empty({static_cast<int64_t>(bytes)}, DType::UInt8, device,
                                    "smelt::compile (a static input of a CUDA graph)");
    rec->inputs.push_back({b.id, b.input_index, bytes});
    rec->input_bytes += static_cast<int64_t>(bytes);
    static_args[static_cast<size_t>(b.input_index)] = mem;
    rec->input_memory[static_cast<size_t>(b.input_index)] = mem;
  }
  rec->buffers = g_.bind(static_args, params, arena);
  // Static outputs (and write-back sources): every buffer of its own, now.
  for (const Buffer& b : graph.buffers) {
    g_.allocate(rec->buffers, b.id);
    if (rec->buffers.owned[b.id].defined())
      rec->output_bytes +=
          rec->buffers.owned[b.id].numel() * rec->buffers.owned[b.id].element_size();
  }
  std::unique_ptr<backend::Capture> cap = be.begin_capture(device);
  if (!cap) {
    reason_ = fmt::format("{} cannot record work as a graph", device.str());
    return nullptr;
  }
  const auto& steps = g_.schedule().steps;
  size_t at = 0;
  try {
    for (; at < steps.size(); ++at) g_.run_step(at, rec->buffers, cap->stream());
    g_.write_back(rec->buffers, cap->stream());
    rec->work = cap->finish();
  } catch (const Error& e) {
    cap.reset();  // discards the recording, restores the current stream
    reason_ = at < steps.size()
                  ? fmt::format("step {} ({}) cannot be recorded: {}", at, steps[at].name, e.what())
                  : fmt::format("the device refused the recording: {}", e.what());
    return nullptr;
  }
  ++stats_.captures;
  if (log_enabled("perf"))
    log_artifact(
        "perf",
        fmt::format("reduce-overhead: recorded CUDA graph {} of {} ({} operations): static "
                    "inputs {}, static outputs {}, intermediates (arena, shared) {}, memory the "
                    "recorded work allocated {}",
                    recordings_.size() + 1, steps.empty() ? "an empty graph" : steps[0].name,
                    rec->work->nodes(), detail::bytes_str(rec->input_bytes),
                    detail::bytes_str(rec->output_bytes), detail::bytes_str(arena_bytes_),
                    detail::bytes_str(rec->work->private_bytes())));
  recordings_.push_back(std::move(rec));
  return recordings_.back().get();
}

std::vector<Tensor> GraphReplays::replay(Recording& r, const std::vector<Tensor>& args,
                                         const std::vector<Tensor>& params,
                                         backend::Stream stream) {
  backend::Backend& be = backend::backend(g_.device());
  const Graph& graph = g_.graph();
  for (const auto& in : r.inputs) {
    const void* src = args.at(static_cast<size_t>(in.arg)).data_ptr();
    void* dst = r.buffers.ptr[static_cast<size_t>(in.buf)];
    if (src != dst) be.copy_on_device(dst, src, in.bytes, stream);
  }
  const auto t0 = std::chrono::steady_clock::now();
  r.work->replay(stream);
  // A mutated argument: its final value, written back into the static input
  // by the graph, goes into the argument.
  for (auto& [dst, src] : graph.mutations) {
    const Buffer& b = graph.buffers[dst];
    if (b.kind != BufferKind::Input) continue;
    void* user = args.at(static_cast<size_t>(b.input_index)).data_ptr();
    if (user != r.buffers.ptr[dst])
      be.copy_on_device(user, r.buffers.ptr[dst], b.extent * itemsize(b.dtype), stream);
  }
  if (g_.profile) {
    be.synchronize(stream);
    stats_.last_replay_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  ++stats_.replays;
  stats_.last_call_replayed = true;
  g_.bump_versions(args, params);
  return g_.results(args, params, r.buffers);
}

}  // namespace smelt::compiler
