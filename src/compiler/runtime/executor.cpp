// The launch plan of a compiled graph and the pieces of a run (executor.h):
// binding buffers, running steps, error flags, write-back and results.
#include "compiler/runtime/executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>
#include <map>
#include <optional>

#include "compiler/fusion/legality.h"
#include "compiler/runtime/replay.h"
#include "core/tensor_impl.h"
#include "ops/decompose.h"
#include "ops/op_call.h"
#include "ops/op_table.h"
#include "smelt/ops.h"

namespace smelt::compiler {

namespace {
constexpr int64_t kAlign = 64;
int64_t align_up(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

int64_t buffer_bytes(const Buffer& b) { return std::max<int64_t>(1, b.extent) * itemsize(b.dtype); }

}  // namespace

std::string MemoryPlan::str(const Graph& g) const {
  std::string s =
      fmt::format("arena: {} bytes, {} buffer(s) reuse freed memory\n", arena_bytes, reused);
  for (size_t b = 0; b < offset.size(); ++b)
    if (offset[b] >= 0)
      s += fmt::format("  {} {} x {} at arena+{}\n", g.buffers[b].name(),
                       dtype_name(g.buffers[b].dtype), g.buffers[b].extent, offset[b]);
  for (size_t b = 0; b < in_place.size(); ++b)
    if (in_place[b] >= 0)
      s += fmt::format(fmt::runtime(g.buffers[in_place[b]].kind == BufferKind::Node
                                        ? "  {} written into the memory of {} (its last use)\n"
                                        : "  {} written in place into {}\n"),
                       g.buffers[b].name(), g.buffers[in_place[b]].name());
  for (size_t i = 0; i < release_after.size(); ++i)
    for (int b : release_after[i])
      s += fmt::format("  {} {} x {}: memory of its own, freed after step {}\n",
                       g.buffers[b].name(), dtype_name(g.buffers[b].dtype), g.buffers[b].extent, i);
  s += fmt::format("peak of a run: {} bytes (with one arena for every intermediate: {})\n",
                   peak_bytes, peak_bytes_one_arena);
  return s;
}

namespace {
/// MemoryPlan::in_place for the multi-tensor steps of `s`.
std::vector<int> plan_in_place(const Graph& g, const Schedule& s) {
  std::vector<int> in_place(g.buffers.size(), -1);
  std::vector<int> last_read(g.buffers.size(), -1);
  for (size_t i = 0; i < s.steps.size(); ++i)
    for (int b : s.steps[i].reads) last_read[b] = static_cast<int>(i);
  std::vector<int> written_back(g.buffers.size(), -1);  // source -> destination
  for (auto& [dst, src] : g.mutations) written_back[src] = dst;
  std::vector<bool> taken(g.buffers.size(), false);
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& st = s.steps[i];
    if (st.kind != Step::Kind::Fallback || st.kernel_kind != "for") continue;
    const Node& n = g.nodes[st.node];
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const Operand& in = n.inputs[k];
      const int out = n.outputs[k];
      if (in.is_scalar() || written_back[out] != in.buf || taken[in.buf]) continue;
      const Buffer& b = g.buffers[in.buf];
      if (b.kind == BufferKind::Node || b.extent != g.buffers[out].extent ||
          !is_whole_contiguous(in, b) || last_read[in.buf] > static_cast<int>(i))
        continue;
      in_place[out] = in.buf;
      taken[in.buf] = true;
    }
  }
  // Pointwise kernels' results written into a dead intermediate's memory
  // (Step::in_place), through chains to the buffer that has the memory.
  for (const Step& st : s.steps)
    for (auto [r, w] : st.in_place) in_place[w] = in_place[r] >= 0 ? in_place[r] : r;
  return in_place;
}

/// Per buffer: the last step that reads or writes it (-1: none); for an
/// intermediate whose memory others are written into (`in_place`), the last
/// step that uses any of them.
std::vector<int> last_uses(const Graph& g, const Schedule& s, const std::vector<int>& in_place) {
  std::vector<int> last_use = s.last_uses(g.buffers.size());
  for (size_t b = 0; b < g.buffers.size(); ++b)
    if (in_place[b] >= 0 && g.buffers[in_place[b]].kind == BufferKind::Node)
      last_use[in_place[b]] = std::max(last_use[in_place[b]], last_use[b]);
  return last_use;
}

/// Places the intermediates that neither escape nor have memory of their own
/// in one arena, offline over their lifetimes (from the step that first
/// writes one to the step that uses it last, both included: a kernel's inputs
/// never share memory with its outputs): largest first, each at the lowest
/// offset where it overlaps no placed buffer alive at the same time (the
/// "greedy by size" offset assignment of Pisarchyk and Lee, "Efficient Memory
/// Management for Deep Neural Net Inference", 2020, as TFLite plans its
/// arena). Placing in step order into freed blocks instead left holes that a
/// later, larger buffer could not use: MiniLM's forward took an 88 MB arena
/// for a peak of 38 MB alive.
void place_in_arena(const Graph& g, const Schedule& s, const std::vector<bool>& esc,
                    const std::vector<int>& in_place, MemoryPlan& mp) {
  struct Life {
    int buf;
    int64_t bytes;
    int first, last;
  };
  const std::vector<int> last_use = last_uses(g, s, in_place);
  std::vector<Life> lives;
  std::vector<bool> seen(g.buffers.size(), false);
  for (size_t i = 0; i < s.steps.size(); ++i)
    for (int b : s.steps[i].writes) {
      const Buffer& buf = g.buffers[b];
      if (seen[b] || buf.kind != BufferKind::Node || esc[b] || mp.own[b] || in_place[b] >= 0)
        continue;
      seen[b] = true;
      lives.push_back({b, align_up(buffer_bytes(buf)), static_cast<int>(i), last_use[b]});
    }
  std::stable_sort(lives.begin(), lives.end(), [](const Life& a, const Life& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.first < b.first;
  });
  // Placed buffers by offset: a buffer's lowest free offset is found in one
  // walk that stops at the first gap wide enough, without sorting its
  // neighbours (which took 1 s for 12,000 long-lived buffers; 88 ms now).
  std::vector<std::pair<int64_t, const Life*>> placed;
  const auto together = [](const Life& a, const Life& b) {
    return a.first <= b.last && b.first <= a.last;
  };
  for (const Life& l : lives) {
    int64_t at = 0;
    for (const auto& [off, o] : placed) {
      if (!together(*o, l)) continue;
      if (off >= at + l.bytes) break;  // the gap below this one fits
      at = std::max(at, off + o->bytes);
    }
    mp.offset[l.buf] = at;
    mp.arena_bytes = std::max(mp.arena_bytes, at + l.bytes);
    // Reuse: bytes that a (larger) buffer alive at another time also takes.
    for (const auto& [off, o] : placed) {
      if (off >= at + l.bytes) break;
      if (off + o->bytes > at) {
        ++mp.reused;
        break;
      }
    }
    const auto pos = std::upper_bound(
        placed.begin(), placed.end(), at,
        [](int64_t v, const std::pair<int64_t, const Life*>& e) { return v < e.first; });
    placed.insert(pos, {at, &l});
  }
}

/// A memory plan with the buffers `own` selects given memory of their own
/// (release_after filled) and the rest in the arena; peak_bytes counted.
MemoryPlan plan_with(const Graph& g, const Schedule& s, const std::vector<bool>& esc,
                     const std::vector<int>& in_place, std::vector<bool> own) {
  MemoryPlan mp;
  mp.offset.assign(g.buffers.size(), -1);
  mp.own = std::move(own);
  place_in_arena(g, s, esc, in_place, mp);
  const std::vector<int> last_use = last_uses(g, s, in_place);
  mp.release_after.assign(s.steps.size(), {});
  for (size_t b = 0; b < g.buffers.size(); ++b)
    if (mp.own[b] && last_use[b] >= 0)
      mp.release_after[static_cast<size_t>(last_use[b])].push_back(static_cast<int>(b));
  // The run's allocations in order: the arena first, then each buffer of its
  // own (intermediate or result) when its first writer runs.
  std::vector<bool> allocated(g.buffers.size(), false);
  int64_t live = mp.arena_bytes;
  mp.peak_bytes = live;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    for (int b : s.steps[i].writes) {
      const Buffer& buf = g.buffers[b];
      if (allocated[b] || buf.kind != BufferKind::Node || in_place[b] >= 0) continue;
      if (!mp.own[b] && !esc[b]) continue;
      allocated[b] = true;
      live += align_up(buffer_bytes(buf));
    }
    mp.peak_bytes = std::max(mp.peak_bytes, live);
    for (int b : mp.release_after[i]) live -= align_up(buffer_bytes(g.buffers[b]));
  }
  return mp;
}
}  // namespace

MemoryPlan plan_memory(const Graph& g, const Schedule& s, bool release_early) {
  const std::vector<bool> esc = g.escaping();
  std::vector<int> in_place = plan_in_place(g, s);
  MemoryPlan mp = plan_with(g, s, esc, in_place, std::vector<bool>(g.buffers.size(), false));
  mp.peak_bytes_one_arena = mp.peak_bytes;
  if (release_early) {
    std::vector<bool> own(g.buffers.size(), false);
    bool any = false;
    for (const Step& st : s.steps)
      for (int b : st.writes) {
        const Buffer& buf = g.buffers[b];
        if (buf.kind == BufferKind::Node && !esc[b] && in_place[b] < 0 &&
            static_cast<size_t>(b) < s.materialized.size() && s.materialized[b] &&
            buffer_bytes(buf) >= kOwnMemoryBytes)
          any = own[b] = true;
      }
    if (any) {
      MemoryPlan early = plan_with(g, s, esc, in_place, std::move(own));
      if (early.peak_bytes * 10 <= mp.peak_bytes * 9) {
        early.peak_bytes_one_arena = mp.peak_bytes;
        mp = std::move(early);
      }
    }
  }
  mp.in_place = std::move(in_place);
  // The arguments each step reads last (not those a result or a write-back
  // needs after the steps).
  std::vector<int> last_read(g.buffers.size(), -1);
  for (size_t i = 0; i < s.steps.size(); ++i)
    for (int b : s.steps[i].reads) last_read[b] = static_cast<int>(i);
  std::map<int, int> arg_last;  // input index -> its last reader, -1: kept to the end
  for (const Buffer& b : g.buffers)
    if (b.kind == BufferKind::Input) {
      auto [it, fresh] = arg_last.emplace(b.input_index, last_read[b.id]);
      if (!fresh) it->second = std::max(it->second, last_read[b.id]);
    }
  auto keep = [&](int buf) {
    const Buffer& b = g.buffers[static_cast<size_t>(buf)];
    if (b.kind == BufferKind::Input) arg_last[b.input_index] = -1;
  };
  for (const Operand& o : g.outputs)
    if (!o.is_scalar()) keep(o.buf);
  for (auto& [dst, src] : g.mutations) keep(dst);
  mp.inputs_done_after.assign(s.steps.size(), {});
  for (auto [index, step] : arg_last)
    if (step >= 0) mp.inputs_done_after[static_cast<size_t>(step)].push_back(index);
  return mp;
}

CompiledGraph::CompiledGraph(Graph g, Schedule s, std::shared_ptr<backend::Module> module,
                             bool reduce_overhead, bool release_early)
    : g_(std::move(g)), s_(std::move(s)), module_(std::move(module)), keep_arena_(reduce_overhead) {
  mem_ = plan_memory(g_, s_, release_early && !reduce_overhead);
  escaping_ = g_.escaping();
  device_ = g_.device();
  // The launch plan: one record per generated kernel, its arguments as slots.
  launch_of_step_.assign(s_.steps.size(), -1);
  for (size_t i = 0; i < s_.steps.size(); ++i) {
    const Step& st = s_.steps[i];
    if (st.kind != Step::Kind::Kernel) continue;
    SMELT_INTERNAL_ASSERT(module_ != nullptr, "kernel {} without a built module", st.name);
    LaunchRecord r;
    r.step = static_cast<int>(i);
    r.kernel = module_->function(st.name);
    // The grid and block the kernel was laid out for (CUDA; the CPU ignores them).
    r.config.grid[0] = static_cast<uint32_t>(std::max<int64_t>(1, st.config.grid));
    r.config.block[0] = static_cast<uint32_t>(std::max(1, st.config.block_size));
    for (int b : st.reads) r.args.push_back({ArgSlot::Kind::Buffer, b});
    for (int b : st.writes) r.args.push_back({ArgSlot::Kind::Buffer, b});
    if (!st.error_ops.empty()) {
      // A backend with deferred flags raises a failed check at its next
      // synchronization; otherwise the run reads the kernel's arena flag.
      std::vector<std::string> messages;  // by RuntimeCheck code, from 1
      for (auto c :
           {detail::RuntimeCheck::IntegerDivisionByZero, detail::RuntimeCheck::IndexOutOfRange})
        messages.push_back(fmt::format("{}: {} (in compiled kernel {})", st.error_ops,
                                       detail::runtime_check_message(c), st.name));
      r.deferred_flag = backend::backend(device_).deferred_error_flag(std::move(messages));
      if (r.deferred_flag != nullptr) {
        r.args.push_back({ArgSlot::Kind::DeferredFlag, -1});
      } else {
        r.error_flag = error_flags_++;
        r.args.push_back({ArgSlot::Kind::ErrorFlag, r.error_flag});
      }
    }
    r.config.num_args = r.args.size();
    launch_of_step_[i] = static_cast<int>(launches_.size());
    launches_.push_back(std::move(r));
  }
  error_offset_ = align_up(mem_.arena_bytes);
  // CUDA graphs where the device records work (the CPU runs step by step).
  if (reduce_overhead && device_.is_cuda()) replays_ = std::make_unique<GraphReplays>(*this);
}

CompiledGraph::~CompiledGraph() {
  replays_.reset();  // the CUDA graphs go before the memory they use
  try {
    if (previous_done_.handle) backend::backend(device_).destroy_event(previous_done_);
  } catch (const Error&) {  // at exit the runtime may be gone
  }
}

CaptureStats CompiledGraph::capture_stats() const {
  return replays_ ? replays_->stats() : CaptureStats{};
}

std::string CompiledGraph::plan_str() const {
  std::string s = "launch plan:\n";
  for (size_t i = 0; i < s_.steps.size(); ++i) {
    const Step& st = s_.steps[i];
    std::vector<std::string> r, w;
    for (int b : st.reads) r.push_back(g_.buffers[b].name());
    for (int b : st.writes) w.push_back(g_.buffers[b].name());
    std::string what = st.name;
    if (st.kind == Step::Kind::Extern && !st.epilogue.empty())
      what += fmt::format(" [{} matmul, {}: {}{}{}]", device_.is_cuda() ? "cuBLAS" : "oneDNN",
                          device_.is_cuda() ? "epilogue" : "post-ops", st.bias >= 0 ? "bias" : "",
                          st.activation.empty() ? "" : ", " + st.activation,
                          st.residual >= 0 ? ", residual add" : "");
    if (st.kind == Step::Kind::Kernel && device_.is_cuda()) {
      const backend::LaunchConfig& c = launches_[static_cast<size_t>(launch_of_step_[i])].config;
      what += fmt::format(" <<<grid {}, block {}, shared {} B, idx{}>>>", c.grid[0], c.block[0],
                          c.shared_mem_bytes + module_->static_shared_bytes(st.name),
                          st.config.index_bits);
    }
    s += fmt::format("  {}: {}({}) -> {}\n", i, what, fmt::join(r, ", "), fmt::join(w, ", "));
  }
  s += mem_.str(g_);
  return s;
}

Tensor blob(void* data, const Shape& sizes, DType dtype, const Shape& strides, Device device) {
  auto impl = std::make_shared<TensorImpl>();
  const Shape st = strides.empty() ? detail::contiguous_strides(sizes) : strides;
  const int64_t extent = detail::storage_extent(sizes, st, 0);
  impl->storage = Storage::wrap(data, static_cast<size_t>(extent) * itemsize(dtype), device);
  impl->sizes = sizes;
  impl->strides = st;
  impl->dtype = dtype;
  impl->device = device;  // eager ops dispatch on it (a fallback step's views of device memory)
  return Tensor(std::move(impl));
}

namespace {

backend::OperandIdentity identity_of(const Storage& s) { return {s.serial(), s.version()}; }

Tensor view_over(void* base, const Operand& o, Device device) {
  char* p = static_cast<char*>(base) + o.offset * static_cast<int64_t>(itemsize(o.dtype));
  return blob(p, o.sizes, o.dtype, o.strides, device);
}

/// The GEMM C = A @ B (+ epilogue) of Extern step `st` (a matmul node whose
/// operands are windows of buffers at `ptr`) at batch index 0, and its batch
/// dims (backend::gemm_over_batch runs them).
struct StepGemm {
  backend::Gemm gemm;
  std::vector<backend::GemmBatchDim> dims;
};
StepGemm gemm_of_step(const Graph& g, const Step& st, const RunBuffers& rb, Device device) {
  const std::vector<void*>& ptr = rb.ptr;
  const Node& n = g.nodes[st.node];
  Operand a = n.inputs[0], b = n.inputs[1];
  if (st.cast_prologue) {  // the float16 / bfloat16 values the converts read
    const std::array<Operand, 2> src = *gemm_cast_prologue(g, n);
    a = src[0];
    b = src[1];
  }
  const Buffer& out = g.buffers[st.writes[0]];
  DType dt = a.dtype;
  bool a1 = a.sizes.size() == 1, b1 = b.sizes.size() == 1;
  if (a1) {
    a.sizes.insert(a.sizes.begin(), 1);
    a.strides.insert(a.strides.begin(), 0);
  }
  if (b1) {
    b.sizes.push_back(1);
    b.strides.push_back(0);
  }
  const int64_t m = a.sizes[a.sizes.size() - 2], k = a.sizes.back(), nn = b.sizes.back();
  Shape abatch(a.sizes.begin(), a.sizes.end() - 2), bbatch(b.sizes.begin(), b.sizes.end() - 2);
  Shape batch = broadcast_shapes(abatch, bbatch, "matmul");
  backend::Gemm gm;
  gm.device = device;
  gm.dtype = dt;
  gm.algorithm = st.gemm_algorithm;
  if (out.dtype != dt) gm.out_dtype = out.dtype;  // a cast prologue's float32 result
  gm.n = nn;
  gm.k = k;
  gm.c_row_stride = nn;
  backend::GemmEpilogue& ep = gm.epilogue;
  if (st.bias >= 0) {
    const Operand& bo = g.nodes[st.epilogue[0]].inputs[st.bias];
    ep.bias = static_cast<char*>(ptr[bo.buf]) + bo.offset * itemsize(bo.dtype);
  }
  ep.activation = st.activation;
  if (st.residual >= 0) {
    const Operand& ro = g.nodes[st.epilogue.back()].inputs[st.residual];
    ep.residual = static_cast<char*>(ptr[ro.buf]) + ro.offset * itemsize(ro.dtype);
    ep.residual_row_stride = out.sizes.empty() ? 1 : out.sizes.back();
    ep.residual_col_stride = 1;
  }
  const size_t isz = itemsize(dt);
  gm.m = m;
  gm.a = {static_cast<char*>(ptr[a.buf]) + a.offset * isz, 0, a.strides[a.sizes.size() - 2],
          a.strides.back()};
  gm.b = {static_cast<char*>(ptr[b.buf]) + b.offset * isz, 0, b.strides[b.sizes.size() - 2],
          b.strides.back()};
  gm.c = ptr[out.id];
  if (!st.cast_prologue && static_cast<size_t>(b.buf) < rb.identity.size())
    gm.b_identity = rb.identity[static_cast<size_t>(b.buf)];
  // Every buffer a GEMM reads or writes has memory: one the plan left without
  // (a store dropped as private) would reach the library as a null pointer.
  SMELT_INTERNAL_ASSERT(gm.a.data && gm.b.data && gm.c,
                        "{} %{}: a GEMM operand or its result has no memory (A {}, B {}, C {})",
                        n.op, out.id, gm.a.data, gm.b.data, gm.c);
  // Batch dims: A's and B's strides (0 where broadcast); C and the residual
  // are contiguous m x n matrices in batch order.
  const Shape cs = detail::contiguous_strides(batch);
  std::vector<backend::GemmBatchDim> dims(batch.size());
  for (size_t d = 0; d < batch.size(); ++d) {
    const int64_t ad = static_cast<int64_t>(d) - static_cast<int64_t>(batch.size() - abatch.size());
    const int64_t bd = static_cast<int64_t>(d) - static_cast<int64_t>(batch.size() - bbatch.size());
    const int64_t cstr = cs[d] * m * nn;
    dims[d] = {batch[d], ad >= 0 && abatch[ad] != 1 ? a.strides[ad] : 0,
               bd >= 0 && bbatch[bd] != 1 ? b.strides[bd] : 0, cstr, ep.residual ? cstr : 0};
  }
  return {gm, std::move(dims)};
}

void run_matmul(const Graph& g, const Step& st, const RunBuffers& rb, backend::Backend& be,
                Device device, backend::Stream stream) {
  StepGemm sg = gemm_of_step(g, st, rb, device);
  backend::gemm_over_batch(be, std::move(sg.gemm), sg.dims, stream);
}

/// Runs eagerly, even inside a trace (a fallback step computes real values).
class NoTrace {
 public:
  NoTrace() : prev_(detail::set_trace_context(nullptr)) {}
  ~NoTrace() { detail::set_trace_context(prev_); }
  NoTrace(const NoTrace&) = delete;
  NoTrace& operator=(const NoTrace&) = delete;

 private:
  detail::TraceContext* prev_;
};

void run_fallback(const Graph& g, const Step& st, const std::vector<void*>& ptr) {
  const Node& n = g.nodes[st.node];
  NoTrace eager;
  std::vector<Tensor> inputs;
  for (auto& in : n.inputs)
    inputs.push_back(in.is_scalar() ? detail::wrapped_scalar(*in.scalar)
                                    : view_over(ptr[in.buf], in, g.buffers[in.buf].device));
  if (st.kernel_kind == "for") {
    // A multi-tensor step: output k is input k updated in place. Each output
    // starts as its input (nothing to copy where it is the input's memory:
    // MemoryPlan::in_place), then the op updates the outputs.
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const Buffer& out = g.buffers[n.outputs[k]];
      Tensor o = blob(ptr[out.id], inputs[k].sizes(), out.dtype, {}, out.device);
      if (o.data_ptr() != inputs[k].data_ptr() || !inputs[k].is_contiguous()) o.copy_(inputs[k]);
      inputs[k] = o;
    }
    detail::call_op(n.op, inputs, n.attrs);
    return;
  }
  if (n.op == "copy_") {
    const Buffer& out = g.buffers[n.outputs[0]];
    Tensor dst = blob(ptr[out.id], {out.extent}, out.dtype, {}, out.device);
    dst.copy_(inputs[0]);
    Operand w;
    w.buf = out.id;
    w.sizes = n.attrs.as<std::vector<int64_t>>("sizes");
    w.strides = n.attrs.as<std::vector<int64_t>>("strides");
    w.offset = n.attrs.as<int64_t>("offset");
    w.dtype = out.dtype;
    view_over(ptr[out.id], w, out.device).copy_(inputs[1]);
    return;
  }
  // Where each result goes: its buffer, or (out_buffer) a permuted view of another.
  std::vector<Tensor> outs;
  for (int o : n.outputs) {
    const Buffer& out = g.buffers[o];
    outs.push_back(st.out_buffer >= 0
                       ? blob(ptr[st.out_buffer], out.sizes, out.dtype, st.out_strides, out.device)
                       : blob(ptr[o], out.sizes, out.dtype, {}, out.device));
  }
  if (detail::WriteInto into = detail::find_write_into(n.op))
    if (into(inputs, n.attrs, outs)) return;
  std::vector<Tensor> results = detail::call_op(n.op, inputs, n.attrs);
  SMELT_INTERNAL_ASSERT(results.size() == n.outputs.size(),
                        "fallback {}: {} results for {} outputs", n.op, results.size(),
                        n.outputs.size());
  for (size_t k = 0; k < results.size(); ++k) outs[k].copy_(results[k]);
}

}  // namespace

int64_t CompiledGraph::arena_bytes() const {
  return error_flags_ > 0 ? error_offset_ + error_flags_ * static_cast<int64_t>(sizeof(int))
                          : mem_.arena_bytes;
}

std::shared_ptr<Storage> CompiledGraph::allocate_arena() const {
  const int64_t bytes = arena_bytes();
  if (bytes <= 0) return nullptr;
  try {
    return Storage::allocate(static_cast<size_t>(bytes), device_);
  } catch (const OutOfMemoryError&) {
    throw OutOfMemoryError(fmt::format(
        "smelt::compile: out of memory allocating the {} arena of the compiled function's "
        "intermediate buffers on {}; free tensors that are no longer needed, or call it on "
        "smaller inputs (e.g. a smaller batch)",
        detail::bytes_str(bytes), device_.str()));
  }
}

RunBuffers CompiledGraph::bind(const std::vector<Tensor>& args, const std::vector<Tensor>& params,
                               std::shared_ptr<Storage> arena) const {
  RunBuffers rb;
  rb.arena = std::move(arena);
  rb.ptr.assign(g_.buffers.size(), nullptr);
  rb.identity.assign(g_.buffers.size(), {});
  rb.owned.resize(g_.buffers.size());
  if (error_flags_ > 0) rb.flags = static_cast<char*>(rb.arena->data()) + error_offset_;
  for (auto& b : g_.buffers) {
    switch (b.kind) {
      case BufferKind::Input:
        rb.ptr[b.id] = args.at(b.input_index).data_ptr();
        break;
      case BufferKind::Param:
        rb.ptr[b.id] = params.at(b.input_index).storage()->data();
        rb.identity[b.id] = identity_of(*params.at(b.input_index).storage());
        break;
      case BufferKind::Constant:
        rb.ptr[b.id] = b.constant.storage()->data();
        rb.identity[b.id] = identity_of(*b.constant.storage());
        break;
      case BufferKind::Node:
        if (mem_.in_place[b.id] >= 0) break;  // bound below, once its input is
        // Buffers of their own (results, write-back sources) are bound by
        // allocate(); run_steps allocates each when the step that writes it
        // comes, so that the peak memory of a call is what its steps need (a
        // training step's gradients come after its activations).
        if (mem_.offset[b.id] >= 0)
          rb.ptr[b.id] = static_cast<char*>(rb.arena->data()) + mem_.offset[b.id];
        break;
    }
  }
  for (auto& b : g_.buffers)
    if (mem_.in_place[b.id] >= 0) rb.ptr[b.id] = rb.ptr[mem_.in_place[b.id]];
  // Memory the run writes (a write-back destination, or an input a step
  // updates in place) has no fixed contents.
  for (auto& [dst, src] : g_.mutations) {
    rb.identity[static_cast<size_t>(dst)] = {};
    rb.identity[static_cast<size_t>(src)] = {};
  }
  for (auto& b : g_.buffers)
    if (mem_.in_place[b.id] >= 0) rb.identity[static_cast<size_t>(mem_.in_place[b.id])] = {};
  return rb;
}

bool CompiledGraph::owns_memory(int id) const {
  const Buffer& b = g_.buffers[static_cast<size_t>(id)];
  return b.kind == BufferKind::Node && mem_.in_place[id] < 0 && mem_.offset[id] < 0 &&
         (s_.materialized[id] || escaping_[id]);
}

void CompiledGraph::allocate(RunBuffers& rb, int id) const {
  if (rb.ptr[id] != nullptr) return;
  if (const int into = mem_.in_place[static_cast<size_t>(id)]; into >= 0) {
    rb.ptr[id] = rb.ptr[into];  // an intermediate of its own, allocated when first written
    return;
  }
  if (!owns_memory(id)) return;
  const Buffer& b = g_.buffers[static_cast<size_t>(id)];
  rb.owned[id] = detail::make_empty({b.extent}, b.dtype, b.device);
  rb.ptr[id] = rb.owned[id].data_ptr();
}

void CompiledGraph::clear_errors(const RunBuffers& rb, backend::Stream stream) const {
  if (error_flags_ > 0)
    backend::backend(device_).memset(rb.flags, 0, error_flags_ * sizeof(int), stream);
}

void CompiledGraph::run_gemm_step(const Step& st, const RunBuffers& rb,
                                  backend::Stream stream) const {
  SMELT_INTERNAL_ASSERT(st.kind == Step::Kind::Extern, "run_gemm_step: {} is not a GEMM", st.name);
  run_matmul(g_, st, rb, backend::backend(device_), device_, stream);
}

int CompiledGraph::gemm_algorithm_count(const Step& st, const RunBuffers& rb, int most) const {
  if (st.kind != Step::Kind::Extern) return 0;
  StepGemm sg = gemm_of_step(g_, st, rb, device_);
  const std::optional<backend::Gemm> first = backend::first_gemm_over_batch(sg.gemm, sg.dims);
  return first ? backend::backend(device_).gemm_algorithm_count(*first, most) : 0;
}

void CompiledGraph::run_step(size_t i, const RunBuffers& rb, backend::Stream stream) const {
  backend::Backend& be = backend::backend(device_);
  const Step& st = s_.steps[i];
  switch (st.kind) {
    case Step::Kind::Kernel: {
      const LaunchRecord& r = launches_[static_cast<size_t>(launch_of_step_[i])];
      void* inline_args[16];
      std::vector<void*> heap;
      void** kargs = inline_args;
      if (r.args.size() > std::size(inline_args)) {
        heap.resize(r.args.size());
        kargs = heap.data();
      }
      for (size_t a = 0; a < r.args.size(); ++a) {
        const ArgSlot& slot = r.args[a];
        kargs[a] = slot.kind == ArgSlot::Kind::Buffer ? rb.ptr[static_cast<size_t>(slot.index)]
                   : slot.kind == ArgSlot::Kind::DeferredFlag
                       ? static_cast<void*>(r.deferred_flag)
                       : rb.flags + static_cast<int64_t>(slot.index) * sizeof(int);
      }
      be.launch(r.kernel, kargs, r.config, stream);
      break;
    }
    case Step::Kind::Extern:
      run_matmul(g_, st, rb, be, device_, stream);
      break;
    case Step::Kind::Fallback:
      run_fallback(g_, st, rb.ptr);
      break;
  }
}

void CompiledGraph::check_errors(const RunBuffers& rb, backend::Stream stream) const {
  if (error_flags_ == 0) return;
  std::vector<int> host(static_cast<size_t>(error_flags_));
  backend::backend(device_).copy_to_host(host.data(), rb.flags, host.size() * sizeof(int), stream);
  for (const LaunchRecord& r : launches_) {
    if (r.error_flag < 0 || host[static_cast<size_t>(r.error_flag)] == 0) continue;
    const Step& st = s_.steps[static_cast<size_t>(r.step)];
    const int code = host[static_cast<size_t>(r.error_flag)];
    SMELT_CHECK(false, "{}: {} (in compiled kernel {})", st.error_ops,
                detail::runtime_check_message(static_cast<detail::RuntimeCheck>(code)), st.name);
  }
}

void CompiledGraph::write_back(const RunBuffers& rb, backend::Stream stream) const {
  backend::Backend& be = backend::backend(device_);
  for (auto& [dst, src] : g_.mutations)
    if (rb.ptr[dst] != rb.ptr[src])  // else written in place
      be.copy_on_device(rb.ptr[dst], rb.ptr[src],
                        g_.buffers[dst].extent * itemsize(g_.buffers[dst].dtype), stream);
}

void CompiledGraph::bump_versions(const std::vector<Tensor>& args,
                                  const std::vector<Tensor>& params) const {
  for (auto& [dst, src] : g_.mutations) {
    const Buffer& b = g_.buffers[dst];
    if (b.kind == BufferKind::Input) args.at(b.input_index).storage()->bump_version();
    if (b.kind == BufferKind::Param) params.at(b.input_index).storage()->bump_version();
    if (b.kind == BufferKind::Constant) b.constant.storage()->bump_version();
  }
}

std::vector<Tensor> CompiledGraph::results(const std::vector<Tensor>& args,
                                           const std::vector<Tensor>& params,
                                           const RunBuffers& rb) const {
  std::vector<Tensor> outs;
  for (Operand o : g_.outputs) {
    // The final contents of a mutated input were written back into it: eager
    // returns the input's own memory there, so the output views the input.
    for (auto& [dst, src] : g_.mutations)
      if (src == o.buf) o.buf = dst;
    const Buffer& b = g_.buffers[o.buf];
    switch (b.kind) {
      case BufferKind::Node:
        outs.push_back(detail::make_view(rb.owned[o.buf], o.sizes, o.strides, o.offset));
        break;
      case BufferKind::Input: {
        const Tensor& a = args.at(b.input_index);
        outs.push_back(detail::make_view(a, o.sizes, o.strides, a.storage_offset() + o.offset));
        break;
      }
      case BufferKind::Param:
        outs.push_back(detail::make_view(params.at(b.input_index), o.sizes, o.strides, o.offset));
        break;
      case BufferKind::Constant: {
        // A captured tensor is returned as eager would (the same memory); one
        // the function created is a fresh tensor on every call.
        Tensor v = detail::make_view(b.constant, o.sizes, o.strides, o.offset);
        outs.push_back(b.captured ? v : v.clone());
        break;
      }
    }
  }
  return outs;
}

void CompiledGraph::order_after_previous(backend::Stream stream) {
  if (!keep_arena_ || !device_.is_cuda() || !previous_done_.handle ||
      previous_stream_.handle == stream.handle)
    return;
  backend::backend(device_).wait_event(stream, previous_done_);
}

void CompiledGraph::mark_done(backend::Stream stream) {
  if (!keep_arena_ || !device_.is_cuda()) return;
  backend::Backend& be = backend::backend(device_);
  if (!previous_done_.handle) previous_done_ = be.create_event(false);
  be.record(previous_done_, stream);
  previous_stream_ = stream;
}

std::vector<Tensor> CompiledGraph::run(const std::vector<Tensor>& args,
                                       const std::vector<Tensor>& params) {
  backend::Backend& be = backend::backend(device_);
  backend::DeviceGuard on_device(device_);
  const backend::Stream stream = be.current_stream(device_);
  // Outputs that run out of memory name the compiled function (make_empty adds
  // their shape and dtype); the arena is named by allocate_arena.
  detail::OpScope scope("smelt::compile (an output of the compiled function)");
  std::vector<Tensor> out;
  if (!keep_arena_) return run_steps(args, params, nullptr, stream);
  // Mode reduce-overhead: one arena for every call (and every CUDA graph).
  std::lock_guard<std::mutex> lock(arena_mutex_);
  if (!arena_) arena_ = allocate_arena();
  order_after_previous(stream);
  std::optional<std::vector<Tensor>> replayed =
      replays_ ? replays_->run(args, params, arena_, stream) : std::nullopt;
  out = replayed ? std::move(*replayed) : run_steps(args, params, arena_, stream);
  mark_done(stream);
  return out;
}

std::vector<Tensor> CompiledGraph::run_consuming(std::vector<Tensor> args,
                                                 const std::vector<Tensor>& params) {
  if (keep_arena_) return run(args, params);
  backend::Backend& be = backend::backend(device_);
  backend::DeviceGuard on_device(device_);
  detail::OpScope scope("smelt::compile (an output of the compiled function)");
  return run_steps(std::move(args), params, nullptr, be.current_stream(device_),
                   /*release_inputs=*/true);
}

std::vector<Tensor> CompiledGraph::run_steps(std::vector<Tensor> args,
                                             const std::vector<Tensor>& params,
                                             std::shared_ptr<Storage> arena, backend::Stream stream,
                                             bool release_inputs) {
  backend::Backend& be = backend::backend(device_);
  if (!arena) arena = allocate_arena();
  RunBuffers rb = bind(args, params, std::move(arena));
  clear_errors(rb, stream);
  // The error flags are read once after all steps, and before an eager
  // fallback when a kernel that may fail ran since the last check (a fallback
  // reads values on the host, so it is a synchronization point anyway, and
  // must not see them).
  bool unchecked = false;
  // Profiling: each step's time between timing events where the device has
  // them (its own time on the GPU, without the host's launch), else on the
  // host clock after synchronizing.
  std::vector<backend::Event> marks;
  if (profile) {
    last_step_ms.assign(s_.steps.size(), 0.0);
    if (backend::Event e = be.create_event(true); e.handle != nullptr) {
      marks.push_back(e);
      for (size_t i = 0; i < s_.steps.size(); ++i) marks.push_back(be.create_event(true));
      be.record(marks[0], stream);
    }
  }
  for (size_t i = 0; i < s_.steps.size(); ++i) {
    const Step& st = s_.steps[i];
    for (int b : st.writes) allocate(rb, b);
    auto t0 = std::chrono::steady_clock::now();
    if (st.kind == Step::Kind::Fallback && unchecked) {
      check_errors(rb, stream);
      unchecked = false;
    }
    run_step(i, rb, stream);
    if (st.kind == Step::Kind::Kernel)
      unchecked = unchecked || launches_[static_cast<size_t>(launch_of_step_[i])].error_flag >= 0;
    if (!marks.empty()) {
      be.record(marks[i + 1], stream);
    } else if (profile) {
      be.synchronize(stream);
      last_step_ms[i] =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    // Memory whose last reader ran goes back to the allocator (in stream
    // order on a device that queues work, as eager's temporaries).
    for (int b : mem_.release_after[i]) {
      rb.owned[static_cast<size_t>(b)] = Tensor();
      rb.ptr[static_cast<size_t>(b)] = nullptr;
    }
    if (release_inputs)
      for (int a : mem_.inputs_done_after[i]) args[static_cast<size_t>(a)] = Tensor();
  }
  if (unchecked) check_errors(rb, stream);
  if (!marks.empty()) {
    be.event_synchronize(marks.back());
    for (size_t i = 0; i < s_.steps.size(); ++i)
      last_step_ms[i] = be.elapsed_ms(marks[i], marks[i + 1]);
    for (backend::Event e : marks) be.destroy_event(e);
  }
  for (auto& b : g_.buffers)  // results no step writes (none expected)
    if (!mem_.own[static_cast<size_t>(b.id)]) allocate(rb, b.id);
  write_back(rb, stream);
  bump_versions(args, params);
  return results(args, params, rb);
}

}  // namespace smelt::compiler
