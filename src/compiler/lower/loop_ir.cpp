#include "compiler/lower/loop_ir.h"

#include <fmt/format.h>

#include "core/tensor_impl.h"
#include "kernels/reduce_geom.h"
#include "ops/op_table.h"

namespace smelt::compiler {

const char* loop_kind_name(LoopKind k) {
  switch (k) {
    case LoopKind::Pointwise:
      return "pointwise";
    case LoopKind::Reduction:
      return "reduction";
    case LoopKind::Scan:
      return "scan";
    case LoopKind::Extern:
      return "extern";
    case LoopKind::Fallback:
      return "fallback";
  }
  return "?";
}

LoopKind classify(const Node& n) {
  const detail::OpDef* def = detail::find_op(n.op);
  if (!def) return LoopKind::Fallback;
  switch (def->kind) {
    case detail::OpKind::Pointwise:
      return LoopKind::Pointwise;
    case detail::OpKind::Reduction:
      if (def->accumulator == detail::Accumulator::None) return LoopKind::Fallback;
      return def->scan ? LoopKind::Scan : LoopKind::Reduction;
    case detail::OpKind::Extern:
      return LoopKind::Extern;
    case detail::OpKind::Movement:
      // index maps (lower/movement.h) fuse like pointwise ops
      return def->index_map ? LoopKind::Pointwise : LoopKind::Fallback;
    default:
      return LoopKind::Fallback;
  }
}

ReductionInfo reduction_info(const Graph& g, const Node& n) {
  ReductionInfo r;
  const Operand& in = n.inputs.at(0);
  r.in_sizes = in.sizes;
  r.dims = n.attrs.as<std::vector<int64_t>>("dim");
  if (r.dims.empty())
    for (int64_t d = 0; d < static_cast<int64_t>(in.sizes.size()); ++d) r.dims.push_back(d);
  for (int64_t d = 0; d < static_cast<int64_t>(in.sizes.size()); ++d) {
    bool reduced = false;
    for (auto x : r.dims) reduced |= x == d;
    (reduced ? r.rnumel : r.outer) *= in.sizes[d];
  }
  const detail::OpDef* def = detail::find_op(n.op);
  SMELT_INTERNAL_ASSERT(def && def->accumulator != detail::Accumulator::None,
                        "reduction '{}' has no lowering", n.op);
  r.accumulator = std::string(detail::accumulator_name(def->accumulator));
  r.finals.assign(def->finals.begin(), def->finals.end());
  const detail::Accumulation acc =
      detail::accumulation(*def, in.dtype, g.buffers[n.outputs[0]].dtype);
  r.elem_dtype = acc.element;
  r.acc_dtype = acc.acc;
  r.scan = def->scan;
  if (r.scan) return r;
  if (def->accumulator == detail::Accumulator::Welford)
    r.correction = n.attrs.has("correction") ? n.attrs.as<double>("correction") : 1.0;
  // Eager reduces a contiguous copy when it converts the input to another dtype
  // first (ops/reduce.cpp kernel_input; integers summed as int64 are read in
  // place, and their sums are exact in any order), else the input's own view.
  const bool copied =
      r.elem_dtype != in.dtype && !(is_integral(in.dtype, true) && r.elem_dtype == DType::Int64);
  const Shape strides = copied ? detail::contiguous_strides(in.sizes) : in.strides;
  const bool indexed = def->accumulator == detail::Accumulator::ArgMax ||
                       def->accumulator == detail::Accumulator::ArgMin;
  const reduce::ReduceGeom geom = reduce::make_reduce_geom(in.sizes, strides, r.dims, indexed);
  r.order.column = geom.column >= 0;
  for (int64_t d : r.dims)
    if (in.sizes[d] == 1) r.order.dims.push_back(d);
  r.order.dims.insert(r.order.dims.end(), geom.red_dims.begin(), geom.red_dims.end());
  r.order.run = geom.run();
  r.order.contiguous = geom.run_contiguous();
  return r;
}

IndexExpr flat_index(const Index& it) {
  if (it.flat) return *it.flat;
  Shape cs = detail::contiguous_strides(it.shape);
  IndexExpr f = IndexExpr::constant(0);
  for (size_t k = 0; k < it.shape.size(); ++k)
    if (it.shape[k] != 1) f = f + it.vars[k] * cs[k];
  return f;
}

Index unflatten(const Shape& shape, const IndexExpr& flat) {
  Index out{shape, {}, flat};
  // A shape with a size-0 dim has no element (the loops over it never run):
  // no division by its zero sizes and strides.
  if (detail::shape_numel(shape) == 0) {
    out.vars.assign(shape.size(), IndexExpr::constant(0));
    return out;
  }
  Shape cs = detail::contiguous_strides(shape);
  int first = -1;
  for (size_t k = 0; k < shape.size(); ++k)
    if (shape[k] != 1 && first < 0) first = static_cast<int>(k);
  for (size_t k = 0; k < shape.size(); ++k) {
    IndexExpr q = cs[k] == 1 ? flat : floordiv(flat, IndexExpr::constant(cs[k]));
    if (shape[k] == 1)
      out.vars.push_back(IndexExpr::constant(0));
    else if (static_cast<int>(k) == first)
      out.vars.push_back(q);  // the outermost non-1 dim needs no wrap
    else
      out.vars.push_back(mod(q, IndexExpr::constant(shape[k])));
  }
  return out;
}

Index domain_index(const Shape& shape, const std::vector<int64_t>& rdims, const IndexExpr& row,
                   const IndexExpr& r, const std::vector<int64_t>& visit) {
  SMELT_INTERNAL_ASSERT(visit.size() == rdims.size(), "domain_index: {} dims visited, {} reduced",
                        visit.size(), rdims.size());
  // Visiting the dims of size > 1 in row-major order is the plain index.
  std::vector<int64_t> a, b;
  for (auto d : visit)
    if (shape[d] != 1) a.push_back(d);
  for (auto d : rdims)
    if (shape[d] != 1) b.push_back(d);
  if (a == b) return domain_index(shape, rdims, row, r);
  Shape kept, red;
  std::vector<bool> is_red(shape.size(), false);
  for (auto d : rdims) is_red[d] = true;
  for (size_t k = 0; k < shape.size(); ++k)
    if (!is_red[k]) kept.push_back(shape[k]);
  for (auto d : visit) red.push_back(shape[d]);
  Index kv = unflatten(kept, row), rv = unflatten(red, r);
  Index out{shape, std::vector<IndexExpr>(shape.size(), IndexExpr::constant(0)), std::nullopt};
  for (size_t k = 0, ki = 0; k < shape.size(); ++k)
    if (!is_red[k]) out.vars[k] = kv.vars[ki++];
  for (size_t i = 0; i < visit.size(); ++i) out.vars[visit[i]] = rv.vars[i];
  return out;
}

Index domain_index(const Shape& shape, const std::vector<int64_t>& rdims, const IndexExpr& row,
                   const IndexExpr& r) {
  Shape kept, red;
  std::vector<bool> is_red(shape.size(), false);
  for (auto d : rdims) is_red[d] = true;
  for (size_t k = 0; k < shape.size(); ++k) (is_red[k] ? red : kept).push_back(shape[k]);
  Index kv = unflatten(kept, row), rv = unflatten(red, r);
  Index out{shape, {}, std::nullopt};
  bool trailing = true;  // reduced dims after every kept dim: flat = row * rnumel + r
  for (size_t k = 0; k + 1 < shape.size(); ++k)
    if (is_red[k] && !is_red[k + 1]) trailing = false;
  for (size_t k = 0, ki = 0, ri = 0; k < shape.size(); ++k)
    out.vars.push_back(is_red[k] ? rv.vars[ri++] : kv.vars[ki++]);
  if (trailing) out.flat = row * detail::shape_numel(red) + r;
  return out;
}

IndexExpr operand_offset(const Operand& o, const Index& it) {
  const int64_t lead = static_cast<int64_t>(it.shape.size()) - static_cast<int64_t>(o.sizes.size());
  const int64_t n = static_cast<int64_t>(it.shape.size());
  if (it.flat) {
    // A dense read in the iteration's own layout: the flat position itself.
    Shape cs = detail::contiguous_strides(it.shape);
    bool dense = lead >= 0;
    for (int64_t k = 0; dense && k < n; ++k) {
      if (it.shape[k] == 1) continue;
      int64_t d = k - lead;
      dense = d >= 0 && o.sizes[d] == it.shape[k] && o.strides[d] == cs[k];
    }
    if (dense) return *it.flat + o.offset;
  }
  IndexExpr f = IndexExpr::constant(o.offset);
  for (size_t d = 0; d < o.sizes.size(); ++d)
    if (o.sizes[d] != 1 && o.strides[d] != 0 && it.shape[lead + d] != 1)
      f = f + it.vars[lead + d] * o.strides[d];
  return f;
}

Index producer_index(const Shape& p, const Operand& o, const Index& it) {
  return unflatten(p, operand_offset(o, it));
}

}  // namespace smelt::compiler
