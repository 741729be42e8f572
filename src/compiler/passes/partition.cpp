// The joint graph's partition (partition.h): which nodes are forward and
// which backward, the minimum cut over the forward values (Dinic's maximum
// flow), and the two graphs built from the joint one.
#include "compiler/passes/partition.h"

#include <fmt/format.h>

#include <deque>
#include <limits>

#include "core/tensor_impl.h"
#include "ops/op_table.h"

namespace smelt::compiler {

std::string JointPartition::str() const {
  return fmt::format(
      "saved {} value(s), {} (without recompute: {}); recomputed {} node(s) in the backward; "
      "{} saved argument(s), {} saved parameter(s)",
      num_saved + static_cast<int>(saved_args.size()), detail::bytes_str(saved_bytes),
      detail::bytes_str(saved_bytes_all), recomputed, saved_args.size(), saved_params.size());
}

namespace {

constexpr int64_t kInfinite = int64_t{1} << 60;

/// Maximum flow (Dinic's algorithm) over int64 capacities.
class MaxFlow {
 public:
  explicit MaxFlow(int vertices) : out_(static_cast<size_t>(vertices)) {}

  void add_edge(int from, int to, int64_t capacity) {
    out_[static_cast<size_t>(from)].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({to, capacity});
    out_[static_cast<size_t>(to)].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({from, 0});
  }

  int64_t run(int source, int sink) {
    int64_t total = 0;
    while (levels(source, sink)) {
      next_.assign(out_.size(), 0);
      while (int64_t f = push(source, sink, kInfinite)) total += f;
    }
    return total;
  }

  /// Per vertex: a path of edges with capacity left leads from it to `sink`.
  std::vector<bool> reaching(int sink) const {
    std::vector<bool> r(out_.size(), false);
    std::deque<int> queue{sink};
    r[static_cast<size_t>(sink)] = true;
    while (!queue.empty()) {
      const int v = queue.front();
      queue.pop_front();
      // Edge e leaves v; its pair e ^ 1 enters v from edges_[e].to.
      for (int e : out_[static_cast<size_t>(v)]) {
        const int u = edges_[static_cast<size_t>(e)].to;
        if (!r[static_cast<size_t>(u)] && edges_[static_cast<size_t>(e ^ 1)].capacity > 0) {
          r[static_cast<size_t>(u)] = true;
          queue.push_back(u);
        }
      }
    }
    return r;
  }

 private:
  struct Edge {
    int to;
    int64_t capacity;  // left
  };

  bool levels(int source, int sink) {
    level_.assign(out_.size(), -1);
    std::deque<int> queue{source};
    level_[static_cast<size_t>(source)] = 0;
    while (!queue.empty()) {
      const int v = queue.front();
      queue.pop_front();
      for (int e : out_[static_cast<size_t>(v)]) {
        const Edge& ed = edges_[static_cast<size_t>(e)];
        if (ed.capacity > 0 && level_[static_cast<size_t>(ed.to)] < 0) {
          level_[static_cast<size_t>(ed.to)] = level_[static_cast<size_t>(v)] + 1;
          queue.push_back(ed.to);
        }
      }
    }
    return level_[static_cast<size_t>(sink)] >= 0;
  }

  /// One augmenting path of the level graph from `v` (iteratively: graphs are deep).
  int64_t push(int source, int sink, int64_t limit) {
    std::vector<int> path;  // edge ids from source
    int v = source;
    while (true) {
      if (v == sink) {
        int64_t f = limit;
        for (int e : path) f = std::min(f, edges_[static_cast<size_t>(e)].capacity);
        for (int e : path) {
          edges_[static_cast<size_t>(e)].capacity -= f;
          edges_[static_cast<size_t>(e ^ 1)].capacity += f;
        }
        return f;
      }
      auto& i = next_[static_cast<size_t>(v)];
      const auto& edges = out_[static_cast<size_t>(v)];
      bool advanced = false;
      for (; i < edges.size(); ++i) {
        const Edge& ed = edges_[static_cast<size_t>(edges[i])];
        if (ed.capacity > 0 &&
            level_[static_cast<size_t>(ed.to)] == level_[static_cast<size_t>(v)] + 1) {
          path.push_back(edges[i]);
          v = ed.to;
          advanced = true;
          break;
        }
      }
      if (advanced) continue;
      // A dead end: no path through v; step back.
      level_[static_cast<size_t>(v)] = -1;
      if (path.empty()) return 0;
      const int back = path.back();
      path.pop_back();
      v = edges_[static_cast<size_t>(back ^ 1)].to;
      ++next_[static_cast<size_t>(v)];
    }
  }

  std::vector<std::vector<int>> out_;
  std::vector<Edge> edges_;
  std::vector<int> level_;
  std::vector<size_t> next_;
};

/// Per node: its results reach one of the buffers `roots`.
std::vector<bool> nodes_needed_by(const Graph& g, const std::vector<int>& roots) {
  std::vector<bool> live_buf(g.buffers.size(), false), live(g.nodes.size(), false);
  for (int b : roots)
    if (b >= 0) live_buf[static_cast<size_t>(b)] = true;
  for (int n = static_cast<int>(g.nodes.size()) - 1; n >= 0; --n) {
    for (int o : g.nodes[static_cast<size_t>(n)].outputs)
      if (live_buf[static_cast<size_t>(o)]) live[static_cast<size_t>(n)] = true;
    if (!live[static_cast<size_t>(n)]) continue;
    for (auto& in : g.nodes[static_cast<size_t>(n)].inputs)
      if (!in.is_scalar()) live_buf[static_cast<size_t>(in.buf)] = true;
  }
  return live;
}

int64_t buffer_bytes(const Buffer& b) { return b.extent * static_cast<int64_t>(itemsize(b.dtype)); }

/// A graph made of some nodes of `src`: its buffers copied on first use.
class SubGraph {
 public:
  explicit SubGraph(const Graph& src) : src_(src), map_(src.buffers.size(), -1) {
    g.trace_serial = src.trace_serial;
  }

  /// The buffer standing for `src` buffer `b` (an input, parameter or constant
  /// is copied as it is on first use).
  int buffer(int b) {
    int& m = map_[static_cast<size_t>(b)];
    if (m >= 0) return m;
    const Buffer& sb = src_.buffers[static_cast<size_t>(b)];
    SMELT_INTERNAL_ASSERT(sb.kind != BufferKind::Node,
                          "partition: buffer %{} is read before the node that writes it", b);
    m = add(sb);
    return m;
  }
  /// Makes `b` stand for a new buffer `replacement` (a saved value read as an input).
  void bind(int b, const Buffer& replacement) { map_[static_cast<size_t>(b)] = add(replacement); }
  Operand operand(Operand o) {
    if (!o.is_scalar()) o.buf = buffer(o.buf);
    return o;
  }
  void copy_node(const Node& n) {
    Node c{n.op, {}, n.attrs, {}};
    for (const auto& in : n.inputs) c.inputs.push_back(operand(in));
    const int index = static_cast<int>(g.nodes.size());
    for (int o : n.outputs) {
      Buffer b = src_.buffers[static_cast<size_t>(o)];
      b.producer = index;
      map_[static_cast<size_t>(o)] = g.add_buffer(std::move(b));
      c.outputs.push_back(map_[static_cast<size_t>(o)]);
    }
    g.nodes.push_back(std::move(c));
  }

  Graph g;

 private:
  int add(const Buffer& b) {
    if (b.kind == BufferKind::Input) ++g.num_inputs;
    if (b.kind == BufferKind::Param) ++g.num_params;
    return g.add_buffer(b);
  }
  const Graph& src_;
  std::vector<int> map_;
};

}  // namespace

JointPartition partition_joint(const Graph& g, const JointSignature& sig, bool recompute) {
  const size_t nb = g.buffers.size(), nn = g.nodes.size();
  SMELT_INTERNAL_ASSERT(static_cast<int>(g.outputs.size()) >= sig.num_results,
                        "partition: {} outputs for {} results", g.outputs.size(), sig.num_results);
  auto is_grad_input = [&](const Buffer& b) {
    return b.kind == BufferKind::Input && b.input_index >= sig.num_args;
  };
  // 1. Forward nodes: what the results and write-backs need; backward nodes:
  // the rest of what the gradients need.
  std::vector<int> forward_roots, backward_roots;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const Operand& o = g.outputs[i];
    (static_cast<int>(i) < sig.num_results ? forward_roots : backward_roots)
        .push_back(o.is_scalar() ? -1 : o.buf);
  }
  for (auto& [dst, src] : g.mutations) forward_roots.push_back(src);
  const std::vector<bool> fw = nodes_needed_by(g, forward_roots);
  std::vector<bool> bw = nodes_needed_by(g, backward_roots);
  for (size_t n = 0; n < nn; ++n) {
    bw[n] = bw[n] && !fw[n];
    if (fw[n])
      for (const auto& in : g.nodes[n].inputs)
        SMELT_INTERNAL_ASSERT(in.is_scalar() || !is_grad_input(g.buffers[in.buf]),
                              "partition: forward node {} reads a gradient", g.nodes[n].op);
  }
  // 2. Forward values (arguments, parameters, forward node outputs) and those
  // the backward reads.
  auto forward_value = [&](int b) {
    const Buffer& buf = g.buffers[static_cast<size_t>(b)];
    return (buf.kind == BufferKind::Input && !is_grad_input(buf)) ||
           buf.kind == BufferKind::Param || (buf.kind == BufferKind::Node && fw[buf.producer]);
  };
  std::vector<bool> needed(nb, false);
  auto note_read = [&](const Operand& o) {
    if (!o.is_scalar() && forward_value(o.buf)) needed[static_cast<size_t>(o.buf)] = true;
  };
  for (size_t n = 0; n < nn; ++n)
    if (bw[n])
      for (const auto& in : g.nodes[n].inputs) note_read(in);
  for (size_t i = static_cast<size_t>(sig.num_results); i < g.outputs.size(); ++i)
    note_read(g.outputs[i]);
  // 3. The cut: vertex 2b (value b computed), 2b+1 (value b available); the
  // edge between them costs b's bytes when cut (b saved).
  auto cost = [&](int b) {
    const Buffer& buf = g.buffers[static_cast<size_t>(b)];
    return buf.kind == BufferKind::Param ? int64_t{0} : buffer_bytes(buf);
  };
  auto recomputable = [&](int b) {
    const Buffer& buf = g.buffers[static_cast<size_t>(b)];
    if (!recompute || buf.kind != BufferKind::Node) return false;
    const Node& n = g.nodes[static_cast<size_t>(buf.producer)];
    const detail::OpDef* def = detail::find_op(n.op);
    return def && def->kind == detail::OpKind::Pointwise && n.outputs.size() == 1;
  };
  const int source = static_cast<int>(2 * nb), sink = source + 1;
  MaxFlow flow(sink + 1);
  for (int b = 0; b < static_cast<int>(nb); ++b) {
    if (!forward_value(b)) continue;
    flow.add_edge(2 * b, 2 * b + 1, cost(b));
    if (!recomputable(b)) {
      flow.add_edge(source, 2 * b, kInfinite);
    } else {
      // Computed again from its inputs (constants and numbers are at hand).
      for (const auto& in : g.nodes[static_cast<size_t>(g.buffers[b].producer)].inputs)
        if (!in.is_scalar() && forward_value(in.buf))
          flow.add_edge(2 * in.buf + 1, 2 * b, kInfinite);
    }
    if (needed[static_cast<size_t>(b)]) flow.add_edge(2 * b + 1, sink, kInfinite);
  }
  flow.run(source, sink);
  // The cut nearest the sink: values that still reach the sink are recomputed
  // (computed) or read (available) in the backward.
  const std::vector<bool> in_backward = flow.reaching(sink);
  std::vector<bool> saved(nb, false), recomputed(nn, false);
  JointPartition p;
  for (int b = 0; b < static_cast<int>(nb); ++b) {
    if (!forward_value(b)) continue;
    const bool computed = in_backward[static_cast<size_t>(2 * b)];
    const bool available = in_backward[static_cast<size_t>(2 * b + 1)];
    if (available && !computed) saved[static_cast<size_t>(b)] = true;
    if (computed) {
      SMELT_INTERNAL_ASSERT(recomputable(b), "partition: %{} is recomputed but may not be", b);
      recomputed[static_cast<size_t>(g.buffers[b].producer)] = true;
      ++p.recomputed;
    }
    if (needed[static_cast<size_t>(b)] && g.buffers[b].kind != BufferKind::Param)
      p.saved_bytes_all += cost(b);
  }
  // A value of an argument, parameter or captured tensor that the forward
  // writes in place is its new one by the time the backward runs.
  std::vector<bool> written(nb, false);
  for (auto& [dst, src] : g.mutations) written[static_cast<size_t>(dst)] = true;
  auto check_not_written = [&](int b) {
    const Buffer& buf = g.buffers[static_cast<size_t>(b)];
    if (!written[static_cast<size_t>(b)] && !(buf.kind == BufferKind::Constant && buf.written))
      return;
    const std::string what =
        buf.kind == BufferKind::Input   ? fmt::format("argument {}", buf.input_index)
        : buf.kind == BufferKind::Param ? fmt::format("module parameter/buffer {}", buf.input_index)
                                        : "a tensor the function captures";
    throw GraphBreak("autograd",
                     fmt::format("the backward pass reads {} as it was before the function wrote "
                                 "it in place, and a compiled forward does not keep a copy",
                                 what),
                     "write into a clone() of it, or out of place");
  };
  // 4. The forward graph: its nodes, the results, then the saved intermediates.
  SubGraph fwd(g);
  for (size_t n = 0; n < nn; ++n)
    if (fw[n]) fwd.copy_node(g.nodes[n]);
  for (int i = 0; i < sig.num_results; ++i)
    fwd.g.outputs.push_back(fwd.operand(g.outputs[static_cast<size_t>(i)]));
  SubGraph bwd(g);
  for (int b = 0; b < static_cast<int>(nb); ++b) {
    if (!saved[static_cast<size_t>(b)]) continue;
    const Buffer& buf = g.buffers[static_cast<size_t>(b)];
    if (buf.kind != BufferKind::Node) {
      check_not_written(b);
      (buf.kind == BufferKind::Input ? p.saved_args : p.saved_params).push_back(buf.input_index);
      if (buf.kind == BufferKind::Input) p.saved_bytes += cost(b);
      continue;
    }
    fwd.g.outputs.push_back(whole(fwd.g.buffers[static_cast<size_t>(fwd.buffer(b))]));
    Buffer in = buf;
    in.kind = BufferKind::Input;
    in.producer = -1;
    in.input_index = sig.num_args + sig.num_grad_outputs + p.num_saved;
    in.aligned = true;  // a forward output: its own allocation
    bwd.bind(b, in);
    ++p.num_saved;
    p.saved_bytes += cost(b);
  }
  for (auto& [dst, src] : g.mutations)
    fwd.g.mutations.emplace_back(fwd.buffer(dst), fwd.buffer(src));
  // 5. The backward graph: the recomputed nodes and the backward ones, in
  // their order (a topological one), then the gradients.
  for (size_t n = 0; n < nn; ++n) {
    if (!recomputed[n] && !bw[n]) continue;
    for (const auto& in : g.nodes[n].inputs)
      if (!in.is_scalar() && g.buffers[in.buf].kind == BufferKind::Constant)
        check_not_written(in.buf);
    bwd.copy_node(g.nodes[n]);
  }
  for (size_t i = static_cast<size_t>(sig.num_results); i < g.outputs.size(); ++i)
    bwd.g.outputs.push_back(bwd.operand(g.outputs[i]));
  p.forward = std::move(fwd.g);
  p.backward = std::move(bwd.g);
  return p;
}

}  // namespace smelt::compiler
