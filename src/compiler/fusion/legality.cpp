// Fusion legality from the graph and symbolic indices (see legality.h). The
// walk over inlined producers is iterative (an explicit stack), so a chain of
// any length is checked without deep recursion, and each (node, index) pair is
// visited once.
#include "compiler/fusion/legality.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "compiler/lower/movement.h"
#include "core/tensor_impl.h"

namespace smelt::compiler {

namespace {
std::string index_str(const std::vector<IndexExpr>& v) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : ", ") + x.str();
  return "[" + s + "]";
}

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

int position(const std::vector<int>& v, int x) {
  auto it = std::find(v.begin(), v.end(), x);
  return it == v.end() ? -1 : static_cast<int>(it - v.begin());
}

int64_t kept_numel(const KernelGroup& grp) {
  int64_t outer = 1;
  for (size_t k = 0; k < grp.shape.size(); ++k)
    if (std::find(grp.rdims.begin(), grp.rdims.end(), static_cast<int64_t>(k)) == grp.rdims.end())
      outer *= grp.shape[k];
  return outer;
}

int64_t reduced_numel(const KernelGroup& grp) {
  int64_t rn = 1;
  for (auto d : grp.rdims) rn *= grp.shape[d];
  return rn;
}

/// Walks the values node `root` computes at `at`, through every inlined
/// producer. `reader_pos`: the position of the reading reduction in
/// group.reductions (reductions read at that point only completed ones), or
/// the number of reductions for stores (all complete).
struct Walk {
  const Graph& g;
  const std::vector<bool>& mat;
  const KernelGroup& grp;
  std::set<int> reads;
  std::set<std::string> ops;
  std::set<int> stores_reached;  // group stores (buffers) read by the walk
  bool computed = false;         // some op other than a conversion was inlined
  std::map<int, std::vector<std::vector<IndexExpr>>> seen;

  bool visit_once(int node, const Index& at) {
    auto& v = seen[node];
    for (auto& s : v)
      if (s == at.vars) return false;
    v.push_back(at.vars);
    return true;
  }

  FusionDecision run(int root, const Index& at, int reader_pos) {
    std::vector<std::pair<int, Index>> stack{{root, at}};
    while (!stack.empty()) {
      auto [ni, it] = std::move(stack.back());
      stack.pop_back();
      const Node& n = g.nodes[ni];
      if (ni != root) {
        if (n.op != "to_dtype" && n.op != "clone") computed = true;
      }
      if (classify(n) != LoopKind::Reduction) ops.insert(n.op == "to_dtype" ? "convert" : n.op);
      // Each input is read at the node's index (broadcast), or, for an index
      // map (lower/movement.h), where the map says; a data-dependent position
      // is any valid one.
      std::vector<std::pair<int, Index>> inputs;
      if (is_index_map(n)) {
        MovementLowering m =
            lower_movement(g, n, it, [&](int input, const Index& at, int64_t extent) {
              inputs.emplace_back(input, at);
              return IndexExpr::var("index_value", std::max<int64_t>(1, extent));
            });
        for (auto& r : m.reads) inputs.emplace_back(r.input, r.at);
      } else {
        for (size_t k = 0; k < n.inputs.size(); ++k) inputs.emplace_back(static_cast<int>(k), it);
      }
      for (auto& [k, at] : inputs) {
        const Operand& o = n.inputs[k];
        if (o.is_scalar()) continue;
        const Buffer& b = g.buffers[o.buf];
        if (b.kind == BufferKind::Node && contains(grp.reductions, b.producer) &&
            classify(g.nodes[b.producer]) == LoopKind::Scan) {
          const Node& r = g.nodes[b.producer];
          if (position(grp.reductions, b.producer) >= reader_pos)
            return FusionDecision::no(
                fmt::format("%{} ({}) is read before its scan steps", o.buf, r.op));
          // The scan's result lies in the domain's row-major layout: the read
          // is at the current step when its offset there is the step's (or,
          // per dim, its index is).
          Index cur = domain_index(grp.shape, grp.rdims,
                                   IndexExpr::var("o", std::max<int64_t>(1, row_count())),
                                   IndexExpr::var("r", std::max<int64_t>(1, scan_length())));
          const IndexExpr offset = operand_offset(o, at);
          if (offset != flat_index(cur) && producer_index(b.sizes, o, at).vars != cur.vars)
            return FusionDecision::no(fmt::format(
                "%{} ({}) is read at another position than the one scanned (at offset {}, the "
                "scan is at {})",
                o.buf, r.op, offset.str(), flat_index(cur).str()));
          continue;
        }
        if (b.kind == BufferKind::Node && contains(grp.reductions, b.producer) &&
            classify(g.nodes[b.producer]) == LoopKind::Reduction) {
          const Node& r = g.nodes[b.producer];
          int pos = position(grp.reductions, b.producer);
          if (pos >= reader_pos)
            return FusionDecision::no(
                fmt::format("%{} ({}) is read before its reduction completes", o.buf, r.op));
          Index p = producer_index(b.sizes, o, at);
          Index row = unflatten(b.sizes, IndexExpr::var("o", std::max<int64_t>(1, row_count())));
          if (p.vars != row.vars)
            return FusionDecision::no(fmt::format(
                "%{} ({}) is read at another row than the one reduced (at {}, the row is {})",
                o.buf, r.op, index_str(p.vars), index_str(row.vars)));
          continue;
        }
        if (computed_in(g, mat, grp, o.buf)) {
          const bool store = contains(grp.stores, b.producer);
          if (store) stores_reached.insert(o.buf);
          Index p = producer_index(b.sizes, o, at);
          // Another store read where the kernel computes it, by a store: a
          // value the kernel has, whose own reads were checked when it joined
          // and are walked for it (footprint) — not walked again here, so a
          // group whose stores read each other is checked in linear time.
          if (store && b.producer != root &&
              reader_pos == static_cast<int>(grp.reductions.size()) &&
              p.vars == member_index(g, grp, b.producer).vars)
            continue;
          if (visit_once(b.producer, p)) stack.emplace_back(b.producer, std::move(p));
          continue;
        }
        reads.insert(o.buf);
      }
    }
    return FusionDecision::yes("");
  }

  int64_t row_count() const { return grp.reduction ? kept_numel(grp) : 1; }
  int64_t scan_length() const { return reduced_numel(grp); }
};

}  // namespace

bool computed_in(const Graph& g, const std::vector<bool>& materialized, const KernelGroup& group,
                 int buf) {
  const Buffer& b = g.buffers[buf];
  if (b.kind != BufferKind::Node) return false;
  LoopKind k = classify(g.nodes[b.producer]);
  if (k == LoopKind::Pointwise) return !materialized[buf] || contains(group.stores, b.producer);
  if (k == LoopKind::Reduction || k == LoopKind::Scan)
    return contains(group.reductions, b.producer);
  return false;
}

Index member_index(const Graph& g, const KernelGroup& group, int node) {
  const Node& n = g.nodes[node];
  if (!group.reduction) {
    return unflatten(group.shape,
                     IndexExpr::var("i", std::max<int64_t>(1, detail::shape_numel(group.shape))));
  }
  IndexExpr row = IndexExpr::var("o", std::max<int64_t>(1, kept_numel(group)));
  IndexExpr r = IndexExpr::var("r", std::max<int64_t>(1, reduced_numel(group)));
  if (classify(n) == LoopKind::Reduction || classify(n) == LoopKind::Scan ||
      g.buffers[n.outputs[0]].sizes == group.shape)
    return domain_index(group.shape, group.rdims, row, r);
  return unflatten(g.buffers[n.outputs[0]].sizes, row);
}

FusionDecision can_join(const Graph& g, const std::vector<bool>& materialized,
                        const KernelGroup& group, int node) {
  const Node& n = g.nodes[node];
  KernelGroup grown = group;
  int reader_pos;
  const LoopKind kind = classify(n);
  const bool folds = kind == LoopKind::Reduction || kind == LoopKind::Scan;
  if (folds) {
    if (!group.reduction)
      return FusionDecision::no(
          fmt::format("a {} cannot join a pointwise kernel", loop_kind_name(kind)));
    if (group.scan != (kind == LoopKind::Scan))
      return FusionDecision::no(fmt::format("a {} cannot join a {} kernel", loop_kind_name(kind),
                                            group.scan ? "scan" : "reduction"));
    ReductionInfo info = reduction_info(g, n);
    if (info.in_sizes != group.shape || info.dims != group.rdims)
      return FusionDecision::no(fmt::format(
          "{} {} {} over {}, the kernel {} over {}", n.op, group.scan ? "scans" : "reduces",
          detail::shape_str(info.in_sizes), detail::shape_str(info.dims),
          detail::shape_str(group.shape), detail::shape_str(group.rdims)));
    grown.reductions.push_back(node);
    reader_pos = static_cast<int>(grown.reductions.size()) - 1;
  } else {
    const Shape& os = g.buffers[n.outputs[0]].sizes;
    if (!group.reduction && os != group.shape)
      return FusionDecision::no(fmt::format("{} has shape {}, the kernel iterates {}", n.op,
                                            detail::shape_str(os), detail::shape_str(group.shape)));
    if (group.reduction && os != group.shape && detail::shape_numel(os) != kept_numel(group))
      return FusionDecision::no(fmt::format("{} of shape {} is neither a row nor the domain {}",
                                            n.op, detail::shape_str(os),
                                            detail::shape_str(group.shape)));
    if (group.scan && os != group.shape)
      return FusionDecision::no(fmt::format("{} of shape {} does not iterate the scan's domain {}",
                                            n.op, detail::shape_str(os),
                                            detail::shape_str(group.shape)));
    grown.stores.push_back(node);
    reader_pos = static_cast<int>(grown.reductions.size());
  }
  Walk w{g, materialized, grown, {}, {}, {}, false, {}};
  FusionDecision d = w.run(node, member_index(g, grown, node), reader_pos);
  if (!d) return d;
  if (group.reduction && !folds) {
    // An epilogue must consume the group's reductions (directly or through stores).
    std::vector<int> red_outs;
    for (int r : group.reductions)
      for (int o : g.nodes[r].outputs) red_outs.push_back(o);
    bool consumer = false;
    std::vector<int> stack{node};
    std::set<int> visited;
    while (!stack.empty() && !consumer) {
      int cur = stack.back();
      stack.pop_back();
      for (auto& o : g.nodes[cur].inputs) {
        if (o.is_scalar()) continue;
        if (contains(red_outs, o.buf)) consumer = true;
        const Buffer& b = g.buffers[o.buf];
        if (b.kind == BufferKind::Node && computed_in(g, materialized, grown, o.buf) &&
            classify(g.nodes[b.producer]) == LoopKind::Pointwise &&
            visited.insert(b.producer).second)
          stack.push_back(b.producer);
      }
    }
    const char* what = group.scan ? "scans" : "reductions";
    if (!consumer)
      return FusionDecision::no(
          fmt::format("not a consumer of the kernel's {} over their domain", what));
    return FusionDecision::yes(fmt::format("consumer of its {} (epilogue)", what));
  }
  if (folds)
    return FusionDecision::yes(
        fmt::format("same domain {} {} dims {}", detail::shape_str(group.shape),
                    group.scan ? "scanning" : "reducing", detail::shape_str(group.rdims)));
  return FusionDecision::yes(w.stores_reached.empty()
                                 ? "horizontal (same iteration space, independent)"
                                 : "vertical (reads its result)");
}

GroupFootprint footprint(const Graph& g, const std::vector<bool>& materialized,
                         const KernelGroup& group) {
  GroupFootprint fp;
  std::set<int> reads;
  std::set<std::string> ops;
  int pos = 0;
  for (int r : group.reductions) {
    Walk w{g, materialized, group, {}, {}, {}, false, {}};
    const Node& n = g.nodes[r];
    FusionDecision d = w.run(r, member_index(g, group, r), pos++);
    SMELT_INTERNAL_ASSERT(d.fuse, "illegal kernel group: {}", d.reason);
    reads.insert(w.reads.begin(), w.reads.end());
    ops.insert(w.ops.begin(), w.ops.end());
    ops.insert(n.op);
    // The element is computed when the reduction's input is an inlined op.
    fp.computed_element.push_back(w.computed);
  }
  for (int s : group.stores) {
    Walk w{g, materialized, group, {}, {}, {}, false, {}};
    FusionDecision d =
        w.run(s, member_index(g, group, s), static_cast<int>(group.reductions.size()));
    SMELT_INTERNAL_ASSERT(d.fuse, "illegal kernel group: {}", d.reason);
    reads.insert(w.reads.begin(), w.reads.end());
    ops.insert(w.ops.begin(), w.ops.end());
    fp.reads_other_store.push_back(!w.stores_reached.empty());
  }
  fp.reads.assign(reads.begin(), reads.end());
  fp.ops.assign(ops.begin(), ops.end());
  return fp;
}

std::optional<std::array<Operand, 2>> gemm_cast_prologue(const Graph& g, const Node& n) {
  if (n.op != "matmul" || n.inputs.size() != 2 || g.buffers[n.outputs[0]].dtype != DType::Float32)
    return std::nullopt;
  std::array<Operand, 2> r;
  for (size_t k = 0; k < 2; ++k) {
    const Operand& o = n.inputs[k];
    if (o.is_scalar()) return std::nullopt;
    const Buffer& b = g.buffers[o.buf];
    if (b.kind != BufferKind::Node) return std::nullopt;
    const Node& cvt = g.nodes[b.producer];
    if (cvt.op != "to_dtype" || cvt.inputs.empty() || cvt.inputs[0].is_scalar())
      return std::nullopt;
    const DType src = cvt.inputs[0].dtype;
    if (src != DType::Float16 && src != DType::BFloat16) return std::nullopt;
    std::optional<Operand> w = window_through(o, b, cvt.inputs[0]);
    if (!w) return std::nullopt;
    r[k] = *w;
  }
  if (r[0].dtype != r[1].dtype) return std::nullopt;
  return r;
}

}  // namespace smelt::compiler
