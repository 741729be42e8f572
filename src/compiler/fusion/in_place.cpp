// In-place buffer reuse for pointwise kernels (see in_place.h).
#include "compiler/fusion/in_place.h"

#include <algorithm>
#include <set>

#include "compiler/fusion/legality.h"
#include "ops/op_table.h"

namespace smelt::compiler {

namespace {

/// The nodes pointwise group `grp` computes: its stores and the producers
/// inlined into them.
std::vector<int> group_nodes(const Graph& g, const std::vector<bool>& materialized,
                             const KernelGroup& grp) {
  std::vector<int> stack = grp.stores;
  std::set<int> seen(stack.begin(), stack.end());
  while (!stack.empty()) {
    const int n = stack.back();
    stack.pop_back();
    for (const Operand& o : g.nodes[n].inputs) {
      if (o.is_scalar() || !computed_in(g, materialized, grp, o.buf)) continue;
      const int p = g.buffers[o.buf].producer;
      if (seen.insert(p).second) stack.push_back(p);
    }
  }
  return {seen.begin(), seen.end()};
}

/// True when the kernel of pointwise group `grp` reads buffer `b` only at
/// the flat position it computes (see plan_in_place_writes).
bool reads_in_order(const Graph& g, const std::vector<bool>& materialized, const KernelGroup& grp,
                    int b) {
  for (int n : group_nodes(g, materialized, grp)) {
    const Node& node = g.nodes[n];
    const detail::OpDef* def = detail::find_op(node.op);
    if (def == nullptr || def->kind != detail::OpKind::Pointwise) return false;
    for (int out : node.outputs)
      if (g.buffers[out].sizes != grp.shape) return false;
    for (const Operand& o : node.inputs) {
      if (o.is_scalar() || (o.buf != b && !computed_in(g, materialized, grp, o.buf))) continue;
      if (o.sizes != grp.shape || !is_whole_contiguous(o, g.buffers[o.buf])) return false;
    }
  }
  return true;
}

}  // namespace

void plan_in_place_writes(const Graph& g, Schedule& s) {
  const std::vector<bool> escaping = g.escaping();
  const std::vector<int> last_use = s.last_uses(g.buffers.size());
  const auto intermediate = [&](int b) {
    return g.buffers[b].kind == BufferKind::Node && !escaping[b];
  };
  for (size_t i = 0; i < s.steps.size(); ++i) {
    Step& st = s.steps[i];
    st.in_place.clear();
    if (st.kind != Step::Kind::Kernel || st.group.reduction || st.group.scan) continue;
    // Only the kernel's last store: the stores before it, and the loads
    // their values need, are printed before it, so nothing the kernel reads
    // at an element is loaded after that element's memory was overwritten.
    if (st.group.stores.empty()) continue;
    const int last = g.nodes[st.group.stores.back()].outputs[0];
    std::vector<bool> taken(g.buffers.size(), false);
    for (int w : st.writes) {
      const Buffer& out = g.buffers[w];
      if (w != last || !intermediate(w) || out.sizes != st.group.shape) continue;
      for (int r : st.reads) {
        const Buffer& in = g.buffers[r];
        if (taken[r] || !intermediate(r) || last_use[r] != static_cast<int>(i) ||
            std::find(st.writes.begin(), st.writes.end(), r) != st.writes.end() ||
            in.extent != out.extent || in.dtype != out.dtype ||
            !reads_in_order(g, s.materialized, st.group, r))
          continue;
        st.in_place.emplace_back(r, w);
        taken[r] = true;
        break;
      }
    }
  }
}

}  // namespace smelt::compiler
