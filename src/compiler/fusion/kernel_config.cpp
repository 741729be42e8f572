// KernelConfig's value semantics and the default heuristic that chooses one
// per kernel group (see kernel_config.h).
#include "compiler/fusion/kernel_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "compiler/fusion/legality.h"
#include "core/tensor_impl.h"

namespace smelt::compiler {

const char* target_name(Target t) { return t == Target::Cuda ? "cuda" : "cpp"; }

bool KernelConfig::operator==(const KernelConfig& o) const {
  return target == o.target && reduction == o.reduction && scan == o.scan &&
         scan_lanes == o.scan_lanes && tile_rows == o.tile_rows && parallel == o.parallel &&
         split == o.split && persistent == o.persistent && prefill == o.prefill &&
         round_intermediates == o.round_intermediates && index_bits == o.index_bits &&
         block_size == o.block_size && items_per_thread == o.items_per_thread;
}

size_t KernelConfig::hash() const {
  size_t h = std::hash<std::string>{}(str());
  return h;
}

std::string KernelConfig::str() const {
  std::string s = fmt::format("{} {}", target_name(target),
                              scan ? "scan" : (reduction ? "reduction" : "pointwise"));
  if (tile_rows) s += " tile_rows";
  if (parallel) s += " parallel";
  if (split) s += " split";
  if (persistent) s += " persistent";
  if (!prefill.empty()) s += fmt::format(" prefill={}", fmt::join(prefill, ","));
  if (scan_lanes) s += fmt::format(" lanes={}", scan_lanes);
  if (!round_intermediates) s += " no_rounding";
  s += fmt::format(" idx{}", index_bits);
  if (block_size) s += fmt::format(" block={}x{}", block_size, items_per_thread);
  return s;
}

namespace {

/// 32-bit indexing is enough when every buffer the kernel touches and its
/// iteration space have fewer than 2^31 elements.
int index_bits_for(const Graph& g, const std::vector<int>& buffers, int64_t numel) {
  int64_t most = numel;
  for (int b : buffers) most = std::max(most, g.buffers[b].extent);
  return most < (int64_t{1} << 31) ? 32 : 64;
}

}  // namespace

KernelConfig choose_config(const Graph& g, const KernelGroup& group, const GroupFootprint& fp,
                           Target target, bool round_intermediates) {
  KernelConfig c;
  c.target = target;
  c.round_intermediates = round_intermediates;
  c.reduction = group.reduction;
  const Shape& s = group.shape;
  const int64_t n = detail::shape_numel(s);
  std::vector<int> touched = fp.reads;
  for (int st : group.stores) touched.push_back(g.nodes[st].outputs[0]);
  // The CPU indexes with int64_t (loops over 64-bit counters vectorize as
  // well); the GPU uses 32-bit arithmetic when bounds allow.
  c.index_bits = target == Target::Cuda ? index_bits_for(g, touched, n) : 64;
  if (!group.reduction) {
    const int64_t last = s.empty() ? 1 : s.back();
    const int64_t rows = last > 0 ? n / last : 0;
    if (target == Target::Cuda) {
      c.parallel = true;
      c.block_size = 256;
      c.items_per_thread = 4;
      return c;
    }
    c.tile_rows = s.size() >= 2 && last >= 16 && rows >= 2;
    c.parallel = n >= kJitParallelGrain;
    return c;
  }
  int64_t rn = 1;
  for (auto d : group.rdims) rn *= s[d];
  const int64_t outer = rn > 0 ? n / rn : 0;
  if (group.scan) {
    // A row's steps depend on each other: rows spread over threads, never
    // split (CUDA: one thread per row, a grid-stride loop over rows).
    c.scan = true;
    if (target == Target::Cuda) {
      c.parallel = true;
      c.block_size = 256;
      c.items_per_thread = 1;
      return c;
    }
    // Rows along inner positions are scanned side by side: the largest count
    // of them up to kScanLanes that divides the inner positions (a large scan
    // keeps about 16 groups of rows or more for the threads).
    int64_t inner = 1;
    if (!group.rdims.empty())
      for (size_t k = static_cast<size_t>(group.rdims[0]) + 1; k < s.size(); ++k) inner *= s[k];
    const int64_t most =
        n >= kJitParallelGrain ? std::clamp<int64_t>(outer / 16, 64, kScanLanes) : kScanLanes;
    int64_t lanes = std::min(inner, most);
    while (lanes > 1 && inner % lanes != 0) --lanes;
    c.scan_lanes = lanes > 1 ? lanes : 0;
    c.parallel = outer / std::max<int64_t>(1, c.scan_lanes) > 1 && n >= kJitParallelGrain;
    // One scan along rows that fit: its computed element and its consumers
    // get loops of their own over the row, which vectorize (row buffers).
    c.persistent = !c.scan_lanes && group.reductions.size() == 1 && !group.rdims.empty() &&
                   rn > 0 && rn <= kPersistentRow &&
                   (fp.computed_element[0] || !group.stores.empty());
    if (c.persistent && fp.computed_element[0]) c.prefill.push_back(group.reductions[0]);
    return c;
  }
  c.split = outer < kSplitRowsBelow && rn >= kJitParallelGrain;
  c.parallel = !c.split && outer > 1 && outer * rn >= kJitParallelGrain;
  c.persistent = rn <= kPersistentRow;
  if (c.persistent && !c.split)
    for (size_t k = 0; k < group.reductions.size(); ++k)
      if (fp.computed_element[k]) c.prefill.push_back(group.reductions[k]);
  return c;
}

}  // namespace smelt::compiler
