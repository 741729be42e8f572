// Translation units of a graph's generated kernels. The kernels of a graph
// are one unit while their source is short; a long source (a graph of tens of
// thousands of ops) is split into several units, kernels kept whole and in
// order, which the C++ compiler builds at the same time on separate cores. The
// result is one module that finds each kernel in the unit that defines it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "compiler/fusion/schedule.h"

namespace smelt::compiler {

/// Source lines per unit below which a long source is not split further
/// (each unit pays the compiler's start and the preamble, ~0.3 s with g++).
inline constexpr int64_t kUnitLines = 4000;
/// The same for NVRTC, whose start and preamble cost ~0.1 s while ptxas
/// takes about as long for each unrolled reduction kernel: a graph of a few
/// kernels already builds them side by side.
inline constexpr int64_t kCudaUnitLines = 50;

/// One translation unit: the dialect's preamble and the source of some kernels.
struct KernelUnit {
  std::string source;
  std::vector<std::string> kernels;  // names of the kernels it defines
};

/// The kernel steps of `s` (their Step::source) after `preamble`, in order,
/// in min(`parallel`, lines / `unit_lines`) units (at least one) of about
/// equal length. No unit when `s` has no kernel.
std::vector<KernelUnit> split_units(const Schedule& s, const std::string& preamble, int parallel,
                                    int64_t unit_lines = kUnitLines);

/// The kernel steps of `s` after `preamble`, the first kernels_per_unit[0]
/// in the first unit, the next kernels_per_unit[1] in the second, and so on
/// (split_units chooses the counts; a cached plan records them).
std::vector<KernelUnit> join_units(const Schedule& s, const std::string& preamble,
                                   const std::vector<size_t>& kernels_per_unit);

/// How many units may build at once: the machine's hardware threads, at most 8.
int build_parallelism();

/// Builds (or loads from `cache`) every unit through `be` for `device` (the
/// current device of every building thread), the units at the same time, and returns one module
/// whose function() finds any of their kernels. `info`: cache_hit when every unit came from the
/// cache, build_ms the longest compiler run (they run at the same time), key and source_path those
/// of each unit joined by ", ". Rethrows the first unit's failure after all
/// finished.
std::shared_ptr<backend::Module> build_units(const std::vector<KernelUnit>& units,
                                             backend::Backend& be, Device device,
                                             backend::ModuleCache& cache, backend::BuildInfo* info);

}  // namespace smelt::compiler
