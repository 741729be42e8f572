#include "compiler/passes/concat_linear.h"

#include <fmt/format.h>

#include <map>
#include <optional>

#include "compiler/trace/tracer.h"
#include "core/tensor_impl.h"
#include "smelt/autograd.h"
#include "smelt/ops.h"

namespace smelt::compiler {

std::string ConcatLinearResult::str() const {
  return fmt::format(
      "concat_linear: {} group(s) of {} GEMM(s) over the same input made one GEMM each", groups,
      gemms);
}

namespace {

/// One linear of a group: its product, its bias add, and the buffer its
/// readers read.
struct Member {
  int mm = -1;    // the matmul node
  int add = -1;   // its bias add (attr gemm_bias), or -1
  int w = -1;     // the weight's Param buffer [N, K]
  int bias = -1;  // the bias's Param buffer [N], or -1
  int out = -1;   // what the readers read: the add's result, else the product
  int64_t n = 0;  // N
};

/// True when `o` reads all of Param buffer `b` as a row-major [N, K] read
/// transposed: sizes [K, N], strides [1, K].
bool whole_weight_transposed(const Operand& o, const Buffer& b) {
  return !o.is_scalar() && b.kind == BufferKind::Param && o.sizes.size() == 2 && o.offset == 0 &&
         o.dtype == b.dtype && o.strides == Shape{1, o.sizes[0]} &&
         b.extent == o.sizes[0] * o.sizes[1];
}

/// True when `o` reads Param buffer `b` ([N]) as a bias along the last dim:
/// last stride 1, every other dim of size 1 or stride 0, from offset 0.
bool whole_bias(const Operand& o, const Buffer& b, int64_t n) {
  if (o.is_scalar() || b.kind != BufferKind::Param || o.sizes.empty() || o.offset != 0 ||
      o.dtype != b.dtype || b.extent != n || o.sizes.back() != n ||
      (n > 1 && o.strides.back() != 1))
    return false;
  for (size_t d = 0; d + 1 < o.sizes.size(); ++d)
    if (o.sizes[d] != 1 && o.strides[d] != 0) return false;
  return true;
}

/// `o`, a window of a dense row-major buffer whose rows are `n` wide, as the
/// same window of a buffer whose rows are `ntot` wide holding those columns
/// at [col0, col0 + n): each dim steps whole rows (stride a multiple of n) or
/// stays within one row; nullopt when a dim crosses rows otherwise (a
/// reshape across the last dim) or steps backwards.
std::optional<Operand> column_window(const Operand& o, int64_t n, int64_t ntot, int64_t col0,
                                     int buf) {
  Operand r = o;
  r.buf = buf;
  const int64_t col = o.offset % n;
  int64_t last_col = col;
  for (size_t d = 0; d < o.sizes.size(); ++d) {
    const int64_t s = o.strides[d];
    if (o.sizes[d] == 1 || s == 0) continue;
    if (s < 0) return std::nullopt;
    if (s % n == 0)
      r.strides[d] = s / n * ntot;
    else if (s < n)
      last_col += (o.sizes[d] - 1) * s;
    else
      return std::nullopt;
  }
  if (last_col >= n) return std::nullopt;
  r.offset = o.offset / n * ntot + col0 + col;
  return r;
}

/// The member node `i` starts, or nullopt when it is not a parameter linear.
std::optional<Member> member_at(const Graph& g, int i, const std::vector<int>& uses,
                                const std::vector<std::vector<int>>& readers,
                                const std::vector<bool>& returned, const std::vector<bool>& written,
                                const std::vector<Tensor>& params) {
  const Node& mm = g.nodes[i];
  if (mm.op != "matmul" || mm.inputs.size() != 2 || mm.inputs[0].is_scalar() ||
      mm.inputs[1].is_scalar() || mm.inputs[0].sizes.size() < 2 || mm.outputs.size() != 1)
    return std::nullopt;
  const Operand& x = mm.inputs[0];
  const Operand& w = mm.inputs[1];
  const Buffer& wb = g.buffers[w.buf];
  if (!whole_weight_transposed(w, wb) || written[w.buf] || x.dtype != w.dtype ||
      x.sizes.back() != w.sizes[0])
    return std::nullopt;
  const Tensor& wt = params.at(static_cast<size_t>(wb.input_index));
  if (wt.dim() != 2 || wt.size(0) != w.sizes[1] || wt.size(1) != w.sizes[0] || !wt.is_contiguous())
    return std::nullopt;
  Member m;
  m.mm = i;
  m.w = w.buf;
  m.n = w.sizes[1];
  m.out = mm.outputs[0];
  // linear's bias: the product's only reader, an add marked gemm_bias.
  if (uses[m.out] == 1 && readers[m.out].size() == 1) {
    const Node& a = g.nodes[readers[m.out][0]];
    if (a.op == "add" && a.attrs.has("gemm_bias")) {
      if (a.inputs.size() != 2 || a.outputs.size() != 1) return std::nullopt;
      const int side = !a.inputs[0].is_scalar() && a.inputs[0].buf == m.out ? 0 : 1;
      const Operand& prod = a.inputs[side];
      const Operand& b = a.inputs[1 - side];
      if (!is_whole_contiguous(prod, g.buffers[m.out]) || b.is_scalar() ||
          !whole_bias(b, g.buffers[b.buf], m.n) || written[b.buf] || b.dtype != x.dtype ||
          g.buffers[a.outputs[0]].sizes != g.buffers[m.out].sizes)
        return std::nullopt;
      m.add = readers[m.out][0];
      m.bias = b.buf;
      m.out = a.outputs[0];
    }
  }
  if (returned[m.out]) return std::nullopt;
  return m;
}

}  // namespace

ConcatLinearResult concat_linear(Graph& g, const std::vector<Tensor>& params) {
  ConcatLinearResult result;
  const std::vector<int> uses = g.use_counts();
  std::vector<std::vector<int>> readers(g.buffers.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const Operand& in : g.nodes[i].inputs)
      if (!in.is_scalar() &&
          (readers[in.buf].empty() || readers[in.buf].back() != static_cast<int>(i)))
        readers[in.buf].push_back(static_cast<int>(i));
  std::vector<bool> returned(g.buffers.size(), false);
  for (const Operand& o : g.outputs)
    if (!o.is_scalar()) returned[o.buf] = true;
  std::vector<bool> written(g.buffers.size(), false);  // parameters the graph updates
  for (const auto& [dst, src] : g.mutations) {
    returned[src] = true;
    written[dst] = true;
  }

  // Groups: the members of one left operand, dtype and bias-or-not, in order.
  std::map<std::string, std::vector<Member>> by_input;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    std::optional<Member> m =
        member_at(g, static_cast<int>(i), uses, readers, returned, written, params);
    if (!m) continue;
    const Operand& x = g.nodes[i].inputs[0];
    by_input[fmt::format("{}|{}|{}", x.str(), static_cast<int>(x.dtype), m->add >= 0)].push_back(
        *m);
  }
  struct Group {
    std::vector<Member> members;
    int64_t ntot = 0;
  };
  std::vector<Group> groups;
  for (auto& [key, members] : by_input) {
    if (members.size() < 2) continue;
    // Every reader must read one block of columns: try the widths of the group.
    Group grp;
    for (const Member& m : members) grp.ntot += m.n;
    bool ok = true;
    for (const Member& m : members)
      for (int r : readers[m.out])
        for (const Operand& in : g.nodes[r].inputs)
          if (!in.is_scalar() && in.buf == m.out && !column_window(in, m.n, grp.ntot, 0, in.buf))
            ok = false;
    if (!ok) continue;
    grp.members = members;
    groups.push_back(std::move(grp));
  }
  if (groups.empty()) return result;

  // The new graph: non-node buffers first (in order), then the nodes in
  // order, each group emitted where its first product was.
  Graph out;
  out.trace_serial = g.trace_serial;
  out.num_inputs = g.num_inputs;
  out.num_params = g.num_params;
  std::vector<int> map(g.buffers.size(), -1);
  for (const Buffer& b : g.buffers)
    if (b.kind != BufferKind::Node) map[b.id] = out.add_buffer(b);
  struct Columns {
    int buf = -1;  // the fused result in `out`
    int64_t n = 0, ntot = 0, col0 = 0;
  };
  std::map<int, Columns> moved;    // old member result -> its columns of the fused result
  std::map<int, size_t> first_of;  // first product node -> group
  std::vector<bool> skip(g.nodes.size(), false);
  for (size_t k = 0; k < groups.size(); ++k) {
    first_of[groups[k].members.front().mm] = k;
    for (const Member& m : groups[k].members) {
      skip[m.mm] = true;
      if (m.add >= 0) skip[m.add] = true;
    }
  }
  auto remap = [&](const Operand& o) {
    if (o.is_scalar()) return o;
    if (auto it = moved.find(o.buf); it != moved.end())
      return *column_window(o, it->second.n, it->second.ntot, it->second.col0, it->second.buf);
    Operand r = o;
    r.buf = map[o.buf];
    SMELT_INTERNAL_ASSERT(r.buf >= 0, "concat_linear: %{} read before it is made", o.buf);
    return r;
  };
  auto add_constant = [&](const Tensor& t) {
    Buffer c;
    c.kind = BufferKind::Constant;
    c.dtype = t.dtype();
    c.device = t.device();
    c.extent = t.numel();
    c.constant = t;
    return out.add_buffer(std::move(c));
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (auto it = first_of.find(static_cast<int>(i)); it != first_of.end()) {
      const Group& grp = groups[it->second];
      const Member& first = grp.members.front();
      std::vector<Tensor> ws, bs;
      for (const Member& m : grp.members) {
        ws.push_back(params.at(static_cast<size_t>(g.buffers[m.w].input_index)));
        if (m.bias >= 0)
          bs.push_back(params.at(static_cast<size_t>(g.buffers[m.bias].input_index)));
        result.params.push_back(g.buffers[m.w].input_index);
        if (m.bias >= 0) result.params.push_back(g.buffers[m.bias].input_index);
      }
      Tensor wcat, bcat;
      {
        TraceScope eager(nullptr);
        NoGradGuard no_grad;
        wcat = smelt::cat(ws, 0);
        if (!bs.empty()) bcat = smelt::cat(bs, 0);
      }
      const Operand& x = n.inputs[0];
      const int64_t k = x.sizes.back();
      Operand w;
      w.buf = add_constant(wcat);
      w.sizes = {k, grp.ntot};
      w.strides = {1, k};
      w.dtype = wcat.dtype();
      const int prod = n.outputs[0];  // the first member's product
      const Buffer& prod_old = g.buffers[prod];
      Shape sizes = prod_old.sizes;
      sizes.back() = grp.ntot;
      const int mm = out.add_node("matmul", {remap(x), w}, n.attrs,
                                  {{sizes, prod_old.dtype, prod_old.device}});
      int fused = out.nodes[mm].outputs[0];
      if (first.add >= 0) {
        const Node& a = g.nodes[first.add];
        const int side = !a.inputs[0].is_scalar() && a.inputs[0].buf == prod ? 0 : 1;
        Operand b = a.inputs[1 - side];
        b.buf = add_constant(bcat);
        b.sizes.back() = grp.ntot;
        std::vector<Operand> ins(2);
        ins[side] = whole(out.buffers[fused]);
        ins[1 - side] = b;
        const int add =
            out.add_node("add", ins, a.attrs, {{sizes, prod_old.dtype, prod_old.device}});
        fused = out.nodes[add].outputs[0];
      }
      int64_t col0 = 0;
      for (const Member& m : grp.members) {
        moved[m.out] = {fused, m.n, grp.ntot, col0};
        col0 += m.n;
      }
      ++result.groups;
      result.gemms += static_cast<int>(grp.members.size());
      continue;
    }
    if (skip[i]) continue;
    std::vector<Operand> ins;
    for (const Operand& in : n.inputs) ins.push_back(remap(in));
    std::vector<detail::OutMeta> metas;
    for (int o : n.outputs)
      metas.push_back({g.buffers[o].sizes, g.buffers[o].dtype, g.buffers[o].device});
    const int node = out.add_node(n.op, std::move(ins), n.attrs, metas);
    for (size_t k = 0; k < n.outputs.size(); ++k) map[n.outputs[k]] = out.nodes[node].outputs[k];
  }
  for (const Operand& o : g.outputs) out.outputs.push_back(remap(o));
  for (const auto& [dst, src] : g.mutations) out.mutations.emplace_back(map[dst], map[src]);
  g = std::move(out);
  return result;
}

}  // namespace smelt::compiler
