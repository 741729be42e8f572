#include "compiler/codegen/kernel_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "core/tensor_impl.h"
#include "ops/op_table.h"
#include "ops/pointwise.h"

namespace smelt::compiler {

namespace {

class Writer {
 public:
  Writer(const Graph& g, const std::vector<bool>& mat, const KernelGroup& grp, const Dialect& d)
      : g_(g), mat_(mat), grp_(grp), d_(d) {
    for (int n : grp.stores) stored_.insert(n);
    body_.indent();
  }

  KernelSource run(const std::string& name) {
    if (grp_.reduction)
      reduction_kernel();
    else
      pointwise_kernel();
    KernelSource ks;
    std::stable_partition(args_.begin(), args_.end(), [](const auto& a) { return !a.second; });
    CodeBuffer head;
    head.line(d_.kernel_signature(name) + " {");
    head.indent();
    for (size_t k = 0; k < args_.size(); ++k) {
      const Buffer& b = g_.buffers[args_[k].first];
      bool write = args_[k].second;
      head.line(fmt::format("{}{}* __restrict__ {} = static_cast<{}{}*>(args[{}]);",
                            write ? "" : "const ", d_.storage_type(b.dtype),
                            ptr_name(args_[k].first, write), write ? "" : "const ",
                            d_.storage_type(b.dtype), k));
    }
    if (!error_ops_.empty())
      head.line(fmt::format("int* smelt_error = static_cast<int*>(args[{}]);", args_.size()));
    ks.source = head.str() + body_.str() + "}\n";
    ks.error_ops = fmt::format("{}", fmt::join(error_ops_, "/"));
    for (auto& [b, w] : args_) (w ? ks.writes : ks.reads).push_back(b);
    ks.ops.assign(ops_.begin(), ops_.end());
    return ks;
  }

 private:
  // ---- arguments, scopes, emission ---------------------------------------
  std::string ptr_name(int buf, bool write) {
    return fmt::format("{}_{}", write ? "out" : "in", g_.buffers[buf].name());
  }
  std::string use_arg(int buf, bool write) {
    for (auto& [b, w] : args_)
      if (b == buf && w == write) return ptr_name(buf, write);
    args_.emplace_back(buf, write);
    return ptr_name(buf, write);
  }
  std::string emit(const std::string& type, const std::string& expr) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(expr);
      if (f != it->end()) return f->second;
    }
    std::string key = canonical(expr);
    std::string v = fmt::format("t{}", next_var_++);
    auto cached = cache_index_.find(key);
    if (loop_id_ >= 0 && cached != cache_index_.end() && cache_first_loop_.at(key) != loop_id_) {
      // Persistent reduction: computed in an earlier loop over this row.
      body_.line(fmt::format("const {} {} = rowcache{}[r];", type, v, cached->second));
    } else {
      body_.line(fmt::format("const {} {} = {};", type, v, expr));
      if (loop_id_ >= 0 && cached != cache_index_.end())
        body_.line(fmt::format("rowcache{}[r] = {};", cached->second, v));
    }
    if (loop_id_ >= 0 && depends_on_r(key) && key.find("smelt::scalar::") != std::string::npos) {
      key_loops_[key].insert(loop_id_);
      key_type_[key] = type;
    }
    canon_[v] = key;
    scopes_.back()[expr] = v;
    return v;
  }

  /// `expr` with every temporary replaced by its own canonical form, so that
  /// the same value computed in two loops has the same key.
  std::string canonical(const std::string& expr) const {
    std::string out;
    for (size_t i = 0; i < expr.size();) {
      bool start = expr[i] == 't' &&
                   (i == 0 ||
                    !(std::isalnum(static_cast<unsigned char>(expr[i - 1])) || expr[i - 1] == '_'));
      size_t j = i + 1;
      while (start && j < expr.size() && std::isdigit(static_cast<unsigned char>(expr[j]))) ++j;
      if (start && j > i + 1 &&
          (j == expr.size() ||
           !(std::isalnum(static_cast<unsigned char>(expr[j])) || expr[j] == '_'))) {
        auto f = canon_.find(expr.substr(i, j - i));
        out += f != canon_.end() ? "(" + f->second + ")" : expr.substr(i, j - i);
        i = j;
      } else {
        out += expr[i++];
      }
    }
    return out;
  }

  static bool depends_on_r(const std::string& k) {
    for (size_t i = 0; i < k.size(); ++i) {
      if (k[i] != 'r') continue;
      bool before =
          i == 0 || !(std::isalnum(static_cast<unsigned char>(k[i - 1])) || k[i - 1] == '_');
      bool after = i + 1 == k.size() ||
                   !(std::isalnum(static_cast<unsigned char>(k[i + 1])) || k[i + 1] == '_');
      if (before && after) return true;
    }
    return false;
  }

 public:
  /// Values computed in more than one loop over the same row (pass 1).
  std::vector<std::pair<std::string, std::string>> row_cache_candidates() const {
    std::vector<std::pair<std::string, std::string>> out;
    for (auto& [k, loops] : key_loops_)
      if (loops.size() > 1) out.emplace_back(k, key_type_.at(k));
    // Keep only the outermost values: a part of a kept value need not be kept.
    std::vector<std::pair<std::string, std::string>> kept;
    for (auto& c : out) {
      bool inner = false;
      for (auto& d : out)
        if (d.first != c.first && d.first.find(c.first) != std::string::npos) inner = true;
      if (!inner) kept.push_back(c);
    }
    return kept;
  }
  void set_row_caches(const std::vector<std::pair<std::string, std::string>>& c,
                      const std::map<std::string, std::set<int>>& loops) {
    for (size_t i = 0; i < c.size(); ++i) {
      cache_index_[c[i].first] = static_cast<int>(i);
      cache_first_loop_[c[i].first] = *loops.at(c[i].first).begin();
    }
    caches_ = c;
  }
  const std::map<std::string, std::set<int>>& key_loops() const { return key_loops_; }
  /// Reductions whose element is expensive to compute (pass 1).
  const std::set<int>& expensive() const { return expensive_; }
  void set_prefill(const std::set<int>& nodes) { prefill_ = nodes; }
  bool persistent = false;

 private:
  void open(const std::string& header) {
    body_.line(header + " {");
    body_.indent();
    scopes_.emplace_back();
  }
  void close() {
    body_.dedent();
    body_.line("}");
    scopes_.pop_back();
  }

  /// Converts a value held as value_type(from) to value_type(to), rounding
  /// through the storage type when `to` is float16/bfloat16 (a cast rounds as
  /// if stored).
  std::string convert(const std::string& v, DType from, DType to) {
    if (to == DType::Bool && from != DType::Bool) return fmt::format("({} != 0)", v);
    if (to == DType::Float16 || to == DType::BFloat16)
      return fmt::format("static_cast<float>({}(static_cast<float>({})))", d_.storage_type(to), v);
    if (from == to) return v;
    return fmt::format("static_cast<{}>({})", d_.value_type(to), v);
  }

  // ---- values --------------------------------------------------------------
  bool computed_here(int buf) const {
    const Buffer& b = g_.buffers[buf];
    if (b.kind != BufferKind::Node) return false;
    const Node& n = g_.nodes[b.producer];
    LoopKind k = classify(n);
    if (k == LoopKind::Pointwise) return !mat_[buf] || stored_.count(b.producer);
    if (k == LoopKind::Reduction)
      return std::find(grp_.reductions.begin(), grp_.reductions.end(), b.producer) !=
             grp_.reductions.end();
    return false;
  }

  std::string operand_value(const Operand& o, const Index& it) {
    if (o.is_scalar()) return d_.literal(*o.scalar, o.dtype);
    if (computed_here(o.buf)) {
      Index p = producer_index(g_.buffers[o.buf].sizes, o, it);
      return buffer_value(o.buf, p);
    }
    std::string ptr = use_arg(o.buf, false);
    std::string load = fmt::format("{}[{}]", ptr, operand_offset(o, it));
    DType t = g_.buffers[o.buf].dtype;
    if (t == DType::Float16 || t == DType::BFloat16)
      load = fmt::format("static_cast<float>({})", load);
    return emit(d_.value_type(t), load);
  }

  std::string buffer_value(int buf, const Index& p) {
    const Buffer& b = g_.buffers[buf];
    const Node& n = g_.nodes[b.producer];
    if (classify(n) == LoopKind::Reduction) return row_value(buf, p);
    return pointwise_value(n, p);
  }

  std::string pointwise_value(const Node& n, const Index& it) {
    ops_.insert(n.op == "to_dtype" ? "convert" : n.op);
    DType out = g_.buffers[n.outputs[0]].dtype;
    if (n.op == "to_dtype" || n.op == "clone") {
      std::string v = operand_value(n.inputs[0], it);
      return emit(d_.value_type(out), convert(v, n.inputs[0].dtype, out));
    }
    SMELT_INTERNAL_ASSERT(n.attrs.has("dtype"), "pointwise node {} has no compute dtype", n.op);
    DType c = n.attrs.as<DType>("dtype");
    detail::PointwiseCall call = detail::pointwise_call(n.op, n.attrs);
    std::vector<std::string> args;
    // Operands go to the compute type's opmath type (float for float16) without
    // rounding, as the eager kernels do.
    for (auto& in : n.inputs) {
      std::string v = operand_value(in, it);
      if (c == DType::Bool && in.dtype != DType::Bool)
        v = fmt::format("({} != 0)", v);
      else if (d_.value_type(in.dtype) != d_.value_type(c))
        v = fmt::format("static_cast<{}>({})", d_.value_type(c), v);
      args.push_back(v);
    }
    for (auto& e : call.extra) args.push_back(d_.literal(e, c));
    // Integer division by zero raises, as eager does: the kernel sets a flag
    // the runtime turns into smelt::Error (nothing is written back then).
    bool int_div =
        detail::runtime_check(n.op, n.attrs) == detail::RuntimeCheck::IntegerDivisionByZero &&
        !is_floating(c) && args.size() >= 2;
    if (int_div) {
      body_.line(
          fmt::format("if ({} == 0) __atomic_store_n(smelt_error, 1, __ATOMIC_RELAXED);", args[1]));
      error_ops_.insert(n.op);
    }
    std::string expr = fmt::format("smelt::scalar::{}<{}>({})", call.functor, d_.value_type(c),
                                   fmt::join(args, ", "));
    const detail::OpDef* def = detail::find_op(n.op);
    bool to_bool =
        def && (def->rule == detail::DTypeRule::Compare || def->rule == detail::DTypeRule::Logical);
    DType result = to_bool ? DType::Bool : c;
    return emit(d_.value_type(out), convert(expr, result, out));
  }

  std::string row_value(int buf, const Index& p) {
    const Buffer& b = g_.buffers[buf];
    auto it = row_values_.find(buf);
    if (it == row_values_.end())
      throw NotFusable(fmt::format("%{} ({}) is read before its reduction completes", buf,
                                   g_.nodes[b.producer].op));
    // The read must be of the current row: non-1 dims walk the kept dims in order.
    std::vector<std::string> want, got;
    for (size_t k = 0; k < row_index_.vars.size(); ++k)
      if (row_index_.shape[k] != 1) want.push_back(row_index_.vars[k]);
    for (size_t k = 0; k < p.vars.size(); ++k)
      if (p.shape[k] != 1) got.push_back(p.vars[k]);
    if (want != got)
      throw NotFusable(fmt::format("%{} ({}) is read at another row than the one reduced", buf,
                                   g_.nodes[b.producer].op));
    return it->second;
  }

  // ---- kernels -------------------------------------------------------------
  static std::vector<std::string> dim_vars(const Shape& shape, const std::string& flat) {
    std::vector<std::string> v(shape.size());
    Shape cs = detail::contiguous_strides(shape);
    int first = -1;
    for (size_t k = 0; k < shape.size(); ++k)
      if (shape[k] != 1 && first < 0) first = static_cast<int>(k);
    for (size_t k = 0; k < shape.size(); ++k) {
      if (shape[k] == 1)
        v[k] = "0";
      else if (static_cast<int>(k) == first)
        v[k] = cs[k] == 1 ? flat : fmt::format("({} / {})", flat, cs[k]);
      else
        v[k] = cs[k] == 1 ? fmt::format("({} % {})", flat, shape[k])
                          : fmt::format("({} / {} % {})", flat, cs[k], shape[k]);
    }
    return v;
  }

  void store(int buf, const std::string& value, const std::string& index) {
    DType t = g_.buffers[buf].dtype;
    std::string ptr = use_arg(buf, true);
    std::string v = value;
    if (t == DType::Float16 || t == DType::BFloat16)
      v = fmt::format("{}({})", d_.storage_type(t), v);
    body_.line(fmt::format("{}[{}] = {};", ptr, index, v));
  }

  void pointwise_kernel() {
    const Shape& s = grp_.shape;
    int64_t n = detail::shape_numel(s);
    for (int node : grp_.stores) {
      const Node& nd = g_.nodes[node];
      if (g_.buffers[nd.outputs[0]].sizes != s)
        throw NotFusable(fmt::format("{} has shape {}, the kernel iterates {}", nd.op,
                                     detail::shape_str(g_.buffers[nd.outputs[0]].sizes),
                                     detail::shape_str(s)));
    }
    scopes_.emplace_back();
    // Rows x columns when there are several rows of a useful length: loads of
    // operands broadcast along rows (a bias) stay contiguous in the inner loop.
    const int64_t last = s.empty() ? 1 : s.back();
    const int64_t rows = last > 0 ? n / last : 0;
    Index it;
    if (s.size() >= 2 && last >= 16 && rows >= 2) {
      open(d_.parallel_for("o", std::to_string(rows), n >= kJitParallelGrain));
      open(fmt::format("for (int64_t j = 0; j < {}; ++j)", last));
      body_.line(fmt::format("const int64_t i = o * {} + j;", last));
      Shape outer(s.begin(), s.end() - 1);
      it = Index{s, dim_vars(outer, "o"), "i"};
      it.vars.push_back("j");
    } else {
      open(d_.parallel_for("i", std::to_string(n), n >= kJitParallelGrain));
      it = Index{s, dim_vars(s, "i"), "i"};
    }
    for (int node : grp_.stores) {
      const Node& nd = g_.nodes[node];
      store(nd.outputs[0], pointwise_value(nd, it), "i");
    }
    while (scopes_.size() > 1) close();
  }

  void reduction_kernel() {
    const Shape& s = grp_.shape;
    Shape kept, red;
    std::vector<bool> is_red(s.size(), false);
    for (auto d : grp_.rdims) is_red[d] = true;
    for (size_t k = 0; k < s.size(); ++k) (is_red[k] ? red : kept).push_back(s[k]);
    int64_t outer = detail::shape_numel(kept), rn = detail::shape_numel(red);
    std::vector<std::string> kv = dim_vars(kept, "o"), rv = dim_vars(red, "r");
    Index full{s, {}, ""};
    bool trailing = true;
    for (size_t k = 0, ki = 0, ri = 0; k < s.size(); ++k) {
      full.vars.push_back(is_red[k] ? rv[ri++] : kv[ki++]);
      if (k + 1 < s.size() && is_red[k] && !is_red[k + 1]) trailing = false;
    }
    if (trailing) full.flat = rn == 1 ? "o" : outer == 1 ? "r" : fmt::format("(o * {} + r)", rn);
    row_index_ = Index{kept, kv, "o"};
    scopes_.emplace_back();
    // Few long rows: split each row across threads; otherwise rows in parallel.
    bool split = outer < kSplitRowsBelow && rn >= kJitParallelGrain;
    bool parallel = !split && outer > 1 && outer * rn >= kJitParallelGrain;
    open(d_.parallel_for("o", std::to_string(outer), parallel));
    for (size_t c = 0; c < caches_.size(); ++c)
      body_.line(fmt::format("alignas(64) {} rowcache{}[{}];", caches_[c].second, c, rn));
    persistent = rn <= kPersistentRow;
    int acc_id = 0;
    for (int node : grp_.reductions) {
      const Node& n = g_.nodes[node];
      ReductionInfo info = reduction_info(g_, n);
      if (info.in_sizes != s || info.dims != grp_.rdims)
        throw NotFusable(fmt::format("{} reduces {} over {}, the kernel {} over {}", n.op,
                                     detail::shape_str(info.in_sizes), detail::shape_str(info.dims),
                                     detail::shape_str(s), detail::shape_str(grp_.rdims)));
      ops_.insert(n.op);
      std::string acc = fmt::format("acc{}", acc_id++);
      std::string ty = fmt::format("smelt::reduce::{}{}", info.accumulator,
                                   (info.accumulator == "Any" || info.accumulator == "All")
                                       ? ""
                                       : "<" + d_.value_type(info.acc_dtype) + ">");
      body_.line(fmt::format("auto {} = {}::init();", acc, ty));
      // One long row (e.g. a reduction over every element): split it across
      // threads, each with its own accumulator, combined in thread order.
      std::string step_acc = acc;
      std::string prefilled_row;
      if (split) {
        body_.line(fmt::format(
            "std::vector<decltype({0})> {0}_part(omp_get_max_threads(), {1}::init());", acc, ty));
        body_.line("#pragma omp parallel");
        open("");
        step_acc = acc + "_local";
        body_.line(fmt::format("auto {} = {}::init();", step_acc, ty));
        open(fmt::format("#pragma omp for schedule(static)\nfor (int64_t r = 0; r < {}; ++r)", rn));
      } else if (prefill_.count(node)) {
        // Persistent row, expensive element (a transcendental): compute the
        // row in its own loop, which vectorizes, then reduce the stored row.
        std::string row = fmt::format("rowin{}", acc_id);
        body_.line(
            fmt::format("alignas(64) {} {}[{}];", d_.value_type(n.inputs[0].dtype), row, rn));
        open(fmt::format("for (int64_t r = 0; r < {}; ++r)", rn));
        loop_id_ = next_loop_++;
        body_.line(fmt::format("{}[r] = {};", row, operand_value(n.inputs[0], full)));
        loop_id_ = -1;
        close();
        open(fmt::format("for (int64_t r = 0; r < {}; ++r)", rn));
        prefilled_row = row + "[r]";
      } else {
        open(fmt::format("for (int64_t r = 0; r < {}; ++r)", rn));
      }
      if (prefilled_row.empty()) loop_id_ = next_loop_++;
      std::string x = prefilled_row.empty() ? operand_value(n.inputs[0], full) : prefilled_row;
      if (prefilled_row.empty() && canon_.count(x) &&
          canon_.at(x).find("smelt::scalar::") != std::string::npos)
        expensive_.insert(node);
      std::string xa = info.acc_dtype == DType::Bool
                           ? fmt::format("({} != 0)", x)
                           : fmt::format("static_cast<{}>({})", d_.value_type(info.acc_dtype), x);
      bool indexed = info.accumulator == "ArgMax" || info.accumulator == "ArgMin";
      body_.line(fmt::format("{} = {}::step({}, {}{});", step_acc, ty, step_acc, xa,
                             indexed ? ", r" : ""));
      loop_id_ = -1;
      close();
      if (split) {
        body_.line(fmt::format("{}_part[omp_get_thread_num()] = {};", acc, step_acc));
        close();
        body_.line(
            fmt::format("for (const auto& p : {0}_part) {0} = {1}::combine({0}, p);", acc, ty));
      }
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        int ob = n.outputs[k];
        DType od = g_.buffers[ob].dtype;
        const std::string& fin = info.finals[k];
        std::string e;
        DType from = info.acc_dtype;
        if (fin == "value")
          e = indexed ? acc + ".value" : fmt::format("{}::finalize({})", ty, acc);
        else if (fin == "index") {
          e = acc + ".index";
          from = DType::Int64;
        } else if (fin == "mean" && info.accumulator == "Sum")
          e = fmt::format("smelt::reduce::mean_finalize({}, INT64_C({}))", acc, rn);
        else if (fin == "mean")
          e = fmt::format("{}::mean({})", ty, acc);
        else if (fin == "var")
          e = fmt::format("{}::var({}, {:.17g})", ty, acc, info.correction);
        else if (fin == "std")
          e = fmt::format("std::sqrt({}::var({}, {:.17g}))", ty, acc, info.correction);
        std::string v = emit(d_.value_type(od), convert(e, from, od));
        row_values_[ob] = v;
        if (mat_[ob]) store(ob, v, "o");
      }
    }
    // Pointwise consumers of the reductions: per row, or over the whole row again.
    std::vector<int> row_stores, full_stores;
    for (int node : grp_.stores) {
      const Shape& os = g_.buffers[g_.nodes[node].outputs[0]].sizes;
      if (os == s)
        full_stores.push_back(node);
      else if (detail::shape_numel(os) == outer)
        row_stores.push_back(node);
      else
        throw NotFusable(fmt::format("{} of shape {} is neither a row nor the domain {}",
                                     g_.nodes[node].op, detail::shape_str(os),
                                     detail::shape_str(s)));
    }
    for (int node : row_stores) {
      const Node& n = g_.nodes[node];
      const Shape& os = g_.buffers[n.outputs[0]].sizes;
      Index it{os, {}, "o"};
      // Map the row index onto this shape (kept dims in order, 1s elsewhere).
      size_t ki = 0;
      for (auto d : os) {
        if (d == 1)
          it.vars.push_back("0");
        else {
          while (ki < kept.size() && kept[ki] == 1) ++ki;
          if (ki >= kept.size() || kept[ki] != d)
            throw NotFusable(fmt::format("{} of shape {} does not follow the kept dims {}", n.op,
                                         detail::shape_str(os), detail::shape_str(kept)));
          it.vars.push_back(kv[ki++]);
        }
      }
      store(n.outputs[0], pointwise_value(n, it), "o");
    }
    if (!full_stores.empty()) {
      open(d_.parallel_for("r", std::to_string(rn), split));
      loop_id_ = next_loop_++;
      std::string flat = full.flat;
      if (flat.empty()) {
        Shape cs = detail::contiguous_strides(s);
        std::vector<std::string> parts;
        for (size_t k = 0; k < s.size(); ++k)
          if (s[k] != 1) parts.push_back(fmt::format("{}*{}", full.vars[k], cs[k]));
        flat = parts.empty() ? "0" : fmt::format("({})", fmt::join(parts, " + "));
      }
      for (int node : full_stores) {
        const Node& n = g_.nodes[node];
        store(n.outputs[0], pointwise_value(n, full), flat);
      }
      loop_id_ = -1;
      close();
    }
    close();
  }

  const Graph& g_;
  const std::vector<bool>& mat_;
  const KernelGroup& grp_;
  const Dialect& d_;
  std::set<int> stored_;
  std::vector<std::pair<int, bool>> args_;
  std::vector<std::map<std::string, std::string>> scopes_;
  std::map<int, std::string> row_values_;
  Index row_index_;
  CodeBuffer body_;
  int next_var_ = 0;
  int loop_id_ = -1, next_loop_ = 0;
  std::map<std::string, std::string> canon_;
  std::map<std::string, std::set<int>> key_loops_;
  std::map<std::string, std::string> key_type_;
  std::map<std::string, int> cache_index_, cache_first_loop_;
  std::vector<std::pair<std::string, std::string>> caches_;
  std::set<int> expensive_, prefill_;
  std::set<std::string> ops_;
  std::set<std::string> error_ops_;
};

}  // namespace

KernelSource generate_kernel(const Graph& g, const std::vector<bool>& materialized,
                             const KernelGroup& group, const std::string& name,
                             const Dialect& dialect) {
  if (!group.reduction) {
    Writer w(g, materialized, group, dialect);
    return w.run(name);
  }
  // Pass 1 finds the values several loops over one row need; pass 2 keeps
  // them in a row-local buffer when the row fits (a persistent reduction).
  Writer probe(g, materialized, group, dialect);
  probe.run(name);
  Writer w(g, materialized, group, dialect);
  auto caches = probe.row_cache_candidates();
  if (probe.persistent && !caches.empty()) w.set_row_caches(caches, probe.key_loops());
  if (probe.persistent) w.set_prefill(probe.expensive());
  KernelSource ks = w.run(name);
  ks.persistent = probe.persistent;
  return ks;
}

}  // namespace smelt::compiler
