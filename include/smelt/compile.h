// smelt/compile.h — smelt::compile: capture, fuse, generate code, run.
//
//   auto model = nn::Sequential(nn::Linear(1024, 1024), nn::GELU(), nn::Linear(1024, 10));
//   auto compiled = smelt::compile(model);     // no change to the model
//   Tensor y = compiled(smelt::randn({256, 1024}));   // the first call compiles
//
//   auto f = smelt::compile([](const Tensor& x, const Tensor& w) { return (x * w).sigmoid(); });
//
// The first call traces the function with tracer tensors (shape, dtype,
// device, no data) into a graph, runs the passes (functionalization, DCE, CSE,
// decomposition of composite ops, constant folding), lowers it to loop IR,
// fuses (pointwise chains, reductions with their producers and consumers,
// GEMM + epilogue, horizontal), generates one C++ translation unit, builds it
// with the system compiler (cached on disk, see SMELT_CACHE_DIR) and runs it.
// Later calls whose guards hold (input sizes, strides, dtypes and devices;
// module training flags; the identity of every parameter and buffer) run the
// compiled code directly. Parameters are graph inputs: updating weights in
// place needs no recompile. A failed guard recompiles (logged with the reason);
// after `recompile_limit` graphs the function runs eagerly with a warning.
//
// Training. A function that computes a loss, calls backward() and steps an
// optimizer compiles into one graph: forward, backward and update.
//
//   smelt::optim::SGD opt(model->parameters(), smelt::optim::SGDOptions(0.1));
//   auto step = smelt::compile([&](const Tensor& x, const Tensor& y) {
//     opt.zero_grad();
//     Tensor loss = smelt::cross_entropy(model(x), y);
//     loss.backward();
//     opt.step();
//     return loss;       // returned without history: its backward already ran
//   });
//   for (...) float l = step(x, y).item<float>();
//
// While tracing, ops over tensors that require grad record their backward
// nodes exactly as in eager mode, so the backward() the function runs is
// traced too: the autograd engine runs each op's derivative (its op-table
// entry, written in smelt ops) over tracers. Forward and backward are one
// graph, so what the backward reads of the forward stays in the graph's
// buffers, and both are fused, scheduled and generated like any graph (the
// GELU derivative is one kernel, a bias gradient a reduction fused with its
// producer). The optimizer's step() becomes one multi-tensor node
// (_fused_sgd_ / _fused_adam_) that runs the backend's multi-tensor kernel,
// the same as eager, writing the parameters and optimizer state in place.
// Compiled steps equal eager ones (the same kernels and summation orders;
// float32 losses equal bit for bit with one thread).
//   * .grad: the .grad a call leaves on each leaf (module parameters, tensors
//     the function captures, arguments that require grad) is a result of the
//     graph, assigned after each run, as eager's backward() would; a .grad
//     the function reads on entry (accumulation without zero_grad) is a graph
//     input, guarded on being defined and on its shape and dtype.
//   * State: a tensor the function captures and writes in place (parameters,
//     optimizer state, counters) is written back at every call.
//   * Guards: on top of the argument guards, the optimizer's options and
//     which state tensors exist (its first step, which makes them, is a graph
//     of its own; a new learning rate recompiles, as a Python float lr does
//     under torch.compile), and each .grad the function reads on entry.
//   * A graph break in a training step (an item() call inside it) runs the
//     call eagerly from the state it had on entry: what the trace did to
//     optimizer state and .grad is undone first.
//
// Compiled forward, backward run by the caller (AOTAutograd). When a call's
// results require grad (grad mode on; parameters, arguments or captured
// tensors require grad) and the function runs no backward pass itself,
//
//   auto compiled = smelt::compile(model);
//   Tensor loss = smelt::cross_entropy(compiled(x), y);   // eager loss
//   loss.backward();                                      // the compiled backward
//   opt.step();
//
// the forward and the backward of its results (with respect to every
// argument, parameter and captured leaf that requires grad, the results'
// gradients as symbolic inputs) are traced into one joint graph, which is
// split (compiler/passes/partition.h) into a forward graph (the results and
// the tensors saved for the backward) and a backward graph (saved tensors and
// the results' gradients in, the gradients out). Both are fused, generated
// and cached like any graph (a bias gradient is a column reduction fused with
// its producer). Saved: the inputs of matmuls and other non-pointwise ops;
// cheap pointwise values (a GELU's output that the next matmul's weight
// gradient reads) are recomputed in the backward from saved ones when that
// saves memory (a minimum cut over the values' bytes; CompileOptions::
// recompute; CompileStats::saved_bytes against saved_bytes_without_recompute).
//   * Each call gives its results that require grad one autograd node,
//     "CompiledFunctionBackward", whose apply() runs the backward graph; its
//     edges lead where eager's would (the AccumulateGrad of each leaf, so
//     gradients accumulate into .grad and leaf hooks run as in eager; the
//     history of an argument that has one). Results that do not require
//     grad (integer results, results over no such tensor) have no history; a
//     result the loss does not use gets a zero gradient.
//   * Saved tensors are freed after a backward without retain_graph (a
//     second one raises PyTorch's "Trying to backward through the graph a
//     second time"); an in-place write into one (an argument the backward
//     reads) before backward() raises as eager does. A backward with
//     create_graph=true (double backward) through the node raises.
//   * Guards: grad mode (a graph traced under NoGradGuard is never reused
//     with grad mode on, nor the reverse), whether each argument and
//     parameter requires grad (and whether an argument has a grad_fn), and
//     whether each tensor the function captures requires grad.
//   * Tensors the function captures (rather than module parameters or
//     arguments) are read by the backward graph as they are when it runs.
//   * A result that is a view of a contiguous argument (x.t(), x itself) is
//     that view of the argument, its history a view node onto the argument
//     (AsStridedBackward0), as eager's view ops record; `return x` returns x.
//   * Graph breaks: a result that requires grad and is a non-contiguous
//     argument, a parameter or a captured tensor (or a view of one), or a
//     function that touches .grad without running backward().
//
// Graph breaks: a data-dependent read while tracing (item(), printing values)
// or a random op makes that call run eagerly (reason logged under
// SMELT_LOGS=graph_breaks); with fullgraph=true it raises smelt::Error naming
// the op.
//
// SMELT_LOGS (comma list, to stderr): graph, fusion, output_code, recompiles,
// guards, graph_breaks, perf; "all" turns every artifact on.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "smelt/nn/module.h"
#include "smelt/tensor.h"

namespace smelt {

struct CompileOptions {
  /// "default", "reduce-overhead", "max-autotune" or
  /// "max-autotune-no-cudagraphs", as torch.compile's modes:
  ///  * "reduce-overhead": one pre-planned arena of intermediates kept across
  ///    calls instead of an allocation per call; on CUDA, moreover, the calls
  ///    replay a CUDA graph. The first call of a graph runs step by step (a
  ///    warm-up), the second records its launches (kernels, cuBLAS calls,
  ///    eager fallbacks) into a CUDA graph over static input and output
  ///    buffers, and later calls copy their arguments into the static inputs
  ///    and replay it with one launch. Results are the static output buffers
  ///    themselves (no copy, as PyTorch's cudagraph trees return them), and a
  ///    replay never overwrites a result the program still holds: two
  ///    recordings with outputs of their own take turns, and a call finding
  ///    both recordings' results in use runs step by step into fresh memory
  ///    (where PyTorch would raise on reading an overwritten output). Kernels
  ///    with a runtime check (integer division, indexing) are recorded: on
  ///    CUDA a failed check raises at the next synchronization (item(), cpu(),
  ///    cuda::synchronize()), naming the op, as eager CUDA does. A graph
  ///    that cannot be recorded (one that launches nothing; an eager fallback
  ///    that waits for the device, such as Adam's step counts read with
  ///    item()) runs step by step, the reason in CompileStats::cudagraph_skip_reason
  ///    and logged under SMELT_LOGS=graph_breaks and perf. A new shape (a
  ///    failed guard) compiles and records a new graph. The recordings keep
  ///    their memory (CompileStats::cudagraph_static_bytes) as long as the
  ///    compiled function lives.
  ///  * "max-autotune": on CUDA, each generated kernel's candidate launch
  ///    layouts (block size, elements per thread, threads per reduced row,
  ///    persistent or looped rows) are built and timed on the first call's
  ///    tensors (only read: outputs go to scratch memory) and the fastest
  ///    whose results agree with the heuristic layout's is kept; choices are
  ///    cached on disk beside the kernel cache (a second compile benchmarks
  ///    nothing), within autotune_budget_s; then the calls replay CUDA graphs
  ///    as under "reduce-overhead". On the CPU: as "default" (no autotuning
  ///    yet; the log says so).
  ///  * "max-autotune-no-cudagraphs": the autotuning without CUDA graphs.
  std::string mode = "default";
  /// Mode max-autotune: seconds the autotuning of one graph may take
  /// (candidate builds and benchmarks); kernels it does not reach keep their
  /// heuristic layout. <= 0: no limit.
  double autotune_budget_s = 60;
  /// Raise smelt::Error on a graph break instead of running eagerly.
  bool fullgraph = false;
  /// Accepted; symbolic shapes are not implemented yet, so a new shape recompiles.
  bool dynamic = false;
  /// The code generator, named for torch.compile compatibility: "inductor",
  /// "cpp" and "cuda" all generate code for the device of the tensors (C++
  /// built by the system compiler on the CPU, CUDA C++ built by NVRTC on a GPU).
  std::string backend = "cpp";
  /// Distinct graphs kept per function before it falls back to eager.
  int recompile_limit = 8;
  // Stage switches, for debugging (each stage can be turned off).
  bool dce = true;
  bool cse = true;
  bool decompose = true;
  bool fold_constants = true;
  bool fuse = true;
  bool gemm_epilogue = true;
  /// Linear layers of a graph that read the same input with module
  /// parameters as weights (a transformer's Q, K and V projections) run as
  /// one GEMM over the weights concatenated at compile time (Inductor's
  /// concat_linear). The graph keeps that copy (the weights' bytes once more)
  /// and guards the parameters' version counters: an in-place update of one
  /// (an optimizer step, load_state_dict) recompiles. Not applied to graphs
  /// that train. Off: one GEMM per linear.
  bool concat_linear = true;
  /// Round every float16/bfloat16 intermediate inside a fused kernel to its
  /// dtype, as eager mode stores it, so compiled results equal eager ones
  /// (Inductor's emulate_precision_casts). Off: intermediates stay in float32
  /// registers (slightly faster, results may drift from eager), and a
  /// float16/bfloat16 GEMM takes its bias, activation and residual add into
  /// the GEMM call (cuBLASLt's epilogue on a GPU), rounded once.
  bool round_intermediates = true;
  /// Compiled forward whose results require grad: the backward graph
  /// recomputes cheap pointwise values from the saved ones when that saves
  /// memory (see "Training"). Off: every forward value the backward reads is
  /// saved as it is.
  bool recompute = true;
};

/// Counters of a compiled function.
struct CompileStats {
  int calls = 0;
  int compiles = 0;      // graphs built (first compile + recompiles)
  int recompiles = 0;    // compiles caused by a failed guard
  int graph_breaks = 0;  // calls that ran eagerly because tracing broke
  int eager_calls = 0;   // calls that ran eagerly (breaks, limit, compiler missing)
  /// Steps of the latest graph (kernels, GEMM calls, fallbacks); for a
  /// compiled forward whose results require grad, of its forward and its
  /// compiled backward together.
  int kernels = 0;
  std::vector<std::string> kernel_names;           // of the latest graph (its forward)
  std::vector<std::string> backward_kernel_names;  // of its compiled backward (else empty)
  /// Of the latest graph when it is a compiled forward with a compiled
  /// backward: the tensors each call saves for the backward (intermediates,
  /// arguments, parameters), their bytes (intermediates and arguments: what
  /// the call keeps alive besides the module's parameters), the bytes it would
  /// save without recomputing (every forward value the backward reads, saved
  /// as it is; CompileOptions::recompute), and the forward ops the backward
  /// computes again.
  int saved_tensors = 0;
  int64_t saved_bytes = 0;
  int64_t saved_bytes_without_recompute = 0;
  int recomputed_ops = 0;
  double last_compile_ms = 0;  // trace + passes + codegen + build/load of the latest graph
  /// Where last_compile_ms went, by stage (ms): tracing the function, the graph
  /// passes, lowering and fusion (the schedule; on a plan-cache hit, loading
  /// the plan), code generation (describing and printing the kernels; 0 on a
  /// plan-cache hit), the C++ compiler (the longest of the runs that build at
  /// the same time; 0 on a disk-cache hit), and the rest (cache lookups,
  /// dlopen, storing the plan, the launch plan).
  struct Phases {
    double trace_ms = 0, passes_ms = 0, fuse_ms = 0, codegen_ms = 0, cxx_ms = 0, load_ms = 0;
  } last_compile_phases;
  bool last_cache_hit = false;  // the latest build came from the disk cache
  /// The latest graph's plan (schedule and kernel source) came from the disk
  /// cache: lowering, fusion and code generation were skipped.
  bool last_plan_cache_hit = false;
  std::string last_recompile_reason;
  /// Of the latest graph: primitive ops eager mode runs for it (one kernel
  /// each), and estimated bytes moved eagerly (every op reads its inputs and
  /// writes its output) and compiled (every step's reads and writes).
  int eager_ops = 0;
  int64_t bytes_eager = 0;
  int64_t bytes_compiled = 0;
  std::string last_graph_break;
  /// Mode reduce-overhead (and max-autotune) on CUDA, of the latest graph run:
  /// CUDA graphs recorded, calls that replayed one, calls that ran step by
  /// step (the warm-up included), the device memory the recordings keep
  /// (static inputs and outputs, the intermediates' arena, what the recorded
  /// work allocated), and why calls run step by step ("" while they replay).
  int cudagraph_captures = 0;
  int cudagraph_replays = 0;
  int cudagraph_uncaptured_runs = 0;
  int64_t cudagraph_static_bytes = 0;
  std::string cudagraph_skip_reason;
  /// Mode max-autotune, latest graph: kernels and GEMMs whose choice came
  /// from the disk cache, kernels and GEMMs benchmarked, kernels whose layout
  /// changed from the heuristic's, candidate layouts and GEMM algorithms
  /// timed, and the stage's time (ms; part of last_compile_ms). Of the GEMMs:
  /// those benchmarked (cuBLASLt's proposed algorithms against its own
  /// choice) and those that now run another algorithm than its own choice.
  int autotune_cache_hits = 0;
  int autotune_tuned = 0;
  int autotune_changed = 0;
  int autotune_candidates = 0;
  int autotune_gemms_tuned = 0;
  int autotune_gemms_changed = 0;
  double autotune_ms = 0;
};

namespace detail {
class CompiledState;
using ErasedFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// The type-erased compiled function; see smelt::compile.
class CompiledCore {
 public:
  /// `params`: the module's parameters and buffers under their state_dict
  /// names (graph inputs; guards and logs name them); `state_key`: a key of
  /// the modules' training flags. Both empty for a function.
  CompiledCore(CompileOptions opts, std::function<std::vector<nn::NamedTensor>()> params,
               std::function<std::string()> state_key);
  std::vector<Tensor> call(const std::vector<Tensor>& args, const ErasedFn& fn);
  const CompileStats& stats() const;
  /// The generated source of the latest graph ("" before the first compile);
  /// of a compiled forward, its kernels and its backward graph's.
  std::string generated_code() const;
  /// The launch plan of the latest graph (of a compiled forward: "forward
  /// launch plan: ..." then "backward launch plan: ...").
  std::string launch_plan() const;

 private:
  std::shared_ptr<CompiledState> state_;
};

template <class R>
struct ResultPack;
template <>
struct ResultPack<Tensor> {
  static std::vector<Tensor> pack(const Tensor& t) { return {t}; }
  static Tensor unpack(std::vector<Tensor> v) { return v.at(0); }
};
template <>
struct ResultPack<std::vector<Tensor>> {
  static std::vector<Tensor> pack(std::vector<Tensor> v) { return v; }
  static std::vector<Tensor> unpack(std::vector<Tensor> v) { return v; }
};
template <class... Ts>
struct ResultPack<std::tuple<Ts...>> {
  static std::vector<Tensor> pack(const std::tuple<Ts...>& t) {
    return std::apply([](const auto&... x) { return std::vector<Tensor>{x...}; }, t);
  }
  static std::tuple<Ts...> unpack(const std::vector<Tensor>& v) {
    return unpack_impl(v, std::index_sequence_for<Ts...>{});
  }
  template <size_t... I>
  static std::tuple<Ts...> unpack_impl(const std::vector<Tensor>& v, std::index_sequence<I...>) {
    return std::tuple<Ts...>{v.at(I)...};
  }
};

template <class M>
concept ModuleLike = requires(const M& m) {
  m->named_parameters_and_buffers();
};

/// Every defined parameter and buffer of `m` with its state_dict name (the
/// compiled graph's extra inputs), and a key of the modules' training flags (a guard).
std::vector<nn::NamedTensor> module_state(const nn::Module& m);
std::string module_mode_key(nn::Module& m);
}  // namespace detail

/// A compiled callable with the signature of what it wraps.
template <class Fn>
class Compiled {
 public:
  Compiled(Fn fn, detail::CompiledCore core) : fn_(std::move(fn)), core_(std::move(core)) {}

  template <class... Args>
  auto operator()(const Args&... args) {
    static_assert((std::is_convertible_v<const Args&, const Tensor&> && ...),
                  "smelt::compile: compiled functions take Tensor arguments");
    using R = std::decay_t<std::invoke_result_t<Fn&, const Args&...>>;
    std::vector<Tensor> in{static_cast<const Tensor&>(args)...};
    detail::ErasedFn erased = [this](const std::vector<Tensor>& v) {
      return detail::ResultPack<R>::pack(invoke(v, std::index_sequence_for<Args...>{}));
    };
    return detail::ResultPack<R>::unpack(core_.call(in, erased));
  }

  const CompileStats& stats() const { return core_.stats(); }
  std::string generated_code() const { return core_.generated_code(); }
  std::string launch_plan() const { return core_.launch_plan(); }

 private:
  template <size_t... I>
  auto invoke(const std::vector<Tensor>& v, std::index_sequence<I...>) {
    return fn_(v[I]...);
  }
  Fn fn_;
  detail::CompiledCore core_;
};

/// Compiles an nn module (a holder such as nn::Sequential, or any pointer-like
/// to a Module): its parameters and buffers become graph inputs.
template <detail::ModuleLike M, class Fn>
requires(!std::is_same_v<std::decay_t<Fn>, CompileOptions>) auto compile(M module, Fn fn,
                                                                         CompileOptions opts = {});

/// Compiles an nn module (a holder such as nn::Sequential, or any pointer-like
/// to a Module): its parameters and buffers become graph inputs.
template <detail::ModuleLike M>
auto compile(M module, CompileOptions opts = {}) {
  return compile(
      module, [module](const Tensor& x) { return (*module)(x); }, std::move(opts));
}

/// Compiles `fn`, a function of Tensors that calls `module` (a layer whose
/// forward takes several tensors, or more than its forward): as compile(fn),
/// except that the module's parameters and buffers become graph inputs,
/// guarded as compile(module)'s are, rather than tensors `fn` captures (so
/// passes over parameters, such as CompileOptions::concat_linear, apply).
template <detail::ModuleLike M, class Fn>
requires(!std::is_same_v<std::decay_t<Fn>, CompileOptions>) auto compile(M module, Fn fn,
                                                                         CompileOptions opts) {
  detail::CompiledCore core(
      std::move(opts), [module] { return detail::module_state(*module); },
      [module] { return detail::module_mode_key(*module); });
  return Compiled<Fn>(std::move(fn), std::move(core));
}

/// Compiles a function or lambda taking Tensors and returning a Tensor, a
/// std::vector<Tensor> or a std::tuple of Tensors.
template <class Fn>
requires(!detail::ModuleLike<Fn>) auto compile(Fn fn, CompileOptions opts = {}) {
  detail::CompiledCore core(std::move(opts), nullptr, nullptr);
  return Compiled<Fn>(std::move(fn), std::move(core));
}

}  // namespace smelt
