// Graph passes, run in order by compile(): dead-code elimination, common-
// subexpression elimination, decomposition of composite ops into primitives
// and constant folding. They all work by *replaying* the graph into a fresh
// GraphBuilder (decompositions are ordinary tensor code that records the
// primitives it calls), so every pass keeps the graph's invariants for free.
#pragma once
#include <optional>
#include <string>

#include "compiler/graph/graph.h"

namespace smelt::compiler {

struct PassOptions {
  bool dce = true;
  bool cse = true;
  bool decompose = true;
  bool fold_constants = true;
  /// When no pass would change the graph (nothing dead, composite, foldable
  /// or repeated, no write-backs), return it as it is instead of replaying it
  /// into an identical copy. false: always replay (tests compare the two).
  bool keep_unchanged = true;
  /// The device type whose backend decides which composite ops stay whole
  /// (Backend::has_fused_attention); unset: the graph's own device.
  /// `smelt bench --codegen-only` plans CPU placeholders for CUDA.
  std::optional<DeviceType> planned_for = std::nullopt;
};

/// Statistics of one run_passes call, for the `graph` log.
struct PassStats {
  int removed_dead = 0;
  int merged_common = 0;
  int decomposed = 0;
  int folded = 0;
  std::string str() const;
};

/// Returns the graph after the enabled passes (the input is not modified).
Graph run_passes(const Graph& g, const PassOptions& opts, PassStats* stats = nullptr);
/// The same, moving `g` into the result when no pass changes it.
Graph run_passes(Graph&& g, const PassOptions& opts, PassStats* stats = nullptr);

/// True when some node of `g` is a composite op that decomposition expands.
bool has_composites(const Graph& g);

/// Indices of the nodes whose results reach an output or a write-back.
std::vector<bool> live_nodes(const Graph& g);

}  // namespace smelt::compiler
