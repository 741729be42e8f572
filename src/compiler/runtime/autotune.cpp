// The autotuner of mode "max-autotune" (autotune.h): candidate builds, the
// benchmark walk over the graph's steps, agreement checks, the disk cache of
// choices, and the progress bar.
#include "compiler/runtime/autotune.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "compiler/codegen/generate.h"
#include "compiler/runtime/executor.h"
#include "compiler/runtime/kernel_cache.h"
#include "compiler/runtime/units.h"
#include "core/tensor_impl.h"
#include "smelt/error.h"

namespace smelt::compiler {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string tune_path(const std::string& key) { return cache_dir() + "/" + key + ".tune"; }

/// Relative tolerance of a candidate's outputs (of the output's largest
/// magnitude); 0: exact.
double tolerance(DType t) {
  switch (t) {
    case DType::Float16:
    case DType::BFloat16:
      return 1e-2;
    case DType::Float32:
      return 1e-4;
    case DType::Float64:
      return 1e-10;
    default:
      return 0;
  }
}

/// The values of `n` elements of `dtype` at device memory `p`, as doubles (a
/// copy to the host: a synchronization).
std::vector<double> host_values(void* p, int64_t n, DType dtype, Device device) {
  Tensor t = blob(p, {n}, dtype, {}, device).to(Device()).to(DType::Float64);
  return t.to_vector<double>();
}

/// "" when `got` agrees with `want` (see autotune.h), else where it does not.
std::string disagreement(const std::vector<double>& got, const std::vector<double>& want,
                         DType dtype) {
  double scale = 0;
  for (double w : want)
    if (std::isfinite(w)) scale = std::max(scale, std::abs(w));
  const double tol = tolerance(dtype) * std::max(1.0, scale);
  for (size_t i = 0; i < want.size(); ++i) {
    const double a = got[i], b = want[i];
    if (std::isnan(a) || std::isnan(b)) {
      if (std::isnan(a) && std::isnan(b)) continue;
    } else if (a == b || std::abs(a - b) <= tol) {
      continue;
    }
    return fmt::format("element {}: {} instead of {} (tolerance {:.3g})", i, a, b, tol);
  }
  return "";
}

/// The progress bar (see autotune.h).
class Progress {
 public:
  Progress(bool on, int total) : on_(on && total > 0), total_(total), tty_(::isatty(2) != 0) {}
  void update(int done, double spent_s) {
    if (!on_ || !tty_) return;
    constexpr int kWidth = 30;
    const int filled = total_ > 0 ? done * kWidth / total_ : kWidth;
    const double eta = done > 0 ? spent_s / done * (total_ - done) : 0;
    std::fputs(fmt::format("\r[smelt max-autotune] [{}{}] {}/{} steps, {:.1f} s, ETA {:.1f} s ",
                           std::string(static_cast<size_t>(filled), '#'),
                           std::string(static_cast<size_t>(kWidth - filled), '-'), done, total_,
                           spent_s, eta)
                   .c_str(),
               stderr);
    std::fflush(stderr);
  }
  void finish(const AutotuneResult& r) {
    if (!on_) return;
    std::fputs(
        fmt::format("{}[smelt max-autotune] {} kernel(s) and {} GEMM(s) tuned ({} candidates, {} "
                    "disagreed), {} layout(s) and {} GEMM algorithm(s) changed, in {:.1f} s{}\n",
                    tty_ ? "\r" : "", r.tuned - r.gemms_tuned, r.gemms_tuned, r.candidates,
                    r.rejected, r.changed, r.gemms_changed, r.ms / 1000,
                    r.out_of_budget ? " (time budget spent: the rest keep their heuristic "
                                      "layouts)"
                                    : "")
            .c_str(),
        stderr);
    std::fflush(stderr);
  }

 private:
  bool on_;
  int total_;
  bool tty_;
};

/// One kernel to tune: its candidates (the heuristic first) as steps of
/// their own (named apart, sources generated), and the cache key.
struct Tuning {
  size_t step = 0;
  std::string key;
  std::vector<Step> candidates;
  std::shared_ptr<backend::Module> module;  // holds candidates 1.. (built in batches)
};

/// Milliseconds per launch of `launch()` in `stream`, by CUDA events after
/// one warm-up launch.
template <class Launch>
double time_launches(backend::Backend& be, backend::Stream stream, const Launch& launch) {
  launch();  // warm-up (its outputs are the ones checked)
  backend::Event start = be.create_event(true), end = be.create_event(true);
  auto measure = [&](int reps) {
    be.record(start, stream);
    for (int r = 0; r < reps; ++r) launch();
    be.record(end, stream);
    be.event_synchronize(end);
    return static_cast<double>(be.elapsed_ms(start, end)) / reps;
  };
  const double once = measure(1);
  const int reps = static_cast<int>(std::clamp(1.0 / std::max(once, 1e-3), 1.0, 100.0));
  const double ms = reps > 1 ? measure(reps) : once;
  be.destroy_event(start);
  be.destroy_event(end);
  return ms;
}

/// The most library algorithms timed per GEMM.
constexpr int kGemmCandidates = 8;
/// The stored choice of a GEMM whose library offers no algorithms to pick.
constexpr const char* kNoGemmChoice = "algorithm=none";

/// Times GEMM step `step` of the walk with each algorithm its backend offers
/// (on the walk's buffers: its operands are the real ones) against the
/// library's own choice, and returns the fastest whose result agrees with it
/// (-1: the library's own); nullopt when the backend offers none for it (a
/// GEMM cuBLASLt does not run as one call). The step's output holds the
/// library choice's result again afterwards (later steps read it).
std::optional<int> tune_gemm_step(const CompiledGraph& walk, size_t step, const RunBuffers& rb,
                                  backend::Stream stream, backend::Backend& be,
                                  AutotuneResult& res) {
  const Step& st = walk.schedule().steps[step];
  const int count = walk.gemm_algorithm_count(st, rb, kGemmCandidates);
  if (count == 0) return std::nullopt;
  const Buffer& out = walk.graph().buffers[static_cast<size_t>(st.writes[0])];
  const int64_t n = std::max<int64_t>(1, out.extent);
  const Device device = walk.device();
  const double base_ms = time_launches(be, stream, [&] { walk.run_gemm_step(st, rb, stream); });
  const std::vector<double> want = host_values(rb.ptr[out.id], n, out.dtype, device);
  int best = -1;
  double best_ms = base_ms;
  std::string line;
  for (int k = 0; k < count; ++k) {
    Step c = st;
    c.gemm_algorithm = k;
    const double ms = time_launches(be, stream, [&] { walk.run_gemm_step(c, rb, stream); });
    ++res.candidates;
    const std::string why =
        disagreement(host_values(rb.ptr[out.id], n, out.dtype, device), want, out.dtype);
    if (!why.empty()) {
      ++res.rejected;
      line += fmt::format("    rejected algorithm {}: {}\n", k, why);
      continue;
    }
    if (ms < best_ms) {
      best = k;
      best_ms = ms;
    }
  }
  walk.run_gemm_step(st, rb, stream);  // the library choice's result, for the steps after
  res.log += fmt::format(
      "  {}: library choice {:.4f} ms -> {} {:.4f} ms ({} algorithms)\n{}", st.name, base_ms,
      best < 0 ? std::string("kept") : fmt::format("algorithm {}", best), best_ms, count, line);
  return best;
}

}  // namespace

std::string autotune_key(const Step& st, const std::string& device_name) {
  // The kernel's name is left out of its source: the same kernel in another
  // graph (numbered differently) shares the choice.
  std::string source = st.source;
  for (size_t at = source.find(st.name); at != std::string::npos; at = source.find(st.name, at + 1))
    source.replace(at, st.name.size(), "KERNEL");
  uint64_t h = fnv1a(source);
  h = fnv1a(fmt::format("|shape {} rdims {}|", detail::shape_str(st.group.shape),
                        detail::shape_str(st.group.rdims)),
            h);
  h = fnv1a(device_name, h);
  h = fnv1a(kAutotuneVersion, h);
  return fmt::format("{:016x}", h);
}

std::string gemm_autotune_key(const Graph& g, const Step& st, const std::string& device_name) {
  const Node& n = g.nodes[static_cast<size_t>(st.node)];
  std::string desc = fmt::format("gemm {} bias {} act {} residual {} prologue {} out {}", n.op,
                                 st.bias >= 0, st.activation, st.residual >= 0, st.cast_prologue,
                                 dtype_name(g.buffers[static_cast<size_t>(st.writes[0])].dtype));
  for (const Operand& in : n.inputs)
    if (!in.is_scalar())
      desc += fmt::format("|{} {} {} {}", dtype_name(in.dtype), detail::shape_str(in.sizes),
                          detail::shape_str(in.strides), in.offset);
  uint64_t h = fnv1a(desc);
  h = fnv1a(device_name, h);
  h = fnv1a(kAutotuneVersion, h);
  return fmt::format("{:016x}", h);
}

std::string load_autotune_choice(const std::string& key) {
  try {
    bool ok = false;
    std::string text = read_file(tune_path(key), &ok);
    if (!ok) return "";
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    return text.find('\n') == std::string::npos ? text : "";
  } catch (const Error&) {  // no usable cache directory: nothing stored
    return "";
  }
}

void store_autotune_choice(const std::string& key, const std::string& choice) {
  try {
    write_atomic(tune_path(key), choice + "\n");
  } catch (const Error&) {  // a choice not stored is measured again next time
  }
}

const KernelConfig* find_candidate(const std::vector<KernelConfig>& candidates,
                                   const std::string& choice) {
  for (const KernelConfig& c : candidates)
    if (c.str() == choice) return &c;
  return nullptr;
}

void apply_config(const Graph& g, const Schedule& s, Step& st, const KernelConfig& c,
                  const Dialect& dialect) {
  if (st.config == c) return;
  st.config = c;
  if (st.group.reduction && !st.group.scan) {
    const std::string kind = c.persistent ? "per" : "red";
    const std::string from = fmt::format("_{}_fused_", st.kernel_kind);
    if (const size_t at = st.name.find(from); at != std::string::npos)
      st.name.replace(at, from.size(), fmt::format("_{}_fused_", kind));
    st.kernel_kind = kind;
  }
  generate_kernel(g, s, st, dialect);
}

AutotuneResult autotune(const Graph& g, Schedule& s, const Dialect& dialect,
                        const std::shared_ptr<backend::Module>& heuristic,
                        const std::vector<Tensor>& args, const std::vector<Tensor>& params,
                        const AutotuneOptions& options) {
  const auto t0 = Clock::now();
  AutotuneResult res;
  const Device device = g.device();
  backend::Backend& be = backend::backend(device);
  backend::DeviceGuard on_device(device);
  const std::string model = be.device_name(device);
  // 1. Stored choices; the rest are tuned.
  std::vector<Tuning> todo;
  std::map<size_t, KernelConfig> chosen;    // step -> layout
  std::map<size_t, std::string> gemm_todo;  // GEMM step -> its key, to tune
  std::map<size_t, int> chosen_gemm;        // GEMM step -> algorithm
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& st = s.steps[i];
    if (st.kind == Step::Kind::Extern && be.gemm_algorithms_tunable()) {
      ++res.gemms;
      const std::string key = gemm_autotune_key(g, st, model);
      const std::string stored = load_autotune_choice(key);
      int k = -1;
      if (stored == kNoGemmChoice) continue;  // nothing to choose from: the library's own
      if (std::sscanf(stored.c_str(), "algorithm=%d", &k) == 1 && k >= -1) {
        chosen_gemm[i] = k;
        ++res.cache_hits;
      } else {
        gemm_todo[i] = key;
      }
      continue;
    }
    if (st.kind != Step::Kind::Kernel) continue;
    ++res.kernels;
    // A kernel that writes a result into the memory of a buffer it reads
    // (Step::in_place) keeps its layout: timed repeatedly it would read its
    // own results, and its candidates would write where the agreement check
    // does not look.
    if (!st.in_place.empty()) continue;
    const std::vector<KernelConfig> cands = candidate_configs(st.group, st.config);
    Tuning t;
    t.step = i;
    t.key = autotune_key(st, model);
    if (const KernelConfig* c = find_candidate(cands, load_autotune_choice(t.key))) {
      chosen[i] = *c;
      ++res.cache_hits;
      continue;
    }
    if (cands.size() < 2) continue;
    for (size_t k = 0; k < cands.size(); ++k) {
      Step c = st;
      if (k > 0) {
        c.name = fmt::format("{}_at{}", st.name, k);
        c.config = cands[k];
        generate_kernel(g, s, c, dialect);
      }
      t.candidates.push_back(std::move(c));
    }
    todo.push_back(std::move(t));
  }
  Progress progress(options.progress, static_cast<int>(todo.size() + gemm_todo.size()));
  auto over_budget = [&] { return options.budget_s > 0 && seconds_since(t0) > options.budget_s; };
  // 2. The walk: the heuristic layouts run every step into memory of the
  // walk's own; each kernel to tune is timed with its candidates right after
  // it ran (what it reads is still there).
  if (!todo.empty() || !gemm_todo.empty()) {
    CompiledGraph walk(Graph(g), Schedule(s), heuristic, false);
    const backend::Stream stream = be.current_stream(device);
    RunBuffers rb = walk.bind(args, params, walk.allocate_arena());
    // A buffer updated in place into a parameter or argument (an optimizer's
    // step) gets memory of its own: nothing the caller passed is written. (A
    // pointwise result written into an intermediate's memory keeps it: its
    // kernel writes there.)
    for (const Buffer& b : g.buffers)
      if (const int into = walk.memory().in_place[b.id];
          into >= 0 && g.buffers[static_cast<size_t>(into)].kind != BufferKind::Node) {
        rb.owned[b.id] = detail::make_empty({std::max<int64_t>(1, b.extent)}, b.dtype, device);
        rb.ptr[b.id] = rb.owned[b.id].data_ptr();
      }
    walk.clear_errors(rb, stream);
    Tensor flag = detail::make_empty({1}, DType::Int32, device);  // candidates' error flag
    std::map<size_t, Tuning*> tuning_of;
    for (auto& t : todo) tuning_of[t.step] = &t;
    size_t next_batch = 0;  // the first kernel of todo whose candidates are not built
    int done = 0;
    const int total = static_cast<int>(todo.size() + gemm_todo.size());
    for (size_t i = 0; i < s.steps.size() && done < total; ++i) {
      const Step& st = walk.schedule().steps[i];
      for (int b : st.writes) walk.allocate(rb, b);
      auto it = tuning_of.find(i);
      if (it == tuning_of.end()) {
        walk.run_step(i, rb, stream);
        if (auto k = gemm_todo.find(i); k != gemm_todo.end() && !over_budget()) {
          if (const std::optional<int> algo = tune_gemm_step(walk, i, rb, stream, be, res)) {
            chosen_gemm[i] = *algo;
            ++res.tuned;
            ++res.gemms_tuned;
            store_autotune_choice(k->second, fmt::format("algorithm={}", *algo));
          } else {
            store_autotune_choice(k->second, kNoGemmChoice);
          }
          ++done;
          progress.update(done, seconds_since(t0));
        }
        continue;
      }
      Tuning& t = *it->second;
      if (over_budget()) {
        res.out_of_budget = true;
        break;
      }
      // Candidates are built a batch of kernels at a time (the units of a
      // batch side by side).
      if (!t.module) {
        const size_t batch = static_cast<size_t>(build_parallelism());
        Schedule units_of;
        std::vector<Tuning*> members;
        for (; next_batch < todo.size() && members.size() < batch; ++next_batch) {
          members.push_back(&todo[next_batch]);
          for (size_t k = 1; k < todo[next_batch].candidates.size(); ++k)
            units_of.steps.push_back(todo[next_batch].candidates[k]);
        }
        std::vector<KernelUnit> units =
            split_units(units_of, dialect.preamble(), build_parallelism(), kCudaUnitLines);
        backend::BuildInfo bi;
        std::shared_ptr<backend::Module> m = build_units(units, be, device, kernel_cache(), &bi);
        for (Tuning* member : members) member->module = m;
        if (over_budget()) {
          res.out_of_budget = true;
          break;
        }
      }
      // The heuristic layout: its outputs are the step's (later steps read them).
      const double base_ms = time_launches(be, stream, [&] { walk.run_step(i, rb, stream); });
      std::vector<std::vector<double>> want;
      for (int b : st.writes)
        want.push_back(host_values(rb.ptr[b], std::max<int64_t>(1, g.buffers[b].extent),
                                   g.buffers[b].dtype, device));
      std::map<int, Tensor> scratch;  // buffer -> a candidate's output
      for (int b : st.writes)
        scratch[b] = detail::make_empty({std::max<int64_t>(1, g.buffers[b].extent)},
                                        g.buffers[b].dtype, device);
      size_t best = 0;
      double best_ms = base_ms;
      std::string line;
      for (size_t k = 1; k < t.candidates.size(); ++k) {
        const Step& c = t.candidates[k];
        std::vector<void*> kargs;
        for (int b : c.reads) kargs.push_back(rb.ptr[b]);
        for (int b : c.writes) kargs.push_back(scratch[b].data_ptr());
        if (!c.error_ops.empty()) kargs.push_back(flag.data_ptr());
        backend::LaunchConfig lc;
        lc.grid[0] = static_cast<uint32_t>(std::max<int64_t>(1, c.config.grid));
        lc.block[0] = static_cast<uint32_t>(std::max(1, c.config.block_size));
        lc.num_args = kargs.size();
        const backend::KernelHandle kernel = t.module->function(c.name);
        const double ms =
            time_launches(be, stream, [&] { be.launch(kernel, kargs.data(), lc, stream); });
        ++res.candidates;
        std::string why;
        for (size_t w = 0; w < c.writes.size() && why.empty(); ++w) {
          const int b = c.writes[w];
          const size_t at = static_cast<size_t>(std::find(st.writes.begin(), st.writes.end(), b) -
                                                st.writes.begin());
          why = disagreement(
              host_values(scratch[b].data_ptr(), std::max<int64_t>(1, g.buffers[b].extent),
                          g.buffers[b].dtype, device),
              want[at], g.buffers[b].dtype);
        }
        if (!why.empty()) {
          ++res.rejected;
          line += fmt::format("    rejected {}: {}\n", c.config.str(), why);
          continue;
        }
        if (ms < best_ms) {
          best = k;
          best_ms = ms;
        }
      }
      chosen[t.step] = t.candidates[best].config;
      store_autotune_choice(t.key, t.candidates[best].config.str());
      ++res.tuned;
      res.log += fmt::format("  {}: {} {:.4f} ms -> {} {:.4f} ms ({} candidates)\n{}", st.name,
                             st.config.str(), base_ms,
                             best == 0 ? "kept" : t.candidates[best].config.str(), best_ms,
                             t.candidates.size(), line);
      ++done;
      progress.update(done, seconds_since(t0));
    }
    be.synchronize(stream);  // the walk's memory goes back after its work
  }
  // 3. The choices, into the schedule.
  for (auto& [i, k] : chosen_gemm) {
    s.steps[i].gemm_algorithm = k;
    if (k >= 0) ++res.gemms_changed;
  }
  for (auto& [i, c] : chosen) {
    Step& st = s.steps[i];
    if (st.config == c) continue;
    apply_config(g, s, st, c, dialect);
    ++res.changed;
  }
  res.ms = seconds_since(t0) * 1000;
  if (!todo.empty() || !gemm_todo.empty()) progress.finish(res);
  return res;
}

}  // namespace smelt::compiler
