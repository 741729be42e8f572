// Builds a KernelDesc from a kernel group and its config (see kernel_builder.h).
// Values are interned by structure (an id per distinct value, independent of
// temporaries' names), so the same value computed in two loops over a row is
// recognised without looking at any text. Producer chains are walked with an
// explicit stack: no recursion proportional to the graph.
#include "compiler/codegen/kernel_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "compiler/fusion/legality.h"
#include "compiler/lower/movement.h"
#include "core/tensor_impl.h"
#include "kernels/pointwise_list.h"
#include "ops/op_table.h"
#include "ops/pointwise.h"

namespace smelt::compiler {

namespace {

ExprPtr make(Expr e) { return std::make_shared<const Expr>(std::move(e)); }

ExprPtr literal(const Scalar& s, DType t) {
  Expr e;
  e.kind = Expr::Kind::Literal;
  e.literal = s;
  e.dtype = t;
  return make(std::move(e));
}

ExprPtr convert(ExprPtr v, DType from, DType to) {
  Expr e;
  e.kind = Expr::Kind::Convert;
  e.from = from;
  e.dtype = to;
  e.operands = {std::move(v)};
  return make(std::move(e));
}

ExprPtr cast(ExprPtr v, DType from, DType to) {
  Expr e;
  e.kind = Expr::Kind::Cast;
  e.from = from;
  e.dtype = to;
  e.operands = {std::move(v)};
  return make(std::move(e));
}

ExprPtr row_load(const std::string& buffer, DType t, bool raw = false) {
  Expr e;
  e.kind = Expr::Kind::RowLoad;
  e.name = buffer;
  e.dtype = t;
  e.raw = raw;
  e.index = IndexExpr::var("r", 1 << 30);
  return make(std::move(e));
}

Stmt loop(std::string var, int64_t extent, RangeTag tag) {
  Stmt s;
  s.kind = Stmt::Kind::Loop;
  s.range = Range{var, IndexExpr::constant(extent), tag};
  return s;
}

std::string literal_key(const Scalar& s) {
  return s.is_floating()
             ? fmt::format("{:a}", s.to_double())
             : (s.is_bool() ? (s.to_double() != 0 ? "T" : "F") : std::to_string(s.to_int()));
}

class Builder {
 public:
  Builder(const Graph& g, const std::vector<bool>& mat, const KernelGroup& grp,
          const KernelConfig& cfg)
      : g_(g), mat_(mat), grp_(grp), cfg_(cfg) {}

  KernelDesc run(const std::string& name) {
    KernelDesc d;
    d.name = name;
    d.config = cfg_;
    scopes_.push_back(Scope{&d.body, {}});
    if (grp_.scan)
      scan_kernel();
    else if (grp_.reduction)
      reduction_kernel();
    else
      pointwise_kernel();
    std::stable_partition(args_.begin(), args_.end(), [](const KernelArg& a) { return !a.write; });
    d.args = args_;
    d.error_ops = fmt::format("{}", fmt::join(error_ops_, "/"));
    d.ops.assign(ops_.begin(), ops_.end());
    if (cfg_.persistent) keep_rows_resident(d.body);
    return d;
  }

 private:
  struct Scope {
    std::vector<Stmt>* out;
    std::map<std::string, ExprPtr> values;  // intern key (or node@index memo) -> temp
  };
  struct ValueInfo {
    bool depends_on_r = false;
    bool computed = false;  // a functor call is part of it
    std::vector<int> parts;
  };

  // ---- arguments, scopes, values ------------------------------------------
  std::string use_arg(int buf, bool write) {
    std::string name = fmt::format("{}_{}", write ? "out" : "in", g_.buffers[buf].name());
    for (auto& a : args_)
      if (a.buf == buf && a.write == write) return name;
    args_.push_back(
        KernelArg{buf, g_.buffers[buf].dtype, write, name, g_.buffers[buf].aligned, {}, false});
    return name;
  }

  void add(Stmt s) { scopes_.back().out->push_back(std::move(s)); }

  /// Opens `s` (a Loop or SplitReduce) as the scope statements go into.
  Stmt& open(Stmt s) {
    add(std::move(s));
    Stmt& opened = scopes_.back().out->back();
    scopes_.push_back(Scope{&opened.body, {}});
    return opened;
  }
  void close() { scopes_.pop_back(); }

  ExprPtr lookup(const std::string& key) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->values.find(key);
      if (f != it->values.end()) return f->second;
    }
    return nullptr;
  }

  /// An index's text in a key, the temporaries it names (a gather's
  /// data-dependent position) standing for their value ids: the same gather
  /// in two loops over a row is one value (an embedding's row, computed in a
  /// layer_norm's two passes, is kept in the row buffer of the first).
  /// (CPU only: the CUDA kernels, which keep every row value resident, are
  /// left as they were; not run on a GPU here.)
  std::string index_key(const IndexExpr& index) const {
    if (cfg_.target == Target::Cuda) return index.str();
    std::map<std::string, IndexExpr> ids;
    for (auto& v : index.free_vars())
      if (auto t = temp_value_.find(v); t != temp_value_.end())
        ids.emplace(
            v, IndexExpr::var("v" + std::to_string(t->second), index.var_extent(v).value_or(2)));
    return ids.empty() ? index.str() : index.substitute(ids).str();
  }

  /// The structural key of `e` (temporaries stand for their value ids).
  std::string key_of(const Expr& e) const {
    std::string k;
    switch (e.kind) {
      case Expr::Kind::Temp:
        return "v" + std::to_string(temp_value_.at(e.name));
      case Expr::Kind::Literal:
        return fmt::format("l{}:{}", dtype_name(e.dtype), literal_key(e.literal));
      case Expr::Kind::Load:
        return fmt::format("L{}[{}]{}", e.name, index_key(e.index),
                           e.mask ? "?" + key_of(*e.mask) : "");
      case Expr::Kind::InBounds: {
        k = "B";
        for (auto& [x, lo, hi] : e.guard) k += fmt::format("{}:{}:{},", x.str(), lo, hi);
        return k;
      }
      case Expr::Kind::Select:
        k = "S(";
        break;
      case Expr::Kind::Clamp:
        k = fmt::format("Q{}(", static_cast<int64_t>(e.number));
        break;
      case Expr::Kind::RowLoad:
        return fmt::format("R{}[{}]", e.name, e.index.str());
      case Expr::Kind::Call:
        k = fmt::format("C{}<{}>(", e.name, dtype_name(e.from));
        break;
      case Expr::Kind::Convert:
        k = fmt::format("X{}>{}(", dtype_name(e.from), dtype_name(e.dtype));
        break;
      case Expr::Kind::Cast:
        k = fmt::format("K{}>{}(", dtype_name(e.from), dtype_name(e.dtype));
        break;
      case Expr::Kind::AccValue:
        return fmt::format("A{}{}.{}", e.name, e.lane ? "[" + e.index.str() + "]" : "", e.field);
    }
    for (auto& o : e.operands) k += key_of(*o) + ",";
    return k + ")";
  }

  void collect(const Expr& e, ValueInfo& vi) const {
    switch (e.kind) {
      case Expr::Kind::Temp: {
        int id = temp_value_.at(e.name);
        vi.parts.push_back(id);
        vi.depends_on_r |= values_[id].depends_on_r;
        vi.computed |= values_[id].computed;
        return;
      }
      case Expr::Kind::Load:
      case Expr::Kind::RowLoad:
        vi.depends_on_r |= e.index.depends_on("r");
        // Data-dependent positions are temporaries named in the index.
        for (auto& v : e.index.free_vars()) {
          auto t = temp_value_.find(v);
          if (t == temp_value_.end()) continue;
          vi.parts.push_back(t->second);
          vi.depends_on_r |= values_[t->second].depends_on_r;
        }
        if (e.mask) collect(*e.mask, vi);
        return;
      case Expr::Kind::InBounds:
        for (auto& g : e.guard) vi.depends_on_r |= std::get<0>(g).depends_on("r");
        return;
      case Expr::Kind::Call:
        vi.computed = true;
        break;
      default:
        break;
    }
    for (auto& o : e.operands) collect(*o, vi);
  }

  /// Names `value` as a temporary (Let), reusing one already visible.
  ExprPtr emit(ExprPtr value, DType dtype) {
    std::string key = key_of(*value);
    if (ExprPtr t = lookup(key)) return t;
    auto id_it = ids_.find(key);
    int id;
    if (id_it == ids_.end()) {
      id = static_cast<int>(values_.size());
      ids_.emplace(key, id);
      ValueInfo vi;
      collect(*value, vi);
      values_.push_back(std::move(vi));
    } else {
      id = id_it->second;
    }
    Expr t;
    t.kind = Expr::Kind::Temp;
    t.name = fmt::format("t{}", next_temp_++);
    t.dtype = dtype;
    temp_value_[t.name] = id;
    ExprPtr tp = make(t);
    Stmt s;
    s.kind = Stmt::Kind::Let;
    s.name = t.name;
    s.dtype = dtype;
    s.value = std::move(value);
    add(std::move(s));
    scopes_.back().values[key] = tp;
    return tp;
  }

  ExprPtr load(const Operand& o, const Index& it) {
    Expr e;
    e.kind = Expr::Kind::Load;
    e.name = use_arg(o.buf, false);
    e.index = operand_offset(o, it);
    e.dtype = g_.buffers[o.buf].dtype;
    e.mask = current_mask();
    return emit(make(std::move(e)), e.dtype);
  }

  /// The conjunction of the guards in force (reads of pad and cat pieces
  /// outside their input), or nullptr.
  ExprPtr current_mask() const {
    if (masks_.empty()) return nullptr;
    Expr m;
    m.kind = Expr::Kind::InBounds;
    m.dtype = DType::Bool;
    for (auto& g : masks_) m.guard.insert(m.guard.end(), g.terms.begin(), g.terms.end());
    return make(std::move(m));
  }

  static ExprPtr in_bounds(const Guard& g) {
    Expr m;
    m.kind = Expr::Kind::InBounds;
    m.dtype = DType::Bool;
    m.guard = g.terms;
    return make(std::move(m));
  }

  static ExprPtr select(ExprPtr c, ExprPtr a, ExprPtr b, DType t) {
    Expr e;
    e.kind = Expr::Kind::Select;
    e.dtype = t;
    e.operands = {std::move(c), std::move(a), std::move(b)};
    return make(std::move(e));
  }

  /// The value of index map `n` (masked_fill, pad, cat, gather, ...) at `at`.
  ExprPtr movement(const Node& n, const Index& at) {
    ops_.insert(n.op);
    const DType out = g_.buffers[n.outputs[0]].dtype;
    auto index_value = [&](int input, const Index& pos, int64_t extent) {
      ExprPtr v = value(n.inputs[input], pos);
      // Out-of-range indices raise like eager; the read itself is clamped.
      Stmt chk;
      chk.kind = Stmt::Kind::CheckIndex;
      chk.code = static_cast<int>(detail::runtime_check(n.op, n.attrs));
      chk.value = v;
      chk.extent = extent;
      chk.mask = current_mask();
      add(std::move(chk));
      error_ops_.insert(n.op);
      Expr c;
      c.kind = Expr::Kind::Clamp;
      c.dtype = DType::Int64;
      c.number = static_cast<double>(extent);
      c.operands = {v};
      ExprPtr t = emit(make(std::move(c)), DType::Int64);
      return IndexExpr::var(t->name, std::max<int64_t>(1, extent));
    };
    MovementLowering m = lower_movement(g_, n, at, index_value);
    auto read = [&](const MovementRead& r) {
      if (!r.guard.always()) masks_.push_back(r.guard);
      ExprPtr v = value(n.inputs[r.input], r.at);
      if (!r.guard.always()) masks_.pop_back();
      return convert(v, n.inputs[r.input].dtype, out);
    };
    ExprPtr fill = literal(m.fill, out);
    ExprPtr result;
    switch (m.combine) {
      case MovementLowering::Combine::Read:
        result = read(m.reads[0]);
        if (!m.reads[0].guard.always())
          result = select(in_bounds(m.reads[0].guard), result, fill, out);
        break;
      case MovementLowering::Combine::Pieces:
        result = fill;
        for (auto r = m.reads.rbegin(); r != m.reads.rend(); ++r)
          result = select(in_bounds(r->guard), read(*r), result, out);
        break;
      case MovementLowering::Combine::MaskedFill:
        result = select(value(n.inputs[1], m.reads[1].at), fill, read(m.reads[0]), out);
        break;
      case MovementLowering::Combine::Keep:
        result = select(in_bounds(m.keep), read(m.reads[0]), fill, out);
        break;
    }
    return emit(result, out);
  }

  bool is_group_reduction(int buf) const {
    const Buffer& b = g_.buffers[buf];
    return b.kind == BufferKind::Node && std::find(grp_.reductions.begin(), grp_.reductions.end(),
                                                   b.producer) != grp_.reductions.end();
  }

  ExprPtr row_value(int buf) const {
    auto it = row_values_.find(buf);
    SMELT_INTERNAL_ASSERT(it != row_values_.end(), "%{} read before its reduction completes", buf);
    return it->second;
  }

  std::string memo_key(int node, const Index& at) const {
    std::string k = fmt::format("N{}@", node);
    for (auto& v : at.vars) k += v.str() + ",";
    if (ExprPtr m = current_mask()) k += "?" + key_of(*m);
    return k;
  }

  /// The value of operand `o` read at iteration index `it`.
  ExprPtr value(const Operand& o, const Index& it) {
    if (o.is_scalar()) return literal(*o.scalar, o.dtype);
    if (is_group_reduction(o.buf)) return row_value(o.buf);
    if (computed_in(g_, mat_, grp_, o.buf))
      return node_value(g_.buffers[o.buf].producer, producer_index(g_.buffers[o.buf].sizes, o, it));
    return load(o, it);
  }

  /// The value pointwise node `root` computes at `at`, its inlined producers
  /// first (an explicit stack instead of recursion).
  ExprPtr node_value(int root, Index at) {
    struct Frame {
      int node;
      Index at;
      std::string memo;
      std::vector<ExprPtr> args;
      size_t next = 0;
    };
    std::string root_memo = memo_key(root, at);
    if (ExprPtr v = lookup(root_memo)) return v;
    if (is_index_map(g_.nodes[root])) {
      ExprPtr v = movement(g_.nodes[root], at);
      scopes_.back().values[root_memo] = v;
      return v;
    }
    std::vector<Frame> stack;
    stack.push_back(Frame{root, std::move(at), root_memo, {}, 0});
    while (true) {
      Frame& f = stack.back();
      const Node& n = g_.nodes[f.node];
      if (f.next < n.inputs.size()) {
        const Operand& o = n.inputs[f.next++];
        if (!o.is_scalar() && !is_group_reduction(o.buf) && computed_in(g_, mat_, grp_, o.buf)) {
          int p = g_.buffers[o.buf].producer;
          Index pi = producer_index(g_.buffers[o.buf].sizes, o, f.at);
          std::string mk = memo_key(p, pi);
          if (ExprPtr v = lookup(mk)) {
            f.args.push_back(v);
          } else if (is_index_map(g_.nodes[p])) {
            // Its inputs are read at other indices: computed on its own.
            ExprPtr v = movement(g_.nodes[p], pi);
            scopes_.back().values[mk] = v;
            f.args.push_back(v);
          } else {
            stack.push_back(Frame{p, std::move(pi), mk, {}, 0});
          }
          continue;
        }
        f.args.push_back(value(o, f.at));
        continue;
      }
      ExprPtr v = pointwise(n, f.args);
      scopes_.back().values[f.memo] = v;
      stack.pop_back();
      if (stack.empty()) return v;
      stack.back().args.push_back(v);
    }
  }

  /// Node `n` applied to the values of its inputs.
  ExprPtr pointwise(const Node& n, const std::vector<ExprPtr>& in) {
    ops_.insert(n.op == "to_dtype" ? "convert" : n.op);
    DType out = g_.buffers[n.outputs[0]].dtype;
    if (n.op == "to_dtype" || n.op == "clone")
      return emit(convert(in[0], n.inputs[0].dtype, out), out);
    SMELT_INTERNAL_ASSERT(n.attrs.has("dtype"), "pointwise node {} has no compute dtype", n.op);
    DType c = n.attrs.as<DType>("dtype");
    const bool single_second =
        n.inputs.size() >= 2 &&
        (n.inputs[1].is_scalar() ||
         detail::single_divisor(n.inputs[1].sizes, n.inputs[1].strides, n.inputs[1].dtype, c));
    detail::PointwiseCall call = detail::pointwise_call(n.op, n.attrs, single_second);
    Expr e;
    e.kind = Expr::Kind::Call;
    e.name = call.functor;
    e.from = c;
    // Operands go to the compute type's opmath type (float for float16), as
    // the eager kernels take them: rounded to the compute dtype first where
    // PyTorch casts them to it (rounds_to_common: an int16 operand of a
    // bfloat16 add), otherwise without rounding. A scalar operand is a
    // wrapped number, which its NumberRule has converted already; a
    // one-element second operand of mul or div is read unrounded
    // (pw::unrounded_single_operand).
    for (size_t k = 0; k < in.size(); ++k) {
      const Operand& o = n.inputs[k];
      DType t = o.dtype;
      const bool unrounded = o.is_scalar() || (k == 1 && detail::shape_numel(o.sizes) == 1 &&
                                               ::smelt::pw::unrounded_single_operand(call.functor));
      if (c == DType::Bool && t != DType::Bool)
        e.operands.push_back(convert(in[k], t, DType::Bool));
      else if (!unrounded && rounds_to_common(t, c))
        e.operands.push_back(convert(in[k], t, c));
      else if (value_dtype(t) != value_dtype(c))
        e.operands.push_back(cast(in[k], t, c));
      else
        e.operands.push_back(in[k]);
    }
    for (auto& x : call.extra) e.operands.push_back(literal(x, c));
    // Integer division by zero raises, as eager does: the kernel sets a flag
    // the runtime turns into smelt::Error (nothing is written back then).
    bool int_div =
        detail::runtime_check(n.op, n.attrs) == detail::RuntimeCheck::IntegerDivisionByZero &&
        !is_floating(c) && e.operands.size() >= 2;
    if (int_div) {
      Stmt s;
      s.kind = Stmt::Kind::CheckZero;
      s.code = static_cast<int>(detail::RuntimeCheck::IntegerDivisionByZero);
      s.value = e.operands[1];
      s.mask = current_mask();
      add(std::move(s));
      error_ops_.insert(n.op);
    }
    const detail::OpDef* def = detail::find_op(n.op);
    bool to_bool =
        def && (def->rule == detail::DTypeRule::Compare || def->rule == detail::DTypeRule::Logical);
    DType result = to_bool ? DType::Bool : c;
    e.dtype = result;
    // A float16/bfloat16 result is computed in float32 (opmath); eager stores
    // it rounded, and so does the kernel unless told not to.
    DType computed = cfg_.round_intermediates ? value_dtype(result) : result;
    return emit(convert(make(std::move(e)), computed, out), out);
  }

  /// The dtype whose value type a value of `t` is computed in (float16 and
  /// bfloat16 compute in float32).
  static DType value_dtype(DType t) {
    return (t == DType::Float16 || t == DType::BFloat16) ? DType::Float32 : t;
  }

  void store(int buf, ExprPtr v, IndexExpr index) {
    Stmt s;
    s.kind = Stmt::Kind::Store;
    s.name = use_arg(buf, true);
    s.dtype = g_.buffers[buf].dtype;
    s.value = std::move(v);
    s.index = std::move(index);
    add(std::move(s));
  }

  // ---- kernels -------------------------------------------------------------
  void pointwise_kernel() {
    const Shape& s = grp_.shape;
    int64_t n = detail::shape_numel(s);
    RangeTag outer_tag = cfg_.parallel ? RangeTag::Parallel : RangeTag::Serial;
    Index it;
    if (cfg_.tile_rows && cfg_.column_blocks > 1) {
      // Rows x blocks of columns (KernelConfig::column_blocks): iteration b
      // is block b % blocks of row b / blocks, its columns the vector loop.
      const int64_t last = s.back(), blocks = cfg_.column_blocks, width = last / blocks;
      const int64_t rows = n / last;
      SMELT_INTERNAL_ASSERT(last % blocks == 0, "{} column blocks of a row of {}", blocks, last);
      open(loop("b", rows * blocks, outer_tag));
      open(loop("j", width, RangeTag::Vector));
      Shape outer(s.begin(), s.end() - 1);
      IndexExpr b = IndexExpr::var("b", rows * blocks), j = IndexExpr::var("j", width);
      it = unflatten(outer, floordiv(b, blocks));
      it.shape = s;
      it.vars.push_back(mod(b, blocks) * width + j);
      it.flat = b * width + j;
    } else if (cfg_.tile_rows) {
      const int64_t last = s.back();
      const int64_t rows = n / last;
      open(loop("o", rows, outer_tag));
      open(loop("j", last, RangeTag::Vector));
      Shape outer(s.begin(), s.end() - 1);
      IndexExpr o = IndexExpr::var("o", rows), j = IndexExpr::var("j", last);
      it = unflatten(outer, o);
      it.shape = s;
      it.vars.push_back(j);
      it.flat = o * last + j;
    } else {
      open(loop("i", n, outer_tag));
      it = unflatten(s, IndexExpr::var("i", std::max<int64_t>(1, n)));
    }
    for (int node : grp_.stores) {
      const Node& nd = g_.nodes[node];
      store(nd.outputs[0], node_value(node, it), *it.flat);
    }
    while (scopes_.size() > 1) close();
  }

  /// The element x of reduction `n` as its accumulator takes it: rounded to
  /// the element dtype, then converted to the accumulate type (eager's rule),
  /// or to `to` where a partial accumulates in another type.
  ExprPtr reduction_element(const Node& n, const ReductionInfo& info, ExprPtr x,
                            std::optional<DType> to = std::nullopt) {
    return convert(convert(std::move(x), n.inputs[0].dtype, info.elem_dtype), info.elem_dtype,
                   to.value_or(info.acc_dtype));
  }

  /// The outputs of reduction `n` from its accumulator `acc` (the row's
  /// result), kept for the row's consumers and stored at `o` where materialized.
  void reduction_results(const Node& n, const ReductionInfo& info, const std::string& acc,
                         const IndexExpr& o) {
    const bool indexed = info.accumulator == "ArgMax" || info.accumulator == "ArgMin";
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      int ob = n.outputs[k];
      DType od = g_.buffers[ob].dtype;
      const std::string& fin = info.finals[k];
      Expr e;
      e.kind = Expr::Kind::AccValue;
      e.name = acc;
      e.accumulator = info.accumulator;
      e.acc_dtype = info.acc_dtype;
      e.dtype = info.acc_dtype;
      DType from = info.acc_dtype;
      if (fin == "value") {
        e.field = indexed ? "value" : "finalize";
      } else if (fin == "index") {
        e.field = "index";
        from = e.dtype = DType::Int64;
      } else if (fin == "mean") {
        e.field = info.accumulator == "Sum" ? "sum_mean" : "mean";
        e.number = static_cast<double>(rnumel_);
      } else {
        e.field = fin;  // var, std
        e.number = info.correction;
      }
      ExprPtr v = emit(convert(make(std::move(e)), from, od), od);
      row_values_[ob] = v;
      if (mat_[ob]) store(ob, v, o);
    }
  }

  /// Column reductions side by side (KernelConfig::column_lanes): each step
  /// of the outer loop reduces `lanes` neighbouring outputs, one
  /// reduce::ColumnLanes per reduction (lane q: output o * lanes + q, folded
  /// in ColumnOrder, so each output equals the one-at-a-time kernel's and
  /// eager's); for each element the loop over the lanes runs innermost
  /// (contiguous reads: it vectorizes). Then each lane's results and the
  /// per-output consumers, in a loop over the lanes.
  void column_lanes_kernel() {
    const Shape& s = grp_.shape;
    const int64_t lanes = cfg_.column_lanes;
    rnumel_ = 1;
    for (auto d : grp_.rdims) rnumel_ *= s[d];
    const int64_t outer = rnumel_ > 0 ? detail::shape_numel(s) / rnumel_ : 0;
    SMELT_INTERNAL_ASSERT(lanes > 0 && outer % lanes == 0 && cfg_.target == Target::Cpp,
                          "column lanes: {} outputs in lanes of {}", outer, lanes);
    const IndexExpr q = IndexExpr::var("q", lanes);
    const IndexExpr row = IndexExpr::var("o", std::max<int64_t>(1, outer / lanes)) * lanes + q;
    const IndexExpr r = IndexExpr::var("r", std::max<int64_t>(1, rnumel_));
    open(loop("o", outer / lanes, cfg_.parallel ? RangeTag::Parallel : RangeTag::Serial));
    std::vector<ReductionInfo> infos;
    auto order_name = [](size_t k) { return fmt::format("acc{}_order", k); };
    // A statement on reduction k's ColumnLanes.
    auto on_lanes = [&](Stmt::Kind kind, size_t k) {
      Stmt st;
      st.kind = kind;
      st.name = order_name(k);
      st.accumulator = infos[k].accumulator;
      st.acc_dtype = infos[k].acc_dtype;
      st.order = AccOrder::Column;
      return st;
    };
    for (size_t k = 0; k < grp_.reductions.size(); ++k) {
      const Node& n = g_.nodes[grp_.reductions[k]];
      infos.push_back(reduction_info(g_, n));
      ops_.insert(n.op);
      Stmt init = on_lanes(Stmt::Kind::AccInit, k);
      init.extent = lanes;
      add(std::move(init));
    }
    open(loop("r", rnumel_, RangeTag::Serial));
    open(loop("q", lanes, RangeTag::Vector));
    for (size_t k = 0; k < grp_.reductions.size(); ++k) {
      const Node& n = g_.nodes[grp_.reductions[k]];
      const Index visit = domain_index(s, grp_.rdims, row, r, infos[k].order.dims);
      Stmt st = on_lanes(Stmt::Kind::AccStep, k);
      st.lane = true;
      st.index = q;
      st.value = reduction_element(n, infos[k], value(n.inputs[0], visit));
      add(std::move(st));
    }
    close();
    for (size_t k = 0; k < grp_.reductions.size(); ++k) add(on_lanes(Stmt::Kind::AccNext, k));
    close();
    open(loop("q", lanes, RangeTag::Vector));
    for (size_t k = 0; k < grp_.reductions.size(); ++k) {
      const Node& n = g_.nodes[grp_.reductions[k]];
      const std::string acc = fmt::format("acc{}", k);
      Stmt fin;
      fin.kind = Stmt::Kind::AccFinish;
      fin.name = acc;
      fin.partial = order_name(k);
      fin.lane = true;
      fin.index = q;
      add(std::move(fin));
      reduction_results(n, infos[k], acc, row);
    }
    for (int node : grp_.stores) {
      const Node& n = g_.nodes[node];
      const Shape& os = g_.buffers[n.outputs[0]].sizes;
      SMELT_INTERNAL_ASSERT(os != s, "column lanes: a store over the whole domain");
      store(n.outputs[0], node_value(node, unflatten(os, row)), row);
    }
    close();
    close();
  }

  void reduction_kernel() {
    if (cfg_.column_lanes > 0) {
      column_lanes_kernel();
      return;
    }
    const Shape& s = grp_.shape;
    Shape kept, red;
    std::vector<bool> is_red(s.size(), false);
    for (auto d : grp_.rdims) is_red[d] = true;
    for (size_t k = 0; k < s.size(); ++k) (is_red[k] ? red : kept).push_back(s[k]);
    int64_t outer = detail::shape_numel(kept);
    rnumel_ = detail::shape_numel(red);
    IndexExpr o = IndexExpr::var("o", std::max<int64_t>(1, outer));
    IndexExpr r = IndexExpr::var("r", std::max<int64_t>(1, rnumel_));
    Index full = domain_index(s, grp_.rdims, o, r);
    // CUDA: rows over blocks, each row's elements over its threads.
    const bool cuda = cfg_.target == Target::Cuda;
    // On the CPU, a row over reduced dims that are not adjacent (batch_norm's
    // N and H, W) is walked as runs of its trailing adjacent dims (H * W),
    // the leading reduced dims from r_o and the trailing ones from r_i, each
    // unflattened on its own: no index divides r_i by a multiple of the run,
    // so the contiguous runs vectorize. (red_dims: the reduced dims in index order.)
    std::vector<int64_t> red_dims(grp_.rdims.begin(), grp_.rdims.end());
    std::sort(red_dims.begin(), red_dims.end());
    size_t first_tail = red_dims.size();  // red_dims[first_tail..] are adjacent, up to the last
    while (first_tail > 0 &&
           (first_tail == red_dims.size() || red_dims[first_tail - 1] + 1 == red_dims[first_tail]))
      --first_tail;
    Shape lead, tail;
    for (size_t k = 0; k < red_dims.size(); ++k)
      (k < first_tail ? lead : tail).push_back(s[static_cast<size_t>(red_dims[k])]);
    const int64_t run = detail::shape_numel(tail);
    const bool runs = !cuda && !cfg_.split && !lead.empty() && run > 1;
    const IndexExpr r_o = IndexExpr::var("r_o", runs ? rnumel_ / run : 1);
    const IndexExpr r_i = IndexExpr::var("r_i", std::max<int64_t>(1, run));
    auto run_index = [&] {
      Index split = domain_index(s, grp_.rdims, o, r_o * run + r_i);
      const Index lv = unflatten(lead, r_o), tv = unflatten(tail, r_i);
      for (size_t k = 0; k < red_dims.size(); ++k)
        split.vars[static_cast<size_t>(red_dims[k])] =
            k < first_tail ? lv.vars[k] : tv.vars[k - first_tail];
      split.flat = std::nullopt;
      return split;
    };
    // The reduced dims other than size 1, in the given order.
    auto sized = [&](const std::vector<int64_t>& dims) {
      std::vector<int64_t> out;
      for (int64_t d : dims)
        if (s[static_cast<size_t>(d)] != 1) out.push_back(d);
      return out;
    };
    open(loop("o", outer,
              cuda ? RangeTag::Block : (cfg_.parallel ? RangeTag::Parallel : RangeTag::Serial)));
    int acc_id = 0;
    for (int node : grp_.reductions) {
      const Node& n = g_.nodes[node];
      ReductionInfo info = reduction_info(g_, n);
      ops_.insert(n.op);
      std::string acc = fmt::format("acc{}", acc_id++);
      bool indexed = info.accumulator == "ArgMax" || info.accumulator == "ArgMin";
      // Rows are combined in eager's order (ReductionOrder: InnerOrder or
      // ColumnOrder of reduce_ops.h), so a row reduced on one thread equals
      // eager bit for bit; a split row is cut into eager's stretches when eager
      // cuts it too. On CUDA each of the row's threads steps its elements in
      // index order (Plain), then the threads' partials are combined.
      const AccOrder order = info.order.column ? AccOrder::Column : AccOrder::Inner;
      const bool plain = !cfg_.split && cfg_.target != Target::Cpp;
      const std::string target = cfg_.split || plain ? acc : acc + "_order";
      Stmt init;
      init.kind = Stmt::Kind::AccInit;
      init.name = target;
      init.accumulator = info.accumulator;
      init.acc_dtype = info.acc_dtype;
      init.order = cfg_.split || plain ? AccOrder::Plain : order;
      add(init);
      auto element = [&](ExprPtr x) { return reduction_element(n, info, std::move(x)); };
      // The reduced dims walked in eager's visiting order (index order when plain).
      const Index visit = plain ? full : domain_index(s, grp_.rdims, o, r, info.order.dims);
      // Opens the AccRun folding the row's elements [r0, r1), in runs of
      // `extent`, into order struct `name` (elements indexed by `run_var`
      // within their run where it is set); the caller sets its value.
      auto open_run = [&](const std::string& name, IndexExpr r0, IndexExpr r1, int64_t extent,
                          const std::string& run_var) -> Stmt& {
        Stmt rs;
        rs.kind = Stmt::Kind::AccRun;
        rs.name = name;
        rs.accumulator = info.accumulator;
        rs.acc_dtype = info.acc_dtype;
        rs.contiguous = info.order.contiguous;
        rs.extent = extent;
        rs.index = std::move(r0);
        rs.range = Range{"r", std::move(r1), RangeTag::Serial};
        rs.run_var = run_var;
        return open(rs);
      };
      // The elements [r0, r1) of the row folded into order struct `name`; the
      // element at `r` is `elem(visit)`.
      auto stretch = [&](const std::string& name, IndexExpr r0, IndexExpr r1,
                         const std::function<ExprPtr(const Index&)>& elem) {
        Stmt& opened =
            open_run(name, std::move(r0), std::move(r1), std::max<int64_t>(1, info.order.run), "");
        opened.value = element(elem(visit));
        close();
      };
      auto input = [&](const Index& at) { return value(n.inputs[0], at); };
      bool prefill =
          std::find(cfg_.prefill.begin(), cfg_.prefill.end(), node) != cfg_.prefill.end();
      // The row cut among threads, each folding its part into `acc`_local,
      // the parts then combined into `acc` (the dialect's split_reduce).
      auto split_row = [&] {
        Stmt sr;
        sr.kind = Stmt::Kind::SplitReduce;
        sr.name = acc;
        sr.partial = acc + "_local";
        sr.accumulator = info.accumulator;
        sr.acc_dtype = info.acc_dtype;
        sr.extent = rnumel_;
        sr.rows = info.outer;
        return sr;
      };
      if (cuda) {
        // Each thread folds its elements into its partial (Welford's as
        // shifted sums: no division per element), then the row's threads
        // combine their partials (CudaDialect::split_reduce). Where a
        // thread folds at most kFloatPartial float32 (or narrower) elements,
        // their shifted sums (from the thread's first element) are kept in
        // float, as the eager layer_norm kernel keeps them and as PyTorch's
        // CUDA batch_norm keeps its whole Welford, and only the partials are
        // combined in double: a double per element (its conversion, add and
        // multiply-add) made layer_norm and batch_norm compute-bound.
        constexpr int64_t kFloatPartial = 512;
        const int64_t row_threads = std::max(1, cfg_.threads_per_row);
        const int64_t per_thread = cfg_.row_iters > 0
                                       ? int64_t{cfg_.row_iters} * std::max(1, cfg_.vec)
                                       : (rnumel_ + row_threads - 1) / row_threads;
        const bool float_partial = info.accumulator == "Welford" &&
                                   info.acc_dtype == DType::Float64 &&
                                   per_thread <= kFloatPartial && is_floating(info.elem_dtype) &&
                                   itemsize(info.elem_dtype) <= 4;
        Stmt sr = split_row();
        open(sr);
        Stmt local;
        local.kind = Stmt::Kind::AccInit;
        local.name = sr.partial;
        local.accumulator = info.accumulator == "Welford" ? "ShiftedWelford" : info.accumulator;
        local.acc_dtype = float_partial ? DType::Float32 : info.acc_dtype;
        add(local);
        open(loop("r", rnumel_, RangeTag::Thread));
        Stmt st;
        st.kind = Stmt::Kind::AccStep;
        st.name = local.name;
        st.accumulator = local.accumulator;
        st.acc_dtype = local.acc_dtype;
        st.indexed = indexed;
        st.value = reduction_element(n, info, value(n.inputs[0], full), local.acc_dtype);
        add(std::move(st));
        close();
        close();
      } else if (cfg_.split) {
        // One long row split across threads: eager's stretches
        // (reduce::row_splits), combined in order.
        Stmt sr = split_row();
        sr.order = order;
        open(sr);
        const int64_t bound = std::max<int64_t>(1, rnumel_ + 1);
        stretch(sr.partial, IndexExpr::var("r_begin", bound), IndexExpr::var("r_end", bound),
                input);
        close();
      } else if (prefill) {
        // Persistent row, computed element: the row in its own loop (which
        // vectorizes), stored in visiting order, then folded from the store.
        Stmt rb;
        rb.kind = Stmt::Kind::RowBuffer;
        rb.name = fmt::format("rowin{}", acc_id);
        rb.dtype = n.inputs[0].dtype;
        rb.extent = rnumel_;
        add(rb);
        open(loop("r", rnumel_, RangeTag::Vector));
        Stmt rs;
        rs.kind = Stmt::Kind::RowStore;
        rs.name = rb.name;
        rs.value = value(n.inputs[0], visit);
        rs.index = r;
        add(std::move(rs));
        close();
        stretch(target, IndexExpr::constant(0), IndexExpr::constant(rnumel_),
                [&](const Index&) { return row_load(rb.name, n.inputs[0].dtype); });
      } else if (runs && order == AccOrder::Inner && info.order.run == run &&
                 sized(info.order.dims) == sized(red_dims)) {
        // A row of several runs visited in index order (batch_norm's N runs
        // of H * W): one stretch per run, in order (the same elements folded
        // in the same sequence as one stretch over the row), its elements
        // indexed by run_index.
        const Index in_run = run_index();
        open(loop("r_o", rnumel_ / run, RangeTag::Serial));
        Stmt& opened = open_run(target, r_o * run, r_o * run + run, run, "r_i");
        opened.value = element(input(in_run));
        close();
        close();
      } else {
        stretch(target, IndexExpr::constant(0), IndexExpr::constant(rnumel_), input);
      }
      if (!cfg_.split && !plain) {
        Stmt fin;
        fin.kind = Stmt::Kind::AccFinish;
        fin.name = acc;
        fin.partial = target;
        add(std::move(fin));
      }
      reduction_results(n, info, acc, o);
    }
    // Pointwise consumers of the reductions: per row, or over the whole row again.
    std::vector<int> row_stores, full_stores;
    for (int node : grp_.stores)
      (g_.buffers[g_.nodes[node].outputs[0]].sizes == s ? full_stores : row_stores).push_back(node);
    for (int node : row_stores) {
      const Node& n = g_.nodes[node];
      store(n.outputs[0], node_value(node, unflatten(g_.buffers[n.outputs[0]].sizes, o)), o);
    }
    if (!full_stores.empty()) {
      // Pointwise stores over the whole row again: on the CPU as runs
      // (run_index; the order does not change a value).
      if (runs && !cfg_.persistent) {
        const Index split = run_index();
        open(loop("r_o", rnumel_ / run, RangeTag::Serial));
        open(loop("r_i", run, RangeTag::Vector));
        for (int node : full_stores)
          store(g_.nodes[node].outputs[0], node_value(node, split), flat_index(split));
        close();
        close();
      } else {
        open(loop("r", rnumel_,
                  cuda ? RangeTag::Thread : (cfg_.split ? RangeTag::Parallel : RangeTag::Vector)));
        for (int node : full_stores)
          store(g_.nodes[node].outputs[0], node_value(node, full), flat_index(full));
        close();
      }
    }
    close();
  }

  /// Scans (cumsum): each row walks the scanned dim in index order, as eager
  /// does, carrying one accumulator per scan (reduce_ops.h, in the scan's
  /// accumulate type); at each step every scan folds its element, then its
  /// result there is stored (where materialized) and read by the later scans
  /// and the pointwise consumers, which run in the same step. With lanes
  /// (KernelConfig::scan_lanes), a step runs over that many rows at once: the
  /// consecutive inner positions after the scanned dim, each its own
  /// accumulator, in the inner loop.
  void scan_kernel() {
    const Shape& s = grp_.shape;
    SMELT_INTERNAL_ASSERT(grp_.rdims.size() == 1 || (grp_.rdims.empty() && s.empty()),
                          "a scan kernel scans one dim");
    // [before, L, after]: rows are (before, after) positions, taken `lanes` at a time.
    const size_t d = grp_.rdims.empty() ? 0 : static_cast<size_t>(grp_.rdims[0]);
    const Shape before(s.begin(), s.begin() + static_cast<int64_t>(d));
    const Shape after(s.empty() ? s.end() : s.begin() + static_cast<int64_t>(d) + 1, s.end());
    const int64_t length = s.empty() ? 1 : s[d];
    const int64_t inner = detail::shape_numel(after);
    const int64_t lanes = std::max<int64_t>(1, cfg_.scan_lanes);
    const int64_t chunks = inner / lanes;
    const int64_t rows = detail::shape_numel(before) * chunks;
    rnumel_ = length;
    const IndexExpr o = IndexExpr::var("o", std::max<int64_t>(1, rows));
    const IndexExpr r = IndexExpr::var("r", std::max<int64_t>(1, length));
    const IndexExpr q = IndexExpr::var("q", lanes);
    const Index row = unflatten({detail::shape_numel(before), chunks}, o);
    const IndexExpr pos = row.vars[1] * lanes + q;  // the inner position
    Index at{s, unflatten(before, row.vars[0]).vars, std::nullopt};
    if (!s.empty()) at.vars.push_back(r);
    for (auto& v : unflatten(after, pos).vars) at.vars.push_back(v);
    at.flat = row.vars[0] * (length * inner) + r * inner + pos;
    open(loop("o", rows, cfg_.parallel ? RangeTag::Parallel : RangeTag::Serial));
    std::vector<ReductionInfo> infos;
    for (size_t k = 0; k < grp_.reductions.size(); ++k) {
      infos.push_back(reduction_info(g_, g_.nodes[grp_.reductions[k]]));
      if (s.empty()) continue;  // a 0-dim input: no accumulator (below)
      Stmt init;
      init.kind = Stmt::Kind::AccInit;
      init.name = fmt::format("acc{}", k);
      init.accumulator = infos[k].accumulator;
      init.acc_dtype = infos[k].acc_dtype;
      init.extent = lanes > 1 ? lanes : 0;
      add(std::move(init));
    }
    // Scan k folds element `x` (a value of its input) and gives its result there.
    auto step = [&](size_t k, ExprPtr x) {
      const Node& n = g_.nodes[grp_.reductions[k]];
      const ReductionInfo& info = infos[k];
      ops_.insert(n.op);
      // Rounded to the element dtype, then converted to the accumulate type (eager's rule).
      x = convert(convert(std::move(x), n.inputs[0].dtype, info.elem_dtype), info.elem_dtype,
                  info.acc_dtype);
      ExprPtr acc = x;  // a 0-dim input: eager copies the element (no addition to the identity)
      if (!s.empty()) {
        Stmt st;
        st.kind = Stmt::Kind::AccStep;
        st.name = fmt::format("acc{}", k);
        st.accumulator = info.accumulator;
        st.acc_dtype = info.acc_dtype;
        st.lane = lanes > 1;
        st.index = q;
        st.value = std::move(x);
        add(std::move(st));
        Expr e;
        e.kind = Expr::Kind::AccValue;
        e.name = fmt::format("acc{}", k);
        e.field = "finalize";
        e.accumulator = info.accumulator;
        e.acc_dtype = e.dtype = info.acc_dtype;
        e.lane = lanes > 1;
        e.index = q;
        acc = make(std::move(e));
      }
      const DType od = g_.buffers[n.outputs[0]].dtype;
      return emit(convert(std::move(acc), info.acc_dtype, od), od);
    };
    // The scans' results where materialized, then the pointwise consumers.
    auto store_results = [&] {
      for (size_t k = 0; k < grp_.reductions.size(); ++k) {
        const int ob = g_.nodes[grp_.reductions[k]].outputs[0];
        if (mat_[ob]) store(ob, row_values_.at(ob), *at.flat);
      }
      for (int node : grp_.stores) store(g_.nodes[node].outputs[0], node_value(node, at), *at.flat);
    };
    if (cfg_.persistent) {
      // One scan over a row that fits: its element computed in a loop of its
      // own (which vectorizes), the scan alone in the serial loop, and what
      // reads its results in a loop after it (which vectorizes too).
      SMELT_INTERNAL_ASSERT(grp_.reductions.size() == 1 && lanes == 1,
                            "a persistent scan kernel holds one scan, one row at a time");
      const Node& n = g_.nodes[grp_.reductions[0]];
      const int ob = n.outputs[0];
      const DType in = n.inputs[0].dtype, od = g_.buffers[ob].dtype;
      const bool prefill = std::find(cfg_.prefill.begin(), cfg_.prefill.end(),
                                     grp_.reductions[0]) != cfg_.prefill.end();
      auto row_buffer = [&](const std::string& name, DType t) {
        Stmt rb;
        rb.kind = Stmt::Kind::RowBuffer;
        rb.name = name;
        rb.dtype = t;
        rb.extent = length;
        add(std::move(rb));
      };
      auto row_store = [&](const std::string& name, ExprPtr v) {
        Stmt rs;
        rs.kind = Stmt::Kind::RowStore;
        rs.name = name;
        rs.value = std::move(v);
        rs.index = r;
        add(std::move(rs));
      };
      if (prefill) {
        row_buffer("rowin0", in);
        open(loop("r", length, RangeTag::Vector));
        row_store("rowin0", value(n.inputs[0], at));
        close();
      }
      row_buffer("rowscan0", od);
      open(loop("r", length, RangeTag::Serial));
      row_store("rowscan0", step(0, prefill ? row_load("rowin0", in) : value(n.inputs[0], at)));
      close();
      open(loop("r", length, RangeTag::Vector));
      row_values_[ob] = emit(row_load("rowscan0", od), od);
      store_results();
    } else {
      open(loop("r", length, RangeTag::Serial));
      if (lanes > 1) open(loop("q", lanes, RangeTag::Vector));
      for (size_t k = 0; k < grp_.reductions.size(); ++k) {
        const Node& n = g_.nodes[grp_.reductions[k]];
        row_values_[n.outputs[0]] = step(k, value(n.inputs[0], at));
      }
      store_results();
    }
    while (scopes_.size() > 1) close();
  }

  // ---- persistent rows -----------------------------------------------------
  /// Values computed (by a functor) in more than one loop over the row are
  /// computed once: the first loop stores them in a row buffer, later loops
  /// read it. Only the outermost such values are kept. On CUDA every value
  /// several loops need is kept, loads too (the row is then read from memory
  /// once; the buffers are registers, and the compiler drops those no later
  /// loop reads).
  void keep_rows_resident(std::vector<Stmt>& body) {
    const bool cuda = cfg_.target == Target::Cuda;
    for (auto& top : body) {
      if (top.kind != Stmt::Kind::Loop || top.range.var != "o") continue;
      std::vector<Stmt*> row_loops;
      for (auto& s : top.body) {
        if (s.kind == Stmt::Kind::Loop && s.range.var == "r") row_loops.push_back(&s);
        if (s.kind == Stmt::Kind::SplitReduce)  // the loop of a row's threads (CUDA)
          for (auto& b : s.body)
            if (b.kind == Stmt::Kind::Loop && b.range.var == "r") row_loops.push_back(&b);
      }
      std::map<int, std::set<size_t>> loops_of;
      for (size_t l = 0; l < row_loops.size(); ++l)
        for (auto& s : row_loops[l]->body)
          if (s.kind == Stmt::Kind::Let) {
            int id = temp_value_.at(s.name);
            if (values_[id].depends_on_r && (values_[id].computed || cuda)) loops_of[id].insert(l);
          }
      std::vector<int> shared;
      for (auto& [id, ls] : loops_of)
        if (ls.size() > 1) shared.push_back(id);
      std::map<int, const Expr*> expr_of;  // each value's expression (its first Let)
      for (auto* l : row_loops)
        for (auto& s : l->body)
          if (s.kind == Stmt::Kind::Let) expr_of.emplace(temp_value_.at(s.name), s.value.get());
      const std::set<int> shared_set(shared.begin(), shared.end());
      std::vector<int> kept;
      std::set<int> raw;  // kept as float16 / bfloat16 storage bits (CUDA)
      for (int c : shared) {
        const Expr& e = *expr_of.at(c);
        if (cuda) {
          // A value that only widens another kept value (bfloat16 -> float is
          // no instruction at all) is recomputed from it: a second register
          // copy of the row would halve the rows a multiprocessor holds.
          auto half = [](DType t) { return t == DType::Float16 || t == DType::BFloat16; };
          const bool widening =
              e.kind == Expr::Kind::Cast ||
              (e.kind == Expr::Kind::Convert &&
               (e.from == e.dtype ||
                (half(e.from) && (e.dtype == DType::Float32 || e.dtype == DType::Float64)) ||
                (e.from == DType::Float32 && e.dtype == DType::Float64)));
          if (widening && e.operands[0]->kind == Expr::Kind::Temp &&
              shared_set.count(temp_value_.at(e.operands[0]->name)))
            continue;
          // A loaded float16 / bfloat16 row is kept as loaded (half the
          // registers) and converted where it is read, as eager's row kernels do.
          if (e.kind == Expr::Kind::Load && !e.mask && half(e.dtype)) raw.insert(c);
          kept.push_back(c);
          continue;
        }
        bool inner = false;
        for (int d : shared)
          if (d != c && part_of(c, d)) inner = true;
        if (!inner) kept.push_back(c);
      }
      if (kept.empty()) continue;
      // On the CPU, a value the loop that first computes it already stores
      // whole into a row buffer (a prefilled reduction input, rowin) is read
      // from there: no second copy of the row (softmax's exp(x - max)).
      std::map<int, std::string> stored_in;  // value -> row buffer holding it at r
      const IndexExpr r = IndexExpr::var("r", std::max<int64_t>(1, rnumel_));
      std::set<int> seen;
      for (auto* l : cuda ? std::vector<Stmt*>{} : row_loops) {
        for (auto& s : l->body)
          if (s.kind == Stmt::Kind::RowStore && s.value->kind == Expr::Kind::Temp && s.index == r &&
              !seen.count(temp_value_.at(s.value->name)))
            stored_in.emplace(temp_value_.at(s.value->name), s.name);
        for (auto& s : l->body)
          if (s.kind == Stmt::Kind::Let) seen.insert(temp_value_.at(s.name));
      }
      std::map<int, std::string> buffer_of;
      std::vector<Stmt> decls;
      for (size_t k = 0; k < kept.size(); ++k) {
        if (auto in = stored_in.find(kept[k]); in != stored_in.end()) {
          buffer_of[kept[k]] = in->second;
          continue;
        }
        buffer_of[kept[k]] = fmt::format("rowcache{}", k);
        Stmt rb;
        rb.kind = Stmt::Kind::RowBuffer;
        rb.name = buffer_of[kept[k]];
        rb.extent = rnumel_;
        rb.raw = raw.count(kept[k]) > 0;
        decls.push_back(rb);
      }
      std::set<int> stored;
      for (auto* l : row_loops) {
        std::vector<Stmt> out;
        for (auto& s : l->body) {
          int id = s.kind == Stmt::Kind::Let ? temp_value_.at(s.name) : -1;
          auto b = buffer_of.find(id);
          if (b == buffer_of.end()) {
            out.push_back(std::move(s));
            continue;
          }
          for (auto& d : decls)
            if (d.name == b->second) d.dtype = s.dtype;
          const bool first = stored.insert(id).second;
          const bool bits = raw.count(id) > 0;
          if (first && stored_in.count(id)) {
            out.push_back(std::move(s));  // this loop stores it already
          } else if (first && bits) {
            // name[r] = the loaded bits; the value is read back from there.
            Expr load = *s.value;
            load.raw = true;
            Stmt rs;
            rs.kind = Stmt::Kind::RowStore;
            rs.name = b->second;
            rs.index = IndexExpr::var("r", std::max<int64_t>(1, rnumel_));
            rs.value = make(std::move(load));
            out.push_back(std::move(rs));
            s.value = row_load(b->second, s.dtype, /*raw=*/true);
            out.push_back(std::move(s));
          } else if (first) {
            Stmt rs;
            rs.kind = Stmt::Kind::RowStore;
            rs.name = b->second;
            rs.index = IndexExpr::var("r", std::max<int64_t>(1, rnumel_));
            Expr t;
            t.kind = Expr::Kind::Temp;
            t.name = s.name;
            t.dtype = s.dtype;
            rs.value = make(t);
            out.push_back(std::move(s));
            out.push_back(std::move(rs));
          } else {
            s.value = row_load(b->second, s.dtype, bits);
            out.push_back(std::move(s));
          }
        }
        l->body = std::move(out);
      }
      top.body.insert(top.body.begin(), decls.begin(), decls.end());
      if (!cuda) {
        prune_row_loops(row_loops);
        hoist_row_invariants(top.body);
      }
    }
  }

  /// True when row loop `l` holds only Lets, stores and checks (what
  /// prune_row_loops and hoist_row_invariants rearrange).
  static bool flat_row_loop(const Stmt& l) {
    return std::all_of(l.body.begin(), l.body.end(), [](const Stmt& s) {
      return s.kind == Stmt::Kind::Let || s.kind == Stmt::Kind::Store ||
             s.kind == Stmt::Kind::RowStore || s.kind == Stmt::Kind::CheckIndex ||
             s.kind == Stmt::Kind::CheckZero;
    });
  }

  /// Moves the Lets and checks of a row loop that do not depend on the row's
  /// position (an embedding's index, read and checked once per row instead of
  /// once per element: the check's atomic error store kept the loop scalar)
  /// in front of it. Only loops of Lets, stores and checks that run at least
  /// once (a row of at least one element), and only what reads no other
  /// value of the loop that stays in it.
  void hoist_row_invariants(std::vector<Stmt>& body) {
    if (rnumel_ <= 0) return;
    for (size_t i = 0; i < body.size(); ++i) {
      Stmt& l = body[i];
      if (l.kind != Stmt::Kind::Loop || l.range.var != "r") continue;
      if (!flat_row_loop(l)) continue;
      std::set<std::string> in_loop;  // the loop's Lets that stay in it
      for (auto& s : l.body)
        if (s.kind == Stmt::Kind::Let) in_loop.insert(s.name);
      std::vector<bool> hoist(l.body.size(), false);
      size_t count = 0;
      for (size_t k = 0; k < l.body.size(); ++k) {
        const Stmt& s = l.body[k];
        bool invariant = (s.kind == Stmt::Kind::Let || s.kind == Stmt::Kind::CheckIndex ||
                          s.kind == Stmt::Kind::CheckZero) &&
                         !s.mask;
        if (invariant) {
          ValueInfo vi;
          collect(*s.value, vi);
          std::set<std::string> read;
          temps_read(*s.value, read);
          invariant = !vi.depends_on_r;
          for (auto& t : read) invariant &= !in_loop.count(t);
        }
        if (!invariant) continue;
        if (s.kind == Stmt::Kind::Let) in_loop.erase(s.name);
        hoist[k] = true;
        ++count;
      }
      // (Nothing to move, or a loop that would be left empty: as it was.)
      if (count == 0 || count == l.body.size()) continue;
      std::vector<Stmt> hoisted, kept;
      for (size_t k = 0; k < l.body.size(); ++k)
        (hoist[k] ? hoisted : kept).push_back(std::move(l.body[k]));
      l.body = std::move(kept);
      const size_t n = hoisted.size();
      body.insert(body.begin() + static_cast<std::ptrdiff_t>(i),
                  std::make_move_iterator(hoisted.begin()), std::make_move_iterator(hoisted.end()));
      i += n;
    }
  }

  /// The temporaries `index` names (a gather's data-dependent positions).
  void index_temps(const IndexExpr& index, std::set<std::string>& names) const {
    for (auto& v : index.free_vars())
      if (temp_value_.count(v)) names.insert(v);
  }

  /// The temporaries `e` reads (its own, its operands', its indices' gathers).
  void temps_read(const Expr& e, std::set<std::string>& names) const {
    if (e.kind == Expr::Kind::Temp) names.insert(e.name);
    if (e.kind == Expr::Kind::Load || e.kind == Expr::Kind::RowLoad) index_temps(e.index, names);
    if (e.mask) temps_read(*e.mask, names);
    for (auto& o : e.operands) temps_read(*o, names);
  }

  /// What a row kept resident leaves dead in the row's later loops: a check
  /// (an index's range, a divisor) that an earlier loop over the row already
  /// made on the same value, and then the Lets nothing reads (an embedding's
  /// row gathered again, with its index checks, only to be replaced by the
  /// row buffer: the checks' atomic stores kept the loop from vectorizing).
  /// Loops holding other than Lets, stores and checks are left as they are.
  void prune_row_loops(const std::vector<Stmt*>& row_loops) {
    std::set<std::string> checked;
    auto check_key = [&](const Stmt& s) {
      return fmt::format("{}:{}:{}:{}:{}", static_cast<int>(s.kind), key_of(*s.value), s.extent,
                         s.code, s.mask ? key_of(*s.mask) : "");
    };
    for (Stmt* l : row_loops) {
      const bool flat = flat_row_loop(*l);
      std::vector<bool> keep(l->body.size(), true);
      for (size_t i = 0; i < l->body.size(); ++i) {
        const Stmt& s = l->body[i];
        if (s.kind != Stmt::Kind::CheckIndex && s.kind != Stmt::Kind::CheckZero) continue;
        if (!checked.insert(check_key(s)).second && flat) keep[i] = false;
      }
      if (!flat) continue;
      std::set<std::string> read;
      for (size_t i = l->body.size(); i-- > 0;) {
        const Stmt& s = l->body[i];
        if (!keep[i]) continue;
        if (s.kind == Stmt::Kind::Let && !read.count(s.name)) {
          keep[i] = false;
          continue;
        }
        if (s.value) temps_read(*s.value, read);
        if (s.mask) temps_read(*s.mask, read);
        index_temps(s.index, read);
      }
      std::vector<Stmt> out;
      for (size_t i = 0; i < l->body.size(); ++i)
        if (keep[i]) out.push_back(std::move(l->body[i]));
      l->body = std::move(out);
    }
  }

  /// True when value `c` is a part of value `d`.
  bool part_of(int c, int d) const {
    std::vector<int> stack{d};
    std::set<int> seen;
    while (!stack.empty()) {
      int x = stack.back();
      stack.pop_back();
      for (int p : values_[x].parts) {
        if (p == c) return true;
        if (seen.insert(p).second) stack.push_back(p);
      }
    }
    return false;
  }

  const Graph& g_;
  const std::vector<bool>& mat_;
  const KernelGroup& grp_;
  const KernelConfig& cfg_;
  int64_t rnumel_ = 1;
  std::vector<KernelArg> args_;
  std::vector<Scope> scopes_;
  std::map<std::string, int> ids_;
  std::vector<ValueInfo> values_;
  std::map<std::string, int> temp_value_;
  int next_temp_ = 0;
  std::map<int, ExprPtr> row_values_;
  std::set<std::string> ops_;
  std::set<std::string> error_ops_;
  std::vector<Guard> masks_;
};

}  // namespace

KernelDesc build_kernel(const Graph& g, const std::vector<bool>& materialized,
                        const KernelGroup& group, const KernelConfig& config,
                        const std::string& name) {
  Builder b(g, materialized, group, config);
  return b.run(name);
}

}  // namespace smelt::compiler
