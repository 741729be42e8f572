// Index maps of the data-movement ops (see movement.h). Each mirrors its eager
// kernel in src/ops/movement.cpp and src/ops/nn_functional.cpp.
#include "compiler/lower/movement.h"

#include <limits>

#include "core/tensor_impl.h"
#include "ops/op_table.h"
#include "smelt/error.h"

namespace smelt::compiler {

namespace {

constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();

/// `out` read by an input of shape `s` that broadcasts to it (trailing dims).
Index broadcast_index(const Index& out, const Shape& s) {
  Index at{s, {}, std::nullopt};
  const size_t lead = out.vars.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d)
    at.vars.push_back(s[d] == 1 ? IndexExpr::constant(0) : out.vars[lead + d]);
  if (s == out.shape) at.flat = out.flat;
  return at;
}

int64_t dim_attr(const Node& n, int64_t rank) {
  int64_t d = n.attrs.as<int64_t>("dim");
  return d < 0 ? d + rank : d;
}

}  // namespace

bool is_index_map(const Node& n) {
  const detail::OpDef* def = detail::find_op(n.op);
  return def && def->kind == detail::OpKind::Movement && def->index_map;
}

MovementLowering lower_movement(const Graph& g, const Node& n, const Index& out,
                                const IndexValueFn& index_value) {
  MovementLowering m;
  const std::string& op = n.op;
  const int64_t rank = static_cast<int64_t>(out.shape.size());
  if (op == "masked_fill") {
    m.combine = MovementLowering::Combine::MaskedFill;
    m.fill = n.attrs.as<Scalar>("value");
    m.reads = {{0, broadcast_index(out, n.inputs[0].sizes), {}},
               {1, broadcast_index(out, n.inputs[1].sizes), {}}};
    return m;
  }
  if (op == "tril" || op == "triu") {
    // tril keeps j - i <= diagonal, triu keeps j - i >= diagonal.
    const int64_t diag = n.attrs.as<int64_t>("diagonal");
    const IndexExpr& i = out.vars[rank - 2];
    const IndexExpr& j = out.vars[rank - 1];
    m.combine = MovementLowering::Combine::Keep;
    m.fill = Scalar(int64_t{0});
    m.reads = {{0, out, {}}};
    m.keep.terms.emplace_back(op == "tril" ? i + diag - j : j - i - diag, 0, kUnbounded);
    return m;
  }
  if (op == "pad") {
    // p = [left, right] of the last dim, then of the one before, ...
    const auto p = n.attrs.as<std::vector<int64_t>>("pad");
    const Shape& in = n.inputs[0].sizes;
    MovementRead r{0, Index{in, out.vars, std::nullopt}, {}};
    for (size_t k = 0; k < p.size() / 2; ++k) {
      const int64_t d = rank - 1 - static_cast<int64_t>(k);
      r.at.vars[d] = out.vars[d] - p[2 * k];
      r.guard.terms.emplace_back(r.at.vars[d], 0, in[d]);
    }
    m.combine = MovementLowering::Combine::Read;
    m.fill = Scalar(n.attrs.as<double>("value"));
    m.reads = {std::move(r)};
    return m;
  }
  if (op == "cat") {
    const int64_t d = dim_attr(n, rank);
    m.combine = MovementLowering::Combine::Pieces;
    m.fill = Scalar(int64_t{0});
    int64_t start = 0;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const Shape& s = n.inputs[k].sizes;
      if (static_cast<int64_t>(s.size()) != rank) continue;  // legacy empty 1-D inputs
      const int64_t len = s[d];
      if (len > 0) {
        MovementRead r{static_cast<int>(k), Index{s, out.vars, std::nullopt}, {}};
        r.at.vars[d] = out.vars[d] - start;
        r.guard.terms.emplace_back(r.at.vars[d], 0, len);
        m.reads.push_back(std::move(r));
      }
      start += len;
    }
    return m;
  }
  if (op == "index_select") {
    const Shape& xs = n.inputs[0].sizes;
    const int64_t d = xs.empty() ? 0 : dim_attr(n, static_cast<int64_t>(xs.size()));
    Index at{xs, out.vars, std::nullopt};
    if (!xs.empty()) {
      const Shape& is = n.inputs[1].sizes;
      Index idx_at{is, is.empty() ? std::vector<IndexExpr>{} : std::vector<IndexExpr>{out.vars[d]},
                   std::nullopt};
      at.vars[d] = index_value(1, idx_at, xs[d]);
    }
    m.reads = {{0, std::move(at), {}}};
    return m;
  }
  if (op == "gather") {
    const Shape& xs = n.inputs[0].sizes;
    const int64_t d = xs.empty() ? 0 : dim_attr(n, static_cast<int64_t>(xs.size()));
    Index at{xs, out.vars, std::nullopt};
    if (!xs.empty())
      at.vars[d] = index_value(1, Index{n.inputs[1].sizes, out.vars, out.flat}, xs[d]);
    m.reads = {{0, std::move(at), {}}};
    return m;
  }
  if (op == "embedding") {
    const Shape& ws = n.inputs[0].sizes;  // [num_embeddings, dim]
    const Shape& is = n.inputs[1].sizes;
    Index idx_at{is, std::vector<IndexExpr>(out.vars.begin(), out.vars.end() - 1), std::nullopt};
    Index at{ws, {index_value(1, idx_at, ws[0]), out.vars[rank - 1]}, std::nullopt};
    m.reads = {{0, std::move(at), {}}};
    return m;
  }
  SMELT_INTERNAL_ASSERT(false, "{} has no loop-level lowering", op);
  return m;
}

}  // namespace smelt::compiler
