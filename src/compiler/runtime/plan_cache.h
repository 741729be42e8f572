// The on-disk cache of compiled plans: for a graph after the passes, its
// schedule (steps with their kernels' arguments and source, materialized
// buffers) and how its kernels split into translation units. A compile whose
// graph was compiled before, in this process or another, loads the plan and
// skips lowering, fusion and code generation; the units' binaries then come
// from the kernel cache (runtime/kernel_cache.h), keyed by their source as
// always.
//
// A plan is keyed by Graph::hash(), the options that shape the schedule and
// code (fusion switches, target) and the identity of this smelt build (its
// version and the size and modification time of the library file), so that a
// rebuilt smelt never loads a plan an older scheduler or code generator made.
// Plans live in the kernel cache's directory as <key>.plan: the length of a
// JSON header on the first line, the header, then the kernels' source back to
// back and the fusion decisions one per line (read without unescaping). They
// are written under a temporary name and renamed; one that cannot be read or
// does not fit the graph is ignored and rewritten.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "compiler/fusion/schedule.h"
#include "compiler/runtime/units.h"

namespace smelt::compiler {

/// The plan cache key of graph `g` compiled with `options` (a string naming
/// every option that changes the schedule or the generated code).
std::string plan_key(const Graph& g, const std::string& options);

struct CachedPlan {
  /// Step::source filled; reads/writes in kernel argument order.
  Schedule schedule;
  /// Kernels per translation unit, in step order (see join_units).
  std::vector<size_t> unit_kernels;
};

/// The plan stored under `key` for graph `g`, or nothing when there is none
/// or it cannot be used (unreadable, or its buffers and nodes do not fit `g`).
/// Schedule::decisions (the fusion log) is read only when `with_decisions`.
std::optional<CachedPlan> load_plan(const std::string& key, const Graph& g, bool with_decisions);

/// Stores `s` and the units' kernel counts under `key`. Failures (a full
/// disk) are ignored: the plan is only an optimization.
void store_plan(const std::string& key, const Schedule& s, const std::vector<KernelUnit>& units);

}  // namespace smelt::compiler
