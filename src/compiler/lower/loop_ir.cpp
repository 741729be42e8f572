#include "compiler/lower/loop_ir.h"

#include <fmt/format.h>

#include "core/tensor_impl.h"
#include "ops/op_table.h"

namespace smelt::compiler {

const char* loop_kind_name(LoopKind k) {
  switch (k) {
    case LoopKind::Pointwise:
      return "pointwise";
    case LoopKind::Reduction:
      return "reduction";
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
      // reductions without an accumulator (cumsum) run their eager kernel
      return def->accumulator == detail::Accumulator::None ? LoopKind::Fallback
                                                           : LoopKind::Reduction;
    case detail::OpKind::Extern:
      return LoopKind::Extern;
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
  DType out = g.buffers[n.outputs[0]].dtype;
  auto acc_of = [](DType t) {
    if (t == DType::Float16 || t == DType::BFloat16) return DType::Float32;
    if (is_floating(t)) return t;
    return DType::Int64;
  };
  const detail::OpDef* def = detail::find_op(n.op);
  SMELT_INTERNAL_ASSERT(def && def->accumulator != detail::Accumulator::None,
                        "reduction '{}' has no lowering", n.op);
  r.accumulator = std::string(detail::accumulator_name(def->accumulator));
  r.finals.assign(def->finals.begin(), def->finals.end());
  // Max / Min / ArgMax / ArgMin accumulate in the input's compute type.
  const DType in_acc =
      (in.dtype == DType::Float16 || in.dtype == DType::BFloat16) ? DType::Float32 : in.dtype;
  switch (def->accumulator) {
    case detail::Accumulator::Sum:
      r.acc_dtype = acc_of(out);
      // Long float32 sums accumulate in double (eager uses a cascade sum; a
      // plain float accumulator would drift by ~sqrt(n) ulps).
      if (r.acc_dtype == DType::Float32 && r.rnumel >= kLongReduction) r.acc_dtype = DType::Float64;
      break;
    case detail::Accumulator::Prod:
      r.acc_dtype = acc_of(out);
      break;
    case detail::Accumulator::Max:
    case detail::Accumulator::Min:
    case detail::Accumulator::ArgMax:
    case detail::Accumulator::ArgMin:
      r.acc_dtype = in_acc;
      break;
    case detail::Accumulator::Welford:
      r.acc_dtype = DType::Float64;
      r.correction = n.attrs.has("correction") ? n.attrs.as<double>("correction") : 1.0;
      break;
    case detail::Accumulator::Any:
    case detail::Accumulator::All:
      r.acc_dtype = DType::Bool;
      break;
    case detail::Accumulator::None:
      break;
  }
  return r;
}

namespace {
std::string term(const std::string& var, int64_t coef) {
  if (coef == 1) return var;
  return fmt::format("{}*{}", var, coef);
}
}  // namespace

std::string operand_offset(const Operand& o, const Index& it) {
  const int64_t n = static_cast<int64_t>(it.shape.size());
  const int64_t lead = n - static_cast<int64_t>(o.sizes.size());
  std::vector<int64_t> coef(n, 0);
  for (size_t d = 0; d < o.sizes.size(); ++d)
    if (o.sizes[d] != 1) coef[lead + d] = o.strides[d];
  if (!it.flat.empty() && o.offset == 0) {
    Shape cs = detail::contiguous_strides(it.shape);
    bool same = true;
    for (int64_t k = 0; k < n; ++k)
      if (it.shape[k] != 1 && coef[k] != cs[k]) same = false;
    if (same) return it.flat;
  }
  std::vector<std::string> parts;
  for (int64_t k = 0; k < n; ++k)
    if (coef[k] != 0 && it.shape[k] != 1) parts.push_back(term(it.vars[k], coef[k]));
  if (o.offset != 0 || parts.empty()) parts.push_back(std::to_string(o.offset));
  if (parts.size() == 1) return parts[0];
  return "(" + fmt::format("{}", fmt::join(parts, " + ")) + ")";
}

Index producer_index(const Shape& p, const Operand& o, const Index& it) {
  Index out;
  out.shape = p;
  const int64_t np = static_cast<int64_t>(p.size());
  Shape cs = detail::contiguous_strides(p);
  const int64_t lead = static_cast<int64_t>(it.shape.size()) - static_cast<int64_t>(o.sizes.size());
  // Structural remap: every read dim walks one producer dim with a step.
  bool ok = true;
  std::vector<int64_t> start(np, 0);
  int64_t rem = o.offset;
  for (int64_t k = 0; k < np; ++k) {
    if (p[k] <= 1) continue;
    start[k] = rem / cs[k];
    rem -= start[k] * cs[k];
    if (start[k] >= p[k]) ok = false;
  }
  if (rem != 0) ok = false;
  std::vector<std::string> vars(np);
  std::vector<bool> used(np, false);
  for (size_t d = 0; ok && d < o.sizes.size(); ++d) {
    if (o.sizes[d] == 1 || o.strides[d] == 0) continue;
    int found = -1;
    int64_t step = 0;
    for (int64_t k = 0; k < np; ++k) {
      if (used[k] || p[k] <= 1 || o.strides[d] < cs[k] || o.strides[d] % cs[k] != 0) continue;
      int64_t s = o.strides[d] / cs[k];
      if (start[k] + s * (o.sizes[d] - 1) >= p[k]) continue;
      found = static_cast<int>(k);
      step = s;
      break;  // dims are in decreasing stride order: the first fit is the outermost
    }
    if (found < 0) {
      ok = false;
      break;
    }
    used[found] = true;
    std::string v = it.vars[lead + d];
    std::string e = step == 1 ? v : fmt::format("{}*{}", v, step);
    vars[found] = start[found] == 0 ? e : fmt::format("({} + {})", e, start[found]);
  }
  if (ok) {
    bool identity = np == static_cast<int64_t>(it.shape.size()) && !it.flat.empty();
    for (int64_t k = 0; k < np; ++k) {
      if (!used[k]) vars[k] = std::to_string(start[k]);
      if (identity && p[k] != 1 && vars[k] != it.vars[k]) identity = false;
      if (identity && p[k] != it.shape[k]) identity = false;
    }
    out.vars = vars;
    out.flat = identity ? it.flat : "";
    return out;
  }
  // General: decompose the flat offset.
  std::string f = operand_offset(o, it);
  out.vars.resize(np);
  for (int64_t k = 0; k < np; ++k) {
    if (p[k] == 1) {
      out.vars[k] = "0";
    } else if (k == 0) {
      out.vars[k] = cs[k] == 1 ? f : fmt::format("({} / {})", f, cs[k]);
    } else {
      out.vars[k] = cs[k] == 1 ? fmt::format("({} % {})", f, p[k])
                               : fmt::format("({} / {} % {})", f, cs[k], p[k]);
    }
  }
  out.flat = f;
  return out;
}

}  // namespace smelt::compiler
