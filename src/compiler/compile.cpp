// smelt::compile: the entry point. Guards, the in-memory cache of compiled
// graphs, graph breaks, recompiles, and the pipeline of named stages:
// trace -> passes -> lower/fuse (schedule) -> codegen -> build/load -> run.
// When a call's results require grad and the function runs no backward pass,
// the trace is a joint forward + backward one, split after the passes
// (compiler/passes/partition.h) into a forward and a backward graph that go
// through the rest of the pipeline each; the runs of the forward give their
// results a CompiledFunctionBackward node (compiler/runtime/compiled_function.h).
#include "smelt/compile.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>

#include "backend/backend.h"
#include "compiler/codegen/cuda_dialect.h"
#include "compiler/codegen/generate.h"
#include "compiler/codegen/printer.h"
#include "compiler/fusion/scheduler.h"
#include "compiler/logs.h"
#include "compiler/passes/concat_linear.h"
#include "compiler/passes/partition.h"
#include "compiler/passes/passes.h"
#include "compiler/runtime/autotune.h"
#include "compiler/runtime/compiled_function.h"
#include "compiler/runtime/executor.h"
#include "compiler/runtime/kernel_cache.h"
#include "compiler/runtime/plan_cache.h"
#include "compiler/runtime/replay.h"
#include "compiler/runtime/units.h"
#include "compiler/trace/joint.h"
#include "compiler/trace/tracer.h"
#include "core/tensor_impl.h"
#include "smelt/autograd.h"

namespace smelt {

namespace detail {

std::vector<nn::NamedTensor> module_state(const nn::Module& m) {
  std::vector<nn::NamedTensor> out;
  for (auto& nt : m.named_parameters_and_buffers())
    if (nt.tensor.defined()) out.push_back(nt);
  return out;
}

std::string module_mode_key(nn::Module& m) {
  std::string key;
  for (auto& [name, mod] : m.named_modules()) key += mod->is_training() ? 'T' : 'E';
  return key;
}

namespace {

using namespace smelt::compiler;

/// The copy bandwidth of `device` (GB/s: bytes read plus bytes written per
/// second), measured once per device and process for the perf log's
/// roofline: the best of 5 copies of 256 MiB (64 MiB on the CPU, at the
/// threads eager uses); 0 while a trace is recording (nothing may run then).
double measured_copy_gbps(Device device) {
  static std::mutex mu;
  static std::map<std::string, double> measured;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = measured.find(device.str()); it != measured.end()) return it->second;
  if (detail::trace_context() != nullptr) return 0.0;
  const int64_t bytes = int64_t{device.is_cuda() ? 256 : 64} << 20;
  Tensor src = zeros({bytes / 4}, TensorOptions(DType::Float32).device(device));
  Tensor dst = empty({bytes / 4}, TensorOptions(DType::Float32).device(device));
  backend::Backend& be = backend::backend(device);
  dst.copy_(src);
  be.synchronize_device(device);
  double best = 0.0;
  for (int k = 0; k < 5; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    dst.copy_(src);
    be.synchronize_device(device);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (k == 0 || s < best) best = s;
  }
  const double gbps = best > 0 ? 2.0 * static_cast<double>(bytes) / best / 1e9 : 0.0;
  measured[device.str()] = gbps;
  return gbps;
}

struct TensorGuard {
  Shape sizes, strides;
  DType dtype;
  Device device;
  std::string value;    // a wrapped number's value (specialized), else ""
  bool aligned = true;  // compiler::input_aligned: 16-byte aligned data (CUDA)
  /// 'n': does not require grad; 'l': a leaf that requires grad; 'h': requires
  /// grad through a history (a grad_fn). A graph traced for one is not reused
  /// for another: its results would (not) require grad, or the backward it
  /// runs would stop at (or go through) the tensor.
  char grad = 'n';
  static TensorGuard of(const Tensor& t) {
    return {t.sizes(),
            t.strides(),
            t.dtype(),
            t.device(),
            t.is_wrapped_number() ? t.item().str() : "",
            t.is_wrapped_number() || input_aligned(t),
            !t.requires_grad() ? 'n'
            : t.is_leaf()      ? 'l'
                               : 'h'};
  }
  std::string str() const {
    if (!value.empty()) return fmt::format("the number {} ({})", value, dtype_name(dtype));
    return fmt::format("{} {} strides {} on {}{}{}", dtype_name(dtype), shape_str(sizes),
                       shape_str(strides), device.str(),
                       aligned ? "" : " (data not 16-byte aligned)",
                       grad == 'l'   ? ", requires grad"
                       : grad == 'h' ? ", requires grad (has a grad_fn)"
                                     : "");
  }
  bool operator==(const TensorGuard& o) const {
    return sizes == o.sizes && strides == o.strides && dtype == o.dtype && device == o.device &&
           value == o.value && aligned == o.aligned && grad == o.grad;
  }
};

/// For each argument, the first argument sharing its storage (itself if none).
std::vector<int> alias_pattern(const std::vector<Tensor>& args) {
  std::vector<int> a(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    a[i] = static_cast<int>(i);
    for (size_t j = 0; j < i; ++j)
      if (!args[i].is_wrapped_number() && args[j].storage() == args[i].storage()) {
        a[i] = static_cast<int>(j);
        break;
      }
  }
  return a;
}

/// "parameter fc2.weight" / "buffer bn.running_mean".
std::string param_label(const nn::NamedTensor& p) {
  return fmt::format("{} {}", p.is_buffer ? "buffer" : "parameter", p.name);
}

struct Guards {
  std::vector<TensorGuard> args;
  std::vector<int> aliases;                         // alias_pattern of the arguments
  std::vector<std::string> param_labels;            // "parameter fc2.weight", ...
  std::vector<std::shared_ptr<TensorImpl>> params;  // identity (kept alive)
  std::vector<TensorGuard> param_meta;
  /// Storage::serial() of each (unique in the process: a freed storage whose
  /// address is reused by a new one cannot pass for it).
  std::vector<uint64_t> param_storage;
  /// (parameter index, Tensor::_version()) of the parameters whose values the
  /// graph holds a copy of (concat_linear's concatenated weights).
  std::vector<std::pair<int, uint32_t>> param_versions;
  std::string mode_key;
  /// Grad mode when traced: a graph traced under NoGradGuard is not reused with
  /// grad mode on (a tensor captured by the function may require grad).
  bool grad_enabled = true;
  /// The .grad of each leaf the function read before replacing it: undefined
  /// or not as on entry when traced; when defined, a graph input (the graph
  /// reads it, or accumulates into it in place) with the sizes, strides and
  /// dtype it had.
  struct GradGuard {
    std::string label;                 // "parameter 0.weight", "argument 1", ...
    std::shared_ptr<TensorImpl> leaf;  // null for an argument
    int arg = -1;
    std::optional<TensorGuard> entry;  // the .grad on entry (nullopt: undefined)
  };
  std::vector<GradGuard> grads;
  /// Tensors the function captures (grad mode on): whether each required grad
  /// when traced (a result depends on it through autograd, or not).
  struct CapturedGuard {
    std::shared_ptr<TensorImpl> tensor;
    bool requires_grad = false;
  };
  std::vector<CapturedGuard> captured;
  /// Host state the graph depends on (an optimizer's options and state), checked
  /// by the closures the traced code registered (TraceContext::add_guard).
  std::vector<std::function<std::string()>> host;

  /// "" when `args`/`params` pass, else the first failed guard.
  std::string check(const std::vector<Tensor>& a, const std::vector<nn::NamedTensor>& p,
                    const std::string& mode) const {
    if (a.size() != args.size())
      return fmt::format("number of arguments changed: {} -> {}", args.size(), a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      TensorGuard now = TensorGuard::of(a[i]);
      if (!(now == args[i]))
        return fmt::format("argument {}: expected {}, got {}", i, args[i].str(), now.str());
    }
    if (alias_pattern(a) != aliases) return "which arguments share memory changed";
    for (size_t i = 0; i < std::max(p.size(), params.size()); ++i) {
      if (i >= p.size())
        return fmt::format("the module no longer has {} (parameters and buffers: {} -> {})",
                           param_labels[i], params.size(), p.size());
      if (i >= params.size() || param_label(p[i]) != param_labels[i])
        return fmt::format(
            "the module's parameters and buffers changed: {} where the graph has "
            "{} (count {} -> {})",
            param_label(p[i]), i < params.size() ? param_labels[i] : "none", params.size(),
            p.size());
      const Tensor& t = p[i].tensor;
      if (t.impl_ptr() != params[i])
        return fmt::format("{} was replaced by another tensor", param_labels[i]);
      if (t.storage()->serial() != param_storage[i])
        return fmt::format("{} now uses another storage (Module::to() or a new tensor)",
                           param_labels[i]);
      if (!(TensorGuard::of(t) == param_meta[i]))
        return fmt::format("{}: expected {}, got {}", param_labels[i], param_meta[i].str(),
                           TensorGuard::of(t).str());
    }
    for (const auto& [i, version] : param_versions)
      if (p[static_cast<size_t>(i)].tensor._version() != version)
        return fmt::format(
            "{} was written in place since compiling (the graph holds a copy of it: "
            "concat_linear's concatenated weights)",
            param_labels[static_cast<size_t>(i)]);
    if (mode != mode_key) return "a module switched between train() and eval()";
    if (GradMode::is_enabled() != grad_enabled)
      return fmt::format("grad mode changed: the graph was traced with grad mode {}",
                         grad_enabled ? "on" : "off (NoGradGuard)");
    for (const auto& g : grads) {
      const TensorImpl* leaf = g.arg >= 0 ? a[static_cast<size_t>(g.arg)].impl() : g.leaf.get();
      const detail::AutogradMeta* m = leaf->autograd.get();
      const bool now = m && m->grad.defined();
      if (now != g.entry.has_value())
        return fmt::format("the .grad of {} was {} when traced and now is {}", g.label,
                           g.entry ? "defined" : "undefined", now ? "defined" : "undefined");
      if (now && !(TensorGuard::of(m->grad) == *g.entry))
        return fmt::format("the .grad of {}: expected {}, got {}", g.label, g.entry->str(),
                           TensorGuard::of(m->grad).str());
    }
    for (const auto& c : captured)
      if (detail::impl_requires_grad(c.tensor.get()) != c.requires_grad)
        return fmt::format("a tensor the function captures ({} {}) {}", dtype_name(c.tensor->dtype),
                           detail::shape_str(c.tensor->sizes),
                           c.requires_grad ? "no longer requires grad" : "now requires grad");
    for (const auto& check : host)
      if (std::string why = check(); !why.empty()) return why;
    return "";
  }
  std::string str() const {
    std::string s;
    for (size_t i = 0; i < args.size(); ++i)
      s += fmt::format("  argument {}: {}\n", i, args[i].str());
    for (size_t i = 0; i < params.size(); ++i)
      s += fmt::format("  {}: this very tensor, {}\n", param_labels[i], param_meta[i].str());
    for (const auto& [i, version] : param_versions)
      s += fmt::format("  {}: version {} (the graph holds a copy)\n",
                       param_labels[static_cast<size_t>(i)], version);
    if (!mode_key.empty())
      s += fmt::format("  module training flags (T = train, E = eval, per module): {}\n", mode_key);
    s += fmt::format("  grad mode: {}\n", grad_enabled ? "on" : "off");
    for (const auto& g : grads)
      s += fmt::format("  the .grad of {}: {}\n", g.label, g.entry ? g.entry->str() : "undefined");
    for (const auto& c : captured)
      s += fmt::format("  a tensor the function captures ({} {}): {}\n",
                       dtype_name(c.tensor->dtype), detail::shape_str(c.tensor->sizes),
                       c.requires_grad ? "requires grad" : "does not require grad");
    if (!host.empty())
      s += fmt::format("  {} check(s) of host state the graph read (optimizer options and state)\n",
                       host.size());
    return s;
  }
};

/// The Error raised for a graph break under fullgraph=true: the op, why it
/// cannot be captured, and how to keep it out of the compiled function.
std::string fullgraph_message(const GraphBreak& br) {
  std::string m = fmt::format("smelt::compile(fullgraph=true): graph break at {}", br.what());
  if (!br.advice().empty()) m += "; " + br.advice();
  return m + ". Without fullgraph=true, such calls fall back to eager mode.";
}

/// The leaf whose .grad a call sets, and to which graph output (-1: undefined).
struct GradEffect {
  std::shared_ptr<TensorImpl> leaf;  // null for an argument
  int arg = -1;
  int output = -1;
};

struct Entry {
  Guards guards;
  std::shared_ptr<CompiledGraph> graph;  // null: this signature graph-breaks (runs eagerly)
  std::string source;
  /// The function's results: the graph's first outputs (the .grad values follow).
  int num_results = 0;
  std::vector<GradEffect> grad_effects;
  /// The leaves whose .grad the graph takes as inputs after the arguments, in order
  /// (GradEffect::output unused).
  std::vector<GradEffect> grad_inputs;
  /// Results that require grad (grad mode on, no backward pass in the
  /// function): the graph is the forward half of a joint graph, and each run
  /// gives them a node that runs this compiled backward.
  std::shared_ptr<const BackwardFunction> backward;
  /// Results that are views of arguments requiring grad (see connect_views).
  std::vector<ViewResult> views;
};

}  // namespace

class CompiledState {
 public:
  CompiledState(CompileOptions o, std::function<std::vector<nn::NamedTensor>()> p,
                std::function<std::string()> m)
      : opts(std::move(o)), params_fn(std::move(p)), mode_fn(std::move(m)) {
    SMELT_CHECK(opts.mode == "default" || opts.mode == "reduce-overhead" ||
                    opts.mode == "max-autotune" || opts.mode == "max-autotune-no-cudagraphs",
                "smelt::compile: unknown mode '{}'; use \"default\", \"reduce-overhead\", "
                "\"max-autotune\" or \"max-autotune-no-cudagraphs\"",
                opts.mode);
    SMELT_CHECK(opts.backend == "cpp" || opts.backend == "cpu" || opts.backend == "cuda" ||
                    opts.backend == "inductor",
                "smelt::compile: backend '{}' is not available; use \"inductor\" (the default "
                "code generator: C++ for CPU tensors, CUDA C++ for GPU tensors), \"cpp\" or "
                "\"cuda\"",
                opts.backend);
    SMELT_CHECK(opts.recompile_limit >= 1, "smelt::compile: recompile_limit must be >= 1, got {}",
                opts.recompile_limit);
  }

  std::vector<Tensor> call(const std::vector<Tensor>& args, const ErasedFn& fn) {
    // Called while another compiled function is being traced: inline it into
    // that trace (as torch.compile does with nested compiled functions).
    if (trace_context() != nullptr) return fn(args);
    std::lock_guard<std::mutex> lock(mu);
    ++stats.calls;
    for (size_t i = 0; i < args.size(); ++i)
      SMELT_CHECK(args[i].defined(), "smelt::compile: argument {} is an undefined tensor", i);
    std::vector<nn::NamedTensor> named = params_fn ? params_fn() : std::vector<nn::NamedTensor>{};
    std::string mode = mode_fn ? mode_fn() : "";
    if (eager_only) return eager(args, fn);
    std::vector<Tensor> params;
    params.reserve(named.size());
    for (auto& p : named) params.push_back(p.tensor);
    std::string reason;
    for (auto& e : entries) {
      std::string why = e.guards.check(args, named, mode);
      if (why.empty()) {
        if (!e.graph) return eager(args, fn);
        return run(e, args, params);
      }
      reason = why;
    }
    if (!entries.empty()) {
      if (static_cast<int>(entries.size()) >= opts.recompile_limit) {
        std::fputs(fmt::format("smelt::compile warning: recompile limit ({}) reached ({}); this "
                               "function now runs eagerly\n",
                               opts.recompile_limit, reason)
                       .c_str(),
                   stderr);
        eager_only = true;
        return eager(args, fn);
      }
      ++stats.recompiles;
      stats.last_recompile_reason = reason;
      if (log_enabled("recompiles")) log_artifact("recompiles", "recompiling: " + reason);
    }
    Entry e = compile(args, named, mode, fn);
    entries.push_back(std::move(e));
    Entry& last = entries.back();
    if (!last.graph) return eager(args, fn);
    return run(last, args, params);
  }

  std::vector<Tensor> eager(const std::vector<Tensor>& args, const ErasedFn& fn) {
    ++stats.eager_calls;
    compiler::TraceScope none(nullptr);
    return fn(args);
  }

  std::vector<Tensor> run(Entry& e, const std::vector<Tensor>& args,
                          const std::vector<Tensor>& params) {
    CompiledGraph& g = *e.graph;
    g.profile = log_enabled("perf");
    auto leaf_of = [&](const GradEffect& eff) {
      return eff.arg >= 0 ? args[static_cast<size_t>(eff.arg)] : Tensor(eff.leaf);
    };
    // A .grad the graph replaces without reading it (zero_grad(set_to_none) then
    // backward()) is dropped first, as eager drops it when the function starts:
    // the old gradients need not live beside the new ones.
    for (const auto& eff : e.grad_effects) {
      const bool read = std::any_of(e.grad_inputs.begin(), e.grad_inputs.end(), [&](auto& gi) {
        return gi.arg == eff.arg && gi.leaf == eff.leaf;
      });
      if (!read) leaf_of(eff).mutable_grad() = Tensor();
    }
    std::vector<Tensor> out;
    if (e.grad_inputs.empty()) {
      out = g.run(args, params);
    } else {
      std::vector<Tensor> inputs = args;  // then the .grad values the graph reads
      for (const auto& gi : e.grad_inputs) inputs.push_back(leaf_of(gi).grad());
      out = g.run(inputs, params);
    }
    // A compiled forward: its results that require grad get the node of the
    // compiled backward (the saved intermediates leave `out`).
    if (e.backward) connect_backward(e.backward, args, params, out, e.num_results);
    if (!e.views.empty()) connect_views(e.views, args, out);
    // The .grad values the function leaves (a training step's gradients).
    for (const auto& eff : e.grad_effects)
      leaf_of(eff).mutable_grad() =
          eff.output >= 0 ? out[static_cast<size_t>(eff.output)] : Tensor();
    out.resize(static_cast<size_t>(e.num_results));
    const CaptureStats cs = g.capture_stats();
    stats.cudagraph_captures = cs.captures;
    stats.cudagraph_replays = cs.replays;
    stats.cudagraph_uncaptured_runs = cs.uncaptured_runs;
    stats.cudagraph_static_bytes = cs.static_bytes;
    stats.cudagraph_skip_reason = cs.reason;
    if (g.profile && cs.last_call_replayed) {
      log_artifact("perf", "per-kernel time and bytes moved",
                   fmt::format("  CUDA graph replay of {} steps {:9.3f} ms (the steps are not "
                               "timed one by one in a replay)\n",
                               g.schedule().steps.size(), cs.last_replay_ms));
    } else if (g.profile) {
      // Each step against the device's measured copy bandwidth: the share
      // says how far a memory-bound kernel is from its limit.
      const double copy = measured_copy_gbps(g.graph().device());
      std::string body = copy > 0 ? fmt::format("  (copy bandwidth measured on {}: {:.0f} GB/s)\n",
                                                g.graph().device().str(), copy)
                                  : std::string();
      const auto& steps = g.schedule().steps;
      for (size_t i = 0; i < steps.size(); ++i) {
        int64_t bytes = 0;
        for (int b : steps[i].reads)
          bytes += g.graph().buffers[b].extent * itemsize(g.graph().buffers[b].dtype);
        for (int b : steps[i].writes)
          bytes += g.graph().buffers[b].extent * itemsize(g.graph().buffers[b].dtype);
        const double ms = g.last_step_ms[i], gbps = ms > 0 ? bytes / ms / 1e6 : 0.0;
        body += fmt::format(
            "  {:<48} {:9.3f} ms {:12} bytes {:8.2f} GB/s{}\n", steps[i].name, ms, bytes, gbps,
            copy > 0 ? fmt::format(" {:5.1f}% of copy", 100.0 * gbps / copy) : std::string());
      }
      log_artifact("perf", "per-kernel time and bytes moved", body);
    }
    return out;
  }

  /// Counts and logs a graph break (the call then runs eagerly); raises it
  /// under fullgraph.
  void graph_break(const GraphBreak& br) {
    ++stats.graph_breaks;
    stats.last_graph_break = br.what();
    if (opts.fullgraph) throw Error(fullgraph_message(br));
    if (log_enabled("graph_breaks"))
      log_artifact("graph_breaks", "graph break, running eagerly",
                   fmt::format("graph break at {}; this call runs eagerly", br.what()));
  }

  Entry compile(const std::vector<Tensor>& args, const std::vector<nn::NamedTensor>& named,
                const std::string& mode, const ErasedFn& fn) {
    auto t0 = std::chrono::steady_clock::now();
    CompileStats::Phases ph;
    auto lap = [last = t0]() mutable {
      auto now = std::chrono::steady_clock::now();
      double ms = std::chrono::duration<double, std::milli>(now - last).count();
      last = now;
      return ms;
    };
    Entry e;
    e.guards.mode_key = mode;
    e.guards.grad_enabled = GradMode::is_enabled();
    for (auto& a : args) e.guards.args.push_back(TensorGuard::of(a));
    e.guards.aliases = alias_pattern(args);
    std::vector<Tensor> params;
    for (auto& p : named) {
      params.push_back(p.tensor);
      e.guards.param_labels.push_back(param_label(p));
      e.guards.params.push_back(p.tensor.impl_ptr());
      e.guards.param_meta.push_back(TensorGuard::of(p.tensor));
      e.guards.param_storage.push_back(p.tensor.storage()->serial());
    }
    if (log_enabled("guards")) log_artifact("guards", "guards of the new graph", e.guards.str());
    if (log_enabled("graph")) {
      const bool on_cuda = !args.empty() && args[0].device().is_cuda();
      std::string what;
      if (opts.mode.rfind("max-autotune", 0) == 0)
        what = on_cuda ? " (kernel layouts benchmarked on the first call's tensors)"
                       : " (no autotuning on the CPU yet: compiled as default)";
      if (opts.mode == "reduce-overhead" || (opts.mode == "max-autotune" && on_cuda))
        what += on_cuda ? " (one memory arena kept across calls; calls replay CUDA graphs)"
                        : " (one memory arena kept across calls)";
      log_artifact(
          "graph",
          fmt::format(
              "compile options: mode={}{}, fullgraph={}, dynamic={}{}, backend={}", opts.mode, what,
              opts.fullgraph, opts.dynamic,
              opts.dynamic ? " (symbolic shapes not implemented: a new shape recompiles)" : "",
              opts.backend));
    }
    // 1. trace
    Graph captured;
    // Tracing swaps the module's parameter storages into tracers: one trace at
    // a time in the process, so two compiled objects of one module cannot
    // see each other's tracers.
    static std::mutex trace_mutex;
    std::lock_guard<std::mutex> trace_lock(trace_mutex);
    // Undoes what the traced function did to host state (optimizer state it
    // made) when its graph is not used after all.
    std::function<void()> undo_trace;
    std::optional<TracedBackward> traced;  // a joint graph: its backward half
    bool trains = false;                   // the function runs a backward pass
    try {
      GraphBuilder gb;
      gb.set_num_args(static_cast<int>(args.size()));
      try {
        std::vector<Tensor> tracers;
        // C++ numbers passed as tensors are specialized on their value (guarded),
        // as torch.compile does: ops see them as constants.
        for (size_t i = 0; i < args.size(); ++i)
          tracers.push_back(
              args[i].is_wrapped_number() ? args[i] : gb.add_input(args[i], static_cast<int>(i)));
        for (size_t i = 0; i < params.size(); ++i) gb.add_param(params[i], static_cast<int>(i));
        std::vector<Tensor> outs;
        {
          TraceScope scope(&gb);
          outs = fn(tracers);
        }
        // Results that require grad from a function that ran no backward pass:
        // the caller may run it. A view of a (contiguous) argument gets a view
        // node at run time (connect_views); the others' backward is traced
        // into a joint graph, compiled as a backward graph.
        std::vector<bool> is_view(outs.size(), false);
        bool joint = false;
        trains = gb.ran_backward;
        if (GradMode::is_enabled() && !gb.ran_backward)
          for (size_t k = 0; k < outs.size(); ++k) {
            if (!outs[k].defined() || !outs[k].requires_grad()) continue;
            const Operand o = gb.operand_of(outs[k]);
            const Buffer* b = o.is_scalar() ? nullptr : &gb.graph.buffers[o.buf];
            if (b && b->kind == BufferKind::Input &&
                b->input_index < static_cast<int>(args.size()) &&
                args[static_cast<size_t>(b->input_index)].is_contiguous()) {
              is_view[k] = true;
              e.views.push_back({static_cast<int>(k), b->input_index});
            } else {
              joint = true;
            }
          }
        if (joint)
          traced = trace_backward(gb, outs, static_cast<int>(args.size()), is_view);
        else
          gb.finish(outs);
        // Arguments that share memory are separate graph inputs: if the function
        // writes into one, the others would not see it. Run such calls eagerly.
        bool aliased = false, writes_args = false;
        for (size_t i = 0; i < args.size(); ++i)
          aliased |= e.guards.aliases[i] != static_cast<int>(i);
        for (auto& [dst, src] : gb.graph.mutations)
          writes_args |= gb.graph.buffers[dst].kind == BufferKind::Input;
        if (aliased && writes_args)
          throw GraphBreak(
              "an in-place write into an argument",
              "the arguments share memory and the function writes into one of them, so the "
              "other arguments would not see the write",
              "pass arguments that do not share memory (clone() one of them)");
      } catch (...) {
        gb.restore_grads();
        gb.abort();
        throw;
      }
      // The .grad values the function set are the graph's to set at each call.
      gb.restore_grads();
      gb.restore_params();
      e.num_results = gb.num_results;
      for (auto& slot : gb.grad_slots) {
        if (slot.input >= 0) {
          SMELT_INTERNAL_ASSERT(slot.input == static_cast<int>(args.size() + e.grad_inputs.size()),
                                "the .grad inputs are not numbered after the arguments");
          e.grad_inputs.push_back({slot.arg >= 0 ? nullptr : slot.leaf, slot.arg, -1});
        }
        if (!slot.guarded) continue;
        Guards::GradGuard g;
        g.arg = slot.arg;
        if (slot.arg < 0) g.leaf = slot.leaf;
        if (slot.entry.defined()) g.entry = TensorGuard::of(slot.entry);
        g.label = slot.arg >= 0 ? fmt::format("argument {}", slot.arg) : "";
        for (const auto& p : named)
          if (p.tensor.impl() == slot.leaf.get()) g.label = param_label(p);
        if (g.label.empty())
          g.label = fmt::format("a tensor the function captures ({} {})",
                                dtype_name(slot.leaf->dtype), detail::shape_str(slot.leaf->sizes));
        e.guards.grads.push_back(std::move(g));
      }
      for (const auto& eff : gb.grad_effects) {
        const auto& slot = gb.grad_slots[static_cast<size_t>(eff.slot)];
        e.grad_effects.push_back({slot.arg >= 0 ? nullptr : slot.leaf, slot.arg, eff.output});
      }
      e.guards.host = std::move(gb.host_guards);
      if (e.guards.grad_enabled)
        for (const auto& b : gb.graph.buffers)
          if (b.kind == BufferKind::Constant && b.captured && is_floating(b.dtype))
            e.guards.captured.push_back({b.constant.impl_ptr(), b.constant.requires_grad()});
      undo_trace = [undo = gb.take_undo()] {
        for (auto it = undo.rbegin(); it != undo.rend(); ++it) (*it)();
      };
      captured = std::move(gb.graph);
    } catch (const GraphBreak& br) {
      graph_break(br);
      return e;  // graph == null: eager for these guards
    }
    if (log_enabled("graph")) log_artifact("graph", "captured graph", captured.str());
    ph.trace_ms = lap();
    // 2. passes
    {
      // What eager mode runs: every primitive op of the decomposed graph.
      const bool composites = has_composites(captured);
      Graph decomposed;
      if (composites) decomposed = run_passes(captured, PassOptions{false, false, true, false});
      const Graph& prim = composites ? decomposed : captured;
      stats.eager_ops = static_cast<int>(prim.nodes.size());
      stats.bytes_eager = 0;
      for (auto& n : prim.nodes) {
        for (auto& in : n.inputs)
          if (!in.is_scalar())
            stats.bytes_eager +=
                std::min<int64_t>(prim.buffers[in.buf].extent, shape_numel(in.sizes)) *
                itemsize(in.dtype);
        for (int o : n.outputs)
          stats.bytes_eager += prim.buffers[o].extent * itemsize(prim.buffers[o].dtype);
      }
    }
    PassOptions po{opts.dce, opts.cse, opts.decompose, opts.fold_constants};
    PassStats ps;
    Graph g = run_passes(std::move(captured), po, &ps);
    if (log_enabled("graph")) log_artifact("graph", "after passes (" + ps.str() + ")", g.str());
    ph.passes_ms = lap();
    // A graph reading tensors of several devices (a CPU tensor given to a GPU
    // computation) runs eagerly, which moves or rejects them as eager does.
    if (!g.on_one_device()) {
      GraphBreak br(
          "a graph over several devices",
          fmt::format("the function reads tensors on {} and on another device", g.device().str()),
          "move every tensor the function reads to one device");
      graph_break(br);
      return e;
    }
    // Linears over one input as one GEMM (inference only: a graph that
    // trains or updates its parameters reads them as they change).
    if (opts.concat_linear && opts.fuse && !traced && !trains) {
      const ConcatLinearResult cl = concat_linear(g, params);
      for (int p : cl.params)
        e.guards.param_versions.emplace_back(p, params[static_cast<size_t>(p)]._version());
      if (cl.groups > 0 && log_enabled("graph"))
        log_artifact("graph", "after " + cl.str(), g.str());
      ph.passes_ms += lap();
    }
    // A joint graph: split into the forward graph and the backward graph.
    std::optional<JointPartition> part;
    if (traced) {
      try {
        part = split_joint(g, *traced, static_cast<int>(args.size()), e.num_results);
      } catch (const GraphBreak& br) {
        undo_trace();
        graph_break(br);
        return e;
      }
      g = std::move(part->forward);
      ph.passes_ms += lap();
    }
    // 3-7. lowering, fusion, codegen, build and load, for each graph.
    std::shared_ptr<CompiledGraph> backward;
    BuildTotals bt;
    stats.autotune_cache_hits = stats.autotune_tuned = stats.autotune_changed = 0;
    stats.autotune_candidates = stats.autotune_gemms_tuned = stats.autotune_gemms_changed = 0;
    stats.autotune_ms = 0;
    try {
      std::vector<Tensor> inputs = args;  // the graph's inputs: then the .grad values it reads
      for (const auto& gi : e.grad_inputs)
        inputs.push_back(gi.arg >= 0 ? args[static_cast<size_t>(gi.arg)].grad()
                                     : Tensor(gi.leaf).grad());
      // Large intermediates freed after their last reader wherever that
      // lowers the run's peak by a tenth or more (plan_memory): a training
      // step, or a GPT-2 block on the GPU, whose one arena would still hold
      // its activations while the result is allocated (84 against 72 MiB).
      // Elsewhere the run keeps one arena: on the H200, memory of their own
      // for the seed MLP's three buffers took its forward from 65 to 125 us.
      e.graph = build(std::move(g), e.source, bt, &inputs, params);
      if (part) backward = build(std::move(part->backward), e.source, bt, nullptr, params);
    } catch (const backend::ToolchainUnavailable& err) {
      e.graph = nullptr;
      undo_trace();
      if (opts.fullgraph) throw;
      std::fputs(fmt::format("smelt::compile warning: {}; this function runs eagerly\n", err.what())
                     .c_str(),
                 stderr);
      eager_only = true;
      return e;
    }
    ph.fuse_ms = bt.fuse_ms;
    ph.codegen_ms = bt.codegen_ms;
    ++stats.compiles;
    if (part) {
      auto fn = std::make_shared<BackwardFunction>();
      fn->graph = backward;
      fn->num_args = static_cast<int>(args.size());
      fn->diff_results = traced->diff_results;
      fn->num_saved = part->num_saved;
      fn->saved_args = part->saved_args;
      fn->saved_params = part->saved_params;
      for (const auto& in : traced->inputs)
        fn->inputs.push_back({in.arg, in.leaf, in.output < 0 ? -1 : in.output - e.num_results});
      e.backward = std::move(fn);
    }
    stats.kernel_names.clear();
    stats.backward_kernel_names.clear();
    stats.bytes_compiled = 0;
    for (const CompiledGraph* cg : {e.graph.get(), backward.get()}) {
      if (!cg) continue;
      for (auto& st : cg->schedule().steps) {
        (cg == backward.get() ? stats.backward_kernel_names : stats.kernel_names)
            .push_back(st.name);
        for (int b : st.reads)
          stats.bytes_compiled +=
              cg->graph().buffers[b].extent * itemsize(cg->graph().buffers[b].dtype);
        for (int b : st.writes)
          stats.bytes_compiled +=
              cg->graph().buffers[b].extent * itemsize(cg->graph().buffers[b].dtype);
      }
    }
    stats.kernels =
        static_cast<int>(stats.kernel_names.size() + stats.backward_kernel_names.size());
    stats.saved_tensors = part ? part->num_saved + static_cast<int>(part->saved_args.size() +
                                                                    part->saved_params.size())
                               : 0;
    stats.saved_bytes = part ? part->saved_bytes : 0;
    stats.saved_bytes_without_recompute = part ? part->saved_bytes_all : 0;
    stats.recomputed_ops = part ? part->recomputed : 0;
    stats.last_plan_cache_hit = bt.plan_cache_hits == (part ? 2 : 1);
    stats.last_cache_hit = bt.cache_hits == bt.builds && bt.builds > 0;
    stats.last_compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ph.cxx_ms = bt.build_ms;
    ph.load_ms = lap() - bt.build_ms - bt.fuse_ms - bt.codegen_ms;
    stats.last_compile_phases = ph;
    return e;
  }

  /// What build() did, over the graphs of one compile.
  struct BuildTotals {
    double fuse_ms = 0, codegen_ms = 0, build_ms = 0;
    int plan_cache_hits = 0, builds = 0, cache_hits = 0;
  };

  /// Lowers, fuses and generates `g` (after its passes), or loads the plan a
  /// compile of this graph stored; C++ for the CPU, CUDA C++ for a GPU; builds
  /// and loads its kernels (ToolchainUnavailable when no compiler is found).
  /// Appends the kernels' source to `source`. `tune_inputs`: the graph's
  /// inputs at this call, on which max-autotune times the kernels' layouts
  /// (null: the heuristic layouts; a backward graph's inputs exist only when
  /// the backward runs); `params`: the module's parameters and buffers.
  std::shared_ptr<CompiledGraph> build(Graph g, std::string& source, BuildTotals& bt,
                                       const std::vector<Tensor>* tune_inputs,
                                       const std::vector<Tensor>& params) {
    const Device device = g.device();
    const CppDialect cpp_dialect;
    const CudaDialect cuda_dialect;
    const Dialect& dialect =
        device.is_cuda() ? static_cast<const Dialect&>(cuda_dialect) : cpp_dialect;
    const FusionOptions fo{opts.fuse, opts.gemm_epilogue, opts.round_intermediates};
    const std::string key =
        plan_key(g, fmt::format("fuse={} gemm_epilogue={} round_intermediates={} target={}",
                                fo.fuse, fo.gemm_epilogue, fo.round_intermediates, dialect.name()));
    auto t0 = std::chrono::steady_clock::now();
    auto since = [&t0] {
      auto now = std::chrono::steady_clock::now();
      double ms = std::chrono::duration<double, std::milli>(now - t0).count();
      t0 = now;
      return ms;
    };
    std::optional<CachedPlan> cached = load_plan(key, g, log_enabled("fusion"));
    Schedule s;
    std::vector<KernelUnit> units;
    if (cached) {
      ++bt.plan_cache_hits;
      s = std::move(cached->schedule);
      units = join_units(s, dialect.preamble(), cached->unit_kernels);
      bt.fuse_ms += since();
    } else {
      s = schedule(g, fo, dialect.target());
      bt.fuse_ms += since();
      generate_kernels(g, s, dialect);
      units = split_units(s, dialect.preamble(), build_parallelism(),
                          device.is_cuda() ? kCudaUnitLines : kUnitLines);
      bt.codegen_ms += since();
    }
    if (log_enabled("fusion")) {
      std::string body;
      for (auto& d : s.decisions) body += "  " + d + "\n";
      log_artifact("fusion", "fusion decisions", body);
    }
    std::string kernels;
    for (auto& st : s.steps)
      if (st.kind == Step::Kind::Kernel) kernels += "\n" + st.source;
    std::shared_ptr<backend::Module> lib;
    backend::BuildInfo bi;
    const size_t source_start = source.size();
    if (!units.empty()) {
      for (auto& u : units) source += u.source;
      lib = build_units(units, backend::backend(device), device, kernel_cache(), &bi);
    }
    if (!cached) store_plan(key, s, units);  // the heuristic plan: autotuning starts from it
    // 8. max-autotune (CUDA): kernel layouts timed on this call's tensors.
    if (tune_inputs && opts.mode.rfind("max-autotune", 0) == 0 && device.is_cuda() && lib) {
      AutotuneOptions ao;
      ao.budget_s = opts.autotune_budget_s;
      const AutotuneResult ar = autotune(g, s, dialect, lib, *tune_inputs, params, ao);
      stats.autotune_cache_hits = ar.cache_hits;
      stats.autotune_tuned = ar.tuned;
      stats.autotune_changed = ar.changed;
      stats.autotune_candidates = ar.candidates;
      stats.autotune_gemms_tuned = ar.gemms_tuned;
      stats.autotune_gemms_changed = ar.gemms_changed;
      stats.autotune_ms = ar.ms;
      if (log_enabled("perf"))
        log_artifact(
            "perf",
            fmt::format("max-autotune: {} kernel(s) and {} GEMM(s), {} from the disk "
                        "cache, {} benchmarked, {} layout(s) and {} GEMM algorithm(s) "
                        "changed, in {:.1f} ms{}",
                        ar.kernels, ar.gemms, ar.cache_hits, ar.tuned, ar.changed, ar.gemms_changed,
                        ar.ms, ar.out_of_budget ? " (time budget spent)" : ""),
            ar.log);
      if (ar.changed > 0) {  // the kernels again, with the layouts chosen
        units = split_units(s, dialect.preamble(), build_parallelism(), kCudaUnitLines);
        source.resize(source_start);
        for (auto& u : units) source += u.source;
        backend::BuildInfo tuned;
        lib = build_units(units, backend::backend(device), device, kernel_cache(), &tuned);
        bi.cache_hit = bi.cache_hit && tuned.cache_hit;
        bi.build_ms += tuned.build_ms;
        bi.source_path = tuned.source_path;
      }
      kernels.clear();
      for (auto& st : s.steps)
        if (st.kind == Step::Kind::Kernel) kernels += "\n" + st.source;
    }
    if (!units.empty()) {
      ++bt.builds;
      bt.cache_hits += bi.cache_hit ? 1 : 0;
      bt.build_ms += bi.build_ms;
    }
    // CUDA graphs: mode reduce-overhead, and max-autotune on CUDA (as torch.compile).
    const bool reduce_overhead =
        opts.mode == "reduce-overhead" || (opts.mode == "max-autotune" && device.is_cuda());
    auto cg = std::make_shared<CompiledGraph>(std::move(g), std::move(s), lib, reduce_overhead);
    if (log_enabled("output_code")) {
      log_artifact("output_code",
                   fmt::format("generated code ({}; source {}): kernels include the embedded "
                               "scalar_ops.h / reduce_ops.h",
                               bi.cache_hit ? "loaded from the cache" : "built", bi.source_path),
                   kernels);
      log_artifact("output_code", "launch plan", cg->plan_str());
    }
    return cg;
  }

  /// Splits the joint graph `g` (compiler/passes/partition.h) and checks that
  /// each result that requires grad is a tensor of the forward's own.
  JointPartition split_joint(const Graph& g, const TracedBackward& traced, int num_args,
                             int num_results) {
    JointSignature sig;
    sig.num_args = num_args;
    sig.num_grad_outputs = static_cast<int>(traced.diff_results.size());
    sig.num_results = num_results;
    JointPartition part = partition_joint(g, sig, opts.recompute);
    for (int k : traced.diff_results) {
      const Operand& o = part.forward.outputs[static_cast<size_t>(k)];
      if (o.is_scalar() || part.forward.buffers[o.buf].kind != BufferKind::Node)
        throw GraphBreak(
            "autograd",
            fmt::format("result {} requires grad and is a non-contiguous argument, a parameter or "
                        "a tensor the function captures (or a view of one), which eager autograd "
                        "returns as a view with its own history",
                        k),
            "return a new tensor (clone() it) from the compiled function");
    }
    if (log_enabled("graph")) {
      log_artifact("graph", "joint graph split: " + part.str());
      log_artifact("graph", "forward graph", part.forward.str());
      log_artifact("graph", "backward graph", part.backward.str());
    }
    return part;
  }

  CompileOptions opts;
  std::function<std::vector<nn::NamedTensor>()> params_fn;
  std::function<std::string()> mode_fn;
  std::mutex mu;
  std::vector<Entry> entries;
  CompileStats stats;
  bool eager_only = false;
};

CompiledCore::CompiledCore(CompileOptions opts,
                           std::function<std::vector<nn::NamedTensor>()> params,
                           std::function<std::string()> state_key)
    : state_(std::make_shared<CompiledState>(std::move(opts), std::move(params),
                                             std::move(state_key))) {}

std::vector<Tensor> CompiledCore::call(const std::vector<Tensor>& args, const ErasedFn& fn) {
  return state_->call(args, fn);
}
const CompileStats& CompiledCore::stats() const { return state_->stats; }
std::string CompiledCore::generated_code() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->entries.empty() ? "" : state_->entries.back().source;
}
std::string CompiledCore::launch_plan() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->entries.empty() || !state_->entries.back().graph) return "";
  const Entry& e = state_->entries.back();
  if (!e.backward) return e.graph->plan_str();
  return "forward " + e.graph->plan_str() + "backward " + e.backward->graph->plan_str();
}

}  // namespace detail
}  // namespace smelt
