// Mode "max-autotune" on CUDA: each generated kernel's candidate layouts
// (fusion/kernel_config.h: candidate_configs) are built and timed on the
// compiled call's own tensors, and the fastest whose results agree with the
// heuristic layout's is kept (Inductor's max-autotune for its Triton configs).
//
//  * Real buffers, nothing overwritten: the graph's steps run in order with
//    the heuristic layouts (so every kernel reads what it reads in a call),
//    intermediates in memory of their own; arguments, parameters and
//    constants are only read (no write-back, no in-place update of a
//    parameter). At a kernel being tuned, each candidate writes its outputs
//    into scratch buffers.
//  * Timing: CUDA events around `reps` launches after a warm-up launch, reps
//    chosen so that a measurement takes about a millisecond (1 to 100).
//  * Agreement: every output of a candidate equals the heuristic layout's
//    within a tolerance of its dtype, relative to the output's largest
//    magnitude (1e-4 float32, 1e-2 float16/bfloat16, 1e-10 float64; exact for
//    integers and bool; NaN where NaN): layouts only reassociate sums.
//  * Disk cache: the choice is stored beside the kernel cache as
//    <cache_dir>/<key>.tune, holding the chosen layout's printable form
//    (KernelConfig::str()). The key hashes the heuristic kernel's source
//    (its name left out: the same kernel in another graph shares it; the
//    sizes are in the source), its group's shape and reduced dims, the
//    device's model and compute capability, and the autotuner's version. A
//    stored choice is used only when it is one of the kernel's candidates;
//    a second compile of the same kernel benchmarks nothing.
//  * Budget: CompileOptions::autotune_budget_s bounds the stage; the kernels
//    it does not reach keep their heuristic layout (and nothing is stored
//    for them). Candidates are built a batch of kernels at a time, so the
//    budget is checked between builds as well as between benchmarks.
//  * Progress: while it benchmarks, a bar with the kernels done, the time
//    spent and an estimate of the time left, on stderr (redrawn in place on a
//    terminal; otherwise one line when done).
//  * GEMMs (Extern steps) are not tuned yet: tune_gemm_step() (autotune.cpp),
//    called at each one during the walk, is where the cuBLASLt heuristic's
//    algorithm candidates (backend/cuda/blaslt.h: gemm_algorithms,
//    gemm_with_algorithm) will be timed on the same buffers once
//    backend::Backend offers them.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "compiler/codegen/printer.h"
#include "compiler/fusion/schedule.h"

namespace smelt::compiler {

/// Bumped when candidates or their measurement change (invalidates stored choices).
inline constexpr const char* kAutotuneVersion = "autotune-1";

struct AutotuneOptions {
  /// Seconds the stage may take (candidate builds and benchmarks); <= 0: no limit.
  double budget_s = 60;
  /// The progress bar on stderr.
  bool progress = true;
};

struct AutotuneResult {
  int kernels = 0;        // kernel steps of the schedule
  int cache_hits = 0;     // choices loaded from the disk cache (kernels and GEMMs)
  int tuned = 0;          // kernels and GEMMs benchmarked
  int changed = 0;        // kernels whose layout is no longer the heuristic's
  int candidates = 0;     // candidate layouts (and GEMM algorithms) timed
  int rejected = 0;       // candidates whose results disagreed with the heuristic's
  int gemms = 0;          // GEMM steps whose library offers algorithms to choose from
  int gemms_tuned = 0;    // GEMMs benchmarked (also counted in `tuned`)
  int gemms_changed = 0;  // GEMMs that run another algorithm than the library's own choice
  bool out_of_budget = false;
  double ms = 0;  // wall time of the stage
  /// One line per kernel benchmarked (heuristic and chosen layout, times) and
  /// per GEMM (the library's choice and the chosen algorithm, times).
  std::string log;
};

/// The disk-cache key of kernel step `st` (heuristic config, source filled)
/// on the device model `device_name` (Backend::device_name).
std::string autotune_key(const Step& st, const std::string& device_name);

/// The disk-cache key of GEMM step `st` of `g` (its operands' shapes,
/// strides and dtypes, its epilogue and prologue) on `device_name`.
std::string gemm_autotune_key(const Graph& g, const Step& st, const std::string& device_name);

/// The stored choice for `key` (a KernelConfig::str(), or a GEMM's
/// "algorithm=<k>"), "" when none.
std::string load_autotune_choice(const std::string& key);
/// Stores `choice` for `key`; failures (a full disk) are ignored.
void store_autotune_choice(const std::string& key, const std::string& choice);

/// The candidate of `candidates` whose printable form is `choice`, or null.
const KernelConfig* find_candidate(const std::vector<KernelConfig>& candidates,
                                   const std::string& choice);

/// Gives kernel step `st` of `s` layout `c`: config, source and argument order
/// regenerated in `dialect`; a reduction's name says whether it is persistent
/// (cuda_per_..., cuda_red_...).
void apply_config(const Graph& g, const Schedule& s, Step& st, const KernelConfig& c,
                  const Dialect& dialect);

/// Tunes the kernels of `s` (CUDA; heuristic configs and sources, built into
/// `heuristic`) on `args` and `params` (the call's tensors, only read): each
/// kernel gets its stored choice, or the fastest agreeing candidate, its
/// config and source replaced. The caller rebuilds the kernels when
/// AutotuneResult::changed > 0.
AutotuneResult autotune(const Graph& g, Schedule& s, const Dialect& dialect,
                        const std::shared_ptr<backend::Module>& heuristic,
                        const std::vector<Tensor>& args, const std::vector<Tensor>& params,
                        const AutotuneOptions& options);

}  // namespace smelt::compiler
